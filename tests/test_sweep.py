"""The adversarial sweep, kept: odd tensors and arrays through every route, each outcome exact
or a clear error (an autoconvert exception naming the function and the fix), never a raw
torch/NumPy error, a crash or a leaked warning."""

from __future__ import annotations

import dataclasses
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import autoconvert as ac
from autoconvert._conversions._dtypes import WIDENED

#: Far past any machine's address space, so a copy can only fail, fast, on every host.
HUGE = 10**14


def _odd_tensors() -> dict[str, torch.Tensor]:
    class Subclass(torch.Tensor):
        pass

    made: dict[str, Callable[[], torch.Tensor]] = {
        "quantized quint8": lambda: torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8),
        "quantized qint32": lambda: torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint32),
        "nested": lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),
        "meta": lambda: torch.ones(2, device="meta"),
        "sparse coo": lambda: torch.eye(3).to_sparse(),
        "sparse coo uncoalesced": lambda: torch.sparse_coo_tensor([[0, 0]], [1.0, 2.0], (2,)),
        "sparse coo hybrid": lambda: torch.sparse_coo_tensor([[0, 1]], torch.ones(2, 3), (2, 3)),
        "sparse csr": lambda: torch.eye(3).to_sparse_csr(),
        "sparse csc": lambda: torch.eye(3).to_sparse_csc(),
        "sparse bsr": lambda: torch.eye(4).to_sparse_bsr((2, 2)),
        "sparse bsc": lambda: torch.eye(4).to_sparse_bsc((2, 2)),
        "sparse float16": lambda: torch.eye(3, dtype=torch.float16).to_sparse(),
        "parameter": lambda: torch.nn.Parameter(torch.ones(2)),
        "subclass": lambda: torch.ones(2).as_subclass(Subclass),
        "non-leaf requiring grad": lambda: torch.ones(2, requires_grad=True) * 2,
        "overlapping strides": lambda: torch.arange(4.0).as_strided((3, 2), (1, 1)),
        "channels_last": lambda: torch.ones(1, 3, 2, 2).to(memory_format=torch.channels_last),
        "empty with zero strides": lambda: torch.empty_strided((0, 3), (0, 0)),
        "uint16": lambda: torch.ones(2).to(torch.uint16),
        "uint64 above int64": lambda: torch.tensor([2**63 + 5], dtype=torch.uint64),
        "complex32": lambda: torch.ones(2, dtype=torch.complex32),
        "float8_e4m3fn": lambda: torch.ones(2).to(torch.float8_e4m3fn),
        "bfloat16 expanded past memory": lambda: torch.zeros(1, dtype=torch.bfloat16).expand(HUGE),
        "float32 expanded past memory": lambda: torch.zeros(1).expand(HUGE),
        "negative bit": lambda: torch.tensor([1 + 1j]).conj().imag,
        "0-d conj": lambda: torch.tensor(1 + 2j).conj(),
        "float64 NaN -0.0 inf": lambda: torch.tensor([float("nan"), -0.0, float("inf")], dtype=torch.float64),
    }
    with torch.inference_mode():
        inference, inference_bf16 = torch.ones(2), torch.ones(2, dtype=torch.bfloat16)
    made["inference mode"] = lambda: inference
    made["inference mode bfloat16"] = lambda: inference_bf16
    if hasattr(torch, "uint4"):
        made["uint4"] = lambda: torch.zeros(2, dtype=torch.uint8).view(torch.uint4)
    if torch.backends.mkldnn.is_available():
        made["mkldnn"] = lambda: torch.ones(2, 2).to_mkldnn()
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch >= 2.14 deprecates quantized tensors; the sweep still sends them
        for name, make in made.items():
            try:
                out[name] = make()
            except (RuntimeError, TypeError):  # this torch cannot make it (torch 2.4: no uint64 literals)
                continue
    return out


def _odd_arrays() -> dict[str, Any]:
    buffer = np.zeros(25, dtype=np.uint8)
    read_only = np.arange(3.0)
    read_only.setflags(write=False)
    out: dict[str, Any] = {
        "object": np.array([1, "a"], dtype=object),
        "unicode": np.array(["a"]),
        "datetime64": np.array(["2020-01-01"], dtype="datetime64[D]"),
        "structured": np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]),
        "record array": np.rec.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]),
        "byte-swapped": np.arange(3.0).astype(">f8"),
        "unaligned": buffer[1:].view(np.float64),
        "read-only": read_only,
        "masked": np.ma.masked_array([1.0, 2.0], mask=[0, 1]),
        "longdouble": np.ones(2, dtype=np.longdouble),
        "clongdouble": np.ones(2, dtype=np.clongdouble),
        "negative strides": np.arange(5.0)[::-1],
        "broadcast past memory": np.broadcast_to(np.zeros(1), (HUGE,)),
        "uint16": np.ones(2, dtype=np.uint16),
        "uint64 max": np.array([2**64 - 1], dtype=np.uint64),
        "float16 scalar": np.float16(1.5),
        "bool scalar": np.bool_(True),
        "void scalar": np.void(b"ab"),
        "zero-stride 2-d": np.lib.stride_tricks.as_strided(np.arange(3.0), (3, 3), (8, 0)),
        "overlapping strides": np.lib.stride_tricks.as_strided(np.arange(4.0), (3, 2), (8, 8)),
        "fortran order": np.asfortranarray(np.ones((2, 3))),
        "empty": np.empty((0, 3)),
        "0-d int8": np.array(3, dtype=np.int8),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # NumPy discourages np.matrix; users still have them
        out["matrix"] = np.matrix([[1.0, 2.0]])
    if hasattr(np, "dtypes") and hasattr(np.dtypes, "StringDType"):
        out["StringDType"] = np.array(["a"], dtype=np.dtypes.StringDType())
    return out


def _identity(a: Any) -> Any:
    return a


def _identity_array(a: np.ndarray) -> Any:
    return a


_ADAPTED = ac.adapt(grad="detach")(_identity_array)
_LEGACY = types.ModuleType("legacy")
_LEGACY.identity = _identity  # type: ignore[attr-defined]

TENSOR_ROUTES: dict[str, Callable[[Any], Any]] = {
    "accepts_numpy": ac.accepts_numpy(grad="detach")(_identity),
    "accepts_numpy(copy=True)": ac.accepts_numpy(copy=True, grad="detach")(_identity),
    "accepts_numpy(copy=False)": ac.accepts_numpy(copy=False, grad="detach")(_identity),
    "accepts_numpy(writeback=True)": ac.accepts_numpy(writeback=True, grad="detach")(_identity),
    "accepts_numpy(check_writes=True)": ac.accepts_numpy(check_writes=True, grad="detach")(_identity),
    "accepts_numpy(widen_float16=True)": ac.accepts_numpy(widen_float16=True, grad="detach")(_identity),
    "accepts_numpy(grad='error')": ac.accepts_numpy(grad="error")(_identity),
    "the pair": ac.returns_tensor(ac.accepts_numpy(grad="detach")(_identity)),
    "returns_numpy": ac.returns_numpy(_identity),
    "to_numpy": ac.to_numpy,
    # Tensors where results or arrays are expected: placed on the caller's device, or refused.
    "returns_tensor": ac.returns_tensor(_identity),
    "to_tensor": ac.to_tensor,
    "adapt": _ADAPTED,
    "adapt, in a list": lambda t: _ADAPTED([t]),
    "torchify": ac.torchify(_LEGACY, grad="detach").identity,
}
ARRAY_ROUTES: dict[str, Callable[[Any], Any]] = {
    "returns_tensor": ac.returns_tensor(_identity),
    "returns_tensor(copy=True)": ac.returns_tensor(copy=True)(_identity),
    "returns_tensor(copy=False)": ac.returns_tensor(copy=False)(_identity),
    "returns_tensor(dtype=float16)": ac.returns_tensor(dtype=torch.float16)(_identity),
    "returns_tensor(dtype=int32)": ac.returns_tensor(dtype=torch.int32)(_identity),
    "accepts_tensor": ac.accepts_tensor(_identity),
    "to_tensor": ac.to_tensor,
}
TENSORS = _odd_tensors()
ARRAYS = _odd_arrays()


def _outcome(route: Callable[[Any], Any], value: Any) -> Any:
    """The route's result, or the exception it raised if that is a clear one; anything else fails."""
    try:
        return route(value)
    except (ac.ConversionError, ac.CopyError, ac.ReadOnlyError, ac.GradientError) as e:
        text = str(e)
        assert text.startswith(("_identity", "autoconvert.to_numpy()", "autoconvert.to_tensor()")), text
        assert "Found " in text and "Fix: " in text, text
        return e


def _dense_oracle(t: torch.Tensor) -> np.ndarray:
    """The values NumPy should see, through Python lists rather than Tensor.numpy()."""
    wide = WIDENED.get(t.dtype, t.dtype)
    values = t.detach().resolve_conj().resolve_neg().to(wide)
    return np.array(values.tolist(), dtype=torch.empty(0, dtype=wide).numpy().dtype).reshape(tuple(t.shape))


@pytest.mark.parametrize("route", TENSOR_ROUTES, ids=str)
@pytest.mark.parametrize("name", TENSORS, ids=str)
def test_odd_tensors_convert_exactly_or_raise_clearly(name: str, route: str) -> None:
    """Every odd tensor: an exact array (values checked where they are plain numbers), or a clear error."""
    t = TENSORS[name]
    result = _outcome(TENSOR_ROUTES[route], t)
    plain = t.layout == torch.strided and not t.is_nested and not t.is_quantized and t.device.type == "cpu"
    if isinstance(result, np.ndarray) and plain and t.numel() < 2**20:
        np.testing.assert_array_equal(result, _dense_oracle(t))
    elif isinstance(result, torch.Tensor) and plain and t.numel() < 2**20:  # the pair: back as it came
        result = result[0] if route == "adapt, in a list" else result
        if result is t:  # handed back as it is (returns_tensor, to_tensor): nothing converted
            return
        assert result.dtype == t.dtype and result.shape == t.shape
        np.testing.assert_array_equal(_dense_oracle(result), _dense_oracle(t))


@pytest.mark.parametrize("route", ARRAY_ROUTES, ids=str)
@pytest.mark.parametrize("name", ARRAYS, ids=str)
def test_odd_arrays_convert_exactly_or_raise_clearly(name: str, route: str) -> None:
    """Every odd array: an exact tensor (values checked for plain numeric arrays), or a clear error."""
    a = ARRAYS[name]
    result = _outcome(ARRAY_ROUTES[route], a)
    numeric = isinstance(a, np.ndarray) and a.dtype.kind in "biufc" and a.size < 2**20 and a.dtype.itemsize <= 8
    if isinstance(result, torch.Tensor) and numeric and route in ("returns_tensor", "to_tensor", "accepts_tensor"):
        np.testing.assert_array_equal(result.numpy(), np.asarray(a))


def _odd_containers() -> dict[str, Callable[[], Any]]:
    def looped_list() -> Any:
        loop: list[Any] = [torch.ones(1)]
        loop.append(loop)
        return loop

    def looped_dict() -> Any:
        loop: dict[str, Any] = {"x": torch.ones(1)}
        loop["self"] = loop
        return loop

    def deep() -> Any:
        nested: Any = [torch.ones(1)]
        for _ in range(5000):  # deeper than Python's recursion limit
            nested = [nested]
        return nested

    return {
        "self-containing list": looped_list,
        "self-containing dict": looped_dict,
        "deeper than the recursion limit": deep,
        "ragged list": lambda: [torch.ones(1), torch.ones(2)],
        "list with a meta tensor": lambda: [torch.ones(1), torch.empty(1, device="meta")],
    }


CONTAINER_ROUTES: dict[str, Callable[[Any], Any]] = {
    name: TENSOR_ROUTES[name]
    for name in (
        "accepts_numpy",
        "accepts_numpy(writeback=True)",
        "accepts_numpy(check_writes=True)",
        "the pair",
        "to_numpy",
        "to_tensor",
        "adapt",
    )
}


@pytest.mark.parametrize("route", CONTAINER_ROUTES, ids=str)
@pytest.mark.parametrize("name", _odd_containers(), ids=str)
def test_odd_containers_convert_or_raise_clearly(name: str, route: str) -> None:
    """Containers NumPy or the walk cannot take: converted, or a clear error naming the
    argument, never a RecursionError or NumPy's own ValueError."""
    value = _odd_containers()[name]()
    _outcome(CONTAINER_ROUTES[route], value)


# --------------------------------------------------------------------------- write routes


def _rng_random(a: np.ndarray) -> None:
    np.random.default_rng(0).random(out=a)


def _rng_standard_normal(a: np.ndarray) -> None:
    np.random.default_rng(0).standard_normal(out=a)


def _round_into(a: np.ndarray) -> None:
    np.round(np.ones((3, 3)), out=a)


def _cumsum_into(a: np.ndarray) -> None:
    np.cumsum(np.ones((3, 3)), axis=0, out=a)


def _take_into(a: np.ndarray) -> None:
    np.take(np.ones(9), [0, 1, 2], out=a[0])


def _dot_into(a: np.ndarray) -> None:
    np.dot(np.eye(3), np.eye(3), out=a)


def _cdist_into(a: np.ndarray) -> None:
    import scipy.spatial.distance

    scipy.spatial.distance.cdist(np.ones((3, 2)), np.zeros((3, 2)), out=a)


def _memoryview_write(a: np.ndarray) -> None:
    memoryview(a)[0, 0] = 1.0


def _ctypes_from_buffer(a: np.ndarray) -> None:
    import ctypes

    (ctypes.c_double * 9).from_buffer(a)


def _readinto(a: np.ndarray) -> None:
    import io

    io.BytesIO(bytes(72)).readinto(a)


WRITE_ROUTES = [
    _rng_random,
    _rng_standard_normal,
    _round_into,
    _cumsum_into,
    _take_into,
    _dot_into,
    _cdist_into,
    _memoryview_write,
    _ctypes_from_buffer,
    _readinto,
]


def _refuses_read_only(route: Callable[[Any], None]) -> bool:
    """Whether this NumPy refuses the route's write into a read-only array (NumPy before 2
    lets ``np.cumsum(..., out=a)`` write into one)."""
    a = np.zeros((3, 3))
    a.setflags(write=False)
    try:
        route(a)
    except (ValueError, TypeError):
        return True
    return False


@pytest.mark.parametrize("route", WRITE_ROUTES, ids=lambda f: f.__name__)
def test_every_refused_write_into_a_handed_array_is_a_read_only_error(route: Callable[[Any], None]) -> None:
    """NumPy's ``out=`` routes (its Python wrappers and C functions), a Generator's and
    SciPy's, and Python's buffer protocol (memoryview, ctypes, readinto) refuse the read-only
    array in their own words; each comes out a ReadOnlyError naming the argument and the
    fixes, the original chained, and with copy=True the write runs. Where this NumPy writes
    regardless, check_writes=True is what catches it, the caller's values put back."""
    t = torch.zeros(3, 3, dtype=torch.float64)
    if not _refuses_read_only(route):
        with pytest.raises(ac.ReadOnlyError, match="through a route the read-only guard cannot see"):
            ac.accepts_numpy(check_writes=True)(route)(t)
        assert torch.equal(t, torch.zeros(3, 3, dtype=torch.float64))
        return
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.accepts_numpy(route)(t)
    original = info.value.__cause__
    assert str(info.value) == (
        f"{route.__qualname__}(): argument a was written into by the function; arrays made from tensor "
        "arguments are read-only so that NumPy code never changes the caller's tensors behind its back. "
        f"Found {type(original).__name__}({str(original)!r}). Fix: pass copy=True to give the function private "
        "writable copies, or writeback=True to let its changes reach the caller's tensors (in "
        f"@ac.accepts_numpy(copy=True) on {route.__qualname__}, or a with ac.config(copy=True): block around the "
        "call)."
    )
    assert torch.equal(t, torch.zeros(3, 3, dtype=torch.float64))
    ac.accepts_numpy(copy=True)(route)(t)


def _sliding_window_write(a: np.ndarray) -> None:
    np.lib.stride_tricks.sliding_window_view(a, 2, axis=1)[0, 0, 0] = 1.0


def _broadcast_write(a: np.ndarray) -> None:
    np.broadcast_to(a, (2, 3, 3))[0, 0, 0] = 1.0


def _as_strided_write(a: np.ndarray) -> None:
    np.lib.stride_tricks.as_strided(a, writeable=False)[0, 0] = 1.0


@pytest.mark.parametrize(
    "route", [_sliding_window_write, _broadcast_write, _as_strided_write], ids=lambda f: f.__name__
)
@pytest.mark.parametrize("copy", [None, True])
def test_writes_into_numpys_own_read_only_views_keep_numpys_error(route: Callable[[Any], None], copy: Any) -> None:
    """``sliding_window_view``, ``broadcast_to`` and ``as_strided(writeable=False)`` make
    read-only views by NumPy's own rule, whatever they view: copy=True would not help, so
    NumPy's error stands, with and without it."""
    with pytest.raises(ValueError) as info:
        ac.accepts_numpy(copy=copy)(route)(torch.zeros(3, 3, dtype=torch.float64))
    assert type(info.value) is ValueError
    assert str(info.value) == "assignment destination is read-only"


# --------------------------------------------------------------------------- writes after the call


class _Scaler:
    """A class-based context manager that writes into the array on exit."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __enter__(self) -> np.ndarray:
        return self.a

    def __exit__(self, *exc: object) -> None:
        self.a += 1


def _closure_writer(a: np.ndarray) -> Callable[[], None]:
    def later() -> None:
        a[...] += 1

    return later


class _Holder:
    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def bump(self) -> None:
        self.a += 1


def _late_write(kind: str, t: torch.Tensor) -> None:
    """Write 1 into every element of ``t``'s array after a writeback=True call returned."""
    if kind == "context manager":
        with ac.accepts_numpy(writeback=True)(_Scaler)(t):
            pass
    elif kind == "closure":
        ac.accepts_numpy(writeback=True)(_closure_writer)(t)()
    else:
        ac.accepts_numpy(writeback=True)(_Holder)(t).bump()


def _layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "transposed":
        return t.T
    if layout == "sliced":
        return t[:, ::2]
    return t


@given(
    kind=st.sampled_from(["context manager", "closure", "object"]),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.int32, torch.uint8, torch.bfloat16, torch.float16]),
    layout=st.sampled_from(["contiguous", "transposed", "sliced"]),
)
@settings(max_examples=60, deadline=None)
def test_a_write_after_a_writeback_call_reaches_the_tensor_or_is_refused(
    kind: str, dtype: torch.dtype, layout: str
) -> None:
    """A write made after the call returns, by a context manager, a closure or an object
    holding the handed array, reaches the caller's tensor where the array is its memory (a
    NumPy dtype, C order); where it was a private copy (bfloat16, strided memory), the copy
    is read-only once copied back, so the write raises NumPy's error and the tensor keeps
    what the call left, never silently half-changed."""
    base = torch.zeros(4, 4, dtype=dtype)
    t = _layout(base, layout)
    if dtype is torch.bfloat16 or layout != "contiguous":
        with pytest.raises((ValueError, ac.ReadOnlyError), match="read-only"):
            _late_write(kind, t)
        assert torch.equal(base, torch.zeros(4, 4, dtype=dtype))
    else:
        _late_write(kind, t)
        assert torch.equal(t, torch.ones_like(t))


def test_the_late_write_of_a_torchified_object_names_the_attribute_and_why() -> None:
    """A torchified object that kept a private copy (a bfloat16 tensor, writeback=True) and
    writes into it in a later method is refused with a ReadOnlyError saying why."""
    t = torch.zeros(3, dtype=torch.bfloat16)
    held = ac.torchify(_Holder, writeback=True)(t)
    with pytest.raises(ac.ReadOnlyError) as info:
        held.bump()
    assert str(info.value) == (
        "_Holder.bump(): attribute self.a holds a private copy of a tensor handed to an earlier call with "
        "writeback=True (NumPy cannot share the tensor's memory: another device, a dtype NumPy lacks, or strided "
        "memory), copied back when that call returned and read-only since, so that a write made later is refused "
        "rather than lost. Found ValueError('output array is read-only'). Fix: make the writes before the call "
        "returns, or pass a contiguous CPU tensor of a NumPy dtype, whose memory the array shares."
    )
    assert torch.equal(t, torch.zeros(3, dtype=torch.bfloat16))


@pytest.mark.parametrize("shape", ["bare", "tuple", "dict"])
def test_an_array_a_writeback_call_returns_stays_writable(shape: str) -> None:
    """The private copy the function returns (itself, in a tuple, in a dict) is the caller's
    result, not the tensor's: writable."""
    wrap = {"bare": lambda a: a, "tuple": lambda a: (a, 1), "dict": lambda a: {"a": a}}[shape]
    result = ac.accepts_numpy(writeback=True)(wrap)(torch.zeros(3, dtype=torch.bfloat16))
    returned = {"bare": lambda r: r, "tuple": lambda r: r[0], "dict": lambda r: r["a"]}[shape](result)
    returned += 1
    assert returned.tolist() == [1.0, 1.0, 1.0]


# --------------------------------------------------------------------------- torchified objects' attributes


class _Accumulator:
    def __init__(self) -> None:
        self.buf: Any = None

    def bump(self) -> None:
        self.buf += 1


def test_assigning_a_tensor_to_a_proxy_hands_it_over_as_an_argument() -> None:
    """``proxy.buf = t`` hands ``t`` over as a method's argument is: read-only by default (a
    later write is a ReadOnlyError naming the attribute, the caller's tensor untouched), a
    private copy with copy=True, the tensor's own memory with writeback=True."""
    t = torch.zeros(3)
    acc = ac.torchify(_Accumulator)()
    acc.buf = t
    with pytest.raises(ac.ReadOnlyError) as info:
        acc.bump()
    assert str(info.value).startswith("_Accumulator.bump(): attribute self.buf was written into by the function; ")
    assert torch.equal(t, torch.zeros(3))

    private = ac.torchify(_Accumulator, copy=True)()
    private.buf = t
    private.bump()
    assert torch.equal(t, torch.zeros(3)) and torch.equal(private.buf, torch.ones(3))

    shared = ac.torchify(_Accumulator, writeback=True)()
    shared.buf = t
    shared.bump()
    assert torch.equal(t, torch.ones(3))


def test_an_object_keeping_a_constructor_argument_refuses_a_later_write() -> None:
    """``torchify(Holder)(t).bump()`` writes into the read-only array the constructor was
    handed: a ReadOnlyError naming the attribute, with copy=True as the fix that works."""
    t = torch.zeros(3)
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.torchify(_Holder)(t).bump()
    assert str(info.value) == (
        "_Holder.bump(): attribute self.a was written into by the function; arrays made from tensor arguments "
        "are read-only so that NumPy code never changes the caller's tensors behind its back. Found "
        "ValueError('output array is read-only'). Fix: pass copy=True to give the function private writable "
        "copies, or writeback=True to let its changes reach the caller's tensors (in the ac.torchify(..., "
        "copy=True) call that made it, or a with ac.config(copy=True): block around the call)."
    )
    held = ac.torchify(_Holder, copy=True)(t)
    held.bump()
    assert torch.equal(t, torch.zeros(3)) and torch.equal(held.a, torch.ones(3))


class _Adder:
    """Methods writing an argument into an array the object holds, each spelling the write."""

    def __init__(self, buf: Any) -> None:
        self.buf = buf
        self.parts = {"head": buf}

    def attribute(self, other: Any) -> None:
        self.buf += other

    def local(self, other: Any) -> None:
        buf = self.buf
        buf -= other

    def item(self, other: Any) -> None:
        self.parts["head"] *= other

    def row(self, other: Any) -> None:
        self.buf[0] += other


@pytest.mark.parametrize("method", ["attribute", "local", "item", "row"])
@pytest.mark.parametrize("operand", ["tensor", "number"])
def test_an_in_place_write_names_the_array_written_not_the_operand(method: str, operand: str) -> None:
    """``self.buf += o`` (through a local, an item, a row too) with ``o`` a read-only argument
    as well: the ReadOnlyError names the attribute written, never the argument only read."""
    t = torch.zeros(2, 3)
    adder = ac.torchify(_Adder)(t)
    with pytest.raises(ac.ReadOnlyError) as info:
        getattr(adder, method)(torch.ones(3) if operand == "tensor" else 2.0)
    written = "self.parts['head']" if method == "item" else "self.buf"
    held = "self.buf or self.parts['head']"  # one array, held twice
    assert str(info.value).startswith(f"_Adder.{method}(): attribute {held} was written into by the function; ")
    assert written in held and torch.equal(t, torch.zeros(2, 3))


# --------------------------------------------------------------------------- containers changed by the function

#: What a function may do to the dict it was handed, and the same done to the caller's dict
#: in torch: ``(on the handed dict, on a twin of the caller's)``.
_CONTAINER_CHANGES: dict[str, tuple[Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], None]]] = {
    "write in place": (lambda s: s["x"].__iadd__(1), lambda s: s["x"].__iadd__(1)),
    "add a key": (lambda s: s.__setitem__("new", np.ones(2)), lambda s: s.__setitem__("new", torch.ones(2))),
    "replace a number": (lambda s: s.__setitem__("n", s["n"] + 1), lambda s: s.__setitem__("n", s["n"] + 1)),
    "replace a tensor": (lambda s: s.__setitem__("x", s["x"] * 2), lambda s: s.__setitem__("x", s["x"] * 2)),
    "alias a tensor": (lambda s: s.__setitem__("y", s["x"]), lambda s: s.__setitem__("y", s["x"])),
    "delete a key": (lambda s: s.pop("tag", None), lambda s: s.pop("tag", None)),
    "append an item": (lambda s: s["items"].append(np.zeros(1)), lambda s: s["items"].append(torch.zeros(1))),
    "pop an item": (lambda s: s["items"] and s["items"].pop(), lambda s: s["items"] and s["items"].pop()),
}


def _state(dtype: torch.dtype) -> dict[str, Any]:
    return {"x": torch.arange(3, dtype=dtype), "n": 0, "tag": "a", "items": [torch.ones(1, dtype=dtype)]}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a.double(), b.double())
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@given(
    changes=st.lists(st.sampled_from(sorted(_CONTAINER_CHANGES)), max_size=5),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
)
@settings(max_examples=80, deadline=None)
def test_changes_to_a_handed_container_reach_the_callers(changes: list[str], dtype: torch.dtype) -> None:
    """With writeback=True, whatever the function does to the dict of tensors it was handed
    (keys added and removed, items appended and popped, values replaced, arrays written in
    place) is what the caller's dict holds afterwards, in tensors; an array the function
    was handed and moved stays the caller's tensor itself."""

    @ac.accepts_numpy(writeback=True)
    def change(state: dict[str, Any]) -> None:
        for name in changes:
            _CONTAINER_CHANGES[name][0](state)

    state, twin = _state(dtype), _state(dtype)
    x = state["x"]
    change(state)
    for name in changes:
        _CONTAINER_CHANGES[name][1](twin)
    assert _same(state, twin), (state, twin)
    if "alias a tensor" in changes and "replace a tensor" not in changes:
        assert state["y"] is x


@dataclasses.dataclass
class _Run:
    x: torch.Tensor
    steps: int = 0


def test_a_dataclass_field_and_attribute_set_by_the_function_reach_the_callers() -> None:
    """A dataclass holding a tensor reaches the function as a copy: the fields and attributes
    it sets are set on the caller's object."""

    @ac.accepts_numpy(writeback=True)
    def step(run: _Run) -> None:
        run.x *= 2
        run.steps += 1
        run.note = "stepped"  # type: ignore[attr-defined]

    run = _Run(torch.ones(2))
    step(run)
    assert torch.equal(run.x, torch.full((2,), 2.0)) and run.steps == 1 and run.note == "stepped"  # type: ignore[attr-defined]


class _Pair:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


def test_a_change_a_registered_container_cannot_take_is_refused() -> None:
    """A type registered with flatten/unflatten alone has no way to take a change back: the
    call raises, naming the argument and where in it the change was, never dropping it
    silently, and saying how to give it one."""
    ac.register_container(_Pair, lambda p: ((p.a, p.b), None), lambda c, _: _Pair(*c))

    @ac.accepts_numpy(writeback=True)
    def swap(pair: _Pair) -> None:
        pair.b = np.zeros(1)

    with pytest.raises(ac.ConversionError) as info:
        swap(_Pair(torch.ones(1), 2))
    assert str(info.value) == (
        "test_a_change_a_registered_container_cannot_take_is_refused.<locals>.swap(): argument pair was changed "
        "by the function (at [1]), and a _Pair cannot take the change back: the function was handed a rebuilt "
        "copy (its tensors as arrays), and only a dict, a list, a dataclass that is not frozen or a type registered "
        "with an update takes back changes made to one. Found tests.test_sweep._Pair. Fix: register _Pair with an "
        "update (autoconvert.register_container(..., update=...)), return the changed value instead, or make the "
        "change on the caller's side."
    )


def test_returns_tensor_alone_takes_a_self_containing_argument_it_never_converts() -> None:
    """``returns_tensor`` only looks through the arguments for the caller's device: a list or
    dict that holds itself is looked through as far as the walk goes, and the call goes on."""
    loop: list[Any] = [torch.ones(1)]
    loop.append(loop)
    looped: dict[str, Any] = {}
    looped["self"] = looped

    @ac.returns_tensor
    def ones(x: Any, extra: Any) -> np.ndarray:
        return np.ones(2)

    assert torch.equal(ones(loop, looped), torch.ones(2, dtype=torch.float64))
    assert torch.equal(ones(1, extra=loop), torch.ones(2, dtype=torch.float64))


def test_a_refused_change_deep_in_a_container_is_named_by_its_path() -> None:
    """The change a registered type cannot take is named where it is, below the argument."""
    ac.register_container(_Pair, lambda p: ((p.a, p.b), None), lambda c, _: _Pair(*c))

    @ac.accepts_numpy(writeback=True)
    def swap(state: dict[str, Any]) -> None:
        state["pairs"][0].b = None

    with pytest.raises(ac.ConversionError) as info:
        swap({"pairs": [_Pair(torch.ones(1), 2)]})
    assert str(info.value).startswith(
        "test_a_refused_change_deep_in_a_container_is_named_by_its_path.<locals>.swap(): argument "
        "state['pairs'][0] was changed by the function (at [1]), and a _Pair cannot take the change back"
    )


def _doubles_then_writes(a: np.ndarray) -> Any:
    yield a * 2
    a += 1
    yield a


def _fails_its_own_way(a: np.ndarray) -> Any:
    yield a
    raise KeyError("its own")


@pytest.mark.parametrize(
    "decorate", [ac.accepts_numpy, lambda f: ac.returns_tensor(ac.accepts_numpy(f))], ids=["accepts_numpy", "pair"]
)
def test_a_generator_functions_body_refusing_a_write_is_a_read_only_error(decorate: Callable[[Any], Any]) -> None:
    """A generator function's body runs as the caller iterates, after the call returned: a
    write into the read-only array it was handed is still a ReadOnlyError naming the
    argument, and the function's own errors pass through untouched."""
    t = torch.zeros(2)
    items = decorate(_doubles_then_writes)(t)
    next(items)
    with pytest.raises(ac.ReadOnlyError) as info:
        next(items)
    assert str(info.value) == (
        "_doubles_then_writes(): argument a was written into by the function; arrays made from tensor arguments "
        "are read-only so that NumPy code never changes the caller's tensors behind its back. Found "
        "ValueError('output array is read-only'). Fix: pass copy=True to give the function private writable "
        "copies, or writeback=True to let its changes reach the caller's tensors (in @ac.accepts_numpy(copy=True) "
        "on _doubles_then_writes, or a with ac.config(copy=True): block around the call)."
    )
    assert torch.equal(t, torch.zeros(2))
    own = decorate(_fails_its_own_way)(t)
    next(own)
    with pytest.raises(KeyError, match="its own"):
        next(own)
