"""The four decorators: each applied once, fused with the other direction's wrapper where it sits on one.

Every decorator works bare (``@accepts_numpy``) and called (``@accepts_numpy(copy=True)``),
on anything callable wrapt can wrap. An input decorator stacked directly on an output
decorator (either order) fuses into one wrapper with one plan: one call layer, and the
output side sees the caller's original tensors even though the function saw arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, Protocol, TypeVar, overload

import torch

from autoconvert._escape import compiling, opaque, unseen
from autoconvert._interpreter._plan import Plan
from autoconvert._interpreter._routes import plan_of
from autoconvert._interpreter._wrapper import is_wrapper, wrap
from autoconvert._options._checks import Compile, DeviceLike, DtypeLike, Grad, Names, Sparse, Transfers
from autoconvert._options._options import (
    FUNC,
    INPUT_SIDE,
    OUTPUT_SIDE,
    check_callable,
    shows_options,
    validate,
)
from autoconvert._partials import binds_arguments, rebound
from autoconvert._spec._signature import Parameters, function_name, refuse_unknown

# Typing: an input decorator changes what the parameters accept (a tensor where an array
# is annotated), which no overload can say, so it keeps the return type and accepts any
# arguments; an output decorator changes the result, so it keeps the parameters and returns
# Any. Not Tensor for a function returning an ndarray: stacked on an input decorator's
# Callable[..., R], that overload would match ambiguously, and mypy --strict then calls the
# result untyped. autoconvert.mypy_plugin rewrites the function's own signature instead; it
# finds the options' forms by the names of the protocols below, hence classes, not Callables.
P = ParamSpec("P")
R = TypeVar("R")


class AcceptsNumpy(Protocol):
    """What ``accepts_numpy(...)`` with options returns: the decorator it configures."""

    def __call__(self, func: Callable[P, R], /) -> Callable[..., R]: ...


class ReturnsTensor(Protocol):
    """What ``returns_tensor(...)`` with options returns: the decorator it configures."""

    def __call__(self, func: Callable[P, R], /) -> Callable[P, Any]: ...


class AcceptsTensor(Protocol):
    """What ``accepts_tensor(...)`` with options returns: the decorator it configures."""

    def __call__(self, func: Callable[P, R], /) -> Callable[..., R]: ...


class ReturnsNumpy(Protocol):
    """What ``returns_numpy(...)`` with options returns: the decorator it configures."""

    def __call__(self, func: Callable[P, R], /) -> Callable[P, Any]: ...


_INPUT_SIDES = ("accepts_numpy", "accepts_tensor")


def _decorate(side: str, func: Any, options: dict[str, Any], *, own_names: bool = True) -> Any:
    """Apply one decorator; fuse with an autoconvert wrapper of the other direction.
    ``own_names``: ``out_params`` names this function's parameters (checked against them)."""
    options = validate(options, side)

    def apply(func: Any) -> Any:
        if compiling():  # pragma: no cover - runs under dynamo, unseen by coverage
            return opaque(apply, func)
        if binds_arguments(func):  # its bound arguments are arguments, converted at each call
            return rebound(func, apply(func.func))
        check_callable(func, side)
        if own_names and options.get("out_params"):
            _check_out_params(func, options["out_params"], side)
        if is_wrapper(func):
            sides = plan_of(func).sides
            has_input = any(s in sides for s in _INPUT_SIDES)
            # adapt stacks, never fuses
            if "adapt" not in sides and side not in sides and (side in _INPUT_SIDES) != has_input:
                return wrap(func.__wrapped__, Plan(func.__wrapped__, {**sides, side: options}))
        return wrap(func, Plan(func, {side: options}))

    return apply if func is None else apply(func)


def for_library(side: str, func: Any, options: dict[str, Any]) -> Any:
    """One decorator with options chosen for a whole library (torchify's): its ``out_params``
    name what the library's functions may take, not necessarily this one's parameters."""
    return _decorate(side, func, options, own_names=False)


def wrap_pair(fn: Any, options: dict[str, Any]) -> Any:
    """``returns_tensor(accepts_numpy(fn))``, each side given its share of ``options``: built
    out of dynamo's sight (see _escape.unseen), as proxies build them on first use."""
    return unseen(_pair, fn, options)


def _pair(fn: Any, options: dict[str, Any]) -> Any:
    return for_library("returns_tensor", for_library("accepts_numpy", fn, inputs_of(options)), outputs_of(options))


def inputs_of(options: dict[str, Any]) -> dict[str, Any]:
    """The input side's share of ``options`` (torchify's, numpy_op's: both sides' together)."""
    return {k: v for k, v in options.items() if k in INPUT_SIDE}


def outputs_of(options: dict[str, Any]) -> dict[str, Any]:
    """The output side's share of ``options``."""
    return {k: v for k, v in options.items() if k in OUTPUT_SIDE}


def replanned(pair: Any, plan: Callable[[Any, dict[str, dict[str, Any]]], Plan]) -> Any:
    """``pair`` (see wrap_pair) wrapped again, with the plan ``plan`` makes of its function and
    sides: built out of dynamo's sight, as wrap_pair's."""
    return unseen(_replanned, pair, plan)


def _replanned(pair: Any, plan: Callable[[Any, dict[str, dict[str, Any]]], Plan]) -> Any:
    if binds_arguments(pair):  # a partial's pair: its function's, the bound arguments kept
        return rebound(pair, _replanned(pair.func, plan))
    return wrap(pair.__wrapped__, plan(pair.__wrapped__, plan_of(pair).sides))


def _check_out_params(func: Any, names: tuple[str, ...], side: str) -> None:
    """out_params= names the function's parameters, checked as only=/exclude= are: where its
    signature is known and takes no ``**kwargs`` (which would take any name)."""
    target = func.__wrapped__ if is_wrapper(func) else func
    params = Parameters(target)
    if params.known and params.varkw is None:
        refuse_unknown(params, frozenset(names), f"{side}() on {function_name(target)}")


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
    compile: Compile = "auto",
    out_params: str | Iterable[str] = (),
) -> AcceptsNumpy: ...
def accepts_numpy(func: Any = None, /, **options: Any) -> Any:
    """Hand the function NumPy arrays wherever the caller passed tensors.

    Every ``torch.Tensor`` among the arguments (inside lists, tuples, dicts, namedtuples
    and dataclasses too) reaches the function as a ``numpy.ndarray``; everything else
    reaches it untouched, as the same object.

    Args:
        copy: ``None`` shares memory and copies only when unavoidable (a GPU tensor, a
            dtype NumPy lacks such as bfloat16, a conjugate bit); ``True`` gives private
            writable copies; ``False`` never copies and raises ``CopyError``.
        writeback: make the arrays writable and copy what the function writes into them
            back into the caller's tensors, whatever their device, even if it raises.
        grad: for arguments that require grad while grad mode is on: ``"warn"`` once per
            function (``GradientWarning``), ``"detach"`` silently, ``"error"``
            (``GradientError``).
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
            ``a.base``) and raise ``ReadOnlyError`` naming it. One copy and one
            comparison per argument.
        transfers: the transfer guard for this function's copies between devices:
            ``"allow"``, ``"log"`` (the ``autoconvert`` logger), ``"warn"``
            (``TransferWarning``) or ``"error"`` (``TransferError``, before the copy).
        callbacks: callables among the arguments are written in torch: NumPy code calling
            them hands them tensors (on the device of the call's tensors) and gets their
            tensor results back as arrays (``scipy.optimize.minimize(f, x0)`` with ``f`` using
            autograd). NumPy's and SciPy's own functions are handed over as they are.
        out_params: the parameters the function writes its results into (``"out"``): a
            tensor passed there is handed over writable (its own memory on the CPU, else a
            copy written back after the call), and a result that is that array comes back
            as the caller's tensor itself. Every other argument stays read-only.

    Unless ``copy=True`` or ``writeback=True``, the arrays are read-only on every device;
    a write raises ``ReadOnlyError`` (a ``ValueError``) naming both fixes.

    Raises:
        ConversionError: a tensor NumPy cannot hold (quantized, nested, meta), or a sparse
            tensor with ``writeback=True`` (sparse tensors otherwise become scipy.sparse arrays).
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
) -> ReturnsTensor: ...
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
            always gives memory nothing else holds; ``False`` raises ``CopyError``
            when a copy is needed.
        nested: look inside tuples, lists, dicts, namedtuples and dataclasses.
        transfers: the transfer guard, as for ``accepts_numpy``.

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
) -> AcceptsTensor: ...
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
            ``True`` gives private copies; ``False`` raises ``CopyError`` instead.
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
) -> ReturnsNumpy: ...
def returns_numpy(func: Any = None, /, **options: Any) -> Any:
    """Turn the function's tensor results into NumPy arrays: detached, on the host, widened.

    Args:
        copy: ``None`` shares a CPU tensor's memory (as ``Tensor.numpy()`` does) and
            copies only when needed; ``True`` always copies; ``False`` raises
            ``CopyError`` when a copy is needed.
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


for _decorator in (accepts_numpy, returns_tensor, accepts_tensor, returns_numpy):
    shows_options(_decorator, [FUNC], _decorator.__name__)
