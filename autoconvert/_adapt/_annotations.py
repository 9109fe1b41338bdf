"""What a function's annotations ask for, read once for ``adapt``: each parameter's and the result's Want."""

from __future__ import annotations

import functools
import types
import typing
from typing import Any

from autoconvert._adapters._adapter import signature_of
from autoconvert._spec._emit import INSTANCE, Step
from autoconvert._spec._signature import Parameters, function_name

from ._wants import KEEP, UNKNOWN, Want, want_of


class Signature:
    """The Wants of a function's parameters and result, read from its annotations once."""

    def __init__(self, func: Any) -> None:
        self.function = function_name(func)
        inner = func.__func__ if isinstance(func, (classmethod, staticmethod)) else func
        hints = _hints(inner, self.function)
        signature = signature_of(inner)  # None: a builtin, no annotations to read
        parameters = () if signature is None else signature.parameters.values()
        self.asked: list[tuple[str, Want | None]] = []  # every parameter, as Parameters.shown spells it
        for p in parameters:
            want = want_of(hints[p.name]) if p.name in hints else None
            if want is not None and want.kind == KEEP:
                want = None
            if want is not None and len(want.leaf_kinds()) > 1:
                raise TypeError(
                    f"autoconvert.adapt() on {self.function}: parameter {p.name!r} is annotated "
                    f"{hints[p.name]!r}, which asks for arrays and tensors at once; split it into two "
                    "parameters, or annotate the whole of it as one kind"
                )
            star = "*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else ""
            self.asked.append((star + p.name, want))  # *args, **kwargs: what each value asks
        self.result = want_of(hints["return"], UNKNOWN) if "return" in hints else UNKNOWN

    def steps(self, params: Parameters) -> tuple[tuple[str, Step], ...] | None:
        """Each parameter's step for the spec: what its annotation asks (the instance: nothing)."""
        if not params.known:
            return None
        first = params.first_is_instance()
        return tuple(
            (name, INSTANCE if i == 0 and first else Step("asks", asks=want))
            for i, (name, want) in enumerate(self.asked)
        )


def _hints(func: Any, function: str) -> dict[str, Any]:
    """``func``'s annotations resolved (strings and ``from __future__ import annotations``
    too), or a TypeError naming the one that cannot be. A partial's are its function's, a
    callable object's its class's ``__call__``'s; a callable with none (a ufunc) asks nothing."""
    while isinstance(func, functools.partial):
        func = func.func
    if not hasattr(func, "__annotations__"):
        call = type(func).__call__
        return _hints(call, function) if isinstance(call, types.FunctionType) else {}
    try:
        return typing.get_type_hints(func)
    except Exception:
        pass
    namespace = getattr(func, "__globals__", {})
    for name, annotation in getattr(func, "__annotations__", {}).items():
        if not isinstance(annotation, str):
            continue
        try:
            eval(annotation, namespace)
        except Exception as e:
            where = "the return annotation" if name == "return" else f"parameter {name!r}"
            raise TypeError(
                f"autoconvert.adapt() on {function}: {where} is annotated {annotation!r}, which cannot be "
                f"resolved ({type(e).__name__}: {e}); import what it names at module level, where "
                "annotations are resolved, or annotate with the object itself"
            ) from None
    return typing.get_type_hints(func)  # fails for another reason: its own error says which
