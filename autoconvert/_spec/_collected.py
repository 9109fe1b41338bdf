"""A NumPy side's per-call context: what the call's leaves record, for the output side, the
after step (writeback, check_writes, out-parameters) and the containers' changes."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import torch

from autoconvert._conversions._mutations import Rebuilt
from autoconvert._conversions._to_torch import Target, new_tuple

from ._signature import Given


class AfterWrites(NamedTuple):
    """An after step's per-call state (see AfterStep, whose ``begin`` makes it): what the call's
    leaves record for the step to write back, or to compare."""

    #: writeback: (tensor, private array or None) to write back; check_writes: (tensor, snapshot).
    pairs: list[Any]
    #: writeback: the spans of memory that arguments share (see _writeback.aliased_spans).
    spans: dict[int, Any] | None = None
    #: out-parameters: (tensor, array handed over, private array to copy back or None).
    written: list[tuple[torch.Tensor, Any, Any]] | None = None
    #: writeback: the private arrays handed over (_writeback.Private), made read-only with their views after the call (see _writeback.make_private_read_only).
    handed: list[Any] | None = None
    #: (tensor, private array, its snapshot) to compare after the call, for a write around the
    #: read-only flag that reaches the private array alone: writeback's expanded and overlapping
    #: tensors', check_writes' private copies (widened, resolved) (see _writeback.written_private).
    compared: list[Any] | None = None


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
    #: The call's callbacks' word on a gradient their results lose: said once per call, by
    #: whichever callback meets it first (see _callbacks.TensorCallback); empty until said.
    said: list[bool] | None = None


def collected(
    shared: list[torch.Tensor],
    odd: list[torch.Tensor],
    writes: AfterWrites | None = None,
    *,
    seen: list[Any] | None = None,
    target: Target | None = None,
) -> Collected:
    """A ``Collected``, made as cheaply as a tuple: the generic call makes one per call."""
    return new_tuple(Collected, (shared, odd, writes, seen, target, {}, []))


def collected_writes(
    shared: list[torch.Tensor],
    odd: list[torch.Tensor],
    spans: dict[int, Any] | None = None,
    written: list[tuple[torch.Tensor, Any, Any]] | None = None,
    handed: list[Any] | None = None,
    *,
    seen: list[Any] | None = None,
    target: Target | None = None,
) -> Collected:
    """A ``Collected`` with an after step's fresh ``AfterWrites`` (its ``pairs`` empty), both made
    as cheaply as tuples, in one frame: an after step's ``begin`` makes one per call."""
    return new_tuple(
        Collected,
        (
            shared,
            odd,
            new_tuple(AfterWrites, ([], spans, written, handed, [])),
            seen,
            target,
            {},
            [],
        ),
    )


#: The arguments as the function got them.
Handed = tuple[tuple[Any, ...], dict[str, Any]]


class AfterStep(Protocol):
    """An after step (writeback's, check_writes', out-parameters'), made once per Runner by
    its input side (see Inputs.after_step): ``begin`` makes a call's context, with the
    step's state; the step runs once the function returned, and once it raised."""

    def begin(
        self, shared: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Collected: ...

    def __call__(self, ctx: Any, given: Given, handed: Handed, result: Any) -> Any: ...


def after_failure_note(function: str, failure: Exception) -> str:
    """The note an after step's own ``failure`` becomes on the exception the function raised,
    which wins."""
    return f"autoconvert: after {function} raised: {type(failure).__name__}: {failure}"
