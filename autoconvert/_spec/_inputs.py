"""The input sides: what each selected argument becomes before the function runs."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._conversions import _devices
from autoconvert._conversions._containers import Node, is_scipy_sparse
from autoconvert._conversions._dtypes import NO_CASTS, WIDENED, WIDENED_HALF, Casts, casts_to, is_inexact, promote
from autoconvert._conversions._grad import FORWARD_AD, GradPolicy
from autoconvert._conversions._memory import snapshot_private
from autoconvert._conversions._mutations import Rebuilt, rebuilt
from autoconvert._conversions._sparse import sparse_to_tensor
from autoconvert._conversions._to_numpy import dtype_to_numpy, slow_tensor_to_array, tensor_to_array
from autoconvert._conversions._to_torch import Target, array_to_tensor, target
from autoconvert._conversions._tree import Mapper, StandIn, stood_for
from autoconvert._conversions._writeback import aliased_spans, frozen, handed_over
from autoconvert._errors import LeafError, cycle_error
from autoconvert._options._options import DEFAULT_POLICY, Policy

from ._callbacks import device_leaf, namespace_leaf, takes_callbacks
from ._check_writes import CHECK_WRITES_GENERIC, CHECKED, RESTORE_WRITES, RestoreWrites, snapshotting
from ._collected import AfterStep, Collected, collected
from ._copy_back import COPIED_BACK, COPY_BACK, Copies, CopyBack
from ._emit import KEPT, RECORDED, Step
from ._outparams import OUT_WRITTEN_BACK, WRITE_BACK_OUT, OutParams, handing_out, out_leaf
from ._signature import Parameters, Selection, record, tensor_paths
from ._writeback import (
    WRITE_BACK,
    WRITEBACK_GENERIC,
    WRITTEN_BACK,
    WriteBack,
    refused_write_words,
    writable_fixes,
    writeback_leaf,
)

#: What an input side's leaf functions receive per call: a NumPy side's Collected, a tensor
#: side's Target, or (recording only) the list the tensors go in.
Context = Collected | Target | list[torch.Tensor]
#: An input side's ``prepare(args, kwargs, instance, ctx)`` (see Inputs.prepare).
Prepare = Callable[[tuple[Any, ...], dict[str, Any], object, Any], tuple[tuple[Any, ...], dict[str, Any]]]
#: An input side's ``begin(shared, odd, args, kwargs)``: the call's context (see Inputs.begin).
Begin = Callable[[list[torch.Tensor], list[torch.Tensor], tuple[Any, ...], dict[str, Any]], Context]
#: Each after step the NumPy side composes (see NumpyInputs.after), in explain's words.
AFTER_WORDS = {
    RESTORE_WRITES: CHECKED,
    WRITE_BACK: WRITTEN_BACK,
    WRITE_BACK_OUT: OUT_WRITTEN_BACK,
    COPY_BACK: COPIED_BACK,
}


class Inputs:
    """The input side: converts the selected arguments, and records every tensor argument.

    A call's tensor arguments are recorded in two lists, for the output side to find the
    caller's device and dtype: ``shared``, those NumPy shares as they are (on the CPU, a
    NumPy dtype, no grad, no conj/neg bit: results go back to the CPU, uncast), and
    ``odd``, all the others, which need a look. Leaf functions receive a per-call context
    (``ctx``: a ``Collected`` on the NumPy side, a Target on the tensor side) holding the
    lists and what else they need.

    This class is the input side's interface, which its readers (the spec, the Runner, the
    generator, ``explain``) call rather than test which side they have: its leaves
    (``mapper``), its step (``step()``, and ``passed`` for a parameter ``only=``/``exclude=``
    pass on), what it begins before the arguments (``begin``, ``prepare``), settles after
    them (``settle_arguments``) and runs after the function (``after``, ``after_step()``),
    the constants its emitter reads (``flat_constants()``), why its calls go generic
    (``generic_because``), and its features' words when compiled code refuses a read-only
    array (``handed_earlier``, ``refused_write_words``, ``writable_fixes``). The NumPy side
    composes its features onto it: writeback
    (_writeback), check_writes (_check_writes), out-parameters (_outparams).
    """

    mapper: Mapper  # the converting walk, set by the subclass
    #: The profiler range name of this side's conversions (None: it converts nothing).
    direction: str | None = None
    #: The function gets read-only arrays (see NumpyInputs, the one side that decides it).
    read_only = False
    #: The function may be handed a read-only array (see Spec.hands_read_only).
    hands_read_only = False
    #: The function gets arrays made from the caller's tensors: their containers are rebuilt
    #: (their changes go back, see _after's ContainerChanges), their transfers settle after the
    #: arguments (``settle_arguments``), and a failure is read for what the arrays caused.
    hands_arrays = False
    #: Its containers reach the function rebuilt, and what the function changes in them
    #: reaches the caller's (see _after: ContainerChanges, ReverseChanges).
    rebuilds = False
    #: The function gets tensors placed on a device (the flat code places arrays itself).
    places = False
    #: The out-parameters, handed over writable (see _outparams; None: the function has none).
    writes: OutParams | None = None
    #: The float widening of this side's arrays (see _dtypes; float16 widened with widen_float16=True).
    widened: Casts = WIDENED
    #: The after step's name, what runs once the function returned or raised (None: none):
    #: check_writes' RESTORE_WRITES, writeback's WRITE_BACK, out-parameters' WRITE_BACK_OUT.
    after: str | None = None
    #: What a parameter ``only=``/``exclude=`` pass on gets: its tensors recorded.
    passed: Step = RECORDED
    #: ``prepare(args, kwargs, instance, ctx)``: the out-parameters handed over, before the rest
    #: (None: nothing comes first).
    prepare: Prepare | None = None

    def __init__(self, params: Parameters, function: str, policy: Policy, where: str) -> None:
        only, exclude = policy.only, policy.exclude
        self.policy = policy  # this side's resolved options, read where they are needed
        self.params = params
        self.function = function
        selects = only is not None or exclude is not None  # only=[] selects nothing; it is not "all"
        self.selection = Selection(params, only, exclude, where) if selects else None
        self.recorder = Mapper({torch.Tensor: record}, nested=policy.nested)
        #: ``begin(shared, odd, args, kwargs)``: a call's context, made before its arguments
        #: (None: the protocol's bare ``Collected(shared, odd)``); an after step brings its own.
        self.begin: Begin | None = self.context

    def tensors_in(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
        """Every tensor among the call's arguments, walked as this side walks them."""
        found: list[torch.Tensor] = []
        for value in (*args, *kwargs.values()):
            self.recorder(value, found)
        return found

    def spans(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int, Any] | None:
        """writeback: the spans of memory that the call's tensors share (see _writeback)."""
        try:
            return aliased_spans(self.tensors_in(args, kwargs))
        except RecursionError:  # a container that holds itself: the conversion names it
            return None

    def context(
        self, shared: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Context:
        """What this side's leaf functions receive for one call: by default the ``odd`` list,
        which records every tensor argument."""
        return odd

    def step(self) -> Step:
        """What each converted argument gets: the flat code's emitter for it, and its words."""
        return RECORDED

    def generic_because(self) -> str | None:
        """Why a call with this side has no flat call, in words (None: this side has one)."""
        return None

    def settle_arguments(self, odd: list[torch.Tensor], given: Any, ctx: Any) -> None:
        """After the arguments of a call with ``odd`` tensors, where ``hands_arrays``: what
        their conversions left to finish."""

    def after_step(self, gives_back: bool, site: Callable[[str], str]) -> AfterStep | None:
        """The step named by ``after``, made once per Runner (None: none). ``gives_back``: an
        out-parameter's array returned comes back as the caller's tensor; ``site``: where an
        option goes, for messages (see Spec.site)."""
        return None

    def handed_earlier(self, a: NDArray[Any]) -> bool:
        """Whether ``a``, a read-only array compiled code refused, is a private array of an
        earlier call (or a view of one), frozen since its writes were copied back."""
        return frozen(a)

    def refused_write_words(self, late: bool, expanded: bool, overlapping: bool) -> tuple[str, str] | None:
        """What a refused write into a read-only array handed over is, and its fix, where a
        feature of this side words it (None: the read-only default's words): ``late``, into
        arrays of an earlier call; ``expanded``/``overlapping``, into such a tensor's array."""
        return refused_write_words(late, expanded, overlapping, self.policy.writeback)

    def writable_fixes(self, site: Callable[[str], str]) -> str:
        """The fixes for a write into a read-only array (``site``: see Spec.site)."""
        return writable_fixes(site)

    def flat_constants(self) -> dict[str, Any]:
        """The constants the flat code reads for this side's step (see _specialise): its
        dispatch table, the walks it inlines, and the call's tensors for the output side."""
        mapper = self.mapper
        return {
            "get": mapper.dispatch.get,
            "kept": mapper.kept,
            "walk_dict": mapper.walk_dict,
            "walk_sequence": mapper.walk_sequence,
            # The call's tensors, for a result the flat code leaves to the output side (it votes on
            # them, or unaliases a tensor result): the flat code keeps only a flag, ``met_tensors``. Any
            # call that gets there has no tensor deeper than the flat code walks.
            "tensors_in": self.tensors_in,
        }

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
    for the output side to find the caller's device (see Outputs.records_arguments)."""

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
    """An input side's walk (either direction's): one rebuilt container per caller's
    container in a call (the function sees the caller's sharing: ``batch['a'] is
    batch['b']``), each recorded in the call's context's ``rebuilt`` (a ``Collected``'s, a
    ``Target``'s) for its changes to reach the caller (see _mutations); one that held
    nothing to convert, handed as it is, recorded too where it takes changes back, so that
    the values the function puts in it come back in the caller's kind."""

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

    def recording(obj: Any, ctx: Collected | Target) -> Any:
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

    direction = "to_numpy"
    hands_arrays = True
    rebuilds = True

    def __init__(self, params: Parameters, function: str, grad: GradPolicy, policy: Policy, where: str):
        super().__init__(params, function, policy, where)
        self.begin = None  # a bare Collected, or the after step's (see Spec.after)
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
        if self.writes is not None:
            self.prepare = handing_out(
                self.writes, params, policy.nested, out_leaf(policy.copy, grad, self.widened), self.public
            )
        #: writeback=True hands expanded tensors read-only too (a write into one would be lost).
        self.hands_read_only = self.read_only or policy.writeback
        self.after = (
            RESTORE_WRITES
            if self.snapshots
            else WRITE_BACK
            if policy.writeback
            else WRITE_BACK_OUT
            if self.writes is not None
            else None
        )
        leaf = writeback_leaf(policy.copy, grad, self.widened) if policy.writeback else self._make_leaf()
        if self.widened is WIDENED_HALF and not policy.writeback:
            leaf = self._widening(leaf)
        if self.snapshots:
            leaf = snapshotting(leaf)
        self.mapper = Rebuilding(
            {
                torch.Tensor: leaf,
                StandIn: stood_for,
                torch.dtype: dtype_to_numpy,
                types.ModuleType: namespace_leaf,
                torch.device: device_leaf,
            },
            nested=policy.nested,
            fallback=takes_callbacks(policy.callbacks, grad),
        )

    def context(
        self, shared: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Collected:
        """``Collected(shared, odd)``: an after step adds its own state (see AfterStep.begin)."""
        return collected(shared, odd)

    def after_step(self, gives_back: bool, site: Callable[[str], str]) -> AfterStep | None:
        if self.after is None:
            return None
        copy_back = WriteBack(self.function, self, gives_back, site)  # WRITE_BACK, WRITE_BACK_OUT
        return RestoreWrites(copy_back) if self.after == RESTORE_WRITES else copy_back

    def step(self) -> Step:
        detach, private = self.grad.mode == "detach", not self.read_only
        return Step("numpy", detach=detach, private=private, widens=self.widened is not WIDENED)

    def generic_because(self) -> str | None:
        if self.policy.writeback:
            return WRITEBACK_GENERIC
        if self.snapshots:
            return CHECK_WRITES_GENERIC
        return None

    def settle_arguments(self, odd: list[torch.Tensor], given: Any, ctx: Collected) -> None:
        """One wait for all the transfers of the call's ``odd`` tensors, the private arrays
        ``ctx`` handed over under writeback counted as the arguments hold them (see
        _writeback.handed_over), and the once-per-function GradientWarning, naming where its
        tensor was in ``given``, where one of them required grad and the function takes the
        call (one it refuses ends in its own TypeError alone: see ``Parameters.refuses``)."""
        _devices.settle(odd)
        writes = ctx.writes
        if writes is not None and writes.handed:
            handed_over(writes.handed)
        if writes is not None and writes.compared:
            snapshot_private(writes.compared)
        grad = self.grad
        if grad.unsaid is not None:
            if self.params.refuses(*given):  # the function's own TypeError comes alone (the flat path's too)
                grad.unsay()
            else:
                grad.say([path for path, t in tensor_paths(self.params, *given) if t is grad.unsaid])

    def flat_constants(self) -> dict[str, Any]:
        # The containers the flat code walks are decided now (as the Mapper would on first sight),
        # so the first call walks them too; a registration later makes the generic call decide again.
        for cls in (tuple, list, dict):
            self.mapper.resolve(cls)
        return super().flat_constants()

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
            if not t.requires_grad and FORWARD_AD._current_level < 0:
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
            a = slow_tensor_to_array(t, copy, grad, sparse, settle=False)[0]
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
            a = slow_tensor_to_array(t, copy, grad, sparse, settle=False, widened=WIDENED_HALF)[0]
            if read_only and type(a) is np.ndarray:
                a.setflags(False)  # type: ignore[call-arg, unused-ignore]
            return a

        return widening


class TensorInputs(Inputs):
    """``accepts_tensor``: array and NumPy scalar arguments reach the function as tensors."""

    direction = "to_tensor"
    places = True
    passed = KEPT  # a parameter only=/exclude= pass on is let through as it is

    def __init__(self, params: Parameters, function: str, policy: Policy, where: str):
        super().__init__(params, function, policy, where)
        self.fixed_casts = casts_to(policy.dtype) if isinstance(policy.dtype, torch.dtype) else NO_CASTS
        #: copy=None: a private copy of a writable array torch cannot share takes the function's
        #: writes back to the caller's array (see _copy_back); copy=True's are the function's own.
        self.after = COPY_BACK if policy.copy is None else None
        #: nested=True: containers reach the function rebuilt, their arrays as tensors, and
        #: what it changes in them reaches the caller's (see _after's ReverseChanges).
        self.rebuilds = policy.nested
        self.mapper = (Rebuilding if policy.nested else Mapper)(
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
        copies: Copies | None = [] if self.after is not None else None
        rebuilt: Rebuilt | None = {} if self.rebuilds else None
        return target(policy.device or _devices.default_device(), casts, policy.copy, odd, copies, rebuilt=rebuilt)

    def after_step(self, gives_back: bool, site: Callable[[str], str]) -> AfterStep | None:
        return CopyBack(self.function, self.params, self.context) if self.after is not None else None

    def step(self) -> Step:
        return Step("tensor", shares=not (self.fixed_casts or self.policy.copy))

    def flat_constants(self) -> dict[str, Any]:
        policy = self.policy
        return {
            **super().flat_constants(),
            "device": policy.device,
            "casts": self.fixed_casts,
            "copy": policy.copy,
            "copying_back": CopyBack(self.function, self.params, self.context).calling,
        }

    def generic_because(self) -> str | None:
        if self.policy.dtype == "input":
            return "dtype='input' casts by the dtypes of all the call's tensors, known once every argument is seen"
        return None

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
