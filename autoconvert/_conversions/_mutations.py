"""``writeback=True``: what the function changed in the containers it was handed, made the caller's.

A container holding tensors reaches the function rebuilt, each tensor as an array. The
arrays' contents are copied back by ``_writeback``; this copies back the rest: a key added
or removed, an item appended or replaced, a dataclass field or attribute set. A value the
function put in converts as a result would (new arrays become tensors), except an array it
was handed, which is its tensor again. A container without tensors is handed as it is, so
its changes are the caller's already.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from autoconvert._errors import ConversionError, LeafError

from ._containers import node_for

#: The call's tensors and the arrays they were converted to: ``(tensor, array)``.
Converted = list[tuple[torch.Tensor, Any]]
_MISSING = object()


def reach(original: Any, rebuilt: Any, converted: Converted, convert: Callable[[Any], Any]) -> None:
    """Make the caller's container ``original`` hold what ``rebuilt`` (the one the function was
    handed) holds now, ``convert`` turning new values into the caller's kind. Raises a
    ``LeafError`` (its keys: the path inside ``original``) where a container cannot take a change."""
    arrays: dict[int, list[Any]] = {}
    for t, a in converted:
        arrays.setdefault(id(t), []).append(a)
    tensors = {id(a): t for t, a in converted}

    def back(value: Any) -> Any:
        tensor = tensors.get(id(value))
        return convert(value) if tensor is None else tensor

    _reach(original, rebuilt, arrays, back)


def _reach(original: Any, rebuilt: Any, arrays: dict[int, list[Any]], back: Callable[[Any], Any]) -> None:
    before, after = _children(original), _children(rebuilt)
    changes: dict[Any, Any] = {}
    for key in [*before, *(k for k in after if k not in before)]:
        was, now = before.get(key, _MISSING), after.get(key, _MISSING)
        if now is was:
            continue
        if isinstance(was, torch.Tensor) and any(now is a for a in arrays.get(id(was), ())):
            continue  # the array handed for it: its writes are copied back with the others
        if type(now) is type(was) and node_for(type(was)) is not None and now is not _MISSING:
            try:
                _reach(was, now, arrays, back)
            except LeafError as e:
                e.keys.append(_segment(original, key))
                raise
            continue
        changes[key] = _MISSING if now is _MISSING else back(now)
    if changes:
        _apply(original, changes)


def _children(obj: Any) -> dict[Any, Any]:
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


def _apply(original: Any, changes: dict[Any, Any]) -> None:
    """Set ``changes`` (key: new value, or _MISSING for a removed one) in ``original``."""
    if isinstance(original, dict):
        for key, value in changes.items():
            if value is _MISSING:
                del original[key]
            else:
                original[key] = value
        return
    if isinstance(original, list):
        items = dict(enumerate(original))
        items.update(changes)
        original[:] = [v for _, v in sorted(items.items()) if v is not _MISSING]
        return
    if dataclasses.is_dataclass(original) and not getattr(original, "__dataclass_params__").frozen:  # noqa: B009 - untyped
        for name, value in changes.items():
            if value is _MISSING:
                delattr(original, name)
            else:
                setattr(original, name, value)
        return
    key = next(iter(changes))
    raise LeafError(
        ConversionError,
        f"was changed by the function (at {_segment(original, key)}), and a {type(original).__qualname__} "
        "cannot take the change back: writeback=True hands it a rebuilt copy, whose arrays' contents are "
        "copied back but not its own changes",
        f"{type(original).__module__}.{type(original).__qualname__}",
        "return the changed value instead, or make the change on the caller's side",
    )


def _segment(container: Any, key: Any) -> str:
    """``key``'s path segment in ``container``: ``['k']``, ``[0]``, ``.name``."""
    if isinstance(container, dict) or not isinstance(key, (int, str)):
        return f"[{key!r}]"
    return f"[{key}]" if isinstance(key, int) else f".{key}"
