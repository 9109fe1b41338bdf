"""The eager form of a ``numpy_op``: ``torch.autograd.Function``s in torch's new style.

The forward, the NumPy backward and the NumPy jvp rule are each a Function of their own,
with a ``vmap`` rule, so torch.func's transforms (grad, vjp, jacrev, vmap, jvp, jacfwd)
compose with them in any order and the NumPy code only ever sees plain tensors. Under
``vmap`` an op runs once per sample (``"sequential"``) or once for the batch
(``"vectorized"``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from autoconvert._conversions._grad import FORWARD_AD, has_tangent
from autoconvert._conversions._memory import transforming
from autoconvert._errors import ConversionError, GradientError, message
from autoconvert._observe._observe import count_rule_backward, counting

from ._opspec import OpSpec, filled, no_second_derivative, placed, save, saved, shaped_as


def wants_grad(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a tensor argument requires grad (keyword ones too: bind() says why they can't)."""
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, torch.Tensor) and value.requires_grad:
            return True
    return False


def dual(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a tensor argument carries a forward-mode tangent, inside
    ``forward_ad.dual_level()``: the op's jvp rule gives the result's, or none is the
    GradientError ``torch.func.jvp`` meets (dual tensors require no grad)."""
    if FORWARD_AD._current_level < 0:
        return False
    return any(isinstance(v, torch.Tensor) and has_tangent(v) for v in (*args, *kwargs.values()))


def run_op(spec: OpSpec, kwargs: dict[str, Any], *args: Any) -> Any:
    """One call of the op inside a ``vmap`` rule: the plain pair where there is no graph to
    join and no torch.func transform left (a vectorized call's own), else ``apply_op``."""
    if (
        transforming() is None
        and (spec.backward is None or not (torch.is_grad_enabled() and wants_grad(args, kwargs)))
        and not dual(args, kwargs)
    ):
        return spec.run(args, kwargs)
    return apply_op(spec, kwargs, *args)


def apply_op(spec: OpSpec, kwargs: dict[str, Any], *args: Any) -> Any:
    """The op as an autograd node: torch's old-style Function outside torch.func (its
    ``apply`` skips binding the arguments to ``forward``'s signature, ``inspect.signature``
    on every call, a third of an eager call), the new-style one, which transforms can
    see through, under them."""
    function = _EagerFunction if transforming() is None else _NumpyFunction
    return function.apply(spec, kwargs, *args)  # type: ignore[no-untyped-call, unused-ignore]  # typed from torch 2.14


def apply_traced(*args: Any) -> Any:  # pragma: no cover - runs under dynamo, unseen by coverage
    return _NumpyFunction.apply(*args)  # type: ignore[no-untyped-call, unused-ignore]  # typed from torch 2.14


class _NumpyFunction(torch.autograd.Function):
    """The eager form: one autograd node around the forward pair and the NumPy backward.

    In torch's new style (a forward without ``ctx``, ``setup_context``, a ``vmap`` rule and a
    ``jvp``), so torch.func's transforms compose with it in any order: their forward runs on
    plain tensors NumPy can read, and the backward is itself such a function (``_NumpyVjp``),
    so under ``torch.func.grad`` it too runs on plain tensors.
    """

    @staticmethod
    def forward(spec: OpSpec, kwargs: dict[str, Any], *args: Any) -> Any:
        return spec.run(args, kwargs)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        _setup(ctx, inputs[0], inputs[1], inputs[2:], output)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        args, outputs = saved(ctx)
        spec: OpSpec = ctx.spec
        grads = grads[: len(grads) - len(spec.residuals)]  # the residuals' are zeros: no one reads them
        if spec.backward is None:
            raise GradientError(_needs_rule(spec.name, "a gradient", "backward"))
        if spec.catalogued:
            count_rule_backward(spec.name.removesuffix("()"), ctx.counters)
        if transforming() is None and not torch.is_grad_enabled():  # a plain backward: no node to record
            found = spec.gradients(grads, args, ctx.kwargs, outputs, ctx.tuple_result)
            return (None, None, *placed(args, found))
        # Under torch.func, or create_graph=True: a node whose own backward raises. It gives
        # zeros for None, which inputs that need no gradient must not get back.
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        call = _Call(ctx, len(grads), len(tensors))
        found = _NumpyVjp.apply(spec, call, *grads, *tensors, *outputs)  # type: ignore[no-untyped-call, unused-ignore]
        wanted = ctx.needs_input_grad[2:]
        return (None, None, *(g if w else None for g, w in zip(placed(args, found), wanted, strict=True)))

    @staticmethod
    def vmap(info: Any, in_dims: tuple[Any, ...], spec: OpSpec, kwargs: dict[str, Any], *args: Any) -> Any:
        # The keyword arguments batched as the positional ones (a dict of dims of their own).
        values, dims = (kwargs, *args), in_dims[1:]
        return vmapped(run_op, info, dims, (spec,), values, vectorized=spec.vectorized, name=spec.name)

    @staticmethod
    def jvp(ctx: Any, *tangents: Any) -> Any:
        spec: OpSpec = ctx.spec
        if spec.jvp is None:
            what = "forward-mode derivatives (torch.func.jvp, jacfwd, forward_ad)"
            if spec.catalogued:  # torchify's call too: no numpy_op of the user's to give a jvp= to
                raise GradientError(
                    message(
                        spec.name,
                        "the call",
                        f"was asked for {what}, and the catalogue's rule for it gives reverse mode alone",
                        "a rule without a jvp",
                        "take reverse mode (torch.func.jacrev, grad, vjp), or wrap the function in "
                        "autoconvert.numpy_op with backward= and jvp= of your own",
                    )
                )
            raise GradientError(_needs_rule(spec.name, what, "jvp"))
        args, outputs = saved(ctx)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        given = [t for a, t in zip(args, tangents[2:], strict=True) if isinstance(a, torch.Tensor)]
        given = [torch.zeros_like(a) if t is None else t for a, t in zip(tensors, given, strict=True)]
        call = _Call(ctx, len(given), len(tensors))
        found = _NumpyJvp.apply(spec, call, *given, *tensors, *outputs)  # type: ignore[no-untyped-call, unused-ignore]
        if spec.residuals:  # not differentiable: torch wants None for them
            return (*found[: len(found) - len(spec.residuals)], *(None for _ in spec.residuals))
        return found if ctx.tuple_result else found[0]


def _setup(ctx: Any, spec: OpSpec, kwargs: dict[str, Any], args: Any, output: Any) -> None:
    """Keep what the backward and jvp need: the call, and which results carry no gradient
    (integer ones, and the residuals: no one but the rules sees them)."""
    results = output if isinstance(output, tuple) else (output,)
    kept = len(results) - len(spec.residuals)
    ctx.mark_non_differentiable(
        *(r for k, r in enumerate(results) if k >= kept or not (r.is_floating_point() or r.is_complex()))
    )
    ctx.spec, ctx.tuple_result = spec, spec.is_tuple(output)
    ctx.counters = counting() if spec.catalogued else ()  # the stats blocks its rule's backward counts into
    save(ctx, args, kwargs, results, forward=spec.jvp is not None)


class _EagerFunction(torch.autograd.Function):
    """``_NumpyFunction`` in torch's old style, for calls outside torch.func (see ``apply_op``)."""

    @staticmethod
    def forward(ctx: Any, spec: OpSpec, kwargs: dict[str, Any], *args: Any) -> Any:
        output = spec.run(args, kwargs)
        _setup(ctx, spec, kwargs, args, output)
        return output

    backward = _NumpyFunction.backward
    jvp = _NumpyFunction.jvp  # torch.autograd.forward_ad's dual tensors, outside torch.func


class _Call:
    """What a NumPy rule's Function needs of the forward call besides its tensors, which come
    as ``leading`` gradients (or tangents), then ``inputs`` tensor arguments, then the outputs.
    A plain object, not a tuple: torch.func would flatten a tuple into its transforms' inputs."""

    __slots__ = ("inputs", "kwargs", "leading", "shaped", "template", "tuple_result")

    def __init__(self, ctx: Any, leading: int, inputs: int, *, shaped: bool = True) -> None:
        """From the forward call ``ctx`` kept (see ``_setup``); ``shaped``: the rule's results
        in their references' shapes, else per sample (a vectorized rule under vmap)."""
        self.kwargs, self.template, self.tuple_result = ctx.kwargs, ctx.template, ctx.tuple_result
        self.leading, self.inputs, self.shaped = leading, inputs, shaped

    def split(self, tensors: tuple[torch.Tensor, ...]) -> tuple[Any, list[Any], Any]:
        """(the leading tensors, the positional arguments with their tensors put back, outputs)."""
        ends = self.leading + self.inputs
        return tensors[: self.leading], filled(self.template, iter(tensors[self.leading : ends])), tensors[ends:]

    def unshaped(self) -> _Call:
        return _Call(self, self.leading, self.inputs, shaped=False)


class _NumpyRule(torch.autograd.Function):
    """A NumPy rule of a ``numpy_op`` (its backward, its jvp) as a Function: called as
    ``apply(spec, call, *tensors)``; its context keeps only the op's name, for errors."""

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.name = inputs[0].name


class _NumpyVjp(_NumpyRule):
    """A ``numpy_op``'s NumPy backward as a function of its own: ``(spec, call, *grads,
    *inputs, *outputs)`` to one gradient per tensor input (zeros where the backward gave
    None). Its own backward raises: there is no second derivative of NumPy code."""

    @staticmethod
    def forward(spec: OpSpec, call: _Call, *tensors: Any) -> Any:
        grads, args, outputs = call.split(tensors)
        with torch.no_grad():
            found = spec.gradients(grads, args, call.kwargs, outputs, call.tuple_result, shaped=call.shaped)
        inputs = tensors[call.leading : call.leading + call.inputs]
        return tuple(torch.zeros_like(a) if g is None else g for a, g in zip(inputs, found, strict=True))

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise no_second_derivative(ctx.name)

    @staticmethod
    def jvp(ctx: Any, *tangents: Any) -> Any:  # forward over reverse (jacfwd(jacrev(op))): a second derivative
        raise no_second_derivative(ctx.name)

    @staticmethod
    def vmap(info: Any, in_dims: tuple[Any, ...], spec: OpSpec, call: _Call, *tensors: Any) -> Any:
        mirrored = slice(call.leading, call.leading + call.inputs)  # a gradient per input
        return _per_sample(_NumpyVjp.apply, info, in_dims[2:], spec, call, mirrored=mirrored, tensors=tensors)


class _NumpyJvp(_NumpyRule):
    """A ``numpy_op``'s NumPy jvp rule as a function of its own: ``(spec, call, *tangents,
    *inputs, *outputs)`` to one tangent per output. It has no derivative of its own."""

    @staticmethod
    def forward(spec: OpSpec, call: _Call, *tensors: Any) -> Any:
        tangents, args, outputs = call.split(tensors)
        with torch.no_grad():
            return spec.tangents(tangents, args, call.kwargs, outputs, shaped=call.shaped)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise no_second_derivative(ctx.name, "jvp")

    @staticmethod
    def vmap(info: Any, in_dims: tuple[Any, ...], spec: OpSpec, call: _Call, *tensors: Any) -> Any:
        mirrored = slice(call.leading + call.inputs, None)  # a tangent per output
        return _per_sample(_NumpyJvp.apply, info, in_dims[2:], spec, call, mirrored=mirrored, tensors=tensors)


def _per_sample(
    function: Any,
    info: Any,
    dims: tuple[Any, ...],
    spec: OpSpec,
    call: _Call,
    *,
    mirrored: slice,
    tensors: tuple[Any, ...],
) -> Any:
    """A NumPy rule's ``function(spec, call, *tensors)`` under ``torch.vmap``: per sample
    (``"sequential"``), or once over the whole batch (``"vectorized"``), every tensor with a
    leading batch axis (see ``_leading``); its results mirror ``tensors[mirrored]`` (a
    gradient per input, a tangent per output), per sample."""
    if not spec.vectorized:
        return vmapped(function, info, dims, (spec, call), tensors, vectorized=False, name=spec.name)
    leading = _leading(tensors, dims, info.batch_size)
    found = function(spec, call.unshaped(), *leading)
    shaped = tuple(shaped_as(g, a.shape) for g, a in zip(found, leading[mirrored], strict=True))
    return shaped, tuple(0 for _ in shaped)


def _leading(values: tuple[Any, ...], dims: tuple[Any, ...], batch: int) -> tuple[Any, ...]:
    """``values`` for one vectorized call: batched tensors with their batch dim moved to the
    front, unbatched ones broadcast along a leading batch axis (a view, no copy), so that under
    nested transforms (``vmap(jacfwd(f))``) every argument's leading axes are the same batches."""
    return tuple(
        _each_tensor(v, d, lambda t, d: t.movedim(d, 0), lambda t: t.expand(batch, *t.shape))
        for v, d in zip(values, dims, strict=True)
    )


def _each_tensor(
    value: Any, dim: Any, take: Callable[[torch.Tensor, int], torch.Tensor], spread: Callable[[torch.Tensor], Any]
) -> Any:
    """``value`` with ``take(tensor, dim)`` for each batched tensor in it and ``spread(tensor)``
    for each unbatched one: a container argument (a list, tuple, dict, namedtuple) comes with
    dims of its own shape, as torch.vmap flattens it (None at each leaf that is no batched tensor)."""
    if isinstance(value, torch.Tensor):
        return spread(value) if dim is None else take(value, dim)
    if dim is None or isinstance(dim, int):
        return value
    return pytree.tree_map(lambda v, d: _each_tensor(v, d, take, spread), value, dim, is_leaf=_unbatched)


def _unbatched(dim: Any) -> bool:
    return dim is None


def vmapped(
    function: Any,
    info: Any,
    dims: tuple[Any, ...],
    head: tuple[Any, ...],
    values: tuple[Any, ...],
    *,
    vectorized: bool,
    name: str,
) -> Any:
    """``function(*head, *values)`` under ``torch.vmap``, each value batched along its
    dim in ``dims`` (None: unbatched): sequentially, one call per sample, stacked (what a loop
    gives), or vectorized, one call with every tensor given a leading batch axis."""
    if vectorized:
        result = function(*head, *_leading(values, dims, info.batch_size))
        return result, (tuple(0 for _ in result) if isinstance(result, tuple) else 0)
    results = [function(*head, *_sample(values, dims, i)) for i in range(info.batch_size)]
    if not results:
        raise ConversionError(
            message(name, "the call", "has an empty batch under torch.vmap", "batch size 0", "skip empty batches")
        )
    if isinstance(results[0], tuple):
        return tuple(torch.stack(parts) for parts in zip(*results, strict=True)), tuple(0 for _ in results[0])
    return torch.stack(results), 0


def _sample(values: tuple[Any, ...], dims: tuple[Any, ...], i: int) -> tuple[Any, ...]:
    """``values`` as sample ``i`` of the batch sees them: unbatched tensors as they are."""
    return tuple(_each_tensor(v, d, lambda t, d: t.select(d, i), _kept) for v, d in zip(values, dims, strict=True))


def _kept(t: torch.Tensor) -> torch.Tensor:
    return t


def _needs_rule(name: str, what: str, option: str) -> str:
    return message(
        name,
        "the numpy_op",
        f"was asked for {what}, and has no NumPy rule for it",
        f"a numpy_op without {option}=",
        f"pass {option}= to autoconvert.numpy_op",
    )
