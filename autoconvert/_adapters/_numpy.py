"""NumPy: how it refuses read-only memory, and its ``ufunc.at`` before 2.5."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._adapter import Adapter


class NumPy(Adapter):
    name = "NumPy"
    packages = ("numpy",)
    # "assignment destination", "output array", "sort array", "underlying array"
    # (np.fill_diagonal), "array" (Generator.shuffle): the what names the write, never the array.
    refused_writes = (" is read-only",)
    # Generator.random(out=a): "must be contiguous, writable, aligned..." (before NumPy 2 "is not
    # contiguous, writable or aligned"); np.dot(x, y, out=a): "output array is not acceptable
    # (must have the right datatype...)", read-only being one of its demands.
    refused_demands = (" writable, aligned", " writable or aligned", "output array is not acceptable")
    read_only_views = frozenset({"as_strided", "broadcast_arrays", "broadcast_to", "sliding_window_view"})
    takes_read_only = True
    takes_arrays = True

    def torch_mode(self) -> str:
        return "NumPy runs on NumPy arrays only: it would convert a tensor itself, without its gradient"


class CheckedAt:
    """``ufunc.at``, refusing a read-only first operand as NumPy 2.5 does: before 2.5, ``at``
    wrote into read-only arrays, so into the caller's tensor behind its back."""

    def __init__(self, ufunc: np.ufunc) -> None:
        self.ufunc = ufunc
        self.__name__, self.__qualname__ = "at", f"{ufunc.__name__}.at"

    def __call__(self, a: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            a[...] = a  # NumPy's own refusal ("assignment destination is read-only"): a ReadOnlyError
        return self.ufunc.at(a, *args, **kwargs)
