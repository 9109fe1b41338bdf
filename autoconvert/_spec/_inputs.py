"""The input sides: what each selected argument becomes before the function runs."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._conversions import _devices
from autoconvert._conversions._containers import Node, is_scipy_sparse
from autoconvert._conversions._copies import copied
from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._dtypes import NO_CASTS, WIDENED, WIDENED_HALF, Casts, casts_to, is_inexact, promote
from autoconvert._conversions._grad import GradPolicy
from autoconvert._conversions._memory import compact, expanded
from autoconvert._conversions._mutations import Rebuilt, rebuilt
from autoconvert._conversions._sparse import sparse_to_tensor
from autoconvert._conversions._to_numpy import dtype_to_numpy, refused_tensor_to_array, tensor_to_array
from autoconvert._conversions._to_torch import Target, array_to_tensor, target
from autoconvert._conversions._tree import Mapper, StandIn, cycle_error, stood_for
from autoconvert._conversions._writeback import Private, aliased_spans, hand_over
from autoconvert._errors import ConversionError, LeafError
from autoconvert._options._options import DEFAULT_POLICY, Policy

from ._callbacks import device_leaf, namespace_leaf, takes_callbacks
from ._outparams import OutParams
from ._signature import Parameters, Selection, record


class AfterWrites(NamedTuple):
    """An after step's per-call state (see _after, whose ``begin`` makes it): what the call's
    leaves record for the step to write back, or to compare."""

    #: writeback: (tensor, private array or None) to write back; check_writes: (tensor, snapshot).
    pairs: list[Any]
    #: writeback: the spans of memory that arguments share (see _writeback.aliased_spans).
    spans: dict[int, Any] | None = None
    #: out-parameters: (tensor, array handed over, private array to copy back or None).
    written: list[tuple[torch.Tensor, Any, Any]] | None = None
    #: writeback: the private arrays handed over, frozen with their views after the call (see _writeback.freeze).
    handed: list[Private] | None = None


class Collected(NamedTuple):
    """A NumPy input leaf's per-call context: what the call's leaves record, for the output
    side (see Inputs for ``shared`` and ``odd``) and the after step (``writes``)."""

    shared: list[torch.Tensor]
    odd: list[torch.Tensor]
    writes: AfterWrites | None = None  # the after step's per-call state (None: the call has no after step)
    #: adapt: the arrays among the arguments, and where arrays for tensor parameters go.
    seen: list[Any] | None = None
    target: Target | None = None
    #: The containers rebuilt for the function, by the caller's (see _mutations.Rebuilt).
    rebuilt: Rebuilt | None = None


def collected(
    shared: list[torch.Tensor],
    odd: list[torch.Tensor],
    writes: AfterWrites | None = None,
    *,
    seen: list[Any] | None = None,
    target: Target | None = None,
) -> Collected:
    """A ``Collected``, made as cheaply as a tuple: the generic call makes one per call."""
    return _new(Collected, (shared, odd, writes, seen, target, {}))


def collected_writes(
    shared: list[torch.Tensor],
    odd: list[torch.Tensor],
    spans: dict[int, Any] | None = None,
    written: list[tuple[torch.Tensor, Any, Any]] | None = None,
    handed: list[Private] | None = None,
    *,
    seen: list[Any] | None = None,
    target: Target | None = None,
) -> Collected:
    """A ``Collected`` with an after step's fresh ``AfterWrites`` (its ``pairs`` empty), both made
    as cheaply as tuples, in one frame: an after step's ``begin`` makes one per call."""
    return _new(Collected, (shared, odd, _new(AfterWrites, ([], spans, written, handed)), seen, target, {}))


_new = tuple.__new__  # a NamedTuple's own __new__ costs more (benchmarks, micro: "a per-call NamedTuple")
#: What an input side's leaf functions receive per call: a NumPy side's Collected, a tensor
#: side's Target, or (recording only) the list the tensors go in.
Context = Collected | Target | list[torch.Tensor]


class Inputs:
    """The input side: converts the selected arguments, and records every tensor argument.

    A call's tensor arguments are recorded in two lists, for the output side to find the
    caller's device and dtype: ``shared``, those NumPy shares as they are (on the CPU, a
    NumPy dtype, no grad, no conj/neg bit: results go back to the CPU, uncast), and
    ``odd``, all the others, which need a look. Leaf functions receive a per-call context
    (``ctx``: a ``Collected`` on the NumPy side, a Target on the tensor side) holding the
    lists and what else they need.
    """

    mapper: Mapper  # the converting walk, set by the subclass
    #: The function gets read-only arrays (see NumpyInputs, the one side that decides it).
    read_only = False

    def __init__(self, params: Parameters, function: str, policy: Policy, where: str) -> None:
        only, exclude = policy.only, policy.exclude
        self.policy = policy  # this side's resolved options, read where they are needed
        self.params = params
        self.function = function
        selects = only is not None or exclude is not None  # only=[] selects nothing; it is not "all"
        self.selection = Selection(params, only, exclude, where) if selects else None
        self.recorder = Mapper({torch.Tensor: record}, nested=policy.nested)

    def tensors_in(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
        """Every tensor among the call's arguments, walked as this side walks them."""
        found: list[torch.Tensor] = []
        for value in (*args, *kwargs.values()):
            self.recorder(value, found)
        return found

    def context(
        self, shared: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Context:
        """What this side's leaf functions receive for one call: by default the ``odd`` list,
        which records every tensor argument."""
        return odd

    def convert_selected(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], instance: object, ctx: Context, odd: list[torch.Tensor]
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
        super().__init__(params, function, DEFAULT_POLICY, "")
        self.mapper = _Recorder({torch.Tensor: record}, nested=DEFAULT_POLICY.nested)


class _Recorder(Mapper):
    """The walk of arguments nothing converts: a container that holds itself is recorded as
    far as the walk goes (its tensors vote for the device), and the call goes on."""

    def __init__(self, leaves: dict[type, Any], *, nested: bool) -> None:
        super().__init__(leaves, nested=nested)
        # Containers' handlers are decided on first meeting (Mapper.resolve), with these walks.
        self.walk_sequence, self.walk_dict = to_a_cycle(self.walk_sequence), to_a_cycle(self.walk_dict)

    def _container(self, node: Node) -> Callable[[Any, Any], Any]:
        return to_a_cycle(super()._container(node))


def to_a_cycle(walk: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``walk``, stopping where the container reaches itself again."""

    def stopping(obj: Any, ctx: Any) -> Any:
        try:
            return walk(obj, ctx)
        except RecursionError:
            return obj

    return stopping


class Rebuilding(Mapper):
    """The NumPy side's walk: one rebuilt container per caller's container in a call (the
    function sees the caller's sharing: ``batch['a'] is batch['b']``), each recorded in the
    call's ``Collected.rebuilt`` for its changes to reach the caller (see _mutations); one
    that held no tensors, handed as it is, recorded too where it takes changes back, so that
    the arrays the function puts in it come back in the caller's kind."""

    def __init__(self, leaves: dict[type, Any], *, nested: bool, fallback: Any) -> None:
        super().__init__(leaves, nested=nested, fallback=fallback)
        # Containers' handlers are decided on first meeting (Mapper.resolve), with these walks.
        self.walk_sequence = _once_per_call(self.walk_sequence, _is_list)
        self.walk_dict = _once_per_call(self.walk_dict, _always)

    def _container(self, node: Node) -> Callable[[Any, Any], Any]:
        return _once_per_call(super()._container(node), _always if node.writes.takes_back() else _never)


def _is_list(obj: Any) -> bool:
    return type(obj) is list


def _always(obj: Any) -> bool:
    return True


def _never(obj: Any) -> bool:
    return False


def _once_per_call(walk: Callable[[Any, Any], Any], as_is: Callable[[Any], bool]) -> Callable[[Any, Any], Any]:
    """``walk``, made once per container in a call, its rebuilt container recorded; one it
    hands as it is (no tensors in it) recorded where ``as_is(obj)`` says it takes changes."""

    def recording(obj: Any, ctx: Collected) -> Any:
        records = ctx.rebuilt
        assert records is not None  # every Collected made by collected() has its dict
        record = records.get(id(obj))
        if record is not None:
            return record[1]
        new = walk(obj, ctx)
        if new is not obj or as_is(obj):
            rebuilt(records, obj, new)
        return new

    return recording


class NumpyInputs(Inputs):
    """``accepts_numpy``: tensor arguments reach the function as arrays."""

    def __init__(self, params: Parameters, function: str, grad: GradPolicy, policy: Policy, where: str):
        super().__init__(params, function, policy, where)
        #: The function gets read-only arrays, unless it is meant to write: into private copies
        #: (copy=True), or through to the caller's tensors (writeback=True). Decided here, once
        #: per side; the spec, the output side and the flat call read it (as ``Spec.read_only``).
        self.read_only = not policy.writeback and policy.copy is not True
        #: check_writes=True where the arrays are read-only: only those can be written through
        #: behind the read-only flag's back (copy=True's and writeback=True's are the function's
        #: to write), so only then are the caller's tensors snapshot and compared after the call.
        self.snapshots = policy.check_writes and self.read_only
        self.grad = grad
        self.widened = WIDENED_HALF if policy.widen_float16 else WIDENED
        self.writes = OutParams(policy.out_params, params) if policy.out_params else None
        self.out_mapper = Mapper({torch.Tensor: self._out_leaf}, nested=policy.nested)
        leaf = self._writeback_leaf if policy.writeback else self._make_leaf()
        if self.widened is WIDENED_HALF and not policy.writeback:
            leaf = self._widening(leaf)
        if self.snapshots:
            leaf = self._snapshotting(leaf)
        self.mapper = Rebuilding(
            {
                torch.Tensor: leaf,
                StandIn: stood_for,
                torch.dtype: dtype_to_numpy,
                types.ModuleType: namespace_leaf,
                torch.device: device_leaf,
            },
            nested=policy.nested,
            fallback=takes_callbacks(policy.callbacks),
        )

    def context(
        self, shared: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Collected:
        """``Collected(shared, odd)``: an after step adds its own state (see _after's ``begin``)."""
        return collected(shared, odd)

    def spans(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int, Any] | None:
        """writeback: the spans of memory that the call's tensors share (see _writeback)."""
        try:
            return aliased_spans(self.tensors_in(args, kwargs))
        except RecursionError:  # a container that holds itself: the conversion names it
            return None

    def convert_written(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], instance: object, ctx: Collected
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call's out-parameters (see _outparams) handed over writable, the rest as they were."""
        assert self.writes is not None
        found = self.writes.given(args, kwargs, self.params.offset(instance))
        if not found:
            return args, kwargs
        positional, keywords = list(args), dict(kwargs)
        for where, value in found:
            try:
                converted = self.out_mapper(value, ctx)
            except (LeafError, RecursionError) as e:  # a RecursionError: a container that holds itself
                key, position = (where, 0) if isinstance(where, str) else (None, where)
                fact = e if isinstance(e, LeafError) else cycle_error()
                raise self.public(fact, instance, key, position) from None
            if isinstance(where, str):
                keywords[where] = converted
            else:
                positional[where] = converted
        return tuple(positional), keywords

    def _make_leaf(self) -> Callable[[torch.Tensor, Collected], NDArray[Any]]:
        """The per-tensor step, with this plan's options bound as closure constants (hot path)."""
        copy, grad, sparse = self.policy.copy, self.grad, self.policy.sparse
        if not self.read_only:

            def private(t: torch.Tensor, ctx: Collected) -> Any:
                ctx.odd.append(t)
                return tensor_to_array(t, copy, grad, sparse, settle=False)[0]

            return private

        def shared(t: torch.Tensor, ctx: Collected) -> Any:
            # tensor_to_array's own first step, inlined (a frame fewer per tensor): zero-copy is
            # what copy=None/False want.
            if not t.requires_grad:
                try:
                    a = t.numpy()
                except (TypeError, RuntimeError):
                    pass
                else:
                    ctx.shared.append(t)
                    # write=False, passed positionally: the C method takes it so, and parsing the keyword
                    # costs more than the call (benchmarks, micro: "read-only guard"). The stubs
                    # declare it keyword-only.
                    a.setflags(False)  # type: ignore[call-arg, unused-ignore]
                    return a
            ctx.odd.append(t)
            a = refused_tensor_to_array(t, copy, grad, sparse, settle=False)[0]
            if type(a) is np.ndarray:  # not a scipy.sparse object: always private, see tensor_to_sparse
                a.setflags(False)  # type: ignore[call-arg, unused-ignore]
            return a

        return shared

    def _widening(self, leaf: Callable[[torch.Tensor, Collected], Any]) -> Callable[[torch.Tensor, Collected], Any]:
        """``widen_float16=True``: float16 tensors take the widening route (recorded as odd, so
        the output side sees them and narrows results back); the rest, ``leaf``."""
        copy, grad, sparse, read_only = self.policy.copy, self.grad, self.policy.sparse, self.read_only

        def widening(t: torch.Tensor, ctx: Collected) -> Any:
            if t.dtype is not torch.float16:
                return leaf(t, ctx)
            ctx.odd.append(t)
            a = refused_tensor_to_array(t, copy, grad, sparse, settle=False, widened=WIDENED_HALF)[0]
            if read_only and type(a) is np.ndarray:
                a.setflags(False)  # type: ignore[call-arg, unused-ignore]
            return a

        return widening

    @staticmethod
    def _snapshotting(leaf: Callable[[torch.Tensor, Collected], Any]) -> Callable[[torch.Tensor, Collected], Any]:
        """``check_writes=True``: a private copy of every CPU tensor argument, taken before the
        call, for ``_memory.restore_writes`` to compare with afterwards."""

        def snapshotting(t: torch.Tensor, ctx: Collected) -> Any:
            a = leaf(t, ctx)
            if t.is_cpu and t.layout == torch.strided and not t.is_nested:  # a device's tensor crossed as a copy
                memory = t.detach()
                memory = compact(memory) if expanded(memory) else memory
                copied("check_writes", t, memory.numel() * memory.element_size())
                ctx.writes.pairs.append((t, memory.clone()))  # type: ignore[union-attr]  # check_writes has them
            return a

        return snapshotting

    def _writeback_leaf(self, t: torch.Tensor, ctx: Collected) -> Any:
        ctx.odd.append(t)
        _refuse_sparse(t)
        if not t.is_nested and expanded(t):
            # Its elements share memory, which torch refuses to write into: handed read-only, so
            # that a write raises (see Runner.failed) rather than vanish.
            a = tensor_to_array(t, self.policy.copy, self.grad, settle=False, widened=self.widened)[0]
            a.setflags(False)  # type: ignore[call-arg, unused-ignore]
            return a
        writes = ctx.writes
        assert writes is not None  # writeback has its after step
        span = writes.spans.get(id(t)) if writes.spans else None
        if span is not None:  # it shares memory with another argument
            copy, grad, widened = self.policy.copy, self.grad, self.widened
            return span.view(t, writes.pairs, writes.handed, copy=copy, grad=grad, widened=widened)
        a, private = self._writable(t)
        # Private memory is copied back after the call; shared memory only needs autograd told.
        writes.pairs.append((t, private))
        return a if private is None else hand_over(private, writes.handed)  # type: ignore[arg-type]  # writeback has the list

    def _out_leaf(self, t: torch.Tensor, ctx: Collected) -> Any:
        """A tensor handed over as an out-parameter: writable, written back after the call."""
        ctx.odd.append(t)
        _refuse_sparse(t, "an out-parameter")
        if not t.is_nested and expanded(t):
            raise LeafError(
                ConversionError,
                "is an expanded tensor (zero strides: its elements share memory), which no output can be written into",
                describe_tensor(t),
                "pass a tensor with memory of its own (torch.empty(...), or {path}.clone())",
            )
        a, private = self._writable(t)
        ctx.writes.written.append((t, a, private))  # type: ignore[union-attr]  # out-parameters have a list
        return a

    def _writable(self, t: torch.Tensor) -> tuple[Any, Any]:
        """``t`` as a writable array, and the private array to copy back after the call (None
        where the array is ``t``'s memory)."""
        copy = self.policy.copy
        a, shared = tensor_to_array(t, copy, self.grad, settle=False, widened=self.widened)
        if shared and copy is None and not a.flags.c_contiguous:
            # Compiled consumers refuse strided output memory (OpenCV drawing on t.permute(1, 2, 0),
            # numba's [::1], Cython's [:, ::1]): the function gets C order, copied back afterwards.
            copied("layout", t, a.nbytes)
            a, shared = np.ascontiguousarray(a), False
        return a, None if shared else a


def _refuse_sparse(t: torch.Tensor, role: str = "writeback=True") -> None:
    """A sparse tensor crosses as a new SciPy matrix, whose changes nothing copies back."""
    if t.layout != torch.strided and not t.is_nested:
        raise LeafError(
            ConversionError,
            f"is a sparse tensor; {role} cannot write a SciPy matrix's changes back into it",
            describe_tensor(t),
            "return the changed matrix instead, with writeback=False"
            if role == "writeback=True"
            else "pass a dense tensor ({path}.to_dense() gives one, written instead of {path})",
        )


class TensorInputs(Inputs):
    """``accepts_tensor``: array and NumPy scalar arguments reach the function as tensors."""

    def __init__(self, params: Parameters, function: str, policy: Policy, where: str):
        super().__init__(params, function, policy, where)
        self.fixed_casts = casts_to(policy.dtype) if isinstance(policy.dtype, torch.dtype) else NO_CASTS
        self.mapper = Mapper(
            {np.ndarray: array_to_tensor, np.generic: array_to_tensor, torch.Tensor: self._tensor},
            nested=policy.nested,
            fallback=lambda cls: self._sparse_leaf if is_scipy_sparse(cls) else None,
        )

    def context(
        self, shared: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Target:
        casts, policy = self.fixed_casts, self.policy
        if policy.dtype == "input":  # the casts depend on tensors that may come after the arrays
            casts = input_casts(self.tensors_in(args, kwargs))
        return target(policy.device or _devices.default_device(), casts, policy.copy, odd)

    def _sparse_leaf(self, m: Any, ctx: Target) -> torch.Tensor:
        device = ctx.device
        assert device is not None  # this side's context always has one
        return sparse_to_tensor(m, device, ctx.casts, ctx.copy, self.policy.sparse_layout)

    def _tensor(self, t: torch.Tensor, ctx: Target) -> torch.Tensor:
        ctx.tensors.append(t)  # type: ignore[union-attr]  # this side's context has them
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
