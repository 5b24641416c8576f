"""A finding's bad value in words: where it is held, what it indexes and its bound
(``what_happened``), the sentence every output that describes a finding is built on."""

from __future__ import annotations

from typing import Any

from forensics.escaping import terminal
from forensics.judge.origins import is_raised
from forensics.sites.core import OUT_OF_BOUNDS, ROW_OF


def what_happened(f: dict[str, Any]) -> str:
    """The bad value of a finding, where it is held and what it indexes: ``"`prev_positions[3]
    = 4` indexes `valid_sampled_token_count` (4 elements): a stale previous row"``. ``T[i] =
    v`` is written only where ``T[i]`` holds ``v`` (the finding's ``held``); a finding without
    these keys (an older table) says ``tensor[element] = value``; an ``IndexError`` of real
    code that no access explains says so (:func:`raised_text`). A message: its values through
    :func:`~forensics.escaping.terminal`, so it goes out through ``inert``."""
    if "index_tensor" in f and is_raised(f):
        return raised_text(f)
    if f.get("kind") != OUT_OF_BOUNDS or "index_tensor" not in f:
        tensor = f["tensor"] if f.get("element") is None else f"{f['tensor']}[{f['element']}]"
        text = f"{terminal(tensor)} = {terminal(f['value'])}"
        if f.get("lower") is not None or f.get("upper") is not None:
            text += f", outside [{_bound(f.get('lower'))}, {_bound(f.get('upper'))})"
        return text
    text = f"{_holder(f)} {_target(f)}"
    kind = _value_kind(f)
    return f"{text}: {kind}" if kind else text


def raised_text(f: dict[str, Any]) -> str:
    """``"vLLM raised IndexError at this record (index 4, size 4)"``: a real-code finding that
    no declared access of the site explains (the code that raised it, and what it said)."""
    variant = str(f.get("variant") or "")
    who = "vLLM" if variant.startswith("vllm") else (f"variant {terminal(variant)}" if variant
                                                     else "the code")
    text = f"{who} raised IndexError at this record"
    if f.get("value") is not None:
        size = "" if f.get("upper") is None else f", size {terminal(f['upper'])}"
        text += f" (index {terminal(f['value'])}{size}); no access of the site explains it"
    return text


def _holder(f: dict[str, Any]) -> str:
    """Where the bad value is: ``"`T[i] = v`"`` when ``T[i]`` holds it, else the index used
    and what it is computed from, or ``"value v"``."""
    tensor, at, value = (None if f.get(k) is None else terminal(f[k])
                         for k in ("index_tensor", "index_at", "value"))
    if f.get("held") and tensor is not None and at is not None:
        return f"`{tensor}[{at}] = {value}`"
    if tensor is not None and at is not None:
        return f"index {value}, computed from `{tensor}[{at}]`,"
    if tensor is not None:
        return f"value {value} of `{tensor}`"
    return f"index {value}"


def _target(f: dict[str, Any]) -> str:
    """What the value indexes and its bound: ``"indexes `T` (4 elements)"``, ``"is outside
    the vocabulary (248320 ids)"``."""
    indexed, lower, upper = f.get("indexed"), f.get("lower"), f.get("upper")
    if upper is None:
        span = "unknown size" if lower is None else f"valid from {lower}, size unknown"
    elif lower not in (0, None):
        span = f"valid [{lower}, {upper})"
    else:
        unit = _unit(f)
        span = f"{upper} {unit[:-1] if upper == 1 else unit}"
    if indexed in ("vocabulary", "embedding rows"):
        return f"is outside the {indexed} ({span})"
    if indexed is None:
        return f"is outside its range ({span})"
    if indexed.startswith(ROW_OF):
        return f"indexes a row of `{terminal(indexed[len(ROW_OF):])}` ({span})"
    return f"indexes `{terminal(indexed)}` ({span})"


def _unit(f: dict[str, Any]) -> str:
    """What the bound counts: ids, embedding rows, rows of a 2-D field of the site (indexed by
    row) or elements."""
    indexed = f.get("indexed")
    if indexed == "vocabulary":
        return "ids"
    if indexed == "embedding rows":
        return "rows"
    from forensics.sites import SITES, get_site

    if f.get("site") in SITES:
        spec = next((s for s in get_site(f["site"]).fields if s.name == indexed), None)
        if spec is not None and spec.ndim == 2:
            return "rows"
    return "elements"


def _value_kind(f: dict[str, Any]) -> str:
    """The value class as words: ``"a -1 placeholder"``, ``"the vocab_size sentinel"``,
    ``"negative"``, ``"past the end by 2"``, ``"a stale previous row"``; ``""`` unknown."""
    vclass, value, upper = f.get("value_class"), f.get("value"), f.get("upper")
    if vclass == "past_end" and value is not None and upper is not None:
        return f"past the end by {value - upper + 1}"
    return {"placeholder": "a -1 placeholder", "vocab_size": "the vocab_size sentinel",
            "negative": "negative", "stale_row": "a stale previous row"}.get(vclass or "", "")


def _bound(value: Any) -> str:
    """A finding's bound as text ("unknown" when the record states none)."""
    return "unknown" if value is None else str(value)
