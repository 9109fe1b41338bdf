"""``batched``: run a NumPy function once per sample of a batch, in the caller or on workers.

Pipelines often call SciPy once per sample in a Python loop (Hungarian matching per
image, distance transforms per volume). ``batched`` is that loop, written once: samples
sliced along dim 0 (never ``.squeeze()``d), results stacked when they agree; threads for
the many SciPy routines that release the GIL, process pools and Dask for code that holds
it (_executors).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, overload

import torch

from autoconvert._calls._options import check_callable, policy_of
from autoconvert._calls._wrapper import _Wrapper
from autoconvert._pickling import by_reference

from ._chunks import Batch, Chunk
from ._chunks import run as run_chunk
from ._decorators import accepts_numpy, returns_tensor
from ._executors import Elsewhere, Progress, Samples, Threads, is_dask, max_workers


@overload
def batched(
    fn: Callable[..., Any],
    /,
    *,
    workers: int | None = None,
    executor: Any = None,
    chunksize: int | None = None,
    progress: bool = False,
) -> Callable[..., Any]: ...
@overload
def batched(
    *, workers: int | None = None, executor: Any = None, chunksize: int | None = None, progress: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...
def batched(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    workers: int | None = None,
    executor: Any = None,
    chunksize: int | None = None,
    progress: bool = False,
) -> Any:
    """Call ``fn`` once per sample and gather the results; bare or as ``@batched(workers=2)``.

    Tensor arguments are batches: along dim 0 (all with the same leading size), or as a
    list or tuple of tensors or a nested tensor (ragged batches, e.g. from ``split``).
    Every other argument reaches each call unchanged. Results stack into one tensor when
    every sample's result is a tensor of the same shape and dtype, else come back as a
    list; tuple, namedtuple and dict results come back as one of those, field by field.
    An empty batch gives an empty list: no sample ran, so no result says what shape or
    dtype a stacked tensor would have.

    Args:
        fn: a NumPy function, wrapped as ``returns_tensor(accepts_numpy(fn))``, or a
            function autoconvert already wraps (used as it is).
        workers: run samples on a pool of this many threads (order is kept); ``None``
            runs them one after another. Worthwhile when ``fn`` releases the GIL, as
            many SciPy routines do. Each sample sees the caller's ``config`` and grad mode.
        executor: run the samples elsewhere instead: a ``ProcessPoolExecutor`` for NumPy
            code that holds the GIL (large batched arrays reach its workers through shared
            memory), a Dask ``distributed.Client`` or its ``get_executor()`` (shared memory
            too where every worker runs on the caller's machine, else each chunk's samples
            scattered to a worker), a ``ThreadPoolExecutor`` (as ``workers=``, on
            its threads), or any other ``concurrent.futures.Executor``. Outside the
            caller's process, ``fn`` (unwrapped) runs on NumPy arrays and each result
            comes back converted on the caller's side to its device; ``fn`` and the other
            arguments must pickle (a process pool's function: defined at a module's top
            level). A pool passed in is reused across calls, never shut down.
        chunksize: samples per task on threads or an executor; by default about four
            tasks per worker (one per Dask worker thread), so that sending tasks costs
            little next to the work.
        progress: show a tqdm progress bar over the samples (tqdm must be installed).

    Raises:
        ValueError: batched arguments of different sizes, or no batched argument; on an
            executor, a function that writes into its arguments (``writeback=True``).
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
    if fn is None:
        return lambda f: batched(f, workers=workers, executor=executor, chunksize=chunksize, progress=progress)
    check_callable(fn, "batched")
    for option, value, unit in (("workers", workers, "threads"), ("chunksize", chunksize, "samples")):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"batched(): {option}= takes None or a positive number of {unit}, got {value!r}")
    if executor is not None and (workers is not None or not (isinstance(executor, Executor) or is_dask(executor))):
        raise ValueError(
            "batched(): executor= takes a concurrent.futures.Executor or a Dask client, without workers=; "
            f"got {executor!r}"
        )
    call: Callable[..., Any] = fn if isinstance(fn, _Wrapper) else returns_tensor(accepts_numpy(fn))
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    label = f"autoconvert.batched({name})"
    runner = _runner(fn, call, workers, executor, name)

    def run(*args: Any, **kwargs: Any) -> Any:
        samples = _samples(name, args, kwargs)
        progress_bar = Progress(progress, samples.size, name)
        try:
            if runner is None or (samples.size <= 1 and isinstance(runner, Threads)):
                results = _in_turn(call, samples, label, progress_bar)
            else:
                results = runner.map(samples, chunksize, progress_bar, label)
        finally:
            progress_bar.close()
        return _gather(results)

    options = None if executor is not None else (workers, chunksize, progress)
    return Batched(run, fn, name, options, runner, call=call)


def _runner(
    fn: Any, call: Callable[..., Any], workers: int | None, executor: Any, name: str
) -> Threads | Elsewhere | None:
    """Where the samples run: in turn in the caller's thread (None), on threads, or elsewhere."""
    if isinstance(executor, ThreadPoolExecutor):
        return Threads(call, max_workers(executor), executor, name)
    if executor is None:
        return Threads(call, workers, None, name) if workers is not None and workers > 1 else None
    inputs = _explicit(call, "accepts_numpy")
    writes = policy_of("accepts_numpy", {}, inputs)
    if writes.writeback or writes.out_params:
        raise ValueError(
            f"autoconvert.batched({name}): {name} writes into its arguments (writeback=True or out_params), "
            "and on an executor it runs in other processes, whose writes cannot reach the caller's tensors. "
            "Fix: run it on threads (workers=), or return what it computes"
        )
    # The output side alone: given the sample's result and arguments, it votes the device and
    # restores dtypes exactly as the in-process call does.
    place = returns_tensor(**_explicit(call, "returns_tensor"))(_first)
    raw = fn.__wrapped__ if isinstance(fn, _Wrapper) else fn
    return Elsewhere(raw, place, inputs, executor, name)


def _in_turn(call: Callable[..., Any], samples: Samples, label: str, progress: Progress) -> list[Any]:
    """The samples one after another in the caller's thread; one at a time under a progress bar."""
    step = 1 if progress.bar is not None else max(1, samples.size)
    results: list[Any] = []
    for start in range(0, samples.size, step):
        chunk = Chunk(
            call, samples.args, samples.kwargs, start, min(start + step, samples.size), samples.size, label, None
        )
        results += run_chunk(chunk, samples.sources)
        progress.advance(chunk.stop - chunk.start)
    return results


class Batched:
    """What ``batched`` returns: ``fn`` over batches. It pickles (spawn pools, DataLoader
    workers): as the module attribute that holds it (``per_sample_b = batched(per_sample)``),
    else rebuilt from ``fn`` and its options; one on an executor only by reference, since a
    live pool does not pickle."""

    def __init__(
        self,
        run: Callable[..., Any],
        fn: Any,
        name: str,
        options: tuple[int | None, int | None, bool] | None,
        runner: Threads | Elsewhere | None,
        *,
        call: Any,
    ) -> None:
        self._run = run
        self._call = call  # what one sample gets: fn itself, or fn as a fused pair
        self._options = options
        self._runner = runner  # where samples run: None (in turn), threads, or elsewhere
        self.__wrapped__ = fn
        self.__name__ = f"batched_{getattr(fn, '__name__', 'fn')}"
        self.__qualname__ = f"batched({name})"
        self.__module__ = getattr(fn, "__module__", None) or __name__
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<autoconvert.batched {self.__wrapped__!r}>"

    def __reduce__(self) -> Any:
        reference = by_reference(self, (self.__module__,))
        if reference is not None:
            return reference
        if self._options is None:
            raise TypeError(
                f"cannot pickle {self.__qualname__}: it runs on an executor, which does not pickle; "
                "assign it to a module-level name to pickle it by reference"
            )
        workers, chunksize, progress = self._options
        return _rebuilt, (self.__wrapped__, workers, chunksize, progress)


def _rebuilt(fn: Any, workers: int | None, chunksize: int | None, progress: bool) -> Callable[..., Any]:
    return batched(fn, workers=workers, chunksize=chunksize, progress=progress)


def _first(result: Any, *inputs: Any) -> Any:
    return result


def _explicit(call: Any, side: str) -> dict[str, Any]:
    """The explicit options of one side of an autoconvert wrapper (none for a plain pair)."""
    plan = getattr(call, "_self_plan", None)
    return dict(plan.sides.get(side, {})) if plan is not None else {}


def _is_batch(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return type(value) in (list, tuple) and bool(value) and all(isinstance(v, torch.Tensor) for v in value)


def _batch_size(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> int:
    sizes = {
        # size(0), not shape[0]: a nested (ragged) tensor has no shape, but a leading size.
        label: (len(v) if not isinstance(v, torch.Tensor) else (v.size(0) if v.dim() else -1))
        for label, v in [*((f"args[{i}]", a) for i, a in enumerate(args)), *kwargs.items()]
        if _is_batch(v)
    }
    if not sizes:
        raise ValueError(
            f"autoconvert.batched({name}): no batched argument; pass tensors batched along dim 0, or lists of tensors"
        )
    if -1 in sizes.values() or len(set(sizes.values())) > 1:
        listing = ", ".join(f"{label}: {'0-d' if n == -1 else n}" for label, n in sizes.items())
        raise ValueError(
            f"autoconvert.batched({name}): batched arguments must share one leading size. Found {listing}. "
            "Fix: pass tensors batched along dim 0 with the same length, or lists of equal length"
        )
    return next(iter(sizes.values()))


def _samples(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Samples:
    """The call's arguments with each batched one a placeholder; sample ``i`` of a batched
    argument is ``value[i]`` (one axis dropped, never squeezed)."""
    size = _batch_size(name, args, kwargs)
    sources: list[Any] = []
    labels: list[str] = []

    def placeholder(value: Any, label: str) -> Any:
        if not _is_batch(value):
            return value
        sources.append(value)
        labels.append(label)
        return Batch(len(sources) - 1)

    return Samples(
        tuple(placeholder(a, f"args[{i}]") for i, a in enumerate(args)),
        {k: placeholder(v, k) for k, v in kwargs.items()},
        sources,
        labels,
        size,
    )


def _gather(results: list[Any]) -> Any:
    """The samples' results as one: stacked, or field by field where every sample returned a
    tuple, a namedtuple or a struct sequence (``torch.return_types``) of one length, or a
    dict with the same keys. A type with more than its fields (SciPy's result bunches keep
    the sample's data for their methods) stays a list: one sample's state would speak for all."""
    if not results:
        return results
    first, kind = results[0], type(results[0])
    if kind is dict and all(type(r) is dict and list(r) == list(first) for r in results):
        return {key: _stack([r[key] for r in results]) for key in first}
    rebuild = _rebuilder(kind)
    if rebuild is not None and all(type(r) is kind and len(r) == len(first) for r in results):
        return rebuild([_stack(list(column)) for column in zip(*results, strict=True)])
    return _stack(results)


def _rebuilder(kind: type) -> Callable[[list[Any]], Any] | None:
    """How to rebuild a tuple type from its fields: ``tuple`` itself, a namedtuple's ``_make``,
    a struct sequence's constructor; None for anything else, such as a tuple with more state
    than its fields."""
    if kind is tuple:
        return tuple
    if not issubclass(kind, tuple):
        return None
    if hasattr(kind, "n_sequence_fields"):
        return kind
    if hasattr(kind, "_make") and hasattr(kind, "_fields") and getattr(kind, "__dictoffset__", 0) == 0:
        return kind._make  # type: ignore[no-any-return]
    return None


def _stack(values: list[Any]) -> Any:
    first = values[0] if values else None
    if isinstance(first, torch.Tensor) and all(
        isinstance(v, torch.Tensor) and v.shape == first.shape and v.dtype == first.dtype and v.device == first.device
        for v in values
    ):
        return torch.stack(values)
    return values
