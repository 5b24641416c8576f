"""forensics schema: what ``forensics import`` reads for each site (fields, kinds, shapes,
dtypes, required or not), from the site schema; ``--markdown`` writes docs/import-format.md."""

from __future__ import annotations

import argparse
import json

EXAMPLE = """example:
  forensics schema embedding
  forensics schema --json | jq '.[].site'
  forensics schema --markdown > docs/import-format.md"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare SITE... and the output formats."""
    parser.add_argument("sites", nargs="*", metavar="SITE",
                        help="sites to show (default: every registered site)")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print the formats as JSON")
    form.add_argument("--markdown", action="store_true",
                      help="print the docs page (docs/import-format.md)")


def run(args: argparse.Namespace) -> int:
    """Print the import format of the sites. Returns 0; an unknown site is exit 2."""
    from forensics.importers.format import as_markdown, as_text, formats

    data = formats(args.sites or None)
    if args.json:
        print(json.dumps(data, indent=2))
    elif args.markdown:
        print(as_markdown(data), end="")
    else:
        print(as_text(data))
    return 0
