"""What an object among a copied chunk's arguments held before its samples ran, to tell after
them whether the function changed it (on another process's copy, a change the caller misses).

An object's state is its ``__getstate__()`` (its ``__dict__`` and slots, all of them for a
class of the user's, whatever its own ``__getstate__`` pickles; an ``nn.Module``'s
parameters and buffers as the attributes they are read as; a partial's bound arguments),
walked through dicts (their subclasses too), lists, tuples, deques and objects down to leaves
kept as their values (an array's or a tensor's bytes, an array subclass's pickle, another
builtin's pickle; an object whose state is no dict, as a compiled library keeps it, is not
compared, in a list too: a scikit-learn KDTree counts its queries; a random generator by its
position, so that one a copy draws from is told apart: each copy would repeat the caller's draws). What was there must be there unchanged afterwards; what the function
only added (a new attribute, a new key of a dict, a value where there was None) is taken for a
cache filling (``functools.cached_property``, a memo dict, a lazily built attribute), which the
caller's object fills again on its own, and is never refused, but for a ``Counter`` or a
``defaultdict``, which count or collect. Code is never compared: functions, classes, decorated
functions and other wrappers, what pickles by reference or by name (a logger).
"""

from __future__ import annotations

import array
import collections
import contextlib
import contextvars
import enum
import functools
import gc
import inspect
import io
import os
import pickle
import random
import sys
import sysconfig
import threading
import types
import warnings
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from autoconvert._errors import GetAttrKey, KeyEntry, MappingKey, SequenceKey
from autoconvert._pickling import resolve

#: Values pickled by reference, whose state is their module's: never compared.
BY_REFERENCE = (
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
)


#: What a class holds that is code, not data.
CODE = (
    *BY_REFERENCE,
    staticmethod,
    classmethod,
    property,
    types.MemberDescriptorType,
    types.GetSetDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
    types.WrapperDescriptorType,
)
#: Data a bound method may change (``log.append``, ``out.write``): compared as that method's object.
BUILTIN_DATA = (list, dict, set, bytearray, collections.deque, array.array, io.StringIO, io.BytesIO)

#: Where the standard library and installed packages live: their functions' globals are
#: their libraries' caches and registries, no state of the caller's.
_INSTALLED_CODE = tuple(
    {
        os.path.join(path, "")
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (path := sysconfig.get_path(key))
    }
)

#: Mappings walked key by key (an nn.Module's hooks are OrderedDicts), their subclasses too
#: (a defaultdict, a Counter); a ``ChainMap`` by the values it reads (``cm["a"] += 1`` writes a
#: new key into its first map, which shadows its parent's: a change of ``cm["a"]``).
_DICTS = (dict, collections.ChainMap, types.MappingProxyType)
#: Sequences walked item by item (a Pipeline's steps, an ensemble's estimators), their length
#: compared: an object inside is compared by its state, so that one keeping state to itself
#: (a KDTree counting its queries) is not taken for changed. Their subclasses too (a log kept
#: as a list subclass), by their items.
_WALKED_SEQUENCES = (list, tuple, collections.deque)

#: Mappings that count or collect (``tally[label] += 1``): a key they gain is a change, not a
#: cache filling.
_COLLECTING = (collections.Counter, collections.defaultdict)
#: Random generators, which move as they draw, and seed sequences, which move as they spawn.
_RANDOM = (np.random.RandomState, np.random.Generator, np.random.BitGenerator, np.random.SeedSequence, random.Random)


def _collects(kind: type) -> bool:
    """Whether a key a mapping of ``kind`` gains is a change, not a cache filling: a ``Counter``'s,
    a ``defaultdict``'s, a SciPy ``dok_matrix``'s (its data, in a dict), a ``mappingproxy``'s (a
    view no code fills as a memo: a ``singledispatch`` function's ``registry`` gaining a type)."""
    if issubclass(kind, (*_COLLECTING, types.MappingProxyType)):
        return True
    return issubclass(kind, dict) and kind.__module__.startswith("scipy.sparse")


def _random(value: Any) -> bool:
    """Whether ``value`` is a random generator (torch's too, where torch is loaded) or a seed
    sequence, which move as they draw or spawn."""
    torch = sys.modules.get("torch")
    return isinstance(value, _RANDOM) or (torch is not None and isinstance(value, torch.Generator))


#: Leaves compared as they are: immutable, and equal exactly when their pickles are.
_LEAF_TYPES = (type(None), bool, int, str, bytes)
#: What most states hold, which holds no state of its own: told apart at once.
_STATELESS = frozenset({*_LEAF_TYPES, float, complex, np.ndarray, set, frozenset, bytearray})
#: The leaf of ``None``: an attribute a lazy object fills on first use, so given a value is a cache filling.
_UNSET = (type(None), None)


class State:
    """A dict's or an object's entries as they were, each a ``State`` or a leaf's value (see
    ``leaf``; None where it does not pickle: then it cannot be compared)."""

    __slots__ = ("entries", "kind")

    def __init__(self, kind: type, entries: dict[Any, Any]) -> None:
        self.kind, self.entries = kind, entries


def snapshot(value: Any) -> State | None:
    """``value``'s state now, where it is an object with state of its own; else None."""
    walked = (*_WALKED_SEQUENCES, collections.ChainMap, types.MappingProxyType)
    state = _inner(value) if isinstance(value, walked) else _state(value)
    return None if state is None else State(type(value), _entries(state, {id(value)}))


def first_change(before: State, value: Any) -> list[KeyEntry] | None:
    """The path within ``value`` to the first entry changed or removed since ``before``; None
    where all it held is there unchanged (entries added are no change)."""
    sequence = issubclass(before.kind, _WALKED_SEQUENCES)
    mapping = issubclass(before.kind, _DICTS)
    members = before.kind in _SET_KINDS or before.kind is _Keys
    objects = before.kind is np.ndarray
    if _rebound(before, value):
        return []
    if members:
        now = _members(value) or {}
    elif objects:
        now = _object_items(value) or {}
    else:
        now = dict(enumerate(value)) if sequence else value if mapping else _state(value) or {}
    counted = sequence or (members and before.kind is not _Keys) or objects or _collects(before.kind)
    if counted and len(now) != len(before.entries) - (_DICT_KEYS in before.entries):  # its keys' own entry aside
        return []
    if issubclass(before.kind, collections.OrderedDict) and _reordered(before, now):  # move_to_end, popitem
        return []
    if not (sequence or mapping or members or objects):
        shadowing = next((key for key in now if key not in before.entries and _class_default(before.kind, key)), None)
        if shadowing is not None:  # self.calls += 1 over the class's calls = 0: a count, no cache filling
            return [GetAttrKey(str(shadowing))]
        learned = _learned(before.kind, [key for key in now if key not in before.entries])
        if learned:  # an estimator's first fit or partial_fit: what it learned, no cache filling
            return [GetAttrKey(min(learned))]
    below: list[KeyEntry] | None
    for key, was in before.entries.items():
        if key is _DICT_KEYS:  # the objects a dict is keyed by, by identity (keys gained or lost are its own entries)
            below = first_change(was, _Keys(now))
            if below is not None:
                return [".keys()", *below]
            continue
        if key not in now:  # removed (but a cached call evicted); or, where it was None, bound to code (a lazy import)
            below = None if was == _UNSET or before.kind is CachedResults else []
        elif type(was) is State:
            below = first_change(was, now[key])
        elif was is None or was == _UNSET or leaf(now[key]) == was or _identity_of_a_neighbour(now, key):
            below = None  # nothing to compare, an attribute None until first use (Delaunay's _transform), unchanged
        else:
            below = [GetAttrKey("grad")] if gradient_alone(was, now[key]) else []
        if below is not None:
            entry = (
                SequenceKey(key)
                if sequence or (objects and type(key) is int)
                else f"[{', '.join(map(str, key)) or '()'}]"  # an object array's item: [1, 2], a 0-d one's [()]
                if objects
                else f"{{{type(now.get(key)).__name__}}}"  # a set's member: {Model}
                if members
                else MappingKey(key)
                if mapping or not isinstance(key, str)
                else GetAttrKey(key)
            )
            return [entry, *below]
    return None


def _reordered(before: State, now: Mapping[Any, Any]) -> bool:
    """Whether the keys an ordered mapping held before stand in another order now."""
    was = [key for key in before.entries if key is not _DICT_KEYS and key in now]
    return [key for key in now if key in before.entries] != was


def _rebound(before: State, value: Any) -> bool:
    """Whether what held a state is now of another type (``global GRID; GRID = None``): a change
    as a whole, whatever it holds."""
    return type(value) is not before.kind


class _Keys(frozenset[Any]):
    """A dict's keys, whose objects are compared by their state as a set's members are."""


#: The entry under which a dict's keys with state of their own are kept (``REG.keys(){Model}``).
_DICT_KEYS = object()


def gradient_alone(was: Any, value: Any) -> bool:
    """Whether of a tensor (a parameter) only its gradient changed since its leaf ``was``
    (``backward()`` filled or accumulated it)."""
    if not is_array(value) or type(was) is not tuple or len(was) != 5:
        return False
    now = leaf(value)
    return now is not None and now[:4] == was[:4]


def flag_alone(was: Any, value: Any) -> str | None:
    """The flag alone that changed of an array since its leaf ``was`` (``setflags(write=...)``:
    ``WRITEABLE``) or of a tensor (``requires_grad_()``: ``requires_grad``), its data as it was;
    None where its data changed, or it is neither."""
    now = leaf(value) if is_array(value) else None
    if type(was) is not tuple or type(now) is not tuple or len(now) != len(was) or now[:3] != was[:3]:
        return None
    return "WRITEABLE" if len(was) == 4 else "requires_grad" if now[3] != was[3] else None


def _identity_of_a_neighbour(state: dict[Any, Any], key: Any) -> bool:
    """Whether ``state[key]`` is the ``id()`` of another value the same object holds (scikit-learn's
    ``_stop_words_id``): an identity memo, which holds within one process only, so that a copy
    in another sets it anew."""
    value = state[key]
    return type(value) is int and any(id(other) == value for k, other in state.items() if k != key)


def _learned(kind: type, added: list[Any]) -> list[str]:
    """What an estimator's first ``fit`` or ``partial_fit`` learned among the attributes
    ``added``: by scikit-learn's convention, the public ones with a trailing underscore
    (``coef_``), where ``n_features_in_`` is among them (set by fitting alone: a vectorizer's
    ``transform`` fills ``vocabulary_`` from its parameter, a cache), on an object with ``fit``
    and ``get_params``. None elsewhere."""
    if "n_features_in_" not in added or not all(
        callable(inspect.getattr_static(kind, name, None)) for name in ("fit", "get_params")
    ):
        return []
    return [name for name in added if isinstance(name, str) and name.endswith("_") and not name.startswith("_")]


def _class_default(kind: type, name: Any) -> bool:
    """Whether ``kind`` holds data under ``name`` (``calls = 0``), which an attribute of its
    instance set anew shadows: not None, no method, property or other descriptor."""
    if not isinstance(name, str):
        return False
    default = inspect.getattr_static(kind, name, None)
    return default is not None and not callable(default) and not hasattr(type(default), "__get__")


def generator_at(value: Any, below: list[KeyEntry]) -> int | None:
    """How many of ``below``'s keys lead from ``value`` (as ``first_change`` walked it) to a
    random generator the change is within; None where none is on the way."""
    for depth, key in enumerate(below):
        if _random(value):
            return depth
        entries = _inner(value) or {}
        value = entries.get(
            key.name
            if isinstance(key, GetAttrKey)
            else key.key
            if isinstance(key, MappingKey)
            else key.index
            if isinstance(key, SequenceKey)
            else key
        )
    return None


def _inner(value: Any) -> Mapping[Any, Any] | None:
    """What ``value`` holds, by key: a dict itself, a sequence's items by index, an object's
    state; None for a leaf."""
    if isinstance(value, _DICTS):
        return value
    if type(value) in _SET_KINDS:
        return _members(value)
    if type(value) is np.ndarray:
        return _object_items(value)
    return dict(enumerate(value)) if isinstance(value, _WALKED_SEQUENCES) else _state(value)


#: The values a module binds that only binding anew changes (``global hits; hits += 1``).
REBOUND_ONLY = (int, float, complex, str, bytes, bool, type(None))
#: Sets: by their members' identities where one has state of its own, else as a leaf.
_SET_KINDS = frozenset({set, frozenset})


def _members(value: Any) -> dict[int, Any] | None:
    """A set's members by identity, where one has state of its own (``for m in active: m.calls
    += 1``); None where all are plain values, compared as the set's leaf (by what it holds)."""
    return {id(m): m for m in value} if any(type(m) not in _STATELESS for m in value) else None


def _object_items(array: np.ndarray[Any, Any]) -> dict[Any, Any] | None:
    """An object array's items by index (``(1, 2)`` where it has more than one dimension), where
    one has state of its own (``REGISTRY[0].n += 1``); None for any other array, compared as its
    leaf (by its bytes, or its pickle)."""
    if not array.dtype.hasobject:
        return None
    items = array.ravel().tolist()
    if not any(_may_hold_state(item) for item in items):  # dates, decimals, strings: compared as its pickle
        return None
    keys = range(len(items)) if array.ndim == 1 else np.ndindex(array.shape)
    return dict(zip(keys, items, strict=True))


def attributes_dropped_by_pickle(value: Any) -> bool:
    """Whether ``value`` is an array subclass holding attributes (astropy's mask, a user's
    ``TAG.meta``) whose class leaves pickling to ndarray's, which drops them."""
    kind = type(value)
    if kind is np.ndarray or not isinstance(value, np.ndarray) or isinstance(value, np.memmap) or not own_dict(value):
        return False  # a memmap's own (its mmap, its file) stay: it crosses as an array in memory
    own = kind.__mro__[: kind.__mro__.index(np.ndarray)]  # the subclass and its bases below ndarray
    return not any(name in vars(base) for base in own for name in _PICKLING_METHODS)


#: The methods by which a class pickles itself: an array subclass defining none is pickled by ndarray's.
_PICKLING_METHODS = ("__reduce__", "__reduce_ex__", "__getstate__", "__setstate__")


def _tensor_with_attributes(value: Any) -> bool:
    """Whether ``value`` is a tensor (a parameter) holding Python attributes of its own (``TT.hits``)."""
    torch = sys.modules.get("torch")  # never imported here
    return torch is not None and isinstance(value, torch.Tensor) and bool(own_dict(value))


def _c_data(value: Any) -> bool:
    """Whether ``value`` is a ctypes array, structure or union: C data, compared by its bytes."""
    ctypes = sys.modules.get("ctypes")  # never imported here
    return ctypes is not None and isinstance(
        value,
        (ctypes.Array, ctypes.Structure, ctypes.Union, ctypes._SimpleCData),  # c_int(0).value += 1
    )


def _state(value: Any) -> dict[Any, Any] | None:
    """An object's state as a dict (its ``__getstate__``'s, slots merged in); None for what has
    none to compare: arrays, tensors, builtins, what pickles by reference."""
    if type(value) in _STATELESS:
        return None
    through = held_through(value)
    if through is not None:
        return through
    if attributes_dropped_by_pickle(value):  # its attributes (TAG.meta) and its data, compared as it is
        return {**vars(value), "__array__()": np.ndarray.view(value, np.ndarray)}
    if _tensor_with_attributes(value):  # TT.hits += 1: its attributes, and its data as a tensor's
        return {**vars(value), "data": value.detach()}
    if isinstance(value, BY_REFERENCE) or is_array(value) or type(value).__module__ == "builtins" or _c_data(value):
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.nn.Module) and unwrapped(value, 1) is value:
        # Its parameters, buffers and submodules as the attributes a user reads them as
        # (m.running_mean); one that does not pickle too (a parametrized one), which a forked
        # worker holds a copy of all the same.
        state = {k: v for k, v in vars(value).items() if not special(k)}  # a scripted one's __dir__ left out
        for part in ("_parameters", "_buffers", "_modules"):
            state.update(state.pop(part, {}))
        return state
    if isinstance(value, enum.Enum):  # its value as it is read (Color.RED.value), and what code set on it
        return {"value": value._value_, **{k: v for k, v in vars(value).items() if not k.startswith("_")}}
    if _by_reference(value):
        return None
    kind = type(value)
    if _random(value):  # by its position: a copy drawn from repeats the caller's draws
        if isinstance(value, random.Random):
            return {"state": pickle.dumps(value.getstate())}
        if isinstance(value, np.random.RandomState):
            return {"state": value.get_state(legacy=False)}
        if isinstance(value, np.random.SeedSequence):  # spawn() moves it: a copy spawns the caller's children
            return {"n_children_spawned": value.n_children_spawned}
        if isinstance(value, (np.random.Generator, np.random.BitGenerator)):
            return {"state": (value.bit_generator if isinstance(value, np.random.Generator) else value).state}
        return {"state": leaf(value.get_state())}  # torch's
    wrapped = unwrapped(value, 1)
    if wrapped is not value:
        if kind.__module__.startswith("autoconvert."):
            # A torchified object, a TensorCallback: a proxy reading and setting its object's
            # attributes. A decorated function, a numpy_op, a torchified module: code, made
            # again from its recipe where it arrives, whose caches fill as it runs.
            forwards = any("__getattr__" in vars(k) for k in kind.__mro__)
            return _state(wrapped) if forwards and not isinstance(wrapped, BY_REFERENCE) else None
        if callable(value) and not isinstance(inspect.getattr_static(kind, "__call__", None), types.FunctionType):
            return None  # a compiled dispatcher: code, whose caches fill as it runs
        # else a decorator written as a class, a proxy: its own state, what it wraps among it
    if isinstance(value, functools.partial):  # what it binds (its function is code, but a bound method's object)
        # Its keywords as a view no code fills as a memo (one it gains changes its calls), its attributes.
        bound = {"args": value.args, "keywords": types.MappingProxyType(value.keywords), **(own_dict(value) or {})}
        return {**bound, "func": value.func} if holds_through(value.func) else bound
    own = inspect.getattr_static(kind, "__getstate__", None)
    # A class of the user's pickles what its own __getstate__ says (a tuple, some attributes
    # left out), but its methods change every attribute: all of them compared, as object's gives them.
    getstate: Any = (
        object.__getstate__ if isinstance(own, types.FunctionType) and users_function(own) else kind.__getstate__
    )
    try:
        pickled = getstate(value)
    except Exception:  # a __getstate__ that needs what only pickling gives it
        return None
    if type(pickled) is tuple and len(pickled) == 2 and type(pickled[1]) is dict:  # (__dict__ or None, slots)
        pickled = {**(pickled[0] or {}), **pickled[1]}
    if pickled is None and type(own_dict(value)) is dict:
        pickled = {}  # no attribute yet: what it gains may shadow a class default (self.calls += 1)
    return pickled if type(pickled) is dict else None


def held_through(value: Any) -> dict[str, Any] | None:
    """What code, a reference, a stream or a generator holds that a function can change
    through it, keyed as it is read: a closure of the user's its captures and attributes (a
    closure of a closure: ``nonlocal n``), a bound method its object (``keeper.bump``,
    ``log.append``), a weak reference its referent (``ref().n``), a ``WeakSet`` its items, a
    context variable its value, a thread-local its thread's attributes, an in-memory stream its
    text and position, a generator its position and locals. None for
    anything else."""
    kind = type(value)
    if kind is types.FunctionType:
        return function_state(value) if value.__closure__ and users_function(value) else None
    if kind in _BOUND_METHODS:  # its object, where it is one with state (log.append, log.__setitem__, keeper.bump)
        owner = getattr(value, "__self__", None)
        return None if owner is None or isinstance(owner, (type, types.ModuleType)) else {"__self__": owner}
    if isinstance(value, weakref.ref):
        return {"__call__()": value()}
    if isinstance(value, weakref.WeakSet):  # by identity: what it holds, in no order
        return {"items": {id(item): item for item in value}}
    if isinstance(value, contextvars.ContextVar):  # its value in the context the function runs in, as read
        now = context_value(value)
        return {} if now is NOTHING else {"get()": now}  # none yet, nor a default: set first, a lazy one's
    if isinstance(value, threading.local):  # the running thread's attributes (its own __getattribute__ finds them)
        return dict(value.__dict__)
    if isinstance(value, (io.StringIO, io.BytesIO)):
        return {"closed": True} if value.closed else {"getvalue()": value.getvalue(), "tell()": value.tell()}
    if cached_function(value):
        results = cached_results(value)
        return None if results is None else {"cache": CachedResults((CachedCall(k, r), r) for k, r in results.items())}
    if kind is types.ModuleType:  # a module of the user's held by something (BACKENDS["np"].HITS += 1)
        return _numbers_of(value) if users_file(getattr(value, "__file__", None)) else None
    if kind in _FRAMES:
        frame = getattr(value, _FRAMES[kind])
        return {
            "position": None if frame is None else frame.f_lasti,
            "locals": {} if frame is None else dict(frame.f_locals),
        }
    if _compiled_iterator(kind):  # count, a map, a list's or a deque's iterator, a csv reader
        # By its position: one value, no path into its pickling's parts. ``iter(f, sentinel)``
        # moves as ``f`` does: ``f`` by its own state.
        moved = {"position": repr(_position(value))}
        return {**moved, "__call__": value.__reduce__()[1][0]} if kind is _CALLING_ITERATOR else moved
    return None


def _numbers_of(module: types.ModuleType) -> dict[str, Any]:
    """The numbers and strings a module binds, which only binding anew changes (``HITS += 1``):
    compared where something holds the module (a class attribute, a dict, a closure), as those
    of the function's own module are."""
    return {k: v for k, v in vars(module).items() if type(v) in REBOUND_ONLY and not special(k)}


def _compiled_iterator(kind: type) -> bool:
    """Whether ``kind`` is an iterator whose ``__next__`` is compiled code (the builtins',
    itertools', a deque's, a csv reader): its position is no attribute, and is read as its
    pickling or what it holds tells it (see ``_position``); a class of the user's is compared by
    its attributes, a generator by its frame."""
    step = inspect.getattr_static(kind, "__next__", None)
    # A file or a stream reads through its own buffers, which no pickling shows: not compared.
    compiled = step is not None and not isinstance(step, types.FunctionType)
    return compiled and kind not in _FRAMES and not issubclass(kind, io.IOBase)


def holds_through(value: Any) -> bool:
    """Whether ``held_through(value)`` has something, told without walking a closure's
    captures: a closure may capture itself (``wrapper.calls += 1`` inside ``wrapper``)."""
    if type(value) is types.FunctionType:
        return bool(value.__closure__) and users_function(value)
    return held_through(value) is not None


def _position(value: Any, depth: int = 8) -> Any:
    """Where an iterator stands, as its pickling's parts tell it (``count(5)``'s number, a list
    iterator's index, what is left of a dict's, a ``cycle``'s saved items), iterators among
    them and a generator's frame walked ``depth`` levels down: data to compare. A collection
    among them by its length (how much is left, or saved), not by its items. One that does not
    pickle (``pairwise``, and itertools' from Python 3.14, whose pickling 3.12 deprecates) by
    its ``repr`` (``count``'s shows its position) and what it holds (``gc.get_referents``)."""
    kind = type(value)
    if kind in _SIZED and not (kind in (str, bytes) and len(value) <= _SHORT):
        return kind.__name__, len(value)
    if not depth:
        return value
    if kind in _FRAMES:
        frame = getattr(value, _FRAMES[kind])
        return None if frame is None else (frame.f_lasti, *(_position(v, depth - 1) for v in frame.f_locals.values()))
    if not hasattr(kind, "__next__"):
        return value
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            reduced = value.__reduce_ex__(pickle.HIGHEST_PROTOCOL)  # a stream's by its __getstate__
        state = reduced[2] if len(reduced) > 2 else ()
        if type(state) is dict:  # an object's attributes (an iterator of the user's class inside): each by name
            state = tuple(part for item in state.items() for part in item)
        parts = (*reduced[1], *(state if type(state) is tuple else (state,)))  # its arguments and state, not its maker
    except Exception:  # no pickling of its own
        parts = (repr(value), *gc.get_referents(value))
    return tuple(_position(part, depth - 1) for part in parts)


#: Collections an iterator's position holds by their length (strings and bytes longer than
#: ``_SHORT``): what is left of them, or saved, not their items.
_SIZED = frozenset({list, tuple, dict, set, frozenset, str, bytes, bytearray, collections.deque})
_SHORT = 256
#: ``iter(callable, sentinel)``'s iterator.
_CALLING_ITERATOR = type(iter(int, 0))


#: What ``functools.lru_cache`` and ``functools.cache`` wrap a function in.
_LRU_CACHE = type(functools.lru_cache(maxsize=None)(lambda: None))


def cached_function(value: Any) -> bool:
    """Whether ``value`` is a function of the user's cached by ``functools.lru_cache`` or ``functools.cache``."""
    return type(value) is _LRU_CACHE and users_function(unwrapped(value, 1))


class CachedResults(dict[Any, Any]):
    """A cached function's results by their calls: one evicted (a bounded cache) is no change."""


class CachedCall(tuple[Any, int]):
    """A cached call's key, told apart by its result's identity: a call evicted and computed
    anew is another entry, its new result a cache filling. Shown as the key."""

    __slots__ = ()

    def __new__(cls, key: Any, result: Any) -> CachedCall:
        return tuple.__new__(cls, (key, id(result)))

    def __repr__(self) -> str:
        key = self[0]
        mark = next((i for i, k in enumerate(key) if type(k) is object), None) if type(key) is tuple else None
        if mark is None:
            return repr(key)
        named = key[mark + 1 :]  # lru_cache's key: the arguments, a marker, then keywords and values
        shown = [repr(a) for a in key[:mark]] + [f"{k}={v!r}" for k, v in zip(named[::2], named[1::2], strict=False)]
        return f"({', '.join(shown)})"


def cached_results(wrapper: Any) -> dict[Any, Any] | None:
    """An ``lru_cache``'d function's results by their keys (a tokenizer ``get_tok()`` returns,
    whose methods count its calls), read through the garbage collector's referents of the
    wrapper, since no public API lists them: the cache dict (its values the results, or for a
    bounded cache its links), and, for a bounded cache, each link's key followed by its
    result. None where they cannot be told apart."""
    referents = gc.get_referents(wrapper)
    own = own_dict(wrapper)
    cache = next((r for r in referents if type(r) is dict and r is not own), None)
    if cache is None:
        return None
    if not any(type(v).__name__ == "_lru_list_elem" for v in cache.values()):
        return dict(cache)
    keys, results, i = {id(key) for key in cache}, {}, 0
    while i < len(referents) - 1:
        if id(referents[i]) in keys and referents[i] not in results:
            results[referents[i]], i = referents[i + 1], i + 2
        else:
            i += 1
    return results if len(results) == len(cache) else None


#: Bound methods: of Python code, of builtins, of slot wrappers.
_BOUND_METHODS = frozenset({types.MethodType, types.BuiltinMethodType, types.MethodWrapperType})


def context_value(var: contextvars.ContextVar[Any]) -> Any:
    """A context variable's value as the function reads it (its default where none is set);
    ``NOTHING`` where it has neither."""
    try:
        return var.get()
    except LookupError:
        return NOTHING


#: Generators and coroutines, by the attribute holding their frame: where they stand and their locals.
_FRAMES = {types.GeneratorType: "gi_frame", types.CoroutineType: "cr_frame", types.AsyncGeneratorType: "ag_frame"}


def function_state(fn: types.FunctionType) -> dict[str, Any]:
    """What a function holds of its own that is data: its attributes (``f.calls``), its
    parameters' mutable defaults (``seen=[]``), what its closure captured (a closure of the
    user's it captured by what that holds in turn)."""
    state = {k: v for k, v in vars(fn).items() if not special(k) and not isinstance(v, CODE)}
    state.update(data_defaults(fn))
    state.update((k, v) for k, v in captured(fn).items() if not isinstance(v, BY_REFERENCE) or holds_through(v))
    return state


def captured(fn: types.FunctionType) -> dict[str, Any]:
    """What a function's closure captured, by name; a name not bound yet left out."""
    values = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        with contextlib.suppress(ValueError):  # an empty cell
            values[name] = cell.cell_contents
    return values


def data_defaults(fn: types.FunctionType) -> dict[str, Any]:
    """A function's parameters' defaults that are data, by parameter (``def f(a, seen=[])``)."""
    code = fn.__code__
    positional = code.co_varnames[: code.co_argcount]
    defaults = dict(zip(positional[len(positional) - len(fn.__defaults__ or ()) :], fn.__defaults__ or (), strict=True))
    defaults.update(fn.__kwdefaults__ or {})
    # Rebound too (f.__defaults__ = (5,)); a module of the user's by its numbers (def f(x, m=backend)).
    return {k: v for k, v in defaults.items() if not isinstance(v, CODE) or type(v) is types.ModuleType}


def special(name: str) -> bool:
    """A dunder name, or a sunder one (``_member_map_``: an Enum's own bookkeeping of its members,
    which are read by their own names)."""
    return len(name) > 2 and name[0] == name[-1] == "_"


def users_function(fn: Any) -> bool:
    """A function of the user's code: a module's (not autoconvert's, nor generated code's), its
    file outside the standard library and installed packages."""
    name = fn.__globals__.get("__name__") if type(fn) is types.FunctionType else None
    if not isinstance(name, str) or name.partition(".")[0] == "autoconvert":
        return False
    return users_file(fn.__code__.co_filename)


def users_file(path: Any) -> bool:
    """A file of the user's code: outside the standard library (its frozen modules too:
    ``<frozen _collections_abc>``) and installed packages."""
    return (
        isinstance(path, str)
        and not path.startswith("<frozen ")
        and not os.path.abspath(path).startswith(_INSTALLED_CODE)
    )


def own_dict(value: Any) -> Any:
    """``value``'s ``__dict__`` as it is set, not as a ``__getattr__`` would make it up; None where it has none."""
    try:
        return object.__getattribute__(value, "__dict__")
    except AttributeError:
        return None


def unwrapped(value: Any, hops: int = 16) -> Any:
    """What ``value`` wraps (``__wrapped__``, as set by ``functools.wraps`` or a proxy's slot),
    through at most ``hops`` wrappers; ``value`` itself where it wraps nothing. An attribute
    ``__getattr__`` makes up (a config tree, an ``AttrDict``) is no wrapping."""
    for _ in range(hops):
        if inspect.getattr_static(value, "__wrapped__", NOTHING) is NOTHING:
            break
        value = value.__wrapped__
    return value


NOTHING = object()


def _by_reference(value: Any) -> bool:
    """Whether ``value`` pickles as a reference (a decorated function, a torchified module): the
    worker's is then its own module's object, no copy of the caller's, and what fills its
    internal caches is no change of an argument."""
    try:
        reduced = value.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    except Exception:  # it does not pickle: it cannot have crossed to a worker
        return True
    if isinstance(reduced, str):
        return True
    # A reference through autoconvert's resolver, or a lookup by name (``getLogger(name)``: a
    # logger is the process's own, reached by every logger of its tree).
    return type(reduced) is tuple and len(reduced) >= 2 and (reduced[0] is resolve or _looked_up_by_name(reduced))


def _looked_up_by_name(reduced: tuple[Any, ...]) -> bool:
    """A reduction that looks its object up by name: a function of names alone, no class made anew."""
    function, args = reduced[0], reduced[1]
    return isinstance(function, types.FunctionType) and type(args) is tuple and all(type(a) is str for a in args)


def _entries(state: Mapping[Any, Any], seen: set[int]) -> dict[Any, Any]:
    """``state``'s entries as they are now: dicts, lists, tuples and objects walked (each once),
    leaves as bytes."""
    entries: dict[Any, Any] = {}
    # A dict subclass as the builtin holds it: its own items() and __iter__ may make new objects
    # (a dok_matrix iterates its rows).
    for key, value in dict.items(state) if isinstance(state, dict) else state.items():
        inner = _inner(value)
        if inner is not None and id(value) not in seen:
            seen.add(id(value))
            entries[key] = State(type(value), _entries(inner, seen))
        else:  # a leaf; or met again (one list at two places), compared at its first: None, not compared
            entries[key] = None if inner is not None else leaf(value)
    keys = _object_keys(state) if isinstance(state, dict) else None
    if keys:  # objects a dict is keyed by, compared by their state (for m in registry: m.calls += 1)
        entries[_DICT_KEYS] = State(_Keys, _entries(keys, seen))
    return entries


def kinds_within(state: State) -> list[type]:
    """The classes of the objects a state holds, at any depth (an ``nn.Sequential``'s layers)."""
    kinds, stack = [], [state]
    while stack:
        current = stack.pop()
        kinds.append(current.kind)
        stack += [entry for entry in current.entries.values() if type(entry) is State]
    return kinds


def _object_keys(mapping: dict[Any, Any]) -> dict[int, Any]:
    """The keys of ``mapping`` that may have state of their own (see ``_may_hold_state``), by identity."""
    return {id(k): k for k in dict.keys(mapping) if _may_hold_state(k)}


def _may_hold_state(value: Any) -> bool:
    """Whether ``value`` is an object with attributes or slots of its own, or a mutable
    container: not a value such as a string, a number, a date or a decimal."""
    kind: type = type(value)
    return _kind_may_hold_state(kind)


@functools.lru_cache(maxsize=1024)
def _kind_may_hold_state(kind: type) -> bool:
    """``_may_hold_state`` of a type's instances, told once per type (a dict of 100,000 keys asks it of each)."""
    if kind in _STATELESS:
        return False
    return kind.__dictoffset__ != 0 or bool(getattr(kind, "__slots__", None)) or kind in (list, dict, set)


def value_type(kind: type) -> bool:
    """Whether ``kind``'s objects are values of compiled code: no attributes of their own, an
    equality and a hash of their own (``datetime.date``, ``decimal.Decimal``, ``np.dtype``,
    ``torch.device``, ``re.Pattern``). Immutable, so a change is a name or an attribute bound to
    another one (``elapsed += timedelta(...)``), compared by its pickle as a builtin value is."""
    if kind.__module__ == "builtins" or kind.__dictoffset__ != 0 or kind.__hash__ is None:
        return False
    return getattr(kind, "__eq__") is not vars(object)["__eq__"]  # noqa: B009 - object's, read as the class reads it


def is_array(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return isinstance(value, (np.ndarray, np.generic)) or (torch is not None and isinstance(value, torch.Tensor))


def leaf(value: Any) -> Any:
    """A leaf's value, to compare with ``==``: a plain scalar itself (with its type: ``1`` is not
    ``True``; a float as its hex, so that a NaN equals itself), an array's, a tensor's or a NumPy
    scalar's dtype, shape and data (a tensor's pickle is not the same twice), a builtin's
    (a list, a tuple, a set) pickle; None where it has none to compare."""
    kind = type(value)
    if kind in _LEAF_TYPES:
        return kind, value
    if kind is float:
        return kind, value.hex()
    if kind is np.ndarray and not value.dtype.hasobject:  # and whether it may be written (setflags)
        return value.dtype, value.shape, value.tobytes(), value.flags.writeable
    if kind is array.array:
        return value.typecode, value.tobytes()
    if _c_data(value):  # a C array or structure (CARR[0] += 1): its bytes
        return kind, bytes(memoryview(value).cast("B"))
    if kind is memoryview:  # a view of a bytearray, an array: what it shows
        with contextlib.suppress(ValueError):  # released
            return kind, value.format, value.shape, value.tobytes()
        return None
    if kind is set:  # by its items, whatever order a pickle would give them in
        return kind, frozenset(value)
    if isinstance(value, np.ndarray):  # a mask, a unit, objects: in its pickle
        with contextlib.suppress(Exception):
            return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.device.type == "meta":
            return None
        data = value.detach().cpu()
        try:
            raw = data.numpy().tobytes()
        except (TypeError, RuntimeError):  # a dtype NumPy lacks (bfloat16), a conjugate or negative view
            raw = data.resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        # Whether it records gradients (a model's parameters frozen for fine-tuning), and a
        # leaf's gradient (a parameter's, which backward() fills or accumulates).
        grad = value.grad if value.requires_grad and value.is_leaf else None
        return value.dtype, value.shape, raw, value.requires_grad, None if grad is None else leaf(grad)
    if isinstance(value, np.generic) and not value.dtype.hasobject:
        return kind, value.tobytes()
    if value_type(kind):  # a date, a Decimal, a dtype, a device, a compiled pattern: which one it is
        with contextlib.suppress(Exception):
            return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        return None
    if kind.__module__ != "builtins":
        # State its library keeps to itself (a compiled tree's query counters, a generator's
        # position), which its reads change: no change of what the caller sees.
        return None
    try:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    except Exception:  # a lock, a file, a generator: nothing the caller would compare either
        return None
