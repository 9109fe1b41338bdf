"""``batched``: run a NumPy function once per sample of a batch, optionally on threads.

7 of 16 pipelines we studied call SciPy once per sample in a Python loop (Hungarian
matching per image, distance transforms per volume). ``batched`` is that loop, written
once: samples sliced along dim 0 (never ``.squeeze()``d), results stacked when they
agree, threads for the many SciPy routines that release the GIL.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, overload

import torch

from ._decorators import _Wrapper, accepts_numpy, returns_tensor


@overload
def batched(fn: Callable[..., Any], /, *, workers: int | None = None) -> Callable[..., Any]: ...
@overload
def batched(*, workers: int | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...
def batched(fn: Callable[..., Any] | None = None, /, *, workers: int | None = None) -> Any:
    """Call ``fn`` once per sample and gather the results; bare or as ``@batched(workers=2)``.

    Tensor arguments are batches: along dim 0 (all with the same leading size), or as a
    list or tuple of tensors (ragged batches, e.g. from ``split``). Every other argument
    reaches each call unchanged. Results stack into one tensor when every sample's result
    is a tensor of the same shape and dtype, else come back as a list; tuple results
    come back as a tuple of those.

    Args:
        fn: a NumPy function, wrapped here as ``returns_tensor(accepts_numpy(fn))``, or a
            function autoconvert already wraps (used as it is).
        workers: run samples on a pool of this many threads (order is kept); ``None``
            runs them one after another. Worthwhile when ``fn`` releases the GIL, as
            many SciPy routines do. Each sample sees the caller's ``config`` and grad mode.

    Raises:
        ValueError: batched arguments of different sizes, or no batched argument.
        Whatever ``fn`` raises, with a note naming the sample (PEP 678).

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> per_row_max = ac.batched(np.max)
        >>> per_row_max(torch.tensor([[1, 5], [7, 2]]))
        tensor([5, 7])
    """
    if fn is None:
        return lambda f: batched(f, workers=workers)
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ValueError(f"batched(): workers= takes None or a positive number of threads, got {workers!r}")
    call: Callable[..., Any] = fn if isinstance(fn, _Wrapper) else returns_tensor(accepts_numpy(fn))
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    pools: list[ThreadPoolExecutor] = []  # its threads end when this function is collected

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
            results = [sample(i) for i in range(size)]
        else:
            if not pools:  # one pool for this batched function, started on first use
                pools.append(ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"batched({name})"))
            # Each sample runs in a copy of the caller's context: config() blocks apply.
            futures = [pools[0].submit(contextvars.copy_context().run, sample, i) for i in range(size)]
            results = [f.result() for f in futures]
        return _gather(results)

    run.__name__ = f"batched_{getattr(fn, '__name__', 'fn')}"
    run.__qualname__ = f"batched({name})"
    run.__doc__ = getattr(fn, "__doc__", None)
    return run


def _is_batch(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return type(value) in (list, tuple) and bool(value) and all(isinstance(v, torch.Tensor) for v in value)


def _batch_size(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> int:
    sizes = {
        label: (len(v) if not isinstance(v, torch.Tensor) else (v.shape[0] if v.dim() else -1))
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
    if results and all(type(r) is tuple for r in results) and len({len(r) for r in results}) == 1:
        return tuple(_stack(list(column)) for column in zip(*results, strict=True))
    return _stack(results)


def _stack(values: list[Any]) -> Any:
    first = values[0] if values else None
    if isinstance(first, torch.Tensor) and all(
        isinstance(v, torch.Tensor) and v.shape == first.shape and v.dtype == first.dtype and v.device == first.device
        for v in values
    ):
        return torch.stack(values)
    return values
