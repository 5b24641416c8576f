"""Hostile input, round 7 (T38e): ``FORENSICS_MAX_ALLOC`` given a digit ``int()`` does not take
('²', which ``str.isdigit`` calls one) or more than 4,300 digits was an internal error
(``ValueError``) in every command that sizes an allocation (``import`` of a ``.pt``, the kernel
and V2 workers); it is one ``ConfigurationError`` line naming the variable, its text cut. The
generated repro test (its own reader: it imports no forensics) read such a value the same way,
a ``ValueError`` in the test; it takes the default, as for every value forensics refuses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from forensics.budget import MAX_ALLOC_ENV, max_alloc
from forensics.errors import ConfigurationError

#: values that are no size (``int()`` refuses the first four; ``'٣'`` it reads as 3)
BAD = ["²", "1²G", "9" * 5000, "9" * 20, "٣", "0", "-1", "1e9", "12T", "ß", "1 G"]


@pytest.mark.parametrize("text", BAD)
def test_a_budget_that_is_no_size_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                              text: str) -> None:
    monkeypatch.setenv(MAX_ALLOC_ENV, text)
    with pytest.raises(ConfigurationError) as caught:
        max_alloc()
    message = str(caught.value)
    assert message.startswith(f"{MAX_ALLOC_ENV}=") and "\n" not in message
    assert len(message) < 300


@pytest.mark.parametrize("text,size", [("1073741824", 1 << 30), ("512M", 512 << 20),
                                       ("2g", 2 << 30), ("9" * 19, int("9" * 19)),
                                       (" 7K ", 7 << 10)])
def test_a_budget_that_is_a_size_is_read(monkeypatch: pytest.MonkeyPatch, text: str,
                                         size: int) -> None:
    monkeypatch.setenv(MAX_ALLOC_ENV, text)
    assert max_alloc() == size


def test_the_generated_repro_reads_the_budget_as_forensics_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_repro_v2 import _generated

    from tests.hostile.test_round4_repro import _case, _combine

    module = _generated(tmp_path, [_case("combine_tokens", _combine())], "repro_round7_budget")
    for text in BAD:
        monkeypatch.setenv(MAX_ALLOC_ENV, text)
        assert module.max_alloc() == 1 << 30, text
    for text, size in (("512M", 512 << 20), ("9" * 19, int("9" * 19))):
        monkeypatch.setenv(MAX_ALLOC_ENV, text)
        assert module.max_alloc() == size
