"""The exceptions of vllm-forensics: one root, each subclass also a matching built-in."""

from __future__ import annotations


class ForensicsError(Exception):
    """Root of every error this package raises on purpose."""


class CaptureFormatError(ForensicsError, ValueError):
    """A capture, segment, manifest or foreign dump is malformed or fails its schema."""


class UnsafeInputError(CaptureFormatError):
    """An input that would run code (pickle) or reach outside its capture directory."""


class UnknownSiteError(ForensicsError, LookupError):
    """A site name that is not one of the registered sites."""


class UnknownVariantError(ForensicsError, LookupError):
    """A variant name that is neither registered nor a `vllm+PATH.diff`."""


class UnknownScenarioError(ForensicsError, LookupError):
    """A simulator scenario that does not exist."""


class MissingDependencyError(ForensicsError, ImportError):
    """An optional dependency is needed for this call; the message names the extra."""


class UnsupportedVersionError(ForensicsError, RuntimeError):
    """The installed vLLM is outside the range the real-code adapters support."""


class NoAdapterError(ForensicsError, LookupError):
    """A site without a real-code adapter, asked to run under a real-code variant."""


class PatchApplyError(ForensicsError, ValueError):
    """A unified diff that does not parse or does not apply to the installed vLLM."""


class OutputExistsError(ForensicsError, FileExistsError):
    """An output path exists and `force` was not given."""


class OutputError(ForensicsError, OSError):
    """An output (capture, report, figure, file) cannot be written: the message names it."""


class ConfigurationError(ForensicsError, ValueError):
    """A bad setting (environment variable or option)."""


class IndexBoundsError(ForensicsError, IndexError):
    """Raised by the probe's guard mode when an index leaves its valid range."""


class AllocationBudgetError(CaptureFormatError):
    """A size taken from a record would allocate past the allocation budget
    (:mod:`forensics.budget`); the message names the record, the field and its value."""


class DeadlineError(ForensicsError, TimeoutError):
    """A child process (kernel worker, notebook, fleet task) outlived its deadline."""
