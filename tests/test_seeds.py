"""batched(seed=...): one stream per sample, identical sequentially, on threads, on a process
pool and on Dask, for any chunksize; the caller's own random states untouched."""

from __future__ import annotations

import multiprocessing
import random
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import pytest
import torch

import autoconvert as ac

BATCH = torch.arange(24.0).reshape(12, 2)


# Module level: process pools receive these by reference.


def with_rng(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A sample drawing from the stream it is handed."""
    return x + rng.standard_normal(x.shape)


def with_globals(x: np.ndarray) -> np.ndarray:
    """A sample drawing from all three global states (legacy NumPy, Python's, torch's CPU generator)."""
    return x + np.random.standard_normal(x.shape) + random.random() + float(torch.rand(1))


def with_numpy_and_torch(x: np.ndarray) -> np.ndarray:
    """A sample drawing from the global states a Dask worker's own threads leave alone (they
    draw from Python's ``random``, so a sample's ``random.random()`` there can differ)."""
    return x + np.random.standard_normal(x.shape) + float(torch.rand(1))


def sequentially(fn: Any) -> torch.Tensor:
    """``batched(fn, seed=3)`` over the batch in the caller's loop; run in a pool's worker,
    where no other thread draws from the global states (a Dask scheduler's thread, living in
    the process that made its LocalCluster, draws from Python's ``random``)."""
    return ac.batched(fn, seed=3)(BATCH)


def _states() -> tuple[Any, ...]:
    numpy_state = np.random.get_state()
    return (numpy_state[1].tobytes(), numpy_state[2], random.getstate(), torch.get_rng_state().tolist())


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as processes:
        yield processes


def test_each_sample_draws_the_seeds_child_stream() -> None:
    """Sample i's rng is np.random.default_rng(SeedSequence(seed).spawn(n)[i])."""
    out = ac.batched(with_rng, seed=7)(BATCH)
    children = np.random.SeedSequence(7).spawn(12)
    expected = [BATCH[i].numpy() + np.random.default_rng(children[i]).standard_normal(2) for i in range(12)]
    torch.testing.assert_close(out, torch.from_numpy(np.stack(expected)))
    assert torch.equal(ac.batched(with_rng, seed=np.random.SeedSequence(7))(BATCH), out)
    assert not torch.equal(ac.batched(with_rng, seed=8)(BATCH), out)


@pytest.mark.slow
@pytest.mark.parametrize("chunksize", [None, 1, 5])
def test_identical_sequentially_on_threads_a_process_pool_and_dask(
    pool: ProcessPoolExecutor, dask_client: Any, chunksize: int | None
) -> None:
    client = dask_client
    expected = ac.batched(with_rng, seed=3)(BATCH)
    for where in ({"workers": 2}, {"executor": pool}, {"executor": client}):
        out = ac.batched(with_rng, seed=3, chunksize=chunksize, in_caller=False, **where)(BATCH)
        assert torch.equal(out, expected), where
    expected = pool.submit(sequentially, with_globals).result()
    out = ac.batched(with_globals, seed=3, chunksize=chunksize, in_caller=False, executor=pool)(BATCH)
    assert torch.equal(out, expected)
    expected = pool.submit(sequentially, with_numpy_and_torch).result()
    out = ac.batched(with_numpy_and_torch, seed=3, chunksize=chunksize, in_caller=False, executor=client)(BATCH)
    assert torch.equal(out, expected)


def callers_states_kept() -> None:
    """Seeded batches, one failing, leave the caller's global states as they were (run in a
    pool's worker: see ``sequentially``)."""
    np.random.seed(1)
    random.seed(1)
    torch.manual_seed(1)
    before = _states()
    first = ac.batched(with_globals, seed=5)(BATCH)
    assert _states() == before
    assert torch.equal(ac.batched(with_globals, seed=5)(BATCH), first)
    with pytest.raises(ZeroDivisionError):
        ac.batched(lambda x: (np.random.random(), 1 / 0), seed=5)(BATCH)
    assert _states() == before


def test_the_callers_global_states_are_as_they_were(pool: ProcessPoolExecutor) -> None:
    """The caller's np.random, random and torch states survive seeded batches."""
    pool.submit(callers_states_kept).result()


def test_threads_without_an_rng_parameter_are_refused() -> None:
    with pytest.raises(ValueError) as info:
        ac.batched(with_globals, workers=2, seed=1)
    assert str(info.value) == (
        "autoconvert.batched(with_globals): seed= on threads reaches a sample only through a parameter named rng: "
        "np.random, random and torch's generator are shared by the threads, and seeding them per sample would "
        "give results that depend on which thread ran first. Fix: give the function an rng parameter and draw "
        "from it, or run it sequentially or on a process pool"
    )


def test_seed_and_rng_together_are_refused() -> None:
    with pytest.raises(ValueError) as info:
        ac.batched(with_rng, seed=1)(BATCH, rng=np.random.default_rng())
    assert str(info.value) == (
        "autoconvert.batched(with_rng): rng= was passed, and seed= gives each sample its own rng. "
        "Fix: pass one or the other"
    )
    with pytest.raises(
        ValueError,
        match=r"^autoconvert\.batched\(\): seed= takes None, a non-negative int or a np.random.SeedSequence, got -1$",
    ):
        ac.batched(with_rng, seed=-1)
