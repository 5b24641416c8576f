"""Settings, the plugin's inert path, and configuration errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from forensics.errors import ConfigurationError
from forensics.probe import plugin
from forensics.probe.settings import ALL_SITES, ENV_CAPTURE, capture_name, from_env


def test_unset_directory_means_off() -> None:
    assert from_env({}) is None
    assert from_env({"FORENSICS_DIR": "  "}) is None


def test_defaults_and_capture_name(tmp_path: Path) -> None:
    settings = from_env({"FORENSICS_DIR": str(tmp_path)})
    assert settings is not None
    assert settings.mode == "record" and settings.sites == ALL_SITES
    assert settings.capture.parent == tmp_path
    assert settings.capture.name.endswith(".capture")
    assert capture_name(0, 42) == "19700101T000000Z-42.capture"
    assert capture_name(0, 42, "ab12") == "19700101T000000Z-42-ab12.capture"
    assert settings.capture.name != from_env({"FORENSICS_DIR": str(tmp_path)}).capture.name


def test_inherited_capture_and_site_list(tmp_path: Path) -> None:
    env = {"FORENSICS_DIR": str(tmp_path), ENV_CAPTURE: str(tmp_path / "a-1.capture"),
           "FORENSICS_SITES": "embedding, batch_change", "FORENSICS_MODE": "GUARD",
           "FORENSICS_RING": "10", "FORENSICS_FLUSH_EVERY": "5"}
    settings = from_env(env)
    assert settings is not None
    assert settings.capture == tmp_path / "a-1.capture"
    assert settings.sites == ("batch_change", "embedding")
    assert settings.guard and settings.ring == 10 and settings.flush_every == 5


@pytest.mark.parametrize("name,value,needle", [
    ("FORENSICS_MODE", "loud", "FORENSICS_MODE='loud'"),
    ("FORENSICS_SITES", "embeding", "unknown site ['embeding']"),
    ("FORENSICS_RING", "-3", "FORENSICS_RING='-3' is not a positive integer"),
    ("FORENSICS_FLUSH_EVERY", "x", "not a positive integer"),
    ("FORENSICS_FLUSH_EVERY", "99999", "exceeds FORENSICS_RING"),
    (ENV_CAPTURE, "/tmp/nope", "must name a '*.capture' directory"),
])
def test_bad_setting_is_one_clear_line(tmp_path: Path, name: str, value: str,
                                       needle: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        from_env({"FORENSICS_DIR": str(tmp_path), name: value})
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_register_raises_bad_setting_from_the_call(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORENSICS_DIR", str(tmp_path))
    monkeypatch.setenv("FORENSICS_MODE", "loud")
    with pytest.raises(ConfigurationError, match="FORENSICS_MODE"):
        plugin.register()
    assert plugin.session() is None


def test_register_without_directory_is_cheap_and_inert() -> None:
    code = ("import os, sys; os.environ.pop('FORENSICS_DIR', None)\n"
            "from forensics.probe import plugin; plugin.register()\n"
            "assert plugin.session() is None\n"
            "heavy = [m for m in ('torch', 'vllm', 'pyarrow') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "assert not any(type(f).__name__ == '_PatchingFinder' for f in sys.meta_path)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_older_vllm_prefixed_names_still_work_and_the_new_ones_win(tmp_path: Path) -> None:
    """VLLM_FORENSICS_* made vLLM warn (unknown VLLM_* variable) at every start; they still
    work, FORENSICS_* wins when both are set, and errors name the variable actually set."""
    old = from_env({"VLLM_FORENSICS_DIR": str(tmp_path), "VLLM_FORENSICS_MODE": "guard",
                    "VLLM_FORENSICS_RING": "10"})
    assert old is not None and old.guard and old.ring == 10
    both = from_env({"VLLM_FORENSICS_DIR": "/nowhere", "FORENSICS_DIR": str(tmp_path),
                     "VLLM_FORENSICS_MODE": "guard", "FORENSICS_MODE": "record"})
    assert both is not None and both.directory == tmp_path and not both.guard
    with pytest.raises(ConfigurationError, match="^VLLM_FORENSICS_RING='0' is not a positive"):
        from_env({"FORENSICS_DIR": str(tmp_path), "VLLM_FORENSICS_RING": "0"})


def test_export_passes_the_settings_down_under_the_new_names_only(tmp_path: Path) -> None:
    from forensics.probe.settings import export

    environ = {"VLLM_FORENSICS_DIR": str(tmp_path), "VLLM_FORENSICS_MODE": "guard",
               "FORENSICS_SITES": "embedding", "VLLM_FORENSICS_SITES": "batch_change"}
    settings = from_env(environ)
    assert settings is not None
    export(settings, environ)
    assert environ == {"FORENSICS_DIR": str(tmp_path), "FORENSICS_MODE": "guard",
                       "FORENSICS_SITES": "embedding",
                       "FORENSICS_CAPTURE": str(settings.capture),
                       "FORENSICS_ENGINE_ID": settings.engine_id}


def test_the_writer_setting_chooses_a_process_or_a_thread(tmp_path: Path) -> None:
    base = {"FORENSICS_DIR": str(tmp_path)}
    default = from_env(base)
    assert default is not None and default.writer == "process"
    thread = from_env({**base, "FORENSICS_WRITER": "Thread"})
    assert thread is not None and thread.writer == "thread"
    with pytest.raises(ConfigurationError, match="FORENSICS_WRITER='fork' is not a writer"):
        from_env({**base, "FORENSICS_WRITER": "fork"})
