"""Containers: the registry of exact types, and how each is taken apart and put back.

Like ``torch.utils._pytree``: a container is a registered exact type with a flatten and
an unflatten; everything else is a leaf, passed through untouched (the walk over leaves
is _tree's ``Mapper``). Built-in containers are registered through the same public
``register_container`` users call. Namedtuples,
dataclasses and types registered with torch's pytree (model-output classes are) are
recognised by type, once, and cached (one with methods of its own by _result_methods's node,
which keeps them on the converted copy). Each node also says how a change the function made
to a rebuilt copy becomes the caller's container's own (its ``ContainerWrites``, which _mutations
uses): dicts, lists and dataclasses by their kind, any other type by the ``update`` it was
registered with, or not at all. This module imports neither torch nor NumPy: it looks for
torch's pytree registry only if torch was already imported.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from autoconvert._errors import ConversionError, GetAttrKey, KeyEntry, LeafError, MappingKey, SequenceKey

Flatten = Callable[[Any], "tuple[Sequence[Any], Any]"]
Unflatten = Callable[[list[Any], Any], Any]
#: ``update(obj, children, context)``: ``obj`` itself made to hold ``children`` (see register_container).
Update = Callable[[Any, list[Any], Any], None]
KeyOf = Callable[[Any, int], KeyEntry]
#: What a node maps over its children: a Mapper (_tree), called as ``mapper(child, ctx)``.
Walk = Callable[[Any, Any], Any]


def _index_key(context: Any, i: int) -> KeyEntry:
    return SequenceKey(i)


class Held(NamedTuple):
    """What a container holds, as its ``ContainerWrites`` sees it: compared after a call, and taken."""

    keys: list[Any]  # one per child, telling them apart: a dict's keys, indices, names, key entries
    children: list[Any]
    context: Any  # what ``ContainerWrites.take`` needs besides the children (a dict's keys, a flatten's context)


class ContainerWrites:
    """How a change made to a rebuilt copy becomes the caller's container's own: by default
    from the node's flatten, taken by an ``update`` if the type was registered with one."""

    __slots__ = ("node", "update")

    def __init__(self, node: Node, update: Update | None) -> None:
        self.node, self.update = node, update

    def held(self, obj: Any) -> Held:
        children, context = self.node.flatten(obj)
        return Held([self.node.key(context, i) for i in range(len(children))], list(children), context)

    def entry(self, key: Any) -> KeyEntry:
        """The key entry of one of ``held``'s keys, for messages."""
        return key  # type: ignore[no-any-return]  # flatten's keys are the node's key entries

    def takes_back(self) -> bool:
        """Whether ``take`` takes a change (a tuple, a frozen dataclass, a type registered
        without an update take none)."""
        return self.update is not None

    def take(self, obj: Any, children: list[Any], context: Any) -> bool:
        """Make ``obj`` itself hold ``children`` (``held``'s, of the changed copy); False where it cannot."""
        if self.update is None:
            return False
        self.update(obj, children, context)
        return True


class _MappingWrites(ContainerWrites):
    """A dict or a subclass: keys added, removed or moved, values set, through its own methods."""

    __slots__ = ()

    def held(self, obj: Any) -> Held:
        items = dict(obj)
        return Held(list(items), list(items.values()), list(items))

    def entry(self, key: Any) -> KeyEntry:
        return MappingKey(key)

    def takes_back(self) -> bool:
        return True

    def take(self, obj: Any, children: list[Any], context: Any) -> bool:
        before = dict(obj)
        if list(before) == context:
            for key, value in zip(context, children, strict=True):
                if value is not before[key]:
                    obj[key] = value
        else:  # keys added, removed or moved: the caller's dict (and its kind) keeps the new order
            obj.clear()
            obj.update(dict(zip(context, children, strict=True)))
        return True


class _ListWrites(ContainerWrites):
    """A list or a subclass: its items replaced by the copy's."""

    __slots__ = ()

    def held(self, obj: Any) -> Held:
        return Held(list(range(len(obj))), list(obj), None)

    def entry(self, key: Any) -> KeyEntry:
        return SequenceKey(key)

    def takes_back(self) -> bool:
        return True

    def take(self, obj: Any, children: list[Any], context: Any) -> bool:
        obj[:] = children
        return True


class Attached:
    """What the conversion sets on a converted result with methods, none of its fields (its
    methods and their shallow copies: see _result_methods), left out of what it holds."""

    __slots__ = ()


class _DataclassWrites(ContainerWrites):
    """A dataclass: its fields and attributes set or deleted; a frozen one takes none."""

    __slots__ = ("fields", "frozen")

    def __init__(self, node: Node, cls: type) -> None:
        super().__init__(node, None)
        self.fields = [f.name for f in dataclasses.fields(cls)]
        self.frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]

    def held(self, obj: Any) -> Held:
        extras = {k: v for k, v in getattr(obj, "__dict__", {}).items() if not isinstance(v, Attached)}
        fields = {name: value for name in self.fields if (value := getattr(obj, name, _UNSEEN)) is not _UNSEEN}
        state = {**fields, **extras}  # a field deleted (``del c.b``) or never set is held by neither
        return Held(list(state), list(state.values()), list(state))

    def entry(self, key: Any) -> KeyEntry:
        return GetAttrKey(key)

    def takes_back(self) -> bool:
        return not self.frozen

    def take(self, obj: Any, children: list[Any], context: Any) -> bool:
        if self.frozen:
            return False
        before = self.held(obj)
        for name in before.keys:
            if name not in context:
                delattr(obj, name)
        was = dict(zip(before.keys, before.children, strict=True))
        for name, value in zip(context, children, strict=True):
            if value is not was.get(name, _UNSEEN):
                setattr(obj, name, value)
        return True


def _writes(cls: type | None, node: Node, update: Update | None) -> ContainerWrites:
    """How ``cls``'s changes are taken: by ``update`` where given, else by its kind."""
    if cls is None:
        return ContainerWrites(node, update)
    if update is None and issubclass(cls, dict):
        return _MappingWrites(node, None)
    if update is None and issubclass(cls, list):
        return _ListWrites(node, None)
    if update is None and dataclasses.is_dataclass(cls):
        return _DataclassWrites(node, cls)
    return ContainerWrites(node, update)


def _with_writes(cls: type, node: Node, update: Update | None) -> Node:
    node.kind, node.update = cls, update
    return node


_UNSEEN = object()
#: What ResultMethod.run gives where a method's value is not the caller's result itself.
UNSEEN = _UNSEEN


class Node:
    """How to take one container type apart and put it back together.

    ``flatten(obj) -> (children, context)``, ``unflatten(children, context) -> obj``, and
    ``key(context, i)``: the key entry of child ``i`` (``[0]``, ``['k']``, ``.name``);
    ``writes``: how a change to a rebuilt copy becomes the caller's (see ``_writes``).
    """

    __slots__ = ("_writes", "flatten", "key", "kind", "unflatten", "update")

    def __init__(self, flatten: Flatten, unflatten: Unflatten, key: KeyOf = _index_key) -> None:
        self.flatten = flatten
        self.unflatten = unflatten
        self.key = key
        self.kind: type | None = None  # the type it was registered or recognised for, and its update
        self.update: Update | None = None
        self._writes: ContainerWrites | None = None

    @property
    def writes(self) -> ContainerWrites:
        """How a change to a rebuilt copy becomes the caller's, decided on first use (a
        registration looks at nothing of the type: another thread may be deciding it)."""
        found = self._writes
        if found is None:
            self._writes = found = _writes(self.kind, self, self.update)
        return found

    def map(self, obj: Any, mapper: Walk, ctx: Any) -> Any:
        """``obj`` with ``mapper`` applied to each child; ``obj`` itself if nothing changed."""
        children, context = self.flatten(obj)
        out = []
        changed = False
        for i, child in enumerate(children):
            try:
                new = mapper(child, ctx)
            except LeafError as e:
                e.keys.append(self.key(context, i))
                raise
            changed = changed or new is not child
            out.append(new)
        return self.unflatten(out, context) if changed else obj

    def items(self, obj: Any) -> Iterator[tuple[KeyEntry, Any]]:
        """``(key entry, child)`` pairs, for messages."""
        children, context = self.flatten(obj)
        for i, child in enumerate(children):
            yield self.key(context, i), child


_REGISTRY: dict[type, Node] = {}
#: Bumped by each registration, after the registry changed and before Mappers forget: a
#: decision made while it changed is made again (see _tree.Mapper.resolve).
GENERATION = [0]
#: What a registration tells: each Mapper alive, which forgets its cached decisions.
_LISTENERS: weakref.WeakSet[Any] = weakref.WeakSet()
# Mappers are made while other threads register containers: the WeakSet is only ever
# touched under this lock (iterating it while another thread adds raises RuntimeError).
_LISTENERS_LOCK = threading.Lock()


def listen(mapper: Any) -> None:
    """Have ``mapper.forget()`` called after each registration, while ``mapper`` lives."""
    with _LISTENERS_LOCK:
        _LISTENERS.add(mapper)


def register_container(
    cls: type,
    flatten: Flatten,
    unflatten: Unflatten,
    *,
    key: KeyOf | None = None,
    update: Update | None = None,
) -> None:
    """Make autoconvert look inside instances of exactly ``cls``.

    A function handed an instance holding tensors gets a rebuilt copy (its tensors as
    arrays); what it changes in the copy is made the caller's instance's own after the call:
    a dict or list subclass and a dataclass take it by their kind, any other type by
    ``update``. Without one, such a change raises ``ConversionError`` naming where it was.

    Args:
        cls: the container type; subclasses are not covered (register them too).
        flatten: ``obj -> (children, context)``; children are converted, context is kept.
        unflatten: ``(children, context) -> obj``, rebuilding an equivalent container.
        key: ``(context, i) -> str``, the path segment error messages show for child
            ``i``, such as ``".mask"``; ``"[i]"`` when omitted.
        update: ``(obj, children, context) -> None``, making ``obj`` itself hold
            ``children`` (in place of ``unflatten``'s new object), ``children`` and
            ``context`` as ``flatten`` gives them for the changed copy, the children in
            the caller's kind again.

    Example:
        >>> import autoconvert as ac
        >>> class Pair:
        ...     def __init__(self, a, b): self.a, self.b = a, b
        >>> def update(p, children, _): p.a, p.b = children
        >>> ac.register_container(Pair, lambda p: ((p.a, p.b), None), lambda c, _: Pair(*c), update=update)
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_container() needs a type, got {cls!r}")
    _REGISTRY[cls] = _with_writes(cls, Node(flatten, unflatten, key or _index_key), update)
    GENERATION[0] += 1
    with _LISTENERS_LOCK:
        mappers = list(_LISTENERS)
    for mapper in mappers:  # a type seen before as a leaf must be looked at again
        mapper.forget()


# --------------------------------------------------------------------------- built-ins


def _mapping_key(keys: Any, i: int) -> KeyEntry:
    return MappingKey(keys[i])


register_container(list, lambda x: (x, None), lambda c, _: c)
register_container(tuple, lambda x: (x, None), lambda c, _: tuple(c))
register_container(
    dict, lambda d: (list(d.values()), list(d)), lambda c, k: dict(zip(k, c, strict=True)), key=_mapping_key
)
#: The nodes Mapper replaces by inlined loops (Mapper._sequence, _dict) while they stay registered.
BUILTIN_NODES: dict[type, Node] = {cls: _REGISTRY[cls] for cls in (list, tuple, dict)}
register_container(
    collections.OrderedDict,
    lambda d: (list(d.values()), list(d)),
    lambda c, k: collections.OrderedDict(zip(k, c, strict=True)),
    key=_mapping_key,
)
register_container(
    collections.defaultdict,
    lambda d: (list(d.values()), (d.default_factory, list(d))),
    lambda c, fk: collections.defaultdict(fk[0], zip(fk[1], c, strict=True)),
    key=lambda fk, i: MappingKey(fk[1][i]),
)


#: How a recognised type with public methods of its own becomes a node: _result_methods's
#: ``_MethodsNode``, which runs them on the original. That module sits above this one (its
#: methods ask the registry) and puts it here when imported, as importing autoconvert does.
METHODS_NODE: list[Callable[[Flatten, Unflatten, KeyOf, list[str]], Node]] = []


def _fields_tuple_node(cls: type) -> Node:
    """Tuples with ``_fields``: namedtuples, and SciPy's result "tuple bunches" (PearsonRResult,
    TtestResult, LinregressResult...), which have no ``_make`` and carry extra attributes.

    Rebuilt with ``tuple.__new__`` (a bunch's own ``__new__`` wants every extra as a keyword)
    and the instance ``__dict__`` copied: public attributes (``df``, ``intercept_stderr``) are
    children, converted like the fields; private ones (``_x``, ``_alternative``) are the
    state methods such as ``confidence_interval()`` compute from, kept as they are.
    """
    fields = cls._fields  # type: ignore[attr-defined]
    count = len(fields)

    def flatten(obj: Any) -> tuple[list[Any], Any]:
        state = getattr(obj, "__dict__", None)
        extras = [k for k in state if not k.startswith("_")] if state else []
        return [*obj, *(state[k] for k in extras)], (extras, state)  # type: ignore[index]

    def unflatten(children: list[Any], context: Any) -> Any:
        extras, state = context
        new: Any = tuple.__new__(cls, children[:count])
        if state:
            new.__dict__.update(state)
            new.__dict__.update(zip(extras, children[count:], strict=True))
        return new

    def key(context: Any, i: int) -> KeyEntry:
        return GetAttrKey(fields[i] if i < count else context[0][i - count])

    methods = [n for n in public_methods(cls) if n not in fields] if _has_dict(cls) else []
    return METHODS_NODE[0](flatten, unflatten, key, methods) if methods else Node(flatten, unflatten, key)


def public_methods(cls: type) -> list[str]:
    """Public methods ``cls`` adds to its builtin base (``confidence_interval``, not tuple's ``count``)."""
    base = tuple if issubclass(cls, tuple) else dict if issubclass(cls, dict) else object
    return [n for n in dir(cls) if not n.startswith("_") and n not in dir(base) and callable(getattr(cls, n))]


def _dict_subclass_node(cls: type) -> Node:
    """Dict subclasses no one registered: SciPy's OptimizeResult (attribute access to its
    keys) and its kin. A shallow copy, of the same type and instance attributes, with the
    converted values set through dict's own ``__setitem__`` (a subclass's may validate)."""

    def unflatten(children: list[Any], context: Any) -> Any:
        keys, obj = context
        try:
            new = copy.copy(obj)
        except Exception as e:
            raise LeafError(
                ConversionError,
                f"is a {cls.__qualname__} (a dict subclass) that copy.copy() cannot rebuild: {e}",
                f"{cls.__module__}.{cls.__qualname__}",
                "register it with autoconvert.register_container(cls, flatten, unflatten)",
            ) from None
        for k, v in zip(keys, children, strict=True):
            dict.__setitem__(new, k, v)
        return new

    return Node(lambda d: (list(d.values()), (list(d), d)), unflatten, lambda c, i: MappingKey(c[0][i]))


def _structseq_node(cls: type) -> Node:
    # torch.return_types.max and friends: C struct sequences, rebuilt from a sequence.
    return Node(lambda x: (x, None), lambda c, _: cls(c), _index_key)


def _dataclass_node(cls: type) -> Node:
    """A dataclass: its fields converted. One with methods of its own is an object rather
    than a record (SciPy's ``EmpiricalDistributionFunction``, ``ecdf(x).cdf``): its public
    fields convert, its private ones (the state its methods compute from) stay as they are,
    and its methods run on the original (see _result_methods)."""
    names = [f.name for f in dataclasses.fields(cls)]
    methods = [n for n in public_methods(cls) if n not in names] if _has_dict(cls) else []
    if methods:
        names = [n for n in names if not n.startswith("_")]

    def present(obj: Any) -> list[str]:
        """The fields ``obj`` holds: a field deleted (``del c.b``) or never set (``init=False``)
        is left out, as the object lacks it, and its copy lacks it too."""
        return [n for n in names if hasattr(obj, n)]

    def unflatten(children: list[Any], obj: Any) -> Any:
        # A shallow copy with the changed fields set: no __init__/__post_init__ re-run
        # (they may validate NumPy types), and it works for frozen, slots and init=False.
        new = copy.copy(obj)
        for name, value in zip(names if len(children) == len(names) else present(obj), children, strict=True):
            object.__setattr__(new, name, value)
        return new

    def flatten(x: Any) -> tuple[list[Any], Any]:
        try:
            return [getattr(x, n) for n in names], x
        except AttributeError:  # a field it lacks
            return [getattr(x, n) for n in present(x)], x

    def key(context: Any, i: int) -> KeyEntry:
        return GetAttrKey(present(context)[i])

    return METHODS_NODE[0](flatten, unflatten, key, methods) if methods else Node(flatten, unflatten, key)


def _has_dict(cls: type) -> bool:
    """Whether instances of ``cls`` have a ``__dict__``, where a copy's methods can be set."""
    return getattr(cls, "__dictoffset__", 0) != 0


def _pytree_node(cls: type) -> Node | None:
    pytree = sys.modules.get("torch.utils._pytree")
    spec = getattr(pytree, "SUPPORTED_NODES", {}).get(cls) if pytree else None
    if spec is None:
        return None
    with_keys = getattr(spec, "flatten_with_keys_fn", None)
    if with_keys is None:
        return Node(spec.flatten_fn, spec.unflatten_fn)

    def flatten(obj: Any) -> tuple[list[Any], Any]:
        pairs, context = with_keys(obj)
        return [child for _, child in pairs], (context, [key for key, _ in pairs])

    # pytree's key entries print as path segments: ['logits'], .name, [0].
    return Node(flatten, lambda c, ck: spec.unflatten_fn(c, ck[0]), lambda ck, i: str(ck[1][i]))


def is_scipy_sparse(cls: type) -> bool:
    """Whether ``cls`` is a scipy.sparse array or matrix type (False if SciPy isn't imported:
    then no such object can exist, and SciPy stays unimported)."""
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and issubclass(cls, (sp.sparray, sp.spmatrix))


def registered(cls: type) -> bool:
    """Whether ``cls`` was registered with ``register_container`` (not recognised by its kind)."""
    return cls in _REGISTRY


def _rebuilt_type(cls: type) -> bool:
    """Whether the conversion rebuilds objects of ``cls`` (a dataclass, a result with methods):
    a type it met already, as the types of a converted result's attributes are."""
    return cls in _REGISTRY or cls in _RECOGNISED


#: The containers a result's attribute may hold that a method changes in place, followed
#: (see ``_result_methods._inside_of``): those the conversion walks and rebuilds. Tuples are followed too (see
#: ``_held_in``): their items are fixed, yet the lists, dicts and objects among them change.
_IN_PLACE = frozenset([list, dict, collections.OrderedDict, collections.defaultdict])


def _held_in(value: Any) -> bool:
    """Whether ``value`` is a container whose items ``_result_methods._contents`` lists: a list, a dict, or a
    tuple the conversion rebuilds (a namedtuple with no attributes of its own besides)."""
    return type(value) in _IN_PLACE or (
        isinstance(value, tuple) and not hasattr(value, "__dict__") and _rebuilt_type(type(value))
    )


def _changes_inside(item: Any) -> bool:
    """Whether ``item`` may change in place inside (see ``_result_methods._contents``): a list, a dict, a tuple
    holding such, an object the conversion rebuilds (a dataclass, a result with methods)."""
    return _held_in(item) or (hasattr(item, "__dict__") and _rebuilt_type(type(item)))


#: The nodes of types recognised by their kind, made once: a registration of the type comes
#: first (the registry is looked in first), and none of another type changes them.
_RECOGNISED: dict[type, Node] = {}


def node_for(cls: type) -> Node | None:
    """The container node for exact type ``cls``, or ``None`` for a leaf."""
    node = _REGISTRY.get(cls) or _RECOGNISED.get(cls)
    if node is None:
        node = _recognised(cls)
        if node is not None:
            _RECOGNISED[cls] = node = _with_writes(cls, node, None)
    return node


def _recognised(cls: type) -> Node | None:
    if issubclass(cls, tuple):
        if hasattr(cls, "_fields"):
            return _fields_tuple_node(cls)
        if hasattr(cls, "n_sequence_fields"):
            return _structseq_node(cls)
    if dataclasses.is_dataclass(cls):
        return _dataclass_node(cls)
    node = _pytree_node(cls)
    # scipy.sparse's DOK format subclasses dict, yet is one array: a leaf, never its entries.
    if node is None and issubclass(cls, dict) and not is_scipy_sparse(cls):
        node = _dict_subclass_node(cls)
    return node
