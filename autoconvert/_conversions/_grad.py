"""The grad policy: what happens to a tensor that requires grad, or carries a forward-mode
tangent, when NumPy code is handed it (``grad="warn"``, ``"detach"``, ``"error"``)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, NamedTuple

import torch
from torch.autograd import forward_ad

from autoconvert._errors import GradientError, GradientWarning, LeafError

from ._describe import describe_tensor, warn_at_caller
from ._memory import functorch_wrapped

#: Why a tensor that requires grad loses its gradient, unless the policy is told another reason.
_NUMPY = "NumPy code cannot pass gradients back"


#: What holds the innermost ``forward_ad.dual_level`` as ``_current_level``, -1 outside all
#: (where no tensor carries a tangent), read on every call; a torch that keeps none: a level
#: always open, so tangents are always looked for.
FORWARD_AD: Any = forward_ad if hasattr(forward_ad, "_current_level") else SimpleNamespace(_current_level=0)


def requires_grad(value: object) -> bool:
    """Whether ``value`` is a tensor that requires grad (a predicate for argument walks)."""
    return isinstance(value, torch.Tensor) and value.requires_grad


def has_tangent(t: torch.Tensor) -> bool:
    """Whether ``t`` is a dual tensor (``forward_ad.make_dual``) of the innermost level: it
    requires no grad, and ``numpy()`` hands its primal over without a word."""
    tangent: torch.Tensor | None = forward_ad.unpack_dual(t).tangent  # type: ignore[no-untyped-call, unused-ignore]
    return tangent is not None


def may_lose_gradient(t: torch.Tensor) -> bool:
    """Whether NumPy handed ``t`` may drop a gradient (``GradPolicy.detach`` decides): it
    requires grad, or a forward-mode level is open, where it may carry a tangent."""
    return t.requires_grad or FORWARD_AD._current_level >= 0


class GradPolicy:
    """What to do with a tensor that requires grad (``grad=``), and whether it was said yet."""

    __slots__ = ("fixes", "function", "lost", "mode", "unsaid", "warned", "why")

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
        #: was among the call's arguments, says it (``say``), and what it lost.
        self.unsaid: torch.Tensor | None = None
        self.lost = REVERSE

    def detach(self, t: torch.Tensor) -> torch.Tensor:
        """Apply the policy where ``t`` loses a gradient (one it requires while grad mode is
        on, or a forward-mode tangent) and return ``t`` detached."""
        if self.mode != "detach":
            lost = gradient_lost(t)
            if lost is not None:
                if self.mode == "error":
                    raise self._refusal(t, "pass {path}.detach()", lost)
                if not self.warned:  # "warn": once per decorated function; a race only warns twice
                    self.warned = True
                    self.unsaid, self.lost = t, lost
        return t.detach()

    def returned(self, t: torch.Tensor, lost: Lost) -> bool:
        """Apply the policy to ``t``, a result of a torch callback that loses a gradient
        (``lost``: one it requires through a tensor from outside the callback, or a tangent),
        handed to the NumPy code that called it as an array: "error" refuses it (a LeafError
        below the callback's result), "warn" returns True for the caller to say it
        (``say_returned``) once per call, "detach" returns False."""
        if self.mode == "detach":
            return False
        if self.mode == "error":
            raise self._refusal(t, ".detach() the callback's result", lost)
        return True

    def say_returned(self, callback: str, lost: Lost) -> None:
        """Issue the "warn" policy's warning about a callback's result that lost a gradient
        (``lost``), at the line that called this policy's function (past the library calling
        the callback)."""
        fixes = self._fixes()
        silence = either(
            ".detach() the callback's result",
            f"pass grad='detach' (in {fixes.site(_DETACH)}; grad='error' forbids it)",
            lost.call_outside,
        )
        warn_at_caller(
            f"{self.function}: the result of its callback {callback} {lost.found}, and {self.why}: it was "
            "detached, so no gradient flows from the callback through this call. To keep the gradient, "
            f"{lost.keep(fixes.keep)}. To silence this, {silence}",
            GradientWarning,
            past_callee=True,
        )

    def _refusal(self, t: torch.Tensor, detached: str, lost: Lost | None = None) -> LeafError:
        """grad="error"'s refusal of ``t``, whose gradient (``lost``: the one it requires by
        default) ``detached`` (in words) lets go."""
        lost = REVERSE if lost is None else lost
        fixes = self._fixes()
        return LeafError(
            GradientError,
            f"{lost.found}, and {self.why}",
            describe_tensor(t),
            either(
                detached,
                lost.call_outside,
                f"allow it detached with grad='detach' (in {fixes.site(_DETACH)}; grad='warn' says so once)",
            )
            + f"; to keep the gradient, {lost.keep(fixes.keep)}",
        )

    def _fixes(self) -> GradFixes:
        return self.fixes() if self.fixes is not None else TO_NUMPY_FIXES

    def unsay(self) -> None:
        """Leave the "warn" policy's warning unsaid, for the next call to say: the call that
        lost the gradient never ran (its function refused its arguments)."""
        self.unsaid, self.warned = None, False

    def say(self, paths: list[str], role: str = "argument") -> None:
        """Issue the "warn" policy's warning about the tensor ``detach`` kept, found at
        ``paths`` among the call's arguments (empty: not found, as for another thread's), or
        of another ``role`` (a result's ``field``)."""
        self.unsaid = None
        where = f"{role} {' or '.join(paths)}" if paths else "an argument"
        fixes = self._fixes()
        silence = either(
            f"pass grad='detach' (in {fixes.site(_DETACH)}; grad='error' forbids it)", self.lost.call_outside
        )
        warn_at_caller(
            f"{self.function}: {where} {self.lost.found}, and {self.why}: it was detached, so no gradient flows "
            f"through this call. To keep the gradient, {self.lost.keep(fixes.keep)}. To silence this, {silence}",
            GradientWarning,
        )


class Lost(NamedTuple):
    """A gradient a tensor loses in NumPy, in words: ``found``, what the tensor has;
    ``outside``, where the call loses none ("": nowhere the user can call it, as inside
    torch.func.jvp); ``forward``, whether it is a forward-mode tangent."""

    found: str
    outside: str
    forward: bool = False

    @property
    def call_outside(self) -> str:
        """The fix of calling where nothing is lost, in words ("": none)."""
        return f"call {self.outside}" if self.outside else ""

    def keep(self, fixes: str) -> str:
        """What keeps this gradient: ``GradFixes.keep``'s words name numpy_op's reverse-mode
        rule, and a tangent needs its forward-mode one."""
        if not self.forward:
            return fixes
        return fixes.replace("backward=...", "jvp=...").replace("vector-Jacobian", "Jacobian-vector")


REVERSE = Lost("requires grad", "under torch.no_grad()")
FORWARD = Lost(
    "carries a forward-mode tangent (a dual tensor of torch.autograd.forward_ad)",
    "outside forward_ad.dual_level()",
    forward=True,
)
#: A tangent of torch.func's forward mode, whose transform wraps the tensor: the user opened
#: no dual level, and calling outside the transform is no fix.
FUNC_FORWARD = Lost("carries a tangent of torch.func's forward mode (jvp, jacfwd)", "", forward=True)


def forward_lost(t: torch.Tensor) -> Lost:
    """What ``t``, a tensor carrying a tangent, loses, in the words of what gave it the tangent."""
    return FUNC_FORWARD if functorch_wrapped(t) else FORWARD


def either(*fixes: str) -> str:
    """Fixes as a list of choices, those given as "" left out: "a, b, or c"."""
    given = [fix for fix in fixes if fix]
    return given[0] if len(given) == 1 else ", ".join(given[:-1]) + ", or " + given[-1]


def gradient_lost(t: object) -> Lost | None:
    """The gradient ``t`` (a tensor, or None) loses in NumPy: the one it requires while grad mode
    is on (under torch.no_grad() none flows), else its forward-mode tangent (torch.no_grad() keeps those)."""
    if not isinstance(t, torch.Tensor):
        return None
    if t.requires_grad and torch.is_grad_enabled():
        return REVERSE
    if FORWARD_AD._current_level >= 0 and has_tangent(t):
        return forward_lost(t)
    return None


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
