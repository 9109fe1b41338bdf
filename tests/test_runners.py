"""batched on every runner under every config block, seeded or not: the same values as the
sequential run, or the same error, or the one refusal the runner documents (writes that
cannot reach the caller from other processes; seeds of global states on workers that are
threads). Real threads, a real spawn process pool, an Executor of the user's whose workers
are threads, real Dask LocalClusters on loopback (worker processes; workers that are
threads of the caller's process) and a local Ray."""

from __future__ import annotations

import array
import collections
import contextlib
import contextvars
import ctypes
import dataclasses
import datetime
import enum
import functools
import importlib
import importlib.util
import io
import logging
import multiprocessing
import os
import pathlib
import pickle
import re
import subprocess
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac

from . import held_state

pytestmark = pytest.mark.slow

_ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def remembered(a: np.ndarray, seen: dict[str, Any]) -> np.ndarray:
    """A sample's sum appended to a list the function keeps in a dict argument."""
    seen.setdefault("sums", []).append(float(a.sum()))
    return a * 2


def appended(a: np.ndarray, items: list[Any]) -> np.ndarray:
    """A sample's sum appended to a list argument."""
    items.append(float(a.sum()))
    return a * 2


@dataclasses.dataclass
class Tally:
    """A dataclass argument whose field the function sets."""

    count: int = 0


def tallied(a: np.ndarray, tally: Tally) -> np.ndarray:
    """A field of a dataclass argument set per sample."""
    tally.count += 1
    return a * 2


def counted_into(a: np.ndarray, counts: Any) -> np.ndarray:
    """A count kept in an array argument, or in the array a container argument holds at any
    depth (see _HOLDINGS), written in place per sample."""
    _held_count(counts)[0] += 1
    return a * 2


def counted_through_a_name(a: np.ndarray, counts: Any) -> np.ndarray:
    """``counted_into``, the count's array read into a name first, as most code writes it."""
    count = _held_count(counts)
    count[0] += 1
    return a * 2


def _held_count(counts: Any) -> Any:
    while not isinstance(counts, (np.ndarray, array.array)):
        counts = (
            counts.n
            if isinstance(counts, CountBox)
            else counts[0]
            if isinstance(counts, (list, tuple))
            else counts["n"]
        )
    return counts


@dataclasses.dataclass
class CountBox:
    """A dataclass holding the count."""

    n: Any


#: How the count reaches the function: (name, what holds it, given the count).
_HOLDINGS: dict[str, Callable[[Any], Any]] = {
    "counts": lambda c: c,
    "counts['n']": lambda c: {"n": c},
    "counts[0]": lambda c: [c],
    "counts[0]['n']": lambda c: ({"n": c},),
    "counts.n[0]": lambda c: CountBox([c]),
}


def looked_up(a: np.ndarray, table: dict[str, Any]) -> np.ndarray:
    """A dict argument read, never changed."""
    return a * table["scale"][0]


class Smoother:
    """An object argument with state a function changes (a running total) or only caches into."""

    def __init__(self) -> None:
        self.total = 0.0
        self._seen: dict[float, bool] = {}

    @functools.cached_property
    def weight(self) -> float:
        return 2.0


def totalled(a: np.ndarray, smoother: Smoother) -> np.ndarray:
    """An attribute of an object argument changed per sample."""
    smoother.total += float(a.sum())
    return a * 2


def cached_into(a: np.ndarray, smoother: Smoother) -> np.ndarray:
    """An object argument's caches filled, nothing else changed: a memo dict, a cached_property."""
    smoother._seen.setdefault(float(a.sum()), True)
    return a * smoother.weight


def normed(a: np.ndarray, norm: torch.nn.Module) -> np.ndarray:
    """A buffer of a torch module argument written in place."""
    norm.running_mean.fill_(1.0)
    return a * 2


def _halved(a: np.ndarray) -> np.ndarray:
    return a / 2


#: A decorated function as an argument, whose own caches fill as it runs (a wrapper, never compared).
halved = ac.accepts_numpy(_halved)


def applied(a: np.ndarray, fn: Callable[..., Any]) -> Any:
    """A callable argument applied to the sample (a torch one is handed tensors)."""
    return fn(a)


def masked_where_large(a: np.ndarray) -> Any:
    """An astropy Masked result, whose class leaves pickling to ndarray's."""
    from astropy.utils.masked import Masked

    return Masked(a, mask=a > 2)


def filled_by(a: np.ndarray, weights: Any) -> np.ndarray:
    """A sample weighted by a masked argument, its masked values counting 0."""
    return np.asarray((a * weights).filled(0.0))


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


_WORKERS = [
    "in the caller's thread",
    "threads",
    "a process pool",
    "a thread Executor",
    "Dask worker processes",
    "Dask worker threads",
]
#: The runners whose workers are other processes, or receive copies (Dask's, even in the caller's
#: process), as a refusal of a change made to a copy names their workers.
_COPIES = {
    "a process pool": "a worker of the process pool in another process",
    "Dask worker processes": "a Dask worker in another process",
    "Dask worker threads": "a Dask worker in the caller's process",
}


@pytest.mark.parametrize("where", _WORKERS)
def test_a_change_to_a_container_argument_is_the_callers_or_refused(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """Where the samples run in the caller's process the function's change to a container
    argument is the caller's, as sequentially; where workers hold copies, it is refused, never
    silently lost, naming the argument."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    seen: dict[str, Any] = {}
    sequential = ac.batched(remembered)(_batch(ragged=False), seen)
    if where not in _COPIES:
        on_runner: dict[str, Any] = {}
        assert torch.equal(ac.batched(remembered, **options)(_batch(ragged=False), on_runner), sequential)
        assert sorted(on_runner["sums"]) == sorted(seen["sums"])  # threads append in the order they run
        return
    kept: dict[str, Any] = {}
    with pytest.raises(ValueError) as info:
        ac.batched(remembered, **options)(_batch(ragged=False), kept)
    assert str(info.value) == (
        f"autoconvert.batched(remembered): the function changed argument seen, a container, on {_COPIES[where]}, "
        "which holds a copy of it: the change cannot reach the caller's container, as it does where the samples run "
        "sequentially or on threads. Fix: return what the function computes, or run it sequentially (no executor) "
        "or on threads (workers=)"
    )
    assert kept == {}


@pytest.mark.parametrize("where", _WORKERS)
@pytest.mark.parametrize("callback", [torch.sin, torch.nn.Tanh()])
def test_a_torch_callable_argument_gives_the_sequential_result_and_moves_no_tensor(
    runners: dict[str, dict[str, Any]], where: str, callback: Any
) -> None:
    """A torch function or module as an argument gets tensors on every runner, and the
    caller's batch never moves (torch's multiprocessing pickling would move it into shared
    memory under the arrays that view it, which then read freed memory)."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    batch = _batch(ragged=False)
    out = ac.batched(applied, **options)(batch, callback)
    assert torch.equal(out, ac.batched(applied)(_batch(ragged=False), callback))
    assert torch.equal(out, callback(_batch(ragged=False)))
    assert not batch.is_shared() and torch.equal(batch, _batch(ragged=False))


@pytest.mark.parametrize("where", ["sequential", *_WORKERS])
def test_masks_are_never_dropped_on_any_runner(runners: dict[str, dict[str, Any]], where: str) -> None:
    """An astropy Masked result is refused as sequentially, and a masked argument keeps its
    mask where it is pickled to workers: masks cross with the values they hide."""
    pytest.importorskip("astropy")
    from astropy.utils.masked import Masked

    options = {k: v for k, v in runners[where].items() if k != "threads"}
    with pytest.raises(ac.ConversionError) as info:
        ac.batched(masked_where_large, **options)(_batch(ragged=False))
    assert str(info.value) == (
        "masked_where_large(): result[0] is a masked array; a tensor has no mask, and dropping it would silently "
        "unmask values. Found astropy.utils.masked.core.MaskedNDArray(shape=(2,), dtype=<f4). Fix: use "
        "result[0].filled(fill_value), or the data and the mask as two arrays."
    )
    weights = Masked(np.array([1.0, 2.0]), mask=[False, True])
    out = ac.batched(filled_by, **options)(_batch(ragged=False), weights)
    assert out[:, 1].eq(0).all() and torch.equal(out[:, 0], _batch(ragged=False)[:, 0].double())


def blas_product(a: np.ndarray) -> np.ndarray:
    """A sample times itself through BLAS."""
    return a @ a.T


def test_the_libraries_thread_counts_are_given_back_after_maps_on_threads_of_the_callers_process(
    runners: dict[str, dict[str, Any]],
) -> None:
    """Dask workers of two threads in the caller's process cap BLAS, OpenMP and torch while
    samples run: after each map every count is the caller's again."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def counts() -> list[tuple[str, int]]:
        found = [
            (library.filepath, library.num_threads) for library in threadpoolctl.ThreadpoolController().lib_controllers
        ]
        return [*found, ("torch", torch.get_num_threads())]

    before = counts()
    options = {k: v for k, v in runners["Dask worker threads"].items() if k != "threads"}
    for _ in range(3):
        ac.batched(blas_product, **{**options, "chunksize": 1, "threads_per_worker": 1})(torch.ones(8, 40, 40))
        assert counts() == before


#: Each function, a fresh argument for it, and what that argument holds after the sequential run.
_CONTAINER_CALLS: dict[str, tuple[Callable[..., Any], Callable[[], Any], Callable[[Any], Any]]] = {
    "a list appended to": (appended, list, sorted),
    "a dataclass field set": (tallied, Tally, lambda t: t.count),
    "a dict read only": (looked_up, lambda: {"scale": [2.0]}, lambda d: d),
    "an object's attribute changed": (totalled, Smoother, lambda s: s.total),
    "an object's caches filled": (cached_into, Smoother, lambda s: s.total),
    "an nn.Module's buffer written": (normed, lambda: torch.nn.BatchNorm1d(2), lambda m: m.running_mean.tolist()),
    "a decorated function applied": (applied, lambda: halved, lambda f: f),
}
#: The calls that only read their argument, or fill its caches: never refused.
_READING = {"a dict read only", "an object's caches filled", "a decorated function applied"}


# torch 2.4 and 2.5 load a pickled module's tensors through torch.load, which warns of its
# weights_only default where a process pool's results come back; later versions do not.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning")
@given(where=st.sampled_from(_WORKERS), call=st.sampled_from(sorted(_CONTAINER_CALLS)))
def test_every_kind_of_container_change_is_the_callers_or_refused_and_reading_is_never_refused(
    runners: dict[str, dict[str, Any]], where: str, call: str
) -> None:
    """Lists, dicts, dataclasses, plain objects and torch modules among the arguments: what the
    function changes is the caller's where the samples run in the caller's process and refused
    where workers hold copies; an argument only read, or whose caches only are filled, is never
    refused, and gives the sequential result."""
    fn, make, seen = _CONTAINER_CALLS[call]
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    sequential_arg = make()
    sequential = ac.batched(fn)(_batch(ragged=False), sequential_arg)
    arg = make()
    if where in _COPIES and call not in _READING:
        changed = r"argument (items|tally), a container|(smoother\.total|norm\.running_mean), in argument \w+"
        with pytest.raises(ValueError, match=f"the function changed ({changed}), on {_COPIES[where]}"):
            ac.batched(fn, **options)(_batch(ragged=False), arg)
        assert seen(arg) == seen(make())
        return
    assert torch.equal(ac.batched(fn, **options)(_batch(ragged=False), arg), sequential)
    assert seen(arg) == seen(sequential_arg)


class Stepper:
    """A callable object and bound methods changing what they hold as they run."""

    def __init__(self) -> None:
        self.counts = np.zeros(1)
        self.n = 0

    def __call__(self, a: np.ndarray) -> np.ndarray:
        self.counts[0] += 1
        return a * 2

    def written(self, a: np.ndarray) -> np.ndarray:
        self.counts[0] += 1
        return a * 2

    def stepped(self, a: np.ndarray) -> np.ndarray:
        self.n += 1
        return a * 2


def bound_count(a: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """A count in an array a partial binds, written in place per sample."""
    counts[0] += 1
    return a * 2


def _carried(make: Callable[[Stepper], Any]) -> Callable[[], tuple[Any, Stepper]]:
    """A maker of a callable over a new ``Stepper``, and the stepper."""

    def made() -> tuple[Any, Stepper]:
        stepper = Stepper()
        return make(stepper), stepper

    return made


class CallsCounted:
    """A decorator written as a class: it keeps its own count of calls beside what it wraps."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)
        self.calls = 0

    def __call__(self, a: np.ndarray) -> np.ndarray:
        self.calls += 1
        return self.__wrapped__(a)  # type: ignore[no-any-return]  # what it wraps returns an array


def _counted_calls() -> tuple[Any, CallsCounted]:
    decorated = CallsCounted(doubled)
    return decorated, decorated


def _partial_over_counts() -> tuple[Any, np.ndarray]:
    counts = np.zeros(1)
    return functools.partial(bound_count, counts=counts), counts


class OnlineModel:
    """Learns from each sample by a scikit-learn estimator's ``partial_fit``, unfitted at first."""

    def __init__(self) -> None:
        linear_model = pytest.importorskip("sklearn.linear_model")
        self.model = linear_model.SGDRegressor()

    def learned(self, a: np.ndarray) -> np.ndarray:
        self.model.partial_fit(a.reshape(1, -1), [float(a.sum())])
        return a * 2


def _online_model() -> tuple[Any, OnlineModel]:
    online = OnlineModel()
    return online.learned, online


#: Callables that carry state to the workers: (make the callable and what it changes, read the change back,
#: the start of the refusal where workers hold copies).
_CARRIERS: dict[str, tuple[Callable[[], tuple[Any, Any]], Callable[[Any], Any], str]] = {
    "a bound method writing an array": (
        _carried(lambda o: o.written),
        lambda o: o.counts.tolist(),
        "the function changed self.counts, in self, the object the method is bound to, on ",
    ),
    "a bound method setting a number": (
        _carried(lambda o: o.stepped),
        lambda o: o.n,
        "the function changed self.n, in self, the object the method is bound to, on ",
    ),
    "a callable object": (
        _carried(lambda o: o),
        lambda o: o.counts.tolist(),
        "the function changed self.counts, in self, the callable object, on ",
    ),
    "a decorated bound method": (
        _carried(lambda o: ac.accepts_numpy(o.written)),
        lambda o: o.counts.tolist(),
        "the function changed self.counts, in self, the object the method is bound to, on ",
    ),
    "a torchified object's bound method": (
        _carried(lambda o: ac.torchify(o).written),
        lambda o: o.counts.tolist(),
        "the function changed self.counts, in self, the object the method is bound to, on ",
    ),
    "a decorator written as a class": (
        _counted_calls,
        lambda d: d.calls,
        "the function changed self.calls, in self, the callable object, on ",
    ),
    "an unfitted estimator's first partial_fit": (
        _online_model,
        lambda o: hasattr(o.model, "coef_"),
        "the function changed self.model.coef_, in self, the object the method is bound to, on ",
    ),
    "a partial's bound array": (
        _partial_over_counts,
        lambda c: c.tolist(),
        "the function wrote into argument counts, an array, on ",
    ),
}


class Lookup:
    """Holds a fitted KD-tree regressor and a random generator in lists: ``predicted`` only reads
    the tree (which counts its queries: state of its own, no change), ``drawn`` draws from the
    generator (a copy would repeat the caller's draws), ``remember`` appends to a list."""

    def __init__(self) -> None:
        neighbors = pytest.importorskip("sklearn.neighbors")
        x = np.arange(20.0).reshape(10, 2)
        self.models = [neighbors.KNeighborsRegressor(2, algorithm="kd_tree").fit(x, x.sum(1))]
        self.rngs = [np.random.default_rng(0)]
        self.seen: list[float] = []

    def predicted(self, a: np.ndarray) -> np.ndarray:
        return self.models[0].predict(a.reshape(1, -1)[:, :2])

    def drawn(self, a: np.ndarray) -> np.ndarray:
        return a * self.rngs[0].random()

    def remember(self, a: np.ndarray) -> np.ndarray:
        self.seen.append(float(a.sum()))
        return a * 2


@pytest.mark.parametrize("where", _WORKERS)
def test_what_a_bound_methods_object_keeps_to_itself_in_a_list_is_no_change(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """Objects in a list of the bound method's object are compared by their own state: a
    KD-tree's query counter is its own, and reading it is not refused; appending to the list
    is a change, and drawing from a generator moves it, both refused where workers hold copies."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    batch = torch.arange(24.0).reshape(12, 2)
    expected = ac.batched(Lookup().predicted)(batch)
    assert torch.equal(ac.batched(Lookup().predicted, **options)(batch), expected)
    if where in _COPIES:
        with pytest.raises(ValueError, match=r"the function changed self\.seen, in self, the object the method is"):
            ac.batched(Lookup().remember, **options)(batch)
        with pytest.raises(ValueError, match=r"the function drew from self\.rngs\[0\], in self, the object the "):
            ac.batched(Lookup().drawn, **options)(batch)


@pytest.mark.parametrize("where", ["Dask worker processes", "Dask worker threads"])
def test_what_a_closure_captured_is_compared_where_workers_hold_copies(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """Dask pickles a closure with what it captured: the function's write there, on a copy in
    another process, is refused, never lost, as a partial's bound array's is; in the caller's
    process the closure is the caller's own, as on threads, and its writes are the caller's."""
    counts = np.zeros(1)

    def counted(a: np.ndarray) -> np.ndarray:
        counts[0] += 1
        return a * 2

    def counting(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
        @functools.wraps(fn)
        def wrapper(a: np.ndarray) -> np.ndarray:
            counts[0] += 1
            return fn(a)

        return wrapper

    options = {k: v for k, v in runners[where].items() if k != "threads"}
    for fn in (counted, counting(doubled)):  # a decorator's wrapper too, whose closure keeps the count
        if where == "Dask worker threads":
            assert torch.equal(
                torch.as_tensor(ac.batched(fn, **options)(_batch(ragged=False))), _batch(ragged=False) * 2
            )
            continue
        with pytest.raises(ValueError, match="the function wrote into counts, captured by the function, an array, on "):
            ac.batched(fn, **options)(_batch(ragged=False))
    assert counts.tolist() == [0.0 if where == "Dask worker processes" else 2.0 * len(_batch(ragged=False))]


#: Globals of this module that the functions below change, as a script's functions change theirs.
_TALLY = np.zeros(1)
_SEEN: list[int] = []
_STEPS = 0


def counted_in_a_global(a: np.ndarray) -> np.ndarray:
    """Counts its samples in a global array."""
    _TALLY[0] += 1
    return a * 2


def seen_through_a_helper(a: np.ndarray) -> np.ndarray:
    """Has a function of its module remember its samples in a global list."""
    _remember(a)
    return a * 2


def _remember(a: np.ndarray) -> None:
    _SEEN.append(int(a.sum()))


def stepped_in_a_global(a: np.ndarray) -> np.ndarray:
    """Binds a global number anew per sample."""
    global _STEPS
    _STEPS += 1
    return a * 2


def seen_in_another_module(a: np.ndarray) -> np.ndarray:
    """Appends to another module's global list, through that module's function."""
    held_state.remember(int(a.sum()))
    return a * 2


@functools.singledispatch
def dispatched(a: object) -> object:
    """A singledispatch function whose array implementation appends to a global list."""
    return a


@dispatched.register
def _dispatched_array(a: np.ndarray) -> np.ndarray:
    _SEEN.append(int(a.sum()))
    return a * 2


class Tallies:
    """A class counting in its own attribute, through a class method."""

    count = 0

    @classmethod
    def counted(cls, a: np.ndarray) -> np.ndarray:
        cls.count += 1
        return a * 2


def _counter() -> Callable[[], None]:
    """A closure counting its calls in what it captured."""
    calls = 0

    def bump() -> None:
        nonlocal calls
        calls += 1

    return bump


def _calling(inner: Callable[[], None]) -> Callable[[], None]:
    """A closure calling the closure it captured."""

    def outer() -> None:
        inner()

    return outer


def _ticks() -> Iterator[int]:
    """A generator counting up."""
    tick = 0
    while True:
        tick += 1
        yield tick


class _Kept:
    """An object a global weak reference, and a global partial of its method, reach."""

    def __init__(self) -> None:
        self.n = 0

    def bump(self, by: int) -> None:
        self.n += by


class _Registering:
    """A descriptor registering the name it is set under."""

    def __set_name__(self, owner: type, name: str) -> None:
        _SEEN.append(len(name))


_VIEW = memoryview(bytearray(1))
_SETTINGS: collections.ChainMap[str, int] = collections.ChainMap({}, {"steps": 0})
_KEPT_BY_A_PARTIAL = _Kept()
_BUMP_TWO = functools.partial(_KEPT_BY_A_PARTIAL.bump, 2)
_DEPTH = contextvars.ContextVar("depth", default=0)
_LOCAL = threading.local()
_LOCAL.n = 0


class _Registry:
    """A class registering names through a class method held bound in a global."""

    names: ClassVar[list[int]] = []

    @classmethod
    def register(cls, name: int) -> None:
        cls.names.append(name)


_REGISTER = _Registry.register
_ACTIVE = {_Kept()}
_TORCH_DRAWS = torch.Generator().manual_seed(0)
_SEEDS = np.random.SeedSequence(0)
_COUNTING = _calling(_counter())
_STREAM = io.StringIO()
_TICKS = _ticks()
_KEPT = _Kept()
_KEPT_REF = weakref.ref(_KEPT)


def counted_by_a_closure_of_a_closure(a: np.ndarray) -> np.ndarray:
    """Calls a global closure whose captured closure counts."""
    _COUNTING()
    return a * 2


def printed_to_a_stream(a: np.ndarray) -> np.ndarray:
    """Prints each sample's sum into a global in-memory stream."""
    print(int(a.sum()), file=_STREAM)
    return a * 2


def ticked_a_generator(a: np.ndarray) -> np.ndarray:
    """Advances a global generator per sample."""
    next(_TICKS)
    return a * 2


def counted_through_a_weak_reference(a: np.ndarray) -> np.ndarray:
    """Counts in the object a global weak reference reaches."""
    kept = _KEPT_REF()
    assert kept is not None
    kept.n += 1
    return a * 2


def seen_through_a_made_up_attribute(a: np.ndarray) -> np.ndarray:
    """Appends to a list another module makes up as its attribute (its ``__getattr__``)."""
    held_state.lazy_seen.append(int(a.sum()))
    return a * 2


def registered_by_a_class_statement(a: np.ndarray) -> np.ndarray:
    """Defines a class whose descriptor registers itself in a global list."""

    class Fields:
        field = _Registering()

    return a * 2


def bumped_through_a_partial_of_a_method(a: np.ndarray) -> np.ndarray:
    """Counts through a global partial of an object's bound method."""
    _BUMP_TWO()
    return a * 2


def set_a_context_variable(a: np.ndarray) -> np.ndarray:
    """Counts its samples in a global context variable."""
    _DEPTH.set(_DEPTH.get() + 1)
    return a * 2


def counted_in_a_thread_local(a: np.ndarray) -> np.ndarray:
    """Counts its samples in an attribute of a global thread-local."""
    _LOCAL.n += 1
    return a * 2


def counted_in_a_set_member(a: np.ndarray) -> np.ndarray:
    """Counts in the objects a global set holds."""
    for kept in _ACTIVE:
        kept.n += 1
    return a * 2


def registered_through_a_bound_class_method(a: np.ndarray) -> np.ndarray:
    """Registers each sample through a global bound class method."""
    _REGISTER(int(a.sum()))
    return a * 2


def drawn_from_a_torch_generator(a: np.ndarray) -> np.ndarray:
    """Draws from a global torch generator."""
    torch.rand(1, generator=_TORCH_DRAWS)
    return a * 2


def spawned_from_a_seed_sequence(a: np.ndarray) -> np.ndarray:
    """Spawns a child of a global seed sequence."""
    _SEEDS.spawn(1)
    return a * 2


def written_through_a_view(a: np.ndarray) -> np.ndarray:
    """Counts its samples through a global memoryview of a bytearray."""
    _VIEW[0] = (_VIEW[0] + 1) % 256
    return a * 2


def stepped_in_a_chain_map(a: np.ndarray) -> np.ndarray:
    """Counts in a ChainMap whose key lives in its parent map (the count then shadows it)."""
    _SETTINGS["steps"] += 1
    return a * 2


def kept_by_a_forward_hook(a: np.ndarray) -> np.ndarray:
    """Runs a global torch module whose forward hook keeps each output in a global list."""
    with torch.no_grad():
        _HOOKED(torch.ones(2))
    return a * 2


def _keep_output(module: torch.nn.Module, inputs: Any, output: torch.Tensor) -> None:
    _OUTPUTS.append(float(output.sum()))


_OUTPUTS: list[float] = []
_HOOKED = torch.nn.Linear(2, 2)
_HOOKED.register_forward_hook(_keep_output)


def hit_in_an_object_array(a: np.ndarray) -> np.ndarray:
    """Counts in an object a global two-dimensional object array holds."""
    _GRID[0, 1].n += 1
    return a * 2


_GRID = np.empty((1, 2), dtype=object)
_GRID[0, 0], _GRID[0, 1] = _Kept(), _Kept()


def learned_by_backward(a: np.ndarray) -> np.ndarray:
    """Fills (then accumulates) a global parameter's gradient by backward()."""
    (_WEIGHT * torch.tensor(a)).sum().backward()
    return a * 2


_WEIGHT = torch.nn.Parameter(torch.ones(2))


def _counting_calls(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """A decorator counting calls in its wrapper's own attribute (the wrapper captures itself)."""

    @functools.wraps(fn)
    def wrapper(a: np.ndarray) -> np.ndarray:
        wrapper.calls += 1  # type: ignore[attr-defined]
        return fn(a)

    wrapper.calls = 0  # type: ignore[attr-defined]
    return wrapper


@_counting_calls
def _counted_helper(a: np.ndarray) -> np.ndarray:
    return a * 2


def doubled_by_a_counted_helper(a: np.ndarray) -> np.ndarray:
    """Calls a helper whose decorator counts its calls."""
    return _counted_helper(a)


class _CountingParametrization(torch.nn.Module):
    """A parametrization counting the forwards it takes part in."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return weight


def run_through_a_parametrized_module(a: np.ndarray) -> np.ndarray:
    """Runs a global module whose weight's parametrization counts its calls."""
    with torch.no_grad():
        _PARAMETRIZED(torch.ones(2))
    return a * 2


_PARAMETRIZED = torch.nn.Linear(2, 2)
torch.nn.utils.parametrize.register_parametrization(_PARAMETRIZED, "weight", _CountingParametrization())


class Tagged(np.ndarray):
    """An array subclass whose attributes NumPy's pickle leaves out."""


def counted_on_a_tagged_array(a: np.ndarray) -> np.ndarray:
    """Counts in an attribute of a global array subclass."""
    _TAGGED.meta["n"] += 1
    return a * 2


_TAGGED = np.zeros(2).view(Tagged)
_TAGGED.meta = {"n": 0}  # type: ignore[attr-defined]


class _ListingHandler(logging.Handler):
    """A logging handler keeping each message in a global list."""

    def emit(self, record: logging.LogRecord) -> None:
        _LOGGED.append(record.getMessage())


def listed(a: np.ndarray) -> np.ndarray:
    """Logs each sample to a logger whose handler lists the messages in a global list."""
    _LISTING_LOGGER.info("sample %s", a.sum())
    return a * 2


def _logger(name: str, handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    return logger


_LOGGED: list[str] = []
_LISTING_LOGGER = _logger("tests.test_runners.listed", _ListingHandler())


def dated_in_an_object_array(a: np.ndarray) -> np.ndarray:
    """Moves on a date a global object array holds (a value with no attributes: the array is
    compared whole)."""
    _DATES[0] = _DATES[0] + datetime.timedelta(days=1)
    return a * 2


_DATES = np.array([datetime.date(2020, 1, 1)], dtype=object)


def graded_through_a_hooked_parameter(a: np.ndarray) -> np.ndarray:
    """Takes a gradient in a global module's parameter, whose register_hook hook keeps it."""
    weight = _HOOKED_LINEAR.weight
    torch.autograd.grad((weight * torch.tensor(a)).sum(), weight)
    return a * 2


def _keep_gradient(gradient: torch.Tensor) -> None:
    _GRADIENTS.append(float(gradient.sum()))


_GRADIENTS: list[float] = []
_HOOKED_LINEAR = torch.nn.Linear(2, 1)
_HOOKED_LINEAR.weight.register_hook(_keep_gradient)


def _counted_handler(a: np.ndarray) -> np.ndarray:
    _HANDLED[0] += 1
    return a * 2


class _Handlers:
    """A class keeping a table of handlers in its own attribute."""

    table: ClassVar[dict[str, Callable[[np.ndarray], np.ndarray]]] = {"doubled": _counted_handler}


def handled_through_a_class_table(a: np.ndarray) -> np.ndarray:
    """Runs a handler a class attribute's table holds."""
    return _Handlers.table["doubled"](a)


_HANDLED = [0]


def counted_in_a_dict_key(a: np.ndarray) -> np.ndarray:
    """Counts in the objects a global dict is keyed by."""
    for kept in _NAMES:
        kept.n += 1
    return a * 2


_NAMES = {_Kept(): "kept"}


def _captured_count(fn: Callable[[], None]) -> int:
    inner = fn.__closure__[0].cell_contents  # type: ignore[index]
    return inner.__closure__[0].cell_contents  # type: ignore[no-any-return]


#: The functions changing globals, what they change, and their refusal's start where workers hold copies.
_C_COUNTS = (ctypes.c_int * 2)()


def counted_in_c(a: np.ndarray) -> np.ndarray:
    """Counts its samples in a global C array."""
    _C_COUNTS[0] += 1
    return a * 2


_GLOBAL_CHANGES: dict[str, tuple[Callable[[np.ndarray], np.ndarray], Callable[[], Any], str]] = {
    "a write into a C array": (
        counted_in_c,
        lambda: list(_C_COUNTS),
        "the function changed global _C_COUNTS of module tests.test_runners, on ",
    ),
    "a write into an array": (
        counted_in_a_global,
        lambda: _TALLY.tolist(),
        "the function wrote into global _TALLY of module tests.test_runners, an array, on ",
    ),
    "an append through a helper": (
        seen_through_a_helper,
        lambda: list(_SEEN),
        "the function changed global _SEEN of module tests.test_runners, on ",
    ),
    "a number bound anew": (
        stepped_in_a_global,
        lambda: _STEPS,
        "the function changed global _STEPS of module tests.test_runners, on ",
    ),
    "another module's list": (
        seen_in_another_module,
        lambda: list(held_state.SEEN),
        "the function changed global SEEN of module tests.held_state, on ",
    ),
    "a registered implementation of a singledispatch function": (
        dispatched,
        lambda: list(_SEEN),
        "the function changed global _SEEN of module tests.test_runners, on ",
    ),
    "a class attribute, through a class method": (
        Tallies.counted,
        lambda: Tallies.count,
        "the function changed Tallies.count, in global Tallies of module tests.test_runners, on ",
    ),
    "what a closure's captured closure captured": (
        counted_by_a_closure_of_a_closure,
        lambda: _captured_count(_COUNTING),
        "the function changed _COUNTING.inner.calls, in global _COUNTING of module tests.test_runners, on ",
    ),
    "an in-memory stream written": (
        printed_to_a_stream,
        _STREAM.getvalue,
        "the function changed _STREAM.getvalue(), in global _STREAM of module tests.test_runners, on ",
    ),
    "a generator advanced": (
        ticked_a_generator,
        lambda: dict(_TICKS.gi_frame.f_locals).get("tick", 0),  # type: ignore[union-attr]
        "the function changed _TICKS.position, in global _TICKS of module tests.test_runners, on ",
    ),
    "an object reached through a weak reference": (
        counted_through_a_weak_reference,
        lambda: _KEPT.n,
        "the function changed _KEPT_REF.__call__().n, in global _KEPT_REF of module tests.test_runners, on ",
    ),
    "another module's made-up attribute": (
        seen_through_a_made_up_attribute,
        lambda: list(held_state.lazy_seen),
        "the function changed _LAZY['lazy_seen'], in global _LAZY of module tests.held_state, on ",
    ),
    "a partial of an object's bound method": (
        bumped_through_a_partial_of_a_method,
        lambda: _KEPT_BY_A_PARTIAL.n,
        "the function changed _BUMP_TWO.func.__self__.n, in global _BUMP_TWO of module tests.test_runners, on ",
    ),
    "an object a global set holds": (
        counted_in_a_set_member,
        lambda: sum(kept.n for kept in _ACTIVE),
        "the function changed _ACTIVE{_Kept}.n, in global _ACTIVE of module tests.test_runners, on ",
    ),
    "a class's list, through a global bound class method": (
        registered_through_a_bound_class_method,
        lambda: list(_Registry.names),
        "the function changed _REGISTER.names, in global _REGISTER of module tests.test_runners, on ",
    ),
    "draws from a torch generator": (
        drawn_from_a_torch_generator,
        lambda: _TORCH_DRAWS.get_state().tolist(),
        "the function drew from global _TORCH_DRAWS of module tests.test_runners, a random generator, on ",
    ),
    "children spawned from a seed sequence": (
        spawned_from_a_seed_sequence,
        lambda: _SEEDS.n_children_spawned,
        "the function drew from global _SEEDS of module tests.test_runners, a random generator, on ",
    ),
    "a write through a memoryview": (
        written_through_a_view,
        lambda: _VIEW[0],
        "the function changed global _VIEW of module tests.test_runners, on ",
    ),
    "a ChainMap's key shadowing its parent's": (
        stepped_in_a_chain_map,
        lambda: _SETTINGS["steps"],
        "the function changed _SETTINGS['steps'], in global _SETTINGS of module tests.test_runners, on ",
    ),
    "a global list a global torch module's forward hook appends to": (
        kept_by_a_forward_hook,
        lambda: list(_OUTPUTS),
        "the function changed global _OUTPUTS of module tests.test_runners, on ",
    ),
    "a global parameter's gradient, by backward()": (
        learned_by_backward,
        lambda: None if _WEIGHT.grad is None else _WEIGHT.grad.tolist(),
        "the function changed _WEIGHT.grad, in global _WEIGHT of module tests.test_runners, on ",
    ),
    "a counting decorator's attribute, on a helper the function calls": (
        doubled_by_a_counted_helper,
        lambda: _counted_helper.calls,  # type: ignore[attr-defined]
        "the function changed _counted_helper.calls, in global _counted_helper of module tests.test_runners, on ",
    ),
    "a parametrization's state, of a global module": (
        run_through_a_parametrized_module,
        lambda: _PARAMETRIZED.parametrizations.weight[0].calls,
        "the function changed _PARAMETRIZED.parametrizations.weight.0.calls, in global _PARAMETRIZED of module "
        "tests.test_runners, on ",
    ),
    "an attribute of a global array subclass": (
        counted_on_a_tagged_array,
        lambda: _TAGGED.meta["n"],  # type: ignore[attr-defined]
        "the function changed _TAGGED.meta['n'], in global _TAGGED of module tests.test_runners, on ",
    ),
    "a global list a logging handler of the user's appends to": (
        listed,
        lambda: list(_LOGGED),
        "the function changed global _LOGGED of module tests.test_runners, on ",
    ),
    "a date a global object array holds, replaced": (
        dated_in_an_object_array,
        lambda: _DATES[0],
        "the function wrote into global _DATES of module tests.test_runners, an array, on ",
    ),
    "a global list a parameter's register_hook hook appends to": (
        graded_through_a_hooked_parameter,
        lambda: list(_GRADIENTS),
        "the function changed global _GRADIENTS of module tests.test_runners, on ",
    ),
    "a global a handler in a class attribute's table changes": (
        handled_through_a_class_table,
        lambda: _HANDLED[0],
        "the function changed _HANDLED[0], in global _HANDLED of module tests.test_runners, on ",
    ),
    "an object a global dict is keyed by": (
        counted_in_a_dict_key,
        lambda: sum(kept.n for kept in _NAMES),
        "the function changed _NAMES.keys(){_Kept}.n, in global _NAMES of module tests.test_runners, on ",
    ),
    "an object a global object array holds": (
        hit_in_an_object_array,
        lambda: _GRID[0, 1].n,
        "the function changed _GRID[0, 1].n, in global _GRID of module tests.test_runners, on ",
    ),
    "a registry a class statement's descriptor fills": (
        registered_by_a_class_statement,
        lambda: list(_SEEN),
        "the function changed global _SEEN of module tests.test_runners, on ",
    ),
}


@pytest.mark.parametrize("where", _WORKERS)
@pytest.mark.parametrize("change", _GLOBAL_CHANGES)
def test_a_change_to_a_global_the_function_reads_is_the_callers_or_refused(
    runners: dict[str, dict[str, Any]], where: str, change: str
) -> None:
    """A worker in another process has its own module, whose globals the function then
    changes: refused, never lost. In the caller's process (a Dask worker thread too: the
    function crosses by reference, its module the caller's) the change is the caller's."""
    fn, read, refusal = _GLOBAL_CHANGES[change]
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    before = read()
    if where not in _COPIES or where == "Dask worker threads":
        out = ac.batched(fn, **options)(_batch(ragged=False))
        assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)
        assert read() != before
        return
    with pytest.raises(ValueError) as info:
        ac.batched(fn, **options)(_batch(ragged=False))
    assert str(info.value).startswith(f"autoconvert.batched({fn.__qualname__}): {refusal}{_COPIES[where]}, "), (
        info.value
    )
    assert read() == before


#: Where a context variable the samples set stays, by runner that runs them in a context other than the caller's.
_CONTEXTS = {
    "threads": "the function set context variable 'depth' (global _DEPTH of module tests.test_runners) on a thread "
    "of the pool, in a copy of the caller's context: ",
    "a thread Executor": "the function set context variable 'depth' (global _DEPTH of module tests.test_runners) on "
    "a worker of the executor in the caller's process, in a context of its own: ",
    "Dask worker threads": "the function set context variable 'depth' (global _DEPTH of module tests.test_runners) "
    "on a Dask worker in the caller's process: ",
    "a process pool": "the function changed _DEPTH.get(), in global _DEPTH of module tests.test_runners, on a worker "
    "of the process pool in another process, ",
    "Dask worker processes": "the function changed _DEPTH.get(), in global _DEPTH of module tests.test_runners, on "
    "a Dask worker in another process, ",
}


@pytest.mark.parametrize("where", _WORKERS)
def test_a_context_variable_the_samples_set_is_the_callers_or_refused(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """A context variable's value is its context's: the samples' set is the caller's only where
    they run in the caller's context (the caller's thread). Threads run each chunk in a copy of
    it, Dask's worker threads in their own, other processes in theirs: refused, never lost."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    token = _DEPTH.set(0)
    try:
        if where not in _CONTEXTS:
            ac.batched(set_a_context_variable, **options)(_batch(ragged=False))
            assert _DEPTH.get() == 12
            return
        with pytest.raises(ValueError) as info:
            ac.batched(set_a_context_variable, **options)(_batch(ragged=False))
        assert str(info.value).startswith(f"autoconvert.batched(set_a_context_variable): {_CONTEXTS[where]}"), (
            info.value
        )
        assert _DEPTH.get() == 0
    finally:
        _DEPTH.reset(token)


class _Tagging:
    """A callable object counting its samples in a global context variable."""

    def __call__(self, a: np.ndarray) -> np.ndarray:
        _DEPTH.set(_DEPTH.get() + 1)
        return a * 2


def set_and_set_back(a: np.ndarray) -> np.ndarray:
    """Sets a global context variable and sets it back to an equal value (no token)."""
    _DEPTH.set(_DEPTH.get() + 1)
    _DEPTH.set(_DEPTH.get() - 1)
    return a * 2


class _Inline(Executor):
    """An executor running each task at once, in the caller's thread and context."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_what_sets_a_context_variable_on_threads_is_told_by_the_value_and_the_thread() -> None:
    """A callable object's set is refused as a function's; a value set back to an equal one is
    no change; an executor running the samples in the caller's thread sets the caller's."""
    token = _DEPTH.set(10**9)  # a large int: equal values are other objects
    try:
        with pytest.raises(ValueError, match=r"^autoconvert\.batched\(_Tagging\): the function set context variable"):
            ac.batched(_Tagging(), workers=2, in_caller=False)(_batch(ragged=False))
        ac.batched(set_and_set_back, workers=2, in_caller=False)(_batch(ragged=False))
        assert _DEPTH.get() == 10**9
        ac.batched(set_a_context_variable, executor=_Inline(), in_caller=False)(_batch(ragged=False))
        assert _DEPTH.get() == 10**9 + 12
    finally:
        _DEPTH.reset(token)


class _Tally(threading.local):
    def __init__(self) -> None:
        self.n = 0
        self.cached: list[str] = []


_THREAD_TALLY = _Tally()


def counted_in_a_thread_local_subclass(a: np.ndarray) -> np.ndarray:
    _THREAD_TALLY.n += 1
    return a * 2


def cached_in_a_thread_local(a: np.ndarray) -> np.ndarray:
    """A per-thread cache: each thread fills its own."""
    if not hasattr(_LOCAL, "session"):
        _LOCAL.session = "opened"
    return a * 2


@pytest.mark.parametrize("where", ["a process pool", "threads", "a thread Executor", "Dask worker threads"])
def test_a_thread_locals_attribute_changed_elsewhere_is_refused_or_named(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """A worker process forked from the caller's thread holds a copy of its thread-local's
    attributes: a change to one is refused. Other threads have their own: one changed there is
    refused (the caller's thread never sees it), one the caller set, missing there, is named in
    the AttributeError's note, and a per-thread cache each thread fills runs."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    fn, refused = (
        (counted_in_a_thread_local, "changed _LOCAL.n, in global _LOCAL of module tests.test_runners, on a worker")
        if where == "a process pool"
        else (
            counted_in_a_thread_local_subclass,
            "changed attribute n of global _THREAD_TALLY of module tests.test_runners",
        )
    )
    with pytest.raises(ValueError) as info:
        ac.batched(fn, **options)(_batch(ragged=False))
    assert str(info.value).startswith(f"autoconvert.batched({fn.__name__}): the function {refused}"), info.value
    assert _LOCAL.n == 0 and _THREAD_TALLY.n == 0
    if where != "a process pool":
        with pytest.raises(AttributeError) as missing:  # _LOCAL.n is the caller's thread's
            ac.batched(counted_in_a_thread_local, **options)(_batch(ragged=False))
        assert any(
            note.startswith("autoconvert.batched: global _LOCAL of module tests.test_runners is a threading.local, ")
            for note in missing.value.__notes__
        ), missing.value.__notes__
        out = ac.batched(cached_in_a_thread_local, **options)(_batch(ragged=False))
        assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)


class _Recorder:
    """An argument object whose method remembers samples in a global list."""

    def record(self, a: np.ndarray) -> None:
        _SEEN.append(int(a.sum()))


class _Track:
    """An object an object array holds."""

    def __init__(self) -> None:
        self.hits = 0


def called_back(a: np.ndarray, callback: Callable[[np.ndarray], None]) -> np.ndarray:
    callback(a)
    return a * 2


def recorded_by(a: np.ndarray, recorder: _Recorder) -> np.ndarray:
    recorder.record(a)
    return a * 2


def hit_first(a: np.ndarray, tracks: np.ndarray) -> np.ndarray:
    tracks[0].hits += 1
    return a * 2


#: What the arguments carry that the function changes: the function, the argument made anew, what
#: the caller reads of it, where the refusal says the change is, and whether a Dask worker thread
#: changes the caller's (a global a callback changes crosses by reference; an argument is a copy).
_AMONG_ARGUMENTS: dict[str, tuple[Callable[..., Any], Callable[[], Any], Callable[[Any], int], str, bool]] = {
    "a callback": (
        called_back,
        lambda: _remember,
        lambda _: len(_SEEN),
        "global _SEEN of module tests.test_runners",
        True,
    ),
    "an argument object's method": (
        recorded_by,
        _Recorder,
        lambda _: len(_SEEN),
        "global _SEEN of module tests.test_runners",
        True,
    ),
    "an object an object array holds": (
        hit_first,
        lambda: np.array([_Track(), _Track()], dtype=object),
        lambda tracks: tracks[0].hits,
        "tracks[0].hits, in argument tracks[0]",
        False,
    ),
}


@pytest.mark.parametrize("where", _WORKERS)
@pytest.mark.parametrize("through", _AMONG_ARGUMENTS)
def test_what_the_arguments_carry_is_the_callers_or_refused(
    runners: dict[str, dict[str, Any]], where: str, through: str
) -> None:
    """A callback among the arguments, or an argument object's method, changing a global of
    its module; an object an object array among the arguments holds, changed: the caller's
    where the samples run in its process, refused on copies, never lost."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    fn, make, read, place, by_reference = _AMONG_ARGUMENTS[through]
    argument = make()
    before = read(argument)
    if where not in _COPIES or (by_reference and where == "Dask worker threads"):
        ac.batched(fn, **options)(_batch(ragged=False), argument)
        assert read(argument) == before + 12
        return
    with pytest.raises(ValueError) as info:
        ac.batched(fn, **options)(_batch(ragged=False), argument)
    assert str(info.value).startswith(
        f"autoconvert.batched({fn.__name__}): the function changed {place}, on {_COPIES[where]}, "
    ), info.value
    assert read(argument) == before


@pytest.mark.parametrize("where", ["Dask worker processes", "Dask worker threads"])
def test_what_a_function_sent_by_value_reads_of_its_globals_is_compared(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """Dask sends a script's function by value, with copies of the globals it names: its write
    into one, on a worker in another process, is refused, never lost; in the caller's process
    the function is the caller's own, its globals the caller's, as on threads."""
    namespace: dict[str, Any] = {"__name__": "__main__", "counts": np.zeros(1)}
    exec("def counted(a):\n    counts[0] += 1\n    return a * 2", namespace)  # as a script defines it
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    if where == "Dask worker threads":
        ac.batched(namespace["counted"], **options)(_batch(ragged=False))
        assert namespace["counts"].tolist() == [float(len(_batch(ragged=False)))]
        return
    with pytest.raises(ValueError, match="the function wrote into global counts of module __main__, an array, on a "):
        ac.batched(namespace["counted"], **options)(_batch(ragged=False))
    assert namespace["counts"].tolist() == [0.0]


_SCRIPT_HOLDING_OBJECTS = """
import numpy as np
import torch


class Stat:
    def __init__(self):
        self.n = 0


GRID = np.empty(2, dtype=object)
GRID[0], GRID[1] = Stat(), Stat()
OUTPUTS = []
MODEL = torch.nn.Linear(2, 2)
MODEL.register_forward_hook(lambda module, inputs, output: OUTPUTS.append(float(output.sum())))


def counted(a):
    GRID[0].n += 1
    return a * 2


def embedded(a):
    with torch.no_grad():
        MODEL(torch.ones(2))
    return a * 2
"""


@pytest.mark.parametrize(
    ("name", "changed"), [("counted", "GRID[0].n, in global GRID"), ("embedded", "global OUTPUTS")]
)
def test_what_a_script_function_sent_by_value_reaches_through_objects_is_compared(
    runners: dict[str, dict[str, Any]], name: str, changed: str
) -> None:
    """A script's function sent by value reaches objects of the script's own classes (in an
    object array), or a global list through a torch module's forward hook: their changes, on
    a worker holding copies, are refused, never lost."""
    refusal, namespace = _scripts_map_refused(runners, "Dask worker processes", _SCRIPT_HOLDING_OBJECTS, name)
    assert refusal.startswith(
        f"autoconvert.batched({name}): the function changed {changed} of module __main__, on a Dask worker in "
        "another process, "
    ), refusal
    assert namespace["GRID"][0].n == 0 and namespace["OUTPUTS"] == []


@pytest.mark.parametrize(
    ("weights", "read"),
    [
        (memoryview(np.array([1.0, 2.0])).toreadonly(), "WEIGHTS[1]"),
        (memoryview(np.array([1.0, 2.0])), "WEIGHTS[1]"),
        (memoryview(np.array([1.0, 2.0], dtype=np.float16)), "float(np.asarray(WEIGHTS)[1])"),
        (memoryview(np.array([1.0, 2.0], dtype=">f8")), "float(np.asarray(WEIGHTS)[1])"),
    ],
    ids=["read-only float64", "writable float64", "float16", "big-endian"],
)
def test_a_memoryview_a_script_function_reads_arrives_laid_out_as_it_is(
    runners: dict[str, dict[str, Any]], weights: memoryview, read: str
) -> None:
    """cloudpickle sends a memoryview as its bytes (``view[1]`` then the second byte): it arrives
    laid out as it is, read-only or writable, whatever its format, so the samples read what they
    read sequentially."""
    namespace: dict[str, Any] = {"__name__": "__main__", "np": np, "WEIGHTS": weights}
    exec(f"def weighted(a):\n    return a * {read}", namespace)  # as a script defines it
    options = {k: v for k, v in runners["Dask worker threads"].items() if k != "threads"}
    out = ac.batched(namespace["weighted"], **options)(_batch(ragged=False))
    assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)


_SCRIPT_RAISING_ITS_OWN = """
TOUCHED = []


class Item:
    def touch(self):
        TOUCHED.append(1)


def missing(a):
    raise KeyError(Item())
"""


@pytest.mark.parametrize("where", ["Dask worker processes", "Dask worker threads"])
def test_an_exception_carrying_a_scripts_object_leaves_the_callers_class_as_it_is(
    runners: dict[str, dict[str, Any]], where: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sample's exception holding an object of a class sent by value (a script's) crosses back
    pickled by reference, with no context: Dask's own pickling would send the class by value
    and, in the caller's process, set the caller's class's methods to copies whose globals are
    copies. In the caller's process it is the caller's own exception; from another, where the
    class has no module to be found in, it keeps its message."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    with _by_value("raising_by_value", _SCRIPT_RAISING_ITS_OWN, tmp_path, monkeypatch) as module:
        touch = module.Item.touch
        with pytest.raises(Exception) as info:
            ac.batched(module.missing, **options)(_batch(ragged=False))
        assert module.Item.touch is touch
        module.Item().touch()
        assert module.TOUCHED == [1]
        if where == "Dask worker threads":
            assert type(info.value) is KeyError and type(info.value.args[0]) is module.Item
        else:
            assert type(info.value) is RuntimeError
            assert str(info.value).startswith("builtins.KeyError: <raising_by_value.Item"), info.value


_SCRIPT_WITH_A_NESTED_REGISTRY = """
class Outer:
    class Registry:
        names = []


def registered(a):
    Outer.Registry.names.append(float(a.sum()))
    return a * 2
"""


@pytest.mark.parametrize("where", ["Dask worker processes", "Dask worker threads"])
def test_a_script_functions_change_to_a_nested_class_is_refused_or_the_callers(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """A script's nested class crosses to Dask's worker processes by value under its bare name:
    a change there, to a copy, is refused naming it; in the caller's process the class is the
    caller's own, changed as sequentially."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(_SCRIPT_WITH_A_NESTED_REGISTRY, namespace)  # as a script defines them
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    names = namespace["Outer"].Registry.names
    if where == "Dask worker threads":
        ac.batched(namespace["registered"], **options)(_batch(ragged=False))
        assert sorted(names) == sorted(float(row.sum()) for row in _batch(ragged=False))
        return
    with pytest.raises(ValueError) as info:
        ac.batched(namespace["registered"], **options)(_batch(ragged=False))
    assert str(info.value).startswith(
        "autoconvert.batched(registered): the function changed Outer.Registry.names, in global Outer of module "
        "__main__, on a Dask worker in another process, "
    ), info.value
    assert names == []


_SCRIPT_WITH_LIBRARY_OBJECTS = """
import functools
import struct

class Features:
    @functools.cached_property
    def scale(self):
        return 2.0

FEATURES = Features()
PACKED = struct.Struct("<d")

def scaled(a):
    return a * FEATURES.scale

def packed(a):
    return a * PACKED.unpack(PACKED.pack(2.0))[0]
"""


@pytest.mark.parametrize("name", ["scaled", "packed"])
def test_a_script_function_reading_a_cached_property_or_a_struct_runs_on_dask(
    runners: dict[str, dict[str, Any]], name: str
) -> None:
    """A script's class sent by value takes its ``cached_property`` with it, which holds a lock
    on Python 3.11; a ``struct.Struct`` has no pickle at all: both cross made again from what
    defines them, so read-only code runs as it does sequentially."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(_SCRIPT_WITH_LIBRARY_OBJECTS, namespace)  # as a script defines them
    options = {k: v for k, v in runners["Dask worker threads"].items() if k != "threads"}
    out = ac.batched(namespace[name], **options)(_batch(ragged=False))
    assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)


_SCRIPT_WITH_CLASSES = """
N = 0

class Registry(type):
    names = []

    def __new__(mcls, name, bases, namespace):
        mcls.names.append(name)
        return super().__new__(mcls, name, bases, namespace)

class Counter(metaclass=Registry):
    def value(self):
        return 2.0

    def bump(self):
        global N
        N += 1

OBJ = Counter()

def read(a):
    return a * OBJ.value()
"""


def test_a_map_on_dask_in_the_callers_process_leaves_the_callers_classes_as_they_were(
    runners: dict[str, dict[str, Any]],
) -> None:
    """Dask pickles each chunk even to a worker in the caller's process, where cloudpickle finds a
    script's class it sends by value again: the caller's own, neither made anew (its metaclass
    registering it again) nor given copies of its methods bound to a copy of the script's
    globals, so the caller's code changes the caller's globals after the map as before it."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(_SCRIPT_WITH_CLASSES, namespace)  # as a script defines them
    before = {cls: dict(vars(cls)) for cls in (namespace["Counter"], namespace["Registry"])}
    options = {k: v for k, v in runners["Dask worker threads"].items() if k != "threads"}
    out = ac.batched(namespace["read"], **options)(_batch(ragged=False))
    assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)
    for cls, attributes in before.items():
        assert [k for k, v in attributes.items() if vars(cls).get(k) is not v] == [], cls
    assert namespace["Registry"].names == ["Counter"]
    namespace["OBJ"].bump()
    assert namespace["N"] == 1


_SCRIPT_COUNTING_THROUGH_ITS_CLASS = """
N = 0

class Counter:
    def bump(self):
        global N
        N += 1

COUNTER = Counter()

def counted(a):
    COUNTER.bump()
    return a + N
"""


def _as_sequentially_in_the_callers_process(
    runners: dict[str, dict[str, Any]], fn: Any, reset: Callable[[], None]
) -> None:
    """``fn`` mapped sequentially, then (its state ``reset``) as one chunk on a Dask worker in the
    caller's process: the same samples in the same order give the same results."""
    options = {k: v for k, v in runners["Dask worker threads"].items() if k != "threads"}
    batch = _batch(ragged=False)
    sequential = ac.batched(fn)(batch)
    reset()
    here = ac.batched(fn, **{**options, "chunksize": len(batch)})(batch)
    assert torch.equal(torch.as_tensor(here), torch.as_tensor(sequential))


def test_a_global_the_callers_class_changes_is_read_as_sequentially_in_the_callers_process(
    runners: dict[str, dict[str, Any]],
) -> None:
    """On a Dask worker in the caller's process a script's function and its class are the
    caller's own, as on threads: the function reads the global the class's method changes, as
    each sample does sequentially, never a copy of it as it was when the chunk was sent."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(_SCRIPT_COUNTING_THROUGH_ITS_CLASS, namespace)  # as a script defines them
    _as_sequentially_in_the_callers_process(runners, namespace["counted"], lambda: namespace.update(N=0))
    assert namespace["N"] == len(_batch(ragged=False))


_REGISTERING_MODULE = """
class Registry(type):
    names = []

    def __new__(mcls, name, bases, namespace):
        mcls.names.append(name)
        return super().__new__(mcls, name, bases, namespace)


def register(a):
    Registry("Made", (), {})
    return a * 2
"""


_SCRIPT_RETURNING_ITS_OWN = """
import enum

class Mode(enum.Enum):
    FAST = 1

def moded(a):
    return Mode.FAST
"""


def test_an_object_of_a_scripts_class_returned_from_another_process_is_named(
    runners: dict[str, dict[str, Any]],
) -> None:
    """A script's class crosses to Dask's worker processes by value, and an object of it cannot
    cross back: named with the fix, not pickle's bare error."""
    refusal, _ = _scripts_map_refused(
        runners, "Dask worker processes", _SCRIPT_RETURNING_ITS_OWN, "moded", pickle.PicklingError
    )
    assert refusal.startswith(
        "autoconvert.batched(moded): what the samples returned does not pickle to cross back from the worker "
    ), refusal
    assert refusal.endswith("define the class in a module and import it")


def _scripts_map_refused(
    runners: dict[str, dict[str, Any]], where: str, source: str, name: str, error: type[Exception] = ValueError
) -> tuple[str, dict[str, Any]]:
    """The refusal (an ``error``) of a map of ``name``, a function of a script of ``source``,
    ``where``: its message, and the script's namespace."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(source, namespace)  # as a script defines them
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    with pytest.raises(error) as info:
        ac.batched(namespace[name], **options)(_batch(ragged=False))
    return str(info.value), namespace


@contextlib.contextmanager
def _by_value(
    name: str, source: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[types.ModuleType]:
    """Module ``name`` of ``source``, imported and registered with cloudpickle to be sent by value
    (as a script's code is), for the time of the block."""
    cloudpickle = pytest.importorskip("cloudpickle")
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    cloudpickle.register_pickle_by_value(module)
    try:
        yield module
    finally:
        cloudpickle.unregister_pickle_by_value(module)
        sys.modules.pop(name)


_ALIASING_MODULE = """
LOG = []


class Kept:
    log = LOG


def logged(a):
    Kept.log.append(1)
    return a * len(LOG)
"""


def test_a_global_a_class_attribute_aliases_is_read_as_sequentially_in_the_callers_process(
    runners: dict[str, dict[str, Any]], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class attribute that is one of its module's globals (``log = LOG``), changed through the
    class by a function sent by value: in the caller's process both are the caller's own, and
    the function reads the change through the global, as sequentially."""
    with _by_value("aliasing_by_value", _ALIASING_MODULE, tmp_path, monkeypatch) as module:
        _as_sequentially_in_the_callers_process(runners, module.logged, module.LOG.clear)
        assert module.LOG.count(1) == len(module.LOG) == len(_batch(ragged=False))


_IMPORTING_MODULE = """
from keeping_by_reference import LOG, keep


def kept(a):
    keep(1)
    return a * len(LOG)
"""


def test_a_global_another_modules_function_changes_is_read_as_sequentially_in_the_callers_process(
    runners: dict[str, dict[str, Any]], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``from keeping_by_reference import LOG``: a function sent by value reads the caller's own
    list in the caller's process, which the other module's function it calls appends to, as
    sequentially."""
    (tmp_path / "keeping_by_reference.py").write_text("LOG = []\n\n\ndef keep(x):\n    LOG.append(x)\n")
    try:
        with _by_value("importing_by_value", _IMPORTING_MODULE, tmp_path, monkeypatch) as module:
            _as_sequentially_in_the_callers_process(runners, module.kept, module.LOG.clear)
    finally:
        sys.modules.pop("keeping_by_reference", None)


@pytest.mark.parametrize("sent", ["a script's", "a module's registered by value"])
def test_a_change_to_a_class_sent_by_value_to_the_callers_process_is_the_callers(
    runners: dict[str, dict[str, Any]], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, sent: str
) -> None:
    """A class cloudpickle sends by value (a script's, or of a module registered with
    ``register_pickle_by_value``) is the caller's own on a Dask worker in the caller's process: a
    change to it (``Registry.names.append``) reaches the caller's class, once per sample, as
    sequentially."""
    options = {k: v for k, v in runners["Dask worker threads"].items() if k != "threads"}
    if sent == "a script's":
        module: Any = type(sys)("__main__")
        exec(_REGISTERING_MODULE, vars(module))  # as a script defines them
        out = ac.batched(module.register, **options)(_batch(ragged=False))
    else:
        with _by_value("registering_by_value", _REGISTERING_MODULE, tmp_path, monkeypatch) as module:
            out = ac.batched(module.register, **options)(_batch(ragged=False))
    assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)
    assert module.Registry.names == ["Made"] * len(_batch(ragged=False))


def reset_the_grid(a: np.ndarray) -> np.ndarray:
    """Binds a global object array anew, to None."""
    global _RESET_GRID
    _RESET_GRID = None
    return a * 2


_RESET_GRID: Any = np.array([_Kept()], dtype=object)


def test_a_global_object_array_bound_anew_is_refused_as_bound_anew(runners: dict[str, dict[str, Any]]) -> None:
    """What held an array of objects, bound to another type, is a change as a whole, not a walk
    of what it holds (which raised AttributeError)."""
    options = {k: v for k, v in runners["a process pool"].items() if k != "threads"}
    with pytest.raises(ValueError) as info:
        ac.batched(reset_the_grid, **options)(_batch(ragged=False))
    assert str(info.value).startswith(
        "autoconvert.batched(reset_the_grid): the function changed global _RESET_GRID of module tests.test_runners, "
    ), info.value
    assert _RESET_GRID is not None


def bumped_in_the_ledger(a: np.ndarray) -> np.ndarray:
    _LEDGER[0] += 1
    _JOURNAL.append(1)
    return a * 2


def scaled_by_the_ledger(a: np.ndarray) -> np.ndarray:
    return a * (1.0 + _LEDGER[0])


def scaled_by_the_journal(a: np.ndarray) -> np.ndarray:
    return a * (1.0 + len(_JOURNAL))


_LEDGER = np.zeros(1)
_JOURNAL: list[int] = []


@pytest.mark.parametrize(("reader", "name"), [(scaled_by_the_ledger, "_LEDGER"), (scaled_by_the_journal, "_JOURNAL")])
def test_a_copy_a_refused_call_changed_is_never_read_as_the_callers(
    runners: dict[str, dict[str, Any]], reader: Any, name: str
) -> None:
    """A refused call leaves its changes in the copies the pool's workers keep, the one its
    refusal names and the others: a later call that reads one is refused where it ran on such a
    worker, never computed from them."""
    options = {k: v for k, v in runners["a process pool"].items() if k != "threads"}
    with pytest.raises(ValueError, match=r"the function wrote into global _LEDGER of module tests\.test_runners"):
        ac.batched(bumped_in_the_ledger, chunksize=1, **options)(_batch(ragged=False))
    outcomes: list[Any] = []
    for _ in range(4):
        try:
            outcomes.append(ac.batched(reader, chunksize=1, **options)(_batch(ragged=False)))
        except ValueError as e:
            outcomes.append(str(e))
    refusal = (
        f"autoconvert.batched({reader.__name__}): an earlier call changed global {name} of module "
        "tests.test_runners on a worker of the process pool in another process, and was refused: "
    )
    for outcome in outcomes:
        assert outcome.startswith(refusal) if isinstance(outcome, str) else torch.equal(outcome, _batch(ragged=False))
    assert any(isinstance(outcome, str) for outcome in outcomes)
    assert _LEDGER.tolist() == [0.0] and _JOURNAL == []


_GLOBAL_HOOK_SCRIPT = """
import concurrent.futures, multiprocessing
import torch
import autoconvert as ac

FORWARDS = [0]
MODEL = torch.nn.Linear(2, 2)


def count_forwards(module, inputs, output):
    FORWARDS[0] += 1


def embedded(a):
    with torch.no_grad():
        MODEL(torch.ones(2))
    return a * 2


if __name__ == "__main__":
    torch.nn.modules.module.register_module_forward_hook(count_forwards)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        try:
            ac.batched(embedded, executor=pool, in_caller=False)(torch.ones(4, 2))
        except ValueError as e:
            print(e)
    print("caller's count:", FORWARDS[0])
"""


def test_a_global_a_hook_every_module_runs_changes_is_refused(tmp_path: pathlib.Path) -> None:
    """A hook every module's forward runs (register_module_forward_hook), held by torch, is the
    function's code too: the global it changes on a forked worker's copy is refused. In a process
    of its own: such a hook would run in every test of this one."""
    script = tmp_path / "global_hook.py"
    script.write_text(_GLOBAL_HOOK_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "autoconvert.batched(embedded): the function changed FORWARDS[0], in global FORWARDS of module __main__, "
        "on a worker of the process pool in another process, "
    ), done.stdout
    assert done.stdout.endswith("caller's count: 0\n"), done.stdout


def scaled_by_the_first(a: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return a * float(weights[0])


def counted_words(a: np.ndarray, vectorizer: Any) -> np.ndarray:
    """Reads a vectorizer with a fixed vocabulary, which fills its vocabulary_ as it first transforms."""
    return a * float(vectorizer.transform(["ab cd ab"]).sum())


class _LazyTable(dict[str, float]):
    """A mapping whose values() builds what it names (transformers' lazy auto-mappings import models)."""

    def values(self) -> Any:
        raise RuntimeError("a lazy table's values() was called")


_LAZY_TABLE = _LazyTable(scale=2.0)


def scaled_from_a_lazy_table(a: np.ndarray) -> np.ndarray:
    return a * _LAZY_TABLE["scale"]


class Learning:
    """Fills its parameter's gradient by backward()."""

    def __init__(self, w: torch.Tensor) -> None:
        self.w = w

    def __call__(self, a: np.ndarray) -> np.ndarray:
        (self.w * torch.tensor(a)).sum().backward()
        return a * 2


@pytest.mark.parametrize("where", ["a process pool", "Dask worker processes"])
def test_what_only_reads_crosses_and_runs_as_sequentially(
    runners: dict[str, dict[str, Any]], where: str, tmp_path: pathlib.Path
) -> None:
    """A memmap argument (np.load's with mmap_mode) crosses as an array, its mmap left behind;
    a vectorizer whose vocabulary is a parameter fills vocabulary_ on first use, a cache, not
    what a fit learned; a global mapping's own values() (a lazy one's) is never called."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    weights = np.memmap(tmp_path / "weights", dtype=np.float64, mode="w+", shape=(2,))
    weights[:] = [3.0, 1.0]
    out = ac.batched(scaled_by_the_first, **options)(_batch(ragged=False), weights)
    assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 3)
    text = pytest.importorskip("sklearn.feature_extraction.text")
    vectorizer = text.CountVectorizer(vocabulary=["ab", "cd"])
    out = ac.batched(counted_words, **options)(_batch(ragged=False), vectorizer)
    assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 3)
    out = ac.batched(scaled_from_a_lazy_table, **options)(_batch(ragged=False))
    assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)


def test_a_gradient_backward_fills_on_a_copy_is_named_with_autograd_grad_as_the_fix(
    runners: dict[str, dict[str, Any]],
) -> None:
    """A parameter's .grad filled on a copy is named as such (not as a write into the tensor),
    with the way to take a gradient that leaves .grad alone."""
    options = {k: v for k, v in runners["a process pool"].items() if k != "threads"}
    w = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(ValueError) as info:
        ac.batched(Learning(w), **options)(_batch(ragged=False))
    message = str(info.value)
    assert message.startswith("autoconvert.batched(Learning): the function changed self.w.grad, in "), message
    assert "Fix: take the gradients with torch.autograd.grad (it leaves .grad as it was), " in message
    assert w.grad is None


_NOTED: list[float] = []


def _note(value: Any) -> Any:
    _NOTED.append(1.0)
    return value


class _Callback:
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn


_CALLBACKS = [_Callback(_note)]
_BY_NAME = {"held": _Callback(_note)}


def calling_back(a: np.ndarray) -> np.ndarray:
    for callback in (*_CALLBACKS, *_BY_NAME.values()):
        callback.fn(a)
    return a


_IN_ORDER = collections.deque([_Callback(_note)])
_AS_SET = {_Callback(_note)}
_FROZEN = frozenset([_Callback(_note)])
_AS_KEYS = {_Callback(_note): "first"}
_AS_ITEMS = np.array([_Callback(_note), None], dtype=object)


def through_a_deque(a: np.ndarray) -> np.ndarray:
    return next(callback.fn(a) for callback in _IN_ORDER)


def through_a_set(a: np.ndarray) -> np.ndarray:
    return next(callback.fn(a) for callback in _AS_SET)


def through_a_frozenset(a: np.ndarray) -> np.ndarray:
    return next(callback.fn(a) for callback in _FROZEN)


def through_a_dicts_keys(a: np.ndarray) -> np.ndarray:
    return next(callback.fn(a) for callback in _AS_KEYS)


def through_an_object_array(a: np.ndarray) -> np.ndarray:
    return _AS_ITEMS[0].fn(a)  # type: ignore[no-any-return]


def _pipeline() -> Any:
    pipeline = pytest.importorskip("sklearn.pipeline")
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    linear = pytest.importorskip("sklearn.linear_model")
    steps = pipeline.make_pipeline(preprocessing.FunctionTransformer(_note), linear.LinearRegression())
    return steps.fit(np.arange(4.0).reshape(-1, 1), np.arange(4.0))


def predicting(a: np.ndarray, pipeline: Any) -> np.ndarray:
    return pipeline.predict(a.reshape(-1, 1))


def _nested_pipelines() -> list[Any]:
    """A ColumnTransformer and a FeatureUnion, each over a pipeline of a FunctionTransformer."""
    compose = pytest.importorskip("sklearn.compose")
    pipeline = pytest.importorskip("sklearn.pipeline")
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    inner = pipeline.make_pipeline(preprocessing.FunctionTransformer(_note))
    made = [compose.ColumnTransformer([("inner", inner, [0])]), pipeline.FeatureUnion([("inner", inner)])]
    return [m.fit(np.arange(4.0).reshape(-1, 1)) for m in made]


def transforming(a: np.ndarray, transformer: Any) -> np.ndarray:
    return transformer.transform(a.reshape(-1, 1))  # type: ignore[no-any-return]


@dataclasses.dataclass
class _RunStats:
    history: list[float] = dataclasses.field(default_factory=lambda: _NOTED)


def recording(a: np.ndarray) -> np.ndarray:
    _RunStats().history.append(1.0)
    return a


@pytest.mark.parametrize("where", ["a process pool", "Dask worker processes"])
def test_a_function_an_object_in_a_container_holds_is_followed(runners: dict[str, dict[str, Any]], where: str) -> None:
    """The code objects in a global container hold (callbacks in a list, a dict, a deque, a set,
    a dict's keys, an object array), a pipeline's steps (its
    ``(name, step)`` pairs: a ``FunctionTransformer``'s function; a pipeline within a
    ``ColumnTransformer`` or a ``FeatureUnion``) and a dataclass's default
    factories (its generated ``__init__`` calls them) is followed as the function's own: the
    global it changes on a copy is refused, never lost."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    fitted, nested = _pipeline(), _nested_pipelines()
    _NOTED.clear()  # what fitting noted
    holders = (through_a_deque, through_a_set, through_a_frozenset, through_a_dicts_keys, through_an_object_array)
    for fn, more in (
        (calling_back, ()),
        *((h, ()) for h in holders),
        (predicting, (fitted,)),
        *((transforming, (n,)) for n in nested),
        (recording, ()),
    ):
        with pytest.raises(
            ValueError, match=rf"^autoconvert\.batched\({fn.__name__}\): the function changed global _NOTED"
        ):
            ac.batched(fn, **options)(_batch(ragged=False), *more)
    assert _NOTED == []


class _Doubling:
    """A model class counting its calls in a class attribute."""

    calls = 0

    def __call__(self, value: Any) -> Any:
        type(self).calls += 1
        return value * 2


_MODEL_CLASSES = {"double": _Doubling}


def made_from_a_registry(a: np.ndarray) -> np.ndarray:
    return _MODEL_CLASSES["double"]()(a)  # type: ignore[no-any-return]


@pytest.mark.parametrize("where", ["a process pool", "Dask worker processes"])
def test_a_class_a_global_registry_holds_is_compared_by_its_attributes(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """A class reached through a global dict (a registry of models) is compared by its attributes,
    as one named is: a count its instances keep there is refused, never lost."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    with pytest.raises(ValueError) as info:
        ac.batched(made_from_a_registry, **options)(_batch(ragged=False))
    assert str(info.value).startswith(
        "autoconvert.batched(made_from_a_registry): the function changed _MODEL_CLASSES['double'].calls, in global "
        "_MODEL_CLASSES['double'] of module tests.test_runners, "
    ), info.value
    assert _Doubling.calls == 0


_LOCKABLE = np.zeros(3)
_TRACKABLE = torch.zeros(2)
_TUNED = torch.nn.Linear(1, 1)


def locking(a: np.ndarray) -> np.ndarray:
    _LOCKABLE.flags.writeable = False
    return a


def tracking(a: np.ndarray) -> np.ndarray:
    _TRACKABLE.requires_grad_(True)
    return a


def freezing(a: np.ndarray) -> np.ndarray:
    for parameter in _TUNED.parameters():
        parameter.requires_grad_(False)  # fine-tuning's first step
    return a


@pytest.mark.parametrize(
    ("fn", "changed"),
    [
        (locking, "changed the WRITEABLE flag of global _LOCKABLE"),
        (tracking, "changed the requires_grad flag of global _TRACKABLE"),
        (freezing, "changed _TUNED.weight"),
    ],
)
@pytest.mark.parametrize("where", ["a process pool", "Dask worker processes"])
def test_a_flag_changed_on_a_copy_of_a_global_array_or_tensor_is_refused(
    runners: dict[str, dict[str, Any]], where: str, fn: Any, changed: str
) -> None:
    """Whether an array may be written and whether a tensor records gradients are compared
    with its data: a global array locked, a tensor tracked or a model frozen on a copy would
    be lost."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    with pytest.raises(ValueError, match=rf"^autoconvert\.batched\({fn.__name__}\): the function {changed}"):
        ac.batched(fn, **options)(_batch(ragged=False))
    assert _LOCKABLE.flags.writeable and not _TRACKABLE.requires_grad
    assert all(p.requires_grad for p in _TUNED.parameters())


def test_a_read_only_global_a_script_function_makes_writable_on_dask_is_named(
    runners: dict[str, dict[str, Any]],
) -> None:
    """Dask hands a script's function its read-only global array as a view of a read-only
    buffer, whose flag NumPy will not set: NumPy's error names no array, so the global is named
    with the fix, and no argument is blamed."""
    table = np.arange(3.0)
    table.setflags(write=False)
    namespace: dict[str, Any] = {"__name__": "__main__", "TABLE": table}
    exec("def unlocked(a):\n    TABLE.setflags(write=True)\n    return a", namespace)  # as a script defines it
    options = {k: v for k, v in runners["Dask worker processes"].items() if k != "threads"}
    with pytest.raises(ValueError, match=r"^cannot set WRITEABLE flag to True of this array\n") as info:
        ac.batched(namespace["unlocked"], **options)(_batch(ragged=False))
    assert not isinstance(info.value, ac.ReadOnlyError)
    assert info.value.__notes__[-1].startswith(
        "autoconvert.batched(unlocked): global TABLE of module __main__ is a read-only array, of which a Dask worker "
        "in another process holds a copy whose WRITEABLE flag cannot be set;"
    ), info.value.__notes__


class _Delegating:
    """Delegates the attributes it lacks to what it wraps (a progress bar's, a proxy's): unpickled,
    before its ``__dict__`` is set, the lookup of what it wraps recurses."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("held", ["argument", "global"])
def test_what_pickles_and_does_not_unpickle_on_dask_is_named(runners: dict[str, dict[str, Any]], held: str) -> None:
    """Dask's workers fail to unpickle an object whose ``__getattr__`` recurses before it is set
    up: the argument or the script's global is named, with its fix, not the worker's raw error."""
    namespace: dict[str, Any] = {"__name__": "__main__", "SETTINGS": _Delegating(2.0)}
    exec("def scaled(a, settings=None):\n    return a * (settings or SETTINGS).real", namespace)  # as a script does
    options = {k: v for k, v in runners["Dask worker threads"].items() if k != "threads"}
    extra = (_Delegating(2.0),) if held == "argument" else ()
    with pytest.raises(pickle.PicklingError) as info:
        ac.batched(namespace["scaled"], **options)(_batch(ragged=False), *extra)
    place = "argument settings" if held == "argument" else "global SETTINGS of module __main__"
    assert str(info.value).startswith(
        f"autoconvert.batched(scaled): {place} pickles and does not unpickle: its __getattr__ or __setstate__ fails "
        "(RecursionError: maximum recursion depth exceeded"
    ), info.value
    fix = "pass values that unpickle" if held == "argument" else "define the function in a module and import it"
    assert fix in str(info.value)


def test_a_global_whose_own_pickling_fails_is_named(runners: dict[str, dict[str, Any]]) -> None:
    """A global a script's function reads, whose own reducer raises (a parametrized module's
    RuntimeError), is named with the fix, as any global that does not pickle is."""
    linear = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 3))
    namespace: dict[str, Any] = {"__name__": "__main__", "torch": torch, "layer": linear}
    exec("def through_layer(a):\n    return layer(torch.as_tensor(a)).detach().numpy()", namespace)
    options = {k: v for k, v in runners["Dask worker threads"].items() if k != "threads"}
    with pytest.raises(pickle.PicklingError) as info:
        ac.batched(namespace["through_layer"], **options)(_batch(ragged=False))
    assert str(info.value).startswith(
        "autoconvert.batched(through_layer): global layer of module __main__ does not pickle (RuntimeError: "
        "Serialization of parametrized modules is only supported through state_dict()"
    ), info.value
    assert str(info.value).endswith(
        "the executor's workers receive a script's function by pickling, with copies of the globals it names. Fix: "
        "define the function in a module and import it (it is sent by reference, and the workers' module holds its "
        "globals), or run on threads (workers=)"
    )


@pytest.mark.parametrize("where", _WORKERS)
@pytest.mark.parametrize("carrier", _CARRIERS)
def test_a_change_the_function_makes_to_what_it_holds_is_the_callers_or_refused(
    runners: dict[str, dict[str, Any]], where: str, carrier: str
) -> None:
    """A bound method's object, a callable object and a partial's bound arguments travel with
    the function: what its samples change there is the caller's where they run in the
    caller's process, and refused, never silently lost, where workers hold copies."""
    make, read, refusal = _CARRIERS[carrier]
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    fn, held = make()
    sequential_fn, sequential = make()
    ac.batched(sequential_fn)(_batch(ragged=False))
    if where not in _COPIES:
        out = ac.batched(fn, **options)(_batch(ragged=False))
        assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)
        assert read(held) == read(sequential)
        return
    before = read(held)
    with pytest.raises(ValueError) as info:
        ac.batched(fn, **options)(_batch(ragged=False))
    assert refusal + _COPIES[where] in str(info.value)
    assert read(held) == before


@pytest.mark.parametrize("where", _WORKERS)
@pytest.mark.parametrize("held", ["counts['n']", "counts.n[0]"])  # a list or tuple of tensors is a batch
def test_a_write_into_a_tensor_a_container_argument_holds_is_the_same_refusal_on_every_runner(
    runners: dict[str, dict[str, Any]], where: str, held: str
) -> None:
    """A tensor inside a container argument is handed read-only: the write into it raises the
    ReadOnlyError naming its path that the sequential run raises, on workers in other
    processes too (whose traceback stays there)."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    counts = torch.zeros(1, dtype=torch.float64)
    with pytest.raises(ac.ReadOnlyError) as sequential:
        ac.batched(counted_through_a_name)(_batch(ragged=False), _HOLDINGS[held](counts))
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.batched(counted_through_a_name, **options)(_batch(ragged=False), _HOLDINGS[held](counts))
    assert str(info.value) == str(sequential.value)
    assert str(info.value).startswith(f"counted_through_a_name(): argument {held} was written into by the function; ")
    assert counts.tolist() == [0.0]


def forwarded(a: np.ndarray, net: Any) -> np.ndarray:
    return np.asarray(net(torch.tensor(a)))


@pytest.mark.parametrize("where", _WORKERS)
def test_a_count_a_torch_module_arguments_layer_keeps_in_its_class_is_the_callers_or_refused(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """A torch module handed to NumPy code (called as a callback) whose layer of another module of
    the user's counts its calls in its class: the caller's class counts them where the samples run
    in the caller's process; in another process the change is refused naming the class."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    held_state.Counted.calls = 0
    net = torch.nn.Sequential(held_state.Counted())
    if where not in _COPIES or _COPIES[where].endswith("the caller's process"):
        ac.batched(forwarded, **options)(_batch(ragged=False), net)
        assert held_state.Counted.calls == 12
        return
    with pytest.raises(ValueError) as info:
        ac.batched(forwarded, **options)(_batch(ragged=False), net)
    assert str(info.value).startswith(
        "autoconvert.batched(forwarded): the function changed Counted.calls, in global Counted of module "
        f"tests.held_state, on {_COPIES[where]}"
    ), info.value
    assert held_state.Counted.calls == 0


def weighted(a: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return a * weights[: a.shape[-1]] if isinstance(weights, np.ndarray) else weights


@pytest.mark.parametrize("where", _WORKERS)
def test_a_partials_bound_tensor_is_converted_once_as_the_pairs_call_converts_it(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """``batched(partial(f, w=W))`` converts the bound tensor with the batch, as
    ``returns_tensor(accepts_numpy(partial(f, w=W)))`` does per sample: never a batch itself
    (the samples slice the call's tensors alone), read-only as an argument's array is, the same
    refusal of a write on every runner."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    batch, weights = _batch(ragged=False), torch.arange(1.0, 40.0, dtype=torch.float64)
    out = ac.batched(functools.partial(weighted, weights=weights), **options)(batch)
    by_hand = torch.stack(
        [ac.returns_tensor(ac.accepts_numpy(functools.partial(weighted, weights=weights)))(s) for s in batch]
    )
    assert torch.equal(out, by_hand) and out.dtype == by_hand.dtype
    counts = torch.zeros(1, dtype=torch.float64)
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.batched(functools.partial(bound_count, counts=counts), **options)(batch)
    assert str(info.value).startswith("bound_count(): argument counts was written into by the function; ")
    assert counts.tolist() == [0.0]


@pytest.mark.parametrize("where", _WORKERS)
@pytest.mark.parametrize("held", _HOLDINGS)
@pytest.mark.parametrize("kind", ["array", "array.array"])
def test_a_write_into_an_array_argument_is_the_callers_or_refused(
    runners: dict[str, dict[str, Any]], where: str, held: str, kind: str
) -> None:
    """An array among the arguments (not a batch), or held by a container among them, or a
    stdlib ``array.array``, written in place: the caller's array takes the writes where the
    samples run in the caller's process, as sequentially; where workers hold copies the write
    is refused, naming the argument, never silently lost."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    counts = np.zeros(1) if kind == "array" else array.array("d", [0.0])
    if where not in _COPIES:
        out = ac.batched(counted_into, **options)(_batch(ragged=False), _HOLDINGS[held](counts))
        assert torch.equal(out, _batch(ragged=False) * 2) and counts.tolist() == [12.0]
        return
    with pytest.raises(ValueError) as info:
        ac.batched(counted_into, **options)(_batch(ragged=False), _HOLDINGS[held](counts))
    assert str(info.value) == (
        f"autoconvert.batched(counted_into): the function wrote into argument {held}, an array, on "
        f"{_COPIES[where]}, which holds a copy of it: the write cannot reach the caller's array, as it does where "
        "the samples run sequentially or on threads. Fix: return what the function computes, or run it "
        "sequentially (no executor) or on threads (workers=)"
    )
    assert counts.tolist() == [0.0]


class _CountedNet:
    """A model class counting what is made of it in a class attribute."""

    made = 0

    def __init__(self) -> None:
        type(self).made += 1


class _Architecture(enum.Enum):
    SMALL = _CountedNet


_MAKE_NET = functools.partial(_CountedNet)
_DESCRIPTOR_READS = 0
_CALLBACK_RUNS = 0
_INSTANCES_MADE = 0


class _CountingReads:
    """A descriptor that counts its reads in a global."""

    def __get__(self, instance: Any, owner: Any = None) -> float:
        global _DESCRIPTOR_READS
        _DESCRIPTOR_READS += 1
        return 2.0


class _Scaled:
    scale = _CountingReads()


def _run_callback() -> None:
    global _CALLBACK_RUNS
    _CALLBACK_RUNS += 1


class _SlottedCallback:
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn


_SLOTTED = _SlottedCallback(_run_callback)


class _CountingMeta(type):
    """A metaclass counting the instances made of its classes in a global."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        global _INSTANCES_MADE
        _INSTANCES_MADE += 1
        return super().__call__(*args, **kwargs)


class _Made(metaclass=_CountingMeta):
    pass


def made_from_an_enum(a: np.ndarray) -> np.ndarray:
    _Architecture.SMALL.value()
    return a


def made_by_a_partial(a: np.ndarray) -> np.ndarray:
    _MAKE_NET()
    return a


def made_from_a_default(a: np.ndarray, cls: type = _CountedNet) -> np.ndarray:
    cls()
    return a


def scaled_by_a_descriptor(a: np.ndarray) -> np.ndarray:
    return a * _Scaled.scale


def called_back_from_slots(a: np.ndarray) -> np.ndarray:
    _SLOTTED.fn()
    return a


def made_through_a_metaclass(a: np.ndarray) -> np.ndarray:
    _Made()
    return a


@pytest.mark.parametrize(
    ("fn", "changed"),
    [
        (made_from_an_enum, "_CountedNet.made, in global _CountedNet"),
        (made_by_a_partial, "_CountedNet.made, in global _CountedNet"),
        (made_from_a_default, "_CountedNet.made, in global _CountedNet"),
        (scaled_by_a_descriptor, "global _DESCRIPTOR_READS"),
        (called_back_from_slots, "global _CALLBACK_RUNS"),
        (made_through_a_metaclass, "global _INSTANCES_MADE"),
    ],
    ids=["an Enum's value", "a partial", "a default", "a descriptor", "a __slots__ callback", "a metaclass"],
)
@pytest.mark.parametrize("where", ["a process pool", "Dask worker processes"])
def test_what_code_no_walk_follows_changes_in_the_functions_module_is_refused(
    runners: dict[str, dict[str, Any]], where: str, fn: Any, changed: str
) -> None:
    """Every class and function the function's module defines, and every number it binds, are
    compared on a worker in another process, whatever reaches them: a class an Enum member, a
    partial or a default holds, a global a descriptor, a callback in a ``__slots__`` object or
    a metaclass's ``__call__`` changes. The change is refused, never lost."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    with pytest.raises(ValueError) as info:
        ac.batched(fn, **options)(_batch(ragged=False))
    assert str(info.value).startswith(
        f"autoconvert.batched({fn.__name__}): the function changed {changed} of module tests.test_runners, on "
        f"{_COPIES[where]}, "
    ), info.value
    assert (_CountedNet.made, _DESCRIPTOR_READS, _CALLBACK_RUNS, _INSTANCES_MADE) == (0, 0, 0, 0)


_SCRIPT_DISPATCHING = """
import functools


@functools.singledispatch
def tripled(v):
    return v


@tripled.register
def _(v: float):
    return v * 3.0


def dispatched(a):
    return a * tripled(1.0)
"""


def test_a_script_global_that_does_not_pickle_is_named_not_the_standard_librarys(
    runners: dict[str, dict[str, Any]],
) -> None:
    """A script's ``singledispatch`` function keeps weak references in its dispatch cache, so
    cloudpickle cannot send it: the refusal names it, never a global of the standard library's
    frozen modules (``Container of module collections.abc``), whose code is not the user's."""
    refusal, _ = _scripts_map_refused(
        runners, "Dask worker threads", _SCRIPT_DISPATCHING, "dispatched", pickle.PicklingError
    )
    assert refusal.startswith(
        "autoconvert.batched(dispatched): global tripled of module __main__ does not pickle (TypeError: "
    ), refusal


@ac.accepts_numpy
def summed_where_decorated(a: np.ndarray) -> np.ndarray:
    return a * 2


@pytest.mark.parametrize("where", ["a process pool", "Dask worker processes"])
def test_a_decorated_module_function_maps_on_workers_in_other_processes(
    runners: dict[str, dict[str, Any]], where: str
) -> None:
    """``batched`` maps a decorated function's own function, whose name its module gives to the
    decorator's wrapper: pickle finds it through the wrapper, as sequentially it runs."""
    options = {k: v for k, v in runners[where].items() if k != "threads"}
    out = ac.batched(summed_where_decorated, **options)(_batch(ragged=False))
    assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)


_SCRIPT_HOLDING_ITS_CLASS = """
import enum
import functools


class Counted:
    calls = 0

    @classmethod
    def bump(cls):
        cls.calls += 1


class Size(enum.Enum):
    SMALL = Counted


MAKE = functools.partial(Counted)


def through_an_enum(a):
    Size.SMALL.value.bump()
    return a


def through_a_partial(a):
    type(MAKE()).bump()
    return a


def through_a_default(a, kind=Counted):
    kind.bump()
    return a


def untouched(a):
    return a * 2
"""


@pytest.mark.parametrize("name", ["through_an_enum", "through_a_partial", "through_a_default"])
def test_a_scripts_class_a_holder_sends_to_another_process_is_compared(
    runners: dict[str, dict[str, Any]], name: str
) -> None:
    """A class of a script, sent by value with its function to Dask's worker processes inside
    whatever holds it (an Enum member, a partial, a default), is a copy there: a change to it is
    refused, whatever reaches it, never lost; a later map of a function that reads none of it
    runs on the same workers."""
    refusal, namespace = _scripts_map_refused(runners, "Dask worker processes", _SCRIPT_HOLDING_ITS_CLASS, name)
    place = (  # the class a partial stands for, by the global holding it
        "MAKE.func.calls, in global MAKE.func of module __main__"
        if name == "through_a_partial"
        else "Counted.calls, an attribute of the class"
    )
    assert refusal.startswith(
        f"autoconvert.batched({name}): the function changed {place}, on a Dask worker in another process, "
    ), refusal
    assert namespace["Counted"].calls == 0
    options = {k: v for k, v in runners["Dask worker processes"].items() if k != "threads"}
    out = ac.batched(namespace["untouched"], **options)(_batch(ragged=False))
    assert torch.equal(torch.as_tensor(out), _batch(ragged=False) * 2)
