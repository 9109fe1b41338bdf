"""A compiled training step calling a decorated NumPy-only function: traced into the graph
(the trace route), against the same step written by hand and against the escape; on the CPU,
and on CUDA tensors, where the escape and the crossing written by hand are host round trips."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch._dynamo

import autoconvert as ac

from .harness import Row, compare, synced

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
    x, y = torch.rand(4, 8, dtype=torch.float64), torch.rand(4, 8, dtype=torch.float64)
    rows: list[Row] = []
    for backend in ("aot_eager",) if settings["quick"] else ("aot_eager", "inductor"):
        case = f"compiled step, NumPy loss on 4 x 8 float64 ({backend})"
        rows += _timed(case, "hand-written", {n: _call(f, backend, x, y) for n, f in _STEPS.items()}, settings)
    return rows


def _call(step: Callable[..., Any], backend: str, *args: Any) -> Callable[[], Any]:
    """``step`` compiled with ``backend``, as a call of ``args``."""
    compiled_step = torch.compile(step, backend=backend)
    return lambda: compiled_step(*args)


def _timed(case: str, baseline: str, calls: dict[str, Callable[[], Any]], settings: Settings) -> list[Row]:
    """The rows of ``calls``, each noted with its first call's time (compiling): dynamo reset
    first, each step its own code object, so each compiles its own graph. A contender whose
    backend fails to compile it (inductor's C++ for a step's host part, where the machine has
    no compiler) is left out, and said so, rather than losing the run's other rows."""
    torch._dynamo.reset()
    compile_s: dict[str, float] = {}
    for name, call in list(calls.items()):
        start = time.perf_counter()
        try:
            call()
        except torch._dynamo.exc.BackendCompilerFailed as failed:
            if name == baseline:
                raise
            print(f"  {case}: {name} left out: {' '.join(str(failed).split())[:300]}", file=sys.stderr)
            del calls[name]
            continue
        compile_s[name] = time.perf_counter() - start
    rows = compare(case, baseline, calls, settings["repeats"], settings["target_s"])
    for row in rows:
        row.note = f"first call (compiling) {compile_s[row.contender]:.2f} s"
    return rows


def _torch_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.tanh(torch.sin(x) * y).sum(dim=-1).mean()


def _crossing(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(_body(x.detach().cpu().numpy(), y.detach().cpu().numpy())).to(x.device)


# The escape detaches (grad="detach"), as the crossing written by hand does: no gradient through
# the body, and no GradientWarning in the table's output.
_escaped_detached = ac.returns_tensor(ac.accepts_numpy(compile="escape", grad="detach")(_body))


def _gpu_torch_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _torch_loss(x * 2, y) + (x**2).sum()


def _gpu_traced_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _traced(x * 2, y) + (x**2).sum()


def _gpu_escaped_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _escaped_detached(x * 2, y) + (x**2).sum()


def _gpu_crossing_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _crossing(x * 2, y) + (x**2).sum()


_GPU_STEPS = {
    "torch, written by hand": _gpu_torch_step,
    "autoconvert traced": _gpu_traced_step,
    "autoconvert escape (host round trip)": _gpu_escaped_step,
    "from_numpy(f(x.detach().cpu().numpy())).to(device)": _gpu_crossing_step,
}


def gpu_compiled(settings: Settings) -> list[Row]:
    """A compiled training step (forward and backward) on CUDA tensors, 1024 x 1024 float32,
    calling the NumPy loss: traced into the graph on the device, against the step written in
    torch, the escape and the crossing written by hand (each a graph break and a host round
    trip, with no gradient through the loss). Timed to the end of the device's work; aot_eager,
    and inductor (Triton kernels) but in a quick run. Skipped without CUDA."""
    if not torch.cuda.is_available():
        return []
    device = torch.device("cuda", torch.cuda.current_device())
    x = torch.rand(1024, 1024, device=device, requires_grad=True)
    y = torch.rand(1024, 1024, device=device)
    breaks = {name: torch._dynamo.explain(step)(x, y).graph_break_count for name, step in _GPU_STEPS.items()}
    rows: list[Row] = []
    for backend in ("aot_eager",) if settings["quick"] else ("aot_eager", "inductor"):
        calls = {name: synced(device, _training(step, backend, x, y)) for name, step in _GPU_STEPS.items()}
        case = f"compiled training step on CUDA, NumPy loss on 1024 x 1024 float32 ({backend})"
        for row in _timed(case, "torch, written by hand", calls, settings):
            row.note = f"{row.note}; graph breaks {breaks[row.contender]}"
            rows.append(row)
    return rows


def _training(step: Callable[..., Any], backend: str, x: torch.Tensor, y: torch.Tensor) -> Callable[[], Any]:
    """One training step of ``step`` compiled: the loss, and its gradient into ``x``."""
    loss = _call(step, backend, x, y)

    def train() -> None:
        x.grad = None
        loss().backward()

    return train
