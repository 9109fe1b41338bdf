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

The caller's tensors are never written by the library unless ``writeback=True`` says it may:
a call its adapter says writes into its arguments (``Rotation.from_matrix`` normalises its
matrix in place; an estimator told not to copy, by a parameter or a method's keyword) is
handed copies, and any other write the library makes is caught by the tensors' version
counters and raised.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from typing import Any

import numpy as np
import torch

from autoconvert._adapters._adapter import Adapter, Bracket, WritesArguments
from autoconvert._adapters._table import adapter_for
from autoconvert._conversions._tree import Mapper
from autoconvert._errors import ConversionError, LeafError, message
from autoconvert._escape import compiling
from autoconvert._interpreter._routes import Declined, Route, Routed, RouteWords
from autoconvert._options._options import AFTER_CALL, gives_way
from autoconvert._spec._callbacks import reads_numpy, takes_tensors
from autoconvert._spec._signature import Parameters, function_name

from ._leaving import Leaving
from ._proxies import TorchifiedClass, TorchifiedObject, becomes_proxy, device_of, home, proxy, torchified_function

_NO_TENSOR = Declined("the call", "has no tensor", "no tensor", "", counted=False)
# What an argument is that the route declines: ``where`` is the place below the argument (``[1]``
# in a list), which ``declines`` prefixes with the argument's name.
_ARRAY = Declined(
    "", "is a NumPy array, which the library's torch path does not mix", "a NumPy array", "", counted=False
)
_SPARSE = Declined(
    "",
    "is a sparse or nested tensor, which the library's torch path does not take",
    "a sparse or nested tensor",
    "pass it dense (.to_dense())",
    counted=False,
)
_CONVERTED = Declined(
    "",
    "is an object made by converting, which holds NumPy arrays",
    "an object made by converting",
    "",
    counted=False,
)
_NUMPY_CALLABLE = Declined(
    "",
    "is a callable reading NumPy (np, x.astype) and no torch, which the library's torch path would hand tensors",
    "a NumPy-written callable",
    "",
    counted=False,
)
_HOLDS_ARRAYS = Declined(
    "",
    "is an object of the library holding NumPy arrays, which its torch path does not mix",
    "an object holding NumPy arrays",
    "",
    counted=False,
)

#: What writing into the caller's tensors takes on this route, for messages and explain.
_LETS_WRITE = AFTER_CALL["the native route's copies"].words
#: Argument types that hold neither a tensor nor an array: no walk.
_PLAIN = frozenset({int, float, bool, str, bytes, complex, type(None), slice, type(Ellipsis)})


class NativeRoute(Route):
    """The route of ``fn``, which its library runs on torch tensors itself: a call whose
    arguments hold a tensor and no array goes to ``fn`` as it is."""

    name = "native"
    label = "native torch path"

    def __init__(
        self,
        fn: Any,
        objects: NativeClass | None = None,
        writes: WritesArguments | None = None,
        guards: bool = True,
        *,
        grad: str | None = None,
        callbacks: bool | None = None,
        bracket: Bracket | None = None,
    ) -> None:
        """``objects``: the view the objects of ``fn``'s class it makes come back in (a
        torchified class's classmethod or constructor), proxies handed as their objects;
        ``writes``: which calls write into their tensors (its adapter's ``torch_writes``),
        handed copies where it ``guards`` the caller's (see AFTER_CALL); ``grad``: the
        ``grad=`` torchify was given (None: none), for what the library hands to NumPy itself;
        ``callbacks``: torchify's ``callbacks=``, by which callables among the arguments are
        judged (None: not judged, an object's methods); ``bracket``: the parameter whose
        tuple of tensors holds the call's tensors (its adapter's ``bracket``), where a list or
        tuple elsewhere is read by the library as one NumPy array-like."""
        self.fn, self.objects, self.writes = fn, objects, writes
        self.callbacks, self.bracket = callbacks, bracket
        self.guards = guards
        self.package = str(getattr(fn, "__module__", None) or "").partition(".")[0]
        self.leaving = Leaving(fn, function_name(fn), adapter_for(fn).name, grad)

    def declines(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Declined | None:
        holds = False
        for value in (*args, *kwargs.values()) if kwargs else args:
            if isinstance(value, torch.Tensor):
                if value.layout is not torch.strided or value.is_nested:
                    return self._named(_SPARSE, value, args, kwargs)
                holds = True
            elif type(value) not in _PLAIN:
                found = self._held(value)
                if found is not False:
                    if found is not True:
                        return self._named(found, value, args, kwargs)
                    holds = True
        if not holds and self.bracket is not None:
            return self._by_bracket(self.bracket, args, kwargs)
        return None if holds else _NO_TENSOR

    @staticmethod
    def _by_bracket(bracket: Bracket, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Declined | None:
        """Whether a call holding no tensor elsewhere goes on by the tuple its function unpacks
        (``bracket``): where a tensor is in every place (``find_root(f, (a, b))``). Passed by
        keyword where its function takes it so (SciPy's ``init`` is positional-only, which
        SciPy's own error then says)."""
        position = bracket.position
        value = args[position] if position is not None and position < len(args) else kwargs.get(bracket.name)
        if type(value) not in (tuple, list) or not value or not all(isinstance(i, torch.Tensor) for i in value):
            return _NO_TENSOR
        for k, item in enumerate(value):
            if item.layout is not torch.strided or item.is_nested:
                return _SPARSE._replace(where=f"argument {bracket.name}[{k}]")
        return None

    def _named(self, declined: Declined, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Declined:
        """``declined`` of the argument ``value``, its place named from the argument's name
        (``argument other``, ``argument rotations[1]``): read only for a call it declines."""
        name = next((k for k, v in kwargs.items() if v is value), None)
        if name is None:
            name = Parameters(self.fn).positional_name(next(k for k, v in enumerate(args) if v is value), 0)
        return declined._replace(where=f"argument {name}{declined.where}")

    def _held(self, value: Any) -> Declined | bool:
        """Whether ``value``, no tensor, is or holds (in lists, tuples and dicts) an object made
        on the library's torch path (True), something that path does not mix (why), or neither."""
        if isinstance(value, np.ndarray):
            return _ARRAY
        if isinstance(value, TorchifiedObject):
            return True if value._self_class.holds_tensors else _CONVERTED
        kind = type(value)
        if (
            self.callbacks is not None
            and callable(value)
            and not isinstance(value, type)
            and home(kind) != self.package  # the library's own objects are its to call
            and not takes_tensors(value, self.callbacks)
            and (self.callbacks or reads_numpy(value))  # code reading neither runs on tensors too
        ):
            # Its torch path would hand it tensors: the converting call hands it arrays.
            return _NUMPY_CALLABLE
        if kind is list or kind is tuple or kind is dict:
            holds = False
            for key, item in value.items() if kind is dict else enumerate(value):
                found = False if isinstance(item, torch.Tensor) or type(item) in _PLAIN else self._held(item)
                if found is not False and found is not True:
                    return found._replace(where=f"[{key!r}]{found.where}")
                holds = holds or found
            return holds
        if (
            self.package
            and home(kind) == self.package
            and any(isinstance(v, np.ndarray) for v in getattr(value, "__dict__", {}).values())
        ):
            # SciPy's own Rotation made from arrays: its torch code would meet them beside tensors.
            return _HOLDS_ARRAYS._replace(found=f"a {kind.__qualname__} holding NumPy arrays")
        return False

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _ASARRAY_WARNING.unspent:
            return _ASARRAY_WARNING.caught(self._watched, args, kwargs)
        return self._watched(args, kwargs)

    def _watched(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The call, grad= applied to what its library's torch code hands to NumPy (see _leaving).
        An error not the library's own gets a note naming the path it was raised on, and
        ``native=False``: a library's torch path may fail where its NumPy code works."""
        if compiling():  # dynamo traces no torch function mode of ours; NumPy breaks the graph anyway
            return self._call(args, kwargs)
        try:
            return self.leaving.call(self._call, args, kwargs)
        except Exception as error:
            if not isinstance(error, ConversionError):
                library = self.leaving.library
                error.add_note(
                    f"autoconvert: {self.leaving.function} raised this on {library}'s own torch path, which "
                    f"torchify takes for calls holding tensors (native='auto'); where {library} gives the answer "
                    "on NumPy arrays, torchify(..., native=False) converts the tensors instead"
                )
            raise

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        objects = self.objects
        if objects is not None:
            args, kwargs = _objects(args, kwargs)
        if not self.guards or compiling():  # dynamo traces no version counter; compiled code writes no input
            result = self.fn(*args, **kwargs)
        else:
            # The tensors' version counters, read before and after: a write no adapter foresaw raises.
            tensors = [
                value for value in ((*args, *kwargs.values()) if kwargs else args) if type(value) is torch.Tensor
            ]
            versions = [tensor._version for tensor in tensors]
            writes = self.writes
            if writes is not None and writes(args, kwargs):
                copied, copied_kwargs = _copies(args, kwargs)
                result = self.fn(*copied, **copied_kwargs)
            else:
                result = self.fn(*args, **kwargs)
            if [tensor._version for tensor in tensors] != versions:
                written = next(t for t, version in zip(tensors, versions, strict=True) if t._version != version)
                raise self._written(written, args, kwargs)
        return result if objects is None else objects.results(result, device_of(args, kwargs))

    def _written(self, value: torch.Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ConversionError:
        """The error for a write into the caller's tensor ``value`` no adapter foresaw."""
        given = {**{str(i): v for i, v in enumerate(args)}, **kwargs}
        # Named as its parameter where the signature says (not inside *args or **kwargs).
        with contextlib.suppress(TypeError, ValueError):  # no signature to read it from
            given = {**given, **inspect.signature(self.fn).bind_partial(*args, **kwargs).arguments}
        where = next(name for name, passed in reversed(given.items()) if passed is value)
        library = adapter_for(self.fn).name
        return ConversionError(
            message(
                function_name(self.fn),
                f"argument {where}",
                f"was written into by {library}'s own torch path, which is handed the caller's tensors as they are",
                "a tensor whose values changed during the call",
                "pass a copy (.clone()) to keep the original, or torchify with native=False, which hands the library "
                f"a read-only copy; {_LETS_WRITE}",
            )
        )

    def describe(self) -> RouteWords:
        return RouteWords(
            "native",
            f"A call whose arguments hold a tensor{self._bracket_words()} and no array{self._no_numpy_callable()} goes to "
            f"{function_name(self.fn)} as it is: its "
            "library runs it on torch tensors itself (gradients kept, on the tensors' device, traced by "
            f"torch.compile). {self._copied()}",
            "Any other call takes the converting call: {path}. {why}",
        )

    def _bracket_words(self) -> str:
        """Which tuple's tensors count as the call's, in explain's words (see ``_by_bracket``)."""
        return "" if self.bracket is None else f" (or whose {self.bracket.name} holds tensors only)"

    def _no_numpy_callable(self) -> str:
        """Which callables the call may hand its function, in explain's words."""
        if self.callbacks is None:
            return ""
        if self.callbacks:
            return " nor a callable of NumPy's or SciPy's own"
        return " nor a callable reading NumPy and no torch (np, x.astype)"

    def _copied(self) -> str:
        """Which calls are handed copies of the caller's tensors, in explain's words."""
        if not self.guards:
            return f"{_LETS_WRITE}. "
        if self.writes is None:
            return ""
        return "A call that would write into its tensors (as its library says) is handed copies of them. "


class NativeMethod(NativeRoute):
    """The route of every method of an object made on its library's own torch path (see
    ``Natively``): called as it is, the proxies among its arguments handed as their objects;
    strict, since a converting call would hand arrays to an object holding tensors.
    ``declared``: why it is called so, in words."""

    strict = True

    def __init__(
        self,
        fn: Any,
        objects: NativeClass,
        declared: str,
        writes: WritesArguments | None,
        guards: bool,
        *,
        grad: str | None,
    ) -> None:
        super().__init__(fn, objects, writes, guards, grad=grad)
        self.declared = declared

    def declines(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Declined | None:
        declined = super().declines(args, kwargs)
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
            f"a NumPy array, or an object made by converting, raises. {self._copied()}"
        ).rstrip()
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


def _object(value: Any, ctx: Any) -> Any:
    return value.__wrapped__


def _copy(value: torch.Tensor, ctx: Any) -> torch.Tensor:
    return value.clone()  # differentiable: the gradient flows back to the caller's tensor


#: Proxies, in lists, tuples, dicts and registered containers too, as the objects they stand for.
_unwrapped = Mapper({TorchifiedObject: _object})
#: Tensors as private copies, for a call that writes into them.
_copied = Mapper({torch.Tensor: _copy})


def _objects(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return _unwrapped(args, None), (_unwrapped(kwargs, None) if kwargs else kwargs)


def _copies(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return _copied(args, None), (_copied(kwargs, None) if kwargs else kwargs)


class NativeClass(TorchifiedClass):
    """The view of a class's objects made on their library's own torch path, which hold
    tensors: each method of the class becomes a ``NativeMethod`` of them, and what they
    hold reads back as it is."""

    holds_tensors = True

    def __init__(self, cls: type, options: dict[str, Any], natively: Natively) -> None:
        super().__init__(cls, options)
        self.natively = natively
        self._viewing = Mapper({}, fallback=self._viewer)

    def results(self, result: Any, device: torch.device | None) -> Any:
        """A call's ``result`` as the caller gets it: objects of the package, itself or in
        lists, tuples, dicts and registered containers (``Rotation.align_vectors``'s rotation),
        as their proxies, as the converting call gives them."""
        return self._viewing(result, device)

    def _viewer(self, kind: type) -> Any:
        """How a result of type ``kind`` is viewed: as a proxy of its class's native view, or
        None (a value, a tensor, a container walked)."""
        if kind not in self._results:
            self._results[kind] = self.result_view(kind)
        view, options = self._results[kind], self._options
        return None if view is None else lambda value, device: proxy(value, options, device, view)

    def crossing(self, obj: Any) -> Any:
        """An object made on the library's torch path never crosses to NumPy's side: code
        there meets its tensors, and fails on them."""
        library = self.natively.adapter.name
        raise LeafError(
            ConversionError,
            f"is an object made on {library}'s own torch path, which holds tensors, handed to a call that converts "
            "its arguments to NumPy",
            f"a {type(obj).__name__} made on {library}'s own torch path",
            "make it by converting (torchify with native=False, or from NumPy arrays), or pass only objects made "
            "from tensors where every call has a torch path",
        )

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
        result = routed(self.__wrapped__, *args, **kwargs)
        # A method returning its object (fit, set_params, an in-place operator) gives the proxy
        # itself, as the converting call does and as scikit-learn's ``fit`` returns ``self``.
        return self if isinstance(result, TorchifiedObject) and result.__wrapped__ is self.__wrapped__ else result

    method.__name__, method.__qualname__ = name, routed.counted
    method.__wrapped__ = routed.__wrapped__  # type: ignore[attr-defined]
    method.__autoconvert_description__ = lambda owner: routed.__autoconvert_description__()  # type: ignore[attr-defined]
    return method


class Natively:
    """How a torchified class ``cls`` takes its library's own torch path (``native`` 'auto'
    or True): its classmethods and constructor where the library declares one for them, and
    the route of each object, decided once, where it is made (see the module's docstring)."""

    def __init__(self, cls: type, options: dict[str, Any], native: str | bool) -> None:
        self.cls, self.options, self.native = cls, options, native
        self.adapter = adapter = adapter_for(cls)
        self.objects = NativeClass(cls, options, self)
        self.guards = not gives_way("the native route's copies", options)
        self.grad: str | None = options.get("grad")
        init = inspect.getattr_static(cls, "__init__")
        self.constructing = native_route(adapter, init, options)
        if isinstance(self.constructing, NativeRoute):
            self.constructing = NativeRoute(cls, self.objects, adapter.torch_writes(cls), self.guards, grad=self.grad)
            self.constructor = Routed(cls, (self.constructing,), None)
        #: Where the constructor only stores its arguments (a scikit-learn estimator's), what
        #: tells a call whose tensors it stores as they are (``Ridge(alpha=tensor)``), as the
        #: object's own torch path, called directly, holds them.
        self.storing = NativeRoute(cls, self.objects, None, False) if adapter.stores_arguments(cls) else None

    def function(self, name: str, value: Any, view: TorchifiedClass) -> Any:
        """The class's static or class method ``name``, ``value``: its native route first
        where the library declares one for it (``native=True``: else refused)."""
        why = self.adapter.torch_path(value)
        if why is not None:
            if self.native is True:
                raise refused(self.adapter, why, self.cls.__module__, f"{self.cls.__qualname__}.{name}")
            return None
        converting = torchified_function(value, self.options, home(self.cls), own=view)
        writes = self.adapter.torch_writes(value, self.cls)
        route = NativeRoute(
            self.adapter.torch_call(value),
            self.objects,
            writes,
            self.guards,
            grad=self.grad,
            callbacks=self.options.get("callbacks", False),
        )
        return Routed(value, (route,), converting, view=view, name=name)  # pickles as view.name

    def construct(self, view: TorchifiedClass, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A new object of the class, as ``view`` (its converting view) makes it, on the
        native route where its constructor takes one or its library declares one for it."""
        route = self.constructing
        if isinstance(route, NativeRoute) and route.declines(args, kwargs) is None:
            return self.constructor(*args, **kwargs)
        device = device_of(args, kwargs)
        if self.storing is not None and self.storing.declines(args, kwargs) is None:
            stored = self.cls(*args, **kwargs)
            if self.adapter.torch_path(stored) is None:
                return proxy(stored, self.options, device, self.objects)
        if view._builder is not None and self.native is not True:  # a catalogued class: its calls keep the gradient
            return view._builder.construct(view, args, kwargs, stacklevel=4)
        made = view._construct(*args, **kwargs)  # converted, as an object of no torch path takes them
        why = self.adapter.torch_path(made)
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
        writes = self.adapter.torch_writes(fn, self.cls)
        return NativeMethod(call, objects, declared, writes, self.guards, grad=self.grad)

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


def native_route(adapter: Adapter, fn: Any, options: dict[str, Any]) -> NativeRoute | str:
    """``fn``'s route on its library's own torch path, as its adapter declares it, or why it
    has none; ``options``: torchify's (whether the library may write into the caller's
    tensors, see AFTER_CALL; ``grad``)."""
    why = adapter.torch_path(fn)
    if why is not None:
        return why
    writes = adapter.torch_writes(fn)
    guards = not gives_way("the native route's copies", options)
    return NativeRoute(
        adapter.torch_call(fn),
        None,
        writes,
        guards,
        grad=options.get("grad"),
        callbacks=options.get("callbacks", False),
        bracket=adapter.bracket(fn),
    )


def refused(adapter: Adapter, why: str, module: str, name: str) -> ValueError:
    """``torchify(native=True)``'s refusal of ``module.name``, which has no torch path of its
    library's own: ``why``."""
    return ValueError(
        f"autoconvert.torchify(native=True): {module}.{name} has no torch path of {adapter.name}'s own: "
        f"{why}. Fix: native='auto' converts where there is none"
    )
