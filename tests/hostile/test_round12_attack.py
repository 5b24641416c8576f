"""Round 12's attacks: a hostile capture author and a hostile local user against what fewer
rounds looked at (the command line's own usage errors, ...)."""

from __future__ import annotations

import pytest

from forensics.cli import main

#: a terminal escape that would clear the screen, and one that would set its title
ESCAPES = ("\x1b[2J", "\n\x85x", "\x1b]0;owned\x07", "\x9b31m", "\u202e")


@pytest.mark.parametrize("argv", [
    ["triage", "-{e}.capture", "a.capture"],     # a name a glob (`triage *`) gave as an option
    ["replay", "a.capture", "--v={e}"],          # an ambiguous option with its value
    ["replay", "a.capture", "-x", "{e}"],
])
@pytest.mark.parametrize("escape", ESCAPES)
def test_a_usage_error_prints_the_words_it_quotes_inert(
        argv: list[str], escape: str, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's own errors (``unrecognized arguments: ...``, ``ambiguous option: ...``) quote
    the words given raw: a capture named ``-\\x1b]0;...`` that ``forensics triage *`` passed as
    an option set the terminal's title. Each is one inert line."""
    with pytest.raises(SystemExit) as ended:
        main([word.format(e=escape) for word in argv])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert escape not in err
    last = err.splitlines()[-1]
    assert last.startswith("forensics") and "error: " in last
