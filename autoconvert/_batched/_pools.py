"""``multiprocessing.Pool`` and ``ray.util.multiprocessing.Pool`` as ``batched``'s executors.

Neither pool is a ``concurrent.futures.Executor``: each takes tasks by ``apply_async``. The
adapter here gives a pool the ``submit`` the other executors have, so that it runs maps as a
process pool does (shared memory for large batches where its workers are on the caller's
machine, the ``Running`` file for cancellation). A task of a pool cannot be withdrawn once
sent: a cancelled map's chunks still start, see the map is cancelled and return at once
(on a Ray cluster of several machines, where they cannot see it, they run to their end).
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import sys
from collections.abc import Callable
from typing import Any


class PoolExecutor(cf.Executor):
    """A pool's ``apply_async`` as ``submit``; ``pool`` is the user's, never closed here."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        # multiprocessing's Pool keeps its size as _processes, Ray's its actors as _actor_pool
        # (tests/test_ray.py checks both).
        self._max_workers = getattr(pool, "_processes", None) or len(getattr(pool, "_actor_pool", ())) or os.cpu_count()
        self._initializer = getattr(pool, "_initializer", None)
        on_ray = type(pool).__module__.startswith("ray.")
        # multiprocessing's process pool pickles with pickle; its ThreadPool not at all, Ray's with
        # cloudpickle (lambdas too).
        self.pickles = not on_ray and not isinstance(pool, sys.modules["multiprocessing.pool"].ThreadPool)
        # Its workers see the caller's shared memory: the stdlib's always, Ray's on a one-machine cluster.
        self.on_this_machine = not on_ray or on_this_machine(sys.modules["ray"])

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        self.pool.apply_async(
            fn,
            args,
            kwargs,
            callback=lambda result: _resolve(future, future.set_result, result),
            error_callback=lambda error: _resolve(future, future.set_exception, _underlying(error)),
        )
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing: the pool is the user's, reused across calls."""


def _resolve(future: cf.Future[Any], outcome: Callable[[Any], None], value: Any) -> None:
    """A task's outcome on its future; where the map cancelled the future meanwhile, the news
    that its task has ended (cf.wait counts a cancelled future done only once told)."""
    if future.set_running_or_notify_cancel():
        outcome(value)


def _underlying(error: BaseException) -> BaseException:
    """The task's own exception, which Ray's pool hands on wrapped in a PoolTaskError."""
    underlying = getattr(error, "underlying", None)
    return underlying if type(error).__name__ == "PoolTaskError" and isinstance(underlying, BaseException) else error


def on_this_machine(ray: Any) -> bool:
    """Whether every live node of the Ray cluster is the caller's machine (a Ray pool's actors
    then see its shared memory)."""
    here = ray.util.get_node_ip_address()
    return all(node["NodeManagerAddress"] == here for node in ray.nodes() if node["Alive"])
