"""Converted results' methods: a result type with public methods of its own (SciPy's tuple
bunches' ``confidence_interval``, ``ecdf(x).cdf.evaluate``) keeps them once converted.

Its node (``_MethodsNode``) gives the converted copy a ``ResultMethod`` for each, which runs
on the original, or on a twin of it holding what the caller set on the copy (``ResultFields``),
and carries what the method changed there back to the caller's copy; ``ShallowCopies`` gives a
``copy.copy`` of the copy methods of its own. The registry (_containers) recognises these types
and makes their nodes through ``METHODS_NODE``, set here: this module sits above it, asking it
which types the conversion rebuilds, and a type's node again when its result is unpickled.
It imports neither torch nor NumPy.
"""

from __future__ import annotations

import copy
import copyreg
import dataclasses
import functools
import itertools
import operator
import sys
import types
import weakref
from collections.abc import Callable, Generator, Iterable
from typing import Any

from autoconvert._errors import (
    DEFERRED_FIX,
    STORED_DEFERRED_FIX,
    ConversionError,
    LeafError,
    MappingKey,
    SequenceKey,
    cycle_error,
)

from ._containers import (
    _IN_PLACE,
    _UNSEEN,
    METHODS_NODE,
    UNSEEN,
    Attached,
    Flatten,
    KeyOf,
    Node,
    Unflatten,
    Walk,
    _changes_inside,
    _held_in,
    _rebuilt_type,
    listen,
    node_for,
)
from ._result_copies import CopyPair, HeldCopy, Met, Placed, copies_at, held_once


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
                made = new.__dict__[name] = make(getattr(obj, name), mapper, ctx, fields)
                made.name = name  # the attribute's, which an alias's __name__ is not (predict = _impl)
            # What it holds as it is pointing back at itself (self.cb = self.bump in __post_init__);
            # most results hold arrays and numbers alone: a look at their types.
            if any(map(_may_point_back, set(map(type, obj.__dict__.values())))):
                _twins_put(obj.__dict__, new.__dict__, [*obj.__dict__], {id(obj): (obj, new)})
            new.__dict__[_COPIES] = ShallowCopies(fields)
            fields.pair(made)  # first: it may make the caller's objects at two places one
            fields.see(new.__dict__)
        return new


class ResultFields:
    """The attributes of one converted result with methods, as its caller changes them, and
    the object its methods run on: the original while the caller reassigned, added and
    deleted none, else a twin of the original (a copy: the original may be the function's own)
    holding the caller's values converted back, each converted at the first call after it
    was set. A call that finds nothing changed compares identities only, unless some values
    are ``apart``: copies of the original's that cannot be written in place (a NumPy scalar the
    caller holds as a 0-d tensor), converted back at every call, so that a change in place to
    one is seen too. Arrays the caller holds as copies (``copy=True``, a dtype cast, another
    device), at an attribute or inside its containers, are paired with the original's as the
    result is made, and the two kept one state by value at each call (``copies``: see _result_copies)."""

    __slots__ = (
        "apart",
        "converted",
        "copies",
        "followed",
        "given",
        "handed",
        "items",
        "kept",
        "met",
        "nested",
        "node",
        "original",
        "placed",
        "receiving",
        "size",
        "stale",
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
        self.copies: dict[str, list[HeldCopy]] = {}  # by attribute (see _result_copies), found as it is made
        self.met: dict[str, Met] = {}  # by attribute, the objects of both sides there (see _result_copies)
        self.placed = Placed()
        self.stale: set[str] | None = None  # the attributes to look in for copies again; None: all
        self.kept: list[HeldCopy] = []  # those of ``copies``, all in one list
        self.handed: list[HeldCopy] = []  # the copies kept one state at the last call
        self.receiving = False  # while the object its methods run on is made (see _receivers_within)

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
        self.copies, self.met, self.placed, self.stale = {}, {}, Placed(), None
        self.kept, self.handed = [], []
        self.receiving = False

    def receiver(self, side: ResultMethod) -> Any:
        """The object a method runs on, ``side`` telling a copy (``apart``) and converting a
        value the caller set back to the original's kind (``back``, raising the side's error),
        the caller's writes in place into its copies there (``copies``) copied in."""
        converted = self.converted()
        if converted is None:  # gone, the method held on its own, or unpickled apart from it (see __reduce__)
            return self.original if self.twin is None else self.twin
        self.receiving = True  # results holding each other: each one's object taken once (see _receivers_within)
        try:
            receiver = self._current(converted, side)
        finally:
            self.receiving = False
        handed = self.handed = self._copies(converted, receiver, side)
        for held in handed:
            side.refresh(held)
        return receiver

    def pair(self, side: ResultMethod) -> None:
        """The copies the conversion made, paired as it returns, a snapshot of what each was made
        from taken: what the caller, a method, or another result over the same arrays writes
        later is told from it (see _result_copies)."""
        self._copies(self.converted(), self.original, side, made=side.synced)

    def _copies(
        self, converted: Any, receiver: Any, side: ResultMethod, made: Callable[[CopyPair], None] | None = None
    ) -> list[HeldCopy]:
        """The copies ``converted``, the caller's result, holds of what ``receiver`` holds (see
        _result_copies): looked for again in the attributes changed since the last call (a new
        pair given to ``made``), and a tuple's items held apart, made again at each call, paired afresh."""
        stale, attributes, state = self.stale, converted.__dict__, receiver.__dict__
        if stale is None or stale:
            own = self.node.own
            names = [n for n in attributes if n not in own] if stale is None else stale
            for name in names:
                self.copies.pop(name, None)
            apart = self.apart or ()
            gone = {name: self.met.pop(name) for name in names if name in self.met}
            self.placed.again(
                [met for name, met in gone.items() if name not in apart], [gone[name] for name in apart if name in gone]
            )
            # In the result's own order, never a set's: which place is met first is the same each run.
            looked = [n for n in attributes if n not in own and n[0] != "_" and (stale is None or n in stale)]
            # One object at two places is one on both sides: the caller's made one where the
            # methods' are (as made, or as a method set them), the methods' where the caller's are.
            found = copies_at(
                looked,
                attributes,
                state,
                side.paired,
                depth=_DEPTH,
                placed=self.placed,
                mine=made is not None,
                fixed=_holds_fields,
                made=made,
            )
            for name, (copies, met) in found.items():
                self.copies[name], self.met[name] = copies, met
            if self.placed.settled() and made is not None and stale is not None:
                # After a method: the caller's objects made one here taken as seen, what is to be the caller's again still so.
                again = [name for name, value in self.given.items() if value is _UNSEEN]
                self.see(attributes)
                self.taken_again(again)
            self.stale = set()
            self.kept = held_once(held for copies in self.copies.values() for held in copies)
        if not self.items:
            return self.kept
        # Made from the caller's at this call: the two one state, the method's write still to tell.
        names = type(receiver)._fields
        fresh = []
        for i in self.items:
            if side.paired(converted[i], receiver[i]):
                pair = CopyPair(converted[i], receiver[i])
                side.synced(pair)
                fresh.append((pair, names[i]))
        return self.kept + fresh if fresh else self.kept

    def _current(self, converted: Any, side: ResultMethod) -> Any:
        """The object a method runs on, holding what the caller's result ``converted`` holds now
        (see ``receiver``)."""
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
        names = [
            name
            for name, value in attributes.items()
            if name not in methods
            and (
                given.get(name, _UNSEEN) is not value
                or name in apart
                or name in inner
                or name in moved
                or value is converted  # self.me = self: the twin itself there
            )
        ]
        self._restale(attributes, given, names)  # may hold copies, or hold them no more
        # One the caller put at a second place (r.items[1] = r.head) is the one there too (see _made_before).
        made = self._standing(attributes, moved) if self._may_stand_twice(attributes, names) else {}
        if moved:  # the caller's lists and dicts changed in place: their items converted back where new
            inner = {**inner, **self._returned(moved, attributes, side, made)}
        twin = self.twin
        if twin is None:
            twin = self._made_twin()
        itself = {id(converted): (converted, twin)}  # a value holding the result: the twin there (r.reg["me"])
        for name in names:  # a result with methods inside (r.items[1]): the object its own methods run on
            _receivers_within(attributes[name], side, itself, _DEPTH)
        changed = {
            name: inner[name]
            if name in inner
            else _own(_twinned(attributes[name], itself, functools.partial(back, name=name)), attributes[name], made)
            for name in names
        }
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

    def _made_twin(self) -> Any:
        """A twin of the original, its attributes holding the original (``self.reg["me"] =
        self``, ``self.t = (self, w)``, ``self.box = Box(self)``) holding the twin there: its
        methods run on it as on the object they change."""
        original = self.original
        twin = self._unflattened(original)
        itself = {id(original): (original, twin)}
        state = twin.__dict__
        for name, value in state.items():
            if name not in self.node.own and _holds_twin(value, itself):
                state[name] = with_twins(value, itself, _as_it_is)
        return twin

    def _unflattened(self, source: Any) -> Any:
        """A shallow copy of ``source`` made by its node, none of the attributes deleted from it
        (``del self.keep`` of a field with a default) given back by its constructor."""
        children, context = self.node.flatten(source)
        made = self.node.unflatten(list(children), context)
        state = getattr(made, "__dict__", None)
        if state is not None and len(state) != len(source.__dict__):
            for name in state.keys() - source.__dict__.keys():
                del state[name]
        return made

    def inside(self, receiver: Any, before: dict[str, Any]) -> Inside | None:
        """What a method may change in place inside ``receiver``, the object it runs on (which
        holds ``before``), where the result holds any (``followed``)."""
        converted = self.converted()
        return None if converted is None else _inside_of(before, converted.__dict__, self.followed, (id(receiver),))

    def ran(
        self,
        receiver: Any,
        before: dict[str, Any],
        inside: Inside | None,
        result: Any,
        side: ResultMethod,
    ) -> Any:
        """After a method ran on ``receiver`` (which held ``before``, and ``inside``): what it
        changed there (``self.n += 1``, ``self.hist.append(x)``, ``self.inner.w = w``) made
        the caller's result's own, public values converted by ``side.carried`` as the result's
        were, private ones as they are; and the caller's twins of the objects ``result`` may
        hold (``self``, ``self.inner``, ``self.hist``), by identity, for ``with_twins``, else
        ``UNSEEN`` (``result`` is converted as the method's value). A value the caller's result
        cannot take is refused, ``receiver`` given the caller's there (see ``_refused_given_back``)."""
        carried = side.carried
        converted = self.converted()
        if converted is None:
            return UNSEEN
        now = receiver.__dict__
        changed = len(now) != len(before)
        for name, value in before.items():  # a loop, not any(): most methods change nothing
            if changed or now.get(name, _UNSEEN) is not value:
                changed = True
                break
        moved = _moved(now, inside) if inside is not None else []  # self.hist.append(x)
        changed = changed or bool(moved)
        if (
            not changed
            and result is not receiver
            and type(result) not in _WALKED
            and type(result) not in _CALLABLE_PARTS  # return self.bump, lambda: self.bump()
            and (inside is None or not (_rebuilt_type(type(result)) or _rebuilt_tuple(result)))  # self.inner may be
        ):
            # Most calls: nothing changed, nothing of the receiver's to look for but an array it
            # holds (return self.w), which the plain object hands back as it is.
            return _array_twin(receiver, converted, result)
        twins: dict[int, tuple[Any, Any]] = {}
        stood: _Stood = {}
        _twins(receiver, converted, inside, twins, stood)
        refused: dict[str, ConversionError] = {}
        if changed:  # what the method set may hold the receiver's objects too (self.seen.append(self))
            made = dict(twins)
            self.carry(
                receiver,
                before,
                inside,
                converted,
                lambda v, name: _twinned(v, twins, lambda w: carried(w, name)),
                made=made,
                refused=refused,
                paired=twins,
                stood=stood,
                moved=moved,
            )
            # What it changed or made there now has the caller's object at its place, carried
            # (``return self.items[0].bump()``, ``self.leaf = Leaf(x); return self.leaf``).
            _paired_in_place(receiver.__dict__, converted.__dict__, twins, _DEPTH)
            # What the caller's holds as it is of what the method set (a set, a dict's key, a
            # callable) around the caller's objects the carry made (self.b = B(); self.s = {self.b}).
            now = receiver.__dict__
            names = [name for name, value in now.items() if before.get(name, _UNSEEN) is not value]
            put = _twins_put(now, converted.__dict__, names + moved, twins)
            if _pointed_back(twins) or put:
                self.see(converted.__dict__)
                self.taken_again(refused)  # which seeing took for the caller's values: theirs again
            self._copies(converted, receiver, side, made=side.synced)  # what it set, paired while one
        if refused:  # the rest is carried (see ``carry``); the caller's result keeps its own there
            given_back, refused_held = _sharing_refused(receiver.__dict__, converted.__dict__, refused, self.node.own)
            _refused_given_back(receiver, converted, given_back, side)
            self._unshared_refusals(receiver, before, given_back, refused_held)
            self.taken_again(given_back[len(refused) :])
            raise next(iter(refused.values()))
        try:
            held = _holds_twin(result, twins)
        except RecursionError:  # a value holding itself through a list: its conversion refuses it
            held = False
        return twins if held else UNSEEN

    def _unshared_refusals(
        self, receiver: Any, before: dict[str, Any], names: Iterable[str], refused_held: set[int]
    ) -> None:
        """Give the original what ``receiver``, its twin, now holds at the refused attributes
        ``names`` where the two shared the object the method changed in place (a twin made
        around a field held apart, a widened bfloat16 one), and at each other attribute the two
        shared that the method set anew, or whose object the refused values held (``refused_held``,
        by id: ``self.items, self.alt = self.alt, self.items``): no refused value stays in the
        original, which ``copy.deepcopy`` and pickling of the result reach."""
        original, state = self.original.__dict__, receiver.__dict__
        if state is original:
            return
        names = set(names)
        for name, value in before.items():
            if original.get(name, _UNSEEN) is value and (
                name in names or id(value) in refused_held or state.get(name, _UNSEEN) is not value
            ):
                if name in state:
                    original[name] = state[name]
                else:
                    original.pop(name, None)
        # A record the two share inside lists of their own (the caller reordered the list): theirs again too.
        for name, value in list(original.items()):
            if name in state and state[name] is not value and _held_ids([value]) & refused_held:
                original[name] = state[name]

    def carry(
        self,
        receiver: Any,
        before: dict[str, Any],
        inside: Inside | None,
        converted: Any,
        carried: Carried,
        *,
        made: _Made | None = None,
        refused: dict[str, ConversionError],
        paired: dict[int, tuple[Any, Any]] | None = None,
        stood: _Stood | None = None,
        moved: list[str] | None = None,
    ) -> None:
        """What a method changed on ``receiver`` (see ``ran``), made ``converted``'s; ``made``:
        by id, the caller's objects for the method's (its twins), met inside what it set
        (``self.b.a = self``), and those made for it there (see ``_own``); ``refused``,
        ``paired`` and ``stood``: see ``_carried_into``; ``moved``: the attributes changed in
        place there, where found already (see ``_moved``)."""
        made = {} if made is None else made
        now = receiver.__dict__
        if moved is None and inside is not None:
            moved = _moved(now, inside)
        self._restale(now, before, moved or ())
        _carried_into(
            receiver.__dict__,
            before,
            inside,
            converted.__dict__,
            carried,
            made=made,
            refused=refused,
            methods=self.node.own,
            paired=paired,
            stood=stood,
        )
        self.see(converted.__dict__)
        self.apart = None  # a value carried may be a copy of the receiver's: looked for again
        self.taken_again(refused)

    def _restale(self, now: dict[str, Any], before: dict[str, Any], names: Iterable[str]) -> None:
        """The attributes ``names``, and those of ``now`` set anew or deleted since ``before``,
        looked in for copies again at the next call (see ``_copies``): not those where a number,
        a string or None took the place of another (``self.n += 1``), which hold none."""
        stale = self.stale
        if stale is None:
            return
        stale.update(names)
        for name, value in now.items():
            was = before.get(name, _UNSEEN)
            if was is not value and (type(value) not in _HOLDS_NO_COPIES or type(was) not in _HOLDS_NO_COPIES):
                stale.add(name)
        if len(now) < len(before) or not now.keys() >= before.keys():
            stale.update(before.keys() - now.keys())

    def changed_by_caller(self) -> list[str]:
        """The attributes the caller changed since the last call or generator stop (set anew,
        added, deleted, changed in place): a generator method's stop takes the caller's result
        as seen (see ``ran``), where such a change must still reach the next call."""
        converted = self.converted()
        if converted is None:
            return []
        attributes, given, own = converted.__dict__, self.given, self.node.own
        names = [
            name for name, value in attributes.items() if name not in own and given.get(name, _UNSEEN) is not value
        ]
        names += [name for name in given if name not in attributes]
        if self.synced is not None:
            names += _moved(attributes, self.synced)
        return names

    def taken_again(self, names: Iterable[str]) -> None:
        """The attributes ``names``, which a method set to what the caller's result cannot
        take, are the caller's again at the next method call: the object the methods run on
        takes the caller's values there (see ``receiver``), so both hold one state."""
        for name in names:
            self.given[name] = _UNSEEN
            self.size = -1

    def _returned(
        self, moved: list[str], attributes: dict[str, Any], side: ResultMethod, made: _Made
    ) -> dict[str, Any]:
        """The method side's lists and dicts for those of the caller's that changed in place
        (``moved``): new ones, holding the method side's items where the caller's hold the same
        objects as at the last call, the others converted back (``made``: see ``_own``); a
        result with methods as the object it stands for there (``self.seen.append(self)``,
        which holds itself)."""
        synced = self.synced
        assert synced is not None  # moved was found in it
        state = (self.original if self.twin is None else self.twin).__dict__
        returned = {}
        for name in moved:
            mine, theirs = attributes.get(name), state.get(name)
            found = synced[0].get(name)
            again = _made_for(mine, made)
            if again is not None and type(again) is type(theirs):  # made at another place (self.al2 = self.items)
                returned[name] = again
            elif found is not None and type(theirs) is type(mine):
                items = _mirrored(
                    mine, theirs, found[1], functools.partial(_back_item, side=side, prefix=name), made=made
                )
                returned[name] = _tuple_like(theirs, items) if isinstance(theirs, tuple) else items
                made[id(mine)] = (mine, returned[name])  # held at a second place too (r.al2 = r.items)
        return returned

    def _may_stand_twice(self, attributes: dict[str, Any], names: list[str]) -> bool:
        """Whether a list, dict, tuple or record the caller's result holds at ``names``, which
        are converted back, may hold one at a second place (see ``_standing``): a list of arrays
        the caller appended to (``r.hist.append(t)``), followed at each call, holds none."""
        followed = self.synced[0] if self.synced is not None else {}
        for name in names:
            value = attributes[name]
            if _changes_inside(value) and (
                name not in followed or _nests(value.values() if isinstance(value, dict) else value)
            ):
                return True
        return False

    def _standing(self, attributes: dict[str, Any], moved: Iterable[str]) -> _Made:
        """By id, the object the methods run on holds for each of the caller's that both held at
        the last call, unchanged since: the values of the attributes not ``moved``, the items of
        the lists and dicts then, and what those hold. One the caller puts at a second place
        (``r.items[1] = r.head``, ``r.al2 = r.items``) is that object there too (see ``_made_before``)."""
        state = (self.original if self.twin is None else self.twin).__dict__
        moved = set(moved)
        pairs = [
            (value, state[name])
            for name, value in self.given.items()
            if name not in moved and attributes.get(name, _UNSEEN) is value and name in state
        ]
        changed = {id(attributes[name]) for name in moved if name in attributes}
        if self.synced is not None:
            for name, (_, was) in self.synced[0].items():
                changed |= _changed_inside(was)
                mine = state.get(name)
                if isinstance(mine, dict):
                    placed: Any = ((item, mine.get(key, _UNSEEN)) for key, item in was.as_dict().items())
                elif isinstance(mine, (list, tuple)) and len(mine) == len(was):
                    placed = zip(was, mine, strict=True)
                else:
                    continue
                pairs += [(item, other) for item, other in placed]
        # A result with methods (the result itself: self.me = self) stands for what its methods
        # run on, which ``receiver`` finds: none looked in.
        seen = {id(self.original), id(self.twin)}
        mine_to_theirs: dict[int, tuple[Any, Any]] = {}
        for theirs, mine in pairs:
            if id(theirs) in changed:
                continue
            if type(mine) is type(theirs) and mine is not theirs and _changes_inside(theirs) and id(mine) not in seen:
                mine_to_theirs.setdefault(id(mine), (mine, theirs))
                _paired_in_place(_inner_of(mine), _inner_of(theirs), mine_to_theirs, _DEPTH, seen)
        # What the caller changed since (met again through an attribute no field declares) converts anew.
        return {
            id(theirs): (theirs, mine)
            for mine, theirs in mine_to_theirs.values()
            if id(theirs) not in changed and _fields_of(theirs) is None
        }

    def _find_apart(self, side: ResultMethod, converted: Any) -> list[str]:
        """Which of the values the result was given are copies of the original's that no pair
        keeps one state with it (a NumPy scalar the caller holds as a 0-d tensor, a copy of a
        read-only array, which takes no write: see ``copies``)."""
        original = self.original
        # What the methods run on holds: a twin may hold its own where the original held another.
        was = getattr(original if self.twin is None else self.twin, "__dict__", {})
        self.apart = [
            name
            for name, value in self.given.items()
            if name in was
            and value is not was[name]
            and side.apart(value, was[name])
            and not (side.paired(value, was[name]) and (_takes_writes(was[name]) or _held_elsewhere(was, name)))
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
            # self.me = self: the receiver made below; results holding each other: each one's made once
            if fields is not None and fields is not self and not fields.receiving:
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
        new.items, new.nested, new.followed = self.items, self.nested, self.followed
        # The same objects at the same places as its source: its pairs, and their places, too.
        new.copies, new.met, new.placed = dict(self.copies), {n: list(m) for n, m in self.met.items()}, self.placed
        self.placed.also(new.met.values())  # one index for the copies, which hold one another's objects
        new.stale = None if self.stale is None else set(self.stale)
        new.kept, new.handed, new.receiving = list(self.kept), [], False
        new.synced = self.synced  # what its source's caller held at its last call: a change since is the copy's too
        # A shallow copy of its own, even where the methods ran on the original: what one's
        # methods set is not the other's, and both hold the same objects, as copy.copy's do.
        new.twin = self._unflattened(self.original if self.twin is None else self.twin)
        state = made.__dict__
        for name in self.node.methods:
            method = state.get(name)
            if isinstance(method, ResultMethod):
                state[name] = method.following(new)
        state[_COPIES] = ShallowCopies(new)


#: Where a converted result with methods holds its ShallowCopies.
_COPIES = "__reduce_ex__"


class ShallowCopies(Attached):
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
Inside = tuple[dict[str, tuple[Any, "_Held"]], dict[str, tuple[Any, Any, dict[str, Any], "Inside"]]]
Carried = Callable[[Any, str], Any]
#: By id, an object and the one of its own made for the other side (see ``_own``), or the
#: caller's twin of a method's object (see ``ResultFields.carry``).
_Made = dict[int, tuple[Any, Any]]
#: What ``made`` holds for an object while it is carried in part (see ``_carried_item``): met
#: again inside itself, it is a cycle the result cannot take (``rec.hist.append(rec)``).
_CARRYING: Any = object()
#: By id, each list, dict, tuple and record a result's containers held when a method was
#: called, with the caller's object at its place then and what it held (see ``_contents``):
#: where one the method moved elsewhere is carried in part (see ``_carried_item``).
_Stood = dict[int, tuple[Any, Any, "_Held"]]
#: The containers of a method's value in which the caller's twins are put (see ``with_twins``):
#: sets too, which the conversion holds as they are (a set of its items' twins, the rest kept).
_WALKED = frozenset([tuple, list, dict, set, frozenset])
_SETS = frozenset([set, frozenset])


def _followed(attributes: dict[str, Any]) -> list[str]:
    """The public attributes whose contents a method may change in place: lists, dicts, tuples
    and objects with attributes the conversion rebuilds (a dataclass, a result with methods)."""
    return [name for name, value in attributes.items() if not name.startswith("_") and _changes_inside(value)]


def _rebuilt_tuple(value: Any) -> bool:
    """Whether ``value`` is a tuple the conversion rebuilds, a named tuple too, met before or not."""
    return isinstance(value, tuple) and not hasattr(value, "__dict__") and node_for(type(value)) is not None


def _tuple_like(like: Any, items: list[Any]) -> Any:
    """A tuple of ``like``'s type (a namedtuple's too) holding ``items``."""
    node = node_for(type(like))
    assert node is not None  # a type the conversion rebuilds (see _held_in)
    children, context = node.flatten(like)
    return node.unflatten([*items, *children[len(items) :]], context)


def _inside_of(state: dict[str, Any], caller: dict[str, Any], names: list[str], above: tuple[int, ...] = ()) -> Inside:
    """What may change in place in the attributes ``names`` of the object a method runs on
    (``state``, its attributes), the caller's object holding ``caller``: its lists and dicts
    with what they hold, and its objects the conversion rebuilt, at any depth, none of those
    ``above`` it again (by id: ``self.other.other = self``)."""
    contents: dict[str, tuple[Any, _Held]] = {}
    inner: dict[str, tuple[Any, Any, dict[str, Any], Inside]] = {}
    for name in names:
        value, mine = state.get(name), caller.get(name)
        if type(value) in _IN_PLACE or _held_in(value):  # a list met first: this runs at each method call
            contents[name] = (value, _contents(value))
        elif id(value) not in above and _stands_for(mine, value):
            was, fields = dict(value.__dict__), _fields_of(mine)
            followed = _followed(mine.__dict__) if fields is None else fields.followed
            inner[name] = (mine, value, was, _inside_of(was, mine.__dict__, followed, (*above, id(value))))
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


def _snapshot(attributes: dict[str, Any], names: list[str], above: tuple[int, ...] = ()) -> Inside:
    """What the caller's lists, dicts and dataclasses among ``attributes`` hold (``names``), at
    any depth, to tell the caller's own changes in place there (``_moved``): as ``_inside_of``
    finds, the caller's object standing for itself, none of the attributes ``above`` these
    looked in again (by id: ``self.b.a = self``, a node holding itself)."""
    contents: dict[str, tuple[Any, _Held]] = {}
    inner: dict[str, tuple[Any, Any, dict[str, Any], Inside]] = {}
    above = (*above, id(attributes))
    for name in names:
        value = attributes.get(name)
        if _held_in(value):
            contents[name] = (value, _contents(value, _DEPTH, above))  # r.seen holding r
        elif _record(value) and id(held := value.__dict__) not in above:
            inner[name] = (value, value, dict(held), _snapshot(held, _followed(held), above))
    return contents, inner


def _held_ids(values: Iterable[Any]) -> set[int]:
    """The ids of ``values`` and of the lists, dicts, tuples and records inside them (see ``_contents``)."""
    found: set[int] = set()

    def look(held: _Held) -> None:
        for item, inner in held.deep or ():
            found.add(id(item))
            look(inner)

    for value in values:
        found.add(id(value))
        if _changes_inside(value):
            look(_contents(_inner_of(value)))
    return found


def _sharing_refused(
    state: dict[str, Any], attributes: dict[str, Any], refused: Iterable[str], own: frozenset[str]
) -> tuple[list[str], set[int]]:
    """The attributes a refused call gives back (see ``_refused_given_back``): ``refused``, then
    each other one holding, on the method's side (``state``: ``self.box = self.head.sub``) or
    the caller's (``attributes``: the caller's ``head`` given back holds its ``alt``), a list,
    dict, tuple or record one of those holds, until none is left, so that each of the caller's
    objects is made again once; and the ids of what they hold on the method's side."""
    names = [*refused]
    held = {
        name: (_shared_ids(state, name), _shared_ids(attributes, name))
        for name in [*state, *(name for name in attributes if name not in state)]
        if name not in own
    }
    mine: set[int] = set()
    theirs: set[int] = set()
    left = [name for name in held if name not in names]
    for name in names:
        on_mine, on_theirs = held.get(name, (set(), set()))
        mine |= on_mine
        theirs |= on_theirs
    grew = True
    while grew:
        grew = False
        for name in [*left]:
            on_mine, on_theirs = held[name]
            if on_mine & mine or on_theirs & theirs:
                names.append(name)
                left.remove(name)
                mine |= on_mine
                theirs |= on_theirs
                grew = True
    return names, mine


def _shared_ids(attributes: dict[str, Any], name: str) -> set[int]:
    """The ids of the lists, dicts, tuples and records at ``name`` (see ``_held_ids``)."""
    value = attributes.get(name, _UNSEEN)
    return _held_ids([value]) if _changes_inside(value) else set()


def _refused_given_back(receiver: Any, converted: Any, names: Iterable[str], side: ResultMethod) -> None:
    """Give ``receiver``, the object a method ran on, what the caller's result (``converted``)
    holds at the attributes ``names``, where the method stored what that cannot take: converted
    back (``side.back``), so that no refused value (a generator) stays in the result, which
    ``copy.deepcopy`` and pickling of it would meet; an object at two of them (``self.head =
    self.items[0].sub``) one there too (see ``_made_before``)."""
    state, attributes = receiver.__dict__, converted.__dict__
    itself = {id(converted): (converted, receiver)}
    made: _Made = {}
    for name in names:
        if name in attributes:
            value = attributes[name]
            state[name] = _own(_twinned(value, itself, functools.partial(side.back, name=name)), value, made)
        else:
            state.pop(name, None)


def _carried_into(
    now: dict[str, Any],
    before: dict[str, Any],
    inside: Inside | None,
    state: dict[str, Any],
    carried: Carried,
    *,
    made: _Made,
    refused: dict[str, ConversionError],
    methods: frozenset[str] = frozenset(),
    paired: dict[int, tuple[Any, Any]] | None = None,
    stood: _Stood | None = None,
) -> None:
    """Into ``state``, the caller's object's attributes: what a method changed in its twin's
    (``before``, now ``now``; ``inside``, in place), public values converted by ``carried``,
    ``made`` their own (see ``_own``); into ``paired``, each new object set with the caller's
    made for it, which what is set next holds as the caller's (``self.b = B(); self.cb = self.b.inc``).
    An attribute whose value ``carried`` refuses keeps the caller's, its refusal in ``refused``
    by name, and the others are carried; one holding what the result's containers held
    (``stood``), moved there and refused in part, is carried in part (see ``_carried_item``)."""
    if _reassigned(now, before):
        for name in before.keys() - now.keys():
            state.pop(name, None)
        for name, value in now.items():
            if name not in methods and before.get(name, _UNSEEN) is not value:
                try:
                    state[name] = value if name.startswith("_") else _own(carried(value, name), value, made)
                except ConversionError as e:
                    refused.setdefault(
                        name, _carried_apart(name, value, e, state=state, carried=carried, made=made, stood=stood)
                    )
                    continue
                if paired is not None and _changes_inside(value):
                    _paired_in_place({name: value}, {name: state[name]}, paired, _DEPTH, set_anew=True)
    if inside is None:
        return
    contents, inner = inside
    for name, (held, was) in contents.items():
        if now.get(name) is held and not _holds_same(held, was):
            try:
                _carried_inside(name, held, was, state, carried=carried, made=made, stood=stood)
            except ConversionError as e:
                refused.setdefault(name, e)
    for name, (mine, value, attributes, deeper) in inner.items():
        if now.get(name) is value and state.get(name) is mine:
            fields = _fields_of(mine)
            below = _prefixed(carried, f"{name}.")
            refused_below: dict[str, ConversionError] = {}
            if fields is not None:
                fields.carry(
                    value,
                    attributes,
                    deeper,
                    mine,
                    below,
                    made=made,
                    refused=refused_below,
                    paired=paired,
                    stood=stood,
                )
            else:
                _carried_into(
                    value.__dict__,
                    attributes,
                    deeper,
                    mine.__dict__,
                    below,
                    made=made,
                    refused=refused_below,
                    paired=paired,
                    stood=stood,
                )
            if refused_below:  # the attribute holding it is the caller's to take again
                refused.setdefault(name, next(iter(refused_below.values())))


def _carried_apart(
    name: str,
    value: Any,
    refusal: ConversionError,
    *,
    state: dict[str, Any],
    carried: Carried,
    made: _Made,
    stood: _Stood | None,
) -> ConversionError:
    """Into ``state``, the caller's object's attributes: its ``name``, which a method set to
    ``value``, whose conversion is ``refusal``, carried in part where it is, or holds, an object
    the result's containers held (``stood``), moved there (``self.items = list(reversed(self.items))``;
    see ``_carried_item``), else left as the caller's; the refusal to raise, naming the field refused."""
    if not stood:
        return _narrowed(value, carried, name, refusal)
    refused: list[ConversionError] = []
    try:
        state[name] = _carried_item(value, {}, None, carried, name, made=made, refused=refused, stood=stood)
    except ConversionError as e:
        return e
    # Carried in part: its refusals; the whole's where each part was carried apart (a record
    # refused in part met again inside it: self.alt = list(self.items); self.head.sub = self.alt).
    return refused[0] if refused else refusal


def _carried_inside(
    name: str, held: Any, was: _Held, state: dict[str, Any], *, carried: Carried, made: _Made, stood: _Stood | None
) -> None:
    """Into ``state``, the caller's object's attributes: its ``name``, whose twin ``held`` a
    method changed inside (``was``: what it held), made to hold what that holds now; a record
    there refused in part is carried in part (see ``_carried_item``), and the refusal raised after."""
    mine = state.get(name)
    refused: list[ConversionError] = []
    below = _prefixed(carried, name)
    if type(mine) is type(held) and mine is not held and isinstance(held, tuple):
        state[name] = _retupled(mine, held, was, below, made=made, refused=refused, stood=stood)
    elif type(mine) is type(held) and mine is not held:
        _refill(mine, held, was, below, made=made, refused=refused, stood=stood)
    else:
        state[name] = _own(carried(held, name), held, made)
    if refused:
        raise refused[0]


def _prefixed(carried: Carried, prefix: str) -> Carried:
    """``carried``, naming what it converts inside an attribute (``hist[2]``, ``inner.w``)."""
    return lambda value, path: carried(value, prefix + path)


def _own_containers(
    converted: dict[str, Any], original: dict[str, Any], made: _Made | None = None, names: Iterable[str] | None = None
) -> None:
    """Give a converted result (its attributes, ``converted``) lists and dicts of its own
    where it shares one with its original (an empty list), and so the tuples and dataclasses
    in its attributes, at any depth: what a method adds there reaches the caller converted.
    ``made``: see ``_own``; ``names``: the attributes the conversion converts (None: all; an
    attribute no field declares is held as it is, on both sides: see ``_converted_names``)."""
    made = {} if made is None else made
    for name in converted if names is None else [name for name in names if name in converted]:
        if not name.startswith("_"):
            converted[name] = _own(converted[name], original.get(name, _UNSEEN), made)


def _converted_names(record: Any) -> frozenset[str] | None:
    """The attributes of ``record`` the conversion converts: a dataclass's fields (None: all)."""
    if not dataclasses.is_dataclass(record):
        return None
    return frozenset(field.name for field in dataclasses.fields(record))


def _own(value: Any, was: Any, made: _Made | None = None) -> Any:
    """``value``, ``was`` converted for the other side of a result: a list or dict of its own
    where nothing in it converted (``was`` itself), its lists, dicts and records made its own
    too (see ``_own_items``), a tuple or dataclass holding such of its own, so that a change to
    one is never the other's unconverted. ``made``: by id, the object
    of its own made for each list, dict and record met already, the one met again (a record
    holding the result that holds it: ``Node(parent=self)``; nodes holding each other) its
    own there too; a method's objects with twins may come in it (see ``ResultFields.carry``)."""
    made = {} if made is None else made
    if type(value) in _IN_PLACE:
        own = _made_before(value, was, made)
        if own is None:
            own = copy.copy(value) if value is was else value
            made[id(value)] = (value, own)
            if type(was) is type(value):
                made.setdefault(id(was), (was, own))  # the list it stands for, met again (self.l[0].lst = self.l)
            _own_items(own, was if type(was) is type(value) else _UNSEEN, made)
        return own
    if _record(value):
        own = _made_before(value, was, made)
        if own is not None:
            return own
        own = copy.copy(value) if value is was else value
        made[id(value)], made[id(own)] = (value, own), (own, own)
        if type(was) is type(own):
            made.setdefault(id(was), (was, own))  # the object it stands for, met again (a node holding itself)
            _own_containers(own.__dict__, was.__dict__, made, _converted_names(own))
        return own
    if isinstance(value, tuple) and _held_in(value):
        own = _made_for(value, made)
        if own is not None:
            return own
        made[id(value)] = (value, value)  # met again inside itself (through a list): as it is
        paired = was if type(was) is type(value) and len(was) == len(value) else (_UNSEEN,) * len(value)
        items = [_own(item, item_was, made) for item, item_was in zip(value, paired, strict=True)]
        own = value if all(map(operator.is_, items, value)) else _tuple_like(value, items)
        made[id(value)] = (value, own)
        return own
    return value


def _made_for(value: Any, made: _Made) -> Any:
    """The object of its own ``made`` holds for ``value`` (None: none yet): by id, the object
    itself kept beside it, so that an id a freed object had is never taken for another's."""
    pair = made.get(id(value))
    return pair[1] if pair is not None and pair[0] is value else None


def _made_before(value: Any, was: Any, made: _Made) -> Any:
    """The object of its own ``made`` holds for ``value``, or for ``was`` where ``value`` is a
    second conversion of it (an object at two places converted apart: ``self.head =
    self.items[0].sub``), so that the other side holds one object there too; None: none yet."""
    own = _made_for(value, made)
    if own is None and value is not was and type(was) is type(value):
        own = _made_for(was, made)
        return own if type(own) is type(value) else None
    return own


def _own_items(own: Any, was: Any, made: _Made) -> None:
    """Make the lists, dicts and records in ``own``, a list or dict of its own (see ``_own``),
    its own too, paired with those at their places in ``was`` (``_UNSEEN``: none): a record
    the other side holds in its list is never changed in place under the caller's."""
    items = own.values() if isinstance(own, dict) else own
    if not _nests(items):
        return
    if isinstance(own, dict):
        keyed = was if isinstance(was, dict) else {}
        for key, item in own.items():
            own[key] = _own(item, keyed.get(key, _UNSEEN), made)
    else:
        placed = was if isinstance(was, list) and len(was) == len(own) else [_UNSEEN] * len(own)
        own[:] = [_own(item, item_was, made) for item, item_was in zip(own, placed, strict=True)]


def _record(value: Any) -> bool:
    """Whether ``value`` is an object with attributes the conversion rebuilds that is no result
    with methods (which has fields of its own: see _MethodsNode.map)."""
    return hasattr(value, "__dict__") and _rebuilt_type(type(value)) and _fields_of(value) is None


def _takes_writes(value: Any) -> bool:
    """Whether ``value`` takes a write in place: not a read-only NumPy array (a tensor always does)."""
    return getattr(getattr(value, "flags", None), "writeable", True) is not False


def _held_elsewhere(state: dict[str, Any], name: str) -> bool:
    """Whether what ``state`` holds at ``name`` is held at another attribute too, or inside its
    lists, dicts, tuples and records: one array the methods must see as one (a stack, not a
    recursive closure, which would be a reference cycle)."""
    value, seen = state[name], set()
    stack = [(item, _DEPTH) for other, item in state.items() if other != name]
    while stack:
        item, depth = stack.pop()
        if item is value:
            return True
        if depth and id(item) not in seen and _changes_inside(item):
            seen.add(id(item))
            inner = _inner_of(item)
            stack += [(held, depth - 1) for held in (inner.values() if isinstance(inner, dict) else inner)]
    return False


#: The types of values that hold no copies (see ResultFields._restale).
_HOLDS_NO_COPIES = frozenset([int, float, bool, complex, str, bytes, type(None)])

#: How many containers deep, the attribute's own list, dict or tuple the first, a change in
#: place is looked for inside the items of a result's containers (``self.ll[0].append(x)``,
#: ``self.items[0].v = x``): a bound on the work at each method call, and on cycles (a list
#: holding itself). The returns-tensor guide states it.
_DEPTH = 8


class _Held(list):  # type: ignore[type-arg]
    """What a list or dict held (see ``_contents``): its items, and ``deep``, the lists, dicts
    and objects the conversion rebuilds among them, each with what it held in turn (None where
    there are none: a list of arrays pays a look at its items' types alone)."""

    __slots__ = ("deep",)
    deep: list[tuple[Any, _Held]] | None

    def inner(self) -> dict[int, _Held]:
        """By id, what each nested item held (see ``deep``)."""
        return {id(item): contents for item, contents in self.deep or ()}

    def as_dict(self) -> dict[Any, Any]:
        """What a dict held, by key (its keys then values, as ``_contents`` lists them)."""
        half = len(self) // 2
        return dict(zip(self[:half], self[half:], strict=True))


def _nests(items: Iterable[Any]) -> bool:
    """Whether ``items`` hold lists, dicts or objects the conversion rebuilds: a look at their
    types alone (a list of arrays pays no more)."""
    return any(kind in _IN_PLACE or _rebuilt_type(kind) for kind in set(map(type, items)))


def _contents(container: Any, depth: int = _DEPTH, above: tuple[int, ...] = ()) -> _Held:
    """What a list or tuple holds, or a dict's keys then values, and inside those of its items
    that are lists, dicts, tuples or objects the conversion rebuilds, ``depth`` containers deep,
    none of those ``above`` it again (by id: a list holding itself, or an object holding the
    list): to tell a change in place by identity (see ``_holds_same``; arrays have no truth value)."""
    held = _Held(
        container if type(container) is list or isinstance(container, tuple) else [*container, *container.values()]
    )
    held.deep = None
    if depth > 1 and _nests(held):
        above = (*above, id(container))
        deep = [
            (item, _contents(inner, depth - 1, above))
            for item in held
            if _changes_inside(item) and id(inner := _inner_of(item)) not in above
        ]
        held.deep = deep or None
    return held


def _inner_of(item: Any) -> Any:
    """What ``_contents`` looks inside for a nested ``item``: a list, dict or tuple, or its attributes."""
    return item if _held_in(item) else item.__dict__


def _holds_same(container: Any, was: _Held) -> bool:
    """Whether a list or dict holds what ``_contents`` found in it, the same objects, each
    nested one holding what it held."""
    if type(container) is list or isinstance(container, tuple):
        if len(container) != len(was) or not all(map(operator.is_, container, was)):
            return False
    elif 2 * len(container) != len(was) or not all(map(operator.is_, _contents(container, 1), was)):
        return False
    return was.deep is None or all(_holds_same(_inner_of(item), inner) for item, inner in was.deep)


def _changed_inside(was: _Held) -> set[int]:
    """The ids of the nested items of ``was`` (see ``_contents``) changed in place since."""
    if was.deep is None:
        return set()
    return {id(item) for item, inner in was.deep if not _holds_same(_inner_of(item), inner)}


def _refill(
    mine: Any,
    held: Any,
    was: _Held,
    carried: Carried,
    *,
    made: _Made,
    refused: list[ConversionError],
    stood: _Stood | None,
) -> None:
    """Make ``mine``, the caller's list or dict, hold what ``held``, its twin a method changed
    in place, holds now (see ``_mirrored``)."""
    items = _mirrored(held, mine, was, carried, made=made, refused=refused, stood=stood)
    if isinstance(mine, dict):
        mine.clear()
        mine.update(items)
    else:
        mine[:] = items


def _retupled(
    mine: Any,
    held: Any,
    was: _Held,
    carried: Carried,
    *,
    made: _Made,
    refused: list[ConversionError],
    stood: _Stood | None,
) -> Any:
    """The caller's tuple ``mine`` for ``held``, its twin whose items a method changed inside
    (``was``: what it held, ``_contents``): ``mine`` itself where its lists and dicts could be
    made to hold what the method's do, else a tuple of its kind with those items converted again
    (``refused``: see ``_carried_item``)."""
    changed = _changed_inside(was)
    inner = was.inner()
    items = []
    for i, (value, theirs) in enumerate(zip(held, mine, strict=True)):
        if id(value) not in changed:
            items.append(theirs)
        elif type(value) in _IN_PLACE and type(theirs) is type(value) and theirs is not value:
            _refill(
                theirs, value, inner[id(value)], _prefixed(carried, f"[{i}]"), made=made, refused=refused, stood=stood
            )
            items.append(theirs)
        else:
            places = {id(value): theirs}
            items.append(
                _carried_item(
                    value, places, inner.get(id(value)), carried, f"[{i}]", made=made, refused=refused, stood=stood
                )
            )
    return mine if all(map(operator.is_, items, mine)) else _tuple_like(mine, items)


def _mirrored(
    source: Any,
    target: Any,
    was: _Held,
    convert: Carried,
    *,
    made: _Made | None = None,
    refused: list[ConversionError] | None = None,
    stood: _Stood | None = None,
) -> Any:
    """What ``target``, a list or dict, is to hold to match ``source``, its twin on the other
    side changed in place (``was``: what ``source`` held, ``_contents``): ``target``'s own
    items where ``source`` holds the same object as it did, unchanged inside, the others
    converted by ``convert`` (a list or dataclass changed inside converted again, as a whole),
    of their own (``made``: see ``_own``; ``refused``, ``stood``: see ``_carried_item``). An
    item refused whole is left out: what it took the place of, the method removed, maybe to
    put elsewhere (``self.box = self.items.pop(1); self.items.append(Slot(later=gen))``)."""
    changed = _changed_inside(was)
    inner = was.inner()
    made = {} if made is None else made
    if isinstance(source, dict):
        before = was.as_dict()
        places = {id(value): target[key] for key, value in before.items() if key in target}
        keyed = {}
        for key, value in source.items():
            if key in before and value is before[key] and id(value) not in changed and key in target:
                keyed[key] = target[key]
                continue
            item = _carried_or_left_out(
                value, places, inner, convert, f"[{key!r}]", made=made, refused=refused, stood=stood
            )
            if item is not _UNSEEN:
                keyed[key] = item
        return keyed
    kept = min(len(target), len(was))  # the target's items stand for those the source held
    places = {id(value): target[i] for i, value in enumerate(was[:kept])}
    items = []
    for i, value in enumerate(source):
        if i < kept and value is was[i] and id(value) not in changed:
            items.append(target[i])
            continue
        item = _carried_or_left_out(value, places, inner, convert, f"[{i}]", made=made, refused=refused, stood=stood)
        if item is not _UNSEEN:
            items.append(item)
    return items


def _carried_or_left_out(
    value: Any,
    places: dict[int, Any],
    inner: dict[int, _Held],
    convert: Carried,
    key: str,
    *,
    made: _Made,
    refused: list[ConversionError] | None,
    stood: _Stood | None,
) -> Any:
    """An item of a list or dict a method changed in place, carried (see ``_carried_item``);
    where it is refused whole (a generator, a record the method made, then stored in what the
    result cannot take) and ``refused`` is given, ``_UNSEEN``, its refusal into ``refused``:
    it is left out, the container's other changes carried (a record moved there from elsewhere
    in the result too)."""
    try:
        return _carried_item(value, places, inner.get(id(value)), convert, key, made=made, refused=refused, stood=stood)
    except ConversionError as e:
        if refused is None:
            raise
        refused.append(e)
        return _UNSEEN


def _carried_item(
    value: Any,
    places: dict[int, Any],
    was: _Held | None,
    convert: Carried,
    key: str,
    *,
    made: _Made,
    refused: list[ConversionError] | None,
    stood: _Stood | None = None,
) -> Any:
    """``value``, an item a method set or changed inside, converted by ``convert`` for the
    other side, of its own there. A list, dict, tuple or record changed inside (``was``: what
    it held) whose conversion is refused, where the other side's object at the place it held
    (``places``, by the id of each object the container held; else ``stood``, where it held
    one moved from elsewhere in the result) stands for it and ``refused`` is given: a copy of
    that object carrying ``value``'s other changes, those refused as it holds them, the
    refusals into ``refused`` (``self.items[0].later = gen`` leaves ``self.items[0].hist.append(w)``
    carried). A list, dict, tuple or record made in the call holding such is carried item by
    item (see ``_carried_anew``)."""
    try:
        return _own(convert(value, key), value, made)
    except ConversionError as e:
        theirs = places.get(id(value), _UNSEEN)
        if theirs is _UNSEEN and stood and refused is not None:
            pair = stood.get(id(value))
            if pair is not None and pair[0] is value:
                _, theirs, was = pair  # moved: self.reg["m"] = self.items.pop(0)
            elif (_held_in(value) or _record(value)) and _holds_any(_contents(_inner_of(value)), stood):
                return _carried_anew(value, convert, key, e, made=made, refused=refused, stood=stood)
        if refused is None or was is None or type(theirs) is not type(value) or theirs is value:
            raise _narrowed(value, convert, key, e) from None
        if not (_held_in(value) or _record(value)) or (isinstance(value, tuple) and len(theirs) != len(value)):
            raise
        refusal_of_whole = e
    known = _made_for(value, made)  # met again: self.items = [rec, rec], or inside itself
    if known is _CARRYING:  # rec.hist.append(rec): the cycle is what the result cannot take
        raise _narrowed(value, convert, key, refusal_of_whole)
    if known is not None:
        refused.append(refusal_of_whole)
        return known
    refusals_before = len(refused)
    below = _prefixed(convert, key)
    made[id(value)] = (value, _CARRYING)
    if isinstance(value, tuple):
        own = _retupled(theirs, value, was, below, made=made, refused=refused, stood=stood)
    else:
        own = copy.copy(theirs)
        if type(value) in _IN_PLACE:
            _refill(own, value, was, below, made=made, refused=refused, stood=stood)
        else:
            _carried_record(value, own.__dict__, was, convert, key, made=made, refused=refused, stood=stood)
    made[id(value)] = (value, own)
    if len(refused) == refusals_before:
        refused.append(refusal_of_whole)
    return own


def _holds_any(held: _Held, stood: _Stood) -> bool:
    """Whether what a container holds (``held``, see ``_contents``), at any depth, is among ``stood``."""
    return any(id(item) in stood for item in held) or any(_holds_any(inner, stood) for _, inner in held.deep or ())


def _carried_anew(
    value: Any,
    convert: Carried,
    key: str,
    refusal: ConversionError,
    *,
    made: _Made,
    refused: list[ConversionError],
    stood: _Stood,
) -> Any:
    """A list, dict, tuple or record a method made in the call, whose conversion is
    ``refusal``, holding objects the result's containers held (``stood``), for the other side:
    one of its own, each item (a record's field the conversion converts) carried on its own
    (see ``_carried_item``; ``self.items = list(reversed(self.items))``, ``self.box =
    Wrap(rec)``), one refused whole left out of a list or dict, a tuple or record refused whole
    with it; met again inside itself, a cycle the result cannot take."""
    own = _made_for(value, made)
    if own is _CARRYING:
        raise _narrowed(value, convert, key, refusal)
    if own is not None:
        return own
    refusals_before = len(refused)
    below = _prefixed(convert, key)
    made[id(value)] = (value, _CARRYING)
    if isinstance(value, tuple):
        items = [
            _carried_item(item, {}, None, below, f"[{i}]", made=made, refused=refused, stood=stood)
            for i, item in enumerate(value)
        ]
        own = _tuple_like(value, items)
    elif _record(value):
        own = copy.copy(value)
        names = _converted_names(value)
        state = own.__dict__
        for name, held in value.__dict__.items():
            if not name.startswith("_") and (names is None or name in names):  # the others held as they are
                state[name] = _carried_item(
                    held, {}, None, convert, f"{key}.{name}", made=made, refused=refused, stood=stood
                )
    else:
        own = copy.copy(value)
        own.clear()
        _refill(own, value, _contents(()), below, made=made, refused=refused, stood=stood)
    made[id(value)] = (value, own)
    if len(refused) == refusals_before:  # refused as a whole, none of its items
        raise _narrowed(value, convert, key, refusal)
    return own


def _narrowed(value: Any, convert: Carried, key: str, refusal: ConversionError) -> ConversionError:
    """The refusal of ``value``, refused whole (a record, list or tuple a method made in the
    call), naming what inside it is refused (``self.items[1].later``, ``self.entries[1][1].later``)
    rather than ``value``, where one part the conversion converts is refused alone; a part
    holding ``value`` itself (``n.kids``) leaves it named as ``value``."""
    if _record(value):
        names = _converted_names(value)
        parts = [
            (f"{key}.{name}", held)
            for name, held in value.__dict__.items()
            if not name.startswith("_") and (names is None or name in names)
        ]
    elif type(value) is dict:
        parts = [(f"{key}[{name!r}]", held) for name, held in value.items()]
    elif type(value) is list or _rebuilt_tuple(value):
        parts = [(f"{key}[{i}]", held) for i, held in enumerate(value)]
    else:
        return refusal
    for path, held in parts:
        try:
            convert(held, path)
        except ConversionError as e:
            return refusal if _holds_twin(held, {id(value): (value, value)}) else _narrowed(held, convert, path, e)
    return refusal


def _carried_record(
    value: Any,
    state: dict[str, Any],
    was: _Held,
    convert: Carried,
    key: str,
    *,
    made: _Made,
    refused: list[ConversionError],
    stood: _Stood | None,
) -> None:
    """Into ``state``, the attributes of the other side's copy of the record ``value`` (see
    ``_carried_item``): what a method changed in ``value`` (``was``: what its attributes held), each
    attribute converted on its own, one refused left as ``state`` holds it."""
    before = was.as_dict()
    changed = _changed_inside(was)
    inner = was.inner()
    for name in before.keys() - value.__dict__.keys():
        state.pop(name, None)
    places = {id(held): state[name] for name, held in before.items() if name in state}
    names = _converted_names(value)
    for name, held in value.__dict__.items():
        if before.get(name, _UNSEEN) is held and id(held) not in changed:
            continue
        if name.startswith("_") or (names is not None and name not in names):  # held as it is (see _converted_names)
            state[name] = held
            continue
        try:
            state[name] = _carried_item(
                held,
                places,
                inner.get(id(held)),
                convert,
                f"{key}.{name}",
                made=made,
                refused=refused,
                stood=stood,
            )
        except ConversionError as e:
            refused.append(e)
            if name not in before:
                state.pop(name, None)


def _back_item(value: Any, key: str, *, side: ResultMethod, prefix: str) -> Any:
    """An item the caller put in a list or dict of a result, for its methods (``side.back``):
    a converted result with methods the object it stands for there, its original or twin (a
    result may hold itself: ``self.seen.append(self)``)."""
    fields = _fields_of(value)
    if fields is None:
        return side.back(value, prefix + key)
    return fields.original if fields.twin is None else fields.twin


def _twins(
    receiver: Any, converted: Any, inside: Inside | None, into: dict[int, tuple[Any, Any]], stood: _Stood
) -> None:
    """Into ``into``, by identity: ``receiver``, the object a method ran on, and what it holds
    (``inside``, its items too), each with the caller's object standing for it; into ``stood``,
    its items, changed inside or not (see ``_paired``)."""
    into[id(receiver)] = (receiver, converted)
    if inside is None:
        return
    now, state = receiver.__dict__, converted.__dict__
    contents, inner = inside
    for name, (held, was) in contents.items():
        if now.get(name) is held and name in state:
            into[id(held)] = (held, state[name])
            _paired(was, state[name], into, stood)
        elif name in state:  # set anew (self.items = list(reversed(self.items))): its items may be moved
            _paired(was, state[name], into, stood, changed_above=True)
    for name, (mine, value, attributes, deeper) in inner.items():
        if state.get(name) is not mine:
            continue
        stood.setdefault(id(value), (value, mine, _held_of(attributes, deeper)))  # self.a, self.b = self.b, self.a
        # Moved from its attribute, it pairs nothing; what it holds may be moved on (self.a = self.a.sub).
        _twins(value, mine, deeper, into if now.get(name) is value else {}, stood)


def _array_twin(receiver: Any, converted: Any, result: Any) -> Any:
    """Where ``result`` is an array (or tensor) ``receiver`` holds, at a field or inside its
    lists, tuples, dicts and records (``self.w``, ``self.hist[0]``, ``self.cells[0].hist[0]``),
    the caller's at that place of ``converted``, as twins; else ``UNSEEN``: the caller's own,
    so that a write into it is the result's, as on the plain object. Looked for by identity in
    plain loops: most methods return a new array, and pay this at each call."""
    if not hasattr(result, "shape") or node_for(type(result)) is not None:
        return UNSEEN
    twin = _found_at(receiver.__dict__, converted.__dict__, result, _DEPTH)
    return {id(result): (result, twin)} if hasattr(twin, "shape") else UNSEEN


def _found_at(held: Any, mine: Any, target: Any, depth: int) -> Any:
    """The caller's object at the place ``held`` (a record's attributes, a list, a tuple, a
    dict) holds ``target``, ``mine`` the caller's there; ``_UNSEEN`` where none, ``depth`` deep."""
    keyed = type(held) is dict
    for key, value in held.items() if keyed else enumerate(held):
        theirs = mine.get(key, _UNSEEN) if keyed else mine[key] if key < len(mine) else _UNSEEN
        if value is target:
            return theirs
        if depth <= 1 or theirs is _UNSEEN:
            continue
        inner, inner_mine = value, theirs
        if type(value) not in _WALKED_IN_ORDER:
            if not hasattr(value, "__dict__") or not _rebuilt_type(type(value)):  # a record, a result of its own
                continue
            inner, inner_mine = value.__dict__, getattr(theirs, "__dict__", None)
        if type(inner_mine) is type(inner):
            found = _found_at(inner, inner_mine, target, depth - 1)
            if found is not _UNSEEN:
                return found
    return _UNSEEN


#: The containers ``_found_at`` looks in by key or index.
_WALKED_IN_ORDER = (list, tuple, dict)


def _held_of(attributes: dict[str, Any], inside: Inside | None) -> _Held:
    """What a record held when a method was called, as ``_contents`` lists a record's: its
    attributes then (``attributes``) and what its lists, dicts and records held then
    (``inside``), for ``stood`` (a record an attribute held, moved to another)."""
    held = _Held([*attributes, *attributes.values()])
    held.deep = None
    if inside is not None:
        contents, inner = inside
        deep = [(value, was) for value, was in contents.values()]
        deep += [(value, _held_of(was, deeper)) for _, value, was, deeper in inner.values()]
        held.deep = deep or None
    return held


def _paired(
    was: _Held, mine: Any, into: dict[int, tuple[Any, Any]], stood: _Stood, changed_above: bool = False
) -> None:
    """Into ``into``: the lists, dicts, tuples and records a container held (``was``, see
    ``_contents``) and holds unchanged inside, each with the caller's object at its place in
    ``mine``, the caller's twin of the container (``return self.groups[0]``); in a tuple, the
    lists and dicts changed inside too, which the caller's are made to match in place (see
    ``_retupled``: ``self.pair[0].append(self.pair[0])`` holds the caller's list). Into
    ``stood``: each, with what it held, changed inside or not; one whose container changed
    inside or was set anew (``changed_above``) into ``stood`` alone."""
    if was.deep is None:
        return
    if isinstance(mine, dict):
        places = {id(value): mine.get(key, _UNSEEN) for key, value in was.as_dict().items()}
    else:
        places = {id(item): theirs for item, theirs in zip(was, mine, strict=False)}  # mine may be shorter
    changed = _changed_inside(was)
    refilled = isinstance(mine, tuple)
    for item, inner in was.deep:
        theirs = places.get(id(item), _UNSEEN)
        if id(item) in into or type(theirs) is not type(item) or theirs is item:
            continue
        moved = changed_above or (id(item) in changed and not (refilled and type(item) in _IN_PLACE))
        if id(item) in stood and moved:  # met again where it may have moved: once is enough
            continue
        stood.setdefault(id(item), (item, theirs, inner))
        # Paired even where an attribute set anew held it first (self.a = list(self.a)); one
        # unchanged inside wherever it moved to (self.items = self.items + (new,)): it is the same.
        if not moved or id(item) not in changed:
            into[id(item)] = (item, theirs)
        _paired(inner, _inner_of(theirs), into, stood, moved)


def _paired_in_place(
    mine: Any,
    theirs: Any,
    into: dict[int, tuple[Any, Any]],
    depth: int,
    seen: set[int] | None = None,
    *,
    set_anew: bool = False,
) -> None:
    """Into ``into``: the lists, dicts, tuples and records ``mine`` (a method's object's
    attributes, or a container of them) holds, each with the caller's object at its place in
    ``theirs`` (which a carry made match), where none is paired yet, ``depth`` containers deep
    (``seen``: those looked in already, which may hold each other). In what a method set anew
    (``set_anew``), during the carry: one paired already (``self.al2 = self.items``, ``self.pairs =
    [self.alt]``) is made to match where it is held (see ``inside``), and what it holds is left to
    be paired there: a record in it the method changed is no twin of the caller's yet."""
    seen = set() if seen is None else seen
    if type(mine) is dict and type(theirs) is dict:
        pairs: Any = ((item, theirs.get(key, _UNSEEN)) for key, item in mine.items())
    elif isinstance(mine, (list, tuple)) and isinstance(theirs, (list, tuple)):
        pairs = zip(mine, theirs, strict=False)
    else:
        return
    for item, other in pairs:
        if type(other) is not type(item) or other is item or id(item) in seen or not _changes_inside(item):
            continue
        seen.add(id(item))
        if set_anew and id(item) in into:
            continue
        into.setdefault(id(item), (item, other))
        if depth > 1:
            inner = _inner_of(item)
            theirs_inner = other if inner is item else other.__dict__
            _paired_in_place(inner, theirs_inner, into, depth - 1, seen, set_anew=set_anew)


def _pointed_back(twins: dict[int, tuple[Any, Any]]) -> bool:
    """Make the caller's records among ``twins`` point at the caller's objects where an attribute
    no field declares, which the conversion holds as it is, points at a method's object that has
    a twin (``self.l = [Node()]; self.l[0].lst = self.l``, ``self.b.a = self``); whether any did."""
    found = False
    looked: set[int] = set()
    while pending := [pair for key, pair in twins.items() if key not in looked]:  # rebuilding pairs more
        for theirs, mine in pending:
            looked.add(id(theirs))
            if mine is theirs or not _record(mine):
                continue
            state = mine.__dict__
            found = _held_with_twins(theirs.__dict__, state, twins) or found
            for name, value in state.items():
                pair = twins.get(id(value))
                if pair is not None and pair[0] is value and pair[1] is not value:
                    state[name] = pair[1]
                    found = True
    return found


def _holds_twin(value: Any, twins: dict[int, tuple[Any, Any]], seen: set[int] | None = None) -> bool:
    """Whether ``value`` is, or its tuples, lists, dicts (keys too), sets, records and callables
    hold, one of ``twins`` (``seen``: the containers, records and callables looked in already,
    which may hold each other or themselves: a list a refused method stored, holding itself)."""
    pair = twins.get(id(value))
    if pair is not None and pair[0] is value:
        return True
    kind = type(value)
    walked = kind is dict or kind in _WALKED or _rebuilt_tuple(value)
    parts = None if walked else _CALLABLE_PARTS.get(kind)
    if not walked and parts is None and not _method_record(value):
        return False
    seen = set() if seen is None else seen
    if id(value) in seen:
        return False
    seen.add(id(value))
    if kind is dict:  # its keys too ({Node(parent=self): 1}), which the conversion holds as they are
        return any(_holds_twin(item, twins, seen) for item in itertools.chain(value, value.values()))
    if walked:  # a set's items may be records (frozenset([self]))
        return any(_holds_twin(item, twins, seen) for item in value)
    held = value.__dict__.values() if parts is None else parts(value)
    return any(_holds_twin(item, twins, seen) for item in held)


def _cell_value(cell: types.CellType) -> Any:
    """What a closure's cell holds; ``_UNSEEN`` where it is empty (a name not yet bound)."""
    try:
        return cell.cell_contents
    except ValueError:
        return _UNSEEN


#: The callables the conversion holds as they are that may point back at a result (see
#: ``_holds_twin``), each with what it holds: a bound method its object, a partial its function
#: and arguments, a function its closure and defaults, a weak reference its referent.
_CALLABLE_PARTS: dict[type, Callable[[Any], Any]] = {
    types.MethodType: lambda method: (method.__self__,),
    functools.partial: lambda partial: (partial.func, *partial.args, *partial.keywords.values()),
    types.FunctionType: lambda function: (
        *map(_cell_value, function.__closure__ or ()),
        *(function.__defaults__ or ()),
        *(function.__kwdefaults__ or {}).values(),
    ),
    weakref.ReferenceType: lambda ref: (ref(),),
}


def _method_record(value: Any) -> bool:
    """Whether ``value``, on a method's side, is an object with attributes the conversion
    rebuilds (a dataclass, a result with methods), which ``with_twins`` rebuilds around the
    caller's twins: one a method made is recognised here (``Node(parent=self)``)."""
    kind = type(value)
    found = _RECORD_KINDS.get(kind)
    if found is None:
        found = _RECORD_KINDS[kind] = getattr(kind, "__dictoffset__", 0) != 0 and node_for(kind) is not None
    return found


#: The types ``_method_record`` decided (each item of a value a method returns is looked at).
_RECORD_KINDS: dict[type, bool] = {}


class _Forgets:
    """Forgets ``_RECORD_KINDS`` and ``_POINTING_KINDS`` at each registration of a container,
    which may make a type one."""

    def forget(self) -> None:
        _RECORD_KINDS.clear()
        _POINTING_KINDS.clear()


_FORGETS = _Forgets()  # held here: listen holds it weakly
listen(_FORGETS)


def _pointing_back(value: Any, twins: dict[int, tuple[Any, Any]], convert: Callable[[Any], Any]) -> Any:
    """``value``, a result with methods of its own whose attributes hold ``twins``
    (``self.items[0].v = self``), converted by ``convert`` with those attributes the caller's
    twins: held apart while it converts (it would convert the result again, which holds it), its
    methods then told what the caller's holds."""
    state = value.__dict__
    back = {name: held for name, held in state.items() if _holds_twin(held, twins)}
    try:
        state.update(dict.fromkeys(back))
        made = convert(value)
    finally:
        state.update(back)
    if made is value:  # nothing else in it converts: a copy, of the caller's own
        made = copy.copy(value)
    made.__dict__.update({name: with_twins(held, twins, convert) for name, held in back.items()})
    fields = _fields_of(made)
    if fields is not None:
        fields.see(made.__dict__)
    return made


def with_twins(value: Any, twins: dict[int, tuple[Any, Any]], convert: Callable[[Any], Any]) -> Any:
    """A method's ``value`` for the caller: the objects of ``twins`` it is or holds in its
    tuples, lists, dicts (their keys too), sets, records and callables (``self``, ``(self, n)``,
    ``self.inner``, ``Node(parent=self)``, ``{c: 1}`` with ``c.r = self``, ``self.bump``,
    ``partial(self.bump, 2)``, ``lambda: self.bump()``) the caller's twins of them, the rest
    converted by ``convert``."""
    pair = twins.get(id(value))
    if pair is not None and pair[0] is value:
        return pair[1]
    kind = type(value)
    if kind in _CALLABLE_PARTS:  # self.cb = self.bump, partial(self.bump, 2), lambda: self.bump()
        return _callable_with_twins(value, twins) if _holds_twin(value, twins) else convert(value)
    walked = kind in _WALKED or _rebuilt_tuple(value)  # a named tuple's items too
    if (not walked and not _method_record(value)) or not _holds_twin(value, twins):
        return convert(value)
    if not walked:  # a record pointing back at the result (Node(parent=self))
        node = node_for(kind)
        if isinstance(node, _MethodsNode):
            return _pointing_back(value, twins, convert)
        assert node is not None  # a type the conversion rebuilds (see _method_record)
        made = node.map(value, lambda item, _: with_twins(item, twins, convert), None)
        if made is value:  # held as it is (in a set): the caller's copy, to point at the caller's
            made = copy.copy(value)
        twins.setdefault(id(value), (value, made))  # its attributes no field declares: see _pointed_back
        _held_with_twins(value.__dict__, made.__dict__, twins)
        return made
    if kind in _SETS:  # held as it is, its items with it: only the twins put in
        return kind(with_twins(item, twins, _as_it_is) for item in value)
    if kind is dict:
        out = {}
        for key, item in value.items():
            try:
                out[with_twins(key, twins, _as_it_is)] = with_twins(item, twins, convert)
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
    return items if kind is list else tuple(items) if kind is tuple else _tuple_like(value, items)


def _method_of(converted: Any, bound: types.MethodType) -> Any:
    """``bound``, a method bound to the object ``converted`` stands for, as ``converted`` has
    it: its converting method where it has one for that function, else bound to it."""
    method = _converting_method(converted, bound.__func__)
    return types.MethodType(bound.__func__, converted) if method is None else method


def _converting_method(converted: Any, function: Any) -> ResultMethod | None:
    """The converting method of ``converted`` that calls ``function``, where it has one."""
    for held in getattr(converted, "__dict__", {}).values():
        if isinstance(held, ResultMethod) and held.__func__ is function:
            return held
    return None


def _callable_with_twins(value: Any, twins: dict[int, tuple[Any, Any]]) -> Any:
    """``value``, a callable the conversion holds as it is that holds ``twins`` (see
    ``_CALLABLE_PARTS``), made again around the caller's twins: a bound method the caller's
    object's (its converting method where it is a result's), a partial of them
    (``partial(Res.bump, self)`` of the converting method), a function with its closure and
    defaults holding them, a weak reference to the caller's object. Met again, the same."""
    kind = type(value)
    if kind is types.MethodType or issubclass(kind, ResultMethod):  # a converting method of a copy's item too
        return _method_of(with_twins(value.__self__, twins, _as_it_is), value)
    if kind is weakref.ReferenceType:
        return weakref.ref(with_twins(value(), twins, _as_it_is), value.__callback__)
    if kind is functools.partial:
        func, args = with_twins(value.func, twins, _as_it_is), [with_twins(a, twins, _as_it_is) for a in value.args]
        method = _converting_method(args[0], func) if args and type(func) is types.FunctionType else None
        if method is not None:
            func, args = method, args[1:]
        made: Any = functools.partial(
            func, *args, **{k: with_twins(v, twins, _as_it_is) for k, v in value.keywords.items()}
        )
        made.__dict__.update(value.__dict__)
        return made
    # A function: its cells holding twins new ones, filled once it is known (a closure may hold it).
    cells = [types.CellType() if _holds_twin(_cell_value(cell), twins) else cell for cell in value.__closure__ or ()]
    defaults = value.__defaults__
    made = types.FunctionType(value.__code__, value.__globals__, value.__name__, None, tuple(cells) or None)
    twins.setdefault(id(value), (value, made))
    for new, cell in zip(cells, value.__closure__ or (), strict=True):
        if new is not cell:
            new.cell_contents = with_twins(cell.cell_contents, twins, _as_it_is)
    made.__defaults__ = None if defaults is None else tuple(with_twins(d, twins, _as_it_is) for d in defaults)
    if value.__kwdefaults__ is not None:
        made.__kwdefaults__ = {k: with_twins(v, twins, _as_it_is) for k, v in value.__kwdefaults__.items()}
    made.__dict__.update(value.__dict__)
    made.__qualname__, made.__doc__, made.__module__ = value.__qualname__, value.__doc__, value.__module__
    made.__annotations__ = value.__annotations__
    return made


def _held_with_twins(mine: dict[str, Any], made: dict[str, Any], twins: dict[int, tuple[Any, Any]]) -> bool:
    """Into ``made``, the attributes of the caller's copy of a method's record (``mine``): the
    sets, tuples, records and callables it holds as they are that hold ``twins``, at any depth
    (``self.a.s = frozenset([b]); b.r = self``, ``self.a.b.s = frozenset([self])``, ``self.a.cb =
    self.bump``), rebuilt
    around the caller's twins, as on the result; lists and dicts stay held. Whether any was."""
    found = False
    for name, held in mine.items():
        kind = type(held)
        rebuilt = (
            kind in _SETS
            or kind in _CALLABLE_PARTS
            or isinstance(held, tuple)
            or (kind not in _WALKED and _method_record(held))
        )
        if rebuilt and made.get(name) is held and _holds_twin(held, twins):
            made[name] = with_twins(held, twins, _as_it_is)
            found = True
    return found


def _twins_put(
    mine: dict[str, Any], theirs: dict[str, Any], names: list[str], twins: dict[int, tuple[Any, Any]]
) -> bool:
    """Into ``theirs``, the attributes of the caller's object for ``mine`` (a method's, or a
    function's result's), at ``names``: what the conversion holds as it is there, at any depth
    of their lists, dicts, tuples and records (a set, a dict's key, a callable), that holds
    ``twins``, rebuilt around the caller's twins (``self.b = B(); self.s = {self.b}``,
    ``self.cb = self.leaf.inc``, ``self.dk = {self.inner: 1}``). Whether any was."""
    putting = _Putting(twins)
    for name in names:
        value, held = mine.get(name, _UNSEEN), theirs.get(name, _UNSEEN)
        if (
            held is not _UNSEEN
            and (_may_point_back(type(value)) or id(value) in twins)
            and not isinstance(held, ResultMethod)
        ):
            made = putting.around(value, held, _DEPTH)
            if made is not held:
                theirs[name] = made
                putting.found = True
    return putting.found


class _Putting:
    """One walk of ``_twins_put``: the twins, the caller's objects looked in already (which may
    hold each other), and whether anything was rebuilt."""

    __slots__ = ("found", "seen", "twins")

    def __init__(self, twins: dict[int, tuple[Any, Any]]) -> None:
        self.twins, self.seen, self.found = twins, set[int](), False

    def around(self, mine: Any, theirs: Any, depth: int) -> Any:
        """``theirs``, the caller's object at the place of ``mine``: ``mine`` itself, held as it
        is, made again around the twins where it holds them; else its lists, dicts and records
        changed in place, a tuple made again, ``depth`` containers deep."""
        kind, twins = type(mine), self.twins
        # Held as it is, or in a proxy the conversion made of it (torchify's of a set): as
        # with_twins gives a set holding twins when the twins are known before it converts.
        if theirs is mine or (type(theirs) is not kind and getattr(theirs, "__wrapped__", None) is mine):
            as_it_is = kind in _SETS or kind in _CALLABLE_PARTS or isinstance(mine, tuple) or id(mine) in twins
            return with_twins(mine, twins, _as_it_is) if as_it_is and _holds_twin(mine, twins) else theirs
        if depth == 0 or type(theirs) is not kind or id(theirs) in self.seen:
            return theirs
        if kind in _IN_PLACE:
            held = [*mine, *mine.values()] if isinstance(mine, dict) else mine
            if any(map(_may_point_back, set(map(type, held)))):  # a list of arrays: a look at their types
                self.seen.add(id(theirs))
                if isinstance(mine, dict):
                    self._into(mine.items(), theirs, depth - 1)
                    self._keys(theirs)
                else:
                    self._into(zip(range(len(theirs)), mine, strict=False), theirs, depth - 1)  # theirs may be shorter
            return theirs
        if isinstance(mine, tuple) and _held_in(mine) and len(mine) == len(theirs):
            items = [self.around(a, b, depth - 1) for a, b in zip(mine, theirs, strict=True)]
            return theirs if all(map(operator.is_, items, theirs)) else _tuple_like(theirs, items)
        if _record(theirs):
            self.seen.add(id(theirs))
            self._into(mine.__dict__.items(), theirs.__dict__, depth)
        return theirs

    def _into(self, places: Any, theirs: Any, depth: int) -> None:
        """Into ``theirs``, a list or dict: at each of ``places`` (key, the method's item) it has,
        its item made around the twins."""
        for key, item in places:
            if isinstance(theirs, dict) and key not in theirs:
                continue
            made = self.around(item, theirs[key], depth)
            if made is not theirs[key]:
                theirs[key] = made
                self.found = True

    def _keys(self, theirs: dict[Any, Any]) -> None:
        """``theirs``, a dict, keyed by the caller's twins where a key holds the method's
        (``{self.inner: 1}``), in its order."""
        if any(_holds_twin(key, self.twins) for key in theirs if type(key) is not str):
            items = [(with_twins(key, self.twins, _as_it_is), value) for key, value in theirs.items()]
            theirs.clear()
            theirs.update(items)
            self.found = True


def _may_point_back(kind: type) -> bool:
    """Whether a value of ``kind`` may hold, as the conversion holds it, what points back at a
    result (see ``_twins_put``): a set, a callable, a container, a record."""
    found = _POINTING_KINDS.get(kind)
    if found is None:
        found = _POINTING_KINDS[kind] = (
            kind in _SETS
            or kind in _CALLABLE_PARTS
            or kind in _IN_PLACE
            or issubclass(kind, tuple)
            or (getattr(kind, "__dictoffset__", 0) != 0 and node_for(kind) is not None)
        )
    return found


#: The types ``_may_point_back`` decided (each attribute of each converted result is looked at).
_POINTING_KINDS: dict[type, bool] = {}


def result_cycle_error() -> LeafError:
    """The conversion's refusal of a value holding itself (see ``cycle_error``), for a value a
    result's method sets, returns, or is given in a field: its fix the way round a method has."""
    return cycle_error(
        "break the cycle, or point back through an attribute no dataclass field declares, which is held as it is"
    )


def _twinned(value: Any, twins: dict[int, tuple[Any, Any]], convert: Callable[[Any], Any]) -> Any:
    """``with_twins``, where ``value`` may hold itself through a list, which it looks in
    unguarded: ``convert``'s own refusal of such a value then (see ``ResultMethod.carried``)."""
    try:
        return with_twins(value, twins, convert)
    except RecursionError:
        return convert(value)


def _as_it_is(value: Any) -> Any:
    """A value the conversion holds as it is (an item of a set), for ``with_twins``."""
    return value


def _holds_fields(value: Any) -> bool:
    """Whether ``value`` is a converted result with methods (see ``_fields_of``)."""
    return _fields_of(value) is not None


def _receivers_within(
    value: Any, side: ResultMethod, into: dict[int, tuple[Any, Any]], depth: int, seen: set[int] | None = None
) -> None:
    """Into ``into``, by identity: each converted result with methods that ``value``'s lists,
    tuples and dicts hold, ``depth`` deep, with the object its own methods run on, so that the
    object the outer methods run on holds that one (``self.items[1].bump()`` and
    ``self.total()`` see one record, as on the plain object). One whose object is being made
    (the outer result itself, one holding it) is left to the conversion."""
    seen = set() if seen is None else seen
    if depth == 0 or type(value) not in _WALKED_IN_ORDER or id(value) in seen:
        return
    seen.add(id(value))  # a list reached along two paths looked in once
    for item in value.values() if type(value) is dict else value:
        inner = _fields_of(item)
        if inner is not None and not inner.receiving and id(item) not in into:
            into[id(item)] = (item, inner.receiver(side))
        _receivers_within(item, side, into, depth - 1, seen)


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
    fields.node, fields.original, fields.receiving = node, original, False
    return fields


class ResultMethod(Attached):
    """A method of the original result whose return value is converted like the result was,
    run on what the caller's result holds now (see ResultFields). The walking side may
    subclass it to convert the method's arguments, and the values the caller set, too (see _outputs)."""

    __slots__ = ("ctx", "fields", "mapper", "method", "name")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _CALLABLE_PARTS[cls] = _CALLABLE_PARTS[ResultMethod]

    def __init__(self, method: Any, mapper: Walk, ctx: Any, fields: ResultFields) -> None:  # a bound method
        self.method, self.mapper, self.ctx, self.fields = method, mapper, ctx, fields
        #: The attribute the method is held under (set by the node where it differs: an alias).
        self.name: str = getattr(method, "__name__", "")

    @property
    def __self__(self) -> Any:
        """The caller's result the method is of, as a bound method's ``__self__`` is its object."""
        return self.fields.converted()

    @property
    def __func__(self) -> Any:
        """The function the method calls, as a bound method's ``__func__`` is."""
        return getattr(self.method, "__func__", self.method)

    def bound(self) -> Any:
        """The method, bound to the object it runs on now."""
        receiver = self.fields.receiver(self)
        return self.method if receiver is self.fields.original else getattr(receiver, self.name)

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
        if receiver is None or isinstance(receiver, type) or not hasattr(receiver, "__dict__"):
            return method(*args, **kwargs), UNSEEN  # a static method or a class method: no result to change
        fields = self.fields
        before = dict(receiver.__dict__)
        inside = fields.inside(receiver, before) if fields.followed else None
        handed = fields.handed  # found by ``bound``: the caller's copies of what ``receiver`` holds
        try:
            result = method(*args, **kwargs)
        except BaseException as error:  # what it changed before raising stays, as on the plain object
            self._ran_raising(receiver, before, inside, handed, error)
            raise
        if type(result) is types.GeneratorType:  # its body runs as it is consumed, its items converted there
            carrying = self._carrying(result, receiver, handed)
            return carrying, {id(carrying): (carrying, carrying)}
        self._copied_back(handed)
        return result, fields.ran(receiver, before, inside, result, self)

    def _copied_back(self, handed: Iterable[HeldCopy]) -> None:
        """What the method wrote in place into the arrays ``handed`` pairs with the caller's
        copies of them, copied into those (see ResultFields.copies)."""
        for held in handed:
            self.refreshed(held)

    def _carrying(
        self, generator: Generator[Any, Any, Any], receiver: Any, handed: Iterable[HeldCopy]
    ) -> Generator[Any, Any, Any]:
        """A generator method's ``generator``, what its body changes on ``receiver`` carried to
        the caller's result each time it stops: at each item, at its end, where it raises;
        ``send``, ``throw`` and ``close`` reach it. Its items and value are converted as a
        method's value is (``yield self`` the caller's result)."""
        fields = self.fields

        def carry(value: Any = None) -> Any:
            self._copied_back(handed)
            pending = fields.changed_by_caller()  # made while it was suspended: for the next call
            try:
                twins = fields.ran(receiver, before, inside, value, self)
            finally:
                fields.taken_again(pending)
            return self.convert(value) if twins is UNSEEN else with_twins(value, twins, self.convert)

        sent: Any = None
        thrown: BaseException | None = None
        resumed = False
        while True:
            if resumed:  # the caller's writes into its copies while it was suspended, seen as it resumes
                for held in handed:
                    self.refresh(held)
            resumed = True
            before = dict(receiver.__dict__)
            inside = fields.inside(receiver, before) if fields.followed else None
            try:
                item = generator.send(sent) if thrown is None else generator.throw(thrown)
            except StopIteration as stop:
                return carry(stop.value)
            except BaseException as error:
                pending = fields.changed_by_caller()
                self._ran_raising(receiver, before, inside, handed, error)
                fields.taken_again(pending)
                raise
            converted = carry(item)
            sent, thrown = None, None
            try:
                sent = yield converted
            except GeneratorExit:
                before = dict(receiver.__dict__)
                inside = fields.inside(receiver, before) if fields.followed else None
                generator.close()  # its finally blocks run
                carry()
                raise
            except BaseException as e:  # thrown in by the caller: the generator's to handle
                thrown = e

    def _ran_raising(
        self, receiver: Any, before: dict[str, Any], inside: Any, handed: Iterable[HeldCopy], error: BaseException
    ) -> None:
        """What a method that raised ``error`` changed on ``receiver`` carried to the caller's
        result (see ResultFields.ran), its writes into ``handed`` too; a value the result cannot
        take is said in a note on ``error``, which the caller gets as the plain object gives it
        (``except KeyError``)."""
        try:
            self._copied_back(handed)
            self.fields.ran(receiver, before, inside, None, self)
        except ConversionError as refusal:
            error.add_note(f"autoconvert: {refusal}")

    def carried(self, value: Any, name: str) -> Any:
        """A value a method set on the object it ran on, for the caller's result: converted
        as the result's fields were; one holding itself through what the conversion walks
        (``n.kids.append(n)``, a dataclass field) refused as a decorated function's is."""
        try:
            return self.stored(value)
        except LeafError as e:
            if e.fix is DEFERRED_FIX:  # stored, not returned: no function of the caller's to decorate
                e.fix = STORED_DEFERRED_FIX
            raise e.public(f"{getattr(self.method, '__qualname__', self.method)}()", "field", f"self.{name}") from None
        except RecursionError:
            where = f"{getattr(self.method, '__qualname__', self.method)}()"
            raise result_cycle_error().public(where, "field", f"self.{name}") from None

    def stored(self, value: Any) -> Any:
        """A value a method set on the object it ran on, converted as the result's fields were
        (a ``LeafError`` for ``carried`` to name the field)."""
        return self.mapper(value, self.ctx)

    def back(self, value: Any, name: str) -> Any:
        """A value the caller set on the result, for the original's methods: as it is (a side
        that converts the arguments converts it too)."""
        return value

    def apart(self, converted: Any, original: Any) -> bool:
        """Whether ``converted``, made from the original's ``original``, is a copy of it (see
        ResultFields.apart); values as they are never are."""
        return False

    def paired(self, mine: Any, theirs: Any) -> bool:
        """Whether the caller's ``mine`` is a copy of the array or tensor ``theirs`` that the two
        sides keep one state with by value (see ResultFields.copies); values as they are are none."""
        return False

    def refresh(self, held: HeldCopy) -> None:
        """The caller's writes in place into its copy (see _result_copies) copied into what the
        methods hold, before a method call (see ``paired``: a side with copies says how)."""

    def refreshed(self, held: HeldCopy) -> None:
        """A method's writes in place into what the copy ``held`` pairs copied into the caller's,
        after the call (see ``refresh``)."""

    def synced(self, pair: CopyPair) -> None:
        """A snapshot of what the methods hold in ``pair`` taken, where the caller's was just made
        from it: what the caller was handed is told from it at the first call (see ``refresh``)."""

    def convert(self, value: Any) -> Any:
        """A method's value converted as the result was (the objects of the result the method
        ran on it holds put by ``with_twins``: see ``run``)."""
        return self.mapper(value, self.ctx)

    def value(self, result: Any, twins: dict[int, tuple[Any, Any]] | Any) -> Any:
        """A method's ``result`` for the caller, ``twins`` as ``run`` gives them; one holding
        itself through what the conversion walks refused as a decorated function's is (a
        ``LeafError``, for the side to name the method)."""
        try:
            return self.convert(result) if twins is UNSEEN else with_twins(result, twins, self.convert)
        except RecursionError:
            raise result_cycle_error() from None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result, twins = self.run(self.bound(), args, kwargs)
        try:
            return self.value(result, twins)
        except LeafError as e:
            raise e.public(f"{getattr(self.method, '__qualname__', self.method)}()", "", "result") from None

    def __reduce__(self) -> tuple[Any, ...]:
        # A side that converts nothing on the way in pickles as the original's method (the
        # original's: a static method binds no object).
        return getattr, (self.fields.original, self.name)


# A method a copy's item gives on the methods' side (a copy's items are results of their own),
# returned by a method (``return self.items[0].bump``): the caller's item's method stands for it.
_CALLABLE_PARTS[ResultMethod] = lambda method: (method.__self__,)
METHODS_NODE.append(_MethodsNode)
