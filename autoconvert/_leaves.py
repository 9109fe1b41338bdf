"""The only code that converts one tensor to one array, or one array to one tensor.

Each direction has one function. Both try the zero-copy route first (``t.numpy()``,
``torch.from_numpy``), which torch refuses with an exception in every case that needs
more care; only then do they look closer, copy, or refuse with a ``LeafError``.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch
from numpy.typing import NDArray

from . import _devices
from ._copies import copied, crossing
from ._devices import CPU
from ._dtypes import INTEGERS, NUMPY_TO_TORCH, TORCH_TO_NUMPY, WIDENED, WIDENED_HALF, Casts, narrows
from ._errors import ConversionError, CopyError, GradientError, GradientWarning, LeafError, NoDeviceError

_PACKAGE_DIR = os.path.dirname(__file__) + os.sep
_WRAPT_DIR = f"{os.sep}wrapt{os.sep}"
#: How the filenames of autoconvert's generated code begin (see _specialise).
GENERATED = "<autoconvert "


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


def describe_array(a: NDArray[Any] | np.generic) -> str:
    """``numpy.ndarray(shape=(2,), dtype=<U3)``."""
    return f"{_qualified(type(a))}(shape={a.shape}, dtype={a.dtype.str})"


def describe_sparse(m: Any) -> str:
    """``scipy.sparse._csr.csr_array(shape=(3, 3), format='csr')``."""
    return f"{_qualified(type(m))}(shape={m.shape}, format={m.format!r})"


# --------------------------------------------------------------------------- tensor -> array


def _tensor_refusal(t: torch.Tensor) -> LeafError | None:
    """Why ``t`` can never become an array (or ``None``): what NumPy has no way to hold."""
    if _functorch_wrapped(t):
        problem = (
            "is being transformed by torch.vmap or torch.func (a functorch-wrapped tensor), which NumPy code cannot see"
        )
        fix = (
            "for gradients, make the function a autoconvert.numpy_op(backward=...); for a batch, "
            "loop over it (autoconvert.batched) instead of torch.vmap"
        )
    elif type(t).__name__ == "FakeTensor":
        problem = "is a FakeTensor (torch.compile's tracing, or FakeTensorMode), which holds no data"
        fix = "run the call eagerly, or make the function a autoconvert.numpy_op(fake=...) so tracing never runs NumPy"
    elif t.is_meta:
        problem, fix = "is a meta tensor, which holds no data", "run the call on tensors with real data"
    elif t.is_nested:
        problem, fix = "is a nested (ragged) tensor", "pass {path}.unbind() as a list, or {path}.to_padded_tensor(0.0)"
    elif t.layout != torch.strided:  # sparse layouts are converted before this is asked
        problem = f"has layout {t.layout}, which NumPy and SciPy cannot hold"
        fix = "pass {path}.to_dense()"
    elif t.is_quantized:
        problem, fix = "is a quantized tensor", "pass {path}.dequantize()"
    elif type(t).__name__ == "MaskedTensor":
        problem = "is a MaskedTensor; NumPy would silently lose its mask"
        fix = "pass {path}.get_data() and {path}.get_mask() separately"
    elif t.dtype not in TORCH_TO_NUMPY and t.dtype not in WIDENED:
        problem = f"has dtype {t.dtype}, which NumPy lacks and which no NumPy dtype holds exactly"
        fix = "convert it first, for example {path}.to(torch.float32)"
    else:
        return None
    return LeafError(ConversionError, problem, describe_tensor(t), fix)


# torch.vmap and torch.func wrap tensors in ones with no storage ("Cannot access data pointer").
_functorch_wrapped: Callable[[torch.Tensor], bool] = getattr(
    getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", lambda t: False
)


def expanded(t: torch.Tensor) -> bool:
    """Whether ``t`` repeats elements through a zero stride (``expand()``, ``broadcast_to``);
    an empty tensor repeats nothing."""
    strides = t.stride()
    # `0 in strides` first: the common no-zero case costs one tuple scan in C, not a loop here.
    return 0 in strides and t.numel() > 0 and any(st == 0 and n > 1 for n, st in zip(t.shape, strides, strict=True))


def compact(t: torch.Tensor) -> torch.Tensor:
    """An expanded tensor's memory: ``t`` with every zero-stride dimension cut to size 1."""
    return t.as_strided([1 if st == 0 else n for n, st in zip(t.shape, t.stride(), strict=True)], t.stride())


def extent(t: torch.Tensor) -> int:
    """Elements from a strided tensor's first to one past its last (torch has no negative strides)."""
    return sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True)) + 1 if t.numel() else 0


def overlaps_any(t: torch.Tensor, others: list[torch.Tensor]) -> bool:
    """Whether ``t``'s memory overlaps the memory of any of ``others`` (same device, byte ranges)."""
    if t.layout != torch.strided or not t.numel():
        return False
    start = t.data_ptr()
    stop = start + extent(t) * t.element_size()
    for other in others:
        if other.device != t.device or other.layout != torch.strided or not other.numel():
            continue
        try:
            begin = other.data_ptr()
        except RuntimeError:  # a functorch or fake tensor passed through: no memory of its own
            continue
        if begin < stop and start < begin + extent(other) * other.element_size():
            return True
    return False


def _needs_copy(t: torch.Tensor, why: str) -> LeafError:
    return LeafError(
        CopyError,
        f"cannot be shared with NumPy without a copy: {why}",
        describe_tensor(t),
        "use copy=None to copy only when needed, or copy=True for a private copy",
    )


class GradPolicy:
    """What to do with a tensor that requires grad (``grad=``), and whether it was said yet."""

    __slots__ = ("function", "mode", "unsaid", "warned")

    def __init__(self, mode: str, function: str) -> None:
        self.mode = mode
        self.function = function
        self.warned = False
        #: "warn": the tensor the warning is about, until the boundary, which knows where it
        #: was among the call's arguments, says it (``say``).
        self.unsaid: torch.Tensor | None = None

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
                self.unsaid = t
        return t.detach()

    def say(self, paths: list[str]) -> None:
        """Issue the "warn" policy's warning about the tensor ``detach`` kept, found at
        ``paths`` among the call's arguments (empty: not found, as for another thread's)."""
        self.unsaid = None
        where = f"argument {' or '.join(paths)}" if paths else "an argument"
        warn_at_caller(
            f"{self.function}: {where} requires grad, and NumPy code cannot pass gradients back: it was "
            "detached, so no gradient flows through this call. Pass grad='detach' to silence this, "
            "grad='error' to forbid it, or call under torch.no_grad()",
            GradientWarning,
        )


#: Detaches without a word: results of torch code, and to_numpy().
DETACH = GradPolicy("detach", "")


def tensor_to_array(
    t: torch.Tensor,
    copy: bool | None,
    grad: GradPolicy = DETACH,
    sparse: str = "array",
    *,
    settle: bool = True,
    widened: dict[torch.dtype, torch.dtype] = WIDENED,
) -> tuple[Any, bool]:
    """One tensor as an array on the host; returns ``(array, shares_memory_with_t)``.

    ``copy`` has NumPy 2's meaning. A GPU tensor crosses to the host once and that
    host copy is the private copy: there is never a transfer plus a memcpy. A sparse
    tensor becomes a scipy.sparse object of kind ``sparse`` (see tensor_to_sparse).

    A CUDA tensor crosses asynchronously into pinned memory. With ``settle=False`` the
    caller must call ``_devices.settle`` on ``t`` before the array is read: a call's
    arguments then all cross before one wait. ``widened`` names the dtypes that widen
    (WIDENED_HALF: float16 too, for code that rejects it).
    """
    # Zero-copy numpy() refuses grad, conj/neg bits, devices, dtypes and layouts with a C++
    # exception, a hundred times the cost of a check (benchmarks, micro: "a tensor that
    # requires grad"); requires_grad, common in training code, is checked first.
    if not t.requires_grad and (widened is WIDENED or t.dtype not in widened):
        try:
            a = t.numpy()
        except (TypeError, RuntimeError):
            pass
        else:
            if not copy:
                return a, True
            try:
                private = a.copy(order="K")
            except MemoryError:
                raise _unallocatable(t, t.dtype) from None
            copied("copy=True", t, private.nbytes)
            return private, False
    return refused_tensor_to_array(t, copy, grad, sparse, settle=settle, widened=widened)


def refused_tensor_to_array(
    t: torch.Tensor,
    copy: bool | None,
    grad: GradPolicy,
    sparse: str,
    *,
    settle: bool = True,
    widened: dict[torch.dtype, torch.dtype] = WIDENED,
) -> tuple[Any, bool]:
    """``tensor_to_array`` for a tensor that ``numpy()`` refused, without trying it again."""
    if t.layout in SPARSE_LAYOUTS and not t.is_meta:
        return tensor_to_sparse(t, copy, grad, sparse), False
    refusal = _tensor_refusal(t)
    if refusal is not None:
        raise refusal
    if t.requires_grad:
        t = grad.detach(t)
    if copy is None and expanded(t):
        # An expanded tensor (zero strides): convert its compact base, broadcast the array back.
        # Widening or resolving it whole would copy every repeat (bf16 zeros(1).expand(2e8): 766 MiB).
        a, shares = refused_tensor_to_array(compact(t), None, grad, sparse, settle=settle, widened=widened)
        return np.broadcast_to(a, tuple(t.shape)), shares
    try:
        return _to_host(t, copy, settle, widened)
    except (MemoryError, RuntimeError) as e:  # torch's CPU allocator raises RuntimeError
        if not isinstance(e, MemoryError) and "alloc" not in str(e).lower():
            raise
        raise _unallocatable(t, widened.get(t.dtype, t.dtype)) from None


def _unallocatable(t: torch.Tensor, dtype: torch.dtype) -> LeafError:
    needed = t.numel() * torch.empty(0, dtype=dtype).element_size()
    return LeafError(
        ConversionError,
        f"needs a copy of {t.numel():,} elements ({needed / 2**30:,.1f} GiB) to reach NumPy, which could not be allocated",
        describe_tensor(t),
        "for an expanded tensor pass copy=None (the function gets a read-only broadcast view of its memory), "
        "or pass a smaller tensor",
    )


def _to_host(
    t: torch.Tensor, copy: bool | None, settle: bool, widened: dict[torch.dtype, torch.dtype]
) -> tuple[Any, bool]:
    """The rest of ``refused_tensor_to_array``: resolve bits, cross, widen, copy."""
    fresh = False
    # NumPy has no lazy conjugate or negative view: resolving the bit materialises a copy.
    if t.is_conj():
        if copy is False:
            raise _needs_copy(t, "it has its conjugate bit set (a lazy .conj())")
        t, fresh = t.resolve_conj(), True
        copied("layout", t, _nbytes(t))
    if t.is_neg():
        if copy is False:
            raise _needs_copy(t, "it has its negative bit set (a lazy view such as .conj().imag)")
        t, fresh = t.resolve_neg(), True
        copied("layout", t, _nbytes(t))
    wide = widened.get(t.dtype)
    if not t.is_cpu or wide is not None:
        if copy is False:
            why = f"it lives on {t.device}" if not t.is_cpu else f"NumPy lacks {t.dtype}, so it must widen to {wide}"
            raise _needs_copy(t, why)
        if not t.is_cpu:
            crossing(t, _nbytes(t), t.device, CPU, lambda: describe_tensor(t))
        elif wide is not None:
            copied("widening", t, t.numel() * wide.itemsize)
        # One call, so torch moves and widens in a single pass where it can. From a CUDA
        # device non_blocking: torch then makes the host tensor in pinned memory, which the
        # copy fills at the link's full speed (.cpu()'s pageable copy is staged by the
        # driver), and the copy is only queued: the data is there after settle().
        source, queued = t, t.is_cuda
        t, fresh = t.to(device=CPU, dtype=wide or t.dtype, non_blocking=queued), True
        if queued and settle:
            _devices.settle([source])
    a = t.numpy()
    if copy and not fresh:
        copied("copy=True", t, a.nbytes)
        return a.copy(order="K"), False
    return a, not fresh


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def dtype_to_numpy(d: torch.dtype, ctx: object = None) -> np.dtype[Any]:
    """A torch dtype argument as NumPy's (``np.zeros(n, torch.float64)``), by the rule tensors
    cross with: a dtype NumPy lacks as its lossless wider one (bfloat16 and float8 as float32,
    complex32 as complex64)."""
    found = TORCH_TO_NUMPY.get(WIDENED.get(d, d))
    if found is None:
        raise LeafError(
            ConversionError,
            "is a torch dtype that NumPy has no dtype for, nor a wider one holding its values exactly",
            f"torch dtype {d}",
            "pass a NumPy dtype, or do this step in torch",
        )
    return found


# --------------------------------------------------------------------------- array -> tensor

#: What an object array is told: also how a SciPy function that read a sparse matrix as one
#: object answers (see _outputs).
OBJECT_ARRAY = "is an object array, which torch cannot hold"
_UNHOLDABLE = {
    "O": (OBJECT_ARRAY, "convert it to a numeric dtype, or use a list"),
    "U": ("holds strings, which torch cannot hold", "use a list of str, or integer codes"),
    "S": ("holds bytes strings, which torch cannot hold", "use a list of bytes, or integer codes"),
    "T": ("holds strings, which torch cannot hold", "use a list of str, or integer codes"),
    "V": ("is a structured (void) array, which torch cannot hold", "use its fields as separate arrays"),
    "M": ("holds datetime64 values, which torch cannot hold", "convert with {path}.astype('int64') and keep the unit"),
    "m": ("holds timedelta64 values, which torch cannot hold", "convert with {path}.astype('int64') and keep the unit"),
}


def _array_refusal(a: NDArray[Any] | np.generic) -> LeafError | None:
    """Why ``a`` can never become a tensor (or ``None``)."""
    if isinstance(a, np.ma.MaskedArray):
        problem = "is a masked array; torch has no mask, and dropping it would silently unmask values"
        fix = "use np.ma.filled({path}, fill_value), or the data and the mask as two arrays"
    elif a.dtype.kind in _UNHOLDABLE:
        problem, fix = _UNHOLDABLE[a.dtype.kind]
    elif a.dtype.newbyteorder("=") not in NUMPY_TO_TORCH:
        problem = f"has dtype {a.dtype}, which torch lacks"
        nearest = "np.complex128" if a.dtype.kind == "c" else "np.float64"  # never drop an imaginary part
        fix = f"cast it first, for example {{path}}.astype({nearest}), if the lost precision is acceptable"
    else:
        return None
    return LeafError(ConversionError, problem, describe_array(a), fix)


def _stride_fix(a: NDArray[Any]) -> NDArray[Any] | str | None:
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


# Bound once: reading torch.from_numpy and np.ndarray off their modules costs a tenth of
# from_numpy itself (benchmarks, micro: "a bound name or a module attribute").
_from_numpy = torch.from_numpy
_ndarray = np.ndarray


#: A per-call NamedTuple built from a tuple of all its fields, without the Python frame of
#: its ``__new__``, on every call of the generic path (benchmarks, micro: "a per-call
#: NamedTuple").
_new = tuple.__new__  # a NamedTuple's own __new__ costs more (benchmarks, micro)


class Target(NamedTuple):
    """Where one call's arrays go: a tensor leaf's per-call context."""

    #: None: the call's tensors disagreed (an error only where a result must be placed).
    device: torch.device | None
    casts: Casts
    copy: bool | None
    #: The call's tensors, where a leaf needs them: those a tensor input side passes through
    #: as they are; the arguments an output tensor must not alias (see _outputs.NeedsInputs).
    tensors: list[torch.Tensor] | None = None


def target(
    device: torch.device | None, casts: Casts, copy: bool | None, tensors: list[torch.Tensor] | None = None
) -> Target:
    """A ``Target``, made as cheaply as a tuple: a leaf context is made per call."""
    return _new(Target, (device, casts, copy, tensors))


def array_to_tensor(a: NDArray[Any] | np.generic, target: Target) -> torch.Tensor:
    """One array or NumPy scalar as a tensor on ``target``'s device, cast per its casts.

    Zero-copy ``torch.from_numpy`` when the array can be shared and stays on the CPU;
    otherwise exactly one copy (for non-native byte order or negative strides, the
    host-side fix-up is that copy before any transfer). NumPy scalars are immutable and
    own no shared buffer, so they never count as a copy.

    It takes the leaf context whole, so a Mapper dispatches straight here, with no wrapper
    frame per array to unpack it.

    Raises:
        NoDeviceError: ``target``'s device is None.
    """
    flags = a.flags
    t = None
    # torch.from_numpy raising costs as much as many conversions (a C++ exception with a long
    # message: benchmarks, micro: "an array torch refuses"), so only arrays it almost surely
    # accepts try it: "behaved" (aligned and writable) and C- or
    # Fortran-contiguous ("forc": no zero or negative strides but numpy#23349's size-1 axes).
    if type(a) is _ndarray and flags.behaved and flags.forc:
        try:
            t = _from_numpy(a)
        except (TypeError, ValueError):  # dtype, byte order, a size-1 axis's stride
            pass
        else:
            if target.device is CPU and not target.casts and not target.copy:  # shared, uncast: done
                return t
    elif (
        type(a) is _ndarray
        and flags.forc
        and not flags.writeable
        and flags.aligned
        and target.device is CPU
        and not target.casts
    ):
        # A read-only array (a view of a handed input, most often): one NumPy copy, which
        # torch then shares; the careful route below costs several times that for small
        # arrays (benchmarks, micro: "copying a read-only 8-element view").
        held = a.dtype
        if held.isnative and held in NUMPY_TO_TORCH and target.copy is not False and a.nbytes < SMALL_COPY_BYTES:
            copied("layout", a, a.nbytes)
            return _from_numpy(a.copy(order="K"))
    device, casts, copy = target.device, target.casts, target.copy
    if device is None:
        raise NoDeviceError
    if casts and a.dtype.kind in "iu":
        _check_range(a, NUMPY_TO_TORCH[a.dtype.newbyteorder("=")], casts, describe_array)
    t, shared = (t, True) if t is not None else _slow_array_to_tensor(a, device, casts, copy)
    if device is not CPU or (casts and t.dtype in casts):  # t is on the CPU here (CPU: see _devices.normal)
        dtype = casts.get(t.dtype, t.dtype)
        if copy is False and shared:
            why = f"it must move to {device}" if t.device != device else f"it must be cast to {dtype}"
            raise _needs_copy_array(a, why)
        if t.is_cpu and device is not CPU:
            crossing(a, a.nbytes, CPU, device, lambda: describe_array(a))
        elif dtype != t.dtype:
            copied("cast", a, t.numel() * dtype.itemsize)
        moved = _cast(t.to, device=device, dtype=dtype)
        if moved is not t:  # .to() is a no-op for "cuda" when t already is on the current GPU
            return moved
    if copy and shared:
        copied("copy=True", a, a.nbytes)
        return _host_copy(t)
    return t


# Above this size NumPy's copy is faster: it asks the kernel for transparent huge pages
# (madvise) for large allocations and torch's CPU allocator does not, so first-touch page
# faults dominate; below it torch's clone is (benchmarks, micro: "a 8 MiB host copy", "a
# 128 MiB host copy").
_NUMPY_COPY_BYTES = 16 * 2**20
# Below this size too: torch.tensor() has a fixed cost that NumPy's copy lacks (benchmarks,
# micro: "copying a read-only 8-element view"); the two meet near 512 KiB.
SMALL_COPY_BYTES = 2**19


def _host_copy(t: torch.Tensor) -> torch.Tensor:
    """A private copy of a CPU tensor, by whichever copy runs at memory speed for its size."""
    large = t.numel() * t.element_size() >= _NUMPY_COPY_BYTES
    if large and t.dtype in TORCH_TO_NUMPY and not (t.requires_grad or t.is_conj() or t.is_neg()):
        return torch.from_numpy(t.numpy().copy(order="K"))
    return t.clone()  # keeps autograd history, conj and neg bits


def _check_range(values: Any, source: torch.dtype, casts: Casts, describe: Callable[[Any], str]) -> None:
    """An integer cast that ``dtype=`` asks for must not wrap values around: refuse instead.
    Only narrowing casts (int64 -> int32, uint64 -> int64) look at the values."""
    target = casts.get(source)
    if target is None or not narrows(source, target):
        return
    if (values.numel() if isinstance(values, torch.Tensor) else values.size) == 0:
        return
    low, high, limits = int(values.min()), int(values.max()), torch.iinfo(target)
    if low < limits.min or high > limits.max:
        raise LeafError(
            ConversionError,
            f"holds values from {low} to {high}, outside {target}'s range, so casting it as dtype= asks would wrap them",
            describe(values),
            "pass a dtype= wide enough for the values, or leave integer results uncast",
        )


def _needs_copy_array(a: NDArray[Any] | np.generic, why: str) -> LeafError:
    return LeafError(
        CopyError,
        f"cannot be shared with torch without a copy: {why}",
        describe_array(a),
        "use copy=None to copy only when needed, or copy=True for a private copy",
    )


def _slow_array_to_tensor(
    a: NDArray[Any] | np.generic, device: torch.device, casts: Casts, copy: bool | None
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
    if device is CPU:
        copied("layout", a, plain.nbytes)
    else:  # torch.tensor() or .to() copies it to the device in one step
        crossing(a, plain.nbytes, CPU, device, lambda: describe_array(a))
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
    try:
        nbytes = plain.nbytes
        if (
            device is CPU
            and dtype == NUMPY_TO_TORCH[plain.dtype]
            and not SMALL_COPY_BYTES <= nbytes < _NUMPY_COPY_BYTES
        ):
            # A broadcast view comes out C-contiguous ("K" would order its zero-stride axes first).
            broadcast = 0 in plain.strides
            fresh = np.array(plain, order="C", copy=True) if broadcast else np.array(plain, order="K", copy=True)
            return torch.from_numpy(fresh), False  # see _host_copy
        return _cast(torch.tensor, plain, device=device, dtype=dtype), False
    except (MemoryError, RuntimeError) as e:  # torch's CPU allocator raises RuntimeError
        if "alloc" not in str(e).lower() and not isinstance(e, MemoryError):
            raise
        needed = plain.size * torch.empty(0, dtype=dtype).element_size()
        raise LeafError(
            ConversionError,
            f"needs a copy of {plain.size:,} elements ({needed / 2**30:,.1f} GiB) to become a tensor, which "
            "could not be allocated",
            describe_array(a),
            "for a broadcast view, return the compact array and expand it with torch's .expand(), "
            "or reduce it before returning",
        ) from None


def tensor_to_device(t: torch.Tensor, device: torch.device, casts: Casts, copy: bool | None) -> torch.Tensor:
    """A tensor result (SciPy's array-API mode returns them) moved and cast like an array's."""
    if casts and t.dtype in INTEGERS:
        _check_range(t, t.dtype, casts, describe_tensor)
    dtype = casts.get(t.dtype, t.dtype)
    crosses = _devices.crosses(t.device, device)
    if crosses:
        if t.is_meta:  # no data to move: the refusal an argument gets
            raise _tensor_refusal(t)  # type: ignore[misc]  # a meta tensor always has one
        crossing(t, _nbytes(t), t.device, device, lambda: describe_tensor(t))
    elif dtype != t.dtype:
        copied("cast", t, t.numel() * dtype.itemsize)
    moved = _cast(t.to, device=device, dtype=dtype) if crosses or dtype != t.dtype else t
    if moved is t and copy:
        copied("copy=True", t, _nbytes(t))
        return _host_copy(t) if t.is_cpu else t.clone()
    if moved is not t and copy is False:
        raise LeafError(
            CopyError,
            f"cannot reach {device} as {moved.dtype} without a copy",
            describe_tensor(t),
            "use copy=None to copy only when needed, or copy=True for a private copy",
        )
    return moved


# --------------------------------------------------------------------------- sparse

#: scipy.sparse format <-> torch layout; formats not listed (dia, lil, dok) become COO.
_FORMAT_LAYOUT = {"coo": torch.sparse_coo, "csr": torch.sparse_csr, "csc": torch.sparse_csc, "bsr": torch.sparse_bsr}
_LAYOUT_FORMAT = {layout: fmt for fmt, layout in _FORMAT_LAYOUT.items()}
#: The layouts a result can be built in: those with a SciPy format (SciPy has no BSC).
SCIPY_LAYOUTS = tuple(_FORMAT_LAYOUT.values())
#: Every sparse layout a tensor argument may have.
SPARSE_LAYOUTS = (*SCIPY_LAYOUTS, torch.sparse_bsc)
_COMPRESSED_BUILDERS = {
    torch.sparse_csr: torch.sparse_csr_tensor,
    torch.sparse_csc: torch.sparse_csc_tensor,
    torch.sparse_bsr: torch.sparse_bsr_tensor,
}


def is_scipy_sparse(cls: type) -> bool:
    """Whether ``cls`` is a scipy.sparse array or matrix type (False if SciPy isn't imported:
    then no such object can exist, and SciPy stays unimported)."""
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and issubclass(cls, (sp.sparray, sp.spmatrix))


def tensor_to_sparse(t: torch.Tensor, copy: bool | None, grad: GradPolicy = DETACH, kind: str = "array") -> Any:
    """A 2-d sparse tensor as a scipy.sparse ``csr/csc/coo/bsr`` array (``kind="matrix"``: spmatrix).

    Always a private object: SciPy rebuilds index arrays in its own integer type, so no
    memory could be shared reliably; ``copy=False`` therefore refuses. Uncoalesced COO
    tensors are coalesced (duplicates summed); BSC, which SciPy lacks, becomes COO.
    """
    if copy is False:
        raise _needs_copy(t, "scipy.sparse keeps index arrays in its own integer type, so it always copies")
    if t.dim() != 2 or t.dense_dim() != 0:
        raise LeafError(
            ConversionError,
            f"is a {t.dim()}-d sparse tensor with {t.dense_dim()} dense dimension(s); scipy.sparse holds 2-d matrices",
            describe_tensor(t),
            "pass a 2-d sparse tensor, or {path}.to_dense()",
        )
    import scipy.sparse  # only ever reached with a sparse tensor in hand

    if t.requires_grad:
        t = grad.detach(t)
    if t.layout == torch.sparse_bsc:  # SciPy has no BSC, and torch converts it only to COO
        t = t.to_sparse()
    if t.layout == torch.sparse_coo:
        t = t.coalesce()
    values = t.values().resolve_conj().resolve_neg()
    wide = WIDENED_HALF.get(values.dtype)  # scipy.sparse has no float16 either
    if t.is_cpu:
        copied("layout", t, _nbytes(values))
    else:
        crossing(t, _nbytes(values), t.device, CPU, lambda: describe_tensor(t))
    data = values.to(device=CPU, dtype=wide or values.dtype).numpy()
    fmt = _LAYOUT_FORMAT[t.layout]
    make = getattr(scipy.sparse, f"{fmt}_{kind}")
    if fmt == "coo":
        row, col = t.indices().to(CPU).numpy()
        return make((data, (row, col)), shape=tuple(t.shape), copy=True)
    compressed, plain = (
        (t.crow_indices(), t.col_indices()) if fmt in ("csr", "bsr") else (t.ccol_indices(), t.row_indices())
    )
    return make((data, plain.to(CPU).numpy(), compressed.to(CPU).numpy()), shape=tuple(t.shape), copy=True)


def _index_tensor(a: NDArray[Any], copy: bool | None) -> torch.Tensor:
    """int64 indices, as torch's sparse tensors want them (SciPy often keeps int32)."""
    if a.dtype == np.int64 and not copy and a.flags.writeable:
        return torch.from_numpy(a)
    return torch.from_numpy(np.array(a, dtype=np.int64))


def sparse_to_tensor(
    m: Any, device: torch.device, casts: Casts, copy: bool | None, layout: torch.layout | None = None
) -> torch.Tensor:
    """A scipy.sparse array or matrix as a sparse tensor on ``device``: CSR, CSC, BSR or COO
    like its format (others become COO), or ``layout``; int64 indices, canonical structure.

    Values follow the dense rules (shared with ``m.data`` on the CPU when possible with
    ``copy=None``); indices become int64, a copy where SciPy holds int32.
    """
    if m.ndim != 2:  # SciPy 1.13's n-d COO arrays; torch's COO tensors take any sparse_dim
        return _nd_coo_to_tensor(m, device, casts, copy, layout)
    layout = layout or _FORMAT_LAYOUT.get(m.format, torch.sparse_coo)
    converted = m.asformat(_LAYOUT_FORMAT[layout])
    fresh = converted is not m
    if not converted.has_canonical_format:  # duplicates or unsorted indices: torch wants neither
        if copy is False:
            raise _needs_copy_array(m, "it has duplicate or unsorted entries, which must be merged")
        converted = converted if fresh else converted.copy()
        converted.sum_duplicates()
        fresh = True
    if copy is False and (fresh or converted.format == "coo"):
        raise _needs_copy_array(m, f"torch needs it as {layout}, with int64 indices, which SciPy does not hold")
    relaid = (
        fresh
        or layout == torch.sparse_coo
        or converted.indices.dtype != np.int64  # int32 indices become int64
        or converted.indptr.dtype != np.int64
    )
    _sparse_copies(m, converted.data.nbytes, device, relaid)
    values = array_to_tensor(converted.data, Target(CPU, casts, None if fresh else copy))
    size = tuple(converted.shape)
    if layout == torch.sparse_coo:
        indices = torch.from_numpy(np.vstack([converted.row, converted.col]).astype(np.int64))
        t = torch.sparse_coo_tensor(indices, values, size, is_coalesced=True, check_invariants=False)
    else:
        if copy is False and (converted.indices.dtype != np.int64 or converted.indptr.dtype != np.int64):
            raise _needs_copy_array(m, "its index arrays are int32, and torch's sparse tensors need int64")
        build = _COMPRESSED_BUILDERS[layout]
        compressed, plain = _index_tensor(converted.indptr, copy), _index_tensor(converted.indices, copy)
        t = _quiet_first("compressed", build, compressed, plain, values, size, check_invariants=False)
    return t if device is CPU else _cast(t.to, device=device, dtype=t.dtype)


def _nd_coo_to_tensor(
    m: Any, device: torch.device, casts: Casts, copy: bool | None, layout: torch.layout | None
) -> torch.Tensor:
    """A 1-d or 3-d (n-d) scipy.sparse COO array as a COO tensor: CSR and the other compressed
    layouts are 2-d only, in SciPy and in torch."""
    if m.format != "coo" or layout not in (None, torch.sparse_coo):
        raise LeafError(
            ConversionError,
            f"is a {m.ndim}-d scipy.sparse array, which only the COO layout holds",
            describe_sparse(m),
            "pass {path}.toarray(), or leave sparse_layout= unset for a COO tensor",
        )
    if copy is False:
        raise _needs_copy_array(m, "torch needs its coordinates as one int64 array, which SciPy does not hold")
    _sparse_copies(m, m.data.nbytes, device, True)
    values = array_to_tensor(m.data, Target(CPU, casts, None))
    indices = torch.from_numpy(np.stack(m.coords).astype(np.int64))
    t = torch.sparse_coo_tensor(indices, values, tuple(m.shape), check_invariants=False)
    t = t.coalesce()  # duplicates summed, as for 2-d arrays
    return t if device is CPU else _cast(t.to, device=device, dtype=t.dtype)


def _sparse_copies(m: Any, nbytes: int, device: torch.device, relaid: bool) -> None:
    """Report a scipy.sparse object's copies before they are made: its new layout, its move."""
    if relaid:
        copied("layout", m, nbytes)
    if device is not CPU:
        crossing(m, nbytes, CPU, device, lambda: describe_sparse(m))


def restore_writes(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
    """check_writes: the tensors whose bits differ from their snapshot, each put back to it.

    Bits, not values: NaN equals itself and -0.0 differs from 0.0, so any write is seen.
    """
    changed = []
    with torch.no_grad():
        for t, snapshot in pairs:
            memory = compact(t.detach()) if expanded(t) else t.detach()  # snapshots of expanded tensors are compact
            now, before = memory.resolve_conj().resolve_neg(), snapshot.resolve_conj().resolve_neg()
            if now.is_complex():
                now, before = torch.view_as_real(now), torch.view_as_real(before)
            bits = _BITS[now.element_size()]  # a same-size view: any strides, bits compared
            # NumPy compares at twice torch.equal's speed (benchmarks, micro: "comparing 1 MiB").
            if not np.array_equal(now.view(bits).numpy(), before.view(bits).numpy()):
                memory.copy_(snapshot)
                changed.append(t)
    return changed


#: element size -> an integer dtype of that size: a view that compares bits.
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


# --------------------------------------------------------------------------- warnings

_quiet_lock = threading.Lock()
_quiet_done: set[str] = set()


def _quiet_first(kind: str, op: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``op``; the first time for ``kind``, with warnings caught.

    torch warns once per process when it first makes a complex32 tensor ("ComplexHalf
    support is experimental") or a CSR/CSC/BSR tensor ("Sparse CSR tensor support is in
    beta state"): remarks on torch's kernels, not on the user's code, so they must not
    leak from a conversion. Only the first op of each kind runs with warnings caught,
    under a lock because catch_warnings is process-global before Python 3.14.
    """
    if kind in _quiet_done:
        return op(*args, **kwargs)
    with _quiet_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = op(*args, **kwargs)
        _quiet_done.add(kind)
        return result


def _cast(op: Callable[..., torch.Tensor], *args: Any, **kwargs: Any) -> torch.Tensor:
    """Run ``op``, which makes a tensor of ``kwargs["dtype"]`` on ``kwargs["device"]`` (see
    _quiet_first); a device this torch cannot use raises a LeafError saying so."""
    try:
        if kwargs["dtype"] is torch.complex32:
            return _quiet_first("complex32", op, *args, **kwargs)  # type: ignore[no-any-return]
        return op(*args, **kwargs)
    except (AssertionError, RuntimeError) as e:
        # A CPU-only torch asserts "Torch not compiled with CUDA enabled"; a missing index is a
        # RuntimeError. Other failures (out of memory) are the caller's to see as they are.
        device = kwargs["device"]
        if _usable(device):
            raise
        raise LeafError(
            ConversionError,
            f"cannot be placed on {device}: this torch cannot use that device ({e})",
            f"device='{device}', with torch {torch.__version__} and {torch.cuda.device_count()} CUDA device(s)",
            "pass device= naming a device this machine has (or None: the caller's device)",
        ) from None


def _usable(device: torch.device) -> bool:
    try:
        torch.empty(0, device=device)
    except (AssertionError, RuntimeError):
        return False
    return True


def warn_at_caller(text: str, category: type[Warning]) -> None:
    """Warn with the location of the first frame outside autoconvert (generated code too) and wrapt."""
    level = 2  # stacklevel=2 names sys._getframe(1), our caller
    frame = sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename.startswith((_PACKAGE_DIR, GENERATED)) or _WRAPT_DIR in frame.f_code.co_filename
    ):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(text, category, stacklevel=level)
