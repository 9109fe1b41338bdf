"""Inside torch.compile: a decorated call is a clean graph break and gives the eager result."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import scipy
import scipy.ndimage
import scipy.signal
import scipy.stats
import torch
import torch._dynamo

import autoconvert as ac


@ac.returns_tensor
@ac.accepts_numpy
def smooth(a: np.ndarray) -> np.ndarray:
    return scipy.ndimage.gaussian_filter(a, 1.0)


@ac.returns_tensor
@ac.accepts_numpy
def doubled_by_nditer(a: np.ndarray) -> np.ndarray:
    """NumPy that dynamo cannot trace ("Expected np.nditer base") when it tries."""
    out = np.empty(a.size, dtype=a.dtype)
    for i, v in enumerate(np.nditer(a)):
        out[i] = v * 2
    return out.reshape(a.shape)


@ac.returns_tensor
@ac.accepts_numpy
def discounted(rewards: np.ndarray, gamma: float) -> np.ndarray:
    return scipy.signal.lfilter([1.0], [1.0, -gamma], rewards[::-1])[::-1]


def model(x: torch.Tensor) -> torch.Tensor:
    y = smooth(x * 2)
    z = doubled_by_nditer(y)
    return z + 1 + discounted(z[0], 0.9).sum()


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_compiled_model_matches_eager() -> None:
    x = torch.rand(5, 5)
    compiled = torch.compile(model, backend="eager")
    assert torch.allclose(compiled(x), model(x))
    assert torch.allclose(compiled(x + 1), model(x + 1))


def test_each_decorated_call_is_one_graph_break_and_dynamo_never_enters_the_body() -> None:
    """The break is at the call site, with the library's reason where dynamo can hold the trace
    route (its torch.compiler has set_stance), else dynamo's for a disabled function."""
    explanation = torch._dynamo.explain(lambda x: smooth(x * 2) + 1)(torch.rand(4, 4))
    assert explanation.graph_break_count == 1
    reason = str(explanation.break_reasons[0].reason)
    if hasattr(torch.compiler, "set_stance"):
        assert (
            "autoconvert: smooth(): its calls under torch.compile take the escape, one graph break, the body run "
            "eagerly: its code reads scipy (module scipy), not NumPy. Fix: leave fullgraph off, or "
            "call it outside the compiled function"
        ) in reason
    else:  # dynamo's wording: "torch._dynamo.disable()" (torch 2.4), "torch.compiler.disable" later
        assert "disable" in reason
    frames = [f.filename for b in explanation.break_reasons for f in b.user_stack]
    assert not any(f.startswith(os.path.dirname(scipy.__file__)) for f in frames)
    ours = {f for f in frames if f.startswith(os.path.dirname(ac.__file__))}  # the package, not this test's path
    package = os.path.dirname(ac.__file__)  # the break's own line, and the line of the trace route that calls it
    assert ours <= {os.path.join(package, "_interpreter", "_trace.py"), os.path.join(package, "_escape.py")}


# torch 2.13's dynamo warns at any graph break over a non-leaf tensor that requires grad,
# reproduced with a bare torch._dynamo.graph_break() and no autoconvert: not ours to silence.
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf Tensor:UserWarning")
def test_inputs_that_require_grad_compile_too() -> None:
    """Detached on the way in (grad='detach'), correct values out, in a compiled training step."""
    negate = ac.returns_tensor(ac.accepts_numpy(grad="detach")(np.negative))
    w = torch.rand(4, requires_grad=True)
    out = torch.compile(lambda v: negate(v * 2) + v, backend="eager")(w)
    assert torch.allclose(out, -w.detach())  # -2w from NumPy (no gradient), + w


def test_compiling_the_decorated_function_itself() -> None:
    """torch.compile(decorated) and fullgraph=False callers both fall back to the eager body."""
    x = torch.rand(3)
    assert torch.allclose(torch.compile(doubled_by_nditer, backend="eager")(x), x * 2)
    assert torch.allclose(torch.compile(lambda v: doubled_by_nditer(v) + 1, backend="eager")(x), x * 2 + 1)


def test_methods_compile_too() -> None:
    class Net(torch.nn.Module):
        @ac.returns_tensor
        @ac.accepts_numpy
        def prep(self, a: np.ndarray) -> np.ndarray:
            return np.sort(a, axis=-1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.prep(x) * 3

    net = Net()
    x = torch.rand(3, 4)
    assert torch.allclose(torch.compile(net, backend="eager")(x), net(x))


_torchified = ac.torchify(scipy.ndimage)
_negate_in = ac.accepts_numpy(np.negative)  # gives back an array
_tensor_out = ac.returns_tensor(lambda a: np.asarray(a) * 2)  # takes what it is given
_reverse = ac.returns_numpy(ac.accepts_tensor(torch.sort))  # tensor code for NumPy callers
_per_sample = ac.batched(ac.returns_tensor(ac.accepts_numpy(np.cumsum)))


@pytest.mark.parametrize(
    "call",
    [
        lambda x: torch.as_tensor(_negate_in(x)) + 1,
        lambda x: _tensor_out(x.numpy()) + 1,
        lambda x: torch.as_tensor(_reverse(x.numpy()).values) + 1,
        lambda x: ac.to_tensor(np.flip(ac.to_numpy(x), 0)) + 1,
        lambda x: _torchified.gaussian_filter(x, 1.0) + 1,
        lambda x: _per_sample(x) + 1,
        lambda x: ac.numpy_op(np.negative)(x) + 1,
    ],
    ids=["accepts_numpy", "returns_tensor", "reverse-pair", "to_numpy-to_tensor", "torchify", "batched", "numpy_op"],
)
def test_every_public_callable_gives_the_eager_result_when_compiled(call: Any) -> None:
    x = torch.rand(3, 4)
    assert torch.allclose(torch.compile(call, backend="eager")(x), call(x))


class _Scaler:
    def fit(self, x: np.ndarray) -> _Scaler:
        self.scale_ = x.std(axis=0)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        return x / self.scale_


_stats = ac.torchify(scipy.stats)


def test_torchified_objects_work_inside_compiled_code() -> None:
    """A torchified object met in compiled code (an estimator's method or array attribute, a
    callable ``gaussian_kde``, ``scipy.stats.norm``, a frozen distribution made there) gave
    dynamo's internal errors ("cannot create weak reference", "no attribute '__dict__'", a
    RecursionError while a proxy was being built); each now gives the eager result."""
    data = torch.rand(10, 2, dtype=torch.float64)
    scaler = ac.torchify(_Scaler)().fit(data)
    kde = _stats.gaussian_kde(data[:, 0])
    x = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)
    calls = [
        lambda: scaler.transform(data[:3]) + 1,
        lambda: data[:3] * scaler.scale_,
        lambda: kde(x) + 1,
        lambda: _stats.norm.cdf(x) * 2,
        lambda: _stats.norm(0.0, 2.0).pdf(x) + 1,
    ]
    for call in calls:
        torch._dynamo.reset()
        assert torch.allclose(torch.compile(call, backend="eager")(), call())


def _numpy_only(a: np.ndarray) -> np.ndarray:
    return np.tanh(a) * 2 + a.sum()


def _with_scipy(a: np.ndarray) -> np.ndarray:
    return scipy.ndimage.uniform_filter(a, 3) + 1


_PRODUCTS = {
    "pair": lambda f: ac.returns_tensor(ac.accepts_numpy(f)),
    "accepts_numpy": ac.accepts_numpy,
    "adapt": ac.adapt,
    "torchify": ac.torchify,
    "batched": lambda f: ac.batched(ac.returns_tensor(ac.accepts_numpy(f))),
    "numpy_op": ac.numpy_op,
}


@pytest.mark.parametrize(
    "body", [_numpy_only, _with_scipy, doubled_by_nditer.__wrapped__], ids=["numpy", "scipy", "nditer"]
)
@pytest.mark.parametrize("product", sorted(_PRODUCTS))
def test_every_product_gives_under_compile_what_it_gives_eagerly(product: str, body: Any) -> None:
    """The same type and values: a torchified plain function once handed its tensors straight
    to the body under compile (dynamo took the proxy for the function) and gave an ndarray."""
    made = _PRODUCTS[product](body)
    x = torch.rand(3, 4, dtype=torch.float64)
    eager = made(x)
    compiled = torch.compile(lambda v: made(v), backend="aot_eager")(x)
    assert type(compiled) is type(eager)
    np.testing.assert_allclose(np.asarray(compiled), np.asarray(eager))


def test_the_reverse_pair_gives_under_compile_what_it_gives_eagerly() -> None:
    reverse = ac.returns_numpy(ac.accepts_tensor(lambda t: torch.sort(t).values))
    a = np.random.default_rng(0).random((3, 4))
    compiled = torch.compile(lambda v: reverse(v), backend="aot_eager")(a)
    assert type(compiled) is np.ndarray
    np.testing.assert_allclose(compiled, reverse(a))
