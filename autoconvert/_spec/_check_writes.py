"""check_writes=True on the NumPy side, in one place: a write behind the read-only flag's
back is put back and refused.

The feature composed onto the NumPy side (see NumpyInputs.snapshots): its leaf
(``snapshotting``: a copy of each CPU tensor before the call, or of the private array a
tensor NumPy cannot share was handed), its after step (``RestoreWrites``: compared
afterwards, a change put back and raised), why its calls take
the generic call (``CHECK_WRITES_GENERIC``) and its words for ``explain`` (``CHECKED``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._conversions._copies import copied
from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._memory import memory_of, restore_writes, written_private
from autoconvert._errors import ReadOnlyError, message

from ._collected import AfterStep, Collected, Handed
from ._signature import Given

#: Its after step's name (see Inputs.after).
RESTORE_WRITES = "restore writes"
#: Why a call with check_writes=True takes the generic call (see Spec.generic_because).
CHECK_WRITES_GENERIC = "check_writes=True compares the caller's tensors with their copies after the call"
#: What ``explain`` says of the after step.
CHECKED = (
    "each tensor argument's memory (or the private array it was handed) is compared with a copy taken before "
    "the call; a change raises ReadOnlyError, put back where it is the caller's"
)


def snapshotting(leaf: Callable[[torch.Tensor, Collected], Any]) -> Callable[[torch.Tensor, Collected], Any]:
    """The NumPy side's leaf ``leaf``, taking a private copy of every CPU tensor argument's
    memory before the call, for ``RestoreWrites`` to compare with afterwards. A tensor handed as
    a private array (widened, a conj/neg bit resolved, another device's) has that array
    compared instead, once its transfer settled: a write around the read-only flag reaches the
    array alone, and would vanish."""

    def snapshotting(t: torch.Tensor, ctx: Collected) -> Any:
        a = leaf(t, ctx)
        if t.layout != torch.strided or t.is_nested or type(a) is not np.ndarray:
            return a  # sparse: a scipy.sparse copy, compared by no one
        writes = ctx.writes
        assert writes is not None  # check_writes has them
        assert writes.compared is not None
        memory = memory_of(t.detach()) if t.is_cpu else None
        # The caller's memory (an empty array's address says nothing: it has none to write into).
        if memory is not None and (not a.size or a.__array_interface__["data"][0] == memory.data_ptr()):
            copied("check_writes", t, memory.numel() * memory.element_size())
            writes.pairs.append((t, memory.clone()))
        else:
            private = _repeated_once(a)
            copied("check_writes", t, private.nbytes)
            writes.compared.append((t, private))  # snapshot once settled (see NumpyInputs.settle_arguments)
        return a

    return snapshotting


def _repeated_once(a: NDArray[Any]) -> NDArray[Any]:
    """``a`` with each zero-stride axis cut to length 1: the memory of a broadcast view (an
    expanded tensor's private array), compared once, not once per repeat."""
    if 0 not in a.strides:
        return a
    return a[tuple(slice(0, 1) if st == 0 else slice(None) for st in a.strides)]


class CopyingBack(AfterStep, Protocol):
    """The after step that copies out-parameters' private arrays back, which check_writes'
    step runs first and whose words it shares (the NumPy side's, see Inputs.after_step)."""

    function: str

    def paths_of(self, tensors: list[Any], given: Given) -> str: ...

    def refuse_unrun(self, result: Any) -> None: ...

    def writable_fixes(self) -> str: ...


class RestoreWrites:
    """check_writes=True: what the function changed in the caller's tensors through a route the
    read-only guard cannot see is put back, and said (out-parameters are the function's to
    change: written back first, by ``copy_back``)."""

    def __init__(self, copy_back: CopyingBack) -> None:
        self.copy_back = copy_back
        self.function = copy_back.function
        self.begin = copy_back.begin

    def __call__(self, ctx: Any, given: Given, handed: Handed, result: Any) -> Any:
        writes = ctx.writes  # made by begin
        assert writes is not None
        pairs, written, compared = writes.pairs, writes.written, writes.compared
        if written:
            result = self.copy_back(ctx._replace(writes=writes._replace(pairs=[], compared=[])), given, handed, result)
            pairs = [(t, snapshot) for t, snapshot in pairs if all(t is not out for out, _, _ in written)]
            compared = [entry for entry in compared if all(entry[0] is not out for out, _, _ in written)]
        elif pairs or compared:
            self.copy_back.refuse_unrun(result)
        changed = restore_writes(pairs)
        lost = written_private(compared) if compared else []
        if not changed and not lost:
            return result
        how = (
            "the values were put back"
            if changed
            else "into the private copy it was handed (a dtype NumPy lacks, widened; a conjugate or negative bit "
            "resolved; another device's tensor), which the caller's tensor never sees, so the write was lost"
        )
        raise ReadOnlyError(
            message(
                self.function,
                "argument " + self.copy_back.paths_of(changed + lost, given),
                "was changed by the function, through a route the read-only guard cannot see (torch.from_numpy "
                "or torch.as_tensor on the array, its .base, np.frombuffer, compiled code ignoring the flag such as "
                f"SciPy's overwrite_*=True); {how}",
                describe_tensor((changed + lost)[0]),
                self.copy_back.writable_fixes(),
            )
        )
