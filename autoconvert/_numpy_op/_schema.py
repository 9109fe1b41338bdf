"""The ``torch.library`` schema of a NumPy function, read once from its signature.

A registered op needs a type for every parameter and a count of results. NumPy code
annotates arrays as ``np.ndarray`` or ``npt.NDArray[...]``: those become ``Tensor``; numbers,
bools and strings keep their types; ``X | None`` becomes ``X?`` and ``list[X]`` ``X[]``. An
unannotated parameter takes its default's type, and is a ``Tensor`` without a default, the
common case in NumPy code, or the type of the value a ``functools.partial`` binds to it. A
ufunc takes ``nin`` tensors and gives ``nout``.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from autoconvert._adapt._wants import unaliased

_EMPTY = inspect.Parameter.empty
_SCALARS = {float: "float", int: "int", bool: "bool", str: "str"}
_ARRAY_TYPES = (np.ndarray, torch.Tensor)
_LISTABLE = {"Tensor", "float", "int", "bool"}
_SCHEMA_NUMBERS = tuple(_SCALARS.values())  # a tuple: dynamo folds membership in it on every torch


class SchemaError(Exception):
    """Why a signature has no schema, in ``autoconvert._errors.message``'s four parts."""

    def __init__(self, where: str, problem: str, found: str, fix: str) -> None:
        super().__init__(problem)
        self.parts = (where, problem, found, fix)


_TYPES_FIX = (
    "annotate arrays as np.ndarray, numbers as float or int, flags as bool, choices as str "
    "(X | None and list[X] work too)"
)


class Parameter(NamedTuple):
    name: str
    type: str  # the schema type: 'Tensor', 'float?', 'Tensor[]', ...
    keyword_only: bool
    default: Any


class Schema(NamedTuple):
    parameters: tuple[Parameter, ...]
    results: int

    def arguments(self, mutated: bool = False) -> str:
        """The parameter list, ``Tensor(a!) x`` for each tensor when the op writes into them."""
        parts: list[str] = []
        for i, p in enumerate(self.parameters):
            if p.keyword_only and "*" not in parts:
                parts.append("*")
            type_ = p.type.replace("Tensor", f"Tensor(a{i}!)", 1) if mutated and "Tensor" in p.type else p.type
            parts.append(f"{type_} {p.name}" + ("" if p.default is _EMPTY else f"={_literal(p.default)}"))
        return ", ".join(parts)

    def returns(self) -> str:
        return "Tensor" if self.results == 1 else "(" + ", ".join(["Tensor"] * self.results) + ")"

    def misfit(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:  # pragma: no cover - dynamo's
        """The name of the first argument of another kind than the schema holds for it, which an
        eager call takes and a registered op refuses (it runs under dynamo alone): a number given
        to an unannotated parameter (a tensor in the schema), a tensor given to a number (typed by
        its default or the value a partial binds)."""
        # Indexed, not zipped: torch 2.4's dynamo refuses a zip of unequal lengths, strict or not.
        given = [(self.parameters[i], args[i]) for i in range(min(len(args), len(self.parameters)))]
        given += [(p, kwargs[p.name]) for p in self.parameters if p.name in kwargs]
        for p, value in given:
            left_out = value is None and p.type == "Tensor?"
            if p.type in ("Tensor", "Tensor?") and not left_out and not isinstance(value, torch.Tensor):
                return p.name
            if p.type.removesuffix("?") in _SCHEMA_NUMBERS and isinstance(value, torch.Tensor):
                return p.name
        return None

    def place(self, name: str) -> int | str:
        """Where parameter ``name`` arrives in a kernel: its position, or its keyword."""
        for i, p in enumerate(self.parameters):
            if p.name == name:
                return name if p.keyword_only else i
        names = ", ".join(p.name for p in self.parameters)
        raise SchemaError("fake=", "names no parameter", repr(name), f"name one of: {names}")


def schema_of(fn: Callable[..., Any], declared_results: int | None, bound: Mapping[str, str] | None = None) -> Schema:
    """The schema of ``fn``; ``declared_results`` counts results when its return is unannotated;
    ``bound``: the types of the values a partial of ``fn`` binds (see ``bound_types``).
    A function wrapping a ufunc (``functools.wraps``, as SciPy's array API mode wraps each of
    ``scipy.special``'s) has the ufunc's: its signature's keywords are the ufunc's options."""
    inner = inspect.unwrap(fn)
    if isinstance(inner, np.ufunc):
        fn = inner
    if isinstance(fn, np.ufunc):
        return Schema(tuple(Parameter(n, "Tensor", False, _EMPTY) for n in ufunc_inputs(fn)), fn.nout)
    try:
        signature = inspect.signature(fn, eval_str=True)
    except Exception as e:  # an object computing its signature may raise anything (see signature_of)
        raise SchemaError(
            "the signature", "cannot be read", str(e), "wrap it in a def with annotated parameters"
        ) from None
    parameters = []
    for p in signature.parameters.values():
        where = f"parameter {p.name!r}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise SchemaError(where, "has no fixed type", str(p), "wrap the function in a def with named parameters")
        type_ = _parameter_type(p.annotation, p.default)
        if bound and p.name in bound and p.annotation is _EMPTY and p.default is _EMPTY:
            type_ = bound[p.name]
        if type_ is None:
            raise SchemaError(where, "has a type no schema holds", _shown(p.annotation, p.default), _TYPES_FIX)
        if p.default is not _EMPTY and p.default is not None and "Tensor" in type_:
            raise SchemaError(where, "defaults to an array, which no schema holds", repr(p.default), "default to None")
        parameters.append(Parameter(p.name, type_, p.kind == p.KEYWORD_ONLY, p.default))
    results = _result_count(signature.return_annotation)
    if results is None and signature.return_annotation is not _EMPTY:
        raise SchemaError(
            "the return annotation",
            "is not an array or a tuple of arrays",
            repr(signature.return_annotation),
            "annotate -> np.ndarray, or -> tuple[np.ndarray, np.ndarray] for two results",
        )
    return Schema(tuple(parameters), results or declared_results or 1)


def bound_types(partial: Any) -> dict[str, str]:
    """The schema types of the numbers, flags and strings a ``functools.partial`` binds, by
    the parameter they go to: a bound value types an unannotated parameter as a default does."""
    try:
        bound = inspect.signature(partial.func).bind_partial(*partial.args, **partial.keywords).arguments
    except Exception:  # no signature (an object computing one may raise anything), or one the partial does not fit
        return {}
    return {name: _SCALARS[type(value)] for name, value in bound.items() if type(value) in _SCALARS}


def ufunc_inputs(fn: np.ufunc) -> list[str]:
    """A ufunc's input names: from its signature (NumPy 2), else NumPy's own naming, which
    its docs use (``x``, or ``x1, x2``): NumPy 1.26's ufuncs have no signature."""
    try:
        return list(inspect.signature(fn).parameters)[: fn.nin]
    except ValueError:
        return ["x"] if fn.nin == 1 else [f"x{i}" for i in range(1, fn.nin + 1)]


def _parameter_type(annotation: Any, default: Any) -> str | None:
    if annotation is not _EMPTY:
        type_ = _type(annotation)
    else:
        type_ = "Tensor" if default is _EMPTY or default is None else _SCALARS.get(type(default))
    # ``xs: list[np.ndarray] = None`` is common, and means optional.
    return type_ + "?" if type_ and default is None and not type_.endswith("?") else type_


def _type(annotation: Any) -> str | None:
    annotation = unaliased(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    origin = typing.get_origin(annotation)
    if annotation in _ARRAY_TYPES or origin in _ARRAY_TYPES:
        return "Tensor"
    arguments = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in arguments if a is not type(None)]
        inner = _type(rest[0]) if len(rest) == 1 < len(arguments) else None
        return None if inner is None or inner.endswith("?") else inner + "?"
    is_tuple_list = origin is tuple and len(arguments) == 2 and arguments[1] is Ellipsis
    if origin in (list, Sequence) or is_tuple_list:
        inner = _type(arguments[0]) if arguments else None
        return inner + "[]" if inner in _LISTABLE else None
    return None


def _result_count(annotation: Any) -> int | None:
    if annotation is _EMPTY:
        return None
    if _type(annotation) == "Tensor":
        return 1
    arguments = typing.get_args(annotation)
    if typing.get_origin(annotation) is tuple and arguments and all(_type(a) == "Tensor" for a in arguments):
        return len(arguments)
    return None


def _literal(value: Any) -> str:
    """A default as schema text: strings in double quotes, like Python otherwise."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _shown(annotation: Any, default: Any) -> str:
    return repr(annotation) if annotation is not _EMPTY else f"{type(default).__name__}, from its default {default!r}"
