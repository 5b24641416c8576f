"""Hostile input, round 4, on ``expected.json`` (T25e): ``forensics check`` and the pytest
plugin list every site whose verdict differs, one line each, so an ``expected.json`` naming
100,000 invented sites, or one site of 100,000 characters, made as many lines or one line that
long. The file's shape is now held to what a real one holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.errors import CaptureFormatError
from forensics.share.evidence import MAX_NAME, MAX_SITES, MAX_VARIANTS, check_json

PATH = Path("c.capture/expected.json")


@pytest.mark.parametrize("verdicts", [
    {"upstream": {f"site{i}": "ok" for i in range(MAX_SITES + 1)}},
    {"upstream": {"s" * (MAX_NAME + 1): "ok"}},
    {f"v{i}": {"embedding": "ok"} for i in range(MAX_VARIANTS + 1)},
], ids=["many sites", "long site name", "many variants"])
def test_an_expected_file_past_what_a_real_one_holds_is_one_line(verdicts: dict) -> None:
    with pytest.raises(CaptureFormatError) as raised:
        check_json({"verdicts": verdicts}, PATH)
    message = str(raised.value)
    assert "\n" not in message and len(message) < 300, message
    assert message.startswith(f"{PATH}: field 'verdicts") and "regenerate" in message


def test_an_expected_file_at_the_limits_is_read() -> None:
    variants = {f"v{i}": {f"{i:0{MAX_NAME}d}": "ok"} for i in range(MAX_VARIANTS - 1)}
    sites = {f"site{i}": "ok" for i in range(MAX_SITES)}
    check_json({"verdicts": variants | {"upstream": sites}}, PATH)
