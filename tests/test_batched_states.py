"""A batched function's changes to an object among its arguments, made on a worker's copy: refused
naming what changed, while a cache filling is never refused. A chunk pickled and run in this
process is what a Dask worker in the caller's process runs (the slow promise matrix runs the
same on every executor)."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autoconvert._batched._chunks import Batch, Chunk, run


class Model:
    """An object argument with every kind of state: a counter, an array, a memo, a torch module."""

    def __init__(self) -> None:
        self.count = 0
        self.weights = np.zeros(2)
        self.memo = {"seen": 1}
        self.norm = torch.nn.BatchNorm1d(2)
        self.lazy: np.ndarray | None = None

    @functools.cached_property
    def scale(self) -> float:
        return 2.0


#: Each change a function may make, and the path autoconvert's refusal names (None: a cache filling).
CHANGES: dict[str, tuple[Callable[[Model], Any], str | None]] = {
    "a counter": (lambda m: setattr(m, "count", getattr(m, "count", 0) + 1), "model.count"),
    "an array written in place": (lambda m: m.weights.__setitem__(0, 1.0), "model.weights"),
    "a memo's entry changed": (lambda m: m.memo.__setitem__("seen", 2), "model.memo['seen']"),
    "an attribute deleted": (lambda m: delattr(m, "count"), "model.count"),
    "a buffer written in place": (lambda m: m.norm.running_mean.add_(1.0), "model.norm.running_mean"),
    "a buffer replaced": (lambda m: setattr(m.norm, "running_var", torch.zeros(2)), "model.norm.running_var"),
    "a parameter written in place": (lambda m: m.norm.weight.data.mul_(2.0), "model.norm.weight"),
    "a memo's new key": (lambda m: m.memo.__setitem__("new", 3), None),
    "a cached_property read": (lambda m: m.scale, None),
    "an attribute built on first use": (lambda m: setattr(m, "index", np.arange(3)), None),
    "an attribute None until first use": (lambda m: setattr(m, "lazy", np.arange(2)), None),
}


def changing(a: np.ndarray, model: Model, changes: tuple[str, ...]) -> np.ndarray:
    """Makes ``changes`` to ``model``, once per sample."""
    for name in changes:
        if name != "an attribute deleted" or hasattr(model, "count"):
            CHANGES[name][0](model)
    return a * 2


def _on_a_copy(model: Model, changes: tuple[str, ...]) -> list[Any]:
    chunk = Chunk(changing, (Batch(0), model, changes), {}, 0, 2, 2, "autoconvert.batched(changing)", None)
    return run(pickle.loads(pickle.dumps(chunk)), [np.ones((2, 3))])


# torch 2.4 and 2.5 load a pickled tensor's storage through torch.load, which warns of its
# weights_only default; later versions do not.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning")
@given(changes=st.lists(st.sampled_from(sorted(CHANGES)), unique=True, max_size=4).map(tuple))
def test_a_change_is_refused_naming_it_and_a_cache_filling_never_is(changes: tuple[str, ...]) -> None:
    """Whatever the function changes of what the object held is refused, naming the attribute
    (a module's buffers and parameters as they are read, ``model.norm.running_mean``); what it
    only adds (a memo's key, a cached_property, a new attribute) passes, with the results."""
    refused = {path for name in changes if (path := CHANGES[name][1]) is not None}
    model = Model()
    if not refused:
        assert all(np.array_equal(r, np.full(3, 2.0)) for r in _on_a_copy(model, changes))
        return
    with pytest.raises(ValueError) as info:
        _on_a_copy(model, changes)
    message = str(info.value)
    named = message.removeprefix("autoconvert.batched(changing): the function changed ").partition(",")[0]
    assert named in refused, message
    assert message == (
        f"autoconvert.batched(changing): the function changed {named}, in argument model, on a worker in the "
        "caller's process, which holds a copy of model: the change cannot reach the caller's object, as it does "
        "where the samples run sequentially or on threads. Fix: return what the function computes, or run it "
        "sequentially (no executor) or on threads (workers=)"
    )


def test_the_callers_own_chunk_is_never_compared() -> None:
    """In the caller's process, sequentially or on threads, the object is the caller's: its
    change is the caller's, not refused."""
    model = Model()
    chunk = Chunk(changing, (Batch(0), model, ("a counter",)), {}, 0, 2, 2, "autoconvert.batched(changing)", None)
    run(chunk, [np.ones((2, 3))])
    assert model.count == 2


def nearest(a: np.ndarray, index: Any) -> np.ndarray:
    """A lookup in a fitted index, whose compiled tree counts its queries as it is read."""
    return index.kneighbors(a[None, :2], return_distance=False)[0]


def test_an_index_counting_its_queries_is_never_refused() -> None:
    """A fitted scikit-learn NearestNeighbors only read: its KDTree's own counters (state it
    keeps to itself, no dict) change as it answers, and the call is never refused."""
    neighbors = pytest.importorskip("sklearn.neighbors")
    index = neighbors.NearestNeighbors(n_neighbors=1, algorithm="kd_tree").fit(np.eye(2))
    chunk = Chunk(nearest, (Batch(0), index), {}, 0, 2, 2, "autoconvert.batched(nearest)", None)
    assert [r.tolist() for r in run(pickle.loads(pickle.dumps(chunk)), [np.eye(2, 3)])] == [[0], [1]]
