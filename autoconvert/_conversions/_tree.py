"""Mapping a function over the leaves of a tree of containers (see _containers).

A ``Mapper`` dispatches on exact type, one dict lookup per value: a leaf type gets its
leaf function, a plain value ``keep``, a container the walk of its node; each new type's
decision is made once and cached, and made again after a registration.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

from autoconvert._errors import KeyPath, LeafError, MappingKey, SequenceKey

from ._containers import BUILTIN_NODES, GENERATION, Node, listen, node_for

Leaf = Callable[[Any, Any], Any]  # (value, per-call context) -> converted value


def keep(value: Any, ctx: Any) -> Any:
    """The handler of plain values: returned untouched."""
    return value


class StandIn:
    """Base of the values that stand for an object of NumPy's world, ``__wrapped__`` (the
    torchified views of a module, a class, an object): where a value crosses to NumPy's
    side, the object itself does, since NumPy code (``csgraph``'s ``tocsr().astype()``)
    cannot work through the view's tensors.

    A stand-in keeps its state and hooks under wrapt's prefix, ``_self_``, on itself: names
    it never forwards to the object. The call machinery reaches them through the accessors
    below (``stand_in_device``, ``place_stand_in``, ``stand_in_returns``) alone."""

    __slots__ = ()

    def _self_stood_for(self) -> Any:
        """The object this value stands for, where it crosses to NumPy's side; one that
        cannot cross raises a ``LeafError`` (a proxy of an object holding tensors)."""
        return self.__wrapped__  # type: ignore[attr-defined]


def stood_for(value: StandIn, ctx: Any) -> Any:
    """The NumPy sides' handler of a ``StandIn``: the object it stands for."""
    return value._self_stood_for()


#: The device of the tensors last passed to a stand-in for an object (None: none yet), where
#: its results and the values read off it go. An attrgetter: the flat call reads it per call.
stand_in_device: Callable[[Any], Any] = operator.attrgetter("_self_device")


def place_stand_in(stand_in: Any, device: Any) -> None:
    """Record ``device`` as ``stand_in``'s (see stand_in_device), past its own ``__setattr__``,
    which sets the object's attributes."""
    object.__setattr__(stand_in, "_self_device", device)


def stand_in_returns(stand_in: Any, result: Any) -> Any:
    """A method's converted ``result`` as the caller of ``stand_in``'s method gets it (an object
    of the object's package as its stand-in)."""
    return stand_in._self_returned(result)


class Mapper:
    """Applies leaf functions to the leaves of chosen types anywhere in a tree.

    ``leaves`` maps a type to its leaf function; instances of subclasses use their
    nearest registered base. Dispatch is one dict lookup on the exact type, with the
    decision for each new type made once and cached (einops' habit).
    """

    def __init__(
        self,
        leaves: dict[type, Leaf],
        *,
        nested: bool = True,
        fallback: Callable[[type], Leaf | None] | None = None,
        result_method: Callable[[Any, Mapper, Any, Any], Any] | None = None,
    ) -> None:
        self._leaves = leaves
        self._nested = nested
        self._fallback = fallback  # leaf types known only by a test, such as SciPy's sparse classes
        #: ``result_method(bound, mapper, ctx, fields)``: a method of a result container whose
        #: fields were converted, as the copy holds it (see _result_methods._MethodsNode); None: its
        #: value converted as the result was.
        self.result_method = result_method
        #: exact type -> handler; callers on the hot path may look up here directly and
        #: fall back to resolve() on a miss, skipping one call layer.
        self.dispatch: dict[type, Callable[[Any, Any], Any]] = {}
        #: The exact types whose handler is ``keep`` (plain values): a membership test, where
        #: ``dispatch.get(cls) is keep`` is a call. A type not in it yet is in neither.
        self.kept: set[type] = set()
        #: The inlined walks of exact list/tuple and dict, bound once, so the flat call can
        #: tell by identity that this Mapper walks them as built in (see _specialise).
        self.walk_sequence: Callable[[Any, Any], Any] = self._sequence
        self.walk_dict: Callable[[Any, Any], Any] = self._dict
        self.forget()
        listen(self)

    def wrap_leaves(self, wrap: Callable[[Leaf], Leaf]) -> None:
        """Route every leaf function, found now or later by ``fallback``, through ``wrap``."""
        self._leaves = {cls: wrap(leaf) for cls, leaf in self._leaves.items()}
        fallback = self._fallback
        if fallback is not None:

            def wrapped_fallback(cls: type) -> Leaf | None:
                found = fallback(cls)
                return None if found is None else wrap(found)

            self._fallback = wrapped_fallback
        self.forget()

    def forget(self) -> None:
        """Drop cached decisions (after a registration). Other threads may look up meanwhile:
        a miss goes to resolve(), which decides leaf types from ``_leaves`` itself."""
        self.kept.clear()
        self.dispatch.clear()
        self.dispatch.update(self._leaves)
        for plain in (int, float, bool, str, bytes, complex, type(None)):
            if self.dispatch.setdefault(plain, keep) is keep:
                self.kept.add(plain)

    def __call__(self, obj: Any, ctx: Any) -> Any:
        handler = self.dispatch.get(type(obj))
        if handler is None:
            handler = self.resolve(type(obj))
        return handler(obj, ctx)

    def resolve(self, cls: type) -> Callable[[Any, Any], Any]:
        """The handler of exact type ``cls``, decided and cached.

        Another thread may register ``cls`` while this one decides: a decision stored after
        that registration's ``forget()`` would stay, stale, until the next registration. So
        the decision is stored, then made again if the registry changed meanwhile (a
        registration that comes later still clears what was stored)."""
        while True:
            generation = GENERATION[0]
            handler = self._decide(cls)
            if GENERATION[0] == generation:
                return handler

    def _decide(self, cls: type) -> Callable[[Any, Any], Any]:
        handler: Callable[[Any, Any], Any] = keep
        if issubclass(cls, (str, bytes)):  # np.str_ is a str first: a label, never data
            return self._decided(cls, handler)
        for base in cls.__mro__:  # cls itself too: dispatch may be mid-forget() in another thread
            if base in self._leaves:
                handler = self._leaves[base]
                break
        else:
            found = self._fallback(cls) if self._fallback is not None else None
            if found is not None:
                return self._decided(cls, found)
            node = node_for(cls) if self._nested else None
            if node is not None:
                inlined = BUILTIN_NODES.get(cls) is node
                handler = (self.walk_dict if cls is dict else self.walk_sequence) if inlined else self._container(node)
        return self._decided(cls, handler)

    def _decided(self, cls: type, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``handler`` cached for exact type ``cls`` (and ``cls`` among the kept types if it keeps)."""
        self.dispatch[cls] = handler
        if handler is keep:
            self.kept.add(cls)
        else:  # decided again after a registration (see resolve)
            self.kept.discard(cls)
        return handler

    # Inlined maps for exact list, tuple and dict, the containers batches come in: the same
    # result as Node.map (same type; the same object when nothing changed), with the child
    # dispatch inlined and no flatten/unflatten lists.

    def _sequence(self, obj: list[Any] | tuple[Any, ...], ctx: Any) -> Any:
        get, resolve = self.dispatch.get, self.resolve
        out: list[Any] = []
        try:
            for child in obj:
                out.append((get(type(child)) or resolve(type(child)))(child, ctx))
        except LeafError as e:
            e.keys.append(SequenceKey(len(out)))
            raise
        if not any(map(operator.is_not, out, obj)):
            return obj
        return out if type(obj) is list else tuple(out)

    def _dict(self, obj: dict[Any, Any], ctx: Any) -> Any:
        get, resolve = self.dispatch.get, self.resolve
        out: dict[Any, Any] = {}
        key = None
        try:
            for key, child in obj.items():
                out[key] = (get(type(child)) or resolve(type(child)))(child, ctx)
        except LeafError as e:
            e.keys.append(MappingKey(key))
            raise
        return out if any(map(operator.is_not, out.values(), obj.values())) else obj

    def _container(self, node: Node) -> Callable[[Any, Any], Any]:
        def handler(obj: Any, ctx: Any) -> Any:
            return node.map(obj, self, ctx)

        return handler

    def is_leaf_type(self, cls: type) -> bool:
        """Whether instances of ``cls`` are converted by a leaf function."""
        return cls in self._leaves or any(base in self._leaves for base in cls.__mro__[1:])

    def leaves_with_paths(self, obj: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
        """``(key entries, leaf)`` for every convertible leaf: the slow walk error messages use."""
        cls = type(obj)
        if self.is_leaf_type(cls):
            yield path, obj
            return
        node = node_for(cls) if self._nested else None
        if node is not None:
            for key, child in node.items(obj):
                yield from self.leaves_with_paths(child, (*path, key))
