"""Catalogued builders: a class (``CubicSpline``) or a factory (``make_interp_spline``) whose
objects' calls keep the gradient of the tensors the objects were built from.

A spline is a function of its samples as much as of the points it is read at, but SciPy's
object holds arrays: torchify keeps the tensors it was built from beside it and runs each
catalogued method as an op of those tensors and the call's own, whose rule (``calls``) reads
how the object was built (a ``Construction``) to differentiate in both.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any

from ._rule import Rule


class Construction:
    """How an object was built: its builder's arguments by name, defaults filled in, tensors
    as arrays, and the methods (``derivative``, with their arguments) that derived it from the
    builder's object. Handed to a call's rule as the argument ``built`` (an object, which
    conversion passes as it is)."""

    __slots__ = ("arguments", "derived")

    def __init__(self, arguments: Mapping[str, Any], derived: tuple[tuple[str, Any, Any], ...] = ()) -> None:
        self.arguments, self.derived = arguments, derived

    def derive(self, made: Any) -> Any:
        """``made``, an object built as this one's builder was, derived as this one was."""
        for name, args, kwargs in self.derived:
            made = getattr(made, name)(*args, **kwargs)
        return made

    def __repr__(self) -> str:
        return f"Construction({', '.join(self.arguments)})"


@dataclasses.dataclass(frozen=True, eq=False)
class Built:
    """The builder ``name``: the parameters whose tensors its objects keep (``keeps``), and for
    each catalogued method, its evaluator and the evaluator's rule. An evaluator takes the
    object, its ``Construction``, the kept arguments and the method's own, and calls the method;
    reading anything else off the object, but ``unrelated``, says the kept ones' gradient dropped."""

    name: str
    builder: Any
    keeps: tuple[str, ...]
    calls: Mapping[str, tuple[Callable[..., Any], Rule]]
    #: What reads off its objects that the kept arguments do not change (the knots, the axis).
    unrelated: frozenset[str] = frozenset()
    #: Its objects' methods whose results are as linear in the kept arguments (``derivative``):
    #: those keep them too, their calls taking the same rules.
    derived: frozenset[str] = frozenset()
    #: The kept arguments a construction gives no gradient (a periodic spline's samples), by
    #: name, each with why (``problem``, ``found`` in a message's words), from its arguments;
    #: None: every construction gives each its gradient.
    unkept: Callable[[Mapping[str, Any]], Mapping[str, tuple[str, str]]] | None = None

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        return inspect.signature(self.builder)

    def bound(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
        """The builder's call, bound to its parameters, defaults filled in."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound

    def describe(self) -> str:
        """What explain says of an object it built."""
        rules = "; ".join(rule.describe() for _, rule in self.calls.values())
        return f"built by {self.name} from {', '.join(self.keeps)}, kept for its calls: {rules}"

    @staticmethod
    def evaluator(fn: Callable[..., Any], qualname: str, module: str) -> Callable[..., Any]:
        """``fn``, named as the method it calls (``CubicSpline.__call__``), as messages name it."""
        made = types.FunctionType(fn.__code__, fn.__globals__, qualname.rpartition(".")[2], fn.__defaults__)
        made.__qualname__, made.__module__, made.__doc__ = qualname, module, fn.__doc__
        return made
