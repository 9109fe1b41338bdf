"""The catalogue of SciPy rules: a loss's forward and backward through a rule against the
forward alone, per family, and the 256 x 256 Gaussian filter's gradient against a central
difference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.integrate
import scipy.linalg
import scipy.ndimage
import scipy.signal
import scipy.special
import torch

import autoconvert as ac

from .harness import Row, compare

Settings = dict[str, Any]


def _family(name: str, fn: Any, args: tuple[Any, ...], position: int, settings: Settings, **kwargs: Any) -> list[Row]:
    """One function's forward alone (SciPy on the arrays) against forward and backward
    through its rule, the argument at ``position`` a tensor that requires grad."""
    op = ac.numpy_op(fn)
    given = list(args)
    given[position] = torch.tensor(args[position], requires_grad=True)

    def both() -> None:
        op(*given, **kwargs).sum().backward()

    rows = compare(
        name,
        "SciPy's forward alone",
        {"SciPy's forward alone": lambda: fn(*args, **kwargs), "forward + backward through the rule": both},
        max(5, settings["copy_repeats"]),
        settings["target_s"],
    )
    for row in rows:
        if row.ratio is not None:
            row.note = f"the backward costs {row.ratio - 1:.1f}x the forward"
    return rows


def gradients(settings: Settings) -> list[Row]:
    """The Gaussian filter's loss, then one function of each family (see ``_family``)."""
    repeats, target = max(5, settings["copy_repeats"]), settings["target_s"]
    rng = np.random.default_rng(0)
    image = rng.random((256, 256))
    x = torch.tensor(image, requires_grad=True)
    blur = ac.torchify(scipy.ndimage).gaussian_filter

    def loss(t: torch.Tensor) -> torch.Tensor:
        return (blur(t, 2.0, mode="reflect") ** 2).sum()

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

    rows = compare(
        "gaussian_filter loss, 256 x 256, sigma 2, reflect",
        "SciPy's forward alone",
        {
            "SciPy's forward alone": lambda: scipy.ndimage.gaussian_filter(image, 2.0, mode="reflect"),
            "forward + backward through the rule": forward_and_backward,
            "central difference along one direction (2 forwards)": central,
        },
        repeats,
        target,
    )
    rows[1].note = f"agrees with the central difference to {error:.1e} (relative)"
    b, a = scipy.signal.butter(4, 0.2)
    families: list[tuple[str, Callable[..., Any], tuple[Any, ...], int, dict[str, Any]]] = [
        (
            "ndimage.correlate, 128 x 128, 5 x 5 weights, mirror",
            scipy.ndimage.correlate,
            (rng.random((128, 128)), rng.random((5, 5))),
            0,
            {"mode": "mirror"},
        ),
        ("signal.fftconvolve, 4,096 by 257", scipy.signal.fftconvolve, (rng.random(4096), rng.random(257)), 0, {}),
        ("signal.lfilter, order 4, 4,096 samples", scipy.signal.lfilter, (b, a, rng.random(4096)), 2, {}),
        ("integrate.trapezoid, 64 x 1,000", scipy.integrate.trapezoid, (rng.random((64, 1000)),), 0, {}),
        ("linalg.expm, 32 x 32", scipy.linalg.expm, (rng.standard_normal((32, 32)) * 0.1,), 0, {}),
        ("special.jv, order 1.5, 10,000 points", scipy.special.jv, (1.5, rng.random(10_000) * 10), 1, {}),
    ]
    for name, fn, args, position, kwargs in families:
        rows += _family(name, fn, args, position, settings, **kwargs)
    return rows
