"""Loading a private copy of a vLLM module that registers vLLM's layers or custom ops.

vLLM registers a layer class under a name once per process (``PluggableLayer.register``,
``CustomOp.register``: "Duplicate op name") and a custom op once per library
(``direct_register_custom_op``). A diff's copy of such a module registers the same names again
when it is executed; :func:`reusing_installed_ops` makes those registrations of names the
installed modules already hold reuse the installed ones, for the time the copy is executed
only, and leaves every registry as it found it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


def reusing_installed_ops() -> contextlib.AbstractContextManager[None]:
    """While open, a registration of a layer or custom op name vLLM already holds is a no-op
    that keeps the installed class or op (the decorated class gets the name, as vLLM gives it);
    a new name registers as vLLM registers it. On leaving, the registration functions are
    vLLM's again."""
    return _reusing()


@contextlib.contextmanager
def _reusing() -> Iterator[None]:
    """The context manager :func:`reusing_installed_ops` returns."""
    from vllm.model_executor import custom_op
    from vllm.utils import torch_utils

    classes = (getattr(custom_op, "PluggableLayer", None), custom_op.CustomOp)  # 0.32: no layer
    saved = [(cls, cls.__dict__["register"]) for cls in classes
             if cls is not None and "register" in cls.__dict__]
    direct = torch_utils.direct_register_custom_op
    try:
        for cls, original in saved:
            setattr(cls, "register", classmethod(_registering(  # noqa: B010  (a method, by name)
                original, custom_op.op_registry, cls is custom_op.CustomOp)))
        torch_utils.direct_register_custom_op = _direct(direct)  # type: ignore[assignment]
        yield
    finally:
        for cls, original in saved:
            setattr(cls, "register", original)  # noqa: B010
        torch_utils.direct_register_custom_op = direct  # type: ignore[assignment]


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


def _direct(original: Callable[..., Any]) -> Callable[..., Any]:
    """vLLM's ``direct_register_custom_op`` ``original``, a no-op for an op of the vLLM
    library that is already defined (``torch.ops.vllm.NAME`` stays the installed op)."""
    def direct_register_custom_op(op_name: str, op_func: Callable[..., Any],
                                  *args: Any, **kwargs: Any) -> None:
        """Register ``op_name`` unless the vLLM library already defines it."""
        import torch

        if kwargs.get("target_lib") is None and len(args) < 3 \
                and hasattr(torch.ops.vllm, op_name):
            return
        original(op_name, op_func, *args, **kwargs)

    return direct_register_custom_op
