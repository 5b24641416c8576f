"""The ``vllm+PATH.diff`` variant: the installed vLLM code with a unified diff applied.

The diff (paths like ``a/vllm/v1/spec_decode/utils.py``) is applied in pure Python to private
copies of the installed modules it touches, written to a temporary directory and loaded under
private names inside the original package (``vllm.v1.worker._forensics_patched_<hash>_<stem>``)
so that ``__package__`` is the original package and relative imports resolve. The installed
vLLM files and modules are never modified. The same site adapters as the ``vllm`` variant then
run through the patched functions and classes (this process loads the patched copies of the
modules the adapters take code from, :data:`~forensics.variants.vllm_adapters.MODULES`).

A Model Runner V2 site (one with a ``Site.kernel``) runs in a kernel worker of the diff's own
(:class:`~forensics.variants.triton_kernels.KernelPatch`), which imports every patched file in
place of the installed one; a diff that does not change the file its kernels live in raises
PatchApplyError naming the diff, that file and the fix.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import keyword
import sys
import tempfile
from collections.abc import Collection
from pathlib import Path
from types import ModuleType
from typing import Any

from forensics.errors import CaptureFormatError, PatchApplyError, reason
from forensics.escaping import terminal
from forensics.outcome import Outcome
from forensics.records import Record
from forensics.store.guarded import read_bytes
from forensics.variants.op_registration import reusing_installed_ops
from forensics.variants.triton_kernels import KernelPatch
from forensics.variants.unidiff import FilePatch, Work, apply_hunks, parse_diff
from forensics.variants.vllm_adapters import (
    ADAPTER_MODULES,
    EMBEDDING,
    MODULES,
    VllmCode,
    apply_settings,
    code_from,
    installed_modules,
    require_vllm,
    run_site,
)

#: Patched module sets already loaded in this process, by the diff's content hash.
_LOADED: dict[str, dict[str, ModuleType]] = {}
_TEMP_DIRS: list[tempfile.TemporaryDirectory[str]] = []


def read_diff(path: str | Path) -> str:
    """Return the text of the diff file ``path``, read through the guarded reader (a regular
    file, at most ``LIMITS["diff file"]`` bytes: a FIFO or a huge file cannot hang or balloon
    the replay).

    Raises:
        CaptureFormatError: the file is missing, unreadable, too large or not UTF-8 (the message
            names it); UnsafeInputError: it is not a regular file.
    """
    return _text_of(path, _diff_bytes(path))


def _diff_bytes(path: str | Path) -> bytes:
    """The bytes of the diff file ``path`` (raises as :func:`read_diff`; an empty path, the
    variant ``vllm+`` alone, read as the working directory '.')."""
    if not str(path):
        raise CaptureFormatError(NO_PATH)
    try:
        return read_bytes(Path(path), "diff file")
    except FileNotFoundError:
        raise CaptureFormatError(f"diff file {str(path)!r} does not exist; {_HOW}") from None
    except CaptureFormatError as exc:  # also UnsafeInputError (not a regular file)
        raise type(exc)(f"{exc}; {_HOW}") from None
    except ValueError as exc:  # a path no file can have (a NUL in it); after its subclass above
        raise CaptureFormatError(f"diff file {str(path)!r} cannot be a path ({exc}); "
                                 f"{_HOW}") from None


def _text_of(path: str | Path, data: bytes) -> str:
    """``data``, the diff file ``path``'s bytes, as text (raises as :func:`read_diff`)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaptureFormatError(f"diff file {str(path)!r} is not UTF-8 text ({reason(exc)}); "
                                 f"{_HOW}") from None


_HOW = "give the path of a unified diff, as in --variant vllm+PATH.diff"
#: the line refusing the variant ``vllm+`` with no path after it
NO_PATH = f"the variant 'vllm+' names no diff file; {_HOW}"


def vllm_root() -> Path:
    """The directory that holds the installed ``vllm`` package (its ``site-packages``)."""
    require_vllm()
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))).parent


def module_name(path: str) -> str:
    """The dotted module name of a ``vllm/...py`` path (a package for ``__init__.py``); every
    part of the path is a plain ASCII identifier, so the path names that module's file and no
    other (no ``..``, ``.``, empty or absolute part, no second dot).

    Raises:
        PatchApplyError: the path is not a Python file of the vllm package.
    """
    parts = path[:-3].split("/") if path.endswith(".py") else []
    if not parts or parts[0] != "vllm" or not all(_is_name(part) for part in parts):
        raise PatchApplyError(f"diff touches {path!r}, which is not a module of the installed "
                              f"vllm package; expected paths like 'a/vllm/v1/spec_decode/utils.py'"
                              f" (plain names only: no '..', '.', '//' or absolute path)")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_name(part: str) -> bool:
    """Whether ``part`` of a path is a module name Python imports by that spelling."""
    return part.isascii() and part.isidentifier() and not keyword.iskeyword(part)


def patched_sources(diff_path: str | Path, text: str | None = None) -> dict[str, str]:
    """Apply the diff at ``diff_path`` (``text``: its text, when already read) to the
    installed sources; return ``{vllm path: text}``.

    Raises:
        CaptureFormatError: the diff file is missing.
        PatchApplyError: the diff does not parse, touches something other than an existing
            vllm module, or a hunk does not apply (the message names file and hunk).
    """
    source = terminal(diff_path)  # the diff as its messages name it
    root = vllm_root()
    package = (root / "vllm").resolve()
    work = Work(source)
    result: dict[str, str] = {}
    for patch in parse_diff(read_diff(diff_path) if text is None else text, source):
        _check_target(patch, source)
        target = root / patch.path
        if patch.path not in result and not (target.is_file()
                                             and target.resolve().is_relative_to(package)):
            raise PatchApplyError(f"{source}: target file {terminal(patch.path)} does not exist "
                                  f"in the installed vllm at {root} (or is a link out of it)")
        text = result[patch.path] if patch.path in result else target.read_text(encoding="utf-8")
        result[patch.path] = apply_hunks(text, patch, source, work)
    return result


def _check_target(patch: FilePatch, source: str) -> None:
    if "/dev/null" in (patch.old_path, patch.new_path):
        raise PatchApplyError(f"{source}: the patch of {terminal(patch.path)} creates or deletes "
                              f"a file; only changes to existing vllm modules can be replayed")
    if patch.old_path != patch.new_path:
        raise PatchApplyError(f"{source}: the patch renames {terminal(patch.old_path)} to "
                              f"{terminal(patch.new_path)}; only in-place changes can be replayed")
    module_name(patch.path)


def load_patched(diff_path: str | Path,
                 sources: dict[str, str] | None = None) -> dict[str, ModuleType]:
    """Load private patched copies of the modules the diff touches; return them by module name.

    ``sources`` are the diff's :func:`patched_sources` when already computed. Loaded once per
    process per patched content. Raises as :func:`patched_sources`, and PatchApplyError when a
    patched module fails to import.
    """
    if sources is None:
        sources = patched_sources(diff_path)
    digest = hashlib.sha256(repr(sorted(sources.items())).encode()).hexdigest()[:12]
    if digest not in _LOADED:
        installed_modules()  # the originals first: the copies import from them
        tmp = tempfile.TemporaryDirectory(prefix=f"forensics-patched-{digest}-")
        _TEMP_DIRS.append(tmp)
        _LOADED[digest] = {module_name(path): _load_copy(Path(tmp.name), path, text, digest,
                                                         str(diff_path))
                           for path, text in sources.items()}
    return dict(_LOADED[digest])


def _load_copy(tmp: Path, path: str, text: str, digest: str, source: str) -> ModuleType:
    name = module_name(path)
    is_package = path.endswith("__init__.py")
    package = name if is_package else name.rpartition(".")[0]
    private = f"{package}._forensics_patched_{digest}_{Path(path).stem}"
    file = tmp / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(private, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    sys.modules[private] = module
    try:
        with reusing_installed_ops():  # its layers and ops are the installed module's names
            spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[private]
        raise PatchApplyError(f"{source}: the patched copy of {terminal(path)} fails to import "
                              f"({exc.__class__.__name__}: {reason(exc)}); fix the diff") from exc
    apply_settings(module)
    return module


def imported_modules(text: str, name: str, is_package: bool = False) -> set[str]:
    """The dotted names of the modules the Python source ``text`` of module ``name`` (a
    package's ``__init__`` when ``is_package``) imports, relative imports resolved (``from A
    import b`` names both ``A`` and ``A.b``: ``b`` may be a module); empty when it does not
    parse (its import names the error)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    base = name.split(".") if is_package else name.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parent = base[:len(base) - node.level + 1] if node.level else []
            module = ".".join(parent + ([node.module] if node.module else []))
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def shared_name(path: str | Path) -> str:
    """``vllm+NAME.diff@DIGEST``: the diff variant at ``path`` as an output made to be shared
    names it: the diff's file name and the first 8 hex digits of its content's SHA-256 (two
    diffs of one name differ), never the folders it lies in. Read as :func:`read_diff` reads
    it (a regular file within the diff file's cap: a FIFO or a huge file neither blocks nor
    balloons the naming). Raises OSError from the file; CaptureFormatError past the cap,
    UnsafeInputError for a file that is not regular."""
    return _named(path, read_bytes(Path(path), "diff file"))


def _named(path: str | Path, data: bytes) -> str:
    """:func:`shared_name` of the diff file ``path`` that holds ``data``."""
    return f"vllm+{Path(path).name}@{hashlib.sha256(data).hexdigest()[:8]}"


def _file(module: str) -> str:
    """The path of the vllm module ``module``'s file (not a package), as a diff names it."""
    return module.replace(".", "/") + ".py"


#: the files of the modules the V1 sites' replay runs, as a message names them
_V1_FILES = ", ".join(map(_file, MODULES))


class PatchedVllmVariant:
    """The installed vLLM code with the unified diff at ``path`` applied to private copies.

    Building it reads the diff and applies it in memory (cheap, vLLM not imported), so a missing
    or non-applying diff fails here; the patched modules are loaded on the first run.

    Raises:
        MissingDependencyError / UnsupportedVersionError: as for the ``vllm`` variant.
        CaptureFormatError: the diff file is missing.
        PatchApplyError: the diff does not parse or apply (names the file, target and hunk).
    """

    def __init__(self, path: str | Path, name: str | None = None) -> None:
        self.path = str(path)
        self.name = name or f"vllm+{self.path}"
        data = _diff_bytes(self.path)  # read once: the code run is the code named
        if name is not None and name != _named(self.path, data):
            raise PatchApplyError(
                f"diff file '{terminal(self.path)}' changed after it was named "
                f"'{terminal(name)}' (it now reads as '{terminal(_named(self.path, data))}'): "
                "what runs would not be what the output names; run the command again once "
                "the diff no longer changes")
        self._sources = patched_sources(self.path, _text_of(self.path, data))
        self._code: VllmCode | None = None
        #: the diff's files the runs so far ran (the V1 sites' copies, the kernel worker's)
        self._ran: set[str] = set()
        #: the sites whose records ran the installed code: the diff leaves their module as is
        self._installed: dict[str, None] = {}
        paths = sorted(self._sources)
        #: the dotted names of the modules the diff changes, by its file (computed once)
        self._modules = {p: module_name(p) for p in paths}
        #: the diff's files of the modules the V1 sites' replay runs (their copies run)
        self._v1_paths = [p for p in paths if self._modules[p] in MODULES]
        #: the diff's patched files, for Model Runner V2's kernel worker
        self.kernel_patch = KernelPatch(self.path, tuple((p, self._sources[p]) for p in paths),
                                        tuple(self._modules[p] for p in paths))

    def load(self) -> VllmCode:
        """Load the patched modules once; return the patched callables.

        Raises:
            PatchApplyError: a patched module fails to import.
        """
        if self._code is None:
            used = {p: self._sources[p] for p in self._v1_files()}
            self._refuse_unseen(used)
            self._code = code_from(load_patched(self.path, used))
        return self._code

    def run(self, record: Record) -> Outcome:
        """Run one (non-summary) record through the patched code (a Model Runner V2 site:
        the patched kernels, in the diff's kernel worker); exceptions propagate.

        Raises:
            PatchApplyError: as :meth:`load`, the diff does not change the file a V2
                site's kernels live in, or (a V1 site) changes none of the V1 sites' modules.
        """
        from forensics.sites import get_site

        self._check_changes(record.site)
        site = get_site(record.site)
        kernel = site.kernel is not None
        self._ran.update(self._sources if kernel else self._v1_files())
        if not kernel and ADAPTER_MODULES.get((site.adapter or "").partition(":")[2]) \
                not in self._modules.values():
            self._installed[record.site] = None
        return run_site(self.load, record, self.kernel_patch)

    def _v1_files(self) -> list[str]:
        """The diff's files of the modules the V1 sites' replay runs (their copies run)."""
        return list(self._v1_paths)

    def note(self) -> str:
        """Which of the diff's files the runs so far ran, and that every other vLLM module ran
        as installed: the V1 sites run the diff's copies of their own modules alone, each
        importing the installed vLLM's other modules (no V1 site's call reaches a function of
        another of those modules: the runner's call of the batch change's function lies in
        ``_prepare_inputs``, which no site runs); Model Runner V2's kernels run with every
        file the diff changes."""
        if not self._ran:
            return "ran none of the diff's files: every vLLM module as installed"
        installed = self.as_installed()
        sites = (f" (so {', '.join(installed)} ran as installed: the diff does not change "
                 f"{'its' if len(installed) == 1 else 'their'} code)" if installed else "")
        return (f"ran the diff's {', '.join(map(terminal, sorted(self._ran)))}; every other "
                f"vLLM module as installed{sites}")

    def as_installed(self) -> list[str]:
        """The sites whose records the runs so far ran through the installed code, the diff
        changing none of the module their call runs (a diff of ``gpu_input_batch.py`` alone
        leaves ``batch_change``'s and ``prepare_input_ids``'s code as installed), in the order
        they first ran."""
        return list(self._installed)

    def _refuse_unseen(self, used: dict[str, str]) -> None:
        """Refuse a diff that changes a module one of its patched copies ``used`` imports:
        each copy imports the installed vLLM's other modules, so that change would not run
        (a helper the diff adds was "fails to import ...; fix the diff", one it changes was
        replayed as it was).

        Raises:
            PatchApplyError: naming the diff, the copy, the module it imports and the fix.
        """
        changed = {self._modules[p]: p for p in self._sources if p not in used}
        for path, text in used.items():
            for name in sorted(imported_modules(text, self._modules[path],
                                                path.endswith("__init__.py")) & set(changed)):
                raise PatchApplyError(
                    f"{terminal(self.path)}: the patched {terminal(path)} imports {name}, "
                    f"which the diff also changes ({terminal(changed[name])}), but the replay "
                    "runs the diff's copies of the V1 sites' modules alone, each importing the "
                    f"installed vLLM's other modules: that change would not run; put it in "
                    f"{terminal(path)}, or replay a diff of the V1 sites' modules alone")

    def check_capture(self, sites: Collection[str], manifest: Any = None) -> None:
        """Refuse, before any record runs, a capture of the sink alone (its ``embedding``
        records, of no V1 site and no Model Runner V2 site, whichever runner wrote it) when the
        diff does not change the embedding's module, the one such a replay runs: its records
        would replay the installed code under the diff's name (:meth:`_check_changes` exempts
        the sink, which a V2 capture's kernel sites share). The replay asks this of a capture
        replayed whole, from its file (a shrink's or a triage's records in memory are parts of
        one). ``manifest``: the capture's, for the runner it states (else its sites say which).

        Raises:
            PatchApplyError: naming the diff, the runner, that module's file and the diff's.
        """
        from forensics.manifest_facts import runner_of
        from forensics.sites import SINK, SITES
        from forensics.sites.runners import runner_of_sites

        held = set(sites)
        if SINK not in held or any(s in SITES for s in held - {SINK}) \
                or EMBEDDING in self._modules.values():
            return
        runner = runner_of(manifest) or runner_of_sites(held)
        which = {"v1": "a V1 capture", "v2": "a V2 capture"}.get(runner or "", "a capture")
        raise PatchApplyError(
            f"{terminal(self.path)}: {which} of '{SINK}' records alone (no other site's) runs "
            f"vLLM's code in {_file(EMBEDDING)} only, which the diff does not change (it changes "
            f"{', '.join(map(terminal, self._sources))}), so it would replay as the installed "
            "code; replay this capture with 'vllm', or one that holds the site the fix is for")

    def _changes_v1(self) -> bool:
        """Whether the diff changes a module the V1 sites' replay runs."""
        return bool(self._v1_paths)

    def _check_changes(self, site: str) -> None:
        """Refuse a record of a V1 site (one of no kernel, other than the sink, which a Model
        Runner V2 capture shares) when the diff changes none of the modules the V1 sites' replay
        runs (:data:`~forensics.variants.vllm_adapters.MODULES`): it would replay as the
        installed code, its verdicts those of ``vllm`` under the diff's name.

        Raises:
            PatchApplyError: naming the diff, the site, those modules' files and the diff's.
        """
        from forensics.sites import SINK, get_site

        if site == SINK or get_site(site).kernel is not None or self._changes_v1():
            return
        raise PatchApplyError(
            f"{terminal(self.path)}: site {site!r} runs vLLM's code in {_V1_FILES}, none of which "
            f"the diff changes (it changes {', '.join(map(terminal, self._sources))}), so it "
            "would replay as the installed code; put the fix in one of those files, or replay "
            "this site with 'vllm'")
