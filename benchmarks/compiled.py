"""A compiled training step calling a decorated NumPy-only function: traced into the graph
(the trace route), against the same step written by hand and against the escape."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch._dynamo

import autoconvert as ac

from .harness import Row, compare

Settings = dict[str, Any]


def _body(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.tanh(np.sin(x) * y).sum(axis=-1).mean()


def _hand(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(_body(x.numpy(), y.numpy()))


_traced = ac.returns_tensor(ac.accepts_numpy(_body))
_escaped = ac.returns_tensor(ac.accepts_numpy(compile="escape")(_body))


# One function per contender: each its own code object, so each compiled graph has its own cache.
def _hand_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _hand(x * 2, y) + (x**2).sum()


def _traced_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _traced(x * 2, y) + (x**2).sum()


def _escaped_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _escaped(x * 2, y) + (x**2).sum()


_STEPS = {"hand-written": _hand_step, "autoconvert traced": _traced_step, "autoconvert escape": _escaped_step}


def compiled(settings: Settings) -> list[Row]:
    """Per call after compiling (steady state), and the first call's compile time, per backend:
    aot_eager, and inductor (which compiles C++, a minute on 2 cores: not in a quick run)."""
    repeats, target = settings["repeats"], settings["target_s"]
    x, y = torch.rand(4, 8, dtype=torch.float64), torch.rand(4, 8, dtype=torch.float64)
    rows: list[Row] = []
    for backend in ("aot_eager",) if settings["quick"] else ("aot_eager", "inductor"):
        contenders: dict[str, Callable[[], Any]] = {}
        compile_s: dict[str, float] = {}
        torch._dynamo.reset()
        for name, function in _STEPS.items():
            step = torch.compile(function, backend=backend)
            start = time.perf_counter()
            step(x, y)
            compile_s[name] = time.perf_counter() - start
            contenders[name] = lambda step=step: step(x, y)
        case = f"compiled step, NumPy loss on 4 x 8 float64 ({backend})"
        for row in compare(case, "hand-written", contenders, repeats, target):
            row.note = f"first call (compiling) {compile_s[row.contender]:.2f} s"
            rows.append(row)
    return rows
