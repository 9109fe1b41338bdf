"""The catalogue of SciPy rules: a loss's forward and backward through a rule against the
forward alone, per family, and the 256 x 256 Gaussian filter's gradient against a central
difference and against kornia's Gaussian blur (where kornia is installed)."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.integrate
import scipy.interpolate
import scipy.linalg
import scipy.ndimage
import scipy.signal
import scipy.special
import torch

import autoconvert as ac

from .harness import Row, compare, synced

Settings = dict[str, Any]
Loss = Callable[[torch.Tensor], torch.Tensor]

FORWARD = "SciPy's forward alone"
BOTH = "forward + backward through the rule"
SIGMA = 2.0


@dataclasses.dataclass(frozen=True)
class Family:
    """One function of a family: ``fn(*args, **kwargs)``, the argument at ``position`` a tensor
    that requires grad, and the loss read off the result (a complex one's envelope)."""

    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    position: int
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    loss: Loss = torch.sum


def _backward_cost(name: str, forward: Callable[[], Any], both: Callable[[], Any], settings: Settings) -> list[Row]:
    """SciPy's forward alone against forward and backward through the rule, the backward's
    cost in the forward's said in the note."""
    rows = compare(
        name, FORWARD, {FORWARD: forward, BOTH: both}, max(5, settings["copy_repeats"]), settings["target_s"]
    )
    for row in rows:
        if row.ratio is not None:
            row.note = f"the backward costs {row.ratio - 1:.1f}x the forward"
    return rows


def _family(family: Family, settings: Settings) -> list[Row]:
    """A family's function through ``numpy_op`` (see ``_backward_cost``)."""
    op = ac.numpy_op(family.fn)
    given = list(family.args)
    given[family.position] = torch.tensor(family.args[family.position], requires_grad=True)

    def both() -> None:
        family.loss(op(*given, **family.kwargs)).backward()

    return _backward_cost(family.name, lambda: family.fn(*family.args, **family.kwargs), both, settings)


def _built(rng: np.random.Generator, settings: Settings) -> list[Row]:
    """Interpolants built through a torchified scipy.interpolate, built and read in each call,
    with gradients in the samples and the points read (see ``_backward_cost``)."""
    interpolate = ac.torchify(scipy.interpolate)
    knots, samples, at = np.linspace(0.0, 10.0, 100), rng.standard_normal(100), rng.random(10_000) * 10
    knots_t = torch.tensor(knots)
    samples_t, at_t = torch.tensor(samples, requires_grad=True), torch.tensor(at, requires_grad=True)

    def spline() -> None:
        interpolate.CubicSpline(knots_t, samples_t)(at_t).sum().backward()

    grid = (np.linspace(0.0, 1.0, 64), np.linspace(0.0, 1.0, 64))
    values, xi = rng.random((64, 64)), rng.random((10_000, 2))
    values_t, xi_t = torch.tensor(values, requires_grad=True), torch.tensor(xi, requires_grad=True)

    def grid_interpolator() -> None:
        interpolate.RegularGridInterpolator(grid, values_t)(xi_t).sum().backward()

    return _backward_cost(
        "interpolate.CubicSpline through torchify, 100 knots read at 10,000 points, in y and the points",
        lambda: scipy.interpolate.CubicSpline(knots, samples)(at),
        spline,
        settings,
    ) + _backward_cost(
        "interpolate.RegularGridInterpolator through torchify, linear, 64 x 64 read at 10,000 points, "
        "in the values and the points",
        lambda: scipy.interpolate.RegularGridInterpolator(grid, values)(xi),
        grid_interpolator,
        settings,
    )


def _kornia(
    image: np.ndarray, rule: Callable[[torch.Tensor, str], torch.Tensor]
) -> tuple[Callable[[], None], str] | None:
    """The same loss through kornia's ``gaussian_blur2d``, forward and backward (None without
    kornia), and its row's note. Its ``"reflect"`` (torch's padding, NumPy's) is SciPy's
    ``"mirror"``: the blur and the gradient are asserted equal to SciPy's and the rule's in
    that mode, so the two compute the same thing; ``rule(t, mode)`` is the rule's blur."""
    if importlib.util.find_spec("kornia") is None:
        return None
    import kornia.filters

    size = 2 * int(4.0 * SIGMA + 0.5) + 1  # SciPy's radius at its default truncate=4.0
    x, y = torch.tensor(image, requires_grad=True), torch.tensor(image, requires_grad=True)

    def blur(t: torch.Tensor) -> torch.Tensor:
        return kornia.filters.gaussian_blur2d(t[None, None], size, (SIGMA, SIGMA), border_type="reflect")[0, 0]

    blurred = blur(x)
    expected = scipy.ndimage.gaussian_filter(image, SIGMA, mode="mirror")
    assert np.allclose(blurred.detach().numpy(), expected, rtol=0, atol=1e-12)
    (blurred**2).sum().backward()
    (rule(y, "mirror") ** 2).sum().backward()
    assert x.grad is not None
    assert y.grad is not None
    assert torch.allclose(x.grad, y.grad, rtol=0, atol=1e-12)

    def forward_and_backward() -> None:
        x.grad = None
        (blur(x) ** 2).sum().backward()

    note = (
        f"forward + backward, {size} taps (SciPy's truncate=4.0); its border_type 'reflect' is SciPy's "
        "'mirror': blur and gradient asserted equal to SciPy's and the rule's in that mode"
    )
    return forward_and_backward, note


def gradients(settings: Settings) -> list[Row]:
    """The Gaussian filter's loss, then one function of each family (see ``_backward_cost``)."""
    repeats, target = max(5, settings["copy_repeats"]), settings["target_s"]
    rng = np.random.default_rng(0)
    image = rng.random((256, 256))
    x = torch.tensor(image, requires_grad=True)
    blur = ac.torchify(scipy.ndimage).gaussian_filter

    def filtered(t: torch.Tensor, mode: str) -> torch.Tensor:
        return blur(t, SIGMA, mode=mode)  # type: ignore[no-any-return]

    def loss(t: torch.Tensor) -> torch.Tensor:
        return (filtered(t, "reflect") ** 2).sum()

    loss(x).backward()
    assert x.grad is not None
    direction = torch.tensor(rng.standard_normal(image.shape))
    step = 1e-6

    def central() -> float:
        with torch.no_grad():
            return float((loss(x + step * direction) - loss(x - step * direction)) / (2 * step))

    exact = float((x.grad * direction).sum())
    error = abs(central() - exact) / abs(exact)
    assert error < 1e-6, error

    def forward_and_backward() -> None:
        x.grad = None
        loss(x).backward()

    contenders: dict[str, Callable[[], Any]] = {
        FORWARD: lambda: scipy.ndimage.gaussian_filter(image, SIGMA, mode="reflect"),
        BOTH: forward_and_backward,
        "central difference along one direction (2 forwards)": central,
    }
    kornia = _kornia(image, filtered)
    if kornia is not None:
        contenders["kornia.filters.gaussian_blur2d"] = kornia[0]
    rows = compare("gaussian_filter loss, 256 x 256, sigma 2, reflect", FORWARD, contenders, repeats, target)
    rows[1].note = f"agrees with the central difference to {error:.1e} (relative)"
    if kornia is None:
        rows[0].note = "kornia.filters.gaussian_blur2d skipped: kornia is not installed (the recipes extra)"
    else:
        rows[-1].note = kornia[1]
    b, a = scipy.signal.butter(4, 0.2)
    square = rng.random((128, 128))
    families = [
        Family(
            "ndimage.correlate, 128 x 128, 5 x 5 weights, mirror",
            scipy.ndimage.correlate,
            (rng.random((128, 128)), rng.random((5, 5))),
            0,
            {"mode": "mirror"},
        ),
        Family(
            "ndimage.rotate, 128 x 128 by 30 degrees, order 1", scipy.ndimage.rotate, (square, 30.0), 0, {"order": 1}
        ),
        Family(
            "ndimage.rotate, 128 x 128 by 30 degrees, order 3", scipy.ndimage.rotate, (square, 30.0), 0, {"order": 3}
        ),
        Family("signal.fftconvolve, 4,096 by 257", scipy.signal.fftconvolve, (rng.random(4096), rng.random(257)), 0),
        Family("signal.lfilter, order 4, 4,096 samples", scipy.signal.lfilter, (b, a, rng.random(4096)), 2),
        Family("signal.filtfilt, order 4, 4,096 samples", scipy.signal.filtfilt, (b, a, rng.random(4096)), 2),
        Family(
            "signal.hilbert, 4,096 samples, the envelope's sum",
            scipy.signal.hilbert,
            (rng.random(4096),),
            0,
            loss=lambda out: out.abs().sum(),
        ),
        Family("signal.resample, 1,024 samples to 512", scipy.signal.resample, (rng.random(1024), 512), 0),
        Family("integrate.trapezoid, 64 x 1,000", scipy.integrate.trapezoid, (rng.random((64, 1000)),), 0),
        Family("linalg.expm, 32 x 32", scipy.linalg.expm, (rng.standard_normal((32, 32)) * 0.1,), 0),
        Family("special.jv, order 1.5, 10,000 points", scipy.special.jv, (1.5, rng.random(10_000) * 10), 1),
    ]
    for family in families:
        rows += _family(family, settings)
    return rows + _built(rng, settings)


ON_CPU = "on a CPU tensor"
ON_CUDA = "on a CUDA tensor (its crossings)"


def gpu_gradients(settings: Settings) -> list[Row]:
    """Forward and backward through a rule on a CUDA tensor against the same on a CPU tensor:
    the rule runs on the host either way, so the difference is the crossings (the forward's
    argument to the host and result back; the backward's gradient, argument and result to the
    host and the gradient back). Skipped without CUDA."""
    if not torch.cuda.is_available():
        return []
    return _crossing_costs(torch.device("cuda", torch.cuda.current_device()), settings)


def _crossing_costs(device: torch.device, settings: Settings) -> list[Row]:
    """``gpu_gradients``' rows, its tensors on ``device`` against the CPU's."""
    repeats, target = max(5, settings["copy_repeats"]), settings["target_s"]
    rng = np.random.default_rng(0)
    b, a = scipy.signal.butter(4, 0.2)
    spd = rng.standard_normal((64, 64)) * 0.1
    nd, sig, lin, sp = (ac.torchify(m) for m in (scipy.ndimage, scipy.signal, scipy.linalg, scipy.special))
    image, signals, matrix = rng.random((512, 512)), rng.random((8, 16_384)), spd @ spd.T + np.eye(64)
    families = [  # each through its torchified module: the host path, taking the rule
        Family("ndimage.gaussian_filter, 512 x 512, sigma 2", nd.gaussian_filter, (image, SIGMA), 0),
        Family("signal.filtfilt, order 4, 8 x 16,384 samples", sig.filtfilt, (b, a, signals), 2),
        Family("linalg.sqrtm, 64 x 64", lin.sqrtm, (matrix,), 0),
        Family("special.jv, order 1.5, 16,384 points", sp.jv, (1.5, rng.random(1 << 14) * 10), 1),
    ]
    rows: list[Row] = []
    for family in families:
        contenders = {ON_CPU: _through(family, torch.device("cpu")), ON_CUDA: synced(device, _through(family, device))}
        rows += compare(f"{family.name}, forward + backward through the rule", ON_CPU, contenders, repeats, target)
        kib = np.asarray(family.args[family.position]).nbytes / 1024
        rows[-1].note = f"{kib:,.0f} KiB crosses 4 times to the host (forward 1, backward 3) and twice back"
    return rows


def _through(family: Family, device: torch.device) -> Callable[[], None]:
    """Forward and backward through ``family.fn``, a torchified function, its argument at
    ``family.position`` a tensor on ``device`` that requires grad."""
    given = list(family.args)
    leaf = torch.tensor(family.args[family.position], device=device, requires_grad=True)
    given[family.position] = leaf

    def run() -> None:
        leaf.grad = None
        family.loss(family.fn(*given, **family.kwargs)).backward()

    return run
