"""returns_tensor: results come back as tensors on the caller's device, with a documented dtype and copy policy."""

from __future__ import annotations

import dataclasses
import re
import sys
import warnings
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch

import autoconvert as ac

from .conftest import raised, shares


class Pair(NamedTuple):
    left: Any
    right: Any


@dataclasses.dataclass
class Result:
    boxes: Any
    score: float


def test_arrays_and_scalars_come_back_inside_their_containers() -> None:
    """ndarray and np.generic results become tensors in tuples, lists, namedtuples, dicts and dataclasses."""

    @ac.returns_tensor
    def f() -> Any:
        return (np.arange(2), [np.float32(1.5)], Pair(np.ones(1), "x"), {"k": np.zeros(1)}, Result(np.ones(2), 0.5))

    tup, lst, pair, dct, res = f()
    assert torch.equal(tup, torch.arange(2)) and lst[0].shape == () and lst[0].dtype == torch.float32
    assert type(pair) is Pair and torch.equal(pair.left, torch.ones(1, dtype=torch.float64)) and pair.right == "x"
    assert type(dct["k"]) is torch.Tensor and type(res) is Result and type(res.boxes) is torch.Tensor
    assert res.score == 0.5


def test_other_results_are_returned_untouched() -> None:
    """Plain Python values and strings, NumPy's included, are the same objects."""
    marker = object()

    @ac.returns_tensor
    def f() -> Any:
        return marker, 3, "s", np.str_("label")

    out = f()
    assert out[0] is marker and out[1:3] == (3, "s") and type(out[3]) is np.str_


def test_results_go_to_the_callers_device() -> None:
    """The device the tensor arguments share, found on meta tensors here (any device works the same way)."""

    @ac.returns_tensor
    def make(like: torch.Tensor) -> np.ndarray:
        return np.ones(3)

    assert make(torch.empty(2, device="meta")).device == torch.device("meta")
    assert make(torch.empty(2)).device == torch.device("cpu")


def test_0d_cpu_tensors_and_numpy_arguments_do_not_vote() -> None:
    """As in torch: a 0-d CPU scalar may ride along with tensors elsewhere; arrays never vote."""

    @ac.returns_tensor
    def interp(x: Any, xp: Any, fp: Any) -> np.ndarray:
        return np.zeros(2)

    out = interp(np.ones(2), torch.empty(3, device="meta"), torch.tensor(0.5))
    assert out.device == torch.device("meta")


def test_mixed_devices_raise_naming_each_tensor() -> None:
    """DeviceMismatchError (a RuntimeError) lists every voting tensor with its path and device."""

    @ac.returns_tensor
    def pair(batch: Any, scale: Any) -> np.ndarray:
        return np.zeros(1)

    with pytest.raises(ac.DeviceMismatchError) as info:
        pair({"x": torch.empty(1), "y": torch.empty(1, device="meta")}, scale=torch.tensor(2.0))
    assert isinstance(info.value, RuntimeError)
    assert str(info.value) == (
        "test_mixed_devices_raise_naming_each_tensor.<locals>.pair(): the tensor arguments are on different "
        "devices, so there is no caller's device to return results to. Found batch['x'] on cpu, batch['y'] "
        "on meta. Fix: move them to one device first, or pass device= to choose where results go."
    )


def test_mixed_devices_raise_only_when_a_result_needs_placing() -> None:
    """Tensor results need the caller's device as much as arrays do; plain results need none."""

    @ac.returns_tensor
    def first(a: Any, b: Any, kind: str) -> Any:
        return {"tensor": a, "array": [np.zeros(1)], "plain": (1, "x", None)}[kind]

    cpu, meta = torch.ones(1), torch.empty(1, device="meta")
    assert first(cpu, meta, "plain") == (1, "x", None)
    for kind in ("tensor", "array"):
        with pytest.raises(ac.DeviceMismatchError, match=r"Found a on cpu, b on meta\."):
            first(cpu, meta, kind)


def test_an_explicit_device_wins_over_the_vote() -> None:
    @ac.returns_tensor(device="meta")
    def f(a: Any, b: Any) -> np.ndarray:
        return np.zeros(1)

    assert f(torch.empty(1), torch.empty(1, device="meta")).device.type == "meta"


def test_no_tensor_arguments_use_torchs_default_device() -> None:
    @ac.returns_tensor
    def f() -> np.ndarray:
        return np.zeros(1)

    assert f().device == torch.device("cpu")
    with torch.device("meta"):
        assert f().device == torch.device("meta")


def test_to_tensor_of_one_array_uses_torchs_default_device() -> None:
    """to_tensor's one-array shortcut, shared or copied (a reversed view), asks the default device per call."""
    for a in (np.zeros(2), np.zeros(2)[::-1]):
        assert ac.to_tensor(a).device == torch.device("cpu")
        with torch.device("meta"):
            assert ac.to_tensor(a).device == torch.device("meta")
        assert ac.to_tensor(a).device == torch.device("cpu")


def test_stacked_in_either_order_the_function_sees_arrays_and_results_follow_the_caller() -> None:
    """@returns_tensor above or below @accepts_numpy: one wrapper, arrays inside, caller's device outside."""

    def body(a: Any) -> Any:
        assert isinstance(a, np.ndarray)
        return a * 2

    outer = ac.returns_tensor(ac.accepts_numpy(body))
    inner = ac.accepts_numpy(ac.returns_tensor(body))
    for f in (outer, inner):
        assert f.__wrapped__ is body  # fused: one wrapper around the function
        assert torch.equal(f(torch.ones(2)), torch.full((2,), 2.0))


def test_a_decorated_function_called_with_arrays_does_not_inherit_the_device() -> None:
    """The caller's device belongs to one call: a nested decorated call made with arrays gets the default."""
    nested_devices = []

    @ac.returns_tensor
    def helper(a: np.ndarray) -> np.ndarray:
        return a + 1

    @ac.returns_tensor
    @ac.accepts_numpy
    def outer(x: np.ndarray) -> np.ndarray:
        nested_devices.append(helper(x).device)
        return x

    with torch.device("meta"):  # the default device differs from the caller's (CPU)
        out = outer(torch.ones(1, device="cpu"))
    assert nested_devices == [torch.device("meta")] and out.device == torch.device("cpu")


class TestDtype:
    """dtype=: None, "input", or a torch.dtype; integers and bools never cast."""

    @staticmethod
    def through(**options: Any) -> Any:
        @ac.returns_tensor(**options)
        @ac.accepts_numpy
        def f(*xs: np.ndarray) -> Any:
            return xs[0].astype(np.float32), np.sqrt(xs[0].astype(np.float64)), np.ones(2, np.int32), xs[0] > 0

        return f

    def test_none_keeps_numpys_dtype(self) -> None:
        f32, f64, i32, b = self.through()(torch.ones(2, dtype=torch.float16))
        assert (f32.dtype, f64.dtype, i32.dtype, b.dtype) == (torch.float32, torch.float64, torch.int32, torch.bool)

    def test_none_restores_a_dtype_numpy_lacks_when_every_input_had_it(self) -> None:
        f32, f64, i32, b = self.through()(torch.ones(2, dtype=torch.bfloat16))
        assert (f32.dtype, f64.dtype, i32.dtype, b.dtype) == (torch.bfloat16, torch.float64, torch.int32, torch.bool)
        mixed = self.through()(torch.ones(2, dtype=torch.bfloat16), torch.ones(2))
        assert mixed[0].dtype == torch.float32

    def test_complex32_round_trips(self) -> None:
        @ac.returns_tensor
        @ac.accepts_numpy
        def conj(a: np.ndarray) -> np.ndarray:
            return np.conj(a)

        z = torch.tensor([1 + 2j], dtype=torch.complex64).to(torch.complex32)
        out = conj(z)
        assert out.dtype == torch.complex32 and out.to(torch.complex64).tolist() == [1 - 2j]

    def test_input_casts_floating_results_to_the_inputs_dtype(self) -> None:
        f32, f64, i32, b = self.through(dtype="input")(torch.ones(2, dtype=torch.float16))
        assert (f32.dtype, f64.dtype, i32.dtype, b.dtype) == (torch.float16, torch.float16, torch.int32, torch.bool)
        promoted = self.through(dtype="input")(torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.bfloat16))
        assert promoted[1].dtype == torch.float32  # torch.promote_types(float16, bfloat16)

    def test_input_maps_complex_results_to_the_matching_complex_dtype(self) -> None:
        @ac.returns_tensor(dtype="input")
        @ac.accepts_numpy
        def fft(a: np.ndarray) -> np.ndarray:
            return np.fft.fft(a)  # NumPy computes in complex128

        assert fft(torch.ones(4)).dtype == torch.complex64
        assert fft(torch.ones(4, dtype=torch.complex64)).dtype == torch.complex64

    def test_input_without_floating_tensors_casts_nothing(self) -> None:
        @ac.returns_tensor(dtype="input")
        @ac.accepts_numpy
        def edt(mask: np.ndarray) -> np.ndarray:
            return np.sqrt(mask.astype(np.float64))

        assert edt(torch.ones(3, dtype=torch.int32)).dtype == torch.float64

    def test_a_torch_dtype_casts_floating_results_only(self) -> None:
        f32, f64, i32, b = self.through(dtype=torch.float64)(torch.ones(2))
        assert (f32.dtype, f64.dtype, i32.dtype, b.dtype) == (torch.float64, torch.float64, torch.int32, torch.bool)

    def test_an_integer_dtype_casts_integer_results_only(self) -> None:
        """PyG's Delaunay faces (``torch_geometric.transforms.Delaunay``): SciPy gives int32
        simplices, edge_index wants int64; floats and bools are left alone."""
        import scipy.spatial

        @ac.returns_tensor(dtype=torch.long)
        @ac.accepts_numpy
        def delaunay(pos: np.ndarray) -> Any:
            tri = scipy.spatial.Delaunay(pos)
            return tri.simplices, tri.points, tri.coplanar.size == 0

        faces, points, flat = delaunay(torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        assert faces.dtype == torch.int64 and faces.shape == (2, 3)
        assert points.dtype == torch.float64 and flat is True
        f32, f64, i32, b = self.through(dtype=torch.int64)(torch.ones(2))
        assert (f32.dtype, f64.dtype, i32.dtype, b.dtype) == (torch.float32, torch.float64, torch.int64, torch.bool)

    def test_nms_keep_indices_come_back_as_long(self) -> None:
        """Every NumPy NMS port returns intp/int32 ``keep`` indices; torch indexing wants int64."""

        @ac.returns_tensor(dtype=torch.int64)
        @ac.accepts_numpy
        def keep(scores: np.ndarray) -> np.ndarray:
            return np.argsort(scores)[::-1][:2].astype(np.int32)

        scores = torch.tensor([0.1, 0.9, 0.5])
        kept = keep(scores)
        assert kept.dtype == torch.int64 and kept.tolist() == [1, 2]
        assert torch.equal(scores[kept], torch.tensor([0.9, 0.5]))

    def test_a_narrowing_integer_cast_refuses_values_it_would_wrap(self) -> None:
        @ac.returns_tensor(dtype=torch.int32)
        def ids() -> Any:
            return {"small": np.array([1, 2]), "large": np.array([0, 2**40])}

        assert raised(ac.ConversionError, ids) == (
            "TestDtype.test_a_narrowing_integer_cast_refuses_values_it_would_wrap.<locals>.ids(): "
            "result['large'] holds values from 0 to 1099511627776, outside torch.int32's range, so casting it "
            "as dtype= asks would wrap them. Found numpy.ndarray(shape=(2,), dtype=<i8). Fix: pass a dtype= wide "
            "enough for the values, or leave integer results uncast."
        )
        assert ac.to_tensor(np.array([7], dtype=np.uint64), dtype=torch.int8).tolist() == [7]

    def test_bool_and_dtypes_numpy_lacks_are_refused_when_decorating(self) -> None:
        with pytest.raises(TypeError) as info:
            ac.returns_tensor(dtype=torch.bool)
        assert str(info.value) == (
            "autoconvert.returns_tensor(): dtype= casts results within their kind, and bool results are "
            "never cast; got torch.bool"
        )
        with pytest.raises(TypeError) as info:
            ac.to_tensor(np.ones(1), dtype=torch.qint8)
        assert str(info.value) == (
            "autoconvert.to_tensor(): dtype= takes a floating, complex or integer dtype NumPy also has, got torch.qint8"
        )

    @pytest.mark.parametrize(
        ("given", "shown"),
        [
            (np.float32, "<class 'numpy.float32'>"),
            (np.dtype(np.int16), "dtype('int16')"),
            ("complex128", "'complex128'"),
            (np.float16, "<class 'numpy.float16'>"),
        ],
    )
    def test_a_numpy_dtype_is_refused_naming_the_torch_dtype(self, given: object, shown: str) -> None:
        """dtype= is the result tensor's dtype, a torch.dtype, as torch's own functions take it:
        a NumPy dtype (or its exact name) is refused with the torch dtype to pass instead."""
        name = np.dtype(given).name  # type: ignore[call-overload]
        with pytest.raises(TypeError) as info:
            ac.returns_tensor(dtype=given)
        assert str(info.value) == (
            f"autoconvert.returns_tensor(): dtype= takes None, 'input' or a torch.dtype, got {shown}. "
            f"Fix: pass torch.{name}, NumPy's {name} as a torch dtype"
        )

    @pytest.mark.parametrize("given", [np.bool_, "float", "f4", np.str_, np.dtype(">f4")])
    def test_a_value_torch_has_no_one_dtype_for_gets_no_fix(self, given: object) -> None:
        """bool results are never cast, 'float' is float64 to NumPy but float32 to torch, and
        torch has no str or non-native dtype: no torch dtype is named for them."""
        with pytest.raises(TypeError) as info:
            ac.returns_tensor(dtype=given)
        assert (
            str(info.value)
            == f"autoconvert.returns_tensor(): dtype= takes None, 'input' or a torch.dtype, got {given!r}"
        )


def _from_dlpack(a: np.ndarray) -> torch.Tensor:
    try:
        return torch.from_dlpack(a)
    except BufferError:  # NumPy < 2 cannot export a read-only array (DLPack 0.x has no read-only flag)
        pytest.skip("this NumPy cannot export read-only arrays through DLPack")


class TestCopy:
    def test_none_shares_a_fresh_result_and_copies_what_torch_cannot_share(self) -> None:
        store = np.arange(4.0)

        @ac.returns_tensor
        def f(kind: str) -> np.ndarray:
            return {"fresh": store, "flipped": store[::-1], "broadcast": np.broadcast_to(store, (2, 4))}[kind]

        assert shares(f("fresh"), store)
        flipped = f("flipped")
        assert flipped.tolist() == [3.0, 2.0, 1.0, 0.0] and not shares(flipped, store)
        assert not shares(f("broadcast"), store) and f("broadcast").stride() == (4, 1)

    def test_a_view_of_a_read_only_input_is_copied(self) -> None:
        """By default a result never aliases the caller's input, even when it is a view of it."""

        @ac.returns_tensor
        @ac.accepts_numpy
        def transpose(a: np.ndarray) -> np.ndarray:
            return a.T

        t = torch.arange(6.0).reshape(2, 3)
        out = transpose(t)
        assert torch.equal(out, t.T) and not shares(out, t)

    @pytest.mark.parametrize(
        "wrap",
        [
            pytest.param(lambda a: torch.from_numpy(a), id="from_numpy"),
            pytest.param(lambda a: torch.as_tensor(a[1:]), id="as_tensor of a view"),
            pytest.param(lambda a: _from_dlpack(a), id="from_dlpack"),
        ],
    )
    def test_a_tensor_made_from_a_read_only_input_is_copied(self, wrap: Any) -> None:
        """The function wraps a handed array in a tensor and returns it: the result is still
        the caller's memory, so it is copied, as a returned view of the array would be."""

        @ac.returns_tensor
        @ac.accepts_numpy
        def rewrap(a: np.ndarray) -> torch.Tensor:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # torch: "The given NumPy array is not writable"
                return wrap(a)  # type: ignore[no-any-return]

        t = torch.arange(3.0)
        out = rewrap(t)
        out.add_(10)
        assert t.tolist() == [0.0, 1.0, 2.0] and not shares(out, t)

    def test_a_tensor_made_from_a_private_copy_is_not_copied_again(self) -> None:
        """copy=True handed private arrays: a tensor wrapping one aliases nothing of the caller's."""
        wrapped: list[torch.Tensor] = []

        @ac.returns_tensor
        @ac.accepts_numpy(copy=True)
        def rewrap(a: np.ndarray) -> torch.Tensor:
            wrapped.append(torch.from_numpy(a))
            return wrapped[-1]

        t = torch.arange(3.0)
        out = rewrap(t)
        assert out is wrapped[0] and not shares(out, t)

    def test_a_tensor_result_of_a_returns_tensor_alone_passes_through(self) -> None:
        """No arrays were handed over, so returning an argument itself is the function's own business."""

        @ac.returns_tensor
        def same(x: torch.Tensor) -> torch.Tensor:
            return x

        t = torch.ones(2)
        assert same(t) is t

    def test_writeback_results_may_alias_the_input(self) -> None:
        """With writeback=True a returned view of an input is the caller's memory: that is what writeback means."""

        @ac.returns_tensor
        @ac.accepts_numpy(writeback=True)
        def first_row(a: np.ndarray) -> np.ndarray:
            return a[0]

        t = torch.zeros(2, 2)
        assert shares(first_row(t), t)

    def test_true_shares_with_nothing_the_function_can_reach(self) -> None:
        cache = np.zeros(3)

        @ac.returns_tensor(copy=True)
        def cached() -> np.ndarray:
            return cache

        out = cached()
        out += 1
        assert cache.tolist() == [0.0, 0.0, 0.0]

    def test_false_refuses_a_copy_with_the_reason(self) -> None:
        @ac.returns_tensor(copy=False)
        def f() -> Any:
            return {"z": np.arange(3)[::-1]}

        assert raised(ac.CopyError, f) == (
            "TestCopy.test_false_refuses_a_copy_with_the_reason.<locals>.f(): result['z'] cannot be shared with torch "
            "without a copy: it has negative strides, which torch tensors cannot have. Found "
            "numpy.ndarray(shape=(3,), dtype=<i8). Fix: use copy=None to copy only when needed, or copy=True "
            "for a private copy."
        )

    def test_size1_negative_stride_is_shared_not_copied(self) -> None:
        """numpy#23349: np.ascontiguousarray keeps a negative stride on a size-1 axis; we re-stride, no copy."""
        base = np.arange(3.0).reshape(1, 3)

        @ac.returns_tensor(copy=False)
        def f() -> np.ndarray:
            return base[::-1]

        out = f()
        assert shares(out, base) and out.tolist() == [[0.0, 1.0, 2.0]]

    def test_matrix_becomes_a_plain_tensor(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            m = np.asmatrix(np.eye(2))

        @ac.returns_tensor
        def f() -> Any:
            return m

        out = f()
        assert type(out) is torch.Tensor and out.shape == (2, 2)


@pytest.mark.parametrize(
    ("value", "problem", "found", "fix"),
    [
        (
            np.array([object()]),
            "is an object array, which torch cannot hold",
            "dtype=|O",
            "convert it to a numeric dtype, or use a list",
        ),
        (
            np.array(["a"]),
            "holds strings, which torch cannot hold",
            "dtype=<U1",
            "use a list of str, or integer codes",
        ),
        (
            np.array([b"a"]),
            "holds bytes strings, which torch cannot hold",
            "dtype=|S1",
            "use a list of bytes, or integer codes",
        ),
        (
            np.zeros(1, dtype=[("a", "i4")]),
            "is a structured (void) array, which torch cannot hold",
            "dtype=|V4",
            "use its fields as separate arrays",
        ),
        (
            np.array(["2020-01-01"], dtype="M8[D]"),
            "holds datetime64 values, which torch cannot hold",
            "dtype=<M8[D]",
            "convert with result[1]['z'].astype('int64') and keep the unit",
        ),
        (
            np.array([1], dtype="m8[s]"),
            "holds timedelta64 values, which torch cannot hold",
            "dtype=<m8[s]",
            "convert with result[1]['z'].astype('int64') and keep the unit",
        ),
        (
            np.ones(1, dtype=np.longdouble),
            "has dtype float128, which torch lacks",
            "dtype=<f16",
            "cast it first, for example result[1]['z'].astype(np.float64), if the lost precision is acceptable",
        ),
        (  # the sweep's case: never a fix that drops the imaginary part
            np.ones(1, dtype=np.clongdouble),
            "has dtype complex256, which torch lacks",
            "dtype=<c32",
            "cast it first, for example result[1]['z'].astype(np.complex128), if the lost precision is acceptable",
        ),
    ],
)
def test_results_torch_cannot_hold_raise_with_the_path(value: Any, problem: str, found: str, fix: str) -> None:
    @ac.returns_tensor
    def f() -> Any:
        return np.zeros(1), {"z": value}

    with pytest.raises(ac.ConversionError) as info:
        f()
    shape = value.shape
    assert str(info.value) == (
        f"test_results_torch_cannot_hold_raise_with_the_path.<locals>.f(): result[1]['z'] {problem}. "
        f"Found numpy.ndarray(shape={shape}, {found}). Fix: {fix}."
    )


def test_masked_arrays_are_refused_never_unmasked() -> None:
    """torch.from_numpy would silently drop the mask; we raise instead."""

    @ac.returns_tensor
    def f() -> Any:
        return np.ma.masked_array([1.0, 2.0], mask=[False, True])

    with pytest.raises(ac.ConversionError) as info:
        f()
    module = np.ma.MaskedArray.__module__  # numpy.ma from NumPy 2, numpy.ma.core before
    assert str(info.value) == (
        "test_masked_arrays_are_refused_never_unmasked.<locals>.f(): result is a masked array; a tensor has no "
        f"mask, and dropping it would silently unmask values. Found {module}.MaskedArray(shape=(2,), "
        "dtype=<f8). Fix: use result.filled(fill_value), or the data and the mask as two arrays."
    )


def test_tensor_results_go_to_the_target_device_as_they_are() -> None:
    """SciPy's array-API mode returns tensors: they are moved and cast like arrays, not converted."""
    made = torch.ones(2, dtype=torch.float64)

    @ac.returns_tensor(dtype="input")
    def f(x: torch.Tensor) -> torch.Tensor:
        return made

    out = f(torch.empty(1, device="meta", dtype=torch.float32))
    assert out.device.type == "meta" and out.dtype == torch.float32

    @ac.returns_tensor
    def same() -> torch.Tensor:
        return made

    assert same() is made


class TestEdges:
    def test_devices_may_be_given_as_torch_devices(self) -> None:
        @ac.returns_tensor(device=torch.device("meta"))
        def f() -> np.ndarray:
            return np.zeros(1)

        assert f().device.type == "meta"

    def test_input_dtype_promotes_float8_to_float32(self) -> None:
        """torch refuses to promote float8 types; float32 holds every float8 value exactly."""

        @ac.returns_tensor(dtype="input")
        @ac.accepts_numpy
        def f(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return a.astype(np.float64)

        # Made by casting: torch.ones() has no float8 fill kernel on the CPU before torch 2.5.
        a = torch.ones(2).to(torch.float8_e4m3fn)
        assert f(a, torch.ones(2).to(torch.float8_e5m2)).dtype == torch.float32
        assert f(a, torch.ones(2, dtype=torch.float16)).dtype == torch.float32

    def test_copy_false_refuses_a_cast_or_a_move(self) -> None:
        @ac.returns_tensor(copy=False, dtype=torch.float16)
        def f() -> np.ndarray:
            return np.ones(2)

        with pytest.raises(ac.CopyError, match=re.escape("it must be cast to torch.float16")):
            f()

    def test_writable_zero_stride_arrays_are_copied(self) -> None:
        """A writable broadcast made with as_strided still aliases one element many times."""
        base = np.arange(3.0)
        view = np.lib.stride_tricks.as_strided(base, shape=(2, 3), strides=(0, 8), writeable=True)

        @ac.returns_tensor
        def f() -> np.ndarray:
            return view

        out = f()
        assert out.stride() == (3, 1) and not shares(out, base)
        with pytest.raises(ac.CopyError, match="it is a broadcast view"):
            ac.returns_tensor(copy=False)(f.__wrapped__)()

    def test_tensor_results_follow_copy(self) -> None:
        kept = torch.ones(2)

        @ac.returns_tensor(copy=True)
        def private() -> torch.Tensor:
            return kept

        assert not shares(private(), kept)

        @ac.returns_tensor(copy=False, dtype=torch.float64)
        def strict() -> torch.Tensor:
            return kept

        with pytest.raises(ac.CopyError, match=re.escape("cannot reach cpu as torch.float64 without a copy")):
            strict()


def test_a_device_this_torch_cannot_use_raises_our_error() -> None:
    """A CPU-only torch asserts "Torch not compiled with CUDA enabled", a CUDA build without a
    driver raises RuntimeError: either way the caller gets a ConversionError naming the result."""
    missing = torch.device("cuda", torch.cuda.device_count())  # one index past the last GPU
    try:
        torch.empty(0, device=missing)
    except (AssertionError, RuntimeError) as e:
        reason = str(e)
    else:  # pragma: no cover - torch accepted a device index it does not have
        pytest.fail(f"{missing} was usable")

    @ac.returns_tensor(device=missing)
    def f() -> Any:
        return {"a": np.ones(2)}

    assert raised(ac.ConversionError, f) == (
        f"test_a_device_this_torch_cannot_use_raises_our_error.<locals>.f(): result['a'] cannot be placed on "
        f"{missing}: this torch cannot use that device ({reason}). Found device='{missing}', with torch "
        f"{torch.__version__} and {torch.cuda.device_count()} CUDA device(s). Fix: pass device= naming a device "
        "this machine has (or None: the caller's device)."
    )
    with pytest.raises(ac.ConversionError):
        ac.to_tensor(np.ones(2), device=missing)


@pytest.mark.skipif(not hasattr(torch, "uint4"), reason="this torch has no sub-byte dtypes")
def test_copy_true_copies_a_dtype_torch_has_no_copy_kernel_for() -> None:
    """torch.uint4's clone() raises NotImplementedError; copy=True still gives a private copy,
    its bytes copied through a uint8 view."""
    source = torch.tensor([1, 2, 3], dtype=torch.uint8)
    out = ac.returns_tensor(copy=True)(lambda: source.view(torch.uint4))()
    assert out.dtype == torch.uint4 and out.view(torch.uint8).tolist() == [1, 2, 3]
    assert out.data_ptr() != source.data_ptr()


@dataclasses.dataclass
class _Looped:
    """A result holding itself through a declared field, as ``r.hist.append(r)`` makes it."""

    w: Any
    hist: list[Any] = dataclasses.field(default_factory=list)

    def size(self) -> int:
        return len(self.hist)


def looped_list(x: Any) -> Any:
    loop = [x * 1.0]
    loop.append(loop)
    return loop


def looped_record(x: Any) -> Any:
    r = _Looped(x * 1.0)
    r.hist.append(r)
    return r


def looped_in_a_tuple(x: Any) -> Any:
    return x * 2.0, looped_list(x)


def looped_deep_down(x: Any) -> Any:
    return {"w": x * 2.0, "runs": [x, looped_record(x)]}


def nested_past_the_recursion_limit(x: Any) -> Any:
    deep: Any = [x * 1.0]
    for _ in range(sys.getrecursionlimit()):
        deep = [deep]
    return deep


#: Where each function's result holds itself.
_WHERE_ITSELF = {
    looped_list: "result",
    looped_record: "result",
    looped_in_a_tuple: "result[1]",
    looped_deep_down: "result['runs'][1]",
    nested_past_the_recursion_limit: "result",  # none holds itself
}
#: Where in batched's result, which gathers the samples' results as it returns them.
_BATCHED_WHERE = {
    looped_list: "result[0]",
    looped_record: "result[0]",
    looped_in_a_tuple: "result[1][0]",
    looped_deep_down: "result['runs'][0][1]",
}


_ITSELF = "contains itself, or nests deeper than Python's recursion limit, so it cannot be walked. Found a container "
#: How each product converting results is made (with nested=False where it takes it), the fix
#: its refusal of a result holding itself gives, and the kind of its arguments.
_RESULT_CYCLES: dict[str, tuple[Any, str, Any]] = {
    "returns_tensor(accepts_numpy)": (
        lambda f, **off: ac.returns_tensor(ac.accepts_numpy(f), **off),
        "break the cycle, or leave container results unconverted with @ac.returns_tensor(nested=False) on {name}",
        torch,
    ),
    "returns_numpy(accepts_tensor)": (
        lambda f, **off: ac.returns_numpy(ac.accepts_tensor(f), **off),
        "break the cycle, or leave container results unconverted with @ac.returns_numpy(nested=False) on {name}",
        np,
    ),
    "torchify": (
        lambda f, **off: ac.torchify(f, **off),
        "break the cycle, or leave container results unconverted with the ac.torchify(..., nested=False) call "
        "that made it",
        torch,
    ),
    "adapt": (ac.adapt, "break the cycle", torch),  # its results are converted as annotations say, whatever nested=
    "numpy_op": (ac.numpy_op, "break the cycle", torch),  # its results are tensors, or tuples of them
    "batched": (ac.batched, "break the cycle", torch),  # it takes no nested=
}


@pytest.mark.parametrize("product", list(_RESULT_CYCLES))
@pytest.mark.parametrize("function", list(_WHERE_ITSELF), ids=lambda f: f.__name__)
def test_a_result_holding_itself_is_refused_with_a_fix_for_results(product: str, function: Any) -> None:
    """A function returning a result that holds itself (``r.hist.append(r); return r``) is
    refused naming the function and where in its result (``result[1]``), with a fix that
    applies to results: the ``nested=False`` of the decorator converting them, where it takes
    one, with which the call returns the container as it is (never "top-level arguments",
    which it does not convert)."""
    make, fix, lib = _RESULT_CYCLES[product]
    x = lib.ones((3, 2)) if product == "batched" else lib.ones(2)
    where = (_BATCHED_WHERE if product == "batched" else _WHERE_ITSELF).get(function, _WHERE_ITSELF[function])
    with pytest.raises(ac.ConversionError) as info:
        make(function)(x)
    assert str(info.value) == (
        f"{function.__name__}(): {where} {_ITSELF}that reaches itself through its items. Fix: "
        f"{fix.format(name=function.__name__)}."
    )
    if "nested=False" in fix:  # the fix it names works
        out = make(function, nested=False)(x)
        assert type(out) is type(function(x))


@pytest.mark.parametrize("convert", [ac.to_numpy, ac.to_tensor], ids=lambda f: f.__name__)
def test_to_numpy_and_to_tensor_name_where_their_argument_holds_itself(convert: Any) -> None:
    """The plain converters walk their argument as a result is walked: a container holding
    itself below it is named by its path, with the argument's fix."""
    loop: list[Any] = [torch.ones(1)]
    loop.append(loop)
    with pytest.raises(ac.ConversionError) as info:
        convert({"a": [0, loop]})
    assert str(info.value) == (
        f"autoconvert.{convert.__name__}(): argument obj['a'][1] {_ITSELF}that reaches itself through its items. "
        "Fix: break the cycle, or pass nested=False to convert top-level arguments only."
    )
