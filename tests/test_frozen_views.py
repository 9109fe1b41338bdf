"""writeback=True's private copies after the call: every view of one kept is read-only, what
the function returns stays writable at any depth, and a refused write says why.

A private copy (bfloat16 widened, strided memory made C order, a conj bit resolved) is
copied back when the call returns; a write made later would reach the copy only, so NumPy
refuses it, whether through the array the function got or through any view it made of it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import autoconvert as ac
from autoconvert._conversions._writeback import Private, _references

#: Views NumPy makes of an array without copying, each keeping the array as its base.
VIEWS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "slice": lambda a: a[0:1],
    "view": lambda a: a.view(),
    "reshape": lambda a: a.reshape(-1),
    "T": lambda a: a.T,
    "ravel": lambda a: a.ravel(),
    "ellipsis": lambda a: a[...],
    "real": lambda a: a.real,
    "imag": lambda a: a.imag,
    "reversed": lambda a: a[::-1],
    "view of a view": lambda a: a[0:2][0:1],
    # Made through a holder of the array given, which holds it, not its base:
    "as_strided": lambda a: np.lib.stride_tricks.as_strided(a),
    "as_strided of a slice": lambda a: np.lib.stride_tricks.as_strided(a[1:], (1, 2), a.strides),
    "as_strided of as_strided": lambda a: np.lib.stride_tricks.as_strided(np.lib.stride_tricks.as_strided(a)),
    "sliding window": lambda a: np.lib.stride_tricks.sliding_window_view(a, 2, axis=1, writeable=True),
}

#: Where a view is kept past the call: a list, a dict of arrays only and a tuple (which the
#: garbage collector does not track), a closure, an object's attribute, an object array (which
#: the garbage collector cannot see into).
KEEPERS = ["list", "dict", "tuple", "closure", "attribute", "object array"]

DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.complex64, torch.bool, torch.int32]
LAYOUTS = ["contiguous", "transposed", "strided", "conj", "offset"]


class _Box:
    value: Any = None


def _tensor(dtype: torch.dtype, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A (2, 3) tensor of ``dtype`` in ``layout``, and the base tensor whose memory it views."""
    base = (torch.arange(12.0).reshape(4, 3) % 5).to(dtype)
    if layout == "transposed":
        base = base[:3, :2].contiguous()
        return base.T, base
    if layout == "strided":
        return base[::2], base
    if layout == "offset":
        return base[1:3], base
    if layout == "conj" and dtype.is_complex:
        return base[:2].conj(), base
    return base[:2], base


def _private(dtype: torch.dtype, layout: str) -> bool:
    """Whether the function gets a private copy: NumPy lacks bfloat16, and strided memory, a
    transposed tensor (C order for compiled consumers) or a conj bit need one."""
    return dtype is torch.bfloat16 or layout in ("transposed", "strided") or (layout == "conj" and dtype.is_complex)


def _keep(keeper: str, view: np.ndarray, box: _Box) -> None:
    if keeper == "list":
        box.value = [view]
    elif keeper == "dict":
        box.value = {"v": view}
    elif keeper == "tuple":
        box.value = ((view,),)
    elif keeper == "closure":

        def kept() -> np.ndarray:
            return view

        box.value = kept
    elif keeper == "object array":
        box.value = np.empty((1, 2), dtype=object)
        box.value[0, 1] = view
    else:
        box.value = _Box()
        box.value.value = view


def _kept(keeper: str, box: _Box) -> np.ndarray:
    value = box.value
    return {
        "list": lambda: value[0],
        "dict": lambda: value["v"],
        "tuple": lambda: value[0][0],
        "closure": lambda: value(),
        "attribute": lambda: value.value,
        "object array": lambda: value[0, 1],
    }[keeper]()


@given(
    view=st.sampled_from(list(VIEWS)),
    keeper=st.sampled_from(KEEPERS),
    dtype=st.sampled_from(DTYPES),
    layout=st.sampled_from(LAYOUTS),
    gc_first=st.booleans(),
    collects=st.booleans(),
)
@settings(max_examples=100, deadline=None)
def test_a_view_of_a_private_copy_kept_past_the_call_is_read_only(
    *, view: str, keeper: str, dtype: torch.dtype, layout: str, gc_first: bool, collects: bool
) -> None:
    """Every view the function keeps of a private copy (slices, ``.view()``, ``reshape``,
    ``.T``, ``ravel``, ``[...]``, ``.real``/``.imag``, reversed, ``as_strided`` and
    ``sliding_window_view(writeable=True)`` of it or of a view of it) is read-only once the
    call returned, wherever it is kept (containers the garbage collector does not track or
    cannot see into too), and whether the collector ran during the call or not:
    the write raises NumPy's error and the caller's tensor keeps what the call left. Where
    the array is the tensor's own memory, the write reaches the tensor."""
    t, base = _tensor(dtype, layout)
    box = _Box()

    shares: list[bool] = []

    @ac.accepts_numpy(writeback=True)
    def keeps(a: np.ndarray) -> None:
        a[0, 0] = 1  # a write inside the call reaches the tensor
        made = VIEWS[view](a)
        shares.append(np.shares_memory(made, a))  # reshape and ravel copy a transposed array
        _keep(keeper, made, box)
        if collects:
            gc.collect()  # what the call made is no longer the collector's youngest

    keeps(t)
    if gc_first:
        gc.collect()  # untracks tuples and dicts of arrays only
    after_call = base.clone()
    assert t[0, 0].item() == 1
    kept = _kept(keeper, box)
    if not shares[0]:  # a copy: no write through it reaches anything, in NumPy's own rules
        return
    if not _private(dtype, layout):
        expected = t.numpy().copy()
        VIEWS[view](expected)[...] = 0
        kept[...] = 0
        assert np.array_equal(t.numpy(), expected)
        return
    assert not kept.flags.writeable
    with pytest.raises(ValueError) as info:
        kept[...] = 0
    assert str(info.value) == "assignment destination is read-only"
    assert torch.equal(base, after_call)


#: Buffers exported from an array (``memoryview``), which keep the writable buffer they were
#: given whatever the array's flag says later, and arrays made of one.
def _c_order(a: np.ndarray) -> np.ndarray:
    """``a``'s memory as a C-ordered view (its transpose where it is Fortran-ordered): only such
    a memoryview can be cast."""
    return a if a.flags.c_contiguous else a.T


BUFFERS: dict[str, Callable[[np.ndarray], Any]] = {
    "memoryview": lambda a: memoryview(a),
    "memoryview of a slice": lambda a: memoryview(a[1:]),
    "cast memoryview": lambda a: memoryview(_c_order(a)).cast("B"),
    "slice of a memoryview": lambda a: memoryview(a)[1:],
    "array of a memoryview": lambda a: np.asarray(memoryview(a)),
    "frombuffer of a cast": lambda a: np.frombuffer(memoryview(_c_order(a)).cast("B"), dtype=np.uint8),
}


def _write(kept: Any) -> None:
    """A write through ``kept``, an array (zeros) or a memoryview of any format (its last
    byte's lowest bit flipped, a valid value of every dtype)."""
    if isinstance(kept, memoryview):
        data = kept.cast("B")
        data[-1] ^= 1
    else:
        kept[...] = 0


@given(
    buffer=st.sampled_from(list(BUFFERS)),
    keeper=st.sampled_from(KEEPERS),
    dtype=st.sampled_from(DTYPES),
    layout=st.sampled_from(["contiguous", "transposed", "conj", "offset"]),
    collects=st.booleans(),
)
@settings(max_examples=30, deadline=None)
def test_a_memoryview_of_a_private_copy_kept_past_the_call_refuses_writes(
    *, buffer: str, keeper: str, dtype: torch.dtype, layout: str, collects: bool
) -> None:
    """A ``memoryview`` the function keeps of a private copy (of it, of a view of it, cast or
    sliced) is released once the call returned, and an array made of one is read-only: a
    write raises NumPy's ValueError instead of reaching the copy only, and the caller's
    tensor keeps what the call left. Of the tensor's own memory, the write reaches it."""
    t, base = _tensor(dtype, layout)
    box = _Box()

    @ac.accepts_numpy(writeback=True)
    def keeps(a: np.ndarray) -> None:
        a[0, 0] = 1
        _keep(keeper, BUFFERS[buffer](a), box)
        if collects:
            gc.collect()  # what the call made is no longer the collector's youngest

    keeps(t)
    after_call = base.clone()
    kept = _kept(keeper, box)
    if not _private(dtype, layout):
        _write(kept)
        assert not torch.equal(base, after_call)
        return
    with pytest.raises(ValueError) as info:
        _write(kept)
    assert str(info.value) in (
        "operation forbidden on released memoryview object",
        "assignment destination is read-only",
    )
    assert torch.equal(base, after_call)


class _Keeper:
    """Keeps the array it is made with, and a view a method makes of it later."""

    def __init__(self, buf: np.ndarray) -> None:
        self.buf = buf
        self.head: Any = None

    def keep(self, a: np.ndarray) -> None:
        self.head = a[0:2]

    def split(self) -> None:
        self.head = self.buf[0:2]

    def bump(self) -> None:
        self.head += 1


class _StridedKeeper(_Keeper):
    """A _Keeper whose views are made by ``as_strided``, through a holder of the array."""

    def keep(self, a: np.ndarray) -> None:
        self.head = np.lib.stride_tricks.as_strided(a[0:2])

    def split(self) -> None:
        self.head = np.lib.stride_tricks.as_strided(self.buf, (2,), self.buf.strides)


_LATE = (
    "holds a private copy of a tensor handed to an earlier call with writeback=True (NumPy cannot share the "
    "tensor's memory: another device, a dtype NumPy lacks, or strided memory), copied back when that call "
    "returned and read-only since, so that a write made later is refused rather than lost. Found "
    "ValueError('output array is read-only'). Fix: make the writes before the call returns, or pass a "
    "contiguous CPU tensor of a NumPy dtype, whose memory the array shares."
)


@pytest.mark.parametrize("kind", [_Keeper, _StridedKeeper])
@pytest.mark.parametrize("how", ["kept by a method", "made later of the constructor's"])
def test_a_torchified_objects_late_write_into_a_view_says_the_copy_was_frozen(how: str, kind: type[_Keeper]) -> None:
    """A view of a frozen private copy on a torchified object (kept by a method, or made later
    of the array its constructor kept; sliced, or made by ``as_strided``): the write is a
    ReadOnlyError saying the private copy was frozen after the call, never that the tensor was
    expanded, nor that writeback=True would let the write through."""
    t = torch.zeros(3, dtype=torch.bfloat16)
    keeper = ac.torchify(kind, writeback=True)(t)
    if how == "kept by a method":
        keeper.keep(torch.zeros(3, dtype=torch.bfloat16))
    else:
        keeper.split()
    with pytest.raises(ac.ReadOnlyError) as info:
        keeper.bump()
    # The array written, self.head, and the one it views, if any.
    written = "self.head" if how == "kept by a method" else "self.buf or self.head"
    assert str(info.value) == f"_Keeper.bump(): attribute {written} {_LATE}"
    assert torch.equal(t, torch.zeros(3, dtype=torch.bfloat16))


def test_an_expanded_tensors_array_written_later_keeps_its_own_words() -> None:
    """An expanded tensor's array (handed read-only under writeback) still says so."""
    keeper = ac.torchify(_Keeper, writeback=True)(torch.zeros(1).expand(3))
    keeper.split()
    with pytest.raises(ac.ReadOnlyError) as info:
        keeper.bump()
    assert "is an expanded tensor (zero strides: its elements share memory)" in str(info.value)


#: Results holding the array the function got, at every depth.
NESTINGS: dict[str, Callable[[np.ndarray], Any]] = {
    "bare": lambda a: a,
    "tuple": lambda a: (a, 1),
    "dict": lambda a: {"parts": a},
    "dict of a list": lambda a: {"parts": [a]},
    "list of a tuple": lambda a: [(a,)],
    "dict of a dict of a list": lambda a: {"x": {"y": [0, a]}},
    "a view, nested": lambda a: {"parts": [a[0:2]]},
    "as_strided, nested": lambda a: {"parts": [np.lib.stride_tricks.as_strided(a)]},
}


def _dig(value: Any) -> np.ndarray:
    """The one array in ``value``."""
    if isinstance(value, np.ndarray):
        return value
    items = value.values() if isinstance(value, dict) else value
    return next(_dig(item) for item in items if isinstance(item, (np.ndarray, dict, list, tuple)))


@given(nesting=st.sampled_from(list(NESTINGS)), private=st.sampled_from(["bfloat16", "strided"]))
@settings(max_examples=30, deadline=None)
def test_an_array_a_writeback_call_returns_stays_writable_at_any_depth(nesting: str, private: str) -> None:
    """A private copy the function returns, at any depth of tuples, lists and dicts, or a view
    of it, is the caller's result: writable, and a write changes the result only."""
    t = torch.zeros(3, dtype=torch.bfloat16) if private == "bfloat16" else torch.zeros(6)[::2]
    dtype = t.dtype
    result = ac.accepts_numpy(writeback=True)(NESTINGS[nesting])(t)
    returned = _dig(result)
    assert returned.flags.writeable
    returned += 1
    assert returned.tolist() == [1.0] * len(returned)
    assert torch.equal(t, torch.zeros(3, dtype=dtype))


def test_a_view_kept_and_a_window_made_of_it_are_read_only_when_the_last_window_is_dropped() -> None:
    """A view kept both where the function put it and by the holder of a
    ``sliding_window_view`` of it, while the window an earlier call kept is dropped (the
    holders alive are as many as before): every one is read-only after the call."""
    kept: dict[str, np.ndarray] = {}

    @ac.accepts_numpy(writeback=True)
    def keeps(a: np.ndarray) -> None:
        kept.pop("window", None)
        head = a[1:]
        kept.update(head=head, window=np.lib.stride_tricks.sliding_window_view(head, 2, axis=1, writeable=True))

    t = torch.zeros(3, 3, dtype=torch.bfloat16)
    keeps(t)
    keeps(t)
    for view in kept.values():
        with pytest.raises(ValueError) as info:
            view[...] = 1
        assert str(info.value) == "assignment destination is read-only"
    assert not t.any()


def test_views_of_a_private_copy_are_counted_by_its_owner() -> None:
    """The views made of a handed private array hold its owner, and only they add to the
    references counted at hand-over: a call that keeps none costs no search."""
    record = Private(np.zeros(4))
    assert _references(record) - record.references == 0
    views = [record.array[1:], record.array.T, record.array[...][::2]]
    assert _references(record) - record.references == 3
    del views
    assert _references(record) - record.references == 0


def _as_strided_asked(a: np.ndarray) -> None:
    np.lib.stride_tricks.as_strided(a, writeable=True)[0, 0] = 1.0


def _as_strided_default(a: np.ndarray) -> None:
    view = np.lib.stride_tricks.as_strided(a, shape=(2,), strides=(a.strides[1],))
    view[0] = 1.0


def _sliding_window_asked(a: np.ndarray) -> None:
    np.lib.stride_tricks.sliding_window_view(a, 2, axis=1, writeable=True)[0, 0, 0] = 1.0


@pytest.mark.parametrize("route", [_as_strided_asked, _as_strided_default, _sliding_window_asked])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int32])
def test_a_writable_strided_view_of_a_handed_array_is_a_read_only_error(
    route: Callable[[np.ndarray], None], dtype: torch.dtype
) -> None:
    """``as_strided`` (writable by default) and ``sliding_window_view(writeable=True)`` of a
    handed read-only array are read-only because it is: the write is a ReadOnlyError naming
    the argument, the caller's tensor unchanged; copy=True makes it work."""
    t = torch.zeros(3, 3, dtype=dtype)
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.accepts_numpy(route)(t)
    assert str(info.value) == (
        f"{route.__qualname__}(): argument a was written into by the function; arrays made from tensor "
        "arguments are read-only so that NumPy code never changes the caller's tensors behind its back. "
        "Found ValueError('assignment destination is read-only'). Fix: pass copy=True to give the function "
        "private writable copies, or writeback=True to let its changes reach the caller's tensors (in "
        f"@ac.accepts_numpy(copy=True) on {route.__qualname__}, or a with ac.config(copy=True): block around the "
        "call)."
    )
    assert not t.any()
    ac.accepts_numpy(copy=True)(route)(t)
    assert not t.any()
    ac.accepts_numpy(writeback=True)(route)(t)
    assert t[0, 0].item() == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.complex64])
def test_views_kept_of_aliased_arguments_private_copy_are_read_only(dtype: torch.dtype) -> None:
    """Arguments sharing memory get views of one private copy (see _writeback.Span): the views
    the function keeps of each are read-only after the call, and its writes reached the tensor."""
    t = torch.zeros(4, dtype=dtype)
    caller = t.conj() if dtype.is_complex else t  # a conj bit needs the private copy
    kept: list[np.ndarray] = []

    @ac.accepts_numpy(writeback=True)
    def keeps(a: np.ndarray, b: np.ndarray) -> None:
        kept.extend([a[1:], b.T, b[...]])
        a[0] = 1

    keeps(caller, caller[1:3])
    assert caller.tolist() == [1, 0, 0, 0]
    for view in kept:
        with pytest.raises(ValueError) as info:
            view[...] = 5
        assert str(info.value) == "assignment destination is read-only"
    assert caller.tolist() == [1, 0, 0, 0]


@pytest.mark.parametrize(
    "kept",
    [
        lambda a: np.lib.stride_tricks.sliding_window_view(a, 2, axis=1, writeable=True),
        lambda a: memoryview(a).cast("B"),
    ],
    ids=["sliding window", "cast memoryview"],
)
def test_a_collection_while_the_young_objects_are_listed_still_finds_what_the_call_kept(
    monkeypatch: pytest.MonkeyPatch, kept: Callable[[np.ndarray], Any]
) -> None:
    """An automatic collection can run when the search for what the call kept allocates (the
    list of young objects, the collector's statistics): it moves the young objects to an
    older generation. Such a collection, made here at the first listing of the young ones,
    must widen the search, not hide the kept view (a rare, timing-dependent miss before)."""
    listed = gc.get_objects

    def listed_after_a_collection(generation: int | None = None) -> list[Any]:
        if generation == 0:
            gc.collect(0)
        return listed(generation)

    t = torch.arange(6.0).reshape(2, 3).to(torch.bfloat16)
    box = _Box()

    @ac.accepts_numpy(writeback=True)
    def keeps(a: np.ndarray) -> None:
        box.value = [kept(a)]

    monkeypatch.setattr(gc, "get_objects", listed_after_a_collection)
    keeps(t)
    monkeypatch.undo()
    after_call = t.clone()
    with pytest.raises(ValueError, match=r"read-only|released memoryview"):
        _write(box.value[0])
    assert torch.equal(t, after_call)
