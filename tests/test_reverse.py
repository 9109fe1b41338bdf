"""accepts_tensor / returns_numpy / to_numpy / to_tensor: torch code called from NumPy code."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.optimize
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import autoconvert as ac

from .conftest import shares


def test_a_torch_objective_inside_scipy_optimize() -> None:
    """minimize() passes float64 arrays; the objective computes value and gradient with autograd."""

    @ac.returns_numpy
    @ac.accepts_tensor
    def rosenbrock(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.detach().requires_grad_()
        value = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
        value.backward()
        return value, x.grad  # type: ignore[return-value]

    result = scipy.optimize.minimize(rosenbrock, np.zeros(4), jac=True, method="L-BFGS-B")
    assert result.success and np.allclose(result.x, 1.0, atol=1e-4)
    value, grad = rosenbrock(np.zeros(4))
    assert type(value) is np.float64 and grad.dtype == np.float64  # a scalar, as NumPy's sum gives


_DTYPES = [
    torch.float64,
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.bool,
    torch.complex64,
]


@given(
    dtype=st.sampled_from(_DTYPES),
    shape=st.sampled_from([(), (0,), (1,), (2, 3)]),
    nesting=st.sampled_from(["bare", "tuple", "dict"]),
    copy=st.sampled_from([None, True, False]),
)
@settings(max_examples=60, deadline=None)
def test_a_0d_result_is_a_numpy_scalar_as_numpys_reductions_give(
    dtype: torch.dtype, shape: tuple[int, ...], nesting: str, copy: bool | None
) -> None:
    """A 0-d tensor result through the reverse pair is the NumPy scalar NumPy's own reduction
    gives on the same values (cma's ``tell`` and nlopt refuse 0-d arrays), at any depth;
    other results stay arrays; ``copy=False``, which asks for the tensor's memory, keeps the
    0-d array sharing it."""
    nest = {"bare": lambda v: v, "tuple": lambda v: (v, 1), "dict": lambda v: {"v": v}}[nesting]
    dig = {"bare": lambda r: r, "tuple": lambda r: r[0], "dict": lambda r: r["v"]}[nesting]
    made: list[torch.Tensor] = []

    @ac.returns_numpy(copy=copy)
    @ac.accepts_tensor
    def reduce(x: torch.Tensor) -> Any:
        x = x.to(dtype)
        value = x.sum() if x.dtype.is_floating_point or x.dtype.is_complex else x.max()
        made.append(value.reshape(shape) if value.numel() == math.prod(shape) else value)
        return nest(made[-1])

    try:
        result = dig(reduce(np.ones(1, dtype=np.float64)))
    except ac.CopyError:  # copy=False where NumPy cannot share the tensor (bfloat16)
        assert copy is False and dtype is torch.bfloat16
        return
    tensor = made[-1]
    if tensor.ndim or copy is False:
        assert type(result) is np.ndarray and result.shape == tuple(tensor.shape)
        return
    values = ac.to_numpy(tensor.reshape(1))
    expected = values.sum() if values.dtype.kind in "fc" else values.max()
    assert type(result) is type(expected) and result == expected


def test_a_callbacks_0d_result_is_a_numpy_scalar() -> None:
    """A torch callback's 0-d tensor result reaches NumPy code as a NumPy scalar (a 0-d array
    before), as a NumPy-written objective's ``np.sum`` gives."""
    seen: list[Any] = []

    @ac.accepts_numpy(callbacks=True)
    def optimise(objective: Any, x0: np.ndarray) -> Any:
        seen.append(objective(x0))
        return seen[-1]

    optimise(lambda x: (x**2).sum(), torch.ones(3, dtype=torch.float64))
    optimise(lambda x: (x**2, x.sum()), torch.ones(3, dtype=torch.float64))
    assert type(seen[0]) is np.float64 and seen[0] == 3.0
    assert type(seen[1][0]) is np.ndarray and type(seen[1][1]) is np.float64


def test_accepts_tensor_shares_memory_on_the_cpu_like_from_numpy() -> None:
    """copy=None: torch code writing in place changes the caller's array, as torch.from_numpy would."""

    @ac.accepts_tensor
    def scale_(x: torch.Tensor) -> None:
        x.mul_(2)

    a = np.ones(3)
    scale_(a)
    assert a.tolist() == [2.0, 2.0, 2.0]


def test_accepts_tensor_copy_true_protects_the_caller() -> None:
    @ac.accepts_tensor(copy=True)
    def scale_(x: torch.Tensor) -> torch.Tensor:
        return x.mul_(2)

    a = np.ones(3)
    out = scale_(a)
    assert a.tolist() == [1.0, 1.0, 1.0] and not shares(out, a)


def test_accepts_tensor_never_shares_a_read_only_array() -> None:
    """torch tensors are always writable, so a read-only array is copied, never exposed."""
    a = np.ones(3)
    a.setflags(write=False)

    @ac.accepts_tensor
    def f(x: torch.Tensor) -> torch.Tensor:
        return x

    assert not shares(f(a), a)
    with pytest.raises(ac.CopyError, match="it is read-only, and torch tensors are always writable"):
        ac.accepts_tensor(copy=False)(f.__wrapped__)(a)


def test_a_view_np_broadcast_arrays_made_converts_with_no_warning() -> None:
    """Reading the writeable flag of a view ``np.broadcast_arrays`` made warns (NumPy's
    FutureWarning, which reached the caller from the library: SciPy hands such views to a
    callback): its zero stride is read first, which says it is copied."""
    broadcast, _ = np.broadcast_arrays(np.float64(2.0), np.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        converted = ac.to_tensor(broadcast)
    assert torch.equal(converted, torch.full((3,), 2.0, dtype=torch.float64))
    with pytest.raises(ac.CopyError, match="it is a broadcast view"):
        ac.to_tensor(broadcast, copy=False)


def _unaligned(base: np.ndarray) -> np.ndarray:
    """A writable view of ``base``'s values at an odd address (each one copied in first)."""
    raw = np.zeros(base.nbytes + 1, np.uint8)
    a = raw[1:].view(base.dtype)
    a[...] = base
    return a


#: Writable arrays torch cannot share (each a view of ``base``, 16 elements), and two it can.
_WRITABLE_LAYOUTS: dict[str, Any] = {
    "reversed": lambda b: b[::-1],
    "reversed columns": lambda b: b.reshape(4, 4)[:, ::-1],
    "both reversed, strided": lambda b: b.reshape(4, 4)[::-2, ::-1],
    "byte-swapped": lambda b: b.view(b.dtype.newbyteorder()),
    "unaligned": _unaligned,
    "contiguous": lambda b: b,
    "strided": lambda b: b[::3],
}
#: Writable arrays whose elements share memory, in a layout torch cannot share.
_SHARED_ELEMENT_LAYOUTS: dict[str, Any] = {
    "zero stride": lambda b: np.lib.stride_tricks.as_strided(b, (3, 4), (0, b.itemsize)),
    "reversed, overlapping": lambda b: np.lib.stride_tricks.as_strided(b[::-1], (4, 4), (-2 * b.itemsize, -b.itemsize)),
}
_REVERSE_DTYPES = [np.float64, np.float32, np.float16, np.complex128, np.bool_, np.int64, np.uint8]
#: In-place writes torch code makes, each valid for every dtype above.
_REVERSE_WRITES: dict[str, Any] = {
    "x[0] = 1": lambda x: x.__setitem__((0,) * x.ndim, 1),
    "fill_": lambda x: x.fill_(1),
    "copy_": lambda x: x.copy_(x.flip(0)),
}
#: The reverse direction's routes: the pair's flat and generic calls, accepts_tensor alone.
_REVERSE_ROUTES: dict[str, Any] = {
    "pair": lambda body: ac.returns_numpy(ac.accepts_tensor(body)),
    "pair, generic": lambda body: ac.returns_numpy(ac.accepts_tensor(body)),
    "accepts_tensor": lambda body: ac.accepts_tensor(body),
}


def _reverse_cases(layouts: dict[str, Any]) -> list[Any]:
    """Layouts x dtypes x writes x routes; the default run keeps each layout once (float64),
    and for one of each kind each write, route and dtype."""
    cases = []
    for layout, dtype, write, route in itertools.product(layouts, _REVERSE_DTYPES, _REVERSE_WRITES, _REVERSE_ROUTES):
        first = write == "x[0] = 1" and route == "pair"
        kept = (dtype is np.float64 and first) or (
            layout in ("reversed", "zero stride") and (dtype is np.float64 or first)
        )
        name = f"{layout}-{np.dtype(dtype).name}-{write}-{route}"
        cases.append(pytest.param(layout, dtype, write, route, marks=() if kept else (pytest.mark.slow,), id=name))
    return cases


def _base(dtype: Any) -> np.ndarray:
    return (np.arange(16) % 3 == 1).astype(dtype) if dtype is np.bool_ else np.arange(2, 18).astype(dtype)


@pytest.mark.parametrize(("layout", "dtype", "write", "route"), _reverse_cases(_WRITABLE_LAYOUTS))
def test_a_write_into_a_writable_array_reaches_the_caller_whatever_its_layout(
    layout: str, dtype: Any, write: str, route: str
) -> None:
    """copy=None: what torch code writes into its argument reaches the caller's writable
    array, shared (as torch.from_numpy shares it) or, where torch cannot share the layout
    (negative strides, byte order, alignment), copied back from the private copy after the
    call: the caller's array ends as it would had the write been made to it."""
    base = _base(dtype)
    a = _WRITABLE_LAYOUTS[layout](base)
    expected = a.copy()
    reference = torch.from_numpy(np.array(expected, dtype=expected.dtype.newbyteorder("="), order="C"))
    _REVERSE_WRITES[write](reference)
    expected[...] = reference.numpy()

    def body(x: torch.Tensor) -> torch.Tensor:
        _REVERSE_WRITES[write](x)
        return x.sum()

    f = _REVERSE_ROUTES[route](body)
    with ac.stats() if route == "pair, generic" else contextlib.nullcontext():
        f(a)
    assert a.tolist() == expected.tolist()


@pytest.mark.parametrize(("layout", "dtype", "write", "route"), _reverse_cases(_SHARED_ELEMENT_LAYOUTS))
def test_a_write_into_an_array_whose_elements_share_memory_is_refused(
    layout: str, dtype: Any, write: str, route: str
) -> None:
    """copy=None: a writable array whose elements share memory in a layout torch cannot
    share is handed as a private copy; a write into it, which no copy back could make
    faithfully, raises ReadOnlyError naming the argument, the caller's memory unchanged. A
    function that only reads raises nothing."""
    base = _base(dtype)
    before = base.copy()
    a = _SHARED_ELEMENT_LAYOUTS[layout](base)

    def body(x: torch.Tensor) -> torch.Tensor:
        _REVERSE_WRITES[write](x)
        return x.sum()

    f = _REVERSE_ROUTES[route](body)
    with pytest.raises(ac.ReadOnlyError) as info, ac.stats() if route == "pair, generic" else contextlib.nullcontext():
        f(a)
    assert base.tolist() == before.tolist()
    assert str(info.value).endswith(
        "argument x is a NumPy view whose elements share memory (a zero stride, or strides that overlap) in a "
        "layout torch cannot share, so the function got a private copy, and wrote into it; a write into one "
        "element cannot reach back apart from the others sharing its memory, so the caller's array was left "
        f"unchanged. Found numpy.ndarray(shape={a.shape}, dtype={a.dtype.str}). Fix: pass x.copy() (then the "
        "writes reach that copy only), or return the changed tensor instead."
    )
    assert _REVERSE_ROUTES[route](lambda x: x.sum())(a) is not None


def test_only_a_written_copy_is_copied_back() -> None:
    """One memory passed twice, shared (``b``) and copied (``b[::-1]``): the write through the
    shared one stays, since the untouched copy is not copied back over it."""
    b = np.zeros(4)

    @ac.accepts_tensor
    def writes_first(x: torch.Tensor, reversed_x: torch.Tensor) -> None:
        x[0] = 7

    writes_first(b, b[::-1])
    assert b.tolist() == [7.0, 0.0, 0.0, 0.0]


def test_the_copy_back_happens_when_the_function_raises_and_in_inference_mode() -> None:
    """As with shared memory, a write made before the function raised reaches the caller; and
    inside torch.inference_mode, whose tensors keep no version counter, too."""
    b = np.zeros(3)

    @ac.accepts_tensor
    def fails_after_writing(x: torch.Tensor) -> None:
        x[0] = 5
        raise KeyError("the user's own error")

    with pytest.raises(KeyError):
        fails_after_writing(b[::-1])
    assert b.tolist() == [0.0, 0.0, 5.0]
    with torch.inference_mode():
        ac.accepts_tensor(lambda x: x.fill_(2))(b[::-1])
    assert b.tolist() == [2.0, 2.0, 2.0]


def test_a_copy_the_function_reshaped_cannot_go_back_and_says_so() -> None:
    """The function resizing its private copy: the copy back fails, naming the argument."""

    @ac.accepts_tensor
    def shrinks(x: torch.Tensor) -> None:
        x.resize_(1)

    with pytest.raises(ac.ConversionError) as info:
        shrinks(np.zeros(3)[::-1])
    assert str(info.value) == (
        "test_a_copy_the_function_reshaped_cannot_go_back_and_says_so.<locals>.shrinks(): argument x was handed "
        "as a private copy (torch cannot share the array's layout), and the function changed that copy's shape "
        "from (3,) to (1,) in place, so what it wrote could not reach the caller's array. Found "
        "numpy.ndarray(shape=(3,), dtype=<f8). Fix: keep the tensor's shape in the function (write into it with "
        "x[...] = ...), or return the new tensor instead."
    )


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda x: x.unsqueeze_(0), "shape from (2, 2) to (1, 2, 2)"),
        (lambda x: x.t_(), "strides from (16, 8) to (8, 16) bytes"),
    ],
    ids=["unsqueeze_", "t_"],
)
def test_any_in_place_layout_change_of_a_private_copy_is_refused(change: Any, words: str) -> None:
    """A square matrix's ``t_`` keeps its shape but not its layout: refused like a new shape,
    the caller's array unchanged."""
    a = np.arange(4.0).reshape(2, 2)
    with pytest.raises(ac.ConversionError) as info:
        ac.accepts_tensor(lambda x: change(x.mul_(2)))(a[::-1])
    assert str(info.value) == (
        "test_any_in_place_layout_change_of_a_private_copy_is_refused.<locals>.<lambda>(): argument x was handed "
        "as a private copy (torch cannot share the array's layout), and the "
        f"function changed that copy's {words} in place, so what it wrote could not reach the caller's array. "
        "Found numpy.ndarray(shape=(2, 2), dtype=<f8). Fix: keep the tensor's shape in the function (write into "
        "it with x[...] = ...), or return the new tensor instead."
    )
    assert a.tolist() == [[0.0, 1.0], [2.0, 3.0]]


def _first_and_second(x: torch.Tensor, y: torch.Tensor) -> None:
    x[0] = 10
    y[1] = 20


def _second_shared_and_copy_untouched(x: torch.Tensor, y: torch.Tensor) -> None:
    y += 0  # a write that changes no value (torch's add_)
    x[1] = 11


@pytest.mark.parametrize("generic", [False, True], ids=["flat", "generic"])
@pytest.mark.parametrize(
    ("function", "views"),
    [
        (_first_and_second, lambda b: (b[::-1], b[::-1])),
        (_first_and_second, lambda b: (b, b[::-1])),
        (_first_and_second, lambda b: (b[::-1], b)),
        (_first_and_second, lambda b: (b[::-2], b[::-1])),
        (_second_shared_and_copy_untouched, lambda b: (b, b[::-1])),
        (_second_shared_and_copy_untouched, lambda b: (b[::-1], b[::-1])),
    ],
)
def test_writes_through_two_views_of_one_array_both_reach_it(function: Any, views: Any, generic: bool) -> None:
    """Two arguments viewing one caller array, one or both private copies: each copy gives back
    only the elements the function changed in it, so neither undoes the other's write, as NumPy's
    own writes through the two views leave the array."""
    b, expected = np.arange(6.0), np.arange(6.0)
    function(*views(expected))  # what NumPy's own writes through the views give
    with ac.stats() if generic else contextlib.nullcontext():
        ac.accepts_tensor(function)(*views(b))
    assert b.tolist() == expected.tolist()


@pytest.mark.parametrize(
    "write",
    [
        lambda x: x.data.__setitem__(0, 9.0),
        lambda x: x.numpy().__setitem__(0, 9.0),
        lambda x: torch.from_numpy(x.numpy())[0].fill_(9.0),
        lambda x: x.detach().__setitem__(0, 9.0),
    ],
    ids=["data", "numpy", "from_numpy", "detach"],
)
def test_a_write_torch_does_not_count_reaches_the_caller_too(write: Any) -> None:
    """Writes that leave the version counter as it was (through ``.data``, ``.numpy()``) reach
    the caller's array from a private copy as from shared memory."""
    for layout in (lambda b: b, lambda b: b[::-1], lambda b: b.astype(b.dtype.newbyteorder())):
        b = np.arange(4.0)
        handed = layout(b)
        ac.accepts_tensor(write)(handed)
        assert handed[0] == 9.0


@pytest.mark.parametrize("generic", [False, True], ids=["flat", "generic"])
def test_a_generators_writes_reach_the_caller_as_it_yields(generic: bool) -> None:
    """A generator function's body runs as it is iterated: what it wrote into a private copy
    reaches the caller's array after each step (``next``, ``send``, ``close``), as from shared
    memory at its yields; a value the caller wrote in between is not written over."""

    @ac.accepts_tensor
    def fills(x: torch.Tensor) -> Any:
        for i in range(len(x)):
            x[i] = yield float(x.sum())

    b = np.zeros(3)
    with ac.stats() if generic else contextlib.nullcontext():
        steps = fills(b[::-1])
    assert next(steps) == 0.0
    assert steps.send(5.0) == 5.0
    assert b.tolist() == [0.0, 0.0, 5.0]
    b[0] = 9.0  # the caller's own write, which the next step's copy back keeps
    steps.send(6.0)
    assert b.tolist() == [9.0, 6.0, 5.0]
    steps.close()
    closing = fills(b[::-1])
    next(closing)
    closing.send(1.0)
    closing.send(2.0)
    with pytest.raises(StopIteration):
        closing.send(3.0)  # the last write, copied back as the generator ends
    assert b.tolist() == [3.0, 2.0, 1.0]


def test_the_copy_back_compares_bit_for_bit() -> None:
    """-0.0 written over 0.0 reaches the caller (equal as numbers, not as bits); NaNs the function
    left alone stay as they were, payload and all."""
    b = np.array([0.0, 1.0, 2.0])
    ac.accepts_tensor(lambda x: x.__setitem__(2, -0.0))(b[::-1])
    assert np.signbit(b[0])
    payload = np.array([0x7FF8000000000123, 0], dtype=np.uint64).view(np.float64)
    ac.accepts_tensor(lambda x: x.__setitem__(0, 5.0))(payload[::-1])
    assert payload.view(np.uint64).tolist() == [0x7FF8000000000123, 0x4014000000000000]


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    steps=st.lists(st.sampled_from([-2, -1, 1, 2]), min_size=3, max_size=3),
    dtype=st.sampled_from([np.float64, np.float32, np.int16, np.complex64, np.bool_]),
    swapped=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_writes_into_any_strided_view_reach_the_caller(
    shape: list[int], steps: list[int], dtype: Any, swapped: bool, seed: int
) -> None:
    """Any writable view of an array, reversed or strided along any axis and in either byte
    order: torch code's write of one element reaches the caller's array exactly as NumPy's
    own write into the view does, on the pair's flat call."""
    base = (np.arange(math.prod(s * 2 for s in shape)) % 7).astype(dtype).reshape([s * 2 for s in shape])
    if swapped:
        base = base.astype(base.dtype.newbyteorder())
    view = base[tuple(slice(None, None, step) for step in steps[: len(shape)])]
    index = tuple(int(i) for i in np.random.default_rng(seed).integers(0, view.shape))
    expected = base.copy()
    expected[tuple(slice(None, None, step) for step in steps[: len(shape)])][index] = 1

    @ac.returns_numpy
    @ac.accepts_tensor
    def write(x: torch.Tensor) -> torch.Tensor:
        x[index] = 1
        return x.sum()

    write(view)
    assert base.tolist() == expected.tolist()


@pytest.mark.parametrize("generic", [False, True], ids=["flat", "generic"])
def test_a_failed_copy_back_is_a_note_on_the_users_exception(generic: bool) -> None:
    """The function raised after reshaping its private copy: its exception wins, the copy
    back's failure a note on it, on the flat and the generic call alike."""

    @ac.accepts_tensor
    def shrinks_then_fails(x: torch.Tensor) -> None:
        x.resize_(1)
        raise KeyError("the user's own error")

    with pytest.raises(KeyError) as info, ac.stats() if generic else contextlib.nullcontext():
        shrinks_then_fails(np.zeros(3)[::-1])
    assert info.value.__notes__ == [
        "autoconvert: after test_a_failed_copy_back_is_a_note_on_the_users_exception.<locals>.shrinks_then_fails() "
        "raised: ConversionError: test_a_failed_copy_back_is_a_note_on_the_users_exception.<locals>."
        "shrinks_then_fails(): argument x was handed as a private copy (torch cannot share the array's layout), "
        "and the function changed that copy's shape from (3,) to (1,) in place, so what it wrote could not reach "
        "the caller's array. Found numpy.ndarray(shape=(3,), dtype=<f8). Fix: keep the tensor's shape in the "
        "function (write into it with x[...] = ...), or return the new tensor instead."
    ]


def test_accepts_tensor_dtype_casts_floating_arrays_only() -> None:
    @ac.accepts_tensor(dtype=torch.float32)
    def dtypes(*xs: torch.Tensor) -> list[torch.dtype]:
        return [x.dtype for x in xs]

    assert dtypes(np.ones(1), np.ones(1, np.int64), np.ones(1, np.complex128)) == [
        torch.float32,
        torch.int64,
        torch.complex64,
    ]


def test_accepts_tensor_dtype_input_follows_the_calls_tensors() -> None:
    """A mixed call: arrays take the floating dtype of the tensor arguments, whatever their order."""

    @ac.accepts_tensor(dtype="input")
    def dtypes(a: Any, b: Any) -> tuple[torch.dtype, torch.dtype]:
        return a.dtype, b.dtype

    assert dtypes(np.ones(1), torch.ones(1, dtype=torch.float16)) == (torch.float16, torch.float16)
    assert dtypes(np.ones(1), np.ones(1)) == (torch.float64, torch.float64)


def test_accepts_tensor_goes_to_the_default_device() -> None:
    @ac.accepts_tensor
    def where(x: torch.Tensor) -> torch.device:
        return x.device

    assert where(np.ones(1)) == torch.device("cpu")
    with torch.device("meta"):
        assert where(np.ones(1)) == torch.device("meta")
    assert ac.accepts_tensor(device="meta")(where.__wrapped__)(np.ones(1)) == torch.device("meta")


def test_returns_numpy_detaches_silently_and_widens() -> None:
    """A torch model's output reaches NumPy code as a plain array, gradients dropped without a word."""
    layer = torch.nn.Linear(3, 2).to(torch.bfloat16)

    @ac.returns_numpy
    @ac.accepts_tensor(dtype=torch.bfloat16)
    def predict(x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"y": layer(x)}

    out = predict(np.ones((4, 3)))
    assert out["y"].dtype == np.float32 and out["y"].shape == (4, 2)


def test_returns_numpy_shares_cpu_memory_writable_unless_copied() -> None:
    kept = torch.zeros(2)

    @ac.returns_numpy
    def f() -> torch.Tensor:
        return kept

    a = f()
    assert shares(a, kept) and a.flags.writeable
    assert not shares(ac.returns_numpy(copy=True)(f.__wrapped__)(), kept)


def test_to_numpy_and_to_tensor_convert_nested_values() -> None:
    t = torch.arange(3, dtype=torch.bfloat16)
    out = ac.to_numpy({"a": [t, 1], "b": "x"})
    assert out["a"][0].dtype == np.float32 and out["a"][1] == 1 and out["b"] == "x"
    back = ac.to_tensor(out, dtype=torch.bfloat16)
    assert torch.equal(back["a"][0], t)
    with pytest.raises(ac.CopyError) as info:
        ac.to_numpy([t], copy=False)
    assert str(info.value).startswith(
        "autoconvert.to_numpy(): argument obj[0] cannot be shared with NumPy without a copy: NumPy lacks torch.bfloat16"
    )


def test_to_numpy_and_to_tensor_reject_unknown_options() -> None:
    with pytest.raises(TypeError) as info:
        ac.to_numpy(1, device="cpu")
    assert str(info.value) == "autoconvert.to_numpy() got unknown option(s) device; it takes copy, grad, nested, sparse"


def test_to_numpy_takes_a_grad_policy() -> None:
    """Evaluation code calls ``to_numpy(model(x))`` on outputs that require grad: detached
    silently by default, or with ``grad=`` as for accepts_numpy, named by their path in ``obj``."""
    w = torch.ones(2, requires_grad=True)
    out = {"logits": w * 2}
    assert ac.to_numpy(out)["logits"].tolist() == [2.0, 2.0]
    assert ac.to_numpy(out, grad="detach")["logits"].tolist() == [2.0, 2.0]
    with pytest.raises(ac.GradientError) as info:
        ac.to_numpy(out, grad="error")
    assert str(info.value) == (
        "autoconvert.to_numpy(): argument obj['logits'] requires grad, and NumPy code cannot pass gradients "
        "back. Found torch.Tensor(shape=(2,), dtype=torch.float32, layout=torch.strided, device=cpu). Fix: pass "
        "obj['logits'].detach(), call under torch.no_grad(), or allow it detached with grad='detach' (in "
        "ac.to_numpy(obj, grad='detach'); grad='warn' says so once); to keep the gradient, keep the computation "
        "in torch, or make "
        "the NumPy code a differentiable torch operation with ac.numpy_op(fn, backward=...)."
    )
    with torch.no_grad():  # grad mode off: nothing to say, as for the decorators
        assert ac.to_numpy(out, grad="error")["logits"].shape == (2,)
    with ac.config(grad="error"), pytest.raises(ac.GradientError):
        ac.to_numpy(out)


def test_to_numpy_and_to_tensor_reuse_their_converter_per_option_set_and_config() -> None:
    """Built once per distinct option set and config, so a loop pays only the conversion:
    a config block still changes what a call does, and a bad option is refused every time."""
    t = torch.ones(2)
    assert shares(ac.to_numpy(t), t) and shares(ac.to_numpy(t), t)
    with ac.config(copy=True):
        assert not shares(ac.to_numpy(t), t)
    assert shares(ac.to_numpy(t), t)
    assert not shares(ac.to_numpy(t, copy=True), t)
    a = np.ones(2)
    assert ac.to_tensor(a, dtype=torch.float32).dtype == torch.float32
    assert ac.to_tensor(a).dtype == torch.float64
    for _ in range(2):
        with pytest.raises(ValueError, match="grad= takes 'warn', 'detach' or 'error'"):
            ac.to_numpy(t, grad="loud")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="device= takes None"):
        ac.to_tensor(a, device=[0])  # type: ignore[arg-type]  # unhashable: validated, never kept


def test_a_result_s_methods_take_arrays_through_the_reverse_pair() -> None:
    """A dataclass of torch code with a method (a fitted model's ``predict``) came back with
    its tensors as arrays while its method, handed the caller's arrays, met its tensors in
    torch and raised a raw TypeError. Its methods now take arrays, as NumPy code calls them,
    and give arrays back, as the result came."""

    @dataclasses.dataclass
    class Fit:
        w: torch.Tensor

        def predict(self, x: torch.Tensor) -> torch.Tensor:
            assert type(x) is torch.Tensor
            return x @ self.w

    fit = ac.returns_numpy(ac.accepts_tensor(lambda x: Fit(x.sum(0))))
    model = fit(np.ones((3, 2)))
    assert type(model.w) is np.ndarray and model.w.tolist() == [3.0, 3.0]
    predicted = model.predict(np.ones((2, 2)))
    assert type(predicted) is np.ndarray and predicted.tolist() == [6.0, 6.0]
    assert type(model.predict(x=np.ones(2))) is np.float64
