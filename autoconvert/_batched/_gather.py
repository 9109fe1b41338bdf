"""How ``batched`` gathers its samples' results into one, before the call converts it once.

The hand-written loop gathers with ``np.stack``; ``batched`` gathers the same array, and the
call's output side then converts one array (one tensor made, one transfer to the caller's device) rather
than one per sample. Tuples, namedtuples, struct sequences and dicts gather field by field.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

#: NumPy dtype kinds that stack: bool, integers, floats, complex. Others (strings, objects,
#: datetimes) stay a list, each item converted as the call would convert it alone.
_STACKED = frozenset("biufc")
_DTYPE = operator.attrgetter("dtype")
_SHAPE = operator.attrgetter("shape")


def gather(results: list[Any]) -> Any:
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
    """One array of arrays and NumPy scalars of one numeric dtype and shape, as ``np.stack``
    gives (the call converts it once); one tensor of tensors alike; anything else stays a
    list, converted item by item. Built with ``np.array``, which for many small results is
    several times faster than ``np.stack`` (benchmarks/RESULTS.md, "tiny samples")."""
    kinds = set(map(type, values))
    if all(kind is np.ndarray or issubclass(kind, np.generic) for kind in kinds):
        if len(kinds) == 1 and np.ndarray not in kinds:  # one scalar type: its dtype, shape ()
            dtypes: set[np.dtype[Any]] = {np.dtype(next(iter(kinds)))}
        elif len(set(map(_SHAPE, values))) == 1:
            dtypes = set(map(_DTYPE, values))
        else:
            return values
        dtype = next(iter(dtypes))
        return np.array(values, dtype=dtype) if len(dtypes) == 1 and dtype.kind in _STACKED else values
    first = values[0]
    if isinstance(first, torch.Tensor) and all(
        isinstance(v, torch.Tensor) and v.shape == first.shape and v.dtype == first.dtype and v.device == first.device
        for v in values
    ):
        return torch.stack(values)
    return values


#: In a map's results, a sample whose result a ``Sink`` holds.
PLACED = object()


class Sink:
    """Array results written into one array as threads produce them, so that the stacking copy
    runs on the workers, in parallel and while each result is in cache, instead of after the
    map in the caller's thread. The first array result sets the shape and dtype; a result of
    another kind (or none at all) ends the sink's part, and the map's results gather as usual."""

    __slots__ = ("done", "lock", "out", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.out: NDArray[Any] | None = None
        self.done = False  # no more results are placed
        self.lock = threading.Lock()

    def put(self, i: int, result: Any) -> Any:
        """``PLACED`` where ``result`` is now ``out[i]``, else ``result`` itself."""
        if self.done:
            return result
        out = self.out
        if out is None:
            with self.lock:
                if self.out is None and not self.done:
                    if type(result) is np.ndarray and result.dtype.kind in _STACKED:
                        self.out = np.empty((self.size, *result.shape), result.dtype)
                    else:
                        self.done = True
                out = self.out
        if out is None or type(result) is not np.ndarray or result.shape != out.shape[1:] or result.dtype != out.dtype:
            self.done = True
            return result
        out[i] = result
        return PLACED

    def gathered(self, results: list[Any]) -> Any:
        """The map's result: ``out`` where every sample's result is in it (those that ran in the
        caller's thread are put there now), else ``results`` with each placed result a view of
        ``out`` again, to gather as usual."""
        if all(r is not PLACED for r in results):
            return gather(results)
        results = [r if r is PLACED else self.put(i, r) for i, r in enumerate(results)]
        out = self.out
        assert out is not None  # a result was placed
        if not self.done:
            return out
        return gather([out[i] if r is PLACED else r for i, r in enumerate(results)])
