"""Hostile input, round 8 (front B): a known-issue catalogue file (``load_catalogue(PATH)``).

A catalogue whose ``any`` clauses nest thousands deep ended in a RecursionError (TOML's parser
and the clause check both recurse per level); hundreds deep, it was accepted and every match
recursed as deep. Both are one line naming the file and the field now.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.errors import CaptureFormatError

HEAD = ('format = 1\n[[entry]]\nid = "a"\ntitle = "t"\nrunner = "v1"\nmethods = "m"\n'
        'versions = "v"\nworkaround = "w"\nfix = {pr = "none", release = "none"}\n')


def nested(depth: int) -> str:
    """A catalogue of one entry whose one clause nests ``depth`` ``any`` clauses."""
    clause = "{any = [" * depth + '{fact = {name = "x", equals = 1}}' + "]}" * depth
    return HEAD + f"signature = {{require = [{clause}]}}\n"


@pytest.mark.parametrize(("depth", "says"), [
    (3000, "nested deeper than Python's recursion limit"),
    (100, "nests 'any' clauses deeper than 32"),
])
def test_a_catalogue_nested_deep_is_one_line(tmp_path: Path, depth: int, says: str) -> None:
    from forensics.known import load_catalogue

    path = tmp_path / "deep.toml"
    path.write_text(nested(depth))
    with pytest.raises(CaptureFormatError) as raised:
        load_catalogue(path)
    line = str(raised.value)
    assert line.startswith(f"catalogue '{path}'") and says in line and "fix" in line, line
    assert len(line.splitlines()) == 1


def test_a_catalogue_nested_within_the_limit_is_read(tmp_path: Path) -> None:
    from forensics.known import load_catalogue

    path = tmp_path / "ok.toml"
    path.write_text(nested(32))
    assert [e.id for e in load_catalogue(path).entries] == ["a"]
