"""The one reader of every number the command line takes (counts, a seed, seconds).

argparse's ``type=int`` and ``type=float`` take digits of any script (``int('٣')`` is 3,
``float('١.٥')`` 1.5), signs, underscores, ``nan``, ``inf`` and numbers that size a loop or an
allocation. A :class:`Number` takes ASCII digits only (seconds: with up to 3 decimals) in the
range its option declares. Anything else is :class:`Refused`, which :func:`check` turns into
the command's one error line (exit 2) naming the option, the value (escaped, cut), the range
and the fix, as every other bad input is: argparse's own usage error would print the usage
too and exit from inside the parser.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from forensics.digits import ascii_int
from forensics.errors import ConfigurationError
from forensics.escaping import capped, quoted

#: seconds as ASCII digits, with a decimal fraction of up to 3 digits (a millisecond)
_SECONDS = re.compile(r"([0-9]{1,9})(?:\.([0-9]{1,3}))?", re.ASCII)
#: the characters of a refused value a message shows
SHOWN = 40


@dataclass(frozen=True)
class Refused:
    """An option's value :class:`Number` refused, and the sentence saying why."""

    message: str


@dataclass(frozen=True)
class Number:
    """An option's number, ``low`` to ``high`` (both included), named ``what`` in its
    message (``"a number of steps"``, ``"a seed"``) and shown by ``example`` in the fix;
    ``seconds``: a decimal fraction is allowed (``low`` may be one). An argparse ``type``."""

    option: str
    low: int | float
    high: int
    what: str
    example: int | float
    seconds: bool = False

    def __call__(self, text: str) -> int | float | Refused:
        """The number ``text`` writes, in range; else :class:`Refused`."""
        value = self.read(text)
        if value is None or not self.low <= value <= self.high:
            return Refused(self.refusal(text))
        return value

    def read(self, text: str) -> int | float | None:
        """The number ``text`` writes in ASCII digits (None: anything else)."""
        if not self.seconds:
            return ascii_int(text, len(str(self.high)))
        match = _SECONDS.fullmatch(text)
        if match is None:
            return None
        return int(match[1]) + int(match[2] or 0) / 10 ** len(match[2] or "")

    def refusal(self, text: str) -> str:
        """``--OPTION 'VALUE' is not ...; give ...``: the value escaped and cut, the range, the
        fix."""
        form = "ASCII digits" + (", with up to 3 decimals" if self.seconds else "")
        return (f"{self.option} {quoted(capped(text, SHOWN))} is not {self.what} from "
                f"{self.low} to {self.high} in {form}; give one, e.g. {self.option} "
                f"{self.example}")


def check(args: argparse.Namespace) -> None:
    """Raise ConfigurationError with the first refused number's sentence, if any."""
    for value in vars(args).values():
        if isinstance(value, Refused):
            raise ConfigurationError(value.message)


def add_deadline(parser: argparse.ArgumentParser, default: float, what: str, left: str) -> None:
    """Declare ``--deadline SECONDS`` (:data:`forensics.budget.MAX_OVERALL_DEADLINE` at most,
    None when not given): the seconds ``what`` may take together, ``default`` unless given;
    ``left``: what the help says of what it leaves when it passes."""
    from forensics.budget import MAX_OVERALL_DEADLINE

    parser.add_argument("--deadline", default=None, metavar="SECONDS",
                        type=Number("--deadline", 0.001, MAX_OVERALL_DEADLINE,
                                    "a number of seconds", default, seconds=True),
                        help=f"the seconds {what} may take together (0.001 to "
                             f"{MAX_OVERALL_DEADLINE:,}; default {default:,}); {left}")
