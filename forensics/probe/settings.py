"""The probe's settings, read from the environment (``FORENSICS_*``).

The names carry no ``VLLM_`` prefix: vLLM warns about (or, with strict checking, refuses) every
``VLLM_*`` variable it does not know. The older ``VLLM_FORENSICS_*`` names still work; when both
are set the ``FORENSICS_*`` one wins.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
import time
import uuid
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from forensics.errors import ConfigurationError, reason
from forensics.escaping import capped
from forensics.sites import hooked_sites

ENV_DIR = "FORENSICS_DIR"
ENV_MODE = "FORENSICS_MODE"
ENV_SITES = "FORENSICS_SITES"
ENV_RING = "FORENSICS_RING"
ENV_FLUSH_EVERY = "FORENSICS_FLUSH_EVERY"
ENV_WRITER = "FORENSICS_WRITER"
#: when records leave the engine's process for the writer process: each one as it is made
#: (the default: a crash loses at most the record in flight) or every FLUSH_EVERY records
ENV_HANDOFF = "FORENSICS_HANDOFF"
#: set by the first process that loads the plugin; inherited by the processes it starts
ENV_CAPTURE = "FORENSICS_CAPTURE"
#: the engine id, named and passed on like the capture: every rank of one engine shares it
ENV_ENGINE = "FORENSICS_ENGINE_ID"
#: the identity of the capture folder the first process made (:mod:`forensics.probe.owned`):
#: a process joins an inherited capture only when it is that folder
ENV_OWNER = "FORENSICS_CAPTURE_OWNER"
#: the flight recorder's settings (:mod:`forensics.probe.kernel_selection` reads them)
ENV_KERNELS = "FORENSICS_KERNELS"
ENV_KEEP = "FORENSICS_KERNELS_KEEP"
ENV_BUDGET = "FORENSICS_KERNELS_BUDGET"
ENV_NAMES = (ENV_DIR, ENV_MODE, ENV_SITES, ENV_RING, ENV_FLUSH_EVERY, ENV_WRITER, ENV_CAPTURE,
             ENV_ENGINE, ENV_OWNER, ENV_HANDOFF, ENV_KERNELS, ENV_KEEP, ENV_BUDGET)
#: how alike (:class:`difflib.SequenceMatcher`'s ratio, past ``FORENSICS_``) a name set here
#: must be to one of ours to be taken for a misspelling of it (:func:`check_names`)
MISSPELT = 0.8
#: the older name of each setting, still read when the new one is unset
LEGACY_PREFIX = "VLLM_"

MODES = ("record", "guard")
#: who writes the capture: a writer process (the default) or a thread of the engine's process
WRITERS = ("process", "thread")
#: when the writer process is handed records: per record (crash-safe) or per FLUSH_EVERY
HANDOFFS = ("record", "batch")
#: the sites the probe can record: those whose Site names a hook, in pipeline order
ALL_SITES = hooked_sites()
DEFAULT_RING = 4096
DEFAULT_FLUSH_EVERY = 256
#: how much of a setting's value an error message shows
SHOWN_CHARS = 120
#: the most characters of the host name a process tag keeps (:func:`process_tag`)
HOST_CHARS = 40
#: the longest ``FORENSICS_ENGINE_ID`` (a uuid has 32 characters)
MAX_ENGINE_ID = 256


@dataclass(frozen=True)
class Settings:
    """Validated probe settings. ``capture`` is the capture directory all processes share;
    ``owner`` its identity once made (:func:`forensics.probe.owned.claim`), else empty."""

    directory: Path
    capture: Path
    mode: str = "record"
    sites: tuple[str, ...] = ALL_SITES
    ring: int = DEFAULT_RING
    flush_every: int = DEFAULT_FLUSH_EVERY
    writer: str = "process"
    engine_id: str = ""
    owner: str = ""
    handoff: str = "record"

    @property
    def guard(self) -> bool:
        """True in guard mode."""
        return self.mode == "guard"


def lookup(environ: Mapping[str, str], name: str) -> tuple[str, str]:
    """``(the name actually set, its stripped value)``: ``name``, else its legacy
    ``VLLM_``-prefixed name, else ``(name, "")``."""
    for candidate in (name, LEGACY_PREFIX + name):
        raw = environ.get(candidate, "").strip()
        if raw:
            return candidate, raw
    return name, ""


def check_names(environ: Mapping[str, str]) -> None:
    """Refuse a ``FORENSICS_*`` (or ``VLLM_FORENSICS_*``) name that is none of ours but a
    misspelling of one (``FORENSICS_KERNEL``, ``FORENSICS_MODES``): it was set and silently
    ignored, the engine running without what it asked for. A name like none of ours
    (another tool's) is left alone.

    Raises:
        ConfigurationError: the name, the setting it resembles, and the fix.
    """
    import difflib

    from forensics.budget import CHILD_TIMEOUT_ENV, MAX_ALLOC_ENV

    prefix = "FORENSICS_"
    ours = [name[len(prefix):] for name in (*ENV_NAMES, MAX_ALLOC_ENV, CHILD_TIMEOUT_ENV)]
    for name in sorted(environ):
        bare = name.removeprefix(LEGACY_PREFIX)
        if not bare.startswith(prefix) or bare[len(prefix):] in ours:
            continue
        close = difflib.get_close_matches(bare[len(prefix):], ours, 1, MISSPELT)
        if close:
            raise ConfigurationError(f"{shown(name)} is no setting of the probe (it is ignored): "
                                     f"did you mean {prefix}{close[0]}? rename it, or unset it")


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``FORENSICS_DIR`` (or ``VLLM_FORENSICS_DIR``) is set: cheap, imports nothing."""
    return bool(lookup(os.environ if environ is None else environ, ENV_DIR)[1])


def positive_int(raw: str) -> int | None:
    """``raw`` as a positive int written in ASCII digits (at most 19), or None when it is not
    one (``int()`` also reads ``+5``, ``1_000`` and other scripts' digits, ``٣``)."""
    from forensics.digits import ascii_int

    value = ascii_int(raw, 19)
    return value if value else None


def positive_setting(name: str, raw: str, default: int, fix: str) -> int:
    """``raw``, the value of the environment variable ``name``, as a positive int (``default``
    when empty).

    Raises:
        ConfigurationError: ``name=raw`` then ``fix`` (what was expected and how to set it).
    """
    if not raw:
        return default
    value = positive_int(raw)
    if value is None:
        raise ConfigurationError(f"{name}={shown(raw)}{fix}")
    return value


def _positive_int(environ: Mapping[str, str], setting: str, default: int) -> int:
    name, raw = lookup(environ, setting)
    return positive_setting(name, raw, default, f" is not a positive integer; set it to a "
                                                f"record count such as {default}, or unset it")


def _choice(environ: Mapping[str, str], setting: str, choices: tuple[str, ...],
            what: str) -> str:
    """The setting's value among ``choices`` (the first when unset)."""
    name, raw = lookup(environ, setting)
    raw = raw or choices[0]
    if raw.lower() not in choices:
        raise ConfigurationError(f"{name}={shown(raw)} is not {what}; expected one of "
                                 f"{list(choices)}, or unset it for {choices[0]!r}")
    return raw.lower()


def _handoff(environ: Mapping[str, str]) -> str:
    """``FORENSICS_HANDOFF`` (``batch`` with the writer thread, whose records go in batches).

    Raises:
        ConfigurationError: ``record`` asked of the writer thread: a thread of the engine's
            process dies with it, so a crash loses every record it holds; the setting was
            accepted, ignored, and the manifest said ``record``.
    """
    handoff = _choice(environ, ENV_HANDOFF, HANDOFFS, "a hand-off")
    if _choice(environ, ENV_WRITER, WRITERS, "a writer") == "process":
        return handoff
    name, raw = lookup(environ, ENV_HANDOFF)
    if raw and handoff == "record":
        raise ConfigurationError(
            f"{name}={shown(raw)} cannot be kept with {lookup(environ, ENV_WRITER)[0]}="
            "'thread': a thread of the engine's process hands records off in batches and dies "
            "with it; unset one of them (the writer process hands off each record)")
    return "batch"


def _sites(environ: Mapping[str, str]) -> tuple[str, ...]:
    name, raw = lookup(environ, ENV_SITES)
    if not raw or raw.lower() == "all":
        return ALL_SITES
    names = [part.strip() for part in raw.split(",") if part.strip()]
    unknown = [name for name in names if name not in ALL_SITES]
    if unknown or not names:
        first = shown(unknown[0]) if unknown else "''"
        raise ConfigurationError(f"{name}={shown(raw)} names unknown site [{first}]; "
                                 f"expected a comma list of {list(ALL_SITES)}, or unset it")
    return tuple(site for site in ALL_SITES if site in names)


def capture_name(now: float | None = None, pid: int | None = None, token: str = "") -> str:
    """Return ``<UTC time>-<pid>[-<token>].capture``, the name the first process gives its
    capture (with a random ``token``: :func:`unique_name`)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    suffix = f"-{token}" if token else ""
    return f"{stamp}-{os.getpid() if pid is None else pid}{suffix}.capture"


def unique_name(now: float | None = None, pid: int | None = None) -> str:
    """A capture name no one can plant in advance: :func:`capture_name` with a random token."""
    return capture_name(now, pid, secrets.token_hex(6))


def process_tag(pid: int | None = None) -> str:
    """Return this process's segment tag: ``<host>-<pid>`` with only safe characters. A host
    name past :data:`HOST_CHARS` is cut and a digest of the whole name added, so that the
    processes of two hosts whose names differ only past it (a cluster's long pod names) never
    share a tag, nor so a segment's or events file's name in one capture."""
    name = socket.gethostname()
    host = re.sub(r"[^A-Za-z0-9_-]", "_", name) or "host"
    if len(host) > HOST_CHARS:
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        host = f"{host[:HOST_CHARS - 9]}-{digest}"
    return f"{host}-{os.getpid() if pid is None else pid}"


def _capture(environ: Mapping[str, str], directory: Path) -> Path:
    """The capture folder: ``FORENSICS_CAPTURE`` as the first process passed it down, else a
    new name in ``directory``.

    Raises:
        ConfigurationError: it names no ``*.capture`` folder; or, with no
            ``FORENSICS_CAPTURE_OWNER`` (so this process would make it), one outside
            ``directory`` (``FORENSICS_DIR``): the probe names its captures there only, and
            the variable is the probe's own (a stale or hand-set one put the capture, its
            records, wherever it named, outside the directory the user chose).
    """
    name, inherited = lookup(environ, ENV_CAPTURE)
    if not inherited:
        return directory / unique_name()
    path = Path(inherited)
    if not path.name.endswith(".capture"):
        raise ConfigurationError(f"{name}={shown(inherited)} must name a '*.capture' "
                                 f"directory; unset it to let the probe name one")
    if not lookup(environ, ENV_OWNER)[1] and path.absolute().parent != directory:
        raise ConfigurationError(
            f"{name}={shown(inherited)} is not in {lookup(environ, ENV_DIR)[0]} "
            f"({shown(str(directory))}) and no {ENV_OWNER} says the engine's first process "
            f"made it: it is the probe's own setting, passed to the processes it starts; unset "
            f"it to let the probe name a capture in {lookup(environ, ENV_DIR)[0]}")
    return path


def _directory(name: str, raw: str) -> Path:
    """``FORENSICS_DIR``'s value ``raw`` as an absolute path (a relative one is taken from this
    process's working directory, once: the capture's name passed to the engine's processes is
    then the same folder wherever they run, as a Ray worker runs elsewhere): nothing there
    yet, or a directory.

    Raises:
        ConfigurationError: not a directory, or a path the system refuses to look at (a name
            too long, a ``~user`` unknown here, a folder this user may not search).
    """
    from forensics.atomic import user_path

    try:
        directory = user_path(raw).absolute()  # no working directory: FileNotFoundError
        other = directory.exists() and not directory.is_dir()
    except (OSError, ConfigurationError) as exc:  # ENAMETOOLONG, EACCES; an unknown ~user
        why = getattr(exc, "strerror", None) or reason(exc)
        raise ConfigurationError(f"{name}={shown(raw)} cannot be used ({why}); point it at "
                                 "a writable directory for captures") from None
    if other:
        raise ConfigurationError(f"{name}={shown(raw)} is not a directory; point it at a "
                                 f"writable directory for captures")
    return directory


def shown(value: object) -> str:
    """``value`` as an error message shows it: its ``repr``, shortened past
    :data:`SHOWN_CHARS` characters (an environment value may be very long)."""
    text = str(value)
    if len(text) <= SHOWN_CHARS:
        return repr(value) if isinstance(value, str) else text
    return repr(capped(text, SHOWN_CHARS))


def _engine_id(environ: Mapping[str, str]) -> str:
    """``FORENSICS_ENGINE_ID``, else a new one (a uuid).

    Raises:
        ConfigurationError: longer than :data:`MAX_ENGINE_ID` characters, or holding one
            that is not printable (a control, a byte that is not UTF-8): it goes into every
            manifest and onto the writer process's command line, which a huge one overflows.
    """
    name, raw = lookup(environ, ENV_ENGINE)
    if not raw:
        return uuid.uuid4().hex
    if len(raw) > MAX_ENGINE_ID or not raw.isprintable():
        raise ConfigurationError(f"{name}={shown(raw)} is not an engine id: expected at most "
                                 f"{MAX_ENGINE_ID} printable characters; unset it to let the "
                                 "probe name the engine")
    return raw


def from_env(environ: Mapping[str, str] | None = None) -> Settings | None:
    """Read the settings from ``environ`` (default ``os.environ``).

    Each setting is read as ``FORENSICS_<NAME>``, else as its legacy ``VLLM_FORENSICS_<NAME>``.

    Returns:
        None when ``FORENSICS_DIR`` is unset or empty (the probe stays off), else Settings.
    Raises:
        ConfigurationError: a bad value, in one line naming the variable, the value and the fix.
    """
    environ = os.environ if environ is None else environ
    dir_name, raw_dir = lookup(environ, ENV_DIR)
    if not raw_dir:
        return None
    check_names(environ)
    directory = _directory(dir_name, raw_dir)
    ring = _positive_int(environ, ENV_RING, DEFAULT_RING)
    flush_every = _positive_int(environ, ENV_FLUSH_EVERY, min(DEFAULT_FLUSH_EVERY, ring))
    if flush_every > ring:
        raise ConfigurationError(f"{lookup(environ, ENV_FLUSH_EVERY)[0]}={shown(flush_every)} "
                                 f"exceeds {lookup(environ, ENV_RING)[0]}={shown(ring)}; "
                                 f"records would be dropped before any flush: lower it to "
                                 f"{ring} or less")
    return Settings(directory=directory, capture=_capture(environ, directory),
                    mode=_choice(environ, ENV_MODE, MODES, "a mode"),
                    sites=_sites(environ), ring=ring, flush_every=flush_every,
                    writer=_choice(environ, ENV_WRITER, WRITERS, "a writer"),
                    handoff=_handoff(environ),
                    engine_id=_engine_id(environ),
                    owner=lookup(environ, ENV_OWNER)[1] if lookup(environ, ENV_CAPTURE)[1] else "")


def export(settings: Settings, environ: MutableMapping[str, str] | None = None) -> None:
    """Pass ``settings`` down to the processes this one starts, under the ``FORENSICS_*`` names
    only: the capture it named, and every setting given under a legacy ``VLLM_FORENSICS_*`` name
    (which is removed, so vLLM in the child processes does not warn about it)."""
    env: MutableMapping[str, str] = os.environ if environ is None else environ
    for name in ENV_NAMES:
        legacy = env.pop(LEGACY_PREFIX + name, None)
        if legacy is not None and not env.get(name, "").strip():
            env[name] = legacy
    env[ENV_CAPTURE] = str(settings.capture)
    env[ENV_ENGINE] = settings.engine_id
    if settings.owner:
        env[ENV_OWNER] = settings.owner
    else:
        env.pop(ENV_OWNER, None)
