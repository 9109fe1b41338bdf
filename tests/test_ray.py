"""batched on Ray (``executor=ray``) and on multiprocessing pools (the stdlib's, Ray's): the
promises of a process pool, on a real local Ray of two CPUs and a real spawn pool."""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import os
import pathlib
import pickle
import random
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.ndimage
import torch

import autoconvert as ac
from autoconvert._batched._pools import PoolExecutor

pytestmark = pytest.mark.slow

BATCH = torch.arange(24.0).reshape(12, 2)


@pytest.fixture(scope="module")
def ray(ray_cluster: Any) -> Any:
    return ray_cluster


@pytest.fixture(scope="module")
def pools(ray: Any) -> Iterator[dict[str, Any]]:
    """A spawn multiprocessing pool and a Ray multiprocessing pool, two workers each."""
    from ray.util.multiprocessing import Pool as RayPool

    with multiprocessing.get_context("spawn").Pool(2) as stdlib:
        on_ray = RayPool(2)
        try:
            yield {"multiprocessing": stdlib, "ray": on_ray}
        finally:
            on_ray.terminate()


# Module level: Ray and the pools receive these by reference.


def normalised(a: np.ndarray) -> np.ndarray:
    """A sample divided by its sum in place: a write into the sample."""
    a /= a.sum()
    return a


def with_rng(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return x + rng.standard_normal(x.shape)


def with_globals(x: np.ndarray) -> np.ndarray:
    """A sample drawing from all three global states."""
    return x + np.random.standard_normal(x.shape) + random.random() + float(torch.rand(1))


def logged_sample(x: np.ndarray, log: str) -> np.ndarray:
    """Sample 0 fails at once (unless ``x`` is 1 or more everywhere); every other sample
    appends to ``log`` and takes 20 ms."""
    if x[0] == 0:
        raise ZeroDivisionError("sample zero")
    with open(log, "a") as file:
        file.write(f"{int(x[0])}\n")
    time.sleep(0.02)
    return x


def library_threads(x: np.ndarray) -> np.ndarray:
    """The threads BLAS and torch may use where this sample runs."""
    import threadpoolctl

    blas = max(info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas")
    return np.array([blas, torch.get_num_threads()])


def applied(x: np.ndarray, fn: Any) -> np.ndarray:
    """``fn`` of a sample, ``fn`` an argument every sample receives."""
    return np.asarray(fn(x))


def _scaled(x: np.ndarray) -> np.ndarray:
    return x * 3


scaled = ac.accepts_numpy(_scaled)
tripled = ac.numpy_op(_scaled)
special = ac.torchify(scipy.special)


def _lines(log: pathlib.Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_map_runs_as_ray_tasks_with_large_batches_through_the_object_store(ray: Any) -> None:
    """The values of the sequential run, for a batch of a few bytes (inside its chunks), a
    large one (put once in the object store) and a ragged one; explain names Ray."""
    masks = torch.rand(8, 256, 256, generator=torch.Generator().manual_seed(3)) > 0.5
    on_ray = ac.batched(scipy.ndimage.distance_transform_edt, executor=ray, in_caller=False)
    assert torch.equal(on_ray(masks), ac.batched(scipy.ndimage.distance_transform_edt)(masks))
    assert torch.equal(ac.batched(np.negative, executor=ray, in_caller=False)(BATCH), -BATCH)
    ragged = list(torch.arange(10.0).split([1, 2, 3, 4]))
    out = ac.batched(np.cumsum, executor=ray, in_caller=False, chunksize=1)(ragged)
    assert [o.tolist() for o in out] == [np.cumsum(r.numpy()).tolist() for r in ragged]
    assert "Samples run on Ray tasks, in chunks." in str(ac.explain(on_ray))


def test_samples_are_read_only_unless_the_call_copies_them(ray: Any) -> None:
    """A write into a sample is the ReadOnlyError of the sequential run, naming the argument;
    under copy=True each sample is the worker's own writable copy, and the caller's batch is
    as it was. A large batch (through the object store) too."""
    for batch in (BATCH, torch.rand(4, 512, 128)):
        expected = ac.batched(normalised)
        with pytest.raises(ac.ReadOnlyError) as sequential:
            expected(batch)
        with pytest.raises(ac.ReadOnlyError) as on_ray:
            ac.batched(normalised, executor=ray, in_caller=False)(batch)
        assert str(on_ray.value) == str(sequential.value)
        before = batch.clone()
        with ac.config(copy=True):
            out = ac.batched(normalised, executor=ray, in_caller=False)(batch)
            assert torch.allclose(out, expected(batch))
        assert torch.equal(batch, before)


def test_maps_whose_samples_all_fail_at_once_raise_without_aborting_the_caller(ray: Any) -> None:
    """Every task of such a map fails as the first failure cancels the rest: a task cancelled
    as it completes aborts the caller's process on Ray releases (a RAY_CHECK of its task
    manager), which many maps in a row met."""
    for _ in range(100):
        with pytest.raises(ac.ReadOnlyError):
            ac.batched(normalised, executor=ray, in_caller=False)(BATCH)


def test_writes_are_refused_naming_the_option(ray: Any) -> None:
    message = (
        "autoconvert.batched(normalised): normalised writes into its arguments (writeback=True or out_params{}), "
        "and on an executor it runs in other processes, whose writes cannot reach the caller's tensors. Fix: run "
        "it on threads (workers=), or return what it computes"
    )
    with pytest.raises(ValueError) as info:
        ac.batched(ac.accepts_numpy(normalised, writeback=True), executor=ray)
    assert str(info.value) == message.format("")
    with pytest.raises(ValueError) as info:
        ac.batched(normalised, executor=ray, writeback=True)
    assert str(info.value) == message.format("")
    with ac.config(writeback=True), pytest.raises(ValueError) as info:
        ac.batched(normalised, executor=ray)(BATCH)
    assert str(info.value) == message.format(", from a config block")


def test_seeds_give_the_sequential_draws_on_ray_and_the_pools(ray: Any, pools: dict[str, Any]) -> None:
    """rng= and the global states (np.random, random, torch's) seeded per sample: bit-identical
    to the sequential run (as a process pool's and Dask's are: tests/test_seeds.py), however
    the batch is chunked; the caller's own global states as they were."""
    np.random.seed(1)
    before = np.random.random()
    np.random.seed(1)
    for fn in (with_rng, with_globals):
        expected = ac.batched(fn, seed=3)(BATCH)
        for executor in (ray, pools["multiprocessing"], pools["ray"]):
            for chunksize in (None, 1, 5):
                out = ac.batched(fn, seed=3, executor=executor, chunksize=chunksize, in_caller=False)(BATCH)
                assert torch.equal(out, expected), (fn, executor, chunksize)
    assert np.random.random() == before


def test_library_threads_are_capped_per_worker_and_the_callers_left(ray: Any) -> None:
    """A Ray task reserves one CPU: its libraries run one thread (threads_per_worker= lowers
    no further than one); the caller's counts are those it had."""
    pytest.importorskip("threadpoolctl")
    before = library_threads(np.zeros(1))
    out = ac.batched(library_threads, executor=ray, in_caller=False)(torch.ones(4, 1))
    assert out.tolist() == [[1, 1]] * 4
    assert (
        ac.batched(library_threads, executor=ray, in_caller=False, threads_per_worker=1)(torch.ones(2, 1)).tolist()
        == [[1, 1]] * 2
    )
    assert library_threads(np.zeros(1)).tolist() == before.tolist()


def test_a_failing_sample_cancels_the_map_and_is_named(ray: Any, tmp_path: pathlib.Path) -> None:
    """Its own exception type, a note naming the sample; the other task is interrupted, none
    runs once the error is raised."""
    _stops_at_the_first_failure(ray, tmp_path)


def _stops_at_the_first_failure(executor: Any, tmp_path: Any) -> None:
    """A map on ``executor`` whose sample 0 fails: its own exception type, a note naming the
    sample, and fewer than a chunk's samples run, none after the error is raised."""
    log = tmp_path / "log"
    with pytest.raises(ZeroDivisionError) as info:
        ac.batched(logged_sample, executor=executor, chunksize=30, in_caller=False)(
            torch.arange(60.0).reshape(60, 1), str(log)
        )
    assert type(info.value) is ZeroDivisionError
    assert info.value.__notes__ == ["autoconvert.batched(logged_sample): raised by sample 0 of 60"]
    ran = _lines(log)
    time.sleep(0.2)
    assert _lines(log) == ran < 30


def test_ctrl_c_cancels_the_tasks(ray: Any, tmp_path: pathlib.Path) -> None:
    """A KeyboardInterrupt in the caller while the map runs cancels its tasks before it propagates."""
    log = tmp_path / "log"
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            ac.batched(logged_sample, executor=ray, chunksize=100, in_caller=False)(
                torch.arange(1.0, 201.0).reshape(200, 1), str(log)
            )
    finally:
        timer.cancel()
    ran = _lines(log)
    time.sleep(0.2)
    assert _lines(log) == ran < 200


def test_progress_and_stats_count_the_batch_where_it_ran(ray: Any, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tqdm")
    with ac.stats() as counted:
        ac.batched(np.negative, executor=ray, progress=True, in_caller=False)(torch.ones(64, 2))
        ac.batched(np.negative, executor=ray)(torch.ones(8, 2))  # too small to pay for Ray: in the caller
    assert "64/64" in capsys.readouterr().err
    assert (counted["negative"].calls, counted["negative"].samples, counted["negative"].batches_in_caller) == (2, 72, 1)


def test_decorated_torchified_and_numpy_op_functions_cross_by_reference(ray: Any) -> None:
    """A decorated function as the per-sample function, and decorated, torchified and numpy_op
    functions as arguments every sample receives: each pickles as the name it is imported
    by (a torchified module's function, which has none, as what rebuilds it), and runs on the
    workers."""
    for fn in (scaled, tripled):
        assert pickle.loads(pickle.dumps(fn)) is fn
    assert np.array_equal(ac.batched(scaled, executor=ray, in_caller=False)(BATCH), BATCH.numpy() * 3)
    for fn in (scaled, tripled):
        assert torch.equal(ac.batched(applied, executor=ray, in_caller=False)(BATCH, fn), BATCH * 3)
    out = ac.batched(applied, executor=ray, in_caller=False)(BATCH, special.expit)
    torch.testing.assert_close(out, torch.sigmoid(BATCH).double(), check_dtype=False)


per_sample_on_ray: Any = None


def test_a_batched_function_on_ray_pickles_by_reference(ray: Any) -> None:
    global per_sample_on_ray
    per_sample_on_ray = ac.batched(np.negative, executor=ray)
    per_sample_on_ray.__module__, per_sample_on_ray.__qualname__ = __name__, "per_sample_on_ray"
    assert pickle.loads(pickle.dumps(per_sample_on_ray)) is per_sample_on_ray


class TestPools:
    """multiprocessing's Pool and Ray's: the values, the refusal of writes, a failing sample
    named, its map cancelled."""

    @pytest.mark.parametrize("kind", ["multiprocessing", "ray"])
    def test_values_errors_and_cancellation(self, pools: dict[str, Any], kind: str, tmp_path: pathlib.Path) -> None:
        pool = pools[kind]
        assert PoolExecutor(pool)._max_workers == 2  # read from each pool's private size
        large = torch.rand(8, 512, 64)
        assert torch.equal(ac.batched(np.negative, executor=pool, in_caller=False)(large), -large)
        with pytest.raises(ac.ReadOnlyError):
            ac.batched(normalised, executor=pool, in_caller=False)(BATCH)
        _stops_at_the_first_failure(pool, tmp_path)

    def test_a_function_the_stdlib_pool_cannot_receive_is_refused(self, pools: dict[str, Any]) -> None:
        with pytest.raises(pickle.PicklingError, match=r"executor= is a process pool"):
            ac.batched(lambda x: x, executor=pools["multiprocessing"])
        out = ac.batched(lambda x: x * 2, executor=pools["ray"], in_caller=False)(BATCH)  # Ray pickles lambdas
        assert torch.equal(out, BATCH * 2)

    def test_a_thread_pool_of_multiprocessing_runs_lambdas_and_seeds_only_rng(self) -> None:
        """multiprocessing's ThreadPool sends nothing by pickling, and its workers are threads."""
        with multiprocessing.pool.ThreadPool(2) as threads:
            assert torch.equal(ac.batched(lambda x: x * 2, executor=threads, in_caller=False)(BATCH), BATCH * 2)
            with pytest.raises(ValueError, match=r"seed= on an executor whose workers are threads of the caller"):
                ac.batched(with_globals, executor=threads, seed=1)
            out = ac.batched(with_rng, executor=threads, seed=1, in_caller=False, chunksize=2)(BATCH)
            assert torch.equal(out, ac.batched(with_rng, seed=1)(BATCH))
