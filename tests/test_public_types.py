"""The public API is typed for type checkers: mypy over a small user script sees each function
exported by ``forensics`` with its real signature (not ``Any``) and rejects a wrong argument,
and a ``Site`` built from functions of the wrong signature."""

from __future__ import annotations

from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]
USER_SCRIPT = '''
import forensics

reveal_type(forensics.replay)
reveal_type(forensics.load)
reveal_type(forensics.simulate)
reveal_type(forensics.shrink)
reveal_type(forensics.redact)
reveal_type(forensics.findings_table)
reveal_type(forensics.first_violation)
reveal_type(forensics.summary_by_site)
reveal_type(forensics.plots.plot_bounds_timeline)
result = forensics.replay(forensics.load("x.capture"), variants=["upstream"])
reveal_type(result)
reveal_type(result.verdicts)
forensics.replay(42)
forensics.shrink([], "out.capture")
from forensics.sites import Site
Site(name="x", fields=(), output_fields=(), summary_bound="b", summary_tensor="t",
     run_batch=len, checks=len)
'''
#: a fragment of what mypy must reveal for each line above, in order
EXPECTED = [
    "def (capture: forensics.store.reader.Capture | str | os.PathLike[str] | "
    "typing.Iterable[forensics.records.Record], variants: ",
    "def (path: str | os.PathLike[str], mapped: bool =) -> forensics.store.reader.Capture",
    "def (scenario: str | forensics.simulator.scenarios.Scenario, ",
    "def (capture: forensics.store.reader.Capture | str | os.PathLike[str], "
    "out: ",
    "def (capture: forensics.store.reader.Capture | str | os.PathLike[str], "
    "out: ",
    "def (result: forensics.replaying.ReplayResult, ",
    "def (result: forensics.replaying.ReplayResult, ",
    "def (result: forensics.replaying.ReplayResult) -> ",
    "def (result: ",
    "forensics.replaying.ReplayResult",
    "dict[str, dict[str, str]]",
]


def test_mypy_sees_the_typed_public_api(tmp_path: Path) -> None:
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    out, err, _ = api.run([str(script), "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary"])
    lines = out.splitlines()
    revealed = [line.split('Revealed type is "', 1)[1] for line in lines if "Revealed" in line]
    assert len(revealed) == len(EXPECTED), out + err
    for got, want in zip(revealed, EXPECTED, strict=True):
        assert want in got and not got.startswith("Any"), (got, want)
    errors = [line for line in lines if ": error:" in line]
    assert len(errors) == 4, out
    assert 'Argument 1 to "replay" has incompatible type "int"' in errors[0]
    assert 'Argument 1 to "shrink" has incompatible type "list[Never]"' in errors[1]
    for error, name in zip(errors[2:], ("run_batch", "checks"), strict=True):
        assert f'Argument "{name}" to "Site" has incompatible type' in error  # typed operations
