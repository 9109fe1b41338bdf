"""The pure-Python floor: the least a call with autoconvert's guarantees costs.

Each contender here is a wrapt proxy (what a decorated function has to be) whose
``__call__`` is written by hand for one benchmark function, with the checks autoconvert's
flat call makes and nothing more: the compile escape, the hand-over to a ``config`` block or
the profiler, each argument's type (a tensor NumPy shares, handed over read-only; a plain
value), the call, and the result's (shared where torch can; a read-only view copied once).
Any other call goes to the decorated function itself, so the contenders are correct, not
only fast. (Turning a write into a read-only array into ``ReadOnlyError`` is a ``try``, free
until something raises, so it is left out.) A per-call target below these rows needs what pure Python lacks (a wrapper type
with vectorcall, written in C) or a guarantee dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import wrapt
from torch.autograd import profiler

import autoconvert as ac
from autoconvert._conversions._to_torch import SMALL_COPY_BYTES
from autoconvert._options._config import _ACTIVE

_compiling = torch.compiler.is_dynamo_compiling
_active = _ACTIVE.get
_PLAIN = frozenset({int, float, bool, str, type(None)})
Tensor, ndarray, from_numpy = torch.Tensor, np.ndarray, torch.from_numpy


def _proxy(function: Callable[..., Any], call: Callable[..., Any]) -> Any:
    """A wrapt proxy of ``function`` whose calls are ``call`` (a staticmethod, as autoconvert's are)."""
    kind = type("Floor", (wrapt.FunctionWrapper,), {"__call__": staticmethod(call)})
    return kind(function, lambda wrapped, instance, args, kwargs: wrapped(*args, **kwargs))


def three_and_two(function: Callable[..., Any], decorated: Callable[..., Any]) -> Any:
    """The floor for ``function(a, b, c, alpha, beta)``: three tensors, two plain values."""

    def call(a: Any, b: Any, c: Any, alpha: Any, beta: Any) -> Any:
        if _compiling() or _active() is not None or profiler._is_profiler_enabled:
            return decorated(a, b, c, alpha, beta)
        if type(alpha) not in _PLAIN or type(beta) not in _PLAIN:
            return decorated(a, b, c, alpha, beta)
        if type(a) is not Tensor or type(b) is not Tensor or type(c) is not Tensor:
            return decorated(a, b, c, alpha, beta)
        if a.requires_grad or b.requires_grad or c.requires_grad:
            return decorated(a, b, c, alpha, beta)
        try:
            x, y, z = a.numpy(), b.numpy(), c.numpy()
        except (TypeError, RuntimeError):
            return decorated(a, b, c, alpha, beta)
        x.setflags(False)
        y.setflags(False)
        z.setflags(False)
        result = function(x, y, z, alpha, beta)
        if type(result) is ndarray:
            flags = result.flags
            if flags.behaved and flags.forc:
                return from_numpy(result)
        return ac.to_tensor(result)

    return _proxy(function, call)


def one_view(function: Callable[..., Any], decorated: Callable[..., Any]) -> Any:
    """The floor for ``function(v)`` returning a view of its read-only input: copied once."""

    def call(v: Any) -> Any:
        if _compiling() or _active() is not None or profiler._is_profiler_enabled:
            return decorated(v)
        if type(v) is not Tensor or v.requires_grad:
            return decorated(v)
        try:
            array = v.numpy()
        except (TypeError, RuntimeError):
            return decorated(v)
        array.setflags(False)
        result = function(array)
        if type(result) is ndarray:
            flags = result.flags
            if flags.forc:
                if flags.behaved:
                    return from_numpy(result)
                if flags.aligned and result.nbytes < SMALL_COPY_BYTES:
                    return from_numpy(result.copy())
        return ac.to_tensor(result)

    return _proxy(function, call)
