"""The grad policy: what happens to a tensor that requires grad when NumPy code is handed it
(``grad="warn"``, ``"detach"``, ``"error"``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from autoconvert._errors import GradientError, GradientWarning, LeafError

from ._describe import describe_tensor, warn_at_caller

#: Why a tensor that requires grad loses its gradient, unless the policy is told another reason.
_NUMPY = "NumPy code cannot pass gradients back"


def requires_grad(value: object) -> bool:
    """Whether ``value`` is a tensor that requires grad (a predicate for argument walks)."""
    return isinstance(value, torch.Tensor) and value.requires_grad


class GradPolicy:
    """What to do with a tensor that requires grad (``grad=``), and whether it was said yet."""

    __slots__ = ("fixes", "function", "mode", "unsaid", "warned", "why")

    def __init__(
        self, mode: str, function: str, fixes: Callable[[], GradFixes] | None = None, why: str = _NUMPY
    ) -> None:
        self.mode = mode
        self.function = function
        #: Why the gradient cannot pass, in words (the native route's library leaving torch).
        self.why = why
        #: What keeps the gradient, and where the ``grad=`` option goes, asked when the warning
        #: is issued: torchify learns after the plan is made whether its library has a torch path.
        #: None: to_numpy()'s.
        self.fixes = fixes
        self.warned = False
        #: "warn": the tensor the warning is about, until the boundary, which knows where it
        #: was among the call's arguments, says it (``say``).
        self.unsaid: torch.Tensor | None = None

    def detach(self, t: torch.Tensor) -> torch.Tensor:
        """Apply the policy (only while grad mode is on) and return ``t`` detached."""
        if self.mode != "detach" and torch.is_grad_enabled():
            if self.mode == "error":
                fixes = self._fixes()
                raise LeafError(
                    GradientError,
                    f"requires grad, and {self.why}",
                    describe_tensor(t),
                    "pass {path}.detach(), call under torch.no_grad(), or allow it detached with grad='detach' "
                    f"(in {fixes.site(_DETACH)}; grad='warn' says so once); to keep the gradient, {fixes.keep}",
                )
            if not self.warned:  # "warn": once per decorated function; a race only warns twice
                self.warned = True
                self.unsaid = t
        return t.detach()

    def _fixes(self) -> GradFixes:
        return self.fixes() if self.fixes is not None else TO_NUMPY_FIXES

    def say(self, paths: list[str], role: str = "argument") -> None:
        """Issue the "warn" policy's warning about the tensor ``detach`` kept, found at
        ``paths`` among the call's arguments (empty: not found, as for another thread's), or
        of another ``role`` (a result's ``field``)."""
        self.unsaid = None
        where = f"{role} {' or '.join(paths)}" if paths else "an argument"
        fixes = self._fixes()
        warn_at_caller(
            f"{self.function}: {where} requires grad, and {self.why}: it was detached, so no gradient flows "
            f"through this call. To keep the gradient, {fixes.keep}. To silence "
            f"this, pass grad='detach' (in {fixes.site(_DETACH)}; grad='error' forbids it), or call under "
            "torch.no_grad()",
            GradientWarning,
        )


_DETACH = "grad='detach'"


class GradFixes(NamedTuple):
    """The fixes a grad warning offers: ``keep``, what keeps the gradient flowing; ``site``,
    how a user sets an option (``"grad='detach'"``), in words."""

    keep: str
    site: Callable[[str], str]


#: to_numpy()'s fixes.
TO_NUMPY_FIXES = GradFixes(
    "keep the computation in torch, or make the NumPy code a differentiable torch operation with "
    "ac.numpy_op(fn, backward=...)",
    lambda assignment: f"ac.to_numpy(obj, {assignment})",
)


#: Detaches without a word: results of torch code, and to_numpy().
DETACH = GradPolicy("detach", "")
