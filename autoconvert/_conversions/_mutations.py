"""What the function changed in the containers it was handed, made the caller's (every mode).

A container holding tensors reaches the function rebuilt, each tensor as an array (one
rebuilt container per caller's container, so that sharing is kept: see ``Rebuilt``). The
arrays follow their mode (read-only views, private copies, writeback's copies back); this
makes the rest the caller's: a key added, removed or moved, an item appended, popped or
replaced, a dataclass field or attribute set. A value the function put in converts as a
result would (new arrays become tensors), except a value it was handed, which is the
caller's again: an array its tensor, a rebuilt container the caller's container. A list
or dict without tensors is handed as it is, so its changes are the caller's already; in a
call with tensors, the arrays the function put in it become tensors all the same (the
caller works in torch), and it is recorded as handed to itself.
What a container holds and how it takes a change are its registered node's (its
``ContainerWrites``, see _containers): this module compares and hands over, and never asks a type.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable
from typing import Any

from autoconvert._errors import ConversionError, KeyEntry, LeafError

from ._containers import Held, node_for, registered

#: The caller's container, the one the function was handed, and what that held then (see ``_held_copy``).
Record = tuple[Any, Any, Any]
#: id(caller's container) -> its Record: one rebuilt container per caller's container in a call.
Rebuilt = dict[int, Record]
_ABSENT = object()


def rebuilt(records: Rebuilt | None, original: Any, handed: Any) -> Rebuilt:
    """``records`` (a new dict where None) with ``handed``, the container the function gets
    for the caller's ``original`` (``original`` itself where it held no tensors), and what it
    holds now, to compare with after the call."""
    if records is None:
        records = {}
    records[id(original)] = (original, handed, _held_copy(handed))
    return records


def _held_copy(container: Any) -> Any:
    """What ``container`` holds, to compare after the call: an exact list's or dict's copy (a
    flat call's container of tensors pays one copy), any other container's ``Held``."""
    kind = type(container)
    return kind(container) if kind is list or kind is dict else held(container)


def held(container: Any) -> Held:
    """What ``container`` holds, as its node's ``ContainerWrites`` sees it."""
    node = node_for(type(container))
    assert node is not None  # only containers are rebuilt
    return node.writes.held(container)


def changed(records: Iterable[Record]) -> bool:
    """Whether the function changed a container it was handed rebuilt: one pass of identity
    checks, all a call that changed none pays after it."""
    is_ = operator.is_
    for _, handed, before in records:
        kind = type(handed)
        if kind is list or kind is dict:
            if len(handed) != len(before) or not all(map(is_, handed, before)):  # items, or keys in order
                return True
            if kind is dict and not all(map(is_, handed.values(), before.values())):
                return True
        else:
            now = held(handed)
            if len(now.children) != len(before.children) or not all(map(is_, now.children, before.children)):
                return True
            if now.keys != before.keys:
                return True
    return False


def apply_changes(
    records: list[Record],
    convert: Callable[[Any], Any],
    rebuilt_as: str = "its tensors as arrays",
    bare: Iterable[tuple[Any, Any]] = (),
) -> list[tuple[Any, LeafError]]:
    """After a call that ``changed`` its containers: make each caller's container in
    ``records`` hold what its rebuilt one holds now, ``convert`` turning new values into the
    caller's kind (in new containers too), except a value the function was handed: the
    caller's again (``bare``: (what it got, the caller's) for its bare arguments). Gives the
    containers that cannot take their change, with the fact (its keys: the path inside the
    container; ``rebuilt_as``: what the rebuilt copy held instead), having made every other change.
    One call's changes at a time: each reads the caller's containers as they are then (a slot
    another call wrote meanwhile is kept) and writes them back before another reads them."""
    with _PUTTING_BACK:
        return _apply_changes(records, convert, rebuilt_as, bare)


#: Held while a call's changes are put back (re-entered by a registered update calling a decorated function).
_PUTTING_BACK = threading.RLock()


def _apply_changes(
    records: list[Record], convert: Callable[[Any], Any], rebuilt_as: str, bare: Iterable[tuple[Any, Any]]
) -> list[tuple[Any, LeafError]]:
    lines = [_then_and_now(record) for record in records]
    for (original, handed, before), (then, callers) in zip(records, lines, strict=True):
        # changed meanwhile, by another way than the copy (another argument handed it as it
        # is, or a call on another thread): only a container the function changed is put back
        if handed is not original and callers.keys != then.keys and changed([(original, handed, before)]):
            return [(original, _changed_meanwhile_refusal(original, rebuilt_as))]
    mine = _handed_back(records, lines)
    for got, callers in bare:
        mine.setdefault(id(got), callers)

    def back(value: Any, ctx: Any = None) -> Any:
        found = mine.get(id(value), _ABSENT)
        if found is not _ABSENT:
            return found
        node = node_for(type(value))  # a new container: what it holds the function was handed is the caller's too
        return convert(value) if node is None else node.map(value, back, None)

    refused = []
    for original, handed, before in records:
        if not changed([(original, handed, before)]):  # another record of its container's may have changed
            continue
        now = held(handed)
        try:
            children = _back_all(now, back, node_for(type(original)).writes.entry)  # type: ignore[union-attr]
        except LeafError as e:  # a value the function put in that cannot convert (a masked array)
            refused.append((original, e))
            continue
        then = held(original)
        if now.keys == then.keys and all(map(operator.is_, children, then.children)):
            continue
        if not node_for(type(original)).writes.take(original, children, now.context):  # type: ignore[union-attr]
            refused.append((original, _refusal(original, then, Held(now.keys, children, now.context), rebuilt_as)))
    return refused


def _back_all(now: Held, back: Callable[[Any], Any], entry: Callable[[Any], KeyEntry]) -> list[Any]:
    """``back`` applied to each child ``now`` holds; a child's refusal names its key entry."""
    children = []
    for key, value in zip(now.keys, now.children, strict=True):
        try:
            children.append(back(value))
        except LeafError as e:
            e.keys.append(entry(key))
            raise
    return children


def _then_and_now(record: Record) -> tuple[Held, Held]:
    """What the rebuilt copy of a record's container was made with, and what the caller's holds now."""
    original, handed, before = record
    then = before if type(before) is Held else held(before)  # an exact list's or dict's copy
    # A container handed as it is (it held no tensors) held the caller's own values.
    return then, then if handed is original else held(original)


def _handed_back(records: list[Record], lines: list[tuple[Held, Held]]) -> dict[int, Any]:
    """id(what the function was handed) -> the caller's value it stood for: each array its
    tensor, each rebuilt container the caller's container, each other value itself (``lines``:
    each record's ``_then_and_now``)."""
    mine: dict[int, Any] = {}
    for (original, handed, _), (then, callers) in zip(records, lines, strict=True):
        mine[id(handed)] = original
        if callers.keys != then.keys:  # changed meanwhile (the function left it alone): no longer in line
            continue
        for value, caller in zip(then.children, callers.children, strict=True):
            mine.setdefault(id(value), caller)
    return mine


def _changed_meanwhile_refusal(original: Any, rebuilt_as: str) -> LeafError:
    """The fact of a caller's container changed during the call while the function changed
    its rebuilt copy: putting the copy back would undo the other change, so none is made."""
    kind = type(original)
    return LeafError(
        ConversionError,
        f"was changed during the call other than through the rebuilt copy the function was handed ({rebuilt_as}), "
        "which the function changed too: putting the copy back would undo the other change, so the function's "
        "changes were not put back (the same container handed through an argument left unconverted too, or "
        "changed by a call on another thread)",
        f"{kind.__module__}.{kind.__qualname__}",
        "hand the container through one argument (or convert every argument it is handed through), and guard a "
        "container that calls on several threads change with a lock, or give each call its own",
    )


def _refusal(original: Any, then: Held, now: Held, rebuilt_as: str) -> LeafError:
    """The fact of a change ``original`` cannot take: the first child it was made at."""
    before, after = dict(zip(then.keys, then.children, strict=True)), dict(zip(now.keys, now.children, strict=True))
    key = next(k for k in [*before, *after] if before.get(k, _ABSENT) is not after.get(k, _ABSENT))
    kind = type(original)
    entry: KeyEntry = node_for(kind).writes.entry(key)  # type: ignore[union-attr]
    fix = "return the changed value instead, or make the change on the caller's side"
    if registered(kind):  # one it could take, told how
        fix = f"register {kind.__qualname__} with an update (autoconvert.register_container(..., update=...)), {fix}"
    return LeafError(
        ConversionError,
        f"was changed by the function (at {entry}), and a {kind.__qualname__} cannot take the change back: the "
        f"function was handed a rebuilt copy ({rebuilt_as}), and only a dict, a list, a dataclass that is "
        "not frozen or a type registered with an update takes back changes made to one",
        f"{kind.__module__}.{kind.__qualname__}",
        fix,
    )


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


def cycle_in(value: Any) -> list[KeyEntry]:
    """The key entries from ``value`` down to the first container found holding itself ([]:
    ``value`` itself, or none found in a value nesting deeper than the recursion limit): only
    for a message, after a refusal, so looked for without recursion, each container once."""
    depths = {id(value): 0}  # the containers on the path walked down, by id: their depth
    node = node_for(type(value))
    trail = [] if node is None else [(value, node.items(value))]
    keys: list[KeyEntry] = []
    seen = {id(value)}
    while trail:
        obj, items = trail[-1]
        for key, child in items:
            depth = depths.get(id(child))
            if depth is not None:  # an object on the path holds itself
                return keys[:depth]
            node = node_for(type(child))
            if node is not None and id(child) not in seen:
                seen.add(id(child))
                depths[id(child)] = len(trail)
                keys.append(key)
                trail.append((child, node.items(child)))
                break
        else:
            trail.pop()
            del depths[id(obj)]
            if keys:
                keys.pop()
    return []
