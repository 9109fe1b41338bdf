"""One task of a ``batched`` map: a run of consecutive samples, wherever the executor runs it.

Sending one task per sample costs a round trip (and a pickled function) per sample, which
for small samples outweighs the work. A chunk carries the function once, its arguments, and
the batched ones as sources indexed per sample. It imports no torch: on a process pool or a
Dask cluster it runs on NumPy arrays.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import pathlib
import pickle
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np


class Batch:
    """In a chunk's arguments, a batched argument: sample ``i`` is ``sources[source][i]``."""

    __slots__ = ("source",)

    def __init__(self, source: int) -> None:
        self.source = source


class Window:
    """Samples ``offset`` onwards of a batched argument, sent inside a chunk: ``window[i]`` is
    sample ``i`` of the batch."""

    __slots__ = ("offset", "values")

    def __init__(self, values: Any, offset: int) -> None:
        self.values, self.offset = values, offset

    def __getitem__(self, i: int) -> Any:
        return _at(self.values, i - self.offset)


class SharedArray:
    """A whole batched array written once to a file in shared memory (tmpfs where the system
    has one, as joblib does for its process pools): a worker maps it instead of receiving its
    samples through a pipe. Mapped copy-on-write, so a function that writes its input writes
    its own pages, as it would a received copy."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def open(self) -> np.ndarray:
        return np.load(self.path, mmap_mode="c")  # type: ignore[no-any-return]


class SharedResult:
    """A result a process pool's worker left in a file in shared memory, for the caller to map
    instead of receiving it pickled through the pipe (four copies fewer)."""

    __slots__ = ("dtype", "offset", "path", "shape")

    def __init__(self, path: str, offset: int, shape: tuple[int, ...], dtype: str) -> None:
        self.path, self.offset, self.shape, self.dtype = path, offset, shape, dtype


class Running:
    """Cancellation that workers on this machine see: a file that exists while the map runs.
    Once it is gone (removed on a failure, or with the map's folder), chunks stop before their
    next sample."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path
        pathlib.Path(path).touch()

    def __reduce__(self) -> tuple[Any, ...]:
        return _running, (self.path,)  # unpickled without touching the file again

    def is_set(self) -> bool:
        return not os.path.exists(self.path)

    def set(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)


def _running(path: str) -> Running:
    running = object.__new__(Running)
    running.path = path
    return running


class Chunk(NamedTuple):
    """Samples ``start`` to ``stop`` of a batch of ``size``: ``fn(*args, **kwargs)`` once per
    sample, with each ``Batch`` in them replaced by that sample."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    start: int
    stop: int
    size: int
    label: str  # names the map in a failing sample's note: "autoconvert.batched(fn)"
    cancelled: Any  # has is_set(): a threading.Event, a Running file; None where none reaches the workers


def run(chunk: Chunk, sources: Sequence[Any]) -> list[Any]:
    """The chunk's results in order, or fewer where the map was cancelled meanwhile; a failing
    sample's exception carries a note naming it."""
    opened = [source.open() if isinstance(source, SharedArray) else source for source in sources]
    fn, args, kwargs, cancelled = chunk.fn, chunk.args, chunk.kwargs, chunk.cancelled
    results = []
    for i in range(chunk.start, chunk.stop):
        if cancelled is not None and cancelled.is_set():
            break
        try:
            results.append(
                fn(*[_sample(a, opened, i) for a in args], **{k: _sample(v, opened, i) for k, v in kwargs.items()})
            )
        except Exception as e:
            e.add_note(f"{chunk.label}: raised by sample {i} of {chunk.size}")
            raise
    return results


def pickled(fn: Callable[..., Any], *args: Any) -> bytes:
    """``fn(*args)`` pickled as one object."""
    return pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL)


def run_sharing(chunk: Chunk, sources: Sequence[Any], folder: str, least: float) -> list[Any]:
    """``run``'s results, with its NumPy array results written to one file in ``folder`` (each
    replaced by a ``SharedResult``) where together they take at least ``least`` bytes."""
    results = run(chunk, sources)
    arrays = [k for k, r in enumerate(results) if type(r) is np.ndarray and r.dtype.kind in "biufc" and r.size]
    if sum(results[k].nbytes for k in arrays) < least:
        return results
    handle, path = tempfile.mkstemp(suffix=".results", dir=folder)
    with os.fdopen(handle, "wb") as file:
        for k in arrays:
            array = results[k] if results[k].flags.c_contiguous else results[k].copy(order="C")  # 0-d stays 0-d
            file.write(bytes(-file.tell() % 64))  # each array aligned as NumPy aligns its own
            results[k] = SharedResult(path, file.tell(), array.shape, array.dtype.str)
            file.write(array.data)
    return results


def mapped(results: list[Any]) -> list[Any]:
    """``results`` with each ``SharedResult`` an array over its file, mapped copy-on-write (so
    writable, as a received array is) and the file removed: its memory lives as long as the
    arrays."""
    files: dict[str, mmap.mmap] = {}
    for k, result in enumerate(results):
        if type(result) is SharedResult:
            if result.path not in files:
                with open(result.path, "rb") as file:
                    files[result.path] = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
                os.remove(result.path)
            count = math.prod(result.shape)
            array = np.frombuffer(files[result.path], result.dtype, count, result.offset)
            results[k] = array.reshape(result.shape)
    return results


def _sample(value: Any, sources: list[Any], i: int) -> Any:
    return _at(sources[value.source], i) if type(value) is Batch else value


def _at(values: Any, i: int) -> Any:
    """Sample ``i``: of an array, a view with one axis fewer (``a[i, ...]``, so a 0-d array, not
    a NumPy scalar, as a 0-d tensor would become); of anything else, ``values[i]``."""
    return values[i, ...] if isinstance(values, np.ndarray) else values[i]
