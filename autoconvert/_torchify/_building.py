"""Torchified builders from the gradient catalogue (see autoconvert._gradients._built): a
class such as ``CubicSpline``, a factory such as ``make_interp_spline``, whose objects keep the
tensors they were built from, so that their calls give gradients in those and in the call's.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import torch

from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._grad import FORWARD_AD, REVERSE, Lost, forward_lost, has_tangent, requires_grad
from autoconvert._conversions._memory import functorch_wrapped, untracked, untransformed
from autoconvert._decorators._plain import to_numpy
from autoconvert._errors import ConversionError, GradientError, GradientWarning, message
from autoconvert._gradients._built import Built, Construction
from autoconvert._gradients._catalogue import builder_for, differentiable
from autoconvert._gradients._rule import say_dropped, say_untaken
from autoconvert._interpreter._routes import Description, described

from ._proxies import TorchifiedClass, TorchifiedObject, device_of, proxy, torchified_function


class Builder:
    """A catalogued builder, torchified with ``options``: it builds objects from the kept
    arguments' tensors detached, and keeps those tensors for their calls (see Keeping)."""

    def __init__(self, built: Built, options: dict[str, Any]) -> None:
        self.built = built
        self.options = options
        self.grad: str = options.get("grad", "warn")
        self.told: set[str] = set()  # the dropped gradients said (once each, under grad="warn")
        self._ops: dict[str, Any] = {}

    def op(self, method: str) -> Any:
        """The op of the catalogued ``method``: its evaluator, converting as torchify's
        functions do, with the evaluator's rule (made at the first call)."""
        found = self._ops.get(method)
        if found is None:
            evaluator, _ = self.built.calls[method]
            converting = torchified_function(evaluator, self.options, "scipy")
            found = self._ops.setdefault(method, differentiable(evaluator, converting, self.options))
        return found

    def build(
        self, make: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], stacklevel: int
    ) -> tuple[Any, Keeping]:
        """``make(*args, **kwargs)``, the builder's torchified call, with every tensor detached
        (a gradient in one it keeps none of is said dropped, at the caller ``stacklevel``
        frames up), and what the object keeps of its arguments."""
        bound = self.built.bound(args, kwargs)
        given = dict(bound.arguments)
        for name, value in given.items():
            lost = None if name in self.built.keeps else _losing(value)
            if lost is not None:
                say_untaken(
                    self.built.name,
                    self.built.name,
                    self.built.keeps or ("the points it is read at",),
                    name,
                    lost,
                    grad=self.grad,
                    told=self.told,
                    stacklevel=stacklevel + 1,
                )
        # The object is built from values, outside torch.func's gradient transforms: the gradient
        # flows through the tensors it keeps, into its calls' ops.
        with untransformed():
            for name, value in given.items():
                if isinstance(value, torch.Tensor):
                    bound.arguments[name] = self._values(name, untracked(value))
            # Made first: its conversion refuses what NumPy cannot read (a tensor torch.vmap batches).
            made = make(*bound.args, **bound.kwargs)
            arrays = {n: to_numpy(v) if isinstance(v, torch.Tensor) else v for n, v in bound.arguments.items()}
        construction = Construction(arrays)
        taking = self._taking(given, stacklevel + 1)
        # A kept tensor that requires no grad, or takes none, goes to the calls as its array:
        # no gradient is computed for it.
        kept = tuple(given[name] if name in taking else construction.arguments[name] for name in self.built.keeps)
        return made, Keeping(self, construction, kept)

    def _values(self, name: str, values: torch.Tensor) -> torch.Tensor:
        """``values``, the tensor ``name`` untracked, unless torch.vmap batches it: one object
        holds one set of values, so a batch of them is refused, with what builds one per sample."""
        if functorch_wrapped(values):
            raise ConversionError(
                message(
                    self.built.name,
                    f"argument {name}",
                    "is batched by torch.vmap, and one object is built from one set of values",
                    describe_tensor(values),
                    "build one object per sample (a loop, or autoconvert.batched), or build it outside torch.vmap "
                    "and vmap its call",
                )
            )
        return values

    def _taking(self, given: dict[str, Any], stacklevel: int) -> set[str]:
        """The kept arguments that require grad and take it; one this construction gives none
        (a periodic spline's samples), or one carrying a forward-mode tangent (the calls' rules
        give reverse mode alone), is said dropped here, at the build, once."""
        unkept = self.built.unkept(given) if self.built.unkept is not None else {}
        taking = set()
        for name in self.built.keeps:
            value = given[name]
            lost = _losing(value)
            if lost is not None and lost.forward:
                problem = (
                    f"{lost.found}, and the catalogue's rule for its objects' calls gives reverse mode alone: "
                    "the object is built from its primal"
                )
                detached = f"build it from {name}.detach()" + (f" or {lost.outside}" if lost.outside else "")
                fix = (
                    f"{detached}, or take reverse mode ({name}.requires_grad_(), torch.func.jacrev, grad, vjp); "
                    "grad='detach' silences this"
                )
                self._say(
                    message(self.built.name, f"argument {name}", problem, "a rule without a jvp", fix), name, stacklevel
                )
            if not requires_grad(value):
                continue
            if name not in unkept:
                taking.add(name)
            else:
                problem, found = unkept[name]
                fix = f"build it from {name}.detach(); grad='detach' silences this"
                self._say(message(self.built.name, f"argument {name}", problem, found, fix), name, stacklevel)
        return taking

    def _say(self, text: str, name: str, stacklevel: int) -> None:
        """A kept argument's gradient, dropped at the build, as its ``grad=`` says it."""
        if self.grad != "detach":
            say_dropped(text, name, grad=self.grad, told=self.told, stacklevel=stacklevel + 2)

    def construct(
        self, view: TorchifiedClass, args: tuple[Any, ...], kwargs: dict[str, Any], stacklevel: int = 3
    ) -> TorchifiedObject:
        """``view``'s call (a catalogued class's): the object, as a proxy keeping its tensors;
        ``stacklevel``: the frames up to the caller's, for its warnings (its own included)."""
        made, keeping = self.build(view._construct, args, kwargs, stacklevel=stacklevel)
        return proxy(made, self.options, device_of(args, kwargs), view, keeping)

    def __reduce__(self) -> tuple[Any, ...]:
        # Its rules' evaluators are made by the catalogue, not found by name: found again where it loads.
        return _builder_of, (self.built.builder, self.options)


def _losing(value: Any) -> Lost | None:
    """What a builder's argument ``value`` loses as the object is built from its values: the
    gradient it requires (whatever the grad mode: the object's calls may come under another),
    else its forward-mode tangent; None: nothing."""
    if requires_grad(value):
        return REVERSE
    if FORWARD_AD._current_level >= 0 and isinstance(value, torch.Tensor) and has_tangent(value):
        return forward_lost(value)
    return None


def _builder_of(fn: Any, options: dict[str, Any]) -> Builder:
    built = builder_for(fn)
    assert built is not None  # pickled from one
    return Builder(built, options)


class Factory:
    """A catalogued factory's torchified pair (``converting``), building proxies that keep its tensors."""

    def __init__(self, builder: Builder, converting: Callable[..., Any]) -> None:
        self.builder, self.__wrapped__ = builder, converting
        self.__name__, self.__qualname__, self.__doc__ = (
            converting.__name__,
            converting.__qualname__,
            converting.__doc__,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        made, keeping = self.builder.build(self.__wrapped__, args, kwargs, stacklevel=2)
        return proxy(made.__wrapped__, self.builder.options, made._self_device, made._self_class, keeping)

    def __autoconvert_description__(self) -> Description:
        """The pair's, and what its objects keep for their calls."""
        inner = described(self.__wrapped__)
        assert inner is not None  # a wrapper
        return dataclasses.replace(inner, notes=(*inner.notes, f"its objects are {self.builder.built.describe()}"))

    def __repr__(self) -> str:
        return repr(self.__wrapped__)

    def __reduce__(self) -> tuple[Any, ...]:
        return Factory, (self.builder, self.__wrapped__)


class Keeping:
    """What an object a catalogued builder made keeps: how it was built, and the arguments
    its calls take gradients in, as given (tensors with their graph)."""

    __slots__ = ("builder", "construction", "kept")

    def __init__(self, builder: Builder, construction: Construction, kept: tuple[Any, ...]) -> None:
        self.builder, self.construction, self.kept = builder, construction, kept

    def call(self, owner: TorchifiedObject, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``owner.method(*args, **kwargs)``, as the op of the kept tensors and the call's. The
        op places its results by the tensors it is given; a call given none (the kept values
        require no grad, the points are NumPy's or Python's) has them on the object's device,
        as every torchified object's call does (a spline built from CUDA tensors read at 0.5)."""
        op, device = self.builder.op(method), owner._self_device
        if device is None or device_of((*self.kept, *args), kwargs) is not None:
            return op(owner.__wrapped__, self.construction, *self.kept, *args, **kwargs)
        with device:  # the conversion's device for a call without tensors: torch's default
            return op(owner.__wrapped__, self.construction, *self.kept, *args, **kwargs)

    def derived(self, owner: TorchifiedObject, name: str) -> Callable[..., Any] | None:
        """``owner.name``, a method whose result is as linear in the kept arguments (a spline's
        ``derivative``), as one whose result keeps them too; None for other names."""
        if name not in self.builder.built.derived:
            return None

        def derive(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = to_numpy(args), to_numpy(kwargs)
            made = getattr(owner.__wrapped__, name)(*args, **kwargs)
            construction = Construction(self.construction.arguments, (*self.construction.derived, (name, args, kwargs)))
            view = owner._self_class.result_view(type(made))
            return proxy(
                made, self.builder.options, owner._self_device, view, Keeping(self.builder, construction, self.kept)
            )

        derive.__name__ = derive.__qualname__ = name
        return derive

    def read(self, name: str) -> None:
        """Reading ``name`` off the object, other than its catalogued calls and what does not
        depend on the kept arguments: their gradient through it is said dropped."""
        built = self.builder.built
        if name in built.calls or name in built.unrelated:
            return
        grad = self.builder.grad
        for where, value in zip(built.keeps, self.kept, strict=True):
            if grad == "detach" or not requires_grad(value):
                continue
            text = message(
                f"{built.name}(...).{name}",
                f"argument {where}",
                f"requires grad, and the object built from it passes no gradient through {name}: its call "
                f"({', '.join(built.calls)}) takes the catalogue's rule{_and_derived(built)}",
                f"an object built from a {where} that requires grad",
                f"call the object itself for gradients, or build it from {where}.detach(); grad='detach' silences this",
            )
            if grad == "error":
                raise GradientError(text)
            key = f"{name}:{where}"
            if key not in self.builder.told:
                self.builder.told.add(key)
                warnings.warn(text, GradientWarning, stacklevel=3)


def _and_derived(built: Built) -> str:
    """The objects ``built``'s objects derive that keep its rule too, in words."""
    if not built.derived:
        return ""
    return f", as do the objects its {' and '.join(sorted(built.derived))} make"
