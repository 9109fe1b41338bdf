"""A converted result's copies of what its methods run on: an array widened for NumPy (bfloat16),
one made under ``copy=True``, one on another device, one torch could not share. The two share no
memory, so a write in place into one (``r.hist[0][0] = v``, ``self.w[0] = v``) is not the
other's: each copy is paired with what the methods hold at its place (a ``CopyPair``), and the
two are kept one state by value at each method call (the caller's writes copied in before it,
the method's back after it: see ResultFields.receiver and ResultMethod.run). A snapshot of each
side, taken when the two were last one, tells who wrote what; a pair is one object for every
result holding both its arrays (a shallow copy of a result holds the same), so that their
snapshots agree. The side compares and copies (``refresh``, ``refreshed``, ``synced``): this
module imports neither torch nor NumPy.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

from ._containers import _changes_inside


class CopyPair:
    """A copy the caller holds (``mine``) and what the methods hold at its place (``theirs``),
    each with a snapshot of it when the two were last one: ``theirs``'s taken when the caller's
    was made from it, ``mine``'s at the first method call, made from that (None until then)."""

    __slots__ = ("__weakref__", "mine", "mine_was", "theirs", "theirs_was")

    def __init__(self, mine: Any, theirs: Any) -> None:
        self.mine, self.theirs = mine, theirs
        self.mine_was: Any = None
        self.theirs_was: Any = None


#: A copy as one result holds it: its pair, and its place below the result (``hist[0]``, ``head.w``).
HeldCopy = tuple[CopyPair, str]
#: Every pair some result holds, by the ids of its two arrays (which it keeps alive).
_HELD_PAIRS: weakref.WeakValueDictionary[tuple[int, int], CopyPair] = weakref.WeakValueDictionary()
#: What ``_paired_inside`` passes down: ``paired``, ``made`` (see ``copies_at``), the copies
#: found, and the ids of the containers looked in.
_Walk = tuple[Callable[[Any, Any], bool], Callable[[CopyPair], None] | None, list[HeldCopy], set[int]]


def copies_at(
    names: Iterable[str],
    attributes: dict[str, Any],
    state: dict[str, Any],
    paired: Callable[[Any, Any], bool],
    *,
    depth: int,
    made: Callable[[CopyPair], None] | None = None,
) -> dict[str, list[HeldCopy]]:
    """By attribute of ``names``, the values the caller's result holds there (``attributes``)
    that ``paired`` tells copies of what the object its methods run on holds at the same place
    (``state``), bare or inside its lists, dicts, tuples and records, ``depth`` containers deep,
    each container looked in once (a list holding itself, a record at two places); ``made`` is
    given each pair no result held before, where the two sides are known one now."""
    found: dict[str, list[HeldCopy]] = {}
    seen: set[int] = set()
    for name in names:
        if name in attributes and name in state:
            walk: _Walk = (paired, made, [], seen)
            _paired_inside(attributes[name], state[name], name, depth, walk)
            found[name] = walk[2]
    return found


def _paired_inside(mine: Any, theirs: Any, where: str, depth: int, walk: _Walk) -> None:
    """The copies inside ``mine``, the caller's, paired with what ``theirs`` holds at their places
    (a module function, not a closure: a recursive closure is a reference cycle, which would keep
    the caller's tensors alive until the garbage collector runs)."""
    if mine is theirs:
        return
    paired, made, found, seen = walk
    if paired(mine, theirs):  # an array or tensor, asked first: most leaves are
        found.append((_pair_of(mine, theirs, made), where))
        return
    if not _changes_inside(mine):
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


def _pair_of(mine: Any, theirs: Any, made: Callable[[CopyPair], None] | None) -> CopyPair:
    """The pair of ``mine`` and ``theirs`` that results hold, else a new one (given to ``made``)."""
    pair = _HELD_PAIRS.get((id(mine), id(theirs)))
    if pair is None:
        pair = _HELD_PAIRS[id(mine), id(theirs)] = CopyPair(mine, theirs)
        if made is not None:
            made(pair)
    return pair
