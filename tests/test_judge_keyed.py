"""The judge's one rule for a key held twice (:func:`forensics.judge.keyed.by_key`)."""

from __future__ import annotations

from forensics.judge.keyed import by_key


def test_each_key_keeps_its_last_value_and_the_keys_held_again_are_named_in_order() -> None:
    items = [((2, 0), "a"), ((1, 0), "b"), ((1, 0), "c"), ((2, 0), "d"), ((2, 0), "e"),
             ((3, 1), "f")]
    latest, again = by_key(items)
    assert latest == {(2, 0): "e", (1, 0): "c", (3, 1): "f"}
    assert list(latest) == [(2, 0), (1, 0), (3, 1)]
    assert again == [(1, 0), (2, 0)]
    assert by_key([((1, 0), "a"), ((1, 1), "b")]) == ({(1, 0): "a", (1, 1): "b"}, [])
