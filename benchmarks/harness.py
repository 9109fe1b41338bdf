"""Timing: contenders interleaved (each round in a shuffled order), medians of many repeats, ratios to a baseline.

Interleaving spreads drift (frequency scaling, the other core's load) over every
contender alike, so a ratio measured in one run is fair even on a noisy machine.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Row:
    case: str
    contender: str
    median_us: float
    ratio: float | None  # to the case's baseline; None for the baseline itself
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def calibrate(fn: Callable[[], Any], target_s: float) -> int:
    """Calls per batch so one batch takes about ``target_s``. The first call is not timed: it
    may build what later calls reuse (a torchified attribute's wrapper, a plan's flat call),
    and timed it would make every batch a single call."""
    fn()
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= target_s / 4 or number >= 1 << 20:
            return max(1, int(number * target_s / max(elapsed, 1e-9)))
        number *= 4


def interleaved(contenders: dict[str, Callable[[], Any]], repeats: int, target_s: float) -> dict[str, float]:
    """Median seconds per call for each contender, batches interleaved: every round runs each
    contender once, in an order shuffled per round (seeded), so that each follows every other:
    what one leaves behind (freed memory the next must fault in again, a cold cache) falls on
    all alike rather than on whichever comes next in a fixed order."""
    numbers = {name: calibrate(fn, target_s) for name, fn in contenders.items()}
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders.items())
    shuffle = random.Random(0).shuffle
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            shuffle(order)
            for name, fn in order:
                number = numbers[name]
                start = time.perf_counter()
                for _ in range(number):
                    fn()
                samples[name].append((time.perf_counter() - start) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {name: statistics.median(values) for name, values in samples.items()}


def compare(
    case: str, baseline: str, contenders: dict[str, Callable[[], Any]], repeats: int, target_s: float
) -> list[Row]:
    """Rows for one case: every contender's median and its ratio to ``baseline``."""
    medians = interleaved(contenders, repeats, target_s)
    base = medians[baseline]
    return [
        Row(case, name, seconds * 1e6, None if name == baseline else seconds / base)
        for name, seconds in medians.items()
    ]


def synced(device: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn``, timed to its end on ``device``: on a CUDA device, until the kernels it queued ran."""
    if getattr(device, "type", "cpu") != "cuda":
        return fn
    import torch

    def run() -> Any:
        out = fn()
        torch.cuda.synchronize(device)
        return out

    return run


def table(rows: list[Row]) -> str:
    """A Markdown table of the rows."""
    lines = ["| case | contender | median | ratio | note |", "|---|---|---:|---:|---|"]
    for r in rows:
        ratio = "1 (baseline)" if r.ratio is None else f"{r.ratio:.2f}x"
        median = f"{r.median_us:,.2f} us" if r.median_us < 1000 else f"{r.median_us / 1000:,.2f} ms"
        lines.append(f"| {r.case} | {r.contender} | {median} | {ratio} | {r.note} |")
    return "\n".join(lines)
