"""batched on every runner under every config block, seeded or not: the same values as the
sequential run, or the same error, or the one refusal the runner documents (writes that
cannot reach the caller from other processes; seeds of global states on workers that are
threads). Real threads, a real spawn process pool, an Executor of the user's whose workers
are threads, real Dask LocalClusters on loopback (worker processes; workers that are
threads of the caller's process) and a local Ray."""

from __future__ import annotations

import importlib.util
import multiprocessing
import re
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac

pytestmark = pytest.mark.slow


# Module level: process pools receive these by reference.


def normalised(a: np.ndarray) -> np.ndarray:
    """A sample divided by its sum in place: a write into the sample."""
    a /= a.sum()
    return a


def doubled(a: np.ndarray) -> np.ndarray:
    """A sample's values doubled, into a new array."""
    return a * 2


def with_rng(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A sample plus draws from the stream it is handed."""
    return a + rng.standard_normal(a.shape)


def with_globals(a: np.ndarray) -> np.ndarray:
    """A sample plus draws from NumPy's and torch's global states (a Dask worker's own threads
    draw from Python's ``random``, so it is left out)."""
    return a + np.random.standard_normal(a.shape) + float(torch.rand(1))


class ThreadExecutor(Executor):
    """A user's Executor whose workers are threads of the caller's process, though it is no
    ThreadPoolExecutor."""

    def __init__(self) -> None:
        self._threads = ThreadPoolExecutor(2)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self._threads.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._threads.shutdown(wait, cancel_futures=cancel_futures)


@pytest.fixture(scope="module")
def ray(request: pytest.FixtureRequest) -> Any:
    """A local Ray where Ray is installed (the ``ray`` extra), else None."""
    return request.getfixturevalue("ray_cluster") if importlib.util.find_spec("ray") else None


@pytest.fixture(scope="module")
def runners(dask_client: Any, ray: Any) -> Iterator[dict[str, dict[str, Any]]]:
    """Each runner as batched's options; the thread-based ones say so under "threads"."""
    distributed = pytest.importorskip("distributed")
    with (
        ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool,
        ThreadExecutor() as threads,
        warnings.catch_warnings(),
        distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as local,
        distributed.Client(local) as in_process,
    ):
        warnings.simplefilter("ignore", DeprecationWarning)  # dask's own, from its startup
        yield {
            "sequential": {},
            "in the caller's thread": {"workers": 2},
            "threads": {"workers": 2, "in_caller": False},
            "a process pool": {"executor": pool, "in_caller": False},
            "a thread Executor": {
                "executor": threads,
                "in_caller": False,
                "threads": "an executor whose workers are threads of the caller's process",
            },
            "Dask worker processes": {"executor": dask_client, "in_caller": False, "chunksize": 3},
            "Dask worker threads": {
                "executor": in_process,
                "in_caller": False,
                "chunksize": 3,
                "threads": "a Dask cluster whose workers run 2 threads each",
            },
            "Ray tasks": {"executor": ray, "in_caller": False, "chunksize": 3},
        }


CONFIGS = [{}, {"copy": True}, {"copy": False}, {"writeback": True}, {"check_writes": True}]


def _batch(ragged: bool) -> Any:
    values = torch.arange(1.0, 25.0)
    return list(values.split([1, 2, 3, 4, 5, 6, 3])) if ragged else values.reshape(12, 2)


def _outcome(
    fn: Callable[..., Any], options: dict[str, Any], config: dict[str, Any], seed: int | None, ragged: bool
) -> tuple[Any, ...]:
    """What a batched call gives: its values and the batch after it, or its error and message."""
    batch = _batch(ragged)
    try:
        with ac.config(**config):
            out = ac.batched(fn, seed=seed, **options)(batch)
    except Exception as e:
        return ("raised", type(e), _any_sample(e))
    values = [t.tolist() for t in out] if ragged else out.tolist()
    after = [t.tolist() for t in batch] if ragged else batch.tolist()
    return ("returned", values, after)


def _any_sample(error: Exception) -> str:
    """An error's message with the ragged sample it names (the one that failed first, which on
    workers need not be the first) checked against its note, and then left out."""
    text = str(error)
    named = re.search(r"argument a\[(\d+)\]", text)
    if named is None:
        return text
    assert any(note.endswith(f"raised by sample {named[1]} of 7") for note in error.__notes__), error.__notes__
    return text.replace(named[0], "argument a[i]")


def _refused(name: str, options: dict[str, Any], config: dict[str, Any], seed: int | None) -> tuple[Any, ...] | None:
    """The refusal a runner documents for this call, if any."""
    if seed is not None and name != "with_rng" and ("workers" in options or "threads" in options):
        runner = options.get("threads", "threads")
        return (
            "raised",
            ValueError,
            f"autoconvert.batched({name}): seed= on {runner} reaches a sample only through a parameter named rng: "
            "np.random, random and torch's generator are shared by the threads, and seeding them per sample would "
            "give results that depend on which thread ran first. Fix: give the function an rng parameter and draw "
            "from it, or run it sequentially or on a process pool",
        )
    if config.get("writeback") and "executor" in options:
        return (
            "raised",
            ValueError,
            f"autoconvert.batched({name}): {name} writes into its arguments (writeback=True or out_params, from a "
            "config block), and on an executor it runs in other processes, whose writes cannot reach the caller's "
            "tensors. Fix: run it on threads (workers=), or return what it computes",
        )
    return None


@given(
    where=st.sampled_from(
        [
            "in the caller's thread",
            "threads",
            "a process pool",
            "a thread Executor",
            "Dask worker processes",
            "Dask worker threads",
            *(["Ray tasks"] if importlib.util.find_spec("ray") else []),  # the ray extra
        ]
    ),
    config=st.sampled_from(CONFIGS),
    fn=st.sampled_from([normalised, doubled, with_rng, with_globals]),
    seed=st.sampled_from([None, 3]),
    ragged=st.booleans(),
)
def test_every_runner_gives_the_sequential_outcome(
    runners: dict[str, dict[str, Any]],
    *,
    where: str,
    config: dict[str, Any],
    fn: Callable[..., Any],
    seed: int | None,
    ragged: bool,
) -> None:
    """Values and the caller's batch afterwards as the sequential run has them (a write into a
    read-only sample: the same ReadOnlyError naming the argument), or the runner's own refusal."""
    if fn in (with_rng, with_globals) and seed is None:
        seed = 5  # rng is handed only by seed=, and unseeded draws differ from run to run
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    expected = _refused(fn.__name__, runners[where], config, seed) or _outcome(fn, {}, config, seed, ragged)
    assert _outcome(fn, options, config, seed, ragged) == expected


def test_dask_workers_of_one_thread_in_the_callers_process_are_threads() -> None:
    """Dask workers of one thread each are still threads when they live in the caller's process
    (processes=False): seeding global states there is refused, rng= gives the sequential draws."""
    distributed = pytest.importorskip("distributed")
    with (
        warnings.catch_warnings(),
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as local,
        distributed.Client(local) as client,
    ):
        warnings.simplefilter("ignore", DeprecationWarning)  # dask's own, from its startup
        with pytest.raises(ValueError) as info:
            ac.batched(with_globals, executor=client, seed=1)
        assert str(info.value) == (
            "autoconvert.batched(with_globals): seed= on Dask workers in the caller's process reaches a sample only "
            "through a parameter named rng: np.random, random and torch's generator are shared by the threads, and "
            "seeding them per sample would give results that depend on which thread ran first. Fix: give the "
            "function an rng parameter and draw from it, or run it sequentially or on a process pool"
        )
        batch = _batch(ragged=False)
        on_dask = ac.batched(with_rng, executor=client, seed=1, in_caller=False, chunksize=2)(batch)
        assert torch.equal(on_dask, ac.batched(with_rng, seed=1)(batch))


def kept(a: np.ndarray) -> np.ndarray:
    """A sample as it is."""
    return a


def test_writes_asked_by_any_side_are_refused_on_an_executor() -> None:
    """adapt's writeback=True, like accepts_numpy's, is refused on an executor when batched is
    applied; a config block's when the call is made; threads keep both."""
    message = (
        "autoconvert.batched(kept): kept writes into its arguments (writeback=True or out_params{}), and on an "
        "executor it runs in other processes, whose writes cannot reach the caller's tensors. Fix: run it on "
        "threads (workers=), or return what it computes"
    )
    with ThreadExecutor() as executor:
        with pytest.raises(ValueError) as info:
            ac.batched(ac.adapt(kept, writeback=True), executor=executor)
        assert str(info.value) == message.format("")
        on_executor = ac.batched(ac.adapt(kept), executor=executor)
        with ac.config(writeback=True), pytest.raises(ValueError) as info:
            on_executor(torch.ones(2, 2))
        assert str(info.value) == message.format(", from a config block")
    with ac.config(writeback=True):
        assert ac.batched(ac.adapt(kept), workers=2)(torch.ones(2, 2)).tolist() == [[1.0, 1.0]] * 2
