"""``adapt``: a function's annotations say what it needs; callers get back their own kind.

At decoration the annotations are read once (``_annotations``): each parameter asks for an
array, a tensor, or nothing, and the return annotation says which results are arrays or
tensors. Per call, each argument goes through one handler made for its parameter, on the
same leaf functions as ``accepts_numpy`` and ``accepts_tensor``; results go through
``returns_tensor(dtype="input")``'s output side when the caller passed tensors, or
``returns_numpy``'s when it passed arrays and no tensors (tensors win a mixed call: the
results go where the caller's tensors live).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeVar, Unpack, overload

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._conversions import _devices
from autoconvert._conversions._containers import is_scipy_sparse
from autoconvert._conversions._copies import counted
from autoconvert._conversions._dtypes import NO_CASTS
from autoconvert._conversions._grad import GradPolicy, gradient_lost, may_lose_gradient
from autoconvert._conversions._sparse import sparse_to_tensor
from autoconvert._conversions._to_numpy import tensor_to_array
from autoconvert._conversions._to_torch import array_to_tensor, state_refusal, target
from autoconvert._conversions._tree import Mapper, keep
from autoconvert._errors import ConversionError, LeafError, SequenceKey, cycle_error
from autoconvert._escape import passes_for_function
from autoconvert._failures._failures import RETURNED_GRAD
from autoconvert._interpreter._after import ContainerChanges
from autoconvert._interpreter._call import ConvertIn, Finish, Runner, Steps
from autoconvert._interpreter._plan import Plan
from autoconvert._interpreter._wrapper import is_wrapper, wrap
from autoconvert._observe._observe import Watching
from autoconvert._options._config import Config
from autoconvert._options._options import (
    DEFAULT_POLICY,
    FUNC,
    AdaptOptions,
    Policy,
    gives_way,
    shows_options,
    validate,
)
from autoconvert._partials import binds_arguments, rebound
from autoconvert._spec._check_writes import RESTORE_WRITES
from autoconvert._spec._collected import AfterStep, Collected, collected, collected_writes
from autoconvert._spec._emit import Result, Step
from autoconvert._spec._inputs import Begin, NumpyInputs, Rebuilding, to_a_cycle
from autoconvert._spec._outputs import NumpyOutputs, TensorOutputs
from autoconvert._spec._signature import Given, function_name, tensor_paths
from autoconvert._spec._spec import Spec, spec_of

from ._annotations import Signature
from ._wants import ANY, ARRAY, EACH, ITEMS, TENSOR, Want

#: A parameter's per-call handler: exact type -> function of (value, ctx); the fallback under ``...``.
Handler = dict[Any, Callable[[Any, Collected], Any]]

#: adapt's steps in its spec: each argument as its parameter asks, the result in the caller's kind.
ASKED = Step("asks")
CALLERS_KIND = Result("caller's kind")


class AdaptPlan(Plan):
    """A Plan whose Runner converts each parameter as its annotation says (see module docstring)."""

    def __init__(self, func: Any, sides: dict[str, dict[str, Any]]) -> None:
        self.signature = Signature(func)
        super().__init__(func, sides)

    def result_asks(self) -> Any:
        return self.signature.result

    def untraced(self, policy: Policy) -> str | None:
        """Traced, every tensor reaches the function as an array: a parameter whose annotation
        asks for a tensor or a dtype keeps the escape."""
        wants = [want for _, want in self.signature.asked if want is not None]
        if any(TENSOR in want.leaf_kinds() or want.dtype is not None for want in wants):
            return "adapt() converts a parameter as its annotation asks: to a tensor, or to a dtype"
        return super().untraced(policy)

    def _spec(self, policies: dict[str, Policy]) -> Spec:
        """adapt's spec: arguments to arrays or tensors as each parameter asks, results in the
        caller's kind (as ``returns_tensor(dtype="input")`` or ``returns_numpy`` send them)."""
        policy = policies["adapt"]
        arrays = NumpyInputs(
            self.params, self.function, self.grad_policy(policy.grad), policy, f"adapt() on {self.function}"
        )
        spec = spec_of(
            self.function,
            self.params,
            policies,
            arrays,
            TensorOutputs(self.function, self.params, _RETURNING),
            site=self.option_site,
        )
        return dataclasses.replace(
            spec,
            value=ASKED,
            parameters=self.signature.steps(self.params),
            result=CALLERS_KIND,
            generic_because="adapt() gives the generic call its own steps: each parameter converted as its annotation asks",
        )

    def _runner(
        self, spec: Spec, variants: Callable[[Config | None], Runner] | None, *, watch: Watching | None = None
    ) -> Runner:
        grad = self.grad_policy(spec.policies["adapt"].grad)  # the one its NumPy inputs hold
        return AdaptRunner(spec, self.signature, variants, grad, watch=watch)


#: The values a parameter that asks for nothing is most often given, which hold no tensor.
_NO_TENSORS = (int, float, complex, bool, str, bytes, type(None))

#: Results go back as tensors the way ``returns_tensor(dtype="input")`` sends them.
_RETURNING = dataclasses.replace(DEFAULT_POLICY, dtype="input")


class AdaptRunner(Runner):
    """The per-call path of ``adapt``: one handler per parameter, then the caller's kind back."""

    def __init__(
        self,
        spec: Spec,
        signature: Signature,
        variants: Callable[[Config | None], Runner] | None,
        grad: GradPolicy,
        *,
        watch: Watching | None = None,
    ) -> None:
        arrays, to_tensors, policy = spec.inputs, spec.outputs, spec.policies["adapt"]
        assert arrays is not None  # see AdaptPlan._spec: it has both sides
        assert to_tensors is not None
        self.signature = signature
        #: The call's grad policy, for tensors handed as they are (see _say_dropped).
        self.grad = grad
        self.arrays = arrays
        self.to_tensors = to_tensors
        self.to_arrays = NumpyOutputs(spec.function, arrays.params, DEFAULT_POLICY)
        if watch is not None:  # count conversions: each leaf, once (the spec's sides are counted already)
            self.to_arrays.mapper.wrap_leaves(counted)
        # Both walks rebuild each container once per call, recorded for its changes to reach
        # the caller's container (see ContainerChanges, and AdaptChanges for what they convert to).
        self.array_mapper = Rebuilding(
            {torch.Tensor: arrays.mapper.dispatch[torch.Tensor], np.ndarray: _seen_array},
            nested=policy.nested,
            fallback=None,
        )
        to_tensor = counted(_array_to_tensor) if watch is not None else _array_to_tensor
        sparse_to = counted(_sparse_to_tensor) if watch is not None else _sparse_to_tensor
        self.tensor_mapper = Rebuilding(
            {np.ndarray: to_tensor, np.generic: to_tensor, torch.Tensor: _seen_tensor},
            nested=policy.nested,
            fallback=lambda cls: sparse_to if is_scipy_sparse(cls) else None,  # as accepts_tensor's side
        )
        # A parameter that asks for nothing is handed as it is, walked only to see the caller's
        # kind and to record its containers, so that what the function puts in them comes back
        # in that kind, as in the containers the other walks hand over.
        kept = Rebuilding({torch.Tensor: _seen_tensor, np.ndarray: _seen_array}, nested=policy.nested, fallback=None)
        self.as_given: Handler = {
            torch.Tensor: _seen_tensor,
            np.ndarray: _seen_array,
            **dict.fromkeys(_NO_TENSORS, keep),  # one call, no walk
            ...: to_a_cycle(kept),
        }
        self.params = arrays.params
        super().__init__(spec, variants, watch=watch)

    def directions(self) -> tuple[str | None, str | None]:
        return "arguments", "results"

    def _container_changes(self) -> ContainerChanges:
        return AdaptChanges(self.function, self.arrays)

    def _handler(self, want: Want | None) -> Handler:
        """The per-argument handler for a parameter that asks for ``want`` (None: as given): a
        dispatch dict by exact type, its fallback under ``...``."""
        if want is None:
            return self.as_given
        if TENSOR in want.leaf_kinds():  # a tensor, or tensors inside (list[torch.Tensor])
            return {torch.Tensor: _seen_tensor, ...: self._to_tensor(want)}
        generic = self._to_array(want)
        if want.dtype is not None:  # every value may need the cast
            return {...: generic}
        return {torch.Tensor: self.array_mapper.dispatch[torch.Tensor], np.ndarray: _seen_array, ...: generic}

    def _to_array(self, want: Want) -> Callable[[Any, Collected], Any]:
        mapper, leaf, dtype, bare = self.array_mapper, self.array_mapper.dispatch[torch.Tensor], want.dtype, want.bare
        cast = dtype is not None and not gives_way("adapt's dtype casts", self.spec.policies["adapt"])

        def to_array(value: Any, ctx: Collected) -> Any:
            kind = type(value)
            if kind is torch.Tensor:
                a = leaf(value, ctx)
            elif kind is np.ndarray:
                a = _seen_array(value, ctx)
            elif bare and isinstance(value, (list, tuple, int, float, complex, np.generic)) and kind is not bool:
                a = _one(
                    mapper(value, ctx) if isinstance(value, (list, tuple)) else value, np.asarray, "array", "NumPy"
                )
            else:
                return mapper(value, ctx)  # containers, None and the rest: tensors inside become arrays
            return _cast_within_kind(a, dtype) if dtype is not None and cast else a

        return to_array

    def _to_tensor(self, want: Want) -> Callable[[Any, Collected], Any]:
        mapper, bare = self.tensor_mapper, want.bare

        def to_tensor(value: Any, ctx: Collected) -> Any:
            if bare and isinstance(value, (list, tuple, int, float, complex)) and type(value) is not bool:
                device = ctx.target.device  # type: ignore[union-attr]  # set: see places
                return _one(value, lambda v: torch.as_tensor(v, device=device), "tensor", "torch")
            return mapper(value, ctx)  # arrays, containers, None and the rest

        return to_tensor

    def _steps(self, after: AfterStep | None) -> Steps:
        """adapt's steps of the protocol: each argument converted as its parameter's annotation
        asks; the result back in the caller's kind (tensors win a mixed call)."""
        asks = {name: step.asks for name, step in self.spec.parameters or ()}  # the spec's steps
        return Steps(self._begin(asks), None, self._convert_in(asks), self._finish())

    def _begin(self, asks: dict[str, Any]) -> Begin:
        """The per-call context: the lists, where arrays for tensor parameters go (asked only
        if some parameter wants tensors), and the after step's state where there is one."""
        arrays, policy, after = self.arrays, self.spec.policies["adapt"], self.spec.after
        fixed_device, copy = policy.device, policy.copy
        places = any(w is not None and TENSOR in w.leaf_kinds() for w in asks.values())

        def begin(
            shared: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> Collected:
            placed = target(fixed_device or _devices.default_device(), NO_CASTS, copy) if places else None
            if after is None:
                return collected(shared, odd, seen=[], target=placed)
            if after == RESTORE_WRITES:  # an after step's state: check_writes', else the copy back's
                return collected_writes(shared, odd, seen=[], target=placed)
            return collected_writes(shared, odd, arrays.spans(args, kwargs), None, [], seen=[], target=placed)

        return begin

    def _convert_in(self, asks: dict[str, Any]) -> ConvertIn:
        """Each argument by its parameter's step (by position, by keyword, or the ``*args`` and
        ``**kwargs`` ones); None: as it is."""
        params, arrays = self.params, self.arrays
        steps: list[Handler | None] = [self._handler(asks.get(name)) for name in params.positional]
        if params.first_is_instance():  # a method read through its class: the instance, untouched
            steps[0] = None
        shifted, shifts = steps[1:], params.binds_first and bool(params.positional)
        star, star_star = self._handler(asks.get(f"*{params.varargs}")), self._handler(asks.get(f"**{params.varkw}"))
        by_keyword = {name: self._handler(w) for name, w in asks.items() if name[0] != "*"}

        def convert_in(
            args: tuple[Any, ...], kwargs: dict[str, Any], instance: object, ctx: Any, odd: list[torch.Tensor]
        ) -> tuple[tuple[Any, ...], dict[str, Any]]:
            positions = shifted if shifts and instance is not None else steps
            out: list[Any] = []
            key = None
            try:
                for a in args:
                    step = positions[len(out)] if len(out) < len(positions) else star
                    out.append(a if step is None else (step.get(type(a)) or step[...])(a, ctx))
                if kwargs:
                    converted = {}
                    for key, v in kwargs.items():
                        step = by_keyword.get(key, star_star)
                        converted[key] = (step.get(type(v)) or step[...])(v, ctx)
                    kwargs = converted
            except (LeafError, RecursionError) as e:
                fact = e if isinstance(e, LeafError) else cycle_error()
                raise arrays.public(fact, instance, key, len(out)) from None
            return tuple(out), kwargs

        return convert_in

    def _finish(self) -> Finish:
        """The result in the caller's kind: tensors where the call had tensors, arrays where it
        had only arrays (as the return annotation allows), else as it is."""
        signature = self.signature
        to_tensors, to_arrays = self.to_tensors.convert, self.to_arrays.convert
        whole_tensors, whole_arrays = signature.result.kind in (ARRAY, ANY), signature.result.kind in (TENSOR, ANY)
        tensor_result = _result_walker(signature.result, {ARRAY, ANY})
        array_result = _result_walker(signature.result, {TENSOR, ANY})

        def finish(result: Any, shared: list[torch.Tensor], odd: list[torch.Tensor], given: Given, ctx: Any) -> Any:
            if shared or odd:
                if odd and any(map(may_lose_gradient, odd)):  # a tensor handed as it is, then arrays back
                    self._say_dropped(result, odd, given)
                if whole_tensors:
                    return to_tensors(result, shared, odd, given)
                return tensor_result(result, to_tensors, shared, odd, given)
            if ctx.seen:
                if whole_arrays:
                    return to_arrays(result, shared, odd, given)
                return array_result(result, to_arrays, shared, odd, given)
            return result

        return finish

    def failed(
        self,
        error: BaseException,
        after: AfterStep | None,
        ctx: Any,
        given: Given,
        *,
        handed: tuple[tuple[Any, ...], dict[str, Any]],
        handed_read_only: Any,
    ) -> None:
        """As any runner's, with a note where NumPy code refused a tensor requiring grad that a
        parameter asking for nothing was handed as it is (grad= applies to converted ones)."""
        if isinstance(error, RuntimeError) and str(error).startswith(RETURNED_GRAD):
            asks = dict(self.spec.parameters or ())
            kept = [
                path
                for path, t in tensor_paths(self.params, *given)
                if t.requires_grad and (step := asks.get(_root(path))) is not None and step.asks is None
            ]
            if kept:
                error.add_note(
                    f"autoconvert: {self.function}: argument {kept[0]} requires grad and was handed over as it is, "
                    f"its parameter asking for no array, and NumPy code cannot take it; pass {kept[0]}.detach(), or "
                    "annotate the parameter npt.NDArray so that it is converted under grad="
                )
        super().failed(error, after, ctx, given, handed=handed, handed_read_only=handed_read_only)

    def _say_dropped(self, result: Any, odd: list[torch.Tensor], given: Given) -> None:
        """The call's ``grad=`` policy for the tensors handed to the function as they are that
        lose a gradient (one they require, or a tangent) where the function gave arrays back:
        NumPy code took them, and dropped it (torch code returning tensors keeps it)."""
        losing = [t for t in odd if gradient_lost(t) is not None]
        arrays: list[Any] = []
        if losing:
            _ARRAYS_IN(result, arrays)
        if not arrays:
            return
        grad, paths = self.grad, tensor_paths(self.params, *given)
        for t in losing:
            try:
                grad.detach(t)
            except LeafError as e:
                raise e.public(self.function, "argument", next((p for p, x in paths if x is t), "")) from None
        if grad.unsaid is not None:
            grad.say([p for p, x in paths if x is grad.unsaid])


class AdaptChanges(ContainerChanges):
    """adapt's containers: both walks hand the function rebuilt containers (tensors as arrays,
    or arrays as tensors), and those of parameters that ask for nothing as they are, whose
    changes reach the caller's; a value the function put in comes back in the caller's kind,
    as the result does: as a tensor where the call had tensors (tensors win a mixed call), as
    an array where it had arrays alone, as it is where it had neither."""

    converts_as_is = True  # into the caller's kind, whichever it is (see new_values)

    def new_values(self, given: Given, had_tensors: bool) -> Callable[[Any], Any]:
        if had_tensors:
            return super().new_values(given, had_tensors)
        args, kwargs, _ = given
        found: list[Any] = []
        for value in (*args, *kwargs.values()):
            _ARRAYS_IN(value, found)
        return _new_array if found else _as_put  # a call with neither: what the function put in, as it is


def _root(path: str) -> str:
    """The parameter an argument's path starts at (``batch`` of ``batch['x']``)."""
    return path.partition("[")[0].partition(".")[0]


def _as_put(value: Any) -> Any:
    return value


#: The arrays among a call's arguments, found as a parameter that asks for nothing is walked.
_ARRAYS_IN = to_a_cycle(Mapper({np.ndarray: lambda a, found: found.append(a)}, nested=True))


def _new_array(value: Any) -> Any:
    return _TO_ARRAYS(value, None)


#: A value put into a container of a call without tensors: its tensors as arrays, as results go.
_TO_ARRAYS = Mapper({torch.Tensor: lambda t, ctx: tensor_to_array(t, None)[0]}, nested=True)


def _one(value: Any, make: Callable[[Any], Any], kind: str, library: str) -> Any:
    """A list or tuple (its tensors already arrays, converted as arguments are), or a number,
    as the one array or tensor a parameter asks for; the library's refusal (ragged,
    self-containing or too deep lists, items too large to stack, a number past int64) as a
    fact about the argument."""
    if isinstance(value, (list, tuple)):
        _refuse_carried_state(value, f"the one {kind} its annotation asks for")
    try:
        return make(value)
    except (ValueError, TypeError, OverflowError, RuntimeError, MemoryError) as e:  # MemoryError: broadcast past memory
        problem = f"cannot become the one {kind} its annotation asks for ({library}: {str(e).rstrip('.')})"
        if not isinstance(value, (list, tuple)):
            raise LeafError(ConversionError, problem, repr(value), "pass a number within int64, or a float") from None
        annotation = "np.ndarray" if kind == "array" else "torch.Tensor"
        raise LeafError(
            ConversionError,
            problem,
            f"a {type(value).__name__} of {len(value)} items",
            f"pass nested lists of equal lengths, or annotate the parameter as a list of {kind}s "
            f"(list[{annotation}]) to get each item converted on its own",
        ) from None


_NUMBERS = frozenset({int, float, complex, bool})


def _refuse_carried_state(items: list[Any] | tuple[Any, ...], holder: str, within: tuple[int, ...] = ()) -> None:
    """Items of a list made one array or tensor are read by their numbers alone (``np.asarray``,
    ``torch.as_tensor``): a masked array's mask or a Quantity's unit would be silently lost, so
    such an item is refused as one array would be, with its path. A list within itself is
    left to the library's own refusal."""
    if _NUMBERS.issuperset(map(type, items)):  # the common list, at C speed
        return
    within = (*within, id(items))
    for i, item in enumerate(items):
        try:
            if isinstance(item, (list, tuple)) and id(item) not in within:
                _refuse_carried_state(item, holder, within)
            elif isinstance(item, np.ndarray) and (refusal := state_refusal(item, holder)) is not None:
                raise refusal
        except LeafError as e:
            e.keys.append(SequenceKey(i))
            raise


def _seen_array(a: NDArray[Any], ctx: Collected) -> NDArray[Any]:
    ctx.seen.append(a)  # type: ignore[union-attr]  # adapt's context has them
    return a


def _seen_tensor(t: torch.Tensor, ctx: Collected) -> torch.Tensor:
    ctx.odd.append(t)
    return t


def _array_to_tensor(a: Any, ctx: Collected) -> torch.Tensor:
    ctx.seen.append(a)  # type: ignore[union-attr]
    return array_to_tensor(a, ctx.target)  # type: ignore[arg-type]  # set wherever arrays become tensors


def _sparse_to_tensor(m: Any, ctx: Collected) -> torch.Tensor:
    """A scipy.sparse argument as the sparse tensor of its format, as ``accepts_tensor`` hands it."""
    ctx.seen.append(m)  # type: ignore[union-attr]
    placed = ctx.target
    assert placed is not None  # see _begin: set wherever arrays become tensors
    device = placed.device
    assert device is not None  # _begin's target has one
    return sparse_to_tensor(m, device, placed.casts, placed.copy, None)


def _cast_within_kind(a: Any, dtype: np.dtype[Any]) -> Any:
    """An array cast to an annotated dtype within its kind: floats to floats, complex to
    complex, integers to integers that hold them; never integers to floats (as elsewhere)."""
    if type(a) is not np.ndarray or a.dtype == dtype:
        return a
    kinds = a.dtype.kind + dtype.kind
    if kinds in ("ff", "cc") or (kinds in ("ii", "iu", "ui", "uu") and np.can_cast(a.dtype, dtype)):
        return a.astype(dtype)
    return a


def _result_walker(want: Want, converted: set[str]) -> Callable[..., Any]:
    """``walk(result, convert, shared, odd, given)``: an output side's ``convert`` applied
    where ``want`` asks for a kind in ``converted``, the rest of the result untouched."""

    def walk(result: Any, convert: Callable[..., Any], *call: Any, want: Want = want) -> Any:
        if want.kind in converted:
            return convert(result, *call)
        if want.kind == EACH and want.each is not None:
            if type(result) in (list, tuple):
                return type(result)(walk(r, convert, *call, want=want.each) for r in result)
            if isinstance(result, dict):
                return type(result)({k: walk(v, convert, *call, want=want.each) for k, v in result.items()})
        if want.kind == ITEMS and isinstance(result, tuple) and len(result) == len(want.items):
            values = [walk(r, convert, *call, want=w) for r, w in zip(result, want.items, strict=True)]
            return result._make(values) if hasattr(result, "_fields") else tuple(values)  # type: ignore[attr-defined]
        return result

    return walk


T = TypeVar("T")


@overload
def adapt(func: type[T], /) -> type[T]: ...
@overload
def adapt(func: Callable[..., Any], /) -> Callable[..., Any]: ...
@overload
def adapt(func: None = None, /, **options: Unpack[AdaptOptions]) -> Callable[[Any], Any]: ...
def adapt(func: Any = None, /, **options: Any) -> Any:
    """Convert arguments to what the function's annotations ask for, and results back to the caller's kind.

    A parameter annotated ``np.ndarray`` or ``npt.NDArray[...]`` receives an ndarray whatever
    the caller passed (a tensor on any device, an ndarray, a list, a scalar); one annotated
    ``torch.Tensor`` receives a tensor. ``X | None``, ``list[X]``, ``Sequence[X]``,
    ``tuple[...]`` and ``dict[str, X]`` of those are converted element-wise; unannotated
    parameters are handed as they are (their tensors count in the caller's kind).
    ``NDArray[np.float32]`` also casts floats to float32.

    Results come back in the caller's kind: tensors (on the caller's device, in its floating
    dtype) when the caller passed any tensor, arrays when it passed arrays and no tensor;
    the return annotation says which parts of the result are arrays or tensors.

    Args:
        func: the function, method or class (its public methods and ``__call__`` adapted);
            omitted for options.
        **options: ``copy``, ``writeback``, ``grad``, ``nested``, ``sparse``, ``widen_float16``
            and ``check_writes`` as for ``accepts_numpy``; ``device``: where arrays go for
            tensor parameters (default: torch's default device).

    Raises:
        TypeError: an annotation cannot be resolved, or asks for arrays and tensors at once.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> @ac.adapt
        ... def centred(img: np.ndarray) -> np.ndarray:
        ...     return img - img.mean()
        >>> centred(torch.tensor([1.0, 3.0]))
        tensor([-1.,  1.])
        >>> centred(np.array([1.0, 3.0]))
        array([-1.,  1.])
    """
    checked = validate(options, "adapt")

    def apply(target: Any) -> Any:
        if isinstance(target, type):
            for name, member in list(vars(target).items()):
                public = not name.startswith("_") or name == "__call__"  # transforms are called
                if public and (passes_for_function(member) or isinstance(member, (classmethod, staticmethod))):
                    setattr(target, name, apply(member))
                elif public and isinstance(member, functools.partialmethod):  # its bound arguments convert too
                    setattr(target, name, functools.partialmethod(apply(member.func), *member.args, **member.keywords))
            return target
        if binds_arguments(target):  # its bound arguments are arguments, converted at each call
            return rebound(target, apply(target.func))
        if is_wrapper(target):
            raise TypeError(
                f"autoconvert.adapt() on {function_name(target)}: it is already decorated by autoconvert; "
                "adapt converts both ways itself, so apply it to the undecorated function"
            )
        return wrap(target, AdaptPlan(target, {"adapt": checked}))

    return apply if func is None else apply(func)


shows_options(adapt, [FUNC], "adapt")
