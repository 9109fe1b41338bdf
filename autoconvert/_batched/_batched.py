"""``batched``: run a NumPy function once per sample of a batch, in the caller or on workers.

Pipelines often call SciPy once per sample in a Python loop (Hungarian matching per
image, distance transforms per volume). ``batched`` is that loop, written once, and no
slower: each batch converted once by the function's own call (one array for a dim-0
batch, samples its views), the function run on NumPy samples, the results gathered in
NumPy (_gather) and converted once. Samples never ``.squeeze()``d; threads for the many
SciPy routines that release the GIL, process pools and Dask for code that holds it
(_executors), and the caller's thread for a batch too small to pay for them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
import types
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, Protocol, Unpack, overload

import numpy as np
import torch

from autoconvert._errors import SequenceKey, keystr
from autoconvert._failures._traceback import boundary
from autoconvert._interpreter._plan import Plan
from autoconvert._interpreter._routes import Description, Routed, described, plan_of
from autoconvert._interpreter._wrapper import Wrapper, shown, unbound_instance, wrap
from autoconvert._observe._observe import count_batch
from autoconvert._options._checks import is_pool, is_ray
from autoconvert._options._config import active
from autoconvert._options._options import (
    DEFAULTS,
    BatchedOptions,
    BatchSettings,
    Policy,
    check_callable,
    reject_given,
    settings_of,
    shows_options,
    validate,
)
from autoconvert._partials import binds_arguments
from autoconvert._pickling import by_reference, exported
from autoconvert._spec._signature import Parameters, function_name

from ._caps import has_threadpoolctl
from ._chunks import Batch
from ._chunks import run as run_chunk
from ._executors import Elsewhere, Progress, Samples, Threads, max_workers, seeds_on_threads
from ._gather import Sink, gather
from ._on_device import DECLINED, OnDevice, device_route
from ._pools import PoolExecutor
from ._ray import OnRay
from ._seeds import GlobalStates, Seeds


class BatchedDecorator(Protocol):
    """What ``batched(...)`` with options alone returns, named for autoconvert.mypy_plugin."""

    def __call__(self, fn: Callable[..., Any], /) -> Callable[..., Any]: ...


@overload
def batched(fn: Callable[..., Any], /, **options: Unpack[BatchedOptions]) -> Callable[..., Any]: ...
@overload
def batched(**options: Unpack[BatchedOptions]) -> BatchedDecorator: ...
def batched(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Call ``fn`` once per sample and gather the results; bare or as ``@batched(workers=2)``.

    Tensor arguments are batches: along dim 0 (all with the same leading size), or as a
    list or tuple of tensors or a nested tensor (ragged batches, e.g. from ``split``).
    Every other argument reaches each call unchanged. Each batch is converted once, as
    ``fn``'s call converts its arguments, and ``fn`` runs on its NumPy samples (views of the
    converted batch). Results stack into one tensor when every sample's result is an array
    of the same shape and dtype, else come back as a list; tuple, namedtuple and dict
    results come back as one of those, field by field; the gathered result is converted
    once, as ``fn``'s call converts its result. An empty batch gives an empty list: no
    sample ran, so no result says what shape or dtype a stacked tensor would have.

    Args:
        fn: a NumPy function, wrapped as ``returns_tensor(accepts_numpy(fn))``, or a
            function autoconvert already wraps (its options convert the batch). A function
            of a torchified module CuPy mirrors runs each sample of a CUDA batch on CuPy's
            version of it, on the batch's memory, where its CuPy path takes every sample
            (results gathered on the device; ``stats()`` counts why a batch did not).
        workers: run samples on a pool of this many threads (order is kept); ``None``
            runs them one after another. Worthwhile when ``fn`` releases the GIL, as
            many SciPy routines do. Calls ``fn`` makes see the caller's ``config`` and grad mode.
        executor: run the samples elsewhere instead: a ``ProcessPoolExecutor`` for NumPy
            code that holds the GIL (large batched arrays reach its workers through shared
            memory), a Dask ``distributed.Client`` or its ``get_executor()`` (shared memory
            too where every worker runs on the caller's machine, else each chunk's samples
            scattered to a worker), the ``ray`` module (chunks as Ray tasks on the cluster
            ``ray.init()`` connected), a ``multiprocessing.Pool`` or Ray's (as a process
            pool), a ``ThreadPoolExecutor`` (as ``workers=``, on
            its threads), or any other ``concurrent.futures.Executor``. ``fn`` and the
            other arguments must pickle (a process pool's function: defined at a module's
            top level). A pool passed in is reused across calls, never shut down.
        chunksize: samples per task on threads or an executor; by default about four
            tasks per thread, two per worker process, one per Dask worker thread or Ray CPU, so that
            sending tasks costs little next to the work.
        progress: show a tqdm progress bar over the samples (tqdm must be installed).
        threads_per_worker: the threads BLAS, OpenMP and torch may each start in a worker
            while a map runs on threads or workers; by default the cores shared out among
            the workers, so that workers x threads does not exceed them. BLAS and OpenMP
            are capped through threadpoolctl (the ``autoconvert[threads]`` extra).
        seed: reproducible randomness: sample ``i`` draws from the child ``i`` of
            ``np.random.SeedSequence(seed)``, whatever runs it and however it is chunked. A
            parameter of ``fn`` named ``rng`` receives a ``np.random.Generator`` over it;
            sequentially and on worker processes, ``np.random``, ``random`` and torch's CPU
            generator are seeded from it per sample too, and the caller's own states are
            put back when the call returns. Threads share those global states, so where
            the workers are threads (``workers=``, a Dask worker's threads, an executor's
            in the caller's process) only ``rng`` is seeded, and a function without it is
            refused. A Dask worker's
            own threads draw from ``random`` while samples run, so there only ``rng``,
            ``np.random`` and torch's generator give the same draws every time.
        in_caller: with threads or an executor, run a batch whose samples take too little
            time in all to pay for it (10 ms on threads or a process pool, 30 ms on Dask, 50 ms on Ray,
            timed on its first samples) in the caller's thread; False: every batch
            on the workers.
        **options: the options of ``accepts_numpy`` and ``returns_tensor`` that say how each
            batch and the gathered result convert (``device``, ``dtype``, ``sparse_layout``;
            ``copy``, ``writeback``, ``grad``, ``sparse``, ``widen_float16``,
            ``check_writes``, ``transfers``, ``callbacks``): ``dtype=torch.float32`` casts
            the floating results once, after gathering. Given to the pair ``batched`` wraps
            ``fn`` in; where ``fn`` is already so decorated, added to its decorators'
            options (a side ``fn`` lacks is added: ``dtype=`` on an ``accepts_numpy``
            function gives tensors). An option ``fn``'s decorators were given another value
            is refused, as is any for a function wrapped otherwise (torchify, adapt). A
            ``config`` block sets those given nowhere.

    Raises:
        ValueError: batched arguments of different sizes, or no batched argument; on an
            executor, a function that writes into its arguments (``writeback=True``, its
            own or a ``config`` block's);
            invalid options, or an option ``fn``'s decorators were given another value,
            when ``batched`` is applied.
        TypeError: conversion options for a function autoconvert wraps other than with
            ``accepts_numpy`` and ``returns_tensor``.
        pickle.PicklingError: a process pool's function, or an argument sent elsewhere,
            does not pickle.
        Exception: whatever ``fn`` raises, with a note naming the sample (PEP 678). The
            map is cancelled first: samples not started never run, and none still runs.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> per_row_max = ac.batched(np.max)
        >>> per_row_max(torch.tensor([[1, 5], [7, 2]]))
        tensor([5, 7])
    """
    settings, converting = settings_of(BatchSettings, validate(options, "batched"))
    _check(settings)
    if fn is None:
        return lambda f: _batched(f, settings, converting)
    return _batched(fn, settings, converting)


def _batched(fn: Callable[..., Any], settings: BatchSettings, options: dict[str, Any]) -> Batched:
    """``options``: batched's conversion options (checked), for the call that converts each batch."""
    check_callable(fn, "batched")
    name = function_name(fn).removesuffix("()")  # a partial by its function, a callable object by its class
    _refuse_tensors_only(fn, name)
    route = device_route(fn)
    # A partial's bound arguments are converted with the call's (once a batch, batched or not):
    # the call converting the batch is made of its function.
    binds = fn if binds_arguments(fn) else None
    target = fn if binds is None else binds.func
    # A torchified function's host path is its converting call, as where CuPy is not installed.
    call = _converting(target.converting if isinstance(target, Routed) else target, options, name)
    raw = call.__wrapped__  # what each sample runs: fn itself, or what autoconvert wraps
    where = _where(raw, call, settings, name)
    seeds = _seeds(raw, settings.seed, where, name)
    on_device = None
    if route is not None and route.strict and seeds is not None:
        raise ValueError(
            f"autoconvert.batched({name}): seed= seeds NumPy's generators per sample, on the host path, and {name} "
            "runs on CuPy alone (array_module='cupy'). Fix: leave seed= out, or torchify without array_module='cupy'"
        )
    if route is not None and seeds is None:  # seed= seeds NumPy's generators: the host path's
        label = f"autoconvert.batched({name})"
        on_device = OnDevice(route, function_name(fn), plan_of(call).function.removesuffix("()"), label)
    return Batched(fn, call, settings, options, name=name, where=where, seeds=seeds, on_device=on_device, binds=binds)


def _refuse_tensors_only(fn: Any, name: str) -> None:
    """Refuse ``fn`` where it takes tensors only, never NumPy samples: a route of its own that
    raises on arrays, with no converting call behind it (a method of an object made on its
    library's own torch path, whose tensors a NumPy sample cannot meet)."""
    description = described(fn)
    if description is None or description.converting is not None:
        return
    for route in description.routes:
        alone = route.describe().alone
        if route.strict and alone is not None:
            raise TypeError(
                f"autoconvert.batched({name}): {name} is {alone[0]}, which takes tensors as they are, and batched "
                "runs its function on NumPy samples. Fix: call it on the whole batch (its library's torch code takes "
                "stacked inputs), loop over the samples in torch, or make the object by converting (torchify with "
                "native=False) to map its method with batched"
            )


#: The sides of the pair batched converts with, in the order a pair's wrapper lists them.
_PAIR = ("accepts_numpy", "returns_tensor")
_NOT_GIVEN = object()


def _sides_taking(option: str) -> list[str]:
    """The sides of the pair that take batched's ``option``. ``copy=`` says how the batch
    converts: the gathered result is a new array of batched's own, which the result side
    would otherwise refuse to cast under ``copy=False`` (``dtype=``)."""
    if option == "copy":
        return ["accepts_numpy"]
    return [side for side in _PAIR if option in DEFAULTS[side]]


class BatchedPlan(Plan):
    """The plan of the pair that converts each batch, where ``batched`` made it or added its
    options to ``fn``'s decorators: an option it was given (``given``), or any where it made the
    pair (``made``), goes to the ``ac.batched`` call in messages."""

    def __init__(self, func: Any, sides: dict[str, dict[str, Any]], *, given: frozenset[str], made: bool) -> None:
        self.given = given
        self.made = made
        super().__init__(func, sides)

    def remade(self) -> Callable[[Any, dict[str, dict[str, Any]]], Plan]:
        return functools.partial(type(self), given=self.given, made=self.made)

    def maker(self, assignment: str) -> str:
        if self.made or assignment.partition("=")[0] in self.given:
            return f"ac.batched({self.function.removesuffix('()')}, {assignment})"
        return super().maker(assignment)

    def nested_off(self, side: str) -> str | None:
        return None if self.made else super().nested_off(side)  # batched takes no nested=

    def keeps_gradient(self) -> str:
        name = self.function.removesuffix("()")
        return (
            f"map a differentiable torch operation over the batch in place of ac.batched: "
            f"torch.vmap(ac.numpy_op({name}, backward=...)), its vector-Jacobian product written in NumPy"
        )


def _converting(fn: Any, options: dict[str, Any], name: str) -> Any:
    """What converts each batch: ``returns_tensor(accepts_numpy(fn))`` with ``options``, or the
    wrapper autoconvert made of ``fn``, with ``options`` added to its sides (see ``_sides``)."""
    if not isinstance(fn, Wrapper):
        sides = {side: {k: v for k, v in options.items() if side in _sides_taking(k)} for side in _PAIR}
        return wrap(fn, BatchedPlan(fn, sides, given=frozenset(options), made=True))
    if not options:
        return fn
    return wrap(
        fn.__wrapped__, BatchedPlan(fn.__wrapped__, _sides(fn, options, name), given=frozenset(options), made=False)
    )


def _sides(fn: Wrapper, options: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """The sides of ``fn``'s decorators with ``options`` added: each to the sides it has that take
    it, else to the one of the pair that does (fused, as stacking that decorator would). A
    value one of them was given already is refused unless equal: neither is the one a reader
    of either line would expect to win."""
    plan = plan_of(fn)
    assignments = ", ".join(f"{k}={shown(v)}" for k, v in options.items())
    if type(plan) is not Plan or not set(plan.sides) <= set(_PAIR):
        start = f"autoconvert.batched({name}): batched adds its conversion options ({assignments}) to the "
        start += f"accepts_numpy and returns_tensor decorators only, and {name}"
        if type(plan) is Plan:  # accepts_tensor, returns_numpy: torch code called from NumPy code
            wrapped = " + ".join(f"@ac.{side}" for side in plan.sides)
            raise TypeError(f"{start} is decorated with {wrapped}, the other way round. Fix: pass it undecorated")
        # Only the options what made it takes (adapt brings results back in the caller's dtype).
        taken = {k: v for k, v in options.items() if any(k in DEFAULTS.get(s, ()) for s in plan.sides)}
        fix = "pass it undecorated"
        if taken:
            which = "the options" if len(taken) == len(options) else "those it takes"
            fix += f", or give {which} to {plan.maker(', '.join(f'{k}={shown(v)}' for k, v in taken.items()))} instead"
        if len(taken) < len(options):
            fix += f"; {', '.join(f'{k}=' for k in options if k not in taken)} has no place there"
        raise TypeError(f"{start} was not made by them. Fix: {fix}")
    sides = {side: dict(plan.sides.get(side, {})) for side in _PAIR}
    for option, value in options.items():
        takers = [s for s in _sides_taking(option) if s in plan.sides]
        for side in takers or _sides_taking(option):
            given = sides[side].get(option, _NOT_GIVEN)
            if given is not _NOT_GIVEN and given != value:
                raise ValueError(
                    f"autoconvert.batched({name}): {option}= is given twice: {option}={shown(value)} to batched, and "
                    f"{option}={shown(given)} in {plan.maker(f'{option}={shown(given)}')}. Fix: give it in one "
                    "place"
                )
            sides[side][option] = value
    return {side: sides[side] for side in _PAIR if side in plan.sides or sides[side]}


def _check(settings: BatchSettings) -> None:
    """Refuse options that could never run together, or without what they need installed,
    when ``batched`` is applied."""
    if settings.executor is not None and settings.workers is not None:
        raise ValueError(
            "autoconvert.batched(): executor= runs the samples on its own workers: pass it without workers=; "
            f"got workers={settings.workers!r}"
        )
    if settings.threads_per_worker is not None and not has_threadpoolctl():
        raise ImportError(
            "autoconvert.batched(): threads_per_worker= caps BLAS and OpenMP threads through threadpoolctl, which "
            "is not installed. Fix: pip install 'autoconvert[threads]'"
        )


def _where(raw: Any, call: Any, settings: BatchSettings, name: str) -> Threads | Elsewhere | OnRay | None:
    """Where the samples run: in turn in the caller's thread (None), on threads, or elsewhere."""
    executor, workers = settings.executor, settings.workers
    caps, in_caller = settings.threads_per_worker, settings.in_caller
    if isinstance(executor, ThreadPoolExecutor):
        return Threads(raw, max_workers(executor), executor, name, threads_per_worker=caps, in_caller=in_caller)
    if executor is None:
        return (
            Threads(raw, workers, None, name, threads_per_worker=caps, in_caller=in_caller)
            if workers is not None and workers > 1
            else None
        )
    _refuse_writes(plan_of(call).policies.values(), name, "")  # outside any config block
    if is_ray(executor):
        return OnRay(raw, executor, name, threads_per_worker=caps, in_caller=in_caller)
    if is_pool(executor):
        executor = PoolExecutor(executor)
    return Elsewhere(raw, executor, name, threads_per_worker=caps, in_caller=in_caller)


def _refuse_writes(policies: Iterable[Policy], name: str, source: str) -> None:
    """Refuse, on an executor, a function whose writes are to reach the caller's tensors (by
    any side of its call: accepts_numpy's, adapt's): its samples are copies in other
    processes. ``source`` says where the policies came from ("" for the function's own
    options)."""
    for policy in policies:
        reject_given("batched's executors", policy, name=name, source=source)


def _seeds(raw: Any, seed: int | np.random.SeedSequence | None, where: Any, name: str) -> Seeds | None:
    """How samples are seeded (None: not at all). Threads share the global random states, so
    where the runner's workers are threads (whatever the executor's type: a Dask worker's,
    an executor's in the caller's process) a sample's stream reaches it only as ``rng``."""
    if seed is None:
        return None
    takes_rng = "rng" in Parameters(raw).keywords
    threads = where.threaded() if where is not None else None
    if threads is not None and not takes_rng:
        raise seeds_on_threads(name, threads)
    return Seeds(seed, rng=takes_rng, globals=threads is None)


class Batched:
    """What ``batched`` returns: ``fn`` over batches. It pickles (spawn pools, DataLoader
    workers): as the module attribute that holds it (``per_sample_b = batched(per_sample)``),
    else rebuilt from ``fn`` and its options; one on an executor only by reference, since a
    live pool does not pickle."""

    def __init__(
        self,
        fn: Any,
        call: Any,
        settings: BatchSettings,
        options: dict[str, Any],
        *,
        name: str,
        where: Any,
        seeds: Seeds | None,
        on_device: OnDevice | None = None,
        binds: functools.partial[Any] | None = None,
    ) -> None:
        plan = plan_of(call)
        self._binds = binds  # a partial fn is: its bound arguments lead the call's
        self._call = call  # what converts the batch: fn itself, or fn as a fused pair
        self._options = options  # batched's own conversion options, which the call holds
        self._convert = plan.default.call  # its protocol, around the map instead of fn
        self._instance = unbound_instance(call)
        self._raw = call.__wrapped__  # what each sample runs: fn itself, or what autoconvert wraps
        self._settings = settings
        self._runner = where  # where samples run: None (in turn), threads, or elsewhere
        self._seeds = seeds
        self._on_device = on_device  # CuPy's route of a torchified function, tried on a batch first
        self._label = f"autoconvert.batched({name})"
        self._name = name
        self._counted = plan.function.removesuffix("()")  # its name in stats()
        #: Seconds a sample took when samples last ran in the caller's thread: whether a batch
        #: pays for the executor (see _dispatch).
        self._seconds_per_sample: float | None = None
        self.__wrapped__ = fn
        self.__name__ = f"batched_{getattr(fn, '__name__', 'fn')}"
        self.__qualname__ = f"batched({name})"
        self.__module__ = getattr(fn, "__module__", None) or __name__
        self.__doc__ = getattr(fn, "__doc__", None)

    @boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run((), args, kwargs)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """Read from a class or an instance, a batched plain function binds as the function
        does (a ufunc or a partial does not): see ``_Method``."""
        if not isinstance(self._raw, types.FunctionType) or owner is None or self._binds is not None:
            return self
        return _Method(self, instance, owner)

    def _run(self, bound: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``bound``: the instance of a method's call, which leads every sample's arguments."""
        args, kwargs, layout = _layout(self._name, args, kwargs)
        if layout.size == 0:
            return []
        if self._binds is not None:  # the same for every sample, never batches
            shifted = frozenset(k + len(self._binds.args) for k in layout.positions)
            args, kwargs = (*self._binds.args, *args), {**self._binds.keywords, **kwargs}
            layout = layout._replace(positions=shifted)
        if self._seeds is not None and self._seeds.rng and "rng" in kwargs:
            raise ValueError(
                f"{self._label}: rng= was passed, and seed= gives each sample its own rng. Fix: pass one or the other"
            )
        if self._on_device is not None:
            mapped = self._on_device.map(layout, args, kwargs, self._settings.progress)
            if mapped is not DECLINED:
                return mapped
        if type(self._runner) in (Elsewhere, OnRay):
            self._refuse_configured_writes()
        try:
            instance = bound[0] if bound else self._instance
            return self._convert(functools.partial(self._map, layout, bound), instance, args, kwargs)
        except Exception as e:
            _carry_note(e, self._label)
            raise

    def _refuse_configured_writes(self) -> None:
        """On an executor, refuse the writes a ``config`` block around the call asks for, as the
        function's own ``writeback=True`` is refused when ``batched`` is applied."""
        configured = active()
        plan = plan_of(self._call)
        if configured is not None:
            policies = (plan.resolved(side, configured.options) for side in plan.sides)
            _refuse_writes(policies, self._name, ", from a config block")

    def _map(self, layout: Layout, bound: tuple[Any, ...], *args: Any, **kwargs: Any) -> Any:
        """In place of ``fn`` in its call's protocol: ``fn`` over the converted batch's samples,
        the results gathered."""
        sources: list[Any] = []

        def placeholder(value: Any) -> Batch:
            sources.append(value)
            return Batch(len(sources) - 1)

        samples = Samples(
            (*bound, *(placeholder(a) if k in layout.positions else a for k, a in enumerate(args))),
            {k: placeholder(v) if k in layout.keys else v for k, v in kwargs.items()},
            sources,
            layout.size,
            self._label,
            self._seeds,
            Sink(layout.size) if isinstance(self._runner, Threads) else None,
        )
        states = GlobalStates() if self._seeds is not None and self._seeds.globals else None
        progress = Progress(self._settings.progress, samples.size, self._name)
        try:
            results = self._dispatch(samples, progress)
            return gather(results) if samples.sink is None else samples.sink.gathered(results)
        finally:
            progress.close()
            if states is not None:
                states.restore()

    def _dispatch(self, samples: Samples, progress: Progress) -> list[Any]:
        """The samples' results: in the caller's thread while the work so far says the batch is
        too small to pay for the executor (or there is none), the rest on it."""
        where = self._runner
        if where is None:
            results = self._in_caller(samples, samples.size, progress)
        elif where.in_caller:
            results = self._until_worth_it(samples, where.least_seconds, progress)
        else:
            results = []
        count_batch(self._counted, samples.size, where is not None and len(results) == samples.size)
        if len(results) == samples.size:
            return results
        started = time.perf_counter()
        rest: list[Any] = where.map(samples, len(results), self._settings.chunksize, progress)
        if time.perf_counter() - started < where.least_seconds:
            self._seconds_per_sample = None  # the timing said large, the map says small: time the next batch again
        return results + rest

    def _in_caller(self, samples: Samples, stop: int, progress: Progress, start: int = 0) -> list[Any]:
        """Samples ``start`` to ``stop`` in the caller's thread; one at a time under a progress bar."""
        step = 1 if progress.bar is not None else max(1, stop - start)
        results: list[Any] = []
        for first in range(start, stop, step):
            results += run_chunk(samples.chunk(self._raw, first, min(first + step, stop)), samples.sources)
            progress.advance(min(step, stop - first))
        return results

    def _until_worth_it(self, samples: Samples, least: float, progress: Progress) -> list[Any]:
        """Samples from the first, in the caller's thread, in blocks of 1, 2, 4...: until the
        time of the latest block says the whole batch takes ``least`` seconds or more (then
        the rest is the executor's), or to the end. The first block alone never decides (a
        first call warms caches and imports), nor blocks that took under a twentieth of
        ``least`` together (a block's own cost would make tiny samples look long). The timing
        is kept: a later call whose batch it says is large goes to the executor at once (and
        a map that then ends within ``least`` has the next batch timed again)."""
        if self._seconds_per_sample is not None and self._seconds_per_sample * samples.size >= least:
            return []
        results: list[Any] = []
        started, block = time.perf_counter(), 1
        while len(results) < samples.size:
            begun, first = time.perf_counter(), len(results)
            results += self._in_caller(samples, min(samples.size, first + block), progress, first)
            now = time.perf_counter()
            if block > 1 and now - started >= least / 20:
                self._seconds_per_sample = (now - begun) / (len(results) - first)
                if self._seconds_per_sample * samples.size >= least:
                    break
            block *= 2
        return results

    def __autoconvert_description__(self) -> Description:
        """The call converting each batch, with where the samples run and how they are seeded."""
        inner = described(self._call)
        assert inner is not None  # a wrapper
        routes = (self._on_device.route,) if self._on_device is not None else ()
        return dataclasses.replace(inner, made_by="batched() over ", notes=self._notes(), routes=routes)

    def _notes(self) -> tuple[str, ...]:
        """Where the samples run, when a batch stays in the caller's thread, the libraries'
        threads, and the seeds, in words."""
        where = self._runner
        notes = [
            "batched(): each batch converted once by the call below, the function run once per sample along dim 0 "
            "on NumPy views of it, the results gathered with np.stack (field by field for tuples and dicts) and "
            "converted once."
        ]
        if self._on_device is not None:
            notes.append(
                "A batch on a CUDA device that CuPy's path takes for every sample runs each sample there instead, on "
                "its view of the batch, the results gathered on the device (torch.stack): no conversion. Any other "
                "batch is converted as above; stats() counts why."
            )
        elif device_route(self.__wrapped__) is not None:
            notes.append("CuPy's path is not taken: seed= seeds NumPy's generators per sample, on the host path.")
        if self._options:
            given = ", ".join(f"{name}={shown(value)}" for name, value in self._options.items())
            notes.append(f"Given to batched and held by the call below: {given}.")
        if where is None:
            notes.append("Samples run one after another in the caller's thread.")
        else:
            on = _runner_words(where)
            notes.append(f"Samples run on {on}, in chunks.")
            if where.in_caller:
                notes.append(
                    f"A batch whose samples take under {where.least_seconds * 1e3:g} ms in all (timed on its first "
                    "samples) runs in the caller's thread instead: the executor would cost more than it gives."
                )
            blas = "BLAS, OpenMP and torch" if has_threadpoolctl() else "torch (BLAS and OpenMP: install threadpoolctl)"
            notes.append(
                f"While a map runs, {blas} use at most {where.threads} thread{'s' * (where.threads > 1)} per worker."
            )
        seeds = self._seeds
        if seeds is not None:
            streams = "a Generator as rng=" if seeds.rng else ""
            if seeds.globals:
                streams += (
                    " and " if streams else ""
                ) + "np.random, random and torch's CPU generator seeded per sample"
            notes.append(f"seed=: each sample its own stream ({streams}).")
        return tuple(notes)

    def __repr__(self) -> str:
        return f"<autoconvert.batched {self.__wrapped__!r}>"

    def __reduce__(self) -> Any:
        reference = by_reference(self, (self.__module__,))
        if reference is not None:
            return reference
        if self._settings.executor is not None:
            raise TypeError(
                f"cannot pickle {self.__qualname__}: it runs on an executor, which does not pickle; "
                "assign it to a module-level name to pickle it by reference"
            )
        return _batched, (exported(self.__wrapped__), self._settings, self._options)


def _runner_words(where: Threads | Elsewhere | OnRay) -> str:
    """Where samples run, as explain's notes name it: threads, Ray tasks, or the executor's type."""
    if isinstance(where, Threads):
        return f"{where.workers} threads"
    if isinstance(where, OnRay):
        return "Ray tasks"
    executor = where.executor.pool if isinstance(where.executor, PoolExecutor) else where.executor
    return f"{type(executor).__module__}.{type(executor).__name__}" if is_pool(executor) else type(executor).__name__


class _Method:
    """A batched method as read from its class or an instance: the instance (or, read from the
    class, the first argument) leads every sample's arguments as it is, not batched and not
    converted, as accepts_numpy never converts ``self``."""

    def __init__(self, batched: Batched, instance: Any, owner: Any) -> None:
        self._batched, self._instance, self._owner = batched, instance, owner

    @boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._instance is None:
            return self._batched._run(args[:1], args[1:], kwargs)
        return self._batched._run((self._instance,), args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._batched, name)

    def __autoconvert_description__(self) -> Description:
        """What ``explain`` reads: the batched function's own description."""
        return self._batched.__autoconvert_description__()

    def __repr__(self) -> str:
        if self._instance is None:
            return repr(self._batched)
        return f"<bound method {self._batched.__qualname__} of {self._instance!r}>"

    def __reduce__(self) -> Any:
        return getattr, (self._owner if self._instance is None else self._instance, self._batched.__wrapped__.__name__)


def _carry_note(error: BaseException, label: str) -> None:
    """A failing sample's note on the error the caller sees, where the call's protocol raised
    another in its place (a ReadOnlyError from NumPy's refusal)."""
    cause = error.__cause__
    if cause is None or any(note.startswith(label) for note in getattr(error, "__notes__", ())):
        return
    for note in getattr(cause, "__notes__", ()):
        if note.startswith(label):
            error.add_note(note)


class Layout(NamedTuple):
    """Which arguments of a call are batches, and their leading size."""

    positions: frozenset[int]
    keys: frozenset[str]
    size: int


def _layout(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any], Layout]:
    """The call's arguments as the function's call converts them (a nested tensor as the list of
    its samples), and which are batches (tensors, lists and tuples of them) of what size."""
    given, named = list(args), dict(kwargs)
    sizes: dict[int | str, int] = {}
    located: list[tuple[int | str, Any]] = [*enumerate(args), *kwargs.items()]
    for where, value in located:
        found = _batch(name, where, value)
        if found is not None:
            batch, sizes[where] = found
            if isinstance(where, str):
                named[where] = batch
            else:
                given[where] = batch
    if not sizes:
        raise ValueError(
            f"autoconvert.batched({name}): no batched argument; pass tensors batched along dim 0, or lists of tensors"
        )
    if -1 in sizes.values() or len(set(sizes.values())) > 1:
        listing = ", ".join(f"{_label(where)}: {'0-d' if n == -1 else n}" for where, n in sizes.items())
        raise ValueError(
            f"autoconvert.batched({name}): batched arguments must share one leading size. Found {listing}. "
            "Fix: pass tensors batched along dim 0 with the same length, or lists of equal length"
        )
    positions = frozenset(where for where in sizes if isinstance(where, int))
    keys = frozenset(where for where in sizes if isinstance(where, str))
    return tuple(given), named, Layout(positions, keys, next(iter(sizes.values())))


def _batch(name: str, where: int | str, value: Any) -> tuple[Any, int] | None:
    """A batched argument as the call takes it, and its leading size (-1 for a 0-d tensor); None
    for any other argument. size(0), not shape[0]: a nested (ragged) tensor has no shape."""
    if isinstance(value, torch.Tensor):
        if value.is_nested:
            samples = list(value.unbind())
            return samples, len(samples)
        if value.layout != torch.strided:
            raise ValueError(
                f"autoconvert.batched({name}): {_label(where)} is a sparse tensor ({value.layout}), which cannot be "
                "sliced into samples along dim 0. Fix: pass a list of per-sample tensors, or a dense tensor "
                "(.to_dense())"
            )
        return value, value.size(0) if value.dim() else -1
    if type(value) in (list, tuple) and value and all(isinstance(v, torch.Tensor) for v in value):
        return value, len(value)
    return None


def _label(where: int | str) -> str:
    return keystr("args", [SequenceKey(where)]) if isinstance(where, int) else where


shows_options(batched, [inspect.Parameter("fn", inspect.Parameter.POSITIONAL_ONLY, default=None)], "batched")
