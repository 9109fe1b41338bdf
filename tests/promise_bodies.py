"""The NumPy bodies the promise matrix runs through every product, route and runner.

Module level, so that process pools and Dask workers receive them by reference, and
annotated, so that ``adapt`` reads them as NumPy functions. Each works on a batch ``(n, k)``
and on one of its samples ``(k,)`` alike, so a batched site gives what a plain one gives."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
from numpy.typing import NDArray


def doubled_sum(a: NDArray[Any]) -> NDArray[Any]:
    """A value of the sample (or each row of the batch), into a new array."""
    return (a * 2).sum(-1)


def writes_first(a: NDArray[Any]) -> NDArray[Any]:
    """Writes into its argument, then reads it back."""
    a[..., 0] = 99.0
    return a.sum(-1)


def halved(a: NDArray[Any]) -> NDArray[Any]:
    """Keeps its argument's dtype: NumPy sees float32 for bfloat16."""
    assert a.dtype == np.float32, a.dtype
    return a / 2


def ranks(a: NDArray[Any]) -> NDArray[Any]:
    """int32 indices, as SciPy returns them."""
    return np.argsort(a, axis=-1).astype(np.int32)


def masked(a: NDArray[Any]) -> NDArray[Any]:
    """A masked result, whose mask a tensor cannot hold."""
    return np.ma.masked_array(a, mask=a > 2)


def logs_calls(a: NDArray[Any], log: dict[str, Any]) -> NDArray[Any]:
    """Records each call in a plain container it is handed."""
    log.setdefault("seen", []).append(float(a.sum()))
    return a.sum(-1)


def appends_an_array(a: NDArray[Any], out: list[Any]) -> NDArray[Any]:
    """Appends a new array to a list it is handed, which held no tensors."""
    out.append(a.sum(-1) * 2)
    return a.sum(-1)


def appends_to_a_bare_list(a: NDArray[Any], out: list) -> NDArray[Any]:  # type: ignore[type-arg]  # bare on purpose
    """As ``appends_an_array``, its list annotated bare (``adapt`` hands it as it is)."""
    out.append(a.sum(-1) * 2)
    return a.sum(-1)


def appends_to_an_unannotated_list(a: NDArray[Any], out) -> NDArray[Any]:  # type: ignore[no-untyped-def]  # on purpose
    """As ``appends_an_array``, its list unannotated (``adapt`` hands it as it is)."""
    out.append(a.sum(-1) * 2)
    return a.sum(-1)


def notes_in_a_set(a: NDArray[Any], seen: set[float]) -> NDArray[Any]:
    """Records each call in a set it is handed, a mutable builtin no container walk converts."""
    seen.add(float(a.sum()))
    return a.sum(-1)


def adds_a_key(d: dict[str, NDArray[Any]]) -> NDArray[Any]:
    """Adds an array to the container of arrays it is handed."""
    d["new"] = d["a"] * 2
    return d["a"].sum(-1)


@dataclasses.dataclass
class Fit:
    """A fitted result with a method of its own, computing from its public field."""

    w: NDArray[Any]

    def predict(self, x: NDArray[Any]) -> NDArray[Any]:
        return np.asarray(x @ self.w)


def fitted(a: NDArray[Any]) -> Fit:
    """A result container with a method: the weights are the sums of ``a``'s rows."""
    return Fit(a.sum(-1))


class Counter:
    """An object a body counts its calls on, with caches it fills as it is read."""

    def __init__(self) -> None:
        self.calls = 0
        self._memo: dict[float, float] = {}

    @functools.cached_property
    def scale(self) -> float:
        return 2.0


def counts_on(a: NDArray[Any], counter: Counter) -> NDArray[Any]:
    """Counts each call on an object it is handed."""
    counter.calls += 1
    return a.sum(-1)


def reads_through_caches(a: NDArray[Any], cache: Counter) -> NDArray[Any]:
    """Only fills an object's caches: a cached_property, a memo dict, an attribute built lazily."""
    cache._memo.setdefault(float(a.sum()), float(a.sum()) * cache.scale)
    if not hasattr(cache, "built"):
        cache.built = True
    return a.sum(-1) * cache.scale


class Holder:
    """An object whose method runs a body: torchify's route for objects and their methods."""

    def __init__(self, body: Any) -> None:
        self.body = body

    def run(self, *args: Any) -> Any:
        return self.body(*args)
