"""The catalogue's rules for scipy.interpolate: interpn and griddata through numpy_op with no
backward written, and the splines CubicSpline and make_interp_spline build through a torchified
module, whose calls give gradients in the samples they were built from and in the points they
are read at. Values are SciPy's to the bit; gradients pass gradcheck in float64."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.interpolate as si
import torch

import autoconvert as ac
from autoconvert._gradients._catalogue import builder_for, rule_for
from tests.test_gradients import assert_rule

# The op converts with copy=True: SciPy's interpn reads read-only values on another path, whose
# last bits differ from its own on writable arrays.
COPIES = {"copy": True}


def _rng(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


def _first_fast(*cases: Any) -> list[Any]:
    """``cases`` for a parametrization: the first runs every time, the rest with ``--slow``."""
    return [cases[0], *(pytest.param(c, marks=pytest.mark.slow) for c in cases[1:])]


GRID = (np.linspace(0.0, 1.0, 5), np.array([0.0, 0.3, 0.7, 1.5]))


@pytest.mark.parametrize(
    "options",
    _first_fast(
        {"method": "linear", "bounds_error": False, "fill_value": 0.5},
        {"method": "nearest", "bounds_error": False, "fill_value": 0.5},
        {"method": "linear", "bounds_error": False, "fill_value": None},
        {"method": "nearest", "bounds_error": False, "fill_value": None},
        {"method": "linear"},
    ),
)
@pytest.mark.parametrize("grid", _first_fast(GRID, (GRID[0][::-1], GRID[1])))
def test_interpn_in_values_and_xi(options: dict[str, Any], grid: Any) -> None:
    """Queries inside and (but with bounds_error) outside the grid, filled or extrapolated;
    values with a trailing axis; a descending grid. nearest's result is piecewise constant:
    zero in xi."""
    inside = options.get("bounds_error", True)
    xi = np.random.default_rng(1).random((6, 2)) * ([1.0, 1.5] if inside else [1.3, 1.8]) - (0 if inside else 0.1)
    assert_rule(si.interpn, (grid, _rng(5, 4, 2), xi), (1, 2), jvp=False, **options)


def test_interpn_method_without_a_rule_raises_with_the_fix() -> None:
    values = torch.tensor(_rng(5, 4), requires_grad=True)
    out = ac.numpy_op(si.interpn)(GRID, values, np.array([[0.5, 0.5]]), method="cubic")
    with pytest.raises(ac.GradientError) as caught:
        out.sum().backward()
    assert str(caught.value) == (
        "scipy.interpolate.interpn: argument method is one the catalogue's rule does not cover. Found 'cubic'. "
        "Fix: call it without requires_grad (.detach()), or pass a method it covers."
    )


POINTS = np.random.default_rng(2).random((12, 2))
QUERIES = np.random.default_rng(3).random((5, 2)) * 1.2 - 0.1  # some outside the hull: the fill


@pytest.mark.parametrize(
    "options",
    _first_fast(
        {"method": "linear", "fill_value": 0.25},
        {"method": "nearest"},
        {"method": "linear", "rescale": True, "fill_value": -1.0},
        {"method": "nearest", "rescale": True},
    ),
)
def test_griddata_in_values_and_xi(options: dict[str, Any]) -> None:
    """Barycentric weights in SciPy's own triangulation (rescaled as SciPy rescales); the
    nearest sample (zero in xi)."""
    points = POINTS * [3.0, 0.5] if options.get("rescale") else POINTS
    queries = QUERIES * [3.0, 0.5] if options.get("rescale") else QUERIES
    assert_rule(si.griddata, (points, _rng(12, 2), queries), (1, 2), jvp=False, **options)


@pytest.mark.parametrize("method", _first_fast("cubic", "linear", "nearest"))
def test_griddata_on_a_line(method: str) -> None:
    """One-dimensional points, unsorted: SciPy's interp1d through the sorted samples."""
    points = np.random.default_rng(4).random(9)
    queries = np.array([0.2, 0.45, 0.5, 0.8, 1.4])
    assert_rule(si.griddata, (points, _rng(9), queries), (1, 2), jvp=False, method=method, fill_value=0.25)


def test_griddata_cubic_in_two_dimensions_raises_with_the_fix() -> None:
    values = torch.tensor(_rng(12), requires_grad=True)
    out = ac.numpy_op(si.griddata)(POINTS, values, np.array([[0.5, 0.5]]), method="cubic")
    with pytest.raises(ac.GradientError) as caught:
        out.sum().backward()
    assert str(caught.value) == (
        "scipy.interpolate.griddata: argument method is 'cubic' in more than one dimension, whose Clough-Tocher "
        "gradients SciPy estimates iteratively, to a tolerance: the result is not linear in values, and the "
        "catalogue's rule does not cover it. Found method 'cubic' on points in 2 dimensions. Fix: call it without "
        "requires_grad (.detach()), or pass a method it covers."
    )


KNOTS = np.array([0.0, 0.4, 1.0, 1.3, 2.1, 2.5, 3.0])
AT = np.array([[-0.3, 0.23, 1.12], [1.74, 2.95, 3.4]])  # two outside: extrapolated, or NaN; none midway


def assert_spline(
    build: Callable[..., Any],
    y: np.ndarray,
    *,
    call: dict[str, Any] | None = None,
    knots: np.ndarray = KNOTS,
    in_y: bool = True,
    **options: Any,
) -> None:
    """``build(knots, y, **options)`` through a torchified scipy.interpolate, read at ``AT``:
    SciPy's values bit for bit, and gradcheck in the samples (``in_y``) and the points at once."""
    call = call or {}
    made = getattr(ac.torchify(si), build.__name__)

    def read(samples: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
        return made(torch.from_numpy(knots), samples, **options)(at, **call)  # type: ignore[no-any-return]

    samples, at = torch.tensor(y, requires_grad=in_y), torch.tensor(AT, requires_grad=True)
    expected = build(knots, y, **options)(AT, **call)
    assert np.array_equal(read(samples, at).detach().numpy(), expected, equal_nan=True)
    if in_y:
        assert torch.autograd.gradcheck(lambda s, a: read(s, a).nan_to_num(), (samples, at))
    else:
        assert torch.autograd.gradcheck(lambda a: read(samples, a).nan_to_num(), (at,))


@pytest.mark.parametrize(
    "bc_type", _first_fast("not-a-knot", "natural", "clamped", ((1, 0.5), (2, -1.0)), ((2, 0.0), (1, 1.0)))
)
def test_cubic_spline_in_samples_and_points(bc_type: Any) -> None:
    assert_spline(si.CubicSpline, _rng(7), bc_type=bc_type)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "call"),
    [
        ({"axis": 1}, {}),
        ({"axis": 0}, {"nu": 1}),
        ({"axis": 0, "extrapolate": False}, {}),
        ({"axis": 1}, {"nu": 2, "extrapolate": False}),
    ],
)
def test_cubic_spline_along_an_axis_derivatives_and_extrapolation(options: dict[str, Any], call: Any) -> None:
    """Samples along axis 1 of a 3-d array, the spline's derivatives (nu), no extrapolation (NaN outside)."""
    y = _rng(2, 7, 3) if options["axis"] == 1 else _rng(7, 2)
    assert_spline(si.CubicSpline, y, call=call, **options)


@pytest.mark.parametrize(
    "options", _first_fast({"k": 3}, {"k": 1}, {"k": 3, "bc_type": "natural"}, {"k": 3, "bc_type": "clamped"})
)
def test_make_interp_spline_in_samples_and_points(options: dict[str, Any]) -> None:
    assert_spline(si.make_interp_spline, _rng(7), **options)


@pytest.mark.slow
def test_make_interp_spline_along_an_axis() -> None:
    assert_spline(si.make_interp_spline, _rng(2, 7), k=3, axis=1, call={"nu": 1})


@pytest.mark.parametrize(
    "kind", _first_fast("cubic", "linear", "nearest", "previous", "next", "zero", "slinear", "quadratic", 3)
)
@pytest.mark.parametrize("fill_value", _first_fast("extrapolate", np.nan, 0.5))
def test_interp1d_in_samples_and_points(kind: Any, fill_value: Any) -> None:
    """Unsorted knots; every kind (zero in the points for the piecewise constant ones); the fill or extrapolation."""
    if fill_value == "extrapolate" and kind in ("previous", "next"):
        pytest.skip("SciPy extrapolates previous and next only with their own fill")
    shuffled = KNOTS[[3, 0, 2, 1, 4, 6, 5]]
    assert_spline(si.interp1d, _rng(7), knots=shuffled, kind=kind, bounds_error=False, fill_value=fill_value)


@pytest.mark.slow
def test_interp1d_along_an_axis() -> None:
    assert_spline(si.interp1d, _rng(7, 2), kind="cubic", axis=0, bounds_error=False, fill_value="extrapolate")


@pytest.mark.parametrize("cls", _first_fast(si.PchipInterpolator, si.Akima1DInterpolator))
def test_shape_preserving_interpolants_in_the_points_alone(cls: Any) -> None:
    """PCHIP's and Akima's slopes are not linear in the samples: the points take a gradient,
    the samples none, said at construction."""
    assert_spline(cls, _rng(7), in_y=False)
    with pytest.warns(ac.GradientWarning) as warned:
        getattr(ac.torchify(si), cls.__name__)(torch.tensor(KNOTS), torch.tensor(_rng(7), requires_grad=True))
    assert [str(w.message) for w in warned] == [
        f"scipy.interpolate.{cls.__name__}: argument y requires grad, and the catalogue's rule for "
        f"scipy.interpolate.{cls.__name__} gives no gradient in y: none flows into it. Found gradients in the points "
        "it is read at alone. Fix: pass y without requires_grad (.detach()), or give numpy_op a backward= of your "
        "own; grad='detach' silences this."
    ]


@pytest.mark.parametrize(
    "case",
    _first_fast(
        ({"method": "linear", "bounds_error": False, "fill_value": 0.5}, {}),
        ({"method": "nearest", "bounds_error": False, "fill_value": None}, {}),
        ({"method": "cubic"}, {"method": "linear"}),
    ),
)
def test_regular_grid_interpolator_in_values_and_points(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """The method given at construction or at the call; a descending grid; the fill or extrapolation."""
    options, call = case
    grid = (GRID[0][::-1], GRID[1])
    values, xi = _rng(5, 4), np.random.default_rng(5).random((6, 2)) * [1.2, 1.7] - 0.1
    if options.get("bounds_error", True):
        xi = np.clip(xi, 0.05, 0.95)  # inside, by more than gradcheck moves them
    made = ac.torchify(si).RegularGridInterpolator

    def read(v: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return made(grid, v, **options)(q, **call)  # type: ignore[no-any-return]

    leaves = (torch.tensor(values, requires_grad=True), torch.tensor(xi, requires_grad=True))
    # torchify hands SciPy read-only arrays, and SciPy's linear path on those differs from the one on
    # writable ones in the last bits: the values are SciPy's own on the arrays torchify gives it.
    values.flags.writeable = False
    expected = si.RegularGridInterpolator(grid, values, **options)(xi, **call)
    assert np.array_equal(read(*leaves).detach().numpy(), expected)
    assert torch.autograd.gradcheck(read, leaves)


@pytest.mark.parametrize("builder", ["CubicSpline", "make_interp_spline"])
def test_a_periodic_spline_gives_the_points_their_gradient_and_says_the_samples_take_none(builder: str) -> None:
    """A periodic spline's first and last samples are one: its samples take no gradient, said
    at the build (a GradientWarning once, a GradientError under grad='error', nothing under
    grad='detach'), while the points it is read at take theirs under every policy (backward
    raised under the default policy, losing the points' gradient too)."""
    y = np.sin(2 * np.pi * KNOTS / 3.0)
    at = torch.tensor([0.5, 1.7], dtype=torch.float64, requires_grad=True)

    def build(samples: torch.Tensor, **options: Any) -> Any:
        return getattr(ac.torchify(si, **options), builder)(torch.from_numpy(KNOTS), samples, bc_type="periodic")

    assert torch.autograd.gradcheck(build(torch.tensor(y)), (at,))
    samples = torch.tensor(y, requires_grad=True)
    said = (
        f"scipy.interpolate.{builder}: argument y is a periodic spline's samples, whose first and last are one "
        "sample, and the catalogue's rule gives them no gradient: none flows into them, while the points the spline "
        "is read at take theirs. Found bc_type='periodic'. Fix: build it from y.detach(); grad='detach' silences this."
    )
    with pytest.warns(ac.GradientWarning) as warned:
        spline = build(samples)
    assert [str(w.message) for w in warned] == [said] and warned[0].filename == __file__
    spline(at).sum().backward()
    expected = build(torch.tensor(y), grad="detach")(at).sum()
    (wanted,) = torch.autograd.grad(expected, at)
    assert samples.grad is None and torch.equal(at.grad, wanted)
    with pytest.raises(ac.GradientError) as caught:
        build(samples, grad="error")
    assert str(caught.value) == said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build(samples, grad="detach")(at).sum().backward()


@pytest.mark.parametrize("builder", ["CubicSpline", "make_interp_spline"])
def test_a_call_without_tensors_gives_its_result_on_the_splines_device(builder: str) -> None:
    """A spline built from tensors on one device and read at a float or a NumPy array (nothing
    requiring grad, so no tensor reaches its call) gives its result on the spline's device, as
    any torchified object does (UnivariateSpline here), not on torch's default device."""
    interp = ac.torchify(si)
    knots, samples = torch.from_numpy(KNOTS), torch.tensor(_rng(7))
    spline, other = getattr(interp, builder)(knots, samples), interp.UnivariateSpline(knots, samples)
    with torch.device("meta"):  # torch's default device, which the spline was not built on
        found = [spline(0.5), spline(np.array([0.2, 1.1])), spline.derivative()(0.5), other(0.5)]
    assert [t.device for t in found] == [torch.device("cpu")] * 4
    assert torch.equal(found[1], torch.from_numpy(getattr(si, builder)(KNOTS, samples.numpy())([0.2, 1.1])))


def test_the_knots_take_no_gradient_said_never_a_silent_zero() -> None:
    """The knots ``x`` requiring grad: a GradientWarning once, a GradientError under
    grad='error', nothing under grad='detach'; the samples' gradient flows all the same."""
    knots = torch.tensor(KNOTS, requires_grad=True)
    samples = torch.tensor(_rng(7), requires_grad=True)
    interp = ac.torchify(si)

    def twice() -> None:  # said once
        interp.CubicSpline(knots, samples)(torch.tensor([0.5])).sum().backward()
        interp.CubicSpline(knots, samples)

    with pytest.warns(ac.GradientWarning) as warned:
        twice()
    assert [str(w.message) for w in warned] == [
        "scipy.interpolate.CubicSpline: argument x requires grad, and the catalogue's rule for "
        "scipy.interpolate.CubicSpline gives no gradient in x: none flows into it. Found gradients in y alone. Fix: "
        "pass x without requires_grad (.detach()), or give numpy_op a backward= of your own; grad='detach' "
        "silences this."
    ]
    assert knots.grad is None and samples.grad is not None
    with pytest.raises(ac.GradientError, match=r"^scipy\.interpolate\.make_interp_spline: argument x requires grad"):
        ac.torchify(si, grad="error").make_interp_spline(knots, samples)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ac.torchify(si, grad="detach").CubicSpline(knots, samples)


def test_reading_a_spline_other_than_calling_it_says_the_samples_gradient_dropped() -> None:
    """``integrate()``, ``c``: their results carry no gradient in the samples, said once;
    the knots, which the samples do not change, read freely."""
    spline = ac.torchify(si).CubicSpline(torch.tensor(KNOTS), torch.tensor(_rng(7), requires_grad=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(spline.x, torch.tensor(KNOTS))
    with pytest.warns(ac.GradientWarning) as warned:
        [spline.integrate(0.0, 1.0) for _ in range(2)]  # said once
    assert [str(w.message) for w in warned] == [
        "scipy.interpolate.CubicSpline(...).integrate: argument y requires grad, and the object built from it "
        "passes no gradient through integrate: its call (__call__) takes the catalogue's rule, as do the objects "
        "its antiderivative and derivative make. Found an object built from a y that requires grad. Fix: call the "
        "object itself for gradients, or build it from y.detach(); grad='detach' silences this."
    ]
    with pytest.raises(ac.GradientError, match=r"^scipy\.interpolate\.CubicSpline\(\.\.\.\)\.c: argument y"):
        ac.torchify(si, grad="error").CubicSpline(torch.tensor(KNOTS), torch.tensor(_rng(7), requires_grad=True)).c


@pytest.mark.parametrize("build", _first_fast(si.CubicSpline, si.make_interp_spline))
@pytest.mark.parametrize(
    "derive", _first_fast(("derivative", ()), ("derivative", (2,)), ("antiderivative", ()), ("antiderivative", (2,)))
)
def test_a_splines_derivatives_and_antiderivatives_keep_its_samples(build: Any, derive: Any) -> None:
    name, args = derive
    made = getattr(ac.torchify(si), build.__name__)

    def read(samples: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
        return getattr(made(torch.tensor(KNOTS), samples), name)(*args)(at)  # type: ignore[no-any-return]

    leaves = (torch.tensor(_rng(7), requires_grad=True), torch.tensor(AT[0], requires_grad=True))
    expected = getattr(build(KNOTS, _rng(7)), name)(*args)(AT[0])
    assert np.array_equal(read(*leaves).detach().numpy(), expected)
    assert torch.autograd.gradcheck(read, leaves)


def test_a_spline_built_from_arrays_is_read_as_before() -> None:
    """NumPy samples: the points alone take a gradient; reading the spline says nothing."""
    spline = ac.torchify(si).make_interp_spline(KNOTS, _rng(7))
    at = torch.tensor([0.5, 2.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(spline, (at,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert spline.derivative()(torch.tensor([0.5])).shape == (1,)


def test_explain_names_the_rules() -> None:
    spline = ac.torchify(si).CubicSpline(torch.tensor(KNOTS), torch.tensor(_rng(7)))
    assert str(ac.explain(spline)).splitlines()[1] == (
        "built by scipy.interpolate.CubicSpline from y, kept for its calls: the catalogue's rule for "
        "scipy.interpolate.CubicSpline (gradients in y, x; the spline's call, any nu and extrapolate; y along any "
        "axis; every bc_type (end derivatives' values take no gradient; periodic: none in y))"
    )
    assert "backward=the catalogue's rule for scipy.interpolate.interpn (gradients in values, xi;" in str(
        ac.explain(ac.numpy_op(si.interpn))
    )


def test_the_catalogue_finds_the_builders() -> None:
    assert builder_for(si.CubicSpline) is not None and builder_for(si.make_interp_spline) is not None
    assert builder_for(si.BSpline) is None and builder_for(np.sin) is None
    assert rule_for(si.interpn) is not None and rule_for(si.interp1d) is None


def test_a_pickled_view_still_keeps_the_samples() -> None:
    """The torchified class and factory, pickled and loaded, build splines that keep their samples."""
    import pickle

    interp = ac.torchify(si)
    for build in (interp.CubicSpline, interp.make_interp_spline):
        samples = torch.tensor(_rng(7), requires_grad=True)
        loaded = pickle.loads(pickle.dumps(build))
        loaded(torch.tensor(KNOTS), samples)(torch.tensor([0.5, 1.5], dtype=torch.float64)).sum().backward()
        assert samples.grad is not None
    assert str(ac.explain(interp.make_interp_spline)).splitlines()[3] == (
        "its objects are built by scipy.interpolate.make_interp_spline from y, kept for its calls: the catalogue's "
        "rule for scipy.interpolate.make_interp_spline (gradients in y, x; the spline's call, any nu and "
        "extrapolate; y along any axis; any k; every bc_type (end derivatives' values take no gradient; periodic: "
        "none in y))"
    )


def test_torch_func_transforms_a_splines_call() -> None:
    """The call is a numpy_op: torch.func's grad and vmap go through it, the spline built outside."""
    samples = torch.tensor(_rng(7))
    spline = ac.torchify(si).CubicSpline(torch.tensor(KNOTS), samples)
    at = torch.tensor(AT[0])
    per_point = torch.func.vmap(torch.func.grad(lambda a: spline(a).sum()))(at)
    assert torch.allclose(per_point, torch.from_numpy(si.CubicSpline(KNOTS, _rng(7))(AT[0], 1)))


#: Objects built through the torchified module inside the loss, from samples torch.func transforms.
BUILT_INSIDE: dict[str, Callable[[torch.Tensor], Any]] = {
    "CubicSpline": lambda y: ac.torchify(si).CubicSpline(torch.tensor(KNOTS), y, bc_type="clamped"),
    "make_interp_spline": lambda y: ac.torchify(si).make_interp_spline(torch.tensor(KNOTS), y, k=5),
    "derivative": lambda y: ac.torchify(si).CubicSpline(torch.tensor(KNOTS), y).derivative(),
    "interp1d": lambda y: ac.torchify(si).interp1d(torch.tensor(KNOTS), y, kind="quadratic"),
}


@pytest.mark.parametrize("transform", _first_fast("grad", "vjp", "jacrev"))
@pytest.mark.parametrize("name", list(BUILT_INSIDE))
def test_torch_func_transforms_an_object_built_from_its_samples(name: str, transform: str) -> None:
    """An object built inside a loss that torch.func differentiates in the samples (its
    arguments wrapped by the transform, whose ops refuse NumPy even a plain tensor's memory) is
    built from their values, outside the transform, and its call takes their gradient: torch.func
    gives eager autograd's gradient, in the samples and the points together."""
    build = BUILT_INSIDE[name]
    at = torch.tensor(AT[:, 1])  # inside: interp1d raises outside
    samples = torch.tensor(_rng(7))

    def loss(y: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return (build(y)(a) ** 2).sum()  # type: ignore[no-any-return]

    leaves = (samples.clone().requires_grad_(), at.clone().requires_grad_())
    wanted = torch.autograd.grad(loss(*leaves), leaves)
    if transform == "grad":
        got = torch.func.grad(loss, argnums=(0, 1))(samples, at)
    elif transform == "vjp":
        got = torch.func.vjp(loss, samples, at)[1](torch.tensor(1.0, dtype=torch.float64))
    else:
        got = torch.func.jacrev(loss, argnums=(0, 1))(samples, at)
    assert all(torch.allclose(g, w) for g, w in zip(got, wanted, strict=True))


def test_an_object_built_from_samples_torch_vmap_batches_is_refused_naming_them() -> None:
    """One object holds one set of samples: built from a batch torch.vmap makes, it is refused
    naming the samples (not the knots beside them) and fixes that build one per sample."""
    with pytest.raises(ac.ConversionError) as caught:
        torch.func.vmap(lambda y: BUILT_INSIDE["CubicSpline"](y)(torch.tensor(AT[0])))(torch.tensor(_rng(3, 7)))
    assert str(caught.value) == (
        "scipy.interpolate.CubicSpline: argument y is batched by torch.vmap, and one object is built from one set "
        "of values. Found torch.Tensor(shape=(7,), dtype=torch.float64, layout=torch.strided, device=cpu). Fix: "
        "build one object per sample (a loop, or autoconvert.batched), or build it outside torch.vmap and vmap its "
        "call."
    )


def test_a_grid_interpolators_derivatives_are_refused_with_the_fix() -> None:
    """``nu=`` (where SciPy has it) asks for derivatives of the interpolant, which the rule does not cover."""
    if "nu" not in inspect.signature(si.RegularGridInterpolator.__call__).parameters:
        pytest.skip("this SciPy's RegularGridInterpolator takes no nu=")
    values = torch.tensor(_rng(5, 4), requires_grad=True)
    out = ac.torchify(si).RegularGridInterpolator(GRID, values, method="cubic")(np.array([[0.5, 0.5]]), nu=(1, 0))
    with pytest.raises(ac.GradientError) as caught:
        out.sum().backward()
    assert str(caught.value) == (
        "scipy.interpolate.RegularGridInterpolator: argument nu asks for derivatives, which the catalogue's rule "
        "does not cover. Found (1, 0). Fix: call it without requires_grad (.detach()), or pass a method it covers."
    )


# torch.func.jvp's first use scripts its decompositions, which torch deprecates from its own
# internals (a DeprecationWarning in 2.13, a FutureWarning in the newest).
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
def test_forward_mode_of_a_rule_without_a_jvp_names_reverse_mode_as_the_fix() -> None:
    """interpn's rule is reverse mode alone: torch.func.jvp through torchify (where there is no
    numpy_op of the caller's to give a jvp= to) says so, with the fixes that apply."""
    points = (torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64),)
    values, xi = torch.rand(3, dtype=torch.float64), torch.tensor([[0.5]], dtype=torch.float64)
    interpn = ac.torchify(si).interpn
    with pytest.raises(ac.GradientError) as info:
        torch.func.jvp(lambda v: interpn(points, v, xi), (values,), (torch.ones(3, dtype=torch.float64),))
    assert str(info.value) == (
        "interpn(): the call was asked for forward-mode derivatives (torch.func.jvp, jacfwd, forward_ad), and the "
        "catalogue's rule for it gives reverse mode alone. Found a rule without a jvp. Fix: take reverse mode "
        "(torch.func.jacrev, grad, vjp), or wrap the function in autoconvert.numpy_op with backward= and jvp= of "
        "your own."
    )
