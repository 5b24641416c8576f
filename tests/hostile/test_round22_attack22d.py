"""Hostile input, round 22 (attack 22d): recorded kernel launches replayed by ``forensics
kernels``, and the tensor files ``import`` reads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

# ------------------------- T135a: a replay on zeros judges none of the live launch's accesses


def _replayed_on_zeros(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       capsys: pytest.CaptureFixture[str], contents: str) -> str:
    """``kernels``' text of one launch whose ``idx_mapping_ptr`` was recorded with
    ``contents`` (``none``: zeros in the replay), replayed clean by a stand-in worker."""
    from test_round4_kernels import launch, write_capture

    from forensics.cli import main
    from forensics.kernels import sanitizer

    event = launch()
    if contents == "none":
        del event["tensors"]["idx_mapping_ptr"]["data"]
        event["tensors"]["idx_mapping_ptr"].update(contents="none", reason="past the budget")
    note = "live against replay not judged: the contents of idx_mapping_ptr were not recorded"
    monkeypatch.setattr(sanitizer.Worker, "ask", lambda self, event, most=0.0: {
        "status": "replayed", "reason": note if contents == "none" else "", "accesses": [],
        "overflows": [], "differs": []})
    capture = write_capture(tmp_path / f"{contents}.capture", [event])
    assert main(["kernels", str(capture)]) == 0
    return capsys.readouterr().out


def test_a_clean_replay_on_zeros_says_the_live_accesses_were_not_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A launch whose ``idx_mapping_ptr`` was recorded without its contents (an integer
    storage past what one event line holds) is replayed on zeros in its place: the addresses
    it reads through them are not the live launch's. Such a replay finding nothing was "1
    replayed, 0 finding(s)", its one note "live against replay not judged": read as a launch
    whose accesses were in bounds, an index of 2**20 rows past its table included. Its line
    says the live launch's out-of-bounds accesses and wraps were not judged, and why; a
    launch recorded whole says nothing of it."""
    out = _replayed_on_zeros(tmp_path, monkeypatch, capsys, "none")
    assert "replayed, but: _prepare_pos_seq_lens_kernel at step 0 rank 0 launch 0: live " \
           "against replay not judged: the contents of idx_mapping_ptr were not recorded; " \
           "the live launch's out-of-bounds accesses and int32 wraps not judged: the replay " \
           "ran on zeros in place of the contents of idx_mapping_ptr (not recorded), whose " \
           "values may choose its addresses, masks and operands\n" in out, out
    whole = _replayed_on_zeros(tmp_path, monkeypatch, capsys, "storage")
    assert "replayed, but" not in whole and "1 replayed, 0 finding(s)" in whole, whole


# ------------------------------- T135b: inspect says the kernel launches a capture holds


def test_inspect_says_the_kernel_launches_a_capture_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture holding recorded kernel launches and no records (the flight recorder's only)
    was "0 records ... events: 0" in ``inspect``, its ``--json`` holding no word of them and
    ``not_judged`` empty: read as a capture holding nothing, where ``replay`` and ``check`` name
    the launches. The text says how many it holds and what judges them; the JSON counts them
    (0 for a capture of none)."""
    import json

    from test_round4_kernels import launch, write_capture

    from forensics.cli import main

    capture = write_capture(tmp_path / "k.capture", [launch(), launch(step=1)])
    assert main(["inspect", str(capture)]) == 0
    out = capsys.readouterr().out
    assert "events: 0\nkernel launches: 2 recorded (not among the events; no variant judges " \
           "them: `forensics kernels` replays them)\n" in out, out
    assert main(["inspect", str(capture), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kernel_launches"] == 2
    none = write_capture(tmp_path / "none.capture", [])
    assert main(["inspect", str(none)]) == 0
    assert "kernel launches" not in capsys.readouterr().out


# ------------------------- T135c: a UTF-16 log of text mostly not ASCII is refused, not lost

BANNER = "".join("启动日志：引擎配置与调度信息" * 25 + "\n" for _ in range(6))


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le"])
def test_a_wide_log_of_text_mostly_not_ascii_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str) -> None:
    """A vLLM crash log in UTF-16 without a byte-order mark whose first 4 KiB are a banner in
    Chinese has no NUL beside nearly every character, so T39s's test passed it: read as UTF-8
    it was imported as "0 records (none), 0 events", exit 0, its crash dump lost. Its line
    feeds, each a whole UTF-16 code unit, show the encoding: refused in one line naming it and
    the iconv that converts it, nothing written; the same log in UTF-8 is imported as before."""
    from forensics.cli import main

    text = BANNER + (Path(__file__).parents[1] / "data" /
                     "vllm_dump_some_placeholder.log").read_text(encoding="utf-8")
    wide = tmp_path / "wide.log"
    wide.write_bytes(text.encode(encoding))
    assert main(["import", str(wide), "-o", str(tmp_path / "w.capture")]) == 2
    err = capsys.readouterr().err
    name = encoding.upper().replace("-LE", "LE").replace("-BE", "BE")
    assert f"looks like {name} text without a byte-order mark" in err and \
        f"iconv -f {name} -t UTF-8" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "w.capture").exists()
    plain = tmp_path / "plain.log"
    plain.write_text(text, encoding="utf-8")
    assert main(["import", str(plain), "-o", str(tmp_path / "p.capture")]) == 0
    assert "1 events" in capsys.readouterr().out


# ------------------------- T135d: UTF-16 or UTF-32 text appended to a UTF-8 log is refused


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le"])
def test_wide_text_appended_to_a_utf8_log_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str) -> None:
    """A UTF-8 log to which a crash's lines were appended in UTF-16 (PowerShell's ``>>``):
    its first 4 KiB are UTF-8, so T39s's test passed it, and the crash dump's lines, read as
    UTF-8, matched nothing: "0 records (none), 0 events", exit 0. The first wide line is
    refused in one line naming the log, the line, the encoding and the iconv, nothing
    written; a hole of NULs after the text is still read as before."""
    from forensics.cli import main

    text = (Path(__file__).parents[1] / "data" /
            "vllm_dump_some_placeholder.log").read_text(encoding="utf-8")
    mixed = tmp_path / "mixed.log"
    mixed.write_bytes(b"INFO 12-07 10:00:00 starting the engine\n" * 200 + text.encode(encoding))
    assert main(["import", str(mixed), "-o", str(tmp_path / "m.capture")]) == 2
    err = capsys.readouterr().err
    name = encoding.upper().replace("-LE", "LE").replace("-BE", "BE")
    assert f"mixed.log' line 201 looks like {name} text" in err and \
        f"iconv -f {name} -t UTF-8" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m.capture").exists()
    hole = tmp_path / "hole.log"
    hole.write_bytes(text.encode() + bytes(5000) + b"\nINFO after the hole\n")
    assert main(["import", str(hole), "-o", str(tmp_path / "h.capture")]) == 0
    assert "1 events" in capsys.readouterr().out
