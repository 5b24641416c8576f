"""The vLLM general plugin: ``register()`` is the ``forensics`` entry point of vLLM's plugins.

vLLM calls it once in every process (API server, engine core, workers). Without
``FORENSICS_DIR`` (or the older ``VLLM_FORENSICS_DIR``) it returns at once and wraps nothing.
Otherwise it validates the settings (a bad one raises :class:`~forensics.errors.ConfigurationError`
from the call itself, so the engine refuses to start), makes the capture folder once
(:mod:`forensics.probe.owned`) and passes its name and identity down through
``FORENSICS_CAPTURE`` and ``FORENSICS_CAPTURE_OWNER``, and installs the wrappers, an ``atexit``
flush and a SIGTERM flush that chains to the previous handler (it closes the session only where
SIGTERM ends the process: :func:`_on_sigterm`).
"""

from __future__ import annotations

import os
from typing import Any

_SESSION: Any = None
_PREVIOUS_SIGTERM: Any = None


def register() -> None:
    """Entry point of the ``forensics`` plugin; cheap and inert without ``FORENSICS_DIR``.

    Raises:
        ConfigurationError: a bad ``FORENSICS_*`` setting, in one line with the fix.
    """
    from forensics.probe.settings import enabled, from_env

    if _SESSION is not None or not enabled():
        return
    settings = from_env()
    if settings is not None:
        start(settings)


def start(settings: Any, **session_options: Any) -> Any:
    """Start the probe in this process with ``settings``; return the ProbeSession.

    ``session_options`` go to :class:`~forensics.probe.session.ProbeSession` (tests pass a
    writer factory or a copier). Loads once: a second call returns the running session.
    """
    global _SESSION
    if _SESSION is not None:
        return _SESSION
    import atexit

    from forensics.errors import ConfigurationError, reason
    from forensics.probe import hooks, kernels, owned, patch
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import ENV_DIR, export, shown

    kernels.settings()  # a bad FORENSICS_KERNELS_* is refused before anything is started
    made = not settings.owner
    try:
        settings = owned.claim(settings)  # made here, or the first process's, checked
    except OSError as exc:
        raise ConfigurationError(f"{ENV_DIR}={shown(str(settings.directory))}: no capture folder "
                                 f"can be made there ({exc.strerror or reason(exc)}); point it "
                                 "at a writable directory") from None
    try:
        owned.check_reachable(settings.capture)  # through /proc/self/fd, never by its name
    except OSError as exc:
        if made:
            owned.remove_empty(settings.capture)
        raise ConfigurationError(f"{ENV_DIR}={shown(str(settings.directory))}: {exc}") from None
    export(settings)
    _SESSION = session = ProbeSession(settings, **session_options)
    session.made_folder = made
    hooks.activate(session)
    patch.install(settings.sites)
    atexit.register(session.close)
    _install_sigterm(session)
    kernels.install(session)  # FORENSICS_KERNELS: the flight recorder of kernel launches
    return session


def stop() -> None:
    """Close the session, remove the wrappers and handlers (tests; processes keep them)."""
    global _SESSION, _PREVIOUS_SIGTERM
    import atexit
    import signal

    from forensics.probe import hooks, patch

    session, _SESSION = _SESSION, None
    from forensics.probe import kernels

    kernels.dump("the probe stopped")
    kernels.uninstall()
    hooks.activate(None)
    patch.uninstall()
    if session is not None:
        atexit.unregister(session.close)
        session.close()
    if _PREVIOUS_SIGTERM is not None:
        try:
            signal.signal(signal.SIGTERM, _PREVIOUS_SIGTERM)
        except ValueError:  # not the main thread
            pass
        _PREVIOUS_SIGTERM = None


def session() -> Any:
    """The running ProbeSession of this process, or None."""
    return _SESSION


def _install_sigterm(session: Any) -> None:
    import signal

    global _PREVIOUS_SIGTERM
    try:
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError as exc:  # only the main thread may set handlers: atexit still flushes
        session.error(exc, "installing the SIGTERM handler")
        return
    _PREVIOUS_SIGTERM = previous if previous is not None else signal.SIG_DFL


def _on_sigterm(signum: int, frame: Any) -> None:
    """Make every record durable; close the session only where the signal ends the process
    (the default action): a process that ignores SIGTERM, or whose own handler lets it go on
    (a graceful shutdown), goes on recording (it was closed, and recorded nothing more, unsaid);
    one whose handler raises ``SystemExit`` is closed at exit. A SIGTERM that comes while this
    thread is inside a flush (the close, the framing of an event) is handled, all of it, once
    that is over: the handler never re-enters it, and the process never dies in it with its
    session open."""
    import signal

    session = _SESSION
    if session is not None and session.busy:
        session.defer(lambda: _on_sigterm(signum, frame))
        return
    previous = _PREVIOUS_SIGTERM
    if session is not None:
        if previous == signal.SIG_DFL:
            session.close()
        else:
            session.flush(wait=True)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
