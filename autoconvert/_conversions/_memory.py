"""Facts about a tensor's memory (expanded, compact, its extent, overlaps), the copy a
``copy=False`` call refuses, and check_writes' putting back of what the function changed (and
finding what it wrote into a private array, writeback's of an expanded tensor too), and a copy's
bits compared with a snapshot and written into its other side where they differ (a result's
copies of what its methods run on: see ResultFields.copies)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._errors import ConversionError, CopyError, LeafError

from ._describe import describe_tensor
from ._dtypes import TORCH_TO_NUMPY, WIDENED


def expanded(t: torch.Tensor) -> bool:
    """Whether ``t`` repeats elements through a zero stride (``expand()``, ``broadcast_to``);
    an empty tensor repeats nothing."""
    strides = t.stride()
    # `0 in strides` first: the common no-zero case costs one tuple scan in C, not a loop here.
    return 0 in strides and t.numel() > 0 and any(st == 0 and n > 1 for n, st in zip(t.shape, strides, strict=True))


def overlapping(t: torch.Tensor) -> bool:
    """Whether two of ``t``'s elements share one memory location through non-zero strides
    (``as_strided((4, 4), (2, 1))``, ``unfold`` with a step below its size): a write to one
    is a write to the other, as with an expanded tensor's repeats. See ``strides_overlap``."""
    # is_contiguous first: the common case costs one C call.
    return not t.is_contiguous() and t.layout == torch.strided and strides_overlap(t.shape, t.stride())


def strides_overlap(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a strided layout (strides in any unit, negative ones as NumPy's) reaches one
    location from two indices, zero strides left to ``expanded``; also true where that is
    too costly to decide, a rare layout only ``as_strided`` makes.

    Exact, from sizes and strides alone (torch's ``_debug_has_internal_overlap`` is private and
    answers "too hard" for every layout with non-zero strides that is not dense): sorted by
    stride, a dimension whose stride exceeds the reach of all smaller ones cannot meet them,
    and is set aside; two dimensions left meet exactly when the smallest steps giving one
    offset (``s2 / gcd``, ``s1 / gcd``) fit in their sizes; more are counted element by element.
    """
    if 0 in shape:
        return False  # no element at all
    dims = sorted([(abs(st), n) for n, st in zip(shape, strides, strict=True) if n > 1 and st])
    reach = [0]  # reach[k]: the farthest offset dims[:k] reach
    for st, n in dims:
        reach.append(reach[-1] + (n - 1) * st)
    while dims and dims[-1][0] > reach[len(dims) - 1]:
        dims.pop()
    if len(dims) < 2:
        return False
    if len(dims) == 2:
        (s1, n1), (s2, n2) = dims
        g = math.gcd(s1, s2)
        return s2 // g < n1 and s1 // g < n2
    if math.prod(n for _, n in dims) > _COUNTED:
        return True
    offsets = np.zeros((), dtype=np.int64)
    for st, n in dims:
        offsets = np.add.outer(offsets, np.arange(n, dtype=np.int64) * st)
    return len(np.unique(offsets)) < offsets.size


#: The most elements ``strides_overlap`` counts one by one (a few milliseconds).
_COUNTED = 1 << 16


def compact(t: torch.Tensor) -> torch.Tensor:
    """An expanded tensor's memory: ``t`` with every zero-stride dimension cut to size 1."""
    return t.as_strided([1 if st == 0 else n for n, st in zip(t.shape, t.stride(), strict=True)], t.stride())


def memory_of(t: torch.Tensor) -> torch.Tensor:
    """The memory ``t``'s elements lie in, as a tensor: ``t`` itself, compact where expanded."""
    return compact(t) if expanded(t) else t


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


def needs_copy(t: torch.Tensor, why: str) -> LeafError:
    return LeafError(
        CopyError,
        f"cannot be shared with NumPy without a copy: {why}",
        describe_tensor(t),
        "use copy=None to copy only when needed, or copy=True for a private copy",
    )


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def restore_writes(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
    """check_writes: the tensors whose bits differ from their snapshot, each put back to it.

    Bits, not values: NaN equals itself and -0.0 differs from 0.0, so any write is seen.
    """
    changed = []
    with torch.no_grad():
        for t, snapshot in pairs:
            memory = memory_of(t.detach())  # snapshots of expanded tensors are compact
            now, before = memory.resolve_conj().resolve_neg(), snapshot.resolve_conj().resolve_neg()
            if now.is_complex():
                now, before = torch.view_as_real(now), torch.view_as_real(before)
            bits = _BITS[now.element_size()]  # a same-size view: any strides, bits compared
            # NumPy compares at twice torch.equal's speed (benchmarks, micro: "comparing 1 MiB").
            if not np.array_equal(now.view(bits).numpy(), before.view(bits).numpy()):
                memory.copy_(snapshot)
                changed.append(t)
    return changed


def snapshot_private(compared: list[Any]) -> None:
    """Keep a copy of each private array of ``compared`` (``(tensor, array)``, made ``(tensor,
    array, copy)`` in place), once its transfer settled: an array handed read-only (an expanded
    tensor's memory under writeback, a widened copy under check_writes) can still be written
    around the flag (``torch.from_numpy``), which would reach the private array only and vanish,
    so ``written_private`` finds it instead."""
    for i, (t, a) in enumerate(compared):
        compared[i] = (t, a, a.copy())


def written_private(compared: list[Any]) -> list[torch.Tensor]:
    """The tensors whose private array (see snapshot_private) the function changed.

    Bits, not values: NaN equals itself and -0.0 differs from 0.0, so any write is seen.
    """
    return [t for t, a, before in compared if not _same_bits(a, before)]


def same_bits(x: Any, y: Any) -> bool:
    """Whether ``x`` and ``y``, two tensors or two arrays, hold the same bits at one shape, dtype
    and device (a copy kept one state with its source by value: see ResultFields.copies).

    Bits, not values: NaN equals itself and -0.0 differs from 0.0, so any write is seen.
    """
    if isinstance(x, np.ndarray):
        if not (isinstance(y, np.ndarray) and x.shape == y.shape and x.dtype == y.dtype):
            return False
        # Small ones as bytes: a tenth of the cost of NumPy's comparison; large ones without the copies.
        return x.tobytes() == y.tobytes() if x.nbytes <= _AS_BYTES else _same_bits(x, y)
    if not (isinstance(y, torch.Tensor) and x.shape == y.shape and x.dtype == y.dtype and x.device == y.device):
        return False
    return torch.equal(_tensor_bits(x), _tensor_bits(y))


def _tensor_bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bits, as a same-size integer view (any strides); a complex one's as pairs of reals,
    its conjugate or negative view resolved first, so that the bits are its values'."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj().resolve_neg())
    return t.view(_BITS[t.element_size()])


#: The size up to which ``same_bits`` compares two arrays' bytes.
_AS_BYTES = 1 << 16


def bits_snapshot(value: Any) -> Any:
    """A copy of the tensor or array ``value``, to tell a later write into it (see ``same_bits``)."""
    return value.copy() if isinstance(value, np.ndarray) else value.detach().clone()


def written_at(now: Any, was: Any) -> Any:
    """Where ``now`` differs from ``was``, a snapshot of it (see ``same_bits``), bit for bit: a
    boolean mask of ``now``'s kind; None where its shape changed (``resize_``)."""
    if now.shape != was.shape:
        return None
    if isinstance(now, np.ndarray):
        if now.dtype.kind == "c":
            return written_at(now.real, was.real) | written_at(now.imag, was.imag)
        if now.itemsize not in _NUMPY_BITS:  # longdouble: by value
            return np.asarray(now != was)
        return np.asarray(now.view(_NUMPY_BITS[now.itemsize]) != was.view(_NUMPY_BITS[now.itemsize]))  # 0-d too
    differs = _tensor_bits(now) != _tensor_bits(was)
    return differs.any(-1) if now.is_complex() else differs  # a complex element: its two reals


def write_into(target: Any, source: Any, at: Any = None) -> None:
    """``source``'s values written into ``target`` in place (a tensor into a tensor, an array into
    an array), where the mask ``at`` (either kind; None: everywhere) is true: the other elements
    keep their own values (a float32 array the caller's bfloat16 copy was made from keeps its
    precision there). Raises as NumPy and torch do where it cannot take them (read-only, another shape)."""
    if isinstance(target, np.ndarray):
        where = True if at is None else at if isinstance(at, np.ndarray) else at.cpu().numpy()
        np.copyto(target, source, where=where)
        return
    if at is not None:
        mask = at.to(target.device) if isinstance(at, torch.Tensor) else torch.from_numpy(at).to(target.device)
        source = torch.where(mask, source, target)
    # Not recorded by autograd, as a write through NumPy is not; an inference tensor takes it in inference mode alone.
    with torch.no_grad(), torch.inference_mode() if target.is_inference() else contextlib.nullcontext():
        target.copy_(source)


#: element size -> the unsigned dtype of that size: a view that compares bits.
_NUMPY_BITS = {1: "u1", 2: "u2", 4: "u4", 8: "u8"}


def _same_bits(a: NDArray[Any], b: NDArray[Any]) -> bool:
    """Whether ``a`` and ``b`` (of one dtype and shape) hold the same bits, whatever their strides."""
    if a.itemsize in (1, 2, 4, 8):  # a same-size view: any strides
        bits = f"u{a.itemsize}"
        return bool(np.array_equal(a.view(bits), b.view(bits)))
    return a.tobytes() == b.tobytes()  # complex128: C order, both


#: element size -> an integer dtype of that size: a view that compares bits.
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def tensor_refusal(t: torch.Tensor) -> LeafError | None:
    """Why ``t`` can never become an array (or ``None``): what NumPy has no way to hold."""
    if functorch_wrapped(t):
        problem = (
            "is being transformed by torch.vmap or torch.func (a functorch-wrapped tensor), which NumPy code cannot see"
        )
        fix = (
            "for gradients, make the function an autoconvert.numpy_op with backward= (torch.func.grad, vjp, "
            "jacrev) or jvp= (torch.func.jvp, jacfwd); for a batch, loop over it (autoconvert.batched) instead of "
            "torch.vmap"
        )
    elif type(t).__name__ == "FakeTensor":
        problem = "is a FakeTensor (torch.compile's tracing, or FakeTensorMode), which holds no data"
        fix = "run the call eagerly, or make the function an autoconvert.numpy_op(fake=...) so tracing never runs NumPy"
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
    elif type(t).__name__ == "DTensor":
        problem = "is a DTensor, spread over a device mesh, whose data NumPy cannot see"
        fix = "pass {path}.full_tensor() (its whole value, gathered onto every rank), or {path}.to_local() (this rank's shard)"
    elif _dispatching_subclass(t):
        problem = (
            f"is a {type(t).__qualname__}, a tensor subclass with its own __torch_dispatch__, whose data NumPy "
            "cannot see (torch refuses its .numpy())"
        )
        fix = "pass the plain tensor it stands for, as the subclass gives it (a DTensor's full_tensor(), say)"
    elif t.dtype not in TORCH_TO_NUMPY and t.dtype not in WIDENED:
        problem = f"has dtype {t.dtype}, which NumPy lacks and which no NumPy dtype holds exactly"
        fix = "convert it first, for example {path}.to(torch.float32)"
    else:
        return None
    return LeafError(ConversionError, problem, describe_tensor(t), fix)


def _dispatching_subclass(t: torch.Tensor) -> bool:
    """Whether ``t``'s class has its own ``__torch_dispatch__`` (wrapper subclasses made with
    ``_make_wrapper_subclass``, DTensor): torch refuses such a tensor's ``.numpy()`` ("not
    supported for tensor subclasses"), its data being other tensors or none."""
    kind = type(t)
    return kind is not torch.Tensor and getattr(kind, "__torch_dispatch__", None) is not _PLAIN_DISPATCH


#: torch.Tensor's own ``__torch_dispatch__``, which plain subclasses (``nn.Parameter``) inherit.
_PLAIN_DISPATCH = getattr(torch.Tensor, "__torch_dispatch__", None)


# torch.vmap and torch.func wrap tensors in ones with no storage ("Cannot access data pointer").
functorch_wrapped: Callable[[torch.Tensor], bool] = getattr(
    getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", lambda t: False
)

_functorch: Any = getattr(torch._C, "_functorch", None)  # None where functorch_wrapped is never true

#: A block whose ops see tensors as they are, not as torch.func's transforms wrap them: inside
#: ``torch.func.grad`` an op makes a wrapped tensor, with no storage, even ``numpy()`` of a
#: plain one ("Cannot access data pointer of Tensor that doesn't have storage").
untransformed: Callable[[], contextlib.AbstractContextManager[Any]] = getattr(
    torch._C, "_DisableFuncTorch", contextlib.nullcontext
)


#: The innermost torch.func transform's level, None outside all (feature-detected: torch 2.4 has
#: it). Inside one, its ops wrap every tensor they touch, so even a plain tensor's ``numpy()`` fails.
transforming: Callable[[], int | None] = getattr(_functorch, "maybe_current_level", lambda: None)


def untracked(t: torch.Tensor) -> torch.Tensor:
    """``t`` detached, with no torch.func gradient transform's wrapping (``torch.func.grad``,
    ``vjp``, ``jacrev``, ``jvp``, ``jacfwd`` wrap it once per level): the values a computation
    whose gradient flows elsewhere reads (a spline built from samples its call differentiates
    in), in an ``untransformed`` block. A tensor torch.vmap batches keeps its wrapping, which
    the conversion refuses (and ``detach`` too: ask ``ungraded`` first)."""
    return ungraded(t).detach()


def ungraded(t: torch.Tensor) -> torch.Tensor:
    """``t`` without torch.func's gradient transforms' wrapping (``untracked``'s, not detached)."""
    while functorch_wrapped(t) and _functorch.is_gradtrackingtensor(t):
        t = _functorch.get_unwrapped(t)
    return t


def storage_address(t: torch.Tensor) -> int:
    """Where ``t``'s storage starts, under any torch.func wrapping (whose tensors have no
    storage of their own): what tells tensors sharing memory apart."""
    while functorch_wrapped(t):
        t = _functorch.get_unwrapped(t)
    return t.untyped_storage().data_ptr()
