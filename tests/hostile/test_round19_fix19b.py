"""Round 19, fix 19b: a SIGTERM inside the probe's flush; a diff's copy of vLLM's op
registrations (the other CustomOp, new names); a segment renamed to another process."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import forensics

PROBE_TESTS = Path(__file__).parents[1] / "probe"

# ------------------------------------- 1. a SIGTERM while the engine's thread is in a flush

FLUSHING_CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from forensics.probe import plugin
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    sys.path.insert(0, sys.argv[3])
    from probe_fakes import record_batch_changes

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=1000, handoff="batch", writer=sys.argv[2]))
    real = ProbeSession.take_ready

    def take_ready(self, wait, upto=None):
        ProbeSession.take_ready = real  # this flush only
        print("flushing", flush=True)
        sys.stdin.readline()  # the parent's SIGTERM arrives here, inside the flush
        return real(self, wait, upto)

    record_batch_changes(session, [[0, 1], [1, 0], [0, 0]])
    ProbeSession.take_ready = take_ready
    session.flush(wait=True)
    print("went on", flush=True)  # the process must have died of SIGTERM before this
""")


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_sigterm_inside_a_flush_closes_the_session_once_the_flush_ends(
        tmp_path: Path, writer: str) -> None:
    """An engine process (SIGTERM at its default action) whose main thread is inside one of
    the probe's flushes when SIGTERM comes: the handler must not re-enter the flush, and it
    returned early, re-raising SIGTERM: the process died in the flush, its records unwritten
    and no ``probe_stop`` (the capture reads as "died"). The close now waits for the flush to
    end, then closes (every record, ``probe_stop``) and the process dies of SIGTERM."""
    capture = tmp_path / "child.capture"
    child = subprocess.Popen([sys.executable, "-c", FLUSHING_CHILD, str(capture), writer,
                              str(PROBE_TESTS)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "flushing"
        child.send_signal(signal.SIGTERM)  # a real signal, from another process
        child.stdin.write("go\n")
        child.stdin.flush()
        rest = child.stdout.read()
        code = child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert code == -signal.SIGTERM and "went on" not in rest
    loaded = forensics.load(capture)
    assert [r.step for r in loaded] == [0, 1, 2]
    assert [e["kind"] for e in loaded.events].count("probe_stop") == 1


def test_a_sigterm_inside_a_flush_calls_the_engine_handler_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's own SIGTERM handler (a graceful shutdown) is called once the flush it came
    in ends, not inside it (where a handler that raises would leave the flush half done), and
    once; the records are all written and the probe goes on recording."""
    import os

    from forensics.probe import plugin
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import Settings

    monkeypatch.syspath_prepend(str(PROBE_TESTS))
    from probe_fakes import record_batch_changes

    seen: list[bool] = []
    original = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(
        plugin.session() is not None and plugin.session().busy))
    capture = tmp_path / "in.capture"
    try:
        session = plugin.start(Settings(directory=tmp_path, capture=capture, ring=64,
                                        flush_every=1000, handoff="batch", writer="thread"))
        real = ProbeSession.take_ready
        sent: list[int] = []

        def take_ready(self: ProbeSession, wait: bool, upto: int | None = None) -> list:
            if not sent:  # handled in this thread, inside the flush
                sent.append(signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGTERM)
            return real(self, wait, upto)

        record_batch_changes(session, [[0, 1], [1, 0]])
        monkeypatch.setattr(ProbeSession, "take_ready", take_ready)
        session.flush(wait=True)
        assert seen == [False]
        record_batch_changes(session, [[0, 0]])
    finally:
        plugin.stop()
        signal.signal(signal.SIGTERM, original)
    assert [r.step for r in forensics.load(capture)] == [0, 1, 2]


# ------------------------------------- 2. a diff's copy registering vLLM's layers and ops

DATA = Path(__file__).resolve().parents[2] / "data"
INCIDENT_B = DATA / "incident-b-vocab-sentinel.capture"
EMBEDDING_FILE = "model_executor/layers/vocab_parallel_embedding.py"
#: the tensor-parallel-1 lookup of the installed embedding
LOOKUP = "return self.quant_method.embedding(self, input_.long())"
#: the installed embedding's last import, where a diff below adds its own code
LAST_IMPORT = "from vllm.platforms import current_platform\n"


def _embedding_diff(path: Path, *changes: tuple[str, str]) -> str:
    """Write a unified diff of the installed ``vocab_parallel_embedding.py`` with each
    ``(old, new)`` of ``changes`` made, to ``path``; return the variant naming it."""
    import difflib

    from forensics.variants.vllm_diff import vllm_root

    text = (vllm_root() / "vllm" / EMBEDDING_FILE).read_text(encoding="utf-8")
    new = text
    for old, replacement in changes:
        assert old in new
        new = new.replace(old, replacement, 1)
    path.write_text("".join(difflib.unified_diff(
        text.splitlines(True), new.splitlines(True), f"a/vllm/{EMBEDDING_FILE}",
        f"b/vllm/{EMBEDDING_FILE}")), encoding="utf-8")
    return f"vllm+{path}"


def _embedding_statuses(variants: list[str]) -> dict[str, list[str]]:
    """Incident B's embedding outcome statuses under each of ``variants``."""
    from forensics.replaying import replay

    out = replay(INCIDENT_B, variants).outcomes
    return {v: list(out[(out["variant"] == v) & (out["site"] == "embedding")]["status"])
            for v in variants}


def test_a_layer_name_new_to_vllm_leaves_with_the_diffs_copy(tmp_path: Path) -> None:
    """A diff's copy that registers a layer under a name vLLM does not hold
    (``PluggableLayer.register("forensics_t108b_layer")``) left it in vLLM's ``op_registry``
    for the rest of the process: a later replay, variant or the installed vLLM's config check
    (``custom_ops``) read the diff's class under it. The registry is as it was after the copy
    is loaded; a second diff registering the same name loads and runs too."""
    from vllm.model_executor import custom_op

    layer = ("@PluggableLayer.register(\"forensics_t108b_layer\")\n"
             "class ForensicsT108bLayer(PluggableLayer):\n    WHICH = {}\n\n\n")
    first = _embedding_diff(tmp_path / "first.diff", (
        "@PluggableLayer.register(\"vocab_parallel_embedding\")\n",
        layer.format(1) + "@PluggableLayer.register(\"vocab_parallel_embedding\")\n"))
    second = _embedding_diff(tmp_path / "second.diff", (
        "@PluggableLayer.register(\"vocab_parallel_embedding\")\n",
        layer.format(2) + "@PluggableLayer.register(\"vocab_parallel_embedding\")\n"))
    installed = _embedding_statuses(["vllm"])["vllm"]
    registered = dict(custom_op.op_registry)
    statuses = _embedding_statuses(["vllm", first, second])
    assert statuses == {"vllm": installed, first: installed, second: installed}
    assert custom_op.op_registry == registered
    assert "forensics_t108b_layer" not in custom_op.op_registry


def _op_diff(path: Path, body: str) -> str:
    """A diff of the embedding whose lookup passes the ids through a custom op of its own,
    ``vllm::forensics_t108c_ids`` (``body``: the op's one line), registered by vLLM's
    ``direct_register_custom_op``; the variant naming it."""
    op = (LAST_IMPORT + "from vllm.utils.torch_utils import direct_register_custom_op\n\n\n"
          "def forensics_t108c_ids(ids: torch.Tensor, upper: int) -> torch.Tensor:\n"
          f"    {body}\n\n\n"
          "direct_register_custom_op(\"forensics_t108c_ids\", forensics_t108c_ids)\n")
    call = LOOKUP.replace("input_.long()", "torch.ops.vllm.forensics_t108c_ids("
                          "input_.long(), self.weight.shape[0] - 1)")
    return _embedding_diff(path, (LAST_IMPORT, op), (LOOKUP, call))


def test_a_custom_op_new_to_vllm_is_never_another_diffs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two diffs whose copies register a custom op of one name vLLM does not define (one op
    clamps the ids into the table, the other passes them on): the second copy's registration
    was taken for the installed vLLM's and skipped, so its lookup ran the FIRST diff's op:
    incident B's out-of-range id replayed as ``ok`` under the diff that passes it on, whose
    verdict must be the installed one (``index_error``). One process holds one op of a name:
    the second diff is refused in one line naming both diffs and the op; exit 2. Alone (in a
    command of its own) each replays as its op says."""
    from forensics.cli import main

    clamp = _op_diff(tmp_path / "clamp.diff", "return ids.clamp(0, upper)")
    passes = _op_diff(tmp_path / "passes.diff", "return ids.clone()")
    installed = _embedding_statuses(["vllm"])["vllm"]
    assert "index_error" in installed
    assert _embedding_statuses([clamp])[clamp] == ["ok"] * len(installed)
    code = main(["replay", str(INCIDENT_B), "--variant", "vllm", "--variant", passes])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "vllm::forensics_t108c_ids" in err and "passes.diff" in err and "clamp.diff" in err


def test_a_layer_of_the_hw_agnostic_registry_keeps_the_installed_one(tmp_path: Path) -> None:
    """vLLM 0.33 has a second ``CustomOp`` (``vllm.model_executor.hw_agnostic.custom_op``,
    its own ``register`` and registry), whose ``register`` was left as vLLM's: a diff's copy
    registering through it a name the installed vLLM holds there (``rms_norm``, of its
    ``layers.layernorm``) failed to import ("AssertionError: Duplicate op name: rms_norm; fix
    the diff") of a diff that is fine. It keeps the installed layer now, and the registry is
    as it was after."""
    import vllm.model_executor.hw_agnostic.layers.layernorm  # noqa: F401  (rms_norm)
    from vllm.model_executor.hw_agnostic import custom_op as hw

    layer = ("from vllm.model_executor.hw_agnostic.custom_op import CustomOp as HwOp\n"
             "import vllm.model_executor.hw_agnostic.layers.layernorm  # noqa: F401\n\n\n"
             "@HwOp.register(\"rms_norm\")\n"
             "class ForensicsT108aNorm(HwOp):\n    pass\n")
    diff = _embedding_diff(tmp_path / "hw.diff", (LAST_IMPORT, LAST_IMPORT + layer))
    installed = _embedding_statuses(["vllm"])["vllm"]
    registered = dict(hw.op_registry)
    assert _embedding_statuses([diff])[diff] == installed
    assert hw.op_registry == registered and "rms_norm" in registered


# ------------------------------------- 3. a segment renamed to another process


@pytest.mark.parametrize("command", ["inspect", "replay"])
def test_a_segment_renamed_to_another_process_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """A segment's schema states the site, rank and process that wrote it; the reader held
    the site and rank to the file name, not the process: a segment renamed from ``w0`` to
    ``w1`` (its index with it) had its records read as process ``w1``'s (a died process's own
    steps, T98e, are read by process). It is refused in one line naming the file, what its
    schema says and that the file name disagrees, as a renamed site or rank is; exit 2."""
    import numpy as np

    from forensics.cli import main
    from forensics.records import Record
    from forensics.store.writer import write_capture

    capture = write_capture(tmp_path / "c.capture",
                            [Record("embedding", 0, 0, {"input_ids": np.arange(3),
                                                        "num_embeddings": 4})])
    (segment,) = capture.glob("*.arrows")
    process = segment.name.split(".")[2]  # site.rank.process.seq.arrows
    renamed = segment.with_name(segment.name.replace(f".{process}.", ".w1."))
    segment.rename(renamed)
    segment.with_name(segment.name + ".idx").rename(renamed.with_name(renamed.name + ".idx"))
    assert main([command, str(capture)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and renamed.name in err, err
    assert f"process '{process}'; the file name disagrees" in err, err
