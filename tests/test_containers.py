"""Containers: the registry, torch pytree types, and what is rebuilt how."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pytest
import torch
import torch.utils._pytree as pytree
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac
from tests.test_call_sites import _needs
from tests.test_flat import both


@ac.accepts_numpy
def identity(x: Any) -> Any:
    return x


def test_register_container_makes_a_type_a_container() -> None:
    class Pair:
        def __init__(self, a: Any, b: Any) -> None:
            self.a, self.b = a, b

    t = torch.ones(1)
    assert identity(Pair(t, 1)).a is t  # a leaf until registered
    ac.register_container(Pair, lambda p: ((p.a, p.b), None), lambda c, _: Pair(*c), key=lambda _, i: ".ab"[i : i + 2])
    out = identity(Pair(t, 1))
    assert type(out) is Pair and type(out.a) is np.ndarray and out.b == 1

    @ac.accepts_numpy(copy=False)
    def strict(x: Any) -> Any:
        return x

    with pytest.raises(ac.CopyError, match=r"argument x\.a cannot be shared"):
        strict(Pair(torch.ones(1, dtype=torch.bfloat16), 0))


def test_register_container_needs_a_type() -> None:
    with pytest.raises(TypeError, match="register_container\\(\\) needs a type"):
        ac.register_container("list", lambda x: (x, None), lambda c, _: c)  # type: ignore[arg-type]


def test_types_registered_with_torch_pytree_need_no_second_registration() -> None:
    """Model-output classes register themselves with torch's pytree; autoconvert honours that."""

    class Output(collections.OrderedDict):  # type: ignore[type-arg]
        pass

    pytree.register_pytree_node(
        Output,
        lambda o: (list(o.values()), list(o.keys())),
        lambda values, keys: Output(zip(keys, values, strict=True)),
        flatten_with_keys_fn=lambda o: ([(pytree.MappingKey(k), v) for k, v in o.items()], list(o.keys())),
    )
    out = identity(Output(logits=torch.ones(2), loss=None))
    assert type(out) is Output and type(out["logits"]) is np.ndarray and out["loss"] is None

    @ac.accepts_numpy(copy=False)
    def strict(x: Any) -> Any:
        return x

    with pytest.raises(ac.CopyError, match=r"argument x\['logits'\] cannot be shared"):
        strict(Output(logits=torch.ones(1, dtype=torch.bfloat16)))


def test_dataclasses_are_copied_not_re_initialised() -> None:
    """Frozen, slotted and init=False fields survive; __post_init__ is not run again."""
    calls = []

    @dataclasses.dataclass(frozen=True, slots=True)
    class Sample:
        x: Any
        derived: int = dataclasses.field(init=False, default=0)

        def __post_init__(self) -> None:
            calls.append(1)

    s = Sample(torch.ones(1))
    out = identity(s)
    assert type(out) is Sample and type(out.x) is np.ndarray and out.derived == 0 and calls == [1]


def test_torch_return_types_are_rebuilt() -> None:
    """torch.max(x, dim) returns a struct sequence; returns_numpy converts its fields in place."""

    @ac.returns_numpy
    def top(x: torch.Tensor) -> Any:
        return torch.max(x, dim=0)

    out = top(torch.tensor([[1.0, 5.0], [3.0, 2.0]]))
    assert type(out).__name__ == "max" and out.values.tolist() == [3.0, 5.0] and type(out.indices) is np.ndarray


def test_pytree_types_without_key_functions_use_index_paths() -> None:
    class Box:
        def __init__(self, items: list[Any]) -> None:
            self.items = items

    pytree.register_pytree_node(Box, lambda b: (b.items, None), lambda items, _: Box(list(items)))

    @ac.accepts_numpy(copy=False)
    def strict(x: Any) -> Any:
        return x

    assert type(strict(Box([torch.ones(1)])).items[0]) is np.ndarray
    with pytest.raises(ac.CopyError, match=r"argument x\[1\] cannot be shared"):
        strict(Box([torch.ones(1), torch.ones(1, dtype=torch.bfloat16)]))


@pytest.mark.slow
def test_register_container_racing_with_calls_and_decorations() -> None:
    """The sweep's case: registrations in one thread while 4 threads call a decorated function
    and 2 decorate new ones. Every call gets an array; no thread sees a raw error."""
    import threading

    seen = ac.accepts_numpy(lambda a: type(a))
    errors: list[BaseException] = []
    kinds: list[type] = []
    stop = threading.Event()

    def call() -> None:
        try:
            while not stop.is_set():
                kinds.append(seen(torch.ones(1)))
        except BaseException as e:  # pragma: no cover - the failure being tested for
            errors.append(e)

    def decorate() -> None:
        try:
            while not stop.is_set():
                ac.accepts_numpy(lambda a: a)
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(4)] + [threading.Thread(target=decorate) for _ in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can: the race shows
    for t in threads:
        t.start()
    try:
        for i in range(300):
            kind = type(f"Box{i}", (), {})
            ac.register_container(kind, lambda b: ((), None), lambda c, _, kind=kind: kind())
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(interval)
    assert errors == []
    assert kinds and set(kinds) == {np.ndarray}


def test_a_type_registered_while_another_thread_decides_it_is_a_leaf_is_walked() -> None:
    """The race: one thread resolves an unregistered type as a leaf, and before it stores
    that decision another thread registers the type (and clears the caches). The stale
    "leaf" must not stay: the next call walks the container and hands NumPy arrays."""
    import threading

    deciding, registered = threading.Event(), threading.Event()

    class SlowLookup(type):
        """A metaclass whose missing-attribute lookups (the dataclass probe among them) pause
        the deciding thread until the other thread has registered the type."""

        def __getattr__(cls, name: str) -> Any:
            if name == "__dataclass_fields__" and not registered.is_set():
                deciding.set()
                registered.wait(10)
            raise AttributeError(name)

    class Holder(metaclass=SlowLookup):
        def __init__(self, item: Any) -> None:
            self.item = item

    kinds = ac.accepts_numpy(lambda h: type(h.item) if isinstance(h, Holder) else type(h))
    results: list[type] = []
    first = threading.Thread(target=lambda: results.append(kinds(Holder(torch.ones(1)))))
    first.start()
    assert deciding.wait(10)
    ac.register_container(Holder, lambda h: ((h.item,), None), lambda c, _: Holder(c[0]))
    registered.set()
    first.join()
    assert results == [np.ndarray]  # the decision made under the older registry was made again
    assert kinds(Holder(torch.ones(1))) is np.ndarray


# --------------------------------------------------------------------------- changes the function makes
# One rule in every mode: what the function changes in a container of tensors it was handed
# (rebuilt, its tensors as arrays) is what the caller's container holds afterwards; the arrays
# inside keep their mode's rules.

_MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "copy=True": {"copy": True},
    "copy=False": {"copy": False},
    "writeback=True": {"writeback": True},
    "check_writes=True": {"check_writes": True},
}

#: Each change made on the function's side (arrays) and the same change on a twin made of tensors.
_MAPPING_CHANGES: dict[str, tuple[Any, Any]] = {
    "add a key": (
        lambda s: s.__setitem__("new", np.full(2, 7.0)),
        lambda s: s.__setitem__("new", torch.full((2,), 7.0, dtype=torch.float64)),
    ),
    "delete a key": (lambda s: s.pop("tag", None), lambda s: s.pop("tag", None)),
    "move a key last": (lambda s: s.__setitem__("x", s.pop("x")), lambda s: s.__setitem__("x", s.pop("x"))),
    "replace a tensor": (lambda s: s.__setitem__("x", s["x"] * 2), lambda s: s.__setitem__("x", s["x"] * 2)),
    "alias a tensor": (lambda s: s.__setitem__("y", s["x"]), lambda s: s.__setitem__("y", s["x"])),
    "replace a number": (lambda s: s.__setitem__("n", s["n"] + 1), lambda s: s.__setitem__("n", s["n"] + 1)),
    "nest a new list": (
        lambda s: s.__setitem__("pair", [s["x"], np.zeros(1)]),
        lambda s: s.__setitem__("pair", [s["x"], torch.zeros(1, dtype=torch.float64)]),
    ),
}
#: Changes to the list the state holds (only where it holds one: a nested state).
_LIST_CHANGES: dict[str, tuple[Any, Any]] = {
    "append an item": (
        lambda s: s["items"].append(np.ones(1)),
        lambda s: s["items"].append(torch.ones(1, dtype=torch.float64)),
    ),
    "insert an item": (lambda s: s["items"].insert(0, "first"), lambda s: s["items"].insert(0, "first")),
    "pop an item": (lambda s: s["items"] and s["items"].pop(), lambda s: s["items"] and s["items"].pop()),
    "replace an item": (
        lambda s: s["items"] and s["items"].__setitem__(0, 5),
        lambda s: s["items"] and s["items"].__setitem__(0, 5),
    ),
}


def _mapping_state(kind: type, nested: bool) -> Any:
    state = kind() if kind is not collections.defaultdict else collections.defaultdict(list)
    state.update(x=torch.arange(3.0), tag="a", n=0)
    if nested:
        items = [torch.ones(2), torch.zeros(2)]
        state.update(items=items, again=items)  # one list reachable twice
    return state


def _same(a: Any, b: Any) -> bool:
    """Equal values in the same order and kinds: tensors by dtype and value, containers item by item."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return type(a) is type(b) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


@given(
    mode=st.sampled_from(sorted(_MODES)),
    kind=st.sampled_from([dict, collections.OrderedDict, collections.defaultdict]),
    nested=st.booleans(),
    changes=st.lists(st.sampled_from(sorted(_MAPPING_CHANGES) + sorted(_LIST_CHANGES)), max_size=6),
)
def test_changes_to_a_handed_mapping_reach_the_callers_in_every_mode(
    mode: str, kind: type, nested: bool, changes: list[str]
) -> None:
    """Whatever the function does to the mapping of tensors it was handed (keys added, removed
    or moved, values replaced, new lists holding handed arrays, items of a list it holds twice
    appended, inserted, popped, replaced) is what the caller's mapping holds afterwards, in
    tensors and in order, in every mode: the caller's own containers and tensors where the
    function kept them, a list reachable twice one list inside the function and after."""
    table = {**_MAPPING_CHANGES, **(_LIST_CHANGES if nested else {})}
    steps = [name for name in changes if name in table]

    @ac.accepts_numpy(**_MODES[mode])
    def change(state: Any) -> None:
        if nested:
            assert state["items"] is state["again"]
        for name in steps:
            table[name][0](state)

    state, twin = _mapping_state(kind, nested), _mapping_state(kind, nested)
    x, items = state["x"], state.get("items")
    change(state)
    for name in steps:
        table[name][1](twin)
    assert _same(state, twin), (state, twin)
    if nested:
        assert state["items"] is items and state["again"] is items
    if "replace a tensor" not in steps:
        assert state["x"] is x
        assert all(state[k] is x for k in ("y",) if k in state)


@given(
    mode=st.sampled_from(sorted(_MODES)),
    changes=st.lists(st.sampled_from(["append", "insert", "pop", "replace", "reverse", "move"]), max_size=5),
)
def test_changes_to_a_handed_list_reach_the_callers_in_every_mode(mode: str, changes: list[str]) -> None:
    """A list of tensors (the flat call's case) changed by the function (items appended,
    inserted, popped, replaced by new arrays, reversed, a handed array moved) is what the
    caller's list holds afterwards, its tensors the caller's own where the function kept them."""

    def apply(items: list[Any], lib: Any) -> None:
        for name in changes:
            if name == "append":
                items.append(lib.ones(2))
            elif name == "insert":
                items.insert(1, lib.zeros(1))
            elif name == "pop" and items:
                items.pop(0)
            elif name == "replace" and items:
                items[-1] = items[-1] + 1
            elif name == "reverse":
                items.reverse()
            elif name == "move" and items:
                items.append(items[0])

    @ac.accepts_numpy(**_MODES[mode])
    def change(items: list[Any]) -> None:
        apply(items, np)

    tensors = [torch.arange(2.0), torch.full((2,), 3.0)]
    items, twin = list(tensors), list(tensors)
    change(items)
    apply(twin, _Float64Torch)
    assert _same(items, twin), (items, twin)
    for mine, theirs in zip(items, twin, strict=True):  # the caller's tensors where the function kept them
        assert (mine is theirs) == any(theirs is t for t in tensors)


class _Float64Torch:
    """torch made to make what NumPy makes: new arrays are float64."""

    @staticmethod
    def ones(n: int) -> torch.Tensor:
        return torch.ones(n, dtype=torch.float64)

    @staticmethod
    def zeros(n: int) -> torch.Tensor:
        return torch.zeros(n, dtype=torch.float64)


@dataclasses.dataclass
class _Run:
    x: torch.Tensor
    steps: int = 0


@pytest.mark.parametrize("mode", sorted(_MODES))
def test_a_dataclass_field_and_attribute_set_by_the_function_reach_the_callers(mode: str) -> None:
    """In every mode, a dataclass holding a tensor reaches the function rebuilt: the fields and
    attributes it sets are set on the caller's object, a new array as a tensor."""

    @ac.accepts_numpy(**_MODES[mode])
    def step(run: _Run) -> None:
        run.x = run.x * 2
        run.steps += 1
        run.note = "stepped"  # type: ignore[attr-defined]

    run = _Run(torch.ones(2))
    step(run)
    assert torch.equal(run.x, torch.full((2,), 2.0)) and run.steps == 1 and run.note == "stepped"  # type: ignore[attr-defined]


@dataclasses.dataclass
class _Inner:
    a: Any
    z: Any = None


@dataclasses.dataclass
class _Outer:
    a: Any
    b: Any
    inner: Any = None


@dataclasses.dataclass
class _Unset:
    a: Any
    b: Any
    late: Any = dataclasses.field(init=False)  # never set: plain Python's object lacks it


@dataclasses.dataclass(slots=True)
class _Slotted:
    a: Any
    b: Any


#: Where the function deletes a declared field: the argument made of ``lib`` (torch or NumPy), and the deletion.
_DELETIONS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], None]]] = {
    "c.b": (lambda lib: _Outer(lib.ones(2), lib.ones(2)), lambda c: delattr(c, "b")),
    "c.inner.a": (lambda lib: _Outer(lib.ones(2), 1, _Inner(lib.zeros(2))), lambda c: delattr(c.inner, "a")),
    "l[0].b": (lambda lib: [_Outer(lib.ones(2), lib.ones(2))], lambda items: delattr(items[0], "b")),
    "slots c.b": (lambda lib: _Slotted(lib.ones(2), lib.ones(2)), lambda c: delattr(c, "b")),
    "c.b, set again": (lambda lib: _Outer(lib.ones(2), lib.ones(2)), lambda c: (delattr(c, "b"), setattr(c, "b", 7))),
    "c.b beside a field never set": (lambda lib: _Unset(lib.ones(2), lib.ones(2)), lambda c: delattr(c, "b")),
}
_PRODUCTS: dict[str, Callable[..., Any]] = {
    "accepts_numpy": ac.accepts_numpy,
    "returns_tensor(accepts_numpy)": lambda f, **mode: ac.returns_tensor(ac.accepts_numpy(f, **mode)),
    "torchify": ac.torchify,
}
_CALL_PATHS: dict[str, Callable[[], Any]] = {
    "flat": contextlib.nullcontext,
    "stats": ac.stats,
    "config(grad='error')": lambda: ac.config(grad="error"),
}


def _fields_held(value: Any) -> Any:
    """What plain Python holds in ``value``: each dataclass's attributes by name (a field it
    lacks left out), lists item by item, tensors and arrays as lists of numbers."""
    if dataclasses.is_dataclass(value):
        names = [f.name for f in dataclasses.fields(value)]
        return {n: _fields_held(getattr(value, n)) for n in names if hasattr(value, n)}
    if isinstance(value, list):
        return [_fields_held(item) for item in value]
    return value.tolist() if isinstance(value, torch.Tensor | np.ndarray) else value


@given(
    where=st.sampled_from(sorted(_DELETIONS)),
    product=st.sampled_from(sorted(_PRODUCTS)),
    mode=st.sampled_from(sorted(_MODES)),
    path=st.sampled_from(sorted(_CALL_PATHS)),
    call=st.sampled_from(["flat", "generic"]),
)
def test_a_dataclass_field_the_function_deletes_is_deleted_from_the_callers(
    where: str, product: str, mode: str, path: str, call: str
) -> None:
    """A declared field the function deletes (``del c.b``, ``del c.inner.a``, in a list, of a
    slots dataclass) is deleted from the caller's dataclass, as a dict key it removes is, on
    every product, mode and call path; the object, lacking it (as plain Python's does), is
    converted at the next call, a field never set (``init=False``) left out as well."""
    make, delete = _DELETIONS[where]

    def drop(state: Any) -> None:
        delete(state)

    def read(state: Any) -> Any:
        first = state[0] if isinstance(state, list) else state
        return np.sum(first.a) if isinstance(first.a, np.ndarray) else None

    decorate = functools.partial(_PRODUCTS[product], **_MODES[mode])
    flat, generic = both(decorate, drop)
    state, twin = make(torch), make(np)
    with _CALL_PATHS[path]():
        (flat if call == "flat" else generic)(state)
        drop(twin)
        assert _fields_held(state) == _fields_held(twin), (state, twin)
        assert float(decorate(read)(state)) == float(read(twin)) == 2.0  # handed again, lacking the field


@pytest.mark.parametrize("mode", sorted(_MODES))
def test_a_list_inside_a_namedtuple_takes_its_changes_and_the_tuple_stays(mode: str) -> None:
    """A tuple cannot change, but a list it holds can: the list's changes reach the caller's
    list, and the caller's namedtuple is untouched."""
    pair = _Pair(torch.ones(1), [torch.zeros(1)])

    @ac.accepts_numpy(**_MODES[mode])
    def grow(p: _Pair) -> None:
        p.items.append(np.full(1, 4.0))

    items = pair.items
    grow(pair)
    assert pair.items is items and len(items) == 2 and torch.equal(items[1], torch.full((1,), 4.0, dtype=torch.float64))


class _Pair(collections.namedtuple("_Pair", "x items")):
    __slots__ = ()


class _Box:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


@pytest.mark.parametrize("mode", sorted(_MODES))
def test_a_change_a_registered_container_cannot_take_is_refused_in_every_mode(mode: str) -> None:
    """A type registered with flatten/unflatten has no way to take a change back: in every
    mode the call raises, naming the argument and where below it the change was, and the
    changes other containers can take are made."""
    ac.register_container(_Box, lambda p: ((p.a, p.b), None), lambda c, _: _Box(*c))

    @ac.accepts_numpy(**_MODES[mode])
    def swap(state: dict[str, Any]) -> None:
        state["boxes"][0].b = None
        state["n"] = 1

    state = {"boxes": [_Box(torch.ones(1), 2)], "n": 0}
    with pytest.raises(ac.ConversionError) as info:
        swap(state)
    assert str(info.value) == (
        "test_a_change_a_registered_container_cannot_take_is_refused_in_every_mode.<locals>.swap(): argument "
        "state['boxes'][0] was changed by the function (at [1]), and a _Box cannot take the change back: the "
        "function was handed a rebuilt copy (its tensors as arrays), and only a dict, a list, a dataclass that is "
        "not frozen or a type registered with an update takes back changes made to one. Found "
        "tests.test_containers._Box. Fix: register _Box with an update (autoconvert.register_container(..., "
        "update=...)), return the changed value instead, or make the change on the caller's side."
    )
    assert state["n"] == 1 and state["boxes"][0].b == 2


@pytest.mark.parametrize("mode", sorted(_MODES))
@pytest.mark.parametrize("call", ["flat", "generic"])
@pytest.mark.parametrize("where", ["list", "dict"])
def test_a_masked_array_put_into_a_container_is_refused_with_its_path(mode: str, call: str, where: str) -> None:
    """A value the function puts into a container it was handed converts as a result would:
    a masked array (whose mask a tensor would drop) is autoconvert's refusal, naming the
    argument, the path below it and the fix, on the flat and the generic call, in every mode."""

    def put(state: Any) -> None:
        masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
        if where == "list":
            state.append(masked)
        else:
            state["m"] = {"inner": [0, masked]}

    flat, generic = both(ac.accepts_numpy(**_MODES[mode]), put)
    state: Any = [torch.ones(2)] if where == "list" else {"x": torch.ones(2)}
    with pytest.raises(ac.ConversionError) as info:
        (flat if call == "flat" else generic)(state)
    path = "state[1]" if where == "list" else "state['m']['inner'][1]"
    assert str(info.value) == (
        f"test_a_masked_array_put_into_a_container_is_refused_with_its_path.<locals>.put(): argument {path} is a "
        "masked array; a tensor has no mask, and dropping it would silently unmask values. Found "
        f"{np.ma.MaskedArray.__module__}.MaskedArray(shape=(2,), dtype=<f8). Fix: use {path}.filled(fill_value), or "
        "the data and the "
        "mask as two arrays."
    )
    assert len(state) == 1  # the container that cannot take its change is left as it was


def test_a_quantity_put_into_a_container_is_refused_naming_its_unit() -> None:
    """An astropy Quantity put into a container: its unit is never dropped, the refusal names
    the argument's path and the fix."""
    u = _needs("astropy.units")

    @ac.accepts_numpy
    def put(state: dict[str, Any]) -> None:
        state["q"] = np.ones(2) * u.m

    with pytest.raises(ac.ConversionError) as info:
        put({"x": torch.ones(2)})
    assert str(info.value) == (
        "test_a_quantity_put_into_a_container_is_refused_naming_its_unit.<locals>.put(): argument state['q'] is a "
        "Quantity in m, an array subclass that carries a unit; a tensor holds the numbers only, and the unit would "
        "be silently lost. Found astropy.units.quantity.Quantity(shape=(2,), dtype=<f8). Fix: pass the numbers in "
        "the unit you choose: state['q'].to_value(unit) (astropy), or state['q'].value."
    )


@pytest.mark.parametrize("mode", sorted(_MODES))
def test_one_container_passed_twice_is_one_container_inside(mode: str) -> None:
    """The same list passed as two arguments reaches the function as one list, so what the
    function appends through either reaches the caller's list once each."""

    @ac.accepts_numpy(**_MODES[mode])
    def both(a: list[Any], b: list[Any]) -> None:
        assert a is b
        a.append(1)
        b.append(2)

    items = [torch.ones(1)]
    both(items, items)
    assert items[1:] == [1, 2] and torch.equal(items[0], torch.ones(1))


def test_the_arrays_inside_keep_their_modes_rules() -> None:
    """The containers' rule does not change the arrays': copy=True's private copies are written
    without reaching the caller's tensor, the default's read-only views refuse a write, and a
    new item appended meanwhile is the caller's either way."""

    @ac.accepts_numpy(copy=True)
    def write(items: list[Any]) -> None:
        items[0] += 1
        items.append(np.ones(1))

    items = [torch.zeros(1)]
    write(items)
    assert torch.equal(items[0], torch.zeros(1)) and len(items) == 2

    @ac.accepts_numpy
    def refused(items: list[Any]) -> None:
        items.append(np.ones(1))
        items[0] += 1

    with pytest.raises(ac.ReadOnlyError):
        refused(items)
    assert len(items) == 2  # the call raised: its container changes are not made


class _Bag:
    """A user's container of items, registered with an update: it takes changes back."""

    def __init__(self, items: Any) -> None:
        self.items = list(items)


def _update_bag(bag: _Bag, children: list[Any], context: Any) -> None:
    bag.items = children


ac.register_container(_Bag, lambda b: (b.items, None), lambda c, _: _Bag(c), update=_update_bag)


class _Two(collections.namedtuple("_Two", "first second")):
    __slots__ = ()


@dataclasses.dataclass
class _Cell:
    value: Any
    other: Any


#: The container kinds a tree is made of: how each is built from its children.
_KINDS: dict[str, Any] = {
    "dict": lambda c: {f"k{i}": v for i, v in enumerate(c)},
    "OrderedDict": lambda c: collections.OrderedDict((f"k{i}", v) for i, v in enumerate(c)),
    "list": list,
    "tuple": tuple,
    "namedtuple": lambda c: _Two(*c),
    "dataclass": lambda c: _Cell(*c),
    "registered": _Bag,
}
_TREES = st.recursive(
    st.floats(-4, 4, allow_nan=False, width=32) | st.just("tag"),
    lambda kids: st.tuples(st.sampled_from(sorted(_KINDS)), st.lists(kids, min_size=2, max_size=2)),
    max_leaves=6,
)
#: Each configuration the changes are made under: a decorator's options, or a config block's.
_SETTINGS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    **{mode: (options, {}) for mode, options in _MODES.items()},
    "config(copy=True)": ({}, {"copy": True}),
    "config(writeback=True)": ({}, {"writeback": True}),
}


def _grown(spec: Any) -> Any:
    """The tree ``spec`` describes: numbers as float32 tensors of two, kinds as containers."""
    if isinstance(spec, float):
        return torch.full((2,), spec)
    if isinstance(spec, str):
        return spec
    kind, children = spec
    return _KINDS[kind]([_grown(c) for c in children])


def _mutable(tree: Any) -> list[Any]:
    """The containers of ``tree`` that can change, depth first."""
    found = []
    kids: Any = []
    if isinstance(tree, dict):
        found, kids = [tree], list(tree.values())
    elif isinstance(tree, list):
        found, kids = [tree], tree
    elif isinstance(tree, _Cell):
        found, kids = [tree], [tree.value, tree.other]
    elif isinstance(tree, _Bag):
        found, kids = [tree], tree.items
    elif isinstance(tree, tuple):
        kids = list(tree)
    return found + [c for kid in kids for c in _mutable(kid)]


def _change(container: Any, op: str, new: Any) -> None:
    """One change to one container, ``new`` a value made by the side making it."""
    if isinstance(container, _Bag):
        container = container.items
    if isinstance(container, dict):
        if op == "add":
            container[f"n{len(container)}"] = new
        elif op == "pop" and container:
            container.pop(next(iter(container)))
        elif op == "set" and container:
            container[next(iter(container))] = new
    elif isinstance(container, list):
        if op == "add":
            container.append(new)
        elif op == "pop" and container:
            container.pop(0)
        elif op == "set" and container:
            container[-1] = new
    elif op == "add":  # a dataclass
        container.extra = new
    elif op == "set":
        container.value = new


def _holds_tensors(tree: Any) -> bool:
    if isinstance(tree, torch.Tensor):
        return True
    kids = vars(tree).values() if isinstance(tree, (_Cell, _Bag)) else tree.values() if isinstance(tree, dict) else tree
    return not isinstance(tree, str) and isinstance(kids, Iterable) and any(map(_holds_tensors, kids))


def _same_tree(a: Any, b: Any) -> bool:
    """Equal trees: the same kinds, tensors of the same dtype and values, attributes too."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and bool(np.array_equal(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_tree(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_tree(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (_Cell, _Bag)):
        return _same_tree(vars(a), vars(b))
    return bool(a == b)


@given(
    spec=st.tuples(st.sampled_from(sorted(_KINDS)), st.lists(_TREES, min_size=2, max_size=2)),
    setting=st.sampled_from(sorted(_SETTINGS)),
    changes=st.lists(st.tuples(st.integers(0, 20), st.sampled_from(["add", "pop", "set"])), max_size=5),
)
def test_changes_to_nested_registered_containers_reach_the_callers(spec: Any, setting: str, changes: list[Any]) -> None:
    """Whatever the function changes in nested containers it was handed (dicts, lists,
    dataclasses and a user's type registered with an update, inside tuples and namedtuples
    too) is what the caller's containers hold afterwards, new arrays as tensors where the call
    had tensors (in the containers that held none too), in every mode and config block, on
    the flat and the generic call alike."""
    options, block = _SETTINGS[setting]

    def change(state: Any) -> None:
        for where, op in changes:
            targets = _mutable(state)
            if targets:
                _change(targets[where % len(targets)], op, np.full(2, float(where)))

    twin = _grown(spec)
    in_torch = _holds_tensors(twin)  # the caller works in torch: new arrays come back as tensors everywhere
    for where, op in changes:
        targets = _mutable(twin)
        if targets:
            target = targets[where % len(targets)]
            new = torch.full((2,), float(where), dtype=torch.float64) if in_torch else np.full(2, float(where))
            _change(target, op, new)
    for decorated in both(ac.accepts_numpy(**options), change):
        state = _grown(spec)
        with ac.config(**block):
            decorated(state)
        assert _same_tree(state, twin), (state, twin)


@pytest.mark.parametrize("mode", sorted(_MODES))
def test_a_registered_container_with_an_update_takes_changes_back(mode: str) -> None:
    """A user's type registered with an update takes what the function changed in its rebuilt
    copy (a new array as a tensor), and a dict subclass registered without one takes it as a
    dict does, in every mode."""

    class Scores(dict):  # type: ignore[type-arg]
        pass

    ac.register_container(Scores, lambda d: (list(d.values()), list(d)), lambda c, k: Scores(zip(k, c, strict=True)))

    @ac.accepts_numpy(**_MODES[mode])
    def grow(bag: _Bag, scores: Scores) -> None:
        bag.items.append(np.ones(1))
        scores["new"] = bag.items[0]

    first = torch.zeros(1)
    bag, scores = _Bag([first]), Scores(old=torch.ones(1))
    grow(bag, scores)
    assert len(bag.items) == 2 and bag.items[0] is first and bag.items[1].dtype == torch.float64
    assert list(scores) == ["old", "new"] and scores["new"] is first


@pytest.mark.parametrize("mode", _MODES)
@pytest.mark.parametrize("container", ["list", "dict", "empty list"])
def test_a_bare_argument_put_into_a_container_is_the_callers_own(mode: str, container: str) -> None:
    """A tensor handed as a bare argument (by position or keyword) that the function puts into
    a container it was handed is the caller's own tensor there, as in plain Python, not a new
    tensor made of its array (which a write into the caller's would not reach)."""

    @ac.accepts_numpy(**_MODES[mode])
    def put(x: np.ndarray, box: Any, *, y: np.ndarray) -> None:
        if isinstance(box, dict):
            box["x"], box["y"] = x, y
        else:
            box += [x, y]

    for _ in range(2):  # the first call and the flat call after it
        x, y = torch.ones(2), torch.zeros(2)
        box: Any = {"held": torch.ones(1)} if container == "dict" else [] if container == "empty list" else [x]
        put(x, box, y=y)
        if container == "dict":
            assert box["x"] is x and box["y"] is y
        else:
            assert box[-2] is x and box[-1] is y


_CHANGED_MEANWHILE = (
    "test_a_container_changed_through_an_unconverted_alias_too_is_refused_by_name.<locals>.body(): argument l1 was changed during the call other than through the rebuilt copy the function was handed "
    "({}), which the function changed too: putting the copy back would undo the other change, so the function's "
    "changes were not put back (the same container handed through an argument left unconverted too, or changed by "
    "a call on another thread). Found builtins.list. Fix: hand the container through one argument (or convert every "
    "argument it is handed through), and guard a container that calls on several threads change with a lock, or "
    "give each call its own."
)


@pytest.mark.parametrize("side", ["accepts_numpy", "accepts_tensor"])
def test_a_container_changed_through_an_unconverted_alias_too_is_refused_by_name(side: str) -> None:
    """only= converting one of two arguments handed the same list, changed through both: the
    caller's list changed under its rebuilt copy, which cannot go back without undoing that
    change, so the call says so (not Python's raw zip error)."""

    def body(l1: list[Any], l2: list[Any]) -> None:
        l2.pop(0)
        l1.append(len(l1))

    decorate, item, rebuilt_as = {
        "accepts_numpy": (ac.accepts_numpy, torch.ones(2), "its tensors as arrays"),
        "accepts_tensor": (ac.accepts_tensor, np.ones(2), "its arrays as tensors"),
    }[side]
    shared = [item]
    with pytest.raises(ac.ConversionError) as caught:
        decorate(body, only="l2")(shared, shared)
    assert str(caught.value) == _CHANGED_MEANWHILE.format(rebuilt_as)


@pytest.mark.parametrize("side", ["accepts_numpy", "accepts_tensor"])
def test_a_container_changed_meanwhile_that_the_function_left_alone_takes_no_refusal(side: str) -> None:
    """A container changed during the call through an alias only= leaves unconverted, which the
    function itself left alone, while it changes another argument (or the container above it):
    both changes are the caller's, as in plain Python, and the inner list stays the caller's own."""

    def body(outer: dict[str, Any], other: list[Any], alias: list[Any]) -> None:
        alias.append("alias")  # the caller's inner list, not through the rebuilt outer dict
        other.append(other[0] * 2)
        outer["new"] = outer["x"] * 2

    decorate, make = {"accepts_numpy": (ac.accepts_numpy, torch.ones), "accepts_tensor": (ac.accepts_tensor, np.ones)}[
        side
    ]
    inner = [make(1)]
    outer, other = {"inner": inner, "x": make(1)}, [make(1)]
    decorate(body, only=("outer", "other"))(outer, other, inner)
    assert outer["inner"] is inner and len(inner) == 2 and inner[1] == "alias"
    assert float(outer["new"][0]) == 2.0 and type(outer["new"]) is type(inner[0])
    assert len(other) == 2 and float(other[1][0]) == 2.0 and type(other[1]) is type(inner[0])
