"""SciPy: its pybind11 and distance code's refusals, and torchify's defaults for it."""

from __future__ import annotations

import types

from ._adapter import Adapter


class SciPy(Adapter):
    name = "SciPy"
    packages = ("scipy",)
    # scipy.fft's pybind11 code: scipy.fft.fft(x, overwrite_x=True) -> "array is not writeable".
    refused_writes = (" is not writeable",)
    # cdist(out=a): "must be aligned, writable and native byte order".
    refused_demands = (" aligned, writable",)
    takes_arrays = True
    # Most of SciPy rejects float16 ("array type not supported"): float32 in, float16 back.
    torchify_defaults = types.MappingProxyType({"widen_float16": True})
