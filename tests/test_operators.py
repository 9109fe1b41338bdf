"""Torchified objects keep their class's operators: binary, reflected, in place, unary,
comparisons and item assignment, each converting as the class's methods do."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest
import scipy.sparse.linalg
import scipy.spatial
import scipy.spatial.transform
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac
from autoconvert._torchify._proxies import OPERATORS, TorchifiedObject


class Signal:
    """A NumPy-era value class with every operator Python has, each on its array."""

    def __init__(self, values: Any) -> None:
        self.values = np.asarray(values, dtype=np.float64)

    def _of(self, other: Any) -> Any:
        return other.values if isinstance(other, Signal) else other

    def _binary(name: str, reflected: bool = False) -> Any:  # type: ignore[misc]  # noqa: N805
        op = getattr(operator, name)

        def method(self: Signal, other: Any) -> Any:
            if not isinstance(other, (Signal, np.ndarray, float, int)):
                return NotImplemented
            return Signal(op(self._of(other), self.values) if reflected else op(self.values, self._of(other)))

        return method

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", True)
    __truediv__, __rtruediv__ = _binary("truediv"), _binary("truediv", True)
    __pow__ = _binary("pow")

    def __matmul__(self, other: Any) -> Any:
        return float(self.values @ self._of(other))  # a plain value back

    def __iadd__(self, other: Any) -> Signal:
        self.values = self.values + self._of(other)  # rebinds: the arrays handed stay read-only
        return self

    def __neg__(self) -> Signal:
        return Signal(-self.values)

    def __abs__(self) -> Signal:
        return Signal(np.abs(self.values))

    def __lt__(self, other: Any) -> Any:
        return self.values < self._of(other)  # an array of bools

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Signal) and bool(np.array_equal(self.values, other.values))

    def __hash__(self) -> int:
        return hash(self.values.tobytes())

    def __getitem__(self, key: Any) -> Any:
        return self.values[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        values = self.values.copy()
        values[key] = value
        self.values = values

    def __len__(self) -> int:
        return len(self.values)


def _plain(value: Any) -> Any:
    """What a result is, tensors read back as arrays, proxies as their objects' values."""
    if isinstance(value, TorchifiedObject):
        return _plain(value.__wrapped__)
    if isinstance(value, Signal):
        return ("Signal", value.values.tolist())
    if isinstance(value, torch.Tensor):
        return ("array", value.numpy().tolist())
    if isinstance(value, (np.ndarray, np.generic)):
        return ("array", value.tolist())
    return value


EXPRESSIONS = {
    "a + b": lambda a, b, x, t: a + b,
    "a + t": lambda a, b, x, t: a + t,
    "2.0 + a": lambda a, b, x, t: 2.0 + a,
    # A tensor on the left: torch declines, the class's __rsub__ runs (NumPy on the left would
    # broadcast over the object instead, so the objects' side calls __rsub__ itself).
    "t - a": lambda a, b, x, t: t - a if isinstance(t, torch.Tensor) else a.__rsub__(t),
    "a * 3": lambda a, b, x, t: a * 3,
    "3 * a": lambda a, b, x, t: 3 * a,
    "a / b": lambda a, b, x, t: a / b,
    "1.0 / a": lambda a, b, x, t: 1.0 / a,
    "a ** 2": lambda a, b, x, t: a**2,
    "a @ t": lambda a, b, x, t: a @ t,
    "-a": lambda a, b, x, t: -a,
    "abs(a)": lambda a, b, x, t: abs(a),
    "a < t": lambda a, b, x, t: a < t,
    "a == b": lambda a, b, x, t: a == b,
    "a == a": lambda a, b, x, t: a == a,  # noqa: PLR0124
    "a[1]": lambda a, b, x, t: a[1],
    "len(a)": lambda a, b, x, t: len(a),
}


@given(
    values=st.lists(st.floats(0.5, 4.0), min_size=3, max_size=3),
    others=st.lists(st.floats(0.5, 4.0), min_size=3, max_size=3),
    expression=st.sampled_from(sorted(EXPRESSIONS)),
)
def test_each_operator_gives_what_the_class_gives_on_arrays(
    values: list[float], others: list[float], expression: str
) -> None:
    """Through the proxies, tensors in and tensors out; on the objects, arrays: the same values."""
    compute = EXPRESSIONS[expression]
    x = np.array(others)
    expected = _plain(compute(Signal(values), Signal(others), x, x))
    t = torch.tensor(others, dtype=torch.float64)
    got = compute(ac.torchify(Signal(values)), ac.torchify(Signal(others)), x, t)
    assert _plain(got) == expected
    assert not isinstance(got, np.ndarray | np.generic)  # tensors and proxies, never arrays


def test_in_place_operators_and_item_assignment_change_the_object() -> None:
    """``a += t`` calls the class's ``__iadd__`` (the name stays bound to the proxy); ``a[0] = t``
    its ``__setitem__``, the tensor handed as an array; ``del`` fails as on the object."""
    a = ac.torchify(Signal([1.0, 2.0, 3.0]))
    before = a
    a += torch.ones(3, dtype=torch.float64)
    assert a is before and a.values.tolist() == [2.0, 3.0, 4.0]
    a[0] = torch.tensor(9.0, dtype=torch.float64)
    assert a.values.tolist() == [9.0, 3.0, 4.0] and isinstance(a.values, torch.Tensor)
    with pytest.raises(AttributeError) as plain:  # Python's answer without __delitem__
        del Signal([1.0])[0]
    with pytest.raises(AttributeError) as proxied:
        del a[0]
    assert str(proxied.value) == str(plain.value) == "__delitem__"


def test_equal_objects_hash_alike_and_unknown_operands_are_refused() -> None:
    """A class defining ``__eq__`` and ``__hash__`` keeps both; an operand the class answers
    with NotImplemented raises Python's own TypeError, never a proxy of NotImplemented."""
    a, b = ac.torchify(Signal([1.0, 2.0])), ac.torchify(Signal([1.0, 2.0]))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    with pytest.raises(TypeError, match="unsupported operand type"):
        a + "text"


def test_operators_the_class_lacks_stay_missing() -> None:
    """Only the class's own operators are forwarded: ``~a`` raises as it does on the object."""
    a = ac.torchify(Signal([1.0]))
    with pytest.raises(TypeError, match="bad operand type for unary ~"):
        ~a
    assert "__invert__" in OPERATORS and not hasattr(type(a), "__invert__")


def test_rotations_compose_and_index_as_proxies() -> None:
    """SciPy's Rotation: ``*``, ``**``, ``[]``, ``len`` and iteration, results as proxies whose
    matrices are tensors equal to SciPy's on arrays."""
    angles = torch.tensor([[0.1, 0.2], [0.3, -0.4]], dtype=torch.float64)
    transform = ac.torchify(scipy.spatial.transform)
    r1 = transform.Rotation.from_euler("zy", angles)
    r2 = transform.Rotation.from_euler("zy", angles.flip(0))
    plain = scipy.spatial.transform.Rotation
    expected = plain.from_euler("zy", angles.numpy()) * plain.from_euler("zy", angles.flip(0).numpy())
    composed = r1 * r2
    assert isinstance(composed, TorchifiedObject) and isinstance(composed.as_matrix(), torch.Tensor)
    torch.testing.assert_close(composed.as_matrix(), torch.from_numpy(expected.as_matrix()))
    torch.testing.assert_close(
        (r1**2).as_matrix(), torch.from_numpy((plain.from_euler("zy", angles.numpy()) ** 2).as_matrix())
    )
    assert len(r1) == 2 and isinstance(r1[0], TorchifiedObject)
    assert [type(r) for r in r1] == [type(r1[0])] * 2
    torch.testing.assert_close(r1[1].as_quat(), torch.from_numpy(plain.from_euler("zy", angles.numpy())[1].as_quat()))


def test_linear_operators_keep_their_algebra() -> None:
    """SciPy's LinearOperator: ``@``, ``*``, ``+``, ``-``, unary ``-``, ``/``, ``**``, scalar
    ``*`` from the left, and ``.T`` (an attribute holding an operator) as a proxy."""
    linalg = ac.torchify(scipy.sparse.linalg)
    matrix = torch.tensor([[2.0, 1.0], [0.0, 3.0]], dtype=torch.float64)
    op, v = linalg.aslinearoperator(matrix), torch.tensor([1.0, -1.0], dtype=torch.float64)
    m = matrix.numpy()
    cases = {
        "op @ v": (op @ v, m @ v.numpy()),
        "op * v": (op * v, m @ v.numpy()),
        "(op + op) @ v": ((op + op) @ v, 2 * m @ v.numpy()),
        "(op - op) @ v": ((op - op) @ v, 0 * m @ v.numpy()),
        "(-op) @ v": ((-op) @ v, -m @ v.numpy()),
        "(2.0 * op) @ v": ((2.0 * op) @ v, 2 * m @ v.numpy()),
        "(op / 2) @ v": ((op / 2) @ v, m @ v.numpy() / 2),
        "(op ** 2) @ v": ((op**2) @ v, m @ m @ v.numpy()),
        "op.T @ v": (op.T @ v, m.T @ v.numpy()),
    }
    for name, (got, expected) in cases.items():
        assert isinstance(got, torch.Tensor), name
        torch.testing.assert_close(got, torch.from_numpy(expected), msg=name)
    assert isinstance(op.T, TorchifiedObject) and isinstance(op + op, TorchifiedObject)


def test_an_extension_type_s_methods_and_operators_are_wrapped_once() -> None:
    """An extension type's bound method is a new object at each read: the proxy still wraps it
    once per object, so a call costs a conversion, not a new plan."""
    import array

    numbers = ac.torchify(array.array("d", [1.0, 2.0]))
    tree = ac.torchify(scipy.spatial).cKDTree(torch.rand(20, 3, dtype=torch.float64))
    calls = {"__mul__": lambda: numbers * 2, "query": lambda: tree.query(torch.zeros(1, 3, dtype=torch.float64))}
    for name, call in calls.items():
        proxy = numbers if name == "__mul__" else tree
        call()
        wrapped = proxy._self_bound[name][2]
        call()
        assert proxy._self_bound[name][2] is wrapped, name
    assert (numbers * 2).tolist() == [1.0, 2.0, 1.0, 2.0]


def test_explain_takes_an_operator_before_its_first_use() -> None:
    """``explain(proxy.__add__)`` explains the class's ``__add__`` as the operator calls it."""
    op = ac.torchify(scipy.sparse.linalg).aslinearoperator(torch.eye(2, dtype=torch.float64))
    first = str(ac.explain(op.__add__)).splitlines()[0]
    assert first == "LinearOperator.__add__(): accepts_numpy() + returns_tensor(), fused into one wrapper"


def _classes() -> dict[str, Any]:
    """Objects of classes with operators, plain and torchified (one each made from tensors)."""
    eye = np.eye(2)
    return {
        "Signal": (Signal([1.0, 2.0]), ac.torchify(Signal([1.0, 2.0]))),
        "LinearOperator": (
            scipy.sparse.linalg.aslinearoperator(eye),
            ac.torchify(scipy.sparse.linalg).aslinearoperator(torch.from_numpy(eye)),
        ),
        "csr_array": (scipy.sparse.csr_array(eye), ac.torchify(scipy.sparse).csr_array(torch.from_numpy(eye))),
        "Rotation": (
            scipy.spatial.transform.Rotation.identity(),
            ac.torchify(scipy.spatial.transform).Rotation.identity(),
        ),
    }


@given(kind=st.sampled_from(sorted(_classes())), name=st.sampled_from(OPERATORS))
def test_a_proxy_type_has_exactly_its_class_s_operators(kind: str, name: str) -> None:
    """A proxy answers an operator exactly where its object does (``type.__or__``, the
    metaclass's ``int | None``, is no operator of a class's objects): a missing one fails on
    the proxy as on the object, with Python's TypeError or AttributeError."""
    plain, proxied = _classes()[kind]
    assert hasattr(proxied, name) == hasattr(plain, name), name
    if name in ("__or__", "__ror__") and not hasattr(plain, name):
        with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \|"):
            proxied | 1
        with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \|"):
            1 | proxied
        with pytest.raises(AttributeError, match=f"object has no attribute '{name}'"):
            ac.explain(getattr(proxied, name))


@pytest.mark.parametrize(
    "expression",
    ["np.ones(2) * a", "np.ones(2) @ a", "np.ones((2, 2)) @ a", "np.ones((2, 2)) + a", "np.ones((2, 2)) - a"],
)
@pytest.mark.parametrize("kind", ["LinearOperator", "csr_array"])
def test_an_array_on_the_left_defers_to_the_proxy_as_to_the_object(kind: str, expression: str) -> None:
    """The class's ``__array_ufunc__ = None`` (or ``__array_priority__``) reaches its proxy type,
    so NumPy on the left defers to the proxy's reflected operator (it made an object array of
    proxies, or raised) and the result is the object's, in tensors."""
    plain, proxied = _classes()[kind]
    try:
        expected = eval(expression, {"np": np}, {"a": plain})
    except TypeError:  # an operator the class lacks: the proxy lacks it too
        with pytest.raises(TypeError):
            eval(expression, {"np": np}, {"a": proxied})
        return
    got = eval(expression, {"np": np}, {"a": proxied})
    expected = expected.toarray() if scipy.sparse.issparse(expected) else np.asarray(expected)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.to_dense().numpy(), expected)
