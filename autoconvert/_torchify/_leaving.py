"""The grad policy on the native route, where the library's own torch code leaves torch.

A library's torch path is handed the caller's tensors as they are, so their gradient flows
where its torch code computes (a ridge fitted with ``solver="svd"``, a fitted scaler's
``transform``). Some of that code leaves torch itself: it hands its tensors to NumPy
(scikit-learn's ``LogisticRegression`` and ``PoissonRegressor`` fit through SciPy's NumPy
optimizers), which torch refuses for a tensor that requires grad ("Can't call numpy() on Tensor
that requires grad"), or turns a tensor into a Python number (scikit-learn's regression metrics
return ``float()`` of their 0-d result), which torch lets go with its gradient dropped.
Detaching every argument up front would drop the gradients the library keeps; so a call holding
a tensor that requires grad runs under a torch function mode that watches the ways out of torch
(``Tensor.numpy``, ``__array__``, ``__dlpack__``, and ``__float__``, ``__int__``,
``__complex__``, ``item``, ``tolist``, a 0-d tensor's ``__format__``) and applies the call's
``grad=`` there, as the converting call does on the way in: ``"warn"`` detaches what leaves
with a ``GradientWarning`` naming the argument, ``"detach"`` silently, ``"error"`` raises
``GradientError``. ``bool()`` is let through: a truth value is no differentiable value. A dual
tensor (``forward_ad.make_dual``) leaves torch unrefused, its tangent dropped: a call holding
one is watched too. A call holding neither is never watched (a watched call pays a Python
dispatch on each torch operation). Watching at the exit rather than checking the result also
catches a number taken midway and made a tensor again, whose result still requires grad but
lacks that part of its gradient. Inside torch.func's transforms a call is watched too: a tensor
there has no storage to leave torch with, so it leaves as its values (see ``_Exits._leave``),
and one torch.vmap batches is refused in the library's words.

Before torch 2.13, ``torch.asarray`` of a tensor that requires grad returned it detached
(``requires_grad`` unspecified meant False), and the array API's ``asarray``, which SciPy's and
scikit-learn's torch code calls on their inputs, is that function: the gradient was lost
without a word. On such a torch a call holding a tensor that requires grad is always watched,
and ``asarray`` there does what torch 2.13 does: the tensor itself, or its differentiable
move, cast or copy.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._grad import (
    FORWARD_AD,
    GradFixes,
    GradPolicy,
    has_tangent,
    may_lose_gradient,
    requires_grad,
)
from autoconvert._conversions._memory import functorch_wrapped, transforming, ungraded, untransformed
from autoconvert._errors import ConversionError, GradientError, LeafError
from autoconvert._options._config import active
from autoconvert._spec._spec import in_a_block

#: The ways a tensor leaves torch for NumPy: each refuses one that requires grad.
_TO_NUMPY: frozenset[Any] = frozenset((torch.Tensor.numpy, torch.Tensor.__array__, torch.Tensor.__dlpack__))
#: The ways a tensor becomes Python numbers, every one seen by a torch function mode on every
#: torch: torch lets one that requires grad go (torch 2.13 on warns once per process,
#: "Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior").
#: ``format()`` and f-strings of a 0-d tensor: ``Tensor.__format__`` takes its ``item()`` where
#: the mode no longer sees it (its own dispatch pops the mode); any other tensor's is its repr.
_TO_NUMBERS: frozenset[Any] = frozenset(
    (
        torch.Tensor.__float__,
        torch.Tensor.__int__,
        torch.Tensor.__complex__,
        torch.Tensor.item,
        torch.Tensor.tolist,
        torch.Tensor.__format__,
    )
)


@functools.cache
def asarray_detaches() -> bool:
    """Whether this torch's ``torch.asarray`` detaches a tensor that requires grad (before
    2.13), asked where a watched call first meets ``asarray`` of one: torch 2.13 warns once
    that it no longer does, and the question spends that warning before that call would."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return not torch.asarray(torch.zeros(1, requires_grad=True)).requires_grad


def _asarray_keeping_grad(t: torch.Tensor, kwargs: dict[str, Any]) -> torch.Tensor | None:
    """``torch.asarray(t, **kwargs)`` as torch 2.13 makes it for a tensor that requires grad,
    its gradient kept (None: a call torch must answer itself, a refusal of copy=False)."""
    if set(kwargs) - {"dtype", "device", "copy"}:
        return None
    dtype, device, copy = kwargs.get("dtype"), kwargs.get("device"), kwargs.get("copy")
    out = t.to(dtype=dtype or t.dtype, device=device or t.device)
    if out is not t and copy is False:
        return None
    return out.clone() if copy and out is t else out


class _Exits(TorchFunctionMode):
    """Hands a tensor that may lose a gradient, leaving torch, to a policy (detached, or
    refused): ``to_numpy``'s on its way to NumPy, ``to_numbers``' on its way to Python numbers
    (detached first, so torch's own warning about it is not issued); ``library``: whose torch
    code it runs, for the refusal of a batch torch.vmap makes."""

    def __init__(self, to_numpy: GradPolicy, to_numbers: GradPolicy, library: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call, unused-ignore]  # torch 2.4: untyped
        self.to_numpy, self.to_numbers, self.library = to_numpy, to_numbers, library

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if func in _TO_NUMPY and args and isinstance(args[0], torch.Tensor):
            return self._leave(self.to_numpy, func, args, kwargs or {})
        if (
            func in _TO_NUMBERS
            and args
            and isinstance(args[0], torch.Tensor)
            and (func is not torch.Tensor.__format__ or args[0].dim() == 0)
        ):
            return self._leave(self.to_numbers, func, args, kwargs or {})
        if func is torch.Tensor.__bool__ and transforming() is not None and _batched_by_vmap(args[0]):
            raise self._batch()
        if func is torch.asarray and len(args) == 1 and requires_grad(args[0]) and asarray_detaches():
            kept = _asarray_keeping_grad(args[0], kwargs or {})
            if kept is not None:
                return kept
        return func(*args, **(kwargs or {}))

    def _leave(self, policy: GradPolicy, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``func(*args, **kwargs)``, a way out of torch for the tensor ``args[0]``, ``policy``
        applied to it. Inside torch.func's transforms a tensor has no storage there, a plain
        one too ("Cannot access data pointer of Tensor that doesn't have storage"): it leaves as
        its values, below the gradient transforms' wrapping (``torch.func.grad``, ``jacrev``),
        the policy applied to each level's gradient it loses; one torch.vmap batches is refused."""
        t = args[0]
        if may_lose_gradient(t):
            t = policy.detach(t)
        if transforming() is None:
            return func(t, *args[1:], **kwargs)
        with untransformed():
            values = ungraded(args[0])  # not t's: detaching a wrapped tensor drops the outer levels' gradient
            if functorch_wrapped(values):
                raise self._batch()
            if may_lose_gradient(values):
                values = policy.detach(values)
            return func(values, *args[1:], **kwargs)

    def _batch(self) -> LeafError:
        """The refusal of a tensor torch.vmap batches, leaving torch (torch's own: "Cannot access
        data pointer", "data-dependent control flow")."""
        return LeafError(
            ConversionError,
            f"is batched by torch.vmap, and {self.library}'s own torch path for this call takes its values out of "
            "torch (to NumPy, a Python number or a truth value), which sees one value, not a batch",
            "a tensor batched by torch.vmap (a functorch-wrapped tensor)",
            "loop over the batch instead of torch.vmap (autoconvert.batched maps a function over it)",
        )


class Leaving:
    """The grad policy of a native call of ``fn`` (``function``: its name in messages;
    ``library``: its library's name), ``grad`` given to torchify or not (None: a ``config``
    block's, else ``"warn"``)."""

    def __init__(self, fn: Any, function: str, library: str, grad: str | None) -> None:
        self.fn, self.function, self.library, self.grad = fn, function, library, grad
        #: The policies by grad mode, for tensors handed to NumPy and for tensors made numbers.
        self.policies: dict[str, tuple[GradPolicy, GradPolicy]] = {}
        self.whys = (
            f"{library}'s own torch path for this call hands it to NumPy, which cannot pass gradients back",
            f"{library}'s own torch path for this call turns it into a Python number, which carries no gradient",
        )
        name = function.removesuffix("()")
        self.fixes = GradFixes(
            f"compute {name} with torch operations: {library}'s own torch path for it leaves torch", self._site
        )

    def _site(self, assignment: str) -> str:
        maker = f"the ac.torchify(..., {assignment}) call that made it"
        if self.grad is None:
            return f"{maker}, {in_a_block(assignment)}"
        return f"{maker}, where grad={self.grad!r} was given, so a config block cannot change it"

    def call(self, call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``call(args, kwargs)``, watched where it holds a tensor that requires grad (while
        grad mode is on: under torch.no_grad() torch lets it go to NumPy, and none flows) or a
        dual tensor: its library's torch code may let it leave torch at any operation, and the
        watch costs each of them a Python dispatch, which calls holding neither do not pay."""
        needing = _needing(args, kwargs, _requires_grad) if torch.is_grad_enabled() else []
        if FORWARD_AD._current_level >= 0:
            needing += _needing(args, kwargs, has_tangent)
        if needing or transforming() is not None:  # torch.func's tensors leave torch only through the watch
            return self._watched(call, args, kwargs, needing)
        return call(args, kwargs)

    def _watched(
        self,
        call: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        needing: list[tuple[int | str, str, torch.Tensor]],
    ) -> Any:
        """``call(args, kwargs)`` with grad= applied where a tensor leaves torch; ``needing``:
        the tensors among its arguments that require grad."""
        policies = self._policies()
        try:
            with _Exits(*policies, self.library):
                result = call(args, kwargs)
        except LeafError as e:
            named = self._named(
                needing if e.kind is GradientError else _needing(args, kwargs, _batched_by_vmap), args, kwargs
            )
            if not named:  # a tensor of the library's own
                raise e.public(self.function, "", "a tensor") from None
            where, tensor = named[0]
            if e.kind is GradientError:
                e.found = describe_tensor(tensor)
            raise e.public(self.function, "argument", where) from None
        said = next((policy for policy in policies if policy.unsaid is not None), None)
        if said is not None:  # one warning for the function, the first kind it lost a gradient to
            said.say([where for where, _ in self._named(needing, args, kwargs)])
            for policy in policies:
                policy.unsaid, policy.warned = None, True
        return result

    def _policies(self) -> tuple[GradPolicy, GradPolicy]:
        mode = self.grad
        if mode is None:
            block = active()
            mode = "warn" if block is None else block.options.get("grad", "warn")
        policies = self.policies.get(mode)
        if policies is None:
            made = tuple(GradPolicy(mode, self.function, lambda: self.fixes, why) for why in self.whys)
            policies = self.policies.setdefault(mode, (made[0], made[1]))
        return policies

    def _named(
        self, needing: list[tuple[int | str, str, torch.Tensor]], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> list[tuple[str, torch.Tensor]]:
        """The paths of the tensors ``needing`` grad, under their parameters' names where the
        signature says (not inside ``*args`` or ``**kwargs``), else their positions."""
        given: dict[int | str, Any] = dict(enumerate(args))
        given.update(kwargs)
        bound: dict[str, Any] = {}
        with contextlib.suppress(TypeError, ValueError):  # no signature to read them from
            bound = inspect.signature(self.fn).bind_partial(*args, **kwargs).arguments
        names = {key: next((name for name, value in bound.items() if value is given[key]), str(key)) for key in given}
        return [(names[key] + below, tensor) for key, below, tensor in needing]


def _requires_grad(t: torch.Tensor) -> bool:
    return t.requires_grad


def _batched_by_vmap(t: torch.Tensor) -> bool:
    """Whether torch.vmap batches ``t`` (under any gradient transform's wrapping)."""
    return functorch_wrapped(ungraded(t))


def _needing(
    args: tuple[Any, ...], kwargs: dict[str, Any], needs: Callable[[torch.Tensor], bool]
) -> list[tuple[int | str, str, torch.Tensor]]:
    """The tensors among a call's arguments that ``needs`` a gradient kept (that require grad,
    that carry a tangent), as (the argument's position or keyword, the path below it, the
    tensor): the arguments themselves, the items of lists, tuples and dicts, and the tensors
    an object holds as attributes (a fitted estimator's)."""
    found: list[tuple[int | str, str, torch.Tensor]] = []
    given: list[tuple[int | str, Any]] = [*enumerate(args), *kwargs.items()]
    for key, value in given:
        if isinstance(value, torch.Tensor):
            if needs(value):
                found.append((key, "", value))
            continue
        kind = type(value)
        if kind is list or kind is tuple:
            items: Any = ((f"[{i}]", item) for i, item in enumerate(value))
        elif kind is dict:
            items = ((f"[{k!r}]", item) for k, item in value.items())
        else:
            items = ((f".{name}", item) for name, item in getattr(value, "__dict__", {}).items())
        found += [(key, below, t) for below, t in items if isinstance(t, torch.Tensor) and needs(t)]
    return found
