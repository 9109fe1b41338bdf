"""Functions generated with another function's own signature, attrs-style.

A generated wrapper whose parameters are the wrapped function's lets CPython bind each
call's arguments, positions and keywords alike, and report a bad call in the function's own
words, at no cost of ours. The source is written once per signature *shape* (see
``Shape``) with parameters ``p0``, ``p1``... and defaults ``d0``, ``d1``...; each
function's copy of the code is then given the function's own parameter names (locals are
read by index, so renaming them changes nothing else), defaults and name.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import linecache
import types
from collections.abc import Callable
from types import CodeType
from typing import Any, NamedTuple

import numpy as np

from autoconvert._adapters._adapter import signature_of
from autoconvert._conversions._describe import GENERATED

_counter = itertools.count()


class Shape(NamedTuple):
    """What a generated source depends on in a signature: the parameters' kinds (the first
    ``positional`` take positions, the first ``positional_only`` of them only positions;
    the keyword-only ones are named, since a call passes them on by name), and which have
    defaults."""

    positional_only: int
    positional: int
    keyword_only: tuple[str, ...]
    defaulted: tuple[int, ...]

    @property
    def arity(self) -> int:
        return self.positional + len(self.keyword_only)

    def parameters(self) -> str:
        """The ``def``'s parameter list: ``p0, p1=d1, /, p2, *, p3=d3``."""
        params = []
        for k in range(self.arity):
            if k == self.positional:
                params.append("*")
            params.append(f"p{k}=d{k}" if k in self.defaulted else f"p{k}")
            if k + 1 == self.positional_only:
                params.append("/")
        return ", ".join(params)

    def passed(self, names: list[str]) -> str:
        """``names`` (one per parameter) passed on as the parameters take them: ``c0, c1, k=c2``."""
        return ", ".join(
            n if k < self.positional else f"{self.keyword_only[k - self.positional]}={n}" for k, n in enumerate(names)
        )

    def handed(self, names: list[str], first: int) -> str:
        """``names`` (one per parameter) as the call's arguments were handed, after the first
        ``first`` (a method's instance, which is none): ``(c1, c2, ), {'k': c3}``."""
        args = "".join(f"{n}, " for n in names[first : self.positional])
        keywords = zip(self.keyword_only, names[self.positional :], strict=True)
        return f"({args}), {{{', '.join(f'{key!r}: {n}' for key, n in keywords)}}}"


def shape_of(function: Any) -> Shape | None:
    """``function``'s signature shape; None for anything but a plain function without
    ``*args``/``**kwargs`` (builtins, ufuncs and callable objects have no code to copy)."""
    if type(function) is not types.FunctionType:
        return None
    code = function.__code__
    defaults = function.__defaults__ or ()
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or len(defaults) > code.co_argcount:
        return None
    positional = code.co_argcount
    names = code.co_varnames[: positional + code.co_kwonlyargcount]
    given = function.__kwdefaults__ or {}
    keyword = (k for k in range(positional, len(names)) if names[k] in given)
    defaulted = (*range(positional - len(defaults), positional), *keyword)
    return Shape(code.co_posonlyargcount, positional, names[positional:], defaulted)


def leading_of(function: Any) -> int:
    """How many arguments a call of ``function`` passes positionally as a rule, for a callable
    ``shape_of`` cannot spell: a ufunc's inputs (``out=`` goes by keyword), or all of its
    parameters where each is positional and has no default (builtins, callable objects);
    0 otherwise. A call that passes another count goes on as the ``*args`` form in the same
    frame, so the count decides speed, never a result."""
    if isinstance(function, np.ufunc):  # NumPy 1.x ufuncs have no signature
        return int(function.nin)
    signature = signature_of(function)
    if signature is None:  # builtins without a text signature
        return 0
    parameters = signature.parameters.values()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if all(p.kind in positional and p.default is p.empty for p in parameters):
        return len(parameters)
    return 0


def defaults_of(function: types.FunctionType, shape: Shape) -> dict[int, Any]:
    """Each defaulted parameter's default, by position, as read now."""
    positional, keyword = function.__defaults__ or (), function.__kwdefaults__ or {}
    first, names = shape.positional - len(positional), function.__code__.co_varnames
    return {k: positional[k - first] if k < shape.positional else keyword[names[k]] for k in shape.defaulted}


def compiled(source: str, label: str) -> CodeType:
    """``source`` compiled under a readable filename that tracebacks show the lines of (it is
    put in ``linecache``, as attrs does for its methods)."""
    filename = f"{GENERATED}{label} {next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


#: Generated code per (what the writer writes, shape): a few per program.
_CODES_BY_SHAPE: dict[tuple[tuple[Any, ...], Shape], CodeType] = {}


def with_signature(
    function: types.FunctionType,
    shape: Shape,
    key: tuple[Any, ...],
    write: Callable[[], str],
    namespace: dict[str, Any],
) -> Callable[..., Any]:
    """``write()``'s ``__call__`` (its source for ``shape``, the same for every ``key``: a label
    for tracebacks, then what else it depends on), run in ``namespace`` and given ``function``'s
    parameter names, defaults and name; ``namespace`` gets ``d0``, ``d1``..., the defaults, for
    the source to compare with."""
    code = _CODES_BY_SHAPE.get((key, shape)) or _CODES_BY_SHAPE.setdefault((key, shape), compiled(write(), key[0]))
    namespace.update({f"d{k}": value for k, value in defaults_of(function, shape).items()})
    exec(code, namespace)  # our own source
    made: types.FunctionType = namespace["__call__"]
    names = function.__code__.co_varnames[: shape.arity]
    made.__code__ = _renamed(made.__code__, names)
    if made.__kwdefaults__:
        made.__kwdefaults__ = {names[int(k[1:])]: value for k, value in made.__kwdefaults__.items()}
    return functools.update_wrapper(made, function)  # its name in the messages for a bad call


def _renamed(code: CodeType, names: tuple[str, ...]) -> CodeType:
    """``code`` with its parameters called ``names``; a local of ours that one of them would
    shadow gets a name of its own."""
    # co_varnames alone is renamed: a local that nested code closes over (a cell) would keep
    # its old name in the cell's slot, and CPython crashes on the mismatch.
    assert not code.co_cellvars, f"generated code closes over its locals {code.co_cellvars}"
    taken = set(names)
    ours = []
    for name in code.co_varnames[len(names) :]:
        unique = name
        while unique in taken:
            unique += "_"
        taken.add(unique)
        ours.append(unique)
    return code.replace(co_varnames=(*names, *ours))


def splitter(function: types.FunctionType, shape: Shape, *, first: int = 0) -> Callable[..., Any]:
    """``split(*values)``: the values of ``function``'s parameters from ``first`` on, as the
    ``(args, kwargs)`` a caller could have passed: a value that is its default left out, as
    if omitted (for a generic path that converts what it is given, and for messages)."""
    names, defaults = function.__code__.co_varnames, defaults_of(function, shape)

    def split(*values: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        by_name = False
        for k, value in enumerate(values, first):
            if k >= shape.positional_only and k in defaults and value is defaults[k]:
                by_name = True  # omitted: later positional parameters go by name
            elif k < shape.positional and not by_name:
                args.append(value)
            else:
                kwargs[names[k]] = value
        return tuple(args), kwargs

    return split
