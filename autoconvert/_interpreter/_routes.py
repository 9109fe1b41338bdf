"""A call's routes, and the one description every product gives of itself.

The converting wrapper (the wrapper around a plan: its flat or generic call) takes every
call. A torchified module's function may have another route first: its library's own
torch path (built from the library's adapter, _torchify/_native), or CuPy on a CUDA tensor's
memory (built from CuPy's mirror of the module, _torchify/_cupy). Each such route says why it
declines a call (``declines``), runs one (``call``) and describes itself (``describe``);
``Routed`` tries its routes in turn and hands the rest to the converting wrapper. What a
product is made of, its ``Description``, is asked of the product itself
(``described``): explain, stats, pickling and torchify read that, never private attributes.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import TYPE_CHECKING, Any, NamedTuple

from autoconvert._errors import ConversionError, message
from autoconvert._escape import compiling
from autoconvert._observe._observe import count_route
from autoconvert._options._config import active
from autoconvert._spec._signature import function_name

if TYPE_CHECKING:  # _plan builds its trace route from this module
    from ._plan import Plan


class Declined(NamedTuple):
    """Why a route does not take a call: ``where`` (``argument x``), ``problem`` (also the
    ``stats()`` reason), what was ``found`` and the ``fix``, for a strict route's error;
    ``counted``: whether ``stats()`` counts it (not for calls the route is never for)."""

    where: str
    problem: str
    found: str
    fix: str
    counted: bool = True


class DeclinedError(Exception):
    """Raised by a route's ``call`` that declines the call after all (the library refused
    it): the converting wrapper takes it, unless the route is strict."""

    def __init__(self, declined: Declined) -> None:
        super().__init__(declined.problem)
        self.declined = declined


class RouteWords(NamedTuple):
    """A route in explain's words. ``taken``: which calls it runs and how; ``others``: what
    happens to the rest, with ``{path}`` and ``{why}`` standing for the converting wrapper's
    call path and its reason; ``not_taken``: why
    it never runs (then it says nothing else); ``alone``: (made_by, arguments, result) for
    a function it runs with no converting wrapper behind it."""

    path: str
    taken: str
    others: str
    keeps_source: bool = False
    not_taken: str | None = None
    alone: tuple[str, str, str] | None = None


class Route:
    """One way a call can run besides the converting wrapper: ``name`` is how ``stats()``
    counts it, ``label`` how the product's repr names it; a ``strict`` route raises where it
    declines a call, never converting."""

    name: str
    label: str
    strict = False

    def declines(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Declined | None:
        """Why this call cannot take the route (None: it takes it)."""
        raise NotImplementedError

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The call on this route, or ``DeclinedError`` where the library declines it (a strict
        route raises the library's error)."""
        raise NotImplementedError

    def describe(self) -> RouteWords:
        """The route in explain's words."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Description:
    """What autoconvert made of a function, as the product tells it (``described``).

    Attributes:
        converting: the converting wrapper (None: no call converts, a torchified module,
            class or object, or a function written for CuPy).
        plan: the converting wrapper's plan.
        generated: the function the converting wrapper's flat call runs for its source (None: none).
        routes: the routes tried before the converting wrapper, in order.
        made_by: what the product is, before the converting wrapper's decorators (``"batched() over "``).
        notes: how the product was made, in words.
        options: a torchified module's, class's or object's options (which have no call of
            their own).
        compiled: how its calls go under torch.compile, in words (see _trace; None: as eagerly).
        torch_op: whether it is a torch op (numpy_op's): it takes and gives tensors, gradients
            its own, so torchify returns it as it is.
    """

    converting: Any = None
    plan: Plan | None = None
    generated: Any = None
    routes: tuple[Route, ...] = ()
    made_by: str = ""
    notes: tuple[str, ...] = ()
    options: dict[str, Any] | None = None
    compiled: str | None = None
    torch_op: bool = False


def described(obj: Any) -> Description | None:
    """What autoconvert made ``obj``, asked of ``obj`` itself: its class's
    ``__autoconvert_description__``, or for a bound method its function's, given the instance
    (None: autoconvert did not make it)."""
    if type(obj) is types.MethodType:
        describe, owner = getattr(obj.__func__, "__autoconvert_description__", None), obj.__self__
    else:
        describe, owner = getattr(type(obj), "__autoconvert_description__", None), obj
    return None if describe is None else describe(owner)


def plan_of(obj: Any) -> Plan:
    """The plan of ``obj``'s converting wrapper (``obj`` made by autoconvert, converting)."""
    description = described(obj)
    assert description is not None, obj
    assert description.plan is not None, obj
    return description.plan


class Routed:
    """``fn`` with ``routes`` tried before ``converting``, its converting wrapper (the torchified
    pair): each call goes to the first route that takes it, else to ``converting``, or raises where
    that route is strict (``converting`` None: only the routes run it). It pickles as the attribute
    ``name`` of ``view``, the torchified module it was read from."""

    def __init__(
        self, fn: Any, routes: tuple[Route, ...], converting: Any, *, view: Any = None, name: str = ""
    ) -> None:
        self.__wrapped__ = fn
        self.routes, self.converting = routes, converting
        self.view, self.name = view, name
        self.function = function_name(fn)
        self.counted = self.function.removesuffix("()")  # its name in stats() blocks
        functools.update_wrapper(self, fn, updated=())

    def __getattr__(self, name: str) -> Any:  # a ufunc's methods (tnp.add.outer) convert as the ufunc does
        converting = self.__dict__.get("converting")
        if name.startswith("__") or converting is None:
            raise AttributeError(name)
        return getattr(converting, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for route in self.routes:
            declined = route.declines(args, kwargs)
            if declined is None:
                try:
                    result = route.call(args, kwargs)
                except DeclinedError as e:  # a strict route raises the library's own error instead
                    declined = e.declined
                else:
                    # Counted in stats() blocks; dynamo must not trace the ContextVar read (see _escape).
                    if not compiling() and active() is not None:
                        count_route(self.counted, route.name)
                    return result
            if route.strict:
                raise ConversionError(message(self.function, *declined[:4]))
            if declined.counted and not compiling() and active() is not None:
                count_route(self.counted, route.name, declined.problem)
        return self.converting(*args, **kwargs)

    def __autoconvert_description__(self) -> Description:
        converting = Description() if self.converting is None else described(self.converting)
        assert converting is not None  # a wrapper describes itself
        return dataclasses.replace(converting, routes=self.routes)

    def __repr__(self) -> str:
        paths = " and ".join(route.label for route in self.routes)
        return f"<autoconvert {paths} of {self.__wrapped__!r}>"

    def __reduce__(self) -> tuple[Any, ...]:
        if self.view is None:
            raise TypeError(f"{self!r} pickles only when read from a torchified module")
        return getattr, (self.view, self.name)
