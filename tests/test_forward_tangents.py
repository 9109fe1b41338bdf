"""Forward-mode tangents on the way to NumPy: a dual tensor (``forward_ad.make_dual`` inside
``forward_ad.dual_level()``) requires no grad, and ``numpy()`` hands its primal over without a
word; every product applies the call's ``grad=`` to it as to a tensor that requires grad,
and the routes that give tangents (the catalogue's rules, numpy_op's ``jvp=``) still do."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import scipy.ndimage
import torch
from torch.autograd import forward_ad

import autoconvert as ac
from tests import promise_bodies

# make_dual's first use scripts torch's decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning"),
]

_DECORATORS = "make halved a differentiable torch operation with @ac.numpy_op(jvp=...) in place of the decorators"
_TORCHIFY = "make halved a differentiable torch operation with ac.numpy_op(halved, jvp=...)"
_BATCHED = "map a differentiable torch operation over the batch in place of ac.batched: torch.vmap(ac.numpy_op(halved, jvp=...))"

#: Each route: what makes it from grad= options, what keeps the tangent, and what made it.
ROUTES: dict[str, tuple[Callable[[dict[str, Any]], Callable[..., Any]], str, str]] = {
    "the decorator pair": (
        lambda o: ac.returns_tensor(ac.accepts_numpy(promise_bodies.halved, **o)),
        _DECORATORS,
        "@ac.accepts_numpy(grad='detach') on halved",
    ),
    "accepts_numpy alone": (
        lambda o: ac.accepts_numpy(promise_bodies.halved, **o),
        _DECORATORS,
        "@ac.accepts_numpy(grad='detach') on halved",
    ),
    "torchify of a function": (
        lambda o: ac.torchify(promise_bodies.halved, **o),
        _TORCHIFY,
        "the ac.torchify(..., grad='detach') call that made it",
    ),
    "torchify of a module": (
        lambda o: ac.torchify(promise_bodies, **o).halved,
        _TORCHIFY,
        "the ac.torchify(..., grad='detach') call that made it",
    ),
    "batched in the caller": (
        lambda o: ac.batched(promise_bodies.halved, **o),
        _BATCHED,
        "ac.batched(halved, grad='detach')",
    ),
    "batched on threads": (
        lambda o: ac.batched(promise_bodies.halved, workers=2, in_caller=False, **o),
        _BATCHED,
        "ac.batched(halved, grad='detach')",
    ),
}

_CARRIES = (
    "halved(): argument a carries a forward-mode tangent (a dual tensor of torch.autograd.forward_ad), and NumPy "
    "code cannot pass gradients back"
)
_KEEPS = ", its Jacobian-vector product written in NumPy"


def _site(made_by: str, given: str | None) -> str:
    if given is None:
        return f"{made_by}, or a with ac.config(grad='detach'): block around the call"
    return f"{made_by}, where grad={given!r} was given, so a config block cannot change it"


def warned(keep: str, made_by: str, given: str | None) -> str:
    """The whole GradientWarning of a tangent dropped on the way to ``halved``."""
    return (
        f"{_CARRIES}: it was detached, so no gradient flows through this call. To keep the gradient, {keep}{_KEEPS}. "
        f"To silence this, pass grad='detach' (in {_site(made_by, given)}; grad='error' forbids it), or call outside "
        "forward_ad.dual_level()"
    )


def refused(keep: str, made_by: str, given: str | None) -> str:
    """The whole GradientError of a tangent ``halved`` is refused under grad='error'."""
    return (
        f"{_CARRIES}. Found torch.Tensor(shape=(2, 3), dtype=torch.float32, layout=torch.strided, device=cpu). Fix: "
        "pass a.detach(), call outside forward_ad.dual_level(), or allow it detached with grad='detach' (in "
        f"{_site(made_by, given)}; grad='warn' says so once); to keep the gradient, {keep}{_KEEPS}."
    )


@contextlib.contextmanager
def _dual() -> Iterator[torch.Tensor]:
    """A dual tensor of shape (2, 3), its tangent ones, inside its level."""
    with forward_ad.dual_level():
        yield forward_ad.make_dual(torch.arange(6.0).reshape(2, 3), torch.ones(2, 3))


def _tangent(result: Any) -> torch.Tensor | None:
    tangent: torch.Tensor | None = forward_ad.unpack_dual(torch.as_tensor(result)).tangent  # type: ignore[no-untyped-call, unused-ignore]
    return tangent


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize(("given", "block"), [(None, None), ("warn", None), (None, "warn"), ("warn", "error")])
def test_a_dropped_tangent_warns_once_naming_the_argument(route: str, given: str | None, block: str | None) -> None:
    """By default (or with grad='warn', given or a block's) a dual tensor's primal reaches
    NumPy with one GradientWarning per decorated function naming the argument; the result
    carries no tangent. A grad= given wins over a block's."""
    make, keep, made_by = ROUTES[route]
    fn = make({} if given is None else {"grad": given})
    with _dual() as x, ac.config(**({} if block is None else {"grad": block})):
        with pytest.warns(ac.GradientWarning) as said:
            result = fn(x)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ac.GradientWarning)
            fn(x)  # said once
        assert [str(w.message) for w in said] == [warned(keep, made_by, given)]
        assert _tangent(result) is None
        assert torch.equal(torch.as_tensor(result), torch.arange(6.0).reshape(2, 3) / 2)


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize(("given", "block"), [("error", None), (None, "error"), ("error", "detach")])
def test_a_dropped_tangent_is_refused_under_grad_error(route: str, given: str | None, block: str | None) -> None:
    """grad='error' (given, or a block's) raises GradientError naming the argument and the fixes."""
    make, keep, made_by = ROUTES[route]
    fn = make({} if given is None else {"grad": given})
    with _dual() as x, ac.config(**({} if block is None else {"grad": block})), pytest.raises(ac.GradientError) as info:
        fn(x)
    assert str(info.value) == refused(keep, made_by, given)


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize(("given", "block"), [("detach", None), (None, "detach")])
def test_grad_detach_drops_a_tangent_silently(route: str, given: str | None, block: str | None) -> None:
    """grad='detach' (given, or a block's) hands the primal over without a word."""
    fn = ROUTES[route][0]({} if given is None else {"grad": given})
    with _dual() as x, ac.config(**({} if block is None else {"grad": block})), warnings.catch_warnings():
        warnings.simplefilter("error", ac.GradientWarning)
        assert _tangent(fn(x)) is None


def test_a_tangent_in_a_container_or_a_keyword_is_named_by_its_path() -> None:
    """The warning names where the dual tensor was: an item of a dict, a keyword argument."""

    @ac.returns_tensor
    @ac.accepts_numpy
    def total(batch: dict[str, Any], *, scale: Any) -> Any:
        return batch["x"].sum() * scale

    with _dual() as x, pytest.warns(ac.GradientWarning) as said:
        total({"x": torch.ones(2), "y": [x]}, scale=torch.ones(1))
    assert str(said[0].message).startswith(
        f"{total.__qualname__}(): argument batch['y'][0] carries a forward-mode tangent (a dual tensor of "
        "torch.autograd.forward_ad), and NumPy code cannot pass gradients back: it was detached"
    )
    with _dual() as x, pytest.warns(ac.GradientWarning) as said:
        ac.accepts_numpy(promise_bodies.halved)(a=x)
    assert str(said[0].message).startswith("halved(): argument a carries a forward-mode tangent")


def test_a_dual_tensor_that_requires_grad_is_said_as_one_that_requires_grad_unless_grad_mode_is_off() -> None:
    """Grad mode on, the gradient it requires is the one said; under torch.no_grad(), which
    keeps tangents flowing, the tangent is."""
    with _dual() as x:
        both = x.requires_grad_()
        with pytest.warns(ac.GradientWarning) as said:
            ac.accepts_numpy(promise_bodies.halved)(both)
        with torch.no_grad(), pytest.warns(ac.GradientWarning) as unsaid:
            ac.accepts_numpy(promise_bodies.halved)(both)
    assert str(said[0].message).startswith("halved(): argument a requires grad, and NumPy code cannot pass")
    assert str(unsaid[0].message).startswith(_CARRIES)


def test_tensors_without_a_tangent_inside_a_dual_level_cross_as_before() -> None:
    """A plain tensor inside a level is shared with NumPy without a word, read-only."""

    @ac.accepts_numpy
    def shares(a: np.ndarray, b: np.ndarray) -> bool:
        return not a.flags.writeable and bool(np.shares_memory(a, b))

    plain = torch.arange(4.0)
    with forward_ad.dual_level(), warnings.catch_warnings():
        warnings.simplefilter("error", ac.GradientWarning)
        assert shares(plain, plain)


def test_routes_that_give_tangents_still_give_them_without_a_word() -> None:
    """The catalogue's rules with a jvp and numpy_op's jvp= give the result its tangent."""
    op = ac.numpy_op(np.sin, jvp=lambda tangent, x, output: np.cos(x) * tangent)
    with _dual() as x, warnings.catch_warnings():
        warnings.simplefilter("error", ac.GradientWarning)
        filtered = ac.torchify(scipy.ndimage).uniform_filter1d(x, 3)
        assert torch.equal(_tangent(filtered), torch.ones(2, 3))  # type: ignore[arg-type]
        assert torch.allclose(_tangent(op(x)), torch.cos(torch.arange(6.0).reshape(2, 3)))  # type: ignore[arg-type]
