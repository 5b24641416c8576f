"""The flight recorder's settings: ``FORENSICS_KERNELS``, which of vLLM's Triton kernels it
records; ``FORENSICS_KERNELS_KEEP``, the steps it keeps; ``FORENSICS_KERNELS_BUDGET``, the bytes
of float contents it records per launch.

``all`` (any case) records every kernel; else a comma list of globs, each matched against a
kernel's name (``_compute_slot_mappings_kernel``, ``_compute_*``) or, when it holds a dot,
against its ``module.name`` (as ``forensics kernels --coverage`` prints it). A glob that matches
none of the installed vLLM's kernels (:func:`forensics.kernels.coverage.installed_kernels`) is
refused in one line: ``1``, ``true``, ``ALL`` or a name copied from the coverage list once
recorded nothing, and the probe said nothing of it. Each is read as the probe's other settings
are (:func:`forensics.probe.settings.lookup`: its older ``VLLM_`` name too), and ``_KEEP`` or
``_BUDGET`` set with the recorder off is refused (:func:`refuse_unused`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping

from forensics.errors import ConfigurationError
from forensics.probe.settings import (
    ENV_BUDGET,
    ENV_KEEP,
    ENV_KERNELS,
    lookup,
    positive_setting,
    shown,
)

DEFAULT_KEEP = 32
DEFAULT_BUDGET = 64 << 10
#: the values that leave the recorder off
OFF = ("0", "off", "none")


def matches(glob: str, module: str, name: str) -> bool:
    """Whether ``glob`` names the kernel ``name`` of ``module`` (see the module)."""
    return fnmatch.fnmatchcase(f"{module}.{name}" if "." in glob else name, glob)


def chosen(globs: tuple[str, ...], module: str, name: str) -> bool:
    """Whether any of ``globs`` names the kernel."""
    return any(matches(g, module, name) for g in globs)


def selection(environ: Mapping[str, str] | None = None,
              installed: list[tuple[str, str]] | None = None) -> tuple[str, ...] | None:
    """The kernel globs of ``FORENSICS_KERNELS`` (``all`` -> ``*``); None when it is unset or
    off (``0``, ``off``, ``none``).

    Raises:
        ConfigurationError: a glob that names none of the installed vLLM's kernels
            (``installed``: those of :func:`~forensics.kernels.coverage.installed_kernels`;
            not checked when none is found, no vLLM being installed here).
    """
    name, raw = lookup(os.environ if environ is None else environ, ENV_KERNELS)
    if not raw or raw.lower() in OFF:
        return None
    globs = tuple(p.strip() for p in raw.split(",") if p.strip())
    if not globs:  # "," once started a recorder that recorded nothing, and said nothing
        raise ConfigurationError(f"{name}={shown(raw)} names no kernel; set it to 'all' or a "
                                 "comma list of kernel names or globs, or unset it")
    if any(g.lower() == "all" for g in globs):
        return ("*",)
    if installed is None:
        from forensics.kernels.coverage import installed_kernels

        installed = installed_kernels()
    for glob in globs if installed else ():
        if not any(matches(glob, module, name) for module, name in installed):
            raise ConfigurationError(
                f"{name}={shown(raw)}: {shown(glob)} names none of the installed "
                f"vLLM's {len(installed)} Triton kernels (a name or glob such as "
                f"'_compute_slot_mappings_kernel' or '_compute_*', a 'module.name' as "
                f"'forensics kernels CAPTURE --coverage' lists them); set it to 'all', or "
                f"unset it")
    return globs


def keep_steps(environ: Mapping[str, str] | None = None) -> int | None:
    """``FORENSICS_KERNELS_KEEP``: the steps kept (default 32); None for ``all``.

    Raises:
        ConfigurationError: not a positive int nor ``all``.
    """
    name, raw = lookup(os.environ if environ is None else environ, ENV_KEEP)
    if raw.lower() == "all":
        return None
    return _positive(raw, name, DEFAULT_KEEP, "or 'all'")


def budget(environ: Mapping[str, str] | None = None) -> int:
    """``FORENSICS_KERNELS_BUDGET``: bytes of float contents recorded per launch."""
    name, raw = lookup(os.environ if environ is None else environ, ENV_BUDGET)
    return _positive(raw, name, DEFAULT_BUDGET, "(bytes)")


def refuse_unused(environ: Mapping[str, str] | None = None) -> None:
    """Refuse ``FORENSICS_KERNELS_KEEP`` or ``FORENSICS_KERNELS_BUDGET`` set while the recorder
    is off (``FORENSICS_KERNELS`` unset or off): the value was accepted and nothing recorded,
    unsaid.

    Raises:
        ConfigurationError: the setting, that the recorder is off, and the fix.
    """
    env = os.environ if environ is None else environ
    for setting in (ENV_KEEP, ENV_BUDGET):
        name, raw = lookup(env, setting)
        if raw:
            raise ConfigurationError(
                f"{name}={shown(raw)} has no effect: {lookup(env, ENV_KERNELS)[0]} is unset or "
                "off, so no kernel launch is recorded; set FORENSICS_KERNELS=all (or a comma list "
                f"of kernels) to record them, or unset {name}")


def _positive(raw: str, name: str, default: int, also: str) -> int:
    return positive_setting(name, raw, default, f": expected a positive int {also}; unset it "
                                                f"for the default {default}")
