"""The one registry shape (sites, variants, importers, commands): order, unknown names,
entry points added once, refused plugins warned about."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from forensics import plugins
from forensics.errors import UnknownSiteError
from forensics.registry import Registry


def _points(found: list[tuple[str, object]]) -> Iterator[tuple[str, object]]:
    yield from found


def _accept(loaded: object) -> int:
    if not isinstance(loaded, int):
        raise TypeError(f"it names {type(loaded).__name__}, not an int")
    return loaded


def test_entries_keep_their_order_and_unknown_names_list_the_valid_ones() -> None:
    reg: Registry[int] = Registry("number", UnknownSiteError, hint=" or a digit")
    reg.register("one", 1)
    reg.register("two", 2)
    assert reg.names() == ["one", "two"] and list(reg) == ["one", "two"] and len(reg) == 2
    assert reg.get("two") == 2 and reg.find("three") is None and "one" in reg
    assert [] not in reg and reg.find([]) is None  # type: ignore[arg-type]
    with pytest.raises(UnknownSiteError, match=r"unknown number 'three'; expected one of "
                                               r"\['one', 'two'\] or a digit"):
        reg.get("three")


def test_plugins_are_loaded_once_placed_before_the_named_entry_and_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def found(group: str) -> Iterator[tuple[str, object]]:
        calls.append(group)
        return _points([("three", 3), ("word", "x"), ("dup", 1), ("four", 4)])

    monkeypatch.setattr(plugins, "entry_points", found)
    reg: Registry[int] = Registry("number", UnknownSiteError, group="numbers", accept=_accept,
                                  name_of=str, plugins_before="last")
    reg.register("1", 1)
    reg.register("last", 9)
    with pytest.warns(UserWarning) as caught:
        assert reg.names() == ["1", "3", "4", "last"]
    assert reg.names() == ["1", "3", "4", "last"] and calls == ["numbers"]
    assert [str(w.message) for w in caught] == [
        "forensics: skipping the numbers plugin 'word': it names str, not an int",
        "forensics: skipping the numbers plugin 'dup': the number name '1' is taken"]


def test_the_four_registries_share_the_shape() -> None:
    from forensics.commands import COMMANDS
    from forensics.errors import UnknownVariantError
    from forensics.importers import IMPORTERS
    from forensics.sites import REGISTRY
    from forensics.variants import as_factory, registry

    assert all(isinstance(r, Registry) for r in (COMMANDS, IMPORTERS, REGISTRY, registry))
    assert registry.names()[:3] == ["upstream", "patched", "vllm"]
    with pytest.raises(UnknownVariantError, match=r"unknown variant 'nope'; expected one of "
                                                  r"\['upstream', .*\] or 'vllm\+PATH.diff'"):
        registry.create("nope")
    with pytest.raises(TypeError, match="it names int, not a variant factory"):
        as_factory(3)
    assert ".safetensors" in IMPORTERS and COMMANDS.get("replay")[0] == "replay"
