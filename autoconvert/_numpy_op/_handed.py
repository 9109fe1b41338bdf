"""What a ``numpy_op``'s NumPy rules (its backward, its jvp) are handed of the saved call.

Everything a rule gets is torch's: the caller's tensors, the result the caller holds, the
forward's residuals, and the incoming gradient or tangent, which autograd may hand to other
branches of the graph too. So a rule gets each as a zero-copy read-only view, as the forward
gets its arguments, and a write raises a ReadOnlyError naming the op, the rule and the
argument; with ``copy=True`` it gets private writable copies instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autoconvert._adapters._table import compiled_rejection
from autoconvert._conversions._memory import functorch_wrapped, untracked, untransformed
from autoconvert._conversions._to_numpy import tensor_to_array
from autoconvert._conversions._tree import Mapper
from autoconvert._errors import ReadOnlyError, keystr, message
from autoconvert._failures._failures import quoted, wrote_into_handed


def _values(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a rule reads it: a tensor in a container argument, which torch.func's
    transforms wrap though no derivative flows to it (see _ops._nested), unwrapped."""
    if not functorch_wrapped(t):
        return t
    with untransformed():  # else detach() wraps again
        return untracked(t)


def _read_only_view(t: torch.Tensor, ctx: Any) -> Any:
    a = tensor_to_array(_values(t), None)[0]
    if type(a) is np.ndarray:  # not a scipy.sparse object: always a new one
        a.setflags(False)  # type: ignore[call-arg, unused-ignore]  # write=False, positionally: see _spec._inputs
    return a


def _private_copy(t: torch.Tensor, ctx: Any) -> Any:
    return tensor_to_array(_values(t), True)[0]


_READ_ONLY = Mapper({torch.Tensor: _read_only_view})
_PRIVATE = Mapper({torch.Tensor: _private_copy})
_ARRAYS = Mapper({np.ndarray: lambda a, ctx: a})


def call_rule(
    rule: Callable[..., Any],
    first: Any,
    args: Any,
    kwargs: dict[str, Any],
    saved: dict[str, Any],
    *,
    role: str,
    op: str,
    private: bool,
) -> Any:
    """``rule(first, *args, **saved, **kwargs)`` with every tensor in them as an array:
    read-only views, or with ``private`` writable copies of their own; ``saved``: the output
    and residuals, by keyword. ``role`` (``"backward"``, ``"jvp"``) and ``op`` (the op's name)
    say whose write was refused."""
    convert = _PRIVATE if private else _READ_ONLY
    first, args = convert(first, None), [convert(a, None) for a in args]
    saved = {k: convert(v, None) for k, v in saved.items()}
    if kwargs:
        kwargs = convert(kwargs, None)
    try:
        return rule(first, *args, **saved, **kwargs)
    except Exception as error:
        if private:
            raise
        paths = _written(error, rule, (first, *args), {**saved, **kwargs})
        if paths is None:
            raise
        raise _refused(error, role, op, paths) from error


def _refused(error: Exception, role: str, op: str, paths: list[str]) -> ReadOnlyError:
    where = f"the {role}'s argument {' or '.join(paths)}" if paths else f"the {role}"
    given = "gradient" if role == "backward" else "tangent"
    copied = f"{paths[0]}.copy()" if len(paths) == 1 and paths[0].isidentifier() else "np.array(...)"
    return ReadOnlyError(
        message(
            op,
            where,
            f"was written into; a numpy_op's {role} is handed read-only views of the call's "
            f"tensors, its result, its residuals and the incoming {given}, so that it never changes the "
            "caller's tensors, the result the caller holds or what torch hands other parts of the graph",
            quoted(error),
            f"write into a copy made in the {role} ({copied}), or pass copy=True to autoconvert.numpy_op "
            "to hand its NumPy functions private writable copies",
        )
    )


def _written(
    error: Exception, rule: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[str] | None:
    """Where a rule's ``error`` is its refusal to write into an array it was handed, the
    paths of the arrays it may have hit; None where it is some other error (the rule's own, or
    a write into an array it made)."""
    arrays = [
        (keystr(name, path), a)
        for name, value in _by_name(rule, args, kwargs)
        for path, a in _ARRAYS.leaves_with_paths(value)
    ]
    if compiled_rejection(error) is not None:  # numba and OpenCV do not say which array: every one handed
        return [path for path, _ in arrays]
    if not isinstance(error, (ValueError, TypeError)):  # how NumPy and Python's buffers refuse
        return None
    return wrote_into_handed(error, arrays, kwargs)


def _by_name(rule: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """The values a rule was called with, by its own parameter names where its signature binds
    them (``**kwargs`` by their keys), else by position."""
    try:
        bound = inspect.signature(rule).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return [(f"argument {i}", v) for i, v in enumerate(args)] + list(kwargs.items())
    named: list[tuple[str, Any]] = []
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            named += [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named += list(value.items())
        else:
            named.append((name, value))
    return named
