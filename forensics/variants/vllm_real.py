"""The ``vllm`` variant: the installed vLLM 0.33.x code itself, called on CPU.

vLLM is imported on the first :meth:`VllmVariant.run`, not when this module is imported (the
registry in :mod:`forensics.variants` imports it). The site adapters live in
:mod:`forensics.variants.vllm_adapters`, shared with the ``vllm+PATH.diff`` variant.
"""

from __future__ import annotations

from forensics.outcome import Outcome
from forensics.records import Record
from forensics.variants.vllm_adapters import VllmCode, code_from, require_vllm, run_site


class VllmVariant:
    """Runs each record through the installed vLLM's real code on CPU (outcome and outputs only)."""

    name = "vllm"

    def __init__(self) -> None:
        """Check (from its metadata, without importing it) that a supported vLLM is installed.

        Raises:
            MissingDependencyError: vLLM is absent (the message names the extra to install).
            UnsupportedVersionError: the installed vLLM is not 0.33.x.
        """
        require_vllm()
        self._code: VllmCode | None = None

    def load(self) -> VllmCode:
        """Import the installed vLLM once (on the first run) and return its callables.

        Raises:
            MissingDependencyError / UnsupportedVersionError: as for the constructor.
        """
        if self._code is None:
            require_vllm()
            self._code = code_from({})
        return self._code

    def run(self, record: Record) -> Outcome:
        """Run one (non-summary) record; return an ``ok`` Outcome with the call's outputs.

        Raises:
            the vLLM code's own exceptions (IndexError for an out-of-range index), and the
            errors of :meth:`load`.
        """
        return run_site(self.load, record)

