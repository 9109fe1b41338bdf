"""Many calls leave memory flat, and a call creates no reference cycles that hold arrays."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import numpy as np
import pytest
import torch

import autoconvert as ac


@ac.returns_tensor
@ac.accepts_numpy
def negate(a: np.ndarray, batch: Any) -> Any:
    return np.negative(a), {k: v + 1 for k, v in batch.items()}


@pytest.mark.slow
def test_100k_calls_leave_memory_flat() -> None:
    t = torch.ones(16)
    batch = {"a": torch.ones(4), "b": torch.zeros(4, dtype=torch.bfloat16)}
    for _ in range(1000):  # warm caches: dispatch tables, torch's allocator
        negate(t, batch)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            negate(t, batch)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes retained after 100,000 calls"


def test_a_call_creates_no_reference_cycles() -> None:
    t = torch.ones(8)
    batch = {"a": torch.ones(2)}
    negate(t, batch)
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(1000):
            negate(t, batch)
        # A cycle per call leaves 1000 objects or more; a few hundred may be other threads'
        # (workers left by earlier tests of the run), which gc.collect() counts too.
        assert gc.collect() < 1000
    finally:
        if was_enabled:
            gc.enable()
