"""The exceptions of vllm-forensics: one root, each subclass also a matching built-in."""

from __future__ import annotations

from forensics.escaping import LIMIT, capped, inert, terminal


class ForensicsError(Exception):
    """Root of every error this package raises on purpose."""


class CaptureFormatError(ForensicsError, ValueError):
    """A capture, segment, manifest or foreign dump is malformed or fails its schema."""


class SegmentChanged(CaptureFormatError):
    """A segment file truncated, replaced or removed while it was read (not a malformed one):
    read the capture again once nothing writes to it."""


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


def reason(exc: BaseException, limit: int = LIMIT) -> str:
    """The text of ``exc`` inside a message of ours (a CLI line, a reason a row gives): a
    ForensicsError's message as it is (its values are escaped already), any other exception's
    text (which may quote a capture's file name or field value) cut after ``limit`` characters
    with a marker and through :func:`~forensics.escaping.terminal`."""
    if isinstance(exc, ForensicsError):
        return str(exc)
    return terminal(capped(exc, limit))


def one_line(exc: BaseException) -> str:
    """The one-line message of ``exc`` for the CLI and for a fleet row: a ForensicsError as
    its message, an OSError as the file and the reason, anything else as a bug (escaped for
    a terminal, at most 2,000 characters)."""
    if isinstance(exc, ForensicsError):
        text = str(exc)
    elif isinstance(exc, OSError):
        where = f"'{terminal(exc.filename)}': " if exc.filename else ""
        text = (f"{where}{exc.strerror or reason(exc)}; check the path, its permissions and "
                "free space")
    elif isinstance(exc, MemoryError):
        text = "out of memory; the input is too large for this machine"
    else:
        text = (f"internal error {type(exc).__name__}: {reason(exc)}; this is a bug: rerun with -v "
                "and report the traceback")
    return inert(" ".join(text.split()))[:2000]  # its values are escaped already
