"""``batched`` at scale: threads, a process pool and a Dask cluster against the sequential loop.

Workloads are module-level functions, so that process pools and Dask can pickle them, and
each is a per-sample call users make: a GIL-holding pure-Python loop (COCO-style run-length
encoding of a mask), scikit-image's ``regionprops``, SciPy's GIL-releasing distance
transform, and tiny samples where only chunking keeps executors from costing more than
they give.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import multiprocessing
import pickle
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

import autoconvert as ac
from autoconvert._front._executors import SHARED_BYTES

from .harness import Row, compare

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


def region_table(labels: np.ndarray) -> np.ndarray:
    """Per region of a labelled image: area, centroid, eccentricity, solidity (scikit-image)."""
    from skimage.measure import regionprops

    return np.array([(r.area, *r.centroid, r.eccentricity, r.solidity) for r in regionprops(labels)])


def python_loop(sample: np.ndarray, passes: int) -> np.ndarray:
    """A small sample's sum of squares, ``passes`` times over in Python."""
    total = 0.0
    values = sample.tolist()
    for _ in range(passes):
        for value in values:
            total += value * value
    return np.array([total])


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


def _workloads() -> list[tuple[str, Callable[..., Any], tuple[Any, ...], dict[str, Any]]]:
    import scipy.ndimage
    from skimage.measure import label

    rng = np.random.default_rng(0)
    blobs = scipy.ndimage.gaussian_filter(rng.random((64, 256, 256)), sigma=(0, 8, 8)) > 0.5
    labels = torch.from_numpy(np.stack([label(b) for b in blobs]).astype(np.int32))
    masks = torch.from_numpy(scipy.ndimage.gaussian_filter(rng.random((64, 448, 448)), sigma=(0, 3, 3)) > 0.5)
    edt_masks = torch.rand(64, 256, 256, generator=torch.Generator().manual_seed(0)) > 0.5
    tiny = torch.rand(1000, 250, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return [
        ("run-length encoding in Python (holds the GIL), 64 masks of 448^2", run_lengths, (masks,), {}),
        ("regionprops (holds the GIL), 64 labelled 256^2 images", region_table, (labels,), {}),
        (
            "distance_transform_edt (releases the GIL), 64 x 256^2",
            scipy.ndimage.distance_transform_edt,
            (edt_masks,),
            {},
        ),
        ("tiny samples: a Python loop, 1,000 x 250 values", python_loop, (tiny,), {"passes": 12}),
    ]


def executors(settings: Settings) -> list[Row]:
    """Per workload: the sequential batched loop against threads, a spawn process pool and a
    Dask LocalCluster (2 workers each), and the process pool used by hand, one task per sample.
    The cluster is measured on its own, against its own baseline: on 2 cores its idle
    heartbeats would slow every other contender."""
    if settings["quick"] or importlib.util.find_spec("skimage") is None:
        return []
    rows: list[Row] = []
    workloads = _workloads()
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=spawn) as processes:
        for case, fn, args, kwargs in workloads:
            calls = _calls(
                {
                    "workers=2 (threads)": ac.batched(fn, workers=2),
                    "ProcessPoolExecutor(2)": ac.batched(fn, executor=processes),
                },
                fn,
                args,
                kwargs,
            )
            by_hand, arrays = _partial(fn, kwargs), [sample.numpy() for sample in args[0]]
            calls["by hand: pool.map, one task per sample"] = lambda f=by_hand, a=arrays: list(processes.map(f, a))
            rows += _compared(case, calls, settings, len(arrays))
    with _dask(2) as client:
        if client is not None:
            for case, fn, args, kwargs in workloads:
                calls = _calls({"Dask LocalCluster, 2 workers": ac.batched(fn, executor=client)}, fn, args, kwargs)
                by_hand, arrays = _partial(fn, kwargs), [sample.numpy() for sample in args[0]]
                calls["by hand: client.map, one task per sample"] = lambda f=by_hand, a=arrays: client.gather(
                    client.map(f, a, pure=False)
                )
                found = _compared(case, calls, settings, len(arrays))
                found[0].contender += " (beside the Dask cluster)"
                rows += found
    return rows


def _calls(
    contenders: dict[str, Callable[..., Any]], fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Callable[[], Any]]:
    """The sequential baseline and the contenders, as calls on the workload's arguments."""
    every = {"batched, sequential": ac.batched(fn), **contenders}
    return {name: (lambda c=c: c(*args, **kwargs)) for name, c in every.items()}


def _compared(case: str, calls: dict[str, Callable[[], Any]], settings: Settings, size: int) -> list[Row]:
    """Rows of one case against the sequential loop, each noting its speed over the loop's."""
    for call in calls.values():
        call()  # workers started, modules imported, before timing
    rows = compare(case, "batched, sequential", calls, settings["batch_repeats"], settings["target_s"])
    for row in rows:
        ratio = row.ratio
        row.note = (
            f"{row.median_us / 1e3 / size:.2f} ms a sample" if ratio is None else f"{1 / ratio:.2f}x the loop's speed"
        )
    return rows


def _partial(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Callable[..., Any]:
    return functools.partial(fn, **kwargs) if kwargs else fn


def scaling(settings: Settings) -> list[Row]:
    """Run-length encoding (about 1 ms a sample) on process pools and Dask clusters of 1 and 2
    workers, batches of 8, 64 and 512: the speed-up over the sequential loop, and the bytes
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
                calls = _calls({name: ac.batched(run_lengths, executor=pool)}, run_lengths, (masks,), {})
                found = _compared(
                    f"run-length encoding, {size} masks of 192^2, {workers} worker{plural}", calls, settings, size
                )
                pool.sent = 0
                calls[name]()
                piped = pool.sent / size
                shared = masks[0].numpy().nbytes if masks.numpy().nbytes >= SHARED_BYTES else 0
                found[1].extra.update(piped_bytes_per_sample=piped, shared_bytes_per_sample=shared)
                found[1].note += f"; a sample: {piped:,.0f} B pickled, {shared:,} B through shared memory"
                rows += found
        with _dask(workers) as client:
            if client is not None:
                for size, masks in batches.items():
                    name = f"Dask LocalCluster, {workers} worker{plural}"
                    calls = _calls({name: ac.batched(run_lengths, executor=client)}, run_lengths, (masks,), {})
                    found = _compared(
                        f"run-length encoding, {size} masks of 192^2, {workers} worker{plural}", calls, settings, size
                    )
                    found[0].contender += " (beside the Dask cluster)"
                    found[1].note += (
                        "; a sample: 0 B pickled, all through shared memory"
                        if masks.numpy().nbytes >= SHARED_BYTES
                        else f"; a sample: {masks[0].numpy().nbytes:,} B inside its task"
                    )
                    rows += found
    return rows


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
