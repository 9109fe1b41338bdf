"""One catalogue rule: a SciPy function's vector-Jacobian product (and jvp) in NumPy.

A rule is written against the function's parameters by name, so a call's arguments, given by
position or keyword, are bound to the function's signature once per backward. It is told
which positional arguments are tensors, and computes gradients for those alone (a filter's
weights given as a NumPy array cost nothing).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from autoconvert._conversions._grad import Lost, either, gradient_lost
from autoconvert._errors import GradientError, GradientWarning, message


@dataclasses.dataclass(frozen=True)
class Call:
    """A call the rule differentiates: its arguments by name, defaults filled in, and its result."""

    arguments: Mapping[str, Any]
    output: Any

    def __getitem__(self, name: str) -> Any:
        return self.arguments[name]


#: ``vjp(call, grad, wanted)``: the gradient of each parameter named in ``wanted``, by name.
Vjp = Callable[[Call, Any, tuple[str, ...]], Mapping[str, Any]]
#: ``jvp(call, tangents)``: the result's tangent, given the tangents of the parameters by name.
Jvp = Callable[[Call, Mapping[str, Any]], Any]


@dataclasses.dataclass(frozen=True, eq=False)
class Rule:
    """The rule of ``name`` (``scipy.ndimage.gaussian_filter``): the parameters that take
    gradients (``takes``), the NumPy ``vjp`` and ``jvp`` (None: reverse mode only), and what it
    covers, in words (modes, orders), for explain and the docs. ``parameters``: the positional
    parameters' names of a function with no signature to read (a ufunc's). Complex arguments
    are refused but in ``complex_takes``."""

    name: str
    function: Any
    takes: tuple[str, ...]
    vjp: Vjp
    jvp: Jvp | None = None
    covers: str = ""
    parameters: tuple[str, ...] | None = None
    complex_takes: tuple[str, ...] = ()  #: the parameters whose complex arguments the rule covers (istft's Zxx)

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The function's signature, read at its first backward."""
        return inspect.signature(self.function)

    def describe(self) -> str:
        """The rule in explain's words."""
        covers = f"; {self.covers}" if self.covers else ""
        return f"the catalogue's rule for {self.name} (gradients in {', '.join(self.takes)}{covers})"

    def untaken(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Lost]:
        """The call's tensor arguments that lose a gradient (one they require, or a forward-mode
        tangent) where the rule gives none (``jv``'s order ``v``, ``simpson``'s ``x``), by name,
        with what each loses."""
        found = {}
        for name, value in self._given(args, kwargs).items():
            lost = None if name in self.takes else gradient_lost(value)
            if lost is not None:
                found[name] = lost
        return found

    def written_into(self, args: Sequence[Any], kwargs: dict[str, Any], kind: type) -> str | None:
        """The out-parameter (``output=``, ``out=``) the call hands a ``kind`` (a tensor) to
        write its result into, whose gradient the rule cannot give (None: none)."""
        arguments = self._given(args, kwargs)
        return next((n for n in ("output", "out") if isinstance(arguments.get(n), kind)), None)

    def _given(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Mapping[str, Any]:
        """The call's arguments by name, as given (defaults left out)."""
        if self.parameters is not None:
            return dict(zip(self.parameters, args, strict=False)) | kwargs
        try:
            return self.signature.bind(*args, **kwargs).arguments
        except TypeError:  # the call itself says what is wrong with its arguments
            return {}

    def backward(
        self, grad: Any, args: Sequence[Any], kwargs: dict[str, Any], output: Any, tensors: Sequence[bool]
    ) -> list[Any]:
        """numpy_op's backward: a gradient for each positional argument that is a tensor (``tensors``)."""
        call, names = self._bound(args, kwargs, output, tensors)
        wanted = tuple(n for n in names if n in self.takes)
        found = self.vjp(call, grad, wanted) if wanted else {}
        return [_forward_strides(found.get(n)) for n in names]

    def forward(
        self, tangents: Sequence[Any], args: Sequence[Any], kwargs: dict[str, Any], output: Any, tensors: Sequence[bool]
    ) -> Any:
        """numpy_op's jvp: the result's tangent, given one tangent per positional tensor argument."""
        assert self.jvp is not None  # asked only of rules with a jvp
        call, names = self._bound(args, kwargs, output, tensors)
        given = {n: t for n, t in zip(names, tangents, strict=True) if n in self.takes and t is not None}
        return _forward_strides(self.jvp(call, given))

    def _bound(
        self, args: Sequence[Any], kwargs: dict[str, Any], output: Any, tensors: Sequence[bool]
    ) -> tuple[Call, list[str]]:
        """The call, bound to the function's parameters, and the names of its tensor arguments."""
        if self.parameters is not None:
            arguments = dict(zip(self.parameters, args, strict=False)) | kwargs
            positional = list(self.parameters)
        else:
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            positional = list(bound.arguments)
        names = [positional[k] for k, tensor in enumerate(tensors) if tensor]
        for name in names:
            if name in self.takes and name not in self.complex_takes and _is_complex(arguments[name]):
                raise GradientError(
                    message(
                        self.name,
                        f"argument {name}",
                        "is complex, and the catalogue's rule covers real arguments only",
                        f"a complex array of dtype {np.asarray(arguments[name]).dtype}",
                        "pass real tensors, or give numpy_op a backward= of your own",
                    )
                )
        return Call(arguments, output), names


def say_untaken(
    function: str,
    rule: str,
    takes: tuple[str, ...],
    where: str,
    lost: Lost,
    *,
    grad: str,
    told: set[str],
    stacklevel: int,
) -> None:
    """A tensor argument ``where`` that requires grad, or carries a forward-mode tangent
    (``lost``), where the catalogue's ``rule`` gives none gets no gradient: said as a dropped
    gradient is (``grad=``: a GradientWarning once per argument in ``told``, a GradientError,
    or nothing for "detach"), never a silent zero."""
    if grad == "detach":
        return
    if lost.forward:
        fix = either(f"pass {where}.detach()", lost.call_outside, "give numpy_op a jvp= of your own")
    else:
        fix = f"pass {where} without requires_grad (.detach()), or give numpy_op a backward= of your own"
    text = message(
        function,
        f"argument {where}",
        f"{lost.found}, and the catalogue's rule for {rule} gives no gradient in {where}: none flows into it",
        f"gradients in {', '.join(takes)} alone",
        f"{fix}; grad='detach' silences this",
    )
    say_dropped(text, where, grad=grad, told=told, stacklevel=stacklevel + 1)


def say_dropped(text: str, where: str, *, grad: str, told: set[str], stacklevel: int) -> None:
    """A dropped gradient, ``text``, as ``grad=`` says it: a GradientError, or a
    GradientWarning once per argument ``where`` in ``told`` (never called for "detach")."""
    if grad == "error":
        raise GradientError(text)
    if where not in told:
        told.add(where)
        warnings.warn(text, GradientWarning, stacklevel=stacklevel + 1)


def _forward_strides(value: Any) -> Any:
    """``value``, copied where it runs backwards in memory (a signal reversed in time), which
    torch cannot share: one plain copy here rather than torch's strided one."""
    if isinstance(value, np.ndarray) and any(s < 0 for s in value.strides):
        return np.ascontiguousarray(value)
    return value


def _is_complex(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind == "c"


def axes_of(axes: Any, ndim: int) -> tuple[int, ...]:
    """``axes`` as SciPy reads them: None for all, an int, or a sequence; negatives counted back."""
    if axes is None:
        return tuple(range(ndim))
    return tuple(operator.index(a) % ndim for a in np.atleast_1d(axes))


def per_axis(value: Any, count: int) -> list[Any]:
    """A value per axis, as SciPy reads it: a sequence as it is, a scalar (or a mode's name)
    repeated."""
    return list(value) if np.iterable(value) and not isinstance(value, str) else [value] * count
