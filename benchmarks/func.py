"""``numpy_op`` under torch.func: per-sample gradients and vmap, against the loops they replace."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.special
import torch
from torch.func import grad, vmap

import autoconvert as ac

from .harness import Row, compare

Settings = dict[str, Any]


def _erfcx_grad(g: np.ndarray, x: np.ndarray, output: np.ndarray) -> np.ndarray:
    return g * (2 * x * output - 2 / np.sqrt(np.pi))


def func_transforms(settings: Settings) -> list[Row]:
    """``vmap(grad(loss))`` over 64 samples against a loop of ``torch.autograd.grad`` calls,
    and ``vmap`` of a sequential against a vectorized op over a 64 x 1,000 batch."""
    repeats, target = max(5, settings["copy_repeats"]), settings["target_s"]
    sequential = ac.numpy_op(scipy.special.erfcx, backward=_erfcx_grad)
    vectorized = ac.numpy_op(scipy.special.erfcx, backward=_erfcx_grad, vmap="vectorized")
    w = torch.linspace(0.1, 1.0, 16, dtype=torch.float64)
    xs = torch.linspace(-1.0, 1.0, 64 * 16, dtype=torch.float64).reshape(64, 16)

    def loop() -> torch.Tensor:
        per_sample = []
        for x in xs:
            leaf = w.detach().requires_grad_()
            per_sample.append(torch.autograd.grad(sequential(leaf * x).sum(), leaf)[0])
        return torch.stack(per_sample)

    def transformed(op: Any) -> Any:
        return vmap(grad(lambda v, x: op(v * x).sum()), in_dims=(None, 0))

    per_sample_seq, per_sample_vec = transformed(sequential), transformed(vectorized)
    assert torch.allclose(per_sample_seq(w, xs), loop())
    assert torch.allclose(per_sample_vec(w, xs), loop())
    rows = compare(
        "per-sample gradients, 64 samples of 16 (erfcx)",
        "loop of torch.autograd.grad",
        {
            "loop of torch.autograd.grad": loop,
            "vmap(grad(loss)), sequential op": lambda: per_sample_seq(w, xs),
            "vmap(grad(loss)), vectorized op": lambda: per_sample_vec(w, xs),
        },
        repeats,
        target,
    )
    batch = torch.linspace(-2.0, 2.0, 64 * 1000, dtype=torch.float64).reshape(64, 1000)
    by_sample, at_once = vmap(sequential), vmap(vectorized)
    assert torch.allclose(by_sample(batch), at_once(batch))
    found = compare(
        "vmap over 64 x 1,000 (erfcx)",
        "vmap, sequential op",
        {
            "vmap, sequential op": lambda: by_sample(batch),
            "vmap, vectorized op": lambda: at_once(batch),
            "the ufunc on the whole batch, hand-written": lambda: torch.from_numpy(scipy.special.erfcx(batch.numpy())),
        },
        repeats,
        target,
    )
    for row in found:
        if row.ratio is not None:
            row.note = f"{1 / row.ratio:.1f}x the sequential op's speed"
    return rows + found
