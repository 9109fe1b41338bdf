"""``torchify``: a tensor-in, tensor-out view of a NumPy/SciPy module, class or object.

Real legacy code comes as modules and estimator objects, not one function at a time:
``ndi = ac.torchify(scipy.ndimage)`` makes every public callable of the module take and
return tensors, wrapped on first access and cached; ``ac.torchify(SomeEstimator)(...)``
builds an object whose methods take tensors and whose fitted arrays read back as tensors.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any, Unpack

import numpy as np

from autoconvert._adapters._adapter import Adapter, Bracket
from autoconvert._adapters._numpy import CheckedAt
from autoconvert._adapters._table import adapter_for
from autoconvert._conversions._tree import StandIn
from autoconvert._decorators._decorators import wrap_pair
from autoconvert._gradients._catalogue import builder_for, differentiable
from autoconvert._interpreter._plan import Plan
from autoconvert._interpreter._routes import Description, Route, Routed, described
from autoconvert._options._options import (
    DEFAULTS,
    PAIR_DEFAULTS,
    TorchifyOptions,
    TorchifySettings,
    gives_way,
    settings_of,
    shows_options,
    validate,
)
from autoconvert._partials import binds_arguments, rebound
from autoconvert._spec._signature import GENERATOR_FUNCTION, deferred_kind

from ._building import Builder, Factory
from ._cupy import CupyRoute, declined_options, installed, twin_of
from ._native import Natively, native_route, refused
from ._proxies import (
    PLAIN_TYPES,
    ProxyingPlan,
    TorchifiedClass,
    TorchifiedObject,
    proxy,
    torchified_function,
)


def torchify(target: Any, **options: Unpack[TorchifyOptions]) -> Any:
    """A tensor-in, tensor-out view of a module, a class, or an object.

    Args:
        target: a module (``scipy.ndimage``, ``numpy``), a class (an estimator written
            for NumPy), or an instance of one.
        **options: the options of ``accepts_numpy`` (``copy``, ``writeback``, ``grad``,
            ``nested``, ``sparse``, ``widen_float16``, ``callbacks``: callables given to
            the view's functions take tensors) and ``returns_tensor`` (``device``,
            ``dtype``, ``sparse_layout``) for every call made through the view. For SciPy's
            modules, classes and objects ``widen_float16`` defaults to True: float16
            tensors reach SciPy as float32 and results come back as float16. ``native``:
            for a module's functions that SciPy runs on torch tensors itself (its array API
            mode, ``SCIPY_ARRAY_API=1``), ``"auto"`` hands a call's tensors to SciPy as they
            are (gradients kept, on their device), True refuses the other functions, False
            converts every call. ``array_module``: where a call's tensors live on a CUDA
            device, ``"auto"`` runs a module's function on CuPy's version of it (``cupyx.scipy``,
            ``cupy``) on the tensors' own memory, where CuPy is installed and mirrors it, and
            the host path otherwise; ``"numpy"`` always takes the host path; ``"cupy"`` takes a
            function written for CuPy (or a module CuPy mirrors) and refuses calls that cannot
            run there.

    Returns:
        (Typed ``Any``: what a view holds is only known when an attribute is read.) For a module, a module whose public callables take tensors and return tensors on
        the caller's device (submodules and classes torchified on access, everything else
        passed through). For a class, a callable building torchified instances. For an
        instance, a proxy: methods take and return tensors (a method returning the object
        itself returns the proxy, so ``fit(...).predict(...)`` chains), array attributes
        read back as tensors on the device of the tensors most recently passed to it (torch's
        default device before any), as do results of methods called without tensors, and
        ``proxy.__wrapped__`` is the original object. What already takes tensors, a torchified
        module, class or object, or a torch op ``numpy_op`` made (a torchified module's function
        with a gradient rule is one), is returned as it is, its gradient kept.

    Example:
        >>> import scipy.ndimage, torch, autoconvert as ac
        >>> ndi = ac.torchify(scipy.ndimage)
        >>> ndi.uniform_filter(torch.arange(5.0), size=3)
        tensor([0.3333, 1.0000, 2.0000, 3.0000, 3.6667], dtype=torch.float64)
    """
    own, checked = settings_of(TorchifySettings, validate(options, "torchify"))
    if isinstance(target, (TorchifiedModule, TorchifiedClass, TorchifiedObject)) or _torch_op(target):
        return target
    if binds_arguments(target):  # its bound arguments are arguments, converted at each call
        return rebound(target, torchify(target.func, **options))
    adapter = adapter_for(target)
    written_for_cupy = own.array_module == "cupy" and _only_cupy(target, adapter, own.native, checked)
    if own.native is True:
        _only_native(target, adapter)
    given = {**PAIR_DEFAULTS, **adapter.torchify_defaults, **checked}
    checked = {name: given[name] for name in DEFAULTS["torchify"] if name in given}  # in the table's order
    if written_for_cupy:
        written = CupyRoute(target, lambda: (target, None), strict=True, explicit=checked, adapter=adapter)
        return Routed(target, (written,), None)
    if isinstance(target, types.ModuleType):
        return TorchifiedModule(target, checked, own.native, own.array_module)
    if isinstance(target, type):
        return class_view(target, checked, own.native, adapter)
    return proxy(target, checked, None)


def _torch_op(target: Any) -> bool:
    """Whether ``target`` is a torch op numpy_op made (a torchified module's function with a
    gradient rule is one): it takes tensors, and converting them first would drop its gradient."""
    description = described(target)
    return description is not None and description.torch_op


def class_view(cls: type, options: dict[str, Any], native: str | bool, adapter: Adapter) -> TorchifiedClass:
    """The torchified class ``cls``, taking its library's own torch path where ``native``
    asks and that path is on (see _native.Natively)."""
    off = adapter.torch_mode()
    natively = None if native is False or off is not None else Natively(cls, options, native)
    if natively is not None:
        return TorchifiedClass(cls, options, natively, builder=_builder(cls, options))
    plans = functools.partial(_class_function_plan, cls, adapter, native, off)
    kept = functools.partial(_method_kept, cls, adapter, native, off)
    return TorchifiedClass(cls, options, None, plans, kept, builder=_builder(cls, options))


def _builder(fn: Any, options: dict[str, Any]) -> Builder | None:
    """The builder of ``fn``, a class or a factory the gradient catalogue has (see _building),
    whose objects' calls keep the gradient of what built them; None for others, and where
    torchify's options write into the arguments."""
    built = None if gives_way("the gradient catalogue", options) else builder_for(fn)
    return None if built is None else Builder(built, options)


def _class_function_plan(cls: type, adapter: Adapter, native: str | bool, off: str | None, fn: Any) -> Any:
    """The plan of ``fn``, a static or class method of ``cls`` torchified without its library's
    own torch path: where the library declares one for it, explain's note (as for a module's
    function, see _route) and the gradient warning say how to take it."""
    if adapter.declared_torch_path(fn) is not None:
        return FunctionPlan
    name = f"{cls.__qualname__}.{getattr(fn, '__name__', '')}"
    notes = () if native is False else (f"{adapter.name}'s own torch path is not taken: {off}",)
    return functools.partial(FunctionPlan, notes=notes, kept_natively=_keeps_natively(adapter, name, native, off))


def _method_kept(cls: type, adapter: Adapter, native: str | bool, off: str | None, fn: Any) -> str | None:
    """How the library's own torch path keeps the gradient of ``fn``, a method of ``cls``'s
    objects, where the library declares one (None where it does not)."""
    if adapter.declared_torch_path(fn) is not None:
        return None
    return _keeps_natively(adapter, f"{cls.__qualname__}.{getattr(fn, '__name__', '')}", native, off)


def _only_native(target: Any, adapter: Adapter) -> None:
    """``native=True``'s checks of its target: a module or a class, of a library whose own
    torch path is on; a class it declares that path for (itself or one of its functions)."""
    if not isinstance(target, (types.ModuleType, type)):
        raise TypeError(
            f"autoconvert.torchify(native=True) takes a module or a class, whose functions its library may run on "
            f"torch tensors itself; got {type(target).__name__} {target!r}. Fix: torchify it without native=True"
        )
    name = target.__name__ if isinstance(target, types.ModuleType) else f"{target.__module__}.{target.__qualname__}"
    off = adapter.torch_mode()
    if off is not None:
        raise ValueError(f"autoconvert.torchify(native=True): {name} has no torch path of its own: {off}")
    if isinstance(target, type):
        why = adapter.torch_path(target)
        functions = (getattr(f, "__func__", f) for f in vars(target).values())
        if why is not None and not any(callable(f) and adapter.torch_path(f) is None for f in functions):
            raise refused(adapter, f"{why}, and none for any of its methods", target.__module__, target.__qualname__)


def _only_cupy(target: Any, adapter: Adapter, native: str | bool, explicit: dict[str, Any]) -> bool:
    """``array_module="cupy"``'s checks of its target and options: CuPy installed, options it
    can honour, and a module CuPy mirrors or a function (True: written for CuPy, called as it is)."""
    where = "autoconvert.torchify(array_module='cupy')"
    if native is True:
        raise ValueError(f"{where}: native=True asks for SciPy's own torch path instead. Fix: pass one of them")
    honoured = declined_options(explicit)
    if honoured is not None:
        raise ValueError(f"{where}: {honoured}, CuPy's path cannot. Fix: pass one of them")
    module = isinstance(target, types.ModuleType)
    if module and adapter.cupy_module(target.__name__) is None:
        raise ValueError(f"{where}: CuPy mirrors no function of {target.__name__}. Fix: torchify it without")
    if not module and (isinstance(target, type) or not callable(target)):
        raise TypeError(
            f"{where} takes a module CuPy mirrors or a function written for CuPy; got {type(target).__name__} "
            f"{target!r}. Fix: torchify it without array_module='cupy'"
        )
    if not installed():
        raise ValueError(f"{where}: CuPy is not installed. Fix: install the CuPy package for your CUDA")
    return not module


class FunctionPlan(ProxyingPlan):
    """The plan of a torchified module's function: a ufunc's methods convert as the ufunc does.
    ``notes``: why the function converts rather than take another route (its library's own
    torch path, CuPy's), for ``explain``; ``kept_natively``: how its library's own torch path
    would keep the gradient, where it declares one."""

    def __init__(
        self,
        func: Any,
        sides: dict[str, dict[str, Any]],
        package: str,
        own: TorchifiedClass | None = None,
        *,
        notes: tuple[str, ...] = (),
        kept_natively: str | None = None,
    ) -> None:
        self.notes, self.kept_natively = notes, kept_natively
        super().__init__(func, sides, package, own)

    def remade(self) -> Callable[[Any, dict[str, dict[str, Any]]], Plan]:
        return functools.partial(
            type(self), package=self.package, own=self.own, notes=self.notes, kept_natively=self.kept_natively
        )

    def keeps_gradient(self) -> str:
        return self.kept_natively or super().keeps_gradient()

    def members(self, wrapped: Any) -> dict[str, Any]:
        if not isinstance(wrapped, np.ufunc):
            return {}
        return {
            name: _UfuncMethod(wrapped, name, self.options)
            for name in ("accumulate", "at", "outer", "reduce", "reduceat")
        }


class _UfuncMethod:
    """A method of a torchified ufunc (``tnp.add.at``, ``tnp.subtract.outer``), converted as
    the ufunc is, wrapped on first access."""

    def __init__(self, ufunc: np.ufunc, name: str, options: dict[str, Any]) -> None:
        self.method = CheckedAt(ufunc) if name == "at" else getattr(ufunc, name)
        self.options: dict[str, Any] = options
        self.pair: Any = None

    def __get__(self, function: Any, owner: Any = None) -> Any:
        if function is None:
            return self
        if self.pair is None:
            self.pair = wrap_pair(self.method, self.options)
        return self.pair


def _view(value: Any, view: TorchifiedModule, name: str) -> Any:
    """What a torchified module, ``view``, shows for its module's attribute ``name``, ``value``."""
    own = view.__dict__
    options, native, package = own["_self_options"], own["_self_native"], view.__name__
    if isinstance(value, types.ModuleType):
        return TorchifiedModule(value, options, native, own["_self_array_module"])
    if isinstance(value, type):
        return value if issubclass(value, PLAIN_TYPES) else class_view(value, options, native, adapter_for(value))
    if callable(value) and deferred_kind(value) in (None, GENERATOR_FUNCTION):  # coroutines pass through
        if inspect.isfunction(inspect.getattr_static(type(value), "__call__", None)):
            # An object of a Python class (scipy.stats.norm): its methods are its interface.
            return proxy(value, options, None)
        route, notes = _route(value, view, name)
        plan = functools.partial(FunctionPlan, notes=notes, kept_natively=_kept_natively(value, view, name))
        converting = differentiable(value, torchified_function(value, options, package, plan), options)
        builder = _builder(value, options)
        if builder is not None:
            converting = Factory(builder, converting)
        return converting if route is None else Routed(value, (route,), converting, view=view, name=name)
    return value


def _route(fn: Any, view: TorchifiedModule, name: str) -> tuple[Route | None, tuple[str, ...]]:
    """The route ``fn``, the function ``name`` of ``view``'s module, takes before the host
    conversion: the first of its library's own torch path (see _native) and CuPy's (see
    _cupy) it has; and why it takes none, for explain. ``native=True`` and
    ``array_module="cupy"`` refuse a function without theirs."""
    own = view.__dict__
    notes: tuple[str, ...] = ()
    if own["_self_native"] is not False:
        adapter = adapter_for(own["__wrapped__"])
        native = native_route(adapter, fn, own["_self_options"])
        if not isinstance(native, str):
            return native, notes
        if own["_self_native"] is True:
            raise refused(adapter, native, view.__name__, name)
        notes += (f"{adapter.name}'s own torch path is not taken: {native}",)
    cupy = _on_cupy(fn, view, name)
    return (None, (*notes, cupy)) if isinstance(cupy, str) else (cupy, notes)


def _kept_natively(fn: Any, view: TorchifiedModule, name: str) -> str | None:
    """How the gradient of a converting call of ``fn`` (the function ``name`` of ``view``'s
    module) is kept by its library's own torch path, where the library declares one."""
    own = view.__dict__
    adapter = adapter_for(own["__wrapped__"])
    if adapter.declared_torch_path(fn) is not None:
        return None
    native, off = own["_self_native"], adapter.torch_mode()
    return _keeps_natively(adapter, f"{view.__name__}.{name}", native, off, adapter.bracket(fn))


def _keeps_natively(
    adapter: Adapter, name: str, native: str | bool, off: str | None, bracket: Bracket | None = None
) -> str:
    """How the library's own torch path, declared for the function ``name``, keeps its gradient
    (``bracket``: the tuple of tensors it takes too, see ``Adapter.bracket``)."""
    runs = f"{adapter.name} runs {name} on torch tensors itself, gradients kept"
    if off is not None:
        taken = (
            "torchify the module without native=False"
            if native is False
            else "torchify's native='auto' (the default) takes that path"
        )
        return f"{adapter.switch_on or off}: {runs}, and {taken}"
    if native is False:
        return f"torchify the module with native='auto' (the default): {runs}"
    bracketed = "" if bracket is None else f" (its {bracket.name}: a tensor in every place)"
    return (
        f"pass tensors as its arguments{bracketed}, not inside lists or dicts, with no NumPy array beside them nor "
        f"a callable reading NumPy: {runs}"
    )


def _on_cupy(fn: Any, view: TorchifiedModule, name: str) -> Route | str:
    """The route of ``fn``, the function ``name`` of ``view``'s module, on CuPy where it
    mirrors the module (see _cupy), or why there is none, which ``array_module="cupy"``
    refuses."""
    own = view.__dict__
    mode, module, options = own["_self_array_module"], view.__name__, own["_self_options"]
    adapter = adapter_for(own["__wrapped__"])
    why: str | None
    if mode == "numpy":
        why = "array_module='numpy'"
    elif adapter.cupy_module(module) is None:
        why = f"CuPy mirrors no function of {module}"
    elif not installed():
        why = "CuPy is not installed"
    else:
        why = declined_options(options)
    if why is None:
        find = functools.partial(twin_of, adapter, module, name)
        why = find()[1] if mode == "cupy" else None  # refused now, not at the first call
        if why is None:
            return CupyRoute(
                fn, find, strict=mode == "cupy", explicit=options, adapter=adapter, module=module, name=name
            )
    if mode == "cupy":
        raise ValueError(
            f"autoconvert.torchify(array_module='cupy'): {module}.{name}: {why}. Fix: use the module "
            "torchified without array_module='cupy' for it"
        )
    return f"CuPy's path is not taken: {why}"


class TorchifiedModule(types.ModuleType, StandIn):
    """A module whose public callables take and return tensors, wrapped on first access."""

    def __init__(
        self, module: types.ModuleType, options: dict[str, Any], native: str | bool = "auto", array_module: str = "auto"
    ) -> None:
        super().__init__(module.__name__, module.__doc__)
        # Stored in the instance __dict__ under names no module attribute can have.
        self.__dict__["__wrapped__"] = module
        self.__dict__["_self_options"] = options
        self.__dict__["_self_native"] = native  # see torchify's native=
        self.__dict__["_self_array_module"] = array_module  # and array_module=

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.__dict__["__wrapped__"], name)
        if name.startswith("_"):  # private and dunder names are the module's own business
            return value
        view = _view(value, self, name)
        # Cached: the next access is a plain attribute read. setdefault: threads that read a
        # fresh name at once all get the first view made, one wrapper with one state.
        return self.__dict__.setdefault(name, view)

    def __dir__(self) -> list[str]:
        return dir(self.__dict__["__wrapped__"])

    def __repr__(self) -> str:
        return f"<torchified module {self.__name__!r}>"

    def __autoconvert_description__(self) -> Description:
        return Description(options=self.__dict__["_self_options"])

    def __reduce__(self) -> tuple[Any, ...]:
        return _module_by_name, (
            self.__name__,
            self.__dict__["_self_options"],
            self.__dict__["_self_native"],
            self.__dict__["_self_array_module"],
        )


def _module_by_name(
    name: str, options: dict[str, Any], native: str | bool = "auto", array_module: str = "auto"
) -> TorchifiedModule:
    return TorchifiedModule(importlib.import_module(name), options, native, array_module)


shows_options(torchify, [inspect.Parameter("target", inspect.Parameter.POSITIONAL_OR_KEYWORD)], "torchify")
