"""forensics.redact: token ids permuted in range only, request ids pseudonymised, private
manifest and event fields gone from every byte of the output, the same evidence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from share_cases import (
    FAULT_SCENARIOS,
    HOST,
    MODEL_PATH,
    NOTE,
    private_capture,
    tree_digest,
)

import forensics
from forensics.share.evidence import differences, evidence_of
from forensics.share.redaction import (
    REQUEST_FIELDS,
    cyclic_permutation,
    redact,
    token_domain,
    token_fields,
)
from forensics.sites import SITES, get_site

#: the token-id fields of each built-in site, as vLLM holds them (each site's schema flags them)
TOKEN_FIELDS: dict[str, tuple[str, ...]] = {
    "batch_change": (),
    "prepare_input_ids": ("prev_sampled_token_ids", "input_ids", "input_ids_device",
                          "draft_token_ids"),
    "async_output": ("sampled_token_ids_cpu", "output_token_ids", "output_tail"),
    "embedding": ("input_ids",),
}

SLOW = settings(max_examples=3, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _flat(value: object) -> np.ndarray:
    if isinstance(value, list):
        return np.array([x for row in value for x in row], dtype=np.int64)
    return np.asarray(value, dtype=np.int64).ravel()


def _pairs(src: Path, out: Path) -> list[tuple[forensics.Record, forensics.Record]]:
    original, redacted = list(forensics.load(src)), list(forensics.load(out))
    assert [(r.site, r.step, r.rank) for r in original] == [
        (r.site, r.step, r.rank) for r in redacted]
    return list(zip(original, redacted, strict=True))


def _check_tokens(pairs: list[tuple[forensics.Record, forensics.Record]], domain: int) -> None:
    mapping: dict[int, int] = {}
    for old, new in pairs:
        tokens = {*token_fields(old.site), *(f"{f}_after" for f in token_fields(old.site))}
        for name in old.fields:
            if name in tokens:
                a, b = _flat(old[name]), _flat(new[name])
                inside = (a > 0) & (a < domain)  # token 0 stays, as vLLM's clamp writes it
                assert np.all(b[inside] != a[inside]), (old.site, old.step, name)
                assert np.all(b[inside] < domain) and np.all(b[inside] >= 0)
                assert np.array_equal(b[~inside], a[~inside])  # -1, bounds, out of range
                for x, y in zip(a[inside].tolist(), b[inside].tolist(), strict=True):
                    assert mapping.setdefault(x, y) == y  # the same id -> the same id
            elif name.removesuffix("_after") not in REQUEST_FIELDS:
                assert np.array_equal(np.asarray(old[name]), np.asarray(new[name])), name
    assert len(set(mapping.values())) == len(mapping)  # a permutation: no two ids merge


def _check_requests(pairs: list[tuple[forensics.Record, forensics.Record]]) -> set[str]:
    names: dict[str, str] = {}
    for old, new in pairs:
        for field in REQUEST_FIELDS:
            if field in old.fields:
                a, b = old[field], new[field]
                a, b = (list(a), list(b)) if isinstance(a, dict) else (a, b)
                for x, y in zip(a, b, strict=True):
                    if x is not None:
                        assert names.setdefault(x, y) == y and y != x
    assert len(set(names.values())) == len(names)
    return set(names)


def _bytes_of(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


@pytest.mark.parametrize("name", [*FAULT_SCENARIOS, "clean"])
@given(seed=st.integers(0, 2**16), fault_step=st.integers(2, 20))
@SLOW
def test_redact_keeps_the_evidence_and_removes_what_is_private(
        name: str, seed: int, fault_step: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("redact")
    src = private_capture(root / "src.capture", name, seed, fault_step)
    before = tree_digest(src)
    result = redact(src, root / "shareable.capture")

    # the same evidence: verdicts, first findings (a substituted token's id is permuted by
    # design, so differences() compares its kind and place), crash verdict
    assert differences(evidence_of(forensics.replay(src)),
                       evidence_of(forensics.replay(result.path))) == []
    pairs = _pairs(src, result.path)
    assert result.token_domain == token_domain(forensics.load(src)) == 32000
    _check_tokens(pairs, result.token_domain)
    request_ids = _check_requests(pairs)
    blob = _bytes_of(result.path)
    for secret in [*request_ids, HOST, MODEL_PATH, NOTE, "424242", "secret-llama"]:
        assert secret.encode() not in blob, secret
    manifest = forensics.load(result.path).manifest
    assert manifest["redaction"]["redacted"] is True
    assert "process.host" in manifest["redaction"]["dropped"]
    assert tree_digest(src) == before


def test_keep_manifest_keeps_the_named_fields_only(tmp_path: Path) -> None:
    src = private_capture(tmp_path / "src.capture", "vocab-sentinel", 3, 8)
    out = redact(src, tmp_path / "out.capture", keep_manifest=["model.name", "events.message"])
    cap = forensics.load(out.path)
    assert cap.manifest["model"]["name"] == "secret-llama-70b"
    assert "host" not in cap.manifest["process"] and "model" not in cap.manifest["model"]
    assert cap.manifest["redaction"]["kept_on_request"] == ["events.message", "model.name"]
    assert [e["message"] for e in cap.events] == [
        f"EngineDeadError in {MODEL_PATH}/model.py on {HOST}"]
    assert "host" not in cap.events[0]


def test_the_permutation_is_one_cycle_and_depends_on_the_key() -> None:
    a, b = cyclic_permutation(1000, b"k" * 32), cyclic_permutation(1000, b"j" * 32)
    assert sorted(a.tolist()) == list(range(1000)) and not np.any(a == np.arange(1000))
    seen, x = set(), 0
    while x not in seen:
        seen.add(x)
        x = int(a[x])
    assert len(seen) == 1000
    assert not np.array_equal(a, b)


def test_the_domain_is_the_smallest_token_bound() -> None:
    records = [forensics.Record("embedding", 0, 0, {"input_ids": np.array([5]),
                                                    "num_embeddings": 100}),
               forensics.Record("async_output", 0, 0, {"vocab_size": 90})]
    assert token_domain(records) == 90


def test_every_site_flags_its_token_fields() -> None:
    for site in SITES:
        flagged = {spec.name for spec in get_site(site).fields if spec.token_ids}
        assert flagged == set(TOKEN_FIELDS.get(site, flagged)), site
        assert get_site(site).token_fields == {*flagged, *(
            f"{name}_after" for name in flagged & set(get_site(site).output_fields))}, site


def test_redact_keeps_public_error_text_without_paths_hosts_and_ids(tmp_path: Path) -> None:
    from forensics.importers import import_sources
    from forensics.present.capture_facts import capture_facts, facts_sentence

    log = Path(__file__).parent / "data" / "sm70_engine.log"
    (tmp_path / "engine.log").write_text(
        # the rank-1 line of another model (rows=1000) left out: bounds that disagree refuse
        "".join(line for line in log.read_text().splitlines(keepends=True)
                if "rows=1000" not in line)
        + "(EngineCore_DP0 pid=4242) RuntimeError: device-side assert "
        "triggered for req-7f3a on gpu-node-17.corp.x at 10.1.2.3 in /home/alice/run.sh\n")
    src = import_sources([tmp_path / "engine.log"], tmp_path / "src.capture")
    out = redact(src, tmp_path / "out.capture").path
    events = forensics.load(out).events
    first = events[0]
    assert first["detail"] == "srcIndex < srcSelectDimSize"
    assert first["location"] == "Indexing.cu:1515" and first["function"] == "indexSelectSmallIndex"
    assert "indexSelectSmallIndex" in first["message"] and "/pytorch" not in first["message"]
    messages = " | ".join(e["message"] for e in events)
    assert "torch.AcceleratorError: CUDA error: an illegal memory access" in messages
    # the EngineDeadError line is the report of the crash before it (T120a): its public text
    # is kept in that crash's engine_dead, as an event's message is
    reports = [e["engine_dead"]["message"] for e in events if "engine_dead" in e]
    assert len(reports) == 1
    assert "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered" in reports[0]
    assert "RuntimeError: device-side assert triggered for <id> on <host> at <ip> in <path>" \
        in messages and "pid=<id>" in messages
    blob = _bytes_of(out)
    for private in (b"alice", b"10.1.2.3", b"req-7f3a", b"gpu-node-17", b"sm70_engine",
                    b"/pytorch/aten"):
        assert private not in blob, private
    sentence = facts_sentence(capture_facts(forensics.load(out)))
    assert "srcIndex < srcSelectDimSize" in sentence and ": ." not in sentence, sentence
