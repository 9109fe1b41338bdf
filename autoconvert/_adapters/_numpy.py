"""NumPy: how it rejects read-only memory, and its ``ufunc.at`` before 2.5."""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from ._adapter import Adapter


def _python_results() -> frozenset[str]:
    """The functions this NumPy answers with a Python bool or int, asked of it: np.count_nonzero
    answers a Python int in some NumPy versions, a NumPy integer in others."""
    one = np.ones(1)
    asked = {"allclose": (one, one), "array_equal": (one, one), "array_equiv": (one, one), "count_nonzero": (one,)}
    return frozenset(name for name, args in asked.items() if type(getattr(np, name)(*args)) in (bool, int))


class NumPy(Adapter):
    name = "NumPy"
    packages = ("numpy",)
    # "assignment destination", "output array", "sort array", "underlying array"
    # (np.fill_diagonal), "array" (Generator.shuffle): the what names the write, never the array;
    # a.setflags(write=True) of an array whose memory NumPy does not own (any tensor's).
    rejected_writes = (" is read-only", "cannot set WRITEABLE flag to True of this array")
    refused_flags = ("cannot set WRITEABLE flag to True of this array",)
    # Generator.random(out=a): "must be contiguous, writable, aligned..." (before NumPy 2 "is not
    # contiguous, writable or aligned"); np.dot(x, y, out=a): "output array is not acceptable
    # (must have the right datatype...)", read-only being one of its demands.
    rejected_demands = (" writable, aligned", " writable or aligned", "output array is not acceptable")
    read_only_views = frozenset({"as_strided", "broadcast_arrays", "broadcast_to", "sliding_window_view"})
    writeable_defaults = types.MappingProxyType({"as_strided": True, "sliding_window_view": False})
    takes_read_only = True
    takes_arrays = True

    # numpy.random is not mirrored: CuPy's generators draw other streams from the same seed.
    _cupy_modules = types.MappingProxyType({"numpy": "cupy", "numpy.fft": "cupy.fft", "numpy.linalg": "cupy.linalg"})
    # CuPy arrays have no read-only flag: a function that writes into its argument would write
    # into the caller's tensor.
    cupy_declined = types.MappingProxyType(
        dict.fromkeys(
            ("copyto", "fill_diagonal", "place", "put", "put_along_axis", "putmask"),
            "it writes into an argument, and CuPy arrays cannot refuse writes",
        )
    )
    python_results = _python_results()

    def cupy_module(self, module: str) -> str | None:
        return self._cupy_modules.get(module)

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
