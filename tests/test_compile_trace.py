"""The trace route: under torch.compile, NumPy-only functions are traced into the graph."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import inspect
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.ndimage
import torch
import torch._dynamo
import torch._dynamo.testing
import torch._functorch.config
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._pytree import tree_flatten

import autoconvert as ac
from autoconvert._interpreter._routes import plan_of

from .compile_catalogue import (
    CATALOGUE,
    MADE_ON_THE_CPU,
    ON_THE_TRACE_ROUTE,
    TRACED,
    Body,
    assert_close_trees,
    decorated,
    inputs,
    rotation_2d,
    skip_where_torch_refuses,
)

pytestmark = ON_THE_TRACE_ROUTE


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_the_catalogue_is_forty_bodies_or_more() -> None:
    assert len(TRACED) >= 40


@pytest.mark.parametrize("body", TRACED, ids=[b.name for b in TRACED])
def test_each_body_compiles_fullgraph_to_the_eager_values_once(body: Body) -> None:
    """fullgraph=True: traced, no graph break; the values eager gives; the caller's tensors
    unchanged; one compilation for calls with other values of the same shapes."""
    skip_where_torch_refuses(body)
    pair = decorated(body)
    assert plan_of(pair).trace.why_not is None
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(pair, backend=counter, fullgraph=True)
    for seed in (0, 1):
        args = inputs(body, seed=seed)
        before = [a.clone() for a in args]
        assert_close_trees(pair(*args, *body.plain), compiled(*args, *body.plain))
        for a, b in zip(args, before, strict=True):
            assert torch.equal(a, b)
    assert counter.frame_count == 1


@pytest.mark.parametrize(
    "body", [b for b in TRACED if b.name in ("mse", "softmax", "pairwise_distances", "layer_norm")]
)
def test_float32_and_bfloat16_inputs_give_eager_dtypes(body: Body) -> None:
    """bfloat16 is widened to float32 for NumPy and the results narrowed back, as eagerly."""
    pair = decorated(body)
    compiled = torch.compile(pair, backend="aot_eager", fullgraph=True)
    for dtype in (torch.float32, torch.bfloat16):
        args = inputs(body, dtype)
        assert_close_trees(pair(*args, *body.plain), compiled(*args, *body.plain), atol=1e-2, rtol=1e-2)


# Each body's gradient against torch autograd on the same expression written in torch.
_TORCH_TWINS = {
    "mse": lambda p, t: torch.mean((p - t) ** 2),
    "log_sum_exp": lambda x: torch.logsumexp(x, dim=-1),
    "pairwise_distances": lambda a, b: torch.sqrt(((a[:, None] - b[None]) ** 2).sum(-1) + 1e-12),
    "cumulative_returns": lambda r: torch.cumsum(r, dim=-1),
    "relu_where": lambda x: torch.where(x > 0, x, 0.01 * x),
    "sorted_rows": lambda x: torch.sort(x, dim=-1).values,
    "squared_distances_einsum": lambda a, b: (a * a).sum(1)[:, None] + (b * b).sum(1)[None] - 2 * a @ b.T,
    "clipped": lambda x: torch.clamp(x, 0.2, 0.8) * 3,
}


@pytest.mark.parametrize("name", sorted(_TORCH_TWINS))
def test_gradients_match_torch_autograd_on_the_same_expression(name: str) -> None:
    body = next(b for b in CATALOGUE if b.name == name)
    compiled = torch.compile(decorated(body), backend="aot_eager", fullgraph=True)
    args = [a.requires_grad_() for a in inputs(body)]
    twins = [a.detach().clone().requires_grad_() for a in args]
    out, expected = compiled(*args), _TORCH_TWINS[name](*twins)
    weights = torch.rand_like(expected)
    (out * weights).sum().backward()
    (expected * weights).sum().backward()
    for a, t in zip(args, twins, strict=True):
        torch.testing.assert_close(a.grad, t.grad)


@pytest.mark.slow
@pytest.mark.parametrize("body", [b for b in TRACED if b.differentiable], ids=lambda b: b.name)
def test_gradcheck_in_float64(body: Body) -> None:
    """torch.autograd.gradcheck of the compiled call: its gradients are the body's own."""
    skip_where_torch_refuses(body)
    compiled = torch.compile(decorated(body), backend="aot_eager", fullgraph=True)
    args = tuple(a.requires_grad_() for a in inputs(body))

    def first_result(*tensors: torch.Tensor) -> Any:
        flat, _ = tree_flatten(compiled(*tensors, *body.plain))
        return tuple(t for t in flat if t.is_floating_point())

    # gradcheck calls backward with retain_graph, which AOTAutograd's donated buffers (a setting
    # of later torch releases) refuse.
    config = torch._functorch.config
    kept = config.patch(donated_buffer=False) if hasattr(config, "donated_buffer") else contextlib.nullcontext()
    with kept:
        assert torch.autograd.gradcheck(first_result, args, eps=1e-6, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(
    "body", [b for b in TRACED if b.name in ("mse", "cumulative_returns", "box_iou")], ids=lambda b: b.name
)
def test_inductor_compiles_the_trace_too(body: Body) -> None:
    pair = decorated(body)
    args = inputs(body)
    assert_close_trees(pair(*args, *body.plain), torch.compile(pair, fullgraph=True)(*args, *body.plain))


def _smooth(a: np.ndarray) -> np.ndarray:
    return scipy.ndimage.gaussian_filter(a, 1.0)


def _by_nditer(a: np.ndarray) -> np.ndarray:
    out = np.empty(a.size)
    for i, v in enumerate(np.nditer(a)):
        out[i] = v * 2
    return out.reshape(a.shape)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            next(b.body for b in CATALOGUE if b.name == "polyval_horner"),
            "its code reads polyval, which torch's NumPy tracing does not trace",
        ),
        (
            next(b.body for b in CATALOGUE if b.name == "interpolate_linear"),
            "its code reads interp, which torch's NumPy tracing does not trace",
        ),
        (_smooth, "its code reads scipy (module scipy), not NumPy"),
        (_by_nditer, "its code reads nditer, which torch's NumPy tracing does not trace"),
    ],
    ids=["polyval", "interp", "scipy", "nditer"],
)
def test_bodies_torch_cannot_trace_take_the_escape(body: Any, why: str) -> None:
    """Judged when decorated: one graph break per call, the body run eagerly, explain says why."""
    pair = ac.returns_tensor(ac.accepts_numpy(body))
    assert ac.explain(pair).compiled == f"each call is one graph break, the body run eagerly: {why}"
    x = torch.rand(6, dtype=torch.float64)
    explanation = torch._dynamo.explain(lambda v: pair(v * 2) + 1)(x)
    assert explanation.graph_break_count == 1
    torch.testing.assert_close(torch.compile(lambda v: pair(v * 2) + 1, backend="aot_eager")(x), pair(x * 2) + 1)


# torch's own, on Python 3.13.0 alone, re-raised by pytest.warns from this module
@pytest.mark.filterwarnings("ignore:Guards may run slower on Python 3.13.0:RuntimeWarning")
def test_a_body_judged_traceable_that_fails_to_trace_falls_back_once_with_a_warning() -> None:
    """rotation_2d builds an array from Python floats, which torch's NumPy tracing refuses."""
    pair = ac.returns_tensor(ac.accepts_numpy(rotation_2d))
    points = torch.rand(6, 2, dtype=torch.float64)
    compiled = torch.compile(lambda p: pair(p, 0.3) + 1, backend="aot_eager")
    with pytest.warns(ac.CompileWarning) as caught:
        out = compiled(points)
    assert [str(w.message) for w in caught if w.category is ac.CompileWarning] == [
        "autoconvert: rotation_2d(): torch.compile could not trace its NumPy code into the graph, so its calls "
        "there take the escape (torch._dynamo.explain shows where the trace stopped). Fix: pass compile='escape' "
        "where it is decorated to skip the attempt, or rewrite the unsupported NumPy call"
    ]
    torch.testing.assert_close(out, pair(points, 0.3) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # torch's own, on Python 3.13.0 alone (as in pyproject's filters)
        warnings.filterwarnings("ignore", "Guards may run slower on Python 3.13.0", RuntimeWarning)
        torch.testing.assert_close(compiled(points + 1), pair(points + 1, 0.3) + 1)  # said once
    assert ac.explain(pair).compiled == (
        "its calls are traced into the graph, its NumPy code as torch operations (a call with an integer or boolean "
        "tensor, or inside a config or stats block, takes the escape), with tensors on the CPU; with "
        "tensors on another device they take the escape: its code makes arrays with array, which torch's NumPy "
        "tracing makes on the CPU whatever the arguments' device; but torch.compile could not trace its NumPy code "
        "into the graph, so its calls there take the escape (torch._dynamo.explain shows where the trace stopped)"
    )


def _smoothed_plus_eye(a: np.ndarray) -> np.ndarray:
    return scipy.ndimage.gaussian_filter(a, 1.0) + np.eye(a.shape[0])


def _as_array(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.array(x) * 2


def _grey(rgb: np.ndarray) -> np.ndarray:
    return rgb @ np.array([0.299, 0.587, 0.114])


def _scaled_by_a_tuple(x: np.ndarray) -> np.ndarray:
    return x * np.asarray((1.0, 2.0, 3.0))


_MEAN = np.array([0.485, 0.456, 0.406])
_SCALES = (0.5, 1.0, 2.0)
_SHAPE = (3, 1)


def _normalised(x: np.ndarray) -> np.ndarray:
    return x - _MEAN


def _scaled_by_a_global_tuple(x: np.ndarray) -> np.ndarray:
    return x * np.asarray(_SHAPE).sum() * _SCALES[0]


def _weighted(x: np.ndarray) -> np.ndarray:
    return np.dot(x, [0.2, 0.3, 0.5])


def _floored(x: np.ndarray) -> np.ndarray:
    return np.maximum(x[:2], (0.25, 0.75))


def _normalised_by_default(x: np.ndarray, mean: np.ndarray = _MEAN) -> np.ndarray:
    return x - mean


def _scaled_by_a_keyword_default(x: np.ndarray, *, scales: tuple[float, ...] = _SCALES) -> np.ndarray:
    return x * np.asarray(scales)


def _weighted_by_a_default_list(x: np.ndarray, weights: list[float] = [0.2, 0.8]) -> np.ndarray:  # noqa: B006
    return np.dot(x[:2], weights)


def _reshaped_with_a_float_beside(x: np.ndarray) -> tuple[np.ndarray, float]:
    return x.reshape(_SHAPE), 0.5


_AS_ARRAYS = (_as_array, _grey, _scaled_by_a_tuple)
#: Bodies making arrays on the CPU from globals and numbers written out, and one that does not
#: (a tuple of ints as a shape, a float beside its result), with what the reading names.
_FROM_VALUES = {
    _normalised: "_MEAN",
    _scaled_by_a_global_tuple: "_SCALES",
    _weighted: "a list of floats written out",
    _floored: "a list of floats written out",
    _normalised_by_default: "mean",
    _scaled_by_a_keyword_default: "scales",
    _weighted_by_a_default_list: "weights",
    _reshaped_with_a_float_beside: None,
}


def test_bodies_making_arrays_on_the_cpu_take_the_escape_with_tensors_on_another_device() -> None:
    """torch's NumPy tracing makes np.eye's, np.linspace's and np.cross's arrays on the CPU
    whatever the arguments' device: with tensors on another device (meta here, standing for a
    GPU) such a call takes the escape, whose eager conversion refuses a meta tensor in the
    library's words; traced, it met dynamo's device mismatch (TorchRuntimeError). On the CPU
    it is traced (see test_each_body_compiles_fullgraph_to_the_eager_values_once)."""
    assert {b.name: plan_of(decorated(b)).trace.cpu_made for b in TRACED} == {
        b.name: MADE_ON_THE_CPU.get(b.name) for b in TRACED
    }
    # compile="trace" traces code judged untraceable too: the names it reads count all the same
    assert plan_of(ac.returns_tensor(ac.accepts_numpy(compile="trace")(_smoothed_plus_eye))).trace.cpu_made == "eye"
    # np.array and np.asarray make an array on the CPU from a literal only: handed an array, it stays
    made = {f.__name__: plan_of(ac.returns_tensor(ac.accepts_numpy(f))).trace.cpu_made for f in _AS_ARRAYS}
    assert made == {"_as_array": None, "_grey": "array", "_scaled_by_a_tuple": "asarray"}
    assert {f: plan_of(ac.returns_tensor(ac.accepts_numpy(f))).trace.cpu_made for f in _FROM_VALUES} == _FROM_VALUES
    body = next(b for b in TRACED if b.name == "solve_linear")
    pair = decorated(body)
    assert ac.explain(pair).compiled == (
        "its calls are traced into the graph, its NumPy code as torch operations (a call with an integer or boolean "
        "tensor, or inside a config or stats block, takes the escape), with tensors on the CPU; with "
        "tensors on another device they take the escape: its code makes arrays with eye, which torch's NumPy "
        "tracing makes on the CPU whatever the arguments' device"
    )
    args = [a.to("meta") for a in inputs(body)]
    with pytest.raises(ac.ConversionError) as refused:
        torch.compile(pair, backend="aot_eager")(*args)
    assert str(refused.value) == (
        "solve_linear(): argument a is a meta tensor, which holds no data. Found torch.Tensor(shape=(3, 3), "
        "dtype=torch.float64, layout=torch.strided, device=meta). Fix: run the call on tensors with real data."
    )
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(pair, backend="aot_eager", fullgraph=True)(*args)


@pytest.mark.parametrize("body", [f for f, name in _FROM_VALUES.items() if name is not None])
def test_bodies_making_arrays_from_globals_and_written_out_floats_take_the_escape_off_the_cpu(body: Any) -> None:
    """A global array (``x - MEAN``), a tuple of floats, floats written out as a list handed to
    NumPy (``np.dot(x, [0.2, 0.3, 0.5])``): torch's NumPy tracing holds them on the CPU, where
    they met a tensor of another device in dynamo's raw "Tensor device mismatch". Such a call
    takes the escape there (meta here: the library's refusal of a meta tensor), and is traced
    on the CPU to the eager values."""
    pair = ac.returns_tensor(ac.accepts_numpy(body))
    torch._dynamo.reset()
    with pytest.raises(ac.ConversionError, match="argument x is a meta tensor, which holds no data"):
        torch.compile(pair, backend="aot_eager")(torch.ones(3, dtype=torch.float64, device="meta"))
    x = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    torch.testing.assert_close(torch.compile(pair, backend="aot_eager", fullgraph=True)(x), pair(x))
    torch._dynamo.reset()


def test_under_fullgraph_the_error_names_the_function_and_the_option() -> None:
    """dynamo's error (its wording is torch's) shows the function's frame where the trace
    stopped, and the line of ours that called it, which names the way out."""
    pair = ac.returns_tensor(ac.accepts_numpy(rotation_2d))
    compiled = torch.compile(lambda p: pair(p, 0.3) + 1, backend="aot_eager", fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported) as refused:
        compiled(torch.rand(6, 2))
    message = str(refused.value)
    assert "in rotation_2d\n" in message
    assert 'traced by compile=: pass compile="escape" to keep it out of the graph' in message


def test_compile_escape_keeps_the_graph_break_and_compile_trace_forces_the_attempt() -> None:
    def body(a: np.ndarray) -> np.ndarray:
        return np.polyval(np.array([1.0, 2.0]), a)

    escaped = ac.returns_tensor(ac.accepts_numpy(compile="escape")(np.sin))
    assert (
        ac.explain(escaped).compiled == "each call is one graph break, the body run eagerly: compile='escape' was given"
    )
    assert torch._dynamo.explain(lambda v: escaped(v * 2) + 1)(torch.rand(3)).graph_break_count == 1
    forced = ac.returns_tensor(ac.accepts_numpy(compile="trace")(body))
    assert plan_of(forced).trace.why_not is None
    with pytest.raises(ValueError) as refused:
        ac.accepts_numpy(compile="always")
    assert str(refused.value) == (
        "autoconvert.accepts_numpy(): compile= takes 'auto', 'trace' or 'escape', got 'always'"
    )


def _scale(a: np.ndarray, factor: float = 2.0, *, shift: float = 0.0) -> np.ndarray:
    return a * factor + shift


def _overwrite(a: np.ndarray) -> np.ndarray:
    a[0] = 0.0
    return a + 1


def test_the_promises_hold_inside_the_graph() -> None:
    """Writes into arguments stay private unless writeback=True (copy=False takes the escape:
    see test_copy_false_without_writeback_takes_the_escape_to_the_eager_outcome); dtype=,
    device=, grad='detach', keyword and plain arguments, containers, tuple results."""
    x = torch.rand(4, dtype=torch.float64) + 1

    def run(fn: Any, *args: Any, fullgraph: bool = True, **kwargs: Any) -> Any:
        torch._dynamo.reset()
        return torch.compile(fn, backend="aot_eager", fullgraph=fullgraph)(*args, **kwargs)

    private = ac.returns_tensor(ac.accepts_numpy(copy=True)(_overwrite))
    caller = x.clone()
    torch.testing.assert_close(run(private, caller), private(x.clone()))
    assert torch.equal(caller, x)
    shared = ac.accepts_numpy(writeback=True)(_overwrite)
    caller = x.clone()
    run(ac.returns_tensor(shared), caller)
    assert caller[0] == 0 and torch.equal(caller[1:], x[1:])

    scaled = ac.returns_tensor(dtype=torch.float32, device="cpu")(ac.accepts_numpy(_scale))
    out = run(scaled, x, 3.0, shift=1.0)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, scaled(x, 3.0, shift=1.0))

    w = torch.rand(4, requires_grad=True)
    kept = run(ac.returns_tensor(ac.accepts_numpy(_log1p_abs)), w)
    assert kept.requires_grad  # traced: the gradient flows where eagerly it is dropped with a warning
    detached = run(ac.returns_tensor(ac.accepts_numpy(grad="detach")(_log1p_abs)), w)
    assert not detached.requires_grad

    @ac.returns_tensor
    @ac.accepts_numpy
    def of_containers(batch: dict[str, Any], pair: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return batch["a"] + pair[0], np.stack(pair).sum(axis=0) * batch["k"]

    args = ({"a": x, "k": 2.0}, [x, x * 2])
    assert_close_trees(of_containers(*args), run(of_containers, *args))


def _halved(a: np.ndarray) -> np.ndarray:
    return a / 2


def _puts(a: np.ndarray) -> np.ndarray:
    a[0] = 42.0
    return a * 1


def _marks(a: np.ndarray) -> np.ndarray:
    a[0] = 1.0
    return a.sum()


def _selfheld() -> list[Any]:
    held: list[Any] = [torch.ones(2, dtype=torch.float64)]
    held.append(held)
    return held


#: Calls the graph would change, by the words of their graph break (what the call holds): the
#: function, the arguments made anew for each call, and the block open around it.
_UNFIT_CALLS: dict[str, tuple[Any, Callable[[], tuple[Any, ...]], Callable[[], Any]]] = {
    "an integer or boolean tensor": (
        ac.returns_tensor(ac.accepts_numpy(_halved)),
        lambda: (torch.arange(4),),
        contextlib.nullcontext,
    ),
    "an integer or boolean tensor [in a list]": (
        ac.returns_tensor(ac.accepts_numpy(lambda items: items[0] / 2)),
        lambda: ([torch.arange(4), 1.0],),
        contextlib.nullcontext,
    ),
    "a tensor of a dtype NumPy lacks, handed as its own memory,": (
        ac.returns_tensor(ac.accepts_numpy(writeback=True)(_puts)),
        lambda: (torch.ones(3, dtype=torch.bfloat16),),
        contextlib.nullcontext,
    ),
    "a tensor whose elements share memory (expand, as_strided), handed as its own memory,": (
        ac.returns_tensor(ac.accepts_numpy(writeback=True)(_marks)),
        lambda: (torch.zeros(5, dtype=torch.float64)[:1].expand(3),),
        contextlib.nullcontext,
    ),
    "a tensor that requires grad": (
        ac.accepts_numpy(lambda a: a * 2),
        lambda: (torch.ones(3, dtype=torch.float64, requires_grad=True),),
        contextlib.nullcontext,
    ),
    "a tensor that requires grad [grad='error']": (
        ac.accepts_numpy(grad="error")(lambda a: a * 2),
        lambda: (torch.ones(3, dtype=torch.float64, requires_grad=True),),
        contextlib.nullcontext,
    ),
    "a container holding itself": (
        ac.returns_tensor(ac.accepts_numpy(lambda items: items[0] * 2)),
        lambda: (_selfheld(),),
        contextlib.nullcontext,
    ),
    "a config or stats block open": (
        ac.returns_tensor(ac.accepts_numpy(_halved)),
        lambda: (torch.ones(3, dtype=torch.float64),),
        ac.stats,
    ),
}


#: The argument path each refusal names where it is not the argument ``a`` ("": none, a block).
_UNFIT_PATHS = {
    "an integer or boolean tensor [in a list]": "items[0]",
    "a container holding itself": "items[1]",
    "a config or stats block open": "",
}


@pytest.mark.filterwarnings("ignore::autoconvert.GradientWarning")  # the eager call's own, detaching
@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("case", list(_UNFIT_CALLS))
def test_calls_the_graph_would_change_take_the_escape_and_give_the_eager_result(case: str, fullgraph: bool) -> None:
    """torch's NumPy tracing follows torch's dtype rules on integers (``a / 2`` of int64 is
    float32 there, in a list too), and widens bfloat16 into a copy that writeback=True would not
    reach: such calls take the escape, and give what they give eagerly, with no warning. Under
    fullgraph=True dynamo refused them quoting a bare ``torch.compiler.disable``: its error now
    quotes the library's words, the function, what the call holds and where (its argument path,
    none where no one value is to blame), why and the fix."""
    fn, made, block = _UNFIT_CALLS[case]
    eager_args, compiled_args = made(), made()

    def outcome(call: Any, args: tuple[Any, ...]) -> Any:
        try:
            return call(*args)
        except ac.ConversionError as e:  # the container holding itself, the expanded tensor, grad="error": refused
            return f"{type(e).__name__}: {e}"

    with block():
        expected = outcome(fn, eager_args)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=fullgraph)
    with warnings.catch_warnings(), block():
        warnings.simplefilter("error", ac.CompileWarning)
        if fullgraph:
            with pytest.raises(torch._dynamo.exc.Unsupported) as refused:
                compiled(*compiled_args)
            message = str(refused.value)
            name = getattr(fn, "__qualname__", "")
            what = case.partition(" [")[0]
            where = _UNFIT_PATHS.get(case, "a")
            if where:  # "..., handed as its own memory (argument a),"
                what = f"{what.rstrip(',')} (argument {where}){',' if what.endswith(',') else ''}"
            assert f"autoconvert: {name}(): a call with {what} takes the escape, one graph break" in message
            assert "leave fullgraph off, or call it outside the compiled function" in message  # an escape breaks too
            if "requires grad" in case:  # the eager call's own way, by its grad=
                assert ("raises GradientError" in message) == ("grad='error'" in case)
            return
        got = outcome(compiled, compiled_args)
    if isinstance(expected, torch.Tensor):
        assert got.dtype == expected.dtype and torch.equal(got, expected)
    elif isinstance(expected, str):
        assert got == expected
    else:
        np.testing.assert_array_equal(got, expected)
    assert str(compiled_args) == str(eager_args)  # the caller's containers and tensors as eagerly


def test_a_function_with_code_torch_cannot_trace_names_the_call_in_explain() -> None:
    assert ac.explain(ac.accepts_numpy(lambda a: np.median(a))).compiled == (
        "each call is one graph break, the body run eagerly: its code reads median, which torch's NumPy tracing "
        "does not trace"
    )


def test_a_module_calling_decorated_functions_compiles_fullgraph() -> None:
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(_sorted(x)) + _torchified(x)

    net = Net()
    x = torch.rand(3, 4)
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(net, backend=counter, fullgraph=True)
    torch.testing.assert_close(compiled(x), net(x))
    compiled(x + 1).sum().backward()
    assert counter.frame_count == 1
    assert net.linear.weight.grad is not None


# torch 2.13's dynamo warns at any graph break over a non-leaf tensor that requires grad (see
# test_compile): not ours to silence.
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf Tensor:UserWarning")
def test_a_decorated_method_is_traced_after_one_graph_break() -> None:
    """dynamo binds a method it finds on a class itself, past the wrapper: the call breaks the
    graph once, and the method's frame, compiled on its own, traces the NumPy body."""

    class Net(torch.nn.Module):
        @ac.returns_tensor
        @ac.accepts_numpy
        def prep(self, a: np.ndarray) -> np.ndarray:
            return np.sort(a, axis=-1) * 2

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.prep(x * 1) + 1

    net = Net()
    x = torch.rand(3, 4, requires_grad=True)
    out = torch.compile(net, backend="aot_eager")(x)
    torch.testing.assert_close(out, torch.sort(x, dim=-1).values * 2 + 1)
    out.sum().backward()  # traced: the gradient reaches x
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0))


@ac.returns_tensor
@ac.accepts_numpy
def _sorted(a: np.ndarray) -> np.ndarray:
    return np.sort(a, axis=-1)


def _log1p_abs(a: np.ndarray) -> np.ndarray:
    return np.log1p(np.abs(a))


_torchified = ac.torchify(_log1p_abs)


def _scaled_rows(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = a * w
    out[..., 0] = 0.0  # an in-place write into a local array
    return out - out.mean(axis=-1, keepdims=True)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple),
    copy=st.sampled_from([None, True]),
    grad=st.sampled_from(["warn", "detach"]),
    dtype=st.sampled_from([None, torch.float32, "input"]),
    floats=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
)
def test_options_by_body_shapes_compile_to_the_eager_result(
    shape: tuple[int, ...], copy: bool | None, grad: str, dtype: Any, floats: torch.dtype
) -> None:
    """Across options and shapes, the compiled call gives the eager call's values and dtype,
    the caller's tensors unchanged."""
    torch._dynamo.reset()
    pair = ac.returns_tensor(dtype=dtype)(ac.accepts_numpy(copy=copy, grad=grad)(_scaled_rows))
    a, w = torch.rand(shape).to(floats), torch.rand(shape[-1]).to(floats)
    before = a.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ac.GradientWarning)
        eager = pair(a, w)
    got = torch.compile(pair, backend="aot_eager", fullgraph=True)(a, w)
    assert_close_trees(eager, got, atol=1e-2, rtol=1e-2)
    assert torch.equal(a, before)


def test_which_code_is_judged_numpy_alone() -> None:
    """Decided from the names the code loads, its closures and the Python functions it calls."""
    from autoconvert._spec._callbacks import reads_numpy_alone

    scale = 2.0

    def helper(a: np.ndarray) -> np.ndarray:
        return np.exp(a) * scale

    cases = {
        lambda a: helper(a) + math.pi + abs(len(a)): None,
        lambda a: np.sin(a) * scale: None,
        lambda a: a.astype(np.float32) + np.linalg.norm(a): None,
        lambda a: scipy.ndimage.gaussian_filter(a, 1.0): "its code reads scipy (module scipy), not NumPy",
        lambda a: torch.as_tensor(a): "its code reads torch (module torch), not NumPy",
        lambda a: print(a): "its code reads print (builtin_function_or_method), not NumPy",
        lambda a: a + np.random.rand(): "its code reads random, which torch's NumPy tracing does not trace",
        lambda a: np.zeros(3, dtype=a.dtype): "its code reads dtype, which torch's NumPy tracing does not trace",
        lambda a: np.quantile(a, 0.3): "its code reads quantile, which torch's NumPy tracing does not trace",
        lambda a: np.copyto(a, 0.0): "its code reads copyto, which torch's NumPy tracing does not trace",
        np.sort: "a NumPy function itself, which dynamo does not inline; decorate a Python function calling it",
        functools.partial(np.add, 1): "it is a partial, not a Python function whose code can be read",
    }
    for function, why in cases.items():
        assert reads_numpy_alone(function) == why
    catches = (
        "its code catches exceptions (an except clause), and a compiled graph raises what NumPy raises at run time "
        "(np.linalg.LinAlgError) as torch's own errors, past the handler"
    )
    shapes = {
        _inverse_or_zeros: catches,
        _bare_except: catches,
        _try_finally: None,
        _catches_in_a_nested_function: catches,
        _catches_in_a_default_helper: catches,
        _catches_through_a_default_partial: "its code reads inverse (partial), not NumPy",
        _catches_in_a_helper_a_default_holds: catches,
    }
    for function, why in shapes.items():
        assert reads_numpy_alone(function) == why


def _inverse_or_zeros(a: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return np.zeros_like(a)


def _bare_except(a: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.inv(a)
    except:  # noqa: E722 - the bare form, judged apart from `except E`
        return a


def _try_finally(a: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.inv(a)
    finally:
        np.sum(a)


def _catches_in_a_nested_function(a: np.ndarray) -> np.ndarray:
    def inverse(b: np.ndarray) -> np.ndarray:
        try:
            return np.linalg.inv(b)
        except np.linalg.LinAlgError:
            return np.zeros_like(b)

    return inverse(a)


def _catches_in_a_default_helper(a: np.ndarray, inverse: Any = _inverse_or_zeros) -> np.ndarray:
    return inverse(a)


def _catches_through_a_default_partial(
    a: np.ndarray,
    inverse: Any = functools.partial(_inverse_or_zeros),  # noqa: B008 - the shape under test
) -> np.ndarray:
    return inverse(a)


def _catches_in_a_helper_a_default_holds(a: np.ndarray, helpers: Any = {"inverse": _inverse_or_zeros}) -> np.ndarray:  # noqa: B006 - the shape under test
    return helpers["inverse"](a)


@pytest.mark.parametrize(
    "body",
    [_inverse_or_zeros, _bare_except, _catches_through_a_default_partial, _catches_in_a_helper_a_default_holds],
    ids=["except LinAlgError", "bare except", "a partial default", "a helper in a dict default"],
)
def test_a_function_catching_numpys_run_time_error_gets_its_handlers_value_compiled(body: Any) -> None:
    """A singular matrix raises inside a compiled graph as torch's LinAlgError, which the
    function's own `except np.linalg.LinAlgError` would not catch: such a function takes the
    escape, and its handler's value is the compiled call's as it is the eager call's. A
    callable it takes as a default other than a function (a partial of a helper catching it),
    or held in a tuple, list or dict default, was not judged, and traced: it is judged as the
    callables its code loads by name are."""
    fn = ac.returns_tensor(ac.accepts_numpy(body))
    compiled = torch.compile(lambda a: fn(a) + 1, backend="aot_eager")
    singular = torch.zeros(2, 2, dtype=torch.float64)
    torch.testing.assert_close(compiled(singular), fn(singular) + 1)
    torch.testing.assert_close(compiled(torch.eye(2, dtype=torch.float64)), torch.eye(2, dtype=torch.float64) + 1)


def test_adapt_traces_where_every_parameter_asks_for_an_array() -> None:
    def mixed(a: np.ndarray, t: torch.Tensor) -> np.ndarray:
        return np.sin(a) + t.numpy()

    def arrays(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.sin(a) * b

    assert ac.explain(ac.adapt(mixed)).compiled == (
        "each call is one graph break, the body run eagerly: adapt() converts a parameter as its annotation "
        "asks: to a tensor, or to a dtype"
    )
    adapted = ac.adapt(arrays)
    x = torch.rand(3, dtype=torch.float64)
    torch.testing.assert_close(torch.compile(adapted, backend="aot_eager", fullgraph=True)(x, x), adapted(x, x))


def _sin_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sin(a) * b + np.tanh(a).sum()


def _sin_sum_arrays(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # adapt reads the annotations
    return np.sin(a) * b + np.tanh(a).sum()


@pytest.mark.parametrize(
    "made",
    [
        lambda: ac.returns_tensor(ac.accepts_numpy(_sin_sum)),
        lambda: ac.accepts_numpy(_sin_sum),
        lambda: ac.adapt(_sin_sum_arrays),
        lambda: ac.torchify(_sin_sum),
    ],
    ids=["pair", "accepts_numpy", "adapt", "torchify"],
)
def test_each_product_compiled_itself_traces_fullgraph(made: Any) -> None:
    """torch.compile(product, fullgraph=True), the product the compiled function itself: the
    eager result and the gradient. A torchified plain function raised dynamo's Unsupported
    ("Observed exception"): dynamo, starting at the proxy's call, took the proxy for its
    function and could read nothing else of it."""
    product = made()
    a, b = torch.rand(3, 4, dtype=torch.float64, requires_grad=True), torch.rand(4, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ac.GradientWarning)
        eager = product(a, b)
    if type(eager) is not torch.Tensor:  # NumPy's results: a tensor requiring grad takes the escape (see below)
        a = a.detach()
    got = torch.compile(product, backend="aot_eager", fullgraph=True)(a, b)
    assert_close_trees(eager if type(eager) is torch.Tensor else torch.from_numpy(eager), torch.as_tensor(got))
    if type(got) is torch.Tensor:  # accepts_numpy alone gives the function's array, outside the graph's gradient
        got.sum().backward()
        x = a.detach()
        torch.testing.assert_close(a.grad, torch.cos(x) * b + x.numel() * (1 - torch.tanh(x) ** 2))


# torch's own, on Python 3.13.0 alone, re-raised by pytest.warns from this module
@pytest.mark.filterwarnings("ignore:Guards may run slower on Python 3.13.0:RuntimeWarning")
@pytest.mark.parametrize("grad", ["warn", "error"])
def test_accepts_numpy_alone_with_a_tensor_requiring_grad_takes_the_escape_as_eagerly(grad: str) -> None:
    """accepts_numpy alone gives NumPy's results, whose gradient the graph would drop unsaid: a
    call with a tensor requiring grad takes the escape, to the eager GradientWarning or
    GradientError; one without traces (a later call with grad recompiles, as dynamo guards)."""
    alone = ac.accepts_numpy(_sin_sum, grad=grad)
    a, b = torch.rand(3, 4, dtype=torch.float64), torch.rand(4, dtype=torch.float64)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, y: torch.as_tensor(alone(x, y)) * 2, backend="aot_eager")
    torch.testing.assert_close(compiled(a, b), torch.as_tensor(alone(a, b)) * 2)
    needs = a.clone().requires_grad_()
    if grad == "error":
        with pytest.raises(ac.GradientError):
            compiled(needs, b)
    else:
        with pytest.warns(ac.GradientWarning):
            torch.testing.assert_close(compiled(needs, b), torch.as_tensor(_sin_sum(a.numpy(), b.numpy())) * 2)


def _doubled(a: np.ndarray) -> np.ndarray:
    return a * 2


def test_a_config_or_stats_block_around_a_compiled_call_applies_as_eagerly() -> None:
    """dynamo reads no ContextVar: a traced call would ignore a block's options. While a block is
    open the calls take the escape, whose eager call applies them; the graph compiled outside
    one is not reused inside (dynamo guards the flag), and is again after."""
    fn = ac.returns_tensor(ac.accepts_numpy(_doubled))
    x = torch.tensor([0.5, 1.0], dtype=torch.float64)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a: fn(a) + 1, backend="aot_eager")
    assert compiled(x).dtype == torch.float64
    with ac.config(dtype=torch.float32):
        inside = compiled(x)
    with ac.stats() as counted:
        compiled(x)
    assert inside.dtype == torch.float32 and inside.tolist() == [2.0, 3.0]
    assert counted["_doubled"].calls == 1
    assert compiled(x).dtype == torch.float64


def _eigh(a: np.ndarray) -> Any:
    return np.linalg.eigh(a)


# torch's own, on Python 3.13.0 alone, re-raised by pytest.warns from this module
@pytest.mark.filterwarnings("ignore:Guards may run slower on Python 3.13.0:RuntimeWarning")
def test_np_linalgs_named_results_take_the_escape_to_the_eager_type() -> None:
    """torch's NumPy tracing gives np.linalg's named results as torch's structseqs of arrays: such
    a call takes the escape, said once, and gives NumPy's named tuple of tensors, as eagerly."""
    fn = ac.returns_tensor(ac.accepts_numpy(_eigh))
    a = torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    eager = fn(a)
    torch._dynamo.reset()
    with pytest.warns(ac.CompileWarning, match="could not trace its NumPy code"):
        got = torch.compile(lambda m: fn(m), backend="aot_eager")(a)
    assert type(got) is type(eager) and all(type(item) is torch.Tensor for item in got)
    assert_close_trees(tuple(got), tuple(eager))


@pytest.mark.parametrize("view", ["expanded", "unfolded"])
def test_writeback_of_a_tensor_whose_elements_share_memory_takes_the_escape_to_its_refusal(view: str) -> None:
    """Eagerly writeback=True refuses a tensor whose elements share memory (ReadOnlyError); in the
    graph the write reached the caller's base, or the compiler failed: such a call takes the escape."""
    fn = ac.returns_tensor(ac.accepts_numpy(writeback=True)(_marks))
    base = torch.zeros(5, dtype=torch.float64)
    made = (lambda: base[:1].expand(3)) if view == "expanded" else (lambda: base.unfold(0, 3, 1))
    with pytest.raises(ac.ReadOnlyError) as eager:
        fn(made())
    torch._dynamo.reset()
    with pytest.raises(ac.ReadOnlyError) as compiled:
        torch.compile(lambda t: fn(t) + 1, backend="aot_eager")(made())
    assert str(compiled.value) == str(eager.value) and base.tolist() == [0.0] * 5


def test_a_module_calling_each_product_compiles_fullgraph_once() -> None:
    """A module's forward calling the pair, accepts_numpy alone, adapt and a torchified plain
    function, compiled whole with fullgraph=True: one graph, the eager result."""
    pair, alone = ac.returns_tensor(ac.accepts_numpy(_sin_sum)), ac.accepts_numpy(_sin_sum)
    adapted, torchified = ac.adapt(_sin_sum_arrays), ac.torchify(_sin_sum)

    class Net(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return pair(a, b) + torch.as_tensor(alone(a, b)) + adapted(a, b) + torchified(a, b)

    net, a, b = Net(), torch.rand(3, 4, dtype=torch.float64), torch.rand(4, dtype=torch.float64)
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(net, backend=counter, fullgraph=True)
    assert_close_trees(net(a, b), compiled(a, b))
    assert_close_trees(net(a + 1, b), compiled(a + 1, b))
    assert counter.frame_count == 1


def _scaled_by_dict(x: np.ndarray, d: dict[str, Any]) -> np.ndarray:
    return np.sin(x) * d["k"]


def _of_nested(items: list[Any], weights: dict[str, Any]) -> np.ndarray:
    first, (second, scale) = items[0], items[1]
    return np.sin(first) * second["w"] * scale + weights["bias"][0] * np.cos(weights["bias"][1])


@pytest.mark.parametrize("fullgraph", [False, True])
def test_list_and_dict_arguments_are_traced_with_their_gradients(fullgraph: bool) -> None:
    """A list or dict argument (holding tensors or plain values, nested) is traced as a tuple
    is: the eager value, the gradient reaching the tensors inside, no warning. They took the
    escape: the gradient dropped with a GradientWarning, and dynamo's Unsupported
    under fullgraph=True."""
    scaled = ac.returns_tensor(ac.accepts_numpy(_scaled_by_dict))
    nested = ac.returns_tensor(ac.accepts_numpy(_of_nested))
    x = torch.tensor([0.3, 0.9], dtype=torch.float64, requires_grad=True)
    w = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)

    def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        plain = scaled(x, {"k": 2.0})
        held = scaled(x, {"k": w})
        both = nested([x, ({"w": w}, 3.0)], weights={"bias": [w, x]})
        return plain.sum() + held.sum() + both.sum()

    value = torch.compile(step, backend="aot_eager", fullgraph=fullgraph)(x, w)
    value.backward()
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    expected = (torch.sin(xr) * 2).sum() + (torch.sin(xr) * wr).sum()
    expected = expected + (torch.sin(xr) * wr * 3 + wr * torch.cos(xr)).sum()
    expected.backward()
    torch.testing.assert_close(value, expected)
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(w.grad, wr.grad)


def _changes_its_containers(d: dict[str, Any], items: list[Any]) -> np.ndarray:
    d["new"] = d["x"] * 2  # a new array: a tensor for the caller
    d["kept"] = items[0]  # an array it was handed: the caller's tensor again
    del d["gone"]
    d["inner"].append(np.cos(d["x"]))  # a list inside the dict
    items.append(2.5)
    items.pop(0)
    return d["x"] + 1


def _changed_args(x: torch.Tensor) -> tuple[dict[str, Any], list[Any]]:
    return {"x": x, "gone": 1.0, "inner": [x * 3]}, [x * 4, (x, 1.0)]


def _described(value: Any) -> Any:
    """What a container holds, each tensor as its dtype and values (identity apart)."""
    if isinstance(value, torch.Tensor):
        return (value.dtype, value.detach().float().tolist())
    if isinstance(value, (list, tuple)):
        return type(value), [_described(v) for v in value]
    if isinstance(value, dict):
        return {k: _described(v) for k, v in value.items()}
    return value


def _check_changes_reach_the_caller(route: Any, dtype: torch.dtype, fullgraph: bool) -> None:
    fn = route(_changes_its_containers)
    x_eager, x_compiled = torch.tensor([0.3, 0.9], dtype=dtype), torch.tensor([0.3, 0.9], dtype=dtype)
    eager_args, compiled_args = _changed_args(x_eager), _changed_args(x_compiled)
    inner, handed = compiled_args[0]["inner"], compiled_args[1][0]
    expected = fn(*eager_args)
    torch._dynamo.reset()
    got = torch.compile(lambda d, items: fn(d, items), backend="aot_eager", fullgraph=fullgraph)(*compiled_args)
    assert_close_trees(expected, got)
    assert _described(compiled_args) == _described(eager_args)
    d = compiled_args[0]
    assert d["x"] is x_compiled and d["kept"] is handed and d["inner"] is inner  # the caller's own objects
    assert type(d["new"]) is torch.Tensor and d["new"].dtype == dtype


@pytest.mark.parametrize("fullgraph", [False, True])
def test_what_the_function_changes_in_a_handed_list_or_dict_reaches_the_caller(fullgraph: bool) -> None:
    """Traced, a change to a list or dict the function was handed reaches the caller's as an
    eager call's does: keys added and removed, items appended and popped, a list inside
    changed; new arrays as tensors, handed values as the caller's own objects again."""
    _check_changes_reach_the_caller(lambda f: ac.returns_tensor(ac.accepts_numpy(f)), torch.float64, fullgraph)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "route",
    [lambda f: ac.returns_tensor(ac.accepts_numpy(f)), ac.torchify, ac.adapt],
    ids=["pair", "torchify", "adapt"],
)
def test_container_changes_reach_the_caller_in_each_route_and_dtype(route: Any, dtype: torch.dtype) -> None:
    """The pair, a torchified function and adapt, in float64, float32 and bfloat16 (handed
    widened, new arrays narrowed back as eagerly)."""
    _check_changes_reach_the_caller(route, dtype, fullgraph=True)


def _reads_containers(x: np.ndarray, d: dict[str, Any], items: list[Any]) -> np.ndarray:
    return np.sin(x) * d["k"] + items[0] * items[1]["w"][0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "route",
    [lambda f: ac.returns_tensor(ac.accepts_numpy(f)), ac.torchify, ac.adapt],
    ids=["pair", "torchify", "adapt"],
)
@pytest.mark.parametrize(
    "made",
    [
        lambda x: (x, {"k": 2.0}, [1.0, {"w": [3.0]}]),
        lambda x: (x, {"k": x * 2}, [x, {"w": [x * 3]}]),
        lambda x: ([x][0], {"k": (x, 2.0)[1]}, [x * 1, {"w": (x,)}]),
    ],
    ids=["plain values", "tensors", "tensors in tuples"],
)
def test_list_and_dict_arguments_trace_in_each_route(route: Any, made: Any) -> None:
    """fullgraph=True in each route: the eager value, and the gradient of a requires-grad
    tensor torch autograd gives the same expression."""
    fn = route(_reads_containers)
    x = torch.tensor([0.3, 0.9], dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ac.GradientWarning)
        expected = fn(*made(x.detach()))
    got = torch.compile(lambda x: fn(*made(x)), backend="aot_eager", fullgraph=True)(x)
    assert_close_trees(expected, got.detach())
    got.sum().backward()
    xr = x.detach().clone().requires_grad_()
    reference = torch.sin(xr) * made(xr)[1]["k"]
    items = made(xr)[2]
    (reference + torch.as_tensor(items[0]) * torch.as_tensor(items[1]["w"][0])).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)


def _appends_sine(x: np.ndarray, items: list[Any]) -> np.ndarray:
    items.append(np.sin(x))
    return x * items[0]


def test_with_nested_false_a_list_argument_is_handed_as_it_is_in_the_graph_too() -> None:
    """nested=False hands a list as it is: traced, fullgraph=True holds, and what the function
    puts in it reaches the caller's list as eagerly (an array stays an array)."""
    fn = ac.returns_tensor(ac.accepts_numpy(nested=False)(_appends_sine))
    x = torch.ones(2, dtype=torch.float64)
    eager_items, compiled_items = [2.0], [2.0]
    expected = fn(x, eager_items)
    got = torch.compile(fn, backend="aot_eager", fullgraph=True)(x, compiled_items)
    torch.testing.assert_close(got, expected)
    assert compiled_items[0] == 2.0 and type(compiled_items[1]) is np.ndarray
    np.testing.assert_allclose(compiled_items[1], eager_items[1])


@dataclasses.dataclass
class _Batch:
    x: Any
    scale: float


_Pair = collections.namedtuple("_Pair", "x scale")


def _writes_and_reads(c: Any) -> np.ndarray:
    x, scale = (c["x"], c["scale"]) if isinstance(c, dict) else (c.x, c.scale)
    x[0] = 5.0  # into the private copy: the caller's tensor stays as it was
    return np.sin(x) * scale


@pytest.mark.parametrize(
    "made",
    [
        lambda x: _Batch(x, 2.0),
        lambda x: _Pair(x, 2.0),
        lambda x: collections.OrderedDict(x=x, scale=2.0),
        lambda x: collections.defaultdict(float, x=x, scale=2.0),
    ],
    ids=["dataclass", "namedtuple", "OrderedDict", "defaultdict"],
)
def test_tensors_in_dataclasses_named_tuples_and_other_dicts_are_handed_as_arrays(made: Any) -> None:
    """A dataclass, named tuple, OrderedDict or defaultdict argument is rebuilt as a dict is:
    its tensors handed as private arrays, the gradient reaching them, fullgraph=True. The
    function was handed the caller's tensors themselves, and wrote into them."""
    fn = ac.returns_tensor(ac.accepts_numpy(copy=True)(_writes_and_reads))
    x = torch.tensor([0.3, 0.9], dtype=torch.float64, requires_grad=True)
    got = torch.compile(lambda x: fn(made(x)), backend="aot_eager", fullgraph=True)(x)
    torch.testing.assert_close(got, fn(made(x.detach())))
    assert x.tolist() == [0.3, 0.9]
    got.sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([0.0, 2 * math.cos(0.9)], dtype=torch.float64))


def _sets_fields(batch: _Batch, d: collections.OrderedDict[str, Any]) -> np.ndarray:
    batch.x = batch.x * 2
    batch.total = np.sum(batch.x)  # attributes no field declares: one set, one deleted
    del batch.note  # type: ignore[attr-defined]
    d["new"] = np.cos(batch.x)
    d["again"] = d["pair"]  # a named tuple it was handed: the caller's own again
    return batch.x + 1


def test_what_the_function_changes_in_a_dataclass_or_ordered_dict_reaches_the_caller() -> None:
    fn = ac.returns_tensor(ac.accepts_numpy(_sets_fields))
    x = torch.tensor([0.3, 0.9], dtype=torch.float64)
    eager_args = (_Batch(x, 1.0), collections.OrderedDict(k=x, pair=_Pair(x, 1.0)))
    compiled_args = (_Batch(x, 1.0), collections.OrderedDict(k=x, pair=_Pair(x, 1.0)))
    for batch in (eager_args[0], compiled_args[0]):
        batch.note = "seen"  # type: ignore[attr-defined]
    expected = fn(*eager_args)
    got = torch.compile(fn, backend="aot_eager", fullgraph=True)(*compiled_args)
    assert_close_trees(expected, got)
    assert type(compiled_args[0].x) is torch.Tensor and type(compiled_args[1]["new"]) is torch.Tensor
    assert _described([*compiled_args[1].values(), compiled_args[0].x]) == _described(
        [*eager_args[1].values(), eager_args[0].x]
    )
    assert compiled_args[1]["k"] is x and compiled_args[1]["again"] is compiled_args[1]["pair"]
    assert type(compiled_args[0].total) is torch.Tensor and not hasattr(compiled_args[0], "note")  # type: ignore[attr-defined]
    assert_close_trees(compiled_args[0].total, eager_args[0].total)  # type: ignore[attr-defined]


class _Registered:
    def __init__(self, x: Any) -> None:
        self.x = x


def _sine_of_registered(r: _Registered, k: float) -> np.ndarray:
    return np.sin(r.x) * k


#: name: (a block around the compiled calls, whose calls take the generic call whatever the
#: switch (a config block's options, a stats block's counts); the result side's options (with
#: dtype="input" the plan has no flat call); the calls the block counts).
_ESCAPED_CASES: dict[str, tuple[Any, dict[str, Any], int | None]] = {
    "no block": (contextlib.nullcontext, {}, None),
    "a config block": (lambda: ac.config(copy=True), {}, None),
    "a stats block": (ac.stats, {}, 2),
    "no flat call": (contextlib.nullcontext, {"dtype": "input"}, None),
}


@pytest.mark.parametrize("case", list(_ESCAPED_CASES))
def test_a_tensor_in_a_registered_container_takes_the_escape_said_once(case: str) -> None:
    """A container registered with register_container, whose insides dynamo cannot read through
    the library's walk: the call takes the escape (the eager result), said once with a
    CompileWarning naming the argument path, and explain says so; on the flat and the generic
    call alike. Inside a config or stats block every call takes the escape, unsaid (the stats
    block counts both calls). The
    generic call's frame, met by Python after the graph break with no tensor of its own among
    its locals, was skipped by dynamo: the conversions ran with each tensor's frame compiled on
    its own, and failed on a fake tensor's setflags (a plan without a flat call did so on every
    call)."""
    ac.register_container(_Registered, lambda r: ((r.x,), None), lambda c, _: _Registered(*c))
    make_block, options, counted = _ESCAPED_CASES[case]
    fn = ac.returns_tensor(ac.accepts_numpy(_sine_of_registered), **options)
    x = torch.tensor([0.3, 0.9], dtype=torch.float64)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="aot_eager")
    with warnings.catch_warnings(record=True) as said, make_block() as watched:
        warnings.simplefilter("always", ac.CompileWarning)
        got = [compiled(_Registered(x), 2.0), compiled(_Registered(x * 2), 3.0)]
    torch.testing.assert_close(got, [torch.sin(x) * 2, torch.sin(x * 2) * 3])
    words = (
        "a call with a tensor inside a container the trace route does not rebuild (its argument r[0]) takes the "
        "escape: it rebuilds tuples, named tuples, lists, dicts, OrderedDicts, defaultdicts and dataclasses"
    )
    traced = (
        "its calls are traced into the graph, its NumPy code as torch operations (a call with an integer or boolean "
        "tensor, or inside a config or stats block, takes the escape)"
    )
    if case in ("a config block", "a stats block"):  # a block's escape comes first, with nothing to say
        assert said == []
        assert ac.explain(fn).compiled == traced
    else:
        assert [str(w.message) for w in said] == [
            f"autoconvert: _sine_of_registered(): {words}. Fix: hand the tensors in one of those, or as arguments, "
            "to keep the call in the graph"
        ]
        assert ac.explain(fn).compiled == f"{traced}; but {words}"
    if counted is not None:
        assert watched["_sine_of_registered"].calls == counted


def _appends_through_both(x: np.ndarray, a: Any, b: Any) -> np.ndarray:
    """Changes its containers through both names; its value says whether they are one."""
    first, second = (a[0], b[0]) if isinstance(a, tuple) else (a, b)  # containers inside tuples
    for held, scale in ((first, 1.0), (second, 2.0)):
        if isinstance(held, list):
            held.append(x * scale)
        elif isinstance(held, dict):
            held[f"k{scale}"] = x * scale
        else:  # a dataclass
            held.x = held.x + x * scale
    return np.sin(x) + (1.0 if first is second else 0.0)


#: name: (a container to hand twice, whether each time inside a tuple).
_ALIASED = {
    "a list as two arguments": (lambda: [torch.zeros(2, dtype=torch.float64)], False),
    "a dict as two arguments": (lambda: {"k0": torch.zeros(2, dtype=torch.float64)}, False),
    "a list inside two tuples": (lambda: [1.0], True),
    "a dataclass as two arguments": (lambda: _Batch(torch.zeros(2, dtype=torch.float64), 1.0), False),
}


def _check_an_aliased_container(name: str, fullgraph: bool) -> None:
    fn = ac.returns_tensor(ac.accepts_numpy(_appends_through_both))
    x = torch.tensor([0.3, 0.9], dtype=torch.float64)
    made, in_tuples = _ALIASED[name]
    eager_held, held = made(), made()
    expected = fn(x, *(((eager_held,),) * 2 if in_tuples else (eager_held,) * 2))
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, a, b: fn(x, a, b), backend="aot_eager", fullgraph=fullgraph)
    got = compiled(x, *(((held,),) * 2 if in_tuples else (held,) * 2))
    torch.testing.assert_close(got, expected)  # the function saw one container, as eagerly
    if isinstance(held, _Batch):
        torch.testing.assert_close(held.x, eager_held.x)
    else:
        assert _described(held) == _described(eager_held)  # both changes land, as eagerly


@pytest.mark.parametrize("name", ["a list as two arguments", "a list inside two tuples"])
def test_one_container_handed_twice_is_one_in_the_graph_too(name: str) -> None:
    """One list handed twice (``f(x, l, l)``, ``f(x, (l,), (l,))``) is one list to the traced
    function as eagerly: the changes through both names reach the caller's. It was rebuilt
    once per place, the later one written back over the first one's change."""
    _check_an_aliased_container(name, fullgraph=True)


@pytest.mark.slow
@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("name", list(_ALIASED))
def test_each_container_handed_twice_is_one_in_the_graph(name: str, fullgraph: bool) -> None:
    _check_an_aliased_container(name, fullgraph)


def _appends_one(x: np.ndarray, items: list[Any]) -> np.ndarray:
    items.append(x)
    return np.sin(x)


@pytest.mark.parametrize("fullgraph", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_list_holding_itself_takes_the_escape_to_the_eager_error(fullgraph: bool) -> None:
    """A list holding itself, which an eager call refuses, takes the escape: the eager
    ConversionError (a graph break, so fullgraph=True refuses it), the caller's list unchanged.
    Its rebuild recursed without end."""
    fn = ac.returns_tensor(ac.accepts_numpy(_appends_one))
    x = torch.tensor([0.3, 0.9], dtype=torch.float64)
    items: list[Any] = [x]
    items.append(items)
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=fullgraph)
    if fullgraph:
        with pytest.raises(torch._dynamo.exc.Unsupported):
            compiled(x, items)
    else:
        with pytest.raises(ac.ConversionError) as raised:
            compiled(x, items)
        assert str(raised.value) == (
            "_appends_one(): argument items contains itself, or nests deeper than Python's recursion limit, so it "
            "cannot be walked. Found a container that reaches itself through its items. Fix: break the cycle, or "
            "pass nested=False to convert top-level arguments only."
        )
    assert len(items) == 2 and items[0] is x and items[1] is items


def _holding_itself(x: np.ndarray) -> list[Any]:
    held: list[Any] = [np.sin(x)]
    held.append(held)
    return held


def _nested(x: np.ndarray, depth: int) -> Any:
    out: Any = np.sin(x)
    for _ in range(depth):
        out = [out]
    return out


@pytest.mark.filterwarnings("ignore:Guards may run slower on Python 3.13.0:RuntimeWarning")
def test_a_result_holding_itself_takes_the_escape_to_the_eager_error() -> None:
    """A traced call's result holding itself raised dynamo's InternalTorchDynamoError
    (RecursionError) from the walk of its result: it takes the escape, to the eager call's
    ConversionError. A result nested 8 containers deep is traced; deeper, it takes the escape."""
    pair = ac.returns_tensor(ac.accepts_numpy(_holding_itself))
    x = torch.tensor([0.3, 0.9], dtype=torch.float64)
    with pytest.raises(ac.ConversionError) as eager:
        pair(x)
    torch._dynamo.reset()
    with pytest.raises(ac.ConversionError) as compiled:
        torch.compile(pair, backend="aot_eager")(x)
    assert str(compiled.value) == str(eager.value)
    nested = ac.returns_tensor(ac.accepts_numpy(_nested))
    out = torch.compile(nested, backend="aot_eager", fullgraph=True)(x, 8)
    for _ in range(8):
        (out,) = out
    torch.testing.assert_close(out, torch.sin(x))
    torch._dynamo.reset()
    with pytest.warns(ac.CompileWarning):
        deeper = torch.compile(nested, backend="aot_eager")(x, 12)
    torch.testing.assert_close(deeper, nested(x, 12))
    torch._dynamo.reset()


def _writes_then_returns_itself(x: np.ndarray, write: bool) -> np.ndarray:
    if write:
        x[0] = 5.0
    return x


@pytest.mark.filterwarnings("ignore:Guards may run slower on Python 3.13.0:RuntimeWarning")
def test_copy_false_without_writeback_takes_the_escape_to_the_eager_outcome() -> None:
    """``copy=False`` hands the function the caller's memory read-only: traced, torch's NumPy
    tracing cannot keep it so, and a write reached the caller's tensor where an eager call
    raises ReadOnlyError, and a result that is the argument shared the caller's memory where an
    eager call copies it. Its calls take the escape, to the eager outcome."""
    pair = ac.returns_tensor(ac.accepts_numpy(_writes_then_returns_itself, copy=False))
    assert ac.explain(pair).compiled == (
        "each call is one graph break, the body run eagerly: copy=False hands it the caller's memory read-only, "
        "which torch's NumPy tracing cannot keep read-only"
    )
    torch._dynamo.reset()
    compiled = torch.compile(pair, backend="aot_eager")
    x = torch.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ac.ReadOnlyError, match="argument x was written into by the function"):
        compiled(x, True)
    assert x.tolist() == [1.0, 2.0, 3.0]
    eager, out = pair(x, False), compiled(x, False)
    assert out.tolist() == eager.tolist() == [1.0, 2.0, 3.0]
    assert out.data_ptr() != x.data_ptr() and eager.data_ptr() != x.data_ptr()
    torch._dynamo.reset()


def _weights() -> tuple[float, ...]:
    return (1.0, 2.0, 3.0)


def _with_a_returned_tuple(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x * 2, np.asarray(_weights())


def _with_written_out_ints(x: np.ndarray) -> dict[str, np.ndarray]:
    return {"scaled": x * 2, "table": np.diag([1, 2, 3]) + 0}


def _with_a_comprehension(x: np.ndarray) -> np.ndarray:
    return np.diag([float(i) for i in range(3)]) * 1.0


@pytest.mark.parametrize("body", [_with_a_returned_tuple, _with_written_out_ints, _with_a_comprehension])
def test_traced_results_made_from_globals_and_values_go_to_the_callers_device(body: Any) -> None:
    """torch's NumPy tracing makes an array from a Python value on the CPU, where no reading of
    the code finds every such array (a tuple another function returns, written-out ints, a
    comprehension): the traced call's results go to the caller's device as an eager call's do
    (meta here, standing for a GPU)."""
    torch._dynamo.reset()
    out = torch.compile(ac.returns_tensor(ac.accepts_numpy(body)), backend="aot_eager", fullgraph=True)(
        torch.ones(3, dtype=torch.float64, device="meta")
    )
    leaves, _ = tree_flatten(out)
    assert leaves and all(leaf.device.type == "meta" for leaf in leaves)
    torch._dynamo.reset()


def _raises_after_numpy_code(x: np.ndarray) -> np.ndarray:
    np.sin(x)
    raise ValueError("the function's own")


@dataclasses.dataclass
class _Holder:
    a: Any


@dataclasses.dataclass(slots=True)
class _SlottedHolder:
    a: Any


def _raises_inside_a_dataclass(held: _Holder) -> np.ndarray:
    np.sin(held.a)
    raise ValueError("the function's own")


def _raises_inside_a_list(items: list[np.ndarray]) -> np.ndarray:
    np.sin(items[0])
    raise ValueError("the function's own")


def _sets_an_undeclared_attribute(held: Any) -> np.ndarray:
    held.n = held.a * 3  # a slotted dataclass refuses it (AttributeError)
    return np.sum(held.a)


def _one_of(made: Any) -> Any:
    return made(torch.ones(2, dtype=torch.float64))


_RAISING: dict[str, tuple[Any, Any]] = {
    "raise after NumPy code": (_raises_after_numpy_code, lambda t: t),
    "raise, the tensor in a dataclass": (_raises_inside_a_dataclass, _Holder),
    "raise, the tensor in a list": (_raises_inside_a_list, lambda t: [t]),
    "a slotted dataclass refusing an attribute": (_sets_an_undeclared_attribute, _SlottedHolder),
}


@pytest.mark.parametrize(
    "name",
    [
        name
        if name in ("raise after NumPy code", "a slotted dataclass refusing an attribute")
        else pytest.param(name, marks=pytest.mark.slow)
        for name in _RAISING
    ],
)
def test_a_traced_function_raising_its_own_exception_raises_it_as_eagerly(name: str) -> None:
    """The function's own exception, met while dynamo traces the call, breaks the graph at the
    call, which the escape runs by Python: the exception is the eager call's, with no warning.
    dynamo ran the calling frame by Python and traced the function alone on arrays it cannot
    take (AssertionError "Expected np.nditer base"), or the library's conversions as graphs
    (TorchRuntimeError about setflags)."""
    body, made = _RAISING[name]
    fn = ac.returns_tensor(ac.accepts_numpy(body))
    with pytest.raises(Exception) as eager:
        fn(made(torch.ones(2, dtype=torch.float64)))
    with pytest.raises(type(eager.value)) as compiled:  # a CompileWarning is an error here
        torch.compile(fn, backend="aot_eager")(made(torch.ones(2, dtype=torch.float64)))
    assert type(compiled.value) is type(eager.value) and str(compiled.value) == str(eager.value)


def test_under_fullgraph_a_traced_call_raising_is_refused_in_the_librarys_words() -> None:
    """dynamo refuses the graph break that would raise the eager call's exception, quoting the
    break's message where this torch's graph_break takes one (torch 2.4's has none)."""
    fn = ac.returns_tensor(ac.accepts_numpy(_raises_after_numpy_code))
    with pytest.raises(torch._dynamo.exc.Unsupported) as refused:
        torch.compile(lambda x: fn(x) * 2, backend="eager", fullgraph=True)(torch.ones(2))
    if "msg" in inspect.signature(torch._dynamo.graph_break).parameters:
        assert (
            "autoconvert: _raises_after_numpy_code() raised while torch.compile traced it, or gave a result the graph "
            "cannot give as the eager call does (np.linalg's named results, containers nested more than 8 deep): the "
            "call runs by Python, outside the graph, to give the eager call's exception or result. Fix: leave "
            "fullgraph off, or call it outside the compiled function"
        ) in str(refused.value)


def _times(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    return x * s


@pytest.mark.parametrize("options", [{}, {"device": "meta"}])
def test_tensors_on_two_devices_take_the_escape_to_the_eager_result(options: dict[str, Any]) -> None:
    """Tensors on two devices (meta here, standing for a GPU, beside a 1-d CPU tensor) would
    meet in the graph in dynamo's device mismatch (TorchRuntimeError): the call takes the
    escape, to what the eager call gives (here its refusal of a meta tensor in the library's
    words; on a GPU its DeviceMismatchError, or with device= the host round trip). A 0-d CPU
    tensor goes to any device, eagerly as traced: such a call is traced."""
    fn = ac.returns_tensor(ac.accepts_numpy(_times), **options)
    x = torch.ones(3, dtype=torch.float64, device="meta")
    with pytest.raises(ac.ConversionError) as refused:
        torch.compile(fn, backend="aot_eager")(x, torch.full((3,), 2.0, dtype=torch.float64))
    assert str(refused.value) == (
        "_times(): argument x is a meta tensor, which holds no data. Found torch.Tensor(shape=(3,), "
        "dtype=torch.float64, layout=torch.strided, device=meta). Fix: run the call on tensors with real data."
    )
    torch._dynamo.reset()
    out = torch.compile(fn, backend="aot_eager", fullgraph=True)(x, torch.tensor(2.0, dtype=torch.float64))
    assert out.device.type == "meta"


# torch's own, on Python 3.13.0 alone, re-raised by pytest.warns from this module
@pytest.mark.filterwarnings("ignore:Guards may run slower on Python 3.13.0:RuntimeWarning")
@pytest.mark.parametrize("in_a_list", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_writeback_into_a_leaf_requiring_grad_takes_the_escape_as_eagerly(in_a_list: bool) -> None:
    """writeback=True hands the caller's own memory: a write into a leaf requiring grad, which
    autograd refuses in the graph (a TorchRuntimeError about "a view of a leaf Variable"),
    takes the escape, as eagerly: the write reaches the caller's tensor, the gradient detached
    with the GradientWarning. A leaf that requires no grad is traced (fullgraph=True holds)."""
    fn = ac.returns_tensor(ac.accepts_numpy(writeback=True)(_puts if not in_a_list else lambda items: _puts(items[0])))
    results = []
    for requires_grad in (True, False):
        x = torch.tensor([0.3, 0.9], dtype=torch.float64, requires_grad=requires_grad)
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="aot_eager", fullgraph=not requires_grad)
        with pytest.warns(ac.GradientWarning) if requires_grad else contextlib.nullcontext():
            results.append(compiled([x] if in_a_list else x))
        assert x.tolist() == [42.0, 0.9]
    assert [r.tolist() for r in results] == [[42.0, 0.9]] * 2
    assert not results[0].requires_grad
