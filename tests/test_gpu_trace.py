"""The trace route on an accelerator: NumPy-only bodies compiled into the graph run on the device.

Each body of the catalogue, compiled with ``fullgraph=True`` on device tensors, runs there with
no transfer, and gives the CPU's eager values and the CPU's traced gradients. The escape
(``compile="escape"``, and the bodies whose code makes arrays on the CPU) is the host round
trip: one transfer each way.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch
import torch._dynamo
from torch.utils._pytree import tree_flatten, tree_map

import autoconvert as ac

from .compile_catalogue import (
    MADE_ON_THE_CPU,
    ON_THE_TRACE_ROUTE,
    TRACED,
    Body,
    assert_close_trees,
    decorated,
    inputs,
    skip_where_torch_refuses,
)

pytestmark = ON_THE_TRACE_ROUTE

#: The bodies traced on the device too.
ON_THE_DEVICE = [b for b in TRACED if b.name not in MADE_ON_THE_CPU]
#: A few bodies for inductor (Triton kernels, compiled on the GPU): a reduction, a scan, broadcasting.
INDUCTOR = ("mse", "cumulative_returns", "box_iou")


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _on(device: torch.device, value: Any) -> Any:
    return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, value)


def _weighted_sum(result: Any) -> torch.Tensor:
    """A scalar of the floating results, each weighted (a softmax's plain sum has no gradient)."""
    floats = [t for t in tree_flatten(result)[0] if t.is_floating_point()]
    weights = [torch.linspace(0.5, 1.5, t.numel(), dtype=t.dtype).reshape(t.shape).to(t.device) for t in floats]
    return sum((t * w).sum() for t, w in zip(floats, weights, strict=True))  # type: ignore[return-value]


def _compiled_call(body: Body, backend: str, args: list[torch.Tensor]) -> tuple[Any, list[Any]]:
    """``body`` decorated and compiled fullgraph, called on ``args`` (made to require grad where it
    is differentiable): its result, and the gradients of ``_weighted_sum`` of it (None each where
    it is not differentiable)."""
    torch._dynamo.reset()
    compiled = torch.compile(decorated(body), backend=backend, fullgraph=True)
    leaves = [a.detach().clone().requires_grad_(body.differentiable) for a in args]
    result = compiled(*leaves, *body.plain)
    if not body.differentiable:
        return result, [None] * len(leaves)
    _weighted_sum(result).backward()
    return result, [leaf.grad for leaf in leaves]


def _check_on_the_device(accelerator: torch.device, body: Body, backend: str) -> None:
    skip_where_torch_refuses(body)
    host = inputs(body)
    expected = decorated(body)(*host, *body.plain)  # the CPU's eager values
    _, expected_grads = _compiled_call(body, "aot_eager", host)  # the CPU's traced gradients
    on_device = _on(accelerator, host)
    before = [a.clone() for a in on_device]
    # fullgraph=True: the escape, the library's one crossing to the host, would be a graph break
    # it refuses (a config or stats block around the call would itself take the escape).
    got, grads = _compiled_call(body, backend, on_device)
    for t in tree_flatten(got)[0]:
        assert t.device == accelerator
    assert_close_trees(expected, _on(torch.device("cpu"), tree_map(torch.Tensor.detach, got)))
    for e, g in zip(expected_grads, grads, strict=True):
        if e is None:
            assert g is None
        else:
            assert g.device == accelerator
            torch.testing.assert_close(g.cpu(), e)
    for a, b in zip(on_device, before, strict=True):
        assert torch.equal(a, b)  # the caller's tensors unchanged (writes go to a private copy)


#: Bodies clipping by Python numbers (``np.clip(x, 0.2, 0.8)``, ``np.clip(d, 0, None)``): torch's
#: eager backends hand the bounds to CUDA's clamp as 0-d CPU tensors, which it refuses, the line
#: written by hand too (pytorch#94174); inductor, torch.compile's default, compiles them.
_CLIPPED_BY_NUMBERS = frozenset(["clipped", "binary_cross_entropy", "focal_weight", "box_iou"])


@pytest.mark.parametrize("body", ON_THE_DEVICE, ids=[b.name for b in ON_THE_DEVICE])
def test_each_body_compiles_fullgraph_on_the_device(accelerator: torch.device, body: Body) -> None:
    """aot_eager (inductor where it refuses the body by hand too), fullgraph=True: on the device,
    no transfer, the CPU's values and gradients."""
    _check_on_the_device(accelerator, body, "inductor" if body.name in _CLIPPED_BY_NUMBERS else "aot_eager")


@pytest.mark.parametrize("body", [b for b in ON_THE_DEVICE if b.name in INDUCTOR], ids=lambda b: b.name)
def test_inductor_compiles_the_trace_on_the_device(accelerator: torch.device, body: Body) -> None:
    """inductor, fullgraph=True: Triton kernels on the device, the CPU's values and gradients."""
    _check_on_the_device(accelerator, body, "inductor")


@pytest.mark.parametrize("name", sorted(MADE_ON_THE_CPU))
def test_bodies_making_arrays_on_the_cpu_take_the_escape_on_the_device(accelerator: torch.device, name: str) -> None:
    """np.eye, np.linspace, np.cross make their arrays on the CPU in torch's NumPy tracing:
    with device tensors the call takes the escape (fullgraph=True refuses its graph break),
    the host round trip, and gives the eager values back on the device."""
    body = next(b for b in TRACED if b.name == name)
    pair = decorated(body)
    host = inputs(body)
    on_device = _on(accelerator, host)
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(pair, backend="aot_eager", fullgraph=True)(*on_device, *body.plain)
    torch._dynamo.reset()
    with ac.stats() as counted:
        got = torch.compile(pair, backend="aot_eager")(*on_device, *body.plain)
    assert got.device == accelerator
    assert counted[body.body.__name__].copies["transfer"] == len(on_device) + 1  # the arguments in, the result out
    assert_close_trees(pair(*host, *body.plain), got.cpu())


def _tanh_of_sine(a: np.ndarray) -> np.ndarray:
    return np.tanh(np.sin(a) * 2)


# torch 2.13's dynamo warns at a graph break over a non-leaf tensor that requires grad (see
# test_compile): not ours to silence.
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf Tensor:UserWarning")
def test_the_escape_on_the_device_is_one_transfer_each_way(accelerator: torch.device) -> None:
    """compile='escape': one graph break, the body run on host arrays, one transfer each way;
    the result on the device, and the gradient as on the CPU (the escape drops the body's,
    with a GradientWarning; the step's own torch part keeps its)."""
    results = {}
    for device in (torch.device("cpu"), accelerator):
        escaped = ac.returns_tensor(ac.accepts_numpy(compile="escape")(_tanh_of_sine))  # each warns once

        def step(v: torch.Tensor, escaped: Any = escaped) -> torch.Tensor:
            return escaped(v * 2) + v

        torch._dynamo.reset()
        x = torch.linspace(0, 1, 8, dtype=torch.float64).to(device).requires_grad_()
        with ac.stats() as counted, pytest.warns(ac.GradientWarning):
            out = torch.compile(step, backend="aot_eager")(x)
        assert out.device == device
        assert counted["_tanh_of_sine"].calls == 1
        assert counted["_tanh_of_sine"].copies["transfer"] == (0 if device.type == "cpu" else 2)
        assert counted["_tanh_of_sine"].bytes["transfer"] == (0 if device.type == "cpu" else 2 * x.nbytes)
        out.sum().backward()
        results[device.type] = (out.detach().cpu(), x.grad.cpu())
    expected, got = results["cpu"], results[accelerator.type]
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(expected[1], torch.ones(8, dtype=torch.float64))  # from `+ v` alone
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the escape's words, and no other
        assert ac.explain(escaped).compiled == (
            "each call is one graph break, the body run eagerly: compile='escape' was given"
        )


def _times(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    return x * s


def test_tensors_on_the_device_and_the_cpu_take_the_escape_as_eagerly(accelerator: torch.device) -> None:
    """A device tensor beside a 1-d CPU tensor, which would meet in the graph in dynamo's
    device mismatch: the call takes the escape, to the eager call's DeviceMismatchError, or,
    given device=, its host round trip and result."""
    x = torch.rand(3, dtype=torch.float64, device=accelerator)
    s = torch.rand(3, dtype=torch.float64)
    refusing = ac.returns_tensor(ac.accepts_numpy(_times))
    with pytest.raises(ac.DeviceMismatchError) as eager:
        refusing(x, s)
    with pytest.raises(ac.DeviceMismatchError) as compiled:
        torch.compile(refusing, backend="aot_eager")(x, s)
    assert str(compiled.value) == str(eager.value)
    torch._dynamo.reset()
    placed = ac.returns_tensor(ac.accepts_numpy(_times), device=accelerator)
    got = torch.compile(placed, backend="aot_eager")(x, s)
    expected = placed(x, s)
    assert got.device == expected.device
    torch.testing.assert_close(got, expected)
