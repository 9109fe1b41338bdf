"""A converted result's copies of what its methods run on: an array widened for NumPy (bfloat16),
one made under ``copy=True``, one on another device. The two share no memory, so a write in
place into one (``r.hist[0][0] = v``, ``self.w[0] = v``) is not the other's: each copy is
paired with what the methods hold at its place, and the two are kept one state by value at
each method call (the caller's writes copied in before it, the method's back after it: see
ResultFields.receiver and ResultMethod.run), a snapshot of each side telling a write at the
cost of a comparison. The side compares and copies (its ``refresh`` and ``refreshed``): this
module imports neither torch nor NumPy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ._containers import _changes_inside

#: A copy the caller's result holds: ``[mine, theirs, where, mine_was, theirs_was]``, the
#: caller's value, what the methods hold at its place, that place below the result (``hist[0]``,
#: ``head.w``), and a snapshot of each side at the last call (None until one was taken; ``mine``
#: itself where the two were just made one from the other). A list: the snapshots are renewed.
HeldCopy = list[Any]
#: What ``_paired_inside`` passes down: ``paired``, the copies found, those known already by the ids of
#: their two sides (their snapshots kept), and the ids of the containers looked in.
_Walk = tuple[Callable[[Any, Any], bool], list[HeldCopy], dict[tuple[int, int], HeldCopy], set[int]]


def copies_at(
    names: Iterable[str],
    attributes: dict[str, Any],
    state: dict[str, Any],
    paired: Callable[[Any, Any], bool],
    *,
    depth: int,
    known: Iterable[HeldCopy],
) -> dict[str, list[HeldCopy]]:
    """By attribute of ``names``, the values the caller's result holds there (``attributes``)
    that ``paired`` tells copies of what the object its methods run on holds at the same place
    (``state``), bare or inside its lists, dicts, tuples and records, ``depth`` containers deep,
    each container looked in once (a list holding itself, a record at two places); those among
    ``known`` as they were, with their snapshots."""
    found: dict[str, list[HeldCopy]] = {}
    kept = {(id(copy[0]), id(copy[1])): copy for copy in known}
    seen: set[int] = set()
    for name in names:
        if name in attributes and name in state:
            walk: _Walk = (paired, [], kept, seen)
            _paired_inside(attributes[name], state[name], name, depth, walk)
            found[name] = walk[1]
    return found


def _paired_inside(mine: Any, theirs: Any, where: str, depth: int, walk: _Walk) -> None:
    """The copies inside ``mine``, the caller's, paired with what ``theirs`` holds at their places
    (a module function, not a closure: a recursive closure is a reference cycle, which would keep
    the caller's tensors alive until the garbage collector runs)."""
    if mine is theirs:
        return
    paired, found, kept, seen = walk
    if not _changes_inside(mine):
        if paired(mine, theirs):
            found.append(kept.get((id(mine), id(theirs))) or [mine, theirs, where, None, None])
        return
    if depth == 0 or id(mine) in seen or type(theirs) is not type(mine):
        return
    seen.add(id(mine))
    if isinstance(mine, dict):
        for key, item in mine.items():
            if key in theirs:
                _paired_inside(item, theirs[key], f"{where}[{key!r}]", depth - 1, walk)
    elif isinstance(mine, (list, tuple)) and len(mine) == len(theirs):
        for i, (item, other) in enumerate(zip(mine, theirs, strict=True)):
            _paired_inside(item, other, f"{where}[{i}]", depth - 1, walk)
    if hasattr(mine, "__dict__"):  # a record, a result with methods, a tuple bunch's attributes
        state = theirs.__dict__
        for name, value in mine.__dict__.items():
            if not name.startswith("_") and name in state:  # private ones are held as they are
                _paired_inside(value, state[name], f"{where}.{name}", depth - 1, walk)
