"""The environment vLLM's code runs under in a CPU replay (forensics.cpu_env)."""

from __future__ import annotations

import os

import pytest

from forensics.cpu_env import VLLM_IMPORT_ENV, before_vllm_import, triton_child_env
from forensics.variants.vllm_adapters import require_vllm


def test_requiring_vllm_turns_off_humming_background_builds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HUMMING_DISABLE_PARALLEL_BUILD", raising=False)
    require_vllm()
    assert os.environ["HUMMING_DISABLE_PARALLEL_BUILD"] == "1"


def test_a_value_the_user_set_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUMMING_DISABLE_PARALLEL_BUILD", "0")
    before_vllm_import()
    assert triton_child_env()["HUMMING_DISABLE_PARALLEL_BUILD"] == "0"


def test_a_triton_child_runs_the_interpreter_without_a_gpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    env = triton_child_env()
    assert env["TRITON_INTERPRET"] == "1" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert all(env[name] for name in VLLM_IMPORT_ENV)
