"""After a call that handed containers, in every mode of either input side: ``ContainerChanges``
(a NumPy side's) and ``ReverseChanges`` (a tensor side's) make what the function changed in
them the caller's (the after steps of writeback and check_writes are their features', in
_spec/_writeback and _spec/_check_writes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autoconvert._conversions._devices import default_device, vote
from autoconvert._conversions._dtypes import NO_CASTS, RESTORING, RESTORING_HALF, WIDENED_HALF, Casts, restoring_casts
from autoconvert._conversions._mutations import Record, apply_changes, changed, path_to
from autoconvert._conversions._to_torch import Target
from autoconvert._errors import KeyEntry
from autoconvert._options._options import DEFAULT_POLICY, Policy
from autoconvert._spec._callbacks import to_tensors
from autoconvert._spec._collected import Collected, Handed
from autoconvert._spec._inputs import Inputs
from autoconvert._spec._outputs import NumpyOutputs
from autoconvert._spec._signature import Given


class ContainerChanges:
    """After a call that handed the function containers, in every mode: what it changed in
    the rebuilt ones (those holding tensors) reaches the caller's containers (see
    _mutations); new arrays come back as tensors on the call's device, as a result's would,
    in the lists and dicts it was handed as they are too where the call had tensors (the
    caller works in torch; one with arrays alone keeps them as arrays)."""

    #: Whether new values in the lists and dicts handed as they are (they held no tensors)
    #: convert in a call without tensors too (adapt's: into the caller's kind, arrays).
    converts_as_is = False
    #: What the rebuilt containers held in place of the caller's values, as a refusal says it.
    rebuilt_as = "its tensors as arrays"

    def __init__(self, function: str, inputs: Inputs) -> None:
        self.function = function
        self.inputs = inputs

    def ended(self, ctx: Any, given: Given, handed: Handed) -> None:
        """The generic call's step, after a call whose context ``ctx`` recorded rebuilt containers."""
        assert ctx.rebuilt is not None  # recorded: see Runner._ended
        records = [*ctx.rebuilt.values()]
        if changed(records):
            self.apply(records, given, self.converted_any(ctx, records, given), handed)

    def converted_any(self, ctx: Collected, records: list[Record], given: Given) -> bool:
        """Whether the call's arguments held values this side converts, tensors, before it
        (its context says); ``apply``'s ``had_tensors``."""
        return bool(ctx.shared or ctx.odd)

    def apply(self, records: list[Record], given: Given, had_tensors: bool, handed: Handed | None = None) -> None:
        """After a call that ``changed`` the containers in ``records`` (the flat call's step);
        ``had_tensors``: whether the call's arguments held tensors before it; ``handed``: the
        arguments the function got (a bare one it put in is the caller's own again)."""
        if not (had_tensors or self.converts_as_is):  # the lists and dicts handed as they are stay so
            records = [record for record in records if record[0] is not record[1]]
        bare = [] if handed is None else _bare_arguments(given, handed)
        refused = apply_changes(records, self.new_values(given, had_tensors), self.rebuilt_as, bare)
        if refused:
            original, error = refused[0]
            root, below = self._where(original, given)
            error.keys += reversed(below)
            raise error.public(self.function, "argument", root) from None

    def new_values(self, given: Given, had_tensors: bool) -> Callable[[Any], Any]:
        """How a value the function put into a container converts: as a result would, new
        arrays as tensors on the device of the call's tensors, in the dtype NumPy lacks that
        every floating tensor had (bfloat16 handed over as float32 comes back bfloat16), each
        looked for once, and only for a new value."""
        args, kwargs, _ = given
        targets: list[Target] = []

        def convert(value: Any) -> Any:
            if not targets:
                tensors = self.inputs.tensors_in(args, kwargs)
                targets.append(Target(vote(tensors) or default_device(), self.casts(tensors), None))
            return to_tensors(value, targets[0])

        return convert

    def casts(self, tensors: list[torch.Tensor]) -> Casts:
        """The casts of a new value: back to the one dtype NumPy lacks of the call's floating
        tensors, which the function saw widened (as ``returns_tensor`` restores a result)."""
        inexact = {t.dtype for t in tensors if t.dtype.is_floating_point or t.dtype.is_complex}
        if len(inexact) != 1:
            return NO_CASTS
        return restoring_casts(inexact.pop(), RESTORING_HALF if self.inputs.widened is WIDENED_HALF else RESTORING)

    def _where(self, container: Any, given: Given) -> tuple[str, list[KeyEntry]]:
        """The argument holding ``container``, and the key entries below it."""
        args, kwargs, instance = given
        params = self.inputs.params
        offset = params.offset(instance)
        roots = [(params.positional_name(i, offset), a) for i, a in enumerate(args)]
        roots += [(params.keyword_name(k), v) for k, v in kwargs.items()]
        for root, value in roots:
            below = path_to(value, container)
            if below is not None:
                return root, below
        return "(a container argument)", []


class ReverseChanges(ContainerChanges):
    """accepts_tensor's containers (with nested=True): what torch code changed in those it
    was handed rebuilt (their arrays as tensors) reaches the caller's, the mirror of a NumPy
    side's; new tensors come back as arrays, detached and on the host, as ``returns_numpy``
    converts results (with its options, where the function has that side too), in the
    lists and dicts handed as they are too where the call had arrays (the caller works in
    NumPy; one with tensors alone keeps them as tensors)."""

    rebuilt_as = "its arrays as tensors"

    def __init__(self, function: str, inputs: Inputs, returning: Policy | None) -> None:
        """``returning``: the function's ``returns_numpy`` options (None: it has none, the defaults)."""
        super().__init__(function, inputs)
        self.to_arrays = NumpyOutputs(function, inputs.params, returning or DEFAULT_POLICY, scalars=True).mapper

    def converted_any(self, ctx: Target, records: list[Record], given: Given) -> bool:  # type: ignore[override]  # this side's context
        """Whether the call's arguments held values this side converts, arrays (looked for only after a
        call that changed a container): a container rebuilt for the function held some, else a
        bare argument is one."""
        if any(original is not handed for original, handed, _ in records):
            return True
        args, kwargs, _ = given
        return any(isinstance(value, (np.ndarray, np.generic)) for value in (*args, *kwargs.values()))

    def new_values(self, given: Given, had_tensors: bool) -> Callable[[Any], Any]:
        """How a value the function put into a container converts: as a result of
        ``returns_numpy`` would, new tensors as arrays."""
        to_arrays = self.to_arrays
        return lambda value: to_arrays(value, None)


def _bare_arguments(given: Given, handed: Handed) -> list[tuple[Any, Any]]:
    """(what the function got, the caller's argument) for each argument, by position and
    keyword: a value it got that it put into a container is the caller's own there, as in
    plain Python (the caller's array, not the tensor made of it)."""
    args, kwargs, _ = given
    got, got_kwargs = handed
    pairs = list(zip(got, args, strict=True)) if len(got) == len(args) else []
    pairs += [(got_kwargs[key], value) for key, value in kwargs.items() if key in got_kwargs]
    return [(mine, callers) for mine, callers in pairs if mine is not callers]
