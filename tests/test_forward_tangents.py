"""Forward-mode tangents on the way to NumPy: a dual tensor (``forward_ad.make_dual`` inside
``forward_ad.dual_level()``) requires no grad, and ``numpy()`` hands its primal over without a
word; every product applies the call's ``grad=`` to it as to a tensor that requires grad,
and the routes that give tangents (the catalogue's rules, numpy_op's ``jvp=``) still do."""

from __future__ import annotations

import contextlib
import functools
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


_SPLINE_X = torch.linspace(0, 1, 8, dtype=torch.float64)
_BUILDERS = {
    "CubicSpline": lambda interp, x, y: interp.CubicSpline(x, y),
    "make_interp_spline": lambda interp, x, y: interp.make_interp_spline(x, y),
    "interp1d": lambda interp, x, y: interp.interp1d(x, y),
    "PchipInterpolator": lambda interp, x, y: interp.PchipInterpolator(x, y),
}


def _built_carries(builder: str, where: str) -> str:
    """The whole GradientError or GradientWarning of a builder's dual ``where`` (``y``, the
    samples its calls take reverse mode in, but PchipInterpolator's, which take none; ``x``, the
    knots they take none in)."""
    name = f"scipy.interpolate.{builder}"
    carries = "argument {} carries a forward-mode tangent (a dual tensor of torch.autograd.forward_ad), and the "
    if where == "y" and builder != "PchipInterpolator":
        return (
            f"{name}: {carries.format('y')}catalogue's rule for its objects' calls gives reverse mode alone: the "
            "object is built from its primal. Found a rule without a jvp. Fix: build it from y.detach() or outside "
            "forward_ad.dual_level(), or take reverse mode (y.requires_grad_(), torch.func.jacrev, grad, vjp); "
            "grad='detach' silences this."
        )
    takes = "the points it is read at" if builder == "PchipInterpolator" else "y"
    return (
        f"{name}: {carries.format(where)}catalogue's rule for {name} gives no gradient in {where}: none flows into it. "
        f"Found gradients in {takes} alone. Fix: pass {where}.detach(), call outside forward_ad.dual_level(), or give "
        "numpy_op a jvp= of your own; grad='detach' silences this."
    )


@pytest.mark.parametrize("builder", sorted(_BUILDERS))
@pytest.mark.parametrize("where", ["y", "x"])
def test_an_object_built_from_a_dual_tensor_says_its_tangent_dropped(builder: str, where: str) -> None:
    """torchify(scipy.interpolate)'s objects take reverse mode alone in their samples, and no
    gradient in their knots: a dual tensor built into one is said as grad= asks (a GradientError,
    a GradientWarning once per builder, or nothing), and the object reads its primal."""
    build = _BUILDERS[builder]
    point = torch.tensor([0.3], dtype=torch.float64)
    expected = torch.from_numpy(np.asarray(build(scipy.interpolate, _SPLINE_X.numpy(), np.sin(_SPLINE_X.numpy()))(0.3)))
    with forward_ad.dual_level():
        tangent = torch.ones(8, dtype=torch.float64)
        x, y = _SPLINE_X, torch.sin(_SPLINE_X)
        x, y = (forward_ad.make_dual(x, tangent), y) if where == "x" else (x, forward_ad.make_dual(y, tangent))
        with pytest.raises(ac.GradientError) as info:
            build(ac.torchify(scipy.interpolate, grad="error"), x, y)
        assert str(info.value) == _built_carries(builder, where)
        interp = ac.torchify(scipy.interpolate)

        def twice() -> Any:  # said once
            build(interp, x, y)
            return build(interp, x, y)

        with pytest.warns(ac.GradientWarning) as said:
            made = twice()
        assert [str(w.message) for w in said] == [_built_carries(builder, where)]
        with warnings.catch_warnings():
            warnings.simplefilter("error", ac.GradientWarning)
            quiet = build(ac.torchify(scipy.interpolate, grad="detach"), x, y)(point)
        assert _tangent(made(point)) is None and _tangent(quiet) is None
        assert torch.allclose(made(point).reshape(expected.shape), expected)


@pytest.mark.parametrize("transform", ["jvp", "jacfwd"])
def test_an_object_built_inside_torch_funcs_forward_mode_says_so_in_its_words(transform: str) -> None:
    """Built from samples torch.func.jvp or jacfwd differentiates in, an object reads their
    primal, said in the words of torch.func's forward mode: no dual level to build outside of."""
    point = torch.tensor([0.3], dtype=torch.float64)
    y = torch.sin(_SPLINE_X)

    def through(interp: Any) -> Any:
        if transform == "jvp":
            return torch.func.jvp(lambda v: interp.CubicSpline(_SPLINE_X, v)(point), (y,), (torch.ones_like(y),))
        return torch.func.jacfwd(lambda v: interp.CubicSpline(_SPLINE_X, v)(point))(y)

    text = (
        "scipy.interpolate.CubicSpline: argument y carries a tangent of torch.func's forward mode (jvp, jacfwd), and "
        "the catalogue's rule for its objects' calls gives reverse mode alone: the object is built from its primal. "
        "Found a rule without a jvp. Fix: build it from y.detach(), or take reverse mode (y.requires_grad_(), "
        "torch.func.jacrev, grad, vjp); grad='detach' silences this."
    )
    with pytest.raises(ac.GradientError) as info:
        through(ac.torchify(scipy.interpolate, grad="error"))
    assert str(info.value) == text
    with pytest.warns(ac.GradientWarning) as said:
        through(ac.torchify(scipy.interpolate))
    assert [str(w.message) for w in said if w.category is ac.GradientWarning] == [text]


@pytest.mark.parametrize("mode", ["dual", "jvp", "jacfwd"])
def test_forward_mode_in_an_argument_the_rule_gives_no_gradient_in_is_said_never_a_zero(mode: str) -> None:
    """gaussian_filter's sigma takes no gradient in the catalogue: a tangent there (a dual
    tensor, torch.func.jvp, jacfwd) is said as a gradient it requires is, never a zero tangent;
    the image's tangent still flows."""
    image = torch.tensor([0.0, 0, 1, 5, 2, 0, 0, 0], dtype=torch.float64)
    # sigma as one per axis: SciPy 1.14's gaussian_filter cannot iterate a 0-d array
    sigma, one = torch.tensor([1.5], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64)

    def through(filtered: Callable[..., Any]) -> Any:
        if mode == "jvp":
            return torch.func.jvp(lambda s: filtered(image, s), (sigma,), (one,))[1]
        if mode == "jacfwd":
            return torch.func.jacfwd(lambda s: filtered(image, s))(sigma)
        with forward_ad.dual_level():
            return _tangent(filtered(forward_ad.make_dual(image, torch.ones(8)), forward_ad.make_dual(sigma, one)))

    # torch.func's transforms open no dual level the user could call outside of: their words.
    carries, outside = (
        (
            "a forward-mode tangent (a dual tensor of torch.autograd.forward_ad)",
            "call outside forward_ad.dual_level(), ",
        )
        if mode == "dual"
        else ("a tangent of torch.func's forward mode (jvp, jacfwd)", "")
    )
    text = (
        f"gaussian_filter(): argument sigma carries {carries}, and the catalogue's rule for "
        "scipy.ndimage.gaussian_filter gives no gradient in sigma: none flows into it. Found gradients in input "
        f"alone. Fix: pass sigma.detach(), {outside}or give numpy_op a jvp= of your own; grad='detach' silences this."
    )
    for made in (
        ac.torchify(scipy.ndimage, grad="error").gaussian_filter,
        ac.numpy_op(scipy.ndimage.gaussian_filter, grad="error"),
    ):
        with pytest.raises(ac.GradientError) as info:
            through(made)
        assert str(info.value) == text
    warned = ac.torchify(scipy.ndimage).gaussian_filter

    def twice() -> Any:  # said once
        through(warned)
        return through(warned)

    with pytest.warns(ac.GradientWarning) as said:
        found = twice()
    assert [str(w.message) for w in said] == [text]
    if mode == "dual":  # at the line calling the op
        assert (said[0].filename, said[0].lineno) == (__file__, through.__code__.co_firstlineno + 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.GradientWarning)
        assert torch.equal(through(ac.torchify(scipy.ndimage, grad="detach").gaussian_filter), found)
    if mode == "dual":  # the image's tangent alone: a filter of ones
        assert torch.allclose(found, torch.from_numpy(scipy.ndimage.gaussian_filter(np.ones(8), 1.5)))


@pytest.mark.parametrize("given", ["dual", "requires grad"])
@pytest.mark.parametrize("route", ["torchify", "numpy_op"])
def test_a_ruled_ufunc_called_by_keyword_is_refused_before_any_word_of_gradients(route: str, given: str) -> None:
    """A NumPy ufunc takes its inputs by position only: ``jv(v=..., z=...)`` with a tangent or a
    gradient in ``v`` is refused naming the function, what was given and how it takes them,
    with no GradientWarning first about a call that never ran. (The decorator pair hands such a
    call to the ufunc, whose own TypeError it raises, as its flat path does.)"""
    import scipy.special

    jv = ac.torchify(scipy.special).jv if route == "torchify" else ac.numpy_op(scipy.special.jv)
    z = torch.tensor([0.5], dtype=torch.float64)
    with forward_ad.dual_level(), warnings.catch_warnings():
        warnings.simplefilter("error", ac.GradientWarning)
        primal = torch.tensor(1.0, dtype=torch.float64)
        v = forward_ad.make_dual(primal, torch.ones(())) if given == "dual" else primal.requires_grad_()
        with pytest.raises(TypeError) as info:
            jv(v=v, z=z)
    assert type(info.value) is TypeError
    assert str(info.value) == (
        "jv(): its arguments do not fit its signature (x1, x2, /, out=None, *, where=True, casting='same_kind', "
        "order='K', dtype=None, subok=True, signature=None): missing a required argument: 'x1'. Found 0 positional "
        "arguments and keywords v, z. Fix: pass the arguments as its signature takes them (x1, x2 by position only)."
    )


@pytest.mark.parametrize("given", ["dual", "requires grad"])
@pytest.mark.parametrize("route", ["the decorator pair", "accepts_numpy alone"])
def test_a_ufunc_called_by_keyword_through_the_decorators_raises_its_own_type_error_first(
    route: str, given: str
) -> None:
    """The decorators hand ``jv(v=..., z=...)`` to the ufunc, as their flat path does: its own
    TypeError, as plain SciPy raises it, with no GradientWarning first about a call that never
    ran; the warning is said once, at the first call the function takes."""
    import scipy.special

    with pytest.raises(TypeError) as plain:
        scipy.special.jv(v=1.0, z=np.array([0.5]))
    decorated = ac.accepts_numpy(scipy.special.jv)
    jv = ac.returns_tensor(decorated) if route == "the decorator pair" else decorated
    z = torch.tensor([0.5], dtype=torch.float64)
    with forward_ad.dual_level(), warnings.catch_warnings():
        warnings.simplefilter("error", ac.GradientWarning)
        primal = torch.tensor(1.0, dtype=torch.float64)
        v = forward_ad.make_dual(primal, torch.ones(())) if given == "dual" else primal.requires_grad_()
        for _ in range(2):
            with pytest.raises(TypeError) as info:
                jv(v=v, z=z)
            assert type(info.value) is TypeError
            assert str(info.value) == str(plain.value)
        lost = "carries a forward-mode tangent" if given == "dual" else "requires grad"
        with pytest.warns(ac.GradientWarning, match=rf"^jv\(\): argument x1 {lost}") as said:
            jv(v, z)
        jv(v, z)  # said once: the filter above would raise a second
    assert len(said) == 1


#: The routes a ``functools.partial`` is given to, its bound arguments the function's.
PARTIAL_ROUTES = ("the decorator pair", "accepts_numpy alone", "torchify of a function")


def _bound(route: str, options: dict[str, Any], x: torch.Tensor) -> Callable[..., Any]:
    """``route`` made of ``functools.partial(halved, x)``: ``x`` bound, not passed at the call."""
    make = {
        "the decorator pair": lambda f: ac.returns_tensor(ac.accepts_numpy(f, **options)),
        "accepts_numpy alone": lambda f: ac.accepts_numpy(f, **options),
        "torchify of a function": lambda f: ac.torchify(f, **options),
    }[route]
    return make(functools.partial(promise_bodies.halved, x))


@pytest.mark.parametrize("route", PARTIAL_ROUTES)
@pytest.mark.parametrize("grad", ["warn", "error", "detach"])
def test_a_partial_s_bound_dual_tensor_meets_the_grad_policy(route: str, grad: str) -> None:
    """A ``functools.partial`` given to a decorator or torchify: its bound arguments are the
    function's arguments, converted at each call by the same rules, so a bound dual tensor's
    tangent meets ``grad=`` as a passed one's does, and the value is the plain call's."""
    _, keep, made_by = ROUTES[route]
    with _dual() as x:
        fn = _bound(route, {"grad": grad}, x)
        if grad == "error":
            with pytest.raises(ac.GradientError) as info:
                fn()
            assert str(info.value) == refused(keep, made_by, grad)
            return
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", ac.GradientWarning)
            result = fn()
        assert [str(w.message) for w in said] == ([warned(keep, made_by, grad)] if grad == "warn" else [])
        assert _tangent(result) is None
        assert torch.equal(torch.as_tensor(result), torch.arange(6.0).reshape(2, 3) / 2)


@pytest.mark.parametrize("route", PARTIAL_ROUTES)
def test_a_partial_s_bound_tensor_requiring_grad_is_refused_under_grad_error(route: str) -> None:
    """A bound tensor that requires grad meets grad='error' as a passed one does (not torch's
    "Can't call numpy()" RuntimeError), and a partial of plain tensors converts as a call."""
    x = torch.arange(6.0).reshape(2, 3)
    with pytest.raises(ac.GradientError, match=r"^halved\(\): argument a requires grad, and NumPy code cannot"):
        _bound(route, {"grad": "error"}, x.clone().requires_grad_())()
    assert torch.equal(torch.as_tensor(_bound(route, {}, x)()), x / 2)


def _halves(x):  # type: ignore[no-untyped-def]  # unannotated: adapt hands x over as it is
    return np.asarray(x) / 2


def _halves_item(batch: dict) -> Any:  # type: ignore[type-arg]  # a bare dict: handed as it is
    return np.asarray(batch["x"]) / 2


_ADAPT_KEEP = (
    "make {name} a differentiable torch operation with @ac.numpy_op(jvp=...) in place of the decorators, its "
    "Jacobian-vector product written in NumPy"
)


@pytest.mark.parametrize(("fn", "where"), [(_halves, "x"), (_halves_item, "batch['x']")], ids=["unannotated", "dict"])
@pytest.mark.parametrize("grad", ["warn", "error", "detach"])
def test_adapt_says_a_tangent_a_parameter_handed_as_it_is_loses_to_numpy(
    fn: Callable[..., Any], where: str, grad: str
) -> None:
    """adapt hands a parameter that asks for nothing over as it is: where the function gives
    arrays back, NumPy code took its dual tensor and dropped the tangent, and the call's grad=
    says so as for a converted argument; torch code, which returns tensors, keeps it."""
    name = fn.__name__
    site = f"@ac.adapt(grad='detach') on {name}, where grad={grad!r} was given, so a config block cannot change it"
    keep = _ADAPT_KEEP.format(name=name)
    carries = f"{name}(): argument {where} carries a forward-mode tangent (a dual tensor of torch.autograd.forward_ad)"
    adapted = ac.adapt(fn, grad=grad)
    with _dual() as x:
        given = x if where == "x" else {"x": x}
        if grad == "error":
            with pytest.raises(ac.GradientError) as info:
                adapted(given)
            assert str(info.value) == (
                f"{carries}, and NumPy code cannot pass gradients back. Found torch.Tensor(shape=(2, 3), "
                f"dtype=torch.float32, layout=torch.strided, device=cpu). Fix: pass {where}.detach(), call outside "
                f"forward_ad.dual_level(), or allow it detached with grad='detach' (in {site}; grad='warn' says so "
                f"once); to keep the gradient, {keep}."
            )
        else:
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always", ac.GradientWarning)
                result = adapted(given)
            assert [str(w.message) for w in said] == (
                [
                    f"{carries}, and NumPy code cannot pass gradients back: it was detached, so no gradient flows "
                    f"through this call. To keep the gradient, {keep}. To silence this, pass grad='detach' (in "
                    f"{site}; grad='error' forbids it), or call outside forward_ad.dual_level()"
                ]
                if grad == "warn"
                else []
            )
            assert type(result) is torch.Tensor and _tangent(result) is None
            assert torch.equal(result, torch.arange(6.0).reshape(2, 3) / 2)
        kept = ac.adapt(lambda t: torch.sin(t), grad="error")(x)  # torch code: the tangent kept, nothing said
        assert torch.equal(_tangent(kept), torch.cos(torch.arange(6.0).reshape(2, 3)))


@pytest.mark.parametrize(("fn", "where"), [(_halves, "x"), (_halves_item, "batch['x']")], ids=["unannotated", "dict"])
def test_adapt_notes_a_tensor_requiring_grad_handed_as_it_is_that_numpy_refuses(
    fn: Callable[..., Any], where: str
) -> None:
    """NumPy code refuses a tensor requiring grad that adapt handed over as it is, in torch's
    words, inside the function: the error carries a note naming the argument and the fixes."""
    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    with pytest.raises(RuntimeError) as info:
        ac.adapt(fn, grad="error")(x if where == "x" else {"x": x})
    assert str(info.value).startswith("Can't call numpy() on Tensor that requires grad")  # torch's words
    assert info.value.__notes__ == [
        f"autoconvert: {fn.__name__}(): argument {where} requires grad and was handed over as it is, its parameter "
        f"asking for no array, and NumPy code cannot take it; pass {where}.detach(), or annotate the parameter "
        "npt.NDArray so that it is converted under grad="
    ]
