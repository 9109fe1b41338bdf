"""The promise matrix's one table: every product on every route and runner, as the way it
turns a NumPy body into what a torch caller calls.

A new product, route or runner is one ``Site`` here, and ``tests/test_promises.py`` holds it
to every promise on its first run. A site says what it is (its samples are rows of batches,
it runs in other processes, it converts results, it pickles) so that each promise knows
what to expect of it, never which product it is."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import multiprocessing
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
import torch

import autoconvert as ac
from autoconvert._interpreter._trace import _UNFIT_DYNAMO
from tests import promise_bodies


class Runners:
    """The executors sites run on beyond the caller's process, by name: each started on its
    first use (a Ray or Dask cluster takes seconds), all closed together with ``stack``."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._stack = stack
        self._started: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._started:
            self._started[name] = self._stack.enter_context(_STARTERS[name](self))
        return self._started[name]


Wrap = Callable[[Callable[..., Any], dict[str, Any], Runners], Callable[..., Any]]


@dataclasses.dataclass(frozen=True)
class Site:
    """One product on one route and runner.

    ``wrap(body, options, runners)`` gives what the caller calls, ``options`` being the
    conversion options a promise asks for (``copy``, ``writeback``, ``grad``)."""

    name: str
    wrap: Wrap
    #: The body sees the samples of batches (rows along dim 0), not the caller's arguments.
    samples: bool = False
    #: The body runs on an executor the caller passed (its workers may be other processes).
    on_executor: bool = False
    #: Results come back as tensors.
    converts_results: bool = True
    #: A result container with methods comes back converted, its methods taking and giving
    #: tensors (numpy_op returns tensors alone; adapt converts what the return annotation names).
    result_methods: bool = True
    #: What the caller holds is the product itself, which pickles by reference.
    pickles: bool = True
    #: The function and argument path autoconvert's messages name for a body's first
    #: argument, where they are not the body's own (a method that calls it).
    named: tuple[str, str] | None = None
    #: Where the body's changes to a copy of its arguments are made, as autoconvert's
    #: refusal of them names it: on an executor whose workers receive copies.
    worker: str = ""
    #: A forward-mode tangent it has no rule for is refused (GradientError), whatever ``grad=`` says.
    refuses_tangents: bool = False
    #: Its NumPy body is traced into torch's graph, on private copies of the arguments: a write
    #: into one, which an eager call refuses, stays there (the numpy-op guide).
    traced: bool = False
    slow: bool = False

    def names(self, body: Callable[..., Any]) -> tuple[str, str]:
        """The function and first argument's path messages name for ``body`` here."""
        return self.named or (body.__qualname__, "a")

    def param(self) -> Any:
        return pytest.param(self, id=self.name, marks=[pytest.mark.slow] if self.slow else [])


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` under torch.compile: its NumPy body traced into the graph, or, where torch cannot
    trace it (a Python float of a value, a set), the escape it falls back to, said once with a
    CompileWarning (the numpy-op guide), which each promise here is kept through."""
    compiled = torch.compile(fn, backend="aot_eager")

    def call(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=ac.CompileWarning)
            return compiled(*args, **kwargs)

    return call


def _in_config(body: Callable[..., Any], options: dict[str, Any], _: Runners) -> Callable[..., Any]:
    decorated = ac.returns_tensor(ac.accepts_numpy(body))

    def call(*args: Any) -> Any:
        with ac.config(**options):
            return decorated(*args)

    return call


def _batched_on(runner: str, **fixed: Any) -> Wrap:
    def wrap(body: Callable[..., Any], options: dict[str, Any], runners: Runners) -> Callable[..., Any]:
        return ac.batched(body, executor=runners[runner], in_caller=False, **fixed, **options)

    return wrap


def _on_executor(name: str, runner: str, worker: str, **fixed: Any) -> Site:
    """``batched`` on ``runner``'s executor, whose workers (``worker``, in the refusals' words)
    hold copies: slow, and pickling nothing of the caller's."""
    return Site(
        name, _batched_on(runner, **fixed), samples=True, on_executor=True, pickles=False, worker=worker, slow=True
    )


class _BindingFirst(functools.partial):  # type: ignore[type-arg]
    """A partial subclass (one that adds a name, say), as a caller binds a first argument."""


def _bound_first(product: Callable[[Callable[..., Any], dict[str, Any]], Callable[..., Any]]) -> Wrap:
    """``product`` made, at each call, of a partial of the body binding the caller's first
    argument: the bound argument meets every promise an argument of the call does."""

    def wrap(body: Callable[..., Any], options: dict[str, Any], _: Runners) -> Callable[..., Any]:
        def call(a: Any, *rest: Any) -> Any:
            return product(_BindingFirst(body, a), options)(*rest)

        return call

    return wrap


SITES = [
    Site("the decorator pair", lambda body, o, _: ac.returns_tensor(ac.accepts_numpy(body, **o))),
    Site("accepts_numpy alone", lambda body, o, _: ac.accepts_numpy(body, **o), converts_results=False),
    Site("a config block", _in_config, pickles=False),
    Site("adapt", lambda body, o, _: ac.adapt(body, **o), result_methods=False),
    Site("torchify of a function", lambda body, o, _: ac.torchify(body, **o)),
    Site(
        "torchify of a module",
        lambda body, o, _: getattr(ac.torchify(promise_bodies, **o), body.__name__),
    ),
    Site(
        "torchify of an object's method",
        lambda body, o, _: ac.torchify(promise_bodies.Holder(body), **o).run,
        pickles=False,
        named=("Holder.run", "args[0]"),
    ),
    Site("numpy_op", lambda body, o, _: ac.numpy_op(body, **o), refuses_tangents=True, result_methods=False),
    Site(
        "the decorator pair of a partial",
        _bound_first(lambda fn, o: ac.returns_tensor(ac.accepts_numpy(fn, **o))),
        pickles=False,
    ),
    Site("adapt of a partial", _bound_first(lambda fn, o: ac.adapt(fn, **o)), pickles=False, result_methods=False),
    Site("torchify of a partial", _bound_first(lambda fn, o: ac.torchify(fn, **o)), pickles=False),
    Site(
        "numpy_op of a partial",
        _bound_first(lambda fn, o: ac.numpy_op(fn, **o)),
        pickles=False,
        refuses_tangents=True,
        result_methods=False,
    ),
    Site("batched in the caller", lambda body, o, _: ac.batched(body, **o), samples=True),
    Site(
        "batched on threads",
        lambda body, o, _: ac.batched(body, workers=2, in_caller=False, **o),
        samples=True,
    ),
    _on_executor("batched on a process pool", "process pool", "a worker of the process pool in another process"),
    _on_executor("batched on Dask worker processes", "dask processes", "a Dask worker in another process", chunksize=1),
    _on_executor(
        "batched on Dask worker threads", "dask threads", "a Dask worker in the caller's process", chunksize=1
    ),
    _on_executor(
        "batched on a multiprocessing pool", "multiprocessing pool", "a worker of the process pool in another process"
    ),
    _on_executor(
        "batched on Ray's multiprocessing pool", "ray pool", "a worker of the process pool in another process"
    ),
    _on_executor("batched on Ray", "ray", "a Ray worker in another process"),
]
if _UNFIT_DYNAMO is None:  # a torch whose dynamo holds the trace route (torch 2.4's meets the generic call raw)
    SITES.insert(
        2,
        Site(
            "the decorator pair under torch.compile",
            lambda body, o, _: _compiled(ac.returns_tensor(ac.accepts_numpy(body, **o))),
            pickles=False,
            traced=True,
        ),
    )


@contextlib.contextmanager
def runners() -> Iterator[Runners]:
    """The runners the slow sites use, each started where a site first asks for it."""
    with contextlib.ExitStack() as stack:
        yield Runners(stack)


@contextlib.contextmanager
def _process_pool() -> Iterator[Any]:
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


@contextlib.contextmanager
def _multiprocessing_pool() -> Iterator[Any]:
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        yield pool


@contextlib.contextmanager
def _dask(*, processes: bool) -> Iterator[Any]:
    """A Dask client of two worker processes of one thread on loopback, or of one worker of two
    threads in the caller's process."""
    distributed = pytest.importorskip("distributed")
    shape = (
        {"n_workers": 2, "threads_per_worker": 1, "host": "127.0.0.1"}
        if processes
        else {"n_workers": 1, "threads_per_worker": 2}
    )
    with contextlib.ExitStack() as stack:
        with warnings.catch_warnings():  # around the startup alone: a test's own filters stay as they are
            warnings.simplefilter("ignore", DeprecationWarning)  # dask's own, from its startup
            cluster = stack.enter_context(
                distributed.LocalCluster(processes=processes, dashboard_address=":0", **shape)
            )
            client = stack.enter_context(distributed.Client(cluster))
        yield client


@contextlib.contextmanager
def local_ray() -> Iterator[Any]:
    """The ``ray`` module, connected to a local Ray of two CPUs (more workers would take the
    cores from the rest of the suite)."""
    ray = pytest.importorskip("ray")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Ray's own, from its startup
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


@contextlib.contextmanager
def _ray_pool(runners: Runners) -> Iterator[Any]:
    """Ray's multiprocessing pool of two actors, on the local Ray the Ray site uses."""
    runners["ray"]
    from ray.util.multiprocessing import Pool

    pool = Pool(2)
    try:
        yield pool
    finally:
        pool.terminate()


#: How each runner starts (given the runners, for one that runs on another's).
_STARTERS: dict[str, Callable[[Runners], contextlib.AbstractContextManager[Any]]] = {
    "process pool": lambda _: _process_pool(),
    "multiprocessing pool": lambda _: _multiprocessing_pool(),
    "dask processes": lambda _: _dask(processes=True),
    "dask threads": lambda _: _dask(processes=False),
    "ray": lambda _: local_ray(),
    "ray pool": _ray_pool,
}
