"""Containers: the registry of exact types, and how each is taken apart and put back.

Like ``torch.utils._pytree``: a container is a registered exact type with a flatten and
an unflatten; everything else is a leaf, passed through untouched (the walk over leaves
is _tree's ``Mapper``). Built-in containers are registered through the same public
``register_container`` users call. Namedtuples,
dataclasses and types registered with torch's pytree (model-output classes are) are
recognised by type, once, and cached. Each node also says how a change the function made
to a rebuilt copy becomes the caller's container's own (its ``ContainerWrites``, which _mutations
uses): dicts, lists and dataclasses by their kind, any other type by the ``update`` it was
registered with, or not at all. This module imports neither torch nor NumPy: it looks for
torch's pytree registry only if torch was already imported.
"""

from __future__ import annotations

import collections
import copy
import copyreg
import dataclasses
import functools
import operator
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


class _DataclassWrites(ContainerWrites):
    """A dataclass: its fields and attributes set or deleted; a frozen one takes none."""

    __slots__ = ("fields", "frozen")

    def __init__(self, node: Node, cls: type) -> None:
        super().__init__(node, None)
        self.fields = [f.name for f in dataclasses.fields(cls)]
        self.frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]

    def held(self, obj: Any) -> Held:
        extras = {
            k: v for k, v in getattr(obj, "__dict__", {}).items() if not isinstance(v, (ResultMethod, ShallowCopies))
        }
        state = {**{name: getattr(obj, name) for name in self.fields}, **extras}
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
    return _MethodsNode(flatten, unflatten, key, methods) if methods else Node(flatten, unflatten, key)


def public_methods(cls: type) -> list[str]:
    """Public methods ``cls`` adds to its builtin base (``confidence_interval``, not tuple's ``count``)."""
    base = tuple if issubclass(cls, tuple) else dict if issubclass(cls, dict) else object
    return [n for n in dir(cls) if not n.startswith("_") and n not in dir(base) and callable(getattr(cls, n))]


class _MethodsNode(Node):
    """A result type with methods that compute from its fields with NumPy (a tuple bunch's
    ``confidence_interval``, ``ecdf(x).cdf.evaluate``): once the fields are converted, each
    method runs on the original result, made by the walking side (its ``result_method``:
    arguments and value converted as that side converts, ``r.confidence_interval().low`` a
    tensor too), or with its value converted as the result was."""

    __slots__ = ("methods", "own")

    def __init__(self, flatten: Flatten, unflatten: Unflatten, key: KeyOf, methods: list[str]) -> None:
        super().__init__(flatten, unflatten, key)
        self.methods = methods
        #: What the conversion sets on a converted result, none of its fields.
        self.own = frozenset([*methods, _COPIES])

    def map(self, obj: Any, mapper: Walk, ctx: Any) -> Any:
        new = super().map(obj, mapper, ctx)
        if new is not obj:
            make = getattr(mapper, "result_method", None) or ResultMethod
            _own_containers(new.__dict__, obj.__dict__)
            fields = ResultFields(self, obj, new)
            for name in self.methods:
                new.__dict__[name] = make(getattr(obj, name), mapper, ctx, fields)
            new.__dict__[_COPIES] = ShallowCopies(fields)
            fields.see(new.__dict__)
        return new


class ResultFields:
    """The attributes of one converted result with methods, as its caller changes them, and
    the object its methods run on: the original while the caller reassigned, added and
    deleted none, else a twin of the original (a copy: the original may be the function's own)
    holding the caller's values converted back, each converted at the first call after it
    was set. A call that finds nothing changed compares identities only, unless some values
    are ``apart``: copies of the original's (``copy=True``, a dtype cast, another device), which
    are converted back at every call, so that an in-place change to one is seen too."""

    __slots__ = (
        "apart",
        "converted",
        "followed",
        "given",
        "items",
        "nested",
        "node",
        "original",
        "size",
        "synced",
        "twin",
    )

    def __init__(self, node: _MethodsNode, original: Any, converted: Any) -> None:
        self.node, self.original = node, original
        self.converted = _link(converted)  # the result the caller holds, and changes
        self.given: dict[str, Any] = {}  # what it held at the last call (see ``see``), its methods made
        self.size = -1
        self.twin: Any = None
        self.apart: list[str] | None = None  # found at the first call: many results never have one
        self.items: list[int] = []  # a tuple's items held apart, by index
        self.nested: list[str] = []  # attributes holding converted results with methods (see ``_inner``)
        self.followed: list[str] = []  # what a method may change in place (see ``inside``)
        self.synced: Inside | None = None  # what the caller's held there at the last call (see ``see``)

    def __reduce__(self) -> tuple[Any, ...]:
        # The converted result comes in the state, saved once it is memoised: unless its type
        # hands its __dict__ (these methods among it) to its constructor when pickled, as
        # SciPy's tuple bunches do, where pickle would save it twice and keep the first,
        # unfilled. Unpickled without it, the methods see its attributes as they were pickled.
        converted = self.converted()
        if hasattr(type(converted), "__getnewargs_ex__"):
            converted = None
        return _fields_again, (self.original,), (converted, self.given, self.twin, self.apart, self.nested)

    def __setstate__(self, state: tuple[Any, Any, Any, list[str] | None, list[str]]) -> None:
        converted, given, self.twin, self.apart, self.nested = state
        self.converted = _link(converted)
        if converted is not None:
            converted.__dict__[_COPIES] = ShallowCopies(self)
        self.size = -1
        self.items = list(range(len(self.original))) if isinstance(self.original, tuple) else []
        # Unpickled, the converted values and the original's no longer share memory: the
        # public ones are converted back at the first call, to share it again.
        self.given = {name: value if name.startswith("_") else _UNSEEN for name, value in given.items()}
        self.followed, self.synced = _followed(given), None

    def receiver(self, side: ResultMethod) -> Any:
        """The object a method runs on, ``side`` telling a copy (``apart``) and converting a
        value the caller set back to the original's kind (``back``, raising the side's error)."""
        converted = self.converted()
        if converted is None:  # gone, the method held on its own, or unpickled apart from it (see __reduce__)
            return self.original if self.twin is None else self.twin
        apart = self.apart if self.apart is not None else self._find_apart(side, converted)
        attributes, given, back = converted.__dict__, self.given, side.back
        inner = self._inner(attributes, side) if self.nested else {}
        moved = _moved(attributes, self.synced) if self.synced is not None else ()  # r.hist.append(t)
        if not apart and not self.items and not inner and not moved and len(attributes) == self.size:
            for name, value in given.items():  # a loop, not all(): this is each call's whole cost
                if attributes.get(name, _UNSEEN) is not value:
                    break
            else:
                return self.original if self.twin is None else self.twin
        methods = self.node.own
        if moved:  # the caller's lists and dicts changed in place: their items converted back where new
            inner = {**inner, **self._returned(moved, attributes, side)}
        changed = {
            name: inner[name] if name in inner else _own(back(value, name), value)
            for name, value in attributes.items()
            if name not in methods
            and (given.get(name, _UNSEEN) is not value or name in apart or name in inner or name in moved)
        }
        twin = self.twin
        if twin is None:
            children, context = self.node.flatten(self.original)
            twin = self.node.unflatten(list(children), context)
        state = twin.__dict__
        for name in given.keys() - attributes.keys():
            state.pop(name, None)
        state.update(changed)
        if self.items:  # a tuple's items held apart: the twin made again around them
            held, context = self.node.flatten(twin)
            children, names = list(held), type(twin)._fields
            for i in self.items:
                children[i] = back(converted[i], names[i])
            twin = self.node.unflatten(children, context)
        self.twin = twin
        self.see(attributes)
        return twin

    def inside(self, before: dict[str, Any]) -> Inside | None:
        """What a method may change in place inside the object it runs on (which holds
        ``before``), where the result holds any (``followed``)."""
        converted = self.converted()
        return None if converted is None else _inside_of(before, converted.__dict__, self.followed)

    def ran(
        self,
        receiver: Any,
        before: dict[str, Any],
        inside: Inside | None,
        result: Any,
        carried: Callable[[Any, str], Any],
    ) -> Any:
        """After a method ran on ``receiver`` (which held ``before``, and ``inside``): what it
        changed there (``self.n += 1``, ``self.hist.append(x)``, ``self.inner.w = w``) made
        the caller's result's own, public values converted by ``carried`` as the result's
        were, private ones as they are; and the caller's twins of the objects ``result`` may
        hold (``self``, ``self.inner``, ``self.hist``), by identity, for ``with_twins``, else
        ``UNSEEN`` (``result`` is converted as the method's value)."""
        converted = self.converted()
        if converted is None:
            return UNSEEN
        now = receiver.__dict__
        changed = len(now) != len(before)
        for name, value in before.items():  # a loop, not any(): most methods change nothing
            if changed or now.get(name, _UNSEEN) is not value:
                changed = True
                break
        if not changed and inside is not None:
            changed = bool(_moved(now, inside))
        if (
            not changed
            and result is not receiver
            and type(result) not in _WALKED
            and (inside is None or not _rebuilt_type(type(result)))  # self.inner may be
        ):
            return UNSEEN  # most calls: nothing changed, nothing of the receiver's to look for
        twins: dict[int, tuple[Any, Any]] = {}
        _twins(receiver, converted, inside, twins)
        if changed:  # what the method set may hold the receiver's objects too (self.seen.append(self))
            self.carry(
                receiver, before, inside, converted, lambda v, name: with_twins(v, twins, lambda w: carried(w, name))
            )
        return twins if _holds(result, twins) else UNSEEN

    def carry(
        self, receiver: Any, before: dict[str, Any], inside: Inside | None, converted: Any, carried: Carried
    ) -> None:
        """What a method changed on ``receiver`` (see ``ran``), made ``converted``'s."""
        _carried_into(receiver.__dict__, before, inside, converted.__dict__, carried, methods=self.node.own)
        self.see(converted.__dict__)
        self.apart = None  # a value carried may be a copy of the receiver's: looked for again

    def _returned(self, moved: list[str], attributes: dict[str, Any], side: ResultMethod) -> dict[str, Any]:
        """The method side's lists and dicts for those of the caller's that changed in place
        (``moved``): new ones, holding the method side's items where the caller's hold the same
        objects as at the last call, the others converted back; a result with methods as the
        object it stands for there (``self.seen.append(self)``, which holds itself)."""
        synced = self.synced
        assert synced is not None  # moved was found in it
        state = (self.original if self.twin is None else self.twin).__dict__
        returned = {}
        for name in moved:
            mine, theirs = attributes.get(name), state.get(name)
            found = synced[0].get(name)
            if found is not None and type(theirs) is type(mine):
                returned[name] = _mirrored(
                    mine, theirs, found[1], functools.partial(_back_item, side=side, prefix=name)
                )
        return returned

    def _find_apart(self, side: ResultMethod, converted: Any) -> list[str]:
        """Which of the values the result was given are copies of the original's."""
        original = self.original
        was = getattr(original, "__dict__", {})
        self.apart = [
            name
            for name, value in self.given.items()
            if name in was and value is not was[name] and side.apart(value, was[name])
        ]
        if isinstance(original, tuple):  # a tuple's own items, which no attribute holds
            self.items = [i for i, value in enumerate(original) if side.apart(converted[i], value)]
        self.nested = [name for name, value in self.given.items() if _fields_of(value) is not None]
        return self.apart

    def _inner(self, attributes: dict[str, Any], side: ResultMethod) -> dict[str, Any]:
        """The objects the methods of the converted results held in ``nested`` attributes
        (``r.inner``) run on now, where the caller changed one (``r.inner.w = t``): the
        original's methods see those too (``self.inner.predict(x)``)."""
        found = {}
        for name in self.nested:
            fields = _fields_of(attributes.get(name))
            if fields is not None:
                receiver = fields.receiver(side)
                if receiver is not fields.original:
                    found[name] = receiver
        return found

    def see(self, attributes: dict[str, Any]) -> None:
        """Take ``attributes`` as what the twin holds: the values (not the methods, which hold
        these fields: a cycle keeping the values alive until the garbage collector runs) and
        how many attributes there were."""
        methods = self.node.own
        self.given = {name: value for name, value in attributes.items() if name not in methods}
        self.size = len(attributes)
        self.followed = _followed(self.given)
        self.synced = _snapshot(attributes, self.followed) if self.followed else None

    def copied(self, made: Any) -> None:
        """Give ``made``, a shallow copy of the converted result, methods and fields of its
        own: they follow it from what its source held (a twin of its own, so that a change to
        one is never the other's)."""
        new = ResultFields.__new__(ResultFields)
        new.node, new.original, new.converted = self.node, self.original, _link(made)
        new.given, new.size, new.apart = dict(self.given), self.size, self.apart
        new.items, new.nested, new.followed, new.twin = self.items, self.nested, self.followed, None
        new.synced = _snapshot(made.__dict__, new.followed) if new.followed else None
        if self.twin is not None:
            children, context = self.node.flatten(self.twin)
            new.twin = self.node.unflatten(list(children), context)
        state = made.__dict__
        for name in self.node.methods:
            method = state.get(name)
            if isinstance(method, ResultMethod):
                state[name] = method.following(new)
        state[_COPIES] = ShallowCopies(new)


#: Where a converted result with methods holds its ShallowCopies.
_COPIES = "__reduce_ex__"


class ShallowCopies:
    """A converted result's own ``__reduce_ex__``: ``copy.copy`` looks it up on the object
    (its type's ``__copy__`` on the type alone, which is the user's), and a shallow copy would
    otherwise share the methods, which follow the result copied. ``copy.copy``'s copy gets
    methods of its own (see ResultFields.copied); pickling and ``copy.deepcopy`` reduce the
    result as its type does, these methods pickling as themselves."""

    __slots__ = ("fields",)

    def __init__(self, fields: ResultFields) -> None:
        self.fields = fields

    def __call__(self, protocol: int) -> Any:
        converted = self.fields.converted()
        reduce_ex: Any = type(converted).__reduce_ex__  # the type's own, past this one
        reduced = reduce_ex(converted, protocol)
        # Only the frame that asks tells a shallow copy from pickle's and deepcopy's
        # reductions, which keep the methods (the memo links them to the new object) and
        # leave this out: their fields give the new object its own (see ResultFields.__setstate__).
        if sys._getframe(1).f_code is not copy.copy.__code__:
            return _without_copies(reduced)
        return _shallow_copy, (reduced, self.fields)


def _without_copies(reduced: tuple[Any, ...]) -> tuple[Any, ...]:
    """``reduced``, a converted result's reduction by its type, with no ShallowCopies in the
    state, nor in the keywords of a type that hands its ``__dict__`` to its constructor."""

    def left_out(state: Any) -> Any:
        if isinstance(state, dict) and _COPIES in state:
            return {name: value for name, value in state.items() if name != _COPIES}
        if isinstance(state, tuple) and len(state) == 2:  # (__dict__, slots)
            return left_out(state[0]), state[1]
        return state

    made, args, *rest = reduced
    if made is copyreg.__newobj_ex__:  # type: ignore[attr-defined]  # (cls, args, kwargs); typeshed lacks it
        args = (args[0], args[1], left_out(args[2]))
    if rest:
        rest[0] = left_out(rest[0])
    return (made, args, *rest)


def _shallow_copy(reduced: tuple[Any, ...], fields: ResultFields) -> Any:
    """The result ``reduced`` (its type's reduction) made again, with methods of its own."""
    made = reduced[0](*reduced[1])
    state = reduced[2] if len(reduced) > 2 else None
    if hasattr(made, "__setstate__"):  # as copy.copy sets the state
        made.__setstate__(state)
    elif state:
        state, slots = state if isinstance(state, tuple) else (state, None)
        made.__dict__.update(state or {})
        for name, value in (slots or {}).items():
            object.__setattr__(made, name, value)
    fields.copied(made)
    return made


#: What a method may change in place inside the object it runs on (see ``_inside_of``), a pair
#: (a plain tuple: one is made at each call): by attribute, a list or dict and what it held;
#: by attribute, an object the conversion rebuilt (a dataclass, a result with methods): the
#: caller's, the method's twin of it, the twin's attributes and what may change inside it.
Inside = tuple[dict[str, tuple[Any, list[Any]]], dict[str, tuple[Any, Any, dict[str, Any], "Inside"]]]
Carried = Callable[[Any, str], Any]
#: The containers a result's attribute may hold that a method changes in place, followed
#: (see ``_inside_of``): those the conversion walks and rebuilds.
_IN_PLACE = frozenset([list, dict, collections.OrderedDict, collections.defaultdict])
#: The containers of a method's value in which the caller's twins are put (see ``with_twins``).
_WALKED = frozenset([tuple, list, dict])


def _followed(attributes: dict[str, Any]) -> list[str]:
    """The public attributes whose contents a method may change in place: lists, dicts and
    objects with attributes the conversion rebuilds (a dataclass, a result with methods)."""
    return [
        name
        for name, value in attributes.items()
        if not name.startswith("_")
        and (type(value) in _IN_PLACE or (hasattr(value, "__dict__") and _rebuilt_type(type(value))))
    ]


def _rebuilt_type(cls: type) -> bool:
    """Whether the conversion rebuilds objects of ``cls`` (a dataclass, a result with methods):
    a type it met already, as the types of a converted result's attributes are."""
    return cls in _REGISTRY or cls in _RECOGNISED


def _inside_of(state: dict[str, Any], caller: dict[str, Any], names: list[str]) -> Inside:
    """What may change in place in the attributes ``names`` of the object a method runs on
    (``state``, its attributes), the caller's object holding ``caller``: its lists and dicts
    with what they hold, and its objects the conversion rebuilt, at any depth."""
    contents: dict[str, tuple[Any, list[Any]]] = {}
    inner: dict[str, tuple[Any, Any, dict[str, Any], Inside]] = {}
    for name in names:
        value, mine = state.get(name), caller.get(name)
        if type(value) in _IN_PLACE:
            contents[name] = (value, _contents(value))
        elif _stands_for(mine, value):
            was, fields = dict(value.__dict__), _fields_of(mine)
            followed = _followed(mine.__dict__) if fields is None else fields.followed
            inner[name] = (mine, value, was, _inside_of(was, mine.__dict__, followed))
    return contents, inner


def _stands_for(mine: Any, value: Any) -> bool:
    """Whether the caller's ``mine`` is the conversion's twin of ``value``, the method's."""
    fields = _fields_of(mine)
    if fields is not None:
        return value is fields.original or value is fields.twin
    return mine is not value and type(mine) is type(value) and hasattr(value, "__dict__")


def _reassigned(now: dict[str, Any], before: dict[str, Any]) -> bool:
    """Whether an attribute of ``before`` was reassigned, added or deleted in ``now``."""
    return len(now) != len(before) or any(now.get(name, _UNSEEN) is not value for name, value in before.items())


def _moved(now: dict[str, Any], inside: Inside) -> list[str]:
    """The attributes in ``now`` whose contents changed in place since ``inside`` was found."""
    contents, inner = inside
    moved = [name for name, (held, was) in contents.items() if now.get(name) is held and not _holds_same(held, was)]
    for name, (_, value, was, deeper) in inner.items():
        if now.get(name) is value and (_reassigned(value.__dict__, was) or _moved(value.__dict__, deeper)):
            moved.append(name)
    return moved


def _snapshot(attributes: dict[str, Any], names: list[str]) -> Inside:
    """What the caller's lists, dicts and dataclasses among ``attributes`` hold (``names``), at
    any depth, to tell the caller's own changes in place there (``_moved``): as ``_inside_of``
    finds, the caller's object standing for itself."""
    contents: dict[str, tuple[Any, list[Any]]] = {}
    inner: dict[str, tuple[Any, Any, dict[str, Any], Inside]] = {}
    for name in names:
        value = attributes.get(name)
        if type(value) in _IN_PLACE:
            contents[name] = (value, _contents(value))
        elif _record(value):
            held = value.__dict__
            inner[name] = (value, value, dict(held), _snapshot(held, _followed(held)))
    return contents, inner


def _carried_into(
    now: dict[str, Any],
    before: dict[str, Any],
    inside: Inside | None,
    state: dict[str, Any],
    carried: Carried,
    *,
    methods: frozenset[str] = frozenset(),
) -> None:
    """Into ``state``, the caller's object's attributes: what a method changed in its twin's
    (``before``, now ``now``; ``inside``, in place), public values converted by ``carried``."""
    if _reassigned(now, before):
        for name in before.keys() - now.keys():
            state.pop(name, None)
        for name, value in now.items():
            if name not in methods and before.get(name, _UNSEEN) is not value:
                state[name] = value if name.startswith("_") else _own(carried(value, name), value)
    if inside is None:
        return
    contents, inner = inside
    for name, (held, was) in contents.items():
        if now.get(name) is held and not _holds_same(held, was):
            mine = state.get(name)
            if type(mine) is type(held) and mine is not held:
                _refill(mine, held, was, _prefixed(carried, name))
            else:
                state[name] = _own(carried(held, name), held)
    for name, (mine, value, attributes, deeper) in inner.items():
        if now.get(name) is value and state.get(name) is mine:
            fields = _fields_of(mine)
            if fields is not None:
                fields.carry(value, attributes, deeper, mine, _prefixed(carried, f"{name}."))
            else:
                _carried_into(value.__dict__, attributes, deeper, mine.__dict__, _prefixed(carried, f"{name}."))


def _prefixed(carried: Carried, prefix: str) -> Carried:
    """``carried``, naming what it converts inside an attribute (``hist[2]``, ``inner.w``)."""
    return lambda value, path: carried(value, prefix + path)


def _own(made: Any, source: Any) -> Any:
    """``made``, ``source`` converted for the other side of a result: a list or dict of its
    own where nothing in it converted, so that a change to one is never the other's unconverted."""
    return copy.copy(made) if made is source and type(made) in _IN_PLACE else made


def _own_containers(converted: dict[str, Any], original: dict[str, Any]) -> None:
    """Give a converted result (its attributes, ``converted``) lists and dicts of its own
    where it shares one with its original (an empty list), and so the dataclasses in its
    attributes, at any depth: what a method adds there reaches the caller converted."""
    for name, value in converted.items():
        was = original.get(name)
        if name.startswith("_") or not (type(value) in _IN_PLACE or _record(value)):
            continue
        own = converted[name] = copy.copy(value) if value is was else value
        if _record(own) and type(was) is type(own):
            _own_containers(own.__dict__, was.__dict__)


def _record(value: Any) -> bool:
    """Whether ``value`` is an object with attributes the conversion rebuilds that is no result
    with methods (which has fields of its own: see _MethodsNode.map)."""
    return hasattr(value, "__dict__") and _rebuilt_type(type(value)) and _fields_of(value) is None


def _contents(container: Any) -> list[Any]:
    """What a list holds, or a dict's keys then values: to tell a change in place by identity
    (see ``_holds_same``; arrays have no truth value)."""
    return container[:] if type(container) is list else [*container, *container.values()]


def _holds_same(container: Any, was: list[Any]) -> bool:
    """Whether a list or dict holds what ``_contents`` found in it, the same objects."""
    if type(container) is list:
        return len(container) == len(was) and all(map(operator.is_, container, was))
    return 2 * len(container) == len(was) and all(map(operator.is_, _contents(container), was))


def _refill(mine: Any, held: Any, was: list[Any], carried: Carried) -> None:
    """Make ``mine``, the caller's list or dict, hold what ``held``, its twin a method changed
    in place, holds now (see ``_mirrored``)."""
    items = _mirrored(held, mine, was, carried)
    if isinstance(mine, dict):
        mine.clear()
        mine.update(items)
    else:
        mine[:] = items


def _mirrored(source: Any, target: Any, was: list[Any], convert: Carried) -> Any:
    """What ``target``, a list or dict, is to hold to match ``source``, its twin on the other
    side changed in place (``was``: what ``source`` held, ``_contents``): ``target``'s own
    items where ``source`` holds the same object as it did, the others converted by ``convert``."""
    if isinstance(source, dict):
        before = dict(zip(was[: len(was) // 2], was[len(was) // 2 :], strict=True))
        return {
            key: target[key]
            if key in before and value is before[key] and key in target
            else convert(value, f"[{key!r}]")
            for key, value in source.items()
        }
    kept = min(len(target), len(was))  # the target's items stand for those the source held
    return [target[i] if i < kept and value is was[i] else convert(value, f"[{i}]") for i, value in enumerate(source)]


def _back_item(value: Any, key: str, *, side: ResultMethod, prefix: str) -> Any:
    """An item the caller put in a list or dict of a result, for its methods (``side.back``):
    a converted result with methods the object it stands for there, its original or twin (a
    result may hold itself: ``self.seen.append(self)``)."""
    fields = _fields_of(value)
    if fields is None:
        return side.back(value, prefix + key)
    return fields.original if fields.twin is None else fields.twin


def _twins(receiver: Any, converted: Any, inside: Inside | None, into: dict[int, tuple[Any, Any]]) -> None:
    """Into ``into``, by identity: ``receiver``, the object a method ran on, and what it holds
    (``inside``), each with the caller's object standing for it."""
    into[id(receiver)] = (receiver, converted)
    if inside is None:
        return
    now, state = receiver.__dict__, converted.__dict__
    contents, inner = inside
    for name, (held, _) in contents.items():
        if now.get(name) is held and name in state:
            into[id(held)] = (held, state[name])
    for name, (mine, value, _, deeper) in inner.items():
        if now.get(name) is value and state.get(name) is mine:
            _twins(value, mine, deeper, into)


def _holds(value: Any, twins: dict[int, tuple[Any, Any]]) -> bool:
    """Whether ``value`` is, or its tuples, lists and dicts hold, one of ``twins``."""
    pair = twins.get(id(value))
    if pair is not None and pair[0] is value:
        return True
    kind = type(value)
    if kind in _WALKED:
        return any(_holds(item, twins) for item in (value.values() if kind is dict else value))
    return False


def with_twins(value: Any, twins: dict[int, tuple[Any, Any]], convert: Callable[[Any], Any]) -> Any:
    """A method's ``value`` for the caller: the objects of ``twins`` it is or holds in its
    tuples, lists and dicts (``self``, ``(self, n)``, ``self.inner``) the caller's twins of
    them, the rest converted by ``convert``."""
    pair = twins.get(id(value))
    if pair is not None and pair[0] is value:
        return pair[1]
    kind = type(value)
    if kind not in _WALKED or not _holds(value, twins):
        return convert(value)
    if kind is dict:
        out = {}
        for key, item in value.items():
            try:
                out[key] = with_twins(item, twins, convert)
            except LeafError as e:
                e.keys.append(MappingKey(key))
                raise
        return out
    items = []
    for i, item in enumerate(value):
        try:
            items.append(with_twins(item, twins, convert))
        except LeafError as e:
            e.keys.append(SequenceKey(i))
            raise
    return items if kind is list else tuple(items)


def _fields_of(value: Any) -> ResultFields | None:
    """The fields of ``value``, where it is a converted result with methods; else None."""
    state = getattr(value, "__dict__", None)
    if isinstance(state, dict):
        for held in state.values():
            if isinstance(held, ResultMethod):
                return held.fields
    return None


def _link(converted: Any) -> Callable[[], Any]:
    """``converted``, as its methods' fields hold it: weakly, so that the cycle through its
    methods does not keep its tensors alive until the garbage collector runs (a tuple, which
    takes no weak reference, strongly)."""
    try:
        return weakref.ref(converted)
    except TypeError:
        return lambda: converted


def _fields_again(original: Any) -> ResultFields:
    """An unpickled result's fields, its state still to come (see ResultFields.__reduce__)."""
    node = node_for(type(original))
    assert isinstance(node, _MethodsNode)  # the node that made them, recognised again by the type
    fields = ResultFields.__new__(ResultFields)
    fields.node, fields.original = node, original
    return fields


class ResultMethod:
    """A method of the original result whose return value is converted like the result was,
    run on what the caller's result holds now (see ResultFields). The walking side may
    subclass it to convert the method's arguments, and the values the caller set, too (see _outputs)."""

    __slots__ = ("ctx", "fields", "mapper", "method")

    def __init__(self, method: Any, mapper: Walk, ctx: Any, fields: ResultFields) -> None:  # a bound method
        self.method, self.mapper, self.ctx, self.fields = method, mapper, ctx, fields

    def bound(self) -> Any:
        """The method, bound to the object it runs on now."""
        receiver = self.fields.receiver(self)
        return self.method if receiver is self.fields.original else getattr(receiver, self.method.__name__)

    def following(self, fields: ResultFields) -> ResultMethod:
        """This method, following ``fields`` (a shallow copy's, see ResultFields.copied)."""
        clone = object.__new__(type(self))
        for kind in type(self).__mro__:
            for slot in getattr(kind, "__slots__", ()):
                object.__setattr__(clone, slot, getattr(self, slot))
        clone.fields = fields
        return clone

    def run(self, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``method`` (``bound``'s) called as the caller's result's own: ``(value, twins)``,
        ``twins`` the caller's objects standing for those of the object it ran on that ``value``
        holds (a fluent ``return self``, ``(self, n)``, ``self.inner``: see ``with_twins``), else
        ``UNSEEN``. What the method changed on that object is carried to the caller's result
        (see ResultFields.ran)."""
        receiver = getattr(method, "__self__", None)
        if receiver is None or not hasattr(receiver, "__dict__"):  # a static method: no object to change
            return method(*args, **kwargs), UNSEEN
        fields = self.fields
        before = dict(receiver.__dict__)
        inside = fields.inside(before) if fields.followed else None
        try:
            result = method(*args, **kwargs)
        except BaseException:  # what it changed before raising stays, as on the plain object
            fields.ran(receiver, before, inside, None, self.carried)
            raise
        return result, fields.ran(receiver, before, inside, result, self.carried)

    def carried(self, value: Any, name: str) -> Any:
        """A value a method set on the object it ran on, for the caller's result: converted
        as the result's fields were."""
        try:
            return self.mapper(value, self.ctx)
        except LeafError as e:
            raise e.public(f"{getattr(self.method, '__qualname__', self.method)}()", "field", f"self.{name}") from None

    def back(self, value: Any, name: str) -> Any:
        """A value the caller set on the result, for the original's methods: as it is (a side
        that converts the arguments converts it too)."""
        return value

    def apart(self, converted: Any, original: Any) -> bool:
        """Whether ``converted``, made from the original's ``original``, is a copy of it (see
        ResultFields.apart); values as they are never are."""
        return False

    def convert(self, value: Any) -> Any:
        """A method's value converted as the result was (the objects of the result the method
        ran on it holds put by ``with_twins``: see ``run``)."""
        return self.mapper(value, self.ctx)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result, twins = self.run(self.bound(), args, kwargs)
        return self.mapper(result, self.ctx) if twins is UNSEEN else with_twins(result, twins, self.convert)

    def __reduce__(self) -> tuple[Any, ...]:
        # A side that converts nothing on the way in pickles as the original's method (the
        # original's: a static method binds no object).
        return getattr, (self.fields.original, self.method.__name__)


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
    and its methods run on the original (see _MethodsNode)."""
    names = [f.name for f in dataclasses.fields(cls)]
    methods = [n for n in public_methods(cls) if n not in names] if _has_dict(cls) else []
    if methods:
        names = [n for n in names if not n.startswith("_")]

    def unflatten(children: list[Any], obj: Any) -> Any:
        # A shallow copy with the changed fields set: no __init__/__post_init__ re-run
        # (they may validate NumPy types), and it works for frozen, slots and init=False.
        new = copy.copy(obj)
        for name, value in zip(names, children, strict=True):
            object.__setattr__(new, name, value)
        return new

    def flatten(x: Any) -> tuple[list[Any], Any]:
        return [getattr(x, n) for n in names], x

    def key(context: Any, i: int) -> KeyEntry:
        return GetAttrKey(names[i])

    return _MethodsNode(flatten, unflatten, key, methods) if methods else Node(flatten, unflatten, key)


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
