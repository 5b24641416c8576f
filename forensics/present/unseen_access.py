"""What the code does where a variant cannot see a finding, in words: a read, a write or a
read-modify-write, as each finding's site declares it (:attr:`forensics.sites.base.Site.writes`),
never one word for all (``post_update`` adds to ``output_bin_counts``: it reads and writes)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from forensics.errors import UnknownSiteError
from forensics.sites import get_site
from forensics.sites.base import READ, READ_MODIFY_WRITE, WRITE

#: the word of a finding at a site this install does not know: what it does is not known
ACCESS = "access"
#: the order the words are said in
_ORDER = (READ, WRITE, READ_MODIFY_WRITE, ACCESS)


def access_word(site: str, tensor: str) -> str:
    """What ``site``'s code does to ``tensor`` at a checked index (:data:`ACCESS`: a site not
    known here)."""
    try:
        return get_site(site).access_word(tensor)
    except UnknownSiteError:
        return ACCESS


def access_words(places: Iterable[tuple[str, str]]) -> list[str]:
    """The distinct words of ``(site, tensor)`` places, in :data:`_ORDER`."""
    words = {access_word(site, tensor) for site, tensor in places}
    return [w for w in _ORDER if w in words]


def accesses_text(words: Sequence[str], plural: bool = False) -> str:
    """``words`` joined with "or": "a read or a read-modify-write" (``plural``: "reads or
    read-modify-writes"); no words: "an access"."""
    words = list(words) or [ACCESS]
    if plural:
        return " or ".join(f"{w}es" if w.endswith("s") else f"{w}s" for w in words)
    return " or ".join(f"{'an' if w[0] in 'aeiou' else 'a'} {w}" for w in words)
