"""The four decorators and the two plain functions, on wrapt.

Every decorator works bare (``@accepts_numpy``) and called (``@accepts_numpy(copy=True)``),
on anything callable wrapt can wrap. An input decorator stacked directly on an output
decorator (either order) fuses into one wrapper with one plan: one call layer, and the
output side sees the caller's original tensors even though the function saw arrays.
"""

from __future__ import annotations

import copy
import inspect
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec, TypedDict, TypeVar, Unpack, cast, overload

import numpy as np
import torch
import wrapt
from numpy.typing import NDArray

from ._config import active
from ._escape import compiling, opaque
from ._grad import DETACH, GradPolicy
from ._options import (
    FUNC,
    DeviceLike,
    DtypeLike,
    Grad,
    Names,
    Sparse,
    Transfers,
    check_callable,
    policy_of,
    shows_options,
    validate,
)
from ._outputs import NumpyOutputs, TensorOutputs
from ._pickling import by_reference, locate, resolve, unwrap
from ._plan import Plan
from ._signature import _TENSORS, Parameters

# Typing: an input decorator changes what the parameters accept (a tensor where an array
# is annotated), so it keeps the return type and accepts any arguments; an output
# decorator changes the result, so it keeps the parameters and returns Any. Not Tensor for
# a function returning an ndarray: stacked on an input decorator's Callable[..., R], that
# overload would match ambiguously, and mypy --strict then calls the result untyped.
P = ParamSpec("P")
R = TypeVar("R")


_INPUT_SIDES = ("accepts_numpy", "accepts_tensor")


class _BoundWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[type-arg, misc, unused-ignore]  # wrapt 1.x: untyped
    """A decorated method bound to an instance or class; pickles like a bound method."""

    _torchdynamo_disable = True  # see _Wrapper

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


class _Wrapper(wrapt.FunctionWrapper):  # type: ignore[type-arg, misc, unused-ignore]  # wrapt 1.x: untyped
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

    def __repr__(self) -> str:
        sides = ", ".join(
            f"{side}({', '.join(f'{k}={_shown(v)}' for k, v in options.items())})"
            for side, options in self._self_plan.sides.items()
        )
        return f"<autoconvert {sides} of {self.__wrapped__!r}>"

    def __reduce_ex__(self, protocol: object) -> Any:
        # By reference where the wrapped function's module holds this very wrapper (module-level
        # functions: multiprocessing spawn, DataLoader workers); otherwise rebuilt from the
        # wrapped callable and the options. A ufunc has no __module__ (NumPy 2.5), so the
        # wrapper, which forwards it, has none either: then only the recipe can serve.
        reference = by_reference(self, (getattr(self.__wrapped__, "__module__", None),))
        if reference is not None:
            return reference
        return _rebuild, (*locate(self.__wrapped__), self._self_plan.sides, self._self_plan.remade())

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
        return wrap(wrapped, type(self._self_plan)(wrapped, self._self_plan.sides))


def _shown(option: Any) -> str:
    """An option's value as a repr shows it: a device as the string it was given as."""
    return repr(str(option)) if isinstance(option, torch.device) else repr(option)


def wrap(wrapped: Any, plan: Plan) -> _Wrapper:
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
    if flat is not None:  # the flat call's own __call__ form: one frame fewer
        direct, constants = flat.bind(wrapped)
        members: dict[str, Any] = {"__call__": direct, "__module__": __name__}
        if type(wrapped) is types.FunctionType:
            method = flat.method(wrapped)
            members["_self_method"] = staticmethod(method)
            members["__get__"] = _binding(method)
    else:

        def __call__(self: _Wrapper, *args: Any, **kwargs: Any) -> Any:  # noqa: N807 - the call hook
            return call(wrapped, instance, args, kwargs)

        members = {"__call__": __call__, "__module__": __name__}
        if type(wrapped) is types.FunctionType:
            # Made now, not by as_method on first use: torch 2.4's dynamo, tracing a torchified
            # proxy's first method lookup, loses a closure made there (it came back None).
            def method(instance: Any, *args: Any, **kwargs: Any) -> Any:
                return call(types.MethodType(wrapped, instance), instance, args, kwargs)

            members["_self_method"] = staticmethod(method)
    Wrapper = type("Wrapper", (_Wrapper,), {**members, **plan.members(wrapped)})  # noqa: N806 - a class

    # wrapt's own constructor, and the plan set after: a Python __init__ of ours would be a
    # frame dynamo inspects (after a graph break) while wrapt 1.x's proxy still refuses isinstance.
    wrapper: _Wrapper = Wrapper(wrapped, call)
    wrapper._self_plan = plan
    # What wrapt's C __call__ would pass as `instance`, decided once: a bound method
    # wrapped directly carries its instance in __self__.
    if wrapper._self_binding in ("function", "instancemethod", "classmethod", "callable"):
        instance = constants["instance"] = getattr(wrapped, "__self__", None)
    return wrapper


def _binding(method: Callable[..., Any]) -> Callable[..., Any]:
    """A wrapper's ``__get__``: ``method`` bound to an instance; wrapt's binding for the class."""
    bind = wrapt.FunctionWrapper.__get__

    def __get__(self: _Wrapper, instance: Any, owner: Any = None) -> Any:  # noqa: N807 - the descriptor hook
        if instance is None:
            return bind(self, instance, owner)
        return types.MethodType(method, instance)

    return __get__


def as_method(wrapper: _Wrapper) -> Callable[..., Any]:
    """``call(instance, *args, **kwargs)``: ``wrapper`` (of a plain function) called as a
    method of ``instance``, as ``instance.name(...)`` would call it, the instance never
    converted: the method form ``wrap`` made."""
    assert wrapper._self_method is not None  # wrap makes one for every plain function
    return wrapper._self_method


def _rebuild(holder: Any, hops: int, sides: dict[str, dict[str, Any]], kind: Callable[..., Plan] = Plan) -> _Wrapper:
    wrapped = unwrap(holder, hops)
    return wrap(wrapped, kind(wrapped, sides))


def is_wrapper(obj: object) -> bool:
    """Whether ``obj`` is a function decorated by autoconvert."""
    return isinstance(obj, _Wrapper)


def _decorate(side: str, func: Any, options: dict[str, Any]) -> Any:
    """Apply one decorator; fuse with an autoconvert wrapper of the other direction."""
    options = validate(options, side)

    def apply(func: Any) -> Any:
        if compiling():  # pragma: no cover - runs under dynamo, unseen by coverage
            return opaque(apply, func)
        check_callable(func, side)
        if isinstance(func, _Wrapper) and "adapt" not in func._self_plan.sides:  # adapt stacks, never fuses
            sides = func._self_plan.sides
            has_input = any(s in sides for s in _INPUT_SIDES)
            if side not in sides and (side in _INPUT_SIDES) != has_input:
                return wrap(func.__wrapped__, Plan(func.__wrapped__, {**sides, side: options}))
        return wrap(func, Plan(func, {side: options}))

    return apply if func is None else apply(func)


# --------------------------------------------------------------------------- decorators


@overload
def accepts_numpy(func: Callable[P, R], /) -> Callable[..., R]: ...
@overload
def accepts_numpy(
    *,
    copy: bool | None = None,
    writeback: bool = False,
    grad: Grad = "warn",
    only: Names = None,
    exclude: Names = None,
    nested: bool = True,
    sparse: Sparse = "array",
    widen_float16: bool = False,
    check_writes: bool = False,
    transfers: Transfers = "allow",
    callbacks: bool = False,
    out_params: str | Iterable[str] = (),
) -> Callable[[Callable[P, R]], Callable[..., R]]: ...
def accepts_numpy(func: Any = None, /, **options: Any) -> Any:
    """Hand the function NumPy arrays wherever the caller passed tensors.

    Every ``torch.Tensor`` among the arguments (inside lists, tuples, dicts, namedtuples
    and dataclasses too) reaches the function as a ``numpy.ndarray``; everything else
    reaches it untouched, as the same object.

    Args:
        copy: ``None`` shares memory and copies only when unavoidable (a GPU tensor, a
            dtype NumPy lacks such as bfloat16, a conjugate bit); ``True`` gives private
            writable copies; ``False`` never copies and raises [`CopyError`][autoconvert.CopyError].
        writeback: make the arrays writable and copy what the function writes into them
            back into the caller's tensors, whatever their device, even if it raises.
        grad: for arguments that require grad while grad mode is on: ``"warn"`` once per
            function ([`GradientWarning`][autoconvert.GradientWarning]), ``"detach"`` silently, ``"error"``
            ([`GradientError`][autoconvert.GradientError]).
        only: the parameter names to convert (checked against the signature now).
        exclude: the parameter names to leave alone.
        nested: look inside containers; ``False`` converts top-level arguments only.
        sparse: ``"array"`` (scipy.sparse arrays) or ``"matrix"`` (spmatrix) for sparse tensors.
        widen_float16: hand float16 tensors over as float32 (lossless), for code that rejects
            float16, such as most of scipy.ndimage and scipy.signal; with ``returns_tensor``,
            float32 results come back as float16 when every floating argument was float16.
        check_writes: for tests and debugging: keep a private copy of every CPU tensor
            argument, and after the call put back any the function changed through a route
            the read-only arrays cannot stop (``torch.from_numpy(a)`` then an in-place op,
            ``a.base``) and raise [`ReadOnlyError`][autoconvert.ReadOnlyError] naming it. One copy and one
            comparison per argument.
        transfers: the transfer guard for this function's copies between devices:
            ``"allow"``, ``"log"`` (the ``autoconvert`` logger), ``"warn"``
            ([`TransferWarning`][autoconvert.TransferWarning]) or ``"error"`` ([`TransferError`][autoconvert.TransferError], before the copy).
        callbacks: callables among the arguments are written in torch: NumPy code calling
            them hands them tensors (on the device of the call's tensors) and gets their
            tensor results back as arrays (``scipy.optimize.minimize(f, x0)`` with ``f`` using
            autograd). NumPy's and SciPy's own functions are handed over as they are.
        out_params: the parameters the function writes its results into (``"out"``): a
            tensor passed there is handed over writable (its own memory on the CPU, else a
            copy written back after the call), and a result that is that array comes back
            as the caller's tensor itself. Every other argument stays read-only.

    Unless ``copy=True`` or ``writeback=True``, the arrays are read-only on every device;
    a write raises [`ReadOnlyError`][autoconvert.ReadOnlyError] (a ``ValueError``) naming both fixes.

    Raises:
        ConversionError: a tensor NumPy cannot hold (sparse, quantized, nested, meta).
        TypeError: an unknown option, or ``only``/``exclude`` naming no parameter.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> @ac.accepts_numpy
        ... def total(a):
        ...     return float(np.sum(a))
        >>> total(torch.arange(4.0))
        6.0
    """
    return _decorate("accepts_numpy", func, options)


@overload
def returns_tensor(func: Callable[P, R], /) -> Callable[P, Any]: ...
@overload
def returns_tensor(
    *,
    device: DeviceLike = None,
    dtype: DtypeLike = None,
    copy: bool | None = None,
    nested: bool = True,
    sparse_layout: torch.layout | None = None,
    transfers: Transfers = "allow",
) -> Callable[[Callable[P, R]], Callable[P, Any]]: ...
def returns_tensor(func: Any = None, /, **options: Any) -> Any:
    """Turn the function's array and NumPy scalar results into tensors on the caller's device.

    Args:
        device: where results go; ``None`` is the device the call's tensor arguments
            share (``cuda:1`` stays ``cuda:1``; 0-d CPU tensors don't vote), or torch's
            default device when there are none.
        dtype: ``None`` keeps NumPy's dtype, except that results in float32/complex64
            return to bfloat16/float8/complex32 when every floating tensor argument had
            that dtype; ``"input"`` casts floating results to the tensor arguments'
            floating dtype; a ``torch.dtype`` casts floating results to it. Integer and
            bool results are never cast.
        copy: ``None`` shares memory where torch can (a writable, positively strided,
            native-byte-order array on the CPU) and otherwise copies once; ``True``
            always gives memory nothing else holds; ``False`` raises [`CopyError`][autoconvert.CopyError]
            when a copy is needed.
        nested: look inside tuples, lists, dicts, namedtuples and dataclasses.
        transfers: the transfer guard, as for [`accepts_numpy`][autoconvert.accepts_numpy].

    Raises:
        DeviceMismatchError: tensor arguments on different devices and no ``device=``.
        ConversionError: a result torch cannot hold (object, string, datetime,
            structured or longdouble arrays; masked arrays, whose mask would be lost).

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> @ac.returns_tensor
        ... @ac.accepts_numpy
        ... def flip(a):
        ...     return a[::-1]
        >>> flip(torch.arange(3))
        tensor([2, 1, 0])
    """
    return _decorate("returns_tensor", func, options)


@overload
def accepts_tensor(func: Callable[P, R], /) -> Callable[..., R]: ...
@overload
def accepts_tensor(
    *,
    device: DeviceLike = None,
    dtype: DtypeLike = None,
    copy: bool | None = None,
    only: Names = None,
    exclude: Names = None,
    nested: bool = True,
    sparse_layout: torch.layout | None = None,
    transfers: Transfers = "allow",
) -> Callable[[Callable[P, R]], Callable[..., R]]: ...
def accepts_tensor(func: Any = None, /, **options: Any) -> Any:
    """Hand the function tensors wherever the caller passed NumPy arrays or scalars.

    For torch code called from NumPy code: a torch objective inside
    ``scipy.optimize.minimize``, a torch model in a NumPy pipeline.

    Args:
        device: where the tensors go; ``None`` is torch's default device.
        dtype: a ``torch.dtype`` casts floating arrays to it; ``"input"`` casts them to
            the call's floating tensor arguments' dtype; integer arrays are never cast.
        copy: ``None`` shares memory with the arrays where torch can (on the CPU: the
            function's in-place writes reach them, as with ``torch.from_numpy``);
            ``True`` gives private copies; ``False`` raises [`CopyError`][autoconvert.CopyError] instead.
        only: the parameter names to convert.
        exclude: the parameter names to leave alone.
        nested: look inside containers.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> @ac.accepts_tensor
        ... def norm(x):
        ...     return torch.linalg.vector_norm(x).item()
        >>> norm(np.array([3.0, 4.0]))
        5.0
    """
    return _decorate("accepts_tensor", func, options)


@overload
def returns_numpy(func: Callable[P, R], /) -> Callable[P, Any]: ...
@overload
def returns_numpy(
    *, copy: bool | None = None, nested: bool = True, sparse: Sparse = "array", transfers: Transfers = "allow"
) -> Callable[[Callable[P, R]], Callable[P, Any]]: ...
def returns_numpy(func: Any = None, /, **options: Any) -> Any:
    """Turn the function's tensor results into NumPy arrays: detached, on the host, widened.

    Args:
        copy: ``None`` shares a CPU tensor's memory (as ``Tensor.numpy()`` does) and
            copies only when needed; ``True`` always copies; ``False`` raises
            [`CopyError`][autoconvert.CopyError] when a copy is needed.
        nested: look inside containers.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> @ac.returns_numpy
        ... def halve(x):
        ...     return torch.as_tensor(x, dtype=torch.bfloat16) / 2
        >>> halve(np.array([1.0, 3.0]))
        array([0.5, 1.5], dtype=float32)
    """
    return _decorate("returns_numpy", func, options)


# --------------------------------------------------------------------------- plain functions


def to_numpy(obj: Any, **options: Unpack[NumpyOptions]) -> Any:
    """``obj`` with every tensor in it as a NumPy array, for code that can't take a decorator.

    The conversion of [`returns_numpy`][autoconvert.returns_numpy]: detached silently (the call itself says
    the value leaves autograd), moved to the host, dtypes NumPy lacks widened.

    Args:
        obj: a tensor, or a container of them; other values pass through untouched.
        **options: ``copy``, ``nested`` and ``sparse``, as for [`returns_numpy`][autoconvert.returns_numpy]; ``grad``
            as for [`accepts_numpy`][autoconvert.accepts_numpy] (``"detach"``, the default, silently; ``"warn"``
            once per process; ``"error"`` refuses a tensor that requires grad while grad
            mode is on).

    Example:
        >>> import torch, autoconvert as ac
        >>> ac.to_numpy({"x": torch.ones(2, dtype=torch.bfloat16)})
        {'x': array([1., 1.], dtype=float32)}
    """
    if compiling():  # pragma: no cover - runs under dynamo, unseen by coverage
        return opaque(to_numpy, obj, **options)
    outputs, grad = _converter("to_numpy", options)
    converted = outputs.convert(obj, [], [], ((), {}, None))
    if grad.unsaid is not None:  # grad="warn": the warning names where the tensor was
        grad.say([f"obj{path}" for path, t in _TENSORS.leaves_with_paths(obj) if t is grad.unsaid])
    return converted


@overload
def to_tensor(obj: NDArray[Any] | np.generic, **options: Unpack[TensorOptions]) -> torch.Tensor: ...
@overload
def to_tensor(obj: Any, **options: Unpack[TensorOptions]) -> Any: ...
def to_tensor(obj: Any, **options: Any) -> Any:
    """``obj`` with every NumPy array and scalar in it as a tensor.

    Args:
        obj: an array, a NumPy scalar, or a container of them.
        **options: ``device`` (default: torch's default device), ``dtype`` (a
            ``torch.dtype`` casts floating arrays), ``copy`` and ``nested``, as for
            [`returns_tensor`][autoconvert.returns_tensor].

    Example:
        >>> import numpy as np, autoconvert as ac
        >>> ac.to_tensor([np.arange(2), np.float32(0.5)])
        [tensor([0, 1]), tensor(0.5000)]
    """
    if compiling():  # pragma: no cover - runs under dynamo, unseen by coverage
        return opaque(to_tensor, obj, **options)
    outputs, _ = _converter("to_tensor", options)
    return outputs.convert(obj, [], [], ((), {}, None))


class TensorOptions(TypedDict, total=False):
    """The options of ``to_tensor`` (those of ``returns_tensor``), for type checkers."""

    device: DeviceLike
    dtype: DtypeLike
    copy: bool | None
    nested: bool
    sparse_layout: torch.layout | None


class NumpyOptions(TypedDict, total=False):
    """The options of ``to_numpy`` (``returns_numpy``'s and ``grad``), for type checkers."""

    copy: bool | None
    nested: bool
    sparse: Sparse
    grad: Grad


#: to_numpy()'s grad policies: "warn" says so once per process, as a decorator does once.
_TO_NUMPY_GRAD = {mode: GradPolicy(mode, "autoconvert.to_numpy()") for mode in ("warn", "detach", "error")}


def _converter(kind: str, options: Mapping[str, Any]) -> tuple[Any, GradPolicy]:
    """``to_numpy``'s or ``to_tensor``'s output side (and grad policy) for these options in the
    active ``config``: built once per distinct set, so a call in a loop pays only the lookup.
    Options are validated when their set is first seen; a set that fails is not kept."""
    config = active()
    key: tuple[Any, ...] | None = (kind, tuple(options.items()), config.key if config is not None else ())
    try:
        return _CONVERTERS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable option value: validation names it
        key = None
    policy = policy_of(kind, config.options if config is not None else {}, validate(options, kind))
    if kind == "to_numpy":
        grad = _TO_NUMPY_GRAD[policy.grad]
        made: tuple[Any, GradPolicy] = (
            NumpyOutputs("autoconvert.to_numpy()", _NO_PARAMS, policy, grad, argument="obj"),
            grad,
        )
    else:
        made = (TensorOutputs("autoconvert.to_tensor()", _NO_PARAMS, policy, argument="obj"), DETACH)
    if key is not None:
        if len(_CONVERTERS) >= _MOST_CONVERTERS:  # a program uses a handful; never grow without bound
            _CONVERTERS.clear()
        _CONVERTERS[key] = made
    return made


_CONVERTERS: dict[Any, tuple[Any, GradPolicy]] = {}
_MOST_CONVERTERS = 256


_NO_PARAMS = Parameters(lambda: None)  # to_tensor() has no call arguments to name


for _decorator in (accepts_numpy, returns_tensor, accepts_tensor, returns_numpy):
    shows_options(_decorator, [FUNC], _decorator.__name__)
_OBJ = [inspect.Parameter("obj", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
shows_options(to_numpy, _OBJ, "to_numpy")
shows_options(to_tensor, _OBJ, "to_tensor")
