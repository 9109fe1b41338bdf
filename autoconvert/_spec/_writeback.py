"""writeback=True on the NumPy side, in one place: the function writes into the caller's
tensors.

The feature composed onto the NumPy side (see NumpyInputs): its leaf (``writeback_leaf``:
each tensor handed over writable, its own memory or a private copy), its after step
(``WriteBack``: what the function wrote reaches the caller's tensors, out-parameters' private
copies too), why its calls take the generic call (``WRITEBACK_GENERIC``), its words for
``explain`` (``WRITTEN_BACK``) and for a refused write (``refused_write_words``). Where products
and routes give way to it is _options._options.AFTER_CALL. The memory it works on
(spans shared between arguments, the copy back, freezing the private arrays afterwards) is
_conversions/_writeback's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._dtypes import Casts
from autoconvert._conversions._grad import GradPolicy, may_lose_gradient
from autoconvert._conversions._memory import expanded, extent, memory_of, overlapping, written_private
from autoconvert._conversions._to_numpy import tensor_to_array
from autoconvert._conversions._writeback import (
    WriteBackFailed,
    hand_over,
    make_private_read_only,
    write_back,
)
from autoconvert._errors import ConversionError, LeafError, ReadOnlyError, message
from autoconvert._options._options import Policy

from ._collected import Collected, Handed, collected_writes
from ._outparams import OutParams, refuse_sparse, returned, writable
from ._signature import ARRAYS, DEFERRED_RESULTS, Given, Parameters, deferred_result, tensor_paths

#: Its after step's name (see Inputs.after).
WRITE_BACK = "write back"
#: Why a call with writeback=True takes the generic call (see Spec.generic_because).
WRITEBACK_GENERIC = "writeback=True writes the arrays back into the caller's tensors after the call"
#: What ``explain`` says of the after step.
WRITTEN_BACK = "what the function wrote into the arrays is written back into the caller's tensors"


class WritingSide(Protocol):
    """What the after step reads of the NumPy side it is composed onto."""

    params: Parameters
    policy: Policy
    writes: OutParams | None

    def spans(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int, Any] | None: ...


#: What an expanded tensor's array is, once the function wrote into it (see expanded_leaf).
EXPANDED_WRITTEN = (
    "is an expanded tensor (zero strides: its elements share memory), handed over read-only since no "
    "write can reach back into it, and the function wrote into it"
)
#: The same of an overlapping tensor (see expanded_leaf).
OVERLAPPING_WRITTEN = (
    "is an overlapping tensor (strides that give some of its elements one memory location, as as_strided and "
    "unfold make), handed over read-only since a write into one of them cannot reach back apart from the "
    "others, and the function wrote into it"
)
#: Its fix; ``{path}`` is the argument's path.
EXPANDED_FIX = "pass {path}.contiguous() (then writes reach that copy only), or return the changed array instead"


def writable_fixes(site: Callable[[str], str]) -> str:
    """The fixes for a write into a read-only array: private copies, or writes that reach the caller."""
    return (
        "pass copy=True to give the function private writable copies, or writeback=True to let its changes "
        f"reach the caller's tensors (in {site('copy=True')})"
    )


#: A write into a private array of an earlier call, frozen since (see make_private_read_only).
LATE_WRITE = (
    "holds a private copy of a tensor handed to an earlier call with writeback=True (NumPy cannot share "
    "the tensor's memory: another device, a dtype NumPy lacks, or strided memory), copied back when that "
    "call returned and read-only since, so that a write made later is refused rather than lost"
)
#: Its fix.
LATE_WRITE_FIX = (
    "make the writes before the call returns, or pass a contiguous CPU tensor of a NumPy dtype, whose "
    "memory the array shares"
)


def refused_write_words(late: bool, expanded: bool, overlapping: bool, writeback: bool) -> tuple[str, str] | None:
    """What compiled code's refused write into a read-only array handed over is, and its fix,
    where writeback words it: a private array of an earlier call (``late``), an expanded or
    overlapping tensor's array under writeback=True; None for the read-only default's words."""
    if late:
        return LATE_WRITE, LATE_WRITE_FIX
    if writeback and (expanded or overlapping):
        return EXPANDED_WRITTEN if expanded else OVERLAPPING_WRITTEN, EXPANDED_FIX
    return None


def writeback_leaf(copy: bool | None, grad: GradPolicy, widened: Casts) -> Callable[[torch.Tensor, Collected], Any]:
    """The NumPy side's leaf under writeback=True: each tensor handed over writable, its own
    memory or a private copy written back after the call (an expanded tensor read-only)."""

    def leaf(t: torch.Tensor, ctx: Collected) -> Any:
        ctx.odd.append(t)
        refuse_sparse(
            t,
            "writeback=True",
            "name the arguments the function writes in out_params=(...) instead of writeback=True (a sparse one it "
            "only reads then crosses as a private SciPy matrix), or return the changed matrix, with writeback=False",
        )
        writes = ctx.writes
        assert writes is not None  # writeback has its after step
        if not t.is_nested and (expanded(t) or overlapping(t)):
            return expanded_leaf(t, writes.compared, copy, grad, widened)  # type: ignore[arg-type]  # writeback has the list
        span = writes.spans.get(id(t)) if writes.spans else None
        if span is not None:  # it shares memory with another argument
            return span.view(t, writes.pairs, writes.handed, copy=copy, grad=grad, widened=widened)
        a, private = writable(t, copy, grad, widened)
        # Private memory is copied back after the call; shared memory only needs autograd told.
        writes.pairs.append((t, private))
        return a if private is None else hand_over(private, writes.handed)  # type: ignore[arg-type]  # writeback has the list

    return leaf


def expanded_leaf(t: torch.Tensor, compared: list[Any], copy: bool | None, grad: GradPolicy, widened: Casts) -> Any:
    """An expanded tensor under writeback=True: its elements share memory, which no write can
    reach back into element by element, so its compact memory is handed read-only, broadcast
    back (a NumPy write raises, see Runner.failed). A private copy of it is also recorded in
    ``compared``, compared after the call (see WriteBack): a write around the read-only flag
    (``torch.from_numpy``) would reach that copy only, and vanish. An overlapping tensor's
    memory (as_strided, unfold) is handed the same way, viewed with its strides."""
    if may_lose_gradient(t):
        grad.detach(t)  # the policy speaks for t, where the GradientWarning names it
    memory = memory_of(t.detach())
    whole = memory.as_strided((extent(memory),), (1,)) if overlapping(memory) else memory
    a, shared = tensor_to_array(whole, copy, grad, settle=False, widened=widened)
    a.setflags(write=False)
    if not shared:
        compared.append((t, a))  # snapshot once settled (see NumpyInputs.settle_arguments)
    if whole is not memory:  # one array element per memory location, as NumPy sees the caller's tensor
        strides = tuple(st * a.itemsize for st in memory.stride())
        a = np.lib.stride_tricks.as_strided(a, tuple(memory.shape), strides, writeable=False)
    return np.broadcast_to(a, tuple(t.shape))


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

    def __init__(self, function: str, inputs: WritingSide, gives_back: bool, site: Callable[[str], str]) -> None:
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
        array back is named. The private arrays are read-only afterwards (see make_private_read_only). Gives
        the result, an out-parameter's array in it marked ``Returned`` (see _outparams.returned)."""
        writes = ctx.writes  # made by begin
        assert writes is not None
        pairs = writes.pairs
        if pairs or writes.written or writes.compared:  # an expanded tensor's private copy is compared too
            self.refuse_unrun(result)
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
            if writes.handed or any(a is not None for _, a in pairs):  # shared memory: nothing to make read-only
                make_private_read_only(pairs, writes.handed or (), (a for _, a in ARRAYS.leaves_with_paths(result)))
        if writes.compared:
            self.refuse_expanded(written_private(writes.compared), given)
        return returned(result, writes.written) if self.gives_back and writes.written else result

    def refuse_expanded(self, written: list[torch.Tensor], given: Given) -> None:
        """Raise for the expanded tensors whose private array the function wrote into around
        the read-only flag (see expanded_leaf), in NumPy's own write's words: the caller's
        tensors keep their values."""
        if not written:
            return
        paths = self.paths_of(written, given)
        what = EXPANDED_WRITTEN if expanded(written[0]) else OVERLAPPING_WRITTEN
        raise ReadOnlyError(
            message(
                self.function,
                "argument " + paths,
                f"{what}, through a route the read-only guard cannot see (torch.from_numpy or "
                "torch.as_tensor on the array, its .base, np.frombuffer), into a private copy the caller's tensor "
                "never sees",
                describe_tensor(written[0]),
                EXPANDED_FIX,
                path=paths.split(", ")[0],
            )
        )

    def refuse_unrun(self, result: Any) -> None:
        """Refuse a result whose body has not run yet (see refuse_deferred)."""
        refuse_deferred(result, self.function)

    def writable_fixes(self) -> str:
        """The fixes for a write into a read-only array (see writable_fixes), with this function's site."""
        return writable_fixes(self.site)

    def paths_of(self, tensors: list[Any], given: Given) -> str:
        """Where ``tensors`` were among the call's arguments, for messages."""
        paths = [path for path, t in tensor_paths(self.inputs.params, *given) if any(t is c for c in tensors)]
        return ", ".join(paths or ["(a tensor argument)"])
