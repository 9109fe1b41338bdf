"""One task of a ``batched`` map: a run of consecutive samples, wherever the executor runs it.

Sending one task per sample costs a round trip (and a pickled function) per sample, which
for small samples outweighs the work. A chunk carries the function once, its arguments, and
the batched ones as sources indexed per sample. It imports no torch: on a process pool or a
Dask cluster it runs on NumPy arrays.
"""

from __future__ import annotations

import array
import contextlib
import contextvars
import enum
import functools
import io
import math
import mmap
import os
import pathlib
import pickle
import struct
import sys
import tempfile
import threading
import time
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from autoconvert._conversions._containers import node_for
from autoconvert._conversions._mutations import Rebuilt, changed, path_to, rebuilt
from autoconvert._errors import GetAttrKey, KeyEntry, MappingKey, SequenceKey, keystr

from ._caps import capped
from ._reads import (
    Attributes,
    ReadGlobals,
    Reads,
    attributes_of,
    class_attributes,
    kinds_of,
    modules_of,
    names_class_bodies_read,
    per_thread_named,
    reads_of,
)
from ._seeds import Seeds
from ._states import (
    BUILTIN_DATA,
    NOTHING,
    REBOUND_ONLY,
    State,
    attributes_dropped_by_pickle,
    context_value,
    first_change,
    flag_alone,
    generator_at,
    gradient_alone,
    is_array,
    kinds_within,
    leaf,
    snapshot,
    unwrapped,
    value_type,
)
from ._tensor_bytes import plain_tensor


class Batch:
    """In a chunk's arguments, a batched argument: sample ``i`` is ``sources[source][i]``."""

    __slots__ = ("source",)

    def __init__(self, source: int) -> None:
        self.source = source


class Window:
    """Samples ``offset`` onwards of a batched argument, sent inside a chunk: ``values[k]`` is
    sample ``offset + k`` of the batch."""

    __slots__ = ("offset", "values")

    def __init__(self, values: Any, offset: int) -> None:
        self.values, self.offset = values, offset


class Shared:
    """An array in a file in shared memory (tmpfs where the system has one, as joblib uses for
    its process pools), at ``offset``: workers on the caller's machine, and the caller, map it
    instead of receiving it through a pipe."""

    __slots__ = ("dtype", "offset", "path", "shape")

    def __init__(self, path: str, offset: int, shape: tuple[int, ...], dtype: str) -> None:
        self.path, self.offset, self.shape, self.dtype = path, offset, shape, dtype


def shareable(value: Any) -> bool:
    """An array that crosses as its bytes: a plain ndarray of numbers, not empty."""
    return type(value) is np.ndarray and value.dtype.kind in "biufc" and value.size > 0


def share(arrays: Sequence[NDArray[Any]], folder: str) -> list[Shared]:
    """Write ``arrays`` to one new file in ``folder``; where each now is."""
    handle, path = tempfile.mkstemp(suffix=".arrays", dir=folder)
    shared = []
    with os.fdopen(handle, "wb") as file:
        for array in arrays:
            contiguous = array if array.flags.c_contiguous else array.copy(order="C")  # 0-d stays 0-d
            file.write(bytes(-file.tell() % 64))  # each array aligned as NumPy aligns its own
            shared.append(Shared(path, file.tell(), contiguous.shape, contiguous.dtype.str))
            file.write(contiguous.data)
    return shared


def shared_where_large(values: list[Any], folder: str, least: float) -> list[Any]:
    """``values`` with its arrays written to one file in ``folder`` (each replaced by where it
    is) where together they take at least ``least`` bytes; else ``values`` itself."""
    arrays = [k for k, value in enumerate(values) if shareable(value)]
    if sum(values[k].nbytes for k in arrays) < least:
        return values
    placed = list(values)
    for k, shared in zip(arrays, share([values[k] for k in arrays], folder), strict=True):
        placed[k] = shared
    return placed


def in_shared_memory(source: Any) -> bool:
    """A source written by ``share``: an array, or a list with arrays among it."""
    return type(source) is Shared or (type(source) is list and any(type(v) is Shared for v in source))


def opened(values: list[Any], remove: bool) -> list[Any]:
    """``values`` with each ``Shared`` an array over its file, mapped copy-on-write (so
    writable, as a received array is: a function that writes its input writes its own
    pages); each file removed once mapped where ``remove``, its memory then living as long
    as the arrays."""
    files: dict[str, mmap.mmap] = {}
    for k, value in enumerate(values):
        if type(value) is Shared:
            if value.path not in files:
                with open(value.path, "rb") as file:
                    files[value.path] = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
                if remove:
                    os.remove(value.path)
            array = np.frombuffer(files[value.path], value.dtype, math.prod(value.shape), value.offset)
            values[k] = array.reshape(value.shape)
    return values


class Running:
    """Cancellation that workers on the caller's machine see: a file that exists while the map runs.
    Once it is gone (removed on a failure, or with the map's folder), chunks stop before their
    next sample."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def start(self) -> Running:
        pathlib.Path(self.path).touch()
        return self

    def is_set(self) -> bool:
        return not os.path.exists(self.path)

    def set(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)


class Origin:
    """Whether a chunk is the caller's own or a copy that reached a worker by pickling (by any
    pickler: ``sent``'s, an executor's own): its unpickling says so, so that a runner needs no
    flag of its own for a chunk to know its arguments are copies. ``worker`` names the
    runner's workers (``"a Dask worker"``) and ``caller`` is the caller's process, for the
    refusals of changes made to copies."""

    __slots__ = ("caller", "copied", "worker")

    def __init__(self, copied: bool = False, worker: str = "a worker", caller: int | None = None) -> None:
        self.copied, self.worker = copied, worker
        self.caller = os.getpid() if caller is None else caller

    def __reduce__(self) -> tuple[Any, ...]:
        return Origin, (True, self.worker, self.caller)

    def where(self) -> str:
        """Where the copy was changed: ``a Dask worker in the caller's process``."""
        process = "the caller's process" if os.getpid() == self.caller else "another process"
        return f"{self.worker} in {process}"


#: The origin of every chunk made in the caller's process.
HERE = Origin()


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
    seeds: Seeds | None = None  # batched(seed=): each sample's random streams
    threads: int | None = None  # the libraries' threads in a worker process while it runs (see _caps)
    sink: Any = None  # on threads: where array results are written as they come (a _gather.Sink)
    #: Sources handed read-only in the caller, made read-only again where they arrived by
    #: pickling or mapping (other processes), so that every runner hands the same samples.
    frozen: frozenset[int] = frozenset()
    #: HERE in the caller's process; a copy where the chunk was pickled to another (see Origin).
    origin: Origin = HERE
    #: Where it runs in the caller's process in a context other than the caller's (a thread of a
    #: pool, in a copy of it), in words, with the caller's thread (an executor may run it there,
    #: in the caller's context); None in the caller's context, or another process.
    context: tuple[str, int] | None = None


#: How often a running chunk looks whether its map was cancelled: a Running file costs a
#: system call to look at, which next to samples of microseconds would cost more than they do.
CANCEL_CHECK_SECONDS = 0.002


def run(chunk: Chunk, sources: Sequence[Any]) -> list[Any]:
    """The chunk's results in order, or fewer where the map was cancelled meanwhile; a failing
    sample's exception carries a note naming it."""
    columns = [_column(_mapped(source), chunk.start, chunk.stop) for source in sources]
    for k, column in enumerate(columns):
        if k in chunk.frozen:
            columns[k] = _read_only_views(column)
        elif chunk.origin.copied:
            columns[k] = _writable(column)
    handed: Rebuilt | None = None
    guarded: list[tuple[str, NDArray[Any]]] = []
    held: list[tuple[Any, Any]] = []
    states: list[tuple[Any, State]] = []
    if chunk.origin.copied:
        handed, held, states = _containers_in(chunk)
        chunk, guarded = _guarded_chunk(chunk)
    results: list[Any] = []
    contexts, locals_here = _thread_bound(chunk)
    positions = _unseeded_positions(chunk)
    try:
        if chunk.threads is None:
            _loop(chunk, columns, results)
        else:
            with capped(chunk.threads):
                _loop(chunk, columns, results)
    except Exception as e:
        e.add_note(f"{chunk.label}: raised by sample {chunk.start + len(results)} of {chunk.size}")
        if isinstance(e, AttributeError) and locals_here:
            e.add_note(_thread_local_note(chunk, [place for place, _, _ in locals_here]))
        if (chunk.frozen or chunk.origin.copied) and isinstance(e, (ValueError, TypeError)):
            _tell_rejection(e, chunk, columns, len(results), guarded)
        if guarded and isinstance(e, (ValueError, TypeError)):
            _refuse_lost_write(e, chunk, guarded)
        if chunk.origin.copied and isinstance(e, ValueError):
            _tell_flag_refused(e, chunk, states)
        raise
    try:
        _refuse_changes(chunk, handed, held, states)
    except ValueError:
        _remember_every_change(chunk, states)
        raise
    _refuse_unseeded_draws(chunk, positions)
    _refuse_set_per_thread(chunk, contexts, locals_here)
    _refuse_changed_before(chunk, states)
    return results


def _refuse_changes(
    chunk: Chunk, handed: Rebuilt | None, held: list[tuple[Any, Any]], states: list[tuple[Any, State]]
) -> None:
    """Refuse what the chunk's samples changed of the copies it holds: its container arguments,
    the arrays and sets they hold, the objects with state of their own, what it reads by name."""
    if handed and changed(handed.values()):
        raise _lost_change(chunk, next(o for o, _, before in handed.values() if changed([(o, o, before)])))
    for value, before in held:
        if leaf(value) != before:
            if gradient_alone(before, value):  # backward() filled or accumulated it
                raise _lost_change(chunk, value, [GetAttrKey("grad")])
            if _changed_by_a_write(value):
                raise _lost_write(
                    chunk,
                    _place_of(chunk, value),
                    "tensor" if is_array(value) and not isinstance(value, np.ndarray) else "array",
                    flag_alone(before, value),
                )
            raise _lost_change(chunk, value)
    for value, state in states:
        below = first_change(state, value)
        if below is not None:
            raise (
                _lost_read(chunk, value, below, state)
                if isinstance(value, (ReadGlobals, Attributes))
                else _lost_change(chunk, value, below or None)
            )


#: What a refused chunk changed in the copies a worker keeps for later chunks (its modules'
#: globals, a function's or a class's attributes), by (its owner's id, its name): the owner (kept
#: alive, so that its id stays its own) and where it is. A later chunk that reads it is refused:
#: that copy is no longer the caller's, and a read-only function would compute from it.
_CHANGED_COPIES: dict[tuple[int, str], tuple[Any, str]] = {}


def _remember_every_change(chunk: Chunk, states: list[tuple[Any, State]]) -> None:
    """Every name of what the function reads (a global, a class's or a function's attribute)
    that a refused chunk changed in this worker's copies, whichever change its refusal names."""
    for reads, state in states:
        if not isinstance(reads, (ReadGlobals, Attributes)):
            continue
        owner = reads.namespace if isinstance(reads, ReadGlobals) else reads.owner
        entries = dict(state.entries)
        while below := first_change(State(state.kind, entries), reads):
            first = below[0]
            name = first.name if isinstance(first, GetAttrKey) else str(first)
            if name not in entries:
                break
            place = f"{reads.place(name)} on {chunk.origin.where()}"
            _CHANGED_COPIES[(id(owner), name)] = (owner, place)
            value = _read_now(reads, name)
            # By itself too: a later copy of the function may read it (a script's cache on Dask).
            if not isinstance(value, (Attributes, *REBOUND_ONLY)) and not value_type(type(value)):
                _CHANGED_COPIES[(id(value), "")] = (value, place)
            del entries[name]


def _read_now(reads: ReadGlobals | Attributes, name: str) -> Any:
    """What ``reads`` holds under ``name`` now (a global, a class's attribute, a capture)."""
    return reads.namespace.get(name) if isinstance(reads, ReadGlobals) else reads.__getstate__().get(name)


def _refuse_changed_before(chunk: Chunk, states: list[tuple[Any, State]]) -> None:
    """Refuse a chunk that read what an earlier refused chunk changed in this worker's copies (one
    that changed it again is refused for that change, naming it)."""
    if not _CHANGED_COPIES:
        return
    for value, state in states:
        # Classes a payload made here are compared for every chunk; a later chunk reads them by name.
        if isinstance(value, (ReadGlobals, Attributes)) and not (
            type(value) is Attributes and value.owner in _MADE_HERE
        ):
            owner = value.namespace if isinstance(value, ReadGlobals) else value.owner
            for name in state.entries:
                if isinstance(value, ReadGlobals) and not value.reads(name):
                    continue
                kept = _kept_change(owner, name) or _kept_change(_read_now(value, name), "")
                if kept is not None:
                    raise ValueError(
                        f"{chunk.label}: an earlier call changed {kept}, and was refused: that copy is no longer "
                        "the caller's, and the function reads it. Fix: start the executor's workers anew (a new pool, "
                        "a restarted cluster), and return what the function computes rather than changing it"
                    )


def _kept_change(owner: Any, name: str) -> str | None:
    """Where an earlier refused chunk changed ``owner``'s ``name`` (``""``: ``owner`` itself) in
    this worker's copies; None where none did."""
    kept = _CHANGED_COPIES.get((id(owner), name))
    return kept[1] if kept is not None and kept[0] is owner else None


def _guarded_chunk(chunk: Chunk) -> tuple[Chunk, list[tuple[str, NDArray[Any]]]]:
    """A copied chunk whose writable array arguments are read-only views (with their paths):
    a write into one would change the copy alone, where the caller's own array takes it."""
    guarded: list[tuple[str, NDArray[Any]]] = []

    def guard(root: KeyEntry, value: Any) -> Any:
        if not isinstance(value, np.ndarray) or not value.flags.writeable:
            return value
        view = value.view()
        view.flags.writeable = False
        guarded.append((_path(chunk, [root]), view))
        return view

    args = tuple(guard(SequenceKey(i), a) for i, a in enumerate(chunk.args))
    kwargs = {k: guard(MappingKey(k), v) for k, v in chunk.kwargs.items()}
    return (chunk._replace(args=args, kwargs=kwargs) if guarded else chunk), guarded


def _refuse_lost_write(error: ValueError | TypeError, chunk: Chunk, guarded: list[tuple[str, Any]]) -> None:
    """Where ``error`` is NumPy refusing a write into a guarded array argument, the refusal of
    that write, which on a copy would silently not reach the caller's array."""
    from autoconvert._failures._failures import wrote_into_handed  # only when a sample failed

    hit = wrote_into_handed(error, guarded, {})
    if hit:
        raise _lost_write(chunk, f"argument {hit[0]}") from error


def _lost_write(chunk: Chunk, where: str, kind: str = "array", flag: str | None = None) -> ValueError:
    """The refusal of a write into the array (or tensor: ``kind``) at ``where`` (``argument
    counts``, ``counts, captured by the function``), on a copy; or of a change of its ``flag``
    alone (``WRITEABLE``, ``requires_grad``)."""
    what, change = (f"changed the {flag} flag of", "change") if flag else ("wrote into", "write")
    return ValueError(
        f"{chunk.label}: the function {what} {where}, {'an' if kind == 'array' else 'a'} {kind}, on "
        f"{chunk.origin.where()}, which "
        f"holds a copy of it: the {change} cannot reach the caller's {kind}, as it does {_FIX}"
    )


#: Where a change to an argument reaches the caller, and so the fix for one made on a copy.
_FIX = (
    "where the samples run sequentially or on threads. Fix: return what the function computes, or run it "
    "sequentially (no executor) or on threads (workers=)"
)


def _place_of(chunk: Chunk, target: Any) -> str:
    """Where ``target`` is, for a refusal: ``argument seen['hist']``, ``self.counts, the
    callable object``, ``counts, captured by the function``."""
    where, whose = _located(chunk, target)
    return f"argument {where}" if whose == "argument" else f"{where}, {whose}"


def _located(chunk: Chunk, target: Any) -> tuple[str, str]:
    """The path of ``target``, held in one of the chunk's arguments (``seen['hist']``) or by
    the function it calls (see _held_by_function), and whose it is there (``"argument"``)."""
    for root, value in _roots(chunk):
        keys = path_to(value, target)
        if keys is None and type(value) is np.ndarray:
            keys = _in_object_array(value, target)
        if keys is not None:
            return _path(chunk, [root, *keys]), "argument"
    for name, value, whose in _held_by_function(chunk.fn, chunk.origin):
        keys = path_to(value, target)
        if keys is not None:
            return keystr(name, keys), whose
    return "an argument", "argument"


def _in_object_array(array: NDArray[Any], target: Any) -> list[KeyEntry] | None:
    """Where an object array holds ``target`` (``[0]``, ``[1, 2]``); None where it does not."""
    if not array.dtype.hasobject:
        return None
    for flat, item in enumerate(array.ravel().tolist()):
        if item is target:
            return [f"[{', '.join(str(int(i)) for i in np.unravel_index(flat, array.shape))}]"]
    return None


def _roots(chunk: Chunk) -> list[tuple[KeyEntry, Any]]:
    """The chunk's arguments, each with the key it is passed under."""
    return [(SequenceKey(i), a) for i, a in enumerate(chunk.args)] + [
        (MappingKey(k), v) for k, v in chunk.kwargs.items()
    ]


def _held_by_function(fn: Any, origin: Origin, arguments: Sequence[Any] = ()) -> list[tuple[str, Any, str]]:
    """What the function a chunk calls carries to the workers with it, which its calls may
    change as they change their arguments: ``(name, value, whose)``: a bound method's object
    (``self``) or class, a callable object itself (``self``), a partial's bound arguments (by
    their parameters' names), what a function reads by name where it holds copies (see
    _reads: its captures, defaults and attributes, the module globals its code names), through
    wrappers (``__wrapped__``, at most ``_FOLLOWED``); ``arguments``: the chunk's, whose code
    (a callback's, an object's methods) the function may run too."""
    from autoconvert._spec._signature import Parameters  # only where a function holds state

    held: list[tuple[str, Any, str]] = []
    if os.getpid() != origin.caller:
        held += [("", attributes_of(made), "reads") for made in list(_MADE_HERE)]
    carried: list[Any] = [a for a in arguments if type(a) is not Batch]  # whose code it may run (see _reads.reads_of)
    for _ in range(_FOLLOWED):
        if isinstance(fn, functools.partial):
            params = Parameters(fn.func)
            held += [(params.positional_name(i, 0), a, "argument") for i, a in enumerate(fn.args)]
            held += [(params.keyword_name(str(k)), v, "argument") for k, v in fn.keywords.items()]
            carried += [*fn.args, *fn.keywords.values()]
            fn = fn.func
            continue
        if isinstance(fn, types.MethodType):
            owner = fn.__self__
            carried.append(owner)
            if isinstance(owner, type):  # a class method: what its class holds (cls.count += 1)
                held += [("cls", a, "the class the method is bound to") for a in class_attributes(owner, origin.caller)]
            elif not isinstance(owner, types.ModuleType):
                held.append(("self", owner, "the object the method is bound to"))
                held += [("cls", a, "the class of the object") for a in class_attributes(type(owner), origin.caller)]
            fn = fn.__func__
            continue
        if isinstance(fn, types.FunctionType):  # a decorator's wrapper too: what its closure keeps (a call count)
            held += [("", reads, "reads") for reads in reads_of(fn, origin.caller, carried)]
            carried.append(fn)  # a library's wrapper: what its attributes hold (a singledispatch registry)
        elif isinstance(fn, (types.BuiltinFunctionType, type)):
            data = getattr(fn, "__self__", None)  # list.append, counts.fill: a method of data it may change
            if isinstance(data, BUILTIN_DATA) or is_array(data):
                held.append(("self", data, "the object the method is bound to"))
            return held
        else:  # a callable object, a decorator written as a class: its attributes, its method's globals
            held.append(("self", fn, "the callable object"))
            carried.append(fn)
            call = type(fn).__call__
            if unwrapped(fn, 1) is fn and isinstance(call, types.FunctionType):
                fn = call
                continue
        inner = unwrapped(fn, 1)
        if inner is fn:
            return held
        fn = inner
    return held


#: How many wrappers, partials and bound methods deep a function is followed.
_FOLLOWED = 16


def _path(chunk: Chunk, keys: list[KeyEntry]) -> str:
    """The path of an argument of the chunk's calls from its parameter's name: ``seen``,
    ``batch['masks'][2]`` (``args[1]`` where the function has no signature to name it)."""
    from autoconvert._spec._signature import Parameters  # only for a refusal

    root, *below = keys
    params = Parameters(chunk.fn, held=True)  # a method's instance leads the chunk's arguments
    if isinstance(root, SequenceKey):
        return keystr(params.positional_name(root.index, 0), below)
    assert isinstance(root, MappingKey)  # a keyword argument's
    return keystr(params.keyword_name(str(root.key)), below)


#: Mutable builtins that are no containers of the registry (their items are not converted):
#: compared by what they hold after the samples (see _states.leaf), as arrays and tensors are.
_MUTABLE_LEAVES = (set, bytearray, array.array)


def _changed_by_a_write(value: Any) -> bool:
    """Whether a change of ``value`` (see _held) is a write: an array's, a tensor's."""
    return type(value) is array.array or is_array(value)


def _containers_in(chunk: Chunk) -> tuple[Rebuilt, list[tuple[Any, Any]], list[tuple[Any, State]]]:
    """Every container among a copied chunk's arguments (nested ones too, each once), with
    what it holds now; every set, bytearray, ``array.array`` and array a container holds, with
    what it holds; every other object with a state of its own (``_states``) with that state:
    to tell after the samples whether the function changed one."""
    records: Rebuilt = {}
    held: dict[int, tuple[Any, Any]] = {}
    states: dict[int, tuple[Any, State]] = {}
    stack = [(value, False) for value in (*chunk.args, *chunk.kwargs.values())]
    # What the function holds is compared whole: no view guards an array a partial bound. The code
    # its arguments run (a callback, an argument object's methods) reads globals as its own does.
    arguments = (*chunk.args, *chunk.kwargs.values())
    stack += [(value, True) for _, value, _ in _held_by_function(chunk.fn, chunk.origin, arguments)]
    classes: dict[int, type] = {}  # of what it is handed and holds: their modules' classes are compared too
    while stack:
        value, contained = stack.pop()
        for kind in kinds_of(value):
            classes[id(kind)] = kind
        if type(value) in _MUTABLE_LEAVES or (contained and _written_array(value)):
            held[id(value)] = (value, leaf(value))
            continue
        if isinstance(value, np.ndarray):  # an argument itself: its data guarded instead (see _guarded_chunk)
            if value.dtype.hasobject:  # but the objects an object array holds (tracks[0].hits += 1)
                stack.extend((item, True) for item in value.ravel().tolist())
            continue

        node = node_for(type(value))
        if node is not None and id(value) not in records:
            rebuilt(records, value, value)
            stack.extend((child, True) for _, child in node.items(value))
        elif node is None and type(value) is not Batch and id(value) not in states and not _callers_own(chunk, value):
            state = snapshot(value)
            if state is not None:
                states[id(value)] = (value, state)
    for _, state in states.values():  # the objects they hold (a torch module's layers)
        classes.update((id(kind), kind) for kind in kinds_within(state))
    compared = {id(reads.namespace) for reads, _ in states.values() if type(reads) is ReadGlobals}
    for reads in modules_of(classes.values(), chunk.origin.caller):
        state = snapshot(reads) if id(reads.namespace) not in compared else None
        if state is not None:
            states[id(reads)] = (reads, state)
    return records, list(held.values()), list(states.values())


def _callers_own(chunk: Chunk, value: Any) -> bool:
    """Whether ``value`` reached the chunk as the caller's own object, no copy: an Enum member
    (pickled by its name) unpickled in the caller's process."""
    return isinstance(value, enum.Enum) and os.getpid() == chunk.origin.caller


def _written_array(value: Any) -> bool:
    """An array in a container argument that a write can change (its memory the worker's copy),
    or a tensor the function carries (a partial's bound one): compared after the samples, since
    a write into a temporary (``state["hist"][k] += 1``) cannot be told from the failure of one
    guarded read-only."""
    if isinstance(value, np.ndarray):
        return value.flags.writeable and not value.dtype.hasobject
    torch = sys.modules.get("torch")  # never imported here: a tensor crossed only where it is
    return torch is not None and isinstance(value, torch.Tensor)


def _lost_change(chunk: Chunk, target: Any, below: list[KeyEntry] | None = None) -> ValueError:
    """The refusal of a change the function made to ``target``, among its arguments, on a
    copy in a worker (``below``: the attribute or key of an object's state it changed):
    the caller's container or object, which the same call in the caller's process changes,
    would silently stay as it was."""
    where, whose = _located(chunk, target)
    owner = f"argument {where}" if whose == "argument" else f"{where}, {whose}"
    depth = None if below is None else generator_at(target, below)
    if below is not None and depth is not None:
        return _drew(chunk, f"{keystr(where, below[:depth])}, in {owner}" if depth else owner)
    kind = "container" if below is None else "object"
    what = f"{owner}, a {kind}," if below is None else f"{keystr(where, below)}, in {owner},"
    copy = "it" if below is None else where
    return ValueError(
        f"{chunk.label}: the function changed {what} on {chunk.origin.where()}, which holds a copy of {copy}: the "
        f"change cannot reach the caller's {kind}, as it does {_fix(below)}"
    )


def _fix(below: Sequence[KeyEntry] | None) -> str:
    """Where a change reaches the caller, and the fix for one made on a copy; for a gradient
    ``backward()`` filled, the way to take one that leaves ``.grad`` alone."""
    if below and below[-1] == GetAttrKey("grad"):
        return _FIX.replace("Fix: ", "Fix: take the gradients with torch.autograd.grad (it leaves .grad as it was), ")
    return _FIX


def _lost_read(chunk: Chunk, reads: Reads, below: list[KeyEntry], state: State) -> ValueError:
    """The refusal of a change the function made, on a copy, to what it reads by name (a
    global of its module, what its closure captured): a write into an array (``counts[0] +=
    1``), a change within an object or a container (``log.append(x)``), or binding it anew
    (``global n; n += 1``)."""
    first, *inside = below
    name = first.name if isinstance(first, GetAttrKey) else str(first)
    value, where = reads.__getstate__().get(name), reads.place(name)
    depth = generator_at(value, inside)
    if depth is not None:
        return _drew(chunk, f"{keystr(name, inside[:depth])}, in {where}" if depth else where)
    if not inside and is_array(value):
        flag = flag_alone(state.entries.get(name), value)
        return _lost_write(chunk, where, "array" if isinstance(value, np.ndarray) else "tensor", flag)
    what = f"{keystr(name, inside)}, in {where}," if inside else f"{where},"
    named = reads.named(name)
    return ValueError(
        f"{chunk.label}: the function changed {what} on {chunk.origin.where()}, which holds a copy of {named}: the "
        f"change cannot reach the caller's {named}, as it does {_fix(inside)}"
    )


def _off(chunk: Chunk) -> bool:
    """Whether the chunk runs in the caller's process in a context other than the caller's: a
    thread of a pool (see Chunk.context), a Dask worker thread (a copy in the caller's process)."""
    if chunk.context is not None:
        return threading.get_ident() != chunk.context[1]
    return chunk.origin.copied and os.getpid() == chunk.origin.caller


def _thread_of(chunk: Chunk) -> str:
    """Where a chunk off the caller's thread ran, for a refusal: its pool's thread, or the worker."""
    return chunk.context[0] if chunk.context is not None else chunk.origin.where()


def _thread_bound(
    chunk: Chunk,
) -> tuple[list[tuple[str, contextvars.ContextVar[Any], Any]], list[tuple[str, threading.local, dict[str, Any]]]]:
    """Off the caller's thread, what the function reads that is its context's or its thread's:
    each context variable and thread-local it names, where it is, and its value or attributes
    as the chunk starts (a thread-local's class's ``__init__`` runs here first)."""
    if not _off(chunk):
        return [], []
    return (
        [(place, var, context_value(var)) for place, var in per_thread_named(chunk.fn, contextvars.ContextVar)],
        [(place, own, dict(vars(own))) for place, own in per_thread_named(chunk.fn, threading.local)],
    )


def _refuse_set_per_thread(
    chunk: Chunk,
    contexts: list[tuple[str, contextvars.ContextVar[Any], Any]],
    locals_here: list[tuple[str, threading.local, dict[str, Any]]],
) -> None:
    """Refuse a context variable set anew, or a thread-local's attribute changed, off the
    caller's thread (see _thread_bound): the caller's own never sees it. An attribute a
    thread-local only gains (a per-thread cache filled) is its thread's."""
    for place, var, was in contexts:
        if _set_anew(was, context_value(var)):
            raise _context_lost(chunk, place, var)
    for place, own, before in locals_here:
        now = vars(own)
        name = next((k for k in before if k not in now or _set_anew(before[k], now[k])), None)
        if name is not None:
            raise _thread_local_lost(chunk, place, name)


def _set_anew(was: Any, now: Any) -> bool:
    """Whether a context variable read ``was`` before a chunk and ``now`` after it was set to
    another value: not where it is the same or an equal value (set up and back down), nor
    where it had none (and no default) before, a lazy one's first value."""
    if now is was or was is NOTHING:
        return False
    equal = leaf(now)
    return equal is None or equal != leaf(was)


def _context_lost(chunk: Chunk, place: str, var: contextvars.ContextVar[Any]) -> ValueError:
    """The refusal of a context variable's value set in a context other than the caller's."""
    where = _thread_of(chunk)
    return ValueError(
        f"{chunk.label}: the function set context variable {var.name!r} ({place}) on {where}: the value stays in "
        "that context and cannot reach the caller's, as it does where the samples run sequentially. Fix: return "
        "what the function computes, or run the samples sequentially (no executor)"
    )


def _thread_local_lost(chunk: Chunk, place: str, name: str) -> ValueError:
    """The refusal of a thread-local's attribute changed in a thread other than the caller's."""
    where = _thread_of(chunk)
    return ValueError(
        f"{chunk.label}: the function changed attribute {name} of {place}, a threading.local, on {where}: each "
        "thread has its own attributes, so the change cannot reach the caller's thread's, as it does where the "
        "samples run sequentially. Fix: return what the function computes, or run the samples sequentially "
        "(no executor)"
    )


def _thread_local_note(chunk: Chunk, places: list[str]) -> str:
    """Why an attribute the caller set on a thread-local may be missing where a sample ran."""
    where = _thread_of(chunk)
    return (
        f"autoconvert.batched: {', '.join(places)} is a threading.local, whose attributes are each thread's own: on "
        f"{where} it has none the caller's thread set. Fix: pass what the function reads as an argument, or run "
        "the samples sequentially (no executor)"
    )


def _tell_flag_refused(error: ValueError, chunk: Chunk, states: list[tuple[Any, State]]) -> None:
    """Where ``error`` is NumPy refusing to make an array writable that is none the samples'
    (``TABLE.setflags(write=True)``), name the read-only globals the function reads: a copy of
    one that arrived as a view of a read-only buffer cannot be made writable, and a change of
    its flag could not reach the caller's array anyway."""
    from autoconvert._adapters._table import REFUSED_FLAGS  # only when a sample failed
    from autoconvert._failures._failures import REJECTED_ELSEWHERE

    if hasattr(error, REJECTED_ELSEWHERE) or not any(words in str(error) for words in REFUSED_FLAGS):
        return
    places = [
        reads.place(name)
        for reads, _ in states
        if type(reads) is ReadGlobals
        for name in reads.names
        if isinstance(value := reads.namespace.get(name), np.ndarray) and not value.flags.writeable
    ]
    if places:
        error.add_note(
            f"{chunk.label}: {' or '.join(places)} is a read-only array, of which {chunk.origin.where()} holds a "
            "copy whose WRITEABLE flag cannot be set; a change of its flag could not reach the caller's array. Fix: "
            "copy it where the function writes (np.array(...)), or run the samples sequentially (no executor) or "
            "on threads (workers=)"
        )


def _drew(chunk: Chunk, place: str) -> ValueError:
    """The refusal of draws from a random generator on a copy: each copy draws what the others
    draw, and the caller's generator never moves."""
    return ValueError(
        f"{chunk.label}: the function drew from {place}, a random generator, on {chunk.origin.where()}, which holds a "
        "copy of it: every copy repeats the caller's draws, and the caller's generator does not move. Fix: pass "
        "seed= and draw from a parameter named rng, or run the samples sequentially (no executor) or on threads "
        "(workers=)"
    )


def _unseeded_positions(chunk: Chunk) -> dict[str, bytes]:
    """Where the global generators code draws from without asking stand (NumPy's, torch's CPU
    one where torch is loaded), in a worker process whose samples ``seed=`` does not seed
    there: each process holds its own, which the caller's never follows."""
    if not chunk.origin.copied or os.getpid() == chunk.origin.caller or (chunk.seeds and chunk.seeds.globals):
        return {}
    positions = {
        "NumPy's global generator (the one np.random.seed seeds)": pickle.dumps(np.random.get_state(legacy=False))
    }
    torch = sys.modules.get("torch")  # never imported here
    if torch is not None:
        positions["torch's default generator (the one torch.manual_seed seeds)"] = (
            torch.default_generator.get_state().numpy().tobytes()
        )
    return positions


def _refuse_unseeded_draws(chunk: Chunk, positions: dict[str, bytes]) -> None:
    """Refuse draws from a worker process's own global generator: workers started by fork
    repeat each other's draws (torch's starts at one seed in every process), none can be
    reproduced, and the caller's generator does not move as it does sequentially."""
    now = _unseeded_positions(chunk)
    for generator, position in positions.items():
        if now.get(generator, position) != position:
            raise ValueError(
                f"{chunk.label}: the function drew from {generator}, on {chunk.origin.where()}, which has its own: "
                "workers repeat each other's draws where they were started by fork, no run can be repeated, and the "
                "caller's generator does not move, as it does where the samples run sequentially or on threads. Fix: "
                "pass seed= (each sample then draws from its own stream, the same on every runner), or run the "
                "samples sequentially (no executor) or on threads (workers=)"
            )


def _read_only_views(column: Any) -> Any:
    """A column's samples read-only (views: the arrays they view keep their flags)."""
    if isinstance(column, np.ndarray):
        column = column.view()
        column.flags.writeable = False
        return column
    return [_read_only_views(sample) if isinstance(sample, np.ndarray) else sample for sample in column]


def _writable(column: Any) -> Any:
    """A copied chunk's column of a source the caller handed writable, with what arrived
    read-only copied (Ray's objects do, to a Ray task or a Ray pool's actor), so that every
    runner hands the same samples."""
    if isinstance(column, np.ndarray):
        return column if column.flags.writeable else column.copy()
    return [s.copy() if isinstance(s, np.ndarray) and not s.flags.writeable else s for s in column]


def _tell_rejection(
    error: ValueError | TypeError, chunk: Chunk, columns: list[Any], offset: int, guarded: list[tuple[str, Any]]
) -> None:
    """Where ``error`` is NumPy refusing a write into one of the failing sample's read-only
    arrays, or into a read-only array a copied chunk's container argument holds (a tensor the
    caller converted), say which on it: ``(source, sample)`` pairs, the key path of such an
    array from its argument. Its traceback, which tells them apart, stays in this process, and
    the caller's call raises its ReadOnlyError from them (see _executors' _rejected_in_caller).
    ``guarded``: the views of writable arguments that guard a copy (see _guarded_chunk), no caller's."""
    from autoconvert._failures._failures import REJECTED_ELSEWHERE, wrote_into_handed  # only when a sample failed

    samples = [(str(k), columns[k][offset]) for k in sorted(chunk.frozen)]
    told: dict[str, Any] = {k: (int(k), chunk.start + offset) for k, a in samples if isinstance(a, np.ndarray)}
    arrays = [(k, a) for k, a in samples if k in told]
    for j, (keys, a) in enumerate(_read_only_leaves(chunk, guarded) if chunk.origin.copied else []):
        told[f"leaf {j}"] = keys
        arrays.append((f"leaf {j}", a))
    hit = wrote_into_handed(error, arrays, {})
    if hit:
        setattr(error, REJECTED_ELSEWHERE, [told[k] for k in hit])


def _read_only_leaves(chunk: Chunk, guarded: list[tuple[str, Any]]) -> list[tuple[list[KeyEntry], NDArray[Any]]]:
    """The read-only arrays among the chunk's arguments (a partial's bound tensor, converted) and
    inside its container arguments, each once, with its key path from the argument
    (``[SequenceKey(1), MappingKey('arr')]``)."""
    roots = _roots(chunk)
    views = {id(view) for _, view in guarded}
    found = [
        ([root], v) for root, v in roots if isinstance(v, np.ndarray) and not v.flags.writeable and id(v) not in views
    ]
    seen: set[int] = set()
    stack: list[tuple[list[KeyEntry], Any]] = [([root], v) for root, v in roots]
    while stack:
        keys, value = stack.pop()
        node = node_for(type(value))
        if node is None or id(value) in seen:
            continue
        seen.add(id(value))
        for key, child in node.items(value):
            if isinstance(child, np.ndarray) and not child.flags.writeable:
                found.append(([*keys, key], child))
            else:
                stack.append(([*keys, key], child))
    return found


def _loop(chunk: Chunk, columns: list[Any], results: list[Any]) -> None:
    """The samples' results appended to ``results`` (so that a failure's index is its length).
    One batched positional argument with nothing else to do per sample is the loop a user
    writes by hand: ``fn(sample)`` over the batch; anything else assembles each call."""
    fn, args, kwargs, cancelled, seeds, sink = (
        chunk.fn,
        chunk.args,
        chunk.kwargs,
        chunk.cancelled,
        chunk.seeds,
        chunk.sink,
    )
    append = results.append
    simple = cancelled is None and seeds is None and sink is None
    if simple and not kwargs and len(args) == 1 and type(args[0]) is Batch:
        for sample in columns[0]:
            append(fn(sample))
        return
    batched = [(k, a.source) for k, a in enumerate(args) if type(a) is Batch]
    keyed = [(key, v.source) for key, v in kwargs.items() if type(v) is Batch]
    arguments, named = list(args), dict(kwargs)
    look = time.perf_counter() if cancelled is not None else math.inf
    for offset, i in enumerate(range(chunk.start, chunk.stop)):
        if time.perf_counter() >= look:
            if cancelled.is_set():
                return
            look = time.perf_counter() + CANCEL_CHECK_SECONDS
        for k, source in batched:
            arguments[k] = columns[source][offset]
        for key, source in keyed:
            named[key] = columns[source][offset]
        result = fn(*arguments, **(named if seeds is None else seeds.enter(i, named)))
        append(result if sink is None else sink.put(i, result))


# ----------------------------------------------------------------- crossing to other processes
# What crosses to a worker in another process, and back, is pickled here, by value, whatever
# the executor's own pickler is: multiprocessing's (torch registers reductions with it that
# move a tensor's storage into shared memory in place: the caller's tensor, under the NumPy
# arrays that view it), Dask's, Ray's. A runner in other processes submits
# ``run_sent(sent(run, chunk), *rest)`` and reads each result with ``received``.


def _keeping_state(obj: Any) -> tuple[Any, ...] | None:
    """The reduction of an array subclass holding attributes whose class leaves pickling to
    ndarray's, which drops them (astropy's ``Masked``: its mask; a user's ``TAG.meta``): its
    data, class and ``__dict__``. None for any other value."""
    if not attributes_dropped_by_pickle(obj):
        return None
    return _with_state, (np.ndarray.view(obj, np.ndarray), type(obj), dict(vars(obj)))


def _with_state(data: NDArray[Any], kind: type, state: dict[str, Any]) -> Any:
    obj: Any = data.view(kind)
    obj.__dict__.update(state)
    return obj


def _crossing(base: type) -> type:
    """A pickler class over ``base`` (pickle's, or cloudpickle's for Dask, which sends lambdas)
    that keeps an array subclass's state (see _keeping_state)."""

    class Crossing(base):  # type: ignore[misc]  # a class made per base
        def reducer_override(self, obj: Any) -> Any:
            reduced = _keeping_state(obj)
            if reduced is not None:
                return reduced
            reduced = plain_tensor(obj)
            if reduced is not None:
                return reduced
            if type(obj) is weakref.WeakSet:  # its items, which nothing else sent may hold, kept alive with it
                return _weak_set_keeping, (list(obj),)
            # Python 3.11's cached_property holds a lock, which does not pickle: made again there.
            if type(obj) is functools.cached_property and "lock" in vars(obj):
                return _cached_property_again, (obj.func, obj.attrname, obj.__doc__)
            if type(obj) is struct.Struct:  # no pickle of its own: made again from its format
                return struct.Struct, (obj.format,)
            cached = vars(obj).get("_ufunc") if type(obj) is np.vectorize else None
            if cached:  # called once, it caches ufuncs, which do not pickle: sent without them, made again there
                return _vectorize_again, ({**vars(obj), "_ufunc": type(cached)()},)
            if type(obj) is types.MethodType and getattr(obj.__self__, obj.__name__, None) == obj:
                # As pickle sends a method: its object and its name. cloudpickle would send its
                # function by value, which a torchified object's generated method cannot go.
                return getattr, (obj.__self__, obj.__name__)
            parent = getattr(super(), "reducer_override", None)
            if parent is None:  # pickle's: a function by reference, a decorated one's through its wrapper
                wrapper = _wrapper_named_as(obj) if type(obj) is types.FunctionType else None
                return NotImplemented if wrapper is None else (getattr, (wrapper, "__wrapped__"))
            if type(obj) is memoryview:  # cloudpickle sends bytes: neither its layout nor its writes
                recipe = _view_recipe(obj)
                if recipe is not None:
                    return recipe
            reduced = parent(obj)
            if type(obj) is types.FunctionType:
                _send_names_class_bodies_read(obj, reduced)
            if isinstance(obj, (type, types.FunctionType)):
                return _found_where_sent_from(obj, reduced)
            return reduced

    return Crossing


def _wrapper_named_as(fn: types.FunctionType) -> Any:
    """What its module holds under ``fn``'s name where that wraps ``fn`` (``@ac.accepts_numpy``
    over a module's function, which batched maps unwrapped): pickle finds ``fn`` through it,
    where by its name it finds the wrapper; None for any other function."""
    if "." in fn.__qualname__:
        return None
    held = getattr(sys.modules.get(fn.__module__), fn.__qualname__, None)
    return held if held is not fn and held is not None and unwrapped(held, 1) is fn else None


#: The classes and functions this process sent by value, by id: what a payload unpickled here
#: finds again.
_SENT: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def _found_where_sent_from(sent: type | types.FunctionType, reduced: Any) -> Any:
    """cloudpickle's reduction of a class or a function it sends by value (made anew, then its
    attributes, or its globals and closure, set by its state setter), which unpickled in this
    process is ``sent`` itself, untouched: the caller's own, as on threads. cloudpickle would find
    a class again and set its attributes anew from the copies, binding the caller's methods to a
    copy of its module's globals for good; and make a function anew over copies of the globals
    it names (a Dask worker in the caller's process). Any other reduction as it is."""
    if type(reduced) is not tuple or len(reduced) != 6 or reduced[5] is None:
        return reduced
    make, args, state, items, entries, set_state = reduced
    _SENT[id(sent)] = sent
    sender = (os.getpid(), id(sent))
    return _made_or_found, (sender, make, args), (sender, set_state, state), items, entries, _state_set


def _sent_from_here(sender: tuple[int, int]) -> Any:
    """The class or function this process sent as ``sender``, where it is unpickled in that
    process (a forked child's pid is its own; another machine never sent it); else None."""
    pid, key = sender
    return _SENT.get(key) if pid == os.getpid() else None


def _made_or_found(sender: tuple[int, int], make: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """The sender's own class or function in its process; elsewhere one made as cloudpickle
    makes it (a class never made here: a metaclass's ``__new__`` may register what it makes)."""
    found = _sent_from_here(sender)
    if found is not None:
        return found
    made = make(*args)
    if isinstance(made, type):
        _MADE_HERE.add(made)
    return made


#: The classes payloads sent by value made in this process (a script's, on Dask's and Ray's
#: workers): copies, compared by their attributes whatever reaches them (an Enum member's value,
#: a set, a partial, a default, an argument's class), as the classes of a module's are.
_MADE_HERE: weakref.WeakSet[type] = weakref.WeakSet()


def _state_set(made: Any, sent: tuple[tuple[int, int], Callable[[Any, Any], Any], Any]) -> None:
    """A class's attributes, or a function's globals and closure, set from the copies received,
    as cloudpickle sets them; not on the sender's own in its process, which are the caller's own."""
    sender, set_state, state = sent
    if _sent_from_here(sender) is not made:
        set_state(made, state)


def _weak_set_keeping(items: list[Any]) -> weakref.WeakSet[Any]:
    """A ``WeakSet`` of ``items`` that keeps them alive as long as it lives: a copy holds its
    items as the caller's set does, where they may be held by nothing the copy came with."""
    made: weakref.WeakSet[Any] = weakref.WeakSet(items)
    made.__dict__["_held"] = items
    return made


def _cached_property_again(
    func: Callable[..., Any], name: str | None, doc: str | None
) -> functools.cached_property[Any]:
    """A ``cached_property`` of ``func`` named ``name``: a class that crosses by value has its
    attributes set after it is made, so ``__set_name__`` never names it there."""
    made = functools.cached_property(func)
    made.attrname = name
    made.__doc__ = doc
    return made


def _vectorize_again(state: dict[str, Any]) -> np.vectorize:
    """An ``np.vectorize`` made again from its attributes (its cached ufunc left out)."""
    made = np.vectorize.__new__(np.vectorize)
    made.__dict__.update(state)
    return made


def _view_recipe(view: memoryview) -> tuple[Any, tuple[Any, ...]] | None:
    """How a memoryview crosses as it is: its bytes (writable where it is: a global ``view[0] =
    1`` then changes the copy, which is compared, as a bytearray's change is) laid out as it is,
    by a cast, or by NumPy where a memoryview cannot be cast to its format (float16,
    big-endian, a structure); None for a released view, which crosses as cloudpickle sends it."""
    try:
        data: bytes | bytearray = view.tobytes() if view.readonly else bytearray(view.tobytes())
    except ValueError:  # released
        return None
    form, shape = view.format, view.shape or ()
    if _view_again(data, form, shape, None) is not None:
        return _view_again, (data, form, shape, None)
    try:
        dtype = np.asarray(view).dtype
    except (TypeError, ValueError, NotImplementedError):
        return None
    return _view_again, (data, form, shape, dtype)


def _view_again(data: bytes | bytearray, form: str, shape: tuple[int, ...], dtype: Any) -> memoryview | None:
    """A memoryview of ``data`` laid out as ``form`` and ``shape`` (through an array of
    ``dtype`` where one is given); None where a cast cannot lay it out."""
    if dtype is not None:
        laid_out: Any = np.frombuffer(data, dtype).reshape(shape)  # NumPy's stubs vary in the buffer protocol
        return memoryview(laid_out)
    view: Any = memoryview(data)  # cast's overloads name each format
    if (form, shape) == ("B", (len(data),)):
        return view  # type: ignore[no-any-return]
    try:
        return view.cast(form, shape)  # type: ignore[no-any-return]
    except (TypeError, ValueError):
        return None


def _send_names_class_bodies_read(fn: types.FunctionType, reduced: Any) -> None:
    """cloudpickle sends a function by value with the globals its code reads as globals; a class
    statement inside it reads them by name (``class S: scale = SCALE``): added to what is sent,
    so that its body finds them where it runs. Where cloudpickle's reduction is not the
    ``(state, slots)`` it gives a function, nothing is added."""
    state = reduced[2] if type(reduced) is tuple and len(reduced) > 2 else None
    slots = state[1] if type(state) is tuple and len(state) == 2 else None
    sent_globals = slots.get("__globals__") if type(slots) is dict else None
    if type(sent_globals) is dict:
        for name in names_class_bodies_read(fn.__code__):
            if name in fn.__globals__:
                sent_globals.setdefault(name, fn.__globals__[name])


_PICKLERS: dict[bool, type] = {False: _crossing(pickle.Pickler)}


def dumps(value: Any, *, by_value: bool = False) -> bytes:
    """``value`` pickled to cross to or from another process; ``by_value``: functions by value
    where pickle would refuse them (cloudpickle's, as Dask and Ray send them)."""
    if by_value not in _PICKLERS:
        try:
            import cloudpickle  # Dask's dependency: asked for on Dask and Ray only
        except ModuleNotFoundError:  # Ray alone: its own copy
            from ray import cloudpickle

        _PICKLERS[True] = _crossing(cloudpickle.Pickler)
    buffer = io.BytesIO()
    _PICKLERS[by_value](buffer, pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def sent(fn: Callable[..., Any], *args: Any, by_value: bool = False) -> bytes:
    """``fn`` and its first arguments (the chunk), pickled to cross to another process."""
    return dumps((fn, args), by_value=by_value)


#: How a worker says what it was sent does not unpickle there, for the caller to name the function.
UNPICKLING_FAILED = "what the map sent to the worker does not unpickle there"


def run_sent(payload: bytes, *rest: Any) -> bytes:
    """In the worker: ``fn(*args, *rest)`` of a ``sent`` payload, its result pickled to cross back;
    an exception that would not cross back (see ``_crossing_back``) raised as one that does."""
    try:
        fn, args = pickle.loads(payload)
    except Exception as e:  # its traceback (a recursion's, thousands deep) left here: some executors hang on it
        raise pickle.UnpicklingError(f"{UNPICKLING_FAILED} ({type(e).__name__}: {e})") from None
    failed: Exception | None = None
    try:
        result = fn(*args, *rest)
    except Exception as e:
        failed = _crossing_back(e)
    if failed is not None:  # raised past the handler: no context to pickle with it (Dask's tblib would)
        raise failed
    try:
        return dumps(result)
    except Exception as e:
        label = getattr(args[0], "label", "autoconvert.batched") if args else "autoconvert.batched"
        raise pickle.PicklingError(
            f"{label}: what the samples returned does not pickle to cross back from the worker ({type(e).__name__}: "
            f"{e}). Fix: return what pickles (numbers, arrays, lists, dicts); for an object of a class a script "
            "defines, which crosses to the workers by value and cannot cross back, define the class in a module and "
            "import it"
        ) from None


class _CarriedError(Exception):
    """A sample's exception, crossing back pickled as a result does (see ``dumps``): the
    executor's own pickling (Dask's and Ray's cloudpickle) would send an object of a script's
    class it carries (``KeyError(item)``) by value, and, unpickled in the caller's process, set
    the caller's class's methods to copies of them."""

    def __init__(self, error: Exception, data: bytes) -> None:
        super().__init__(str(error))
        self.error, self.data = error, data

    def __reduce__(self) -> tuple[Any, ...]:
        return received, (self.data,)

    def __repr__(self) -> str:
        return repr(self.error)


def _crossing_back(error: Exception) -> Exception:
    """``error``, carried to cross back pickled by reference; where it does not pickle and
    unpickle so, a RuntimeError with its type, message and notes: one that does not would
    break a process pool (an exception whose ``__init__`` takes two arguments) or hide the
    sample's failure behind a pickling error (one holding a lock)."""
    try:
        data = dumps(error)
        pickle.loads(data)
    except Exception as e:
        back = RuntimeError(f"{type(error).__module__}.{type(error).__qualname__}: {error}")
        for note in getattr(error, "__notes__", ()):
            back.add_note(note)
        back.add_note(
            f"autoconvert.batched: the sample's {type(error).__name__} does not cross back from the worker "
            f"({type(e).__name__}: {e}), so it is raised as a RuntimeError with its message"
        )
        return back
    return _CarriedError(error, data)


def received(data: bytes) -> Any:
    """A result ``run_sent`` sent back."""
    return pickle.loads(data)


def run_sharing(chunk: Chunk, sources: Sequence[Any], folder: str, least: float) -> list[Any]:
    """``run``'s results, their arrays written to one file in ``folder`` (each replaced by where
    it is) where together they take at least ``least`` bytes."""
    return shared_where_large(run(chunk, sources), folder, least)


def _mapped(source: Any) -> Any:
    """A source as the chunk indexes it: a shared array, or a list of arrays some of which are
    shared, mapped (their files stay: other chunks map them too)."""
    if type(source) is Shared:
        return opened([source], remove=False)[0]
    return opened(list(source), remove=False) if in_shared_memory(source) else source


def _column(source: Any, start: int, stop: int) -> Any:
    """Samples ``start`` to ``stop`` of a source, indexable from 0: of an array of two or more
    axes, its rows (views, as ``a[i, ...]`` gives); of any other source, each ``_at`` it."""
    if type(source) is Window:
        return _column(source.values, start - source.offset, stop - source.offset)
    if isinstance(source, np.ndarray) and source.ndim > 1:
        return source[start:stop]
    return [_at(source, i) for i in range(start, stop)]


def _at(values: Any, i: int) -> Any:
    """Sample ``i``: of an array, a view with one axis fewer (``a[i, ...]``, so a 0-d array, not
    a NumPy scalar, as a 0-d tensor would become); of anything else, ``values[i]``."""
    return values[i, ...] if isinstance(values, np.ndarray) else values[i]
