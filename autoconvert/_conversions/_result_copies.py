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

import contextlib
import operator
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
#: Between the places of one pair a result holds at several (see ``held_once``): no path holds it.
PLACES_APART = "\0"


def held_once(copies: Iterable[HeldCopy]) -> list[HeldCopy]:
    """``copies``, each pair once, at its places joined by ``PLACES_APART`` (one array at a field
    and in a list: ``w`` and ``hist[0]``), so that it is compared once and a refusal names them all."""
    places: dict[int, tuple[CopyPair, list[str]]] = {}
    for pair, where in copies:
        places.setdefault(id(pair), (pair, []))[1].append(where)
    return [(pair, PLACES_APART.join(wheres)) for pair, wheres in places.values()]


#: Every pair some result holds, by the ids of its two arrays (which it keeps alive).
_HELD_PAIRS: weakref.WeakValueDictionary[tuple[int, int], CopyPair] = weakref.WeakValueDictionary()
#: The objects of both sides at one attribute's places, ``(mine, theirs)``, where two (see ``copies_at``).
Met = list[tuple[Any, Any]]


class Placed:
    """The objects at a result's places on both sides, each by the id of the other side's object
    there, with the count of places: one object of one side at a second place is made the one
    object there on the other side too, as plain Python holds it (see ``copies_at``). Each entry
    lives while a place lists its objects (``Met``), which keep them alive. An object no place
    holds any more still stands for what it stood for (``was``) while it lives, until it is met
    again: the caller's tensor put back (``t = r.w; del r.w; ...; r.keep = t``) is the function's
    array again, as it is in plain Python."""

    __slots__ = ("by_mine", "by_theirs", "moved", "was_mine", "was_theirs")

    def __init__(self) -> None:
        self.by_mine: dict[int, list[Any]] = {}  # id(mine) -> [theirs, places]
        self.by_theirs: dict[int, list[Any]] = {}  # id(theirs) -> [mine, places]
        # id(mine) -> (a weak reference to mine, theirs), and the other way round: see ``again``.
        self.was_mine: dict[int, tuple[weakref.ref[Any], Any]] = {}
        self.was_theirs: dict[int, tuple[weakref.ref[Any], Any]] = {}
        self.moved = False  # whether an object was put in another's place since ``settled``

    def again(self, gone: list[Met], made_again: list[Met]) -> None:
        """The places ``gone`` lists are looked in again: their objects held there no more, yet
        each what it stood for while it lives, until met again (see ``placed``); those
        ``made_again`` lists, converted anew at each call (see ResultFields.apart), stand for none."""
        for was in (self.was_mine, self.was_theirs):  # those gone since: their ids may be another's
            for key in [key for key, (ref, _) in was.items() if ref() is None]:
                del was[key]
        for met in gone:
            for mine, theirs in met:
                _remember(self.was_mine, mine, theirs)
                _remember(self.was_theirs, theirs, mine)
        for met in [*gone, *made_again]:
            for mine, theirs in met:
                for key, entries in ((id(mine), self.by_mine), (id(theirs), self.by_theirs)):
                    entry = entries[key]
                    entry[1] -= 1
                    if not entry[1]:
                        del entries[key]

    def settled(self) -> bool:
        """Whether an object was put in another's place since the last call."""
        moved, self.moved = self.moved, False
        return moved

    def placed(self, mine: Any, theirs: Any, caller: bool, met: Met) -> tuple[Any, Any]:
        """``mine`` and ``theirs`` at a place, the caller's made the one placed already for
        ``theirs`` where ``caller``, else the methods' the one for ``mine``, listed in ``met``."""
        if caller:
            one = _one_more(self.by_theirs, theirs, _recalled(self.was_theirs, theirs, mine))
            _one_more(self.by_mine, one, theirs)
            self.moved = self.moved or one is not mine
            mine = one
        else:
            one = _one_more(self.by_mine, mine, _recalled(self.was_mine, mine, theirs))
            _one_more(self.by_theirs, one, mine)
            self.moved = self.moved or one is not theirs
            theirs = one
        met.append((mine, theirs))
        return mine, theirs

    def also(self, places: Iterable[Met]) -> None:
        """The objects ``places`` list at places of one more result (a shallow copy, whose places
        hold its source's objects): one index for both, so that what an object stood for is known
        while any of them holds it (``r0.w = t`` on one, the other's still there)."""
        for met in places:
            for mine, theirs in met:
                self.by_mine[id(mine)][1] += 1
                self.by_theirs[id(theirs)][1] += 1


def _remember(was: dict[int, tuple[weakref.ref[Any], Any]], held: Any, other: Any) -> None:
    """Keep, while ``held`` lives, that it stood for ``other`` (see Placed.again); an object that
    takes no weak reference (a NumPy scalar) is remembered by none."""
    with contextlib.suppress(TypeError):
        was[id(held)] = (weakref.ref(held), other)


def _recalled(was: dict[int, tuple[weakref.ref[Any], Any]], held: Any, other: Any) -> Any:
    """What ``held`` stood for when no place held it any more (see Placed.again), met again now;
    else ``other``, what stands for it at its new place."""
    kept = was.pop(id(held), None)
    return kept[1] if kept is not None and kept[0]() is held else other


def _one_more(entries: dict[int, list[Any]], key: Any, other: Any) -> Any:
    """The other side's object ``entries`` holds for ``key`` (``other`` where none yet), one place more."""
    entry = entries.get(id(key))
    if entry is None:
        entries[id(key)] = [other, 1]
        return other
    entry[1] += 1
    return entry[0]


#: What ``_paired_inside`` places by: the objects placed, whether the caller's are made one (see
#: ``Placed.placed``), and where the attribute's are listed.
_Ones = tuple[Placed, bool, Met]
#: What ``_paired_inside`` passes down: ``paired``, ``made`` (see ``copies_at``), the copies
#: found, the ids of the containers looked in, ``ones`` (None inside what ``fixed`` tells) and ``fixed``.
_Walk = tuple[
    Callable[[Any, Any], bool],
    Callable[[CopyPair], None] | None,
    list[HeldCopy],
    set[int],
    _Ones | None,
    Callable[[Any], bool],
]


def copies_at(
    names: Iterable[str],
    attributes: dict[str, Any],
    state: dict[str, Any],
    paired: Callable[[Any, Any], bool],
    *,
    depth: int,
    placed: Placed,
    mine: bool,
    fixed: Callable[[Any], bool],
    made: Callable[[CopyPair], None] | None = None,
) -> dict[str, tuple[list[HeldCopy], Met]]:
    """By attribute of ``names``, the values the caller's result holds there (``attributes``)
    that ``paired`` tells copies of what the object its methods run on holds at the same place
    (``state``), bare or inside its lists, dicts, tuples and records, ``depth`` containers deep,
    each container looked in once (a list holding itself, a record at two places); ``made`` is
    given each pair no result held before, where the two sides are known one now. And the
    objects of the two sides met there (see ``Placed``): the caller's made one where ``mine``,
    else the methods', except inside a value ``fixed`` tells another result's (which keeps its
    own fields)."""
    found: dict[str, tuple[list[HeldCopy], Met]] = {}
    seen: set[int] = set()
    for name in names:
        if name in attributes and name in state:
            here: Met = []
            walk: _Walk = (paired, made, [], seen, (placed, mine, here), fixed)
            _put_at(attributes, state, name, _paired_inside(attributes[name], state[name], name, depth, walk))
            found[name] = walk[2], here
    return found


def _paired_inside(mine: Any, theirs: Any, where: str, depth: int, walk: _Walk) -> tuple[Any, Any]:
    """The copies inside ``mine``, the caller's, paired with what ``theirs`` holds at their places
    (a module function, not a closure: a recursive closure is a reference cycle, which would keep
    the caller's tensors alive until the garbage collector runs); ``mine`` and ``theirs`` as
    their place holds them now (see ``ones``)."""
    if mine is theirs:
        return mine, theirs
    paired, made, found, seen, ones, fixed = walk
    if not _changes_inside(mine):  # a leaf: made one first, then asked whether the two are copies
        if ones is not None:
            mine, theirs = _one_of(mine, theirs, ones)
        if paired(mine, theirs):
            found.append((_pair_of(mine, theirs, made), where))
        return mine, theirs
    if depth == 0 or id(mine) in seen or type(theirs) is not type(mine):
        return mine, theirs
    seen.add(id(mine))
    # Not inside another result's fields, nor a tuple that cannot be made again holding others.
    kept = fixed(mine) or (isinstance(mine, tuple) and hasattr(mine, "__dict__"))
    inner: _Walk = walk if ones is None or not kept else (paired, made, found, seen, None, fixed)
    if isinstance(mine, dict):
        for key, item in mine.items():
            if key in theirs:
                _put_at(mine, theirs, key, _paired_inside(item, theirs[key], f"{where}[{key!r}]", depth - 1, inner))
    elif isinstance(mine, (list, tuple)) and len(mine) == len(theirs):
        items = [
            _paired_inside(item, other, f"{where}[{i}]", depth - 1, inner)
            for i, (item, other) in enumerate(zip(mine, theirs, strict=True))
        ]
        if isinstance(mine, list):
            for i, placed in enumerate(items):
                _put_at(mine, theirs, i, placed)
        else:
            mine, theirs = _tuple_of(mine, [m for m, _ in items]), _tuple_of(theirs, [t for _, t in items])
    if hasattr(mine, "__dict__"):  # a record, a result with methods, a tuple bunch's attributes
        state = theirs.__dict__
        for name, value in mine.__dict__.items():
            if not name.startswith("_") and name in state:  # private ones are held as they are
                _put_at(
                    mine.__dict__, state, name, _paired_inside(value, state[name], f"{where}.{name}", depth - 1, inner)
                )
    return mine, theirs


def _put_at(mine: Any, theirs: Any, key: Any, placed: tuple[Any, Any]) -> None:
    """Put ``placed``, the two objects at ``key`` of ``mine`` and ``theirs``, there where another now."""
    if mine[key] is not placed[0]:
        mine[key] = placed[0]
    if theirs[key] is not placed[1]:
        theirs[key] = placed[1]


def _tuple_of(held: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    """``held``, a tuple, holding ``items`` (itself where it holds them already)."""
    if all(map(operator.is_, held, items)):
        return held
    made: Any = type(held)
    again: tuple[Any, ...] = made._make(items) if hasattr(held, "_fields") else made(items)
    return again


def _one_of(mine: Any, theirs: Any, ones: _Ones) -> tuple[Any, Any]:
    """``mine`` and ``theirs`` as their place holds them (see ``Placed.placed``)."""
    placed, caller, met = ones
    return placed.placed(mine, theirs, caller, met)


def _pair_of(mine: Any, theirs: Any, made: Callable[[CopyPair], None] | None) -> CopyPair:
    """The pair of ``mine`` and ``theirs`` that results hold, else a new one (given to ``made``)."""
    pair = _HELD_PAIRS.get((id(mine), id(theirs)))
    if pair is None:
        pair = _HELD_PAIRS[id(mine), id(theirs)] = CopyPair(mine, theirs)
        if made is not None:
            made(pair)
    return pair
