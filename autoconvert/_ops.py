"""``numpy_op``: a NumPy function that lives in a torch graph, with a NumPy backward.

Wrapping NumPy code cuts the autograd graph. Given the vector-Jacobian product as a NumPy
function, ``numpy_op`` makes the wrapped function differentiable: a ``torch.autograd.Function``
whose forward is ``returns_tensor(accepts_numpy(fn))`` and whose backward calls the NumPy
backward with arrays and returns gradients on each input's own device and dtype.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch._C import _functions  # DelayedError: what once_differentiable uses

from ._decorators import to_numpy, to_tensor
from ._errors import ConversionError, message
from ._options import validate
from ._plan import DEFAULTS, function_name
from ._torchify import wrap_pair

_INPUT_OPTIONS = frozenset(DEFAULTS["accepts_numpy"]) - {"only", "exclude", "writeback", "grad"}
_OUTPUT_OPTIONS = frozenset(DEFAULTS["returns_tensor"])


def numpy_op(
    fn: Callable[..., Any] | None = None, /, *, backward: Callable[..., Any] | None = None, **options: Any
) -> Any:
    """Make a NumPy function a differentiable torch operation.

    Args:
        fn: the NumPy function (bare use), or omitted (``@numpy_op(backward=...)``).
        backward: ``backward(grad, *args, output=output, **kwargs)``, all as arrays:
            ``grad`` is the output's gradient (a tuple when ``fn`` returns a tuple), ``args``
            and ``kwargs`` the call's arguments, ``output`` the forward result. It returns
            one gradient per positional tensor argument: a single array when there is one,
            a tuple otherwise, ``None`` where no gradient flows. Without it, the result is
            ``returns_tensor(accepts_numpy(fn))``.
        **options: the options of ``accepts_numpy`` (``copy``, ``nested``, ``sparse``) and
            ``returns_tensor`` (``device``, ``dtype``, ``sparse_layout``).

    The forward's results must be a tensor or a tuple of tensors; integer and bool results
    carry no gradient. Gradients reach the inputs on their own device and dtype. Double
    backward raises. Inside ``torch.compile`` the call is a graph break.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> sin = ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x))
        >>> x = torch.tensor([0.0, 1.0], requires_grad=True)
        >>> sin(x).sum().backward()
        >>> x.grad
        tensor([1.0000, 0.5403])
    """
    checked = validate(options, _INPUT_OPTIONS | _OUTPUT_OPTIONS, "autoconvert.numpy_op()")
    if fn is None:
        return lambda f: numpy_op(f, backward=backward, **checked)
    if backward is None:
        return wrap_pair(fn, checked)  # the plain pair, grad="warn" and all
    # The gradient flows through the Function, so the forward detaches without a word.
    forward = wrap_pair(fn, {**checked, "grad": "detach"})
    spec = _Spec(forward, backward, function_name(fn))

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        if _compiling():  # dynamo must not trace the Function's NumPy forward: a graph break
            return _opaque_apply(spec, kwargs, *args)
        return _NumpyFunction.apply(spec, kwargs, *args)  # type: ignore[no-untyped-call]

    return op


_compiling = torch.compiler.is_compiling
_disabled_apply: Callable[..., Any] | None = None


def _opaque_apply(*args: Any) -> Any:  # pragma: no cover - runs under dynamo, unseen by coverage
    global _disabled_apply
    if _disabled_apply is None:
        _disabled_apply = torch.compiler.disable(_apply, recursive=True)  # type: ignore[no-untyped-call]
    return _disabled_apply(*args)


def _apply(*args: Any) -> Any:  # pragma: no cover - runs under dynamo, unseen by coverage
    return _NumpyFunction.apply(*args)  # type: ignore[no-untyped-call]


class _Spec:
    """What one numpy_op knows: its forward, its NumPy backward, its name for messages."""

    __slots__ = ("backward", "forward", "name")

    def __init__(self, forward: Callable[..., Any], backward: Callable[..., Any], name: str) -> None:
        self.forward = forward
        self.backward = backward
        self.name = name


class _NumpyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, spec: _Spec, kwargs: dict[str, Any], *args: Any) -> Any:
        result = spec.forward(*args, **kwargs)
        results = result if isinstance(result, tuple) else (result,)
        if not all(isinstance(r, torch.Tensor) for r in results):
            found = ", ".join(type(r).__name__ for r in results)
            raise ConversionError(
                message(
                    spec.name,
                    "the result",
                    "must be a tensor or a tuple of tensors for autograd to track it",
                    found,
                    "return arrays (or a tuple of them) from the NumPy function",
                )
            )
        ctx.mark_non_differentiable(*(r for r in results if not (r.is_floating_point() or r.is_complex())))
        # Tensors go through save_for_backward (version checks, no reference cycles); the
        # other arguments stay in a template with the tensors' places marked.
        ctx.spec, ctx.kwargs, ctx.tuple_result = spec, kwargs, isinstance(result, tuple)
        ctx.template = [_TENSOR if isinstance(a, torch.Tensor) else a for a in args]
        ctx.save_for_backward(*(a for a in args if isinstance(a, torch.Tensor)), *results)
        return result

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        with torch.no_grad():
            gradients = _NumpyFunction._gradients(ctx, grads)
        if not torch.is_grad_enabled():
            return gradients
        # create_graph=True: a second backward through NumPy code is impossible. Like
        # once_differentiable, but also when the incoming gradients don't require grad,
        # the gradients get a node that raises a clear error if it is ever reached.
        tensors = [g for g in gradients if g is not None]
        delayed = _functions.DelayedError(
            f"{ctx.spec.name}: double backward is not supported: its backward is NumPy code".encode(), len(tensors)
        )
        made = delayed(*[g.detach().requires_grad_() for g in tensors])
        raising = iter((made,) if isinstance(made, torch.Tensor) else made)  # one input: a bare tensor
        return tuple(None if g is None else next(raising) for g in gradients)

    @staticmethod
    def _gradients(ctx: Any, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        spec: _Spec = ctx.spec
        saved = iter(ctx.saved_tensors)
        call_args = [next(saved) if a is _TENSOR else a for a in ctx.template]
        tensor_args = [a for a in call_args if isinstance(a, torch.Tensor)]
        outputs = tuple(saved)
        args = [to_numpy(a) for a in call_args]
        output = to_numpy(outputs if ctx.tuple_result else outputs[0])
        grad = to_numpy(tuple(grads) if ctx.tuple_result else grads[0])
        found = spec.backward(grad, *args, output=output, **to_numpy(ctx.kwargs))
        if len(tensor_args) == 1 and not isinstance(found, (tuple, list)):
            found = (found,)
        if not isinstance(found, (tuple, list)) or len(found) != len(tensor_args):
            raise ConversionError(
                message(
                    spec.name,
                    "the backward",
                    f"must return {len(tensor_args)} gradient(s), one per positional tensor argument",
                    f"{type(found).__name__} of {len(found) if isinstance(found, (tuple, list)) else 1}",
                    "return a single array for one tensor argument, else a tuple with a gradient (or None) for each",
                )
            )
        gradients = iter(found)
        out: list[Any] = [None, None]  # spec and kwargs take no gradient
        for a in call_args:
            g = next(gradients) if isinstance(a, torch.Tensor) else None
            # On the input's own device and dtype (a bfloat16 input gets a bfloat16 gradient).
            out.append(
                None
                if g is None
                else to_tensor(np.asarray(g), device=a.device, dtype=_inexact(a.dtype)).reshape(a.shape)
            )
        return tuple(out)


_TENSOR = object()  # a tensor argument's place in the saved template


def _inexact(dtype: torch.dtype) -> torch.dtype | None:
    """The cast for a gradient: to the input's dtype when that is floating or complex."""
    return dtype if dtype.is_floating_point or dtype.is_complex else None
