"""The per-function call: guards, conversions in, the call and its failures, the after step, conversions out."""

from __future__ import annotations

from collections.abc import Callable, Generator
from types import GeneratorType
from typing import Any, NamedTuple

import torch

from autoconvert._conversions._devices import vote
from autoconvert._conversions._to_torch import new_tuple
from autoconvert._conversions._tree import keep, place_stand_in, stand_in_device
from autoconvert._errors import ConversionError, LeafError, cycle_error
from autoconvert._failures._failures import callback_hints, hints, read_only_error, read_only_rejection
from autoconvert._failures._traceback import filter_traceback, raise_held
from autoconvert._generation._specialise import Flat, specialised
from autoconvert._observe._observe import PROFILER, RunnerCall, Watched, Watching
from autoconvert._options._config import Config, active
from autoconvert._spec._collected import AfterStep, Handed, after_failure_note, collected
from autoconvert._spec._inputs import Begin, Context, Prepare
from autoconvert._spec._outparams import Returned
from autoconvert._spec._outputs import lazily
from autoconvert._spec._signature import Given, given_args, tensor_paths
from autoconvert._spec._spec import Spec, finish_of

from ._after import ContainerChanges, ReverseChanges

ConvertIn = Callable[
    [tuple[Any, ...], dict[str, Any], object, Any, list[torch.Tensor]], tuple[tuple[Any, ...], dict[str, Any]]
]
Finish = Callable[[Any, list[torch.Tensor], list[torch.Tensor], Given, Any], Any]


class Steps(NamedTuple):
    """The steps a Runner gives the protocol (see Runner._steps); None: the protocol's own."""

    #: ``(shared, odd, args, kwargs)``: the input side's per-call context (None: a bare
    #: ``Collected(shared, odd)``, all a NumPy side without an after step needs).
    begin: Begin | None
    #: ``(args, kwargs, instance, ctx)``: the out-parameters handed over, before the rest.
    prepare: Prepare | None
    #: ``(args, kwargs, instance, ctx, odd)``: the arguments converted (None: each one by the
    #: input side's dispatch table, in the protocol's own loop).
    convert_in: ConvertIn | None
    #: ``(result, shared, odd, given, ctx)``: the result converted (None: returned as it is).
    finish: Finish | None


def _itself(value: Any) -> Any:
    return value


def noted(instance: Any, tensors: list[torch.Tensor]) -> None:
    """A stand-in instance (see Spec.stands_in) records the device its call's ``tensors``
    share, where they share one (none: the device it had stays)."""
    if tensors:
        device = vote(tensors)
        if device is not None and device is not stand_in_device(instance):
            place_stand_in(instance, device)


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
        spec: Spec,
        variants: Callable[[Config | None], Runner] | None = None,
        *,
        watch: Watching | None = None,
    ) -> None:
        """``variants``: where calls inside a ``config`` block go (this is a plan's default
        Runner), and with ``spec.watched`` every call; ``watch``: this is such a Runner, with
        where values were and each side's transfer policy (see _observe)."""
        self.spec = spec
        self.inputs = spec.inputs
        self.outputs = spec.outputs
        self.function = spec.function
        self.hands_over = spec.watched and variants is not None
        self.flat: Flat | None = None
        #: The input side's containers' changes made the caller's (a NumPy side's by the flat call too).
        self.changes = self._container_changes()
        call = self._make_call(variants)
        if variants is not None and not spec.watched:  # the plan's default Runner: its flat call, where it has one
            self.flat = specialised(spec, call, self.failed, self.changes.apply if self.changes else None)
            call = self.flat.call if self.flat is not None else call
        if watch is not None:
            call = Watched(call, spec.function, watch, self.directions())
        self.call = call

    def _container_changes(self) -> ContainerChanges | None:
        """What makes the changes to the containers the function was handed the caller's
        (None: this side hands the caller's containers as they are)."""
        inputs = self.inputs
        if inputs is None or not inputs.rebuilds:
            return None
        if inputs.hands_arrays:
            return ContainerChanges(self.function, inputs)
        return ReverseChanges(self.function, inputs, self.spec.policies.get("returns_numpy"))

    def directions(self) -> tuple[str | None, str | None]:
        """The profiler range names of the two sides' conversions (None: a side converts nothing)."""
        inputs, outputs = self.inputs, self.outputs
        return None if inputs is None else inputs.direction, None if outputs is None else outputs.direction

    def _make_call(self, variants: Callable[[Config | None], Runner] | None) -> RunnerCall:  # noqa: PLR0915 - one frame per call, its boundary around it
        """The one per-call protocol: the compile escape; the hand-over to a watched Runner
        (``config``, ``stats``, the profiler, a transfer policy); the arguments converted (by
        the dispatch table, or this Runner's ``Steps``); the call and its failures; the after
        step (see Inputs.after_step); the result converted."""
        spec, inputs = self.spec, self.inputs
        hands_read_only, watches_body, stands_in = spec.hands_read_only, spec.watches_body, spec.stands_in
        # NumPy leaves queue CUDA tensors' copies to the host and record the tensors in odd.
        converts, settles = inputs is not None, inputs is not None and inputs.hands_arrays
        after = self._after_step()
        begin, prepare, convert_in, finish = self._steps(after)
        get, resolve = (inputs.mapper.dispatch.get, inputs.mapper.resolve) if inputs is not None else (None, None)
        failed, hands_over, profiler, ended = self.failed, self.hands_over, PROFILER, self._ended(after)

        def call(wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            # The compile guard comes first: dynamo must not trace the ContextVar read (torch
            # 2.4 fails on it, later versions warn "ContextVar.get" on every compiled call), and
            # cannot break its graph inside a try block. Read through torch's module: dynamo
            # compiles this frame, met after a graph break, even where no argument is a tensor
            # itself (a registered container's), else it runs the conversions, each tensor's frame
            # compiled on its own (see _escape).
            if torch.compiler.is_dynamo_compiling():
                return spec.escape(call, wrapped, instance, args, kwargs)  # a graph break, or traced (see _trace)
            try:  # the boundary where autoconvert's errors leave: its frames are left out (see _traceback)
                if variants is not None:
                    config = active()
                    if config is not None or hands_over or profiler._is_profiler_enabled:
                        return variants(config).call(wrapped, instance, args, kwargs)
                shared: list[torch.Tensor] = []
                odd: list[torch.Tensor] = []
                given = new_tuple(Given, (args, kwargs, instance))  # a Given, at a tuple's cost
                ctx: Context | None = None
                if converts:
                    ctx = collected(shared, odd) if begin is None else begin(shared, odd, args, kwargs)
                    if prepare is not None:
                        args, kwargs = prepare(args, kwargs, instance, ctx)
                    if convert_in is not None:
                        args, kwargs = convert_in(args, kwargs, instance, ctx, odd)
                    else:  # the hot loop: one dict lookup per argument, then its leaf function
                        out: list[Any] = []
                        key = None
                        try:
                            for a in args:
                                handler = get(type(a)) or resolve(type(a))  # type: ignore[misc]  # converts: set
                                # Plain arguments (floats, strings) skip their identity handler, `keep`.
                                out.append(a if handler is keep else handler(a, ctx))
                            if kwargs:
                                converted = {}
                                for key, v in kwargs.items():
                                    converted[key] = (get(type(v)) or resolve(type(v)))(v, ctx)  # type: ignore[misc]
                                kwargs = converted
                        except (LeafError, RecursionError) as e:  # a RecursionError: a container that holds itself
                            raise self.argument_error(e, instance, key, len(out), shared + odd) from None
                        args = tuple(out)
                    if settles and odd:
                        self.settle(odd, given, ctx)
                    if stands_in:
                        noted(instance, shared + odd)
                try:  # free in CPython 3.11+ when nothing is raised
                    result = wrapped(*args, **kwargs)
                except BaseException as e:
                    failed(
                        e,
                        after,
                        ctx,
                        given,
                        handed=(args, kwargs),
                        handed_read_only=hands_read_only and (shared or odd),
                    )
                    raise
                if watches_body and type(result) is GeneratorType:
                    result = self._watched_body(result, ctx, given, (args, kwargs), shared or odd)
                if ended is not None:
                    result = ended(ctx, given, (args, kwargs), result)
                    if type(result) is Returned:  # an out-parameter's array: the caller's own tensor, written already
                        return result.tensor
                return result if finish is None else finish(result, shared, odd, given, ctx)
            except ConversionError as e:
                filter_traceback(e)
                raise
            except Exception as e:
                raise_held(e)
                raise

        return call

    def _ended(self, after: AfterStep | None) -> Callable[[Any, Given, Handed, Any], Any] | None:
        """What runs once the function returned: the after step (the arrays' contents are the
        caller's then), and the changes to the containers it was handed
        (see ContainerChanges, ReverseChanges); None where nothing does."""
        changes = self.changes
        if changes is None:
            return after

        def ended(ctx: Any, given: Given, handed: Handed, result: Any) -> Any:
            if after is not None:
                result = after(ctx, given, handed, result)
            if ctx.rebuilt:
                changes.ended(ctx, given, handed)
            return result

        return ended

    def argument_error(
        self, error: Exception, instance: object, key: str | None, position: int, met: list[torch.Tensor]
    ) -> Exception:
        """The public error for an argument the loop could not convert (keyword ``key``, or at
        ``position``): ``error`` a LeafError, or a RecursionError for a container that holds
        itself. A stand-in instance records the device of the tensors ``met`` (the refused
        one among them), as a call would have."""
        if self.spec.stands_in:
            noted(instance, met)
        fact = error if isinstance(error, LeafError) else cycle_error()
        assert self.inputs is not None  # the loop is the input side's
        return self.inputs.public(fact, instance, key, position)

    def _watched_body(
        self,
        generator: Generator[Any, Any, Any],
        ctx: Context | None,
        given: Given,
        handed: tuple[tuple[Any, ...], dict[str, Any]],
        handed_read_only: Any,
    ) -> Generator[Any, Any, Any]:
        """A generator function's ``generator``, whose body's failures meet ``failed`` as the
        call's own would: a write into a read-only array handed over is a ReadOnlyError."""

        def body_failed(error: BaseException) -> None:
            self.failed(error, None, ctx, given, handed=handed, handed_read_only=handed_read_only)

        return lazily(generator, _itself, body_failed)

    def _steps(self, after: AfterStep | None) -> Steps:
        """This Runner's steps of the protocol (see Steps): out-parameters handed over first
        (``prepare``), then with ``only=``/``exclude=`` the selected arguments converted and the
        rest recorded, else each argument by the dispatch table; the result by the output side."""
        inputs = self.inputs
        finish = finish_of(self.spec)
        if inputs is None:
            return Steps(None, None, None, finish)
        begin = inputs.begin if after is None else after.begin
        convert_in = inputs.convert_selected if self.spec.selects else None
        return Steps(begin, inputs.prepare, convert_in, finish)

    def _after_step(self) -> AfterStep | None:
        """The spec's after step, which runs after the function even when it raised, as the
        input side makes it (see Inputs.after_step): an out-parameter's array returned comes
        back as the caller's tensor."""
        inputs = self.inputs
        return None if inputs is None else inputs.after_step(self.spec.gives_back, self.spec.site)

    def settle(self, odd: list[torch.Tensor], given: Given, ctx: Context | None) -> None:
        """After the arguments of a call with ``odd`` tensors: what the input side's
        conversions left to finish (see Inputs.settle_arguments)."""
        assert self.inputs is not None  # settles: an input side that hands arrays
        self.inputs.settle_arguments(odd, given, ctx)

    def failed(
        self,
        error: BaseException,
        after: AfterStep | None,
        ctx: Context | None,
        given: Given,
        *,
        handed: tuple[tuple[Any, ...], dict[str, Any]],
        handed_read_only: Any,
    ) -> None:
        """The function raised ``error``: the after step still runs (a failure of its own is a
        note on ``error``), and where the call handed read-only arrays (``handed_read_only``),
        NumPy's refusal to write into one (``handed``: the arguments it got) becomes a ReadOnlyError; otherwise ``error`` stands,
        with notes where how an argument was handed is the likely cause (see _failures)."""
        if after is not None and ctx is not None:
            self._after_failure(after, ctx, given, handed, error)
        inputs = self.inputs
        if inputs is None or not inputs.hands_arrays:
            return
        if self.spec.stands_in:  # the object's own attributes, never the stand-in's tensors
            given = given_args(given.args, given.kwargs, given.instance.__wrapped__)  # type: ignore[attr-defined]
        # A method's object may hold arrays handed to an earlier call (see _failures.read_only_rejection).
        handed_read_only = handed_read_only or (self.spec.hands_read_only and given.instance is not None)
        try:  # the walks below meet what the call met: a container holding itself (nested=False)
            rejection = read_only_rejection(error, inputs, handed, given) if handed_read_only else None
            if rejection is not None:
                raise read_only_error(self.function, error, rejection, inputs, self.spec.site) from error
            site = self.spec.site
            notes = (
                hints(error, inputs, tensor_paths(inputs.params, *given), site) if isinstance(error, Exception) else []
            )
            if not inputs.policy.callbacks:
                notes += callback_hints(error, inputs, given, site)
        except RecursionError:
            return
        for note in notes:
            error.add_note(f"autoconvert: {self.function}: {note}")

    def _after_failure(
        self,
        after: AfterStep,
        ctx: Any,
        given: Given,
        handed: tuple[tuple[Any, ...], dict[str, Any]],
        error: BaseException,
    ) -> None:
        """Run ``after`` for a call that raised ``error``: the user's exception wins, and what
        ``after`` had to say (a write-back that failed, a write put back) becomes a note on it."""
        try:
            after(ctx, given, handed, None)
        except Exception as failure:
            error.add_note(after_failure_note(self.function, failure))
