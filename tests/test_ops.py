"""numpy_op(backward=...): NumPy functions in the autograd graph."""

from __future__ import annotations

import pickle
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.linalg
import torch
import torch._dynamo

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


def test_double_backward_raises_clearly() -> None:
    x = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(sin(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=r"sin\(\): double backward is not supported: its backward is NumPy code"):
        g.sum().backward()


def test_a_backward_returning_the_wrong_count_is_named() -> None:
    bad = ac.numpy_op(np.add, backward=lambda g, x, y, output: g)
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(ac.ConversionError, match=r"must return 2 gradient\(s\), one per positional tensor argument"):
        bad(x, torch.ones(2, requires_grad=True)).sum().backward()


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


def test_module_level_ops_pickle_by_reference() -> None:
    assert pickle.loads(pickle.dumps(sqrtm)) is sqrtm
