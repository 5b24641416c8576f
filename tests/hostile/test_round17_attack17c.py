"""Hostile input, round 17 (attack17c): ``.pt`` archives and pickles that torch's loader reads
otherwise than the checks before it (T96a-)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from test_round4_importers import refused


def _pairs(count: int) -> bytes:
    """``count`` keys (``BINUNICODE``) of 0 (``BININT1``), as a pickle's stack items."""
    return b"".join(b"X" + len(key).to_bytes(4, "little") + key + b"K\x00"
                    for key in (f"k{i}".encode() for i in range(count)))


def _pt(path: Path, body: bytes, pickle_name: str = "data.pkl") -> Path:
    """A torch zip archive whose pickle is ``body``, its member named ``pickle_name``."""
    import torch

    saved = io.BytesIO()
    torch.save({"a": 1}, saved)
    with zipfile.ZipFile(saved) as archive, zipfile.ZipFile(path, "w") as out:
        for info in archive.infolist():
            name, raw = info.filename, archive.read(info)
            if name.endswith("/data.pkl"):
                name, raw = name[:-len("data.pkl")] + pickle_name, body
            out.writestr(name, raw)
    return path


def _no_load(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """torch.load replaced by a recorder (its calls, none expected)."""
    import torch

    loaded: list[int] = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: loaded.append(1))
    return loaded


# ------------------------------------------------ T96a: the pickle's member name, any case


@pytest.mark.parametrize("name", ["DATA.PKL", "Data.pkl", "data.PkL"])
def test_a_pickle_named_in_capitals_is_scanned_as_torch_reads_it(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's zip reader finds ``data.pkl`` ignoring case: a pickle member named ``DATA.PKL``
    was loaded by torch and never scanned (24 MiB of ``EMPTY_LIST``: 19 s of CPU, 2.4 GB,
    then "wrote 0 records"; a record of 900,000 keys: 3.3 s, 744 MB). Its record dict is
    refused from the pickle, before torch loads it."""
    loaded = _no_load(monkeypatch)
    source = _pt(tmp_path / "caps.pt", b"\x80\x02}(" + _pairs(2_000) + b"u.", name)
    refused(source, tmp_path, capsys, "its pickle sets keys 2000 times in the dict at place 0")
    assert loaded == []


def test_a_pickle_named_in_capitals_is_held_to_the_pickle_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The 16 MiB a pickle may take holds for ``DATA.PKL`` too (here lowered to 1 KiB)."""
    from forensics.importers import pt

    loaded = _no_load(monkeypatch)
    monkeypatch.setattr(pt, "MAX_PICKLE", 1 << 10)
    source = _pt(tmp_path / "long.pt", b"\x80\x02" + b"]" * 2_000 + b".", "DATA.PKL")
    refused(source, tmp_path, capsys, "its pickle is over 1024 bytes")
    assert loaded == []
