"""The only code that converts one tensor to one array, or one array to one tensor.

Each direction has one function. Both try the zero-copy route first (``t.numpy()``,
``torch.from_numpy``), which torch refuses with an exception in every case that needs
more care; only then do they look closer, copy, or refuse with a :class:`LeafError`.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._devices import CPU
from ._dtypes import NUMPY_TO_TORCH, TORCH_TO_NUMPY, WIDENED, Casts
from ._errors import ConversionError, CopyError, GradientError, GradientWarning, LeafError

_PACKAGE_DIR = os.path.dirname(__file__) + os.sep
_WRAPT_DIR = f"{os.sep}wrapt{os.sep}"


# --------------------------------------------------------------------------- describing


def _qualified(kind: type) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def describe_tensor(t: torch.Tensor) -> str:
    """``torch.Tensor(shape=(2, 3), dtype=torch.float32, layout=torch.strided, device=cpu)``."""
    try:
        shape = str(tuple(t.shape))
    except RuntimeError:  # nested tensors have no single shape
        shape = f"<{t.dim()}-d, ragged>"
    return f"{_qualified(type(t))}(shape={shape}, dtype={t.dtype}, layout={t.layout}, device={t.device})"


def describe_array(a: np.ndarray | np.generic) -> str:
    """``numpy.ndarray(shape=(2,), dtype=<U3)``."""
    return f"{_qualified(type(a))}(shape={a.shape}, dtype={a.dtype.str})"


# --------------------------------------------------------------------------- tensor -> array


def _tensor_refusal(t: torch.Tensor) -> LeafError | None:
    """Why ``t`` can never become an array (or ``None``): what NumPy has no way to hold."""
    if t.is_nested:
        problem, fix = "is a nested (ragged) tensor", "pass {path}.unbind() as a list, or {path}.to_padded_tensor(0.0)"
    elif t.layout != torch.strided:
        problem = f"is a sparse tensor ({t.layout}), which this version does not convert"
        fix = "pass {path}.to_dense()"
    elif t.is_quantized:
        problem, fix = "is a quantized tensor", "pass {path}.dequantize()"
    elif t.is_meta:
        problem, fix = "is a meta tensor, which holds no data", "run the call on tensors with real data"
    elif type(t).__name__ == "MaskedTensor":
        problem = "is a MaskedTensor; NumPy would silently lose its mask"
        fix = "pass {path}.get_data() and {path}.get_mask() separately"
    elif t.dtype not in TORCH_TO_NUMPY and t.dtype not in WIDENED:
        problem = f"has dtype {t.dtype}, which NumPy lacks and which no NumPy dtype holds exactly"
        fix = "convert it first, for example {path}.to(torch.float32)"
    else:
        return None
    return LeafError(ConversionError, problem, describe_tensor(t), fix)


def _needs_copy(t: torch.Tensor, why: str) -> LeafError:
    return LeafError(
        CopyError,
        f"cannot be shared with NumPy without a copy: {why}",
        describe_tensor(t),
        "use copy=None to copy only when needed, or copy=True for a private copy",
    )


class GradPolicy:
    """What to do with a tensor that requires grad (``grad=``), and whether it was said yet."""

    __slots__ = ("function", "mode", "warned")

    def __init__(self, mode: str, function: str) -> None:
        self.mode = mode
        self.function = function
        self.warned = False

    def detach(self, t: torch.Tensor) -> torch.Tensor:
        """Apply the policy (only while grad mode is on) and return ``t`` detached."""
        if self.mode != "detach" and torch.is_grad_enabled():
            if self.mode == "error":
                raise LeafError(
                    GradientError,
                    "requires grad, and NumPy code cannot pass gradients back",
                    describe_tensor(t),
                    "pass {path}.detach(), call under torch.no_grad(), or use grad='detach' or grad='warn'",
                )
            if not self.warned:  # "warn": once per decorated function; a race only warns twice
                self.warned = True
                warn_at_caller(
                    f"{self.function}: an argument requires grad, and NumPy code cannot pass gradients "
                    "back: it was detached, so no gradient flows through this call. Pass "
                    "grad='detach' to silence this, grad='error' to forbid it, or call under torch.no_grad()",
                    GradientWarning,
                )
        return t.detach()


#: Detaches without a word: results of torch code, and to_numpy().
DETACH = GradPolicy("detach", "")


def tensor_to_array(t: torch.Tensor, copy: bool | None, grad: GradPolicy = DETACH) -> tuple[np.ndarray, bool]:
    """One tensor as an array on the host; returns ``(array, shares_memory_with_t)``.

    ``copy`` has NumPy 2's meaning. A GPU tensor crosses to the host once and that
    host copy is the private copy: there is never a transfer plus a memcpy.
    """
    try:
        a = t.numpy()  # zero-copy; raises for grad, conj/neg bits, devices, dtypes, layouts
    except (TypeError, RuntimeError):
        pass
    else:
        return (a.copy(order="K"), False) if copy else (a, True)

    refusal = _tensor_refusal(t)
    if refusal is not None:
        raise refusal
    if t.requires_grad:
        t = grad.detach(t)
    fresh = False
    # NumPy has no lazy conjugate or negative view: resolving the bit materialises a copy.
    if t.is_conj():
        if copy is False:
            raise _needs_copy(t, "it has its conjugate bit set (a lazy .conj())")
        t, fresh = t.resolve_conj(), True
    if t.is_neg():
        if copy is False:
            raise _needs_copy(t, "it has its negative bit set (a lazy view such as .conj().imag)")
        t, fresh = t.resolve_neg(), True
    wide = WIDENED.get(t.dtype)
    if not t.is_cpu or wide is not None:
        if copy is False:
            why = f"it lives on {t.device}" if not t.is_cpu else f"NumPy lacks {t.dtype}, so it must widen to {wide}"
            raise _needs_copy(t, why)
        # One call, so torch moves and widens in a single pass where it can.
        t, fresh = t.to(device=CPU, dtype=wide or t.dtype), True
    a = t.numpy()
    if copy and not fresh:
        return a.copy(order="K"), False
    return a, not fresh


# --------------------------------------------------------------------------- array -> tensor

_UNHOLDABLE = {
    "O": ("is an object array, which torch cannot hold", "convert it to a numeric dtype, or return a list"),
    "U": ("holds strings, which torch cannot hold", "return a list of str, or integer codes"),
    "S": ("holds bytes strings, which torch cannot hold", "return a list of bytes, or integer codes"),
    "T": ("holds strings, which torch cannot hold", "return a list of str, or integer codes"),
    "V": ("is a structured (void) array, which torch cannot hold", "return its fields as separate arrays"),
    "M": ("holds datetime64 values, which torch cannot hold", "convert with {path}.astype('int64') and keep the unit"),
    "m": ("holds timedelta64 values, which torch cannot hold", "convert with {path}.astype('int64') and keep the unit"),
}


def _array_refusal(a: np.ndarray | np.generic) -> LeafError | None:
    """Why ``a`` can never become a tensor (or ``None``)."""
    if isinstance(a, np.ma.MaskedArray):
        problem = "is a masked array; torch has no mask, and dropping it would silently unmask values"
        fix = "return np.ma.filled({path}, fill_value), or the data and the mask as two arrays"
    elif a.dtype.kind in _UNHOLDABLE:
        problem, fix = _UNHOLDABLE[a.dtype.kind]
    elif a.dtype.newbyteorder("=") not in NUMPY_TO_TORCH:
        problem = f"has dtype {a.dtype}, which torch lacks"
        fix = "cast it first, for example {path}.astype(np.float64), if the lost precision is acceptable"
    else:
        return None
    return LeafError(ConversionError, problem, describe_array(a), fix)


def _stride_fix(a: np.ndarray) -> np.ndarray | str | None:
    """How ``a`` must change before torch can share it.

    Returns ``None`` when ``torch.from_numpy(a)`` may share it as it is, a zero-copy
    re-strided view when only unused strides are wrong, or why a copy is due.
    """
    if not a.dtype.isnative:
        return "its byte order is not the machine's"
    if not a.flags.writeable:
        # torch has no read-only tensors; sharing would let torch code write into memory
        # NumPy promised nobody writes (a read-only input, a memory-mapped file).
        return "it is read-only, and torch tensors are always writable"
    if not a.flags.aligned:
        return "its data is not aligned for its dtype"
    strides = a.strides
    used = () if a.size == 0 else [s for s, n in zip(strides, a.shape, strict=True) if n > 1]
    if 0 in used:
        return "it is a broadcast view (a zero stride), so one element would alias many"
    if any(s < 0 for s in used):
        return "it has negative strides, which torch tensors cannot have"
    if any(s < 0 for s in strides):
        # Strides of size-1 axes (or of an empty array) never address memory, yet
        # torch.from_numpy rejects them when negative, and np.ascontiguousarray keeps
        # them (numpy#23349): re-stride as a view instead of copying.
        return np.lib.stride_tricks.as_strided(a, strides=[abs(s) for s in strides], writeable=True)
    return None


def array_to_tensor(a: np.ndarray | np.generic, device: torch.device, casts: Casts, copy: bool | None) -> torch.Tensor:
    """One array or NumPy scalar as a tensor on ``device``, cast per ``casts``.

    Zero-copy ``torch.from_numpy`` when the array can be shared and stays on the CPU;
    otherwise exactly one copy (for non-native byte order or negative strides, the
    host-side fix-up is that copy before any transfer). NumPy scalars are immutable and
    own no shared buffer, so they never count as a copy.
    """
    flags = a.flags
    # torch.from_numpy raising costs ~5 us (a C++ exception with a long message), so only
    # arrays it almost surely accepts try it: "behaved" (aligned and writable) and C- or
    # Fortran-contiguous ("forc": no zero or negative strides but numpy#23349's size-1 axes).
    if type(a) is np.ndarray and flags.behaved and flags.forc:
        try:
            t, shared = torch.from_numpy(a), True
        except (TypeError, ValueError):  # dtype, byte order, a size-1 axis's stride
            t, shared = _slow_array_to_tensor(a, device, casts, copy)
    else:
        t, shared = _slow_array_to_tensor(a, device, casts, copy)
    if device is not CPU or (casts and t.dtype in casts):  # t is on the CPU here (CPU: see _devices.normal)
        dtype = casts.get(t.dtype, t.dtype)
        if copy is False and shared:
            why = f"it must move to {device}" if t.device != device else f"it must be cast to {dtype}"
            raise _needs_copy_array(a, why)
        moved = _cast(t.to, device=device, dtype=dtype)
        if moved is not t:  # .to() is a no-op for "cuda" when t already is on the current GPU
            return moved
    if copy and shared:
        return _host_copy(t)
    return t


# Above this size NumPy's copy is faster: it asks the kernel for transparent huge pages
# (madvise) for large allocations and torch's CPU allocator does not, so first-touch
# page faults dominate. Measured here: 128 MiB in 13 ms vs 46 ms; 8 MiB in 0.49 ms vs 0.32 ms.
_NUMPY_COPY_BYTES = 16 * 2**20


def _host_copy(t: torch.Tensor) -> torch.Tensor:
    """A private copy of a CPU tensor, by whichever copy runs at memory speed for its size."""
    large = t.numel() * t.element_size() >= _NUMPY_COPY_BYTES
    if large and t.dtype in TORCH_TO_NUMPY and not (t.requires_grad or t.is_conj() or t.is_neg()):
        return torch.from_numpy(t.numpy().copy(order="K"))
    return t.clone()  # keeps autograd history, conj and neg bits


def _needs_copy_array(a: np.ndarray | np.generic, why: str) -> LeafError:
    return LeafError(
        CopyError,
        f"cannot be shared with torch without a copy: {why}",
        describe_array(a),
        "use copy=None to copy only when needed, or copy=True for a private copy",
    )


def _slow_array_to_tensor(
    a: np.ndarray | np.generic, device: torch.device, casts: Casts, copy: bool | None
) -> tuple[torch.Tensor, bool]:
    """The careful route: refusals, subclasses, scalars and the layouts torch can't share."""
    refusal = _array_refusal(a)
    if refusal is not None:
        raise refusal
    if isinstance(a, np.generic):
        return torch.from_numpy(np.array(a)), False  # a fresh 0-d array nobody else holds
    plain = np.asarray(a)  # np.matrix, np.memmap and other subclasses: a plain view
    fix = _stride_fix(plain)
    if fix is None:
        return torch.from_numpy(plain), True
    if not isinstance(fix, str):
        return torch.from_numpy(fix), True
    if copy is False:
        raise _needs_copy_array(a, fix)
    if not plain.dtype.isnative or not plain.flags.aligned or any(s < 0 for s in plain.strides):
        # torch.tensor() refuses byte-swapped and negatively strided arrays, and crashes on
        # unaligned complex ones (pytorch#190043): NumPy makes the one (aligned, native,
        # positively strided) copy, and torch shares it.
        fresh = np.array(plain, dtype=plain.dtype.newbyteorder("="), order="K", copy=True)
        return torch.from_numpy(fresh), False
    # Read-only or broadcast: torch.tensor() copies straight to the target device and
    # dtype, with no host copy first and no "not writable" warning.
    dtype = NUMPY_TO_TORCH[plain.dtype]
    dtype = casts.get(dtype, dtype)
    if device is CPU and dtype == NUMPY_TO_TORCH[plain.dtype] and plain.nbytes >= _NUMPY_COPY_BYTES:
        return torch.from_numpy(np.array(plain, order="K", copy=True)), False  # see _host_copy
    return _cast(torch.tensor, plain, device=device, dtype=dtype), False


def tensor_to_device(t: torch.Tensor, device: torch.device, casts: Casts, copy: bool | None) -> torch.Tensor:
    """A tensor result (SciPy's array-API mode returns them) moved and cast like an array's."""
    dtype = casts.get(t.dtype, t.dtype)
    moved = _cast(t.to, device=device, dtype=dtype) if (t.device != device or dtype != t.dtype) else t
    if moved is t and copy:
        return _host_copy(t) if t.is_cpu else t.clone()
    if moved is not t and copy is False:
        raise LeafError(
            CopyError,
            f"cannot reach {device} as {moved.dtype} without a copy",
            describe_tensor(t),
            "use copy=None to copy only when needed, or copy=True for a private copy",
        )
    return moved


def write_back(pairs: list[tuple[torch.Tensor, np.ndarray | None]]) -> None:
    """Make what a function wrote the caller's: copy private arrays back into their tensors,
    and tell autograd about writes into shared memory (``None``), as an in-place op would."""
    with torch.no_grad():
        for t, a in pairs:
            if a is None:
                # NumPy wrote straight into t's memory, unseen by autograd's version counter:
                # a tensor saved for backward would give silently wrong gradients.
                torch.autograd.graph.increment_version(t)
                continue
            source = torch.from_numpy(a) if a.flags.writeable else torch.tensor(a)
            # copy_ narrows the dtype, crosses devices, honours conj/neg bits of t, and, on a
            # detached view sharing t's version counter, tells autograd too.
            t.detach().copy_(source)


# --------------------------------------------------------------------------- warnings

_complex32_lock = threading.Lock()
_complex32_made = False


def _cast(op: Callable[..., torch.Tensor], *args: Any, **kwargs: Any) -> torch.Tensor:
    """Run ``op``, which makes a tensor of ``kwargs["dtype"]``, keeping torch's complex32 notice inside.

    torch warns once per process when the first complex32 tensor is made ("ComplexHalf
    support is experimental"): a remark on torch's kernels, not on the user's code, so
    it must not leak from a conversion. Only that first op runs with warnings caught,
    under a lock because catch_warnings is process-global before Python 3.14.
    """
    global _complex32_made
    if kwargs["dtype"] is not torch.complex32 or _complex32_made:
        return op(*args, **kwargs)
    with _complex32_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = op(*args, **kwargs)
        _complex32_made = True
        return result


def warn_at_caller(text: str, category: type[Warning]) -> None:
    """Warn with the location of the first frame outside autoconvert and wrapt."""
    level = 2  # stacklevel=2 names sys._getframe(1), our caller
    frame = sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename.startswith(_PACKAGE_DIR) or _WRAPT_DIR in frame.f_code.co_filename
    ):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(text, category, stacklevel=level)
