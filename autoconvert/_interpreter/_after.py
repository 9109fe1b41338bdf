"""The after step of a call that hands arrays NumPy may write: writeback=True and
out-parameters' private copies (``WriteBack``), check_writes=True (``RestoreWrites``).

It runs once the function returned, and once it raised (its failure a note on the
function's error then); it is made once per Runner from the spec's ``after``, and owns its
per-call state: ``begin`` makes the call's context with it (``Collected.writes``), which
the input side's leaves fill and the step reads. After it, in every mode of a NumPy side,
``ContainerChanges`` makes the containers the function changed the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._devices import default_device, vote
from autoconvert._conversions._dtypes import NO_CASTS, RESTORING, RESTORING_HALF, WIDENED_HALF, Casts, restoring_casts
from autoconvert._conversions._memory import restore_writes
from autoconvert._conversions._mutations import Rebuilt, Record, apply_changes, changed, path_to
from autoconvert._conversions._to_torch import Target
from autoconvert._conversions._writeback import WriteBackFailed, freeze, write_back
from autoconvert._errors import ConversionError, KeyEntry, LeafError, ReadOnlyError, message
from autoconvert._failures._failures import writable_fixes
from autoconvert._spec._callbacks import to_tensors
from autoconvert._spec._inputs import Collected, Inputs, collected_writes
from autoconvert._spec._outparams import returned
from autoconvert._spec._signature import ARRAYS, DEFERRED_RESULTS, Given, deferred_result, tensor_paths

#: The arguments as the function got them.
Handed = tuple[tuple[Any, ...], dict[str, Any]]
#: The arrays anywhere in a result (nested containers too): the caller's, left writable by freeze.


def refuse_deferred(result: Any, function: str) -> None:
    """Before an after step (writeback, check_writes): a result whose body has not run yet
    (a generator, a coroutine) is refused, since the step would run before its writes."""
    if type(result) in DEFERRED_RESULTS:
        try:
            deferred_result(result)
        except LeafError as e:
            raise e.public(function, "", "result") from None


class WriteBack:
    """writeback=True, and out-parameters' private copies: what the function wrote reaches
    the caller's tensors (its changes to their containers are ContainerChanges', as in every mode)."""

    def __init__(self, function: str, inputs: Inputs, gives_back: bool, site: Callable[[str], str]) -> None:
        """``gives_back``: an out-parameter's array returned comes back as the caller's tensor;
        ``site``: where an option goes, for messages (see Spec.site)."""
        self.function = function
        self.site = site
        self.inputs = inputs
        self.gives_back = gives_back
        self._takes_out = inputs.writes is not None  # the call's out-parameters are recorded
        self._writeback = inputs.policy.writeback

    def begin(
        self, shared: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Collected:
        """The call's context, with this step's state: the lists the leaves fill, and with
        writeback the spans of memory the arguments share."""
        written: list[Any] | None = [] if self._takes_out else None
        if not self._writeback:
            return collected_writes(shared, odd, None, written)
        return collected_writes(shared, odd, self.inputs.spans(args, kwargs), written, [])

    def __call__(self, ctx: Any, given: Given, handed: Handed, result: Any) -> Any:
        """The step after a call that returned ``result`` (None where it raised): what the
        function wrote reaches the caller, even when it raised; a tensor that cannot take its
        array back is named. The private arrays are read-only afterwards (see freeze). Gives
        the result, an out-parameter's array in it marked ``Returned`` (see _outparams.returned)."""
        writes = ctx.writes  # made by begin
        assert writes is not None
        pairs = writes.pairs
        if pairs or writes.written:
            refuse_deferred(result, self.function)
        if writes.written:
            pairs = [*pairs, *((t, private) for t, _, private in writes.written)]
        try:
            write_back(pairs)
        except WriteBackFailed as failed:
            raise ConversionError(
                message(
                    self.function,
                    "argument " + self.paths_of([failed.tensor], given),
                    "could not take back what the function wrote (writeback=True): "
                    f"{type(failed.error).__name__}: {failed.error}",
                    describe_tensor(failed.tensor),
                    "keep the array's shape and dtype in the function (write into it with a[...] = ...), "
                    "or return the new array instead, with writeback=False",
                )
            ) from failed.error
        finally:
            if writes.handed or any(a is not None for _, a in pairs):  # shared memory: nothing to freeze
                freeze(pairs, writes.handed or (), (a for _, a in ARRAYS.leaves_with_paths(result)))
        return returned(result, writes.written) if self.gives_back and writes.written else result

    def paths_of(self, tensors: list[Any], given: Given) -> str:
        """Where ``tensors`` were among the call's arguments, for messages."""
        paths = [path for path, t in tensor_paths(self.inputs.params, *given) if any(t is c for c in tensors)]
        return ", ".join(paths or ["(a tensor argument)"])


class ContainerChanges:
    """After a call that handed the function containers, in every mode: what it changed in
    the rebuilt ones (those holding tensors) reaches the caller's containers (see
    _mutations); new arrays come back as tensors on the call's device, as a result's would,
    in the lists and dicts it was handed as they are too where the call had tensors (the
    caller works in torch; one with arrays alone keeps them as arrays)."""

    #: Whether new values in the lists and dicts handed as they are (they held no tensors)
    #: convert in a call without tensors too (adapt's: into the caller's kind, arrays).
    converts_as_is = False

    def __init__(self, function: str, inputs: Inputs) -> None:
        self.function = function
        self.inputs = inputs

    def __call__(self, rebuilt: Rebuilt, given: Given, had_tensors: bool) -> None:
        """The generic call's step, after a call that handed ``rebuilt`` containers."""
        records = [*rebuilt.values()]
        if changed(records):
            self.settle(records, given, had_tensors)

    def settle(self, records: list[Record], given: Given, had_tensors: bool) -> None:
        """After a call that ``changed`` the containers in ``records`` (the flat call's step);
        ``had_tensors``: whether the call's arguments held tensors before it."""
        if not (had_tensors or self.converts_as_is):  # the lists and dicts handed as they are stay so
            records = [record for record in records if record[0] is not record[1]]
        refused = apply_changes(records, self.new_values(given, had_tensors))
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


class RestoreWrites(WriteBack):
    """check_writes=True: what the function changed in the caller's tensors through a route the
    read-only guard cannot see is put back, and said (out-parameters are the function's to
    change: written back first)."""

    def __call__(self, ctx: Any, given: Given, handed: Handed, result: Any) -> Any:
        writes = ctx.writes  # made by begin
        assert writes is not None
        pairs, written = writes.pairs, writes.written
        if written:
            result = super().__call__(ctx._replace(writes=writes._replace(pairs=[])), given, handed, result)
            pairs = [(t, snapshot) for t, snapshot in pairs if all(t is not out for out, _, _ in written)]
        elif pairs:
            refuse_deferred(result, self.function)
        changed = restore_writes(pairs)
        if not changed:
            return result
        raise ReadOnlyError(
            message(
                self.function,
                "argument " + self.paths_of(changed, given),
                "was changed by the function, through a route the read-only guard cannot see (torch.from_numpy "
                "or torch.as_tensor on the array, its .base, np.frombuffer); the values were put back",
                describe_tensor(changed[0]),
                writable_fixes(self.site),
            )
        )
