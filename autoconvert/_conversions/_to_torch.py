"""The only code that converts one array (dense, or a scipy.sparse matrix) to one tensor.

It tries the zero-copy route first (``torch.from_numpy``), which torch refuses with an
exception in every case that needs more care; only then does it look closer, copy, or
refuse with a ``LeafError``. ``_to_numpy`` is the other direction.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._errors import ConversionError, CopyError, LeafError, NoDeviceError

from . import _devices
from ._copies import copied, crossing, watching
from ._describe import describe_array, describe_tensor
from ._devices import CPU
from ._dtypes import INTEGERS, NUMPY_TO_TORCH, TORCH_TO_NUMPY, Casts, narrows
from ._memory import nbytes, tensor_refusal

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


def state_refusal(a: NDArray[Any] | np.generic, holder: str = "a tensor") -> LeafError | None:
    """Why an array subclass cannot become ``holder``, which would hold its numbers alone: the
    state they mean nothing without (a mask, a unit) would be silently lost. None for others."""
    if type(a) is np.ndarray or isinstance(a, np.generic):
        return None
    unit = _unit(a)
    if _masked(a) and unit is not None:  # both fixes at once: each alone meets the other refusal
        problem = (
            f"is a masked array in {unit}; {holder} has no mask and no unit, and dropping them would silently "
            "unmask values and lose the unit"
        )
        fix = (
            "use {path}.filled(fill_value).to_value(unit), the numbers in the unit you choose, or "
            "{path}.unmasked.to_value(unit) and {path}.mask as two arrays"
        )
    elif _masked(a):
        problem = f"is a masked array; {holder} has no mask, and dropping it would silently unmask values"
        fix = "use {path}.filled(fill_value), or the data and the mask as two arrays"
    elif unit is not None:
        problem = (
            f"is a {type(a).__qualname__} in {unit}, an array subclass that carries a unit; {holder} holds "
            "the numbers only, and the unit would be silently lost"
        )
        fix = "pass the numbers in the unit you choose: {path}.to_value(unit) (astropy), or {path}.value"
    else:
        return None
    return LeafError(ConversionError, problem, describe_array(a), fix)


def _array_refusal(a: NDArray[Any] | np.generic) -> LeafError | None:
    """Why ``a`` can never become a tensor (or ``None``)."""
    if (refusal := state_refusal(a)) is not None:
        return refusal
    if a.dtype.kind in _UNHOLDABLE:
        problem, fix = _UNHOLDABLE[a.dtype.kind]
    elif a.dtype.newbyteorder("=") not in NUMPY_TO_TORCH:
        problem = f"has dtype {a.dtype}, which torch lacks"
        nearest = "np.complex128" if a.dtype.kind == "c" else "np.float64"  # never drop an imaginary part
        fix = f"cast it first, for example {{path}}.astype({nearest}), if the lost precision is acceptable"
    else:
        return None
    return LeafError(ConversionError, problem, describe_array(a), fix)


def _masked(a: Any) -> bool:
    """Whether an array subclass carries a mask (``np.ma``'s, astropy's ``Masked``: a ``mask``
    that is data, not a method), which its numbers mean nothing without: found by the
    attribute, so no library is named or imported."""
    mask = getattr(a, "mask", None)
    return mask is not None and not callable(mask)


def _unit(a: Any) -> Any:
    """The physical unit an array subclass carries (astropy's ``Quantity.unit``, unyt's
    ``units``), or None: its numbers mean nothing without it."""
    for name in ("unit", "units"):
        unit = getattr(a, name, None)
        if unit is not None and not callable(unit):
            return unit
    return None


def _stride_fix(a: NDArray[Any]) -> NDArray[Any] | str | None:
    """How ``a`` must change before torch can share it.

    Returns ``None`` when ``torch.from_numpy(a)`` may share it as it is, a zero-copy
    re-strided view when only unused strides are wrong, or why a copy is due.
    """
    if not a.dtype.isnative:
        return "its byte order is not the machine's"
    strides = a.strides
    used = () if a.size == 0 else [s for s, n in zip(strides, a.shape, strict=True) if n > 1]
    if 0 in used:  # before its writeable flag, whose reading warns for np.broadcast_arrays' views
        return "it is a broadcast view (a zero stride), so one element would alias many"
    if not a.flags.writeable:
        # torch has no read-only tensors; sharing would let torch code write into memory
        # NumPy promised nobody writes (a read-only input, a memory-mapped file).
        return "it is read-only, and torch tensors are always writable"
    if not a.flags.aligned:
        return "its data is not aligned for its dtype"
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
#: its ``__new__`` (benchmarks, micro: "a per-call NamedTuple").
new_tuple = tuple.__new__


class Target(NamedTuple):
    """Where one call's arrays go: a tensor leaf's per-call context."""

    #: None: the call's tensors disagreed (an error only where a result must be placed).
    device: torch.device | None
    casts: Casts
    copy: bool | None
    #: The call's tensors, where a leaf needs them: those a tensor input side passes through
    #: as they are; the arguments an output tensor must not alias (see _outputs.NeedsInputs).
    tensors: list[torch.Tensor] | None = None
    #: An input side's (array, tensor, its version, its values) for each private copy, uncast on the CPU, of a writable
    #: array torch cannot share (negative strides, a zero stride, byte order, alignment): what
    #: the function writes into it is copied back after the call (see _spec/_copy_back). None
    #: where a copy is its holder's alone (a result, to_tensor's).
    copies: list[tuple[NDArray[Any], torch.Tensor, int, NDArray[Any]]] | None = None
    #: The tensor input side's containers rebuilt for the function, by the caller's (see
    #: _mutations.Rebuilt): what it changes in them reaches the caller's. None: none are rebuilt.
    rebuilt: dict[int, tuple[Any, Any, Any]] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # Copied or unpickled (a result's methods keep their call's), its CPU the one CPU object
        # again: the per-call path tells "stays on the CPU" by identity.
        return _target_again, tuple(self)


def _target_again(device: torch.device | None, *rest: Any) -> Target:
    return Target(device if device is None else _devices.normal(device), *rest)


def target(
    device: torch.device | None,
    casts: Casts,
    copy: bool | None,
    tensors: list[torch.Tensor] | None = None,
    copies: list[tuple[NDArray[Any], torch.Tensor, int, NDArray[Any]]] | None = None,
    *,
    rebuilt: dict[int, tuple[Any, Any, Any]] | None = None,
) -> Target:
    """A ``Target``, made as cheaply as a tuple: a leaf context is made per call."""
    return new_tuple(Target, (device, casts, copy, tensors, copies, rebuilt))


def _recorded(a: NDArray[Any] | np.generic, t: torch.Tensor, target: Target) -> torch.Tensor:
    """``t``, a private copy of ``a`` uncast on the CPU, recorded in ``target.copies`` where
    ``a`` is a writable array of an input side's under copy=None, whose writes reach it then."""
    copies = target.copies
    if copies is None or target.copy is not None or not a.flags.writeable:
        return t
    if t.is_inference():  # an inference tensor has no version counter (see _copy_back): a plain one over its memory
        with torch.inference_mode(False):
            t = torch.from_numpy(t.numpy())
    # Its values as handed: the copy back writes only the elements the function changed, so that
    # a write through another argument viewing the same array stays, and a write torch does not
    # count (x.data, x.numpy()) reaches the caller too.
    copies.append((a, t, t._version, t.numpy().copy(order="K")))  # type: ignore[arg-type]  # a writable one is an array
    return t


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
    device, casts, copy, _, _, _ = target
    t = None
    if type(a) is _ndarray:
        # torch.from_numpy raising costs as much as many conversions (a C++ exception with a
        # long message: benchmarks, micro: "an array torch refuses"), so only arrays it almost
        # surely accepts try it: "behaved" (aligned and writable), C- or Fortran-contiguous
        # ("forc": no zero or negative strides but numpy#23349's size-1 axes), native byte order.
        if flags.forc and flags.behaved and a.dtype.isnative:
            try:
                t = _from_numpy(a)
            except (TypeError, ValueError):  # a dtype torch lacks, a size-1 axis's stride
                pass
            else:
                if device is CPU and not casts and not copy:  # shared, uncast: done
                    return t
        elif device is CPU and not casts and copy is not False:
            fresh = _numpy_copy(a, flags)
            if fresh is not None:
                if watching() is not None:  # unwatched, not even a.nbytes is read
                    copied("layout", a, a.nbytes)
                return _recorded(a, _from_numpy(fresh), target)
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
        moved = _cast(_devices.to_device, t, device=device, dtype=dtype)
        if moved is not t:  # .to() is a no-op for "cuda" when t already is on the current GPU
            return moved
    if copy and shared:
        copied("copy=True", a, a.nbytes)
        return _host_copy(t)
    return t if shared else _recorded(a, t, target)


def _numpy_copy(a: NDArray[Any], flags: Any) -> NDArray[Any] | None:
    """The one host copy the careful route makes of a plain array torch cannot share as it is,
    made straight away, or None where that route decides more (refusals, broadcast views,
    shareable strides, large read-only arrays).

    NumPy's copy in "K" order, native and positively strided, which torch shares: the careful
    route costs several times that for small arrays (benchmarks, micro: "a negatively strided
    array", "copying a read-only 8-element view").
    """
    held = a.dtype
    if held not in NUMPY_TO_TORCH:  # its keys are native: a byte-swapped dtype torch has, or a refusal
        native = held.newbyteorder("=")
        return a.astype(native) if native in NUMPY_TO_TORCH else None  # a copy in "K" order
    if not flags.aligned:
        return a.copy("K")
    if flags.forc:  # so read-only (a view of a handed input, most often)
        return a.copy("K") if a.nbytes < SMALL_COPY_BYTES else None
    shape = a.shape
    axis = 0
    for stride in a.strides:
        if stride < 0 and shape[axis] > 1:  # a reversed view: a[::-1], np.flip
            return a.copy("K")
        axis += 1  # noqa: SIM113 - a counter: enumerate() and zip() cost more per axis
    return None


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
    return clone(t)


_SAME_SIZE_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def clone(t: torch.Tensor) -> torch.Tensor:
    """``t.clone()``, which keeps autograd history, conj and neg bits; for a dtype torch has no
    copy kernel for (the sub-byte torch.uint4, int4... in the torch versions that have them),
    its bytes copied through an integer view of the same element size."""
    try:
        if type(t) is torch.Tensor:
            return t.clone()
        with warnings.catch_warnings():  # a subclass's copy is made the way the subclass makes it
            # torch.masked's MaskedTensor warns at each construction, a copy included (torch 2.0 on).
            warnings.filterwarnings("ignore", "The PyTorch API of MaskedTensors is in prototype stage", UserWarning)
            return t.clone()
    except (NotImplementedError, RuntimeError) as e:  # torch 2.4 raised RuntimeError, later ones NotImplementedError
        carrier = _SAME_SIZE_INTS.get(t.element_size())
        if carrier is None or "not implemented" not in str(e):
            raise
        return t.view(carrier).clone().view(t.dtype)


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
    if not plain.dtype.isnative or not plain.flags.aligned or any(s < 0 for s in plain.strides):
        # torch.tensor() refuses byte-swapped and negatively strided arrays, and crashes on
        # unaligned complex ones (pytorch#190043): NumPy makes the one (aligned, native,
        # positively strided) copy on the host, and torch shares it (the caller moves it).
        copied("layout", a, plain.nbytes)
        fresh = np.array(plain, dtype=plain.dtype.newbyteorder("="), order="K", copy=True)
        return torch.from_numpy(fresh), False
    if device is CPU:
        copied("layout", a, plain.nbytes)
    else:  # torch.tensor() copies it to the device in one step
        crossing(a, plain.nbytes, CPU, device, lambda: describe_array(a))
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
            raise tensor_refusal(t)  # type: ignore[misc]  # a meta tensor always has one
        crossing(t, nbytes(t), t.device, device, lambda: describe_tensor(t))
    elif dtype != t.dtype:
        copied("cast", t, t.numel() * dtype.itemsize)
    moved = _cast(_devices.to_device, t, device=device, dtype=dtype) if crosses or dtype != t.dtype else t
    if moved is t and copy:
        copied("copy=True", t, nbytes(t))
        return _host_copy(t) if t.is_cpu else clone(t)
    if moved is not t and copy is False:
        raise LeafError(
            CopyError,
            f"cannot reach {device} as {moved.dtype} without a copy",
            describe_tensor(t),
            "use copy=None to copy only when needed, or copy=True for a private copy",
        )
    return moved


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
