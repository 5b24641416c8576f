"""Loading a private copy of a vLLM module that registers vLLM's layers or custom ops.

vLLM registers a layer class under a name once per process (``PluggableLayer.register``,
``CustomOp.register``, in ``vllm.model_executor.custom_op`` and in the hardware-agnostic
``vllm.model_executor.hw_agnostic.custom_op``, each with its own registry: "Duplicate op
name") and a custom op once per library (``direct_register_custom_op``). A diff's copy of such
a module registers the same names again when it is executed; :func:`reusing_installed_ops`
makes those registrations of names the installed modules already hold reuse the installed
ones, for the time the copy is executed only. A layer name new to vLLM that the copy registers
leaves the registry with it (the copy keeps its class; nothing looks the copy's class up by
name). A custom op new to vLLM stays defined while the copy may run (the process: copies are
cached); a second diff's copy registering an op of that name is refused (one process holds one
op of a name; it ran the first diff's op under the second diff's name).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

from forensics.errors import PatchApplyError

#: the custom ops that diffs' copies defined in this process: op name -> (the copy's module,
#: its diff as messages name it)
_COPY_OPS: dict[str, tuple[str, str]] = {}
#: in the name of a diff's copy of a vLLM module: ``PACKAGE{COPY_MARK}DIGEST_STEM``
COPY_MARK = "._forensics_patched_"
#: vLLM's modules defining ``PluggableLayer`` and ``CustomOp`` (the second may be absent)
_REGISTRY_MODULES = ("vllm.model_executor.custom_op", "vllm.model_executor.hw_agnostic.custom_op")


def reusing_installed_ops(module: str, named: str) -> contextlib.AbstractContextManager[None]:
    """While open, a registration of a layer or custom op name vLLM already holds is a no-op
    that keeps the installed class or op (the decorated class gets the name, as vLLM gives it);
    a new name registers as vLLM registers it. On leaving, the registration functions are
    vLLM's again and the registries hold no name new to them whose class is ``module``'s (the
    copy being executed). ``named``: the copy's diff, as a message names it.

    Raises:
        PatchApplyError: ``module`` registers a custom op that another diff's copy defined.
    """
    return _reusing(module, named)


@contextlib.contextmanager
def _reusing(module: str, named: str) -> Iterator[None]:
    """The context manager :func:`reusing_installed_ops` returns."""
    from vllm.utils import torch_utils

    owners = [owner for name in _REGISTRY_MODULES if (owner := _optional(name)) is not None]
    classes = [(owner, cls) for owner in owners  # 0.32: no PluggableLayer
               for cls in (getattr(owner, "PluggableLayer", None), owner.CustomOp)
               if cls is not None and "register" in cls.__dict__]
    saved = [(owner, cls, cls.__dict__["register"]) for owner, cls in classes]
    before = [(owner.op_registry, set(owner.op_registry)) for owner in owners]
    direct = torch_utils.direct_register_custom_op
    try:
        for owner, cls, original in saved:
            setattr(cls, "register", classmethod(_registering(  # noqa: B010  (a method, by name)
                original, owner.op_registry, cls is owner.CustomOp)))
        torch_utils.direct_register_custom_op = _direct(  # type: ignore[assignment]
            direct, module, named)
        yield
    finally:
        for _, cls, original in saved:
            setattr(cls, "register", original)  # noqa: B010
        torch_utils.direct_register_custom_op = direct  # type: ignore[assignment]
        for registry, names in before:
            for name in [n for n, cls in registry.items() if n not in names
                         and getattr(cls, "__module__", None) == module]:
                del registry[name]


def module_file(module: str) -> str:
    """The ``vllm/...py`` file a copy's private module name ``module`` is a copy of."""
    package, _, stem = module.partition(COPY_MARK)
    return "/".join(package.split(".")) + "/" + stem.partition("_")[2] + ".py"


def _optional(name: str) -> Any:
    """The module ``name`` of the installed vLLM, or None where this vLLM has none."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _registering(original: Any, registry: dict[str, Any], dims: bool) -> Callable[..., Any]:
    """vLLM's ``register`` classmethod ``original``, a no-op for a name ``registry`` holds
    (``dims``: it also gives the class its ``_dynamic_arg_dims``, as ``CustomOp``'s does)."""
    def register(cls: type, name: str, *args: Any, **kwargs: Any) -> Callable[[type], type]:
        """The decorator registering ``name``: vLLM's, or one naming the class alone."""
        if name not in registry:
            decorator: Callable[[type], type] = original.__func__(cls, name, *args, **kwargs)
            return decorator

        def keep(op_cls: type) -> type:
            """Give ``op_cls`` the name (and dims) vLLM gives it; the registry keeps its own."""
            setattr(op_cls, "name", name)  # noqa: B010  (vLLM's class attribute)
            if dims:
                setattr(op_cls, "_dynamic_arg_dims",  # noqa: B010
                        kwargs.get("dynamic_arg_dims", args[0] if args else None))
            return op_cls

        return keep

    return register


def _direct(original: Callable[..., Any], module: str, named: str) -> Callable[..., Any]:
    """vLLM's ``direct_register_custom_op`` ``original``, a no-op for an op of the vLLM
    library that is already defined (``torch.ops.vllm.NAME`` stays the installed op, or the
    op this copy defined at an earlier load); an op another diff's copy defined is refused."""
    def direct_register_custom_op(op_name: str, op_func: Callable[..., Any],
                                  *args: Any, **kwargs: Any) -> None:
        """Register ``op_name`` unless the vLLM library already defines it."""
        import torch

        default_lib = kwargs.get("target_lib") is None and len(args) < 3
        other = _COPY_OPS.get(op_name) if default_lib else None
        if other is not None and other[0] != module:
            raise PatchApplyError(
                f"{named}: its patched copy of {module_file(module)} registers the custom op "
                f"vllm::{op_name}, which the copy of {other[1]} registered in this process, and "
                "one process holds one op of a name: replay the two diffs in separate "
                "commands (or give the op another name in one of them)")
        if default_lib and hasattr(torch.ops.vllm, op_name):
            return
        original(op_name, op_func, *args, **kwargs)
        if default_lib and getattr(op_func, "__module__", None) == module:
            _COPY_OPS[op_name] = (module, named)

    return direct_register_custom_op
