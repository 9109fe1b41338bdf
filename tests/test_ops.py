"""numpy_op(backward=...): NumPy functions in the autograd graph."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import pickle
import subprocess
import sys
import textwrap
import typing
import warnings
from typing import Any, TypeVar

import numpy as np
import pytest
import scipy.linalg
import torch
import torch._dynamo
import typing_extensions
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd import forward_ad

import autoconvert as ac

sin = ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x))


@ac.numpy_op(backward=lambda g, a, output: scipy.linalg.solve_sylvester(output.T, output.T, g))
def sqrtm(a: np.ndarray) -> np.ndarray:
    """The principal square root; its VJP X solves S^T X + X S^T = G (torchmetrics' FID backward)."""
    return scipy.linalg.sqrtm(a).real


def _product_and_sum_backward(g: tuple[Any, Any], x: np.ndarray, y: np.ndarray, output: Any) -> tuple[Any, Any]:
    g_product, g_sum = g
    return g_product * y + g_sum, g_product * x + g_sum


@ac.numpy_op(backward=_product_and_sum_backward)
def product_and_sum(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x * y, x + y


def test_gradcheck_an_elementwise_op() -> None:
    x = torch.linspace(-2, 2, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(sin, (x,))


def test_gradcheck_sqrtm_with_a_sylvester_backward() -> None:
    rng = np.random.default_rng(0)
    base = rng.random((4, 4))
    a = torch.tensor(base @ base.T + 4 * np.eye(4), requires_grad=True)  # well-conditioned, SPD
    assert torch.autograd.gradcheck(sqrtm, (a,))
    assert torch.allclose(sqrtm(a) @ sqrtm(a), a)


def test_gradcheck_two_inputs_and_a_tuple_result() -> None:
    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    y = torch.rand(3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(product_and_sum, (x, y))


def test_gradients_reach_inputs_on_their_device_and_dtype_without_a_grad_warning() -> None:
    x = torch.tensor([0.5, 1.0], dtype=torch.bfloat16, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # grad="warn" does not apply: the gradient flows
        y = sin(x)
    assert y.dtype == torch.bfloat16 and y.requires_grad
    y.sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.bfloat16
    assert torch.allclose(x.grad.float(), torch.cos(x.detach().float()), atol=1e-2)


def test_non_tensor_arguments_and_integer_outputs() -> None:
    @ac.numpy_op(backward=lambda g, x, k, output: g[0] * k)  # one tensor argument: one gradient
    def scaled_and_argmax(x: np.ndarray, k: float) -> tuple[np.ndarray, np.intp]:
        return x * k, np.argmax(x)

    x = torch.tensor([1.0, 3.0, 2.0], requires_grad=True)
    scaled, index = scaled_and_argmax(x, 2.5)
    assert index.item() == 1 and not index.requires_grad  # an integer output carries no gradient
    scaled.sum().backward()
    assert x.grad.tolist() == [2.5, 2.5, 2.5]


_NO_SECOND_DERIVATIVE = (
    r"^sin\(\): double backward is not supported: its backward is NumPy code, which autograd cannot differentiate\. "
    r"Fix: take first derivatives alone \(create_graph=False, a single torch\.func\.grad, jacrev or jacfwd\), or write "
    r"the function in torch where its second derivative is needed$"
)


def test_double_backward_raises_clearly() -> None:
    x = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(sin(x).sum(), x, create_graph=True)
    with pytest.raises(ac.GradientError, match=_NO_SECOND_DERIVATIVE):
        g.sum().backward()


_WRONG_COUNT = (
    "{name}(): the backward must return {count} gradient(s), one per positional tensor argument ({names}: tensors "
    "given by keyword to positional parameters count). Found {found}. Fix: return a single array for one tensor "
    "argument, else a tuple with a gradient (or None) for each, in that order."
)


def test_a_backward_returning_the_wrong_count_is_named() -> None:
    bad = ac.numpy_op(np.add, backward=lambda g, x, y, output: g)
    x = torch.ones(2, requires_grad=True)
    expected = _WRONG_COUNT.format(name="add", count=2, names="x1, x2", found="ndarray of 1")
    with pytest.raises(ac.ConversionError) as caught:
        bad(x, torch.ones(2, requires_grad=True)).sum().backward()
    assert str(caught.value) == expected


def _scaled_sin(x: np.ndarray, y: np.ndarray, scale: Any = 1.0) -> np.ndarray:
    return np.sin(x) * y * scale


def test_the_wrong_count_names_a_tensor_given_by_keyword_to_a_positional_parameter() -> None:
    """A backward written for the tensors given by position, called with a tensor for a later
    positional parameter by keyword: that tensor counts too, and the message names it."""
    op = ac.numpy_op(
        _scaled_sin,
        backward=lambda g, x, y, scale=1.0, output=None: (g * np.cos(x) * y * scale, g * np.sin(x) * scale),
    )
    x, y = torch.tensor([0.3, 0.9], dtype=torch.float64, requires_grad=True), torch.ones(2, dtype=torch.float64)
    op(x, y, scale=2.0).sum().backward()  # a float for scale: two tensors, two gradients
    torch.testing.assert_close(x.grad, 2 * torch.cos(x.detach()))
    expected = _WRONG_COUNT.format(name="_scaled_sin", count=3, names="x, y, scale", found="tuple of 2")
    with pytest.raises(ac.ConversionError) as caught:
        op(x, y, scale=torch.tensor(2.0, dtype=torch.float64)).sum().backward()
    assert str(caught.value) == expected


def _of_rest(x: np.ndarray, *rest: np.ndarray) -> np.ndarray:
    return x * rest[0] * rest[1]


def test_the_wrong_count_names_a_var_positional_parameters_items() -> None:
    op = ac.numpy_op(_of_rest, backward=lambda g, x, *rest, output: g)
    x = torch.ones(2, requires_grad=True)
    expected = _WRONG_COUNT.format(name="_of_rest", count=2, names="x, rest[1]", found="ndarray of 1")
    with pytest.raises(ac.ConversionError) as caught:
        op(x, 2.0, torch.ones(2)).sum().backward()
    assert str(caught.value) == expected


def test_without_backward_it_is_the_plain_pair() -> None:
    """No backward: returns_tensor(accepts_numpy(fn)), the gradient warning included."""
    plain = ac.numpy_op(np.negative)
    assert torch.equal(plain(torch.ones(2)), -torch.ones(2))
    with pytest.warns(ac.GradientWarning):
        plain(torch.ones(2, requires_grad=True))


# torch 2.13's dynamo warns at any graph break over a non-leaf tensor that requires grad,
# reproduced with a bare torch._dynamo.graph_break() and no autoconvert: not ours to silence.
DYNAMO_NON_LEAF_GRAD = "ignore:The .grad attribute of a Tensor that is not a leaf Tensor:UserWarning"


@pytest.mark.filterwarnings(DYNAMO_NON_LEAF_GRAD)
def test_compiled_calls_break_the_graph_and_stay_correct() -> None:
    torch._dynamo.reset()
    x = torch.rand(4, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(lambda v: (sin(v * 2) + 1).sum(), backend="eager")
    compiled(x).backward()
    assert torch.allclose(x.grad, 2 * torch.cos(2 * x.detach()))
    torch._dynamo.reset()


def test_a_call_that_needs_no_graph_gives_the_same_values_and_no_node() -> None:
    """No input requires grad, or grad mode is off: the plain pair runs, with no autograd node."""
    x = torch.tensor([0.0, 1.0])
    plain = sin(x)
    assert plain.grad_fn is None and torch.equal(plain, torch.from_numpy(np.sin(x.numpy())))
    w = x.clone().requires_grad_()
    with torch.no_grad():
        assert sin(w).grad_fn is None
    assert sin(w).grad_fn is not None


def test_module_level_ops_pickle_by_reference() -> None:
    assert pickle.loads(pickle.dumps(sqrtm)) is sqrtm


# ---- fake=: registered as torch.library ops, traced by torch.compile as one node ----

sin_op = ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x), fake="x")


@ac.numpy_op(backward=lambda g, a, output: scipy.linalg.solve_sylvester(output.T, output.T, g), fake="a")
def sqrtm_op(a: np.ndarray) -> np.ndarray:
    """sqrtm, registered: FID's matrix square root inside a compiled model."""
    return scipy.linalg.sqrtm(a).real


@ac.numpy_op(backward=_product_and_sum_backward, fake=("x", "x"))
def product_and_sum_op(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x * y, x + y


def _spd(n: int, seed: int = 0) -> torch.Tensor:
    base = np.random.default_rng(seed).random((n, n))
    return torch.tensor(base @ base.T + n * np.eye(n), requires_grad=True)


class _Whitened(torch.nn.Module):
    """A model whose forward takes a matrix square root in NumPy, as FID-style losses do."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.5, dtype=torch.float64))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return sqrtm_op(a * self.scale).trace() + sin_op(a).sum()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_model_compiles_with_fullgraph_and_trains(backend: str) -> None:
    """No graph break: forward and backward both run the NumPy ops through their registrations."""
    torch._dynamo.reset()
    eager, compiled = _Whitened(), torch.compile(_Whitened(), fullgraph=True, backend=backend)
    a = _spd(4)
    eager(a).backward()
    expected = (eager.scale.grad.clone(), a.grad.clone())
    a.grad = None
    compiled(a).backward()
    assert torch.allclose(compiled.scale.grad, expected[0]) and torch.allclose(a.grad, expected[1])
    torch._dynamo.reset()


def test_fullgraph_compile_counts_no_graph_break() -> None:
    torch._dynamo.reset()
    x = torch.rand(3, dtype=torch.float64)
    explained = torch._dynamo.explain(lambda v: product_and_sum_op(sin_op(v), v)[0] * 2)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    torch._dynamo.reset()


@pytest.mark.slow
def test_inductor_compiles_forward_and_backward() -> None:
    """The slow one: inductor generates code around the opaque NumPy ops, training included."""
    torch._dynamo.reset()
    x = torch.rand(5, dtype=torch.float64, requires_grad=True)
    y = torch.rand(5, dtype=torch.float64)
    loss = torch.compile(lambda u, v: (product_and_sum_op(sin_op(u), v)[1] ** 2).sum(), fullgraph=True)
    loss(x, y).backward()
    assert torch.allclose(x.grad, 2 * (torch.sin(x.detach()) + y) * torch.cos(x.detach()))
    torch._dynamo.reset()


@pytest.mark.parametrize(
    ("op", "args"),
    [
        (sin_op, lambda: (torch.rand(3, 2, dtype=torch.float64, requires_grad=True),)),
        (sin_op, lambda: (torch.rand(4, dtype=torch.float32),)),
        (sqrtm_op, lambda: (_spd(3),)),
        (
            product_and_sum_op,
            lambda: (torch.rand(3, dtype=torch.float64, requires_grad=True), torch.rand(3, dtype=torch.float64)),
        ),
    ],
    ids=["sin-float64-grad", "sin-float32", "sqrtm", "two-inputs-tuple-result"],
)
def test_opcheck_passes(op: Any, args: Any) -> None:
    """torch.library.opcheck: schema, fake against real, autograd registration, AOT dispatch."""
    results = torch.library.opcheck(op.op, args())
    assert set(results.values()) == {"SUCCESS"}, results


def test_gradcheck_through_the_registered_op() -> None:
    """The path torch.compile takes: the forward op, its autograd formula, the backward op."""
    assert torch.autograd.gradcheck(sqrtm_op.op, (_spd(4),))
    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    y = torch.rand(3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(product_and_sum_op.op, (x, y))


def test_non_tensor_arguments_integer_outputs_and_keywords_in_the_schema() -> None:
    def scaled_and_order(x: np.ndarray, k: float = 2.0, *, label: str = "a b") -> tuple[np.ndarray, np.ndarray]:
        assert label == "kept"
        return x * k, np.argsort(x)

    def fake(x: torch.Tensor, k: float = 2.0, *, label: str = "a b") -> tuple[torch.Tensor, torch.Tensor]:
        return torch.empty_like(x), torch.empty_like(x, dtype=torch.int64)

    op = ac.numpy_op(scaled_and_order, backward=lambda g, x, k, output, label: g[0] * k, fake=fake)
    assert str(op.op._schema).endswith('(Tensor x, float k=2., *, str label="a b") -> (Tensor, Tensor)')
    x = torch.tensor([3.0, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    assert set(torch.library.opcheck(op.op, (x, 3.0), {"label": "kept"}).values()) == {"SUCCESS"}
    torch._dynamo.reset()
    scaled, order = torch.compile(op, fullgraph=True, backend="aot_eager")(x, 3.0, label="kept")
    assert order.tolist() == [1, 2, 0] and not order.requires_grad
    scaled.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]
    torch._dynamo.reset()


def test_writeback_is_declared_as_a_mutated_argument() -> None:
    def fill(x: np.ndarray, value: float) -> np.ndarray:
        x[...] = value
        return x.sum(keepdims=True)

    op = ac.numpy_op(fill, fake=lambda x, value: x.new_empty(1), writeback=True)
    assert str(op.op._schema).endswith("(Tensor(a0!) x, float value) -> Tensor")
    assert set(torch.library.opcheck(op.op, (torch.zeros(3), 4.0)).values()) == {"SUCCESS"}
    torch._dynamo.reset()
    t = torch.zeros(3)
    assert torch.compile(op, fullgraph=True, backend="aot_eager")(t, 3.0).item() == 9.0
    assert t.tolist() == [3.0, 3.0, 3.0]  # the write reached the caller's tensor under compile too
    torch._dynamo.reset()


@pytest.mark.parametrize("writeback", [False, True], ids=["read-only-arrays", "writeback-shares-memory"])
def test_a_registered_op_never_returns_its_input_memory_eager_or_compiled(writeback: bool) -> None:
    """torch.library forbids outputs aliasing inputs; eager follows the same rule, so the two agree.
    With writeback=True the function sees the tensors' own memory, so a view of it comes back."""
    identity = ac.numpy_op(lambda x: x, fake="x", writeback=writeback)
    tail = ac.numpy_op(lambda x: x[1:], fake=lambda x: x.new_empty(x.shape[0] - 1), writeback=writeback)
    x = torch.zeros(3)
    torch._dynamo.reset()
    for op in (identity, tail):
        for call in (op, torch.compile(op, fullgraph=True, backend="aot_eager")):
            y = call(x)
            y += 1
            assert x.tolist() == [0.0, 0.0, 0.0]
        assert set(torch.library.opcheck(op.op, (torch.zeros(3),)).values()) == {"SUCCESS"}
    torch._dynamo.reset()


def test_without_backward_a_registered_op_passes_no_gradient() -> None:
    """Eagerly grad="warn" says so; compiled, the inputs are detached before the op."""
    negative = ac.numpy_op(np.negative, fake="x")
    x = torch.ones(2, requires_grad=True)
    with pytest.warns(ac.GradientWarning):
        assert not negative(x).requires_grad
    torch._dynamo.reset()
    compiled = torch.compile(negative, fullgraph=True, backend="aot_eager")(x)
    assert compiled.tolist() == [-1.0, -1.0] and not compiled.requires_grad
    torch._dynamo.reset()


def test_fake_like_follows_the_dtype_and_device_options() -> None:
    op = ac.numpy_op(np.sqrt, fake="x", dtype=torch.float64, device="meta")
    with torch._subclasses.fake_tensor.FakeTensorMode():
        out = op.op(torch.empty(2, 3))
    assert (out.shape, out.dtype, out.device.type) == ((2, 3), torch.float64, "meta")


def test_registered_double_backward_raises_clearly() -> None:
    x = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(sin_op.op(x).sum(), x, create_graph=True)
    with pytest.raises(ac.GradientError, match=_NO_SECOND_DERIVATIVE):
        g.sum().backward()


def test_tensors_given_by_keyword_still_get_their_gradient() -> None:
    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    y = torch.rand(3, dtype=torch.float64, requires_grad=True)
    product_and_sum_op(x, y=y)[0].sum().backward()
    assert torch.equal(x.grad, y.detach()) and torch.equal(y.grad, x.detach())


def test_a_keyword_only_tensor_that_requires_grad_is_refused() -> None:
    def weighted(x: np.ndarray, *, w: np.ndarray) -> np.ndarray:
        return x * w

    op = ac.numpy_op(weighted, backward=lambda g, x, output, w: g * w)
    x, w = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    with pytest.raises(ac.GradientError) as e:
        op(x, w=w)
    assert str(e.value) == (
        "test_a_keyword_only_tensor_that_requires_grad_is_refused.<locals>.weighted(): argument w requires grad, "
        "but gradients flow to positional tensor arguments only. Found a keyword-only tensor that requires grad. "
        "Fix: make w a positional parameter, or pass w.detach()."
    )
    assert torch.equal(op(x, w=w.detach()), torch.ones(2))


def _dict_input(x: dict[str, np.ndarray]) -> np.ndarray:
    return x["a"]


def _varargs(*xs: np.ndarray) -> np.ndarray:
    return xs[0]


def _keyword_array(x: np.ndarray, *, w: np.ndarray) -> np.ndarray:
    return x * w


def _array_default(x: np.ndarray, w: np.ndarray = np.ones(2)) -> np.ndarray:  # noqa: B008 - the case under test
    return x * w


def _list_result(x: np.ndarray) -> list[np.ndarray]:
    return [x]


FIX_TYPES = (
    "annotate arrays as np.ndarray, numbers as float or int, flags as bool, choices as str "
    "(X | None and list[X] work too)"
)


@pytest.mark.parametrize(
    ("fn", "kwargs", "found", "fix"),
    [
        (
            _dict_input,
            {"fake": "x"},
            "parameter 'x' has a type no schema holds, so no torch op can be registered. "
            "Found dict[str, numpy.ndarray]",
            FIX_TYPES,
        ),
        (
            _varargs,
            {"fake": "xs"},
            "parameter 'xs' has no fixed type, so no torch op can be registered. Found *xs: numpy.ndarray",
            "wrap the function in a def with named parameters",
        ),
        (
            np.sin,
            {"fake": "y"},
            "fake= names no parameter, so no torch op can be registered. Found 'y'",
            "name one of: x",
        ),
        (
            np.sin,
            {"fake": 3},
            "fake= must be a function, a parameter's name or a tuple of names, so no torch op can "
            "be registered. Found 3",
            'pass e.g. fake="x" for results shaped like argument x',
        ),
        (
            _keyword_array,
            {"fake": "x", "backward": lambda g, x, output, w: g},
            "parameter 'w' is a keyword-only array, which torch.library ops give no gradient, so no torch op can be "
            "registered. Found keyword-only",
            "make it positional",
        ),
        (
            _array_default,
            {"fake": "x"},
            "parameter 'w' defaults to an array, which no schema holds, so no torch op "
            "can be registered. Found array([1., 1.])",
            "default to None",
        ),
        (
            _list_result,
            {"fake": "x"},
            "the return annotation is not an array or a tuple of arrays, so no torch op "
            "can be registered. Found list[numpy.ndarray]",
            "annotate -> np.ndarray, or -> tuple[np.ndarray, np.ndarray] for two results",
        ),
    ],
    ids=["dict", "varargs", "unknown-name", "not-a-declaration", "keyword-only-array", "array-default", "list-result"],
)
def test_functions_without_a_schema_are_refused_at_decoration(fn: Any, kwargs: Any, found: str, fix: str) -> None:
    with pytest.raises(TypeError) as e:
        ac.numpy_op(fn, **kwargs)
    name = getattr(fn, "__qualname__", "sin")
    assert str(e.value) == (
        f"autoconvert.numpy_op() on {name}(): {found}. "
        f"Fix: {fix}; or drop fake= (then each call is a graph break in torch.compile)."
    )


def test_a_backward_and_writeback_are_refused_together() -> None:
    with pytest.raises(TypeError, match=r"sin\(\) has a backward, so it cannot write into its arguments"):
        ac.numpy_op(np.sin, backward=lambda g, x, output: g, writeback=True)


def test_a_result_count_that_contradicts_the_registration_is_named() -> None:
    pair = ac.numpy_op(lambda x: (x, x), fake="x")
    with pytest.raises(ac.ConversionError) as e:
        pair(torch.ones(2))
    assert str(e.value) == (
        "test_a_result_count_that_contradicts_the_registration_is_named.<locals>.<lambda>(): "
        "the result must be one tensor, as the op was registered with. Found Tensor, Tensor. "
        "Fix: annotate the function's return, e.g. -> tuple[np.ndarray, np.ndarray], or fix fake=."
    )
    twice = ac.numpy_op(lambda x: x, fake=lambda x: (x, x))
    with torch._subclasses.fake_tensor.FakeTensorMode(), pytest.raises(ac.ConversionError, match="must give 1 result"):
        twice.op(torch.empty(2))


@pytest.mark.parametrize(
    ("signature", "schema"),
    [
        ("(x: np.ndarray, y: npt.NDArray[np.float32]) -> np.ndarray", "(Tensor x, Tensor y) -> Tensor"),
        (
            "(x, sigma=1.0, order=0, mode='reflect', exact=True)",
            '(Tensor x, float sigma=1., int order=0, str mode="reflect", bool exact=True) -> Tensor',
        ),
        (
            "(x: torch.Tensor | None = None, xs: list[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]",
            "(Tensor? x=None, Tensor[]? xs=None) -> (Tensor, Tensor)",
        ),
        (
            "(x, ks: Sequence[int], /, *, weights: Optional[np.ndarray] = None)",
            "(Tensor x, int[] ks, *, Tensor? weights=None) -> Tensor",
        ),
    ],
)
def test_schemas_are_read_from_annotations_and_defaults(signature: str, schema: str) -> None:
    namespace: dict[str, Any] = {}
    exec(
        f"import numpy as np, numpy.typing as npt, torch\nfrom typing import Optional, Sequence\n"
        f"def f{signature}:\n    return x",
        namespace,
    )
    op = ac.numpy_op(namespace["f"], fake=lambda *a, **k: torch.empty(0))
    assert str(op.op._schema).removeprefix(op.op._schema.name) == schema


# NumPy 2.5's npt.NDArray is a ``type`` alias (TypeAliasType); typing_extensions' class is
# typing.TypeAliasType itself from Python 3.12, so these are the same kind of object.
_scalar = TypeVar("_scalar", bound=np.generic)
_ndarray_alias = typing_extensions.TypeAliasType(
    "_ndarray_alias", np.ndarray[Any, np.dtype[_scalar]], type_params=(_scalar,)
)
_bare_alias = typing_extensions.TypeAliasType("_bare_alias", np.ndarray)


def test_type_alias_annotations_are_read_through() -> None:
    """Bare or subscripted, a ``type`` alias of ndarray still means an array: the schema has a
    Tensor where older NumPy's plain alias gave one."""

    def scaled(x: _ndarray_alias[np.float32], y: _bare_alias, k: float = 1.0) -> _ndarray_alias[np.float32]:  # type: ignore[valid-type]
        return x * k

    op = ac.numpy_op(scaled, fake="x")
    assert str(op.op._schema).removeprefix(op.op._schema.name) == "(Tensor x, Tensor y, float k=1.) -> Tensor"
    assert torch.equal(op(torch.ones(2), torch.ones(2), k=2.0), torch.full((2,), 2.0))


def test_ufuncs_take_nin_tensors_and_give_nout() -> None:
    assert str(ac.numpy_op(np.divmod, fake=("x1", "x1")).op._schema).endswith(
        "(Tensor x1, Tensor x2) -> (Tensor, Tensor)"
    )


def test_a_function_wrapping_a_ufunc_has_the_ufunc_s_schema() -> None:
    """SciPy's array API mode makes ``scipy.special.erfcx`` a function wrapping the ufunc, whose
    signature lists the ufunc's keyword options (``dtype=None``): read as keyword-only arrays,
    they refused fake= with a gradient. The ufunc's inputs and results are the op's."""

    @functools.wraps(np.hypot)
    def hypot(*args: Any, **kwargs: Any) -> Any:
        return np.hypot(*args, **kwargs)

    def backward(g: np.ndarray, x1: np.ndarray, x2: np.ndarray, output: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return g * x1 / output, g * x2 / output

    op = ac.numpy_op(hypot, fake="x1", backward=backward)
    assert str(op.op._schema).endswith("(Tensor x1, Tensor x2) -> Tensor")
    x, y = (torch.tensor([3.0, 5.0], dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert torch.autograd.gradcheck(op, (x, y))


@pytest.mark.parametrize("backward", [False, True])
def test_op_names_are_unique_and_the_function_goes_when_collected(backward: bool) -> None:
    """An op made in a loop must not keep its function, or what it captures, alive: torch keeps
    registered kernels forever (its vmap rules and its backward op's too), so it gets
    trampolines that reach the function weakly."""
    import gc
    import weakref

    def made(captured: np.ndarray) -> Any:
        def shifted(x: np.ndarray) -> np.ndarray:
            return x + captured[0]

        def unshifted(g: np.ndarray, x: np.ndarray, output: np.ndarray) -> np.ndarray:
            return g * captured[1]

        return ac.numpy_op(shifted, fake="x", backward=unshifted if backward else None)

    captured = np.ones(4)
    first, second = made(captured), made(captured)
    assert first.op.name() != second.op.name()
    gone = weakref.ref(captured)
    op = first.op
    assert torch.equal(op(torch.zeros(2)), torch.ones(2))
    del first, second, captured
    gc.collect()
    assert gone() is None  # the function and its defaults were collected
    with pytest.raises(RuntimeError) as info:
        op(torch.zeros(2))
    assert str(info.value).endswith(
        "the numpy_op that registered this op was garbage-collected, and its kernels went with it; "
        "keep the decorated function alive for as long as you use its .op"
    )


def test_calling_the_op_of_a_collected_numpy_op_never_crashes_the_process() -> None:
    """The sweep's segfault, in a process of its own: ``.op`` kept, the function collected."""
    code = textwrap.dedent(
        """
        import gc, numpy as np, torch, autoconvert as ac
        def neg(a: np.ndarray) -> np.ndarray:
            return -a
        op = ac.numpy_op(neg, fake="a").op
        gc.collect()
        try:
            op(torch.ones(2))
        except RuntimeError as e:
            print("raised:", e)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("raised: autoconvert::neg_")


def test_registered_module_level_ops_pickle_by_reference() -> None:
    assert pickle.loads(pickle.dumps(sqrtm_op)) is sqrtm_op


def test_callables_without_a_signature() -> None:
    """A C builtin has no signature: no schema for fake=, and keyword tensors stay keywords."""
    with pytest.raises(TypeError, match=r"on hypot\(\): the signature cannot be read, so no torch op"):
        ac.numpy_op(math.hypot, fake="x")
    with pytest.raises(TypeError, match=r"on hypot\(\): the signature cannot be read, so no torch op"):
        ac.numpy_op(functools.partial(math.hypot, 3.0), fake="x")
    hypot = ac.numpy_op(math.hypot, backward=lambda g, x, y, output: (g * x / output, g * y / output))
    x, y = torch.tensor(3.0, requires_grad=True), torch.tensor(4.0, requires_grad=True)
    with pytest.raises(ac.GradientError, match="argument y requires grad"):
        hypot(x, y=y)


def test_an_op_of_a_partial_calls_it_with_its_bound_arguments() -> None:
    """A ``functools.partial`` is an op as it is a decorated function: its bound arguments
    given at each call, to the forward and to the backward, with or without a backward."""
    scaled = functools.partial(lambda a, k: a * k, k=3.0)
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    with_backward = ac.numpy_op(scaled, backward=lambda g, a, k, output: g * k)
    with_backward(x).sum().backward()
    assert torch.equal(x.grad, torch.full((2,), 3.0, dtype=torch.float64))
    assert torch.equal(ac.numpy_op(scaled)(x.detach()), torch.full((2,), 3.0, dtype=torch.float64))


def _scale_by(x, k):  # type: ignore[no-untyped-def]  # unannotated, as NumPy code often is
    return x * k


def _scale_first(k, x):  # type: ignore[no-untyped-def]
    return x * k


@pytest.mark.parametrize("bound", ["by keyword", "by position"])
def test_a_number_a_partial_binds_types_its_parameter_in_the_schema(bound: str) -> None:
    """The value a partial binds types an unannotated parameter as a default does: the torch op
    takes a float, under torch.compile's fullgraph as eagerly, and so does the op remade from
    its pickle. Its type was a Tensor, and dynamo raised its own error."""
    made = functools.partial(_scale_by, k=2.0) if bound == "by keyword" else functools.partial(_scale_first, 2.0)
    op = ac.numpy_op(made, fake="x")
    assert "float k" in str(op.func.op._schema)
    x = torch.tensor([1.0, 3.0])
    for each in (op, pickle.loads(pickle.dumps(op))):
        torch._dynamo.reset()
        assert torch.equal(torch.compile(lambda t, op=each: op(t), fullgraph=True, backend="aot_eager")(x), 2 * x)
    torch._dynamo.reset()


def test_a_number_for_a_tensor_parameter_takes_one_graph_break_under_compile() -> None:
    """A number given at the call to a parameter the schema holds a Tensor is taken eagerly and
    refused by the registered op: under torch.compile the call runs eagerly after one graph
    break, and fullgraph refuses it naming the parameter and the fix."""
    op = ac.numpy_op(_scale_by, fake="x")
    x = torch.tensor([1.0, 3.0])
    torch._dynamo.reset()
    assert torch.equal(torch.compile(lambda t: op(t, 3.0) + 1, backend="aot_eager")(x), 3 * x + 1)
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported) as refused:
        torch.compile(lambda t: op(t, k=3.0), fullgraph=True, backend="aot_eager")(x)
    if "msg" in inspect.signature(torch._dynamo.graph_break).parameters:
        assert "autoconvert: _scale_by(): argument k is given another kind of value than the op's schema" in str(
            refused.value
        )
        assert "(k: np.ndarray, float, int, bool or str)" in str(refused.value)
    torch._dynamo.reset()
    assert torch.equal(torch.compile(lambda t: op(t, torch.tensor(3.0)), fullgraph=True, backend="aot_eager")(x), 3 * x)
    torch._dynamo.reset()
    bound = ac.numpy_op(functools.partial(_scale_by, k=2.0), fake="x")  # k a float: a tensor given takes the escape
    assert torch.equal(torch.compile(lambda t: bound(t, k=torch.tensor(3.0)), backend="aot_eager")(x), 3 * x)
    torch._dynamo.reset()


@pytest.mark.skipif(not hasattr(torch.library, "register_vmap"), reason="torch 2.4's torch.library has no vmap rules")
@pytest.mark.parametrize("mode", ["vectorized", "sequential"])
def test_vmap_in_a_compiled_function_runs_the_op_as_vmap_says(mode: str, capfd: pytest.CaptureFixture[str]) -> None:
    """Under torch.compile the registered op has a vmap rule: the NumPy forward (and backward)
    runs once for the batch with vmap="vectorized", once per sample otherwise, as eagerly, and
    torch has no fallback to warn about on stderr."""
    shapes: list[Any] = []

    def mul(x, w):  # type: ignore[no-untyped-def]
        shapes.append(x.shape)
        return x * w

    def mul_backward(g, x, w, output):  # type: ignore[no-untyped-def]
        shapes.append(("backward", x.shape))
        return g * w, g * x

    op = ac.numpy_op(mul, backward=mul_backward, vmap=mode, fake="x")
    w, xs = torch.tensor([2.0, 3.0], dtype=torch.float64), torch.rand(4, 2, dtype=torch.float64, requires_grad=True)
    torch._dynamo.reset()
    mapped = torch.compile(lambda b: torch.vmap(op, in_dims=(0, None))(b, w), fullgraph=True, backend="aot_eager")(xs)
    mapped.sum().backward()
    calls = 1 if mode == "vectorized" else 4
    sample = (4, 2) if mode == "vectorized" else (2,)
    assert shapes[-2 * calls :] == [sample] * calls + [("backward", sample)] * calls
    assert torch.equal(mapped, xs * w) and torch.equal(xs.grad, w.expand(4, 2))
    assert "batching rule" not in capfd.readouterr().err
    torch._dynamo.reset()


def _product(x: np.ndarray, w: np.ndarray, scale: float = 1.0) -> np.ndarray:
    return x * w * scale


def _product_backward(
    g: np.ndarray, x: np.ndarray, w: np.ndarray, scale: float = 1.0, *, output: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    return g * w * scale, g * x * scale


def _product_jvp(
    tangents: tuple[Any, Any], x: np.ndarray, w: np.ndarray, scale: float = 1.0, *, output: np.ndarray
) -> np.ndarray:
    dx, dw = tangents
    return ((0 if dx is None else dx * w) + (0 if dw is None else x * dw)) * scale


class _Named(functools.partial):  # type: ignore[type-arg]
    """A partial subclass that carries a name of its own."""


@pytest.mark.parametrize("kind", [functools.partial, _Named])
@pytest.mark.parametrize("bound", ["a keyword", "a tensor and a keyword", "every argument"])
def test_an_op_of_a_partial_hands_its_rules_the_bound_arguments(kind: type, bound: str) -> None:
    """The backward and the jvp get what the partial binds as arguments of the call: gradients
    check against finite differences, a bound tensor requiring grad gets its gradient, and a
    partial subclass stays one, its attributes kept."""
    x = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    made, given = {
        "a keyword": (kind(_product, scale=3.0), (x, w)),
        "a tensor and a keyword": (kind(_product, x, scale=3.0), (w,)),
        "every argument": (kind(_product, x, w, 3.0), ()),
    }[bound]
    made.label = "scaled product"
    op = ac.numpy_op(made, backward=_product_backward, jvp=_product_jvp)
    assert type(op) is kind and op.label == "scaled product"
    op(*given).sum().backward()
    assert torch.equal(x.grad, 3 * w.detach()) and torch.equal(w.grad, 3 * x.detach())
    if given:
        assert torch.autograd.gradcheck(op, given)
        tangents = tuple(torch.ones_like(t) for t in given)
        _, tangent = torch.func.jvp(op, tuple(t.detach() for t in given), tangents)
        expected = 3 * (w + x) if bound == "a keyword" else 3 * x  # the tangents of those given, all ones
        assert torch.allclose(tangent, expected.detach())


@pytest.mark.parametrize(
    ("gradient", "problem"),
    [
        (
            np.ones(3),
            "must have the tensor's shape (2,), or one that sums to it. Found numpy.ndarray(shape=(3,), dtype=float64). Fix: return one value per element of the tensor.",
        ),
        (
            1.0,
            "must have the tensor's shape (2,), or one that sums to it. Found numpy.ndarray(shape=(), dtype=float64). Fix: return one value per element of the tensor.",
        ),
        (
            np.ones(2, dtype=complex),
            "is complex for a real tensor. Found numpy.ndarray(shape=(2,), dtype=complex128). Fix: return its real part (np.real(...)).",
        ),
        (
            "abc",
            "must be an array of numbers. Found numpy.ndarray(shape=(), dtype=<U3). Fix: return a float array (or None where no gradient flows).",
        ),
    ],
)
def test_a_gradient_autograd_cannot_take_is_refused_naming_the_op(gradient: Any, problem: str) -> None:
    """Where torch would raise its own error (or one naming to_tensor()), the op and its
    backward are named; a gradient that sums to the input's shape still does."""
    op = ac.numpy_op(np.sin, backward=lambda g, x, output: gradient)
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(ac.ConversionError) as info:
        op(x).sum().backward()
    assert str(info.value) == f"sin(): the backward's gradient for tensor argument 0 {problem}"
    summed = ac.numpy_op(np.sin, backward=lambda g, x, output: np.ones((4, 2)))
    summed(x).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [4.0, 4.0]


class _Scaled:
    """A layer whose NumPy forward is a method: the op binds as the function would."""

    def __init__(self, k: float) -> None:
        self.k = k

    @ac.numpy_op(backward=lambda g, self, x, output: g * self.k)
    def scale(self, x: np.ndarray) -> np.ndarray:
        return x * self.k

    held_sin = sin  # an op of a ufunc, held by the class: it does not bind, as the ufunc does not


def test_an_op_on_a_method_binds_its_instance_as_the_function_does() -> None:
    """Read from an instance, the op's first argument is the instance (its backward's too),
    eagerly and under torch.func; read from the class it takes it explicitly. Bound, the
    instance was dropped and the call was one argument short."""
    layer, x = _Scaled(3.0), torch.randn(3, dtype=torch.float64, requires_grad=True)
    layer.scale(x).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 3.0, dtype=torch.float64))
    assert torch.equal(torch.func.grad(lambda v: _Scaled.scale(layer, v).sum())(x.detach()), x.grad)
    assert torch.equal(torch.func.vmap(layer.scale)(x.detach().expand(2, 3)), 3 * x.detach().expand(2, 3))
    assert torch.equal(layer.held_sin(x.detach()), torch.from_numpy(np.sin(x.detach().numpy())))  # NumPy's own values
    assert pickle.loads(pickle.dumps(layer.scale)).__self__.k == 3.0


# What a backward is handed is read-only: the caller's tensors, the result, the gradient.


def _refusal(role: str, where: str, copied: str, given: str = "gradient", op: str = "_times()") -> str:
    return (
        f"{op}: the {role}'s argument {where} was written into; a numpy_op's {role} is handed read-only "
        f"views of the call's tensors, its result, its residuals and the incoming {given}, so that it never "
        "changes the caller's tensors, the result the caller holds or what torch hands other parts of the graph. "
        "Found ValueError('assignment destination is read-only'). Fix: write into a copy made in the "
        f"{role} ({copied}), or pass copy=True to autoconvert.numpy_op to hand its NumPy functions private "
        "writable copies."
    )


def _times(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a * b


def _writes(position: str) -> Any:
    """A backward of ``_times`` that writes 99 into what it was handed at ``position``."""

    def backward(g: Any, a: Any, b: Any, output: Any) -> tuple[Any, Any]:
        target = {"g": g, "a": a, "b": b, "output": output}[position]
        target[...] = 99.0
        return g * b, g * a

    return backward


@pytest.mark.parametrize("position", ["a", "b", "output", "g"])
def test_a_backward_that_writes_what_it_was_handed_is_refused_and_changes_nothing(position: str) -> None:
    """The issue's silent class: the backward got writable views of the caller's tensors and
    of the result, so ``a[0] = 99`` in it changed the caller's ``x`` and the result it held."""
    op = ac.numpy_op(_times, backward=_writes(position))
    x, y = torch.ones(3, requires_grad=True), torch.full((3,), 2.0, requires_grad=True)
    result = op(x, y)
    with pytest.raises(ac.ReadOnlyError) as info:
        result.sum().backward()
    assert str(info.value) == _refusal("backward", position, f"{position}.copy()")
    assert x.tolist() == [1.0] * 3 and y.tolist() == [2.0] * 3 and result.tolist() == [2.0] * 3


def test_the_refusal_names_the_backward_s_own_parameter() -> None:
    """The issue's own example: the lambda's parameter ``a`` is named, and its fix."""
    op = ac.numpy_op(lambda a: a * 2, backward=lambda g, a, output: (a.__setitem__(0, 99.0), g * 2)[1])
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(ac.ReadOnlyError) as info:
        op(x).sum().backward()
    assert str(info.value) == _refusal(
        "backward",
        "a",
        "a.copy()",
        op=f"{test_the_refusal_names_the_backward_s_own_parameter.__qualname__}.<locals>.<lambda>()",
    )
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_copy_true_hands_the_backward_private_writable_copies() -> None:
    """``copy=True``: every NumPy function of the op gets copies of its own, which it may write."""
    op = ac.numpy_op(_times, backward=_writes("a"), copy=True)
    x, y = torch.ones(3, requires_grad=True), torch.full((3,), 2.0, requires_grad=True)
    result = op(x, y)
    result.sum().backward()
    assert x.tolist() == [1.0] * 3 and result.tolist() == [2.0] * 3
    assert y.grad is not None and y.grad.tolist() == [99.0] * 3  # the backward read its own copy


def test_a_backward_writing_its_own_arrays_keeps_working() -> None:
    """Writes into arrays the backward made (``g * 2``, ``np.empty``) are its own: no refusal."""

    def backward(g: np.ndarray, a: np.ndarray, output: np.ndarray) -> np.ndarray:
        out = g * 2
        out[0] = 5.0
        return out

    op = ac.numpy_op(lambda a: a * 2, backward=backward)
    x = torch.ones(3, requires_grad=True)
    op(x).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [5.0, 2.0, 2.0]


def test_a_numba_kernel_writing_its_saved_matrix_is_refused() -> None:
    """soft-DTW's backward kernel writes -inf into the matrix it is handed: numba refuses the
    read-only array at compile time, in its own words, which become the ReadOnlyError."""
    numba = pytest.importorskip("numba")

    @numba.njit(cache=False)
    def fill(r: np.ndarray) -> None:
        r[0] = -np.inf

    op = ac.numpy_op(_times, backward=lambda g, a, b, output: (fill(output), g * b, g * a)[1:])
    x = torch.ones(3, requires_grad=True)
    result = op(x, 2.0 * x)
    with pytest.raises(ac.ReadOnlyError) as info:
        result.sum().backward()
    # numba does not say which array it refused: every one handed is named
    assert str(info.value).startswith("_times(): the backward's argument g or a or b or output was written into;")
    assert "Found numba.core.errors.TypingError(" in str(info.value)
    assert result.tolist() == [2.0] * 3


@pytest.mark.filterwarnings(DYNAMO_NON_LEAF_GRAD)
@pytest.mark.parametrize("position", ["a", "output", "g"])
def test_a_registered_op_s_backward_is_handed_read_only_arrays_compiled(position: str) -> None:
    """The registered op's backward, under torch.compile too, gets the same read-only arrays."""
    op = ac.numpy_op(_times, backward=_writes(position), fake="a")
    x, y = torch.ones(3, requires_grad=True), torch.full((3,), 2.0, requires_grad=True)
    compiled = torch.compile(lambda u, v: op(u, v).sum(), fullgraph=True, backend="aot_eager")
    with pytest.raises(ac.ReadOnlyError) as info:
        compiled(x, y).backward()
    # torch 2.4's AOT autograd adds the graph node it ran ("\n\nWhile executing %..."): not ours.
    assert str(info.value).partition("\n\nWhile executing")[0] == _refusal("backward", position, f"{position}.copy()")
    assert x.tolist() == [1.0] * 3 and y.tolist() == [2.0] * 3
    result = op(x, y)
    with pytest.raises(ac.ReadOnlyError):
        result.sum().backward()
    assert result.tolist() == [2.0] * 3


_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64]


@settings(max_examples=40, deadline=None)
@given(
    arity=st.integers(1, 3),
    data=st.data(),
    dtype=st.sampled_from(_DTYPES),
    registered=st.booleans(),
    strided=st.booleans(),
)
def test_property_no_write_by_a_backward_reaches_a_tensor(
    arity: int, data: st.DataObject, dtype: torch.dtype, registered: bool, strided: bool
) -> None:
    """Over the number of tensor arguments, the position written (each argument, the result,
    the gradient), dtypes (those that cross as a copy too) and layouts: a write is refused,
    and no tensor, the result included, changes."""
    position = data.draw(st.sampled_from([*range(arity), "output", "grad"]))

    def forward(*arrays: np.ndarray) -> np.ndarray:
        return sum(arrays[1:], arrays[0] * 2)

    def backward(g: Any, *rest: Any, output: Any) -> Any:
        handed = {"grad": g, "output": output, **dict(enumerate(rest))}
        handed[position][...] = 7
        return tuple(g for _ in rest) if arity > 1 else g

    names = ", ".join(f"a{i}" for i in range(arity))
    source = f"def fn({names}): return forward({names})"
    namespace: dict[str, Any] = {"forward": forward}
    exec(source, namespace)  # a signature of ``arity`` named parameters, for fake=
    op = ac.numpy_op(namespace["fn"], backward=backward, **({"fake": "a0"} if registered else {}))
    base = [torch.arange(1.0, 7.0).reshape(2, 3).to(dtype) + i for i in range(arity)]
    inputs = [(b.T if strided else b).requires_grad_() for b in base]
    before = [t.detach().clone() for t in inputs]
    result = op(*inputs)
    held = result.detach().clone()
    with pytest.raises(ac.ReadOnlyError):
        result.abs().sum().backward() if dtype.is_complex else result.sum().backward()
    assert all(torch.equal(t, b) for t, b in zip(inputs, before, strict=True))
    assert torch.equal(result, held)


# residuals=: what the forward saves for its backward, as JAX's custom_vjp forward does.


def _lse_backward(g: np.ndarray, x: np.ndarray, output: np.ndarray, softmax: np.ndarray) -> np.ndarray:
    return g[..., None] * softmax


def _lse_fake(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(x.shape[:-1]), torch.empty_like(x)


def _logsumexp(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """logsumexp over the last axis, and the softmax its gradient is: the residual."""
    m = x.max(-1, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(-1, keepdims=True)
    return (m + np.log(s))[..., 0], e / s


logsumexp = ac.numpy_op(_logsumexp, backward=_lse_backward, residuals="softmax")
compiled_logsumexp = ac.numpy_op(_logsumexp, backward=_lse_backward, residuals="softmax", fake=_lse_fake)


@pytest.mark.parametrize("op", [logsumexp, compiled_logsumexp], ids=["eager", "fake"])
def test_residuals_reach_the_backward_and_never_the_caller(op: Any) -> None:
    """The caller gets the result alone, with or without a graph; the backward reads the saved
    softmax instead of recomputing it, and the gradient is torch's."""
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    result = op(x)
    assert isinstance(result, torch.Tensor) and torch.allclose(result, torch.logsumexp(x, -1))
    with torch.no_grad():
        assert torch.allclose(op(x), result)
    assert torch.allclose(op(x.detach()), result)
    result.sum().backward()
    assert x.grad is not None and torch.allclose(x.grad, torch.softmax(x.detach(), -1))
    assert torch.autograd.gradcheck(op, (x,))


@pytest.mark.filterwarnings(DYNAMO_NON_LEAF_GRAD)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_residuals_are_saved_by_a_compiled_graph(backend: str) -> None:
    """Under torch.compile the registered op returns the residuals to the graph, which saves
    them for the backward op; the op passes torch.library's checks."""
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    loss = torch.compile(lambda v: compiled_logsumexp(v).sum(), fullgraph=True, backend=backend)
    loss(x).backward()
    assert x.grad is not None and torch.allclose(x.grad, torch.softmax(x.detach(), -1))
    assert set(torch.library.opcheck(compiled_logsumexp.op, (x,)).values()) == {"SUCCESS"}


def test_several_results_and_residuals_with_arguments_and_keywords() -> None:
    """Two results and two residuals: the caller gets the pair, the backward each residual by
    its name beside the keyword arguments, and ``output`` as the pair."""

    def backward(g: Any, x: Any, scale: float, *, output: Any, doubled: Any, cubed: Any, shift: float) -> Any:
        assert isinstance(output, tuple) and len(output) == 2
        assert not doubled.flags.writeable and not cubed.flags.writeable
        return g[0] * doubled / x * scale + g[1] * 3 * cubed / x

    @ac.numpy_op(backward=backward, residuals=("doubled", "cubed"))
    def two(x: np.ndarray, scale: float, *, shift: float = 0.0) -> tuple[np.ndarray, ...]:
        return x * 2 * scale + shift, x**3, x * 2, x**3

    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    scaled, cubed = two(x, 3.0, shift=1.0)
    assert scaled.tolist() == [7.0, 13.0] and cubed.tolist() == [1.0, 8.0]
    (scaled.sum() + cubed.sum()).backward()
    assert x.grad is not None and x.grad.tolist() == [6.0 + 3.0, 6.0 + 12.0]


def test_a_backward_writing_a_residual_is_refused() -> None:
    """Residuals are read-only in the backward like the rest; copy=True makes them private."""

    def backward(g: np.ndarray, x: np.ndarray, output: np.ndarray, softmax: np.ndarray) -> np.ndarray:
        softmax[..., 0] -= 1.0  # soft-DTW's kernels write into their saved matrix so
        return g[..., None] * (softmax + np.eye(1, softmax.shape[-1]))

    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.numpy_op(_logsumexp, backward=backward, residuals="softmax")(x).sum().backward()
    assert str(info.value) == (
        "_logsumexp(): the backward's argument softmax was written into; a numpy_op's backward is handed "
        "read-only views of the call's tensors, its result, its residuals and the incoming gradient, so that it "
        "never changes the caller's tensors, the result the caller holds or what torch hands other parts of the "
        "graph. Found ValueError('output array is read-only'). Fix: write into a copy made in the backward "
        "(softmax.copy()), or pass copy=True to autoconvert.numpy_op to hand its NumPy functions private "
        "writable copies."
    )
    ac.numpy_op(_logsumexp, backward=backward, residuals="softmax", copy=True)(x).sum().backward()
    assert x.grad is not None and torch.allclose(x.grad, torch.softmax(x.detach(), -1))


def test_residuals_are_refused_where_they_cannot_work() -> None:
    """At decoration: without a rule to read them, or named as a parameter or ``output``; at the
    call: a forward that does not return them."""
    with pytest.raises(TypeError) as info:
        ac.numpy_op(_logsumexp, residuals="softmax")
    assert str(info.value) == (
        "autoconvert.numpy_op() on _logsumexp(): residuals= saves arrays for the backward and jvp, and the op has "
        "neither. Found ('softmax',). Fix: pass backward= (or jvp=) that takes them by name, or drop residuals=."
    )
    for name in ("x", "output"):
        with pytest.raises(TypeError) as info:
            ac.numpy_op(_logsumexp, backward=_lse_backward, residuals=name)
        assert str(info.value) == (
            f"autoconvert.numpy_op() on _logsumexp(): residual {name!r} is a name the rules already get (output=, "
            f"or the function's own parameter). Found ({name!r},). Fix: name the residual something else."
        )
    with pytest.raises(TypeError, match=r"residuals= takes a name, or a tuple of names"):
        ac.numpy_op(_logsumexp, backward=_lse_backward, residuals=["softmax"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"residuals= takes distinct names, got \('a', 'a'\)"):
        ac.numpy_op(_logsumexp, backward=_lse_backward, residuals=("a", "a"))
    alone = ac.numpy_op(np.exp, backward=lambda g, x, output, saved: g * output, residuals="saved")
    with pytest.raises(ac.ConversionError) as info:
        alone(torch.ones(2))
    assert str(info.value) == (
        "exp(): the result must be a tuple of the results and then 1 residual(s) (saved), as residuals= says. "
        "Found Tensor of 1. Fix: return the results, then the residuals: return output, saved."
    )
    for residual in ({"cos": np.ones(2)}, [np.ones(2)], 1.5, None):
        in_a_container = ac.numpy_op(
            lambda x, r=residual: (np.sin(x), r), backward=lambda g, x, *, output, kept: g, residuals="kept"
        )
        with pytest.raises(ac.ConversionError) as info:
            in_a_container(torch.ones(2, requires_grad=True))
        assert str(info.value).endswith(
            f"<lambda>(): residual kept must be one array, which the op saves for its rules. Found "
            f"{type(residual).__name__}. Fix: return one array per name of residuals=, e.g. residuals=('cos', 'sin') "
            "and return output, cos, sin."
        )


def test_explain_names_the_residuals() -> None:
    assert str(ac.explain(logsumexp)).splitlines()[1] == (
        "numpy_op(): a torch op; backward=given, fake=None, vmap='sequential', jvp=none, residuals=('softmax',) "
        "(returned after the results, kept for the rules)."
    )


def test_fake_on_a_method_is_refused_as_its_class_is_made() -> None:
    """A method's op binds its instance as the first argument, which no torch.library schema
    holds: before, ``self`` was read as a Tensor and torch.compile failed inside dynamo. A
    static method's op, a held ufunc's and a method's op without fake= are fine."""
    with pytest.raises((TypeError, RuntimeError)) as info:

        class Layer:
            @ac.numpy_op(backward=lambda g, self, x, output: g * self.k, fake="x")
            def scale(self, x: np.ndarray) -> np.ndarray:
                return x * 2

    # Python 3.11 wraps an error of __set_name__ in a RuntimeError; 3.12 on raise it as it is
    error = info.value.__cause__ if isinstance(info.value, RuntimeError) else info.value
    assert isinstance(error, TypeError)
    name = f"{test_fake_on_a_method_is_refused_as_its_class_is_made.__qualname__}.<locals>.Layer"
    assert str(error) == (
        f"autoconvert.numpy_op() on {name}.scale(): fake= registers a torch op, whose arguments are tensors and "
        "numbers; read from an instance, a method's op takes the instance as its first argument, which "
        f"torch.compile cannot pass to it. Found the method {name}.scale. Fix: "
        "decorate a module-level function that takes the arrays and the numbers the method reads of self "
        "(def scale(x: np.ndarray, k: float)) and call it from the method (return scale(x, self.k)); or drop "
        "fake= (the method's op then works eagerly and under torch.func, and torch.compile breaks the graph at "
        "its call)."
    )

    class Fine:
        @staticmethod
        @ac.numpy_op(backward=lambda g, x, output: 2 * g, fake="x")
        def doubled(x: np.ndarray) -> np.ndarray:
            return x * 2

        held = ac.numpy_op(np.sin, fake="x")

    x, fine = torch.ones(2, requires_grad=True), Fine()
    try:
        torch.compile(lambda v: fine.doubled(v).sum() + fine.held(v).sum(), fullgraph=True, backend="eager")(
            x
        ).backward()
    except torch._dynamo.exc.InternalTorchDynamoError as e:  # torch 2.4: an op read off an instance
        if "unsupported builtin" not in str(e):
            raise
        pytest.skip("this torch's dynamo takes an op read off an instance for an unsupported builtin")
    assert x.grad is not None and x.grad.tolist() == [2.0, 2.0]  # the held op has no backward


_UNTAKEN = (
    "jv(): argument v requires grad, and the catalogue's rule for scipy.special.jv gives no gradient in v: none "
    "flows into it. Found gradients in z alone. Fix: pass v without requires_grad (.detach()), or give numpy_op "
    "a backward= of your own; grad='detach' silences this."
)


@pytest.mark.parametrize("made", ["torchify", "numpy_op"])
@pytest.mark.parametrize("where", ["option", "config"])
@pytest.mark.parametrize("order_shape", [(), (2, 1)], ids=["0-d", "broadcast"])
def test_grad_error_refuses_an_argument_a_catalogue_rule_takes_no_gradient_in(
    made: str, where: str, order_shape: tuple[int, ...]
) -> None:
    """``grad="error"``, given to ``torchify`` or ``numpy_op`` or set by a ``config`` block, makes
    ``jv``'s order that requires grad (the catalogue's rule gives it none) a GradientError on
    every call, as for any dropped gradient; an explicit ``grad=`` wins over the block's."""
    import scipy.special

    def make(**options: Any) -> Any:
        if made == "torchify":
            return ac.torchify(scipy.special, **options).jv
        return ac.numpy_op(scipy.special.jv, **options)

    order = torch.full(order_shape, 1.5, dtype=torch.float64, requires_grad=True)
    z = torch.tensor([0.7, 1.1], dtype=torch.float64, requires_grad=True)

    def call() -> Any:
        if where == "option":
            return make(grad="error")(order, z)
        with ac.config(grad="error"):
            return make()(order, z)

    for _ in range(2):  # refused every call, not once
        with pytest.raises(ac.GradientError) as info:
            call()
        assert str(info.value) == _UNTAKEN
    with ac.config(grad="error"), warnings.catch_warnings():
        warnings.simplefilter("error")
        make(grad="detach")(order, z).sum().backward()  # the explicit option wins
    assert order.grad is None and z.grad is not None


class _HeldTuple(typing.NamedTuple):
    w: Any


@dataclasses.dataclass
class _HeldData:
    w: Any


#: The containers a tensor reaches a numpy_op in: how one holds ``w``, and the path below it.
_HOLDERS: dict[str, tuple[Any, str]] = {
    "tuple": (lambda w: (w,), "[0]"),
    "list": (lambda w: [w], "[0]"),
    "dict": (lambda w: {"w": w}, "['w']"),
    "namedtuple": (_HeldTuple, ".w"),
    "dataclass": (_HeldData, ".w"),
    "bare": (lambda w: w, ""),  # a keyword-only tensor of its own
}
#: How the holder is passed: the call, and the argument's path.
_PASSED: dict[str, tuple[Any, str]] = {
    "positional": (lambda op, c, y: op(c, y), "args[0]"),
    "keyword": (lambda op, c, y: op(held=c, y=y), "held"),
    "keyword-only": (lambda op, c, y: op(None, y, opt=c), "opt"),
    "**kwargs": (lambda op, c, y: op(None, y, extra=c), "extra"),
}


def _unheld(held: Any, opt: Any, extra: dict[str, Any]) -> Any:
    c = held if held is not None else opt if opt is not None else extra["extra"]
    return c if isinstance(c, np.ndarray) else c["w"] if isinstance(c, dict) else c.w if hasattr(c, "w") else c[0]


def _weighted(held: Any, y: np.ndarray, *, opt: Any = None, **extra: Any) -> np.ndarray:
    return _unheld(held, opt, extra) * y


def _weighted_op(rules: bool, **options: Any) -> Any:
    if not rules:
        return ac.numpy_op(_weighted, **options)
    return ac.numpy_op(
        _weighted,
        backward=lambda g, held, y, output, opt=None, **extra: g * _unheld(held, opt, extra),
        jvp=lambda t, held, y, output, opt=None, **extra: t * _unheld(held, opt, extra),
        **options,
    )


def _derivative_cases() -> list[Any]:
    """Container kinds x how they are passed x modes x grad=: a diagonal slice runs by default."""
    modes = ["reverse", "dual", "jvp", "jacfwd", "grad", "jvp without rules", "grad without rules"]
    cases = []
    for k, held in enumerate(_HOLDERS):
        for a, passed in enumerate(_PASSED):
            if held == "bare" and passed in ("positional", "keyword"):
                continue  # a positional tensor argument: its derivative flows
            for m, mode in enumerate(modes):
                for g, grad in enumerate(["warn", "error"]):
                    marks = () if (k + a + m + g) % 5 == 0 else (pytest.mark.slow,)
                    cases.append(pytest.param(held, passed, mode, grad, marks=marks))
    return cases


@pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated"
)  # make_dual's first use (see test_forward_tangents)
@pytest.mark.parametrize(("held", "passed", "mode", "grad"), _derivative_cases())
def test_a_tensor_carrying_a_derivative_in_a_container_or_keyword_is_said_never_dropped(
    held: str, passed: str, mode: str, grad: str
) -> None:
    """Gradients and tangents go to positional tensor arguments: one that carries a derivative
    inside a container of any kind the library walks (namedtuple and dataclass too), or given
    to a keyword-only or **kwargs parameter, is said by grad= in every mode (eager reverse,
    forward-mode duals, torch.func), also for an op without rules; never a silent zero. The
    positional tensor's derivative is the op's, as with no container."""
    make, below = _HOLDERS[held]
    call, root = _PASSED[passed]
    op = _weighted_op(not mode.endswith("without rules"), grad=grad)
    w, y = torch.tensor([2.0, 3.0], dtype=torch.float64), torch.tensor([5.0, 7.0], dtype=torch.float64)
    ones = torch.ones(2, dtype=torch.float64)
    forward = mode in ("dual", "jacfwd") or mode.startswith("jvp")
    what = "carries a forward-mode tangent" if forward else "requires grad"
    path = root + below
    if held == "bare":  # a keyword-only tensor: refused whatever grad= says
        derivatives = "tangents" if forward else "gradients"
        text = (
            f"_weighted(): argument {path} {what}, but {derivatives} flow to positional tensor arguments only. "
            f"Found a keyword-only tensor that {what}. Fix: make {path} a positional parameter, or pass {path}.detach()."
        )
    else:
        derivatives, way = ("tangents", "out of") if forward else ("gradients", "into")
        kind = {"namedtuple": "_HeldTuple", "dataclass": "_HeldData"}.get(held, held)
        text = (
            f"_weighted(): argument {path} {what} inside a container, and a numpy_op gives {derivatives} to its "
            f"tensor arguments alone: none flows {way} it. Found a tensor that {what} in a {kind}. Fix: pass it as "
            "an argument of its own, or .detach() it; grad='detach' silences this."
        )

    def run() -> tuple[Any, Any]:
        """(w's derivative, y's) as the mode computes them."""
        if mode == "reverse":
            wg, yg = w.clone().requires_grad_(), y.clone().requires_grad_()
            call(op, make(wg), yg).sum().backward()
            return wg.grad, yg.grad
        if mode == "dual":
            with forward_ad.dual_level():
                wd, yd = forward_ad.make_dual(w, ones), forward_ad.make_dual(y, 0 * ones)
                return None, forward_ad.unpack_dual(call(op, make(wd), yd)).tangent
        f = lambda w_, y_: call(op, make(w_), y_)  # noqa: E731
        if mode.startswith("jvp"):
            return None, torch.func.jvp(f, (w, y), (ones, 0 * ones))[1]
        if mode == "jacfwd":
            return torch.func.jacfwd(f, argnums=(0, 1))(w, y)
        return torch.func.grad(lambda w_, y_: f(w_, y_).sum(), argnums=(0, 1))(w, y)

    if grad == "warn" and held != "bare" and mode.endswith("without rules"):
        # Said, then refused as for any op without rules: y's derivative was asked for.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ac.GradientError):
                run()
        assert _said(caught) == [text]
        return
    if grad == "error" or held == "bare":
        with pytest.raises(ac.GradientError) as info:
            run()
        assert str(info.value) == text
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found_w, found_y = run()
    assert _said(caught) == [text]
    if mode == "jacfwd":
        assert torch.equal(found_w, torch.zeros(2, 2, dtype=torch.float64))
        assert torch.equal(found_y, torch.diag(w))
    elif mode in ("reverse", "grad"):
        assert found_w is None or torch.equal(found_w, torch.zeros(2, dtype=torch.float64))
        assert torch.equal(found_y, w)
    else:  # the tangent: w's dropped (said), y's zero
        assert found_y is None or torch.equal(found_y, torch.zeros(2, dtype=torch.float64))
    if mode == "reverse":
        assert all(c.filename == __file__ for c in caught if c.category is ac.GradientWarning)  # the caller's line


def _said(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(c.message) for c in caught if issubclass(c.category, ac.GradientWarning)]


@pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated"
)  # make_dual's first use (see test_forward_tangents)
@pytest.mark.parametrize("held", [h for h in _HOLDERS if h != "bare"])
@pytest.mark.parametrize("passed", list(_PASSED))
def test_a_positional_tensor_beside_a_container_has_the_derivative_it_has_alone(held: str, passed: str) -> None:
    """Float64 gradcheck (reverse and forward mode) of the positional tensor with a tensor that
    carries no derivative in a container: the op's derivative, the same as with it top-level."""
    make, _ = _HOLDERS[held]
    call, _ = _PASSED[passed]
    op = _weighted_op(True)
    w = torch.tensor([2.0, 3.0], dtype=torch.float64)
    y = torch.tensor([5.0, 7.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda y_: call(op, make(w), y_), (y,), check_forward_ad=True)
    top = ac.numpy_op(lambda w_, y_: w_ * y_, backward=lambda g, w_, y_, output: (g * y_, g * w_))
    assert torch.equal(call(op, make(w), y), top(w, y))
    assert torch.equal(torch.func.jacfwd(lambda y_: call(op, make(w), y_))(y.detach()), torch.diag(w))


@pytest.mark.parametrize("vmap", ["sequential", "vectorized"])
@pytest.mark.parametrize("held", list(_HOLDERS))
@pytest.mark.parametrize("passed", list(_PASSED))
@pytest.mark.parametrize("in_dim", [0, 1])
def test_vmap_batches_a_tensor_in_a_container_or_keyword_as_a_top_level_one(
    vmap: str, held: str, passed: str, in_dim: int
) -> None:
    """torch.vmap batches a tensor inside a container argument (list, tuple, dict, namedtuple)
    and a keyword-only or **kwargs one as it does a positional tensor; a dataclass, which
    torch.vmap does not look into, is refused naming the path."""
    make, _ = _HOLDERS[held]
    call, _ = _PASSED[passed]
    op = _weighted_op(True, vmap=vmap)
    w = torch.arange(6, dtype=torch.float64).reshape(3, 2)
    y = torch.arange(6, 12, dtype=torch.float64).reshape(3, 2)
    batched = torch.func.vmap(lambda w_, y_: call(op, make(w_), y_), in_dims=(in_dim, 0))
    given = w if in_dim == 0 else w.T.contiguous()
    if held == "dataclass":
        with pytest.raises(ac.ConversionError) as info:
            batched(given, y)
        assert "w is being transformed by torch.vmap or torch.func (a functorch-wrapped tensor)" in str(info.value)
        return
    top = ac.numpy_op(lambda w_, y_: w_ * y_, backward=lambda g, w_, y_, output: (g * y_, g * w_), vmap=vmap)
    assert torch.equal(batched(given, y), torch.func.vmap(top, in_dims=(in_dim, 0))(given, y))


@pytest.mark.parametrize("solver", ["solve", "solve_triangular", "lu_solve", "cho_solve"])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_an_argument_scipy_may_overwrite_is_a_private_copy(solver: str, requires_grad: bool) -> None:
    """SciPy's LAPACK wrappers write into a read-only array their overwrite_b=True flag names:
    a numpy_op hands it (the parameter b, which the flag names) a copy, as torchify does, so the
    caller's tensor is never changed."""
    a = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    b = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=requires_grad)
    before = b.detach().clone()
    fn = {
        "solve": lambda b, overwrite_b: scipy.linalg.solve(a.numpy(), b, overwrite_b=overwrite_b),
        "solve_triangular": lambda b, overwrite_b: scipy.linalg.solve_triangular(a.numpy(), b, overwrite_b=overwrite_b),
        "lu_solve": lambda b, overwrite_b: scipy.linalg.lu_solve(
            scipy.linalg.lu_factor(a.numpy()), b, overwrite_b=overwrite_b
        ),
        "cho_solve": lambda b, overwrite_b: scipy.linalg.cho_solve(
            scipy.linalg.cho_factor(a.numpy()), b, overwrite_b=overwrite_b
        ),
    }[solver]
    expected = torch.from_numpy(fn(before.numpy().copy(), False))
    op = ac.numpy_op(fn, backward=lambda g, b, output, overwrite_b: g)
    assert torch.equal(op(b, overwrite_b=True), expected)
    assert torch.equal(b.detach(), before)
    if solver == "solve":  # SciPy's own function, its catalogue rule, both matrices flagged
        a_before = a.clone()
        assert torch.allclose(
            ac.numpy_op(scipy.linalg.solve)(a, b.detach(), overwrite_a=True, overwrite_b=True), expected
        )
        assert torch.equal(a, a_before) and torch.equal(b.detach(), before)
