"""A batched function's changes to an object among its arguments, made on a worker's copy: refused
naming what changed, while a cache filling is never refused. A chunk pickled and run in this
process is what a Dask worker in the caller's process runs; one sent as from a caller in
another process, what Dask's worker processes run (the slow promise matrix runs the same on
every executor)."""

from __future__ import annotations

import builtins
import collections
import collections.abc
import ctypes
import datetime
import decimal
import enum
import functools
import importlib
import itertools
import logging
import os
import pathlib
import pickle
import random
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autoconvert._batched._chunks import Batch, Chunk, Origin, dumps, run, run_sent, sent
from autoconvert._batched._seeds import Seeds
from autoconvert._batched._states import users_file
from autoconvert._errors import GetAttrKey


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


def _script_function(source: str, **globals_: Any) -> Callable[..., Any]:
    """A function a script defines (module ``__main__``), over its own globals: sent by value,
    its globals with it, as Dask and Ray send a script's functions."""
    namespace: dict[str, Any] = {"__name__": "__main__", "np": np, **globals_}
    exec(source, namespace)
    return namespace["f"]  # type: ignore[no-any-return]


def _by_value_here(fn: Callable[..., Any]) -> list[Any]:
    """``fn``'s chunk sent by value and run in this process, as on a Dask worker in the caller's."""
    chunk = Chunk(fn, (Batch(0),), {}, 0, 2, 2, "autoconvert.batched(f)", None)
    return run(pickle.loads(dumps(chunk, by_value=True)), [np.ones((2, 3))])


def _by_value_elsewhere(fn: Callable[..., Any]) -> list[Any]:
    """``fn``'s chunk sent by value as a caller in another process (this one's parent) sends it,
    and run here, as on Dask's worker processes: what the function reads is compared."""
    chunk = Chunk(
        fn, (Batch(0),), {}, 0, 2, 2, "autoconvert.batched(f)", None, origin=Origin(True, caller=os.getppid())
    )
    return run(pickle.loads(dumps(chunk, by_value=True)), [np.ones((2, 3))])


#: A script's function changing its globals, and the refusal (None: a cache filling, never refused).
GLOBAL_CHANGES: dict[str, tuple[str, str | None]] = {
    "an array written": (
        "def f(a):\n    counts[0] += 1\n    return a",
        "the function wrote into global counts of module __main__, an array, on a worker in another process, "
        "which holds a copy of it: the write cannot reach the caller's array",
    ),
    "a list appended to": (
        "def f(a):\n    log.append(1)\n    return a",
        "the function changed global log of module __main__, on a worker in another process, which holds a copy "
        "of log: the change cannot reach the caller's log",
    ),
    "a number bound anew": (
        "def f(a):\n    global n\n    n += 1\n    return a",
        "the function changed global n of module __main__, on a worker in another process, which holds a copy "
        "of n: the change cannot reach the caller's n",
    ),
    "an object's attribute, through a helper": (
        "def f(a):\n    return helper(a)\ndef helper(a):\n    model.count += 1\n    return a",
        "the function changed model.count, in global model of module __main__, on a worker in another process, "
        "which holds a copy of model: the change cannot reach the caller's model",
    ),
    "its only data bound to a function": (
        "def f(a):\n    global log\n    log = print\n    return a",
        "the function changed global log of module __main__, on a worker in another process, which holds a "
        "copy of log: the change cannot reach the caller's log",
    ),
    "a function's attribute": (
        "def helper():\n    helper.calls += 1\nhelper.calls = 0\ndef f(a):\n    helper()\n    return a",
        "the function changed helper.calls, in global helper of module __main__, on a worker in another "
        "process, which holds a copy of helper: the change cannot reach the caller's helper",
    ),
    "a defaultdict's new key (it counts)": (
        "def f(a):\n    tally['k'] += 1\n    return a",
        "the function changed global tally of module __main__, on a worker in another process, which holds a "
        "copy of tally: the change cannot reach the caller's tally",
    ),
    "a deque appended to": (
        "def f(a):\n    recent.append(1)\n    return a",
        "the function changed global recent of module __main__, on a worker in another process, which holds a "
        "copy of recent: the change cannot reach the caller's recent",
    ),
    "a masked array written": (
        "def f(a):\n    masked[0] += 1\n    return a",
        "the function wrote into global masked of module __main__, an array, on a worker in another process, "
        "which holds a copy of it: the write cannot reach the caller's array",
    ),
    "a global partial's bound list": (
        "def f(a):\n    return remember(a)\n",
        "the function changed remember.keywords['log'], in global remember of module __main__, on a worker in "
        "another process, which holds a copy of remember: the change cannot reach the caller's remember",
    ),
    "a decorator's count, bound anew": (
        "def counting(g):\n    calls = 0\n    def wrapper(a):\n        nonlocal calls\n        calls += 1\n"
        "        return g(a)\n    return wrapper\n"
        "f = counting(lambda a: a)",
        "the function changed f.calls, in global f of module __main__, on a worker in another process, which holds "
        "a copy of f: the change cannot reach the caller's f",
    ),
    "a decorator's memo's new key": (
        "def memoised(g):\n    memo = {}\n    def wrapper(a):\n        memo[float(a.sum())] = 1\n"
        "        return g(a)\n    return wrapper\n"
        "f = memoised(lambda a: a)",
        None,
    ),
    "a logger only used": ("def f(a):\n    logger.debug('seen %s', a)\n    return a", None),
    "a parameter's default list": (
        "def f(a, seen=[]):\n    seen.append(1)\n    return a",
        "the function changed f.seen, in global f of module __main__, on a worker in another process, which holds "
        "a copy of f: the change cannot reach the caller's f",
    ),
    "a handler in a table": (
        "def count(a):\n    log.append(1)\nhandlers = {'count': count}\n"
        "def f(a):\n    handlers['count'](a)\n    return a",
        "the function changed global log of module __main__, on a worker in another process, which holds a "
        "copy of log: the change cannot reach the caller's log",
    ),
    "a count over a class default": (
        "class Counted:\n    calls = 0\n    def step(self):\n        self.calls += 1\ncounted = Counted()\n"
        "def f(a):\n    counted.step()\n    return a",
        "the function changed counted.calls, in global counted of module __main__, on a worker in another "
        "process, which holds a copy of counted: the change cannot reach the caller's counted",
    ),
    "one list at two places, only read": (
        "class Two:\n    def __init__(self):\n        self.a = [1, 2]\n        self.b = [self.a, self.a]\n"
        "two = Two()\ndef f(a):\n    return a * len(two.b)",
        None,
    ),
    "a bound method's object, counting": (
        "class Keeper:\n    def __init__(self):\n        self.n = 0\n    def bump(self):\n        self.n += 1\n"
        "bump = Keeper().bump\ndef f(a):\n    bump()\n    return a",
        "the function changed bump.__self__.n, in global bump of module __main__, on a worker in another "
        "process, which holds a copy of bump: the change cannot reach the caller's bump",
    ),
    "a captured closure's count": (
        "def counter():\n    n = 0\n    def bump():\n        nonlocal n\n        n += 1\n    return bump\n"
        "def calling(inner):\n    def outer():\n        inner()\n    return outer\n"
        "count = calling(counter())\ndef f(a):\n    count()\n    return a",
        "the function changed count.inner.n, in global count of module __main__, on a worker in another "
        "process, which holds a copy of count: the change cannot reach the caller's count",
    ),
    "a captured closure only called": (
        "def make():\n    k = [2]\n    def inner():\n        return k[0]\n    def outer():\n        return inner()\n"
        "    return outer\nget = make()\ndef f(a):\n    return a * get()",
        None,
    ),
    "a bound method only called": (
        "class Keeper:\n    def __init__(self):\n        self.k = 2\n    def get(self):\n        return self.k\n"
        "get = Keeper().get\ndef f(a):\n    return a * get()",
        None,
    ),
    "a class statement's body reading a global": (
        "def f(a):\n    class Scaled:\n        by = scale\n    return a * Scaled.by",
        None,
    ),
    "an identity memo set anew (scikit-learn's _stop_words_id)": (
        "class Vectorizer:\n    def __init__(self):\n        self.words = ['a']\n        self.words_id = id(self.words)\n"
        "    def check(self):\n        if self.words_id != id(self.words):\n            self.words_id = id(self.words)\n"
        "vectorizer = Vectorizer()\ndef f(a):\n    vectorizer.check()\n    return a",
        None,
    ),
    "a write through a memoryview": (
        "def f(a):\n    view[0] = 1\n    return a",
        "the function changed global view of module __main__, on a worker in another process, which holds a "
        "copy of view: the change cannot reach the caller's view",
    ),
    "a count its class's own __getstate__ leaves out": (
        "class Kept:\n    def __init__(self):\n        self.calls, self.w = 0, 1\n"
        "    def __getstate__(self):\n        return {'w': self.w}\n"
        "    def __setstate__(self, state):\n        self.__dict__.update(state, calls=0)\n"
        "kept = Kept()\ndef f(a):\n    kept.calls += 1\n    return a",
        "the function changed kept.calls, in global kept of module __main__, on a worker in another process, "
        "which holds a copy of kept: the change cannot reach the caller's kept",
    ),
    "a count its class pickles as a tuple": (
        "class Counted:\n    def __init__(self):\n        self.n = 0\n"
        "    def __getstate__(self):\n        return (self.n,)\n"
        "    def __setstate__(self, state):\n        (self.n,) = state\n"
        "tally_kept = Counted()\ndef f(a):\n    tally_kept.n += 1\n    return a",
        "the function changed tally_kept.n, in global tally_kept of module __main__, on a worker in another "
        "process, which holds a copy of tally_kept: the change cannot reach the caller's tally_kept",
    ),
    "a config making up its attributes, only read": (
        "class Settings:\n    def __init__(self):\n        self.values = {'scale': 2.0}\n"
        "    def __getattr__(self, name):\n        if name.startswith('__'):\n            raise AttributeError(name)\n"
        "        return self.values[name]\nsettings = Settings()\ndef f(a):\n    return a * settings.scale",
        None,
    ),
    "an inherited method held bound, counting": (
        "class Base:\n    def __init__(self):\n        self.n = 0\n    def bump(self):\n        self.n += 1\n"
        "class Keeper(Base):\n    pass\nbump = Keeper().bump\ndef f(a):\n    bump()\n    return a",
        "the function changed bump.__self__.n, in global bump of module __main__, on a worker in another "
        "process, which holds a copy of bump: the change cannot reach the caller's bump",
    ),
    "a class statement's body reading a name it binds": (
        "import threading\nlock = threading.Lock()\n"
        "def f(a):\n    class Bag:\n        lock = 1\n        twice = lock * 2\n    return a * Bag.twice",
        None,
    ),
    "a stream only read": ("import io\nout = io.StringIO('x')\ndef f(a):\n    return a * len(out.getvalue())", None),
    "a config read through attributes": ("def f(a):\n    return a * config.scale", None),
    "a memo's new key": ("def f(a):\n    memo[a.sum()] = 1\n    return a", None),
    "a lazy import": ("def f(a):\n    global lazy\n    import math as lazy\n    return a", None),
    "a global None until first use": (
        "def f(a):\n    global lazy\n    lazy = np.arange(3) if lazy is None else lazy\n    return a",
        None,
    ),
    "a counter keyed by functions, only read": ("def f(a):\n    for fn in ranked:\n        fn\n    return a", None),
    "a global only read": ("def f(a):\n    return a * counts[0] + len(log) + n", None),
}


#: A script's function changing what a class of its script holds, and what that leaves in the
#: caller's namespace: in the caller's process the class is the caller's own (see _chunks).
CLASS_CHANGES: dict[str, tuple[str, str]] = {
    "a class attribute, through a static method": (
        "class Stat:\n    count = 0\n    @staticmethod\n    def bump():\n        Stat.count += 1\n"
        "def f(a):\n    Stat.bump()\n    return a",
        "Stat.count == 2",
    ),
    "an object's method": (
        "class Keeper:\n    def keep(self, a):\n        log.append(1)\nkeeper = Keeper()\n"
        "def f(a):\n    keeper.keep(a)\n    return a",
        "log == [1, 1]",
    ),
    "a class's count, through a property": (
        "class Probe:\n    n = 0\n    @property\n    def v(self):\n        type(self).n += 1\n        return 1\n"
        "probe = Probe()\ndef f(a):\n    return a * probe.v",
        "Probe.n == 2",
    ),
    "a nested class's count": (
        "class Outer:\n    class Inner:\n        n = 0\ndef f(a):\n    Outer.Inner.n += 1\n    return a",
        "Outer.Inner.n == 2",
    ),
    "a base class's count, through super()": (
        "class Base:\n    total = 0\n    def step(self):\n        Base.total += 1\n"
        "class Child(Base):\n    def step(self):\n        super().step()\n"
        "child = Child()\ndef f(a):\n    child.step()\n    return a",
        "Base.total == 2",
    ),
}


@pytest.mark.parametrize("change", CLASS_CHANGES)
def test_a_change_a_scripts_class_makes_in_the_callers_process_is_the_callers(change: str) -> None:
    """A class of a script sent by value, unpickled in the caller's process (a Dask worker
    there), is the caller's own class: what its code changes (its attributes, the globals its
    methods change) is the caller's, as sequentially."""
    source, check = CLASS_CHANGES[change]
    fn = _script_function(source, log=[])
    assert len(_by_value_here(fn)) == 2
    assert eval(check, fn.__globals__), check


#: What a script's function changes of its globals, checked in the caller's namespace after two samples.
REACHED = {"an array written": "counts[0] == 2", "a list appended to": "log == [1, 1]", "a number bound anew": "n == 2"}


@pytest.mark.parametrize("change", GLOBAL_CHANGES)
def test_a_function_sent_by_value_to_the_callers_process_is_the_callers(change: str) -> None:
    """A script's function sent by value, unpickled in the caller's process (a Dask worker
    there), is the caller's own function, as its classes are: it reads and changes the caller's
    globals, as on threads, and nothing it does is refused as a change to a copy."""
    source, _ = GLOBAL_CHANGES[change]
    fn = _script_function(source, **_globals_read())
    assert len(_by_value_here(fn)) == 2
    if change in REACHED:
        assert eval(REACHED[change], fn.__globals__), REACHED[change]


@pytest.mark.parametrize("change", GLOBAL_CHANGES)
def test_a_change_to_a_global_a_function_sent_by_value_reads_is_refused_naming_it(change: str) -> None:
    """A script's function sent by value to another process carries copies of the globals it
    names (through a helper of its script too): a change to one is refused naming it, a cache
    filling or a read never is."""
    source, refusal = GLOBAL_CHANGES[change]
    fn = _script_function(source, **({"log": []} if "log = print" in source else _globals_read()))
    if refusal is None:
        assert len(_by_value_elsewhere(fn)) == 2
        return
    with pytest.raises(ValueError) as info:
        _by_value_elsewhere(fn)
    assert str(info.value) == (
        f"autoconvert.batched(f): {refusal}, as it does where the samples run sequentially or on threads. Fix: "
        "return what the function computes, or run it sequentially (no executor) or on threads (workers=)"
    )


def _globals_read() -> dict[str, Any]:
    return {
        "counts": np.zeros(1),
        "log": [],
        "n": 0,
        "model": Model(),
        "memo": {},
        "lazy": None,
        "tally": collections.defaultdict(int),
        "recent": collections.deque(),
        "masked": np.ma.masked_array(np.zeros(2), [False, True]),
        "remember": functools.partial(_remembered, log=[]),
        "logger": logging.getLogger("autoconvert.tests.batched_states"),
        "config": AttrDict(scale=2.0),
        "scale": 2.0,
        "view": memoryview(bytearray(2)),
        "ranked": collections.Counter({_remembered: 1}),
    }


def test_a_weak_set_sent_by_value_keeps_its_items() -> None:
    """A script's global ``WeakSet`` sent by value holds its items as the caller's does, though
    nothing else sent holds them: a read of it gives what it gives sequentially."""
    source = (
        "import weakref\nclass Item:\n    pass\nkept = [Item(), Item()]\nregistry = weakref.WeakSet(kept)\n"
        "def f(a):\n    return a * len(registry)"
    )
    assert [r.tolist() for r in _by_value_elsewhere(_script_function(source))] == [[2.0] * 3] * 2


class AttrDict(dict):  # type: ignore[type-arg]
    """A config whose keys read as attributes: an unknown one raises KeyError, not AttributeError."""

    __getattr__ = dict.__getitem__


class Forwarding:
    """A callable proxy whose every unknown attribute is a new proxy (an RPC stub): it wraps nothing."""

    def __getattr__(self, name: str) -> Forwarding:
        return Forwarding()

    def __call__(self, a: np.ndarray) -> np.ndarray:
        return a


def test_a_callable_whose_attributes_are_made_up_is_no_wrapper() -> None:
    """``__wrapped__`` is looked up as it is set (``functools.wraps``, a slot), not through a
    ``__getattr__`` that makes up every attribute: such a callable runs, its state compared."""
    chunk = Chunk(Forwarding(), (Batch(0),), {}, 0, 2, 2, "autoconvert.batched(f)", None)
    assert len(run(pickle.loads(pickle.dumps(chunk)), [np.ones((2, 3))])) == 2


def _remembered(a: np.ndarray, log: list[float]) -> np.ndarray:
    log.append(float(a.sum()))
    return a


class Log(list):  # type: ignore[type-arg]
    """A log kept as a list subclass, which its method appends to."""

    def add(self, a: np.ndarray) -> np.ndarray:
        self.append(float(a.sum()))
        return a


@pytest.mark.parametrize("kind", ["a list's builtin method", "a list subclass's method"])
def test_a_change_to_the_data_a_method_is_bound_to_is_refused(kind: str) -> None:
    """``batched(log.append)``: the list a builtin method is bound to is compared as a bound
    method's object is, a list subclass by its items."""
    log = Log()
    fn = log.append if kind == "a list's builtin method" else log.add
    chunk = Chunk(fn, (Batch(0),), {}, 0, 2, 2, "autoconvert.batched(f)", None)
    with pytest.raises(ValueError, match=r"^autoconvert\.batched\(f\): the function changed self, the object the "):
        run(pickle.loads(pickle.dumps(chunk)), [np.ones((2, 3))])
    assert log == []


@pytest.mark.parametrize("generator", ["default_rng", "RandomState", "random.Random"])
def test_draws_from_a_generator_a_copy_holds_are_refused_naming_seed(generator: str) -> None:
    """A copy of a random generator repeats the caller's draws on every worker, and the
    caller's never moves: drawing from one is refused, naming ``seed=`` and ``rng``."""
    rng = {"default_rng": np.random.default_rng(0), "RandomState": np.random.RandomState(0)}.get(
        generator, random.Random(0)
    )
    fn = _script_function("def f(a):\n    return a * rng.random()", rng=rng)
    with pytest.raises(ValueError) as info:
        _by_value_elsewhere(fn)
    assert str(info.value) == (
        "autoconvert.batched(f): the function drew from global rng of module __main__, a random generator, on a "
        "worker in another process, which holds a copy of it: every copy repeats the caller's draws, and the "
        "caller's generator does not move. Fix: pass seed= and draw from a parameter named rng, or run the samples "
        "sequentially (no executor) or on threads (workers=)"
    )


@pytest.mark.parametrize("code", [collections.abc.Set.__le__.__code__, os.path.join.__code__, functools.wraps.__code__])
def test_the_standard_librarys_code_frozen_or_not_is_not_the_users(code: Any) -> None:
    """Python freezes some of the standard library (``<frozen _collections_abc>``, ``<frozen
    posixpath>``): its code is no more the user's than the rest, and is never followed."""
    assert not users_file(code.co_filename)


def test_a_read_only_global_whose_copy_cannot_be_made_writable_is_named() -> None:
    """A copy of a read-only global array may view a read-only buffer, whose flag NumPy will not
    set: the function's error stands, with a note naming the global and the fix."""
    fn = _script_function(
        "def f(a):\n    locked.setflags(write=True)\n    return a", locked=np.frombuffer(bytes(16), dtype=np.float64)
    )
    with pytest.raises(ValueError, match=r"^cannot set WRITEABLE flag to True of this array") as info:
        _by_value_elsewhere(fn)
    assert info.value.__notes__[-1].startswith(
        "autoconvert.batched(f): global locked of module __main__ is a read-only array, of which a worker in another "
        "process holds a copy whose WRITEABLE flag cannot be set;"
    ), info.value.__notes__


def _missing_key(a: np.ndarray) -> np.ndarray:
    raise KeyError(Model())


def _failing_with_a_lock(a: np.ndarray) -> np.ndarray:
    raise ValueError("bad sample", threading.Lock())


@pytest.mark.parametrize("fn", [_missing_key, _failing_with_a_lock])
def test_a_samples_exception_crosses_back_as_itself_or_by_its_message(fn: Callable[..., Any]) -> None:
    """What a worker raises crosses back pickled by reference, as a result does: as itself where
    it unpickles, else as a RuntimeError with its type and message."""
    chunk = Chunk(fn, (Batch(0),), {}, 0, 2, 2, "autoconvert.batched(f)", None)
    with pytest.raises(Exception) as info:
        run_sent(sent(run, chunk), [np.ones((2, 3))])
    back = pickle.loads(pickle.dumps(info.value))
    if fn is _missing_key:
        assert type(back) is KeyError and type(back.args[0]) is Model
    else:
        assert type(back) is RuntimeError
        assert str(back).startswith("builtins.ValueError: ('bad sample', <unlocked _thread.lock"), back


def test_what_a_refused_chunk_changed_is_never_read_again_from_the_copy() -> None:
    """A refused chunk's changes stay in the copies a warm worker keeps, the one its refusal
    names and the others: a later chunk reading any of them is refused, one reading none runs."""
    namespace: dict[str, Any] = {"__name__": "__main__", "np": np, "counts": np.zeros(1), "log": []}
    exec(
        "def changing(a):\n    counts[0] += 1\n    log.append(1)\n    return a\n"
        "def reading(a):\n    return a * len(log)\n"
        "def other(a):\n    return a * 2",
        namespace,
    )
    with pytest.raises(ValueError, match=r"^autoconvert\.batched\(f\): the function wrote into global counts "):
        _by_value_elsewhere(namespace["changing"])
    with pytest.raises(ValueError, match=r"^autoconvert\.batched\(f\): an earlier call changed global log of module "):
        _by_value_elsewhere(namespace["reading"])
    assert len(_by_value_elsewhere(namespace["other"])) == 2


def test_what_a_refused_chunk_changed_is_never_read_again_by_a_later_copy_of_the_function() -> None:
    """A function sent by value arrives with new globals each time, holding the same objects a
    worker keeps (a script's cached function, found by name there): a later copy reading the
    object an earlier refused chunk changed is refused too."""
    log: list[int] = []
    changing = _script_function("def f(a):\n    log.append(1)\n    return a", log=log)
    with pytest.raises(ValueError, match=r"^autoconvert\.batched\(f\): the function changed global log "):
        _by_value_elsewhere(changing)
    reading = _script_function("def f(a):\n    return a * len(log)", log=log)
    with pytest.raises(ValueError, match=r"^autoconvert\.batched\(f\): an earlier call changed global log of module "):
        _by_value_elsewhere(reading)


#: Another module of the user's than the function's: classes an argument brings, a cached object.
_OTHER_MODULE = """
import csv
import enum
import functools
import io
import itertools
import typing

import torch


class Thing:
    count = 0


class Base:
    hits = 0

    def hit(self):
        type(self).hits += 1


class Tokenizer:
    def __init__(self):
        self.calls = 0


@functools.lru_cache(maxsize=4)
def get_tok(name="a"):
    return Tokenizer()


@functools.cache
def get_stats():
    return {"hits": [0]}


@functools.lru_cache(maxsize=2)
def squared(k):
    return [k * k]


STEP = 0
ROWS = csv.reader(io.StringIO("1\\n2\\n3\\n"))
PAIRS = itertools.pairwise(range(9))
EVENS = filter(lambda v: v % 2 == 0, range(99))


class Color(enum.Enum):
    RED = [0]


T = typing.TypeVar("T")


class Box(typing.Generic[T]):
    made = 0

    def __init__(self):
        type(self).made += 1


class Plugin(Thing):
    uses = 0


@functools.singledispatch
def describe(v):
    return "any"


class Acc:
    def add(self, x, seen=[]):
        seen.append(x)


class Tok:
    @staticmethod
    @functools.lru_cache(maxsize=None)
    def enc(s):
        return [len(s)]


def encoding(a):
    Tok.enc("ab").append(1)
    return a


@functools.lru_cache(maxsize=1)
def latest(k):
    return [k]


def evicting(a):
    latest(float(a.sum()))
    return a * latest(-1.0)[0]


class Counted(torch.nn.Module):
    calls = 0

    def forward(self, x):
        type(self).calls += 1
        return x


def scale(x, k=2.0):
    return x * k


def tokenizing(a):
    get_tok("b")
    get_tok().calls += 1
    return a


def counting_stats(a):
    get_stats()["hits"][0] += 1
    return a


def filling(a):
    return a * squared(float(a.sum()))[0]
"""


def _counted_through_its_type(a: np.ndarray, thing: Any) -> np.ndarray:
    type(thing).count += 1
    return a


def _counted_as_a_class(a: np.ndarray, cls: type) -> np.ndarray:
    cls.count += 1  # type: ignore[attr-defined]
    return a


def _hitting(a: np.ndarray, thing: Any) -> np.ndarray:
    thing.hit()
    return a


def _other_module(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    name = f"ac_states_other_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(_OTHER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, name, importlib.import_module(name))
    return sys.modules[name]


#: A change the function makes to what another module of the user's holds (through an argument
#: of its classes), by the function and its argument, with the change its refusal names (None:
#: a cache filling). Its cached functions' results are read by its own functions.
THROUGH_OTHER_MODULES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], str | None]] = {
    "type(obj).count += 1": (lambda m: _counted_through_its_type, lambda m: m.Thing(), "Thing.count, in global Thing"),
    "a class passed, cls.count += 1": (
        lambda m: _counted_as_a_class,
        lambda m: m.Thing,
        "Thing.count, in global Thing",
    ),
    "an argument's method, type(self).hits += 1": (lambda m: _hitting, lambda m: m.Base(), "Base.hits, in global Base"),
    "a subclass's method binding its own count": (
        lambda m: _hitting,
        lambda m: type("Derived", (m.Base,), {"__module__": m.__name__})(),
        "Derived.hits, in global Derived",
    ),
    "an lru_cache'd object's count": (
        lambda m: m.tokenizing,
        lambda m: None,
        "get_tok.cache[()].calls, in global get_tok",
    ),
    "a cached dict's entry": (
        lambda m: m.counting_stats,
        lambda m: None,
        "get_stats.cache[()]['hits'][0], in global get_stats",
    ),
    "an lru_cache filling": (lambda m: m.filling, lambda m: None, None),
    "othermod.STEP += 1": (
        lambda m: _script_function("def f(a):\n    other.STEP += 1\n    return a", other=m),
        lambda m: None,
        "global STEP",
    ),
    "a parameter's default object's class": (
        lambda m: _script_function("def f(a, obj=other.Thing()):\n    type(obj).count += 1\n    return a", other=m),
        lambda m: None,
        "Thing.count, in global Thing",
    ),
    "a captured class": (
        lambda m: _script_function(
            "def make(cls):\n    def f(a):\n        cls.count += 1\n        return a\n    return f\n"
            "f = make(other.Thing)",
            other=m,
        ),
        lambda m: None,
        "Thing.count, in global Thing",
    ),
    "a module imported in the function": (
        lambda m: _script_function(f"def f(a):\n    import {m.__name__} as L\n    L.STEP += 1\n    return a"),
        lambda m: None,
        "global STEP",
    ),
    "a class imported from a module in the function": (
        lambda m: _script_function(
            f"def f(a):\n    from {m.__name__} import Thing\n    Thing.count += 1\n    return a"
        ),
        lambda m: None,
        "Thing.count, in global Thing",
    ),
    "a cached static method's result": (lambda m: m.encoding, lambda m: None, "Tok.enc.cache['ab'], in global Tok"),
    "a bounded cache evicting": (lambda m: m.evicting, lambda m: None, None),
    "a torch module's layer's class": (
        lambda m: _forwarding,
        lambda m: torch.nn.Sequential(m.Counted()),
        "Counted.calls, in global Counted",
    ),
}


def _forwarding(a: np.ndarray, net: torch.nn.Module) -> np.ndarray:
    return net(torch.as_tensor(a)).numpy()


@pytest.mark.parametrize("change", THROUGH_OTHER_MODULES)
def test_a_change_to_what_another_module_of_the_users_holds_is_refused(
    change: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In another process, the modules of the user's whose classes the function is handed are
    compared as its own module is (their classes, a subclass's inherited count), and so are the
    results a cached function keeps: a change is refused naming it, a cache filling never is."""
    module = _other_module(tmp_path, monkeypatch)
    made_fn, argument, refusal = THROUGH_OTHER_MODULES[change]
    held = argument(module)
    if change.startswith("a subclass"):
        module.Derived = type(held)
    arguments = (Batch(0),) if held is None else (Batch(0), held)
    module.get_tok(), module.get_stats(), module.Tok.enc("ab"), module.latest(0.0)  # the caller's cached objects
    chunk = Chunk(
        made_fn(module),
        arguments,
        {},
        0,
        2,
        2,
        "autoconvert.batched(f)",
        None,
        origin=Origin(True, caller=os.getppid()),
    )
    if refusal is None:
        assert len(run(pickle.loads(dumps(chunk, by_value=True)), [np.ones((2, 3))])) == 2
        return
    with pytest.raises(ValueError) as info:
        run(pickle.loads(dumps(chunk, by_value=True)), [np.ones((2, 3))])
    assert str(info.value).startswith(
        f"autoconvert.batched(f): the function changed {refusal} of module {module.__name__}, on a worker in another "
        "process, which holds a copy of"
    ), info.value


def _drawing_from_numpy(a: np.ndarray) -> np.ndarray:
    return a * np.random.rand()


def _drawing_from_torch(a: np.ndarray) -> np.ndarray:
    return a * float(torch.rand(()))


@pytest.mark.parametrize(
    ("fn", "generator"),
    [
        (_drawing_from_numpy, "NumPy's global generator (the one np.random.seed seeds)"),
        (_drawing_from_torch, "torch's default generator (the one torch.manual_seed seeds)"),
    ],
)
@pytest.mark.parametrize("where", ["another process", "another process, seed=", "the caller's process"])
def test_draws_from_a_global_generator_in_another_process_are_refused_but_with_seed(
    fn: Callable[..., Any], generator: str, where: str
) -> None:
    """A worker process's global generators are its own: forked ones repeat each other's
    draws, and the caller's never moves. Drawing from one there is refused naming seed=; with
    seed= each sample's stream is its own, and in the caller's process they are the caller's."""
    seeds = Seeds(0, rng=False, globals=True) if where.endswith("seed=") else None
    origin = Origin(True, caller=os.getpid() if where == "the caller's process" else os.getppid())
    chunk = Chunk(fn, (Batch(0),), {}, 0, 2, 2, "autoconvert.batched(f)", None, seeds=seeds, origin=origin)
    if where != "another process":
        assert len(run(pickle.loads(pickle.dumps(chunk)), [np.ones((2, 3))])) == 2
        return
    with pytest.raises(ValueError) as info:
        run(pickle.loads(pickle.dumps(chunk)), [np.ones((2, 3))])
    assert str(info.value) == (
        f"autoconvert.batched(f): the function drew from {generator}, on a worker in another process, which has its "
        "own: workers repeat each other's draws where they were started by fork, no run can be repeated, and the "
        "caller's generator does not move, as it does where the samples run sequentially or on threads. Fix: pass "
        "seed= (each sample then draws from its own stream, the same on every runner), or run the samples "
        "sequentially (no executor) or on threads (workers=)"
    )


def _package(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    name = f"ac_states_package_{os.getpid()}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("from . import sub\nTOTAL = 0\n")
    (tmp_path / name / "sub.py").write_text("STEP = 0\nSEEN = []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    package = importlib.import_module(name)
    monkeypatch.setitem(sys.modules, name, package)
    monkeypatch.setitem(sys.modules, f"{name}.sub", package.sub)
    return package


@pytest.mark.parametrize(
    ("source", "changed"),
    [
        ("pkg.sub.STEP += 1", "global STEP of module {}.sub"),
        ("pkg.sub.SEEN.append(1)", "global SEEN of module {}.sub"),
        ("pkg.TOTAL += 1", "global TOTAL of module {}"),
    ],
)
def test_a_global_of_a_packages_module_changed_through_the_package_is_refused(
    source: str, changed: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pkg.sub.STEP += 1``: a global reached through a package's modules, attribute by attribute,
    is compared as one its code names is."""
    package = _package(tmp_path, monkeypatch)
    fn = _script_function(f"def f(a):\n    {source}\n    return a", pkg=package)
    with pytest.raises(ValueError) as info:
        _by_value_elsewhere(fn)
    assert str(info.value).startswith(
        f"autoconvert.batched(f): the function changed {changed.format(package.__name__)}, on a worker in another "
    ), info.value


class Phase(enum.Enum):
    """An Enum whose member the function marks: pickled by its name, the caller's own where it is unpickled."""

    EVAL = 1


def _marking(a: np.ndarray, phase: Phase) -> np.ndarray:
    phase.marks = getattr(phase, "marks", 0) + 1  # type: ignore[attr-defined]
    return a


@pytest.mark.parametrize("where", ["the caller's process", "another process"])
def test_an_enum_member_is_the_callers_own_in_the_callers_process(where: str) -> None:
    """An Enum member unpickled in the caller's process (a Dask worker there) is the caller's
    own member: what the function sets on it is the caller's, as on threads; in another
    process it is that process's member, and the change is refused."""
    Phase.EVAL.marks = 0  # type: ignore[attr-defined]
    origin = Origin(True, caller=os.getpid() if where == "the caller's process" else os.getppid())
    chunk = Chunk(_marking, (Batch(0), Phase.EVAL), {}, 0, 2, 2, "autoconvert.batched(f)", None, origin=origin)
    if where == "the caller's process":
        assert len(run(pickle.loads(pickle.dumps(chunk)), [np.ones((2, 3))])) == 2
        assert Phase.EVAL.marks == 2  # type: ignore[attr-defined]
        return
    with pytest.raises(
        ValueError, match=r"^autoconvert\.batched\(f\): the function changed Phase\.EVAL\.marks, in global Phase "
    ):
        run(pickle.loads(pickle.dumps(chunk)), [np.ones((2, 3))])


def test_autoconvert_is_never_the_users_code_wherever_it_is_installed() -> None:
    """Run from a checkout (its files outside installed packages), autoconvert's own classes and
    modules are still no user's: never compared, so a chunk pays nothing for them."""
    from autoconvert._batched._reads import Attributes, ReadGlobals, modules_of

    assert modules_of([Attributes, ReadGlobals, Chunk, Origin], os.getppid()) == []


#: A script's function changing what its module holds only by name (a class of another module of
#: the user's: imported by name, in a registry, an Enum) or what no container or object the
#: comparisons walked before held, with what its globals hold and the refusal.
REACHED_OTHERWISE: dict[str, tuple[str, Callable[[Any], dict[str, Any]], str]] = {
    "a class imported by name": (
        "def f(a):\n    Thing.count += 1\n    return a",
        lambda m: {"Thing": m.Thing},
        "Thing.count, in global Thing of module __main__",
    ),
    "a class in a registry": (
        "def f(a):\n    REG['thing'].count += 1\n    return a",
        lambda m: {"REG": {"thing": m.Thing}},
        "REG['thing'].count, in global REG['thing'] of module __main__",
    ),
    "an Enum member's list value": (
        "def f(a):\n    Color.RED.value.append(1)\n    return a",
        lambda m: {"Color": m.Color},
        "Color.RED.value, in global Color of module __main__",
    ),
    "a list added to builtins": (
        "def f(a):\n    AC_ADDED_LOG.append(1)\n    return a",
        lambda m: {},
        "global AC_ADDED_LOG of module builtins",
    ),
    "a tensor's Python attribute": (
        "def f(a):\n    TT.hits += 1\n    return a",
        lambda m: {"TT": _with_hits(torch.zeros(2))},
        "TT.hits, in global TT of module __main__",
    ),
    "a list a mappingproxy holds": (
        "def f(a):\n    RO['a'].append(1)\n    return a",
        lambda m: {"RO": types.MappingProxyType({"a": []})},
        "RO['a'], in global RO of module __main__",
    ),
    "a dok_matrix's new entry": (
        "def f(a):\n    DOK[0, 1] = 1.0\n    return a",
        lambda m: {"DOK": pytest.importorskip("scipy.sparse").dok_matrix((1, 4))},
        "global DOK of module __main__",
    ),
    "a class a typing alias stands for": (
        "def f(a):\n    IntBox()\n    return a",
        lambda m: {"IntBox": m.Box[int]},
        "IntBox.__origin__.made, in global IntBox.__origin__ of module __main__",
    ),
    "an itertools.count": (
        "def f(a):\n    next(IDS)\n    return a",
        lambda m: {"IDS": itertools.count()},
        "IDS.position, in global IDS of module __main__",
    ),
    "an itertools.cycle": (
        "def f(a):\n    next(CYC)\n    return a",
        lambda m: {"CYC": itertools.cycle([1, 2, 3])},
        "CYC.position, in global CYC of module __main__",
    ),
    "a map over a lambda": (
        "def f(a):\n    next(SCALED)\n    return a",
        lambda m: {"SCALED": map(lambda v: v * 2, range(9))},  # noqa: C417 - a map object, as written in pipelines
        "SCALED.position, in global SCALED of module __main__",
    ),
    "a list's iterator": (
        "def f(a):\n    next(QUEUE)\n    return a",
        lambda m: {"QUEUE": iter([3, 1, 2])},
        "QUEUE.position, in global QUEUE of module __main__",
    ),
    "a starmap over a zip": (
        "def f(a):\n    next(POWERS)\n    return a",
        lambda m: {"POWERS": itertools.starmap(pow, zip(range(9), itertools.repeat(2)))},  # noqa: RUF058
        "POWERS.position, in global POWERS of module __main__",
    ),
    "another module's filter over a lambda": (
        "def f(a):\n    next(other.EVENS)\n    return a",
        lambda m: {"other": m},
        "EVENS.position, in global EVENS of module {other}",
    ),
    "another module's pairwise, which does not pickle": (
        "def f(a):\n    next(other.PAIRS)\n    return a",
        lambda m: {"other": m},
        "PAIRS.position, in global PAIRS of module {other}",
    ),
    "a deque's iterator": (
        "def f(a):\n    next(PENDING)\n    return a",
        lambda m: {"PENDING": iter(collections.deque([3, 1, 2]))},
        "PENDING.position, in global PENDING of module __main__",
    ),
    "another module's csv reader over a stream": (
        "def f(a):\n    next(other.ROWS)\n    return a",
        lambda m: {"other": m},
        "ROWS.position, in global ROWS of module {other}",
    ),
    "a partial's keyword gained": (
        "def f(a):\n    ORDER.keywords['reverse'] = True\n    return a",
        lambda m: {"ORDER": functools.partial(sorted, key=abs)},
        "ORDER.keywords, in global ORDER of module __main__",
    ),
    "a partial's own attribute": (
        "def f(a):\n    ORDER.calls += 1\n    return a",
        lambda m: {"ORDER": _with_calls(functools.partial(sorted, key=abs))},
        "ORDER.calls, in global ORDER of module __main__",
    ),
    "a function's default rebound": (
        "def f(a):\n    scale.__defaults__ = (5.0,)\n    return a",
        lambda m: {"scale": m.scale},
        "scale.k, in global scale of module __main__",
    ),
    "a ctypes number": (
        "def f(a):\n    HITS.value += 1\n    return a",
        lambda m: {"HITS": ctypes.c_int(0)},
        "global HITS of module __main__",
    ),
    "a timedelta accumulated": (
        "def f(a):\n    global ELAPSED\n    ELAPSED += datetime.timedelta(seconds=1)\n    return a",
        lambda m: {"ELAPSED": datetime.timedelta(0), "datetime": datetime},
        "global ELAPSED of module __main__",
    ),
    "an object's Decimal attribute": (
        "def f(a):\n    CFG.total += 1\n    return a",
        lambda m: {"CFG": types.SimpleNamespace(total=decimal.Decimal(0), dtype=np.dtype("float64"))},
        "CFG.total, in global CFG of module __main__",
    ),
    "an object's dtype attribute": (
        "def f(a):\n    CFG.dtype = np.dtype('float32')\n    return a",
        lambda m: {"CFG": types.SimpleNamespace(total=decimal.Decimal(0), dtype=np.dtype("float64"))},
        "CFG.dtype, in global CFG of module __main__",
    ),
    "a number of a module a dict holds": (
        "def f(a):\n    BACKENDS['other'].STEP += 1\n    return a",
        lambda m: {"BACKENDS": {"other": m}},
        "BACKENDS['other'].STEP, in global BACKENDS of module __main__",
    ),
    "a number of a module a default holds": (
        "def f(a, backend=BACKEND):\n    backend.STEP += 1\n    return a",
        lambda m: {"BACKEND": m},
        "f.backend.STEP, in global f of module __main__",
    ),
    "a singledispatch function's new implementation": (
        "def f(a):\n    describe.register(tuple, lambda v: 'tuple')\n    return a",
        lambda m: {"describe": m.describe},
        "describe.registry, in global describe of module __main__",
    ),
    "an OrderedDict reordered": (
        "def f(a):\n    OD.move_to_end('a')\n    return a",
        lambda m: {"OD": collections.OrderedDict(a=1, b=2)},
        "global OD of module __main__",
    ),
    "a plugin, through its base's __subclasses__()": (
        "def f(a):\n    for k in Thing.__subclasses__():\n        k.uses += 1\n    return a",
        lambda m: {"Thing": m.Thing},
        "Thing.__subclasses__()[0].uses, in global Thing.__subclasses__()[0] of module __main__",
    ),
    "a method's mutable default": (
        "def f(a):\n    acc.add(1)\n    return a",
        lambda m: {"acc": m.Acc()},
        "type(acc).add.seen, in global type(acc) of module __main__",
    ),
    "a class a partial stands for": (
        "def f(a):\n    make()\n    return a",
        lambda m: {"make": functools.partial(m.Box)},
        "make.func.made, in global make.func of module __main__",
    ),
}


def _with_calls(partial: functools.partial[Any]) -> functools.partial[Any]:
    partial.calls = 0  # type: ignore[attr-defined]
    return partial


def _with_hits(tensor: torch.Tensor) -> torch.Tensor:
    tensor.hits = 0  # type: ignore[attr-defined]
    return tensor


# torch 2.4 and 2.5 load a pickled tensor's storage through torch.load, which warns (see above);
# Python 3.12 and 3.13 warn as an itertools iterator is sent by value (pickled), as Dask sends it.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning")
@pytest.mark.filterwarnings(
    "ignore:Pickle, copy, and deepcopy support will be removed from itertools:DeprecationWarning"
)
@pytest.mark.parametrize("change", REACHED_OTHERWISE)
def test_a_change_reached_through_no_container_of_the_modules_is_refused(
    change: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class of another module of the user's its module holds by name (compared as one it
    defines), what builtins holds that the user's code added, a tensor's own attributes, a
    mappingproxy's items, a dok_matrix's entries, an iterator's position, the class a typing
    alias or a partial stands for: compared in another process, a change refused naming it."""
    module = _other_module(tmp_path, monkeypatch)
    monkeypatch.setattr(builtins, "AC_ADDED_LOG", [], raising=False)
    source, held, refusal = REACHED_OTHERWISE[change]
    with pytest.raises(ValueError) as info:
        _by_value_elsewhere(_script_function(source, **held(module)))
    named = refusal.replace("{other}", module.__name__)
    assert str(info.value).startswith(
        f"autoconvert.batched(f): the function changed {named}, on a worker in another process"
    ), info.value


#: Iterators an argument may be, each advanced as the function takes its next item.
ITERATORS: dict[str, Callable[[], Any]] = {
    "a map over a lambda": lambda: map(lambda v: v * 2, range(9)),  # noqa: C417 - a map object
    "a filter": lambda: filter(None, range(1, 9)),
    "a list's iterator": lambda: iter([3, 1, 2]),
    "a dict's iterator": lambda: iter(dict.fromkeys("abc")),
    "a string's iterator": lambda: iter("abc"),
    "a range's iterator": lambda: iter(range(9)),
    "reversed": lambda: reversed([3, 1, 2]),
    "an enumerate": lambda: enumerate("abc"),
    "a zip": lambda: zip("abc", range(3), strict=True),
    "iter(callable, sentinel)": lambda: iter(itertools.count().__next__, -1),
    "an itertools.count": itertools.count,
    "a starmap over a zip": lambda: itertools.starmap(pow, zip(range(9), itertools.repeat(2))),  # noqa: RUF058
}


def _advancing(a: np.ndarray, it: Any) -> np.ndarray:
    next(it)
    return a


@pytest.mark.filterwarnings(
    "ignore:Pickle, copy, and deepcopy support will be removed from itertools:DeprecationWarning"
)
@pytest.mark.parametrize("kind", ITERATORS)
def test_an_iterator_argument_a_copy_advances_is_refused(kind: str) -> None:
    """An iterator handed to the function moves as it takes items: sequentially the caller's
    does; a copy's moving, on a worker in another process or in the caller's, is refused naming
    it (its position; ``iter(f, sentinel)``'s by its callable's)."""
    for elsewhere in (True, False):
        chunk = Chunk(_advancing, (Batch(0), ITERATORS[kind]()), {}, 0, 2, 2, "autoconvert.batched(f)", None)
        if elsewhere:
            chunk = chunk._replace(origin=Origin(True, caller=os.getppid()))
        with pytest.raises(
            ValueError, match=r"the function changed it\.(position|__call__\.__self__\.position), in argument it, "
        ):
            run(pickle.loads(dumps(chunk, by_value=True)), [np.ones((2, 3))])


@pytest.mark.parametrize("make", [itertools.chain, functools.partial(map, str)])
def test_an_iterator_over_one_that_does_not_pickle_is_compared_by_where_it_stands(make: Callable[..., Any]) -> None:
    """An iterator is compared by its position, read from its pickling; one it wraps that has
    none (a generator) by its frame: advancing the outer one is a change."""
    from autoconvert._batched._states import first_change, snapshot

    outer = make(i for i in range(3))
    before = snapshot(outer)
    assert before is not None and first_change(before, outer) is None
    next(outer)
    assert first_change(before, outer) == [GetAttrKey("position")]


class _Ticks:
    """An iterator of the user's class: its position is its attribute."""

    def __init__(self) -> None:
        self.n = 0

    def __iter__(self) -> _Ticks:
        return self

    def __next__(self) -> int:
        self.n += 1
        return self.n


def test_an_iterator_of_the_users_inside_a_compiled_one_is_compared_by_its_attributes() -> None:
    """An islice over the user's iterator: the inner one moving underneath is a change of the
    outer one's position, read from its attributes (not from how many it has)."""
    from autoconvert._batched._states import first_change, snapshot

    ticks = _Ticks()
    sliced = itertools.islice(ticks, None)
    next(sliced)
    before = snapshot(sliced)
    assert before is not None and first_change(before, sliced) is None
    next(ticks)
    assert first_change(before, sliced) == [GetAttrKey("position")]


def test_a_file_an_object_holds_is_not_compared(tmp_path: pathlib.Path) -> None:
    """A file reads and writes through buffers of its own, which no pickling shows: writing it
    is no change whether the buffer was flushed or not (a log the worker keeps)."""
    from autoconvert._batched._states import first_change, snapshot

    holder = types.SimpleNamespace(log=(tmp_path / "log.txt").open("w"))
    try:
        before = snapshot(holder)
        assert before is not None
        holder.log.write("seen\n")
        assert first_change(before, holder) is None
        holder.log.flush()
        assert first_change(before, holder) is None
    finally:
        holder.log.close()


def test_a_cached_call_is_named_by_its_arguments_and_keywords() -> None:
    """A cached function's results are keyed by their calls, shown as the arguments and keywords
    the call was made with (lru_cache's own marker between them left out)."""
    from autoconvert._batched._states import CachedCall, cached_results

    @functools.lru_cache(maxsize=4)
    def vocabulary(name: str, lang: str = "en") -> list[str]:
        return [name, lang]

    vocabulary("a", lang="fr")
    vocabulary("b")
    results = cached_results(vocabulary)
    assert results is not None
    assert sorted(repr(CachedCall(k, r)) for k, r in results.items()) == ["'b'", "('a', lang='fr')"]
