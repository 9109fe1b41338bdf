"""A torchified module's function that its library runs on torch tensors itself.

SciPy's array API mode (``SCIPY_ARRAY_API=1``) runs part of SciPy on torch tensors: the
gradient flows, the result stays on the tensor's device, and ``torch.compile`` traces SciPy's
code. ``torchify(module, native="auto")`` hands such a function its tensors as they are; a
call without a tensor, or with an array beside one (which SciPy's torch path refuses to mix),
takes the converting pair, as does every function the library has no torch path for (its
adapter says, ``Adapter.torch_path``).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from autoconvert._adapters._adapter import Adapter
from autoconvert._calls._config import active
from autoconvert._calls._escape import compiling
from autoconvert._calls._observe import count_native
from autoconvert._calls._signature import function_name


class NativeFunction:
    """``fn`` for a torchified module: a call whose arguments hold a tensor and no array goes
    to ``fn`` as it is (the library's own torch path); any other, to ``converting`` (the
    torchified pair), which gives tensors back as for every other function of the view. It
    pickles as the attribute ``name`` of ``view``, the torchified module it was read from."""

    def __init__(self, fn: Any, converting: Any, view: Any, name: str) -> None:
        self.__wrapped__ = fn
        self.converting = converting
        self.view, self.name = view, name
        self.counted = function_name(fn).removesuffix("()")  # its name in stats() blocks
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        holds = False
        for value in (*args, *kwargs.values()) if kwargs else args:
            if isinstance(value, torch.Tensor):
                holds = True
            elif isinstance(value, np.ndarray):
                return self.converting(*args, **kwargs)
        if holds:
            # Counted in stats() blocks; dynamo must not trace the ContextVar read (see _escape).
            if not compiling() and active() is not None:
                count_native(self.counted)
            return self.__wrapped__(*args, **kwargs)
        return self.converting(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<autoconvert native torch path of {self.__wrapped__!r}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return getattr, (self.view, self.name)


def refused(adapter: Adapter, fn: Any, module: str, name: str) -> ValueError:
    """``torchify(native=True)``'s refusal of ``fn`` (``module.name``), which has no torch path
    of its library's own."""
    return ValueError(
        f"autoconvert.torchify(native=True): {module}.{name} has no torch path of {adapter.name}'s own: "
        f"{adapter.torch_path(fn)}. Fix: native='auto' converts where there is none"
    )
