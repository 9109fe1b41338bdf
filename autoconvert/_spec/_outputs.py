"""The output sides: what each result becomes after the function returns."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import torch

from autoconvert._conversions._containers import is_scipy_sparse
from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._devices import CPU, default_device, vote
from autoconvert._conversions._dtypes import NO_CASTS, RESTORING, RESTORING_HALF, Casts, casts_to, restoring_casts
from autoconvert._conversions._grad import DETACH, TO_NUMPY_FIXES, GradFixes, GradPolicy
from autoconvert._conversions._memory import bits_snapshot, overlaps_any, same_bits, write_into, written_at
from autoconvert._conversions._mutations import cycle_in
from autoconvert._conversions._result_copies import PLACES_APART, CopyPair, HeldCopy
from autoconvert._conversions._result_methods import ResultFields, ResultMethod, result_cycle_error
from autoconvert._conversions._sparse import sparse_to_tensor
from autoconvert._conversions._to_numpy import as_result, tensor_to_array
from autoconvert._conversions._to_torch import OBJECT_ARRAY, Target, array_to_tensor, target, tensor_to_device
from autoconvert._conversions._tree import (
    Leaf,
    Mapper,
    StandIn,
    stand_in_device,
    stand_in_returns,
    stood_for,
)
from autoconvert._errors import (
    ARGUMENT_CYCLE_FIX,
    ConversionError,
    LeafError,
    NoDeviceError,
    ReadOnlyError,
    cycle_error,
    message,
)
from autoconvert._options._config import active
from autoconvert._options._options import Policy

from ._callbacks import to_tensors
from ._emit import Result
from ._inputs import Inputs, input_casts
from ._outparams import Returned
from ._signature import (
    DEFERRED_RESULTS,
    Given,
    Parameters,
    deferred_result,
    device_mismatch,
    tensor_paths,
)

#: What builds a TensorOutputs again where a result's methods are unpickled: the function's
#: name, the side's policy, whether float16 is restored, whether inputs were read-only, and
#: its results' methods' grad (see TensorOutputs).
TensorRemade = tuple[str, Policy, bool, bool, "MethodGrad"]

#: A result method's grad: the mode of the call's input side, whether it was given explicitly,
#: and what made the function, written with ``grad={}`` (None: nothing takes grad=, as for
#: returns_tensor alone and to_tensor(): a config block alone changes it).
MethodGrad = tuple[str, bool, str | None]

#: What makes an output side's per-call context from the call's tensors: ``make(shared, odd)``.
ContextMaker = Callable[[list[torch.Tensor], list[torch.Tensor]], Any]


#: An output side's conversion of one call's result: ``convert(result, shared, odd, call)``
#: (see Outputs._make_convert).
Convert = Callable[..., Any]


class YieldsLater(Exception):  # noqa: N818 - a signal between the output side and its leaf, never raised out
    """The result is a generator: its items are converted as it yields them (see ``lazily``)."""


def _yields_later(value: Any, ctx: Any) -> Any:
    raise YieldsLater


#: What the output sides refuse: results whose body runs after the call, but for a generator
#: returned as the result itself, which is converted as it yields.
_REFUSED: dict[type, Leaf] = dict.fromkeys(DEFERRED_RESULTS, deferred_result)
_LATER = {**_REFUSED, types.GeneratorType: _yields_later}
_DEFERRED = Mapper(_REFUSED, nested=True)  # finds the generator inside a container, by its path


def lazily(
    generator: Generator[Any, Any, Any],
    convert: Callable[[Any], Any],
    failed: Callable[[BaseException], None] | None = None,
) -> Generator[Any, Any, Any]:
    """``generator``, each value it yields and the value it returns passed through ``convert``
    when it comes (``KFold.split``'s folds); ``send``, ``throw`` and ``close`` reach it.
    ``failed(error)`` sees what the generator's body raises, and may raise in its place."""

    def advance(step: Callable[..., Any], *value: Any) -> Any:
        try:
            return step(*value)
        except (StopIteration, GeneratorExit):
            raise
        except BaseException as e:
            if failed is not None:
                failed(e)
            raise

    try:
        item = advance(next, generator)
        while True:
            try:
                sent = yield convert(item)
            except GeneratorExit:
                generator.close()
                raise
            except BaseException as e:  # thrown in by the caller: the generator's to handle
                item = generator.throw(e)
            else:
                item = advance(generator.send, sent)
    except StopIteration as stop:
        return convert(stop.value)


class NeedsInputs(Exception):  # noqa: N818 - a signal between the output side and its leaf, never raised out
    """An output leaf needs the call's tensor arguments (as ``ctx.tensors``), which the per-call
    context leaves out because almost no call needs them."""


def _no_context(shared: list[torch.Tensor], odd: list[torch.Tensor]) -> None:
    return None


class Outputs:
    """The output side: converts results, with paths below ``result`` in messages.

    This class is the output side's interface, which its readers (the spec, the Runner, the
    generator, ``explain``) call rather than test which side they have: its leaves
    (``mapper``), what it finishes a call with (``convert``), its step (``step()``), the
    constants its emitter reads (``flat_constants()``) and why its calls go generic
    (``generic_because``).
    """

    #: The profiler range name of this side's conversions.
    direction: str
    #: Results are placed by the call's tensor arguments, so a call without an input side
    #: records them (see RecordingInputs).
    records_arguments = False
    #: An out-parameter's array the function returns comes back as the caller's tensor.
    gives_back = False

    def __init__(
        self,
        function: str,
        params: Parameters,
        mapper: Mapper,
        context: ContextMaker = _no_context,
        shared_target: Any = None,
        *,
        argument: str | None = None,
        nested_off: str | None = None,
    ) -> None:
        """``nested_off``: where the user gives ``nested=False`` to this side, which leaves
        container results unconverted (None: no option of the function's does)."""
        self.function = function
        #: Messages name a decorator's results, or to_numpy/to_tensor's argument (``obj``).
        self.role, self.root = ("argument", argument) if argument else ("", "result")
        #: The way round a value holding itself: to_numpy's argument's, or a result's
        #: (``r.hist.append(r); return r``), whose fix speaks of results.
        off = f", or leave container results unconverted with {nested_off}" if nested_off else ""
        self.cycle_fix = ARGUMENT_CYCLE_FIX if argument else f"break the cycle{off}"
        self.params = params
        self.mapper = mapper
        #: ``context(shared, odd)``: what this side's leaf functions receive for one call,
        #: unless ``shared_target`` is that already: the context when every tensor was shared.
        self.context = context
        self.shared_target = shared_target
        self.convert = self._make_convert()

    def step(self) -> Result:
        """What the result gets: the flat code's emitter for it, and its words."""
        raise NotImplementedError

    def generic_because(self, inputs: Inputs | None) -> str | None:
        """Why a call with this side (after ``inputs``) has no flat call, in words (None: it has one)."""
        return None

    def flat_constants(self) -> dict[str, Any]:
        """The constants the flat code reads for this side's step (see _specialise)."""
        return {}

    def _make_convert(self) -> Convert:
        """``convert(result, shared, odd, call)``: ``result`` converted; ``shared``/``odd`` are
        the call's tensors (see Inputs), ``call`` its arguments as given. (The generic call
        also passes the input side's per-call context, which this side has no use for.)"""
        get, resolve, context, shared_target = (
            self.mapper.dispatch.get,
            self.mapper.resolve,
            self.context,
            self.shared_target,
        )
        function, params, role, root = self.function, self.params, self.role, self.root

        def convert(
            result: Any,
            shared: list[torch.Tensor],
            odd: list[torch.Tensor],
            call: Given,
            _: object = None,
            *,
            inputs: list[torch.Tensor] | None = None,
            device: torch.device | None = None,
        ) -> Any:
            ctx = shared_target if shared and not odd and shared_target is not None else context(shared, odd)
            if inputs is not None:
                ctx = ctx._replace(tensors=inputs)
            if device is not None:
                ctx = ctx._replace(device=device)
            try:
                return (get(type(result)) or resolve(type(result)))(result, ctx)
            except NeedsInputs:  # a leaf must see the call's tensors: once more, with them (rare)
                return convert(result, shared, odd, call, inputs=shared + odd, device=device)
            except YieldsLater:
                if type(result) is not types.GeneratorType:  # one inside a container: refused where it is
                    try:
                        _DEFERRED(result, None)
                    except LeafError as e:
                        raise e.public(function, role, root) from None
                return lazily(result, lambda item: convert(item, shared, odd, call, inputs=inputs, device=device))
            except LeafError as e:
                if e.problem == OBJECT_ARRAY and _sparse_among(odd):
                    raise _sparse_read_as_object(function, params, call) from None
                raise e.public(function, role, root) from None
            except RecursionError:
                error = cycle_error(self.cycle_fix)
                error.keys += reversed(cycle_in(result))  # where below the result: innermost first
                raise error.public(function, role, root) from None
            except NoDeviceError:
                raise device_mismatch(function, params, *call) from None

        return convert


def through_stand_in(outputs: Outputs) -> Convert:
    """The finish of a call whose instance stands in for the object called (see
    Spec.stands_in): the object itself comes back as the instance, any other result
    converted, then as the instance returns it. A call without tensors
    (``kde.resample(10)``) places its results where the object's tensors are, as its
    attributes read back, unless ``device=`` places them."""
    convert = outputs.convert
    follows_object = isinstance(outputs, TensorOutputs) and outputs.device is None

    def finish(result: Any, shared: list[torch.Tensor], odd: list[torch.Tensor], call: Given, _: object = None) -> Any:
        instance: Any = call.instance
        if result is instance.__wrapped__:
            return instance
        device = stand_in_device(instance)
        if follows_object and device is not None and not shared and not odd:
            return stand_in_returns(instance, convert(result, shared, odd, call, device=device))
        return stand_in_returns(instance, convert(result, shared, odd, call))

    return finish


def _sparse_read_as_object(function: str, params: Parameters, call: Given) -> Exception:
    """A function that needs dense arrays, handed a sparse tensor as a SciPy matrix, read it as
    one object (``np.asarray(matrix)``) and returned an object array: the error is about the
    sparse argument, which is what to change."""
    path, found = next((p, t) for p, t in tensor_paths(params, *call) if t.layout != torch.strided)
    return ConversionError(
        message(
            function,
            f"argument {path}",
            "is a sparse tensor, handed over as a scipy.sparse matrix, and the function returned an object "
            "array: it needs a dense array, and NumPy read the matrix as one object",
            describe_tensor(found),
            "pass {path}.to_dense()",
            path=path,
        )
    )


class TensorOutputs(Outputs):
    """``returns_tensor``: array, NumPy scalar and tensor results come back on the caller's device."""

    direction = "to_tensor"
    records_arguments = True
    gives_back = True

    def __init__(
        self,
        function: str,
        params: Parameters,
        policy: Policy,
        *,
        argument: str | None = None,
        nested_off: str | None = None,
        restoring: dict[torch.dtype, Casts] = RESTORING,
        read_only: bool = False,
        objects: Callable[[type], Leaf | None] | None = None,
        grad: MethodGrad = ("warn", False, None),
    ) -> None:
        """``grad``: the grad policy of the call's input side, whether it was given explicitly,
        and where it is written, which its results' methods follow (see ``_method_grad``).
        ``read_only``: the function was handed read-only views of the caller's tensors, so a
        tensor result made from one (``torch.as_tensor(a)``) is copied rather than aliased.
        ``objects``: the leaf for results of a type no other handler takes (torchify's proxies
        for its package's objects), or None to keep them as they are."""
        self.restoring = restoring  # RESTORING_HALF when the input side widened float16 too
        #: What builds this side again where a result's methods are unpickled (torchify's
        #: proxies aside: the unpickled methods give package objects as they are).
        self.remade: TensorRemade = (function, policy, restoring is RESTORING_HALF, read_only, grad)
        self.grad_mode, self.grad_given, self.grad_maker = grad
        self.device = policy.device
        self.dtype = policy.dtype
        self.copy = policy.copy
        self.fixed_casts = casts_to(self.dtype) if isinstance(self.dtype, torch.dtype) else None
        self.sparse_layout = policy.sparse_layout
        mapper = Mapper(
            {
                np.ndarray: array_to_tensor,
                np.generic: array_to_tensor,
                torch.Tensor: self._unaliased if read_only else self._tensor,
                Returned: _given_back,
                **_LATER,
            },
            nested=policy.nested,
            fallback=lambda cls: self._sparse if is_scipy_sparse(cls) else objects(cls) if objects else None,
            result_method=self._result_method,
        )
        self._arguments = Mapper({torch.Tensor: _read_only_array}, nested=policy.nested)
        self._grads: dict[tuple[str, str], GradPolicy] = {}  # a result method's, by name and mode: it warns once
        # Only shared tensors: what vote() and the dtype pass would find, decided now. NumPy
        # has their dtypes, so no dtype comes back (RESTORING holds the ones it lacks).
        casts = NO_CASTS if self.fixed_casts is None else self.fixed_casts
        shared_target = None if self.dtype == "input" else Target(self.device or CPU, casts, self.copy)
        super().__init__(
            function, params, mapper, self._make_context(), shared_target, argument=argument, nested_off=nested_off
        )

    def step(self) -> Result:
        # The shared target holds only when every tensor argument was NumPy's to share.
        shared = self.shared_target
        if shared is None or shared.device is not CPU or shared.casts or shared.copy:  # placed, cast or copied
            return Result("tensor")
        return Result("tensor", shares=True, copies_read_only=shared.copy is None)

    def generic_because(self, inputs: Inputs | None) -> str | None:
        if self.shared_target is None:
            return "dtype='input' casts results by the dtypes of the call's tensors"
        if inputs is not None and inputs.places:
            return "accepts_tensor with returns_tensor: results are placed by the tensors the arguments became"
        return None

    def flat_constants(self) -> dict[str, Any]:
        # The containers the flat code walks are decided now, as for the input side's.
        mapper = self.mapper
        for cls in (tuple, list, dict):
            mapper.resolve(cls)
        return {
            "restored": self.restoring,
            "shared_target": self.shared_target,
            "get_out": mapper.dispatch.get,
            "kept_out": mapper.kept,
            "walk_sequence_out": mapper.walk_sequence,
            "walk_dict_out": mapper.walk_dict,
        }

    def _make_context(self) -> ContextMaker:
        """``context(shared, odd) -> Target``; the device is None when
        the tensors disagree, which only matters (and raises) if some result has to be placed."""
        fixed_device, fixed_casts, dtype, copy = self.device, self.fixed_casts, self.dtype, self.copy
        restoring = self.restoring

        def context(shared: list[torch.Tensor], odd: list[torch.Tensor]) -> Target:
            seen = shared + odd
            device = fixed_device or vote(seen)
            if fixed_casts is not None:
                casts = fixed_casts
            elif dtype == "input":
                casts = input_casts(seen)
            else:  # None: a dtype NumPy lacks comes back when every floating input had it
                inexact = {t.dtype for t in seen if t.dtype.is_floating_point or t.dtype.is_complex}
                casts = NO_CASTS
                if len(inexact) == 1:
                    narrow = inexact.pop()
                    # scipy.sparse has no float16: a sparse float16 argument widened whatever was asked.
                    half = narrow is torch.float16 and restoring is not RESTORING_HALF and _sparse_among(seen)
                    casts = restoring_casts(narrow, RESTORING_HALF if half else restoring)
            return target(device, casts, copy)

        return context

    def _tensor(self, t: torch.Tensor, ctx: Target) -> torch.Tensor:
        return tensor_to_device(t, _placed(ctx), ctx.casts, ctx.copy)

    def _unaliased(self, t: torch.Tensor, ctx: Target) -> torch.Tensor:
        """A tensor result, copied if it is the memory of a tensor argument. The call's tensors
        are asked for (NeedsInputs) only when one passes through as it is: no cost otherwise."""
        out = tensor_to_device(t, _placed(ctx), ctx.casts, ctx.copy)
        if out is not t:  # moved, cast or copied: memory of its own
            return out
        if ctx.tensors is None:
            raise NeedsInputs
        return t.clone() if overlaps_any(t, ctx.tensors) else t

    def _result_method(self, method: Any, mapper: Mapper, ctx: Target, fields: ResultFields) -> ResultMethod:
        name = f"{getattr(method, '__qualname__', method)}()"
        return TensorsIn(
            method,
            mapper,
            # What a method gives back as a tensor it made or holds (a global, one sent into a
            # generator method) is no tensor of the call's: it comes back as it is, as plainly.
            ctx._replace(tensors=[]),
            fields,
            function=self.function,
            grads=functools.partial(self._method_grad, name),
            arguments=self._arguments,
            remade=self.remade,
        )

    def _method_grad(self, name: str) -> GradPolicy:
        """The grad policy of the result method ``name`` at this call: the call's that made
        the result, or a ``config`` block's around the method call where grad= was not given
        explicitly (which no block changes). The method takes no options of its own: its
        warning offers what keeps the gradient as to_numpy()'s does, and says where its grad=
        goes (``_method_site``)."""
        mode = self.grad_mode
        if not self.grad_given:
            config = active()
            if config is not None:
                mode = config.options.get("grad", mode)
        key = (name, mode)
        policy = self._grads.get(key)
        if policy is None:
            fixes = GradFixes(TO_NUMPY_FIXES.keep, self._method_site)
            policy = self._grads.setdefault(key, GradPolicy(mode, name, lambda: fixes))
        return policy

    def _method_site(self, assignment: str) -> str:
        """Where a user writes ``assignment`` (``"grad='detach'"``) for a result's methods, in
        words: what made the function (its grad= the methods follow), or a config block
        around the method call, unless grad= was given explicitly, which no block changes."""
        block = f"a with ac.config({assignment}): block around the method call"
        if self.grad_maker is None:
            return block
        maker = f"{self.grad_maker.replace('grad={}', assignment)}, for its results' methods too"
        if self.grad_given:
            return f"{maker}, where grad={self.grad_mode!r} was given, so a config block cannot change it"
        return f"{maker}, or {block}"

    def _sparse(self, m: Any, ctx: Target) -> torch.Tensor:
        return sparse_to_tensor(m, _placed(ctx), ctx.casts, ctx.copy, self.sparse_layout)


class _OutputSideMethod(ResultMethod):
    """A result's method on an output side: a generator it returns converted as it yields, as a
    decorated function's is; one it stores on the result refused, naming the field, as one
    inside a decorated function's result is."""

    __slots__ = ()

    def convert(self, value: Any) -> Any:
        return _method_value(self.mapper, value, self.ctx)

    def stored(self, value: Any) -> Any:
        try:
            return self.mapper(value, self.ctx)
        except YieldsLater:
            return _DEFERRED(value, None)  # raises where the generator is

    def refresh(self, held: HeldCopy) -> None:
        pair, where = held
        mine = pair.mine
        if pair.mine_was is None:  # its first call: what the caller was handed, from what the methods held then
            if pair.theirs_was is None:  # found at this call
                self.synced(pair)
            pair.mine_was = bits_snapshot(self.stored(pair.theirs_was))
        if not same_bits(mine, pair.mine_was):
            at = self._changed(mine, pair.mine_was, where, "the caller")
            back = self.back(mine, where.split(PLACES_APART)[0])
            self._written(pair.theirs, back, at, where=where, writer="the caller")
            _taken(pair, at)

    def refreshed(self, held: HeldCopy) -> None:
        pair, where = held
        theirs, was = pair.theirs, pair.theirs_was
        if not same_bits(theirs, was):
            at = self._changed(theirs, was, where, "the method")
            self._written(pair.mine, self.stored(theirs), at, where=where, writer="the method")
            _taken(pair, at)

    def synced(self, pair: CopyPair) -> None:
        pair.theirs_was = bits_snapshot(pair.theirs)  # the caller's, made from it now, is told from it later

    def _changed(self, now: Any, was: Any, where: str, writer: str) -> Any:
        """Where ``now`` differs from ``was`` (see written_at); a change of shape in place
        (``resize_``), which the other side's copy cannot follow, refused naming the field."""
        at = written_at(now, was)
        if at is None:
            problem = f"changed shape in place ({writer}: {tuple(was.shape)} to {tuple(now.shape)})"
            found = "the other side's copy of it at the old shape, which cannot follow"
            self._refuse(problem, found, where, writer)
        return at

    def _refuse(self, problem: str, found: str, where: str, writer: str) -> None:
        """A ConversionError naming the method and the field ``where`` (its places, where one array
        is held at several: each is to be assigned anew), raised."""
        field, *others = places = where.split(PLACES_APART)
        if others:
            problem += f" (one array held at {' and '.join(f'self.{p}' for p in places)})"
        holder = "r" if writer == "the caller" else "self"
        fix = "; ".join(f"{holder}.{p} = new" for p in places)
        error = LeafError(ConversionError, problem, found, f"assign a new value instead ({fix})")
        raise error.public(f"{getattr(self.method, '__qualname__', self.method)}()", "field", f"self.{field}") from None

    def _written(self, target: Any, source: Any, at: Any, *, where: str, writer: str) -> None:
        """``source`` written into ``target``, the other side's copy at ``where``, where ``at`` says
        (see write_into); where it cannot take it, a ConversionError naming the method, the field
        and the way round."""
        try:
            write_into(target, source, at)
        except (ValueError, RuntimeError) as e:
            problem = f"was written in place by {writer}, and the other side's copy of it cannot take the write"
            found = f"a {target.dtype} {type(target).__name__} there, which refused it ({str(e).splitlines()[0]})"
            self._refuse(problem, found, where, writer)


def _taken(pair: CopyPair, at: Any) -> None:
    """``pair``'s snapshots taken again where ``at`` says, both sides one there now: elsewhere a
    write another result over the same array made is still told at the next comparison."""
    write_into(pair.mine_was, pair.mine, at)
    write_into(pair.theirs_was, pair.theirs, at)


class TensorsIn(_OutputSideMethod):
    """A method of a result whose fields came back as tensors (``ecdf(x).cdf.evaluate``), as a
    torchified object's methods are: its tensor arguments cross as read-only arrays (a tensor
    that requires grad detached, with a warning once), and its value comes back as the result
    did, on the call's device."""

    __slots__ = ("arguments", "function", "grads", "remade")

    def __init__(
        self,
        method: Any,
        mapper: Mapper,
        ctx: Target,
        fields: ResultFields,
        *,
        function: str,
        grads: Callable[[], GradPolicy],
        arguments: Mapper,
        remade: TensorRemade,
    ) -> None:
        super().__init__(method, mapper, ctx, fields)
        self.function, self.grads, self.arguments, self.remade = function, grads, arguments, remade

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what makes it again: its side's options, the original and its fields."""
        self.fields.receiver(self)  # the twin made current: some results unpickle apart from it
        return _tensors_in_again, (self.remade, self.fields.original, self.name, self.ctx, self.fields)

    def back(self, value: Any, name: str) -> Any:
        """A value the caller set on the result (``r.w = t``), as the result's own fields
        were: an array sharing the tensor's memory, a tensor that requires grad detached
        by the arguments' rule (warned of once, naming the field)."""
        grad = self.grads()
        try:
            array = _FIELDS(value, grad)
        except LeafError as e:
            raise e.public(grad.function, "field", f"self.{name}") from None
        except RecursionError:  # a value holding itself (n.kids.append(n)): refused as a call's argument is
            raise result_cycle_error().public(grad.function, "field", f"self.{name}") from None
        if grad.unsaid is not None:
            grad.say([f"self.{name}"], role="field")
        return array

    def apart(self, converted: Any, original: Any) -> bool:
        return isinstance(converted, torch.Tensor) and not _same_memory(converted, original)

    def paired(self, mine: Any, theirs: Any) -> bool:
        if not (isinstance(theirs, np.ndarray) and isinstance(mine, torch.Tensor)):
            return False
        return mine.element_size() != theirs.itemsize or not _same_memory(mine, theirs)  # a widened one at once

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        grad = self.grads()
        method = self.bound()
        name = grad.function
        try:
            arrays = self.arguments(args, grad)
        except LeafError as e:
            raise e.public(name, "argument", "args") from None
        try:
            named = self.arguments(kwargs, grad) if kwargs else kwargs
        except LeafError as e:
            raise e.public(name, "argument", "kwargs") from None
        if grad.unsaid is not None:  # grad="warn": said once, naming where the tensor was
            found = [f"args[{i}]" for i, value in enumerate(args) if value is grad.unsaid]
            grad.say(found + [f"kwargs[{k!r}]" for k, value in kwargs.items() if value is grad.unsaid])
        try:
            result, twins = self.run(method, arrays, named)
        except ValueError as e:
            rejection = _read_only_rejection(name, e, (args, kwargs), (arrays, named))
            if rejection is None:
                raise
            raise rejection from e
        try:
            return self.value(result, twins)
        except LeafError as e:
            raise e.public(self.function, "", f"result of {name}") from None


def _read_only_rejection(
    name: str,
    error: ValueError,
    given: tuple[tuple[Any, ...], dict[str, Any]],
    handed: tuple[tuple[Any, ...], dict[str, Any]],
) -> ReadOnlyError | None:
    """NumPy's refusal (``error``) of a write by the result's method ``name`` into a read-only
    array made from a tensor argument, as the ReadOnlyError naming them; None where ``error`` is
    no such refusal. ``given``, ``handed``: the method's arguments, as given and as handed."""
    if "read-only" not in str(error):
        return None
    pairs = [(f"args[{i}]", t, a) for i, (t, a) in enumerate(zip(given[0], handed[0], strict=True))]
    pairs += [(f"kwargs[{k!r}]", t, handed[1][k]) for k, t in given[1].items()]
    paths = [
        path
        for path, t, a in pairs
        if isinstance(t, torch.Tensor) and isinstance(a, np.ndarray) and not a.flags.writeable
    ]
    if not paths:  # not an array made from a tensor: the method's own, or one it was handed so
        return None
    return ReadOnlyError(
        message(
            name,
            f"argument {' or '.join(paths)}",
            "was written into by the method; arrays made from a result method's tensor arguments are read-only so "
            "that NumPy code never changes the caller's tensors behind its back",
            f"ValueError({str(error)!r})",
            "pass a writable private copy in its place, ac.to_numpy({path}, copy=True) (the method's writes then "
            "stay in that array)",
            path=paths[0],
        )
    )


def _read_only_array(t: torch.Tensor, grad: GradPolicy) -> Any:
    """A tensor argument of a result's method as an array; the tensor's own memory read-only."""
    a, shared = tensor_to_array(t, None, grad)
    if shared:
        a = a.view()
        a.flags.writeable = False
    return a


def _same_memory(t: torch.Tensor, a: Any) -> bool:
    """Whether tensor ``t`` and ``a`` start at the same host memory with the same dtype (a
    field converted without a copy)."""
    return (  # the address last, the dearest to read (``ctypes.data``: no dict built)
        isinstance(a, np.ndarray)
        and t.is_cpu
        and t.layout == torch.strided
        and t.element_size() == a.itemsize
        and t.data_ptr() == a.ctypes.data
    )


_FIELDS = Mapper({torch.Tensor: lambda t, grad: tensor_to_array(t, None, grad)[0]})


#: The parameters of a side with no call arguments to name: to_tensor()'s, one built again.
NO_PARAMS = Parameters(lambda: None)


@functools.lru_cache(maxsize=64)
def _tensor_side(function: str, policy: Policy, half: bool, read_only: bool, grad: MethodGrad) -> TensorOutputs:
    """A TensorOutputs built again for unpickled result methods, once per set of options."""
    restoring = RESTORING_HALF if half else RESTORING
    return TensorOutputs(function, NO_PARAMS, policy, restoring=restoring, read_only=read_only, grad=grad)


def _tensors_in_again(
    remade: TensorRemade, original: Any, name: str, ctx: Target, fields: ResultFields
) -> ResultMethod:
    side = _tensor_side(*remade)
    made = side._result_method(getattr(original, name), side.mapper, ctx, fields)
    made.name = name
    return made


def _given_back(value: Returned, ctx: Target) -> torch.Tensor:
    """An out-parameter's array returned: the caller's own tensor, written already."""
    return value.tensor


def _sparse_among(tensors: list[torch.Tensor]) -> bool:
    return any(t.layout != torch.strided for t in tensors)


def _placed(ctx: Target) -> torch.device:
    """The call's device; NoDeviceError if its tensors disagreed."""
    if ctx.device is None:
        raise NoDeviceError
    return ctx.device


class NumpyOutputs(Outputs):
    """``returns_numpy``: tensor results come back as arrays, detached and on the host."""

    direction = "to_numpy"

    def __init__(
        self,
        function: str,
        params: Parameters,
        policy: Policy,
        grad: GradPolicy = DETACH,
        *,
        argument: str | None = None,
        nested_off: str | None = None,
        scalars: bool = False,
    ) -> None:
        """``scalars``: 0-d results come back as NumPy scalars (see as_result), unless
        ``copy=False`` asks for the tensor's memory."""
        self.scalars = scalars and policy.copy is not False
        self.copy = policy.copy
        self.sparse = policy.sparse
        self.grad = grad
        #: What builds this side again where a result's methods are unpickled (see ArraysIn).
        self.remade = (function, policy, scalars, grad is DETACH)
        super().__init__(
            function,
            params,
            Mapper(
                {torch.Tensor: self._leaf, StandIn: stood_for, **_LATER},
                nested=policy.nested,
                result_method=self._result_method,
            ),
            argument=argument,
            nested_off=nested_off,
        )

    def step(self) -> Result:
        return Result("array", converts=self.copy is not True)

    def _leaf(self, t: torch.Tensor, ctx: None) -> Any:
        a = tensor_to_array(t, self.copy, self.grad, self.sparse)[0]
        return as_result(a) if self.scalars else a

    def _result_method(self, method: Any, mapper: Mapper, ctx: Any, fields: ResultFields) -> ArraysIn:
        """``method``, of a result converted here, taking arrays where the result's own tensors
        are (torch's default device where it held none): see ArraysIn."""
        held: list[torch.Tensor] = []
        _TENSORS_HELD(fields.original, held)  # the result (a static method binds none)
        return self.arrays_in(method, ctx, fields, vote(held) or default_device())

    def arrays_in(self, method: Any, ctx: Any, fields: ResultFields, device: torch.device) -> ArraysIn:
        """``method`` as ``_result_method`` makes it, its arguments' tensors bound for ``device``."""
        return ArraysIn(method, self.mapper, ctx, fields, target=Target(device, NO_CASTS, None), remade=self.remade)


class ArraysIn(_OutputSideMethod):
    """A method of a result whose tensor fields came back as arrays (a dataclass of torch code
    with a ``predict``), called as NumPy code calls it: arrays in its arguments become tensors
    where the result's own tensors are (torch's default device where it held none), and its
    value comes back as the result did."""

    __slots__ = ("remade", "target")

    def __init__(
        self,
        method: Any,
        mapper: Mapper,
        ctx: Any,
        fields: ResultFields,
        *,
        target: Target,
        remade: tuple[str, Policy, bool, bool],
    ) -> None:
        super().__init__(method, mapper, ctx, fields)
        self.target, self.remade = target, remade

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what makes it again: its side's options, the original and its fields."""
        self.fields.receiver(self)  # the twin made current: some results unpickle apart from it
        # The device is saved, not found again: the original may hold itself by then (self.hist.append(self)).
        device = self.target.device
        return _arrays_in_again, (self.remade, self.fields.original, self.name, self.fields, device)

    def back(self, value: Any, name: str) -> Any:
        """A value the caller set on the result (``r.w = a``), as its arguments cross: arrays
        become tensors where the result's own tensors are."""
        try:
            return to_tensors(value, self.target)
        except LeafError as e:
            raise e.public(f"{getattr(self.method, '__qualname__', self.method)}()", "field", f"self.{name}") from None
        except RecursionError:  # a value holding itself (n.kids.append(n)): refused as a call's argument is
            where = f"{getattr(self.method, '__qualname__', self.method)}()"
            raise result_cycle_error().public(where, "field", f"self.{name}") from None

    def apart(self, converted: Any, original: Any) -> bool:
        return isinstance(original, torch.Tensor) and not _same_memory(original, converted)

    def paired(self, mine: Any, theirs: Any) -> bool:
        return isinstance(mine, np.ndarray) and self.apart(mine, theirs) and theirs.layout == torch.strided

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        method = self.bound()
        name = f"{getattr(self.method, '__qualname__', self.method)}()"
        try:
            tensors = to_tensors(args, self.target)
            named = to_tensors(kwargs, self.target) if kwargs else kwargs
        except LeafError as e:
            raise e.public(name, "argument", "") from None
        result, twins = self.run(method, tensors, named)
        try:
            return self.value(result, twins)
        except LeafError as e:
            raise e.public(name, "", "result") from None


def _method_value(mapper: Callable[[Any, Any], Any], value: Any, ctx: Any) -> Any:
    """A result method's value converted by ``mapper``, the result's: a generator it returns
    converted as it yields, as a decorated function's is; one inside a container refused where it is."""
    try:
        return mapper(value, ctx)
    except YieldsLater:
        if type(value) is not types.GeneratorType:
            _DEFERRED(value, None)
        return lazily(value, lambda item: _method_value(mapper, item, ctx))


_TENSORS_HELD = Mapper({torch.Tensor: lambda t, found: found.append(t) or t})


@functools.lru_cache(maxsize=64)
def _numpy_side(function: str, policy: Policy, scalars: bool, detaches: bool) -> NumpyOutputs:
    """A NumpyOutputs built again for unpickled result methods, once per set of options (a
    grad policy other than detaching is to_numpy()'s, which warns: the options say which)."""
    grad = DETACH if detaches else GradPolicy(policy.grad, function)
    return NumpyOutputs(function, NO_PARAMS, policy, grad, scalars=scalars)


def _arrays_in_again(
    remade: tuple[str, Policy, bool, bool], original: Any, name: str, fields: ResultFields, device: torch.device
) -> ResultMethod:
    side = _numpy_side(*remade)
    made = side.arrays_in(getattr(original, name), None, fields, device)
    made.name = name
    return made
