"""The probe's engine id: named by the first process, inherited by the ones it starts, and
written into the manifest, so captures of one engine's ranks can be stitched."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from forensics.probe.manifest import build_manifest
from forensics.probe.settings import ENV_CAPTURE, ENV_DIR, ENV_ENGINE, export, from_env


def test_the_first_process_names_the_engine_and_children_inherit_it(tmp_path: Path) -> None:
    parent_env = {ENV_DIR: str(tmp_path)}
    parent = from_env(parent_env)
    assert parent is not None and len(parent.engine_id) == 32
    export(parent, parent_env)
    assert parent_env[ENV_ENGINE] == parent.engine_id
    child = from_env(dict(parent_env))
    assert child is not None
    assert (child.engine_id, child.capture) == (parent.engine_id, parent.capture)
    other = from_env({ENV_DIR: str(tmp_path)})
    assert other is not None and other.engine_id != parent.engine_id


def test_an_engine_id_given_to_every_node_is_kept(tmp_path: Path) -> None:
    settings = from_env({ENV_DIR: str(tmp_path), ENV_ENGINE: "engine-7",
                         ENV_CAPTURE: str(tmp_path / "x.capture")})
    assert settings is not None and settings.engine_id == "engine-7"


def test_the_manifest_records_the_engine_id(tmp_path: Path) -> None:
    settings = from_env({ENV_DIR: str(tmp_path), ENV_ENGINE: "engine-7"})
    session = SimpleNamespace(settings=settings, runner=None, rank=1, process="h-1",
                              handoff=settings.handoff)  # the hand-off its writer does (T104d)
    assert build_manifest(session)["engine_id"] == "engine-7"  # type: ignore[arg-type]
