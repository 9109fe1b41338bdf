"""Torchified classes and objects: a constructor that takes tensors, and proxies whose
methods take and return tensors.

``torchify(SomeEstimator)`` is a ``TorchifiedClass``; the object it builds (or that
``torchify(obj)`` wraps) is a ``TorchifiedObject``, of its class's own proxy type: each
method of the object's class, wrapped on first access as the fused pair ``wrap_pair``
makes with a ``MethodPlan`` (the proxy is the call's instance, standing in for the
object), becomes a method of that type; attributes read back as tensors on the device of
the tensors last passed to it. A result that is an object of the class's own package
comes back as a proxy too, so chains stay in tensors.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import inspect
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch

from autoconvert._conversions._containers import node_for
from autoconvert._conversions._devices import CPU, default_device, vote
from autoconvert._conversions._tree import Leaf, Mapper, StandIn
from autoconvert._decorators._decorators import for_library, inputs_of, outputs_of, replanned, wrap_pair
from autoconvert._decorators._plain import TensorOptions, to_numpy, to_tensor
from autoconvert._escape import compiling, opaque, proxy_class
from autoconvert._failures._guards import guarded
from autoconvert._interpreter._plan import Plan
from autoconvert._interpreter._routes import Description, described, plan_of
from autoconvert._interpreter._wrapper import as_method
from autoconvert._options._options import policy_of

#: Types that stay themselves: raised and caught, or NumPy's own value types.
PLAIN_TYPES: tuple[type, ...] = (BaseException, np.generic, np.dtype, np.ndarray)


def home(target: Any) -> str:
    """The top-level package ``target`` (a module, a class, or an instance) comes from."""
    if isinstance(target, types.ModuleType):
        name = target.__name__
    else:
        name = getattr(target if isinstance(target, type) else type(target), "__module__", None) or ""
    return name.partition(".")[0]


def _guarded_pair(fn: Any, options: dict[str, Any]) -> Any:
    """``wrap_pair`` of ``fn`` (a torchified function, a callable a torchified object
    holds), guarded (see _guards)."""
    return wrap_pair(_guarded(fn, inputs_of(options)), options)


def _guarded(fn: Any, inputs: dict[str, Any]) -> Any:
    """``fn`` guarded (see _guards) as ``inputs``, the input side's options, ask: compiled
    code's refusal of read-only arrays made again with copies where those copy when needed."""
    return guarded(fn, policy_of("accepts_numpy", {}, inputs).retries_with_copies())


class TorchifiedPlan(Plan):
    """A plan torchify made: its options go to the torchify call, and no decorator is the user's."""

    def maker(self, assignment: str) -> str:
        return f"the ac.torchify(..., {assignment}) call that made it"

    def nested_off(self, side: str) -> str | None:
        return self.maker("nested=False")

    def keeps_gradient(self) -> str:
        name = self.function.removesuffix("()")
        return (
            f"make {name} a differentiable torch operation with ac.numpy_op({name}, backward=...), its "
            "vector-Jacobian product written in NumPy"
        )


class MethodPlan(TorchifiedPlan):
    """The plan of a torchified object's method: a function of the object's class, or with
    ``held`` a callable the object holds (a function stored on it; the object itself, where
    its class's ``__call__`` is no Python function), called as it is. The proxy is the
    call's instance, standing in for the object (see _spec's ``Spec.stands_in``): the call's
    tensors set its device, and a result that is the object comes back as the proxy."""

    stands_in = True

    def __init__(
        self,
        func: Any,
        sides: dict[str, dict[str, Any]],
        *,
        view: TorchifiedClass,
        held: bool = False,
        kept_natively: str | None = None,
    ) -> None:
        """``view``: the torchified class of the objects the method is called on, whose
        ``result_view`` says which objects in its results come back as proxies;
        ``kept_natively``: how its library's own torch path would keep the gradient, where it
        declares one the call does not take."""
        self.held = held
        self.view = view
        self.kept_natively = kept_natively
        super().__init__(func, sides)
        if not held:  # a held callable comes guarded (see _self_calling); a function, with its object first
            retries = self.policies["accepts_numpy"].retries_with_copies()
            guard = guarded(func, retries, method=True, owner=view.__wrapped__)
            self.guard = guard if guard is not func else None

    def remade(self) -> Callable[[Any, dict[str, dict[str, Any]]], Plan]:
        return functools.partial(type(self), view=self.view, held=self.held, kept_natively=self.kept_natively)

    def keeps_gradient(self) -> str:
        return self.kept_natively or super().keeps_gradient()

    def objects(self, cls: type) -> Leaf | None:
        """Objects of the class's package inside a result (``rng.spawn(2)``'s Generators) as
        proxies, as the result itself comes back (see TorchifiedClass.viewed)."""
        view = self.view.result_view(cls)
        if view is None:
            return None
        options = self.view._options
        return lambda value, ctx: proxy(value, options, ctx.device, view)


class ProxyingPlan(TorchifiedPlan):
    """The plan of a torchified function (a module's, a class's static or class method): a
    result that is an object of the function's package (``tnp.random.default_rng(0)``,
    ``make_interp_spline``'s spline, a factory classmethod's instance) comes back as a
    torchified object, so calls on it stay in tensors."""

    def __init__(
        self, func: Any, sides: dict[str, dict[str, Any]], package: str, own: TorchifiedClass | None = None
    ) -> None:
        """``package``: the torchified module's or class's, for functions that do not name
        their own (an extension module's builtins, ``cv2.createCLAHE``, have no ``__module__``);
        ``own``: the torchified class whose view its own instances come back in."""
        self.package = (getattr(func, "__module__", None) or package).partition(".")[0]
        self.options = {k: v for options in sides.values() for k, v in options.items()}
        self.own = own
        super().__init__(func, sides)

    def remade(self) -> Callable[[Any, dict[str, dict[str, Any]]], Plan]:
        return functools.partial(type(self), package=self.package, own=self.own)

    def objects(self, cls: type) -> Leaf | None:
        view = view_of(cls, self.package, self.options, self.own)
        if view is None:
            return None
        options = self.options
        return lambda value, ctx: proxy(value, options, ctx.device, view)


def torchified_function(
    fn: Any,
    options: dict[str, Any],
    package: str,
    plan: Callable[..., ProxyingPlan] = ProxyingPlan,
    own: TorchifiedClass | None = None,
) -> Any:
    """``wrap_pair(fn, options)``, guarded (see _guards), with a ``plan`` (a ProxyingPlan):
    objects of ``package`` come back as proxies."""
    if compiling():  # pragma: no cover - runs under dynamo, unseen by coverage
        return opaque(torchified_function, fn, options, package, plan, own)
    return replanned(_guarded_pair(fn, options), functools.partial(plan, package=package, own=own))


def view_of(kind: type, package: str, options: dict[str, Any], own: TorchifiedClass | None) -> TorchifiedClass | None:
    """The view a torchified call's result of type ``kind`` comes back in: ``own`` (a
    torchified class) for its own instances, a new view for other objects of ``package``
    (see becomes_proxy); None where results of ``kind`` come back as they are."""
    if own is not None and kind is own.__wrapped__:
        return own
    return TorchifiedClass(kind, options) if becomes_proxy(kind, package) else None


def becomes_proxy(kind: type, package: str) -> bool:
    """Whether a result of type ``kind`` from a torchified call comes back as a proxy: an
    object of the view's own package that is no plain value, array, container, type, module
    or routine (a ufunc, a function: those are called, not used as objects)."""
    plain = kind in _PLAIN_VALUES or issubclass(kind, (*PLAIN_TYPES, *_NOT_OBJECTS))
    return not plain and node_for(kind) is None and home(kind) in (package, _unnamed(kind))


def _unnamed(kind: type) -> str | None:
    """``"builtins"`` for an extension type that names no module (its C name has no dot), so
    that it counts as the package's that made it; None for Python's own builtin types."""
    return "builtins" if getattr(builtins, kind.__name__, None) is not kind else None


#: Result types that are never proxied, besides plain values and NumPy's value types.
_NOT_OBJECTS = (
    torch.Tensor,
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    np.ufunc,
)


class TorchifiedClass(StandIn):
    """A class whose constructor takes tensors and builds torchified instances. ``natively``
    (a ``_native.Natively``): how its classmethods, constructor and objects take their
    library's own torch path (None: never)."""

    #: Whether its objects hold tensors (made on their library's own torch path, see _native).
    holds_tensors = False

    def __init__(
        self,
        cls: type,
        options: dict[str, Any],
        natively: Any = None,
        plans: Callable[[Any], Any] | None = None,
        kept: Callable[[Any], str | None] | None = None,
        *,
        builder: Any = None,
    ) -> None:
        """``plans``: the plan (a ProxyingPlan factory) of a static or class method that takes
        no native route, saying why where its library declares one (see _torchify.class_view);
        ``kept``: for a method of its objects, how that route would keep the gradient (None:
        no route is declared for it); ``builder``: a ``_building.Builder`` where the gradient
        catalogue has the class, whose objects' calls keep the gradient of what built them."""
        self.__wrapped__ = cls
        self._options = options
        self._natively = natively
        self._plans = plans
        self._kept = kept
        self._builder = builder
        self._inputs = inputs_of(options)  # the constructor's and assign's
        dtype = policy_of("returns_tensor", {}, outputs_of(options)).dtype
        #: The dtype attributes read off its objects are cast to: an explicit ``dtype=`` ("input"
        #: has no inputs there; None lets a ``config`` block's apply).
        self.read_dtype = dtype if isinstance(dtype, torch.dtype) else None
        self._construct = for_library("accepts_numpy", _guarded(cls, self._inputs), self._inputs)
        self._methods: dict[str, Any] = {}  # the class's functions, wrapped once for all instances
        self._wrappers: dict[str, Any] = {}  # the wrappers of those (explain's)
        self._proxy_types: dict[bool | str, type[TorchifiedObject]] = {}
        self._results: dict[type, TorchifiedClass | None] = {}  # result types: the views of those proxied
        self._store: Any = None  # assigns attributes of proxies (see ``assign``)
        functools.update_wrapper(self, cls, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._natively is not None:
            return self._natively.construct(self, args, kwargs)
        if self._builder is not None:
            return self._builder.construct(self, args, kwargs)
        return proxy(self._construct(*args, **kwargs), self._options, device_of(args, kwargs), self)

    def __getattr__(self, name: str) -> Any:
        """Static and class methods, wrapped on first access and cached in the instance
        ``__dict__``, so the next access is a plain attribute read (as for modules)."""
        value = getattr(self.__wrapped__, name)
        if name.startswith("_") or not callable(value) or isinstance(value, type):
            return value
        natively = self._natively
        routed = None if natively is None else natively.function(name, value, self)
        # A factory classmethod's instance comes back as a proxy of this view.
        plan = ProxyingPlan if self._plans is None else self._plans(value)
        wrapped = routed or torchified_function(value, self._options, home(self.__wrapped__), plan, own=self)
        # setdefault: threads that read a fresh name at once all get the first one made.
        return self.__dict__.setdefault(name, wrapped)

    def assign(self, target: Any, name: str, value: Any) -> None:
        """``target.name = value``, the value handed over as a method's argument is: a
        read-only array by default (a method writing into it later raises ReadOnlyError, as
        for the constructor's arguments), a private copy with ``copy=True``, the tensor's own
        memory with ``writeback=True``, else a private copy that is read-only once assigned."""
        if self._store is None:

            def store(target: Any, name: str, value: Any) -> None:
                setattr(target, name, value)

            store.__qualname__ = f"{self.__wrapped__.__qualname__}.__setattr__"
            self._store = for_library("accepts_numpy", store, self._inputs)
        self._store(target, name, value)

    def method(self, name: str) -> Any:
        """The class's function ``name`` as a method of proxies (the method form of its
        ``MethodPlan``'s call, see _wrapper.as_method), or None if it has none.

        Only names the class has are cached: instance attributes and misses are looked up
        again, so reading many distinct names cannot grow the cache."""
        if name in self._methods:
            return self._methods[name]
        if compiling():  # pragma: no cover - runs under dynamo, which would trace inspect's caches
            return opaque(self.method, name)
        raw = inspect.getattr_static(self.__wrapped__, name, _MISSING)
        if raw is _MISSING:
            return None
        method = None
        if inspect.isfunction(raw):
            kept = None if self._kept is None else self._kept(raw)
            plan = functools.partial(MethodPlan, view=self, kept_natively=kept)
            wrapper = self._wrappers.setdefault(name, replanned(wrap_pair(raw, self._options), plan))
            method = as_method(wrapper)
        return self._methods.setdefault(name, method)

    def proxy_type(self, kind: bool | str) -> type[TorchifiedObject]:
        """This class's own subclass of the proxy type (``kind``: whether its objects are
        callable, or ``"built"`` for a catalogued builder's), which its methods are added to,
        with the protocols the class has (``with``, iteration, ``len``, indexing, ``in``):
        Python looks those up on the proxy's type, never through ``__getattr__``."""
        made = self._proxy_types.get(kind)
        if made is None:
            base = BuiltObject if kind == "built" else CallableTorchifiedObject if kind else TorchifiedObject
            protocols = {name: f for name, f in _PROTOCOLS.items() if hasattr(self.__wrapped__, name)}
            protocols |= _operators(self.__wrapped__)
            if self.__wrapped__ is types.FunctionType:
                protocols["__call__"], protocols["__get__"] = _function_call, _function_get
            made = self._proxy_types[kind] = type(base.__name__, (base,), {"__slots__": (), **protocols})
        return made

    def viewed(self, result: Any, device: torch.device | None) -> Any:
        """A method's ``result`` as the caller gets it: an object of the class's own package
        (``norm(0, 1)``'s frozen distribution, a ``Rotation``'s ``inv()``) as its proxy, so
        chains stay in tensors; anything else (a value, a container the output side
        converted, another package's object) as it is."""
        kind = type(result)
        if kind not in self._results:
            self._results[kind] = self.result_view(kind)
        viewing = self._results[kind]
        return result if viewing is None else proxy(result, self._options, device, viewing)

    def crossing(self, obj: Any) -> Any:
        """``obj``, an object of this view, where its proxy crosses to NumPy's side (see _native's)."""
        return obj

    def object_notes(self, obj: Any) -> tuple[str, ...]:
        """What explain says of ``obj``, an object of this view, besides its options: why it
        takes its library's own torch path or not, where the class may."""
        return () if self._natively is None else (self._natively.object_words(obj),)

    def result_view(self, kind: type) -> TorchifiedClass | None:
        """The view a method's result of type ``kind`` comes back in (see view_of)."""
        return view_of(kind, home(self.__wrapped__), self._options, self)

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self.__wrapped__)

    def __autoconvert_description__(self) -> Description:
        notes = () if self._natively is None else (self._natively.words(),)
        return Description(options=self._options, notes=notes)

    def __repr__(self) -> str:
        return f"<torchified class {self.__wrapped__.__module__}.{self.__wrapped__.__qualname__}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return functools.partial(TorchifiedClass, builder=self._builder), (
            self.__wrapped__,
            self._options,
            self._natively,
        )


_MISSING = object()


_recorder = Mapper({torch.Tensor: lambda t, seen: seen.append(t) or t})


def device_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    """The device the call's tensors share (None without tensors, or when they disagree)."""
    found = None
    if not kwargs:  # the common case, CPU tensors among plain values, without the walk and the vote
        for value in args:
            kind = type(value)
            if kind is torch.Tensor and value.is_cpu:
                found = CPU
            elif kind not in _PLAIN_VALUES:
                break
        else:
            return found
    seen: list[torch.Tensor] = []
    for value in (*args, *kwargs.values()) if kwargs else args:
        kind = type(value)
        if kind is torch.Tensor:
            seen.append(value)
        elif kind not in _PLAIN_VALUES:  # a container, perhaps of tensors: the full walk
            _recorder(value, seen)
    return vote(seen) if seen else None


#: Argument types that hold no tensor: the common case needs no walk. (NotImplemented, an
#: operator's answer to an operand it does not take, must reach Python as it is.)
_PLAIN_VALUES = frozenset(
    {int, float, bool, str, bytes, complex, type(None), types.NotImplementedType, types.EllipsisType, np.ndarray}
)


class TorchifiedObject(StandIn):
    """An object whose methods take and return tensors, and whose arrays read back as tensors.

    Each proxy's type is its TorchifiedClass's own subclass (see ``proxy``): a method of
    the object's class, wrapped on first access, becomes a method of that type, so the next
    ``proxy.method`` is a plain attribute read and no proxy holds a reference to itself.
    """

    # torch.compile guards a proxy it meets through a weak reference and its (empty) __dict__.
    __slots__ = (
        "__dict__",
        "__weakref__",
        "__wrapped__",
        "_self_bound",
        "_self_class",
        "_self_device",
        "_self_options",
    )

    #: Whether a method found is set on the proxy type, where the next read finds it directly.
    _self_caches_methods = True

    def __init__(self, target: Any, options: dict[str, Any], device: torch.device | None, cls: TorchifiedClass) -> None:
        object.__setattr__(self, "__wrapped__", target)
        object.__setattr__(self, "_self_options", options)
        object.__setattr__(self, "_self_device", device)
        object.__setattr__(self, "_self_class", cls)
        object.__setattr__(self, "_self_bound", {})  # callables stored on the object: name -> (value, call)

    # isinstance(proxy, Estimator) holds, as for wrapt's proxies; a plain function's, only to dynamo
    __class__ = proxy_class

    def __getattr__(self, name: str) -> Any:
        if name == "__wrapped__":  # asked before __init__ set it (torch.compile's frame hook does)
            raise AttributeError(name)
        target = self.__wrapped__
        if name.startswith("__"):
            return getattr(target, name)
        method = self._self_class.method(name)
        if method is not None:
            if self._self_caches_methods:
                setattr(type(self), name, method)  # this class's proxies find it without __getattr__
            return types.MethodType(method, self)
        value = getattr(target, name)
        viewed = self._self_class.viewed(value, self._self_device)
        if viewed is not value:  # an object of the package (a LinearOperator's .T): its proxy
            return viewed
        if callable(value) and not isinstance(value, type):
            return types.MethodType(self._self_calling(name, value), self)
        return self._self_read(value)

    # torch.compile never traces the lookup (it would build methods, and state, symbolically):
    # the marker torch.compiler.disable sets makes dynamo leave the attribute read to Python.
    __getattr__._torchdynamo_disable = True  # type: ignore[attr-defined]

    def _self_calling(self, name: str, value: Any) -> Callable[..., Any]:
        """``value``, a callable the object holds as ``name`` (or the object itself, as
        ``__call__``, where its class's is no Python function), as a method of proxies:
        wrapped once, again only if replaced."""
        cached = self._self_bound.get(name)
        if cached is None or not _same_callable(cached[0], value):
            plan = functools.partial(MethodPlan, view=self._self_class, held=True)
            held = replanned(_guarded_pair(value, self._self_options), plan)
            cached = self._self_bound[name] = (value, _holding(held, name), held)
        return cast("Callable[..., Any]", cached[1])

    def __autoconvert_description__(self) -> Description:
        if type(self.__wrapped__) is types.FunctionType:  # a plain function's proxy: its call is what it does
            return cast("Description", described(self._self_bound["__call__"][2]))
        return Description(options=self._self_options, notes=self._self_class.object_notes(self.__wrapped__))

    def _self_stood_for(self) -> Any:
        return self._self_class.crossing(self.__wrapped__)

    def _self_wrapper(self, name: str) -> Any:
        """The wrapper the method ``name`` of this object calls through (its description's), or None."""
        self._self_class.method(name)  # wrapped on first access: explain may come first
        wrapper = self._self_class._wrappers.get(name)
        if wrapper is None and name in self._self_bound:
            wrapper = self._self_bound[name][2]
        return wrapper

    def _self_returned(self, result: Any) -> Any:
        """A method's converted ``result`` as the caller gets it (see Spec.stands_in): an
        object of the class's package as its proxy (see TorchifiedClass.viewed)."""
        return result if type(result) is torch.Tensor else self._self_class.viewed(result, self._self_device)

    def _self_read(self, value: Any) -> Any:
        """A value read off the object (an attribute, an item) as tensors, on the device of
        the tensors last passed to it; an object of the package as its proxy."""
        if type(value) is torch.Tensor and self._self_class.holds_tensors:  # the library's own, as it is
            return value
        placed: TensorOptions = {"device": self._self_device or default_device()}
        dtype = self._self_class.read_dtype
        if dtype is not None:
            placed["dtype"] = dtype
        read = to_tensor(value, **placed)
        return self._self_class.viewed(read, self._self_device) if read is value else read

    def __setattr__(self, name: str, value: Any) -> None:
        self._self_class.assign(self.__wrapped__, name, value)

    def __dir__(self) -> list[str]:
        return dir(self.__wrapped__)

    def __repr__(self) -> str:
        return f"torchified({self.__wrapped__!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # A function's class (builtins.function) is not found by name where it loads: the view
        # of a class pickle cannot find is made again there, from the object.
        kind = type(self.__wrapped__)
        found = getattr(sys.modules.get(kind.__module__), kind.__qualname__, None) is kind
        return _unpickled, (
            self.__wrapped__,
            self._self_options,
            self._self_device,
            self._self_class if found else None,
        )


def _enter(self: TorchifiedObject) -> Any:
    entered = self.__wrapped__.__enter__()
    return self if entered is self.__wrapped__ else self._self_read(entered)


def _exit(self: TorchifiedObject, *exc_info: Any) -> Any:
    return self.__wrapped__.__exit__(*exc_info)


def _iter(self: TorchifiedObject) -> Any:
    return (self._self_read(item) for item in self.__wrapped__)


def _next(self: TorchifiedObject) -> Any:
    return self._self_read(next(self.__wrapped__))


def _len(self: TorchifiedObject) -> int:
    return len(self.__wrapped__)


def _getitem(self: TorchifiedObject, key: Any) -> Any:
    return self._self_read(self.__wrapped__[to_numpy(key)])


def _contains(self: TorchifiedObject, item: Any) -> bool:
    return to_numpy(item) in self.__wrapped__


def _bool(self: TorchifiedObject) -> bool:
    return bool(self.__wrapped__)


#: The protocols a proxy type forwards where its object's class has them: values read come
#: back as tensors, keys and items go in as arrays, the object entered comes back as the proxy.
_PROTOCOLS: dict[str, Callable[..., Any]] = {
    "__enter__": _enter,
    "__exit__": _exit,
    "__iter__": _iter,
    "__next__": _next,
    "__len__": _len,
    "__getitem__": _getitem,
    "__contains__": _contains,
    "__bool__": _bool,
}


_BINARY = (
    "add",
    "sub",
    "mul",
    "matmul",
    "truediv",
    "floordiv",
    "mod",
    "divmod",
    "pow",
    "lshift",
    "rshift",
    "and",
    "xor",
    "or",
)
#: The operators a proxy type forwards where its object's class defines them: binary ones,
#: reflected and in place, unary ones and comparisons. Python looks them up on the type.
OPERATORS = (
    *(f"__{op}__" for op in _BINARY),
    *(f"__r{op}__" for op in _BINARY),
    *(f"__i{op}__" for op in _BINARY if op != "divmod"),
    *("__neg__", "__pos__", "__abs__", "__invert__"),
    *("__lt__", "__le__", "__eq__", "__ne__", "__gt__", "__ge__"),
    *("__setitem__", "__delitem__"),
)


def _operators(cls: type) -> dict[str, Any]:
    """The operators of ``cls`` (those it defines, not ``object``'s), as methods of its proxy
    type, each converting as the class's other methods do (see _operator), with what it says
    to NumPy about them: ``__array_ufunc__ = None``, which NumPy reads off the type (the
    instance's ``__array_priority__`` reaches it through ``__getattr__``), so an array on the
    left of the proxy's operator defers to its reflected one as to the object's."""
    found: dict[str, Any] = {name: _operator(name) for name in OPERATORS if _defines(cls, name)}
    if "__eq__" in found:  # a class body defining __eq__ drops __hash__: keep the object's
        found["__hash__"] = None if cls.__hash__ is None else _hash
    if getattr(cls, "__array_ufunc__", _MISSING) is None:
        found["__array_ufunc__"] = None
    return found


def _defines(cls: type, name: str) -> bool:
    """Whether ``cls`` or a base other than ``object`` defines ``name`` (as no None): read
    from the classes' own namespaces, since ``getattr(cls, "__or__")`` finds the metaclass's
    ``type.__or__`` (``int | None``), which is no operator of the class's objects."""
    for base in cls.__mro__:
        if name in vars(base):
            return base is not object and vars(base)[name] is not None
    return False


def _operator(name: str) -> Callable[..., Any]:
    """The proxies' operator ``name``: the class's own as a method of proxies (arguments
    converted, proxies handed as their objects, results viewed as a method's), or, for one
    that is no Python function, the object's bound one through the same conversion."""

    def operate(self: TorchifiedObject, *args: Any) -> Any:
        method = self._self_class.method(name)
        if method is None:
            method = self._self_calling(name, getattr(self.__wrapped__, name))
        return method(self, *args)

    operate.__name__ = operate.__qualname__ = name
    operate.__autoconvert_description__ = _describing(name)  # type: ignore[attr-defined]
    return operate


def _hash(self: TorchifiedObject) -> int:
    return hash(self.__wrapped__)


class CallableTorchifiedObject(TorchifiedObject):
    """A torchified object that is itself callable (``gaussian_kde``, a transform object):
    calling the proxy calls the object's ``__call__`` through the same conversion."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        method = self._self_class.method("__call__")
        if method is None:  # __call__ is not a plain function of its class (a builtin, a C type)
            return self._self_calling("__call__", self.__wrapped__)(self, *args, **kwargs)
        return method(self, *args, **kwargs)


class BuiltObject(CallableTorchifiedObject):
    """An object a catalogued builder made (a ``CubicSpline``, see _building): its call is an
    op of the tensors it was built from and the call's own, taking the catalogue's rule; every
    other read says their gradient dropped, so none is set on its type."""

    __slots__ = ("_self_built",)
    _self_caches_methods = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_built.call(self, "__call__", args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_"):
            derived = self._self_built.derived(self, name)
            if derived is not None:
                return derived
            self._self_built.read(name)
        return TorchifiedObject.__getattr__(self, name)

    __getattr__._torchdynamo_disable = True  # type: ignore[attr-defined]

    def __autoconvert_description__(self) -> Description:
        spec = TorchifiedObject.__autoconvert_description__(self)
        return dataclasses.replace(spec, notes=(*spec.notes, self._self_built.builder.built.describe()))


#: Bound methods: each attribute read makes a new one, equal to the last (same function, same object).
_BOUND = frozenset({types.MethodType, types.BuiltinMethodType, types.MethodWrapperType})


def _same_callable(kept: Any, value: Any) -> bool:
    """Whether ``value``, read off an object again, is the callable ``kept`` was: the same
    object, or a bound method of the same function on the same object (an extension type's
    method), so it is wrapped once, not at every call."""
    return kept is value or (type(value) in _BOUND and type(kept) is type(value) and kept == value)


def _holding(held: Any, name: str) -> Callable[..., Any]:
    """``held``, the callable the object holds as ``name`` wrapped with its ``MethodPlan``, as
    a method of proxies: the proxy is the call's instance."""
    default, wrapped = plan_of(held).default, held.__wrapped__
    call, escape = default.call, default.spec.escape

    def method(self: TorchifiedObject, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_dynamo_compiling():  # pragma: no cover - read through torch's module (see _escape)
            return escape(call, wrapped, self, args, kwargs)
        return call(wrapped, self, args, kwargs)

    method.__name__ = method.__qualname__ = name
    method.__autoconvert_description__ = lambda owner: described(held)  # type: ignore[attr-defined]
    return method


def _describing(name: str) -> Callable[[TorchifiedObject], Description | None]:
    """The description of a proxy's method ``name``, which wraps its object's on first use:
    the wrapper's it calls through (None: it calls through none)."""

    def describe(owner: TorchifiedObject) -> Description | None:
        wrapper = owner._self_wrapper(name)
        return None if wrapper is None else described(wrapper)

    return describe


# A callable proxy's call, bound (``proxy.__call__``), describes the object's call it makes.
CallableTorchifiedObject.__call__.__autoconvert_description__ = _describing("__call__")  # type: ignore[attr-defined]


def proxy(
    target: Any,
    options: dict[str, Any],
    device: torch.device | None,
    cls: TorchifiedClass | None = None,
    built: Any = None,
) -> TorchifiedObject:
    """The proxy for ``target``, of ``cls``'s own proxy type: callable exactly when ``target``
    is, so ``callable()`` tells the truth; ``built``: what a catalogued builder that made it
    keeps (a ``_building.Keeping``), for a BuiltObject."""
    cls = cls or TorchifiedClass(type(target), options)
    if built is None:
        made = cls.proxy_type(callable(target))(target, options, device, cls)
    else:
        made = cls.proxy_type("built")(target, options, device, cls)
        object.__setattr__(made, "_self_built", built)
    if type(target) is types.FunctionType:
        # A proxy of a plain function passes for one (its __class__), so dynamo would inline the
        # function's own code with the caller's tensors: it inlines this instead, the escape of
        # the proxy's call, which traces the function where it reads NumPy alone (see _trace).
        object.__setattr__(made, "_torchdynamo_inline", _inlined(made, made._self_calling("__call__", target)))
        # Its own, over its type's: help(), functools.wraps and Sphinx read the function's.
        object.__setattr__(made, "__doc__", target.__doc__)
        object.__setattr__(made, "__module__", target.__module__)
    return made


def _function_call(self: TorchifiedObject, *args: Any, **kwargs: Any) -> Any:
    """A plain function's proxy called: through what dynamo inlines for it (see ``proxy``), so
    ``torch.compile(proxy)``, whose frame this is, traces it as a compiled caller does:
    dynamo takes the proxy for its function and reads nothing else of it."""
    return self._torchdynamo_inline(*args, **kwargs)


_function_call.__autoconvert_description__ = _describing("__call__")  # type: ignore[attr-defined]


def _function_get(self: CallableTorchifiedObject, instance: Any, owner: Any = None) -> Any:
    """A plain function's proxy read through an instance of a class that holds it: bound to
    the instance, as the function would be (and so, as the function, a routine to inspect)."""
    return self if instance is None else types.MethodType(self, instance)


def _inlined(made: TorchifiedObject, method: Callable[..., Any]) -> Callable[..., Any]:
    """What dynamo inlines for a call of a plain function's proxy, ``made``, and what its eager
    calls run (see _function_call): ``method`` (see _holding), the proxy reached weakly (a
    proxy holds no reference to itself)."""
    proxy_of = weakref.ref(made)

    def inline(*args: Any, **kwargs: Any) -> Any:
        return method(proxy_of(), *args, **kwargs)

    return inline


def _unpickled(target: Any, options: dict[str, Any], device: torch.device | None, cls: TorchifiedClass | None) -> Any:
    """A pickled proxy, where it is loaded: a device it recorded that this process lacks (a
    CUDA device, loaded on a machine without it) is forgotten, as if no tensor had been
    passed to it yet, so its arrays read back on torch's default device until the next call."""
    if device is not None and not _present(device):
        device = None
    return proxy(target, options, device, cls)


def _present(device: torch.device) -> bool:
    try:
        torch.empty(0, device=device)
    except Exception:  # each backend says "absent" its own way: AssertionError, RuntimeError, ...
        return False
    return True
