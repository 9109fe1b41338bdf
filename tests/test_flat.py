"""The flat call generated per plan (autoconvert._generation._specialise) against the generic call.

The whole suite also runs with ``--generic-calls`` (CI does both); here the two paths are
built side by side and compared on the same calls, value for value and error for error.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import operator
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac
import autoconvert._spec._spec as spec_module
from autoconvert._interpreter._wrapper import is_wrapper

from .conftest import shares


@contextlib.contextmanager
def flat_calls(on: bool) -> Iterator[None]:
    """Decorators applied inside build their plans with flat calls (``on``) or without,
    whatever the run's ``--generic-calls`` says."""
    before = spec_module.enabled
    spec_module.enabled = on
    try:
        yield
    finally:
        spec_module.enabled = before


def both(decorate: Callable[[Any], Any], func: Any) -> tuple[Any, Any]:
    """``func`` decorated twice: with its flat call (where its plan has one), and generic only."""
    with flat_calls(on=True):
        flat = decorate(func)
    with flat_calls(on=False):
        generic = decorate(func)
    return flat, generic


def outcome(f: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "value", f(*args, **kwargs)
    except Exception as e:
        return "error", (type(e), str(e))


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types, containers walked, tensors and arrays compared whole."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor) and a.layout != torch.strided:
        return a.layout == b.layout and same(a.to_dense(), b.to_dense())
    if hasattr(a, "toarray"):  # scipy.sparse
        return a.format == b.format and same(a.toarray(), b.toarray())
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.device == b.device and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.flags.writeable == b.flags.writeable and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def _pair(**options: Any) -> Callable[[Any], Any]:
    return lambda f: ac.returns_tensor(ac.accepts_numpy(**options)(f))


#: The decorator stacks both paths are compared through.
SIDES: dict[str, Callable[[Any], Any]] = {
    "pair": _pair(grad="detach"),
    "reverse": lambda f: ac.returns_numpy(ac.accepts_tensor(f)),
    "in": lambda f: ac.accepts_numpy(grad="detach")(f),
    "numpy-out": lambda f: ac.returns_numpy(ac.accepts_numpy(grad="detach")(f)),
    "recorded": lambda f: ac.returns_tensor(f),
    "copied": lambda f: ac.returns_tensor(copy=True)(ac.accepts_numpy(grad="detach")(f)),
    "private": _pair(copy=True, grad="detach"),
    "widening": _pair(grad="detach", widen_float16=True),  # torchify's default for SciPy
}


def passthrough(*args: Any, **kwargs: Any) -> Any:
    """Returns what it got, arrays and all: results then convert like arguments did."""
    return (args, kwargs)


def first(a: Any, *rest: Any, **kwargs: Any) -> Any:
    return a


def head(a: np.ndarray, *rest: Any, **kwargs: Any) -> np.ndarray:
    return a[:1]


class FirstTwo:
    """A callable object of two positional parameters: its wrappers take the leading form."""

    def __call__(self, a: Any, b: Any) -> Any:
        return [a, b]


first_two = FirstTwo()


def _fresh(value: Any) -> Any:
    return np.negative(value) if isinstance(value, np.ndarray) and value.dtype.kind in "iufc" else value


def fresh_tuple(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """New writable arrays among plain values: the flat call's own walk of a tuple result."""
    return tuple(_fresh(a) for a in args)


def fresh_list(*args: Any, **kwargs: Any) -> list[Any]:
    return [_fresh(a) for a in args]


def fresh_dict(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {f"r{i}": _fresh(a) for i, a in enumerate(args)} | {k: _fresh(v) for k, v in kwargs.items()}


def test_a_plain_pair_has_a_flat_call_and_the_switch_turns_it_off() -> None:
    """The wrapper's __call__ is the generated one; with the switch off, the plan has none."""
    flat, generic = both(_pair(), np.negative)
    assert is_wrapper(flat) and flat._self_plan.default.flat is not None
    assert type(flat).__call__.__code__.co_filename.startswith("<autoconvert flat call")
    assert generic._self_plan.default.flat is None


@pytest.mark.parametrize(
    "decorate",
    [
        lambda f: ac.accepts_numpy(writeback=True)(f),
        lambda f: ac.accepts_numpy(check_writes=True)(f),
        lambda f: ac.returns_tensor(dtype="input")(ac.accepts_numpy(f)),
        lambda f: ac.accepts_numpy(transfers="error")(f),
    ],
    ids=["writeback", "check_writes", "dtype-input", "transfers"],
)
def test_plans_it_does_not_cover_keep_the_generic_call(decorate: Callable[[Any], Any]) -> None:
    """Options whose work the flat code does not do leave the plan on its generic call."""
    with flat_calls(on=True):
        assert decorate(first)._self_plan.default.flat is None


def test_tracebacks_show_the_generated_lines() -> None:
    """The generated source is in linecache, so a traceback through it reads like code."""
    with flat_calls(on=True):
        flat = _pair()(np.negative)
    try:
        flat(torch.ones(1), bogus=1)
    except TypeError as e:
        frames = traceback.extract_tb(e.__traceback__)
    generated = [f for f in frames if f.filename.startswith("<autoconvert flat call")]
    # The ufunc's leading form takes a call with keywords as the *args form does, in its frame.
    assert [linecache.getline(f.filename, 1) for f in generated] == ["def __call__(p0=missing, /, *args, **kwargs):\n"]
    assert generated[0].line and "wrapped(" in generated[0].line


class _Defaulted:
    def __call__(self, a: Any, b: Any = 2) -> Any:
        return np.multiply(a, b)


@pytest.mark.parametrize(
    ("function", "head"),
    [
        (np.negative, "p0=missing, /"),  # a ufunc: its nin, with or without a signature
        (np.add, "p0=missing, p1=missing, /"),
        (first_two, "p0=missing, p1=missing, /"),  # a callable object of positional parameters
        (operator.mul, "p0=missing, p1=missing, /"),  # a builtin with a text signature
        (_Defaulted(), "self"),  # a defaulted parameter: calls pass one count or another
        (np.linspace, "self"),
        (torch.neg, "self"),  # a builtin without a signature: the *args form
        (passthrough, "self"),
    ],
)
def test_callables_with_leading_positional_parameters_take_the_leading_form(function: Any, head: str) -> None:
    """Where the first parameters are known to be positional, CPython binds them; every other
    call goes to the ``*args`` form: both agree with the generic call on every call pattern."""
    flat, generic = both(_pair(), function)
    first_line = linecache.getline(type(flat).__call__.__code__.co_filename, 1)
    assert first_line.startswith(f"def __call__({head}, *args, **kwargs):"), first_line
    t, out = torch.arange(3.0), np.empty(3)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {}),
        ((t,), {}),
        ((t, t), {}),
        ((t, 2.0), {}),
        ((t, t, out), {}),
        ((t,), {"where": True}),
        ((), {"a": t}),
        (({"k": t},), {}),
        ((t, [t, 1]), {}),
        ((t, torch.ones(3, requires_grad=True)), {}),
    ]
    for args, kwargs in calls:
        got, expected = outcome(flat, *args, **kwargs), outcome(generic, *args, **kwargs)
        assert got[0] == expected[0], (args, kwargs, got, expected)
        assert same(got[1], expected[1]) if got[0] == "value" else got[1] == expected[1], (args, kwargs)


def test_the_bound_form_serves_methods() -> None:
    """A decorated method goes through wrapt's bound wrapper to the flat ``call`` form."""

    with flat_calls(on=True):

        class Model:
            @ac.returns_tensor
            @ac.accepts_numpy
            def negate(self, v: np.ndarray, *, scale: float = 1.0) -> np.ndarray:
                return -v * scale

    m = Model()
    assert Model.__dict__["negate"]._self_plan.default.call.__code__.co_filename.startswith("<autoconvert flat call")
    assert torch.equal(m.negate(torch.ones(2), scale=2.0), torch.full((2,), -2.0))


tensors = st.sampled_from(
    [
        lambda: torch.arange(6.0).reshape(2, 3),
        lambda: torch.arange(6.0).reshape(2, 3).t(),  # not contiguous
        lambda: torch.arange(6, dtype=torch.int32),
        lambda: torch.ones(3, dtype=torch.bfloat16),  # NumPy has no bfloat16: the generic call
        lambda: torch.ones(3, dtype=torch.float16),
        lambda: torch.ones(3, requires_grad=True),  # grad="warn": the generic call's warning
        lambda: torch.ones(2, dtype=torch.complex64).conj(),  # a conj bit
        lambda: torch.tensor(3.0),
        lambda: torch.ones(2).expand(3, 2),
        lambda: torch.eye(3).to_sparse(),
    ]
)
plain_values = st.sampled_from([1, 2.5, "s", None, True, np.float32(2.0), np.arange(3), b"x", (1, 2)])
values = st.one_of(
    tensors.map(lambda make: make()),
    plain_values,
    st.lists(tensors.map(lambda make: make()), max_size=2),
    st.lists(st.one_of(tensors.map(lambda make: make()), plain_values), max_size=2).map(tuple),
    st.dictionaries(st.sampled_from("ab"), tensors.map(lambda make: make()), max_size=2),
)


def as_arrays(args: list[Any]) -> list[Any]:
    """The tensor side's arguments: each tensor as an array, where NumPy can hold it."""
    strided = [isinstance(a, torch.Tensor) and a.layout == torch.strided for a in args]
    return [
        a.detach().numpy() if shared and a.dtype != torch.bfloat16 and not a.is_conj() else a
        for a, shared in zip(args, strided, strict=True)
    ]


@given(
    args=st.lists(values, max_size=10),
    kwargs=st.dictionaries(st.sampled_from(["k", "m"]), values, max_size=2),
    body=st.sampled_from([passthrough, first, head, first_two, fresh_tuple, fresh_list, fresh_dict]),
    side=st.sampled_from(list(SIDES)),
)
def test_flat_and_generic_calls_agree(
    args: list[Any], kwargs: dict[str, Any], body: Callable[..., Any], side: str
) -> None:
    """Every call gives the same value, or the same error and message, on both paths."""
    decorate = SIDES[side]
    if side == "reverse":
        args = as_arrays(args)
    flat, generic = both(decorate, body)
    if not args and body is not passthrough:
        args = [torch.ones(2)]
    got, expected = outcome(flat, *args, **kwargs), outcome(generic, *args, **kwargs)
    assert got[0] == expected[0], (got, expected)
    assert same(got[1], expected[1]) if got[0] == "value" else got[1] == expected[1]
    if body is first:  # a container with nothing to convert is handed over, and back, as itself
        assert (got[1] is args[0]) == (expected[1] is args[0])


def rewrapped(*args: Any, **kwargs: Any) -> torch.Tensor:
    """The first argument's tensor, or a tensor of its array: the caller's memory, as a result."""
    value = args[0] if args else kwargs["v"]
    value = value["a"] if isinstance(value, dict) else value[0] if isinstance(value, (list, tuple)) else value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: "The given NumPy array is not writable"
        return torch.from_numpy(value) if isinstance(value, np.ndarray) else value


@pytest.mark.parametrize(("side", "copied"), [("pair", True), ("recorded", False)])
@pytest.mark.parametrize(
    "call",
    [lambda f, t: f(t), lambda f, t: f(v=t), lambda f, t: f({"a": t}), lambda f, t: f([t]), lambda f, t: f((t, 1))],
)
def test_a_tensor_result_of_the_callers_memory_is_copied_on_both_paths(
    side: str, copied: bool, call: Callable[[Any, torch.Tensor], Any]
) -> None:
    """A tensor made from a handed array is the caller's memory: it comes back as a copy, the
    output side finding the call's tensors bare, by keyword or in a container, on both paths.
    returns_tensor alone hands nothing over: a tensor argument returned is passed through."""
    for f in both(SIDES[side], rewrapped):
        t = torch.arange(3.0)
        out = call(f, t)
        assert torch.equal(out, t) and shares(out, t) is not copied


@pytest.mark.parametrize("side", ["pair", "recorded"])
@pytest.mark.parametrize("wrap", [lambda a: a, lambda a: (a, 1), lambda a: [a], lambda a: {"a": a}])
def test_copy_true_results_are_private_on_both_paths(side: str, wrap: Callable[[Any], Any]) -> None:
    """returns_tensor(copy=True): an array the function keeps (a cache) comes back as a tensor
    of its own memory, never sharing the cache; with or without tensor arguments."""
    cache = np.zeros(3)
    decorate = {"pair": ac.accepts_numpy, "recorded": lambda f: f}[side]
    flat, generic = both(lambda f: ac.returns_tensor(copy=True)(decorate(f)), lambda *args: wrap(cache))
    for f in (flat, generic):
        for call in [(torch.ones(2),), ()]:
            out = f(*call)
            tensor = out if isinstance(out, torch.Tensor) else next(iter(out.values() if type(out) is dict else out))
            tensor += 1
            assert cache.tolist() == [0.0, 0.0, 0.0], (f, call)


def test_returns_tensor_alone_places_results_as_the_generic_call_does() -> None:
    """returns_tensor alone has a flat call; it records CPU tensors of NumPy's dtypes, and
    sends the others (bfloat16 narrows the result back) and a device block to the generic vote."""

    def doubled(v: Any = None) -> np.ndarray:
        return np.ones(2) if v is None else torch.as_tensor(v[0] if type(v) is list else v).float().numpy() * 2

    flat, generic = both(ac.returns_tensor, doubled)
    assert flat._self_plan.default.flat is not None
    for call in [
        (torch.ones(2),),
        (torch.ones(2, dtype=torch.bfloat16),),
        (torch.tensor(1.0),),
        (),
        ([torch.ones(1)],),
    ]:
        assert same(flat(*call), generic(*call))
    assert flat(torch.ones(2, dtype=torch.bfloat16)).dtype == torch.bfloat16
    with torch.device("meta"):
        assert flat().device.type == generic().device.type == "meta"


HELD = np.arange(4.0)  # an array a function keeps between calls (a cache)


def held(*args: Any, **kwargs: Any) -> Any:
    return HELD


def held_in_containers(*args: Any, **kwargs: Any) -> Any:
    return (HELD, HELD[1:]) if args else {"h": HELD, "args": args}


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)


def memory_of(result: Any, call: list[Any]) -> list[tuple[bool, ...]]:
    """For each strided tensor or array in ``result``: which of ``call``'s leaves and HELD it shares memory with."""
    given = [*_leaves(call), HELD]
    strided = [v for v in _leaves(result) if isinstance(v, np.ndarray) or v.layout == torch.strided]
    return [
        tuple(shares(v, g) for g in given if isinstance(g, np.ndarray) or g.layout == torch.strided) for v in strided
    ]


copies = st.sampled_from([None, False, True])
stacks = st.one_of(
    st.builds(
        lambda into, out: lambda f: ac.returns_tensor(**out)(ac.accepts_numpy(**into)(f)),
        st.fixed_dictionaries({"copy": copies, "grad": st.sampled_from(["detach", "warn"]), "nested": st.booleans()}),
        st.fixed_dictionaries(
            {"copy": copies, "dtype": st.sampled_from([None, torch.float64]), "device": st.sampled_from([None, "cpu"])}
        ),
    ),
    st.builds(lambda out: lambda f: ac.returns_tensor(**out)(f), st.fixed_dictionaries({"copy": copies})),
    st.builds(
        lambda into, out: lambda f: ac.returns_numpy(**out)(ac.accepts_tensor(**into)(f)),
        st.fixed_dictionaries({"copy": copies, "dtype": st.sampled_from([None, torch.float64])}),
        st.fixed_dictionaries({"copy": copies}),
    ),
    st.builds(
        lambda out: lambda f: ac.returns_numpy(**out)(ac.accepts_numpy(grad="detach")(f)),
        st.fixed_dictionaries({"copy": copies}),
    ),
)


@given(
    args=st.lists(values, max_size=4),
    decorate=stacks,
    body=st.sampled_from([passthrough, first, head, fresh_tuple, held, held_in_containers]),
    arrays=st.booleans(),
)
def test_every_option_set_gives_one_value_and_one_sharing_on_both_paths(
    args: list[Any], decorate: Callable[[Any], Any], body: Callable[..., Any], arrays: bool
) -> None:
    """Across the sides' copy, grad, dtype and device options: the same value or error on both
    paths, and each result shares memory with the same arguments (and kept arrays), or with none."""
    if arrays:
        args = as_arrays(args)
    flat, generic = both(decorate, body)
    got, expected = outcome(flat, *args), outcome(generic, *args)
    assert got[0] == expected[0], (got, expected)
    if got[0] == "error":
        assert got[1] == expected[1]
        return
    assert same(got[1], expected[1])
    assert memory_of(got[1], args) == memory_of(expected[1], args)


def test_widen_float16_widens_on_both_paths() -> None:
    """widen_float16=True (torchify's SciPy default): the function sees float32 for float16
    tensors, bare or in a list, and float16 results come back; other dtypes go through as they are."""

    def dtypes(a: Any, parts: list[Any]) -> Any:
        return str(a.dtype), [str(p.dtype) for p in parts], a * 2

    flat, generic = both(_pair(widen_float16=True), dtypes)
    assert flat._self_plan.default.flat is not None
    for f in (flat, generic):
        seen, parts, doubled = f(torch.ones(2, dtype=torch.float16), [torch.ones(1, dtype=torch.float16)])
        assert (seen, parts, doubled.dtype) == ("float32", ["float32"], torch.float16)
        seen, parts, doubled = f(torch.ones(2), [torch.ones(1, dtype=torch.float64)])
        assert (seen, parts, doubled.dtype) == ("float32", ["float64"], torch.float32)


def test_a_view_result_is_a_private_copy_on_both_paths() -> None:
    """``v[:1]`` of a handed read-only array comes back as a tensor of its own memory."""
    flat, generic = both(_pair(), head)
    t = torch.arange(4.0)
    for f in (flat, generic):
        out = f(t)
        out += 10
        assert torch.equal(t, torch.arange(4.0)) and out.tolist() == [10.0]


def test_writing_into_a_handed_array_is_a_read_only_error_on_both_paths() -> None:
    """The flat call turns NumPy's refusal into the same ReadOnlyError as the generic one."""

    def scribble(a: np.ndarray) -> np.ndarray:
        a[0] = 1
        return a

    flat, generic = both(_pair(), scribble)
    got, expected = outcome(flat, torch.zeros(2)), outcome(generic, torch.zeros(2))
    assert got == expected and got[1][0] is ac.ReadOnlyError


@pytest.mark.parametrize("kind", ["positional", "keyword"])
def test_a_ufunc_writing_into_a_handed_out_array_is_a_read_only_error_on_both_paths(kind: str) -> None:
    """A ufunc raises from compiled code, so no frame of its own holds the destination: it is
    one of the arrays handed to it, and the caller's tensor is left as it was."""
    flat, generic = both(_pair(), np.negative)
    t = torch.arange(3.0)
    for f in (flat, generic):
        with pytest.raises(ac.ReadOnlyError, match="negative"):
            f(t, t) if kind == "positional" else f(t, out=t)
    assert torch.equal(t, torch.arange(3.0))
    # The ufunc's refusal of a read-only array the caller made keeps NumPy's own error.
    with pytest.raises(ValueError, match="read-only") as caught:
        generic(np.arange(3.0), out=np.broadcast_to(np.zeros(1), (3,)))
    assert type(caught.value) is ValueError


def test_copy_true_hands_private_writable_copies_on_both_paths() -> None:
    """accepts_numpy(copy=True): the function writes into copies of its own, bare or in a list
    or dict, in the tensor's layout; the caller's tensors never change, and a write into a
    read-only array the function made keeps NumPy's own error."""

    def centre(a: np.ndarray, parts: list[np.ndarray], named: dict[str, np.ndarray]) -> Any:
        for array in (a, *parts, *named.values()):
            np.subtract(array, 1, out=array)
        return a, a.flags.f_contiguous, parts[0], named["n"]

    def scribble_broadcast(a: np.ndarray) -> np.ndarray:
        view = np.broadcast_to(a, (2, *a.shape))
        view[0] = 1
        return a

    flat, generic = both(_pair(copy=True), centre)
    for f in (flat, generic):
        t, items = torch.zeros(2, 3).t(), [torch.zeros(2), torch.ones(1)]
        named = {"n": torch.zeros(1)}
        out = f(t, items, named)
        assert out[1] and out[0].stride() == t.stride() and out[0].sum() == -6
        assert t.sum() == 0 and items[0].sum() == 0 and named["n"].sum() == 0 and out[3].tolist() == [-1.0]
    assert flat._self_plan.default.flat is not None
    flat, generic = both(_pair(copy=True), scribble_broadcast)
    got, expected = outcome(flat, torch.zeros(2)), outcome(generic, torch.zeros(2))
    assert got == expected and got[1][0] is ValueError


def test_containers_nothing_converts_in_are_the_callers_own_objects() -> None:
    """A dict or list of plain values reaches the function, and comes back, as the same object."""
    flat, generic = both(_pair(), first)
    settings, labels = {"k": 3, "m": "x"}, [1, 2.5, None]
    for f in (flat, generic):
        assert f(settings, torch.ones(1)) is settings and f(labels, torch.ones(1)) is labels
    for f in both(_pair(), lambda t: labels) + both(_pair(), lambda t: (1, labels)):
        out = f(torch.ones(1))
        assert out is labels or out[1] is labels
    held = (1, "x")
    assert all(f(torch.ones(1)) is held for f in both(_pair(), lambda t: held))


def test_the_args_form_converts_keywords_and_positions_as_the_generic_call_does() -> None:
    """The ``*args`` form converts the keywords once, before the positional values: a value
    either way, a refusal, and one list passed by position and by keyword (one list inside,
    both appends the caller's) agree with the generic call."""

    def spread(*args: Any, **kwargs: Any) -> Any:
        if "items" in kwargs:
            assert args[0] is kwargs["items"]
            args[0].append(1)
            kwargs["items"].append(2)
            return None
        return [type(a).__name__ for a in args], {k: type(v).__name__ for k, v in kwargs.items()}

    flat, generic = both(_pair(), spread)
    assert flat._self_plan.default.flat is not None
    t = torch.ones(2)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((t, 2.0), {"k": t, "m": "x"}),
        ((), {"k": [t, 1]}),
        ((t,), {"k": torch.ones(2, requires_grad=True)}),  # the generic call warns and detaches
        ((t,), {"k": torch.ones(2, dtype=torch.bfloat16)}),  # a dtype NumPy lacks: the generic call's error
    ]
    for args, kwargs in calls:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ac.GradientWarning)
            assert same(outcome(flat, *args, **kwargs), outcome(generic, *args, **kwargs))
    for f in (flat, generic):
        items = [torch.zeros(1)]
        f(items, items=items)
        assert items[1:] == [1, 2] and torch.equal(items[0], torch.zeros(1))


def test_dicts_of_tensors_convert_on_both_paths_and_nested_false_leaves_them() -> None:
    """The flat walk of a dict argument and of a dict result, and nested=False's plain pass."""
    batch = {"a": torch.arange(3.0), "b": 2}
    flat, generic = both(_pair(), fresh_dict)
    for f in (flat, generic):
        out = f(batch)
        assert out["r0"] is not batch and type(out["r0"]) is dict  # the dict as the function saw it
    seen = both(_pair(), lambda d: {k: type(v).__name__ for k, v in d.items()})
    assert seen[0](batch) == seen[1](batch) == {"a": "ndarray", "b": "int"}
    kept = both(lambda f: ac.returns_tensor(ac.accepts_numpy(nested=False)(f)), lambda d: type(d["a"]).__name__)
    assert kept[0](batch) == kept[1](batch) == "Tensor"


@pytest.mark.parametrize(
    "body",
    [
        lambda a: a.T,  # a read-only Fortran-ordered view: copied, its order kept
        lambda a: a.astype(a.dtype.newbyteorder(">")),  # writable, big-endian: torch cannot share it
        lambda a: np.asarray(a.astype(a.dtype.newbyteorder(">"))).view()[:],  # a view of one
        lambda a: np.asarray(a, dtype=object)[:1],  # a dtype torch lacks: the generic error
    ],
    ids=["fortran-view", "big-endian", "big-endian-view", "object"],
)
def test_results_the_inlined_steps_pass_on_agree_with_the_generic_call(body: Callable[..., Any]) -> None:
    """Arrays the flat result steps do not take (or take and copy) come out as on the generic path."""
    flat, generic = both(_pair(), body)
    t = torch.arange(6.0).reshape(2, 3)
    got, expected = outcome(flat, t), outcome(generic, t)
    assert got[0] == expected[0]
    if got[0] == "value":
        assert same(got[1], expected[1]) and got[1].stride() == expected[1].stride()
    else:
        assert got[1] == expected[1]


def test_a_method_is_bound_to_the_flat_method_form_and_its_instance_is_never_converted() -> None:
    """Through an instance, a decorated function is a bound method of generated code; the
    instance (a dataclass holding a tensor, which a walk would convert) reaches it whole."""
    import dataclasses
    import inspect
    import types

    with flat_calls(on=True):

        @dataclasses.dataclass
        class Matcher:
            weight: torch.Tensor

            @ac.returns_tensor
            @ac.accepts_numpy(grad="error")
            def match(self, cost: np.ndarray, *, scale: float = 1.0) -> np.ndarray:
                assert type(self.weight) is torch.Tensor and type(cost) is np.ndarray
                return cost * scale + self.weight.numpy()

    m = Matcher(torch.ones(2))
    bound = m.match
    form = bound.__func__.func  # the generated method form, held by a partial that pickles by its wrapper
    assert type(bound) is types.MethodType and form.__code__.co_filename.startswith("<autoconvert flat")
    assert list(inspect.signature(bound).parameters) == ["cost", "scale"]
    assert bound.__name__ == "match" and bound.__self__ is m
    assert torch.equal(m.match(torch.ones(2), scale=2.0), torch.full((2,), 3.0))
    assert torch.equal(Matcher.match(m, torch.ones(2)), torch.full((2,), 2.0))  # class access: wrapt's binding
    with pytest.raises(ac.GradientError, match=r"Matcher\.match\(\): argument cost requires grad"):
        m.match(torch.ones(2, requires_grad=True))


_DEFAULT = torch.ones(2)  # a tensor default: the function gets it as it is, on both paths


def shaped(a: Any, b: Any = None, /, c: Any = 2.5, *, d: Any, e: Any = _DEFAULT) -> Any:
    """Every kind of parameter CPython binds by itself; returns what it got, defaults marked."""
    return (a, b, c, d, "default" if e is _DEFAULT else e)


def clashing(
    plain: Any,
    result: Any,
    Tensor: Any,  # noqa: N803 - the generated code's own names
    generic: Any = 1,
    *,
    split: Any = 2,
    c0: Any = 3,
    p1: Any = 4,
    handler: Any = 5,
) -> Any:
    """Parameters named as the generated code's locals, globals and canonical names."""
    if split is object:
        raise TypeError("asked to")
    return (plain, result, Tensor, generic, split, c0, p1, handler)


#: Selections of shaped()'s parameters: the exact forms convert the selected ones only.
SELECTING: dict[str, Callable[[Any], Any]] = {
    "only": _pair(grad="detach", only=["a", "d"]),
    "exclude": _pair(grad="detach", exclude=["c"]),
    "only none": _pair(grad="detach", only=[]),
    "only, numpy-out": lambda f: ac.returns_numpy(ac.accepts_numpy(grad="detach", only=["b", "e"])(f)),
    "reverse only": lambda f: ac.returns_numpy(ac.accepts_tensor(only=["a", "c"])(f)),
    "reverse exclude": lambda f: ac.returns_numpy(ac.accepts_tensor(exclude=["b", "d"])(f)),
}


def test_a_selection_converts_the_selected_parameters_on_the_exact_forms_only() -> None:
    """only=/exclude= name parameters: a plain function's exact forms convert those alone and
    pass the others on (a tensor kept as a tensor); a callable object's call goes to the generic call."""
    with flat_calls(on=True):

        class Matcher:
            @ac.returns_tensor
            @ac.accepts_numpy(only=["cost"])
            def match(self, cost: np.ndarray, boxes: torch.Tensor, scale: float = 1.0) -> np.ndarray:
                assert type(cost) is np.ndarray and type(boxes) is torch.Tensor
                return cost * scale

        class Scale:  # a callable object: a signature to name by, no code to copy
            def __call__(self, a: np.ndarray, b: Any) -> Any:
                assert type(a) is np.ndarray and type(b) is torch.Tensor
                return a * b.numpy()

        added = ac.returns_tensor(ac.accepts_numpy(only=["a"])(Scale()))
    code = type(Matcher.__dict__["match"]).__call__.__code__
    assert code.co_filename.startswith("<autoconvert flat call") and code.co_varnames[:4] == (
        "self",
        "cost",
        "boxes",
        "scale",
    )
    m = Matcher()
    assert torch.equal(m.match(torch.ones(2), torch.zeros(2), scale=3.0), torch.full((2,), 3.0))
    assert torch.equal(Matcher.match(m, torch.ones(2), boxes=torch.zeros(2)), torch.ones(2))
    assert m.match.__func__.func.__code__.co_filename.startswith("<autoconvert flat call")
    assert torch.equal(added(torch.ones(2), torch.full((2,), 2.0)), torch.full((2,), 2.0))
    with flat_calls(on=True):
        placed = ac.accepts_tensor(only=["x"])(lambda x, y: (type(x).__name__, type(y).__name__))
    assert placed(np.ones(1), np.ones(1)) == ("Tensor", "ndarray")
    assert type(placed).__call__.__code__.co_filename.startswith("<autoconvert flat call")
    delegating = type(added).__call__.__code__.co_filename
    assert linecache.getline(delegating, 3).strip() == "return generic(wrapped, instance, args, kwargs)"


def bound_as(function: Any) -> list[tuple[str, Any, Any]]:
    """How CPython binds calls of ``function`` itself (not what ``__wrapped__`` says)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function, follow_wrapped=False).parameters.values()]


@given(
    args=st.lists(values, max_size=4),
    kwargs=st.dictionaries(st.sampled_from(["b", "c", "d", "e", "zz"]), values, max_size=3),
    side=st.sampled_from([*SIDES, *SELECTING]),
)
def test_the_exact_form_binds_as_the_function_and_agrees_with_the_generic_call(
    args: list[Any], kwargs: dict[str, Any], side: str
) -> None:
    """A plain function's flat call takes its own signature: every call binds, or fails with
    the function's own message, and gives what the generic call gives."""
    decorate = SIDES.get(side) or SELECTING[side]
    flat, generic = both(decorate, shaped)
    assert bound_as(type(flat).__call__) == bound_as(shaped)
    got, expected = outcome(flat, *args, **kwargs), outcome(generic, *args, **kwargs)
    assert got[0] == expected[0], (got, expected)
    assert same(got[1], expected[1]) if got[0] == "value" else got[1] == expected[1]
    if got[0] == "error" and got[1][0] is TypeError and "argument" in got[1][1]:
        assert got == outcome(shaped, *args, **kwargs)  # a bad call: the function's own message


def test_parameters_named_as_the_generated_code_s_own_names_are_the_callers() -> None:
    flat, generic = both(_pair(), clashing)
    call = (torch.ones(1), torch.zeros(1), [torch.ones(2)], torch.full((1,), 3.0))
    for f in (flat, generic):
        out = f(*call, split=torch.ones(3), p1=5, handler=torch.ones(2))
        kinds = ["Tensor", "Tensor", "list", "Tensor", "Tensor", "int", "int", "Tensor"]
        assert [type(v).__name__ for v in out] == kinds
        assert [v.tolist() if isinstance(v, torch.Tensor) else v for v in out[:2]] == [[1.0], [0.0]]
    assert same(flat(*call[:2], 1), generic(*call[:2], 1))  # a plain value: the flat path's own call
    # A debugger in the generated frame sees the arguments under their own names.
    with pytest.raises(TypeError) as raised:
        flat("given", 1, 2, split=object)
    frame = next(
        tb.tb_frame for tb in _frames(raised.value.__traceback__) if tb.tb_frame.f_code is type(flat).__call__.__code__
    )
    assert frame.f_locals["plain"] == "given" and frame.f_locals["split"] is object


def _frames(tb: Any) -> Iterator[Any]:
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_defaults_reach_the_function_as_they_are_on_every_path() -> None:
    """A default is never converted (the generic call never sees it); an argument the flat call
    hands to the generic call (a list) does not turn the defaults into arguments."""
    for f in both(_pair(), shaped):
        assert f(torch.ones(1), d=1)[1:] == (None, 2.5, 1, "default")
        assert f([torch.ones(1)], d=1)[1:] == (None, 2.5, 1, "default")
        assert type(f(torch.ones(1), d=1, e=_DEFAULT + 1)[4]) is torch.Tensor


def test_the_method_form_binds_keywords_and_positions_as_the_method() -> None:
    with flat_calls(on=True):

        class Scaler:
            factor = 2.0

            @ac.returns_tensor
            @ac.accepts_numpy
            def scale(self, v: np.ndarray, /, shift: float = 0.0, *, flip: bool = False) -> np.ndarray:
                return (-v if flip else v) * self.factor + shift

    s = Scaler()
    assert bound_as(s.scale.__func__) == bound_as(Scaler.scale.__wrapped__)
    assert s.scale(torch.ones(2), 1.0).tolist() == [3.0, 3.0]
    assert s.scale(torch.ones(2), shift=1.0, flip=True).tolist() == [-1.0, -1.0]
    with pytest.raises(TypeError, match=r"Scaler\.scale\(\) got some positional-only arguments passed as keyword"):
        s.scale(v=torch.ones(2))


def test_grad_detach_plans_detach_in_the_flat_call_and_the_others_leave_it_to_the_generic_one() -> None:
    """A tensor that requires grad is detached inline under grad="detach"; "warn" and "error"
    have something to say, which the generic call says."""
    with flat_calls(on=True):
        detaching, warning = _pair(grad="detach")(np.negative), _pair()(np.negative)

    def source(f: Any) -> str:
        return "".join(linecache.getlines(type(f).__call__.__code__.co_filename))

    assert ".detach()" in source(detaching) and ".detach()" not in source(warning)
    g = torch.ones(2, requires_grad=True)
    out = detaching(g)
    assert out.tolist() == [-1.0, -1.0] and not out.requires_grad and g.grad is None
    with pytest.warns(ac.GradientWarning):
        warning(g)


def test_a_type_seen_as_a_plain_value_then_registered_as_a_container_is_walked() -> None:
    """The flat call tells plain values by a set of the types its side keeps as they are; a
    registration empties it with the dispatch table, so the next call walks the new container."""

    class Box:
        def __init__(self, item: Any) -> None:
            self.item = item

    seen: list[Any] = []

    @ac.accepts_numpy
    def open_box(box: Box) -> None:
        seen.append(box.item)

    open_box(Box(torch.ones(2)))
    assert isinstance(seen[-1], torch.Tensor)  # a leaf: passed as it is
    ac.register_container(Box, lambda b: ((b.item,), None), lambda c, _: Box(c[0]))
    open_box(Box(torch.ones(2)))
    assert isinstance(seen[-1], np.ndarray) and not seen[-1].flags.writeable
