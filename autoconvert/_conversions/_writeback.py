"""``writeback=True``: what the function wrote, made the caller's.

Arguments that share memory (``f(t, t)``, ``f(t, t[0])``) must stay aliased when they need
a private copy (bfloat16 widened, a conj bit resolved, a device crossed, ``copy=True``):
each gets a view of ONE private copy of the memory they span, so NumPy sees its own
aliasing and the copy back is one copy, whatever the dtype.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._errors import ConversionError, LeafError

from ._copies import copied
from ._describe import describe_tensor
from ._grad import GradPolicy, may_lose_gradient
from ._memory import extent
from ._to_numpy import tensor_to_array

#: (tensor, private array) to copy back, or (tensor, None): the function wrote into its memory.
Pairs = list[tuple[torch.Tensor, NDArray[Any] | None]]


class Span:
    """The memory several arguments share, as one array they all view.

    ``source`` covers it in the members' dtype (a 1-d view of their storage, from element
    ``start``); ``array`` is ``source`` converted, made by the first member converted.
    A span whose members differ in dtype or conj/neg bits has no ``source``: they cannot
    view one array, so each converts alone and must share the caller's memory.
    """

    __slots__ = ("array", "private", "source", "start")

    def __init__(self, source: torch.Tensor | None, start: int) -> None:
        self.source = source
        self.start = start
        self.array: NDArray[Any] | None = None
        self.private = False  # the array is a private copy: its views are handed over (see hand_over)

    def view(
        self,
        t: torch.Tensor,
        pairs: Pairs,
        handed: list[Private],
        *,
        copy: bool | None,
        grad: GradPolicy,
        widened: Any,
    ) -> Any:
        """Member ``t`` as a view of the span's array (converted on first use, then written
        back once); views of a private array are recorded in ``handed``."""
        if may_lose_gradient(t):
            grad.detach(t)  # the policy speaks for the member; the source is detached already
        if self.source is None:
            a, shared = tensor_to_array(t, copy, grad, settle=False, widened=widened)
            if not shared:
                raise LeafError(
                    ConversionError,
                    "shares memory with another argument of another dtype or conj/neg bit, and needs a private "
                    "copy; writes through one array could not be seen through the other, and one copy back "
                    "would undo the other's",
                    describe_tensor(t),
                    "pass {path}.clone() (the function's writes to it are then dropped), or one view of the memory",
                )
            pairs.append((t, None))
            return a
        if self.array is None:
            array, shared = tensor_to_array(self.source, copy, grad, settle=False, widened=widened)
            pairs.append((self.source, None if shared else array))
            self.array = array
            self.private = not shared
        array = self.array
        offset = t.storage_offset() - self.start
        strides = tuple(s * array.itemsize for s in t.stride())
        view = np.lib.stride_tricks.as_strided(array[offset:], tuple(t.shape), strides)
        return hand_over(view, handed) if self.private else view


def aliased_spans(tensors: list[torch.Tensor]) -> dict[int, Span]:
    """``id(tensor) -> Span`` for the strided tensors that share a storage with another
    (the same tensor passed twice counts); empty, and cheap, when none do."""
    if len(tensors) < 2:
        return {}
    groups: dict[tuple[torch.device, int], list[torch.Tensor]] = {}
    for t in tensors:
        key = _memory(t)
        if key is not None:
            groups.setdefault(key, []).append(t)
    spans: dict[int, Span] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        span = _span(members)
        for t in members:
            spans[id(t)] = span
    return spans


def _memory(t: torch.Tensor) -> tuple[torch.device, int] | None:
    """Where a strided tensor's storage starts; None for what has no memory to share
    (empty, meta, sparse, nested, functorch or fake tensors: the leaf says what it refuses)."""
    if t.layout != torch.strided or t.is_nested or t.is_meta or not t.numel():
        return None
    try:
        return t.device, t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def _span(members: list[torch.Tensor]) -> Span:
    first = members[0]
    family = (first.dtype, first.is_conj(), first.is_neg())
    if any((t.dtype, t.is_conj(), t.is_neg()) != family for t in members):
        return Span(None, 0)
    start = min(int(t.storage_offset()) for t in members)
    stop = max(t.storage_offset() + extent(t) for t in members)
    # The largest storage: members may be tensors made apart over one memory (from_numpy twice).
    base = max(members, key=lambda t: t.untyped_storage().nbytes()).detach()
    return Span(base.as_strided((stop - start,), (1,), start), start)


class WriteBackFailed(Exception):  # noqa: N818 - a signal to the Runner, which raises the public error
    """Copying a private array back into ``tensor`` failed with ``error`` (the function
    reshaped the array, say); the Runner names the argument."""

    def __init__(self, tensor: torch.Tensor, error: Exception) -> None:
        super().__init__(str(error))
        self.tensor = tensor
        self.error = error


def write_back(pairs: Pairs) -> None:
    """Make what a function wrote the caller's: copy private arrays back into their tensors,
    and tell autograd about writes into shared memory (``None``), as an in-place op would.
    Raises ``WriteBackFailed`` for the first tensor that cannot take its array back;
    the others are still written."""
    failed: WriteBackFailed | None = None
    for t, a in pairs:
        # An inference tensor has no version counter, and takes writes only in inference mode.
        inference = t.is_inference()
        if a is None:
            # NumPy wrote straight into t's memory, unseen by autograd's version counter:
            # a tensor saved for backward would give silently wrong gradients.
            if not inference:
                torch.autograd.graph.increment_version(t)  # type: ignore[no-untyped-call, unused-ignore]  # untyped in torch 2.4
            continue
        copied("writeback", t, a.nbytes)
        try:
            source = torch.from_numpy(a) if a.flags.writeable else torch.tensor(a)
            # copy_ narrows the dtype, crosses devices, honours conj/neg bits of t, and, on a
            # detached view sharing t's version counter, tells autograd too.
            with torch.no_grad(), torch.inference_mode(inference):
                t.detach().copy_(source)
        except (RuntimeError, TypeError, ValueError) as e:
            failed = failed or WriteBackFailed(t, e)
    if failed is not None:
        raise failed


#: Private arrays frozen after their copy back, by id, for the error a later write meets.
FROZEN: weakref.WeakValueDictionary[int, NDArray[Any]] = weakref.WeakValueDictionary()


class Private:
    """A private array as the function got it: ``array``, a view of ``owner``, itself a view
    of the private array that only ``array``, this record and the views the function makes
    hold (NumPy sets a view's base to the first array up the chain that owns its memory or
    whose base is no array: ``owner``'s is a memoryview, ten times cheaper than as_strided's
    holder). So ``owner``'s references beyond the ``references`` counted at hand-over are the
    views the function kept, which freezing the private array leaves writable (a view has
    its own WRITEABLE flag), and which must be found. ``as_strided`` (and
    ``sliding_window_view``) make theirs through a holder of the array they are given, which
    adds to that array's references, not ``owner``'s: ``array``'s references beyond the
    ``held`` counted once the call's arguments hold it (see handed_over) may be such holders,
    made during the call: among the collector's youngest objects, unless it ran since the
    ``collections`` counted then."""

    __slots__ = ("array", "collections", "held", "owner", "references")

    def __init__(self, private: NDArray[Any]) -> None:
        self.owner = np.asarray(memoryview(private))  # type: ignore[arg-type, unused-ignore]  # ndarray exports a buffer; stubs before NumPy 2.5 do not say
        self.array = self.owner[...]
        self.references = _references(self)
        self.held = _references_held(self)
        self.collections = -1  # unknown: every object is searched


def _references(handed: Private) -> int:
    """The references to ``handed.owner``; called the same way at hand-over and after the
    call, so that its own temporary references cancel out."""
    return sys.getrefcount(handed.owner)


def _references_held(handed: Private) -> int:
    """The references to ``handed.array``, as _references counts ``owner``'s."""
    return sys.getrefcount(handed.array)


def hand_over(private: NDArray[Any], handed: list[Private]) -> NDArray[Any]:
    """``private`` as the function gets it (see Private), recorded in ``handed``."""
    record = Private(private)
    handed.append(record)
    return record.array


def handed_over(handed: Iterable[Private]) -> None:
    """Count the references to the arrays ``handed`` once the call's arguments (its tuples,
    dicts and rebuilt containers) hold them, just before the call: those the call adds
    beyond are what the function kept."""
    collections = _collections()
    for record in handed:
        record.held = _references_held(record)
        record.collections = collections


def _collections() -> int:
    """The collections the garbage collector has made, of every generation."""
    return sum(generation["collections"] for generation in gc.get_stats())


#: The holder through which ``as_strided`` (and so ``sliding_window_view``) makes its view:
#: the view's base, holding the array it was given as its own ``base``.
_HOLDER: type[Any] = type(np.lib.stride_tricks.as_strided(np.zeros(1)).base)


def _kept_through(record: Private) -> bool:
    """Whether an as_strided holder or a ``memoryview`` made during the call holds
    ``record.array`` (see Private): the collector's youngest objects are searched, all of
    them if it ran since the hand-over. Its runs are counted after the young are listed: an
    allocation on the way (the list, the statistics) may run it and move them on."""
    objects = gc.get_objects(0)
    if _collections() != record.collections:
        objects = gc.get_objects()
    array = record.array
    return any(
        (type(o) is _HOLDER and o.base is array) or (type(o) is memoryview and _exported(o) is array) for o in objects
    )


def _exported(view: memoryview) -> Any:
    """The object a ``memoryview`` exports the buffer of; None once it is released."""
    try:
        return view.obj
    except ValueError:  # "operation forbidden on released memoryview object"
        return None


def _under(value: Any) -> Any:
    """What ``value`` (an array, an as_strided holder, a memoryview) views: its base, or the
    object a memoryview exports (``np.frombuffer(memoryview(a))`` views ``a``); None for
    anything else."""
    if type(value) is memoryview:
        return _exported(value)
    if type(value) is _HOLDER or issubclass(type(value), np.ndarray):
        return value.base
    return None


def _made_of(view: Any, owner: NDArray[Any]) -> bool:
    """Whether ``view`` (an array or a memoryview) views ``owner``: as its base, or through
    ``as_strided``'s holders, memoryviews and the arrays they hold (``as_strided`` of
    ``as_strided`` chains them)."""
    base: Any = _under(view)
    while base is not owner:
        if base is None:
            return False
        base = _under(base)
    return True


def make_private_read_only(pairs: Pairs, handed: Iterable[Private], returned: Iterable[Any]) -> None:
    """Make the private arrays a call was handed (``pairs``' arrays, the views of them handed
    over and every view the function kept of those) read-only once copied back: a write made
    after the call (by a closure, a context manager or an object that kept one) would reach
    the copy only, so NumPy refuses it instead. Arrays the function ``returned`` (anywhere in
    its result) stay writable, and so do the views of one: they are the caller's result, no
    longer the tensor's."""
    returned = [r for r in returned if isinstance(r, np.ndarray)]
    for _, a in pairs:
        if a is not None and all(a is not r for r in returned):
            _make_read_only(a)
    for record in handed:
        if any(r is record.array or _made_of(r, record.owner) for r in returned):
            continue
        _make_read_only(record.array)
        _make_read_only(record.owner)  # a view made of it later is read-only, and known by its base (see _failures)
        # Rare, and searching the heap costs a fraction of a second: views of owner kept, or
        # the array kept (by the function itself, or by as_strided's holders or memoryviews:
        # then searched).
        if _references(record) > record.references or (
            _references_held(record) > record.held and _kept_through(record)
        ):
            for view in _views_of(record.owner):
                _make_read_only(view)


def _make_read_only(a: NDArray[Any] | memoryview) -> None:
    """Make ``a`` refuse writes: an array read-only, a memoryview (which keeps the writable
    buffer it was given, whatever its array's flag says later) released, so that using it
    raises NumPy's ``ValueError``, not writes that are lost. A memoryview whose buffer is
    exported again (``np.frombuffer(view)``) cannot be released: the arrays made of it are
    frozen instead."""
    if type(a) is memoryview:
        with contextlib.suppress(BufferError):
            a.release()
        return
    a.flags.writeable = False
    FROZEN[id(a)] = a


def frozen(a: NDArray[Any]) -> bool:
    """Whether ``a`` is a private array frozen after an earlier call, or a view made of one
    since (which NumPy makes read-only, its base, or the array an as_strided holder or a
    memoryview up its chain holds, being the frozen array)."""
    base: Any = a
    while base is not None:
        if FROZEN.get(id(base)) is base:
            return True
        base = _under(base)
    return False


def _views_of(owner: NDArray[Any]) -> list[NDArray[Any] | memoryview]:
    """The writable views of ``owner`` held anywhere (see _made_of), memoryviews too: NumPy
    arrays are not tracked by the garbage collector, so they are found among the referents
    of what is (an as_strided holder, a memoryview's buffer too), of the untracked tuples and
    dicts (of arrays only, say) those hold, and of object arrays (which the collector cannot
    see into). All of them: a view may be kept both where the function put it and by the
    holder of a view made of it."""
    found: list[NDArray[Any] | memoryview] = []
    seen: set[int] = set()
    pending = gc.get_objects()
    while pending:
        holder = pending.pop()
        if type(holder) is memoryview and _made_of(holder, owner):
            found.append(holder)
        for value in gc.get_referents(holder):
            if issubclass(type(value), np.ndarray):  # never isinstance: it reads __class__, which may warn
                if id(value) in seen:
                    continue
                seen.add(id(value))
                if value.dtype == object:
                    pending.append(value.ravel().tolist())  # its items, as a list's referents
                elif value.flags.writeable and _made_of(value, owner):
                    found.append(value)
            elif type(value) in (tuple, dict, list) and not gc.is_tracked(value) and id(value) not in seen:
                seen.add(id(value))
                pending.append(value)
    return found
