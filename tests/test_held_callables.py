"""Callables held inside SciPy's objects (a ``NonlinearConstraint``'s ``fun``, a
``LinearOperator``'s ``matvec``) are callbacks as callable arguments are: handed tensors, their
results handed back as arrays under the call's grad policy; and an autoconvert error raised
inside a callback reaches the caller as itself, whatever the library calling it made of it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse.linalg
import torch

import autoconvert as ac
from autoconvert._adapters._table import adapter_for
from tests.test_call_sites import F64, _closing_words

#: Calls handing SciPy an object holding a torch callable that closes over ``a``: (module,
#: routine, the call given the routine and ``a``, the shape of the callable's result).
HELD_CALLS: dict[str, tuple[Any, str, Callable[[Any, torch.Tensor], Any], tuple[int, ...]]] = {
    "NonlinearConstraint in minimize": (
        scipy.optimize,
        "minimize",
        lambda f, a: f(
            lambda v: ((v - 0.5) ** 2).sum(),
            torch.zeros(1, dtype=F64),
            method="trust-constr",
            constraints=scipy.optimize.NonlinearConstraint(lambda v: (torch.sin(v) * a).sum(), -np.inf, 0.6),
            options={"maxiter": 5},
        ),
        (),
    ),
    "NonlinearConstraint in differential_evolution": (
        scipy.optimize,
        "differential_evolution",
        lambda f, a: f(
            lambda v: ((v - 0.5) ** 2).sum(),
            [(0.0, 1.0)],
            maxiter=2,
            popsize=3,
            seed=0,
            constraints=scipy.optimize.NonlinearConstraint(lambda v: (torch.sin(v) * a).sum(), -np.inf, 0.6),
        ),
        (),
    ),
    "LinearOperator in cg": (
        scipy.sparse.linalg,
        "cg",
        lambda f, a: f(
            scipy.sparse.linalg.LinearOperator((3, 3), matvec=lambda v: torch.mul(a, v), dtype=np.float64),
            torch.ones(3, dtype=F64),
        ),
        (3,),
    ),
}

#: The same calls with NumPy callables, for the values (``a`` = 2).
NUMPY_TWINS: dict[str, Callable[[], Any]] = {
    "NonlinearConstraint in minimize": lambda: (
        scipy.optimize.minimize(
            lambda v: ((v - 0.5) ** 2).sum(),
            np.zeros(1),
            method="trust-constr",
            constraints=scipy.optimize.NonlinearConstraint(lambda v: (np.sin(v) * 2.0).sum(), -np.inf, 0.6),
            options={"maxiter": 5},
        ).x
    ),
    "NonlinearConstraint in differential_evolution": lambda: (
        scipy.optimize.differential_evolution(
            lambda v: ((v - 0.5) ** 2).sum(),
            [(0.0, 1.0)],
            maxiter=2,
            popsize=3,
            seed=0,
            constraints=scipy.optimize.NonlinearConstraint(lambda v: (np.sin(v) * 2.0).sum(), -np.inf, 0.6),
        ).x
    ),
    "LinearOperator in cg": lambda: scipy.sparse.linalg.cg(
        scipy.sparse.linalg.LinearOperator((3, 3), matvec=lambda v: 2.0 * v, dtype=np.float64), np.ones(3)
    )[0],
}

CALLBACK = "<lambda>.<locals>.<lambda>()"


def _routine(route: str, held: str, grad: str | None) -> Callable[..., Any]:
    """The routine of ``HELD_CALLS[held]`` as ``route`` reaches it, with ``grad=`` where given."""
    module, name, _, _ = HELD_CALLS[held]
    options = {} if grad is None else {"grad": grad}
    if route == "torchify":
        return getattr(ac.torchify(module, **options), name)  # type: ignore[no-any-return]
    return ac.returns_tensor(ac.accepts_numpy(getattr(module, name), callbacks=True, **options))


class _Paired:
    """A module's functions as the decorator pair under ``callbacks=True`` makes them."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def __getattr__(self, name: str) -> Any:
        return ac.returns_tensor(ac.accepts_numpy(getattr(self.module, name), callbacks=True))


def _call(route: str, held: str, grad: str | None, a: torch.Tensor) -> Any:
    return HELD_CALLS[held][2](_routine(route, held, grad), a)


def _kept_by(route: str, held: str, keep: str) -> str:
    """What keeps the gradient, as the call's messages say (see test_call_sites._kept_by)."""
    module, name, _, _ = HELD_CALLS[held]
    if route == "torchify" and adapter_for(module).declared_torch_path(getattr(module, name)) is None:
        return (
            f"set SCIPY_ARRAY_API=1 before SciPy is imported: SciPy runs {module.__name__}.{name} on torch tensors "
            "itself, gradients kept, and torchify's native='auto' (the default) takes that path"
        )
    return f"make {name} a differentiable torch operation with {keep}"


def _x(result: Any) -> np.ndarray:
    """The solution in ``result`` (an OptimizeResult, ``cg``'s ``(x, info)``), as an array."""
    x = result[0] if isinstance(result, tuple) else result.x
    assert type(x) is torch.Tensor
    return x.numpy()


ROUTES = ["torchify", "pair"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("held", sorted(HELD_CALLS))
def test_a_torch_callable_held_in_a_scipy_object_takes_tensors(held: str, route: str) -> None:
    """A torch callable SciPy's object holds is handed tensors (``torch.sin`` of an array is
    torch's TypeError), its result SciPy's array: the solution is the NumPy twin's."""
    a = torch.tensor(2.0, dtype=F64)
    np.testing.assert_allclose(_x(_call(route, held, None, a)), NUMPY_TWINS[held](), rtol=1e-12)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("held", sorted(HELD_CALLS))
def test_a_held_callable_closing_over_a_tensor_needing_grad_meets_the_grad_policy(held: str, route: str) -> None:
    """As a callable argument: said once per call by default, silent under ``grad="detach"``,
    refused under ``grad="error"``, naming the routine and the callable."""
    name = HELD_CALLS[held][1]
    a = torch.tensor(2.0, dtype=F64, requires_grad=True)
    keep, site, given = _closing_words(route, name, forward=False)
    with pytest.warns(ac.GradientWarning) as caught:
        _call(route, held, None, a)
    assert [str(w.message) for w in caught] == [
        f"{name}(): the result of its callback {CALLBACK} requires grad, and NumPy code cannot pass gradients "
        "back: it was detached, so no gradient flows from the callback through this call. To keep the gradient, "
        f"{_kept_by(route, held, keep)}. To silence this, .detach() the callback's result, pass grad='detach' "
        f"(in {site}, or a with ac.config(grad='detach'): block around the call; grad='error' forbids it), or call "
        "under torch.no_grad()"
    ]
    _call(route, held, "detach", a)  # silent: pytest runs with warnings as errors
    with pytest.raises(ac.GradientError) as info:
        _call(route, held, "error", a)
    assert str(info.value) == (
        f"{name}(): callback {CALLBACK}'s result requires grad, and NumPy code cannot pass gradients back. Found "
        f"torch.Tensor(shape={HELD_CALLS[held][3]}, dtype=torch.float64, layout=torch.strided, device=cpu). Fix: "
        ".detach() the callback's result, call under torch.no_grad(), or allow it detached with grad='detach' (in "
        f"{given}; grad='warn' says so once); to keep the gradient, {_kept_by(route, held, keep)}."
    )


@contextlib.contextmanager
def _dual() -> Iterator[torch.Tensor]:
    from torch.autograd import forward_ad

    with forward_ad.dual_level():
        yield forward_ad.make_dual(torch.tensor(2.0, dtype=F64), torch.tensor(1.0, dtype=F64))


# make_dual's first use scripts torch's decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("held", sorted(HELD_CALLS))
def test_a_held_callable_closing_over_a_dual_tensor_says_its_tangent_dropped(held: str, route: str) -> None:
    """A tangent a held callable's result carries from a dual tensor it closes over is said,
    refused or dropped silently as the policy says, never dropped without a word."""
    name = HELD_CALLS[held][1]
    keep, site, given = _closing_words(route, name, forward=True)
    carries = "carries a forward-mode tangent (a dual tensor of torch.autograd.forward_ad), and NumPy code cannot pass gradients back"
    with _dual() as a:
        with pytest.warns(ac.GradientWarning) as caught:
            _call(route, held, None, a)
        assert [str(w.message) for w in caught] == [
            f"{name}(): the result of its callback {CALLBACK} {carries}: it was detached, so no gradient flows from "
            f"the callback through this call. To keep the gradient, {_kept_by(route, held, keep)}. To silence this, "
            f".detach() the callback's result, pass grad='detach' (in {site}, or a with ac.config(grad='detach'): "
            "block around the call; grad='error' forbids it), or call outside forward_ad.dual_level()"
        ]
        _call(route, held, "detach", a)  # silent
        with pytest.raises(ac.GradientError) as info:
            _call(route, held, "error", a)
    assert str(info.value) == (
        f"{name}(): callback {CALLBACK}'s result {carries}. Found torch.Tensor(shape={HELD_CALLS[held][3]}, "
        "dtype=torch.float64, layout=torch.strided, device=cpu). Fix: .detach() the callback's result, call outside "
        f"forward_ad.dual_level(), or allow it detached with grad='detach' (in {given}; grad='warn' says so once); "
        f"to keep the gradient, {_kept_by(route, held, keep)}."
    )


def test_the_callers_object_is_never_changed_and_copied_only_where_it_holds_a_callback() -> None:
    """The function is handed a copy holding the callbacks, the caller's object keeping its
    callables; an object whose callables the rule leaves (NumPy code, a string) is handed as
    it is; ``callbacks=True`` takes every callable but SciPy's and NumPy's own."""
    fun = lambda v: torch.sin(v).sum()  # noqa: E731 - the callable's identity is what is compared
    held = scipy.optimize.NonlinearConstraint(fun, -np.inf, 0.5, jac="2-point")
    kept = scipy.optimize.NonlinearConstraint(lambda v: np.sin(v).sum(), -np.inf, 0.5)
    seen = ac.accepts_numpy(lambda *objects: objects)(held, kept)
    assert seen[1] is kept and seen[0] is not held and type(seen[0]) is type(held)
    assert held.fun is fun and seen[0].fun.__wrapped__ is fun and seen[0].jac == "2-point"
    assert vars(seen[0]).keys() == vars(held).keys()
    assert float(seen[0].fun(np.array([0.5]))) == np.sin(0.5)
    every = ac.accepts_numpy(lambda c: c, callbacks=True)(kept)
    assert every is not kept and every.fun.__wrapped__ is kept.fun
    operator = scipy.sparse.linalg.aslinearoperator(np.eye(2))
    assert ac.accepts_numpy(lambda o: o, callbacks=True)(operator) is operator


class _Halving(scipy.sparse.linalg.LinearOperator):
    """A user's operator whose ``_matvec`` is torch code, calling a torch function it holds
    (its own code's to call, handed tensors and giving tensors back)."""

    def __init__(self) -> None:
        super().__init__(np.float64, (3, 3))
        self.halve = lambda v: torch.mul(v, 0.5)

    def _matvec(self, v: torch.Tensor) -> torch.Tensor:
        halved = self.halve(v)
        assert type(halved) is torch.Tensor
        return halved

    _rmatvec = _matvec  # symmetric: its adjoint, _Halving().H, holds it twice (as A and in args)


@pytest.mark.parametrize("route", ROUTES)
def test_operators_made_of_torch_operators_and_a_users_subclass_take_tensors(route: str) -> None:
    """The operators a composed operator is made of (``A + B``, ``2 * A``, ``A.H``) and the
    methods a user's subclass implements in torch are handed tensors as well."""
    cg = _routine(route, "LinearOperator in cg", None)
    double = scipy.sparse.linalg.LinearOperator(
        (3, 3), matvec=lambda v: torch.mul(v, 2.0), rmatvec=lambda v: torch.mul(v, 2.0), dtype=np.float64
    )
    b = torch.arange(1.0, 4.0, dtype=F64)
    for operator, scale in [
        (double + _Halving(), 2.5),
        (3 * double, 6.0),
        (double.H, 2.0),
        (_Halving(), 0.5),
        (_Halving().H, 0.5),
    ]:
        x, info = cg(operator, b)
        assert info == 0
        torch.testing.assert_close(x, b / scale)


@pytest.mark.parametrize("grad", [None, "error", "detach"])
@pytest.mark.parametrize("route", ROUTES)
def test_an_inner_autoconvert_refusal_a_library_rewords_reaches_the_caller_as_itself(
    route: str, grad: str | None
) -> None:
    """differential_evolution rewords any TypeError its objective raises as a "map-like
    callable" RuntimeError: a GradientError an autoconvert function inside the objective
    raised leaves the call as itself, with its fix, whatever the outer call's policy."""
    a = torch.tensor(2.0, dtype=F64, requires_grad=True)
    options = {} if grad is None else {"grad": grad}
    if route == "torchify":
        evolve = ac.torchify(scipy.optimize, **options).differential_evolution
    else:
        evolve = ac.returns_tensor(ac.accepts_numpy(scipy.optimize.differential_evolution, callbacks=True, **options))
    inner = ac.accepts_numpy(lambda v: np.sin(v).sum(), grad="error")
    with pytest.raises(ac.GradientError) as info:
        evolve(lambda v: inner(v * a), [(0.0, 1.0)], maxiter=2, popsize=3, seed=0)
    here = f"{test_an_inner_autoconvert_refusal_a_library_rewords_reaches_the_caller_as_itself.__qualname__}.<locals>."
    assert str(info.value) == (
        f"{here}<lambda>(): argument v requires grad, and NumPy code cannot pass gradients back. Found "
        "torch.Tensor(shape=(1,), dtype=torch.float64, layout=torch.strided, device=cpu). Fix: pass v.detach(), call "
        "under torch.no_grad(), or allow it detached with grad='detach' (in "
        f"@ac.accepts_numpy(grad='detach') on {here}<lambda>, where grad='error' was given, so a config block "
        f"cannot change it; grad='warn' says so once); to keep the gradient, make {here}<lambda> a differentiable "
        "torch operation with @ac.numpy_op(backward=...) in place of the decorators, its vector-Jacobian product "
        "written in NumPy."
    )
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize("route", ROUTES)
def test_every_callable_a_constraint_or_an_operator_holds_takes_tensors(route: str) -> None:
    """A constraint's ``jac`` and ``hess`` and an operator's ``rmatvec`` (``lsqr`` calls it) are
    handed tensors as ``fun`` and ``matvec`` are: the solutions are the NumPy twins'. (The
    callables note what they are handed through a wrapper, read as torch code under
    ``callbacks=True`` alone.)"""
    seen: set[type] = set()

    def noting(f: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *args: (seen.update(map(type, args)), f(*args))[1]

    def constraint(sin: Any, cos: Any, diag: Any) -> Any:
        return scipy.optimize.NonlinearConstraint(
            noting(lambda v: sin(v).sum()),
            -np.inf,
            0.3,
            jac=noting(lambda v: cos(v)[None, :]),
            hess=noting(lambda v, w: diag(-w[0] * sin(v))),
        )

    options = {"method": "trust-constr", "options": {"maxiter": 20}}
    objective = lambda v: ((v - 0.5) ** 2).sum()  # noqa: E731
    twin = scipy.optimize.minimize(objective, np.zeros(2), constraints=constraint(np.sin, np.cos, np.diag), **options)
    seen.clear()
    optimize, linalg = (
        (ac.torchify(scipy.optimize, callbacks=True), ac.torchify(scipy.sparse.linalg, callbacks=True))
        if route == "torchify"
        else (_Paired(scipy.optimize), _Paired(scipy.sparse.linalg))
    )
    result = optimize.minimize(
        objective, torch.zeros(2, dtype=F64), constraints=constraint(torch.sin, torch.cos, torch.diag), **options
    )
    np.testing.assert_allclose(result.x.numpy(), twin.x, rtol=1e-10)
    assert seen == {torch.Tensor}
    matrix = np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 1.0]])
    weights = torch.from_numpy(matrix)
    operator = scipy.sparse.linalg.LinearOperator(
        (3, 2),
        matvec=noting(lambda v: torch.mv(weights, v)),
        rmatvec=noting(lambda v: torch.mv(weights.T, v)),
        dtype=np.float64,
    )
    seen.clear()
    b = np.array([1.0, 2.0, 3.0])
    x = linalg.lsqr(operator, torch.from_numpy(b))[0]
    np.testing.assert_allclose(x.numpy(), scipy.sparse.linalg.lsqr(matrix, b)[0], rtol=1e-10)
    assert seen == {torch.Tensor}


def _operator(a: torch.Tensor) -> scipy.sparse.linalg.LinearOperator:
    """A linear operator whose torch ``matvec`` and ``rmatvec`` close over ``a``."""
    return scipy.sparse.linalg.LinearOperator(
        (3, 3), matvec=lambda v: torch.mul(a, v), rmatvec=lambda v: torch.mul(a, v), dtype=np.float64
    )


#: Calls evaluating several torch callables an operator holds: (routine, the call given it and ``a``).
MANY_CALLBACKS: dict[str, tuple[str, Callable[[Any, torch.Tensor], Any]]] = {
    "matvec and rmatvec in lsqr": ("lsqr", lambda f, a: f(_operator(a), torch.ones(3, dtype=F64))),
    "A * A in cg": ("cg", lambda f, a: f(_operator(a) * _operator(a), torch.ones(3, dtype=F64))),
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", sorted(MANY_CALLBACKS))
def test_the_callbacks_of_one_call_say_a_lost_gradient_once(case: str, route: str) -> None:
    """The callables one call hands over share its word on a lost gradient: one
    GradientWarning per call, however many of them lose one."""
    name, call = MANY_CALLBACKS[case]
    a = torch.tensor(2.0, dtype=F64, requires_grad=True)
    routine = (
        getattr(ac.torchify(scipy.sparse.linalg), name)
        if route == "torchify"
        else ac.returns_tensor(ac.accepts_numpy(getattr(scipy.sparse.linalg, name)))
    )
    for _ in range(2):  # and once again in the next call
        with pytest.warns(ac.GradientWarning) as caught:
            call(routine, a)
        said = f"{name}(): the result of its callback _operator.<locals>.<lambda>() requires grad, "
        assert [str(w.message)[: len(said)] for w in caught] == [said]
