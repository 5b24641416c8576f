"""What a view reads from a replay result: the capture's and the variants' names, the site and
the variant it draws (checked against the result), and the rows of ``bounds`` and ``findings``
of one (site, variant), with the tensors drawn together on one value axis.

Every view of :mod:`forensics.present.scene` starts here; the result is a
:class:`~forensics.replaying.ReplayResult` or any object with the same attributes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from forensics.errors import UnknownSiteError, UnknownVariantError
from forensics.escaping import terminal
from forensics.sites import SINK, SITES, get_site


def capture_name(result: Any) -> str:
    """The capture's name as shown in titles (a Capture's ``.name``, a path's stem, or str), as
    inert text (:func:`forensics.escaping.terminal`: a matplotlib SVG keeps a title in an XML
    comment, where a control character or a noncharacter would break the file)."""
    capture = getattr(result, "capture", None)
    name = getattr(capture, "name", capture)
    text = str(name) if name is not None else "capture"
    return terminal(text.removesuffix(".capture"))


def variant_names(result: Any) -> list[str]:
    """The result's variant names, in replay order."""
    return [str(getattr(v, "name", v)) for v in getattr(result, "variants", [])]


def title_text(result: Any, site: str, variant: str, what: str) -> str:
    """A view's title: the capture, the site and the variant, then ``what`` it shows."""
    return f"{capture_name(result)} · {site} · {variant}\n{what}"


#: the most characters of a title's lines on what no variant judged, and their width
UNJUDGED_TITLE, UNJUDGED_WIDTH = 320, 80


def unjudged_title(result: Any, title: str) -> str:
    """``title`` and, where the capture of ``result`` held what no variant judged
    (:func:`~forensics.store.unjudged.unjudged_of`: records never written, events left out,
    files cut short, sites not known, what a redaction could not keep), lines of at most
    :data:`UNJUDGED_WIDTH` characters naming it ("not judged: ..."): the verdict matrix' and
    the timeline's titles, whose view does not reach it."""
    import textwrap

    from forensics.escaping import capped
    from forensics.store.unjudged import unjudged_of, unjudged_text

    unjudged = unjudged_text(unjudged_of(getattr(result, "capture", None)))
    if not unjudged:
        return title
    lines = textwrap.wrap(f"not judged: {capped(unjudged, UNJUDGED_TITLE)}", UNJUDGED_WIDTH)
    return "\n".join([title, *lines])


def chosen_variant(result: Any, variant: str | None) -> str:
    """The variant a view draws: ``variant`` checked against the result, default ``upstream``
    (or the first variant replayed)."""
    names = variant_names(result)
    if variant is None:
        return "upstream" if "upstream" in names or not names else names[0]
    if variant not in names:
        raise UnknownVariantError(
            f"variant {variant!r} is not in the replay of {capture_name(result)!r}; "
            f"expected one of {names}; replay with variants=[..., {variant!r}]")
    return variant


def result_sites(result: Any) -> list[str]:
    """Sites present in the result (from its verdicts), in pipeline order."""
    present: set[str] = set()
    for per_site in (getattr(result, "verdicts", None) or {}).values():
        present.update(per_site)
    for frame in (bounds_of(result), findings_of(result)):
        if frame is not None and len(frame):
            present.update(frame["site"].astype(str))
    return [s for s in SITES if s in present] + sorted(present - set(SITES))


def check_site_name(site: str, present: Sequence[str], capture: str = "the capture",
                    not_installed: Mapping[str, int] | None = None) -> str:
    """Return ``site`` when it is a known site present in the capture. ``not_installed``:
    site -> records the capture holds of sites this install does not know.

    Raises:
        UnknownSiteError: an unknown site (listing every site; one the capture holds records
            of: saying so, and that the plugin declaring it is not installed) or one without
            records (listing the sites present).
    """
    if site not in SITES:
        if not_installed and site in not_installed:
            raise UnknownSiteError(
                f"site {terminal(site)!r} is not known to this install, and capture "
                f"'{terminal(capture)}' holds {not_installed[site]} record(s) of it: the plugin "
                f"that declares it is not installed; install it (a package with a "
                f"'forensics.sites' entry point naming {terminal(site)!r}) and run again")
        get_site(site)  # raises UnknownSiteError listing the valid sites
    if present and site not in present:
        raise UnknownSiteError(f"site {site!r} has no records in {capture!r}; "
                               f"expected one of {list(present)}")
    return site


def chosen_site(result: Any, site: str | None, variant: str) -> str:
    """The site a view draws: ``site`` checked against the result, default the first site with
    a finding of ``variant`` (see :func:`_default_site`)."""
    present = result_sites(result)
    if site is None:
        return _default_site(result, variant, present)
    return check_site_name(site, present, capture_name(result),
                           getattr(getattr(result, "capture", None), "unknown_sites", None))


def _default_site(result: Any, variant: str, present: list[str]) -> str:
    """The first site (pipeline order) with an out-of-bounds finding of the variant, else with a
    misattributed one (a suspect site, so a soak's only finding is pictured), else the sink,
    else the first."""
    findings = findings_of(result)
    if findings is not None and len(findings):
        for kind in ("out_of_bounds", "misattributed"):
            bad = findings[(findings["variant"] == variant) & (findings["kind"] == kind)]
            for site in present:
                if (bad["site"] == site).any():
                    return site
    if SINK in present:
        return SINK
    return present[0] if present else SINK


def findings_of(result: Any) -> pd.DataFrame | None:
    """The result's findings table (None without one)."""
    frame = getattr(result, "findings", None)
    return frame if isinstance(frame, pd.DataFrame) else None


def bounds_of(result: Any) -> pd.DataFrame | None:
    """The result's bounds table (None without one)."""
    frame = getattr(result, "bounds", None)
    return frame if isinstance(frame, pd.DataFrame) else None


#: the range of a step, row, value or bound a view reads (numpy's int64)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: the largest magnitude up to which a float64 holds every integer: an axis of values past it
#: is drawn relative to an origin of its own (:func:`axis_origin`), with exact tick labels
EXACT_FLOAT = 2**53


def _whole(value: Any) -> int | None:
    """``value`` as an exact Python int (None unless a whole number within int64, or text of
    one)."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            try:
                value = float(value)
            except ValueError:
                return None
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value) or not float(value).is_integer():
            return None
        value = int(value)
    if isinstance(value, (int, np.integer)) and INT64_MIN <= int(value) <= INT64_MAX:
        return int(value)
    return None


def exact_ints(values: Any) -> pd.Series:
    """``values`` (a Series or a sequence) as exact integers, pandas ``Int64`` (NA where not a
    whole number within int64). Never through float64: it holds no integer past 2**53, so
    step 2**62 + 1 read as 2**62 and its finding was named and judged at its neighbour."""
    series = values if isinstance(values, pd.Series) else pd.Series(list(values), dtype=object)
    if pd.api.types.is_signed_integer_dtype(series.dtype):
        return series.astype("Int64")
    whole = [_whole(v) for v in series.to_numpy(dtype=object)]
    return pd.Series(pd.array(whole, dtype="Int64"), index=series.index, name=series.name)


def exact_coords(values: Any) -> list[Any]:
    """``values`` to draw at where their drawn data must stay exact (an SVG's ``data-x``): a
    whole number as a Python int (past 2**53 too), anything else as :func:`coords` gives it
    (NaN where NA)."""
    drawn = coords(values).tolist()
    return [int(w) if w is not pd.NA else d for w, d in zip(exact_ints(values), drawn,
                                                             strict=True)]


def coords(values: Any) -> np.ndarray:
    """``values`` as float64 coordinates to draw (NaN where NA): the last step of a drawing,
    never for a label, a lookup or a comparison (float64 holds no integer past 2**53)."""
    if isinstance(values, pd.Series):
        return values.to_numpy(dtype="float64", na_value=np.nan)
    return np.asarray(values, dtype="float64")


def axis_origin(values: pd.Series) -> int:
    """The value an axis of the exact integers ``values`` is drawn from: 0 while float64 holds
    them all (:data:`EXACT_FLOAT`), else the smallest (positions relative to it stay exact
    while the values span no more than 2**53)."""
    known = exact_ints(values).dropna()
    if not len(known):
        return 0
    lo, hi = int(known.min()), int(known.max())
    return lo if max(-lo, hi) > EXACT_FLOAT and hi - lo <= INT64_MAX else 0


def value_origin(values: pd.Series) -> int | None:
    """The origin of an axis of the exact integers ``values`` that labels its ticks with
    :func:`round_ticks`: None while float64 holds them all (:data:`EXACT_FLOAT`: the
    renderer's own ticks are exact), else :func:`axis_origin` (0 when they span more than
    int64: drawn as they are, each label still an exact integer)."""
    known = exact_ints(values).dropna()
    if not len(known) or max(-int(known.min()), int(known.max())) <= EXACT_FLOAT:
        return None
    return axis_origin(known)


def round_ticks(lo: float, hi: float, origin: int, most: int = 6) -> list[tuple[float, str]]:
    """(position, label) of the ticks of an axis drawn relative to ``origin`` over ``[lo, hi]``
    (positions): at most ``most`` round whole numbers (1, 2 or 5 x 10^k apart, counted from 0,
    not from ``origin``), each labelled with the exact integer it stands at (Python ints: never
    the rounded digits of a float past 2**53); none past int64 (no step, value or bound holds
    one)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    first = max(origin + math.ceil(min(lo, hi)), INT64_MIN)
    last = min(origin + math.floor(max(lo, hi)), INT64_MAX)
    if last < first:
        return []
    step = _round_step(last - first, most)
    start = -(-first // step) * step
    return [(float(v - origin), str(v)) for v in range(start, last + 1, step)]


def _round_step(span: int, most: int) -> int:
    """The least of 1, 2 or 5 x 10^k (whole) that covers ``span`` in ``most - 1`` steps."""
    raw = max(1, -(-span // max(most - 1, 1)))
    scale = 10 ** (len(str(raw)) - 1)
    return next(m * scale for m in (1, 2, 5, 10) if m * scale >= raw)


def _numeric(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """A copy of ``frame`` with ``columns`` as exact integers (:func:`exact_ints`; NA where
    not one; a column the frame lacks, as the empty table of a capture of no records does,
    added empty)."""
    frame = frame.copy()
    for column in columns:
        values = frame[column] if column in frame else pd.Series(None, index=frame.index,
                                                                 dtype=object)
        frame[column] = exact_ints(values)
    return frame


def rows_of(frame: pd.DataFrame | None, site: str, variant: str) -> pd.DataFrame:
    """The rows of ``frame`` (bounds or findings) of (site, variant); empty without any."""
    if frame is None or not len(frame):
        return pd.DataFrame()
    return frame[(frame["site"] == site) & (frame["variant"] == variant)]


def out_of_bounds(result: Any, site: str, variant: str) -> pd.DataFrame:
    """The out-of-bounds findings of (site, variant), with step, value and bounds as exact
    integers (:func:`exact_ints`)."""
    frame = rows_of(findings_of(result), site, variant)
    if not len(frame):
        return frame
    frame = frame[frame["kind"] == "out_of_bounds"]
    return _numeric(frame, ["step", "value", "lower", "upper"])


def bounds_frame(result: Any, site: str, variant: str) -> tuple[pd.DataFrame, bool]:
    """The bounds rows of (site, variant) with step, extremes and bounds as exact integers
    (:func:`exact_ints`), and whether they are complete.

    Without ``result.bounds`` the rows are rebuilt from the out-of-bounds findings (one row per
    offending element) and the flag is False: in-range values are then unknown.
    """
    bounds = bounds_of(result)
    if bounds is not None:
        frame = rows_of(bounds, site, variant)
        return _numeric(frame, ["step", "min", "max", "lower", "upper"]), True
    oob = out_of_bounds(result, site, variant)
    frame = pd.DataFrame({"step": oob.get("step", []), "tensor": oob.get("tensor", []),
                          "min": oob.get("value", []), "max": oob.get("value", []),
                          "lower": oob.get("lower", []), "upper": oob.get("upper", [])})
    return _numeric(frame, ["step", "min", "max", "lower", "upper"]), False


def is_id_tensor(site: str, tensor: str) -> bool:
    """Whether the values checked for ``tensor`` are token ids (else they are row indices):
    produced values (``out.<field>``) and the embedding's ``input_ids``."""
    return tensor.startswith("out.") or (site == SINK and tensor == "input_ids")


def value_unit(site: str, tensors: Sequence[str]) -> str:
    """The unit of the values of ``tensors`` at ``site``: token id, row index, or both."""
    ids = [t for t in tensors if is_id_tensor(site, t)]
    if not tensors:
        return "token id" if site == SINK else "index"
    if len(ids) == len(tensors):
        return "token id"
    return "row index / token id" if ids else "row index"


TensorChoice = str | Sequence[str] | None


def pick_tensors(frame: pd.DataFrame, scale: float = 100.0) -> tuple[list[str], list[str]]:
    """Split a site's checked tensors into those drawn together and those on another scale.

    The reference is the tensor of the earliest violation (else the one with the largest
    bound); tensors whose largest bound is within ``scale`` times the reference's are drawn,
    so row indices (bounds of a few rows) and token ids (bounds of the vocabulary) are not
    squeezed onto one axis. Returns (drawn, omitted), each sorted.
    """
    if not len(frame):
        return [], []
    frame = frame.assign(tensor=frame["tensor"].astype(str))
    upper = frame.groupby("tensor")["upper"].max().fillna(1).clip(lower=1)
    bad = frame[(frame["max"] >= frame["upper"]) | (frame["min"] < frame["lower"])]
    reference = (bad.sort_values("step")["tensor"].iloc[0] if len(bad)
                 else upper.idxmax())
    ratio = np.maximum(upper / upper[reference], upper[reference] / upper)
    drawn = sorted(t for t in upper.index if ratio[t] <= scale)
    return drawn, sorted(set(upper.index) - set(drawn))


def tensors_to_draw(frame: pd.DataFrame, tensor: TensorChoice) -> tuple[list[str], list[str]]:
    """(tensors to draw, tensors left out) for a ``tensor`` argument."""
    if tensor is None:
        return pick_tensors(frame)
    wanted = [tensor] if isinstance(tensor, str) else list(tensor)
    present = set(frame["tensor"].astype(str)) if len(frame) else set()
    return sorted(t for t in wanted if t in present), sorted(present - set(wanted))


def choose_tensors(result: Any, site: str, variants: Sequence[str]) -> list[str]:
    """The tensors to draw for ``site`` in every panel: those :func:`pick_tensors` chooses for
    the first of ``variants`` with a violation there (else for the first variant)."""
    frames = [bounds_frame(result, site, v)[0] for v in variants]
    for frame in frames:
        if len(frame) and ((frame["max"] >= frame["upper"])
                           | (frame["min"] < frame["lower"])).any():
            return pick_tensors(frame)[0]
    return pick_tensors(frames[0])[0] if frames else []


def check_kind(kind: object, kinds: Sequence[str]) -> None:
    """Raise ConfigurationError (a ValueError) naming the argument ``kind`` and its choices
    where ``kind`` is not one of ``kinds``: the one line every painter's view says."""
    if kind not in kinds:
        from forensics.errors import ConfigurationError

        shown = terminal(repr(kind))[:60]
        raise ConfigurationError(f"kind={shown} is no plot kind; give kind= one of "
                                 f"{list(kinds)}")


def side_by_side_choice(result: Any, kind: str, site: str | None,
                        variants: Sequence[str] | None, kinds: Sequence[str],
                        options: dict[str, Any]) -> tuple[list[str], str, dict[str, Any]]:
    """What a side-by-side view of ``kind`` draws, as either painter draws it: the variants
    (default: all replayed), the site, and each panel's options (the tensors shared by the
    panels except on heatmaps, whose grids span every variant's steps and rows).

    Raises:
        ConfigurationError: ``kind`` is not one of ``kinds`` (:func:`check_kind`).
    """
    check_kind(kind, kinds)
    names = list(variants) if variants is not None else variant_names(result)
    names = names or [chosen_variant(result, None)]
    site = site or chosen_site(result, None, chosen_variant(result, names[0]))
    options = dict(options)
    if kind == "heatmap":
        options["align"] = names
    elif options.get("tensor") is None:
        options["tensor"] = choose_tensors(result, site, names)
    return names, site, options
