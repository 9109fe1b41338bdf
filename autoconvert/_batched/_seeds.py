"""``batched(seed=...)``: one random stream per sample, whatever runs it and however it is chunked.

Sample ``i`` draws from ``np.random.SeedSequence(seed)``'s child ``i`` (the child
``SeedSequence.spawn`` would give it): a parameter named ``rng`` receives a Generator over it,
and where samples run one at a time in a process (the caller's loop, a worker process), the
global states that code draws from without asking (``np.random``, ``random``, torch's CPU
generator) are seeded from it before the sample and given back to the caller afterwards.
It imports no torch: on a process pool it runs beside NumPy code alone.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import numpy as np


class Seeds:
    """The streams of one batched function: ``entropy`` and ``spawn_key`` of its seed's
    SeedSequence; ``rng``: hand each sample a Generator as ``rng=``; ``globals``: seed the
    global states per sample (never on threads, which share them)."""

    __slots__ = ("entropy", "globals", "pool_size", "rng", "spawn_key")

    def __init__(self, seed: int | np.random.SeedSequence, *, rng: bool, globals: bool) -> None:
        sequence = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        self.entropy, self.spawn_key, self.pool_size = sequence.entropy, tuple(sequence.spawn_key), sequence.pool_size
        self.rng, self.globals = rng, globals

    def sample(self, i: int) -> np.random.SeedSequence:
        """Sample ``i``'s SeedSequence: the seed's child ``i``."""
        return np.random.SeedSequence(self.entropy, spawn_key=(*self.spawn_key, i), pool_size=self.pool_size)

    def enter(self, i: int, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Before sample ``i``: the global states seeded (where asked), and its keyword
        arguments with ``rng`` added (where asked)."""
        sequence = self.sample(i)
        if self.globals:
            words = sequence.generate_state(4)
            np.random.seed(words)
            random.seed(int.from_bytes(words.tobytes(), "little"))
            torch = sys.modules.get("torch")
            if torch is not None:  # only where the process has it: a worker may run NumPy alone
                torch.default_generator.manual_seed(int(sequence.generate_state(1, np.uint64)[0]) >> 1)
        if self.rng:
            return {**kwargs, "rng": np.random.default_rng(sequence)}
        return kwargs


class GlobalStates:
    """The caller's global random states, kept while its thread runs seeded samples and put
    back afterwards, so that a seeded batch leaves no trace in the caller's streams."""

    __slots__ = ("numpy", "python", "torch")

    def __init__(self) -> None:
        self.numpy = np.random.get_state()
        self.python = random.getstate()
        torch = sys.modules.get("torch")
        self.torch = torch.default_generator.get_state() if torch is not None else None

    def restore(self) -> None:
        np.random.set_state(self.numpy)
        random.setstate(self.python)
        if self.torch is not None:
            sys.modules["torch"].default_generator.set_state(self.torch)
