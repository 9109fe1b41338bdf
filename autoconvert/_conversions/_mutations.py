"""What the function changed in the containers it was handed, made the caller's (every mode).

A container holding tensors reaches the function rebuilt, each tensor as an array (one
rebuilt container per caller's container, so that sharing is kept: see ``Rebuilt``). The
arrays follow their mode (read-only views, private copies, writeback's copies back); this
makes the rest the caller's: a key added, removed or moved, an item appended, popped or
replaced, a dataclass field or attribute set. A value the function put in converts as a
result would (new arrays become tensors), except a value it was handed, which is the
caller's again: an array its tensor, a rebuilt container the caller's container. A
container without tensors is handed as it is, so its changes are the caller's already.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable
from typing import Any

from autoconvert._errors import ConversionError, GetAttrKey, KeyEntry, LeafError, MappingKey, SequenceKey

from ._containers import node_for

#: The caller's container, the one the function was handed, and what that held then (see ``_held``).
Record = tuple[Any, Any, Any]
#: id(caller's container) -> its Record: one rebuilt container per caller's container in a call.
Rebuilt = dict[int, Record]
_MISSING = object()


def rebuilt(records: Rebuilt | None, original: Any, handed: Any) -> Rebuilt:
    """``records`` (a new dict where None) with ``handed``, the container the function gets
    for the caller's ``original``, and what it holds now, to compare with after the call."""
    if records is None:
        records = {}
    records[id(original)] = (original, handed, _held(handed))
    return records


def _held(container: Any) -> Any:
    """What ``container`` holds, to compare after the call: an exact list's or dict's copy (a
    flat call's container of tensors pays one copy), any other container's children by key."""
    kind = type(container)
    return kind(container) if kind is list or kind is dict else children(container)


def changed(records: Iterable[Record]) -> bool:
    """Whether the function changed a container it was handed rebuilt: one pass of identity
    checks, all a call that changed none pays after it."""
    is_ = operator.is_
    for _, handed, before in records:
        now = handed if type(handed) is list or type(handed) is dict else children(handed)
        if len(now) != len(before) or not all(map(is_, now, before)):  # items, or keys in order
            return True
        if type(now) is dict and not all(map(is_, now.values(), before.values())):
            return True
    return False


def _by_key(held: Any) -> dict[Any, Any]:
    return dict(enumerate(held)) if type(held) is list else held


def settle(records: list[Record], convert: Callable[[Any], Any]) -> list[tuple[Any, LeafError]]:
    """After a call that ``changed`` its containers: make each caller's container in
    ``records`` hold what its rebuilt one holds now, ``convert`` turning new values into the
    caller's kind (in new containers too). Gives the containers that cannot take their
    change, with the fact (its keys: the path inside the container), having made every
    other change."""
    mine = _handed_back(records)

    def back(value: Any, ctx: Any = None) -> Any:
        found = mine.get(id(value), _MISSING)
        if found is not _MISSING:
            return found
        node = node_for(type(value))  # a new container: what it holds the function was handed is the caller's too
        return convert(value) if node is None else node.map(value, back, None)

    refused = []
    for original, handed, before in records:
        if not changed([(original, handed, before)]):  # another record of its container's may have changed
            continue
        now = {key: back(value) for key, value in children(handed).items()}
        try:
            _apply(original, now)
        except LeafError as e:
            refused.append((original, e))
    return refused


def _handed_back(records: list[Record]) -> dict[int, Any]:
    """id(what the function was handed) -> the caller's value it stood for: each array its
    tensor, each rebuilt container the caller's container, each other value itself."""
    mine: dict[int, Any] = {}
    for original, handed, before in records:
        mine[id(handed)] = original
        caller = children(original)
        for key, value in _by_key(before).items():
            mine.setdefault(id(value), caller[key])
    return mine


def children(obj: Any) -> dict[Any, Any]:
    """What ``obj`` holds, by key: a mapping's items, a sequence's by index, a dataclass's
    fields and attributes, another registered container's children by index."""
    if isinstance(obj, dict):
        return dict(obj)
    if isinstance(obj, (list, tuple)):
        return dict(enumerate(obj))
    if dataclasses.is_dataclass(obj):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return {**fields, **getattr(obj, "__dict__", {})}
    node = node_for(type(obj))
    return dict(enumerate(node.flatten(obj)[0])) if node is not None else {}


def _apply(original: Any, now: dict[Any, Any]) -> None:
    """Make ``original`` hold ``now`` (key: value), in its order; a LeafError where it cannot."""
    before = children(original)
    if list(now) == list(before) and all(map(operator.is_, now.values(), before.values())):
        return
    if isinstance(original, dict):
        if list(now) == list(before):
            for key, value in now.items():
                if value is not before[key]:
                    original[key] = value
        else:  # keys added, removed or moved: the caller's dict (and its kind) keeps the new order
            original.clear()
            original.update(now)
        return
    if isinstance(original, list):
        original[:] = now.values()
        return
    if dataclasses.is_dataclass(original) and not getattr(original, "__dataclass_params__").frozen:  # noqa: B009 - untyped
        for name in before.keys() - now.keys():
            delattr(original, name)
        for name, value in now.items():
            if value is not before.get(name, _MISSING):
                setattr(original, name, value)
        return
    key = next(k for k in [*before, *now] if before.get(k, _MISSING) is not now.get(k, _MISSING))
    raise LeafError(
        ConversionError,
        f"was changed by the function (at {_entry(original, key)}), and a {type(original).__qualname__} "
        "cannot take the change back: the function was handed a rebuilt copy (its tensors as arrays), and only "
        "a dict, a list or a dataclass that is not frozen takes back changes made to one",
        f"{type(original).__module__}.{type(original).__qualname__}",
        "return the changed value instead, or make the change on the caller's side",
    )


def _entry(container: Any, key: Any) -> KeyEntry:
    """``key``'s key entry in ``container``: ``['k']``, ``[0]``, ``.name``."""
    if isinstance(container, dict) or not isinstance(key, (int, str)):
        return MappingKey(key)
    return SequenceKey(key) if isinstance(key, int) else GetAttrKey(key)


def path_to(value: Any, container: Any, seen: set[int] | None = None) -> list[KeyEntry] | None:
    """The key entries from ``value`` down to ``container`` (found by identity), or None:
    only for a message, after a refusal; a container met twice is looked in once."""
    if value is container:
        return []
    node = node_for(type(value))
    seen = set() if seen is None else seen
    if node is None or id(value) in seen:
        return None
    seen.add(id(value))
    for key, child in node.items(value):
        below = path_to(child, container, seen)
        if below is not None:
            return [key, *below]
    return None
