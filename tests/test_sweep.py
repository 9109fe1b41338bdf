"""The adversarial sweep, kept: odd tensors and arrays through every route, each outcome exact
or a clear error (an autoconvert exception naming the function and the fix), never a raw
torch/NumPy error, a crash or a leaked warning."""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

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
