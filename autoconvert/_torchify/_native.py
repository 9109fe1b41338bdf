"""A torchified module's function that its library runs on torch tensors itself.

SciPy's array API mode (``SCIPY_ARRAY_API=1``) runs part of SciPy on torch tensors: the
gradient flows, the result stays on the tensor's device, and ``torch.compile`` traces SciPy's
code. ``torchify(module, native="auto")`` hands such a function its tensors as they are; a
call without a tensor, or with an array beside one (which SciPy's torch path refuses to mix),
takes the converting pair, as does every function the library has no torch path for (its
adapter says, ``Adapter.torch_path``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autoconvert._adapters._adapter import Adapter
from autoconvert._interpreter._routes import Declined, Route, RouteWords
from autoconvert._options._signature import function_name

_NO_TENSOR = Declined("the call", "has no tensor", "no tensor", "", counted=False)
_ARRAY = Declined("an argument", "is a NumPy array, which the library's torch path does not mix", "", "", counted=False)


class NativeRoute(Route):
    """The route of ``fn``, which its library runs on torch tensors itself: a call whose
    arguments hold a tensor and no array goes to ``fn`` as it is."""

    name = "native"
    label = "native torch path"

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def refuses(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Declined | None:
        holds = False
        for value in (*args, *kwargs.values()) if kwargs else args:
            if isinstance(value, torch.Tensor):
                holds = True
            elif isinstance(value, np.ndarray):
                return _ARRAY
        return None if holds else _NO_TENSOR

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.fn(*args, **kwargs)

    def describe(self) -> RouteWords:
        return RouteWords(
            "native",
            f"A call whose arguments hold a tensor and no array goes to {function_name(self.fn)} as it is: its "
            "library runs it on torch tensors itself (gradients kept, on the tensors' device, traced by "
            "torch.compile). ",
            "Any other call takes the converting call: {path}. {why}",
        )


def native_route(adapter: Adapter, fn: Any) -> NativeRoute | str:
    """``fn``'s route on its library's own torch path, as its adapter declares it, or why it
    has none."""
    why = adapter.torch_path(fn)
    return NativeRoute(adapter.torch_call(fn)) if why is None else why


def refused(adapter: Adapter, why: str, module: str, name: str) -> ValueError:
    """``torchify(native=True)``'s refusal of ``module.name``, which has no torch path of its
    library's own: ``why``."""
    return ValueError(
        f"autoconvert.torchify(native=True): {module}.{name} has no torch path of {adapter.name}'s own: "
        f"{why}. Fix: native='auto' converts where there is none"
    )
