"""check_writes=True on the NumPy side, in one place: a write behind the read-only flag's
back is put back and refused.

The feature composed onto the NumPy side (see NumpyInputs.snapshots): its leaf
(``snapshotting``: a copy of each CPU tensor before the call), its after step
(``RestoreWrites``: compared afterwards, a change put back and raised), why its calls take
the generic call (``CHECK_WRITES_GENERIC``) and its words for ``explain`` (``CHECKED``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch

from autoconvert._conversions._copies import copied
from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._memory import memory_of, restore_writes
from autoconvert._errors import ReadOnlyError, message

from ._collected import AfterStep, Collected, Handed
from ._signature import Given

#: Its after step's name (see Inputs.after).
RESTORE_WRITES = "restore writes"
#: Why a call with check_writes=True takes the generic call (see Spec.generic_because).
CHECK_WRITES_GENERIC = "check_writes=True compares the caller's tensors with their copies after the call"
#: What ``explain`` says of the after step.
CHECKED = "each CPU tensor argument is compared with its copy; a change is put back and raises ReadOnlyError"


def snapshotting(leaf: Callable[[torch.Tensor, Collected], Any]) -> Callable[[torch.Tensor, Collected], Any]:
    """The NumPy side's leaf ``leaf``, taking a private copy of every CPU tensor argument
    before the call, for ``RestoreWrites`` to compare with afterwards."""

    def snapshotting(t: torch.Tensor, ctx: Collected) -> Any:
        a = leaf(t, ctx)
        if t.is_cpu and t.layout == torch.strided and not t.is_nested:  # a device's tensor crossed as a copy
            memory = memory_of(t.detach())
            copied("check_writes", t, memory.numel() * memory.element_size())
            ctx.writes.pairs.append((t, memory.clone()))  # type: ignore[union-attr]  # check_writes has them
        return a

    return snapshotting


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
        pairs, written = writes.pairs, writes.written
        if written:
            result = self.copy_back(ctx._replace(writes=writes._replace(pairs=[])), given, handed, result)
            pairs = [(t, snapshot) for t, snapshot in pairs if all(t is not out for out, _, _ in written)]
        elif pairs:
            self.copy_back.refuse_unrun(result)
        changed = restore_writes(pairs)
        if not changed:
            return result
        raise ReadOnlyError(
            message(
                self.function,
                "argument " + self.copy_back.paths_of(changed, given),
                "was changed by the function, through a route the read-only guard cannot see (torch.from_numpy "
                "or torch.as_tensor on the array, its .base, np.frombuffer, compiled code ignoring the flag such as "
                "SciPy's overwrite_*=True); the values were put back",
                describe_tensor(changed[0]),
                self.copy_back.writable_fixes(),
            )
        )
