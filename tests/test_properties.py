"""Property-based: every tensor and array converts faithfully, sharing memory exactly as the copy mode says."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import autoconvert as ac
from autoconvert._conversions._dtypes import NUMPY_TO_TORCH, WIDENED
from autoconvert._conversions._memory import strides_overlap

from .conftest import shares
from .strategies import COPY_MODES, NUMPY_HELD, TORCH_DTYPES, Case, arrays, tensors, torch_can_share


def _expected_array(t: torch.Tensor) -> np.ndarray:
    """The oracle, through Python lists rather than Tensor.numpy(): values, dtype and shape."""
    wide = WIDENED.get(t.dtype, t.dtype)
    values = t.detach().to(wide).tolist() if t.dim() else t.detach().to(wide).item()
    return np.array(values, dtype=torch.empty(0, dtype=wide).numpy().dtype).reshape(tuple(t.shape))


def _capture(**options: Any) -> Any:
    @ac.accepts_numpy(**options)
    def capture(a: np.ndarray) -> np.ndarray:
        return a

    return capture


@given(case=tensors(), copy=st.sampled_from(COPY_MODES))
def test_tensor_to_array_is_faithful_and_shares_exactly_when_allowed(case: Case, copy: bool | None) -> None:
    """accepts_numpy: exact values, widened dtype, shape; shared iff copy allows and nothing forces a copy."""
    t = case.tensor
    needs_copy = t.dtype in WIDENED or t.is_conj() or t.is_neg()
    if copy is False and needs_copy:
        with pytest.raises(ac.CopyError):
            _capture(copy=copy)(t)
        return
    a = _capture(copy=copy)(t)
    expected = _expected_array(t)
    assert type(a) is np.ndarray
    assert a.dtype == expected.dtype and a.shape == expected.shape
    np.testing.assert_array_equal(a, expected, strict=True)
    assert shares(a, case.base) == (copy is not True and not needs_copy and a.size > 0)
    # read-only unless the caller asked for a private copy (on every device)
    assert a.flags.writeable == (copy is True)


@given(case=tensors(dtypes=NUMPY_HELD, layouts=["contiguous", "transposed", "sliced", "offset"]))
def test_private_copies_do_not_reach_the_tensor(case: Case) -> None:
    """copy=True: the mutate-one-side probe finds no link back to the caller's tensor."""
    before = case.base.clone()
    a = _capture(copy=True)(case.tensor)
    if a.size:
        a[...] = a.flat[0]
        # a changed first element: integers flip a bit (255 + 1 would overflow a uint8)
        first = a.flat[0]
        a.flat[0] = not first if a.dtype == bool else first ^ a.dtype.type(1) if a.dtype.kind in "iu" else first + 1
    assert torch.equal(case.base, before) or before.isnan().any()


@given(case=tensors(layouts=["contiguous", "transposed", "sliced", "offset", "conj", "neg"]))
def test_writeback_makes_the_function_act_on_the_tensor(case: Case) -> None:
    """writeback=True: what the function writes is what the caller's tensor then holds, any dtype."""
    t = case.tensor

    @ac.accepts_numpy(writeback=True)
    def fill(a: np.ndarray) -> None:
        assert a.flags.writeable
        a[...] = 1

    fill(t)
    wide = WIDENED.get(t.dtype, t.dtype)  # torch.equal has no complex32 kernel
    assert torch.equal(t.to(wide), torch.ones(t.shape, dtype=wide))


#: Views of a (4, 5) tensor or array: the same indexing means the same memory on both sides.
_VIEWS = [
    lambda x: x,
    lambda x: x[1],
    lambda x: x[:, 2],
    lambda x: x[1:3, ::2],
    lambda x: x.T,
    lambda x: x[::-1] if isinstance(x, np.ndarray) else x.flip(0),  # a copy in torch: no alias
    lambda x: x[3, 4, ...],  # 0-d views
]


#: Dtypes that hold 0, 1 and 3 exactly (float8_e8m0fnu holds powers of two only, bool no 3).
_HOLDS_0_1_3 = [
    d for d in TORCH_DTYPES if torch.tensor([0.0, 1.0, 3.0]).to(d).to(torch.complex128).tolist() == [0, 1, 3]
]


@given(
    dtype=st.sampled_from(_HOLDS_0_1_3),
    first=st.integers(0, len(_VIEWS) - 1),
    second=st.integers(0, len(_VIEWS) - 1),
    copy=st.sampled_from([None, True]),
    conj=st.booleans(),
)
def test_writeback_through_aliased_arguments_is_what_numpy_does(
    dtype: torch.dtype, first: int, second: int, copy: bool | None, conj: bool
) -> None:
    """writeback=True with two arguments viewing one tensor, any dtype and copy mode: the
    function's reads and the caller's final tensor are NumPy's on arrays aliased the same way."""

    def scribble(a: np.ndarray, b: np.ndarray) -> float:
        a[...] = 1
        b += b.dtype.type(2)  # sees a's write where they overlap (NumPy 1.26 casts a 0-d sum by value)
        return float(np.real(a).sum() + np.real(b).sum())

    view_a, view_b = _VIEWS[first], _VIEWS[second]
    memory = np.zeros((4, 5))
    expected = scribble(view_a(memory), view_b(memory)) if second != 5 else None
    t = torch.zeros(4, 5, dtype=dtype)
    base = t.conj() if conj and dtype.is_complex else t
    got = ac.accepts_numpy(writeback=True, copy=copy)(scribble)(view_a(base), view_b(base))
    if second == 5 or first == 5:  # torch's flip is a copy, so NumPy's aliasing does not apply
        return
    assert got == expected
    wide = WIDENED.get(dtype, dtype)
    np.testing.assert_array_equal(np.real(t.to(wide).numpy()), memory)


def _give(arr: Any, **options: Any) -> Any:
    @ac.returns_tensor(**options)
    def give() -> Any:
        return arr

    return give()


def _to_tensor(arr: Any, **options: Any) -> Any:
    """to_tensor with only the options given: none takes its one-array shortcut."""
    return ac.to_tensor(arr, **{k: v for k, v in options.items() if v is not None})


@given(a=arrays(), copy=st.sampled_from(COPY_MODES), convert=st.sampled_from([_give, _to_tensor]))
def test_array_to_tensor_is_faithful_and_shares_exactly_when_allowed(
    a: np.ndarray, copy: bool | None, convert: Callable[..., Any]
) -> None:
    """returns_tensor and to_tensor: exact values, dtype, shape; zero-copy iff torch can share
    it and copy allows."""
    plain = np.asarray(a)
    shareable = torch_can_share(plain)
    if copy is False and not shareable:
        with pytest.raises(ac.CopyError):
            convert(a, copy=copy)
        return
    t = convert(a, copy=copy)
    assert type(t) is torch.Tensor
    assert t.dtype == NUMPY_TO_TORCH[plain.dtype.newbyteorder("=")]
    assert tuple(t.shape) == plain.shape
    np.testing.assert_array_equal(t.numpy(), plain, strict=False)
    assert t.numpy().dtype.isnative
    assert shares(t, plain) == (shareable and copy is not True and plain.size > 0)
    if shares(t, plain):  # the mutate-one-side probe agrees with the byte ranges
        first = (0,) * t.ndim
        new = (not plain[first]) if t.dtype == torch.bool else (7 if plain[first] != 7 else 8)
        t[first] = new
        assert plain[first] == new


@given(
    a=arrays(layouts=["C", "F", "transposed", "sliced", "broadcast", "byteswapped", "readonly", "unaligned"]),
    copy=st.sampled_from([None, True]),
    convert=st.sampled_from([_give, _to_tensor]),
)
def test_a_reversed_view_of_any_layout_becomes_its_native_copy_in_memory_order(
    a: np.ndarray, copy: bool | None, convert: Callable[..., Any]
) -> None:
    """a[..., ::-1] over every layout: where an axis that addresses memory runs backwards, the
    one copy NumPy makes in "K" order (native, strided in the view's memory order); otherwise
    (a size-1 or empty last axis) shared exactly when torch can share it, as any array."""
    if a.ndim == 0:
        return
    r = a[..., ::-1]
    t = convert(r, copy=copy)
    np.testing.assert_array_equal(t.numpy(), r, strict=False)
    if r.size and any(s < 0 for s, n in zip(r.strides, r.shape, strict=True) if n > 1):
        expected = np.array(r, dtype=r.dtype.newbyteorder("="), order="K", copy=True)
        assert t.stride() == tuple(s // r.itemsize for s in expected.strides)
        assert not shares(t, r)
    else:
        assert shares(t, r) == (torch_can_share(r) and copy is not True and r.size > 0)


@given(a=arrays(layouts=["C", "F", "negative", "broadcast", "readonly"]))
def test_copy_true_results_share_with_nothing(a: np.ndarray) -> None:
    """returns_tensor(copy=True): the tensor's memory is its own."""
    t = _give(a, copy=True)
    assert not shares(t, np.asarray(a))


# No subnormals: torch 2.4's CUDA wheels leave the process flushing them to zero, and
# hypothesis then refuses to make any (FloatingPointError). Their bits cross like any other's.
@given(
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False).map(np.float64),
        st.floats(width=32, allow_subnormal=False).map(np.float32),
        st.integers(-(2**31), 2**31 - 1).map(np.int32),
        st.booleans().map(np.bool_),
        st.complex_numbers(allow_nan=False, width=128, allow_subnormal=False).map(np.complex128),
    )
)
def test_numpy_scalars_become_0d_tensors(value: np.generic) -> None:
    """A NumPy scalar result is a 0-d tensor of its dtype, with its exact value, NaN included."""
    t = _give(value)
    assert t.shape == () and t.dtype == NUMPY_TO_TORCH[value.dtype]
    np.testing.assert_array_equal(t.numpy(), np.asarray(value))


def _restored_dtype(tensors: list[torch.Tensor]) -> torch.dtype:
    """The documented rule for a float32 result: back to a dtype NumPy lacks only when
    every floating or complex tensor argument had that very dtype."""
    inexact = {t.dtype for t in tensors if t.dtype.is_floating_point or t.dtype.is_complex}
    if len(inexact) == 1:
        (only,) = inexact
        if WIDENED.get(only) == torch.float32:
            return only
    return torch.float32


@given(cases=st.lists(tensors(), max_size=4), grad=st.lists(st.booleans(), min_size=4, max_size=4))
def test_result_dtype_and_device_follow_every_tensor_argument(cases: list[Case], grad: list[bool]) -> None:
    """However the arguments mix plain tensors (shared with NumPy as they are) and ones that
    needed a look (grad, conj/neg bits, dtypes NumPy lacks), the result's dtype and device
    follow the rule over all of them, fused or with returns_tensor alone."""
    args = [c.tensor for c in cases]
    args = [
        t.requires_grad_(g) if g and t.is_floating_point() else t for t, g in zip(args, grad[: len(args)], strict=True)
    ]

    def ones(*arrays: Any) -> np.ndarray:  # 1.0: exact in every dtype, float8_e8m0fnu has no 0
        return np.ones(2, dtype=np.float32)

    fused = ac.returns_tensor(ac.accepts_numpy(grad="detach")(ones))
    alone = ac.returns_tensor(ones)
    for decorated in (fused, alone):
        result = decorated(*args)
        assert result.dtype == _restored_dtype(args)
        assert result.device.type == "cpu"
        assert torch.equal(result.float(), torch.ones(2))


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Sizes and strides of up to 4 dimensions, overlapping or not: small strides meet often,
    and some dimension is often repeated in another's span."""
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=ndim, max_size=ndim)))
    stride = st.one_of(st.integers(-4, 4), st.integers(-40, 40))  # small ones meet at the reach's edge
    strides = tuple(draw(st.lists(stride, min_size=ndim, max_size=ndim)))
    return shape, strides


def _locations_repeat(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """The oracle: every element's location, counted (zero strides left out, as the predicate does)."""
    kept = [(n, s) for n, s in zip(shape, strides, strict=True) if s]
    if 0 in shape:
        return False
    locations = [0]
    for n, s in kept:
        locations = [at + i * s for at in locations for i in range(n)]
    return len(set(locations)) < len(locations)


@given(layout=_layouts())
@example(layout=((3, 2), (1, 2)))  # a stride equal to the reach of the smaller one: they meet
def test_the_overlap_predicate_is_exact(layout: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    """Sorting, gcd and counting give the answer that counting every element's location gives
    (the layouts small enough to be counted in full: the predicate answers "may overlap" only
    beyond 65,536 elements of three or more meeting dimensions)."""
    shape, strides = layout
    assert strides_overlap(shape, strides) == _locations_repeat(shape, strides)


def test_the_overlap_predicate_sees_torch_and_numpy_overlaps() -> None:
    """The layouts the sweep found (as_strided, unfold with a step below its size), NumPy's
    sliding_window_view, and the ones that do not overlap (transposes, steps, channels_last)."""
    base = torch.arange(100.0)
    overlapping = [base.as_strided((4, 4), (2, 1)), base.unfold(0, 4, 2), base.reshape(4, 25).unfold(1, 5, 1)]
    assert all(strides_overlap(t.shape, t.stride()) for t in overlapping)
    window = np.lib.stride_tricks.sliding_window_view(np.arange(10.0), 3)
    assert strides_overlap(window.shape, window.strides)
    apart = [
        base.reshape(10, 10).T,
        base[::3],
        base.unfold(0, 4, 4),
        torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last),
    ]
    assert not any(strides_overlap(t.shape, t.stride()) for t in apart)
    assert strides_overlap((60, 60, 60), (1, 1, 1))  # 216,000 elements of three meeting dimensions: not counted
