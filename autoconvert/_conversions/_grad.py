"""The grad policy: what happens to a tensor that requires grad when NumPy code is handed it
(``grad="warn"``, ``"detach"``, ``"error"``)."""

from __future__ import annotations

import torch

from autoconvert._errors import GradientError, GradientWarning, LeafError

from ._describe import describe_tensor, warn_at_caller


class GradPolicy:
    """What to do with a tensor that requires grad (``grad=``), and whether it was said yet."""

    __slots__ = ("function", "mode", "unsaid", "warned")

    def __init__(self, mode: str, function: str) -> None:
        self.mode = mode
        self.function = function
        self.warned = False
        #: "warn": the tensor the warning is about, until the boundary, which knows where it
        #: was among the call's arguments, says it (``say``).
        self.unsaid: torch.Tensor | None = None

    def detach(self, t: torch.Tensor) -> torch.Tensor:
        """Apply the policy (only while grad mode is on) and return ``t`` detached."""
        if self.mode != "detach" and torch.is_grad_enabled():
            if self.mode == "error":
                raise LeafError(
                    GradientError,
                    "requires grad, and NumPy code cannot pass gradients back",
                    describe_tensor(t),
                    "pass {path}.detach(), call under torch.no_grad(), or use grad='detach' or grad='warn'",
                )
            if not self.warned:  # "warn": once per decorated function; a race only warns twice
                self.warned = True
                self.unsaid = t
        return t.detach()

    def say(self, paths: list[str]) -> None:
        """Issue the "warn" policy's warning about the tensor ``detach`` kept, found at
        ``paths`` among the call's arguments (empty: not found, as for another thread's)."""
        self.unsaid = None
        where = f"argument {' or '.join(paths)}" if paths else "an argument"
        warn_at_caller(
            f"{self.function}: {where} requires grad, and NumPy code cannot pass gradients back: it was "
            "detached, so no gradient flows through this call. Pass grad='detach' to silence this, "
            "grad='error' to forbid it, or call under torch.no_grad()",
            GradientWarning,
        )


#: Detaches without a word: results of torch code, and to_numpy().
DETACH = GradPolicy("detach", "")
