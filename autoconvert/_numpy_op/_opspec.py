"""What one ``numpy_op`` knows and does, shared by its eager and its registered form.

Both forms run the same forward (the decorator pair, with a check that the results are
tensors autograd can track) and the same backward (the NumPy VJP, its gradients put back on
each input's device and dtype), so eager and compiled calls cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from autoconvert._adapters._adapter import signature_of
from autoconvert._conversions._to_torch import state_refusal
from autoconvert._decorators._plain import to_numpy, to_tensor
from autoconvert._errors import ConversionError, GradientError, message

from ._handed import call_rule


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class OpSpec:
    """One op's forward pair, NumPy backward (or ``None``) and name for messages.

    ``results`` is the count a registered op declared (``None`` when unregistered); a
    registered op also never returns its input's memory, ``torch.library``'s rule, and
    applies that rule eagerly too so both forms give the same answer. Only ``writeback``
    hands NumPy the tensors' own writable memory: read-only arrays and private copies
    always come back as new tensors, so only then are results checked (``shares``).
    ``vectorized``: under ``torch.vmap`` the NumPy functions take the whole batch along a
    leading axis (``numpy_op(vmap="vectorized")``), rather than one sample per call.
    ``jvp``: the NumPy forward-mode rule, or None. ``catalogued``: the backward and jvp are a
    catalogue rule's (autoconvert._gradients), called with the arguments as one list and told
    which of them are tensors, so that they compute the gradients of those alone.
    ``private``: a user's rules get writable copies of what they are handed (``copy=True``),
    else read-only views (see ``_handed``).
    """

    forward: Callable[..., Any]
    backward: Callable[..., Any] | None
    name: str
    results: int | None
    _: dataclasses.KW_ONLY
    shares: bool = False
    vectorized: bool = False
    jvp: Callable[..., Any] | None = None
    catalogued: bool = False
    private: bool = False
    residuals: tuple[str, ...] = ()

    def run(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """The forward's result: a tensor or a tuple of tensors, checked."""
        result = self.forward(*args, **kwargs)
        results = result if isinstance(result, tuple) else (result,)
        count = len(results) if isinstance(result, tuple) else 1
        if self.residuals and count > len(self.residuals):
            self._check_residuals(results[count - len(self.residuals) :])
        if not all(isinstance(r, torch.Tensor) for r in results) or self.results not in (None, count):
            found = ", ".join(type(r).__name__ for r in results)
            raise ConversionError(
                message(
                    self.name,
                    "the result",
                    "must be a tensor or a tuple of tensors for autograd to track it"
                    if self.results is None
                    else f"must be {_count(self.results)}, as the op was registered with",
                    found,
                    "return arrays (or a tuple of them) from the NumPy function"
                    if self.results is None
                    else "annotate the function's return, e.g. -> tuple[np.ndarray, np.ndarray], or fix fake=",
                )
            )
        if self.residuals and (not isinstance(result, tuple) or count <= len(self.residuals)):
            raise ConversionError(
                message(
                    self.name,
                    "the result",
                    f"must be a tuple of the results and then {len(self.residuals)} residual(s) "
                    f"({', '.join(self.residuals)}), as residuals= says",
                    f"{type(result).__name__} of {count}",
                    "return the results, then the residuals: return output, " + ", ".join(self.residuals),
                )
            )
        if self.results is None:
            return result
        if not self.shares:
            return results if self.results > 1 else results[0]
        inputs = [_memory_span(a) for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)]
        fresh = tuple(r.clone() if _overlaps(_memory_span(r), inputs) else r for r in results)
        return fresh if self.results > 1 else fresh[0]

    def _check_residuals(self, residuals: tuple[Any, ...]) -> None:
        """Each residual one array (a tensor here), as autograd saves it."""
        for name, residual in zip(self.residuals, residuals, strict=True):
            if not isinstance(residual, torch.Tensor):
                raise ConversionError(
                    message(
                        self.name,
                        f"residual {name}",
                        "must be one array, which the op saves for its rules",
                        type(residual).__name__,
                        "return one array per name of residuals=, e.g. residuals=('cos', 'sin') and return "
                        "output, cos, sin",
                    )
                )

    def returned(self, result: Any) -> Any:
        """What the caller gets of the forward's ``result``: its results, without the residuals."""
        results = result[: -len(self.residuals)]
        return results if len(results) > 1 else results[0]

    def is_tuple(self, result: Any) -> bool:
        """Whether the caller gets a tuple of the forward's ``result`` (see ``returned``)."""
        return isinstance(result, tuple) and (not self.residuals or len(result) - len(self.residuals) > 1)

    def _saved(self, outputs: Sequence[Any], tuple_result: bool) -> tuple[Sequence[Any], dict[str, Any]]:
        """The forward's results (residuals left out), and what its rules get of them by keyword:
        ``output`` (a tuple when the caller gets one), and each residual by its name."""
        kept = len(self.residuals)
        results = outputs[: len(outputs) - kept]
        saved = {"output": tuple(results) if tuple_result else results[0]}
        saved.update(zip(self.residuals, outputs[len(outputs) - kept :], strict=True))
        return results, saved

    def gradients(
        self,
        grads: Sequence[Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        outputs: Sequence[Any],
        tuple_result: bool,
        *,
        shaped: bool = True,
    ) -> list[torch.Tensor | None]:
        """The NumPy backward's gradient for each positional tensor argument, or ``None``;
        ``shaped``: each in its argument's shape (reshaped, or summed over broadcast axes),
        else as the backward gave it (a vectorized backward's per-sample gradients)."""
        assert self.backward is not None  # only differentiable ops are asked
        grad = tuple(grads) if tuple_result else grads[0]
        if self.catalogued:  # the library's own rules, which write into nothing they are handed
            places = [isinstance(a, torch.Tensor) for a in args]
            output = to_numpy(tuple(outputs) if tuple_result else outputs[0])
            found = self.backward(to_numpy(grad), to_numpy(list(args)), to_numpy(kwargs), output, places)
        else:
            _, saved = self._saved(outputs, tuple_result)
            found = call_rule(
                self.backward, grad, args, kwargs, saved, role="backward", op=self.name, private=self.private
            )
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if len(tensors) == 1 and not isinstance(found, (tuple, list)):
            found = (found,)
        if not isinstance(found, (tuple, list)) or len(found) != len(tensors):
            raise ConversionError(
                message(
                    self.name,
                    "the backward",
                    f"must return {len(tensors)} gradient(s), one per positional tensor argument "
                    f"({self._tensor_names(args)}: tensors given by keyword to positional parameters count)",
                    f"{type(found).__name__} of {len(found) if isinstance(found, (tuple, list)) else 1}",
                    "return a single array for one tensor argument, else a tuple with a gradient (or None) for each, "
                    "in that order",
                )
            )
        # On the input's own device and dtype (a bfloat16 input gets a bfloat16 gradient).
        return [
            None if g is None else self._like(g, a, shaped, f"the backward's gradient for tensor argument {k}")
            for k, (a, g) in enumerate(zip(tensors, found, strict=True))
        ]

    def _tensor_names(self, args: Sequence[Any]) -> str:
        """The names of the positional tensor arguments in ``args``, for a message: each its
        parameter's name, ``args[k]`` past them (a ``*args`` parameter's items by its name)."""
        signature = signature_of(self.forward)
        every = list(signature.parameters.values()) if signature is not None else []
        names = [p.name for p in every if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        rest = next((p.name for p in every if p.kind is p.VAR_POSITIONAL), "args")
        return ", ".join(
            names[k] if k < len(names) else f"{rest}[{k - len(names)}]"
            for k, a in enumerate(args)
            if isinstance(a, torch.Tensor)
        )

    def tangents(
        self,
        tangents: Sequence[Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        outputs: Sequence[Any],
        *,
        shaped: bool = True,
    ) -> tuple[torch.Tensor, ...]:
        """The NumPy jvp rule's tangent of each output, given one tangent per positional tensor
        argument, on each output's device and dtype (and ``shaped`` as it, see ``gradients``);
        ``None`` is a zero tangent, as ``None`` from the backward is a zero gradient. The
        residuals, outputs of the autograd node too, get zeros (a tangent per output under vmap)."""
        assert self.jvp is not None  # only ops with a rule are asked
        results, saved = self._saved(outputs, len(outputs) - len(self.residuals) != 1)
        if self.catalogued:  # the library's own rules, which write into nothing they are handed
            places = [isinstance(a, torch.Tensor) for a in args]
            output = to_numpy(saved["output"])
            found = self.jvp(to_numpy(list(tangents)), to_numpy(list(args)), to_numpy(kwargs), output, places)
        else:
            tangent = tuple(tangents) if len(tangents) != 1 else tangents[0]
            found = call_rule(self.jvp, tangent, args, kwargs, saved, role="jvp", op=self.name, private=self.private)
        found = tuple(found) if isinstance(found, (tuple, list)) else (found,)
        if len(found) != len(results):
            raise ConversionError(
                message(
                    self.name,
                    "the jvp",
                    f"must return {len(results)} tangent(s), one per result",
                    f"{type(found).__name__} of {len(found)}",
                    "return a single array for one result, else a tuple with one tangent per result",
                )
            )
        given = (
            torch.zeros_like(o) if t is None else self._like(t, o, shaped, f"the jvp's tangent of result {k}")
            for k, (o, t) in enumerate(zip(results, found, strict=True))
        )
        return (*given, *map(torch.zeros_like, outputs[len(results) :]))

    def _like(self, value: Any, reference: torch.Tensor, shaped: bool, where: str) -> torch.Tensor:
        """A NumPy rule's array as a tensor on ``reference``'s device and (inexact) dtype, and
        with ``shaped`` in its shape too (see ``shaped_as``); one autograd could not take
        (not numbers, complex for a real tensor, a shape that does not sum to the tensor's)
        is refused naming the op and the rule."""
        array = np.asanyarray(value)  # a subclass's mask or unit is refused, never read past
        found, problem, fix = f"numpy.ndarray(shape={array.shape}, dtype={array.dtype})", "", ""
        if (refusal := state_refusal(array)) is not None:
            found, problem, fix = refusal.found, refusal.problem, refusal.fix.format(path="value")
        elif array.dtype.kind not in "biufc":
            problem, fix = "must be an array of numbers", "return a float array (or None where no gradient flows)"
        elif array.dtype.kind == "c" and not reference.is_complex():
            problem, fix = "is complex for a real tensor", "return its real part (np.real(...))"
        elif shaped and array.size != reference.numel() and not _sums_to(array.shape, reference.shape):
            problem = f"must have the tensor's shape {tuple(reference.shape)}, or one that sums to it"
            fix = "return one value per element of the tensor"
        if problem:
            raise ConversionError(message(self.name, where, problem, found, fix))
        t = to_tensor(array, device=reference.device, dtype=inexact(reference.dtype))
        return shaped_as(t, reference.shape) if shaped else t


def _sums_to(shape: tuple[int, ...], target: torch.Size) -> bool:
    """Whether an array of ``shape`` sums to ``target`` over broadcast axes (``sum_to_size``)."""
    if len(target) > len(shape):
        return False
    return all(t in (s, 1) for t, s in zip(reversed(target), reversed(shape), strict=False))


def shaped_as(g: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """A gradient in its argument's shape: reshaped where the sizes agree, else summed over
    the axes the forward broadcast the argument along (a batch the argument was not in)."""
    return g.reshape(shape) if g.numel() == shape.numel() else g.sum_to_size(shape)


def inexact(dtype: torch.dtype) -> torch.dtype | None:
    """The dtype a gradient takes: the input's when that is floating or complex."""
    return dtype if dtype.is_floating_point or dtype.is_complex else None


def no_second_derivative(function: str, rule: str = "backward") -> GradientError:
    """The refusal of a derivative of an op's ``rule`` (double backward, a Hessian)."""
    what = "double backward is" if rule == "backward" else f"derivatives of its {rule} are"
    return GradientError(
        f"{function}: {what} not supported: its {rule} is NumPy code, which autograd cannot differentiate. Fix: take "
        "first derivatives alone (create_graph=False, a single torch.func.grad, jacrev or jacfwd), or write the "
        "function in torch where its second derivative is needed"
    )


def save(
    ctx: Any, args: Sequence[Any], kwargs: dict[str, Any], outputs: Sequence[torch.Tensor], *, forward: bool = False
) -> None:
    """Keep a call for its backward (and, with ``forward``, its jvp): tensors through
    ``save_for_backward`` (version checks, no reference cycles), the other arguments in a
    template with the tensors' places marked."""
    ctx.template = [_TENSOR if isinstance(a, torch.Tensor) else a for a in args]
    ctx.kwargs = kwargs
    tensors = (*(a for a in args if isinstance(a, torch.Tensor)), *outputs)
    ctx.save_for_backward(*tensors)
    if forward:
        ctx.save_for_forward(*tensors)


def saved(ctx: Any) -> tuple[list[Any], tuple[torch.Tensor, ...]]:
    """The call's arguments and outputs kept by ``save``."""
    tensors = iter(ctx.saved_tensors)
    return filled(ctx.template, tensors), tuple(tensors)


def filled(template: list[Any], tensors: Iterator[torch.Tensor]) -> list[Any]:
    """A saved call's positional arguments: ``template`` with its tensors' places taken, in
    order, from ``tensors``."""
    return [next(tensors) if a is _TENSOR else a for a in template]


def placed(args: Sequence[Any], gradients: Iterable[Any]) -> list[Any]:
    """One gradient per positional argument: the tensor arguments' ``gradients`` (one each,
    in order) at their arguments' places, None at the others'. Every tensor takes its own,
    also one no gradient is asked for, so no gradient lands on another tensor's place."""
    found = iter(gradients)
    return [next(found) if isinstance(a, torch.Tensor) else None for a in args]


_TENSOR = object()  # a tensor argument's place in the saved template


def _memory_span(t: torch.Tensor) -> tuple[int, int]:
    """The memory behind ``t``'s storage: a view NumPy made of an input (``x[1:]``) has a
    storage of its own, so only addresses tell that it shares the input's memory."""
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def _overlaps(span: tuple[int, int], others: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in others)


def _count(results: int) -> str:
    return "one tensor" if results == 1 else f"a tuple of {results} tensors"
