"""What a decorator decides once: parameters, selection, converters, and the call itself.

A :class:`Plan` is built when a decorator is applied. It reads the signature once,
checks ``only``/``exclude`` against it, and builds a :class:`Runner` — the input side,
the output side and their leaf functions — for the decorator's options. A ``config``
block yields another Runner, built on first use and cached by its option values, so
the per-call path never validates or merges options.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch

from . import _devices
from ._dtypes import NO_CASTS, Casts, casts_to, is_inexact, promote, restoring_casts
from ._errors import LeafError, ReadOnlyError, message
from ._leaves import DETACH, GradPolicy, array_to_tensor, tensor_to_array, tensor_to_device, write_back
from ._options import Config, validate
from ._tree import Mapper

#: Each decorator's options and their defaults; config() fills in what a decorator was not told.
DEFAULTS: dict[str, dict[str, Any]] = {
    "accepts_numpy": {"copy": None, "writeback": False, "grad": "warn", "only": None, "exclude": None, "nested": True},
    "returns_tensor": {"device": None, "dtype": None, "copy": None, "nested": True},
    "accepts_tensor": {"device": None, "dtype": None, "copy": None, "only": None, "exclude": None, "nested": True},
    "returns_numpy": {"copy": None, "nested": True},
}
_ARRAY_TYPES = (np.ndarray, np.generic)


def function_name(func: Any) -> str:
    """``module.Class.method()``-style name for messages, for anything callable."""
    inner = getattr(func, "__func__", func)  # classmethod / staticmethod objects
    name = getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None) or type(inner).__name__
    return f"{name}()"


class Parameters:
    """Parameter names by position, from the signature when there is one.

    wrapt hands ``self``/``cls`` over as ``instance``, never inside ``args``; so when a
    call is bound, positions start at the second parameter of a plain function or
    classmethod (``offset`` 1).
    """

    def __init__(self, func: Any) -> None:
        self.binds_first = inspect.isfunction(func) or isinstance(func, classmethod)
        try:
            # classmethod/staticmethod objects have no signature of their own before 3.13.
            signature = inspect.signature(func.__func__ if isinstance(func, (classmethod, staticmethod)) else func)
        except (TypeError, ValueError):  # builtins, ufuncs and dispatchers may have none
            self.known = False
            self.positional: list[str] = []
            self.varargs: str | None = None
            self.keywords: set[str] = set()
            self.varkw: str | None = None
            return
        self.known = True
        kinds = inspect.Parameter
        params = list(signature.parameters.values())
        self.positional = [p.name for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
        self.varargs = next((p.name for p in params if p.kind == kinds.VAR_POSITIONAL), None)
        self.keywords = {p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)}
        self.varkw = next((p.name for p in params if p.kind == kinds.VAR_KEYWORD), None)

    def offset(self, instance: object) -> int:
        return 1 if self.binds_first and instance is not None and self.positional else 0

    def bound_names(self) -> set[str]:
        """Names a caller can pass; ``self``/``cls`` of a method are not among them."""
        names = set(self.positional[1:] if self._first_is_instance() else self.positional)
        names |= self.keywords - ({self.positional[0]} if self._first_is_instance() else set())
        return names | {n for n in (self.varargs, self.varkw) if n}

    def _first_is_instance(self) -> bool:
        return self.binds_first and bool(self.positional) and self.positional[0] in ("self", "cls")

    def positional_name(self, i: int, offset: int) -> str:
        """The path root of positional argument ``i``: its name, ``args[2]``, or ``args[2]``."""
        names = self.positional[offset:]
        if i < len(names):
            return names[i]
        if self.varargs:
            return f"{self.varargs}[{i - len(names)}]"
        return f"args[{i}]"

    def keyword_name(self, key: str) -> str:
        return key if key in self.keywords or not self.varkw else f"{self.varkw}[{key!r}]"

    def selects(self, names: frozenset[str], positional_index: int | None, key: str | None, offset: int) -> bool:
        """Whether the argument at a position, or under a keyword, belongs to ``names``."""
        if key is not None:
            return (key if key in self.keywords else self.varkw) in names
        assert positional_index is not None
        params = self.positional[offset:]
        return (params[positional_index] if positional_index < len(params) else self.varargs) in names


class Selection:
    """Which arguments ``only=``/``exclude=`` let through, checked against the signature."""

    def __init__(self, params: Parameters, only: frozenset[str] | None, exclude: frozenset[str] | None, where: str):
        if only is not None and exclude is not None:
            raise TypeError(f"{where}: pass only= or exclude=, not both")
        names = only if only is not None else exclude
        assert names is not None
        if not params.known:
            raise TypeError(f"{where}: only=/exclude= need a signature to check names against, and it has none")
        unknown = sorted(names - params.bound_names())
        if unknown:
            offer = ", ".join(sorted(params.bound_names())) or "no parameters"
            raise TypeError(f"{where}: no parameter named {', '.join(unknown)}; it has {offer}")
        self.params = params
        self.names = names
        self.keep = only is not None  # only=: the names are converted; exclude=: all but them

    def wants(self, positional_index: int | None, key: str | None, offset: int) -> bool:
        return self.params.selects(self.names, positional_index, key, offset) == self.keep


class Call:
    """What one call learns on its way in that the way out needs."""

    __slots__ = ("args", "instance", "kwargs", "pairs", "target", "tensors")

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any], instance: object) -> None:
        self.args = args
        self.kwargs = kwargs
        self.instance = instance
        self.tensors: list[torch.Tensor] = []  # every tensor argument: they vote on device and dtype
        self.pairs: list[tuple[torch.Tensor, np.ndarray]] = []  # writeback: private arrays to copy back
        self.target: tuple[torch.device, Casts] | None = None


def _record(t: torch.Tensor, call: Call) -> torch.Tensor:
    call.tensors.append(t)
    return t


class Inputs:
    """The input side: converts the selected arguments, and records every tensor argument."""

    def __init__(self, params: Parameters, function: str, options: dict[str, Any], where: str) -> None:
        only, exclude, nested = options["only"], options["exclude"], options["nested"]
        self.params = params
        self.function = function
        self.selection = Selection(params, only, exclude, where) if (only or exclude) is not None else None
        self.recorder = Mapper({torch.Tensor: _record}, nested=nested)
        self.mapper: Mapper  # set by the subclass: the converting walk

    def convert(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], call: Call
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments with every selected leaf converted; the rest recorded, untouched."""
        selection = self.selection
        offset = self.params.offset(call.instance) if selection is not None else 0
        new_args: list[Any] = []
        key = None
        try:
            for a in args:
                convert = (
                    self.mapper if selection is None or selection.wants(len(new_args), None, offset) else self.recorder
                )
                new_args.append(convert(a, call))
            if not kwargs:
                return tuple(new_args), kwargs
            new_kwargs = {}
            for key, v in kwargs.items():
                convert = self.mapper if selection is None or selection.wants(None, key, offset) else self.recorder
                new_kwargs[key] = convert(v, call)
            return tuple(new_args), new_kwargs
        except LeafError as e:
            root = (
                self.params.keyword_name(key)
                if key is not None
                else self.params.positional_name(len(new_args), self.params.offset(call.instance))
            )
            raise e.public(self.function, "argument", root) from None


class NumpyInputs(Inputs):
    """``accepts_numpy``: tensor arguments reach the function as arrays."""

    def __init__(self, params: Parameters, function: str, grad: GradPolicy, options: dict[str, Any], where: str):
        super().__init__(params, function, options, where)
        self.copy: bool | None = options["copy"]
        self.writeback: bool = options["writeback"]
        # Read-only unless the function is meant to write: into private copies (copy=True)
        # or through to the caller's tensors (writeback=True). Same on every device.
        self.readonly = not self.writeback and self.copy is not True
        self.grad = grad
        self.mapper = Mapper({torch.Tensor: self._leaf}, nested=options["nested"])

    def _leaf(self, t: torch.Tensor, call: Call) -> np.ndarray:
        call.tensors.append(t)
        a, shared = tensor_to_array(t, copy=self.copy, grad=self.grad)
        if self.readonly:
            a.setflags(write=False)
        elif self.writeback and not shared:
            call.pairs.append((t, a))
        return a


class TensorInputs(Inputs):
    """``accepts_tensor``: array and NumPy scalar arguments reach the function as tensors."""

    def __init__(self, params: Parameters, function: str, options: dict[str, Any], where: str):
        super().__init__(params, function, options, where)
        self.copy: bool | None = options["copy"]
        self.device: torch.device | None = options["device"]
        self.dtype = options["dtype"]
        leaf = self._leaf
        self.mapper = Mapper({np.ndarray: leaf, np.generic: leaf, torch.Tensor: _record}, nested=options["nested"])

    def convert(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], call: Call
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.dtype == "input":  # the casts depend on tensors that may come after the arrays
            for value in (*args, *kwargs.values()):
                self.recorder(value, call)
            call.target = (self.device or _devices.default_device(), _input_casts(call.tensors))
            call.tensors.clear()
        else:
            casts = casts_to(self.dtype) if self.dtype is not None else NO_CASTS
            call.target = (self.device or _devices.default_device(), casts)
        return super().convert(args, kwargs, call)

    def _leaf(self, a: np.ndarray | np.generic, call: Call) -> torch.Tensor:
        device, casts = call.target  # type: ignore[misc]
        return array_to_tensor(a, device=device, casts=casts, copy=self.copy)


def _input_casts(tensors: Iterable[torch.Tensor]) -> Casts:
    inexact = {t.dtype for t in tensors if is_inexact(t.dtype)}
    return casts_to(promote(inexact)) if inexact else NO_CASTS


class Outputs:
    """The output side: converts results, with paths below ``result`` in messages."""

    mapper: Mapper

    def __init__(self, function: str) -> None:
        self.function = function

    def convert(self, result: Any, call: Call) -> Any:
        try:
            return self.mapper(result, call)
        except LeafError as e:
            raise e.public(self.function, "", "result") from None


class TensorOutputs(Outputs):
    """``returns_tensor``: array, NumPy scalar and tensor results come back on the caller's device."""

    def __init__(self, function: str, params: Parameters, options: dict[str, Any]) -> None:
        super().__init__(function)
        self.params = params
        self.device: torch.device | None = options["device"]
        self.dtype = options["dtype"]
        self.copy: bool | None = options["copy"]
        self.fixed_casts = casts_to(self.dtype) if isinstance(self.dtype, torch.dtype) else None
        to_tensor = self._array
        self.mapper = Mapper(
            {np.ndarray: to_tensor, np.generic: to_tensor, torch.Tensor: self._tensor}, nested=options["nested"]
        )

    def _target(self, call: Call) -> tuple[torch.device, Casts]:
        """The device and casts for this call's results, decided on the first result leaf."""
        if call.target is None:
            device = self.device or _devices.vote(call.tensors)
            if device is None:
                raise _mismatch(self.function, self.params, call)
            if self.fixed_casts is not None:
                casts = self.fixed_casts
            elif self.dtype == "input":
                casts = _input_casts(call.tensors)
            else:  # None: a dtype NumPy lacks comes back when every input had it
                inexact = {t.dtype for t in call.tensors if is_inexact(t.dtype)}
                casts = restoring_casts(inexact.pop()) if len(inexact) == 1 else NO_CASTS
            call.target = (device, casts)
        return call.target

    def _array(self, a: np.ndarray | np.generic, call: Call) -> torch.Tensor:
        device, casts = self._target(call)
        return array_to_tensor(a, device=device, casts=casts, copy=self.copy)

    def _tensor(self, t: torch.Tensor, call: Call) -> torch.Tensor:
        device, casts = self._target(call)
        return tensor_to_device(t, device=device, casts=casts, copy=self.copy)


def _mismatch(function: str, params: Parameters, call: Call) -> Exception:
    walker = Mapper({torch.Tensor: _record}, nested=True)
    offset = params.offset(call.instance)
    placed = []
    for i, a in enumerate(call.args):
        placed += [(params.positional_name(i, offset) + p, t) for p, t in walker.leaves_with_paths(a)]
    for k, v in call.kwargs.items():
        placed += [(params.keyword_name(k) + p, t) for p, t in walker.leaves_with_paths(v)]
    voters = [(path, t.device) for path, t in placed if not (t.is_cpu and t.ndim == 0)]
    return _devices.mismatch(function, voters)


class NumpyOutputs(Outputs):
    """``returns_numpy``: tensor results come back as arrays, detached and on the host."""

    def __init__(self, function: str, options: dict[str, Any]) -> None:
        super().__init__(function)
        self.copy: bool | None = options["copy"]
        self.mapper = Mapper({torch.Tensor: self._leaf}, nested=options["nested"])

    def _leaf(self, t: torch.Tensor, call: Call) -> np.ndarray:
        return tensor_to_array(t, copy=self.copy, grad=DETACH)[0]


class Runner:
    """One decorated call, for one set of resolved options: convert in, call, convert out."""

    def __init__(self, inputs: Inputs | None, outputs: Outputs | None, function: str) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.function = function
        self.guarded = isinstance(inputs, NumpyInputs) and (inputs.readonly or inputs.writeback)
        # A lone returns_tensor still needs the call's tensors, to find the caller's device.
        self.records = inputs is None and isinstance(outputs, TensorOutputs)
        self.recorder = Mapper({torch.Tensor: _record}, nested=True)

    def __call__(
        self, wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        call = Call(args, kwargs, instance)
        if self.inputs is not None:
            args, kwargs = self.inputs.convert(args, kwargs, call)
        elif self.records:
            for value in (*args, *kwargs.values()):
                self.recorder(value, call)
        result = self._guarded(wrapped, args, kwargs, call) if self.guarded else wrapped(*args, **kwargs)
        if self.outputs is not None:
            result = self.outputs.convert(result, call)
        return result

    def _guarded(self, wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], call: Call) -> Any:
        """The call, with read-only failures explained and writes copied back even on error."""
        try:
            return wrapped(*args, **kwargs)
        except ValueError as e:
            if call.tensors and "read-only" in str(e) and isinstance(self.inputs, NumpyInputs) and self.inputs.readonly:
                raise ReadOnlyError(
                    message(
                        self.function,
                        "the function",
                        "wrote into an array made from a tensor argument; those arrays are read-only "
                        "so that NumPy code never changes the caller's tensors behind its back",
                        f"ValueError({str(e)!r})",
                        "pass copy=True to give the function private writable copies, or "
                        "writeback=True to let its changes reach the caller's tensors",
                    )
                ) from e
            raise
        finally:
            if call.pairs:
                write_back(call.pairs)


class Plan:
    """Everything decided when a decorator is applied (or two, fused into one wrapper)."""

    def __init__(self, func: Any, sides: dict[str, dict[str, Any]]) -> None:
        self.function = function_name(func)
        self.params = Parameters(func)
        self.sides = sides  # decorator name -> its explicit options, already validated
        self.grad_policies: dict[str, GradPolicy] = {}  # "once per decorated function" outlives configs
        self.default = self._build({})
        self._variants: dict[tuple[tuple[str, Any], ...], Runner] = {}

    def runner(self, config: Config | None) -> Runner:
        """The Runner for the active ``config`` block: built once per distinct option set."""
        if config is None:
            return self.default
        runner = self._variants.get(config.key)
        if runner is None:
            runner = self._variants[config.key] = self._build(config.options)
        return runner

    def resolved(self, side: str, configured: dict[str, Any]) -> dict[str, Any]:
        defaults = DEFAULTS[side]
        return {**defaults, **{k: v for k, v in configured.items() if k in defaults}, **self.sides[side]}

    def _build(self, configured: dict[str, Any]) -> Runner:
        inputs: Inputs | None = None
        outputs: Outputs | None = None
        for side in self.sides:
            options = self.resolved(side, configured)
            where = f"{side}() on {self.function}"
            if side == "accepts_numpy":
                grad = self.grad_policies.setdefault(options["grad"], GradPolicy(options["grad"], self.function))
                inputs = NumpyInputs(self.params, self.function, grad, options, where)
            elif side == "accepts_tensor":
                inputs = TensorInputs(self.params, self.function, options, where)
            elif side == "returns_tensor":
                outputs = TensorOutputs(self.function, self.params, options)
            else:
                outputs = NumpyOutputs(self.function, options)
        return Runner(inputs, outputs, self.function)


def check_options(side: str, options: dict[str, Any]) -> dict[str, Any]:
    """A decorator's explicit options, validated when it is applied."""
    return validate(options, DEFAULTS[side], f"autoconvert.{side}()")
