"""A result with methods whose arrays the caller holds as copies stays one state on both sides.

A bfloat16 result (widened for NumPy), one under ``copy=True``, and the reverse pair's under
``copy=True`` hold copies of what their methods run on. A write in place into either side,
at a field of its own or inside a list, dict, tuple or record, is what the other side sees next,
as on the plain object: the caller's before the next method call, a method's after it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import pickle
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac


@dataclasses.dataclass
class Cell:
    """A record the result holds in a list and at a field."""

    hist: list[Any] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Held:
    """A result with methods, its arrays at a field and inside each kind of container."""

    w: Any
    hist: list[Any]
    by: dict[str, Any]
    pair: tuple[Any, ...]
    cell: Cell
    cells: list[Cell]
    deep: dict[str, list[Cell]]

    def write(self, place: str, v: float) -> None:
        """A method's write in place at ``place``."""
        PLACES[place](self)[0] = v

    def read(self) -> dict[str, float]:
        """What the methods see at every place."""
        return {place: float(at(self)[0]) for place, at in PLACES.items()}

    def at(self, place: str) -> Any:
        """The array at ``place`` itself, as the plain object hands it back."""
        return PLACES[place](self)

    def item(self, i: int) -> float:
        """What the methods see in ``hist[i]``."""
        return float(self.hist[i][0])

    def store(self, v: float) -> None:
        """A new array, made by the method, appended to ``hist``."""
        self.hist.append(self.hist[0] * 0 + v)

    def writes_then_yields(self, place: str, values: list[float]) -> Any:
        """A generator method writing before each item."""
        for v in values:
            PLACES[place](self)[0] = v
            yield v

    def writes_then_raises(self, place: str, v: float) -> None:
        """A method writing, then raising."""
        PLACES[place](self)[0] = v
        raise KeyError(place)


#: Each place an array sits in ``Held``, as a getter.
PLACES: dict[str, Callable[[Any], Any]] = {
    "field": lambda r: r.w,
    "list": lambda r: r.hist[1],
    "dict": lambda r: r.by["a"],
    "tuple": lambda r: r.pair[0],
    "record": lambda r: r.cell.hist[0],
    "record in list": lambda r: r.cells[0].hist[0],
    "three deep": lambda r: r.deep["k"][0].hist[0],
}


def _made(w: Any) -> Held:
    return Held(w * 1, [w * 1, w * 1], {"a": w * 1}, (w * 1, 0), Cell([w * 1]), [Cell([w * 1])], {"k": [Cell([w * 1])]})


#: Route -> (the decorated ``_made``, what it is called with): each holds copies of what its methods run on.
ROUTES: dict[str, tuple[Callable[[Any], Any], Callable[[], Any]]] = {
    "bfloat16 pair": (
        lambda f: ac.returns_tensor(ac.accepts_numpy(f)),
        lambda: torch.ones(2, dtype=torch.bfloat16),
    ),
    "bfloat16 torchify": (ac.torchify, lambda: torch.ones(2, dtype=torch.bfloat16)),
    "copy=True pair": (
        lambda f: ac.returns_tensor(copy=True)(ac.accepts_numpy(f)),
        lambda: torch.ones(2, dtype=torch.float64),
    ),
    "copy=True reverse pair": (
        lambda f: ac.returns_numpy(copy=True)(ac.accepts_tensor(f)),
        lambda: np.ones(2),
    ),
}


def _result(route: str) -> Any:
    decorate, argument = ROUTES[route]
    return decorate(_made)(argument())


def _caller_sees(r: Any) -> dict[str, float]:
    return {place: float(at(r)[0]) for place, at in PLACES.items()}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_the_callers_write_in_place_is_what_the_next_method_sees(route: str, place: str) -> None:
    """``r.hist[1][0] = 9``, then a method: it reads 9, as on the plain object, every other place as it was."""
    r = _result(route)
    r.read()  # a first call: the two sides paired
    PLACES[place](r)[0] = 9
    assert r.read() == {p: 9.0 if p == place else 1.0 for p in PLACES}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_methods_write_in_place_reaches_the_callers_copy(route: str, place: str) -> None:
    """``self.hist[1][0] = 7`` in a method: the caller's array there (the same object) holds 7."""
    r = _result(route)
    held = PLACES[place](r)
    r.write(place, 7)
    assert PLACES[place](r) is held
    assert _caller_sees(r) == {p: 7.0 if p == place else 1.0 for p in PLACES}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_write_before_the_first_method_call_is_seen(route: str) -> None:
    """The caller's write straight after the call, before any method ran, reaches the methods too."""
    r = _result(route)
    r.cells[0].hist[0][0] = 5
    assert r.read()["record in list"] == 5.0


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_generator_or_raising_methods_writes_reach_the_caller_where_it_stops(route: str) -> None:
    """Each item of a generator method, and a method that raises, carry their writes as they stop."""
    r = _result(route)
    items = r.writes_then_yields("list", [3.0, 4.0])
    next(items)
    assert float(r.hist[1][0]) == 3.0
    next(items)
    assert float(r.hist[1][0]) == 4.0
    with pytest.raises(KeyError):
        r.writes_then_raises("dict", 6.0)
    assert float(r.by["a"][0]) == 6.0


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_suspended_generator_sees_the_callers_writes_as_it_resumes(route: str) -> None:
    """The caller's write between two items of a generator method is what the rest of its body sees."""
    r = _result(route)
    items = r.writes_then_yields("dict", [3.0, 4.0])
    next(items)
    r.hist[1][0] = 8
    next(items)
    assert r.item(1) == 8.0 and float(r.by["a"][0]) == 4.0


@dataclasses.dataclass
class Stepper:
    """A result with a generator method that changes it as it ends."""

    w: Any
    hist: list[Any]
    by: dict[str, Any]
    keep: Any = None
    n: int = 0

    def steps(self, ends: str) -> Any:
        yield 1
        yield 2
        if ends == "sets a field":
            self.n += 1
        elif ends == "appends":
            self.hist.append(self.hist[0] * 0)
        elif ends == "aliases":
            self.keep = self.w

    def look(self) -> tuple[Any, ...]:
        return float(self.w[0]), len(self.hist), sorted(self.by), self.keep is self.w, self.n


#: What the caller changes while a generator method is suspended, given the result and a new value.
WHILE_SUSPENDED: dict[str, Callable[[Any, Any], None]] = {
    "r.w = new": lambda r, new: setattr(r, "w", new),
    "r.hist.append(new)": lambda r, new: r.hist.append(new),
    "del r.by['a']": lambda r, new: r.by.pop("a"),
    "r.by['z'] = new": lambda r, new: r.by.__setitem__("z", new),
    "del r.keep": lambda r, new: delattr(r, "keep"),
}

#: Route -> (decorate, the argument, a new value of the caller's kind).
STEPPER_ROUTES: dict[str, tuple[Callable[[Any], Any], Callable[[], Any], Callable[[], Any]]] = {
    "pair": (lambda f: ac.returns_tensor(ac.accepts_numpy(f)), lambda: torch.ones(2), lambda: torch.full((2,), 5.0)),
    **{name: (decorate, argument, lambda: torch.full((2,), 5.0)) for name, (decorate, argument) in ROUTES.items()},
    "reverse pair": (lambda f: ac.returns_numpy(ac.accepts_tensor(f)), lambda: np.ones(2), lambda: np.full(2, 5.0)),
}
del STEPPER_ROUTES["copy=True reverse pair"]


def _stepper(w: Any) -> Stepper:
    return Stepper(w * 1, [w * 1], {"a": w * 1})


#: The caller's change while suspended, and what the generator changes as it ends: not the
#: same place, nor one read from it (the generator sees its own state there: a documented limit).
APART_CHANGES = [
    (change, ends)
    for change in sorted(WHILE_SUSPENDED)
    for ends in ["sets a field", "appends", "aliases", "changes nothing"]
    if (change, ends) not in (("r.hist.append(new)", "appends"), ("r.w = new", "aliases"))
]


@pytest.mark.parametrize(("change", "ends"), APART_CHANGES)
@pytest.mark.parametrize("route", sorted(STEPPER_ROUTES))
def test_a_change_made_while_a_generator_is_suspended_reaches_the_next_call(route: str, change: str, ends: str) -> None:
    """The caller's change between a generator method's items reaches the next method call,
    as on the plain object, whatever else the generator changes as it ends."""
    decorate, argument, new = STEPPER_ROUTES[route]
    r = decorate(_stepper)(argument())
    plain = _stepper(np.ones(2))
    for result, value in ((r, new()), (plain, np.full(2, 5.0))):
        items = result.steps(ends)
        next(items)
        WHILE_SUSPENDED[change](result, value)
        list(items)
    assert r.look() == plain.look()
    assert r.look() == plain.look()  # and the call after


@pytest.mark.parametrize("route", ["bfloat16 pair", "bfloat16 torchify", "copy=True pair"])
def test_a_zero_dimensional_copy_takes_writes_both_ways(route: str) -> None:
    """A 0-d array inside a list, a 0-d tensor for the caller: the caller's write and a method's
    (``self.hist[0][()] = v``) both reach the other side (the reverse pair gives a NumPy scalar)."""

    @dataclasses.dataclass
    class Scalar:
        hist: list[Any]

        def read(self) -> float:
            return float(self.hist[0])

        def write(self, v: float) -> None:
            self.hist[0][()] = v

    decorate, argument = ROUTES[route]
    r = decorate(lambda w: Scalar([(w[0:1] * 3).reshape(())]))(argument())
    r.hist[0][()] = 9
    assert r.read() == 9.0
    r.write(5)
    assert float(r.hist[0]) == 5.0


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_write_of_nan_or_negative_zero_is_seen(route: str) -> None:
    """Bits are compared, not values: NaN over NaN is no write, -0.0 over 0.0 is one."""
    r = _result(route)
    r.hist[1][0] = float("nan")
    assert np.isnan(r.read()["list"])
    r.hist[1][0] = 0.0
    r.read()
    r.hist[1][0] = -0.0
    assert np.signbit(r.read()["list"])


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_an_array_the_caller_put_or_a_method_stored_is_kept_one_too(route: str) -> None:
    """A copy made by the caller's assignment (``r.hist.append(t)``) or a method's store is paired as well."""
    r = _result(route)
    r.hist.append(r.hist[0] * 1)
    assert r.item(2) == 1.0
    r.hist[2][0] = 8
    assert r.item(2) == 8.0
    r.store(3.0)  # a new array in the list, made by a method
    assert float(r.hist[3][0]) == 3.0
    r.hist[3][0] = 4
    assert r.item(3) == 4.0
    r.write("list", 5)
    r.hist[3][0] = 6
    assert (float(r.hist[1][0]), r.item(3)) == (5.0, 6.0)


# torch 2.4 warns of its own weights_only default when a tensor is unpickled.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_copies_survive_deepcopy_and_pickle_with_the_callers_writes(route: str) -> None:
    """A copy or an unpickled result sees the writes made before it was taken, and keeps them its own."""
    r = _result(route)
    r.read()
    r.cell.hist[0][0] = 9
    for again in (copy.deepcopy(r), pickle.loads(pickle.dumps(r))):
        assert again.read()["record"] == 9.0
        again.cell.hist[0][0] = 2
        assert again.read()["record"] == 2.0
    assert r.read()["record"] == 9.0


def test_a_write_reaches_the_elements_written_alone() -> None:
    """The caller's bfloat16 write into one element leaves the float32 precision of the others
    the methods hold; a method's write into one element reaches that element alone."""

    @dataclasses.dataclass
    class Fine:
        hist: list[Any]

        def values(self) -> list[float]:
            return [float(v) for v in self.hist[0]]

        def set_last(self, v: float) -> None:
            self.hist[0][-1] = v

    r = ac.returns_tensor(ac.accepts_numpy(lambda x: Fine([x.astype(np.float32) * 0 + np.float32(1.001)])))(
        torch.ones(3, dtype=torch.bfloat16)
    )
    assert r.hist[0].tolist() == [1.0, 1.0, 1.0]  # rounded for the caller
    r.hist[0][1] = 4
    assert r.values() == [float(np.float32(1.001)), 4.0, float(np.float32(1.001))]
    r.hist[0][0] = 2  # the caller's own, before the method writes elsewhere
    r.set_last(3)
    assert r.hist[0].tolist() == [2.0, 4.0, 3.0]


@pytest.mark.parametrize("route", ["bfloat16 pair", "copy=True pair"])
def test_a_result_made_under_inference_mode_takes_a_methods_write(route: str) -> None:
    """Inference tensors take in-place writes inside inference mode alone: the method's write reaches them."""
    with torch.inference_mode():
        r = _result(route)
    assert r.hist[1].is_inference()
    r.write("list", 7)
    assert float(r.hist[1][0]) == 7.0


@dataclasses.dataclass
class Kept:
    """A result over an array the function keeps between calls."""

    hist: list[Any]

    def read(self) -> float:
        return float(self.hist[0][0])


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_two_results_over_one_array_the_function_keeps_see_each_others_writes(route: str) -> None:
    """A write through one result reaches the array both hold, and the other's caller at its next
    call, never reverted by a result called for the first time after it."""
    decorate, argument = ROUTES[route]
    kept: dict[str, Any] = {}

    def cached(w: Any) -> Kept:
        kept.setdefault("a", w * 0 + 1)
        return Kept([kept["a"]])

    f = decorate(cached)
    r1, r2 = f(argument()), f(argument())
    r1.hist[0][0] = 9
    assert (r1.read(), r2.read(), r1.read()) == (9.0, 9.0, 9.0)
    assert float(r1.hist[0][0]) == 9.0 and float(r2.hist[0][0]) == 9.0  # r2's after its call, as on one object
    assert float(kept["a"][0]) == 9.0


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_shallow_copy_and_its_source_agree_on_who_wrote_last(route: str) -> None:
    """``copy.copy`` shares the caller's arrays and what the methods hold, as in plain Python: a
    write through one, then the caller's write back to the old value, is the caller's on both."""
    r0 = _result(route)
    r1 = copy.copy(r0)
    r1.read()
    r0.write("list", 5)
    r1.hist[1][0] = 1
    assert r1.read()["list"] == 1.0 and r0.read()["list"] == 1.0 and float(r0.hist[1][0]) == 1.0


@pytest.mark.parametrize("route", ["bfloat16 pair", "copy=True pair"])
def test_a_change_of_shape_in_place_is_refused_naming_the_field(route: str) -> None:
    """``resize_`` on the caller's copy: its other side cannot follow, so the next method call says so."""
    r = _result(route)
    r.hist[1].resize_(1)
    with pytest.raises(ac.ConversionError) as caught:
        r.read()
    assert str(caught.value) == (
        "Held.read(): field self.hist[1] changed shape in place (the caller: (2,) to (1,)). Found the other side's "
        "copy of it at the old shape, which cannot follow. Fix: assign a new value instead (r.hist[1] = new)."
    )


def test_a_write_into_the_functions_tensor_is_not_recorded_by_autograd() -> None:
    """The reverse pair's copy written back into a tensor of the function's graph: its gradient
    stays the function's (a write as one through NumPy), and a copy the caller made a leaf takes a
    method's write."""
    p = torch.ones(2, requires_grad=True)
    made: dict[str, torch.Tensor] = {}

    def graph(w: Any) -> Kept:
        made["y"] = p * 2
        return Kept([made["y"]])

    r = ac.returns_numpy(copy=True)(ac.accepts_tensor(graph))(np.ones(2))
    r.hist[0][0] = 9
    with torch.no_grad():
        assert r.read() == 9.0
    assert made["y"].grad_fn is not None and made["y"].detach().tolist() == [9.0, 2.0]
    made["y"].sum().backward()
    assert p.grad is not None and p.grad.tolist() == [2.0, 2.0]

    h = _result("bfloat16 pair")
    h.hist[1].requires_grad_()
    h.write("list", 4)
    assert float(h.hist[1].detach()[0]) == 4.0 and h.hist[1].requires_grad


def test_a_bfloat16_field_keeps_the_functions_precision_and_one_array_at_two_places_stays_one() -> None:
    """A field holds what the function made (float32) where no one wrote, as a list item does; the
    function's one array at a field and in a list is one array for the methods."""

    @dataclasses.dataclass
    class Both:
        w: Any
        hist: list[Any]

        def read(self) -> tuple[float, float, bool]:
            return float(self.w[1]), float(self.hist[0][0]), self.w is self.hist[0]

    def both(x: Any) -> Both:
        w = x.astype(np.float32) * 0 + np.float32(0.2)
        return Both(w, [w])

    r = ac.returns_tensor(ac.accepts_numpy(both))(torch.ones(2, dtype=torch.bfloat16))
    r.w[0] = 3
    assert r.read() == (float(np.float32(0.2)), 3.0, True)


def test_a_write_the_methods_array_cannot_take_is_refused_naming_the_field() -> None:
    """The function's read-only array in a list: the caller's write cannot reach it, and the next method call says so."""

    def broadcast(w: Any) -> Held:
        r = _made(w)
        r.hist[0] = np.broadcast_to(w, (2,))
        return r

    r = ac.returns_tensor(ac.accepts_numpy(broadcast))(torch.ones(2, dtype=torch.bfloat16))
    r.hist[0][0] = 3
    with pytest.raises(ac.ConversionError) as caught:
        r.read()
    assert str(caught.value) == (
        "Held.read(): field self.hist[0] was written in place by the caller, and the other side's copy of it cannot "
        "take the write. Found a float32 ndarray there, which refused it (assignment destination is read-only). "
        "Fix: assign a new value instead (r.hist[0] = new)."
    )


@pytest.mark.parametrize("route", ["bfloat16 pair", "copy=True pair"])
def test_a_field_over_the_functions_read_only_array_takes_the_callers_write(route: str) -> None:
    """The function kept its read-only argument at a field: the caller's write into its copy there
    reaches the methods through an array of their own, the argument untouched."""

    @dataclasses.dataclass
    class Input:
        w: Any

        def first(self) -> float:
            return float(self.w[0])

    decorate, argument = ROUTES[route]
    given = argument()
    r = decorate(Input)(given)  # accepts_numpy hands it a read-only view of the caller's tensor
    r.w[0] = 9
    assert r.first() == 9.0 and float(given[0]) == 1.0


@dataclasses.dataclass
class ReadOnly:
    """The function's read-only array at a field (and, in ``shared``, in a list too), a writable one in a list."""

    w: Any
    hist: list[Any]
    keep: Any = None

    def alias(self) -> None:
        self.keep = self.hist[0]

    def read(self) -> tuple[float, float, bool]:
        return float(self.w[0]), float(self.hist[0][0]), self.keep is self.hist[0]


def _read_only(a: Any, shared: bool = False) -> ReadOnly:
    w = a * 1
    w.flags.writeable = False
    return ReadOnly(w, [w] if shared else [a * 10])


@pytest.mark.parametrize("route", ["bfloat16 pair", "copy=True pair"])
def test_an_alias_a_method_makes_stays_one_beside_a_read_only_field(route: str) -> None:
    """The read-only field gives the methods a twin; an array a method puts at a second place
    (``self.keep = self.hist[0]``) is still one array there, and the caller's write through it is seen."""
    decorate, argument = ROUTES[route]
    r = decorate(_read_only)(argument())
    r.alias()
    r.keep[0] = 40
    assert r.read() == (1.0, 40.0, True) and float(r.hist[0][0]) == 40.0


@pytest.mark.parametrize("route", ["bfloat16 pair", "copy=True pair"])
def test_a_write_into_a_read_only_array_held_at_two_places_is_refused(route: str) -> None:
    """The function's one read-only array at a field and in a list: no array of the methods' own
    can stand for it at both places, so the caller's write is refused, naming the field."""
    decorate, argument = ROUTES[route]
    r = decorate(functools.partial(_read_only, shared=True))(argument())
    r.w[0] = 9
    with pytest.raises(
        ac.ConversionError, match=r"^ReadOnly.read\(\): field self.w was written in place by the caller"
    ) as raised:
        r.read()
    assert "(one array held at self.w and self.hist[0])" in str(raised.value)
    assert str(raised.value).endswith("(r.w = new; r.hist[0] = new).")


@dataclasses.dataclass
class Shared:
    """A result holding the function's one array at a field and in each kind of container."""

    w: Any
    hist: list[Any]
    by: dict[str, Any]
    pair: tuple[Any, ...]
    cell: Cell

    def read(self) -> list[float]:
        """What the methods see at each place, and whether it is one array everywhere."""
        places = [self.w, self.hist[0], self.by["a"], self.pair[0], self.cell.hist[0]]
        assert all(held is self.w for held in places)
        return [float(held[0]) for held in places]

    def write(self, v: float) -> None:
        self.hist[0][0] = v


def _shared(x: Any) -> Shared:
    w = x * 1
    return Shared(w, [w], {"a": w}, (w, 0), Cell([w]))


#: The routes of ``ROUTES`` and one whose tensors share the function's memory.
SHARING_ROUTES = {
    **ROUTES,
    "float64 pair": (lambda f: ac.returns_tensor(ac.accepts_numpy(f)), lambda: torch.ones(2, dtype=torch.float64)),
}


def _caller_places(r: Shared) -> list[Any]:
    return [r.w, r.hist[0], r.by["a"], r.pair[0], r.cell.hist[0]]


@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_one_array_at_several_places_is_one_for_the_caller_too(route: str) -> None:
    """The function's one array at a field and in a list, dict, tuple and record is one tensor (or
    array) for the caller too: a write through one place is seen at the others before any method
    call, and two writes at two places keep the last, as on the plain object."""
    decorate, argument = SHARING_ROUTES[route]
    r = decorate(_shared)(argument())
    first, *others = _caller_places(r)
    assert all(held is first for held in others)
    r.hist[0][0] = 4
    r.w[0] = 5
    assert [float(held[0]) for held in _caller_places(r)] == [5.0] * 5
    assert r.read() == [5.0] * 5
    r.write(6)
    assert [float(held[0]) for held in _caller_places(r)] == [6.0] * 5


# torch 2.4 warns of its own weights_only default when a tensor is unpickled.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_one_array_at_several_places_stays_one_in_a_deepcopy_or_an_unpickled_result(route: str, how: str) -> None:
    """``copy.deepcopy`` and pickle keep one object one (their memo): the copy's caller and its
    methods hold one array at every place, as a deepcopy of the plain object does."""
    decorate, argument = SHARING_ROUTES[route]
    r = decorate(_shared)(argument())
    again = copy.deepcopy(r) if how == "deepcopy" else pickle.loads(pickle.dumps(r))
    again.write(7)
    assert [float(held[0]) for held in _caller_places(again)] == [7.0] * 5
    again.w[0] = 8
    assert again.read() == [8.0] * 5
    assert r.read() == [1.0] * 5


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_tensor_the_caller_puts_at_a_second_place_is_one_array_for_the_methods(route: str) -> None:
    """``r.cell.hist[0] = r.w``: the methods see the array at ``w`` there, not a second copy of it."""
    decorate, argument = ROUTES[route]
    r = decorate(_shared)(argument())
    r.pair = (r.pair[0] * 1, 0)  # one array of its own at the tuple, the rest one: then made one again
    r.pair = (r.w, 0)
    r.w[0] = 3
    assert r.read() == [3.0] * 5


def test_a_result_holding_copies_is_freed_when_its_last_reference_goes() -> None:
    """The pairs hold no reference cycle: the caller's copies are freed when it drops the result."""
    gc.disable()
    try:
        r = _result("bfloat16 pair")
        r.hist[1][0] = 2
        r.read()
        held = weakref.ref(r.hist[1])
        del r
        assert held() is None
    finally:
        gc.enable()


#: A step: who writes (the caller in place, a method in place, the caller assigning a new array),
#: where, and the value.
STEP = st.tuples(
    st.sampled_from(["caller", "method", "caller assigns"]),
    st.sampled_from(sorted(PLACES)),
    st.integers(-8, 8).map(float),
)


@given(route=st.sampled_from(sorted(ROUTES)), steps=st.lists(STEP, min_size=1, max_size=6))
def test_both_sides_hold_what_the_plain_object_holds_after_any_writes(
    route: str, steps: list[tuple[str, str, float]]
) -> None:
    """Writes by the caller and the methods, in any order and place: after each, the caller's
    result, the methods' view and the plain object hold the same values everywhere."""
    r = _result(route)
    plain = _made(np.ones(2))
    for who, place, v in steps:
        if who == "method":
            r.write(place, v)
        elif who == "caller":
            PLACES[place](r)[0] = v
        else:  # a new array at the list's place: converted back at the next call, then paired
            r.hist[1] = r.hist[0] * 0 + v
        PLACES["list" if who == "caller assigns" else place](plain)[0] = v
        assert r.read() == plain.read()
        assert _caller_sees(r) == plain.read()


#: The places of ``Shared``: how to read one, and how to put a new object there.
SHARED_PLACES: dict[str, tuple[Callable[[Any], Any], Callable[[Any, Any], None]]] = {
    "field": (lambda r: r.w, lambda r, v: setattr(r, "w", v)),
    "list": (lambda r: r.hist[0], lambda r, v: r.hist.__setitem__(0, v)),
    "dict": (lambda r: r.by["a"], lambda r, v: r.by.__setitem__("a", v)),
    "tuple": (lambda r: r.pair[0], lambda r, v: setattr(r, "pair", (v, 0))),
    "record": (lambda r: r.cell.hist[0], lambda r, v: r.cell.hist.__setitem__(0, v)),
}


def _layout(r: Any) -> tuple[list[float], list[int]]:
    """The values at the places of ``r``, and which place first holds each one's object."""
    held = [get(r) for get, _ in SHARED_PLACES.values()]
    return [float(h[0]) for h in held], [next(i for i, other in enumerate(held) if other is h) for h in held]


class SharedSteps(Shared):
    """``Shared`` whose methods write, alias and report at any place."""

    def write_at(self, place: str, v: float) -> None:
        SHARED_PLACES[place][0](self)[0] = v

    def alias(self, place: str, to: str) -> None:
        SHARED_PLACES[place][1](self, SHARED_PLACES[to][0](self))

    def layout(self) -> tuple[list[float], list[int]]:
        return _layout(self)


def _shared_steps(x: Any) -> SharedSteps:
    w = x * 1
    return SharedSteps(w, [w], {"a": w}, (w, 0), Cell([w]))


SHARED_STEP = st.tuples(
    st.sampled_from(["caller writes", "method writes", "caller aliases", "method aliases", "caller assigns"]),
    st.sampled_from(sorted(SHARED_PLACES)),
    st.sampled_from(sorted(SHARED_PLACES)),
    st.integers(-8, 8).map(float),
)


# torch 2.4 warns of its own weights_only default when a tensor is unpickled.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@given(
    route=st.sampled_from(sorted(SHARING_ROUTES)),
    holding=st.sampled_from(["as returned", "copy.copy", "deepcopy", "pickle"]),
    steps=st.lists(SHARED_STEP, min_size=1, max_size=6),
)
def test_one_array_at_several_places_follows_the_plain_object_through_any_steps(
    route: str, holding: str, steps: list[tuple[str, str, str, float]]
) -> None:
    """Writes at any place, aliases made by the caller or a method, a new array assigned: after
    each step the caller's result and the methods' view hold what the plain object holds, the
    same values and the same object at the same places."""
    decorate, argument = SHARING_ROUTES[route]
    r = decorate(_shared_steps)(argument())
    plain = _shared_steps(np.ones(2))
    if holding == "copy.copy":
        r, plain = copy.copy(r), copy.copy(plain)
    elif holding == "deepcopy":
        r, plain = copy.deepcopy(r), copy.deepcopy(plain)
    elif holding == "pickle":
        r = pickle.loads(pickle.dumps(r))
    for who, place, to, v in steps:
        for target in (r, plain) if who.startswith("method") else (plain,):
            if who == "method writes":
                target.write_at(place, v)
            elif who == "method aliases":
                target.alias(place, to)
        if who == "caller writes":
            SHARED_PLACES[place][0](r)[0] = v
            SHARED_PLACES[place][0](plain)[0] = v
        elif who == "caller aliases":
            SHARED_PLACES[place][1](r, SHARED_PLACES[to][0](r))
            SHARED_PLACES[place][1](plain, SHARED_PLACES[to][0](plain))
        elif who == "caller assigns":
            SHARED_PLACES[place][1](r, SHARED_PLACES[place][0](r) * 0 + v)
            SHARED_PLACES[place][1](plain, SHARED_PLACES[place][0](plain) * 0 + v)
        assert _layout(r) == _layout(plain), (who, place, to, v)
        assert r.layout() == _layout(plain), (who, place, to, v)


@dataclasses.dataclass
class Aliased:
    """A result whose first field is where the caller puts an alias (looked in before the list)."""

    keep: Any
    hist: list[Any]
    rows: list[list[Any]]
    t: tuple[Any, ...] = ()

    def append_row(self) -> None:
        self.hist.append(self.rows[0][0])

    def write_first(self, v: float) -> tuple[bool, bool]:
        self.hist[0][0] = v
        return self.hist[0] is self.rows[0][0], self.keep is self.hist[0]


@pytest.mark.parametrize("alias", ["field", "tuple"])
@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_a_callers_alias_of_what_a_method_appended_is_the_functions_array(route: str, alias: str) -> None:
    """A method appends the function's array to a list, the caller appends to it too and puts that
    item at a place looked in first (``r.keep = r.hist[0]``): the methods still hold the function's
    array at both places (not a new one converted from the caller's tensor), so their writes reach
    the function's."""
    decorate, argument = SHARING_ROUTES[route]
    kept: dict[str, Any] = {}

    def make(x: Any) -> Aliased:
        kept["row"] = x * 1
        return Aliased(None, [], [[kept["row"]]])

    r = decorate(make)(argument())
    r.append_row()
    r.hist.append(r.hist[0] * 0)  # the list changed by the caller too: looked in again with the alias
    if alias == "field":
        r.keep = r.hist[0]
    else:
        r.keep, r.t = None, (r.hist[0], 0)
    same, kept_is = r.write_first(7)
    assert same and (kept_is or alias == "tuple")
    assert float(kept["row"][0]) == 7.0 and float(r.hist[0][0]) == 7.0
    assert float((r.keep if alias == "field" else r.t[0])[0]) == 7.0


@dataclasses.dataclass
class TupleHeld:
    """The function's one array in a tuple and in a record, and a list the copies share."""

    t: tuple[Any, ...]
    cell: Cell
    hist: list[Any]

    def append_t(self) -> None:
        self.hist.append(self.t[0])

    def write_t(self, v: float) -> tuple[float, bool]:
        self.t[0][0] = v
        return float(self.cell.hist[0][0]), self.hist[-1] is self.t[0] is self.cell.hist[0]

    def size(self) -> int:
        return len(self.hist)

    def pop(self) -> None:
        self.hist.pop()


def _tuple_held(x: Any) -> TupleHeld:
    w = x * 1
    return TupleHeld((w, 0), Cell([w]), [x * 2])


@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_shallow_copies_keep_one_array_one_after_either_copys_methods(route: str) -> None:
    """``r1 = copy.copy(r0)``: r0's method puts the array of a tuple into the list the copies share,
    r1's method runs; r0's methods still hold one array at the tuple, the record and the list, so a
    write at one is read at the others in the same call."""
    decorate, argument = SHARING_ROUTES[route]
    r0 = decorate(_tuple_held)(argument())
    r1 = copy.copy(r0)
    r0.append_t()
    assert r1.size() == 2
    assert r0.write_t(7) == (7.0, True)
    assert float(r0.cell.hist[0][0]) == 7.0 and float(r1.hist[-1][0]) == 7.0
    r2 = copy.copy(r1)
    r1.size()
    r2.size()
    assert r0.write_t(8) == (8.0, True) and r2.write_t(9) == (9.0, True)


@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_a_method_s_append_and_pop_through_one_shallow_copy_is_the_others_too(route: str) -> None:
    """r0's methods append to and pop from the list it shares with ``copy.copy(r0)``: the copy's
    methods see the list as the caller does (a result's own change was taken as the caller's,
    which gave the result a list of its own)."""
    decorate, argument = SHARING_ROUTES[route]
    r0 = decorate(_tuple_held)(argument())
    r1 = copy.copy(r0)
    r0.append_t()
    r0.pop()
    assert r1.size() == 1 and len(r1.hist) == 1 and r0.size() == 1


@dataclasses.dataclass
class Aliasing:
    """A result whose methods write through an alias, and append its field to its list."""

    w: Any
    hist: list[Any]
    keep: Any = None

    def write_keep(self, v: float) -> None:
        self.keep[0] = v

    def append_w(self) -> None:
        self.hist.append(self.w)

    def last_is(self, held: Any) -> bool:
        return self.hist[-1] is held

    def size(self) -> int:
        return len(self.hist)


@pytest.mark.parametrize("called_between", [False, True], ids=["at once", "a call between"])
@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_an_alias_the_caller_made_stays_the_functions_array_when_its_first_place_is_reassigned(
    route: str, called_between: bool
) -> None:
    """``r.keep = r.w; r.w = t``: ``keep`` is still the function's array for the methods (not one
    converted afresh from the caller's tensor), and a method's write through it reaches the caller."""
    decorate, argument = SHARING_ROUTES[route]
    kept: dict[str, Any] = {}

    def make(x: Any) -> Aliasing:
        kept["w"] = x * 1
        return Aliasing(kept["w"], [])

    r = decorate(make)(argument())
    r.keep = r.w
    if called_between:
        r.size()
    r.w = r.w * 1
    r.write_keep(7)
    assert float(kept["w"][0]) == 7.0 and float(r.keep[0]) == 7.0 and float(r.w[0]) == 1.0


@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_a_shallow_copy_made_after_the_callers_change_sees_it(route: str) -> None:
    """The caller appends to the result's list, then copies the result: the copy's methods see
    the list as the caller holds it, as the source's do."""
    decorate, argument = SHARING_ROUTES[route]
    r0 = decorate(lambda x: Aliasing(x * 1, [x * 1]))(argument())
    r0.hist.append(r0.hist[0] * 0)
    r1 = copy.copy(r0)
    assert r1.size() == 2 and r0.size() == 2
    r1.hist.pop()
    r2 = copy.copy(r1)
    assert r2.size() == 1 and r0.size() == 1


@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_a_copys_array_appended_to_the_shared_list_is_the_functions_for_its_source(route: str) -> None:
    """``r2 = copy.copy(r0); r0.w = t; r2.append_w()``: r2's ``w`` is still the function's array,
    which r0's methods find in the shared list, as the plain object's do."""
    decorate, argument = SHARING_ROUTES[route]
    kept: dict[str, Any] = {}

    def make(x: Any) -> Aliasing:
        kept["w"] = x * 1
        return Aliasing(kept["w"], [x * 1])

    r0 = decorate(make)(argument())
    r2 = copy.copy(r0)
    r0.w = r0.w * 1
    r2.append_w()
    assert r0.last_is(kept["w"]) and r2.last_is(kept["w"])


@pytest.mark.parametrize("remove", ["del", "reassign"])
@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_a_tensor_taken_out_of_the_result_and_put_back_later_is_the_functions_array(route: str, remove: str) -> None:
    """``t = r.w; del r.w; r.size(); r.keep = t``: a method ran while ``t`` was outside the result,
    yet ``t`` put back is still the function's array for the methods, as in plain Python."""
    decorate, argument = SHARING_ROUTES[route]
    kept: dict[str, Any] = {}

    def make(x: Any) -> Aliasing:
        kept["w"] = x * 1
        return Aliasing(kept["w"], [])

    r = decorate(make)(argument())
    t = r.w
    if remove == "del":
        del r.w
    else:
        r.w = t * 1
    r.size()
    r.keep = t
    r.write_keep(7)
    assert float(kept["w"][0]) == 7.0 and float(t[0]) == 7.0 and r.keep is t


@pytest.mark.parametrize("holding", ["as returned", "copy.copy"])
@pytest.mark.parametrize("route", sorted(SHARING_ROUTES))
def test_a_field_a_method_deleted_stays_deleted(route: str, holding: str) -> None:
    """``del self.keep`` (a field with a default), then the caller changes the result: the object the
    methods run on is made again without ``keep``, so a second ``del`` raises as on the plain object."""
    decorate, argument = SHARING_ROUTES[route]

    @dataclasses.dataclass
    class Deleting:
        w: Any
        keep: Any = None

        def drop(self) -> None:
            del self.keep

    r = decorate(lambda x: Deleting(x * 1))(argument())
    if holding == "copy.copy":
        r = copy.copy(r)
    r.drop()
    r.w = r.w * 2
    with pytest.raises(AttributeError):
        r.drop()


@dataclasses.dataclass
class Leaf:
    """An item with a method of its own, which writes its array and returns itself."""

    w: Any

    def bump(self) -> Leaf:
        self.w[0] += 1
        return self


@dataclasses.dataclass
class Leaves:
    """A result handing out its item's bound method."""

    items: list[Leaf]

    def bumper(self) -> Any:
        return self.items[0].bump

    def regrouped(self, as_tuple: bool) -> None:
        """The items set anew, reversed, with a new one (``self.items = self.items[::-1] + [...]``)."""
        again = [*self.items[::-1], Leaf(self.items[0].w * 0)]
        self.items = tuple(again) if as_tuple else again  # type: ignore[assignment]  # a tuple: as the plain object

    def firsts(self) -> list[float]:
        return [float(item.w[0]) for item in self.items]

    def first_w(self) -> Any:
        """The first item's array itself (the item a result with methods of its own)."""
        return self.items[0].w


def _leaves(w: Any) -> Leaves:
    return Leaves([Leaf(w * 1), Leaf(w * 2)])


#: How the caller came to hold the result and its item.
_HOLDINGS: dict[str, Callable[[Any], Any]] = {
    "as made": lambda r: r,
    "copy.deepcopy": copy.deepcopy,
    "unpickled": lambda r: pickle.loads(pickle.dumps(r)),
    "an item the caller put": lambda r: (r.items.__setitem__(0, Leaf(r.items[0].w * 3)), r)[1],
}


# torch 2.4 warns of its own weights_only default when a tensor is unpickled.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("holding", sorted(_HOLDINGS))
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_bound_method_of_an_item_a_method_returns_is_the_callers_items(route: str, holding: str) -> None:
    """``return self.items[0].bump`` gives the caller's item's method, as on the plain object,
    for a copy, an unpickled result and an item the caller put too: what it returns is the
    caller's item, and a write through it is the caller's."""
    decorate, argument = ROUTES[route]
    r = _HOLDINGS[holding](decorate(_leaves)(argument()))
    bump = r.bumper()
    assert bump.__self__ is r.items[0]
    before = float(r.items[0].w[1])
    out = bump()
    assert out is r.items[0]
    out.w[1] = before + 5
    assert float(r.items[0].w[1]) == before + 5
    assert float(r.bumper().__self__.w[1]) == before + 5


# torch 2.4 warns of its own weights_only default when a tensor is unpickled.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("holding", ["as made", "copy.deepcopy", "unpickled"])
@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_an_array_a_method_returns_is_the_callers_own(route: str, place: str, holding: str) -> None:
    """``return self.w`` hands back the caller's tensor (array) at that place, as the plain
    object hands back its own: a write into it is the result's, for the methods too, in a copy
    or an unpickled result too."""
    r = _HOLDINGS[holding](_result(route))
    held = r.at(place)
    assert held is PLACES[place](r)
    held[0] = 7
    assert r.read()[place] == 7.0


@pytest.mark.parametrize("as_tuple", [False, True])
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_records_a_method_regroups_into_a_new_container_stay_the_callers(route: str, as_tuple: bool) -> None:
    """``self.items = self.items[::-1] + [new]``: the records it only moved are the caller's
    own, as on the plain object, so that the caller's change to one it kept is the result's."""
    decorate, argument = ROUTES[route]
    r = decorate(_leaves)(argument())
    kept = list(r.items)
    r.regrouped(as_tuple)
    assert [r.items[1], r.items[0]] == kept and r.items[1] is kept[0] and r.items[0] is kept[1]
    kept[0].w = kept[0].w * 0 + 7
    assert r.firsts()[1] == 7.0


# torch 2.4 warns of its own weights_only default when a tensor is unpickled.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("holding", sorted(_HOLDINGS))
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_an_array_of_an_item_with_methods_a_method_returns_is_the_callers_own(route: str, holding: str) -> None:
    """``return self.items[0].w``, the item a result with methods of its own (in a copy too):
    the caller's item's tensor, so that a write into it is the result's."""
    decorate, argument = ROUTES[route]
    r = _HOLDINGS[holding](decorate(_leaves)(argument()))
    w = r.first_w()
    assert w is r.items[0].w
    w[0] = 7
    assert r.firsts()[0] == 7.0
