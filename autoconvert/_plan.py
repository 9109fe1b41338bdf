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
from numpy.typing import NDArray

from . import _devices
from ._copies import copied, counted
from ._devices import CPU, settle, vote
from ._dtypes import (
    NO_CASTS,
    RESTORING,
    RESTORING_HALF,
    WIDENED,
    WIDENED_HALF,
    Casts,
    casts_to,
    is_inexact,
    promote,
    restoring_casts,
)
from ._errors import ConversionError, LeafError, NoDeviceError, ReadOnlyError, message
from ._leaves import (
    DETACH,
    GradPolicy,
    Target,
    array_to_tensor,
    compact,
    describe_tensor,
    expanded,
    is_scipy_sparse,
    overlaps_any,
    refused_tensor_to_array,
    restore_writes,
    sparse_to_tensor,
    tensor_to_array,
    tensor_to_device,
)
from ._observe import PROFILER, PathOf, Watched
from ._options import _ACTIVE, Config, validate
from ._tree import Mapper, cycle_error, keep
from ._writeback import aliased_spans, write_back

#: Each decorator's options and their defaults; config() fills in what a decorator was not told.
DEFAULTS: dict[str, dict[str, Any]] = {
    "accepts_numpy": {
        "copy": None,
        "writeback": False,
        "grad": "warn",
        "only": None,
        "exclude": None,
        "nested": True,
        "sparse": "array",
        "widen_float16": False,
        "check_writes": False,
        "transfers": "allow",
    },
    "returns_tensor": {
        "device": None,
        "dtype": None,
        "copy": None,
        "nested": True,
        "sparse_layout": None,
        "transfers": "allow",
    },
    "accepts_tensor": {
        "device": None,
        "dtype": None,
        "copy": None,
        "only": None,
        "exclude": None,
        "nested": True,
        "sparse_layout": None,
        "transfers": "allow",
    },
    "returns_numpy": {"copy": None, "nested": True, "sparse": "array", "transfers": "allow"},
    # adapt(): accepts_numpy's options for array parameters, and where arrays go for tensor ones.
    "adapt": {
        "copy": None,
        "writeback": False,
        "grad": "warn",
        "nested": True,
        "sparse": "array",
        "widen_float16": False,
        "check_writes": False,
        "device": None,
        "transfers": "allow",
    },
    # to_numpy(): returns_numpy's conversion, with a grad policy (the call itself says the
    # value leaves autograd, so by default it detaches silently).
    "to_numpy": {"copy": None, "nested": True, "sparse": "array", "grad": "detach"},
}


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
        """The path root of positional argument ``i``: its name, ``rest[0]`` inside ``*rest``,
        or ``args[2]`` when there is no signature."""
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


# Under torch.compile, dynamo would trace the call into the NumPy body and can crash there
# ("Expected np.nditer base"). Whichever frame of ours dynamo starts tracing, the trace
# reaches a Runner's call closure, where is_dynamo_compiling() is True: the call is routed
# through a torch.compiler.disable'd function, a clean graph break, and the body runs
# eagerly. Not is_compiling(): dynamo folds either to True while tracing, and eagerly this
# one is a bare `return False` (17 ns against 48 ns).
compiling = torch.compiler.is_dynamo_compiling
_opaque_call: Callable[..., Any] | None = None


def _through(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - runs under dynamo
    return call(*args, **kwargs)  # inside the disabled call is_dynamo_compiling() is False: the body runs


def opaque(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - runs under dynamo
    """``call(*args, **kwargs)`` out of dynamo's sight: one graph break, the body run eagerly. Also for
    building wrappers and to_numpy/to_tensor inside a compiled function (dynamo cannot trace
    wrapt 1.x's constructor, nor, in torch 2.4, a bound dict.get)."""
    global _opaque_call
    if _opaque_call is None:
        _opaque_call = torch.compiler.disable(_through, recursive=True)  # type: ignore[no-untyped-call]
    return _opaque_call(call, *args, **kwargs)


#: A NumPy input leaf's per-call context: the ``plain`` and ``odd`` lists (see Inputs), and
#: with writeback a third, of (tensor, private array or None) pairs to write back, and a
#: fourth, the spans of memory that arguments share (see _writeback.aliased_spans).
Lists = tuple[Any, ...]


def _record(t: torch.Tensor, seen: list[torch.Tensor]) -> torch.Tensor:
    seen.append(t)
    return t


class Inputs:
    """The input side: converts the selected arguments, and records every tensor argument.

    A call's tensor arguments are recorded in two lists, for the output side to find the
    caller's device and dtype: ``plain``, those NumPy took as they are (on the CPU, a
    NumPy dtype, no grad, no conj/neg bit: results go back to the CPU, uncast), and
    ``odd``, all the others, which need a look. Leaf functions receive a per-call context
    (``ctx``) holding the lists and what else they need; no per-call object is allocated.
    """

    mapper: Mapper  # the converting walk, set by the subclass

    def __init__(self, params: Parameters, function: str, options: dict[str, Any], where: str) -> None:
        only, exclude, nested = options["only"], options["exclude"], options["nested"]
        self.params = params
        self.function = function
        selects = only is not None or exclude is not None  # only=[] selects nothing; it is not "all"
        self.selection = Selection(params, only, exclude, where) if selects else None
        self.recorder = Mapper({torch.Tensor: _record}, nested=nested)

    def context(
        self, plain: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """What this side's leaf functions receive for one call: by default the ``odd`` list,
        which records every tensor argument."""
        return odd

    def convert_selected(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], instance: object, ctx: Any, odd: list[torch.Tensor]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """With only=/exclude=: the selected arguments converted, the rest recorded in ``odd``.

        (Without a selection the Runner converts every argument in its own loop.)
        """
        assert self.selection is not None
        offset = self.params.offset(instance)
        wants = self.selection.wants
        out: list[Any] = []
        new_kwargs: dict[str, Any] = {}
        key = None
        try:
            for a in args:
                out.append(self.mapper(a, ctx) if wants(len(out), None, offset) else self.recorder(a, odd))
            for key, v in kwargs.items():
                new_kwargs[key] = self.mapper(v, ctx) if wants(None, key, offset) else self.recorder(v, odd)
        except LeafError as e:
            raise self.public(e, instance, key, len(out)) from None
        except RecursionError:
            raise self.public(cycle_error(), instance, key, len(out)) from None
        return tuple(out), new_kwargs

    def public(self, error: LeafError, instance: object, key: str | None, position: int) -> Exception:
        """The public exception for a leaf that failed in keyword ``key`` or at ``position``."""
        offset = self.params.offset(instance)
        root = self.params.keyword_name(key) if key is not None else self.params.positional_name(position, offset)
        return error.public(self.function, "argument", root)


class RecordingInputs(Inputs):
    """``returns_tensor`` alone converts no argument, but records the tensors among them,
    for the output side to find the caller's device."""

    def __init__(self, params: Parameters, function: str) -> None:
        super().__init__(params, function, {"only": None, "exclude": None, "nested": True}, "")
        self.mapper = self.recorder


def hands_read_only(options: dict[str, Any]) -> bool:
    """Whether accepts_numpy with these options hands read-only arrays: unless the function is
    meant to write, into private copies (copy=True) or through to the caller's tensors
    (writeback=True). Same on every device."""
    return not options["writeback"] and options["copy"] is not True


class NumpyInputs(Inputs):
    """``accepts_numpy``: tensor arguments reach the function as arrays."""

    def __init__(self, params: Parameters, function: str, grad: GradPolicy, options: dict[str, Any], where: str):
        super().__init__(params, function, options, where)
        self.copy: bool | None = options["copy"]
        self.writeback: bool = options["writeback"]
        self.readonly = hands_read_only(options)
        # check_writes: only read-only arrays can be written through behind the guard's back.
        self.check_writes: bool = options["check_writes"] and self.readonly
        self.grad = grad
        self.sparse: str = options["sparse"]
        self.widened = WIDENED_HALF if options["widen_float16"] else WIDENED
        leaf = self._writeback_leaf if self.writeback else self._make_leaf()
        if self.widened is WIDENED_HALF and not self.writeback:
            leaf = self._widening(leaf)
        if self.check_writes:
            leaf = self._snapshotting(leaf)
        self.mapper = Mapper({torch.Tensor: leaf}, nested=options["nested"])

    def context(
        self, plain: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Lists:
        """With writeback, a third list: (tensor, private array or None) pairs to write back;
        with check_writes, (tensor, snapshot) pairs. (Otherwise the Runner builds
        ``(plain, odd)`` itself.)"""
        if not self.writeback:
            return (plain, odd, [])
        # writeback: a fourth, the spans of memory that arguments share (see _writeback).
        seen: list[torch.Tensor] = []
        for a in args:
            self.recorder(a, seen)
        for v in kwargs.values():
            self.recorder(v, seen)
        return (plain, odd, [], aliased_spans(seen))

    def _make_leaf(self) -> Callable[[torch.Tensor, Lists], NDArray[Any]]:
        """The per-tensor step, with this plan's options bound as closure constants (hot path)."""
        copy, grad, sparse = self.copy, self.grad, self.sparse
        if not self.readonly:

            def private(t: torch.Tensor, ctx: Lists) -> Any:
                ctx[1].append(t)
                return tensor_to_array(t, copy, grad, sparse, settle=False)[0]

            return private

        def shared(t: torch.Tensor, ctx: Lists) -> Any:
            # tensor_to_array's own first step, inlined: zero-copy is what copy=None/False want.
            # Calling a shared helper instead measured +0.04x on 3 tensor + 2 plain arguments.
            if not t.requires_grad:
                try:
                    a = t.numpy()
                except (TypeError, RuntimeError):
                    pass
                else:
                    ctx[0].append(t)
                    # write=False, passed positionally: the C method takes it so, and its keyword parsing
                    # costs 2.5x the call (NumPy 2.4: 210 ns vs 87 ns). The stubs declare it keyword-only.
                    a.setflags(False)  # type: ignore[call-arg, unused-ignore]
                    return a
            ctx[1].append(t)
            a = refused_tensor_to_array(t, copy, grad, sparse, settle=False)[0]
            if type(a) is np.ndarray:  # not a scipy.sparse object: always private, see tensor_to_sparse
                a.setflags(False)  # type: ignore[call-arg, unused-ignore]
            return a

        return shared

    def _widening(self, leaf: Callable[[torch.Tensor, Lists], Any]) -> Callable[[torch.Tensor, Lists], Any]:
        """``widen_float16=True``: float16 tensors take the widening route (recorded as odd, so
        the output side sees them and narrows results back); the rest, ``leaf``."""
        copy, grad, sparse, readonly = self.copy, self.grad, self.sparse, self.readonly

        def widening(t: torch.Tensor, ctx: Lists) -> Any:
            if t.dtype is not torch.float16:
                return leaf(t, ctx)
            ctx[1].append(t)
            a = refused_tensor_to_array(t, copy, grad, sparse, settle=False, widened=WIDENED_HALF)[0]
            if readonly and type(a) is np.ndarray:
                a.setflags(False)  # type: ignore[call-arg, unused-ignore]
            return a

        return widening

    @staticmethod
    def _snapshotting(leaf: Callable[[torch.Tensor, Lists], Any]) -> Callable[[torch.Tensor, Lists], Any]:
        """``check_writes=True``: a private copy of every CPU tensor argument, taken before the
        call, for :func:`_leaves.restore_writes` to compare with afterwards."""

        def snapshotting(t: torch.Tensor, ctx: Lists) -> Any:
            a = leaf(t, ctx)
            if t.is_cpu and t.layout == torch.strided and not t.is_nested:  # a device's tensor crossed as a copy
                memory = t.detach()
                memory = compact(memory) if expanded(memory) else memory
                copied("check_writes", t, memory.numel() * memory.element_size())
                ctx[2].append((t, memory.clone()))
            return a

        return snapshotting

    def _writeback_leaf(self, t: torch.Tensor, ctx: Lists) -> Any:
        ctx[1].append(t)
        if t.layout != torch.strided and not t.is_nested:
            raise LeafError(
                ConversionError,
                "is a sparse tensor; writeback=True cannot write a SciPy matrix's changes back into it",
                describe_tensor(t),
                "return the changed matrix instead, with writeback=False",
            )
        if not t.is_nested and expanded(
            t
        ):  # torch refuses to write into overlapping memory, so nothing could come back
            raise LeafError(
                ConversionError,
                "is an expanded tensor (zero strides: its elements share memory), which no write can reach back into",
                describe_tensor(t),
                "pass {path}.contiguous(), or return the changed array instead, with writeback=False",
            )
        span = ctx[3].get(id(t)) if ctx[3] else None
        if span is not None:  # it shares memory with another argument
            return span.view(t, ctx[2], self.copy, self.grad, self.widened)
        a, shared = tensor_to_array(t, self.copy, self.grad, settle=False, widened=self.widened)
        # Private memory is copied back after the call; shared memory only needs autograd told.
        ctx[2].append((t, None if shared else a))
        return a


class TensorInputs(Inputs):
    """``accepts_tensor``: array and NumPy scalar arguments reach the function as tensors."""

    def __init__(self, params: Parameters, function: str, options: dict[str, Any], where: str):
        super().__init__(params, function, options, where)
        self.copy: bool | None = options["copy"]
        self.device: torch.device | None = options["device"]
        self.dtype = options["dtype"]
        self.fixed_casts = casts_to(self.dtype) if isinstance(self.dtype, torch.dtype) else NO_CASTS
        self.sparse_layout: torch.layout | None = options["sparse_layout"]
        self.mapper = Mapper(
            {np.ndarray: array_to_tensor, np.generic: array_to_tensor, torch.Tensor: self._tensor},
            nested=options["nested"],
            fallback=lambda cls: self._sparse_leaf if is_scipy_sparse(cls) else None,
        )

    def context(
        self, plain: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        casts = self.fixed_casts
        if self.dtype == "input":  # the casts depend on tensors that may come after the arrays
            found: list[torch.Tensor] = []
            for value in (*args, *kwargs.values()):
                self.recorder(value, found)
            casts = input_casts(found)
        return (self.device or _devices.default_device(), casts, self.copy, odd)  # a Target, then odd

    def _sparse_leaf(self, m: Any, ctx: Target) -> torch.Tensor:
        return sparse_to_tensor(m, ctx[0], ctx[1], ctx[2], self.sparse_layout)

    def _tensor(self, t: torch.Tensor, ctx: Target) -> torch.Tensor:
        ctx[3].append(t)
        return t


def input_casts(tensors: Iterable[torch.Tensor]) -> Casts:
    """``dtype="input"``: casts to the promoted floating dtype of ``tensors`` (none without one)."""
    dtypes = frozenset(t.dtype for t in tensors)
    casts = _INPUT_CASTS.get(dtypes)
    if casts is None:  # a few distinct sets per program: decided once each
        inexact = {d for d in dtypes if is_inexact(d)}
        casts = _INPUT_CASTS[dtypes] = casts_to(promote(inexact)) if inexact else NO_CASTS
    return casts


_INPUT_CASTS: dict[frozenset[torch.dtype], Casts] = {}


Context = Callable[[list[torch.Tensor], list[torch.Tensor]], Any]
Convert = Callable[[Any, list[torch.Tensor], list[torch.Tensor], tuple[Any, ...]], Any]


class NeedsInputs(Exception):  # noqa: N818 - a signal between the output side and its leaf, never raised out
    """An output leaf needs the call's tensor arguments (as ``ctx[3]``), which the per-call
    context leaves out because almost no call needs them."""


def _no_context(plain: list[torch.Tensor], odd: list[torch.Tensor]) -> None:
    return None


class Outputs:
    """The output side: converts results, with paths below ``result`` in messages."""

    def __init__(
        self,
        function: str,
        params: Parameters,
        mapper: Mapper,
        context: Context = _no_context,
        all_plain: Any = None,
        *,
        argument: str | None = None,
    ) -> None:
        self.function = function
        #: Messages name a decorator's results, or to_numpy/to_tensor's argument (``obj``).
        self.role, self.root = ("argument", argument) if argument else ("", "result")
        self.params = params
        self.mapper = mapper
        #: ``context(plain, odd)``: what this side's leaf functions receive for one call,
        #: unless ``all_plain`` is that already: the context when every tensor was plain.
        self.context = context
        self.all_plain = all_plain
        self.convert = self._make_convert()

    def _make_convert(self) -> Convert:
        """``convert(result, plain, odd, call)``: ``result`` converted; ``plain``/``odd`` are
        the call's tensors (see Inputs), ``call`` is ``(args, kwargs, instance)`` as given."""
        get, resolve, context, all_plain = self.mapper.dispatch.get, self.mapper.resolve, self.context, self.all_plain
        function, params, role, root = self.function, self.params, self.role, self.root

        def convert(
            result: Any,
            plain: list[torch.Tensor],
            odd: list[torch.Tensor],
            call: tuple[Any, ...],
            inputs: list[torch.Tensor] | None = None,
        ) -> Any:
            ctx = all_plain if plain and not odd and all_plain is not None else context(plain, odd)
            if inputs is not None:
                ctx = (*ctx[:3], inputs)
            try:
                return (get(type(result)) or resolve(type(result)))(result, ctx)
            except NeedsInputs:  # a leaf must see the call's tensors: once more, with them (rare)
                return convert(result, plain, odd, call, plain + odd)
            except LeafError as e:
                raise e.public(function, role, root) from None
            except RecursionError:
                raise cycle_error().public(function, role, root) from None
            except NoDeviceError:
                raise _mismatch(function, params, *call) from None

        return convert


class TensorOutputs(Outputs):
    """``returns_tensor``: array, NumPy scalar and tensor results come back on the caller's device."""

    def __init__(
        self,
        function: str,
        params: Parameters,
        options: dict[str, Any],
        *,
        argument: str | None = None,
        restoring: dict[torch.dtype, Casts] = RESTORING,
        handed: bool = False,
    ) -> None:
        """``handed``: the function was handed read-only views of the caller's tensors, so a
        tensor result made from one (``torch.as_tensor(a)``) is copied rather than aliased."""
        self.restoring = restoring  # RESTORING_HALF when the input side widened float16 too
        self.device: torch.device | None = options["device"]
        self.dtype = options["dtype"]
        self.copy: bool | None = options["copy"]
        self.fixed_casts = casts_to(self.dtype) if isinstance(self.dtype, torch.dtype) else None
        self.sparse_layout: torch.layout | None = options["sparse_layout"]
        mapper = Mapper(
            {
                np.ndarray: array_to_tensor,
                np.generic: array_to_tensor,
                torch.Tensor: self._unaliased if handed else self._tensor,
            },
            nested=options["nested"],
            fallback=lambda cls: self._sparse if is_scipy_sparse(cls) else None,
        )
        # Only plain tensors: what vote() and the dtype pass would find, decided now. NumPy
        # has their dtypes, so no dtype comes back (RESTORING holds the ones it lacks).
        casts = NO_CASTS if self.fixed_casts is None else self.fixed_casts
        all_plain = None if self.dtype == "input" else (self.device or CPU, casts, self.copy)
        super().__init__(function, params, mapper, self._make_context(), all_plain, argument=argument)

    def _make_context(self) -> Context:
        """``context(plain, odd) -> (device, casts, copy)``, a Target; the device is None when
        the tensors disagree, which only matters (and raises) if some result has to be placed."""
        fixed_device, fixed_casts, dtype, copy = self.device, self.fixed_casts, self.dtype, self.copy
        restoring = self.restoring

        def context(plain: list[torch.Tensor], odd: list[torch.Tensor]) -> Target:
            seen = plain + odd
            device = fixed_device or vote(seen)
            if fixed_casts is not None:
                casts = fixed_casts
            elif dtype == "input":
                casts = input_casts(seen)
            else:  # None: a dtype NumPy lacks comes back when every floating input had it
                inexact = {t.dtype for t in seen if t.dtype.is_floating_point or t.dtype.is_complex}
                casts = restoring_casts(inexact.pop(), restoring) if len(inexact) == 1 else NO_CASTS
            return device, casts, copy

        return context

    def _tensor(self, t: torch.Tensor, ctx: Target) -> torch.Tensor:
        return tensor_to_device(t, _placed(ctx), ctx[1], ctx[2])

    def _unaliased(self, t: torch.Tensor, ctx: Target) -> torch.Tensor:
        """A tensor result, copied if it is the memory of a tensor argument. The call's tensors
        are asked for (NeedsInputs) only when one passes through as it is: no cost otherwise."""
        out = tensor_to_device(t, _placed(ctx), ctx[1], ctx[2])
        if out is not t:  # moved, cast or copied: memory of its own
            return out
        if len(ctx) < 4:
            raise NeedsInputs
        return t.clone() if overlaps_any(t, ctx[3]) else t

    def _sparse(self, m: Any, ctx: Target) -> torch.Tensor:
        return sparse_to_tensor(m, _placed(ctx), ctx[1], ctx[2], self.sparse_layout)


def _placed(ctx: Target) -> torch.device:
    """The call's device; NoDeviceError if its tensors disagreed."""
    if ctx[0] is None:
        raise NoDeviceError
    device: torch.device = ctx[0]
    return device


_TENSORS = Mapper({torch.Tensor: _record}, nested=True)
_VALUES = Mapper({torch.Tensor: _record, np.ndarray: _record, np.generic: _record}, nested=True)


def _tensor_paths(
    params: Parameters, args: tuple[Any, ...], kwargs: dict[str, Any], instance: object, walker: Mapper = _TENSORS
) -> list[tuple[str, Any]]:
    """``(path, leaf)`` for every tensor (or other leaf of ``walker``) among a call's
    arguments: the slow walk messages use."""
    offset = params.offset(instance)
    placed = []
    for i, a in enumerate(args):
        placed += [(params.positional_name(i, offset) + p, t) for p, t in walker.leaves_with_paths(a)]
    for k, v in kwargs.items():
        placed += [(params.keyword_name(k) + p, t) for p, t in walker.leaves_with_paths(v)]
    return placed


def path_finder(params: Parameters) -> PathOf:
    """``path_of(value, given, result)``: where ``value`` was among a call's arguments
    (``given``, as ``(args, kwargs, instance)``) or results, by identity; None if not found."""

    def path_of(value: Any, given: tuple[Any, ...], result: list[Any]) -> str | None:
        if given:
            args, kwargs, instance = given
            for path, leaf in _tensor_paths(params, args, kwargs, instance, _VALUES):
                if leaf is value:
                    return f"argument {path}"
        for returned in result:
            for path, leaf in _VALUES.leaves_with_paths(returned):
                if leaf is value:
                    return f"result{path}"
        return None

    return path_of


def _mismatch(
    function: str, params: Parameters, args: tuple[Any, ...], kwargs: dict[str, Any], instance: object
) -> Exception:
    placed = _tensor_paths(params, args, kwargs, instance)
    voters = [(path, t.device) for path, t in placed if not (t.is_cpu and t.ndim == 0)]
    return _devices.mismatch(function, voters)


class NumpyOutputs(Outputs):
    """``returns_numpy``: tensor results come back as arrays, detached and on the host."""

    def __init__(
        self,
        function: str,
        params: Parameters,
        options: dict[str, Any],
        grad: GradPolicy = DETACH,
        *,
        argument: str | None = None,
    ) -> None:
        self.copy: bool | None = options["copy"]
        self.sparse: str = options["sparse"]
        self.grad = grad
        super().__init__(
            function, params, Mapper({torch.Tensor: self._leaf}, nested=options["nested"]), argument=argument
        )

    def _leaf(self, t: torch.Tensor, ctx: None) -> Any:
        return tensor_to_array(t, self.copy, self.grad, self.sparse)[0]


Call = Callable[[Callable[..., Any], object, tuple[Any, ...], dict[str, Any]], Any]


_active = _ACTIVE.get  # the bound C method: one call fewer than active()


#: NumPy's words for a write into a read-only array (setitem and in-place ops; ufuncs' out=).
_NUMPY_READ_ONLY = frozenset({"assignment destination is read-only", "output array is read-only"})
_array_walker = Mapper({np.ndarray: _record}, nested=True)


def wrote_into_handed(error: ValueError, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``error`` is NumPy refusing a write into an array autoconvert handed over.

    NumPy does not say which array was the destination, so: its own words, and every
    read-only array in the frame that raised shares memory with a handed array. The user's
    own errors, and writes into read-only arrays the function made (``np.broadcast_to``),
    keep their own error.
    """
    if str(error) not in _NUMPY_READ_ONLY or error.__traceback__ is None:
        return False
    handed = [a for value in (*args, *kwargs.values()) for _, a in _array_walker.leaves_with_paths(value)]
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    local = [v for v in tb.tb_frame.f_locals.values() if isinstance(v, np.ndarray) and not v.flags.writeable]
    return bool(local) and all(any(np.may_share_memory(v, h) for h in handed) for v in local)


class Runner:
    """One decorated call, for one set of resolved options: convert in, call, convert out.

    ``runner.call(wrapped, instance, args, kwargs)`` is the per-call path: a check for an
    active ``config`` block, two lists for the call's tensors, one dict lookup per argument
    and result, and the conversions. It is a closure, so everything decided here is a
    constant to it rather than an attribute. A plan's default Runner hands calls made
    inside a ``config`` block to ``variants(config)``; the variants themselves don't look.
    """

    def __init__(
        self,
        inputs: Inputs | None,
        outputs: Outputs | None,
        function: str,
        variants: Callable[[Config | None], Runner] | None = None,
        *,
        routes: bool = False,
        watch: tuple[PathOf, tuple[str, str]] | None = None,
    ) -> None:
        """``routes``: hand every call to ``variants`` (a decorator asked for a transfer policy,
        which only a watched Runner carries out); ``watch``: this is such a Runner, with where
        values were and each side's transfer policy (see _observe)."""
        self.inputs = inputs
        self.outputs = outputs
        self.function = function
        self.routes = routes
        call = self._make_call(variants)
        if watch is not None:
            call = Watched(call, function, *watch, self.directions())
        self.call = call

    def directions(self) -> tuple[str | None, str | None]:
        """The profiler range names of the two sides' conversions (None: a side converts nothing)."""
        inputs = self.inputs
        into = None if inputs is None or isinstance(inputs, RecordingInputs) else "to_numpy"
        if isinstance(inputs, TensorInputs):
            into = "to_tensor"
        out = None if self.outputs is None else "to_numpy" if isinstance(self.outputs, NumpyOutputs) else "to_tensor"
        return into, out

    def _make_call(self, variants: Callable[[Config | None], Runner] | None) -> Call:
        inputs, outputs = self.inputs, self.outputs
        readonly = isinstance(inputs, NumpyInputs) and inputs.readonly
        # NumPy leaves queue CUDA tensors' copies to the host and record the tensors in odd.
        settles = isinstance(inputs, NumpyInputs)
        after = self._after_step()
        selected = inputs is not None and inputs.selection is not None
        lists_only = isinstance(inputs, NumpyInputs) and not after  # ctx is (plain, odd): no context() call
        context = inputs.context if inputs is not None else None
        get = inputs.mapper.dispatch.get if inputs is not None else None
        resolve = inputs.mapper.resolve if inputs is not None else None
        convert_out = outputs.convert if outputs is not None else None
        failed, routes, profiler = self.failed, self.routes, PROFILER

        def call(wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            # The compile guard comes first: dynamo must not trace the ContextVar read (torch
            # 2.4 fails on it, later versions warn "ContextVar.get" on every compiled call).
            if compiling():
                return opaque(call, wrapped, instance, args, kwargs)
            if variants is not None:
                config = _active()
                if config is not None or routes or profiler._is_profiler_enabled:
                    return variants(config).call(wrapped, instance, args, kwargs)
            plain: list[torch.Tensor] = []
            odd: list[torch.Tensor] = []
            given = (args, kwargs, instance)
            if inputs is not None:
                ctx: Any = (plain, odd) if lists_only else context(plain, odd, args, kwargs)  # type: ignore[misc]
                if selected:
                    args, kwargs = inputs.convert_selected(args, kwargs, instance, ctx, odd)
                else:  # the hot loop: one dict lookup per argument, then its leaf function
                    out: list[Any] = []
                    key = None
                    try:
                        for a in args:
                            handler = get(type(a)) or resolve(type(a))  # type: ignore[misc]
                            # Plain arguments (floats, strings) skip their identity handler, `keep`.
                            out.append(a if handler is keep else handler(a, ctx))
                        if kwargs:
                            converted = {}
                            for key, v in kwargs.items():
                                converted[key] = (get(type(v)) or resolve(type(v)))(v, ctx)  # type: ignore[misc]
                            kwargs = converted
                    except (LeafError, RecursionError) as e:  # a RecursionError: a container that holds itself
                        fact = e if isinstance(e, LeafError) else cycle_error()
                        raise inputs.public(fact, instance, key, len(out)) from None
                    args = tuple(out)
                if settles and odd:  # one wait for all the arguments' transfers
                    settle(odd)
            try:  # free in CPython 3.11+ when nothing is raised
                result = wrapped(*args, **kwargs)
            except BaseException as e:
                pairs = ctx[2] if after is not None else None
                failed(e, after, pairs, given, handed=(args, kwargs), read_only=readonly and (plain or odd))
                raise
            if after is not None:
                after(ctx[2], given)
            return result if convert_out is None else convert_out(result, plain, odd, given)

        return call

    def _after_step(self) -> Callable[[list[Any], tuple[Any, ...]], None] | None:
        """What runs after the function, even when it raised: the write-back, or the check for
        writes behind the read-only guard; None for neither."""
        inputs = self.inputs
        if isinstance(inputs, NumpyInputs) and inputs.writeback:
            return self._write_back
        if isinstance(inputs, NumpyInputs) and inputs.check_writes:
            return self._restore_writes
        return None

    @staticmethod
    def _write_back(pairs: list[Any], given: tuple[Any, ...]) -> None:
        write_back(pairs)  # what the function wrote reaches the caller, even when it raised

    def _restore_writes(self, pairs: list[Any], given: tuple[Any, ...]) -> None:
        """check_writes: put back what the function changed in the caller's tensors, and say so."""
        changed = restore_writes(pairs)
        if not changed:
            return
        assert self.inputs is not None
        paths = [path for path, t in _tensor_paths(self.inputs.params, *given) if any(t is c for c in changed)]
        raise ReadOnlyError(
            message(
                self.function,
                "argument " + ", ".join(paths or ["(a tensor argument)"]),
                "was changed by the function, through a route the read-only guard cannot see (torch.from_numpy "
                "or torch.as_tensor on the array, its .base, np.frombuffer); the values were put back",
                describe_tensor(changed[0]),
                "pass copy=True to give the function private writable copies, or "
                "writeback=True to let its changes reach the caller's tensors",
            )
        )

    def failed(
        self,
        error: BaseException,
        after: Callable[[list[Any], tuple[Any, ...]], None] | None,
        pairs: list[Any] | None,
        given: tuple[Any, ...],
        *,
        handed: tuple[tuple[Any, ...], dict[str, Any]],
        read_only: Any,
    ) -> None:
        """The function raised ``error``: the after step still runs (a failure of its own is a
        note on ``error``), and NumPy's refusal to write into a read-only array handed to it
        (``handed``: the arguments it got) becomes a ReadOnlyError; otherwise ``error`` stands."""
        if after is not None:
            self._after_failure(after, pairs or [], given, error)
        if isinstance(error, ValueError) and read_only and wrote_into_handed(error, *handed):
            raise self._read_only_error(error) from error

    def _after_failure(
        self,
        after: Callable[[list[Any], tuple[Any, ...]], None],
        pairs: list[Any],
        given: tuple[Any, ...],
        error: BaseException,
    ) -> None:
        """Run ``after`` for a call that raised ``error``: the user's exception wins, and what
        ``after`` had to say (a write-back that failed, a write put back) becomes a note on it."""
        try:
            after(pairs, given)
        except Exception as failure:
            error.add_note(f"autoconvert: after {self.function} raised: {type(failure).__name__}: {failure}")

    def _read_only_error(self, error: ValueError) -> ReadOnlyError:
        return ReadOnlyError(
            message(
                self.function,
                "the function",
                "wrote into an array made from a tensor argument; those arrays are read-only "
                "so that NumPy code never changes the caller's tensors behind its back",
                f"ValueError({str(error)!r})",
                "pass copy=True to give the function private writable copies, or "
                "writeback=True to let its changes reach the caller's tensors",
            )
        )


def deferred_kind(func: Any) -> str | None:
    """Which kind of function ``func`` is if its body runs after the call returns (generators
    and coroutines), or None: no decorator can convert around such a body."""
    inner = func.__func__ if isinstance(func, (classmethod, staticmethod)) else func
    for test, kind in (
        (inspect.isasyncgenfunction, "an async generator function"),
        (inspect.iscoroutinefunction, "a coroutine function (async def)"),
        (inspect.isgeneratorfunction, "a generator function"),
    ):
        if test(inner):
            return kind
    return None


def _refuse_deferred(func: Any, sides: dict[str, dict[str, Any]]) -> None:
    """Arguments would be converted, written back and results converted around an object
    that has not run yet: refuse when decorating."""
    kind = deferred_kind(func)
    if kind is not None:
        sides_named = " and ".join(f"{side}()" for side in sides)
        raise TypeError(
            f"autoconvert.{sides_named} on {function_name(func)}: it is {kind}, whose body runs "
            "after the call returns, so arguments and results cannot be converted around it; "
            "decorate the plain function holding the NumPy code and call that from it"
        )


class Plan:
    """Everything decided when a decorator is applied (or two, fused into one wrapper)."""

    def __init__(self, func: Any, sides: dict[str, dict[str, Any]]) -> None:
        _refuse_deferred(func, sides)
        self.function = function_name(func)
        self.params = Parameters(func)
        self.sides = sides  # decorator name -> its explicit options, already validated
        self.grad_policies: dict[str, GradPolicy] = {}  # "once per decorated function" outlives configs
        self._variants: dict[tuple[tuple[str, Any], ...], Runner] = {}
        routes = any(options.get("transfers", "allow") != "allow" for options in sides.values())
        self.default = self._build({}, self.variant, routes=routes)

    def variant(self, config: Config | None) -> Runner:
        """The watched Runner for an active ``config`` or ``stats`` block, or for the profiler
        or a transfer policy: built once per distinct option set."""
        key = config.key if config is not None else ()
        runner = self._variants.get(key)
        if runner is None:
            runner = self._variants[key] = self._build(config.options if config is not None else {}, watched=True)
        return runner

    def policies(self, configured: dict[str, Any]) -> tuple[str, str]:
        """The transfer policies of the input side and the output side (one side: both its own)."""
        found = {side: self.resolved(side, configured)["transfers"] for side in self.sides}
        into = next((p for side, p in found.items() if not side.startswith("returns")), None)
        out = next((p for side, p in found.items() if not side.startswith("accepts")), None)
        return into or out or "allow", out or into or "allow"

    def resolved(self, side: str, configured: dict[str, Any]) -> dict[str, Any]:
        defaults = DEFAULTS[side]
        return {**defaults, **{k: v for k, v in configured.items() if k in defaults}, **self.sides[side]}

    def _build(
        self,
        configured: dict[str, Any],
        variants: Callable[[Config | None], Runner] | None = None,
        *,
        routes: bool = False,
        watched: bool = False,
    ) -> Runner:
        inputs: Inputs | None = None
        outputs: Outputs | None = None
        numpy_in = self.resolved("accepts_numpy", configured) if "accepts_numpy" in self.sides else None
        # Results narrow back to float16 when the input side widened it (fused pairs only).
        half = numpy_in is not None and numpy_in["widen_float16"]
        handed = numpy_in is not None and hands_read_only(numpy_in)
        for side in self.sides:
            options = self.resolved(side, configured)
            where = f"{side}() on {self.function}"
            if side == "accepts_numpy":
                grad = self.grad_policies.setdefault(options["grad"], GradPolicy(options["grad"], self.function))
                inputs = NumpyInputs(self.params, self.function, grad, options, where)
            elif side == "accepts_tensor":
                inputs = TensorInputs(self.params, self.function, options, where)
            elif side == "returns_tensor":
                restoring = RESTORING_HALF if half else RESTORING
                outputs = TensorOutputs(self.function, self.params, options, restoring=restoring, handed=handed)
            else:
                outputs = NumpyOutputs(self.function, self.params, options)
        if inputs is None and isinstance(outputs, TensorOutputs):
            inputs = RecordingInputs(self.params, self.function)
        if not watched:
            return Runner(inputs, outputs, self.function, variants, routes=routes)
        for converting in (inputs, outputs):
            if converting is not None:
                converting.mapper.wrap_leaves(counted)
        watch = (path_finder(self.params), self.policies(configured))
        return Runner(inputs, outputs, self.function, watch=watch)


def check_options(side: str, options: dict[str, Any]) -> dict[str, Any]:
    """A decorator's explicit options, validated when it is applied."""
    return validate(options, DEFAULTS[side], f"autoconvert.{side}()")
