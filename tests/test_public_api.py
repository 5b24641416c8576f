"""The public API: every name of ``forensics.__all__`` resolves, what the README and the
notebooks use included (each lazy name is imported from the module ``forensics._LAZY`` names)."""

from __future__ import annotations

import pytest

import forensics


@pytest.mark.parametrize("name", forensics.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(forensics, name) is not None


def test_the_names_the_readme_and_the_notebooks_use_are_public() -> None:
    used = {"load", "replay", "findings_table", "summary_by_site", "plots", "simulate", "shrink",
            "redact", "open_many", "conclude", "next_steps", "display_frame", "findings_details",
            "grouped_findings", "styled", "show_header", "import_sources", "scan",
            "embedding_guard"}
    assert used <= set(forensics.__all__), sorted(used - set(forensics.__all__))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        forensics.nonexistent  # noqa: B018
