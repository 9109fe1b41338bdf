"""What a decorator reads from a function once: its name, parameters, selection, and argument paths.

Paths (``batch['masks'][2]``) are found only when a message needs one: the slow walk here
never runs on a call that succeeds.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import types
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np
import torch

from autoconvert._adapters._adapter import signature_of
from autoconvert._conversions import _devices
from autoconvert._conversions._to_torch import new_tuple
from autoconvert._conversions._tree import Mapper
from autoconvert._errors import DEFERRED_FIX, ConversionError, LeafError, MappingKey, SequenceKey, keystr, message
from autoconvert._observe._observe import PathOf
from autoconvert._options._options import AFTER_CALL, Policy, reject_given


def record(t: Any, seen: list[Any]) -> Any:
    seen.append(t)
    return t


def function_name(func: Any) -> str:
    """``module.Class.method()``-style name for messages, for anything callable; a
    ``functools.partial`` (a bound method of one too) by the function it calls."""
    inner = getattr(func, "__func__", func)  # classmethod / staticmethod objects
    while isinstance(inner, functools.partial):
        inner = inner.func
        inner = getattr(inner, "__func__", inner)
    name = getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None) or type(inner).__name__
    return f"{name}()"


#: A signature line leading a builtin's docstring, as OpenCV and pybind11 write them:
#: ``rectangle(img, pt1, pt2, color[, thickness[, lineType]]) -> img``, ``1. f(x: ndarray) -> ...``.
_DOC_SIGNATURE = re.compile(r"^\s*(?:\d+\.\s*)?(?P<name>\w+)\((?P<params>[^)]*)\)")


def documented_positional(func: Any) -> list[str | None]:
    """The positional names the signature lines leading ``func``'s docstring give, for
    messages: position ``i`` is named where every overload names it alike, else None."""
    doc, name = getattr(func, "__doc__", None), getattr(func, "__name__", None)
    if not isinstance(doc, str) or not name:
        return []
    overloads = []
    for line in doc.strip().splitlines():
        found = _DOC_SIGNATURE.match(line)
        if found is None or found["name"] != name:
            break  # the signatures lead the docstring
        parts = [p.split("=")[0].split(":")[0].strip() for p in re.split(r"[,\[\]]", found["params"])]
        overloads.append([p for p in parts if p])
    if not overloads or not all(p.isidentifier() for names in overloads for p in names):
        return []
    longest = max(len(names) for names in overloads)
    at = [{names[i] if i < len(names) else None for names in overloads} for i in range(longest)]
    return [names.pop() if len(names) == 1 else None for names in at]


_SCALAR_ANNOTATIONS = ("bool", "int", "float", "complex", "str")


def _scalar_words(p: inspect.Parameter) -> str | None:
    """``a float (its default: 4.0)`` for a parameter annotated or defaulting to a plain
    Python scalar; None for any other (a None default says nothing of what is passed)."""
    annotated = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", None)
    default = type(p.default).__name__ if type(p.default) in (bool, int, float, complex, str) else None
    kind = annotated if annotated in _SCALAR_ANNOTATIONS else default
    if kind is None:
        return None
    return f"{'an' if kind == 'int' else 'a'} {kind} ({f'its default: {p.default!r}' if default else 'annotated'})"


class Parameters:
    """Parameter names by position, from the signature when there is one.

    wrapt hands ``self``/``cls`` over as ``instance``, never inside ``args``; so when a
    call is bound, positions start at the second parameter of a plain function or
    classmethod (``offset`` 1).
    """

    def __init__(self, func: Any, *, held: bool = False) -> None:
        """``held``: ``func`` is a callable an object holds, called as it is (never bound to
        the instance a call names: see _plan's ``stands_in``)."""
        self.binds_first = not held and (inspect.isfunction(func) or isinstance(func, classmethod))
        #: A ufunc's outputs may follow its inputs positionally: ``np.add(x, y, out)``.
        self.outputs_at = range(func.nin, func.nin + func.nout) if isinstance(func, np.ufunc) else range(0)
        # classmethod/staticmethod objects have no signature of their own before 3.13.
        signature = signature_of(func.__func__ if isinstance(func, (classmethod, staticmethod)) else func)
        #: The signature read (None: none can be read).
        self.signature = signature
        #: The signature the callable binds its calls by itself (see ``refuses``); None where the
        #: one read is another's (``functools.wraps``' ``__wrapped__``), which a call may not meet.
        self.binding = signature if getattr(func, "__wrapped__", None) is None else None
        if signature is None:
            self.known = False
            self.positional: list[str] = []
            self.documented = documented_positional(func)
            self.varargs: str | None = None
            self.keywords: set[str] = set()
            self.varkw: str | None = None
            self.shown: tuple[str, ...] = ()
            self.scalars: dict[str, str] = {}
            return
        self.known = True
        self.documented = []
        kinds = inspect.Parameter
        params = list(signature.parameters.values())
        self.positional = [p.name for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
        self.varargs = next((p.name for p in params if p.kind == kinds.VAR_POSITIONAL), None)
        self.keywords = {p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)}
        self.varkw = next((p.name for p in params if p.kind == kinds.VAR_KEYWORD), None)
        #: Every parameter in the signature's order, as it spells them: ``x``, ``*rest``, ``**options``.
        self.shown = tuple(
            f"*{p.name}" if p.kind == kinds.VAR_POSITIONAL else f"**{p.name}" if p.kind == kinds.VAR_KEYWORD else p.name
            for p in params
        )
        #: Parameters a plain Python value is meant for, by annotation or default: what
        #: explain says passes as it is (``sigma`` -> ``a float (its default: 4.0)``).
        self.scalars = {p.name: words for p in params if (words := _scalar_words(p)) is not None}

    def offset(self, instance: object) -> int:
        return 1 if self.binds_first and instance is not None and self.positional else 0

    def refuses(self, args: tuple[Any, ...], kwargs: dict[str, Any], instance: object) -> bool:
        """Whether the callable's own signature refuses a call's arguments (``jv(v=t, z=z)``: a
        ufunc takes its inputs by position only), so that its own TypeError ends the call; False
        where no such signature is read."""
        if self.binding is None:
            return False
        try:
            self.binding.bind(*((instance, *args) if self.offset(instance) else args), **kwargs)
        except TypeError:
            return True
        return False

    def bound_names(self) -> set[str]:
        """Names a caller can pass; ``self``/``cls`` of a method are not among them."""
        names = set(self.positional[1:] if self.first_is_instance() else self.positional)
        names |= self.keywords - ({self.positional[0]} if self.first_is_instance() else set())
        return names | {n for n in (self.varargs, self.varkw) if n}

    def first_is_instance(self) -> bool:
        return self.binds_first and bool(self.positional) and self.positional[0] in ("self", "cls")

    def positional_name(self, i: int, offset: int) -> str:
        """The path root of positional argument ``i``: its name, ``rest[0]`` inside ``*rest``,
        or ``args[2]`` when there is no signature."""
        names = self.positional[offset:]
        if i < len(names):
            return names[i]
        if self.varargs:
            return keystr(self.varargs, [SequenceKey(i - len(names))])
        documented = self.documented[offset:]
        return (documented[i] if i < len(documented) else None) or keystr("args", [SequenceKey(i)])

    def keyword_name(self, key: str) -> str:
        return key if key in self.keywords or not self.varkw else keystr(self.varkw, [MappingKey(key)])

    def selects(self, names: frozenset[str], positional_index: int | None, key: str | None, offset: int) -> bool:
        """Whether the argument at a position, or under a keyword, belongs to ``names``."""
        if key is not None:
            return (key if key in self.keywords else self.varkw) in names
        assert positional_index is not None
        params = self.positional[offset:]
        return (params[positional_index] if positional_index < len(params) else self.varargs) in names


def unfitting(
    name: str, signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any], e: TypeError
) -> TypeError:
    """The TypeError of a call whose arguments ``signature`` refuses (``e``, inspect's words,
    which name no function), naming the function, what was given and how it takes them."""
    only = [n for n, p in signature.parameters.items() if p.kind is inspect.Parameter.POSITIONAL_ONLY]
    plural = "" if len(args) == 1 else "s"
    return TypeError(
        message(
            name,
            "its arguments",
            f"do not fit its signature {signature}: {e}",
            f"{len(args)} positional argument{plural} and keywords {', '.join(kwargs)}",
            "pass the arguments as its signature takes them"
            + (f" ({', '.join(only)} by position only)" if only else ""),
        )
    )


def refuse_unknown(params: Parameters, names: frozenset[str], where: str) -> None:
    """Refuse option values that name no parameter a caller can pass."""
    unknown = sorted(names - params.bound_names())
    if unknown:
        offer = ", ".join(sorted(params.bound_names())) or "no parameters"
        raise TypeError(f"{where}: no parameter named {', '.join(unknown)}; it has {offer}")


class Selection:
    """Which arguments ``only=``/``exclude=`` let through, checked against the signature."""

    def __init__(self, params: Parameters, only: frozenset[str] | None, exclude: frozenset[str] | None, where: str):
        if only is not None and exclude is not None:
            raise TypeError(f"{where}: pass only= or exclude=, not both")
        names = only if only is not None else exclude
        assert names is not None
        if not params.known:
            raise TypeError(f"{where}: only=/exclude= need a signature to check names against, and it has none")
        refuse_unknown(params, names, where)
        self.params = params
        self.names = names
        self.keep = only is not None  # only=: the names are converted; exclude=: all but them

    def wants(self, positional_index: int | None, key: str | None, offset: int) -> bool:
        return self.params.selects(self.names, positional_index, key, offset) == self.keep


class Given(NamedTuple):
    """A call's arguments as the caller gave them, for argument paths in messages and the output side."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    instance: object


def given_args(args: tuple[Any, ...], kwargs: dict[str, Any], instance: object) -> Given:
    """A ``Given``, made as cheaply as a tuple: the generic call makes one per call."""
    return new_tuple(Given, (args, kwargs, instance))


TENSORS = Mapper({torch.Tensor: record}, nested=True)
ARRAYS = Mapper({np.ndarray: record}, nested=True)
_VALUES = Mapper({torch.Tensor: record, np.ndarray: record, np.generic: record}, nested=True)


def tensor_paths(
    params: Parameters, args: tuple[Any, ...], kwargs: dict[str, Any], instance: object, walker: Mapper = TENSORS
) -> list[tuple[str, Any]]:
    """``(path, leaf)`` for every tensor (or other leaf of ``walker``) among a call's
    arguments: the slow walk messages use."""
    offset = params.offset(instance)
    placed = []
    for i, a in enumerate(args):
        placed += [(keystr(params.positional_name(i, offset), p), t) for p, t in walker.leaves_with_paths(a)]
    for k, v in kwargs.items():
        placed += [(keystr(params.keyword_name(k), p), t) for p, t in walker.leaves_with_paths(v)]
    return placed


def path_finder(params: Parameters) -> PathOf:
    """``path_of(value, given, result)``: where ``value`` was among a call's arguments
    (``given``, as ``(args, kwargs, instance)``) or results, by identity; None if not found."""

    def path_of(value: Any, given: tuple[Any, ...], result: list[Any]) -> str | None:
        if given:
            args, kwargs, instance = given
            for path, leaf in tensor_paths(params, args, kwargs, instance, _VALUES):
                if leaf is value:
                    return f"argument {path}"
        for returned in result:
            for keys, leaf in _VALUES.leaves_with_paths(returned):
                if leaf is value:
                    return keystr("result", keys)
        return None

    return path_of


def device_mismatch(
    function: str, params: Parameters, args: tuple[Any, ...], kwargs: dict[str, Any], instance: object
) -> Exception:
    placed = tensor_paths(params, args, kwargs, instance, _PLACED)
    # A device argument (device=, see _callbacks.device_leaf) votes as its tensors do.
    voters = [
        (path, v) if type(v) is torch.device else (path, v.device)
        for path, v in placed
        if type(v) is torch.device or not (v.is_cpu and v.ndim == 0)
    ]
    return _devices.mismatch(function, voters)


_PLACED = Mapper({torch.Tensor: record, torch.device: record}, nested=True)


GENERATOR_FUNCTION = "a generator function"


def deferred_kind(func: Any) -> str | None:
    """Which kind of function ``func`` is if its body runs after the call returns (generators
    and coroutines), or None: no decorator can convert around such a body."""
    inner = func.__func__ if isinstance(func, (classmethod, staticmethod)) else func
    for test, kind in (
        (inspect.isasyncgenfunction, "an async generator function"),
        (inspect.iscoroutinefunction, "a coroutine function (async def)"),
        (inspect.isgeneratorfunction, GENERATOR_FUNCTION),
    ):
        if test(inner):
            return kind
    return None


@contextlib.contextmanager
def _generator_based() -> Iterator[None]:
    yield  # pragma: no cover - never entered: only its context manager's type is wanted


@contextlib.asynccontextmanager
async def _async_generator_based() -> AsyncIterator[None]:
    yield  # pragma: no cover - never entered


def _deferred_types() -> dict[type, str]:
    """The result types whose body runs after the call that made them returns, each with the
    words messages use; contextlib's two types taken from objects, not its private names."""
    return {
        types.GeneratorType: "a generator",
        types.CoroutineType: "a coroutine",
        types.AsyncGeneratorType: "an async generator",
        type(_generator_based()): "a context manager made by @contextlib.contextmanager",
        type(_async_generator_based()): "an async context manager made by @contextlib.asynccontextmanager",
    }


#: The steps after the call that a generator's body would run after (see AFTER_CALL).
_AFTER_STEPS = AFTER_CALL["generator functions"]
#: Results whose body has not run when the call returns: see ``deferred_result``.
DEFERRED_RESULTS = _deferred_types()


def deferred_result(value: Any, ctx: Any = None) -> Any:
    """The output sides' leaf for ``DEFERRED_RESULTS``, and the after step's check: such a
    result still holds the arrays it was handed, writes after writeback or check_writes ran,
    and returns or yields values no decorator sees. Refused, as decorating a generator or
    coroutine function is."""
    kind = DEFERRED_RESULTS[type(value)]
    if isinstance(value, (types.GeneratorType, types.CoroutineType)):
        value.close()  # it never runs: no "coroutine was never awaited" warning when it is dropped
    raise LeafError(
        ConversionError,
        f"is {kind}, whose body runs after the call returns, so autoconvert cannot convert around it (the "
        f"arrays handed to it would stay in use, {_AFTER_STEPS.named()} would run before it, and what it "
        "yields or returns would not be converted)",
        f"{type(value).__module__}.{type(value).__qualname__}",
        DEFERRED_FIX,
    )


def refuse_deferred_function(func: Any, sides: Iterable[str], policies: Iterable[Policy]) -> None:
    """Arguments would be converted, written back and results converted around an object
    that has not run yet: refuse when decorating. A generator function's values are converted
    as it yields them: refused only where a side's ``policies`` run a step after the call
    (see AFTER_CALL)."""
    kind = deferred_kind(func)
    sides_named = " and ".join(f"{side}()" for side in sides)
    if kind == GENERATOR_FUNCTION:
        for policy in policies:
            reject_given("generator functions", policy, sides=sides_named, function=function_name(func))
    if kind is not None and kind != GENERATOR_FUNCTION:
        raise TypeError(
            f"autoconvert.{sides_named} on {function_name(func)}: it is {kind}, whose body runs "
            "after the call returns, so arguments and results cannot be converted around it; "
            "decorate the plain function holding the NumPy code and call that from it"
        )
