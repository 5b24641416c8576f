"""Make a submodule callable, for submodules that share their name with their main function.

Importing ``forensics.replay`` binds the *module* to the package attribute ``forensics.replay``
(Python sets one per imported submodule), hiding the function of the same name; a callable
module keeps ``forensics.replay(...)`` working either way.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


def make_module_callable(module_name: str, function: Callable[..., Any]) -> None:
    """Let calling the module ``module_name`` call ``function`` with the same arguments."""

    class CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

    sys.modules[module_name].__class__ = CallableModule
