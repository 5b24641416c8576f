"""Draw one figure of a capture's replay and save it (PNG, SVG or PDF by the file's suffix).

Kinds: timeline (per step, the smallest and largest index used against its bound), heatmap
(batch rows x steps, coloured by how far past the bound), histogram (values near the bound,
sentinels -1 and vocab_size annotated), verdicts (site x variant), or all of them from one
replay: --kind all -o FIG.png writes FIG-timeline.png, FIG-heatmap.png, FIG-histogram.png and
FIG-verdicts.png; several kinds (--kind timeline --kind heatmap, or --kind timeline,heatmap)
share one replay the same way. Without --site, the site of the variant's first violation is
drawn (else a suspect site, else the embedding sink).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from forensics.atomic import real_output, refuse_inside_captures, user_path
from forensics.errors import ConfigurationError
from forensics.escaping import terminal
from forensics.quiet import quietly

KINDS = ("timeline", "heatmap", "histogram", "verdicts")
SUFFIXES = (".png", ".svg", ".pdf")

EXAMPLE = """example:
  forensics plot data/incident-b-vocab-sentinel.capture -o timeline.png
  forensics plot my.capture -o heat.png --kind heatmap --site prepare_input_ids --variant patched
  forensics plot my.capture -o verdicts.svg --kind verdicts
  forensics plot my.capture -o figs/my.png --kind all     # figs/my-timeline.png, ...
  forensics plot my.capture -o my.png --kind timeline,heatmap  # my-timeline.png, my-heatmap.png"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``forensics plot``."""
    from forensics.commands._numbers import Number
    from forensics.present.style import MAX_DPI, MIN_DPI

    parser.add_argument("capture", help="a NAME.capture directory")
    parser.add_argument("-o", "--output", required=True, metavar="FIGURE.png",
                        help="the image to write (.png, .svg or .pdf)")
    parser.add_argument("--kind", action="append", type=_kinds, default=None,
                        metavar="KIND", help=f"the view to draw: {', '.join(KINDS)} or all; "
                        "repeatable or comma-separated, one replay for all (default: timeline)")
    parser.add_argument("--site", default=None, help="the site to draw")
    parser.add_argument("--variant", default=None,
                        help="the variant to draw (default: upstream); replayed with upstream "
                             "and patched")
    parser.add_argument("--dpi", type=Number("--dpi", MIN_DPI, MAX_DPI, "a resolution", 120),
                        default=120,
                        help=f"resolution of a PNG, {MIN_DPI} to {MAX_DPI} (default 120)")


def _kinds(text: str) -> list[str]:
    """The kinds named by one --kind value (``all`` or a comma-separated list of KINDS)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in (*KINDS, "all"):
            raise argparse.ArgumentTypeError(
                f"unknown kind {name!r}; choose among {', '.join(KINDS)} or all")
    if not names:
        raise argparse.ArgumentTypeError(f"no kind named; choose among {', '.join(KINDS)} or all")
    return names


def _variants(variant: str | None) -> list[str]:
    base = ["upstream", "patched"]
    return base if variant is None or variant in base else [*base, variant]


@quietly
def run(args: argparse.Namespace) -> int:
    """Replay the capture, draw the figure, save it; print its path; return 0."""
    import forensics
    from forensics.present import plots
    from forensics.present.selection import check_site_name

    out = user_path(args.output)
    if out.suffix.lower() not in SUFFIXES:
        raise ConfigurationError(f"-o {args.output!r}: unknown image type {out.suffix!r}; "
                                 f"expected a file ending in one of {list(SUFFIXES)}")
    refuse_inside_captures(out, [args.capture])
    real_output(out)  # a link planted on its way is refused before the replay, not after
    figures = figure_paths(out, args.kind or [["timeline"]])
    for _, path in figures:  # before the replay, not after it
        if path.is_dir():
            raise ConfigurationError(f"-o '{terminal(path)}' is a directory; give the image file "
                                     f"to write, e.g. '{terminal(path / 'figure.png')}'")
    capture = forensics.load(args.capture)
    if args.site is not None and args.site not in capture.sites:
        check_site_name(args.site, list(capture.sites), str(args.capture),
                        capture.unknown_sites)
    result = forensics.replay(capture, variants=_variants(args.variant))
    for kind, path in figures:
        ax = plots.plot(result, kind, site=args.site, variant=args.variant)
        plots.save(ax, path, dpi=args.dpi)
        print(terminal(path))  # a name made of a capture's (a script's -o) is inert
    return 0


def figure_paths(out: Path, kinds: str | list[str] | list[list[str]]) -> list[tuple[str, Path]]:
    """``[(kind, path)]`` to draw: ``out`` itself for one kind, ``STEM-<kind>SUFFIX`` for several
    or ``all``. ``kinds``: one kind, or the --kind values (each a kind or a list of them)."""
    named = [kinds] if isinstance(kinds, str) else kinds
    flat = [k for item in named for k in ([item] if isinstance(item, str) else item)]
    chosen = list(KINDS) if "all" in flat else list(dict.fromkeys(flat))
    if len(chosen) == 1 and "all" not in flat:
        return [(chosen[0], out)]
    return [(k, out.with_name(f"{out.stem}-{k}{out.suffix}")) for k in chosen]
