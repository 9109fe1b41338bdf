"""The catalogue's SciPy rules on CUDA tensors: torchify's host path takes each rule, results and
gradients come back on the caller's device, equal to the same call on the CPU, and the crossings
are the ones the rule's code makes (counted both by ``stats`` and by the copies torch runs).

Every rule is NumPy on the host (autoconvert/_gradients): its backward hands the rule the
incoming gradient, the call's tensor arguments and its results as NumPy arrays, each copied
from the device (``OpSpec.gradients``), and puts each gradient it gives back on its argument's
device. A tensor that requires grad never takes CuPy's path (CuPy's functions have no
gradient), so on a GPU with CuPy each call here is the host path with the rule.

Each test taking the ``accelerator`` fixture is a GPU test, skipped where none exists.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.integrate
import scipy.interpolate
import scipy.linalg
import scipy.ndimage
import scipy.signal
import scipy.special
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import autoconvert as ac

HAS_CUPY = importlib.util.find_spec("cupy") is not None


@dataclasses.dataclass(frozen=True)
class Case:
    """One torchified SciPy call: ``module.name`` on ``tensors`` (made on a device, at the
    ``places`` in its positional arguments, the other arguments as given), the gradient taken
    in every tensor."""

    module: str
    name: str
    args: tuple[Any, ...]
    places: tuple[int, ...]
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    results: int = 1

    @property
    def id(self) -> str:
        return f"{self.module.rpartition('.')[2]}.{self.name}"

    def function(self) -> Callable[..., Any]:
        return getattr(ac.torchify(importlib.import_module(self.module)), self.name)  # type: ignore[no-any-return]

    def leaves(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        """The call's tensors on ``device``, float64, requiring grad."""
        return tuple(
            torch.tensor(self.args[k], dtype=torch.float64, device=device, requires_grad=True) for k in self.places
        )

    def call(self, fn: Callable[..., Any], *tensors: torch.Tensor) -> Any:
        given = list(self.args)
        for k, t in zip(self.places, tensors, strict=True):
            given[k] = t
        return fn(*given, **self.kwargs)


def _rng(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape)


_A = _rng(4, 4) * 0.3
_SPD = _A @ _A.T + np.eye(4)
_GRID = (np.linspace(0.0, 1.0, 5), np.linspace(0.0, 2.0, 6))
_POINTS = np.stack([np.random.default_rng(1).uniform(0.05, 0.95, 7), np.random.default_rng(2).uniform(0.1, 1.9, 7)], 1)

#: One or two rules of each family: filters, ndimage, signal's filters, filtfilt, spectral,
#: linalg, special (a ufunc), integrate, interpolate.
CASES = [
    Case("scipy.ndimage", "gaussian_filter", (_rng(6, 7), 1.0), (0,), {"mode": "nearest"}),
    Case("scipy.ndimage", "correlate1d", (_rng(9), _rng(3)), (0, 1), {"mode": "wrap"}),
    Case("scipy.signal", "lfilter", (_rng(3), np.array([1.0, -0.5, 0.2]), _rng(2, 16)), (0, 2)),
    Case("scipy.signal", "filtfilt", (np.array([0.2, 0.3]), np.array([1.0, -0.4]), _rng(2, 32)), (2,)),
    Case("scipy.signal", "resample", (_rng(20), 30), (0,)),
    Case("scipy.linalg", "expm", (_A,), (0,)),
    Case("scipy.linalg", "sqrtm", (_SPD,), (0,)),
    Case("scipy.special", "jv", (1.5, np.linspace(0.5, 4.0, 8)), (1,)),
    Case("scipy.integrate", "trapezoid", (_rng(3, 6),), (0,), {"dx": 0.5}),
    Case("scipy.interpolate", "interpn", (_GRID, _rng(5, 6), _POINTS), (1, 2)),
]


class _Crossings(TorchDispatchMode):
    """The copies torch runs between devices while it is active, by direction ("to host",
    "to device"): each ``_to_copy``/``copy_`` whose source and target devices differ. Autograd
    runs a backward with the caller's thread-local state, this mode included."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = {"to host": 0, "to device": 0}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        packet = getattr(func, "overloadpacket", None)
        source = target = None
        if packet is torch.ops.aten._to_copy:
            source, target = args[0].device, out.device
        elif packet is torch.ops.aten.copy_:
            source, target = args[1].device, args[0].device
        if source is not None and source != target:
            self.counts["to host" if target.type == "cpu" else "to device"] += 1
        return out


def test_the_crossing_counter_sees_a_copy_each_way() -> None:
    """The counter the GPU tests read counts cross-device copies (to the meta device here) by
    direction, and nothing for copies on one device."""
    with _Crossings() as seen:
        on_meta = torch.ones(3).to("meta")
        torch.ones(3).clone()
        torch.empty(3).copy_(torch.ones(3))
    assert seen.counts == {"to host": 0, "to device": 1} and on_meta.device.type == "meta"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_rule_on_a_cuda_tensor_is_the_same_call_on_the_cpu(accelerator: torch.device, case: Case) -> None:
    """The result is on the input's device, the rule runs once per backward, the gradients are on
    each input's device, and values and gradients equal the CPU call's. Crossings: the forward
    copies each tensor argument to the host and each result back (``stats`` counts these as
    ``transfer`` copies); the backward copies the incoming gradient, each tensor argument and
    each result to the host (the rule is handed all three as arrays, OpSpec.gradients) and each
    gradient back to the device; nothing else crosses."""
    fn = case.function()
    crosses = int(accelerator.type != "cpu")  # 0 where the test's logic is run on the CPU by hand
    tensors, results = crosses * len(case.places), crosses * case.results
    on_device, on_cpu = case.leaves(accelerator), case.leaves(torch.device("cpu"))
    with ac.stats() as s, _Crossings() as forward:
        result = case.call(fn, *on_device)
    counts = s[case.name]
    assert counts.calls == 1 and counts.cupy == 0  # a tensor that requires grad takes the host path
    assert counts.copies["transfer"] == tensors + results
    assert forward.counts == {"to host": tensors, "to device": results}
    assert result.device == on_device[0].device and result.dtype == torch.float64
    weights = torch.linspace(-1.0, 1.0, result.numel(), dtype=torch.float64).reshape(result.shape)
    with ac.stats() as s:
        loss = (case.call(fn, *on_device) * weights.to(accelerator)).sum()
    with _Crossings() as backward:
        loss.backward()
    assert s[case.name].rule_backwards == 1
    assert backward.counts == {"to host": crosses + tensors + results, "to device": tensors}
    expected = case.call(fn, *on_cpu)
    (expected * weights).sum().backward()
    torch.testing.assert_close(result.cpu(), expected.detach())
    for device_leaf, cpu_leaf in zip(on_device, on_cpu, strict=True):
        assert device_leaf.grad is not None and cpu_leaf.grad is not None
        assert device_leaf.grad.device == device_leaf.device and device_leaf.grad.dtype == torch.float64
        torch.testing.assert_close(device_leaf.grad.cpu(), cpu_leaf.grad)


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[5]], ids=lambda c: c.id)
def test_gradcheck_passes_on_cuda_tensors(accelerator: torch.device, case: Case) -> None:
    """The rules' gradients, and their jvp's tangents (forward mode), on CUDA float64 tensors
    against finite differences."""
    fn = case.function()
    assert torch.autograd.gradcheck(lambda *t: case.call(fn, *t), case.leaves(accelerator), check_forward_ad=True)


@pytest.mark.skipif(not HAS_CUPY, reason="needs CuPy")
def test_cupy_takes_the_call_without_grad_and_the_rule_the_call_with_it(accelerator: torch.device) -> None:
    """The same function on the same CUDA tensor: without grad CuPy runs it on the tensor's memory
    (no crossing); requiring grad, CuPy declines (counted with its reason) and the host path's op
    runs, its backward the catalogue's rule, and the two results agree."""
    view = ac.torchify(scipy.ndimage)
    x = torch.tensor(_rng(16, 16), dtype=torch.float64, device=accelerator)
    with ac.stats() as s:
        plain = view.gaussian_filter(x, 1.5)
    assert s["gaussian_filter"].cupy == 1 and s["gaussian_filter"].copies["transfer"] == 0
    assert plain.device == x.device and not plain.requires_grad
    leaf = x.clone().requires_grad_()
    with ac.stats() as s:
        tracked = view.gaussian_filter(leaf, 1.5)
        tracked.sum().backward()
    counts = s["gaussian_filter"]
    assert counts.cupy == 0 and counts.not_cupy == {"requires grad: CuPy's functions have no gradient": 1}
    assert counts.rule_backwards == 1 and counts.copies["transfer"] == 2
    torch.testing.assert_close(tracked.detach(), plain)
    cpu = x.cpu().requires_grad_()
    view.gaussian_filter(cpu, 1.5).sum().backward()
    assert leaf.grad is not None and cpu.grad is not None and leaf.grad.device == x.device
    torch.testing.assert_close(leaf.grad.cpu(), cpu.grad)


def test_a_spline_built_from_cuda_tensors_keeps_their_gradient_and_its_device(accelerator: torch.device) -> None:
    """A catalogued builder on CUDA tensors: the object's call is the rule's op of the samples it
    kept and the points, its result and both gradients on the device and equal to the CPU's; read
    at a float or a NumPy array with samples that require no grad (no tensor reaches the call), the
    result is still on the spline's device."""
    knots, samples, at = np.linspace(0.0, 3.0, 7), _rng(7), np.array([0.3, 1.1, 2.9])
    interp = ac.torchify(scipy.interpolate)

    def run(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = torch.tensor(samples, device=device, requires_grad=True)
        x = torch.tensor(at, device=device, requires_grad=True)
        result = interp.CubicSpline(torch.tensor(knots, device=device), y)(x)
        (result * torch.arange(1.0, 4.0, dtype=torch.float64, device=device)).sum().backward()
        assert y.grad is not None and x.grad is not None
        return result.detach(), y.grad, x.grad

    on_device, on_cpu = run(accelerator), run(torch.device("cpu"))
    device = torch.empty(0, device=accelerator).device  # with its index
    for got, expected in zip(on_device, on_cpu, strict=True):
        assert got.device == device
        torch.testing.assert_close(got.cpu(), expected)
    plain = interp.CubicSpline(torch.tensor(knots, device=accelerator), torch.tensor(samples, device=accelerator))
    read = [plain(0.5), plain(at), plain.derivative()(0.5)]
    assert [t.device for t in read] == [device] * 3
    torch.testing.assert_close(read[1].cpu(), torch.from_numpy(scipy.interpolate.CubicSpline(knots, samples)(at)))


# torch.func.jvp's first use scripts torch's decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
def test_a_tangent_and_torch_func_on_cuda_take_the_rule(accelerator: torch.device) -> None:
    """A dual tensor (forward_ad), torch.func.jvp and torch.vmap on CUDA tensors: never CuPy's
    path (which would drop the tangent, or cannot read the transform's tensors), the host path's
    op with the rule's jvp, results on the device and equal to the CPU's (a linear filter's
    tangent is the filtered tangent)."""
    view = ac.torchify(scipy.ndimage)
    x, tangent = _rng(6, 7), _rng(7, 6).T.copy()

    def blur(t: torch.Tensor) -> torch.Tensor:
        return view.gaussian_filter(t, 1.0)  # type: ignore[no-any-return]

    def run(device: torch.device) -> list[torch.Tensor]:
        primal, direction = (torch.tensor(a, device=device) for a in (x, tangent))
        with ac.stats() as s, torch.autograd.forward_ad.dual_level():
            dual = blur(torch.autograd.forward_ad.make_dual(primal, direction))
            out, out_tangent = torch.autograd.forward_ad.unpack_dual(dual)
        assert s["gaussian_filter"].cupy == 0 and out_tangent is not None
        _, jvp_tangent = torch.func.jvp(blur, (primal,), (direction,))
        batched = torch.vmap(blur)(torch.stack([primal, direction]))
        return [out, out_tangent, jvp_tangent, batched]

    on_device, on_cpu = run(accelerator), run(torch.device("cpu"))
    device = torch.empty(0, device=accelerator).device
    assert [t.device for t in on_device] == [device] * 4
    for got, expected in zip(on_device, on_cpu, strict=True):
        torch.testing.assert_close(got.cpu(), expected)
    filtered = torch.from_numpy(scipy.ndimage.gaussian_filter(tangent, 1.0))
    torch.testing.assert_close(on_cpu[1], filtered)
    torch.testing.assert_close(on_cpu[2], filtered)
