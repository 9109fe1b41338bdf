"""The reverse pair's container changes: what torch code changes in a list, dict or dataclass
it was handed reaches the caller's container, as plain Python on NumPy arrays would leave it
(new tensors come back as arrays), in every mode of ``accepts_tensor``, the mirror of
``accepts_numpy``'s (tests/test_containers.py)."""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import autoconvert as ac


@dataclasses.dataclass
class Pair:
    a: Any
    b: Any


def _dict() -> dict[str, Any]:
    return {"a": np.array([1.0, 2.0]), "b": np.array([3, 4]), "k": 1}


def _list() -> list[Any]:
    return [np.array([1.0, 2.0]), {"x": np.array([5.0])}, 7]


def _pair() -> Pair:
    return Pair(np.array([1.0, 2.0]), {"x": np.array([5.0])})


def _add_key(d: dict[str, Any]) -> None:
    d["new"] = d["a"] * 2


def _add_a_sum(d: dict[str, Any]) -> None:
    d["sum"] = d["a"].sum()  # a 0-d tensor: a NumPy scalar, as NumPy's sum gives


def _pop_key(d: dict[str, Any]) -> None:
    d.pop("b")


def _move_key(d: dict[str, Any]) -> None:
    d["moved"] = d.pop("a")


def _replace_value(d: dict[str, Any]) -> None:
    d["a"] = d["a"] * 3


def _append(items: list[Any]) -> None:
    items.append(items[0] * 2)


def _extend(items: list[Any]) -> None:
    items.extend([items[0] + 1, 8, items[0]])


def _remove_item(items: list[Any]) -> None:
    del items[2]
    items.pop(0)


def _replace_item(items: list[Any]) -> None:
    items[0] = items[0] * 3


def _into_nested_dict(items: list[Any]) -> None:
    items[1]["new"] = items[0] * 2


def _set_attribute(c: Pair) -> None:
    c.extra = c.a * 2  # type: ignore[attr-defined]  # an attribute no field declares


def _replace_field(c: Pair) -> None:
    c.a = c.a * 3


def _delete_field(c: Pair) -> None:
    del c.b


def _into_field_dict(c: Pair) -> None:
    c.b["new"] = c.a * 2


#: (container maker, change) pairs: every change kind on each container kind it applies to.
CHANGES: list[tuple[Callable[[], Any], Callable[[Any], None]]] = [
    *((_dict, change) for change in (_add_key, _add_a_sum, _pop_key, _move_key, _replace_value)),
    *((_list, change) for change in (_append, _extend, _remove_item, _replace_item, _into_nested_dict)),
    *((_pair, change) for change in (_set_attribute, _replace_field, _delete_field, _into_field_dict)),
]

#: accepts_tensor's modes that rebuild containers; the dtype each makes of a float64 array.
MODES: list[tuple[dict[str, Any], np.dtype[Any] | None]] = [
    ({}, None),
    ({"copy": True}, None),
    ({"copy": False}, None),
    ({"dtype": "input"}, None),
    ({"device": "cpu"}, None),
    ({"dtype": torch.float32}, np.dtype(np.float32)),
    ({"only": ["c"]}, None),
    ({"exclude": ["other"]}, None),
    ({"nested": True, "copy": None}, None),
]


def _body(change: Callable[[Any], None]) -> Callable[..., int]:
    def body(c: Any, other: Any = None) -> int:
        change(c)
        return 0

    body.__qualname__ = change.__name__
    return body


def _cast(value: Any, dtype: np.dtype[Any] | None, originals: dict[int, Any]) -> Any:
    """``value`` with its float64 arrays in ``dtype``, as the body sees them; each cast copy's
    caller's array recorded in ``originals`` (what it stands for, as autoconvert maps it back)."""
    if isinstance(value, np.ndarray):
        if dtype is None or value.dtype != np.float64:
            return value
        cast = value.astype(dtype)
        originals[id(cast)] = value
        return cast
    if isinstance(value, dict):
        return {k: _cast(v, dtype, originals) for k, v in value.items()}
    if isinstance(value, list):
        return [_cast(v, dtype, originals) for v in value]
    if isinstance(value, Pair):
        new = Pair(_cast(value.a, dtype, originals), _cast(value.b, dtype, originals))
        new.__dict__.update({k: _cast(v, dtype, originals) for k, v in vars(value).items() if k not in ("a", "b")})
        return new
    return value


def _plain(make: Callable[[], Any], change: Callable[[Any], None], dtype: np.dtype[Any] | None) -> tuple[Any, Any]:
    """The caller's container, and it after plain Python made ``change`` on NumPy arrays (in
    ``dtype`` where the mode casts, the values it was handed standing for the caller's)."""
    container = make()
    originals: dict[int, Any] = {}
    handed = _cast(container, dtype, originals)
    before = _leaves(container)
    change(handed)
    if dtype is None:
        return before, handed
    return before, _restore(handed, originals)


def _restore(value: Any, originals: dict[int, Any]) -> Any:
    if id(value) in originals:
        return originals[id(value)]
    if isinstance(value, dict):
        return {k: _restore(v, originals) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v, originals) for v in value]
    if isinstance(value, Pair):
        new = Pair.__new__(Pair)
        new.__dict__.update({k: _restore(v, originals) for k, v in vars(value).items()})
        return new
    return value


def _leaves(value: Any) -> list[Any]:
    """The arrays ``value`` holds, in order."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, Pair):
        return [leaf for v in vars(value).values() for leaf in _leaves(v)]
    return []


def _shape(value: Any, callers: list[Any]) -> Any:
    """``value`` comparable across runs: each of the caller's arrays by its place among
    ``callers`` (identity), each new one by its type, dtype and values, containers by kind."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        for i, caller in enumerate(callers):
            if value is caller:
                return ("the caller's", i)
        return ("new", type(value).__name__, str(value.dtype), value.tolist())
    if isinstance(value, dict):
        return {k: _shape(v, callers) for k, v in value.items()}
    if isinstance(value, list):
        return ["list", *(_shape(v, callers) for v in value)]
    if isinstance(value, Pair):
        return ("Pair", {k: _shape(v, callers) for k, v in vars(value).items()})
    if isinstance(value, np.generic):  # a NumPy scalar, by its type too (float32 equals float64)
        return ("scalar", type(value).__name__, value.item())
    return value


def _check(case: int, mode: int, *, wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None) -> None:
    """The decorated call (``wrap`` around ``accepts_tensor``'s) leaves the caller's container
    as plain Python on NumPy arrays leaves it."""
    make, change = CHANGES[case]
    options, dtype = MODES[mode]
    plain_callers, expected = _plain(make, change, dtype)
    container = make()
    callers = _leaves(container)
    decorated = ac.accepts_tensor(_body(change), **options)
    assert (decorated if wrap is None else wrap(decorated))(container) == 0
    assert _shape(container, callers) == _shape(expected, plain_callers)


@pytest.mark.parametrize("case", range(len(CHANGES)), ids=[f"{m.__name__[1:]}-{c.__name__[1:]}" for m, c in CHANGES])
def test_each_change_reaches_the_callers_container(case: int) -> None:
    """Every change kind on each container kind, in the default mode: the caller's container
    ends as plain Python on arrays leaves it."""
    _check(case, 0)


@settings(deadline=None)
@given(case=st.integers(0, len(CHANGES) - 1), mode=st.integers(0, len(MODES) - 1))
def test_changes_reach_the_caller_in_every_mode(case: int, mode: int) -> None:
    """Change kinds x container kinds x accepts_tensor's modes: as plain Python on arrays."""
    _check(case, mode)


@pytest.mark.slow
@pytest.mark.parametrize("mode", range(len(MODES)))
@pytest.mark.parametrize("case", range(len(CHANGES)))
def test_every_change_in_every_mode(case: int, mode: int) -> None:
    """The whole cross-product, plain and under returns_numpy, in a config block and under stats."""
    _check(case, mode)
    _check(case, mode, wrap=ac.returns_numpy)
    _check(case, mode, wrap=_in_config)
    _check(case, mode, wrap=_under_stats)


def _in_config(decorated: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        with ac.config(copy=True):
            return decorated(*args)

    return call


def _under_stats(decorated: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        with ac.stats():
            return decorated(*args)

    return call


@pytest.mark.parametrize("wrap", [ac.returns_numpy, _in_config, _under_stats], ids=["returns_numpy", "config", "stats"])
def test_changes_reach_the_caller_under_returns_numpy_config_and_stats(wrap: Callable[..., Any]) -> None:
    """The pair, a config block (its own Runner) and stats (a watched one) carry changes too."""
    for case in range(len(CHANGES)):
        _check(case, 0, wrap=wrap)


def test_new_tensors_come_back_detached_as_arrays() -> None:
    """A tensor requiring grad the function puts in comes back an array, as returns_numpy
    detaches a result: the caller works in NumPy."""

    def adds(d: dict[str, Any]) -> int:
        d["new"] = torch.ones(2, requires_grad=True) * d["a"]
        return 0

    d = {"a": np.array([1.0, 2.0])}
    ac.accepts_tensor(adds)(d)
    assert type(d["new"]) is np.ndarray and d["new"].tolist() == [1.0, 2.0]


def test_a_list_of_no_arrays_takes_arrays_where_the_call_had_arrays() -> None:
    """A list holding no arrays is handed as it is; what the function appends to it comes
    back as arrays where the call had arrays (the caller works in NumPy), and stays tensors
    where it had tensors alone."""

    def appends(x: Any, out: list[Any]) -> int:
        out.append(x * 2)
        return 0

    out: list[Any] = [1]
    ac.accepts_tensor(appends)(np.array([1.0]), out)
    assert out[0] == 1 and type(out[1]) is np.ndarray and out[1].tolist() == [2.0]
    out = []
    ac.accepts_tensor(appends)(torch.tensor([1.0]), out)
    assert type(out[0]) is torch.Tensor and out[0].tolist() == [2.0]


def test_nested_false_hands_the_callers_container_as_it_is() -> None:
    """nested=False hands containers as they are: the function changes the caller's own
    dict, and what it puts in stays as it put it."""

    def adds(d: dict[str, Any]) -> int:
        d["new"] = torch.ones(1)
        return 0

    d = {"a": np.ones(1)}
    ac.accepts_tensor(adds, nested=False)(d)
    assert type(d["new"]) is torch.Tensor


class _Box:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


def test_a_change_a_registered_container_cannot_take_is_refused_by_name() -> None:
    """A type registered with flatten/unflatten has no way to take a change back: the call
    raises, naming the argument, where below it the change was and the rebuilt copy's
    arrays as tensors, and the changes other containers can take are made."""
    ac.register_container(_Box, lambda p: ((p.a, p.b), None), lambda c, _: _Box(*c))

    @ac.accepts_tensor
    def swap(state: dict[str, Any]) -> None:
        state["boxes"][0].b = None
        state["n"] = 1

    state = {"boxes": [_Box(np.ones(1), 2)], "n": 0}
    with pytest.raises(ac.ConversionError) as info:
        swap(state)
    assert str(info.value) == (
        "test_a_change_a_registered_container_cannot_take_is_refused_by_name.<locals>.swap(): argument "
        "state['boxes'][0] was changed by the function (at [1]), and a _Box cannot take the change back: the "
        "function was handed a rebuilt copy (its arrays as tensors), and only a dict, a list, a dataclass that is "
        "not frozen or a type registered with an update takes back changes made to one. Found "
        "tests.test_reverse_containers._Box. Fix: register _Box with an update (autoconvert.register_container(..., "
        "update=...)), return the changed value instead, or make the change on the caller's side."
    )
    assert state["n"] == 1 and state["boxes"][0].b == 2


def test_batched_of_the_reverse_pair_keeps_a_torch_callers_tensors() -> None:
    """batched of an accepts_tensor function, called with tensors alone: what the function
    puts in the dict it was handed stays a tensor (no array in the call)."""

    def adds(d: dict[str, Any], i: Any) -> Any:
        d["new"] = d["a"] * 2
        return d["a"].sum() + i

    d = {"a": torch.ones(3, 2)}
    ac.batched(ac.accepts_tensor(adds), in_caller=True)(d, torch.arange(3))
    assert type(d["new"]) is torch.Tensor


def test_writes_into_a_private_copy_and_container_changes_both_reach_the_caller() -> None:
    """A reversed view torch cannot share is a private copy whose writes are copied back; the
    key the function adds beside it reaches the caller's dict too."""

    def doubles(d: dict[str, Any]) -> int:
        d["a"].mul_(2)
        d["new"] = d["a"] + 1
        return 0

    base = np.arange(3.0)
    d = {"a": base[::-1]}
    ac.accepts_tensor(doubles)(d)
    assert base.tolist() == [0.0, 2.0, 4.0] and d["a"].base is base
    assert type(d["new"]) is np.ndarray and d["new"].tolist() == [5.0, 3.0, 1.0]


def test_new_tensors_on_the_accelerator_come_back_as_host_arrays(accelerator: torch.device) -> None:
    """device=: the function gets the dict's arrays on the accelerator, and what it puts in
    comes back as host arrays; the caller's own arrays stay."""

    def adds(d: dict[str, Any]) -> int:
        assert d["a"].device.type == accelerator.type
        d["new"] = d["a"] * 2
        d["items"].append(d["a"].sum())
        return 0

    a = np.array([1.0, 2.0])
    d = {"a": a, "items": []}
    ac.accepts_tensor(adds, device=accelerator)(d)
    assert d["a"] is a and type(d["new"]) is np.ndarray and d["new"].tolist() == [2.0, 4.0]
    assert d["items"] == [3.0] and type(d["items"][0]) is np.float64


@pytest.mark.parametrize("options", [{}, {"copy": True}, {"dtype": torch.float32}], ids=["default", "copy", "float32"])
@pytest.mark.parametrize("pair", [False, True], ids=["alone", "pair"])
def test_a_bare_argument_put_into_a_container_is_the_callers_own(options: dict[str, Any], pair: bool) -> None:
    """An array handed as a bare argument (by position or keyword) that the torch code puts
    into a container it was handed is the caller's own array there, as in plain Python, not a
    new array made of its tensor."""

    def put(x: torch.Tensor, box: Any, *, y: torch.Tensor) -> None:
        if isinstance(box, dict):
            box["x"], box["y"] = x, y
        else:
            box += [x, y]

    function = ac.accepts_tensor(**options)(put)
    function = ac.returns_numpy(function) if pair else function
    for held in ([], [np.ones(1)], {"held": np.ones(1)}):
        x, y = np.ones(2), np.zeros(2)
        function(x, held, y=y)
        got = (held["x"], held["y"]) if isinstance(held, dict) else (held[-2], held[-1])
        assert got[0] is x and got[1] is y


def test_calls_on_two_threads_appending_to_one_list_refuse_by_name_rather_than_lose_an_append() -> None:
    """Two calls on two threads appending to one shared list, both inside the function at once:
    the first to return puts its copy back, the second finds the caller's list grown under its
    copy and raises the library's error naming the argument (the guide's fix: a lock around
    the call, or a list each), not Python's raw zip error."""
    both_inside = threading.Barrier(2)

    @ac.accepts_tensor
    def log_sum(x: torch.Tensor, log: list[Any]) -> None:
        log.append(x.sum())
        both_inside.wait(timeout=30)

    log: list[Any] = [np.zeros(1)]
    errors: list[BaseException] = []

    def one() -> None:
        try:
            log_sum(np.ones(2), log)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(log) == 2 and log[1] == 2.0 and len(errors) == 1  # one call's changes are put back at a time
    for error in errors:
        assert type(error) is ac.ConversionError and str(error).startswith(
            "test_calls_on_two_threads_appending_to_one_list_refuse_by_name_rather_than_lose_an_append.<locals>."
            "log_sum(): argument log was changed during the call other than through the rebuilt copy"
        )


_SLOT_SIDES = {
    "accepts_numpy": (ac.accepts_numpy, torch.ones),
    "accepts_tensor": (ac.accepts_tensor, np.ones),
    "reverse pair": (lambda f: ac.returns_numpy(ac.accepts_tensor(f)), np.ones),
}


@pytest.mark.parametrize("side", _SLOT_SIDES)
def test_calls_on_threads_each_writing_its_own_slot_of_one_list_keep_every_write(side: str) -> None:
    """Calls on several threads each writing its own slot of one shared list (`log[i] = ...`,
    no race in plain Python), all inside the function at once: every write reaches the
    caller's list, as each call's changes are put back one at a time, reading the caller's
    list as it is then (threads switching as often as Python lets them)."""
    decorate, make = _SLOT_SIDES[side]
    calls = 8
    all_inside = threading.Barrier(calls)

    @decorate
    def write_slot(x: Any, log: list[Any], i: int) -> None:
        log[i] = x.sum() + i
        all_inside.wait(timeout=30)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(5):
            log = [make(1) * 0 for _ in range(calls)]
            threads = [threading.Thread(target=write_slot, args=(make(2), log, i)) for i in range(calls)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert [float(value) for value in log] == [2.0 + i for i in range(calls)]
    finally:
        sys.setswitchinterval(interval)
