"""accepts_numpy: which arguments become arrays, how, and what the function may do with them."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import math
import re
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
import scipy.ndimage
import scipy.stats
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import autoconvert as ac

from .conftest import shares

#: A lookup table frozen read-only, which a function writes into by mistake.
_FROZEN_LOOKUP = np.zeros(3)
_FROZEN_LOOKUP.setflags(write=False)


def kinds(*args: Any, **kwargs: Any) -> Any:
    """What the function saw: the type name of each argument, recursively for containers."""

    def kind(x: Any) -> Any:
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            return type(x)(kind(v) for v in x)
        if isinstance(x, dict):
            return {k: kind(v) for k, v in x.items()}
        return type(x).__name__

    return kind(args), kind(kwargs)


class Point(NamedTuple):
    x: Any
    y: Any


@dataclasses.dataclass(frozen=True)
class Batch:
    image: Any
    label: Any
    note: str = "n"


def test_every_tensor_argument_arrives_as_an_array_everything_else_untouched() -> None:
    """Positional, keyword, *args and **kwargs tensors become arrays; other objects are the same objects."""
    marker = object()
    seen: dict[str, Any] = {}

    @ac.accepts_numpy
    def f(a: Any, b: Any, *rest: Any, c: Any = None, **more: Any) -> None:
        seen.update(a=a, b=b, rest=rest, c=c, more=more)

    t = torch.arange(3)
    f(t, marker, t, 5, c=t, d=t, e="s")
    assert type(seen["a"]) is np.ndarray and seen["b"] is marker
    assert [type(r) for r in seen["rest"]] == [np.ndarray, int]
    assert type(seen["c"]) is np.ndarray
    assert type(seen["more"]["d"]) is np.ndarray and seen["more"]["e"] == "s"


def test_containers_are_rebuilt_with_their_types() -> None:
    """list, tuple, namedtuple, dict, OrderedDict, defaultdict and dataclasses keep their types."""
    t = torch.ones(2)
    factory = list
    got: list[Any] = []

    @ac.accepts_numpy
    def f(*xs: Any) -> None:
        got.extend(xs)

    dd = collections.defaultdict(factory, {"a": t})
    f([t, 1], (t,), Point(t, 2), {"k": [t]}, collections.OrderedDict(z=t), dd, Batch(t, 3))
    lst, tup, pt, dct, od, ddo, batch = got
    assert type(lst) is list and type(lst[0]) is np.ndarray and lst[1] == 1
    assert type(tup) is tuple and type(tup[0]) is np.ndarray
    assert type(pt) is Point and type(pt.x) is np.ndarray and pt.y == 2
    assert type(dct["k"][0]) is np.ndarray
    assert type(od) is collections.OrderedDict and type(od["z"]) is np.ndarray
    assert type(ddo) is collections.defaultdict and ddo.default_factory is factory
    assert type(batch) is Batch and type(batch.image) is np.ndarray and batch.label == 3 and batch.note == "n"


def test_a_container_without_tensors_is_passed_as_the_same_object() -> None:
    """Nothing is rebuilt when there is nothing to convert."""
    payload = {"a": [1, 2, (3, "x")], "b": Point(1, 2)}

    @ac.accepts_numpy
    def f(x: Any) -> Any:
        return x

    assert f(payload) is payload


def test_nested_false_converts_top_level_arguments_only() -> None:
    """nested=False leaves containers, tensors inside included, untouched."""
    t = torch.ones(1)
    box = [t]

    @ac.accepts_numpy(nested=False)
    def f(a: Any, b: Any) -> Any:
        return a, b

    a, b = f(t, box)
    assert type(a) is np.ndarray and b is box and b[0] is t


def test_unregistered_types_are_leaves_even_when_they_hold_tensors() -> None:
    """Sets, ranges, custom mappings and other objects pass through untouched."""
    t = torch.ones(1)

    class Holder:
        def __init__(self) -> None:
            self.t = t

    h = Holder()

    @ac.accepts_numpy
    def f(*xs: Any) -> Any:
        return xs

    out = f(h, range(3), frozenset({1}))
    assert out[0] is h and out[0].t is t and out[1] == range(3)


def test_copy_none_shares_cpu_memory_read_only() -> None:
    """The default hands over the tensor's own memory, read-only, so the function can't change it."""
    t = torch.arange(6.0).reshape(2, 3)

    @ac.accepts_numpy
    def f(a: np.ndarray) -> np.ndarray:
        return a

    a = f(t)
    assert shares(a, t) and not a.flags.writeable
    t[0, 0] = 42  # the mutate-one-side probe: the array sees the tensor's change
    assert a[0, 0] == 42


def test_writing_into_a_read_only_array_raises_with_both_fixes() -> None:
    """A NumPy function writing in place gets ReadOnlyError (a ValueError) naming copy=True and writeback=True."""

    @ac.accepts_numpy
    def clip_in_place(a: np.ndarray) -> None:
        np.clip(a, 0, 1, out=a)

    t = torch.tensor([-1.0, 2.0])
    with pytest.raises(ValueError) as info:
        clip_in_place(t)
    assert type(info.value) is ac.ReadOnlyError
    assert str(info.value) == (
        "test_writing_into_a_read_only_array_raises_with_both_fixes.<locals>.clip_in_place(): argument a was "
        "written into by the function; arrays made from tensor arguments are read-only so that NumPy code never "
        "changes the caller's tensors behind its back. Found ValueError('output array is read-only'). "
        "Fix: pass copy=True to give the function private writable copies, or writeback=True to let its "
        "changes reach the caller's tensors (in @ac.accepts_numpy(copy=True) on "
        "test_writing_into_a_read_only_array_raises_with_both_fixes.<locals>.clip_in_place, or a with "
        "ac.config(copy=True): block around the call)."
    )
    assert torch.equal(t, torch.tensor([-1.0, 2.0]))
    assert isinstance(info.value.__cause__, ValueError)


def _laplace_in_place(a: np.ndarray) -> None:
    scipy.ndimage.laplace(a, output=a)


@pytest.mark.parametrize(
    "write", [lambda a: a.sort(), lambda a: np.copyto(a, 1.0), _laplace_in_place], ids=["sort", "copyto", "ndimage"]
)
def test_a_write_into_the_callers_own_read_only_array_keeps_numpys_error(write: Any) -> None:
    """An array the caller passed as it is (a view of bytes, a read-only memmap), not made from a
    tensor: NumPy's refusal of a write into it stands, as without autoconvert, never a
    ReadOnlyError whose fixes (copy=True, writeback=True) are about tensors."""
    own = np.frombuffer(np.arange(3.0).tobytes())

    @ac.accepts_numpy
    def both(t: np.ndarray, a: np.ndarray) -> None:
        write(a)

    with pytest.raises(ValueError) as info:
        both(torch.ones(3), own)
    assert type(info.value) is ValueError and "read-only" in str(info.value)


def _fill_diagonal(a: np.ndarray) -> None:
    np.fill_diagonal(a, 0.0)


def _laplace_into(a: np.ndarray) -> None:
    import scipy.ndimage

    scipy.ndimage.laplace(a, output=a)


@pytest.mark.parametrize(
    ("write", "numpy_says"),
    [
        (lambda a: a.sort(), "sort array is read-only"),
        (lambda a: a.partition(1), "partition array is read-only"),
        (_fill_diagonal, "underlying array is read-only"),
        (lambda a: np.random.default_rng(0).shuffle(a), "array is read-only"),
        (lambda a: np.put(a, [0], 1.0), "put: output array is read-only"),
        (lambda a: np.copyto(a, 1.0), "assignment destination is read-only"),
        (_laplace_into, "output array is read-only."),
        (np.random.default_rng(0).shuffle, "array is read-only"),
    ],
    ids=[
        "ndarray.sort",
        "ndarray.partition",
        "np.fill_diagonal",
        "Generator.shuffle",
        "np.put",
        "np.copyto",
        "ndimage",
        "a Cython method as the function",
    ],
)
def test_every_way_numpy_refuses_a_write_is_a_read_only_error(write: Any, numpy_says: str) -> None:
    """NumPy words each refusal by what was written ("sort array is read-only"); every one of them,
    on a handed array, is a ReadOnlyError (these passed as bare ValueErrors), and copy=True runs."""
    t = torch.tensor([[3.0, 1.0, 2.0], [6.0, 5.0, 4.0], [9.0, 8.0, 7.0]])
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.accepts_numpy(write)(t)
    assert f"Found ValueError({numpy_says!r})" in str(info.value)
    assert torch.equal(t, torch.tensor([[3.0, 1.0, 2.0], [6.0, 5.0, 4.0], [9.0, 8.0, 7.0]]))
    ac.accepts_numpy(copy=True)(write)(t)


def test_compiled_code_refusing_read_only_arrays_it_only_reads_says_so() -> None:
    """Cython's typed memoryviews refuse read-only buffers on entry, even where the function only
    reads (``scipy.signal.sosfilt``): the ReadOnlyError says the function needs writable arrays,
    and copy=True (its fix) runs it."""
    import scipy.signal

    sos, signal = scipy.signal.butter(2, 0.3, output="sos"), np.linspace(0.0, 1.0, 16)
    read_only = sos.copy()
    read_only.setflags(write=False)
    try:
        scipy.signal.sosfilt(read_only, signal)
    except ValueError as e:
        refusal = str(e)
    else:
        pytest.skip("this SciPy's sosfilt takes read-only arrays")
    assert refusal == "buffer source array is read-only"
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.accepts_numpy(scipy.signal.sosfilt)(torch.from_numpy(sos), signal)
    assert str(info.value) == (
        "sosfilt(): argument sos was refused by compiled code that needs writable arrays (a Cython memoryview); "
        "arrays made from tensor arguments are read-only so that NumPy code never changes the caller's tensors. "
        "Found ValueError('buffer source array is read-only'). Fix: pass copy=True to give the function private "
        "writable copies (in @ac.accepts_numpy(copy=True) on sosfilt, or a with ac.config(copy=True): block "
        "around the call)."
    )
    filtered = ac.accepts_numpy(copy=True)(scipy.signal.sosfilt)(torch.from_numpy(sos), signal)
    np.testing.assert_array_equal(filtered, scipy.signal.sosfilt(sos, signal))


def test_unrelated_value_errors_pass_through_unchanged() -> None:
    """Only read-only failures are rewritten; the function's own errors keep their identity."""
    boom = ValueError("bad input")

    @ac.accepts_numpy
    def f(a: np.ndarray) -> None:
        raise boom

    with pytest.raises(ValueError) as info:
        f(torch.ones(1))
    assert info.value is boom


def test_copy_true_gives_private_writable_copies() -> None:
    """copy=True: the seed's .cpu().detach().numpy().copy(), in one step."""
    t = torch.zeros(3)

    @ac.accepts_numpy(copy=True)
    def f(a: np.ndarray) -> np.ndarray:
        a += 1
        return a

    a = f(t)
    assert a.flags.writeable and not shares(a, t)
    assert torch.equal(t, torch.zeros(3)) and np.array_equal(a, np.ones(3, dtype=np.float32))


def test_copy_false_refuses_to_copy_naming_the_argument_and_why() -> None:
    """copy=False raises CopyError (also a ValueError) with path, found and fix."""

    @ac.accepts_numpy(copy=False)
    def f(batch: Any) -> None:
        pass

    x = torch.ones(2, 2, dtype=torch.bfloat16)
    with pytest.raises(ValueError) as info:
        f({"masks": [torch.ones(1), x]})
    assert type(info.value) is ac.CopyError
    assert str(info.value) == (
        "test_copy_false_refuses_to_copy_naming_the_argument_and_why.<locals>.f(): argument batch['masks'][1] "
        "cannot be shared with NumPy without a copy: NumPy lacks torch.bfloat16, so it must widen to "
        "torch.float32. Found torch.Tensor(shape=(2, 2), dtype=torch.bfloat16, layout=torch.strided, "
        "device=cpu). Fix: use copy=None to copy only when needed, or copy=True for a private copy."
    )


def test_copy_false_shares_read_only() -> None:
    """copy=False hands the tensor's memory over read-only too."""

    @ac.accepts_numpy(copy=False)
    def f(a: np.ndarray) -> np.ndarray:
        return a

    t = torch.ones(3)
    a = f(t)
    assert shares(a, t) and not a.flags.writeable


def test_writeback_shares_cpu_memory_and_copies_back_otherwise() -> None:
    """writeback=True: writes reach float32 tensors directly and bfloat16/conj tensors after the call."""

    @ac.accepts_numpy(writeback=True)
    def double(*arrays: np.ndarray) -> None:
        for a in arrays:
            np.multiply(a, 2, out=a)

    plain = torch.ones(2)
    narrow = torch.ones(2, dtype=torch.bfloat16)
    conj = torch.tensor([1 + 1j, 2 - 1j]).conj()
    double(plain, narrow, conj)
    assert torch.equal(plain, torch.full((2,), 2.0))
    assert narrow.dtype == torch.bfloat16 and torch.equal(narrow, torch.full((2,), 2.0, dtype=torch.bfloat16))
    assert torch.equal(conj.resolve_conj(), torch.tensor([2 - 2j, 4 + 2j]))


#: Dense layouts that are not C order: (name, view of a (2, 3, 4) tensor).
STRIDED_LAYOUTS = [
    ("transposed", lambda t: t[0].T),
    ("permuted", lambda t: t.permute(2, 0, 1)),
    ("column slice", lambda t: t[:, :, 1]),
    ("stepped", lambda t: t[:, :, ::2]),
]


@given(
    layout=st.sampled_from(STRIDED_LAYOUTS),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.bool]),
    copy=st.sampled_from([None, True]),
    out=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_a_writable_array_is_c_ordered_on_every_copy_route(
    layout: tuple[str, Callable[[torch.Tensor], torch.Tensor]], dtype: torch.dtype, copy: bool | None, out: bool
) -> None:
    """writeback's and out_params' arrays are C-ordered (compiled code refuses strided output
    memory) whether the array is the tensor's own memory, a widened copy (bfloat16; float16
    under widen_float16) or a copy=True copy, and the function's write reaches the tensor."""
    seen: list[np.ndarray] = []

    def fill(a: np.ndarray) -> None:
        seen.append(a)
        a.reshape(-1)[-1] = 1  # a C-ordered array reshapes to a view: the write is the array's

    options: dict[str, Any] = {"out_params": "a"} if out else {"writeback": True}
    wrapped = ac.accepts_numpy(copy=copy, widen_float16=dtype is torch.float16, **options)(fill)
    t = layout[1](torch.zeros(2, 3, 4, dtype=dtype))
    wrapped(t)
    assert seen[0].flags.c_contiguous
    expected = torch.zeros(t.shape, dtype=dtype).reshape(-1)
    expected[-1] = 1
    assert torch.equal(t.reshape(-1), expected)


#: How two arguments may share memory: (name, first, second), each a function of the tensor.
ALIASINGS = [
    ("same tensor twice", lambda t: t, lambda t: t),
    ("whole, then its first row", lambda t: t, lambda t: t[0]),
    ("first row, then the whole", lambda t: t[0], lambda t: t),
    ("a column and a row", lambda t: t[:, 1], lambda t: t[1]),
    ("disjoint rows", lambda t: t[0], lambda t: t[2]),
]


#: What makes writeback use a private copy: (name, tensor maker, options). float32 shares.
PRIVATE_ROUTES = [
    ("float32 shared", lambda: torch.zeros(3, 4), {}),
    ("bfloat16 widened", lambda: torch.zeros(3, 4, dtype=torch.bfloat16), {}),
    ("float8 widened", lambda: torch.zeros(3, 4, dtype=torch.float8_e5m2), {}),
    ("float16 widened", lambda: torch.zeros(3, 4, dtype=torch.float16), {"widen_float16": True}),
    ("conj bit resolved", lambda: torch.zeros(3, 4, dtype=torch.complex64).conj(), {}),
    ("copy=True", lambda: torch.zeros(3, 4), {"copy": True}),
]


@pytest.mark.parametrize("aliasing", ALIASINGS, ids=[a[0] for a in ALIASINGS])
@pytest.mark.parametrize("route", PRIVATE_ROUTES, ids=[r[0] for r in PRIVATE_ROUTES])
def test_writeback_keeps_aliased_arguments_aliased(aliasing: Any, route: Any) -> None:
    """Arguments sharing memory see each other's writes, and all writes come back, on every
    route: the result is what NumPy gives on arrays that alias the same way, whatever the dtype."""
    _, first, second = aliasing
    _, make, options = route

    def scribble(a: np.ndarray, b: np.ndarray) -> float:
        a[...] = 1
        b += 2  # reads a's write where they overlap
        return float(a.real.sum())

    expected_memory = np.zeros((3, 4))
    expected_result = scribble(first(expected_memory), second(expected_memory))
    t = make()
    result = ac.accepts_numpy(writeback=True, **options)(scribble)(first(t), second(t))
    assert result == expected_result
    assert np.array_equal(t.resolve_conj().real.double().numpy(), expected_memory)


def test_writeback_refuses_aliased_arguments_that_cannot_view_one_copy() -> None:
    """A tensor and its conj view share memory but cannot be one array: refused, not half lost."""
    t = torch.zeros(2, dtype=torch.complex64)

    @ac.accepts_numpy(writeback=True)
    def fill(a: np.ndarray, b: np.ndarray) -> None:
        a[...] = 1j

    with pytest.raises(ac.ConversionError) as caught:
        fill(t, t.conj())
    assert str(caught.value) == (
        "test_writeback_refuses_aliased_arguments_that_cannot_view_one_copy.<locals>.fill(): "
        "argument b shares memory with another argument of another dtype or conj/neg bit, and needs a "
        "private copy; writes through one array could not be seen through the other, and one copy back would "
        "undo the other's. Found torch.Tensor(shape=(2,), dtype=torch.complex64, layout=torch.strided, "
        "device=cpu). Fix: pass b.clone() (the function's writes to it are then dropped), or one view of the memory."
    )
    assert torch.equal(t, torch.zeros(2, dtype=torch.complex64))


def test_writeback_shares_memory_when_aliased_views_differ_in_dtype() -> None:
    """Views of one float32 buffer under two dtypes both share the caller's memory: allowed."""
    t = torch.zeros(2)

    @ac.accepts_numpy(writeback=True)
    def fill(a: np.ndarray, bits: np.ndarray) -> None:
        a[0] = 1.0
        bits[1] = np.float32(2.0).view(np.int32)

    fill(t, t.view(torch.int32))
    assert t.tolist() == [1.0, 2.0]


def test_writeback_reaches_the_caller_even_when_the_function_raises() -> None:
    """The caller sees what was written before the exception, as if the function ran on the tensor."""

    @ac.accepts_numpy(writeback=True)
    def half_done(a: np.ndarray) -> None:
        a[0] = 7
        raise RuntimeError("midway")

    t = torch.zeros(2, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="midway"):
        half_done(t)
    assert t.tolist() == [7.0, 0.0]


def test_writeback_tells_autograd_like_an_in_place_op() -> None:
    """A write into a tensor saved for backward is caught, shared memory or copied back alike."""

    @ac.accepts_numpy(writeback=True, grad="detach")
    def bump(a: np.ndarray) -> None:
        a[0] = 5

    for dtype in (torch.float32, torch.bfloat16):  # shared memory, then a copy written back
        w = torch.ones(3, dtype=dtype, requires_grad=True)
        loss = (w * w).sum()
        bump(w)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_writeback_into_inference_tensors() -> None:
    """Tensors made under torch.inference_mode have no version counter and take writes only
    in inference mode: both the shared and the copied route still reach them."""

    @ac.accepts_numpy(writeback=True)
    def fill(a: np.ndarray) -> None:
        a[...] = 2

    for dtype in (torch.float32, torch.bfloat16):
        with torch.inference_mode():
            t = torch.zeros(2, dtype=dtype)
        fill(t)
        assert t.tolist() == [2.0, 2.0]


def test_writeback_into_a_leaf_that_requires_grad() -> None:
    """Writing back into a parameter does not trip autograd's in-place check."""

    @ac.accepts_numpy(writeback=True, grad="detach")
    def zero(a: np.ndarray) -> None:
        a[...] = 0

    p = torch.nn.Parameter(torch.ones(3, dtype=torch.bfloat16))
    zero(p)
    assert torch.equal(p.detach(), torch.zeros(3, dtype=torch.bfloat16)) and p.requires_grad


def test_dtypes_numpy_lacks_are_widened_losslessly() -> None:
    """bfloat16 and float8 arrive as float32, complex32 as complex64, every value exact."""
    got: list[np.ndarray] = []

    @ac.accepts_numpy
    def f(*a: np.ndarray) -> None:
        got.extend(a)

    bf = torch.tensor([1.0078125, -3.5, float("inf")], dtype=torch.bfloat16)
    f8 = torch.tensor([448.0, -0.001953125], dtype=torch.float8_e4m3fn)
    c32 = torch.tensor([1 + 2j], dtype=torch.complex64).to(torch.complex32)
    f(bf, f8, c32)
    assert got[0].dtype == np.float32 and got[0].tolist() == [1.0078125, -3.5, float("inf")]
    assert got[1].dtype == np.float32 and got[1].tolist() == [448.0, -0.001953125]
    assert got[2].dtype == np.complex64 and got[2].tolist() == [1 + 2j]


def test_conjugate_and_negative_bits_are_resolved() -> None:
    """A lazy .conj() arrives conjugated; NumPy never sees the unconjugated memory."""
    z = torch.tensor([1 + 2j, 3 - 4j])

    @ac.accepts_numpy
    def f(a: np.ndarray, b: np.ndarray) -> tuple[Any, Any]:
        return a.tolist(), b.tolist()

    assert f(z.conj(), z.conj().imag) == ([1 - 2j, 3 + 4j], [-2.0, 4.0])


def test_nan_inf_and_rng_state_are_untouched() -> None:
    """NaN and inf pass through unchanged, and NumPy's global RNG is never consumed."""
    state = np.random.get_state()[1].copy()

    @ac.returns_tensor
    @ac.accepts_numpy
    def ident(a: np.ndarray) -> np.ndarray:
        return a

    out = ident(torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]))
    assert torch.equal(out.isnan(), torch.tensor([True, False, False, False]))
    assert out[1:].tolist() == [float("inf"), -float("inf"), -0.0] and str(out[3].item()) == "-0.0"
    assert np.array_equal(np.random.get_state()[1], state)


class TestGrad:
    """grad=: what happens to tensors that require grad."""

    @staticmethod
    def make(**options: Any) -> Any:
        @ac.accepts_numpy(**options)
        def total(a: np.ndarray) -> float:
            return float(a.sum())

        return total

    def test_warn_once_per_function_at_the_callers_line(self) -> None:
        """The default warns once per decorated function, pointing at the caller."""
        f = self.make()
        x = torch.ones(2, requires_grad=True)
        with pytest.warns(ac.GradientWarning) as record:  # noqa: PT031 - "once" needs two calls inside
            assert f(x) == 2.0
            f(x)
        assert len(record) == 1 and record[0].filename == __file__
        assert str(record[0].message).startswith(
            "TestGrad.make.<locals>.total(): argument a requires grad, and NumPy code cannot pass gradients back"
        )

    def test_the_warning_names_the_argument_s_path_on_every_route(self) -> None:
        """The warning is said where the call's arguments are known: a decorator, adapt, to_numpy."""

        def paths(call: Any) -> str:
            with pytest.warns(ac.GradientWarning) as record:
                call()
            assert len(record) == 1
            return str(record[0].message).split(" requires grad")[0]

        def scale(factor: float, batch: dict[str, Any]) -> None:
            pass

        def typed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return a

        graph = torch.ones(2, requires_grad=True)
        assert paths(lambda: ac.accepts_numpy(scale)(2.0, {"w": [torch.ones(1), graph]})).endswith(
            ".scale(): argument batch['w'][1]"
        )
        assert paths(lambda: ac.accepts_numpy(writeback=True)(scale)(2.0, batch={"w": graph})).endswith(
            ".scale(): argument batch['w']"
        )
        assert paths(lambda: ac.adapt(typed)(torch.ones(1), b=graph)).endswith(".typed(): argument b")
        # to_numpy's "warn" is once per process: the suite's only to_numpy(grad="warn") call.
        assert paths(lambda: ac.to_numpy([1, {"k": graph}], grad="warn")) == (
            "autoconvert.to_numpy(): argument obj[1]['k']"
        )

    def test_no_word_under_no_grad_or_inference(self) -> None:
        """Under torch.no_grad() nothing is said, not even with grad='error'."""
        for mode in ("warn", "error"):
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("error")
                assert self.make(grad=mode)(torch.ones(2, requires_grad=True)) == 2.0

    def test_detach_is_silent(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert self.make(grad="detach")(torch.ones(2, requires_grad=True)) == 2.0

    def test_error_raises_gradient_error(self) -> None:
        """grad='error' raises GradientError (a RuntimeError and a TypeError) naming the argument."""
        p = torch.nn.Parameter(torch.ones(2))
        with pytest.raises(ac.GradientError) as info:
            self.make(grad="error")(p)
        assert isinstance(info.value, RuntimeError) and isinstance(info.value, TypeError)
        assert str(info.value) == (
            "TestGrad.make.<locals>.total(): argument a requires grad, and NumPy code cannot pass gradients "
            "back. Found torch.nn.parameter.Parameter(shape=(2,), dtype=torch.float32, layout=torch.strided, "
            "device=cpu). Fix: pass a.detach(), call under torch.no_grad(), or allow it detached with grad='detach' "
            "(in @ac.accepts_numpy(grad='detach') on TestGrad.make.<locals>.total, where grad='error' was given, "
            "so a config block cannot change it; grad='warn' says so once); to keep the gradient, "
            "make TestGrad.make.<locals>.total "
            "a differentiable torch operation with @ac.numpy_op(backward=...) in place of the decorators, its "
            "vector-Jacobian product written in NumPy."
        )

    def test_the_warning_says_where_each_fix_goes(self) -> None:
        """The warning names what keeps the gradient and where grad='detach' goes: the decorator
        that takes it (accepts_numpy, adapt), torchify's call, or to_numpy's."""

        def said(call: Any) -> str:
            with pytest.warns(ac.GradientWarning) as record:
                call(torch.ones(2, requires_grad=True))
            assert len(record) == 1
            return str(record[0].message)

        def typed(a: np.ndarray) -> np.ndarray:
            return a

        head = (
            "{name}(): argument a requires grad, and NumPy code cannot pass gradients back: it was detached, so "
            "no gradient flows through this call. To keep the gradient, make {name} a differentiable torch "
            "operation with {op}, its vector-Jacobian product written in NumPy. To silence this, pass "
            "grad='detach' (in {site}; grad='error' forbids it), or call under torch.no_grad()"
        )
        name = "TestGrad.test_the_warning_says_where_each_fix_goes.<locals>.typed"
        for decorator in (ac.accepts_numpy, ac.adapt):
            site = f"@ac.{decorator.__name__}(grad='detach') on {name}, or a with ac.config(grad='detach'): block around the call"
            op = "@ac.numpy_op(backward=...) in place of the decorators"
            assert said(decorator(typed)) == head.format(name=name, op=op, site=site)
        assert said(ac.numpy_op(typed)) == head.format(
            name=name,
            op=f"ac.numpy_op({name}, backward=...)",
            site=f"ac.numpy_op({name}, grad='detach'), or a with ac.config(grad='detach'): block around the call",
        ).replace(
            f"make {name} a differentiable torch operation with ac.numpy_op({name}, backward=...), its vector-Jacobian "
            "product written in NumPy",
            f"give ac.numpy_op({name}, backward=...) its vector-Jacobian product, written in NumPy",
        )
        kde = ac.torchify(scipy.stats).gaussian_kde(torch.tensor([0.0, 1.0, 3.0]))
        assert said(lambda a: kde.evaluate(points=a)).replace("argument points", "argument a") == head.format(
            name="gaussian_kde.evaluate",
            op="ac.numpy_op(gaussian_kde.evaluate, backward=...)",
            site="the ac.torchify(..., grad='detach') call that made it, or a with ac.config(grad='detach'): block "
            "around the call",
        )


class TestSelection:
    """only= / exclude=: checked against the signature when decorating."""

    def test_only_converts_the_named_parameters(self) -> None:
        @ac.accepts_numpy(only=["x", "rest"])
        def f(x: Any, y: Any, *rest: Any, z: Any = None) -> Any:
            return kinds(x, y, *rest, z=z)

        t = torch.ones(1)
        assert f(t, t, t, z=t) == (("ndarray", "Tensor", "ndarray"), {"z": "Tensor"})

    def test_exclude_leaves_the_named_parameters_alone(self) -> None:
        @ac.accepts_numpy(exclude="y")
        def f(x: Any, y: Any, **kw: Any) -> Any:
            return kinds(x, y, **kw)

        t = torch.ones(1)
        assert f(t, y=t, w=t) == (("ndarray", "Tensor"), {"w": "ndarray"})

    def test_a_selected_argument_that_cannot_convert_is_named(self) -> None:
        """The error names the selected parameter and the path inside it; unselected ones never fail."""

        @ac.accepts_numpy(only="batch")
        def f(model: Any, batch: Any) -> None: ...

        meta = torch.empty(2, device="meta")
        f(meta, {"x": torch.ones(1)})  # unselected: passed through untouched
        with pytest.raises(ac.ConversionError) as info:
            f(None, batch={"x": torch.ones(1), "y": meta})
        assert str(info.value) == (
            "TestSelection.test_a_selected_argument_that_cannot_convert_is_named.<locals>.f(): argument "
            "batch['y'] is a meta tensor, which holds no data. Found torch.Tensor(shape=(2,), dtype=torch.float32, "
            "layout=torch.strided, device=meta). Fix: run the call on tensors with real data."
        )

    def test_unknown_names_are_a_type_error_when_decorating(self) -> None:
        def f(x: Any, y: Any) -> None: ...

        with pytest.raises(TypeError) as info:
            ac.accepts_numpy(only=["x", "z"])(f)
        assert str(info.value) == (
            "accepts_numpy() on TestSelection.test_unknown_names_are_a_type_error_when_decorating.<locals>.f(): "
            "no parameter named z; it has x, y"
        )

    def test_self_is_never_selectable(self) -> None:
        with pytest.raises(TypeError, match="no parameter named self"):

            class C:
                @ac.accepts_numpy(only="self")
                def m(self, x: Any) -> None: ...

    def test_an_empty_only_converts_nothing(self) -> None:
        """only=[] is a selection of no parameters, not the absence of a selection."""

        @ac.accepts_numpy(only=[])
        def f(x: Any) -> str:
            return type(x).__name__

        assert f(torch.ones(1)) == "Tensor"

    def test_only_and_exclude_together_are_refused(self) -> None:
        with pytest.raises(TypeError, match="pass only= or exclude=, not both"):
            ac.accepts_numpy(only="x", exclude="y")(lambda x, y: None)

    def test_no_signature_works_without_only(self) -> None:
        """ufuncs and builtins have no Python signature to read, and need none."""
        neg = ac.returns_tensor(ac.accepts_numpy(np.negative))
        assert torch.equal(neg(torch.ones(2)), -torch.ones(2))
        with pytest.raises(TypeError, match="need a signature"):
            ac.accepts_numpy(only="x")(max)  # a builtin with no text signature


@pytest.mark.parametrize(
    ("make", "found", "problem", "fix"),
    [
        (
            lambda: torch.ones(2, 2, 2).to_sparse(),
            "torch.Tensor(shape=(2, 2, 2), dtype=torch.float32, layout=torch.sparse_coo, device=cpu)",
            "is a 3-d sparse tensor with 0 dense dimension(s); scipy.sparse holds 2-d matrices",
            "points[1].to_dense(), or a 2-d sparse tensor where the function takes scipy.sparse matrices",
        ),
        (
            lambda: torch.ones(2, device="meta"),
            "torch.Tensor(shape=(2,), dtype=torch.float32, layout=torch.strided, device=meta)",
            "is a meta tensor, which holds no data",
            "run the call on tensors with real data",
        ),
        (
            lambda: torch.ones(2, dtype=torch.uint8).view(torch.bits8),
            "torch.Tensor(shape=(2,), dtype=torch.bits8, layout=torch.strided, device=cpu)",
            "has dtype torch.bits8, which NumPy lacks and which no NumPy dtype holds exactly",
            "convert it first, for example points[1].to(torch.float32)",
        ),
    ],
)
def test_tensors_numpy_cannot_hold_raise_conversion_error(make: Any, found: str, problem: str, fix: str) -> None:
    """The message names the function, the argument path, what was found and the fix."""

    @ac.accepts_numpy
    def centroid(points: Any) -> None:
        pass

    with pytest.raises(ac.ConversionError) as info:
        centroid([torch.ones(1), make()])
    assert type(info.value) is ac.ConversionError and isinstance(info.value, TypeError)
    assert (
        str(info.value)
        == f"test_tensors_numpy_cannot_hold_raise_conversion_error.<locals>.centroid(): argument points[1] {problem}. Found {found}. Fix: {fix}."
    )


def test_quantized_nested_and_masked_tensors_are_refused() -> None:
    """Prototype tensor kinds raise too, and their creation warnings are the caller's, not ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own prototype warnings, emitted by the makers below
        quantized = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
        masked = torch.masked.masked_tensor(torch.ones(2), torch.tensor([True, False]))

    @ac.accepts_numpy
    def f(x: Any) -> None:
        pass

    messages = []
    for bad in (quantized, nested, masked):
        with pytest.raises(ac.ConversionError) as info:
            f(x=bad)
        messages.append(str(info.value))
    assert "argument x is a quantized tensor" in messages[0] and "Fix: pass x.dequantize()." in messages[0]
    assert "argument x is a nested (ragged) tensor" in messages[1] and "x.unbind()" in messages[1]
    assert "argument x is a MaskedTensor; NumPy would silently lose its mask" in messages[2]
    assert re.search(r"Found torch\.masked\..*MaskedTensor\(shape=\(2,\)", messages[2])


class TestEdges:
    """Paths that only some inputs take."""

    def test_copy_false_refuses_conjugate_and_negative_bits(self) -> None:
        @ac.accepts_numpy(copy=False)
        def f(z: Any) -> None:
            pass

        z = torch.tensor([1 + 2j])
        with pytest.raises(ac.CopyError, match=r"it has its conjugate bit set \(a lazy \.conj\(\)\)"):
            f(z.conj())
        with pytest.raises(ac.CopyError, match="it has its negative bit set"):
            f(z.conj().imag)

    def test_copy_true_with_grad_is_still_one_private_copy(self) -> None:
        @ac.accepts_numpy(copy=True, grad="detach")
        def f(a: np.ndarray) -> np.ndarray:
            return a

        p = torch.nn.Parameter(torch.ones(3))
        a = f(p)
        assert a.flags.writeable and not shares(a, p)

    def test_paths_name_varargs_keywords_namedtuple_fields_and_positions(self) -> None:
        """Error paths use the parameter names: *args entries, **kwargs keys, namedtuple fields."""
        bad = torch.empty(2, device="meta")

        @ac.accepts_numpy
        def f(first: Any, *rest: Any, **extra: Any) -> None:
            pass

        cases = {
            "argument rest[1]": lambda: f(1, 2, bad),
            "argument extra['weights']": lambda: f(1, weights=bad),
            "argument first.y": lambda: f(Point(1, bad)),
        }
        for where, call in cases.items():
            with pytest.raises(ac.ConversionError) as info:
                call()
            assert str(info.value).startswith(
                f"TestEdges.test_paths_name_varargs_keywords_namedtuple_fields_and_positions.<locals>.f(): {where} is a meta tensor"
            )

        with pytest.raises(ac.ConversionError) as info:
            ac.accepts_numpy(max)(torch.ones(1), bad)
        assert str(info.value).startswith("max(): argument args[1] is a meta tensor")

    def test_the_same_decorator_twice_stacks_without_fusing(self) -> None:
        """accepts_numpy on accepts_numpy: the outer converts, the inner sees arrays already."""
        inner = ac.accepts_numpy(lambda a: type(a).__name__)
        outer = ac.accepts_numpy(copy=True)(inner)
        assert outer.__wrapped__ is inner and outer(torch.ones(1)) == "ndarray"


# The function's own torch.from_numpy() of a read-only array warns, once per process, from
# the function (torch 2.x, "The given NumPy array is not writable"): the function's warning.
_FROM_NUMPY_NOT_WRITABLE = "ignore:The given NumPy array is not writable:UserWarning"


@pytest.mark.filterwarnings(_FROM_NUMPY_NOT_WRITABLE)
class TestCheckWrites:
    """YOLOv5's preprocessing, ``img = torch.from_numpy(img); img /= 255``, inside a function
    handed read-only arrays: torch wraps the memory anyway and writes the caller's tensor."""

    @staticmethod
    def preprocess(img: np.ndarray) -> Any:
        t = torch.from_numpy(img)
        t /= 255
        return t

    def test_the_read_only_guard_cannot_see_torch_from_numpy(self) -> None:
        """The documented limit, shown: without check_writes the caller's tensor changes."""
        img = torch.full((2,), 255.0)
        ac.accepts_numpy(self.preprocess)(img)
        assert img.tolist() == [1.0, 1.0]

    @pytest.mark.parametrize("guard", ["none", "check_writes", "copy"])
    def test_ufunc_at_goes_around_the_flag_and_check_writes_or_copy_stop_it(self, guard: str) -> None:
        """NumPy's own ``np.add.at`` writes into a read-only 1-d array (the documented limit): the
        caller's tensor changes unless check_writes puts it back (raising) or copy=True hands a copy.
        A NumPy that refuses the write raises autoconvert's ReadOnlyError in every case."""

        def histogram(bins: np.ndarray) -> Any:
            np.add.at(bins, [0, 0, 1], 1.0)
            return bins.sum()

        decorated = ac.accepts_numpy(histogram, check_writes=guard == "check_writes", copy=guard == "copy" or None)
        counts, flagged = torch.zeros(3), np.zeros(3)
        flagged.flags.writeable = False
        try:
            np.add.at(flagged, [0], 1.0)
            honoured = False
        except ValueError:  # a NumPy whose ufunc.at honours the flag
            honoured = True
        if guard == "check_writes" or (honoured and guard == "none"):
            with pytest.raises(ac.ReadOnlyError):
                decorated(counts)
        else:
            assert float(decorated(counts)) == 3.0
        assert counts.tolist() == ([2.0, 1.0, 0.0] if guard == "none" and not honoured else [0.0, 0.0, 0.0])

    def test_check_writes_puts_the_values_back_and_names_the_argument(self) -> None:
        batch = {"img": torch.full((2,), 255.0), "ids": torch.arange(2)}

        @ac.accepts_numpy(check_writes=True)
        def step(batch: dict[str, np.ndarray]) -> Any:
            return TestCheckWrites.preprocess(batch["img"])

        with pytest.raises(ac.ReadOnlyError) as info:
            step(batch)
        assert batch["img"].tolist() == [255.0, 255.0] and batch["ids"].tolist() == [0, 1]
        assert str(info.value) == (
            "TestCheckWrites.test_check_writes_puts_the_values_back_and_names_the_argument.<locals>.step(): "
            "argument batch['img'] was changed by the function, through a route the read-only guard cannot "
            "see (torch.from_numpy or torch.as_tensor on the array, its .base, np.frombuffer, compiled code "
            "ignoring the flag such as SciPy's overwrite_*=True); the values were put back. Found torch.Tensor(shape=(2,), dtype=torch.float32, layout=torch.strided, device=cpu). "
            "Fix: pass copy=True to give the function private writable copies, or writeback=True to let its "
            "changes reach the caller's tensors (in @ac.accepts_numpy(copy=True) on "
            "TestCheckWrites.test_check_writes_puts_the_values_back_and_names_the_argument.<locals>.step, or a "
            "with ac.config(copy=True): block around the call)."
        )

    def test_every_route_and_every_bit_is_seen(self) -> None:
        """``a.base``, a write of -0.0 over 0.0, complex values; NaN equal to itself is no write."""

        @ac.accepts_numpy(check_writes=True)
        def through_base(a: np.ndarray) -> None:
            base = a.base
            while isinstance(base, np.ndarray) and base.base is not None:
                base = base.base
            if isinstance(base, torch.Tensor):
                base.add_(1)
            else:  # NumPy's own chain: make the same write through torch
                torch.from_numpy(np.asarray(base)).add_(1)

        @ac.accepts_numpy(check_writes=True)
        def negative_zero(a: np.ndarray) -> None:
            torch.from_numpy(a).neg_()

        @ac.accepts_numpy(check_writes=True)
        def reads_only(a: np.ndarray) -> float:
            return float(np.nansum(np.abs(a)))

        ones = torch.ones(3)
        with pytest.raises(ac.ReadOnlyError):
            through_base(ones)
        assert ones.tolist() == [1.0, 1.0, 1.0]
        zeros = torch.zeros(2)
        with pytest.raises(ac.ReadOnlyError):
            negative_zero(zeros)
        assert not torch.signbit(zeros).any()
        with pytest.raises(ac.ReadOnlyError):
            negative_zero(torch.ones(2, dtype=torch.complex64))
        assert reads_only(torch.tensor([float("nan"), 1.0])) == 1.0  # NaN is NaN: nothing changed

    def test_the_users_exception_wins_and_the_restore_is_a_note(self) -> None:
        img = torch.full((2,), 255.0)

        @ac.accepts_numpy(check_writes=True)
        def fails_after_writing(a: np.ndarray) -> None:
            TestCheckWrites.preprocess(a)
            raise KeyError("the user's own error")

        with pytest.raises(KeyError) as info:
            fails_after_writing(img)
        assert img.tolist() == [255.0, 255.0]
        assert info.value.__notes__[0].startswith(
            "autoconvert: after TestCheckWrites.test_the_users_exception_wins_and_the_restore_is_a_note"
            ".<locals>.fails_after_writing() raised: ReadOnlyError: "
        )

    def test_config_turns_it_on_and_copies_need_no_check(self) -> None:
        img = torch.full((2,), 255.0)
        with ac.config(check_writes=True), pytest.raises(ac.ReadOnlyError):
            ac.accepts_numpy(self.preprocess)(img)
        assert img.tolist() == [255.0, 255.0]
        private = ac.accepts_numpy(copy=True, check_writes=True)(self.preprocess)
        assert private(img).tolist() == [1.0, 1.0] and img.tolist() == [255.0, 255.0]


def test_a_failing_write_back_never_replaces_the_users_exception() -> None:
    """The user's exception wins; the write-back's failure is a note on it."""
    caller = torch.ones(3, dtype=torch.bfloat16)  # a private float32 copy crosses, to be copied back

    @ac.accepts_numpy(writeback=True)
    def shrinks_then_fails(a: np.ndarray) -> None:
        caller.resize_(0)  # the write-back's copy into the caller's tensor now fails
        raise LookupError("the user's own error")

    with pytest.raises(LookupError) as info:
        shrinks_then_fails(caller)
    assert info.value.__notes__[0].startswith(
        "autoconvert: after test_a_failing_write_back_never_replaces_the_users_exception.<locals>."
        "shrinks_then_fails() raised: ConversionError: test_a_failing_write_back_never_replaces_the_users_exception."
        "<locals>.shrinks_then_fails(): argument a could not take back what the function wrote (writeback=True): "
        "RuntimeError: "
    )


class TestReadOnlyRelabelling:
    """Only NumPy refusing a write into an array autoconvert handed over becomes ReadOnlyError."""

    def test_a_write_into_a_handed_array_is_relabelled(self) -> None:
        @ac.accepts_numpy
        def scale_(a: np.ndarray) -> None:
            np.multiply(a, 2, out=a)

        with pytest.raises(ac.ReadOnlyError):
            scale_(torch.ones(2))

    def test_the_users_own_read_only_error_is_left_alone(self) -> None:
        @ac.accepts_numpy
        def configure(a: np.ndarray) -> None:
            raise ValueError("the config is read-only")

        with pytest.raises(ValueError) as info:
            configure(torch.ones(2))
        assert type(info.value) is ValueError and str(info.value) == "the config is read-only"

    def test_a_write_into_an_array_the_function_made_is_left_alone(self) -> None:
        @ac.accepts_numpy
        def tile(a: np.ndarray) -> np.ndarray:
            grid = np.broadcast_to(np.zeros(3), (2, 3))  # read-only by NumPy's own rule
            grid[0, 0] = a.sum()
            return grid

        with pytest.raises(ValueError) as info:
            tile(torch.ones(2))
        assert type(info.value) is ValueError and str(info.value) == "assignment destination is read-only"

    @pytest.mark.parametrize("shape", [(2,), (0,), (0, 3), (3, 0)])
    @pytest.mark.parametrize("view", [False, True])
    def test_a_write_into_an_argument_is_refused_empty_or_not(self, shape: tuple[int, ...], view: bool) -> None:
        """An empty tensor's array shares no memory with anything: the write into it, or into a
        view of it, is told by what it views, and refused as any other."""

        @ac.accepts_numpy
        def doubled(a: np.ndarray) -> None:
            target = a[...] if view else a
            target *= 2

        with pytest.raises(ac.ReadOnlyError, match=r"\.doubled\(\): argument a was written into by the function"):
            doubled(torch.zeros(shape))

    def test_a_write_into_a_read_only_global_is_left_alone(self) -> None:
        """The array written is a global the function reads, none it was handed: NumPy's own error
        stands, and no argument is blamed."""

        @ac.accepts_numpy
        def record(a: np.ndarray) -> np.ndarray:
            _FROZEN_LOOKUP[0] = a.sum()
            return a

        with pytest.raises(ValueError) as info:
            record(torch.ones(2))
        assert type(info.value) is ValueError and str(info.value) == "assignment destination is read-only"

    def test_a_write_into_a_broadcast_view_of_a_handed_array_keeps_numpy_s_error(self) -> None:
        """np.broadcast_to's views are read-only whatever they view: copy=True or writeback=True
        would not make the write possible, so NumPy's own error stands."""

        @ac.accepts_numpy
        def spread(a: np.ndarray) -> np.ndarray:
            grid = np.broadcast_to(a, (2, 3))
            grid[0, 0] = 1
            return grid

        for options in ({}, {"copy": True}):
            with pytest.raises(ValueError) as info:
                ac.accepts_numpy(**options)(spread.__wrapped__)(torch.ones(3))
            assert type(info.value) is ValueError and str(info.value) == "assignment destination is read-only"

    def test_the_relabelled_error_names_the_argument_written_into(self) -> None:
        """Of several handed arrays, the one the write hit is named, by its path; an in-place
        operator's operand, read-only as well, is only read."""

        @ac.accepts_numpy
        def scale(factor: Any, batch: dict[str, list[np.ndarray]]) -> None:
            target = batch["x"][1][:1]  # a view of the handed array
            target *= factor

        prefix = "TestReadOnlyRelabelling.test_the_relabelled_error_names_the_argument_written_into.<locals>.scale(): "
        with pytest.raises(ac.ReadOnlyError) as info:
            scale(2.0, {"x": [torch.ones(2), torch.ones(2)]})
        assert str(info.value).startswith(prefix + "argument batch['x'][1] was written into by the function; ")
        with pytest.raises(ac.ReadOnlyError) as info:
            scale(torch.ones(1), {"x": [torch.ones(2), torch.ones(2)]})
        assert str(info.value).startswith(prefix + "argument batch['x'][1] was written into by the function; ")


def _identity(x: Any) -> Any:
    return x


class _Wrapper(torch.Tensor):
    """A wrapper tensor subclass, as torch's subclass tutorials write one: its data is the
    tensor it wraps, each operation unwrapping it."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> _Wrapper:
        made = torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined]
            cls, inner.shape, dtype=inner.dtype, device=inner.device, requires_grad=inner.requires_grad
        )
        made.inner = inner
        return made  # type: ignore[no-any-return]

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        def unwrap(x: Any) -> Any:
            return x.inner if isinstance(x, _Wrapper) else x

        def rewrap(x: Any) -> Any:
            return _Wrapper(x) if isinstance(x, torch.Tensor) else x

        out = func(*torch.utils._pytree.tree_map(unwrap, args), **torch.utils._pytree.tree_map(unwrap, kwargs or {}))
        return torch.utils._pytree.tree_map(rewrap, out)


class TestNoRawErrors:
    """The sweep's raw errors, each now a ConversionError naming the argument and the fix."""

    def test_fake_tensors(self) -> None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            fake = torch.ones(2)
        with pytest.raises(ac.ConversionError) as info:
            ac.accepts_numpy(lambda a: a)(fake)
        assert "argument a is a FakeTensor (torch.compile's tracing, or FakeTensorMode), which holds no data" in str(
            info.value
        )
        assert str(info.value).endswith(
            "Fix: run the call eagerly, or make the function an autoconvert.numpy_op(fake=...) so tracing never runs NumPy."
        )

    @pytest.mark.parametrize("entry", ["to_numpy", "accepts_numpy", "requires grad", "torchify"])
    def test_a_wrapper_subclass(self, entry: str) -> None:
        """A tensor subclass with its own ``__torch_dispatch__`` (``_make_wrapper_subclass``),
        whose ``.numpy()`` torch refuses: a ConversionError naming it and the fix, on every
        entry (torch's raw "not supported for tensor subclasses" before)."""
        wrapped = _Wrapper(torch.arange(3.0, requires_grad=entry == "requires grad"))
        calls = {
            "to_numpy": ("autoconvert.to_numpy(): argument obj", lambda: ac.to_numpy(wrapped)),
            "accepts_numpy": ("_identity(): argument x", lambda: ac.accepts_numpy(_identity)(wrapped)),
            "requires grad": ("_identity(): argument x", lambda: ac.accepts_numpy(grad="detach")(_identity)(wrapped)),
            "torchify": ("sum(): argument a", lambda: ac.torchify(np).sum(wrapped)),
        }
        where, call = calls[entry]
        with pytest.raises(ac.ConversionError) as info:
            call()
        assert str(info.value) == (
            f"{where} is a _Wrapper, a tensor subclass with its own __torch_dispatch__, whose data NumPy cannot "
            f"see (torch refuses its .numpy()). Found {__name__}._Wrapper(shape=(3,), dtype=torch.float32, "
            "layout=torch.strided, device=cpu). Fix: pass the plain tensor it stands for, as the subclass gives "
            "it (a DTensor's full_tensor(), say)."
        )
        assert ac.to_numpy(torch.nn.Parameter(torch.ones(2)).detach()).tolist() == [1.0, 1.0]  # a plain subclass

    def test_a_dtensor(self, tmp_path: Any) -> None:
        """A DTensor on a one-process gloo group: a ConversionError naming ``full_tensor()``,
        which works."""
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_gloo_available():
            pytest.skip("this torch has no gloo backend")
        from torch.distributed.device_mesh import init_device_mesh

        tensor = pytest.importorskip("torch.distributed.tensor", reason="this torch has no public DTensor")
        if not hasattr(tensor, "distribute_tensor"):  # torch 2.4 keeps it in torch.distributed._tensor
            pytest.skip("this torch has no public DTensor (torch.distributed.tensor.distribute_tensor)")
        Shard, distribute_tensor = tensor.Shard, tensor.distribute_tensor  # noqa: N806 - a class

        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
        try:
            sharded = distribute_tensor(torch.arange(4.0), init_device_mesh("cpu", (1,)), [Shard(0)])
            with pytest.raises(ac.ConversionError) as info:
                ac.accepts_numpy(_identity)(sharded)
            assert str(info.value) == (
                "_identity(): argument x is a DTensor, spread over a device mesh, whose data NumPy cannot see. "
                "Found torch.distributed.tensor.DTensor(shape=(4,), dtype=torch.float32, layout=torch.strided, "
                "device=cpu). Fix: pass x.full_tensor() (its whole value, gathered onto every rank), or "
                "x.to_local() (this rank's shard)."
            )
            assert ac.accepts_numpy(_identity)(sharded.full_tensor()).tolist() == [0.0, 1.0, 2.0, 3.0]
        finally:
            dist.destroy_process_group()

    @pytest.mark.parametrize(
        "transform",
        [
            lambda f: torch.vmap(f)(torch.ones(3, 2)),
            lambda f: torch.func.grad(lambda x: torch.tensor(f(x)))(torch.ones(2)),
        ],
        ids=["vmap", "grad"],
    )
    def test_vmap_and_func_grad(self, transform: Any) -> None:
        f = ac.accepts_numpy(grad="detach")(lambda a: float(a.sum()))
        with pytest.raises(ac.ConversionError) as info:
            transform(f)
        assert str(info.value) == (
            "TestNoRawErrors.test_vmap_and_func_grad.<locals>.<lambda>(): argument a is being transformed by "
            "torch.vmap or torch.func (a functorch-wrapped tensor), which NumPy code cannot see. Found "
            "torch.Tensor(shape=(2,), dtype=torch.float32, layout=torch.strided, device=cpu). Fix: for gradients, "
            "make the function an autoconvert.numpy_op with backward= (torch.func.grad, vjp, jacrev) or jvp= "
            "(torch.func.jvp, jacfwd); for a batch, loop over it (autoconvert.batched) instead of torch.vmap."
        )

    def test_sparse_meta_tensors(self) -> None:
        meta = torch.sparse_coo_tensor(
            torch.zeros(2, 1, dtype=torch.long), torch.ones(1), (2, 2), device="meta", check_invariants=False
        )
        with pytest.raises(ac.ConversionError, match="argument a is a meta tensor, which holds no data"):
            ac.accepts_numpy(lambda a: a)(meta)

    def test_containers_that_contain_themselves(self) -> None:
        loop: list[Any] = [torch.ones(1)]
        loop.append(loop)
        with pytest.raises(ac.ConversionError) as info:
            ac.accepts_numpy(lambda batch: 1)(loop)
        assert str(info.value) == (
            "TestNoRawErrors.test_containers_that_contain_themselves.<locals>.<lambda>(): argument batch contains "
            "itself, or nests deeper than Python's recursion limit, so it cannot be walked. Found a container that "
            "reaches itself through its items. Fix: break the cycle, or pass nested=False to convert top-level "
            "arguments only."
        )
        looped: dict[str, Any] = {}
        looped["self"] = looped
        with pytest.raises(ac.ConversionError, match="argument obj contains itself"):
            ac.to_numpy(looped)

    def test_a_self_containing_list_with_writeback(self) -> None:
        """writeback walks the arguments for shared memory first: the cycle is still named."""
        loop: list[Any] = [torch.ones(1)]
        loop.append(loop)
        with pytest.raises(ac.ConversionError, match=r"<lambda>\(\): argument batch contains itself"):
            ac.accepts_numpy(writeback=True)(lambda batch: 1)(loop)

    def test_a_self_containing_out_parameter(self) -> None:
        """Out-parameters are handed over before the other arguments: the cycle is named there too."""
        loop: list[Any] = [torch.ones(1)]
        loop.append(loop)
        with pytest.raises(ac.ConversionError, match=r"<lambda>\(\): argument out contains itself"):
            ac.accepts_numpy(out_params="out")(lambda x, out=None: x)(torch.ones(1), out=loop)

    def test_the_function_s_own_error_stands_beside_a_self_containing_argument(self) -> None:
        """With nested=False a self-containing list reaches the function; when the function
        raises, the look for notes must not turn its error into a RecursionError."""
        loop: list[Any] = [torch.ones(1)]
        loop.append(loop)

        @ac.accepts_numpy(nested=False)
        def fails(x: np.ndarray, items: list[Any]) -> None:
            raise KeyError("the function's own")

        with pytest.raises(KeyError, match="the function's own"):
            fails(torch.ones(1), loop)

    def test_meta_tensor_results_and_to_tensor(self) -> None:
        """A meta tensor has no data to place on the caller's device: refused as an argument is."""
        meta = torch.empty(2, device="meta")
        with pytest.raises(ac.ConversionError) as info:
            ac.to_tensor(meta)
        assert str(info.value) == (
            "autoconvert.to_tensor(): argument obj is a meta tensor, which holds no data. Found "
            "torch.Tensor(shape=(2,), dtype=torch.float32, layout=torch.strided, device=meta). "
            "Fix: run the call on tensors with real data."
        )
        with pytest.raises(ac.ConversionError, match=r"<lambda>\(\): result\[1\] is a meta tensor"):
            ac.returns_tensor(lambda: (torch.ones(1), meta))()
        assert ac.to_tensor(meta, device="meta") is meta  # nothing to move

    def test_a_writeback_that_fails_names_the_argument(self) -> None:
        """The function resized the caller's tensor behind the private array it was handed
        (bfloat16 crosses as a float32 copy): the copy back cannot fit, and the error says so
        for that argument, torch's error chained."""
        t = torch.ones(3, dtype=torch.bfloat16)

        @ac.accepts_numpy(writeback=True)
        def shrink(x: Any, a: np.ndarray) -> None:
            a[...] = 2
            t.resize_(0)

        with pytest.raises(ac.ConversionError) as info:
            shrink(1, a=t)
        text = str(info.value)
        assert text.startswith(  # torch's own words after "RuntimeError: " differ between versions
            "TestNoRawErrors.test_a_writeback_that_fails_names_the_argument.<locals>.shrink(): argument a could "
            "not take back what the function wrote (writeback=True): RuntimeError: "
        )
        assert text.endswith(
            ". Found torch.Tensor(shape=(0,), dtype=torch.bfloat16, layout=torch.strided, device=cpu). Fix: keep "
            "the array's shape and dtype in the function (write into it with a[...] = ...), or return the new "
            "array instead, with writeback=False."
        )
        assert isinstance(info.value.__cause__, RuntimeError)

    def test_scipy_refusing_float16_gets_a_note_naming_widen_float16(self) -> None:
        """ndimage's "array type dtype('float16') not supported" keeps its type; a note names the
        float16 argument and widen_float16=True, which makes the same call work."""
        half = torch.ones(4, dtype=torch.float16)
        with pytest.raises(RuntimeError) as info:
            ac.accepts_numpy(scipy.ndimage.uniform_filter)(half, 2)
        assert info.value.__notes__ == [
            "autoconvert: uniform_filter(): argument input is a float16 tensor, handed over as float16, which much "
            "of SciPy rejects; pass widen_float16=True to hand it over as float32 (results come back as float16), "
            "in @ac.accepts_numpy(widen_float16=True) on uniform_filter, or a with ac.config(widen_float16=True): "
            "block around the call"
        ]
        widened = ac.returns_tensor(ac.accepts_numpy(widen_float16=True)(scipy.ndimage.uniform_filter))(half, 2)
        assert widened.dtype == torch.float16 and widened.tolist() == [1.0] * 4
        with pytest.raises(ValueError, match="not on float16") as other:  # another error: no note
            ac.accepts_numpy(lambda a: (_ for _ in ()).throw(ValueError("not on float16")))(half)
        assert not hasattr(other.value, "__notes__")


def _write_by_numpy(a: np.ndarray) -> None:
    a[(0,) * a.ndim] = 9


def _write_around_the_guard(a: np.ndarray) -> None:
    with warnings.catch_warnings():  # torch.from_numpy of a read-only array warns once per process
        warnings.simplefilter("ignore", UserWarning)
        torch.from_numpy(a)[(0,) * a.ndim] = 9


#: Each product taking writeback=True, decorating a function that writes into its argument
#: (``a``; a batch's sample for ``batched``).
_WRITING_PRODUCTS: dict[str, Callable[..., Any]] = {
    "accepts_numpy": lambda body, **options: ac.accepts_numpy(body, **options),
    "torchify": lambda body, **options: ac.torchify(body, **options),
    "adapt": lambda body, **options: ac.adapt(_annotated(body), **options),
    "batched": lambda body, **options: ac.batched(body, **options),
    "batched on threads": lambda body, **options: ac.batched(body, workers=2, **options),
}


def _annotated(body: Callable[[np.ndarray], None]) -> Callable[[np.ndarray], None]:
    """``body`` as ``adapt`` converts it: its parameter annotated as an array."""

    def annotated(a: np.ndarray) -> None:
        body(a)

    annotated.__qualname__ = body.__qualname__
    return annotated


#: An expanded tensor's compact memory and its expanded shape: repeated along 1 or 2 dims, or a 0-d tensor's.
_EXPANSIONS = {"1 dim": ((1, 4), (3, 4)), "2 dims": ((1, 4, 1), (3, 4, 2)), "0-d": ((), (3,))}


def _expanded_writes() -> list[Any]:
    """The cross-product of the writes into an expanded tensor under writeback=True; the
    default run keeps a slice (float32 and bfloat16, one expansion, copy=True and None)."""
    cases = []
    for product, body, dtype, expansion, copy, check_writes, generic in itertools.product(
        _WRITING_PRODUCTS,
        [_write_by_numpy, _write_around_the_guard],
        [torch.float32, torch.float64, torch.bfloat16],
        _EXPANSIONS,
        [True, None, False],
        [False, True],
        [False, True],
    ):
        if copy is False and dtype == torch.bfloat16:
            continue  # a CopyError: NumPy lacks bfloat16
        kept = (
            dtype != torch.float64 and expansion == "1 dim" and copy is not False and not check_writes and not generic
        )
        marks = () if kept else (pytest.mark.slow,)
        how = (copy, check_writes, generic)
        name = (
            f"{product}-{body.__name__}-{dtype}-{expansion}-{copy=}-{check_writes=}-{'generic' if generic else 'fast'}"
        )
        cases.append(pytest.param(product, body, dtype, expansion, how, marks=marks, id=name))
    return cases


@pytest.mark.parametrize(("product", "body", "dtype", "expansion", "how"), _expanded_writes())
def test_a_write_into_an_expanded_tensor_is_refused_or_reaches_the_caller(
    product: str,
    body: Callable[[np.ndarray], None],
    dtype: torch.dtype,
    expansion: str,
    how: tuple[bool | None, bool, bool],
) -> None:
    """writeback=True on an expanded tensor, on every product, fast and generic call: a write
    by NumPy is refused, and so is one around the read-only guard into a private copy
    (copy=True, bfloat16 widened), which would otherwise be lost; one into the caller's own
    memory (shared, float32 or float64) reaches it, as writeback promises. Never lost.
    ``how``: copy, check_writes, and whether a ``stats`` block forces the generic call."""
    copy, check_writes, generic = how
    compact_shape, shape = _EXPANSIONS[expansion]
    batched = product.startswith("batched")
    base = torch.arange(float(math.prod(compact_shape)), dtype=dtype).reshape(compact_shape) + 1
    base = base[None] if batched else base
    t = base.expand(*((2,) if batched else ()), *shape)
    before = base.clone()
    f = _WRITING_PRODUCTS[product](body, writeback=True, copy=copy, check_writes=check_writes)
    shared = copy is not True and dtype != torch.bfloat16
    with ac.stats() if generic else contextlib.nullcontext():
        if body is _write_around_the_guard and shared:
            f(t)
            assert base.flatten()[0] == 9 and torch.equal(base.flatten()[1:], before.flatten()[1:])
            return
        with pytest.raises(ac.ReadOnlyError) as info:
            f(t)
    found = (
        "ValueError('assignment destination is read-only')"
        if body is _write_by_numpy
        else f"torch.Tensor(shape={tuple(t.shape)}, dtype={dtype}, layout=torch.strided, device=cpu)"
    )
    around = (
        ", through a route the read-only guard cannot see (torch.from_numpy or torch.as_tensor on the array, its "
        ".base, np.frombuffer), into a private copy the caller's tensor never sees"
    )
    assert str(info.value) == (
        f"{body.__qualname__}(): argument a is an expanded tensor (zero strides: its elements share memory), "
        "handed over read-only since no write can reach back into it, and the function wrote into it"
        f"{'' if body is _write_by_numpy else around}. Found {found}. Fix: pass a.contiguous() (then writes "
        "reach that copy only), or return the changed array instead."
    )
    assert torch.equal(base, before)


#: Overlapping layouts of a base of 20 elements: (shape, strides, two indices naming one location).
_OVERLAPS = {
    "as_strided": ((4, 4), (2, 1), ((0, 2), (1, 0))),
    "unfold": ((2, 4, 4), (10, 2, 1), ((1, 0, 2), (1, 1, 0))),  # base.reshape(2, 10).unfold(1, 4, 2)
    "3 meeting dims": ((2, 2, 2), (3, 2, 1), ((1, 0, 0), (0, 1, 1))),  # counted element by element
    "expanded too": ((3, 4, 4), (0, 2, 1), ((0, 0, 2), (2, 1, 0))),  # said to be expanded
}


def _overlapping_writes() -> list[Any]:
    """The cross-product of the writes into an overlapping tensor under writeback=True (a
    write into one of two elements sharing a location, or into the other); the default run
    keeps a slice (as_strided and unfold, float32 and bfloat16, copy=True and None, fast call)."""
    cases = []
    for product, layout, twin, how, dtype, copy, generic in itertools.product(
        _WRITING_PRODUCTS,
        _OVERLAPS,
        [0, 1],
        ["numpy", "around the guard"],
        [torch.float32, torch.float64, torch.bfloat16, torch.int16, torch.complex64],
        [True, None, False],
        [False, True],
    ):
        if copy is False and dtype == torch.bfloat16:
            continue  # a CopyError: NumPy lacks bfloat16
        kept = (
            layout in ("as_strided", "unfold")
            and dtype in (torch.float32, torch.bfloat16)
            and copy is not False
            and not generic
            and (twin == 0 or product == "accepts_numpy")
        )
        marks = () if kept else (pytest.mark.slow,)
        name = f"{product}-{layout}-{twin=}-{how}-{dtype}-{copy=}-{'generic' if generic else 'fast'}"
        cases.append(pytest.param(product, layout, twin, how, dtype, (copy, generic), marks=marks, id=name))
    return cases


@pytest.mark.parametrize(("product", "layout", "twin", "how", "dtype", "options"), _overlapping_writes())
def test_a_write_into_an_overlapping_tensor_is_refused_or_reaches_the_caller(  # noqa: PLR0917 - pytest's parameters
    product: str, layout: str, twin: int, how: str, dtype: torch.dtype, options: tuple[bool | None, bool]
) -> None:
    """writeback=True on a tensor whose strides give two elements one location (as_strided,
    unfold with a step below its size), on every product: as with an expanded tensor, a write
    by NumPy is refused, and so is one around the read-only guard into a private copy; one
    into the caller's own memory reaches it. Never lost, whichever of the two is written
    (the copy back of the other one undid it)."""
    copy, generic = options
    shape, strides, indices = _OVERLAPS[layout]
    index = indices[twin]
    batched = product.startswith("batched")
    base = torch.arange(1, 41).to(dtype)  # two samples' memory for batched
    t = base.as_strided((2, *shape), (20, *strides)) if batched else base.as_strided(shape, strides)
    location = sum(i * st for i, st in zip(index, strides, strict=True))
    before = base.clone()

    def write(a: np.ndarray) -> None:
        if how == "numpy":
            a[index] = 99
        else:
            with warnings.catch_warnings():  # torch.from_numpy of a read-only array warns once per process
                warnings.simplefilter("ignore", UserWarning)
                torch.from_numpy(a)[index] = 99

    f = _WRITING_PRODUCTS[product](write, writeback=True, copy=copy)
    shared = copy is not True and dtype != torch.bfloat16
    with ac.stats() if generic else contextlib.nullcontext():
        if how == "around the guard" and shared:
            f(t)
            expected = before.clone()
            expected[[location, location + 20] if batched else location] = 99  # each sample's
            assert torch.equal(base, expected)
            return
        with pytest.raises(ac.ReadOnlyError) as info:
            f(t)
    kind = (
        "an expanded tensor (zero strides: its elements share memory), handed over read-only since no write can "
        "reach back into it"
        if layout == "expanded too"
        else "an overlapping tensor (strides that give some of its elements one memory location, as as_strided "
        "and unfold make), handed over read-only since a write into one of them cannot reach back apart from the "
        "others"
    )
    found = (
        "ValueError('assignment destination is read-only')"
        if how == "numpy"
        else f"torch.Tensor(shape={tuple(t.shape)}, dtype={dtype}, layout=torch.strided, device=cpu)"
    )
    around = (
        ", through a route the read-only guard cannot see (torch.from_numpy or torch.as_tensor on the array, its "
        ".base, np.frombuffer), into a private copy the caller's tensor never sees"
    )
    assert str(info.value) == (
        f"{write.__qualname__}(): argument a is {kind}, and the function wrote into it"
        f"{'' if how == 'numpy' else around}. Found {found}. Fix: pass a.contiguous() (then writes reach that copy "
        "only), or return the changed array instead."
    )
    assert torch.equal(base, before)


def test_an_overlapping_tensor_is_read_whole_under_writeback() -> None:
    """An overlapping tensor handed read-only under writeback=True reads as torch reads it, its
    repeats one location each as NumPy sees them (a private copy of its memory too)."""
    for copy, dtype in [(None, torch.float64), (True, torch.float64), (None, torch.bfloat16)]:
        u = torch.arange(10.0, dtype=dtype).unfold(0, 4, 2)
        seen = ac.accepts_numpy(writeback=True, copy=copy)(lambda a: (a.copy(), a.strides, a.flags.writeable))
        values, strides, writable = seen(u)
        assert (values.tolist(), strides, writable) == (u.tolist(), (2 * values.itemsize, values.itemsize), False)


def test_check_writes_puts_back_a_write_into_an_overlapping_tensor() -> None:
    """check_writes=True puts back a write around the read-only guard into an overlapping
    tensor's memory, whose twins hold one value: one location, put back once."""
    base = torch.arange(10.0)

    def write(a: np.ndarray) -> None:
        with warnings.catch_warnings():  # torch.from_numpy of a read-only array warns once per process
            warnings.simplefilter("ignore", UserWarning)
            torch.from_numpy(a)[0, 2] = 99

    with pytest.raises(ac.ReadOnlyError):
        ac.accepts_numpy(write, check_writes=True)(base.unfold(0, 4, 2))
    assert torch.equal(base, torch.arange(10.0))


#: Tensors handed under check_writes as a private array NumPy can hold (widened, a bit resolved),
#: and one handed as the caller's own memory, each from its values (see _checked_tensor).
_CHECKED_DTYPES = {
    "bfloat16": (torch.bfloat16, {}),
    "float16 widened": (torch.float16, {"widen_float16": True}),
    "complex64 conj": (torch.complex64, {}),
    "float32": (torch.float32, {}),
}
_CHECKED_LAYOUTS = ["contiguous", "transposed", "sliced", "expanded", "overlapping", "0-d"]


def _checked_tensor(dtype: torch.dtype, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A tensor of ``dtype`` in ``layout``, and the base whose memory it views (to see it unchanged)."""
    base = torch.arange(1.0, 13.0).to(dtype)
    views = {
        "contiguous": lambda b: b.reshape(3, 4),
        "transposed": lambda b: b.reshape(3, 4).T,
        "sliced": lambda b: b[::2],
        "expanded": lambda b: b[:4].expand(3, 4),
        "overlapping": lambda b: b.unfold(0, 4, 2),
        "0-d": lambda b: b[5],
    }
    t = views[layout](base)
    return (t.conj(), base) if dtype.is_complex else (t, base)


def _check_writes_cases() -> list[Any]:
    """Products x dtypes x layouts; the default run keeps accepts_numpy's bfloat16 in every layout
    and each other dtype contiguous."""
    cases = []
    for product, name, layout in itertools.product(
        ["accepts_numpy", "torchify", "adapt"], _CHECKED_DTYPES, _CHECKED_LAYOUTS
    ):
        kept = product == "accepts_numpy" and (name == "bfloat16" or layout == "contiguous")
        cases.append(
            pytest.param(
                product, name, layout, marks=() if kept else (pytest.mark.slow,), id=f"{product}-{name}-{layout}"
            )
        )
    return cases


@pytest.mark.parametrize(("product", "name", "layout"), _check_writes_cases())
def test_check_writes_sees_a_write_around_the_guard_into_any_array_handed(product: str, name: str, layout: str) -> None:
    """check_writes=True raises for a write around the read-only guard (``torch.from_numpy``)
    whatever the function was handed: the caller's memory (put back), or a private array (a
    bfloat16 tensor widened, float16 with widen_float16=True, a conj bit resolved), whose write
    would vanish; the caller's tensor keeps its values. A function that only reads raises nothing."""
    dtype, options = _CHECKED_DTYPES[name]
    t, base = _checked_tensor(dtype, layout)
    before = base.clone()
    writes = _WRITING_PRODUCTS[product](_write_around_the_guard, check_writes=True, **options)
    with pytest.raises(ac.ReadOnlyError) as info:
        writes(t)
    assert torch.equal(base, before)
    found = str(info.value).split("; ")[0]
    assert found.endswith(
        "argument a was changed by the function, through a route the read-only guard cannot see "
        "(torch.from_numpy or torch.as_tensor on the array, its .base, np.frombuffer, compiled code ignoring "
        "the flag such as SciPy's overwrite_*=True)"
    )
    _WRITING_PRODUCTS[product](_read_only, check_writes=True, **options)(t)  # no write, no error


def _read_only(a: np.ndarray) -> None:
    assert not a.flags.writeable and np.isfinite(a).all()


def test_check_writes_sees_a_write_into_a_device_tensors_host_copy(accelerator: torch.device) -> None:
    """A GPU tensor's array is its host copy, compared once its transfer settled: a write
    around the guard into it raises, the caller's tensor unchanged; a read raises nothing."""
    t = torch.arange(1.0, 5.0, device=accelerator)
    with pytest.raises(ac.ReadOnlyError):
        ac.accepts_numpy(_write_around_the_guard, check_writes=True)(t)
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0]
    ac.accepts_numpy(_read_only, check_writes=True)(t)


def test_check_writes_says_a_write_into_a_widened_copy_was_lost() -> None:
    """The message of a write around the guard into a bfloat16 tensor's widened array, whole:
    the caller's tensor never saw it, so nothing was put back."""
    caller = torch.full((4,), 255.0, dtype=torch.bfloat16)

    @ac.accepts_numpy(check_writes=True)
    def normalise(img: np.ndarray) -> float:
        _write_around_the_guard(img)
        return float(img.sum())

    with pytest.raises(ac.ReadOnlyError) as info:
        normalise(caller)
    assert caller.tolist() == [255.0] * 4
    assert str(info.value) == (
        "test_check_writes_says_a_write_into_a_widened_copy_was_lost.<locals>.normalise(): argument img was "
        "changed by the function, through a route the read-only guard cannot see (torch.from_numpy or "
        "torch.as_tensor on the array, its .base, np.frombuffer, compiled code ignoring the flag such as SciPy's "
        "overwrite_*=True); into the private copy it was handed (a dtype NumPy lacks, widened; a conjugate or "
        "negative bit resolved; another device's tensor), which the caller's tensor never sees, so the write was "
        "lost. Found torch.Tensor(shape=(4,), dtype=torch.bfloat16, layout=torch.strided, device=cpu). Fix: pass "
        "copy=True to give the function private writable copies, or writeback=True to let its changes reach the "
        "caller's tensors (in @ac.accepts_numpy(copy=True) on "
        "test_check_writes_says_a_write_into_a_widened_copy_was_lost.<locals>.normalise, or a with "
        "ac.config(copy=True): block around the call)."
    )


def test_accepts_tensor_shares_an_overlapping_array_as_numpy_does() -> None:
    """The reverse direction: a writable overlapping NumPy view (``as_strided``) is shared
    with its strides, so a write into one of two elements meeting in memory reaches the
    caller's array, as NumPy's own write would; ``sliding_window_view``, read-only, is copied."""
    base = np.arange(10.0)

    def write(t: torch.Tensor) -> None:
        t[0, 2] = -1

    ac.accepts_tensor(write)(np.lib.stride_tricks.as_strided(base, (4, 4), (16, 8)))
    assert base[:4].tolist() == [0.0, 1.0, -1.0, 3.0]
    base[2] = 2.0
    ac.accepts_tensor(write)(np.lib.stride_tricks.sliding_window_view(base, 4))
    assert base.tolist() == np.arange(10.0).tolist()


class TestExpandedTensors:
    """Expanded (stride-0) tensors are converted through their compact base, never materialised."""

    def test_widening_an_expanded_tensor_costs_its_base_not_its_size(self) -> None:
        """The sweep's case: a bfloat16 ``zeros(1).expand(2e8)`` cost 766 MiB, ``expand(1e10)``
        raised torch's allocator error."""
        seen = ac.accepts_numpy(lambda a: (a.shape, a.dtype, a.strides, a.flags.writeable, float(a.flat[-1])))
        assert seen(torch.zeros(1, dtype=torch.bfloat16).expand(10**10)) == ((10**10,), np.float32, (0,), False, 0.0)
        shape, dtype, strides, writable, last = seen(torch.full((2, 1), 2.0, dtype=torch.bfloat16).expand(2, 5))
        assert (shape, dtype, strides, writable, last) == ((2, 5), np.float32, (4, 0), False, 2.0)
        conj = ac.accepts_numpy(lambda a: complex(a[-1]))(torch.tensor([1 + 2j]).conj().expand(10**10))
        assert conj == 1 - 2j

    def test_writeback_hands_an_expanded_tensor_read_only(self) -> None:
        """No write can reach back into repeated memory, so writeback=True hands it read-only:
        reading works, with private copies too (copy=True), and a write is refused."""
        assert ac.accepts_numpy(writeback=True)(lambda a: float(a.sum()))(torch.ones(1).expand(3)) == 3.0
        assert not ac.accepts_numpy(writeback=True, copy=True)(lambda a: a.flags.writeable)(torch.ones(1).expand(3))

        def fill(a):
            a[0] = 1

        t = torch.zeros(1).expand(3)
        with pytest.raises(ac.ReadOnlyError) as info:
            ac.accepts_numpy(writeback=True)(fill)(t)
        assert str(info.value) == fill.__qualname__ + (
            "(): argument a is an expanded tensor (zero strides: its elements share memory), handed over "
            "read-only since no write can reach back into it, and the function wrote into it. Found "
            "ValueError('assignment destination is read-only'). Fix: pass a.contiguous() (then writes reach that "
            "copy only), or return the changed array instead."
        )
        assert t.tolist() == [0.0, 0.0, 0.0]

    @pytest.mark.parametrize("copy", [None, True])
    @pytest.mark.parametrize("route", ["pair", "torchify"])
    def test_writeback_names_an_expanded_tensor_its_function_asks_to_make_writable(
        self, route: str, copy: bool | None
    ) -> None:
        """``a.setflags(write=True)`` on an expanded tensor's array (its memory, or a private
        copy) is refused by NumPy in words of its own: a ReadOnlyError naming the argument and
        the fix, as a write into it is, the caller's tensor unchanged."""

        def make_writable(a):
            a.setflags(write=True)
            a[0, 0] = 7

        wrapped = (
            ac.returns_tensor(ac.accepts_numpy(make_writable, writeback=True, copy=copy))
            if route == "pair"
            else ac.torchify(make_writable, writeback=True, copy=copy)
        )
        t = torch.arange(4.0)[None].expand(3, 4)
        with pytest.raises(ac.ReadOnlyError) as info:
            wrapped(t)
        assert str(info.value) == make_writable.__qualname__ + (
            "(): argument a is an expanded tensor (zero strides: its elements share memory), handed over "
            "read-only since no write can reach back into it, and the function wrote into it. Found "
            "ValueError('cannot set WRITEABLE flag to True of this array'). Fix: pass a.contiguous() (then writes "
            "reach that copy only), or return the changed array instead."
        )
        assert t[0].tolist() == [0.0, 1.0, 2.0, 3.0]

    @pytest.mark.parametrize("route", ["pair", "torchify"])
    def test_a_function_asking_to_make_its_array_writable_is_told_copy_true_alone(self, route: str) -> None:
        """NumPy makes no array sharing a tensor's memory writable (``a.setflags(write=True)``
        fails under writeback=True too), so the read-only default's refusal offers private
        copies alone, and copy=True then runs the function."""

        def make_writable(a):
            a.setflags(write=True)
            a[0] = 7
            return a

        def wrapped(**options: Any) -> Any:
            if route == "pair":
                return ac.returns_tensor(ac.accepts_numpy(make_writable, **options))
            return ac.torchify(make_writable, **options)

        t = torch.arange(4.0)
        with pytest.raises(ac.ReadOnlyError) as info:
            wrapped()(t)
        site = (
            f"@ac.accepts_numpy(copy=True) on {make_writable.__qualname__}"
            if route == "pair"
            else "the ac.torchify(..., copy=True) call that made it"
        )
        assert str(info.value) == make_writable.__qualname__ + (
            "(): argument a was written into by the function; arrays made from tensor arguments are read-only so "
            "that NumPy code never changes the caller's tensors behind its back. Found ValueError('cannot set "
            f"WRITEABLE flag to True of this array'). Fix: pass copy=True to give the function private writable "
            f"copies (in {site}, or a with ac.config(copy=True): block around the call)."
        )
        assert wrapped(copy=True)(t).tolist() == [7.0, 1.0, 2.0, 3.0]
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]

    def test_writeback_refuses_a_write_around_the_guard_into_an_expanded_tensors_copy(self) -> None:
        """A write through torch.from_numpy into an expanded tensor's private copy (copy=True,
        bfloat16 widened) cannot reach back: refused in NumPy's own write's words, not lost."""

        def fill(a):
            with warnings.catch_warnings():  # torch.from_numpy of a read-only array warns once per process
                warnings.simplefilter("ignore", UserWarning)
                torch.from_numpy(a)[0, 0] = 9

        for dtype, copy in [(torch.float32, True), (torch.bfloat16, None)]:
            t = torch.arange(4.0, dtype=dtype)[None].expand(3, 4)
            with pytest.raises(ac.ReadOnlyError) as info:
                ac.accepts_numpy(writeback=True, copy=copy)(fill)(t)
            assert str(info.value) == fill.__qualname__ + (
                "(): argument a is an expanded tensor (zero strides: its elements share memory), handed over "
                "read-only since no write can reach back into it, and the function wrote into it, through a route "
                "the read-only guard cannot see (torch.from_numpy or torch.as_tensor on the array, its .base, "
                "np.frombuffer), into a private copy the caller's tensor never sees. Found "
                f"torch.Tensor(shape=(3, 4), dtype={dtype}, layout=torch.strided, device=cpu). Fix: pass "
                "a.contiguous() (then writes reach that copy only), or return the changed array instead."
            )
            assert t[0].tolist() == [0.0, 1.0, 2.0, 3.0]

    def test_writeback_refuses_a_generator_written_into_an_expanded_tensors_copy(self) -> None:
        """A returned generator's body runs after the comparison of an expanded tensor's private
        copy: refused, as with any tensor whose writes come back."""

        def body(a):
            _write_around_the_guard(a)
            yield 1

        def deferred(a):
            return body(a)

        with pytest.raises(ac.ConversionError) as info:
            ac.accepts_numpy(writeback=True, copy=True)(deferred)(torch.zeros(1).expand(3))
        assert str(info.value) == deferred.__qualname__ + (
            "(): result is a generator, whose body runs after the call returns, so autoconvert cannot convert "
            "around it (the arrays handed to it would stay in use, writeback and check_writes would run before "
            "it, and what it yields or returns would not be converted). Found builtins.generator. Fix: decorate "
            "the plain function that holds the NumPy code, and call that from inside the generator, coroutine "
            "or context manager."
        )

    def test_a_broadcast_result_too_large_to_copy_names_the_bytes(self) -> None:
        with pytest.raises(ac.ConversionError) as info:
            ac.to_tensor(np.broadcast_to(np.zeros(1), (10**10,)))
        assert str(info.value).startswith(
            "autoconvert.to_tensor(): argument obj needs a copy of 10,000,000,000 elements (74.5 GiB) to become "
            "a tensor, which could not be allocated."
        )


class _Polynomial:
    """A callable computing its signature from its state, as numpoly's polynomials (and so
    chaospy's expansions) do, where reading it raises IndexError."""

    @property
    def __signature__(self) -> Any:
        raise IndexError("index 0 is out of bounds for axis 0 with size 0")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x * 2


#: Every product decorating a callable, with the call it makes.
_DECORATIONS: dict[str, Callable[[Any], Callable[[], Any]]] = {
    "pair": lambda f: lambda: ac.returns_tensor(ac.accepts_numpy(f))(torch.ones(2)),
    "accepts_numpy": lambda f: lambda: ac.accepts_numpy(f)(torch.ones(2)),
    "reverse pair": lambda f: lambda: torch.from_numpy(ac.returns_numpy(ac.accepts_tensor(f))(np.ones(2))),
    "numpy_op": lambda f: lambda: ac.numpy_op(f)(torch.ones(2)),
    "batched": lambda f: lambda: ac.batched(f)(torch.ones(3, 2))[0],
    "adapt": lambda f: lambda: ac.adapt(f)(torch.ones(2)),
    "torchify": lambda f: lambda: ac.torchify(f)(torch.ones(2)),
}


@pytest.mark.parametrize("product", sorted(_DECORATIONS))
def test_a_callable_whose_signature_cannot_be_read_is_decorated_as_one_without(product: str) -> None:
    """Reading the signature raising anything (not only TypeError or ValueError) means the
    callable has none that can be read: every product decorates it, and the call works."""
    result = _DECORATIONS[product](_Polynomial())()
    assert torch.equal(torch.as_tensor(result), torch.full((2,), 2.0))
