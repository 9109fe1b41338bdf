"""The table of options: what derives from it, and what mirrors it for type checkers."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import pathlib
import typing
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac
from autoconvert._decorators import _plain
from autoconvert._options import _checks, _options
from autoconvert._options._options import (
    DEFAULTS,
    INPUT_SIDE,
    OPTIONS,
    OUTPUT_SIDE,
    TABLES,
    TAKERS,
    BatchSettings,
    OpSettings,
    Policy,
    TorchifySettings,
    policy_of,
)

TYPED_DICTS = {
    "adapt": _options.AdaptOptions,
    "torchify": _options.TorchifyOptions,
    "numpy_op": _options.OpOptions,
    "batched": _options.BatchedOptions,
    "to_tensor": _plain.TensorOptions,
    "to_numpy": _plain.NumpyOptions,
}
_ROWS = {o.name: o for o in OPTIONS}


def _keywords(fn: Any, option: str = "copy") -> dict[str, tuple[Any, Any]]:
    """Each keyword-only option of ``fn``'s typing overload that takes ``option``: (type, default)."""
    overload = next(o for o in typing.get_overloads(fn) if option in inspect.signature(o).parameters)
    hints = typing.get_type_hints(overload)
    return {
        p.name: (hints[p.name], p.default)
        for p in inspect.signature(overload).parameters.values()
        if p.kind is p.KEYWORD_ONLY
    }


@pytest.mark.parametrize("decorator", ["accepts_numpy", "returns_tensor", "accepts_tensor", "returns_numpy"])
def test_each_decorator_s_typing_overload_says_what_the_table_says(decorator: str) -> None:
    """Editors read the overloads, written out for static checkers: the same names, types
    and defaults as the table, in its order."""
    table = {name: (_ROWS[name].accepts, default) for name, default in DEFAULTS[decorator].items()}
    assert list(_keywords(getattr(ac, decorator)).items()) == list(table.items())


@pytest.mark.parametrize("taker", sorted(TYPED_DICTS))
def test_each_typed_dict_of_options_says_what_the_table_says(taker: str) -> None:
    """``**options: Unpack[...]`` takes the taker's options with the types its signature shows
    (numpy_op's own options are its overloads' named keywords: see the next test)."""
    own = {f.name for f in dataclasses.fields(OpSettings)} if taker == "numpy_op" else set()
    assert typing.get_type_hints(TYPED_DICTS[taker]) == {
        name: _ROWS[name].accepts for name in DEFAULTS[taker] if name not in own
    }


def test_numpy_op_s_overloads_name_its_own_options_as_the_table_does() -> None:
    """``fake=`` decides the overload (an op with ``.op``, or a plain function), so numpy_op's
    own options are named keywords: with the table's types and defaults, ``fake`` required in
    some overloads and None in the others."""
    fakes = set()
    for overload in typing.get_overloads(ac.numpy_op):
        hints, parameters = typing.get_type_hints(overload), inspect.signature(overload).parameters
        for f in dataclasses.fields(OpSettings):
            if f.name == "fake":
                fakes.add(hints["fake"])
            else:
                assert (hints[f.name], parameters[f.name].default) == (_ROWS[f.name].accepts, f.default), f.name
    assert fakes == {type(None), _checks.Fake}
    assert _ROWS["fake"].accepts == _checks.Fake | None


def test_every_option_has_a_line_of_doc_and_a_taker() -> None:
    """The table is also the docs' table: each row says what the option does, in one line."""
    for o in OPTIONS:
        assert o.takers and set(o.takers) <= set(TAKERS), o.name
        assert o.doc and "\n" not in o.doc and len(o.doc) < 100, o.name
    assert [f.name for table in TABLES for f in dataclasses.fields(table)] == [o.name for o in OPTIONS]


@pytest.mark.parametrize("taker", ["numpy_op", "batched", "torchify", "accepts_numpy"])
def test_each_taker_s_signature_is_its_options_from_the_table_its_own_first(taker: str) -> None:
    """``help()`` and editors show every option the taker takes, with the table's defaults."""
    shown = {
        p.name: p.default for p in inspect.signature(getattr(ac, taker)).parameters.values() if p.kind is p.KEYWORD_ONLY
    }
    assert shown == DEFAULTS[taker]
    own = [f.name for f in dataclasses.fields({"numpy_op": OpSettings, "batched": BatchSettings}.get(taker, Policy))]
    assert list(shown)[: len(own)] == own or taker in ("torchify", "accepts_numpy")
    # batched's conversion options are its pair's, less those its batches and samples decide
    assert {"only", "exclude", "nested", "out_params"}.isdisjoint(DEFAULTS["batched"])
    assert set(DEFAULTS["batched"]) - set(BatchSettings.__dataclass_fields__) <= INPUT_SIDE | OUTPUT_SIDE


def test_torchify_s_defaults_are_the_table_s_and_then_the_library_s() -> None:
    """``torchify`` hands ``out=``/``output=`` writable by the table's default for it, SciPy
    widens float16 by its adapter's, and the caller's options win over both."""
    import scipy.ndimage

    assert DEFAULTS["torchify"]["out_params"] == ("out", "output")
    assert DEFAULTS["accepts_numpy"]["out_params"] == ()
    assert ac.explain(ac.torchify(np)).explicit["accepts_numpy"] == {"out_params": ("out", "output")}
    assert ac.explain(ac.torchify(scipy.ndimage)).explicit["accepts_numpy"] == {
        "out_params": ("out", "output"),
        "widen_float16": True,
    }
    given = ac.explain(ac.torchify(scipy.ndimage, out_params=(), widen_float16=False)).explicit["accepts_numpy"]
    assert given == {"out_params": (), "widen_float16": False}


def test_a_policy_is_the_explicit_options_over_config_s_over_the_defaults() -> None:
    """A config block's options apply only where the side takes them; explicit ones win; a
    taker's own default stands where it differs (to_numpy detaches silently)."""
    configured = {"copy": True, "device": torch.device("cuda"), "grad": "detach"}
    policy = policy_of("accepts_numpy", configured, {"grad": "error"})
    assert policy == Policy(copy=True, grad="error")  # accepts_numpy takes no device=
    assert policy_of("returns_tensor", configured, {}).device == torch.device("cuda")
    assert policy_of("to_numpy", {}, {}).grad == "detach"
    assert policy_of("accepts_numpy", {}, {}).grad == "warn"
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.copy = False  # type: ignore[misc]


def test_a_plan_resolves_its_policies_once_and_per_config_block() -> None:
    """Outside any block the plan's own policy object serves; a block's options give another."""

    @ac.accepts_numpy(grad="error")
    def f(a: np.ndarray) -> np.ndarray:
        return a

    plan = f._self_plan  # type: ignore[attr-defined]
    assert plan.resolved("accepts_numpy", {}) is plan.policies["accepts_numpy"]
    assert plan.resolved("accepts_numpy", {"copy": True, "grad": "warn"}) == Policy(copy=True, grad="error")


def test_config_takes_every_option_but_those_naming_one_function_s_parameters() -> None:
    """``only``, ``exclude`` and ``out_params`` name parameters of one function."""
    with pytest.raises(TypeError) as e:
        ac.config(only="x")
    assert str(e.value) == (
        "autoconvert.config() got unknown option(s) only; it takes callbacks, check_writes, copy, device, dtype, "
        "grad, nested, sparse, sparse_layout, transfers, widen_float16, writeback"
    )


def test_to_tensor_refuses_transfers_which_it_never_applied() -> None:
    """A copy to the device is what ``to_tensor`` is asked for; it had no transfer guard to set."""
    with pytest.raises(TypeError) as e:
        ac.to_tensor(np.zeros(1), transfers="error")  # type: ignore[call-overload]
    assert str(e.value) == (
        "autoconvert.to_tensor() got unknown option(s) transfers; it takes copy, device, dtype, nested, sparse_layout"
    )


@pytest.mark.parametrize(
    ("taker", "options", "error", "message"),
    [
        ("accepts_numpy", {"copy": 1}, TypeError, "copy= takes None (copy only when needed), True (always) or False "
         "(never), got 1"),
        ("returns_numpy", {"nested": "yes"}, TypeError, "nested= takes True or False, got 'yes'"),
        ("adapt", {"grad": "skip"}, ValueError, "grad= takes 'warn', 'detach' or 'error', got 'skip'"),
        ("config", {"transfers": "never"}, ValueError, "transfers= takes 'allow', 'log', 'warn' or 'error', got 'never'"),
        ("to_numpy", {"sparse": "coo"}, ValueError, "sparse= takes 'array' (scipy.sparse arrays) or 'matrix' "
         "(spmatrix), got 'coo'"),
        ("accepts_tensor", {"only": 3}, TypeError, "only= takes a parameter name or a list, tuple or set of them, got 3"),
        ("torchify", {"dtype": torch.bool}, TypeError, "dtype= casts results within their kind, and bool results "
         "are never cast; got torch.bool"),
    ],
)  # fmt: skip
def test_a_bad_value_names_the_taker_and_the_option(
    taker: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as e:
        _options.validate(options, taker)
    assert str(e.value) == f"autoconvert.{taker}(): {message}"


def test_the_api_page_lists_every_option_from_the_table() -> None:
    """The docs' table is written from this one at each build, where the page marks it."""
    root = pathlib.Path(__file__).parent.parent
    spec = importlib.util.spec_from_file_location("docs_hooks", root / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert hooks.OPTIONS_MARK in (root / "docs" / "api.md").read_text()
    rows = hooks.options_table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [o.name for o in OPTIONS]
    assert rows[4] == (
        "| `grad` | <code>Literal['warn', 'detach', 'error']</code> | `'warn'` (`'detach'` for `to_numpy`) | "
        "`accepts_numpy`, `adapt`, `torchify`, `numpy_op`, `batched`, `to_numpy`, `config` | a tensor that requires grad: "
        "'warn' once per function, 'detach' silently, or 'error' |"
    )


def out_into(x: Any, out: Any = None) -> Any:
    return x


def keywords_into(x: Any, **options: Any) -> Any:
    return x


def test_out_params_name_parameters_of_the_function_when_decorating() -> None:
    """As only=/exclude= are checked: a name the signature lacks is refused; a function taking
    **kwargs, or one without a signature, may take any name."""
    with pytest.raises(TypeError) as info:
        ac.accepts_numpy(out_params=["out", "output"])(out_into)
    assert str(info.value) == "accepts_numpy() on out_into(): no parameter named output; it has out, x"
    assert ac.accepts_numpy(out_params="out")(out_into)(torch.ones(2)).tolist() == [1.0, 1.0]
    ac.accepts_numpy(out_params="output")(keywords_into)
    with pytest.raises(TypeError, match=r"^autoconvert.accepts_numpy\(\): only= takes a parameter name or a list"):
        ac.accepts_numpy(only={"x": 1})(out_into)  # a dict would have passed as its keys


def test_a_numpy_op_rule_that_is_not_a_function_is_refused_when_made() -> None:
    with pytest.raises(TypeError) as info:
        ac.numpy_op(np.sin, backward=5)  # type: ignore[call-overload]
    assert str(info.value) == (
        "autoconvert.numpy_op(): backward= takes None or a function backward(grad, *args, output=output, "
        "**kwargs), got 5 (int)"
    )
    with pytest.raises(TypeError, match=r"jvp= takes None or a function jvp\(tangent, "):
        ac.numpy_op(np.sin, jvp=3)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("options", "read_only", "hands_read_only", "retries_with_copies"),
    [
        ({}, True, True, True),
        ({"copy": False}, True, True, False),
        ({"copy": True}, False, False, False),
        ({"writeback": True}, False, True, False),
        ({"out_params": "out"}, True, True, True),
    ],
)
def test_read_only_ness_is_decided_once_and_held_by_the_spec(
    options: dict[str, Any], read_only: bool, hands_read_only: bool, retries_with_copies: bool
) -> None:
    """The function gets read-only arrays unless it is meant to write (copy=True, writeback=True);
    writeback's expanded tensors are refused a write too; a torchified function refused on entry
    is called again with copies only under copy=None. The Runner and the generator read the spec."""
    f = ac.returns_tensor(ac.accepts_numpy(**options)(out_into))
    spec = f._self_plan.default.spec  # type: ignore[attr-defined]
    assert (spec.read_only, spec.hands_read_only) == (read_only, hands_read_only)
    assert spec.inputs.read_only == read_only
    assert policy_of("accepts_numpy", {}, options).retries_with_copies() == retries_with_copies
    if spec.generic_because is None:
        assert f._self_plan.default.flat.kind.read_only == read_only  # type: ignore[attr-defined]
    assert ac.accepts_tensor(out_into)._self_plan.default.spec.read_only is False  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "after"),
    [
        ({"check_writes": True}, "restore writes"),
        ({"check_writes": True, "copy": False}, "restore writes"),
        ({"check_writes": True, "copy": True}, None),
        ({"check_writes": True, "writeback": True}, "write back"),
    ],
)
def test_check_writes_compares_only_what_the_function_got_read_only(options: dict[str, Any], after: str | None) -> None:
    """check_writes=True snapshots the caller's tensors only where the function gets read-only
    arrays: copy=True's private copies and writeback=True's arrays are the function's to write.
    The spec holds the step, and it is frozen and made by keyword alone."""
    spec = ac.accepts_numpy(**options)(out_into)._self_plan.default.spec  # type: ignore[attr-defined]
    assert spec.after == after
    assert spec.inputs.snapshots == (after == "restore writes")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.after = None
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        type(spec)(*(getattr(spec, field.name) for field in dataclasses.fields(spec)))


@given(data=st.data())
def test_any_set_of_a_taker_s_defaults_validates_to_itself_and_resolves_to_its_records(data: st.DataObject) -> None:
    """Every taker accepts its own defaults, any subset of them in any order, as given: the
    checks are the table's, and the resolved records (a side's Policy, numpy_op's and
    batched's and torchify's own settings) hold exactly the defaults for what is left out."""
    taker = data.draw(st.sampled_from(TAKERS))
    names = data.draw(st.lists(st.sampled_from(sorted(DEFAULTS[taker])), unique=True))
    given_options = {name: DEFAULTS[taker][name] for name in names}
    checked = _options.validate(given_options, taker)
    assert checked == given_options
    own = {"numpy_op": OpSettings, "batched": BatchSettings, "torchify": TorchifySettings}.get(taker)
    if own is not None:
        settings, sides = _options.settings_of(own, checked)
        assert settings == own()
        assert set(sides) | {f.name for f in dataclasses.fields(own)} >= set(checked)
        checked = sides
    if taker != "batched":
        assert policy_of(taker, {}, checked) == policy_of(taker, {}, {})
