"""The after step of a call that hands arrays NumPy may write: writeback=True and
out-parameters' private copies (``WriteBack``), check_writes=True (``RestoreWrites``).

It runs once the function returned, and once it raised (its failure a note on the
function's error then); it is made once per Runner from the spec's ``after``, and owns its
per-call state: ``begin`` makes the call's context with it (``Collected.writes``), which
the input side's leaves fill and the step reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autoconvert._conversions._containers import node_for
from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._devices import default_device, vote
from autoconvert._conversions._dtypes import NO_CASTS
from autoconvert._conversions._memory import restore_writes
from autoconvert._conversions._mutations import reach
from autoconvert._conversions._to_torch import Target
from autoconvert._conversions._tree import Mapper
from autoconvert._conversions._writeback import WriteBackFailed, freeze, write_back
from autoconvert._errors import ConversionError, LeafError, ReadOnlyError, message

from ._callbacks import to_tensors
from ._inputs import Collected, NumpyInputs, collected_writes
from ._outparams import returned
from ._signature import DEFERRED_RESULTS, Given, _record, _tensor_paths, deferred_result

#: The arguments as the function got them.
Handed = tuple[tuple[Any, ...], dict[str, Any]]
#: The arrays anywhere in a result (nested containers too): the caller's, left writable by freeze.
_ARRAYS = Mapper({np.ndarray: _record}, nested=True)


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
    the caller's tensors, and what it changed in their containers the caller's containers."""

    def __init__(self, function: str, inputs: NumpyInputs, gives_back: bool) -> None:
        """``gives_back``: an out-parameter's array returned comes back as the caller's tensor."""
        self.function = function
        self.inputs = inputs
        self.gives_back = gives_back
        self._takes_out = inputs.writes is not None  # the call's out-parameters are recorded
        self._writeback = inputs.writeback

    def begin(
        self, plain: list[torch.Tensor], odd: list[torch.Tensor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Collected:
        """The call's context, with this step's state: the lists the leaves fill, and with
        writeback the spans of memory the arguments share."""
        written: list[Any] | None = [] if self._takes_out else None
        if not self._writeback:
            return collected_writes(plain, odd, None, written)
        return collected_writes(plain, odd, self.inputs.spans(args, kwargs), written, [])

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
                freeze(pairs, writes.handed or (), (a for _, a in _ARRAYS.leaves_with_paths(result)))
        if writes.converted:
            self._reach(ctx, writes.converted, given, handed)
        return returned(result, writes.written) if self.gives_back and writes.written else result

    def _reach(self, ctx: Collected, converted: list[tuple[torch.Tensor, Any]], given: Given, handed: Handed) -> None:
        """What the function changed in the containers it was handed reaches the caller's (see
        _mutations); new arrays come back as tensors on the call's device."""
        args, kwargs, instance = given
        params, offset = self.inputs.params, self.inputs.params.offset(instance)
        pairs = [
            (params.positional_name(i, offset), a, h) for i, (a, h) in enumerate(zip(args, handed[0], strict=True))
        ]
        pairs += [(params.keyword_name(k), v, handed[1].get(k, v)) for k, v in kwargs.items()]
        target = Target(vote(ctx.plain + ctx.odd) or default_device(), NO_CASTS, None)
        for root, original, rebuilt in pairs:
            if rebuilt is original or node_for(type(original)) is None:
                continue
            try:
                reach(original, rebuilt, converted, lambda value: to_tensors(value, target))
            except LeafError as e:
                raise e.public(self.function, "argument", root) from None

    def paths_of(self, tensors: list[Any], given: Given) -> str:
        """Where ``tensors`` were among the call's arguments, for messages."""
        paths = [path for path, t in _tensor_paths(self.inputs.params, *given) if any(t is c for c in tensors)]
        return ", ".join(paths or ["(a tensor argument)"])


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
                "pass copy=True to give the function private writable copies, or "
                "writeback=True to let its changes reach the caller's tensors",
            )
        )
