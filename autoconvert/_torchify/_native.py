"""A torchified module's function that its library runs on torch tensors itself.

SciPy's array API mode (``SCIPY_ARRAY_API=1``) runs part of SciPy on torch tensors: the
gradient flows, the result stays on the tensor's device, and ``torch.compile`` traces SciPy's
code. ``torchify(module, native="auto")`` hands such a function its tensors as they are; a
call without a tensor, with an array beside one (which SciPy's torch path refuses to mix), or
with a sparse or nested tensor (which it does not take; converting hands a scipy.sparse array),
takes the converting pair, as does every function the library has no torch path for (its
adapter says, ``Adapter.torch_path``).

A torchified class decides each object's route once, where it is made (``Natively``): an
object its library made from tensors (a classmethod or constructor SciPy declares a torch
path for, ``Rotation.from_euler``), or whose library declares one for it (a scikit-learn
estimator by its tags), holds tensors, so every method of it is called as it is (a
converting call would hand NumPy arrays to an object holding tensors); any other object
converts, as before.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import numpy as np
import torch

from autoconvert._adapters._adapter import Adapter
from autoconvert._adapters._table import adapter_for
from autoconvert._interpreter._routes import Declined, Route, Routed, RouteWords
from autoconvert._options._signature import function_name

from ._proxies import TorchifiedClass, TorchifiedObject, becomes_proxy, device_of, home, proxy, torchified_function

_NO_TENSOR = Declined("the call", "has no tensor", "no tensor", "", counted=False)
_ARRAY = Declined(
    "an argument", "is a NumPy array, which the library's torch path does not mix", "a NumPy array", "", counted=False
)
_SPARSE = Declined(
    "an argument",
    "is a sparse or nested tensor, which the library's torch path does not take",
    "a sparse or nested tensor",
    "pass it dense (.to_dense())",
    counted=False,
)
_CONVERTED = Declined(
    "an argument",
    "is an object made by converting, which holds NumPy arrays",
    "an object made by converting",
    "",
    counted=False,
)


class NativeRoute(Route):
    """The route of ``fn``, which its library runs on torch tensors itself: a call whose
    arguments hold a tensor and no array goes to ``fn`` as it is."""

    name = "native"
    label = "native torch path"

    def __init__(self, fn: Any, objects: NativeClass | None = None) -> None:
        """``objects``: the view the objects of ``fn``'s class it makes come back in (a
        torchified class's classmethod or constructor), proxies handed as their objects."""
        self.fn, self.objects = fn, objects

    def refuses(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Declined | None:
        holds = False
        for value in (*args, *kwargs.values()) if kwargs else args:
            if isinstance(value, torch.Tensor):
                if value.layout is not torch.strided or value.is_nested:
                    return _SPARSE
                holds = True
            elif isinstance(value, np.ndarray):
                return _ARRAY
            elif isinstance(value, TorchifiedObject):
                if not value._ac_class.holds_tensors:
                    return _CONVERTED
                holds = True
        return None if holds else _NO_TENSOR

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _ASARRAY_WARNING.unspent:
            return _ASARRAY_WARNING.caught(self._call, args, kwargs)
        return self._call(args, kwargs)

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.objects is None:
            return self.fn(*args, **kwargs)
        result = self.fn(*_objects(args), **{k: _object(v) for k, v in kwargs.items()})
        return self.objects.viewed(result, device_of(args, kwargs))

    def describe(self) -> RouteWords:
        return RouteWords(
            "native",
            f"A call whose arguments hold a tensor and no array goes to {function_name(self.fn)} as it is: its "
            "library runs it on torch tensors itself (gradients kept, on the tensors' device, traced by "
            "torch.compile). ",
            "Any other call takes the converting call: {path}. {why}",
        )


class NativeMethod(NativeRoute):
    """The route of every method of an object made on its library's own torch path (see
    ``Natively``): called as it is, the proxies among its arguments handed as their objects;
    strict, since a converting call would hand arrays to an object holding tensors.
    ``declared``: why it is called so, in words."""

    strict = True

    def __init__(self, fn: Any, objects: NativeClass, declared: str) -> None:
        super().__init__(fn, objects)
        self.declared = declared

    def refuses(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Declined | None:
        declined = super().refuses(args, kwargs)
        if declined is None or declined is _NO_TENSOR:  # the object itself holds tensors
            return None
        return declined._replace(
            fix=declined.fix or f"pass tensors (and objects made from tensors): {self.declared}",
            counted=True,
        )

    def describe(self) -> RouteWords:
        name = function_name(self.fn)
        taken = (
            f"{name} is called on the object as it is, its tensors handed as they are: {self.declared}. A call with "
            "a NumPy array, or an object made by converting, raises."
        )
        made = "a method of an object made on its library's own torch path"
        return RouteWords("native", taken, "", alone=(made, "tensors as they are", "as the library returns it"))


class _AsarrayWarning:
    """torch 2.13's ``torch.asarray`` warns, once per process, that an unspecified
    ``requires_grad`` now follows its argument's: SciPy's torch code (array-api-compat's
    ``asarray``) meets it on the first tensor that requires grad, and the new behaviour is
    what keeps the gradient on this route. It is SciPy's call, not the user's: caught on the
    native calls until a tensor that requires grad has gone through one (torch then warns no
    more). Other torch versions never raise it; the filter costs nothing there but the calls
    before the first such tensor."""

    __slots__ = ("unspent",)

    def __init__(self) -> None:
        self.unspent = True

    def caught(self, call: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r"torch\.asarray: unspecified requires_grad", UserWarning)
            result = call(args, kwargs)
        if any(isinstance(v, torch.Tensor) and v.requires_grad for v in (*args, *kwargs.values())):
            self.unspent = False
        return result


_ASARRAY_WARNING = _AsarrayWarning()


def _object(value: Any) -> Any:
    return value.__wrapped__ if isinstance(value, TorchifiedObject) else value


def _objects(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_object(value) for value in args)


class NativeClass(TorchifiedClass):
    """The view of a class's objects made on their library's own torch path, which hold
    tensors: each method of the class becomes a ``NativeMethod`` of them, and what they
    hold reads back as it is."""

    holds_tensors = True

    def __init__(self, cls: type, options: dict[str, Any], natively: Natively) -> None:
        super().__init__(cls, options)
        self.natively = natively

    def method(self, name: str) -> Any:
        """The class's function ``name`` as a method of proxies, taking the native route."""
        found = self._methods.get(name, _UNREAD)
        if found is not _UNREAD:
            return found
        raw = inspect.getattr_static(self.__wrapped__, name, None)
        method = None
        if inspect.isfunction(raw):
            routed = self._wrappers.setdefault(name, Routed(raw, (self.natively.method_route(raw, self),), None))
            method = _as_native_method(routed, name)
        return self._methods.setdefault(name, method)

    def object_notes(self, obj: Any) -> tuple[str, ...]:
        return (
            f"It was made on {self.natively.adapter.name}'s own torch path and holds tensors: each of its methods "
            "is called as it is",
        )

    def result_view(self, kind: type) -> TorchifiedClass | None:
        """Objects of the package a method returns hold tensors too: their classes' native views."""
        if kind is self.__wrapped__:
            return self
        if not becomes_proxy(kind, home(self.__wrapped__)):
            return None
        return Natively(kind, self._options, self.natively.native).objects

    def __reduce__(self) -> tuple[Any, ...]:
        return _objects_view, (self.natively,)


_UNREAD = object()


def _objects_view(natively: Natively) -> NativeClass:
    return natively.objects


def _as_native_method(routed: Routed, name: str) -> Any:
    """``routed`` (a class's function on its native route) as a method of proxies: called
    with the object, its result viewed by the route."""

    def method(self: TorchifiedObject, *args: Any, **kwargs: Any) -> Any:
        return routed(self.__wrapped__, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__wrapped__ = routed.__wrapped__  # type: ignore[attr-defined]
    method.__autoconvert_spec__ = lambda owner: routed.__autoconvert_spec__()  # type: ignore[attr-defined]
    return method


class Natively:
    """How a torchified class ``cls`` takes its library's own torch path (``native`` 'auto'
    or True): its classmethods and constructor where the library declares one for them, and
    the route of each object, decided once, where it is made (see the module's docstring)."""

    def __init__(self, cls: type, options: dict[str, Any], native: str | bool) -> None:
        self.cls, self.options, self.native = cls, options, native
        self.adapter = adapter = adapter_for(cls)
        self.objects = NativeClass(cls, options, self)
        self.constructing = native_route(adapter, inspect.getattr_static(cls, "__init__"))
        if isinstance(self.constructing, NativeRoute):
            self.constructing = NativeRoute(cls, self.objects)
            self.constructor = Routed(cls, (self.constructing,), None)

    def function(self, name: str, value: Any, view: TorchifiedClass) -> Any:
        """The class's static or class method ``name``, ``value``: its native route first
        where the library declares one for it (``native=True``: else refused)."""
        why = self.adapter.torch_path(value)
        if why is not None:
            if self.native is True:
                raise refused(self.adapter, why, self.cls.__module__, f"{self.cls.__qualname__}.{name}")
            return None
        converting = torchified_function(value, self.options, home(self.cls), own=view)
        return Routed(value, (NativeRoute(self.adapter.torch_call(value), self.objects),), converting)

    def construct(self, view: TorchifiedClass, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A new object of the class, as ``view`` (its converting view) makes it, on the
        native route where its constructor takes one or its library declares one for it."""
        route = self.constructing
        if isinstance(route, NativeRoute) and route.refuses(args, kwargs) is None:
            return self.constructor(*args, **kwargs)
        made = view._construct(*args, **kwargs)
        why = self.adapter.torch_path(made)
        device = device_of(args, kwargs)
        if why is None:
            return proxy(made, self.options, device, self.objects)
        if self.native is True:
            raise refused(self.adapter, why, self.cls.__module__, f"{self.cls.__qualname__}(...)")
        return proxy(made, self.options, device, view)

    def method_route(self, fn: Any, objects: NativeClass) -> NativeMethod:
        """The route of the class's function ``fn`` on an object made natively."""
        name, library = function_name(fn).removesuffix("()"), self.adapter.name
        call = self.adapter.torch_call(fn)
        if self.adapter.declared_torch_path(fn) is None:
            declared = f"{library} declares a torch path for {name}"
        else:
            declared = (
                f"the object was made on {library}'s own torch path (declared for the object, or for the call that "
                "made it), and a converting call would hand NumPy arrays to an object holding tensors"
            )
        if call is not fn:
            declared += f", with {library}'s torch path switched on around this call alone"
        return NativeMethod(call, objects, declared)

    def words(self) -> str:
        """How the class's objects are made, for explain."""
        name, library = self.cls.__qualname__, self.adapter.name
        if isinstance(self.constructing, NativeRoute):
            return (
                f"{name}(...) with tensors (and no NumPy array) runs on {library}'s own torch path, and so does "
                "every method of the object it makes; made otherwise, an object converts"
            )
        if self.adapter.torch_path(self.cls) is None:
            return (
                f"{name}(...) makes an object that takes {library}'s own torch path for all its methods where "
                f"{library} declares one for that object (it does for {name}() with default parameters); any other "
                "converts"
            )
        return (
            f"{name}(...) takes its arguments converted ({self.constructing}); the object it makes keeps "
            f"{library}'s own torch path for all its methods where {library} declares one for that object, as does "
            "one a classmethod makes on that path"
        )

    def object_words(self, obj: Any) -> str:
        """Why ``obj``, an object of the class made by converting, converts, for explain."""
        return (
            f"Its methods convert: it was made by converting, and {self.adapter.name} declares no torch path for "
            f"the object itself ({self.adapter.torch_path(obj)})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return Natively, (self.cls, self.options, self.native)


def native_route(adapter: Adapter, fn: Any) -> NativeRoute | str:
    """``fn``'s route on its library's own torch path, as its adapter declares it, or why it
    has none."""
    why = adapter.torch_path(fn)
    return NativeRoute(adapter.torch_call(fn)) if why is None else why


def refused(adapter: Adapter, why: str, module: str, name: str) -> ValueError:
    """``torchify(native=True)``'s refusal of ``module.name``, which has no torch path of its
    library's own: ``why``."""
    return ValueError(
        f"autoconvert.torchify(native=True): {module}.{name} has no torch path of {adapter.name}'s own: "
        f"{why}. Fix: native='auto' converts where there is none"
    )
