"""The only code that converts one tensor to one array (dense, or a scipy.sparse matrix).

It tries the zero-copy route first (``t.numpy()``), which torch refuses with an exception in
every case that needs more care; only then does it look closer, copy, or refuse with a
``LeafError``. ``_to_torch`` is the other direction.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autoconvert._errors import ConversionError, LeafError

from . import _devices
from ._copies import copied, crossing
from ._describe import describe_tensor
from ._devices import CPU
from ._dtypes import TORCH_TO_NUMPY, WIDENED
from ._grad import DETACH, FORWARD_AD, GradPolicy, may_lose_gradient
from ._memory import compact, expanded, nbytes, needs_copy, tensor_refusal, transforming, untransformed
from ._sparse import SPARSE_LAYOUTS, tensor_to_sparse


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
    # requires grad"); requires_grad, common in training code, is checked first. Inside a
    # forward_ad.dual_level numpy() would hand a dual tensor's primal over without a word.
    if not t.requires_grad and FORWARD_AD._current_level < 0 and (widened is WIDENED or t.dtype not in widened):
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
    return slow_tensor_to_array(t, copy, grad, sparse, settle=settle, widened=widened)


def as_result(a: Any) -> Any:
    """A 0-d array among NumPy code's results as the NumPy scalar NumPy's own reductions give
    (``np.sum`` gives ``np.float64``): code taking results (cma's ``tell``, nlopt's objective)
    takes such scalars and may refuse 0-d arrays. Anything else as it is."""
    return a[()] if type(a) is np.ndarray and a.ndim == 0 else a


def slow_tensor_to_array(
    t: torch.Tensor,
    copy: bool | None,
    grad: GradPolicy,
    sparse: str,
    *,
    settle: bool = True,
    widened: dict[torch.dtype, torch.dtype] = WIDENED,
) -> tuple[Any, bool]:
    """``tensor_to_array`` past the zero-copy ``numpy()`` that torch turned down, without trying it
    again: the careful route (compare ``_to_torch._slow_array_to_tensor``)."""
    if t.layout in SPARSE_LAYOUTS and not t.is_meta:
        return tensor_to_sparse(t, copy, grad, sparse), False
    refusal = tensor_refusal(t)
    if refusal is not None:
        raise refusal
    if may_lose_gradient(t):
        t = grad.detach(t)
    if copy is None and expanded(t):
        # An expanded tensor (zero strides): convert its compact base, broadcast the array back.
        # Widening or resolving it whole would copy every repeat (bf16 zeros(1).expand(2e8): 766 MiB).
        a, shares = slow_tensor_to_array(compact(t), None, grad, sparse, settle=settle, widened=widened)
        return np.broadcast_to(a, tuple(t.shape)), shares
    try:
        if transforming() is not None:
            # A plain tensor (a constant the transformed function closes over): its values cross
            # as they are, not as the transform's ops would wrap them (with no storage).
            with untransformed():
                return _to_host(t, copy, settle, widened)
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
    """The rest of ``slow_tensor_to_array``: resolve bits, cross, widen, copy."""
    fresh = False
    # NumPy has no lazy conjugate or negative view: resolving the bit materialises a copy.
    if t.is_conj():
        if copy is False:
            raise needs_copy(t, "it has its conjugate bit set (a lazy .conj())")
        t, fresh = t.resolve_conj(), True
        copied("layout", t, nbytes(t))
    if t.is_neg():
        if copy is False:
            raise needs_copy(t, "it has its negative bit set (a lazy view such as .conj().imag)")
        t, fresh = t.resolve_neg(), True
        copied("layout", t, nbytes(t))
    wide = widened.get(t.dtype)
    if not t.is_cpu or wide is not None:
        if copy is False:
            why = f"it lives on {t.device}" if not t.is_cpu else f"NumPy lacks {t.dtype}, so it must widen to {wide}"
            raise needs_copy(t, why)
        if not t.is_cpu:
            crossing(t, nbytes(t), t.device, CPU, lambda: describe_tensor(t))
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
