"""``batched``: run a NumPy function once per sample of a batch, optionally on threads.

Pipelines often call SciPy once per sample in a Python loop (Hungarian matching per
image, distance transforms per volume). ``batched`` is that loop, written once: samples
sliced along dim 0 (never ``.squeeze()``d), results stacked when they agree, threads for
the many SciPy routines that release the GIL.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, overload

import torch

from ._decorators import _Wrapper, accepts_numpy, returns_tensor, to_numpy
from ._options import check_callable
from ._pickling import by_reference


@overload
def batched(
    fn: Callable[..., Any], /, *, workers: int | None = None, executor: Executor | None = None, progress: bool = False
) -> Callable[..., Any]: ...
@overload
def batched(
    *, workers: int | None = None, executor: Executor | None = None, progress: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...
def batched(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    workers: int | None = None,
    executor: Executor | None = None,
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
        fn: a NumPy function, wrapped here as ``returns_tensor(accepts_numpy(fn))``, or a
            function autoconvert already wraps (used as it is).
        workers: run samples on a pool of this many threads (order is kept); ``None``
            runs them one after another. Worthwhile when ``fn`` releases the GIL, as
            many SciPy routines do. Each sample sees the caller's ``config`` and grad mode.
        executor: any ``concurrent.futures.Executor`` to run the samples on instead: a
            ``ProcessPoolExecutor`` for NumPy code that holds the GIL, or Dask's
            ``distributed.Client(...).get_executor()``. Samples are sent as arrays and ``fn``
            (unwrapped) runs on them there, so workers need NumPy, not torch; results come
            back in order, converted on the caller's side to its device. ``fn`` and its
            arguments must pickle (a module-level function).
        progress: show a tqdm progress bar over the samples (tqdm must be installed).

    Raises:
        ValueError: batched arguments of different sizes, or no batched argument.
        Exception: whatever ``fn`` raises, with a note naming the sample (PEP 678).

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> per_row_max = ac.batched(np.max)
        >>> per_row_max(torch.tensor([[1, 5], [7, 2]]))
        tensor([5, 7])
    """
    if fn is None:
        return lambda f: batched(f, workers=workers, executor=executor, progress=progress)
    check_callable(fn, "batched")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ValueError(f"batched(): workers= takes None or a positive number of threads, got {workers!r}")
    if executor is not None and (workers is not None or not isinstance(executor, Executor)):
        raise ValueError(
            f"batched(): executor= takes a concurrent.futures.Executor, without workers=; got {executor!r}"
        )
    call: Callable[..., Any] = fn if isinstance(fn, _Wrapper) else returns_tensor(accepts_numpy(fn))
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    pools: list[ThreadPoolExecutor] = []  # its threads end when this function is collected
    if executor is not None:
        return Batched(_on_executor(fn, call, name, executor, progress), fn, name, None)

    def run(*args: Any, **kwargs: Any) -> Any:
        size = _batch_size(name, args, kwargs)
        grad_mode = torch.is_grad_enabled()

        def sample(i: int) -> Any:
            with torch.set_grad_enabled(grad_mode):  # grad mode is per thread in torch
                try:
                    return call(*[_take(a, i) for a in args], **{k: _take(v, i) for k, v in kwargs.items()})
                except Exception as e:
                    e.add_note(f"autoconvert.batched({name}): raised by sample {i} of {size}")
                    raise

        if workers is None or workers == 1 or size <= 1:
            results = [sample(i) for i in _shown(range(size), progress, name)]
        else:
            if not pools:  # one pool for this batched function, started on first use
                pools.append(ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"batched({name})"))
            # Each sample runs in a copy of the caller's context: config() blocks apply.
            futures = [pools[0].submit(contextvars.copy_context().run, sample, i) for i in range(size)]
            results = [f.result() for f in _shown(futures, progress, name)]
        return _gather(results)

    return Batched(run, fn, name, (workers, progress))


class Batched:
    """What ``batched`` returns: ``fn`` over batches. It pickles (spawn pools, DataLoader
    workers): as the module attribute that holds it (``per_sample_b = batched(per_sample)``),
    else rebuilt from ``fn`` and its options; one on an executor only by reference, since a
    live pool does not pickle."""

    def __init__(self, run: Callable[..., Any], fn: Any, name: str, options: tuple[int | None, bool] | None) -> None:
        self._run = run
        self._options = options
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
        workers, progress = self._options
        return _rebuilt, (self.__wrapped__, workers, progress)


def _rebuilt(fn: Any, workers: int | None, progress: bool) -> Callable[..., Any]:
    return batched(fn, workers=workers, progress=progress)


def _on_executor(fn: Any, call: Any, name: str, executor: Executor, progress: bool) -> Callable[..., Any]:
    """batched on ``executor``: arguments cross as arrays, ``fn`` runs there unwrapped, and each
    result comes back through ``call``'s output side, which places it as the call would."""
    raw = fn.__wrapped__ if isinstance(fn, _Wrapper) else fn
    # The output side alone: given the sample's result and arguments, it votes the device and
    # restores dtypes exactly as the in-process call does.
    place = returns_tensor(**_output_options(call))(_first)

    def run(*args: Any, **kwargs: Any) -> Any:
        size = _batch_size(name, args, kwargs)
        samples = [([_take(a, i) for a in args], {k: _take(v, i) for k, v in kwargs.items()}) for i in range(size)]
        futures = [executor.submit(raw, *to_numpy(a), **to_numpy(k)) for a, k in samples]
        results = []
        for i, future in enumerate(_shown(futures, progress, name)):
            try:
                result = future.result()
            except Exception as e:  # the worker's traceback stays as __cause__ (processes) or in e (Dask)
                e.add_note(f"autoconvert.batched({name}): raised by sample {i} of {size}")
                raise
            a, k = samples[i]
            results.append(place(result, *a, *k.values()))
        return _gather(results)

    return run


def _first(result: Any, *inputs: Any) -> Any:
    return result


def _output_options(call: Any) -> dict[str, Any]:
    """The explicit returns_tensor options of an autoconvert wrapper (none for a plain pair)."""
    plan = getattr(call, "_self_plan", None)
    return dict(plan.sides.get("returns_tensor", {})) if plan is not None else {}


def _shown(items: Any, progress: bool, name: str) -> Any:
    """``items``, under a tqdm progress bar when asked (tqdm imported only then)."""
    if not progress:
        return items
    from tqdm.auto import tqdm  # an optional dependency, imported when asked for

    return tqdm(items, desc=f"batched({name})", total=len(items))


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


def _take(value: Any, i: int) -> Any:
    """Sample ``i`` of a batched argument (``t[i]``: one axis dropped, never squeezed)."""
    return value[i] if _is_batch(value) else value


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
