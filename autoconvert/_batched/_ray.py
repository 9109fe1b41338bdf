"""``batched`` on Ray: chunks as Ray tasks, the user's ``ray`` module as the executor.

Ray has no ``concurrent.futures.Executor`` (ray-project/ray#29456), so its tasks are a runner
of their own behind the interface the other runners have (``map``, ``threaded``, ``threads``,
``least_seconds``, ``in_caller``). A map sends one task per chunk, sized as on Dask: one per
CPU of the cluster. Each chunk's samples are its task's arguments, which Ray puts in its
object store where large (100 KiB or more) and workers on their node read without a copy
(read-only), so that on a cluster each node receives only its chunks' samples, as Dask's
workers do. Results come back pickled, as on Dask, so that the caller's arrays are its
own and writable. On a failure or an interrupt the tasks are cancelled (``ray.cancel``:
those not started never run, running ones are interrupted) and the sample's own exception
is raised. Ray is imported by the user, never here: the runner holds the module it was
given.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from typing import Any

from autoconvert._pickling import exported

from ._chunks import Origin, Window, dumps, received, run
from ._executors import (
    Progress,
    Samples,
    _chunks,
    _collect,
    _explain_pickling,
    _is_read_only,
    _rejected_in_caller,
    _windows,
    chunk_size,
)


class OnRay:
    """Chunks as tasks of the Ray cluster the user's ``ray`` module is connected to."""

    #: Work below this, in all, runs in the caller's thread: a Ray map costs a few
    #: milliseconds on two free cores and tens under load (its tasks cross the raylet), and
    #: a map shorter than this has the next batch timed again (benchmarks/RESULTS.md, batched on Ray).
    least_seconds = 0.05

    def __init__(
        self, fn: Callable[..., Any], ray: Any, name: str, *, threads_per_worker: int | None, in_caller: bool
    ) -> None:
        self.fn, self.ray, self.name = exported(fn), ray, name
        # A Ray task reserves one CPU, and Ray starts its workers with OMP_NUM_THREADS at it.
        self.threads = threads_per_worker or 1
        self.in_caller = in_caller

    def threaded(self) -> str | None:
        """None: a Ray worker is a process of its own that runs one task at a time."""
        return None

    def workers(self) -> int:
        """The cluster's CPUs now (a cluster may scale): one task each at a time."""
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def map(self, samples: Samples, start: int, chunksize: int | None, progress: Progress) -> list[Any]:
        ray = self.ray
        if not ray.is_initialized():
            ray.init()  # as a task's .remote() would: a local cluster, or the one RAY_ADDRESS names
        size = chunksize or chunk_size(samples.size - start, self.workers(), 1)
        frozen = frozenset(k for k, source in enumerate(samples.sources) if _is_read_only(source))
        origin = Origin(worker="a Ray worker")
        chunks = _chunks(
            self.fn, samples, start, size, cancelled=None, threads=self.threads, frozen=frozen, origin=origin
        )
        task = _task(ray)
        refs: list[Any] = []
        try:
            # The chunk crosses pickled as every runner's does (dumps: masks kept, torch callables
            # by their device); its samples as Ray's objects, read where they are.
            refs += (task.remote(dumps(chunk, by_value=True), *_windows(samples.sources, chunk)) for chunk in chunks)
            futures = [ref.future() for ref in refs]
            return _collect(futures, progress, as_completed, functools.partial(_cancel, ray, refs), received)
        except ray.exceptions.RayTaskError as e:
            error = e.cause if isinstance(e.cause, Exception) else e
            _rejected_in_caller(error, samples)
            if error is e:
                raise
            raise error from e  # the sample's own exception, its note naming it; Ray's traceback as its cause
        except Exception as e:
            _cancel(ray, refs)  # the tasks sent before one failed to be sent
            _explain_pickling(e, self.fn, samples, self.name, True)
            raise


@functools.cache
def _task(ray: Any) -> Any:
    """``_chunk`` as a Ray remote function, made once per process."""
    return ray.remote(_chunk)


def _chunk(payload: bytes, *sources: Window) -> bytes:
    """A Ray task: ``run``'s results pickled (``dumps``). Its samples arrive read-only (Ray's
    objects are); ``run`` copies those of a source the caller handed writable."""
    return dumps(run(received(payload), sources))


def _cancel(ray: Any, refs: Sequence[Any]) -> None:
    """Cancel a map's tasks that have not finished (not started: never run; running:
    interrupted before the next sample's Python code); return once none runs. A task that
    finishes as it is cancelled can abort the caller's process on Ray releases (a RAY_CHECK of
    its task manager: ray-project/ray#54738, #54846), so a finished one is left alone, and so
    is one that finishes within ``_CANCEL_GRACE_SECONDS`` (the samples of a map that all fail
    at once fail together): that lowers the chance of the abort, which only Ray can remove."""
    _, running = ray.wait(list(refs), num_returns=len(refs), timeout=_CANCEL_GRACE_SECONDS, fetch_local=False)
    for ref in running:
        ray.cancel(ref)
    ray.wait(list(refs), num_returns=len(refs))


#: How long a failed map waits for its other tasks to finish on their own before cancelling
#: those still running.
_CANCEL_GRACE_SECONDS = 0.2
