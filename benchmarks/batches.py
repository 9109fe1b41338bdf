"""``batched`` at scale: sequentially, on threads, a process pool, a Dask cluster and Ray, against
the loop users write by hand (``torch.from_numpy(np.stack([fn(s) for s in batch.numpy()]))``).

Workloads are module-level functions, so that process pools and Dask can pickle them, and
each is a per-sample call users make: tiny samples where only per-sample overhead counts, a
GIL-holding pure-Python loop (COCO-style run-length encoding of a mask), SciPy's
GIL-releasing distance transform with large results, NumPy's FFT, and an SVD whose BLAS
starts threads of its own. Beside each executor, the same executor driven by hand (one
chunk per worker) is its ceiling.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import torch

import autoconvert as ac
from autoconvert._batched._executors import SHARED_BYTES

from .harness import Row, compare, synced

Settings = dict[str, Any]


def run_lengths(mask: np.ndarray) -> np.ndarray:
    """A binary mask's run lengths in column-major order, in pure Python (the inner loop of
    COCO's mask encoding as often rewritten by hand): holds the GIL throughout."""
    counts, previous, run = [], False, 0
    for value in mask.ravel(order="F").tolist():
        if value == previous:
            run += 1
        else:
            counts.append(run)
            previous, run = value, 1
    counts.append(run)
    return np.array(counts)


def sort_and_sum(sample: np.ndarray) -> np.float64:
    """A tiny sample's work (64 values: a few microseconds), where per-sample overhead is all there is."""
    return np.sort(sample).sum()


def spectrum(sample: np.ndarray) -> np.ndarray:
    """An image's magnitude spectrum: NumPy's FFT releases the GIL."""
    return np.abs(np.fft.fft2(sample))


def singular_values(sample: np.ndarray) -> np.ndarray:
    """An SVD, which BLAS/LAPACK runs on threads of its own."""
    return np.linalg.svd(sample, compute_uv=False)


def in_turn(fn: Callable[..., Any], samples: list[np.ndarray]) -> list[Any]:
    """One chunk of samples, as a hand-written pool task runs them."""
    return [fn(sample) for sample in samples]


class CountingPool(ProcessPoolExecutor):
    """A process pool that counts the bytes it pickles into its workers' pipe."""

    sent = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.sent += len(pickle.dumps((fn, args, kwargs)))
        return super().submit(fn, *args, **kwargs)


@contextlib.contextmanager
def _dask(workers: int) -> Iterator[Any]:
    """A Dask client on a LocalCluster of ``workers`` single-threaded processes on loopback;
    None without distributed."""
    if importlib.util.find_spec("distributed") is None:
        yield None
        return
    import distributed

    with (
        distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


class Workload(NamedTuple):
    case: str
    fn: Callable[..., Any]
    batch: torch.Tensor
    stacks: bool  # the hand-written loop gathers with np.stack (results of one shape), else a list


def _workloads() -> list[Workload]:
    import scipy.ndimage

    rng = np.random.default_rng(0)
    masks = torch.from_numpy(scipy.ndimage.gaussian_filter(rng.random((64, 448, 448)), sigma=(0, 3, 3)) > 0.5)
    generator = torch.Generator().manual_seed(0)
    return [
        Workload(
            "tiny samples: sort + sum of 64 float64, 1,000 samples",
            sort_and_sum,
            torch.rand(1000, 64, dtype=torch.float64, generator=generator),
            True,
        ),
        Workload("run-length encoding in Python (holds the GIL), 64 masks of 448^2", run_lengths, masks, False),
        Workload(
            "distance_transform_edt (releases the GIL; 32 MiB of float64 results), 64 x 256^2",
            scipy.ndimage.distance_transform_edt,
            torch.rand(64, 256, 256, generator=generator) > 0.5,
            True,
        ),
        Workload(
            "np.abs(np.fft.fft2(x)) (releases the GIL), 64 x 256^2 float64",
            spectrum,
            torch.rand(64, 256, 256, dtype=torch.float64, generator=generator),
            True,
        ),
        Workload(
            "np.linalg.svd (BLAS threads of its own), 32 x 256^2 float64",
            singular_values,
            torch.rand(32, 256, 256, dtype=torch.float64, generator=generator),
            True,
        ),
    ]


def _hand_loop(work: Workload) -> Callable[[], Any]:
    """The loop users write by hand: one conversion each way, np.stack where results agree."""
    fn, batch = work.fn, work.batch
    if work.stacks:
        return lambda: torch.from_numpy(np.stack([fn(s) for s in batch.numpy()]))
    return lambda: [torch.from_numpy(fn(s)) for s in batch.numpy()]


def _by_hand(work: Workload, map_chunks: Callable[[list[list[np.ndarray]]], Iterable[list[Any]]]) -> Callable[[], Any]:
    """The hand-written loop with its samples in one chunk per worker (2), mapped by ``map_chunks``:
    the raw executor's ceiling."""
    batch, stacks = work.batch, work.stacks

    def call() -> Any:
        arrays = list(batch.numpy())
        half = -(-len(arrays) // 2)
        results = [r for part in map_chunks([arrays[:half], arrays[half:]]) for r in part]
        return torch.from_numpy(np.stack(results)) if stacks else [torch.from_numpy(r) for r in results]

    return call


def executors(settings: Settings) -> list[Row]:
    """Per workload, against the loop users write by hand: batched sequentially, on 2 threads,
    on a spawn process pool of 2 and on a Dask LocalCluster of 2, each beside the same executor
    driven by hand (one chunk per worker: its ceiling); the BLAS-heavy workload on threads
    also uncapped. Each executor is measured in a group of its own, with the hand loop
    measured again beside it: a process pool driven by hand pickles the batch through pipes
    and leaves the caller's allocator in another state for whatever is measured beside it,
    and on 2 cores a Dask cluster's idle heartbeats would slow every other contender."""
    if settings["quick"]:
        return []
    rows: list[Row] = []
    workloads = _workloads()
    spawn = multiprocessing.get_context("spawn")
    with ThreadPoolExecutor(2) as threads:
        for work in workloads:
            fn = work.fn
            calls = {
                "hand-written loop": _hand_loop(work),
                "batched, sequential": _on(ac.batched(fn), work),
                "batched, workers=2 (threads)": _on(ac.batched(fn, workers=2), work),
                "by hand: ThreadPoolExecutor(2), a chunk per worker": _by_hand(
                    work, lambda chunks, fn=fn: threads.map(functools.partial(in_turn, fn), chunks)
                ),
            }
            if fn is singular_values:
                uncapped = ac.batched(fn, workers=2, threads_per_worker=os.cpu_count() or 1)
                calls["batched, workers=2, BLAS uncapped (threads_per_worker=cores)"] = _on(uncapped, work)
            rows += _compared(work.case, calls, settings, len(work.batch))
    with ProcessPoolExecutor(2, mp_context=spawn) as processes:
        rows += _beside(
            workloads,
            settings,
            ("ProcessPoolExecutor(2)", {"executor": processes}, "the process pool"),
            lambda fn, chunks: processes.map(functools.partial(in_turn, fn), chunks),
        )
    with _dask(2) as client:
        if client is not None:
            rows += _beside(
                workloads,
                settings,
                ("Dask LocalCluster(2)", {"executor": client}, "the Dask cluster"),
                lambda fn, chunks: client.gather(client.map(functools.partial(in_turn, fn), chunks, pure=False)),
            )
    return rows


@contextlib.contextmanager
def _ray(cpus: int) -> Iterator[Any]:
    """The ``ray`` module connected to a local Ray of ``cpus`` CPUs; None without Ray."""
    if importlib.util.find_spec("ray") is None:
        yield None
        return
    import ray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _ray_workloads(quick: bool) -> list[Workload]:
    """The Ray issue's two workloads first: GIL-holding samples of about 5 ms (run-length
    encoding of 64 masks of 320^2; under ``quick``, 16 masks of 96^2) and 1,000 tiny samples
    of under 0.1 ms; in the full run, the other workloads after them."""
    generator = torch.Generator().manual_seed(0)
    count, side = (16, 96) if quick else (64, 320)
    masks = torch.rand(count, side, side, generator=generator) > 0.5
    issue = [
        Workload(
            f"run-length encoding in Python (holds the GIL), {count} masks of {side}^2", run_lengths, masks, False
        ),
        Workload(
            "tiny samples: sort + sum of 64 float64, 1,000 samples",
            sort_and_sum,
            torch.rand(1000, 64, dtype=torch.float64, generator=generator),
            True,
        ),
    ]
    return issue if quick else issue + [w for w in _workloads() if w.fn is not sort_and_sum]


def on_ray(settings: Settings) -> list[Row]:
    """Per workload, against the loop users write by hand (measured again beside Ray):
    ``batched`` on a local Ray of 2 CPUs, the Ray map users write by hand (a task per sample,
    ``ray.get([f.remote(s) for s in samples])``: left out for the 1,000 tiny samples under
    ``quick``, where its 1,000 tasks take seconds), and Ray driven by hand with one chunk per
    CPU (its ceiling)."""
    rows: list[Row] = []
    with _ray(2) as ray:
        if ray is None:
            return []
        chunk_task = ray.remote(in_turn)
        for work in _ray_workloads(settings["quick"]):
            task = ray.remote(work.fn)
            calls = {
                "hand-written loop": _hand_loop(work),
                "batched, Ray (2 CPUs)": _on(ac.batched(work.fn, executor=ray), work),
                "by hand: ray.get([f.remote(s) for s in samples])": _ray_by_hand(work, ray, task),
                "by hand: Ray, a chunk per CPU": _by_hand(
                    work, lambda chunks, fn=work.fn: ray.get([chunk_task.remote(fn, c) for c in chunks])
                ),
            }
            if settings["quick"] and len(work.batch) > 100:
                del calls["by hand: ray.get([f.remote(s) for s in samples])"]
            found = _compared(work.case, calls, settings, len(work.batch))
            found[0].contender += " (beside Ray)"
            _against_ray_by_hand(found)
            rows += found
    return rows


def _against_ray_by_hand(rows: list[Row]) -> None:
    """``batched``'s speed over the Ray map by hand's, in its note (the issue's second target)."""
    by_name = {row.contender: row for row in rows}
    ours, theirs = by_name["batched, Ray (2 CPUs)"], by_name.get("by hand: ray.get([f.remote(s) for s in samples])")
    if theirs is not None:
        ours.note += f"; {theirs.median_us / ours.median_us:.2f}x the Ray map by hand's speed"


def _ray_by_hand(work: Workload, ray: Any, task: Any) -> Callable[[], Any]:
    """The Ray map users write by hand: a task per sample, ``np.stack`` after where results agree
    (Ray hands back read-only arrays, which torch takes by copying)."""
    batch, stacks = work.batch, work.stacks

    def call() -> Any:
        results = ray.get([task.remote(s) for s in batch.numpy()])
        return torch.from_numpy(np.stack(results)) if stacks else [torch.tensor(r) for r in results]

    return call


def _beside(
    workloads: list[Workload],
    settings: Settings,
    executor: tuple[str, dict[str, Any], str],
    map_chunks: Callable[[Callable[..., Any], list[list[np.ndarray]]], Iterable[list[Any]]],
) -> list[Row]:
    """One executor's group: per workload, the hand loop measured again beside ``batched`` on
    the executor (``executor``: its name, batched's options, what the loop is beside) and the
    executor driven by hand (``map_chunks(fn, chunks)``)."""
    name, options, beside = executor
    rows: list[Row] = []
    for work in workloads:
        calls = {
            "hand-written loop": _hand_loop(work),
            f"batched, {name}": _on(ac.batched(work.fn, **options), work),
            f"by hand: {name}, a chunk per worker": _by_hand(work, functools.partial(map_chunks, work.fn)),
        }
        found = _compared(work.case, calls, settings, len(work.batch))
        found[0].contender += f" (beside {beside})"
        rows += found
    return rows


def _on(batched: Callable[..., Any], work: Workload) -> Callable[[], Any]:
    return lambda: batched(work.batch)


def _compared(case: str, calls: dict[str, Callable[[], Any]], settings: Settings, size: int) -> list[Row]:
    """Rows of one case against the hand-written loop, each noting its speed over the loop's."""
    for call in calls.values():
        call()  # workers started, modules imported, before timing
    rows = compare(case, "hand-written loop", calls, settings["batch_repeats"], settings["target_s"])
    for row in rows:
        ratio = row.ratio
        row.note = (
            f"{row.median_us / 1e3 / size:.3f} ms a sample" if ratio is None else f"{1 / ratio:.2f}x the loop's speed"
        )
    return rows


def scaling(settings: Settings) -> list[Row]:
    """Run-length encoding (about 1 ms a sample) on process pools and Dask clusters of 1 and 2
    workers, batches of 8, 64 and 512: the speed-up over the hand-written loop, and the bytes
    sent per sample (a process pool: pickled into its pipe, and through shared memory)."""
    if settings["quick"]:
        return []
    import scipy.ndimage

    base = scipy.ndimage.gaussian_filter(np.random.default_rng(1).random((64, 192, 192)), sigma=(0, 3, 3)) > 0.5
    batches = {size: torch.from_numpy(np.resize(base, (size, 192, 192))) for size in (8, 64, 512)}
    rows: list[Row] = []
    spawn = multiprocessing.get_context("spawn")
    for workers in (1, 2):
        plural = "s" * (workers > 1)
        with CountingPool(workers, mp_context=spawn) as pool:
            name = f"ProcessPoolExecutor({workers})"
            for size, masks in batches.items():
                calls = _against_loop(name, ac.batched(run_lengths, executor=pool), masks)
                found = _compared(
                    f"run-length encoding, {size} masks of 192^2, {workers} worker{plural}", calls, settings, size
                )
                pool.sent = 0
                if _in_caller(calls[name]):
                    found[1].note += "; in the caller's thread (too small for the pool)"
                else:
                    piped = pool.sent / size
                    shared = masks[0].numpy().nbytes if masks.numpy().nbytes >= SHARED_BYTES else 0
                    found[1].extra.update(piped_bytes_per_sample=piped, shared_bytes_per_sample=shared)
                    found[1].note += f"; a sample: {piped:,.0f} B pickled, {shared:,} B through shared memory"
                rows += found
        with _dask(workers) as client:
            if client is not None:
                for size, masks in batches.items():
                    name = f"Dask LocalCluster, {workers} worker{plural}"
                    calls = _against_loop(name, ac.batched(run_lengths, executor=client), masks)
                    found = _compared(
                        f"run-length encoding, {size} masks of 192^2, {workers} worker{plural}", calls, settings, size
                    )
                    found[0].contender += " (beside the Dask cluster)"
                    if _in_caller(calls[name]):
                        found[1].note += "; in the caller's thread (too small for the cluster)"
                    elif masks.numpy().nbytes >= SHARED_BYTES:
                        found[1].note += "; a sample: 0 B pickled, all through shared memory"
                    else:
                        found[1].note += f"; a sample: {masks[0].numpy().nbytes:,} B inside its task"
                    rows += found
    return rows


def _in_caller(call: Callable[[], Any]) -> bool:
    """Whether a batched call ran its batch in the caller's thread, too small for its executor."""
    with ac.stats() as counted:
        call()
    return any(f.batches_in_caller for f in counted.functions.values())


def _against_loop(name: str, batched: Callable[..., Any], masks: torch.Tensor) -> dict[str, Callable[[], Any]]:
    """The hand-written loop of the run-length workload, and ``batched`` on the same masks."""
    return {"hand-written loop": _hand_loop(Workload("", run_lengths, masks, False)), name: lambda: batched(masks)}


def breakdown(settings: Settings) -> list[Row]:
    """Where a process pool's time goes, per sample of the run-length workload (448^2 masks),
    each against the work itself: pickling a sample, its result and the function; one task's
    round trip; the caller's conversions; starting a spawn pool."""
    if settings["quick"]:
        return []
    import scipy.ndimage

    mask = scipy.ndimage.gaussian_filter(np.random.default_rng(2).random((448, 448)), sigma=3) > 0.5
    result = run_lengths(mask)
    tensor = torch.from_numpy(mask)
    place = ac.returns_tensor(lambda r, *inputs: r)
    work = _timed("the work itself (one sample)", lambda: run_lengths(mask))
    rows = [
        work,
        _timed("pickle one sample (448^2 bool)", lambda: pickle.loads(pickle.dumps(mask)), len(pickle.dumps(mask))),
        _timed("pickle its result", lambda: pickle.loads(pickle.dumps(result)), len(pickle.dumps(result))),
        _timed("pickle the function", lambda: pickle.loads(pickle.dumps(run_lengths)), len(pickle.dumps(run_lengths))),
        _timed("the caller's conversions (to_numpy, result to tensor)", lambda: place(result, ac.to_numpy(tensor))),
    ]
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as pool:
        pool.submit(len, ()).result()
        rows.append(_timed("one task's round trip (a no-op task)", lambda: pool.submit(len, ()).result()))
    started = time.perf_counter()
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        list(pool.map(run_lengths, [mask, mask]))
    elapsed = (time.perf_counter() - started) * 1e6
    rows.append(Row(work.case, "start 2 spawn workers, import, run 2 samples", elapsed, None))
    for row in rows[1:]:
        row.ratio = row.median_us / work.median_us
        row.note = "; ".join(filter(None, [f"{100 * row.ratio:.2f} % of a sample's work", row.note]))
    return rows


def _timed(what: str, fn: Callable[[], Any], nbytes: int = 0) -> Row:
    """A row for ``fn``'s mean time over 0.2 s, noting ``nbytes`` where given."""
    fn()
    number, started = 0, time.perf_counter()
    while time.perf_counter() - started < 0.2:
        fn()
        number += 1
    row = Row("process pool: where the time goes", what, (time.perf_counter() - started) / number * 1e6, None)
    if nbytes:
        row.extra["bytes"] = nbytes
        row.note = f"{nbytes:,} B"
    return row


def per_sample(settings: Settings) -> list[Row]:
    """batched() on a GIL-releasing SciPy routine against the hand-written per-sample loop."""
    if importlib.util.find_spec("scipy") is None:
        return []
    import scipy.ndimage

    edt = scipy.ndimage.distance_transform_edt
    masks = torch.rand(8, settings["edt_side"], settings["edt_side"]) > 0.5
    sequential, threaded = ac.batched(edt), ac.batched(edt, workers=2)
    arrays = [m.numpy() for m in masks]
    with ThreadPoolExecutor(max_workers=2) as pool:
        rows = compare(
            f"distance_transform_edt per sample, 8 x {settings['edt_side']}^2",
            "hand-written loop",
            {
                "hand-written loop": lambda: torch.stack([torch.from_numpy(edt(m.numpy())) for m in masks]),
                "batched": lambda: sequential(masks),
                "batched, workers=2": lambda: threaded(masks),
                # The ceiling on this machine: two raw threads over ready-made arrays, no stacking.
                "raw ThreadPoolExecutor(2)": lambda: list(pool.map(edt, arrays)),
            },
            settings["copy_repeats"],
            settings["target_s"],
        )
    for row in rows:
        if row.ratio is not None:
            row.note = f"{1 / row.ratio:.2f}x the loop's speed"
    return rows


# --------------------------------------------------------------------------- case 6: a batch on the GPU


def gpu_batched(settings: Settings) -> list[Row]:
    """SciPy per sample over a CUDA batch of 16 volumes 64^3: the hand-written loop through
    ``.cpu().numpy()``, batched's host path (one crossing each way) and, for a torchified
    function, CuPy on each sample's memory."""
    if not torch.cuda.is_available() or importlib.util.find_spec("cupy") is None:
        return []
    import scipy.ndimage

    device = torch.device("cuda", torch.cuda.current_device())
    volumes = torch.rand(16, 64, 64, 64, device=device)
    on_gpu = ac.torchify(scipy.ndimage)
    rows = []
    for label, name, args in (
        ("distance_transform_edt", "distance_transform_edt", (volumes > 0.01,)),
        ("gaussian_filter, sigma 2", "gaussian_filter", (volumes, 2.0)),
    ):
        fn = getattr(scipy.ndimage, name)
        batch, rest = args[0], args[1:]
        host, resident = ac.batched(fn), ac.batched(getattr(on_gpu, name))

        def by_hand(fn: Callable[..., Any] = fn, batch: torch.Tensor = batch, rest: tuple[Any, ...] = rest) -> Any:
            return torch.stack([torch.from_numpy(fn(v.cpu().numpy(), *rest)).to(device) for v in batch])

        assert torch.allclose(resident(*args), by_hand(), atol=1e-4)
        case = compare(
            f"{label} per sample, 16 x 64^3 on the GPU",
            "hand-written loop, .cpu().numpy()",
            {
                "hand-written loop, .cpu().numpy()": synced(device, by_hand),
                "batched, host path": synced(device, functools.partial(host, *args)),
                "batched(torchify(...)), CuPy per sample": synced(device, functools.partial(resident, *args)),
            },
            max(3, settings["copy_repeats"] // 3),
            settings["target_s"],
        )
        case[2].note = f"{case[1].median_us / case[2].median_us:,.1f}x faster than the host path"
        rows += case
    return rows
