"""``forensics repro``: a standalone pytest file a vLLM maintainer can run without this package.

The capture is replayed through the installed vLLM's real code (the ``vllm`` variant); for each
site it leaves out of range, the first failing record is written inline as literals, with the
smallest stand-ins the real function needs on CPU (the same ones
:mod:`forensics.variants.vllm_adapters` uses), the call of that function, and an assertion of
the out-of-range access: an ``IndexError`` from the call, or an output outside its bound. The
test fails on the unpatched code and passes once a fix keeps the index in range. The file
imports only torch, vllm and pytest.

Every string from the capture reaches the file through ``repr`` (a Python literal), never as
code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.errors import ConfigurationError

if TYPE_CHECKING:
    from forensics.api_types import CaptureArg
    from forensics.records import Record


HEADER = '''"""Reproducer of an out-of-range index in vLLM (`forensics repro` of {capture!r}).

Run it with the vLLM under test installed: `pytest {name}`. Each test calls vLLM's own
function on CPU with one captured record (inline below) and the smallest stand-ins the function
reads; it fails while the index leaves its range and passes once a fix keeps it in range.
Needs only torch, vllm and pytest.
"""

import pytest
import torch


class NS:
    """A plain object holding the attributes a vLLM method reads (a stand-in)."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def real(function):
    """The plain function behind a torch.compile wrapper."""
    return getattr(function, "_torchdynamo_orig_callable", function)


def outside(values, lower, upper, allowed=()):
    """(position, value) of every value outside [lower, upper), but the ``allowed`` ones."""
    return [(i, v) for i, v in enumerate(values) if not lower <= v < upper and v not in allowed]
'''



def reproducible_sites() -> list[str]:
    """The sites whose module declares a repro (``Site.repro``), in pipeline order."""
    from forensics.sites import SITES, get_site

    return [name for name in SITES if get_site(name).repro is not None]


def failing_records(capture: CaptureArg) -> list[tuple[Record, dict[str, Any]]]:
    """The first record of each site the installed vLLM's real code leaves out of range, with
    its first finding, in pipeline order. The real code says only that an index left its
    range; where the ``upstream`` model names the tensor and element on the same record, that
    finding is the one returned (its ``real_code`` key: the real code's finding).

    Raises MissingDependencyError / UnsupportedVersionError without a supported vLLM.
    """
    import forensics
    from forensics.present.tables import findings_table
    from forensics.sites import site_order
    from forensics.variants.vllm_adapters import require_vllm

    require_vllm()
    result = forensics.replay(capture, variants=["vllm", "upstream"])
    table = findings_table(result)
    table = table[(table["kind"] == "out_of_bounds") & table["site"].isin(reproducible_sites())]
    chosen = []
    for _, rows in table[table["variant"] == "vllm"].groupby("site", sort=False):
        first = _plain(rows.sort_values(["step", "rank"]).iloc[0].to_dict())
        chosen.append((result.records[int(first["record"])],
                       _named(table, first) or first))
    return sorted(chosen, key=lambda pair: site_order(pair[0].site))


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A table row as a finding: plain Python values, empty cells as None."""
    from forensics.judge.findings import to_python

    return {key: to_python(value) for key, value in row.items()}


def _named(table: Any, real: dict[str, Any]) -> dict[str, Any] | None:
    """The ``upstream`` model's first finding on the record of ``real`` that names the tensor
    holding the bad index, with ``real`` under ``real_code``; None when there is none."""
    same = table[(table["variant"] == "upstream") & (table["record"] == real["record"])]
    if "index_tensor" not in same.columns:
        return None
    same = same[same["index_tensor"].notna()]
    if not len(same):
        return None
    return {**_plain(same.iloc[0].to_dict()), "real_code": real}


def literal(value: Any) -> str:
    """``value`` (a field of a record) as a Python expression using only torch."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return f"torch.tensor({value.tolist()!r}, dtype=torch.{value.dtype.name})"
    if isinstance(value, (np.integer, np.bool_)):
        return repr(value.item())
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return repr([v.tolist() if isinstance(v, np.ndarray) else v for v in value])
    return repr(value)


def test_source(record: Record, finding: dict[str, Any]) -> str:
    """One test function: the record inline, the stand-ins, the call and the assertion; its
    comment says what the replay found (:func:`forensics.present.conclusion.what_happened`)."""
    from forensics.escaping import terminal
    from forensics.present.conclusion import what_happened
    from forensics.sites import get_site

    fields = ",\n".join(f"        {name!r}: {literal(value)}"
                        for name, value in record.fields.items()
                        if not name.endswith("_after"))
    where = "the installed vLLM's call: " + terminal(what_happened(finding))  # one line
    if "real_code" in finding:
        where = ("the installed vLLM's call leaves an index out of range; in the upstream "
                 f"model, {terminal(what_happened(finding))}")
    function, call = get_site(record.site).repro or ("", "")
    real = finding.get("real_code", finding)  # the bound the real call is held to
    body = call.format(lower=int(real["lower"] or 0), upper=int(real["upper"]))
    return (f"\n\ndef test_{record.site}_step_{record.step}_rank_{record.rank}():\n"
            f"    # {function}: {where}\n"
            f"    r = {{\n{fields},\n    }}\n{body}")


def write_repro(capture: CaptureArg, out: str | os.PathLike[str], *,
                force: bool = False) -> Path:
    """Write the reproducer of ``capture`` at ``out`` (see the module docstring).

    Raises:
        ConfigurationError: the installed vLLM finds nothing out of range in the capture, or
            ``out`` exists without ``force``.
        MissingDependencyError / UnsupportedVersionError: no supported vLLM is installed.
    """
    target = Path(out)
    if target.exists() and not force:
        raise ConfigurationError(f"'{target}' exists; pass --force to replace it")
    chosen = failing_records(capture)
    if not chosen:
        raise ConfigurationError(
            f"the installed vLLM's code leaves no index out of range in '{capture}'; nothing "
            "to reproduce (a model-only finding is not reproducible on the real code)")
    name = Path(str(getattr(capture, "path", capture))).name
    text = HEADER.format(capture=name, name=target.name)
    text += "".join(test_source(record, finding) for record, finding in chosen)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return target
