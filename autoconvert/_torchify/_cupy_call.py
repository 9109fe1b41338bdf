"""One call on CuPy: a CUDA tensor's memory as a CuPy array, the call on torch's current
stream with CuPy allocating from torch's caching allocator, results back as tensors.

Runs only where CuPy and a CUDA device are (``tests/test_cupy.py`` on a GPU, through
``benchmarks/gpu_check.sh``); _cupy decides which calls it makes.
"""

from __future__ import annotations

import functools
import importlib
import types
from typing import Any

import numpy as np
import torch

from autoconvert._conversions._dtypes import NO_CASTS, RESTORING, RESTORING_HALF, WIDENED_HALF, Casts, restoring_casts
from autoconvert._conversions._to_numpy import dtype_to_numpy


@functools.cache
def _cupy() -> types.ModuleType:
    return importlib.import_module("cupy")


def on_device(
    twin: Any,
    device: torch.device,
    args: Any,
    kwargs: Any,
    python_results: bool,
    *,
    widened: dict[torch.dtype, torch.dtype],
) -> Any:
    """``twin(*args, **kwargs)`` on ``device``, on torch's current stream and allocator, with
    tensors as CuPy arrays on their memory; results back as tensors. A tensor of a dtype in
    ``widened`` (bfloat16, the float8s, complex32; float16 under ``widen_float16``) is widened
    on the device and results narrowed back as the host path does: CuPy's kernels for bfloat16
    are few, and the results' values and dtypes are then the host path's."""
    cupy = _cupy()
    handed = _OnCupy(widened)
    with cupy.cuda.Device(device.index), _stream(cupy, device), cupy.cuda.using_allocator(_torch_memory):
        result = twin(*handed.cupy(args), **{k: handed.cupy(v) for k, v in kwargs.items()})
        if python_results and isinstance(result, cupy.ndarray) and result.ndim == 0:
            return result.item()  # NumPy's answer is a Python bool or int (np.allclose, np.count_nonzero)
        return handed.torch(result, device, handed.casts())


class _CudaStream:
    """torch's stream as the CUDA stream protocol gives it (torch's own streams speak it only
    from some version on)."""

    def __init__(self, pointer: int) -> None:
        self.pointer = pointer

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.pointer


def _stream(cupy: Any, device: torch.device) -> Any:
    """torch's current stream on ``device`` as a CuPy stream: through the CUDA stream protocol
    (CuPy 14 on), else as CuPy's ``ExternalStream`` (deprecated from 14)."""
    pointer = torch.cuda.current_stream(device).cuda_stream
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(_CudaStream(pointer))
    return cupy.cuda.ExternalStream(pointer, device.index)


class _OnCupy:
    """The tensors of one call as CuPy got them (widened per ``widened``), and the inexact
    dtypes the caller gave, which decide the results' narrowing."""

    def __init__(self, widened: dict[torch.dtype, torch.dtype]) -> None:
        self.widened = widened
        self.inputs: list[torch.Tensor] = []
        self.inexact: set[torch.dtype] = set()

    def cupy(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.dtype.is_floating_point or value.dtype.is_complex:
                self.inexact.add(value.dtype)
            wide = self.widened.get(value.dtype)
            if wide is not None:
                value = value.to(wide)
            self.inputs.append(value)
            return _cupy().from_dlpack(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self.cupy(v) for v in value) if type(value) in (list, tuple) else value
        if isinstance(value, torch.dtype):
            return dtype_to_numpy(value)
        return value

    def casts(self) -> Casts:
        """Back to the one dtype every inexact tensor had, where it was widened."""
        if len(self.inexact) != 1:
            return NO_CASTS
        return restoring_casts(next(iter(self.inexact)), RESTORING_HALF if self.widened is WIDENED_HALF else RESTORING)

    def torch(self, value: Any, device: torch.device, casts: Casts) -> Any:
        cupy = _cupy()
        if isinstance(value, cupy.ndarray):
            if any(s < 0 for s in value.strides):  # torch has no negative strides
                value = cupy.ascontiguousarray(value)
            t = torch.utils.dlpack.from_dlpack(value)
            narrow = casts.get(t.dtype)
            if narrow is not None:
                return t.to(narrow)
            return t.clone() if any(_overlap(t, given) for given in self.inputs) else t
        if isinstance(value, (np.ndarray, np.generic)):
            return torch.as_tensor(value, device=device)
        if isinstance(value, tuple):
            items = [self.torch(v, device, casts) for v in value]
            return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
        if isinstance(value, list):
            return [self.torch(v, device, casts) for v in value]
        if isinstance(value, dict):
            return type(value)({k: self.torch(v, device, casts) for k, v in value.items()})
        return value


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0:
        return False
    a0, b0 = a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()
    return a0 < b0 + b.untyped_storage().nbytes() and b0 < a0 + a.untyped_storage().nbytes()


def _torch_memory(size: int) -> Any:
    """CuPy's allocator during a call: a block of torch's caching allocator on the current
    device and stream, held by the CuPy memory (and so by the tensors made of it)."""
    cupy = _cupy()
    index = cupy.cuda.runtime.getDevice()
    block = torch.empty(max(size, 1), dtype=torch.uint8, device=torch.device("cuda", index))
    return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(block.data_ptr(), size, block, index), 0)
