"""``numpy_op`` under torch.func: grad, vjp, jacrev, vmap, jvp and jacfwd in any order, each
compared with a Python loop of ``torch.autograd`` calls on the same op."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.func import grad, jacfwd, jacrev, jvp, vjp, vmap

import autoconvert as ac


def _erfcx_grad(g: np.ndarray, x: np.ndarray, output: np.ndarray) -> np.ndarray:
    return g * (2 * x * output - 2 / np.sqrt(np.pi))


def _erfcx_jvp(t: np.ndarray, x: np.ndarray, output: np.ndarray) -> np.ndarray:
    return t * (2 * x * output - 2 / np.sqrt(np.pi))


# torch.func.jvp's first use scripts its decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest (2.4-2.12
# do not warn).
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning"),
]

OPS = {
    f"{mode}{'-fake' if fake else ''}": ac.numpy_op(
        scipy.special.erfcx, backward=_erfcx_grad, jvp=_erfcx_jvp, vmap=mode, **({"fake": "x"} if fake else {})
    )
    for mode in ("sequential", "vectorized")
    for fake in (False, True)
}
X = torch.linspace(0.1, 2.0, 6, dtype=torch.float64)
XS = torch.linspace(-1.0, 1.0, 12, dtype=torch.float64).reshape(4, 3)
W = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)


def _autograd_grad(f: Any, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The gradient of scalar ``f(*inputs)`` by torch.autograd.grad: what a loop would call."""
    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    return torch.autograd.grad(f(*leaves), leaves)


@pytest.mark.parametrize("name", OPS)
def test_grad_vjp_and_jacrev_give_what_autograd_gives(name: str) -> None:
    op = OPS[name]
    (expected,) = _autograd_grad(lambda v: op(v).sum(), X)
    assert torch.allclose(grad(lambda v: op(v).sum())(X), expected)
    out, pullback = vjp(op, X)
    assert torch.allclose(out, op(X)) and torch.allclose(pullback(torch.ones_like(X))[0], expected)
    jacobian = torch.autograd.functional.jacobian(op, X)
    assert torch.allclose(jacrev(op)(X), jacobian) and torch.allclose(jacobian, torch.diag(expected))


@pytest.mark.parametrize("name", OPS)
def test_vmap_gives_what_a_loop_gives(name: str) -> None:
    op = OPS[name]
    loop = torch.stack([op(row) for row in XS])
    assert torch.allclose(vmap(op)(XS), loop)
    assert torch.allclose(vmap(op, in_dims=1, out_dims=1)(XS.T), loop.T)


@pytest.mark.parametrize("name", OPS)
def test_per_sample_gradients_compose_in_either_order(name: str) -> None:
    """Opacus' pattern, ``vmap(grad(loss), in_dims=(None, 0))``, against a loop of
    ``torch.autograd.grad`` calls; and ``jacrev(vmap(f))`` against the Jacobian of the batch."""
    op = OPS[name]

    def loss(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return op(w * x).sum()

    loop = torch.stack([_autograd_grad(lambda w, x=x: loss(w, x), W)[0] for x in XS])
    assert torch.allclose(vmap(grad(loss), in_dims=(None, 0))(W, XS), loop)
    batch_jacobian = torch.autograd.functional.jacobian(vmap(op), XS)
    assert torch.allclose(jacrev(vmap(op))(XS), batch_jacobian)
    assert torch.allclose(grad(lambda w: vmap(lambda x: loss(w, x))(XS).sum())(W), loop.sum(0))


@pytest.mark.parametrize("name", OPS)
def test_forward_mode_uses_the_jvp_rule(name: str) -> None:
    op = OPS[name]
    (expected,) = _autograd_grad(lambda v: op(v).sum(), X)
    out, tangent = jvp(op, (X,), (torch.ones_like(X),))
    assert torch.allclose(out, op(X)) and torch.allclose(tangent, expected)
    assert torch.allclose(jacfwd(op)(X), torch.diag(expected))
    assert torch.allclose(vmap(jacfwd(op))(XS), vmap(jacrev(op))(XS))


def test_an_op_with_two_arguments_and_a_tuple_result() -> None:
    """Gradients for each positional tensor; a tuple result's gradients come as a tuple."""

    def both(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return x * y, x + y

    def both_grad(g: tuple[np.ndarray, np.ndarray], x: np.ndarray, y: np.ndarray, output: Any) -> Any:
        return g[0] * y + g[1], g[0] * x + g[1]

    op = ac.numpy_op(both, backward=both_grad)
    x, y = XS[0], XS[1]

    def total(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        product, summed = op(a, b)
        return (product + 2 * summed).sum()

    expected = _autograd_grad(total, x, y)
    found = grad(total, argnums=(0, 1))(x, y)
    assert all(torch.allclose(f, e) for f, e in zip(found, expected, strict=True))
    assert torch.allclose(
        vmap(total)(XS, XS.flip(0)), torch.stack([total(a, b) for a, b in zip(XS, XS.flip(0), strict=True)])
    )


def test_without_rules_the_transforms_say_which_rule_is_missing() -> None:
    """No backward: vmap works (sequentially), a gradient raises naming backward=, never a zero;
    no jvp: forward mode raises naming jvp=."""
    plain = ac.numpy_op(scipy.special.erfcx)
    assert torch.allclose(vmap(plain)(XS), torch.stack([plain(row) for row in XS]))
    with pytest.raises(ac.GradientError) as info:
        grad(lambda v: plain(v).sum())(X)
    assert str(info.value) == (
        "erfcx(): the numpy_op was asked for a gradient, and has no NumPy rule for it. Found a numpy_op without "
        "backward=. Fix: pass backward= to autoconvert.numpy_op."
    )
    reverse_only = ac.numpy_op(scipy.special.erfcx, backward=_erfcx_grad)
    with pytest.raises(ac.GradientError) as info:
        jacfwd(reverse_only)(X)
    assert str(info.value) == (
        "erfcx(): the numpy_op was asked for forward-mode derivatives (torch.func.jvp, jacfwd), and has no NumPy "
        "rule for it. Found a numpy_op without jvp=. Fix: pass jvp= to autoconvert.numpy_op."
    )
    for second in (jacrev(jacrev(reverse_only)), jacfwd(jacrev(OPS["sequential"]))):
        with pytest.raises(RuntimeError, match=r"erfcx\(\): double backward is not supported: its backward is NumPy"):
            second(X)
    with pytest.raises(RuntimeError, match=r"erfcx\(\): derivatives of its jvp are not supported"):
        jacrev(jacfwd(OPS["sequential"]))(X)
    with pytest.raises(ValueError, match="vmap= takes 'sequential' or 'vectorized', got 'parallel'"):
        ac.numpy_op(np.sin, vmap="parallel")  # type: ignore[call-overload]


def test_the_plain_pair_under_a_transform_names_numpy_op() -> None:
    """A decorated function (not a numpy_op) under torch.func is refused with the fix."""
    pair = ac.returns_tensor(ac.accepts_numpy(scipy.special.erfcx))
    with pytest.raises(ac.ConversionError, match=r"make the function a autoconvert.numpy_op\(backward=...\)"):
        grad(lambda v: pair(v).sum())(X)


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 5),
    size=st.integers(1, 4),
    dim=st.integers(0, 1),
)
def test_sequential_and_vectorized_agree(batch: int, size: int, dim: int) -> None:
    """Over batch sizes, sample sizes and the batch dim's place: both modes give the loop's
    values and per-sample gradients."""
    xs = torch.linspace(-1.5, 1.5, batch * size, dtype=torch.float64).reshape(batch, size)
    xs = xs if dim == 0 else xs.T.contiguous()
    sequential, vectorized = OPS["sequential"], OPS["vectorized"]
    for op in (sequential, vectorized):
        values = vmap(op, in_dims=dim)(xs)
        assert torch.allclose(values, vmap(sequential, in_dims=dim)(xs))
        per_sample = vmap(grad(lambda v, op=op: op(v * W[0]).sum()), in_dims=dim)(xs)
        loop = torch.stack([_autograd_grad(lambda v: sequential(v * W[0]).sum(), row)[0] for row in xs.movedim(dim, 0)])
        assert torch.allclose(per_sample, loop)
