"""The wrapper autoconvert puts around a decorated callable, on wrapt.

One class per wrapped callable, whose ``__call__`` is the plan's flat call where it has one;
binding through instances and classes (wrapt's, or a bound method of the flat call's method
form), pickling by reference or by recipe, copying, and the markers that keep torch.compile
from tracing the NumPy body.
"""

from __future__ import annotations

import copy
import functools
import types
from collections.abc import Callable
from typing import Any, cast

import torch
import wrapt

from autoconvert._escape import opaque, proxy_class
from autoconvert._failures._traceback import boundary
from autoconvert._pickling import by_recipe, resolve

from ._plan import Plan
from ._routes import Description, described
from ._trace import SAYS_UNTRACED


class _BoundWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[type-arg, misc, unused-ignore]  # wrapt 1.x: untyped
    """A decorated method bound to an instance or class; pickles like a bound method."""

    _torchdynamo_disable = True  # see Wrapper

    __class__ = proxy_class  # a staticmethod's binding is its function (see _Wrapper)

    def __autoconvert_description__(self) -> Description | None:
        return described(self._self_parent)

    def __reduce_ex__(self, protocol: object) -> tuple[Any, ...]:
        return getattr, (self._owner(), self.__wrapped__.__name__)

    def _owner(self) -> Any:
        """The instance it is bound to, else the class it was read from: wrapt 2 keeps that;
        wrapt 1.x does not, so a classmethod's own ``__self__``, or the class its qualname names."""
        if self._self_instance is not None:
            return self._self_instance
        owner = getattr(self, "_self_owner", None)
        if owner is None:
            owner = getattr(self.__wrapped__, "__self__", None)
        if owner is None:
            function = self.__wrapped__
            owner = resolve(function.__module__, function.__qualname__.rpartition(".")[0])
        return owner

    # copy copies a bound method as its instance and the name: deepcopy binds to the
    # instance's copy; through the class, it is itself (classes copy as themselves). wrapt's
    # proxy refuses both, so a deepcopy of an object holding one (an nn.Module for an EMA, a
    # dataset's transforms) would fail.
    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        if self._self_instance is None:
            return self
        return getattr(copy.deepcopy(self._self_instance, memo), self.__wrapped__.__name__)


class Wrapper(wrapt.FunctionWrapper):  # type: ignore[type-arg, misc, unused-ignore]  # wrapt 1.x: untyped
    """wrapt's FunctionWrapper with the plan attached, for fusion and pickling.

    The wrapt wrapper is the plan's runner, ``call(wrapped, instance, args, kwargs)``;
    wrapt calls it for bound methods. Unbound calls take the faster ``__call__`` that
    ``wrap`` gives each wrapper.
    """

    __bound_function_wrapper__ = _BoundWrapper
    # wrapt's proxy forwards __class__, so dynamo takes the wrapper for the plain function
    # it wraps and inlines the NumPy body through it. A class attribute is found by
    # inspect.getattr_static before any forwarding: dynamo then skips the call (one graph
    # break); the Runner's call closure keeps the frames it then runs out of dynamo's reach.
    _torchdynamo_disable = True

    # Only to dynamo: cloudpickle would otherwise reduce the wrapper as the function it wraps.
    __class__ = proxy_class

    # Set by wrap. Not an annotation: any annotation in the class body puts ``__annotations__``
    # in the class dict, shadowing wrapt's forwarding of the wrapped function's (get_type_hints).
    _self_plan = cast("Plan", None)
    #: A plain function's method form: the flat call's, or the generic call's (see ``wrap``).
    _self_method = cast("Callable[..., Any] | None", None)

    # Identity, not the wrapped function's hash and equality (wrapt's default): dynamo looks
    # callables up in a dict of torch functions, so a wrapper equal to torch.sort would be
    # put in the graph as torch.sort itself, arrays and all.
    def __hash__(self) -> int:
        return object.__hash__(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __autoconvert_description__(self) -> Description:
        """The converting wrapper: this wrapper, its plan, and the function its flat call runs
        (whose generated source explain shows)."""
        plan = self._self_plan
        generated = None
        if plan.default.flat is not None:
            call = type(self).__dict__["__call__"]
            if (
                plan.stands_in
            ):  # a torchified object's method: its method form, or its call form for a callable it holds
                call = plan.default.call if plan.held else self._self_method
            generated = getattr(call, "__func__", call)
        compiled = None if plan.trace is None else plan.trace.words()
        return Description(converting=self, plan=plan, generated=generated, notes=plan.notes, compiled=compiled)

    def __repr__(self) -> str:
        sides = ", ".join(
            f"{side}({', '.join(f'{k}={shown(v)}' for k, v in options.items())})"
            for side, options in self._self_plan.sides.items()
        )
        return f"<autoconvert {sides} of {self.__wrapped__!r}>"

    def __reduce_ex__(self, protocol: object) -> Any:
        # By reference where the wrapped function's module holds this very wrapper (module-level
        # functions: multiprocessing spawn, DataLoader workers); otherwise rebuilt from the
        # wrapped callable and the options. A ufunc has no __module__ (NumPy 2.5), so the
        # wrapper, which forwards it, has none either: then only the recipe can serve.
        wrapped = self.__wrapped__
        recipe = (self._self_plan.sides, self._self_plan.remade())
        return by_recipe(self, wrapped, (getattr(wrapped, "__module__", None),), _rebuild, recipe)

    # copy treats functions as atomic, and so a wrapper of one: a deepcopy of an object holding
    # decorated functions (an nn.Module for an EMA, a dataset's transforms) keeps them. A
    # wrapped callable that copies into another object (an instance with state) gets a
    # wrapper of its own around the copy. wrapt's proxy refuses both.
    def __copy__(self) -> Any:
        return self._around(copy.copy(self.__wrapped__))

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self._around(copy.deepcopy(self.__wrapped__, memo))

    def _around(self, wrapped: Any) -> Any:
        if wrapped is self.__wrapped__:
            return self
        return wrap(wrapped, self._self_plan.remade()(wrapped, self._self_plan.sides))


def shown(option: Any) -> str:
    """An option's value as a repr shows it: a device as the string it was given as."""
    return repr(str(option)) if isinstance(option, torch.device) else repr(option)


def wrap(wrapped: Any, plan: Plan) -> Wrapper:
    """A wrapper for ``wrapped``, of a class made for it alone.

    The class's ``__call__`` serves unbound calls (functions, ufuncs, builtins) without
    wrapt's C ``__call__``, which re-derives the instance and checks ``enabled`` per call:
    the plan's flat call in its ``__call__`` form where it has one, otherwise a closure
    holding the Runner's call and the instance as constants. A plain function with a flat
    call also gets a ``__get__``: through an instance it is a bound method of the flat
    call's method form, which costs a third of wrapt's bound wrapper; the other bindings
    (class access, classmethods, staticmethods) stay wrapt's, whose bound calls use the
    Runner's call (see _BoundWrapper).
    """
    call = plan.default.call
    instance = None
    constants: dict[str, Any] = {}
    flat = plan.default.flat
    method: Any = None
    form: _MethodForm | None = None  # a plain function's bound methods' __func__
    if flat is not None:  # the flat call's own __call__ form: one frame fewer
        direct, constants = flat.bind(wrapped)
        members: dict[str, Any] = {"__call__": direct, "__module__": __name__}
        if type(wrapped) is types.FunctionType:
            method = flat.method(wrapped, plan.guard)
            members["_self_method"] = staticmethod(method)
            members["_self_form"] = form = _MethodForm(method)
            members["__get__"] = _binding(form)
    else:

        @boundary
        def __call__(self: Wrapper, *args: Any, **kwargs: Any) -> Any:  # noqa: N807 - the call hook
            return call(wrapped, instance, args, kwargs)

        members = {"__call__": __call__, "__module__": __name__}
        if type(wrapped) is types.FunctionType:
            # Made now, not by as_method on first use: torch 2.4's dynamo, tracing a torchified
            # proxy's first method lookup, loses a closure made there (it came back None).
            stands_in = plan.stands_in  # the function is called on the object the instance stands in for
            called = wrapped if plan.guard is None else plan.guard

            @boundary
            def method(instance: Any, *args: Any, **kwargs: Any) -> Any:
                # Read through torch's module, before any attribute of a stand-in (see _escape).
                if torch.compiler.is_dynamo_compiling():  # pragma: no cover - under dynamo
                    return opaque(method, instance, *args, **kwargs)
                bound = types.MethodType(called, instance.__wrapped__ if stands_in else instance)
                return call(bound, instance, args, kwargs)

            functools.update_wrapper(method, wrapped)  # named as the function, as the flat method form is

            members["_self_method"] = staticmethod(method)
    made = type("Wrapper", (Wrapper,), {**members, **plan.members(wrapped)})

    # wrapt's own constructor, and the plan set after: a Python __init__ of ours would be a
    # frame dynamo inspects (after a graph break) while wrapt 1.x's proxy still refuses isinstance.
    wrapper: Wrapper = made(wrapped, call)
    wrapper._self_plan = plan
    instance = constants["instance"] = unbound_instance(wrapper)
    trace = plan.trace
    if trace is not None and (trace.traces or SAYS_UNTRACED):
        # Found by dynamo before the marker above: a call of the wrapper met in a graph is
        # traced as this function's in its place, where it can be, else one graph break in
        # the library's words (see _trace).
        made._torchdynamo_inline = trace.inline(wrapped, instance, call) if trace.traces else trace.untraced  # type: ignore[attr-defined]
    if method is not None:  # bound to an instance, it is the wrapper's call (see described)
        method.__autoconvert_description__ = lambda instance: wrapper.__autoconvert_description__()
        if form is not None:
            functools.update_wrapper(form, method)
            form.wrapper = wrapper
    return wrapper


def unbound_instance(wrapper: Wrapper) -> Any:
    """What wrapt's C ``__call__`` passes as ``instance`` on an unbound call, decided once: a
    bound method wrapped directly carries its instance in ``__self__``."""
    if wrapper._self_binding in ("function", "instancemethod", "classmethod", "callable"):
        return getattr(wrapper.__wrapped__, "__self__", None)
    return None


class _MethodForm(functools.partial):  # type: ignore[type-arg]  # of any method form
    """A plain function's method form as the ``__func__`` of its bound methods, named as the
    function: called as C's partial calls (no frame of its own), and pickled as its wrapper's.
    cloudpickle (joblib, Ray, Dask) sends a bound method as its function and instance, and
    would send the generated method form of a script's method by value, namespace and all."""

    wrapper: Any  # the Wrapper it binds for, set by wrap as is the function's name (partials have a __dict__)

    def __reduce__(self) -> tuple[Any, ...]:
        return getattr, (self.wrapper, "_self_form")


def _binding(method: Callable[..., Any]) -> Callable[..., Any]:
    """A wrapper's ``__get__``: ``method`` bound to an instance; wrapt's binding for the class."""
    bind = wrapt.FunctionWrapper.__get__

    def __get__(self: Wrapper, instance: Any, owner: Any = None) -> Any:  # noqa: N807 - the descriptor hook
        if instance is None:
            return bind(self, instance, owner)
        return types.MethodType(method, instance)

    return __get__


def as_method(wrapper: Wrapper) -> Callable[..., Any]:
    """``call(instance, *args, **kwargs)``: ``wrapper`` (of a plain function) called as a
    method of ``instance``, as ``instance.name(...)`` would call it, the instance never
    converted: the method form ``wrap`` made."""
    assert wrapper._self_method is not None  # wrap makes one for every plain function
    return wrapper._self_method


def _rebuild(wrapped: Any, sides: dict[str, dict[str, Any]], kind: Callable[..., Plan]) -> Wrapper:
    return wrap(wrapped, kind(wrapped, sides))


def is_wrapper(obj: object) -> bool:
    """Whether ``obj`` is a function decorated by autoconvert."""
    return isinstance(obj, Wrapper)
