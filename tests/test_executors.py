"""batched at scale: chunks per task, shared memory, cancellation, pickling errors, on real
threads, a real spawn-context process pool and a real Dask LocalCluster on loopback."""

from __future__ import annotations

import functools
import multiprocessing
import os
import pathlib
import pickle
import re
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import scipy.ndimage
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac
from autoconvert._batched import _executors
from autoconvert._batched._executors import chunk_size

from .strategies import tensors

pytestmark = pytest.mark.slow


class CountingPool(ProcessPoolExecutor):
    """A spawn pool that counts the bytes pickled into its workers' pipe."""

    sent = 0
    tasks = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.sent += len(pickle.dumps((fn, args, kwargs)))
        self.tasks += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture(scope="module")
def pool() -> Iterator[CountingPool]:
    with CountingPool(2, mp_context=multiprocessing.get_context("spawn")) as processes:
        yield processes


@pytest.fixture(scope="module")
def client(dask_client: Any) -> Any:
    return dask_client


# Module level: process pools and Dask receive these by reference.


def logged_sample(x: np.ndarray, log: str) -> np.ndarray:
    """Sample 0 fails at once; every other sample appends to ``log`` and takes 20 ms."""
    if x[0] == 0:
        raise ZeroDivisionError("sample zero")
    with open(log, "a") as file:
        file.write(f"{int(x[0])}\n")
    time.sleep(0.02)
    return x


def lookup(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    return table[int(x)]


def negated(values: np.ndarray) -> np.ndarray:
    return -values


class TwoPartError(Exception):
    """An exception whose ``__init__`` takes two arguments: unpickling it from its message fails."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")


def failing_with_two_parts(values: np.ndarray) -> np.ndarray:
    raise TwoPartError(3, "bad sample")


class Lenient:
    """A config answering None for any attribute it lacks, dunders too: it pickles, and does
    not unpickle (pickle finds a __reduce_ex__ hook of None)."""

    def __init__(self) -> None:
        self.scale = 2.0

    def __getattr__(self, name: str) -> None:
        return None


def scaled_by(values: np.ndarray, cfg: Lenient) -> np.ndarray:
    return values * cfg.scale


class Locked:
    """An object holding a lock, whose bound method is mapped."""

    def __init__(self) -> None:
        self.lock = threading.RLock()

    def read(self, values: np.ndarray) -> np.ndarray:
        return values


def ragged_nonzero(x: np.ndarray) -> np.ndarray:
    return np.flatnonzero(x > 0.5)


def _lines(log: pathlib.Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_about_four_chunks_per_worker_and_one_per_dask_worker() -> None:
    """Few tasks for tiny samples (1,000 samples on 2 threads: 8 tasks), one sample a task
    where samples are few, one chunk per Dask worker thread."""
    assert [chunk_size(n, 2) for n in (0, 1, 8, 64, 1000)] == [1, 1, 1, 8, 125]
    assert chunk_size(1000, 2, per_worker=1) == 500 and chunk_size(3, 16) == 1


@given(size=st.integers(0, 40), workers=st.integers(2, 4), chunksize=st.none() | st.integers(1, 12))
def test_threads_give_every_sample_once_in_order(size: int, workers: int, chunksize: int | None) -> None:
    batch = torch.arange(float(size)).reshape(size, 1)
    out = ac.batched(np.negative, workers=workers, chunksize=chunksize)(batch)
    assert out == [] if size == 0 else torch.equal(out, -batch)


def test_chunksize_is_a_positive_number_of_samples() -> None:
    with pytest.raises(
        ValueError, match=r"^autoconvert\.batched\(\): chunksize= takes None or a positive number of samples, got 0$"
    ):
        ac.batched(np.negative, workers=2, chunksize=0)


def test_a_thread_pool_passed_in_runs_the_call_itself_in_the_callers_config() -> None:
    """The wrapped call runs on the pool's threads: config blocks and writeback reach it."""

    @ac.accepts_numpy(writeback=True)
    def zero_first(a: np.ndarray) -> None:
        a[0] = 0

    batch = torch.ones(6, 2)
    with ThreadPoolExecutor(2) as threads:
        ac.batched(zero_first, executor=threads, in_caller=False)(batch)
        with ac.config(copy=True):
            writable = ac.batched(lambda a: np.asarray(a.flags.writeable), executor=threads, in_caller=False)(
                torch.ones(4, 1)
            )
    assert batch[:, 0].eq(0).all() and batch[:, 1].eq(1).all() and writable.all()


def test_threads_stop_the_map_when_a_sample_fails(tmp_path: pathlib.Path) -> None:
    """Samples not started never run, and none runs once the error is raised."""
    log = tmp_path / "log"
    batch = torch.arange(60.0).reshape(60, 1)
    with pytest.raises(ZeroDivisionError) as info:
        ac.batched(logged_sample, workers=2, chunksize=30, in_caller=False)(batch, str(log))
    assert info.value.__notes__ == ["autoconvert.batched(logged_sample): raised by sample 0 of 60"]
    ran = _lines(log)
    time.sleep(0.2)
    assert _lines(log) == ran < 30


def test_the_progress_bar_counts_every_sample(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tqdm")
    ac.batched(np.negative, workers=2, progress=True)(torch.ones(64, 2))
    assert "64/64" in capsys.readouterr().err


class TestProcessPool:
    """A spawn pool: large batches and results through shared memory, small ones pickled."""

    def test_a_large_batch_crosses_through_shared_memory(self, pool: CountingPool) -> None:
        """16 masks of 256^2 (1 MiB): each task carries a file's name, not samples; results of
        2 MiB come back mapped; the files are gone once the map returns."""
        masks = torch.rand(16, 256, 256, generator=torch.Generator().manual_seed(1)) > 0.5
        edt = ac.batched(scipy.ndimage.distance_transform_edt, executor=pool, in_caller=False)
        pool.sent = pool.tasks = 0
        out = edt(masks)
        assert pool.sent / 16 < 1_000 and pool.tasks == 4  # two chunks per worker process
        assert torch.equal(out, ac.batched(scipy.ndimage.distance_transform_edt)(masks))
        assert os.listdir(_executors._shared_folder()) == []

    def test_a_large_ragged_batch_crosses_through_shared_memory(self, pool: CountingPool) -> None:
        """A list of tensors of different sizes (2 MiB in all), empty ones among them."""
        sizes = [40_000, 0, 30_000, 50_000, 1, 70_000, 60_000, 20_000]
        batch = [torch.rand(n, dtype=torch.float64, generator=torch.Generator().manual_seed(n)) for n in sizes]
        pool.sent = 0
        out = ac.batched(ragged_nonzero, executor=pool, in_caller=False)(batch)
        assert pool.sent < 10_000
        assert [o.tolist() for o in out] == [np.flatnonzero(b.numpy() > 0.5).tolist() for b in batch]
        assert os.listdir(_executors._shared_folder()) == []

    def test_a_small_batch_rides_in_its_tasks(self, pool: CountingPool) -> None:
        batch = torch.rand(8, 16, generator=torch.Generator().manual_seed(2))
        pool.sent = 0
        out = ac.batched(ragged_nonzero, executor=pool, in_caller=False)(batch)
        assert pool.sent > batch.numpy().nbytes
        assert [o.tolist() for o in out] == [np.flatnonzero(b > 0.5).tolist() for b in batch.numpy()]

    @given(case=tensors(), through_memory=st.booleans())
    def test_any_dtype_and_layout_comes_back_as_in_the_callers_process(
        self, pool: CountingPool, case: Any, through_memory: bool
    ) -> None:
        """Whatever the in-process loop gives (bfloat16 restored, strided views, NaNs), or the
        error it raises; shared memory for every size, or for none."""
        batch = case.tensor
        if batch.dim() == 0 or batch.size(0) == 0:
            return
        threshold = 0 if through_memory else 1 << 60
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_executors, "SHARED_BYTES", threshold)
            try:
                expected = ac.batched(np.copy)(batch)
            except Exception as e:
                with pytest.raises(type(e)):
                    ac.batched(np.copy, executor=pool, in_caller=False)(batch)
                return
            out = ac.batched(np.copy, executor=pool, in_caller=False)(batch)
        torch.testing.assert_close(out, expected, rtol=0, atol=0, equal_nan=True)

    def test_a_failing_sample_stops_the_map_and_is_named(self, pool: CountingPool, tmp_path: pathlib.Path) -> None:
        """The worker's traceback stays as the cause; the other worker's chunk stops before its
        next sample, and nothing of the map runs once the error is raised."""
        log = tmp_path / "log"
        with pytest.raises(ZeroDivisionError) as info:
            ac.batched(logged_sample, executor=pool, chunksize=30, in_caller=False)(
                torch.arange(60.0).reshape(60, 1), str(log)
            )
        assert info.value.__notes__ == ["autoconvert.batched(logged_sample): raised by sample 0 of 60"]
        assert "Traceback" in str(info.value.__cause__)
        ran = _lines(log)
        time.sleep(0.2)
        assert _lines(log) == ran < 30

    def test_a_function_the_pool_cannot_receive_is_refused_when_batched_is_made(self, pool: CountingPool) -> None:
        def local_total(x: np.ndarray) -> np.ndarray:
            return x.sum()

        with pytest.raises(pickle.PicklingError) as info:
            ac.batched(local_total, executor=pool, in_caller=False)
        name = "TestProcessPool.test_a_function_the_pool_cannot_receive_is_refused_when_batched_is_made.<locals>.local_total"
        assert str(info.value) == (
            f"autoconvert.batched({name}): executor= is a process pool, whose workers receive the function by "
            f"pickling, and {name} does not pickle ({type(info.value.__cause__).__name__}: {info.value.__cause__}). "
            "Fix: define it with def at the top level of a module, or run it on threads (workers=) or on Dask, "
            "which pickles lambdas and local functions"
        )
        with pytest.raises(pickle.PicklingError, match="<lambda> does not pickle"):
            ac.batched(lambda x: x, executor=pool, in_caller=False)

    def test_an_argument_that_does_not_pickle_is_named(self, pool: CountingPool) -> None:
        """By its parameter's name (NumPy's ufuncs name theirs x1, x2)."""
        with pytest.raises(pickle.PicklingError) as info:
            ac.batched(np.add, executor=pool, in_caller=False)(torch.ones(2, 3), threading.Lock())
        assert str(info.value).startswith(
            "autoconvert.batched(add): argument x2 does not pickle (TypeError: cannot pickle '_thread.lock' object), "
            "and the executor's workers receive every argument by pickling. Fix: pass values that pickle"
        )

    def test_an_item_of_a_container_that_does_not_pickle_is_named_by_its_path(self, pool: CountingPool) -> None:
        """The deepest item that does not pickle, a container holding itself looked in once."""
        looping: dict[str, Any] = {"k": 1}
        looping["me"] = looping  # pickles (nested=False: no walk refuses it); the lock does not
        looping["inner"] = [2, threading.Lock()]
        with ac.config(nested=False), pytest.raises(pickle.PicklingError) as info:
            ac.batched(np.add, executor=pool, in_caller=False)(torch.ones(2, 3), looping)
        assert str(info.value).startswith(
            "autoconvert.batched(add): argument x2['inner'][1] does not pickle (TypeError: "
        )

    def test_a_function_of_an_interactive_session_is_named_when_the_pool_breaks(self) -> None:
        """A script read from stdin defines the function: spawned workers cannot import it."""
        script = """
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
import numpy as np, torch, autoconvert as ac

def total(x):
    return x.sum()

with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
    try:
        ac.batched(total, executor=pool, in_caller=False)(torch.ones(2, 3))
    except BrokenProcessPool as e:
        print(e.__notes__[-1])
"""
        done = subprocess.run(
            [sys.executable, "-"], check=True, input=script, capture_output=True, text=True, timeout=120
        )
        assert done.stdout.strip() == (
            "autoconvert.batched(total): total is defined in an interactive session (a notebook, python -c, "
            "a script read from stdin), which a spawned worker cannot import to find it. Fix: define it in a "
            "module and import it"
        ), done.stderr[-2000:]

    def test_a_sample_error_that_does_not_cross_back_is_raised_and_the_pool_still_works(
        self, pool: CountingPool
    ) -> None:
        """An exception that does not unpickle broke the caller's pool; it comes back as a
        RuntimeError with its type and message, the sample named, the pool still usable."""
        with pytest.raises(RuntimeError) as info:
            ac.batched(failing_with_two_parts, executor=pool, in_caller=False)(torch.ones(2, 2))
        assert str(info.value) == "tests.test_executors.TwoPartError: 3: bad sample"
        assert re.fullmatch(  # whichever worker's sample fails first
            r"autoconvert\.batched\(failing_with_two_parts\): raised by sample [01] of 2", info.value.__notes__[0]
        )
        assert info.value.__notes__[1].startswith(
            "autoconvert.batched: the sample's TwoPartError does not cross back from the worker (TypeError: "
        )
        assert torch.equal(ac.batched(negated, executor=pool, in_caller=False)(torch.ones(2, 2)), -torch.ones(2, 2))

    def test_an_argument_that_does_not_unpickle_is_named(self, pool: CountingPool) -> None:
        """It pickles, so the executor sends it; it fails where it arrives: named as one that
        does not pickle, not the worker's raw error."""
        with pytest.raises(pickle.PicklingError, match=r"^autoconvert\.batched\(scaled_by\): argument cfg does not "):
            ac.batched(scaled_by, executor=pool, in_caller=False)(torch.ones(2, 2), Lenient())

    def test_the_attribute_of_a_bound_methods_object_that_does_not_pickle_is_named(self, pool: CountingPool) -> None:
        with pytest.raises(pickle.PicklingError) as info:
            ac.batched(Locked().read, executor=pool, in_caller=False)
        assert str(info.value) == (
            "autoconvert.batched(Locked.read): executor= is a process pool, whose workers receive the function by "
            "pickling, and self.lock does not pickle (TypeError: cannot pickle '_thread.RLock' object). Fix: make "
            "the object pickle without it (leave it out in __getstate__ and make it again in __setstate__), or run "
            "it on threads (workers=)"
        )

    def test_an_np_vectorize_called_before_crosses(self, pool: CountingPool) -> None:
        """Called once, an ``np.vectorize`` caches ufuncs, which do not pickle: it crosses without
        them, and maps as it does sequentially."""
        vectorized = np.vectorize(negated, otypes=[float])
        batch = torch.arange(6.0).reshape(3, 2)
        sequential = ac.batched(vectorized)(batch)
        assert torch.equal(ac.batched(vectorized, executor=pool, in_caller=False)(batch), sequential)

    def test_writes_that_cannot_come_back_are_refused(self, pool: CountingPool) -> None:
        @ac.accepts_numpy(writeback=True)
        def zero_first(a: np.ndarray) -> None:
            a[0] = 0

        with pytest.raises(ValueError) as info:
            ac.batched(zero_first, executor=pool, in_caller=False)
        assert str(info.value) == (
            f"autoconvert.batched({zero_first.__qualname__}): {zero_first.__qualname__} writes into its arguments "
            "(writeback=True or out_params), and on an executor it runs in other processes, whose writes cannot "
            "reach the caller's tensors. Fix: run it on threads (workers=), or return what it computes"
        )

    def test_the_calls_grad_policy_holds(self, pool: CountingPool) -> None:
        """A batch that requires grad warns (the default) or is refused, naming the argument, as
        the function's own call would: the batch is converted once by it, in the caller's process;
        a config block's grad= applies where the function says none."""
        batch = torch.ones(3, 2, requires_grad=True)
        with pytest.warns(ac.GradientWarning) as record:
            ac.batched(negated, executor=pool, in_caller=False)(batch)
        assert str(record[0].message).startswith("negated(): argument values requires grad")
        with pytest.raises(ac.GradientError, match=r"^negated\(\): argument values requires grad"):
            ac.batched(ac.accepts_numpy(grad="error")(negated), executor=pool, in_caller=False)(values=batch)
        with ac.config(grad="error"), pytest.raises(ac.GradientError, match=r"argument values requires grad"):
            ac.batched(negated, executor=pool, in_caller=False)(batch)
        with ac.config(grad="error"), warnings.catch_warnings():
            warnings.simplefilter("error")
            ac.batched(ac.accepts_numpy(grad="detach")(negated), executor=pool, in_caller=False)(batch)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("error")
            ac.batched(negated, executor=pool, in_caller=False)(batch)

    def test_the_pool_keeps_its_worker_count_where_batched_reads_it(self) -> None:
        """concurrent.futures keeps no public worker count; batched reads ``_max_workers``."""
        with ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("spawn")) as processes:
            assert _executors.max_workers(processes) == 3
        assert _executors.max_workers(ThreadPoolExecutor(5)) == 5


class TestDask:
    """A Dask LocalCluster: workers on this machine map shared memory; elsewhere, each chunk's
    samples are scattered to a worker."""

    def test_a_client_and_its_executor_both_run_the_map(self, client: Any) -> None:
        masks = torch.rand(16, 256, 256, generator=torch.Generator().manual_seed(3)) > 0.5
        expected = ac.batched(scipy.ndimage.distance_transform_edt)(masks)
        on_client = ac.batched(scipy.ndimage.distance_transform_edt, executor=client, in_caller=False)
        assert torch.equal(on_client(masks), expected)
        assert on_client._runner.local == {frozenset(client.nthreads()): True}
        executor = client.get_executor()
        assert executor._client is client  # batched finds the client there
        assert torch.equal(ac.batched(scipy.ndimage.distance_transform_edt, executor=executor)(masks), expected)

    def test_workers_elsewhere_receive_scattered_samples(self, client: Any) -> None:
        """The path for workers on other machines, taken here by telling batched the workers
        do not see its shared memory."""
        batch = torch.rand(40, 16, generator=torch.Generator().manual_seed(4))
        remote = ac.batched(ragged_nonzero, executor=client, in_caller=False)
        remote._runner.local[frozenset(client.nthreads())] = False
        out = remote(batch)
        assert [o.tolist() for o in out] == [np.flatnonzero(b > 0.5).tolist() for b in batch.numpy()]

    def test_a_failing_sample_stops_the_map_and_is_named(self, client: Any, tmp_path: pathlib.Path) -> None:
        log = tmp_path / "log"
        with pytest.raises(ZeroDivisionError) as info:
            ac.batched(logged_sample, executor=client, chunksize=30, in_caller=False)(
                torch.arange(60.0).reshape(60, 1), str(log)
            )
        assert info.value.__notes__ == ["autoconvert.batched(logged_sample): raised by sample 0 of 60"]
        time.sleep(0.5)  # Dask does not wait for running tasks: the other chunk stops at its next sample
        ran = _lines(log)
        time.sleep(0.2)
        assert _lines(log) == ran < 30

    def test_a_client_that_is_not_the_default_runs_the_map(self) -> None:
        """With no default client (``set_as_default=False``), the map waits on its futures
        through its own client: in a fresh process, where no other client is the default."""
        script = """
import distributed, torch, autoconvert as ac

with distributed.Client(processes=False, n_workers=1, dashboard_address=":0", set_as_default=False) as client:
    print(ac.batched(lambda x: x * 2, executor=client, in_caller=False)(torch.arange(4.0)).tolist())
"""
        done = subprocess.run(
            [sys.executable, "-"], check=False, input=script, capture_output=True, text=True, timeout=120
        )
        assert done.stdout.strip() == "[0.0, 2.0, 4.0, 6.0]", done.stderr[-2000:]

    def test_a_large_argument_crosses_without_a_large_graph(self, client: Any) -> None:
        """A 12 MB argument that is no batch goes to the workers scattered, not in each task
        (where distributed warns of a large graph; pytest would raise that warning)."""
        table = np.arange(1_500_000, dtype=np.float64)
        out = ac.batched(lookup, executor=client, in_caller=False, chunksize=2)(torch.arange(6.0), table)
        assert out.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]

    def test_a_global_that_does_not_pickle_is_named(self, client: Any) -> None:
        """Dask sends a script's function by value with the globals it names: one that does not
        pickle is named, not the function."""
        namespace: dict[str, Any] = {"__name__": "__main__", "functools": functools}
        exec("square = functools.lru_cache(lambda k: k * k)\ndef f(x):\n    return square(float(x))", namespace)
        with pytest.raises(pickle.PicklingError, match=r"^autoconvert\.batched\(f\): global square of module "):
            ac.batched(namespace["f"], executor=client, in_caller=False)(torch.arange(4.0))

    def test_lambdas_run_on_dask(self, client: Any) -> None:
        """Dask pickles functions with cloudpickle: a lambda is fine there."""
        assert (
            ac.batched(lambda x: x * 2, executor=client, in_caller=False)(torch.ones(3, 2)).tolist() == [[2.0, 2.0]] * 3
        )


def library_threads(x: np.ndarray) -> np.ndarray:
    """The threads BLAS and torch may use where this sample runs."""
    import threadpoolctl

    blas = max(info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas")
    return np.array([blas, torch.get_num_threads()])


def slow_library_threads(x: np.ndarray) -> np.ndarray:
    """``library_threads`` of a sample that takes 5 ms, so that chunks overlap."""
    time.sleep(0.005)
    return library_threads(x)


class TestLibraryThreads:
    """While a map runs on workers, BLAS and torch use at most cores // workers threads each;
    threads_per_worker= overrides; the caller's counts are back when the map ends."""

    CORES = os.cpu_count() or 1

    def _callers(self) -> np.ndarray:
        return library_threads(np.zeros(1))

    def test_threads_are_capped_and_given_back(self) -> None:
        before = self._callers()
        out = ac.batched(library_threads, workers=2, in_caller=False)(torch.ones(4, 1))
        assert out.tolist() == [[min(before[0], max(1, self.CORES // 2)), min(before[1], max(1, self.CORES // 2))]] * 4
        assert self._callers().tolist() == before.tolist()
        one = ac.batched(library_threads, workers=2, in_caller=False, threads_per_worker=1)(torch.ones(2, 1))
        assert one.tolist() == [[1, 1]] * 2

    def test_worker_processes_are_capped(self, pool: CountingPool) -> None:
        out = ac.batched(library_threads, executor=pool, in_caller=False, threads_per_worker=1)(torch.ones(4, 1))
        assert out.tolist() == [[1, 1]] * 4

    def test_in_the_callers_thread_nothing_is_capped(self) -> None:
        before = self._callers()
        assert ac.batched(library_threads)(torch.ones(2, 1)).tolist() == [before.tolist()] * 2

    def test_a_cap_only_lowers(self) -> None:
        """threads_per_worker above a library's own count leaves that count as it is."""
        before = self._callers()
        out = ac.batched(library_threads, workers=2, in_caller=False, threads_per_worker=64)(torch.ones(2, 1))
        assert out.tolist() == [before.tolist()] * 2

    def test_overlapping_maps_give_the_counts_back(self) -> None:
        """Maps from several caller threads at once, each capping the process while it runs,
        leave BLAS and torch with the caller's counts when the last one ends. (OpenBLAS ignores
        a count set from a thread other than the one that set it first, so there BLAS is only
        bounded.)"""
        before = self._callers()
        capped = ac.batched(slow_library_threads, workers=2, in_caller=False, threads_per_worker=1)
        seen: list[list[list[int]]] = []

        def maps() -> None:
            seen.extend(capped(torch.ones(4, 1)).tolist() for _ in range(4))

        callers = [threading.Thread(target=maps) for _ in range(3)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert len(seen) == 12
        assert all(blas <= before[0] and torch_threads == 1 for out in seen for blas, torch_threads in out)
        assert self._callers().tolist() == before.tolist()

    def test_a_dask_map_in_the_callers_process_gives_the_counts_back(self) -> None:
        """Dask workers that are threads of the caller's process cap it only while they run (BLAS
        only bounded: see test_overlapping_maps_give_the_counts_back)."""
        distributed = pytest.importorskip("distributed")
        before = self._callers()
        with (
            distributed.LocalCluster(
                n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            out = ac.batched(slow_library_threads, executor=client, in_caller=False, chunksize=1)(torch.ones(4, 1))
            cap = max(1, self.CORES // 2)
            assert all(blas <= before[0] and threads == min(before[1], cap) for blas, threads in out.tolist())
            assert self._callers().tolist() == before.tolist()

    def test_threads_per_worker_is_a_positive_number(self) -> None:
        with pytest.raises(
            ValueError,
            match=r"^autoconvert\.batched\(\): threads_per_worker= takes None or a positive number of threads, got 0$",
        ):
            ac.batched(np.negative, workers=2, threads_per_worker=0)
