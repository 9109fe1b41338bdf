"""Where ``batched`` runs a batch: threads, a local process pool, a Dask cluster, any Executor.

A map sends a few chunks of samples per worker: few enough that sending and collecting stay
small next to the work, enough to even out samples of uneven cost (four per thread; two per
worker process, whose every task also costs the caller's process some work on the cores the
workers use; one per Dask worker thread, whose tasks cost milliseconds each to schedule).
The batch crosses once: threads read the caller's converted batch; workers on the caller's machine map large batched arrays, and
large results, from shared memory; Dask workers elsewhere receive each chunk's samples
scattered straight to them, not through the scheduler. When a sample fails the map is
cancelled: chunks not started are dropped, running ones stop before their next sample (a
chunk on another machine's Dask worker finishes its samples), and the error is raised.

Samples reach every executor as NumPy: the batch was converted once in the caller's
process (_batched), and results go back to it as NumPy to be gathered and converted once.
While a map runs, the libraries' own threads are capped so that workers x threads does
not exceed the cores (_caps).
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextvars
import functools
import math
import os
import pickle
import shutil
import sys
import tempfile
import threading
import traceback
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from autoconvert._conversions._containers import node_for
from autoconvert._errors import SequenceKey, keystr
from autoconvert._failures._failures import REJECTED_ELSEWHERE
from autoconvert._options._checks import is_dask
from autoconvert._pickling import exported

from ._caps import capped, per_worker
from ._chunks import (
    HERE,
    UNPICKLING_FAILED,
    Batch,
    Chunk,
    Origin,
    Running,
    Window,
    dumps,
    in_shared_memory,
    opened,
    received,
    run,
    run_sent,
    run_sharing,
    sent,
    shared_where_large,
)
from ._gather import Sink
from ._pools import PoolExecutor
from ._reads import globals_named
from ._seeds import Seeds

#: Batched arrays at least this large reach a process pool through shared memory; smaller
#: ones ride inside their chunks, where pickling them costs less than a file (joblib's
#: threshold for its memory-mapped arrays too).
SHARED_BYTES = 1 << 20


class Samples(NamedTuple):
    """One call's converted arguments, the batched ones replaced by ``Batch`` placeholders into
    ``sources`` (arrays, lists of arrays), and what every chunk of its map shares."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    sources: list[Any]
    size: int
    label: str  # names the map in a failing sample's note: "autoconvert.batched(fn)"
    seeds: Seeds | None
    sink: Sink | None  # on threads: where their array results are written as they come

    def chunk(
        self,
        fn: Callable[..., Any],
        start: int,
        stop: int,
        *,
        cancelled: Any = None,
        threads: int | None = None,
        sink: Sink | None = None,
        frozen: frozenset[int] = frozenset(),
        origin: Origin = HERE,
    ) -> Chunk:
        """Samples ``start`` to ``stop`` as one task of ``fn``."""
        return Chunk(
            fn,
            self.args,
            self.kwargs,
            start,
            stop,
            self.size,
            self.label,
            cancelled,
            self.seeds,
            threads,
            sink,
            frozen,
            origin,
        )


def chunk_size(size: int, workers: int, per_worker: int = 4) -> int:
    """Samples per chunk when not given: about ``per_worker`` chunks per worker."""
    return max(1, -(-size // (per_worker * workers)))


class Progress:
    """A tqdm bar over a map's samples, or nothing (tqdm is imported only when asked for)."""

    def __init__(self, shown: bool, total: int, name: str) -> None:
        self.bar = None
        if shown:
            from tqdm.auto import tqdm  # an optional dependency

            self.bar = tqdm(desc=f"batched({name})", total=total)

    def advance(self, samples: int) -> None:
        if self.bar is not None:
            self.bar.update(samples)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Threads:
    """Chunks on threads over the caller's NumPy batch, each in a copy of the caller's context
    (``config`` blocks) and its grad mode (torch keeps that per thread), for calls ``fn`` makes
    of decorated functions."""

    #: Work below this, in all, runs in the caller's thread: a map's tasks cost about 0.1 ms.
    least_seconds = 0.01

    def __init__(
        self,
        fn: Callable[..., Any],
        workers: int,
        pool: cf.ThreadPoolExecutor | None,
        name: str,
        *,
        threads_per_worker: int | None,
        in_caller: bool,
    ) -> None:
        self.fn, self.workers, self.name = fn, workers, name
        self.pool = pool  # None: started on first use, kept for this batched function
        self.threads = threads_per_worker or per_worker(workers)  # the libraries' threads while a map runs
        # A pool whose threads were set up by an initializer runs samples only there.
        self.in_caller = in_caller and getattr(pool, "_initializer", None) is None

    def threaded(self) -> str | None:
        """The runner in words, since its workers share the caller's global random states."""
        return "threads"

    def map(self, samples: Samples, start: int, chunksize: int | None, progress: Progress) -> list[Any]:
        if self.pool is None:
            self.pool = cf.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=f"batched({self.name})")
        cancelled = threading.Event()
        grad_mode = torch.is_grad_enabled()
        size = chunksize or chunk_size(samples.size - start, self.workers)
        chunks = _chunks(self.fn, samples, start, size, cancelled=cancelled, threads=None, sink=samples.sink)
        off = ("a thread of the pool, in a copy of the caller's context", threading.get_ident())
        chunks = [c._replace(context=off) for c in chunks]
        context = contextvars.copy_context
        with capped(self.threads):  # process-wide: once around the map, not per thread
            futures = [self.pool.submit(context().run, _in_grad_mode, grad_mode, c, samples.sources) for c in chunks]
            return _collect(futures, progress, cf.as_completed, functools.partial(_stop, futures, cancelled))


def _in_grad_mode(grad_mode: bool, chunk: Chunk, sources: Sequence[Any]) -> list[Any]:
    with torch.set_grad_enabled(grad_mode):
        return run(chunk, sources)


class Elsewhere:
    """Chunks in other processes: ``fn`` itself runs there on the batch's NumPy samples, and
    the results come back as NumPy.

    Workers on the caller's machine (a process pool's; a Dask cluster's where every worker sees this
    process's shared-memory folder) map large batched arrays and results from shared memory;
    Dask workers elsewhere receive each chunk's samples scattered straight to them, not
    through the scheduler; any other executor receives them inside the chunk."""

    def __init__(
        self, fn: Callable[..., Any], executor: Any, name: str, *, threads_per_worker: int | None, in_caller: bool
    ) -> None:
        self.fn, self.executor, self.name = exported(fn), executor, name
        # client.get_executor() keeps its client as _client (tests/test_executors.py checks it).
        self.client = (getattr(executor, "_client", executor)) if is_dask(executor) else None
        self.local: dict[frozenset[str], bool] = {}  # per set of Dask workers: do they see shared memory?
        self.shares: dict[frozenset[tuple[str, int]], str | None] = {}  # per set of workers: see threaded()
        self.crosses: bool | None = None  # whether chunks cross to other processes: see _crossing()
        self.workers = self._workers(self._threads())  # as the executor is when batched is applied
        self.threads = threads_per_worker or per_worker(self.workers)  # the libraries' threads in each worker
        #: Work below this, in all, runs in the caller's thread: a process pool's map costs a
        #: few tasks' round trips (about 0.2 ms each), a Dask map a few milliseconds per task
        #: (benchmarks, scaling: where 2 workers start to beat the loop).
        self.least_seconds = 0.03 if self.client is not None else 0.01
        # A pool whose workers were set up by an initializer runs samples only there.
        self.in_caller = in_caller and getattr(executor, "_initializer", None) is None
        # Worker processes on the caller's machine: a process pool's, a multiprocessing pool's.
        self.processes = isinstance(executor, cf.ProcessPoolExecutor) or (
            isinstance(executor, PoolExecutor) and executor.on_this_machine
        )
        if isinstance(executor, cf.ProcessPoolExecutor) or (isinstance(executor, PoolExecutor) and executor.pickles):
            _check_pickles(self.fn, name)
        # Ray's pool takes what pickle refuses (lambdas, by cloudpickle): chunks cross to it so too.
        self.by_value = isinstance(executor, PoolExecutor) and not executor.pickles
        self.worker = (  # its workers, as a refusal of a change made to a copy names them
            "a Dask worker"
            if self.client is not None
            else "a worker of the process pool"
            if isinstance(executor, (cf.ProcessPoolExecutor, PoolExecutor))
            else "a worker of the executor"
        )

    def _threads(self) -> dict[str, int]:
        """A Dask cluster's threads per worker now (a cluster may scale); none for a pool."""
        return self.client.nthreads() if self.client is not None else {}

    def _workers(self, threads: dict[str, int]) -> int:
        """The worker threads that run chunks: a pool's workers, a Dask cluster's threads."""
        return max(1, sum(threads.values())) if self.client is not None else max_workers(self.executor)

    def threaded(self, threads: dict[str, int] | None = None) -> str | None:
        """The runner in words where its workers are threads sharing a process's global random
        states (a Dask worker of several threads, Dask workers or an executor's in the caller's
        process), whatever the executor's type; None where each runs one task at a time in a
        process of its own. Asked once per set of Dask workers (``threads``: as they are now),
        an executor once."""
        key = frozenset((threads if threads is not None else self._threads()).items())
        if key not in self.shares:
            self.shares[key] = self._threaded(dict(key))
        return self.shares[key]

    def _threaded(self, threads: dict[str, int]) -> str | None:
        if isinstance(self.executor, cf.ProcessPoolExecutor):
            return None
        if self.client is None:
            here = self.executor.submit(os.getpid).result() == os.getpid()
            return "an executor whose workers are threads of the caller's process" if here else None
        most = max(threads.values(), default=1)
        if most > 1:
            return f"a Dask cluster whose workers run {most} threads each"
        pids = self.client.run(os.getpid, workers=list(threads)) if threads else {}
        return "Dask workers in the caller's process" if os.getpid() in pids.values() else None

    def map(self, samples: Samples, start: int, chunksize: int | None, progress: Progress) -> list[Any]:
        # Capped in the caller's thread too, as on threads: workers that are threads of this
        # process (Dask's with processes=False) then find BLAS capped already, and its count
        # is given back by the thread that lowered it (OpenBLAS 0.3.31's pthreads build may
        # ignore a raise asked by another thread: the cap stayed after the map).
        with capped(self.threads):
            return self._map(samples, start, chunksize, progress)

    def _map(self, samples: Samples, start: int, chunksize: int | None, progress: Progress) -> list[Any]:
        threads = self._threads()
        if samples.seeds is not None and samples.seeds.globals:
            runner = self.threaded(threads)  # a Dask cluster may have scaled since batched was applied
            if runner is not None:
                raise seeds_on_threads(self.name, runner)
        left = samples.size - start
        size = chunksize or chunk_size(left, self._workers(threads), 1 if self.client is not None else 2)
        frozen = frozenset(k for k, source in enumerate(samples.sources) if _is_read_only(source))
        chunks = _chunks(
            self.fn,
            samples,
            start,
            size,
            cancelled=None,
            threads=self.threads,
            frozen=frozen,
            origin=Origin(worker=self.worker),
        )
        try:
            if self.processes or self._sees_shared_memory(threads):
                return self._through_memory(chunks, samples.sources, progress)
            scattered = (
                self.client.scatter([_windows(samples.sources, c) for c in chunks], hash=False) if self.client else None
            )
            futures = [
                self._submit(run, c, scattered[k] if scattered else _windows(samples.sources, c))
                for k, c in enumerate(chunks)
            ]
            return self._collect(futures, progress, None, shared=False)
        except Exception as e:
            _explain_pickling(e, self.fn, samples, self.name, self.client is not None or self.by_value)
            _rejected_in_caller(e, samples)
            raise

    def _sees_shared_memory(self, threads: dict[str, int]) -> bool:
        """Whether every Dask worker runs on the caller's machine: asked once per set of workers, by
        whether each sees this process's shared-memory folder."""
        if self.client is None or not threads:
            return False
        workers = frozenset(threads)
        if workers not in self.local:
            seen = self.client.run(os.path.isdir, _shared_folder(), workers=list(workers))
            self.local[workers] = all(seen.values())
        return self.local[workers]

    def _through_memory(self, chunks: list[Chunk], arrays: list[Any], progress: Progress) -> list[Any]:
        # One folder per map for what crosses through shared memory: the batch, the results,
        # the file that says it runs; removed as the map ends (mapped files live on until unmapped).
        folder = tempfile.mkdtemp(dir=_shared_folder())
        cancelled = Running(os.path.join(folder, "running")).start()
        try:
            sources = [_shared(a, folder) for a in arrays]
            least = SHARED_BYTES if os.name == "posix" else math.inf  # elsewhere a mapped file cannot be removed
            futures = [
                self._submit(run_sharing, c._replace(cancelled=cancelled), _windows(sources, c), folder, least)
                for c in chunks
            ]
            return self._collect(futures, progress, cancelled, shared=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _crossing(self) -> bool:
        """Whether chunks cross to other processes by pickling, so are sent pickled by value
        (see _chunks.sent): a process pool's, Dask's (even workers in the caller's process
        receive copies), any other executor's whose workers are not the caller's process
        (asked once)."""
        if self.crosses is None:
            here = self.client is None and not isinstance(self.executor, cf.ProcessPoolExecutor)
            self.crosses = not here or self.executor.submit(os.getpid).result() != os.getpid()
        return self.crosses

    def _submit(self, fn: Callable[..., Any], chunk: Chunk, *rest: Any) -> Any:
        if self.client is not None:
            # Pickled results (run_sent's): Dask serializes a list of arrays array by array,
            # which for many small results costs more than the work.
            payload = sent(fn, chunk, by_value=True)
            if len(payload) >= _SCATTERED_BYTES:  # a large argument: through the workers' memory, not the graph
                payload = self.client.scatter(payload, hash=False)
            return self.client.submit(run_sent, payload, *rest, pure=False)
        if self._crossing():
            return self.executor.submit(run_sent, sent(fn, chunk, by_value=self.by_value), *rest)
        in_a_thread = chunk._replace(
            context=("a worker of the executor in the caller's process, in a context of its own", threading.get_ident())
        )
        return self.executor.submit(fn, in_a_thread, *rest)

    def _collect(self, futures: list[Any], progress: Progress, cancelled: Running | None, shared: bool) -> list[Any]:
        client = self.client
        if client is None:
            unpickled = received if self._crossing() else list
            return _collect(
                futures,
                progress,
                cf.as_completed,
                functools.partial(_stop, futures, cancelled),
                (lambda data: opened(unpickled(data), remove=True)) if shared else unpickled,
            )
        import distributed  # is_dask() saw its types: it is imported

        def stop() -> None:
            if cancelled is not None:
                cancelled.set()
            client.cancel(futures)

        def loads(data: bytes) -> list[Any]:
            results: list[Any] = received(data)
            return opened(results, remove=True) if shared else results

        # The map's client's loop: as_completed would take the default client's, where there may be none.
        completed = functools.partial(distributed.as_completed, loop=client.loop)
        return _collect(futures, progress, completed, stop, loads)


#: A chunk this large (its function and arguments, pickled) goes to Dask's workers scattered:
#: in the task graph, distributed warns of a large graph above 10 MB (its own threshold).
_SCATTERED_BYTES = 1 << 20


def seeds_on_threads(name: str, runner: str) -> ValueError:
    """The refusal of seed= on a runner whose workers are threads, for a function without ``rng``."""
    return ValueError(
        f"autoconvert.batched({name}): seed= on {runner} reaches a sample only through a parameter named rng: "
        "np.random, random and torch's generator are shared by the threads, and seeding them per sample would "
        "give results that depend on which thread ran first. Fix: give the function an rng parameter and draw "
        "from it, or run it sequentially or on a process pool"
    )


def max_workers(executor: Any) -> int:
    """An executor's worker count: concurrent.futures' pools keep it as _max_workers
    (tests/test_executors.py checks it); for any other executor, the machine's cores."""
    return int(getattr(executor, "_max_workers", None) or os.cpu_count() or 1)


def _chunks(
    fn: Callable[..., Any],
    samples: Samples,
    first: int,
    size: int,
    *,
    cancelled: Any,
    threads: int | None,
    sink: Sink | None = None,
    frozen: frozenset[int] = frozenset(),
    origin: Origin = HERE,
) -> list[Chunk]:
    """Samples ``first`` onwards in chunks of ``size``; ``origin`` names the workers they go to."""
    return [
        samples.chunk(
            fn,
            start,
            min(start + size, samples.size),
            cancelled=cancelled,
            threads=threads,
            sink=sink,
            frozen=frozen,
            origin=origin,
        )
        for start in range(first, samples.size, size)
    ]


def _is_read_only(source: Any) -> bool:
    """Whether a batched argument was handed read-only in the caller (a ragged one: any sample)."""
    if isinstance(source, np.ndarray):
        return not source.flags.writeable
    return any(isinstance(a, np.ndarray) and not a.flags.writeable for a in source)


def _rejected_in_caller(error: Exception, samples: Samples) -> None:
    """A worker's refusal of a write into read-only samples, or into read-only arrays its
    copies of container arguments hold (see _chunks' _tell_rejection), as the caller's arrays
    those are of, which its call names in its ReadOnlyError."""
    hit = getattr(error, REJECTED_ELSEWHERE, None)
    if hit is not None:
        setattr(error, REJECTED_ELSEWHERE, [_callers(told, samples) for told in hit])


def _callers(told: Any, samples: Samples) -> Any:
    """The caller's array a worker told of: sample ``i`` of source ``k`` (a ``(k, i)`` pair), or
    the array at a key path in the arguments."""
    if type(told) is tuple:
        source, i = samples.sources[told[0]], told[1]
        return source if isinstance(source, np.ndarray) else source[i]
    root, *below = told
    value = samples.args[root.index] if isinstance(root, SequenceKey) else samples.kwargs[root.key]
    for key in below:
        node = node_for(type(value))
        value = next((child for k, child in node.items(value) if k == key), None) if node is not None else None
    return value


def _collect(
    futures: list[Any],
    progress: Progress,
    completed: Callable[[list[Any]], Iterable[Any]],
    stop: Callable[[], Any],
    loads: Callable[[Any], list[Any]] = list,
) -> list[Any]:
    """The futures' results (``loads`` of each) in submission order, one list; the progress bar
    advances as chunks finish. On a failure (or an interrupt) the map is stopped before the
    error propagates."""
    parts: list[Any] = [None] * len(futures)
    position = {id(f): k for k, f in enumerate(futures)}
    try:
        for future in completed(futures):
            k = position[id(future)]
            parts[k] = loads(future.result())
            progress.advance(len(parts[k]))
    except BaseException:
        stop()
        raise
    return [result for part in parts for result in part]


def _stop(futures: list[cf.Future[Any]], cancelled: Any) -> None:
    """Cancel a map: what has not started never will, what runs stops before its next sample;
    return once none of it runs."""
    if cancelled is not None:
        cancelled.set()
    for future in futures:
        future.cancel()
    cf.wait(futures)


def _windows(sources: list[Any], chunk: Chunk) -> list[Any]:
    """What a chunk needs of each source: its own samples, or the whole source where it is in
    shared memory (sending it costs a file's name)."""
    return [s if in_shared_memory(s) else Window(s[chunk.start : chunk.stop], chunk.start) for s in sources]


# ----------------------------------------------------------------- shared memory for process pools


@functools.cache
def _shared_folder() -> str:
    """A folder of this process's for batches shared with its workers, in memory where the
    system has a tmpfs (``/dev/shm``), removed when the process exits."""
    root = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    folder = tempfile.mkdtemp(prefix="autoconvert-batched-", dir=root)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _shared(source: Any, folder: str) -> Any:
    """A batched argument in NumPy, in shared memory where it takes ``SHARED_BYTES`` or more:
    an array whole, a ragged list array by array."""
    if isinstance(source, np.ndarray):
        return shared_where_large([source], folder, SHARED_BYTES)[0]
    return shared_where_large(list(source), folder, SHARED_BYTES)


# ----------------------------------------------------------------- pickling errors


def _check_pickles(fn: Any, name: str) -> None:
    """Refuse, when ``batched`` is created, a function a process pool cannot receive."""
    try:
        dumps(fn)
    except Exception as e:
        held = _unpicklable_attribute(fn)
        if held is not None:  # a bound method's object, a callable object: what it holds
            raise pickle.PicklingError(
                f"autoconvert.batched({name}): executor= is a process pool, whose workers receive the function by "
                f"pickling, and {held} does not pickle ({type(e).__name__}: {e}). Fix: make the object pickle "
                "without it (leave it out in __getstate__ and make it again in __setstate__), or run it on threads "
                "(workers=)"
            ) from e
        raise pickle.PicklingError(
            f"autoconvert.batched({name}): executor= is a process pool, whose workers receive the "
            f"function by pickling, and {name} does not pickle ({type(e).__name__}: {e}). Fix: define it "
            "with def at the top level of a module, or run it on threads (workers=) or on Dask, which "
            "pickles lambdas and local functions"
        ) from e


def _explain_pickling(error: Exception, fn: Any, samples: Samples, name: str, by_value: bool) -> None:
    """Where sending a map failed because an argument does not pickle, or a global the
    function names where it is sent by value (``by_value``: Dask's and Ray's cloudpickle send a
    script's function with the globals it names), raise that instead, naming it; where a
    process pool broke on a function of an interactive session, say so."""
    if isinstance(error, cf.process.BrokenProcessPool) and _interactive(fn):
        error.add_note(
            f"autoconvert.batched({name}): {name} is defined in an interactive session (a notebook, "
            "python -c, a script read from stdin), which a spawned worker cannot import to find it. "
            "Fix: define it in a module and import it"
        )
    if not isinstance(error, pickle.PicklingError) and "pickle" not in str(error) and not _raised_pickling(error):
        return
    from autoconvert._spec._signature import Parameters  # only for a refusal

    params = Parameters(fn, held=True)  # a method's instance leads the arguments, as in a chunk's
    named = [(f"argument {params.positional_name(i, 0)}", a) for i, a in enumerate(samples.args)]
    named += [(f"argument {params.keyword_name(str(k))}", v) for k, v in samples.kwargs.items()]
    named += [*(globals_named(fn) if by_value else []), ("fn", fn)]  # fn last: it carries what it names
    for label, value in named:
        if type(value) is Batch:
            continue
        failure = _not_pickling(value, label, by_value)
        if failure is None:
            continue
        where, e = failure
        if label == "fn":  # the function itself, a bound method's object or class, a callable object
            held = _unpicklable_attribute(fn) if by_value else None
            raise pickle.PicklingError(
                f"autoconvert.batched({name}): {held or name} does not pickle ({type(e).__name__}: {e}), and the "
                "executor's workers receive the function by pickling (by value where no module of theirs holds it, "
                "with its class and the globals it names). Fix: define it (its class) in a module and import it, "
                "which sends it by reference, or run on threads (workers=)"
            ) from error
        if label.startswith("global "):
            raise pickle.PicklingError(
                f"autoconvert.batched({name}): {where} does not pickle ({type(e).__name__}: {e}), and the "
                "executor's workers receive a script's function by pickling, with copies of the globals it "
                "names. Fix: define the function in a module and import it (it is sent by reference, and the "
                "workers' module holds its globals), or run on threads (workers=)"
            ) from error
        raise pickle.PicklingError(
            f"autoconvert.batched({name}): {where} does not pickle ({type(e).__name__}: {e}), and the "
            "executor's workers receive every argument by pickling. Fix: pass values that pickle "
            "(arrays, numbers, module-level functions), or run on threads (workers=)"
        ) from error
    if UNPICKLING_FAILED in str(error):  # pickles here, fails where it arrives
        for label, value in named[:-1]:
            why = _not_unpickling(value)
            if why is not None and type(value) is not Batch:
                sent = (
                    "a script's function by pickling, with copies of the globals it names. Fix: define the function "
                    "in a module and import it (it is sent by reference, and the workers' module holds its globals)"
                    if label.startswith("global ")
                    else "every argument by pickling. Fix: pass values that unpickle"
                )
                raise pickle.PicklingError(
                    f"autoconvert.batched({name}): {label} pickles and does not unpickle: its __getattr__ or "
                    f"__setstate__ fails ({type(why).__name__}: {why}), and the executor's workers receive {sent}, or run "
                    "on threads (workers=)"
                ) from error
        raise pickle.PicklingError(
            f"autoconvert.batched({name}): {error}. The function's globals and arguments pickle, and one of them "
            "does not unpickle on the workers (its __getattr__ or __setstate__ failing there). Fix: define the "
            "function in a module and import it (it is sent by reference), pass values that unpickle, or run on "
            "threads (workers=)"
        ) from error


def _unpicklable_attribute(fn: Any) -> str | None:
    """The attribute of the object a method is bound to, or of a callable object, that does not
    pickle, as the code reads it (``self.lock``); None where ``fn`` holds no such object, or
    none of its attributes is the one."""
    owner = fn.__self__ if isinstance(fn, types.MethodType) else None if isinstance(fn, types.FunctionType) else fn
    attributes = getattr(owner, "__dict__", None)
    if isinstance(owner, (type, types.ModuleType)) or not isinstance(attributes, dict):
        return None
    for key, value in attributes.items():
        try:
            dumps(value)
        except Exception:
            return f"self.{key}"
    return None


def _raised_pickling(error: Exception) -> bool:
    """Whether ``error`` was raised while pickling what a map sends (an object's own reducer:
    a TorchScript module's, a parametrized module's RuntimeError)."""
    return any(frame.f_code is dumps.__code__ for frame, _ in traceback.walk_tb(error.__traceback__))


def _not_pickling(
    value: Any, label: str, by_value: bool, above: frozenset[int] = frozenset()
) -> tuple[str, Exception] | None:
    """Where ``value`` (named ``label``) does not pickle (``by_value``: as cloudpickle sends it):
    the deepest item of its containers that does not (``argument c['cb']``; a container holding
    itself looked in once), with pickle's error; None where it pickles."""
    if id(value) in above:
        return None  # looked in already, further up
    try:
        # What pickles but does not unpickle too (a __getattr__ answering None); not by value: on Dask
        # and Ray what fails to unpickle is told by the workers' failure (UNPICKLING_FAILED).
        sent = dumps(value, by_value=by_value)
        if not by_value:
            pickle.loads(sent)
    except Exception as e:
        node = node_for(type(value))
        if node is not None:
            for key, child in node.items(value):
                inner = _not_pickling(child, keystr(label, [key]), by_value, above | {id(value)})
                if inner is not None:
                    return inner
        return label, e
    return None


def _not_unpickling(value: Any) -> BaseException | None:
    """Why ``value`` does not unpickle as a worker found (a ``__getattr__`` recursing on an
    object not set up yet), sent as Dask and Ray send it; None where it does. Unpickled in the
    caller's process, a class sent by value is the caller's own, untouched (see _chunks)."""
    try:
        sent = dumps(value, by_value=True)
    except Exception:
        return None
    try:
        pickle.loads(sent)
    except (Exception, RecursionError) as e:
        return e
    return None


def _interactive(fn: Any) -> bool:
    """Whether ``fn`` lives in a ``__main__`` that has no file to import again (``-c`` and
    notebooks have no ``__file__``; stdin's is ``"<stdin>"``)."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return getattr(fn, "__module__", None) == "__main__" and not (path and os.path.isfile(path))
