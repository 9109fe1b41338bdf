"""The catalogue's rules for ndimage's geometric transforms (shift, zoom, affine_transform,
map_coordinates, rotate): values are SciPy's to the bit, the input's gradient is the exact
transpose of what SciPy computes in every mode, order and prefilter (a dot-product test to
1e-12, and gradcheck in float64), and map_coordinates' coordinates take the spline's slope."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.ndimage as ndi
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac
from autoconvert._gradients._catalogue import rule_for
from tests.test_gradients import assert_rule

# torch.func.jacfwd's first use scripts torch's decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning"),
    # SciPy before 1.13 warns at every call of affine_transform with a diagonal (a 1-D matrix)
    # that its meaning changed in 0.18: SciPy's own word to the caller.
    pytest.mark.filterwarnings("ignore:The behavior of affine_transform with a 1-D array:UserWarning"),
]

MODES = ["constant", "nearest", "reflect", "mirror", "wrap", "grid-constant", "grid-mirror", "grid-wrap"]
#: (order, prefilter): nearest-neighbour, linear, and cubic with and without its prefilter.
ORDERS = [(0, True), (1, True), (3, True), (3, False)]

_ROTATION = np.array([[0.9, 0.3], [-0.4, 1.2]])

#: Each transform with arguments reaching past the edges, so that every mode folds.
TRANSFORMS: dict[str, tuple[Any, dict[str, Any]]] = {
    "shift": (ndi.shift, {"shift": (1.3, -2.6)}),
    "shift-far": (ndi.shift, {"shift": (9.2, -14.5)}),
    "zoom": (ndi.zoom, {"zoom": (1.7, 0.6)}),
    "zoom-grid": (ndi.zoom, {"zoom": (1.5, 2.1), "grid_mode": True}),
    "affine": (ndi.affine_transform, {"matrix": _ROTATION, "offset": (-2.1, 1.4)}),
    "affine-diagonal": (ndi.affine_transform, {"matrix": np.array([1.3, -0.7]), "offset": (0.5, 3.1)}),
    "affine-homogeneous": (
        ndi.affine_transform,
        {"matrix": np.array([[0.9, 0.3, 1.0], [-0.4, 1.2, -8.0], [0.0, 0.0, 1.0]]), "output_shape": (9, 5)},
    ),
    "map_coordinates": (
        ndi.map_coordinates,
        {"coordinates": np.random.default_rng(5).uniform(-9.0, 15.0, (2, 5, 4))},
    ),
    "rotate": (ndi.rotate, {"angle": 33.0}),
    "rotate-kept-shape": (ndi.rotate, {"angle": -71.0, "reshape": False}),
}


def _image(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape)


def _warns_of_grid_mode(name: str, mode: str) -> bool:
    """zoom(grid_mode=True) warns under constant and wrap, recommending their grid- twins."""
    return name == "zoom-grid" and mode in ("constant", "wrap")


@contextlib.contextmanager
def _refused_where_this_scipy_samples_otherwise() -> Iterator[None]:
    """Skips where the rule's self-check found this SciPy sampling the call's form otherwise
    (affine_transform's diagonal and constant/wrap forms in SciPy 1.12): the GradientError it
    raises is the promise there, never a wrong gradient."""
    try:
        yield
    except ac.GradientError as e:
        if "this SciPy samples this form of the call otherwise" not in str(e):
            raise
        pytest.skip(f"this SciPy samples the form otherwise, and the rule refuses it: {e}")


def _adjoint_gap(fn: Any, x: np.ndarray, options: dict[str, Any]) -> float:
    """``<A x, y> - <x, A^T y>``, relative: A the transform's linear part (a zero cval), A^T
    the rule's backward."""
    result = fn(x, **options)
    y = np.random.default_rng(7).standard_normal(np.shape(result))
    rule = rule_for(fn)
    assert rule is not None
    transposed = rule.backward(y, [x], dict(options), result, [True])[0]
    forward = fn(x, **{**options, "cval": 0.0})
    left, right = float(np.sum(forward * y)), float(np.sum(x * transposed))
    return abs(left - right) / max(1.0, abs(left))


def _sweep(names: list[str], modes: list[str], orders: list[tuple[int, bool]]) -> list[Any]:
    return [
        (name, mode, order, prefilter)
        for name, mode, (order, prefilter) in itertools.product(names, modes, orders)
        if not _warns_of_grid_mode(name, mode)
    ]


_REPRESENTATIVE = [
    ("shift", "reflect", 1, True),
    ("zoom", "mirror", 3, True),
    ("affine", "nearest", 3, True),
    ("map_coordinates", "grid-constant", 3, True),
    ("rotate", "grid-wrap", 0, True),
]


@pytest.mark.parametrize(("name", "mode", "order", "prefilter"), _REPRESENTATIVE)
def test_the_gradient_is_the_transpose(name: str, mode: str, order: int, prefilter: bool) -> None:
    fn, options = TRANSFORMS[name]
    assert _adjoint_gap(fn, _image(6, 7), {**options, "order": order, "mode": mode, "cval": 0.7}) < 1e-12


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "mode", "order", "prefilter"),
    _sweep(list(TRANSFORMS), MODES, [(0, True), (1, True), *((k, p) for k in (2, 3, 4, 5) for p in (True, False))]),
)
def test_the_gradient_is_the_transpose_in_every_mode_and_order(
    name: str, mode: str, order: int, prefilter: bool
) -> None:
    """Orders 0 to 5, with and without the prefilter, in every mode, for each transform."""
    fn, options = TRANSFORMS[name]
    given = {**options, "order": order, "mode": mode, "cval": 0.7, "prefilter": bool(prefilter)}
    with _refused_where_this_scipy_samples_otherwise():
        assert _adjoint_gap(fn, _image(6, 7), given) < 1e-12


@st.composite
def _transforms(draw: st.DrawFn) -> tuple[Any, np.ndarray, dict[str, Any]]:
    """A transform of an image of rank 1 to 3 and sides 1 to 6 (a side of 1 folds to itself),
    with arguments reaching past its edges, in any mode, order and prefilter."""
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    rank = len(shape)
    numbers = st.floats(-7.0, 7.0, allow_nan=False)
    mode = draw(st.sampled_from(MODES))
    kinds = ["shift", "zoom", "affine", "map_coordinates", *(["rotate"] if rank > 1 else [])]
    kind = draw(st.sampled_from(kinds))
    options: dict[str, Any] = {"order": draw(st.integers(0, 5)), "mode": mode, "prefilter": draw(st.booleans())}
    if kind == "shift":
        return ndi.shift, _image(*shape), {**options, "shift": draw(st.lists(numbers, min_size=rank, max_size=rank))}
    if kind == "zoom":
        zooms = draw(st.lists(st.floats(0.3, 2.5), min_size=rank, max_size=rank))
        grid_mode = mode not in ("constant", "wrap") and draw(st.booleans())  # those two warn under grid_mode
        return ndi.zoom, _image(*shape), {**options, "zoom": zooms, "grid_mode": grid_mode}
    if kind == "affine":
        matrix = np.array(draw(st.lists(numbers, min_size=rank * rank, max_size=rank * rank))).reshape(rank, rank)
        offset = draw(st.lists(numbers, min_size=rank, max_size=rank))
        return ndi.affine_transform, _image(*shape), {**options, "matrix": matrix / 4, "offset": offset}
    if kind == "rotate":
        axes = draw(st.permutations(range(rank)))[:2]
        angle = draw(st.floats(-180.0, 180.0))
        return ndi.rotate, _image(*shape), {**options, "angle": angle, "axes": axes, "reshape": draw(st.booleans())}
    points = draw(st.lists(st.floats(-8.0, 12.0), min_size=rank * 5, max_size=rank * 5))
    return ndi.map_coordinates, _image(*shape), {**options, "coordinates": np.reshape(points, (rank, 5))}


@given(case=_transforms())
def test_the_gradient_is_the_transpose_of_any_transform(case: tuple[Any, np.ndarray, dict[str, Any]]) -> None:
    fn, x, options = case
    try:
        gap = _adjoint_gap(fn, x, {**options, "cval": 0.7})
    except ac.GradientError as e:  # a form this SciPy samples otherwise: refused, never wrong
        refused = str(e)
        gap = 0.0 if "this SciPy samples this form of the call otherwise" in refused else float("inf")
    assert gap < 1e-12


@pytest.mark.parametrize(("name", "mode", "order", "prefilter"), _REPRESENTATIVE)
def test_gradcheck_in_input(name: str, mode: str, order: int, prefilter: bool) -> None:
    fn, options = TRANSFORMS[name]
    with _refused_where_this_scipy_samples_otherwise():
        assert_rule(fn, (_image(5, 6),), (0,), **options, order=order, mode=mode, cval=0.7, prefilter=prefilter)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode", "order", "prefilter"), _sweep(list(TRANSFORMS), MODES, ORDERS))
def test_gradcheck_in_input_in_every_mode_and_order(name: str, mode: str, order: int, prefilter: bool) -> None:
    fn, options = TRANSFORMS[name]
    with _refused_where_this_scipy_samples_otherwise():
        assert_rule(fn, (_image(5, 6),), (0,), **options, order=order, mode=mode, cval=0.7, prefilter=prefilter)


def _coordinates(seed: int) -> np.ndarray:
    """Points inside and past the edges of a 5 x 6 image, none on a knot (the spline's slope
    jumps there, and a finite difference straddling one is no derivative)."""
    points = np.random.default_rng(seed).uniform(-8.0, 13.0, (2, 4, 3))
    return np.where(np.abs(points - np.round(points)) < 0.05, points + 0.2, points)


_COORDINATE_CASES = [("mirror", 3, True), ("grid-constant", 1, True)]


@pytest.mark.parametrize(
    ("mode", "order", "prefilter"),
    [
        *_COORDINATE_CASES,
        *(
            pytest.param(m, k, p, marks=pytest.mark.slow)
            for m in MODES
            for k, p in ((1, True), (3, True), (3, False), (2, True), (5, True))
            if (m, k, p) not in _COORDINATE_CASES
        ),
    ],
)
def test_map_coordinates_in_input_and_coordinates(mode: str, order: int, prefilter: bool) -> None:
    """The spline's derivative in each coordinate, folded as the mode folds the point."""
    args = (_image(5, 6), _coordinates(order))
    assert_rule(ndi.map_coordinates, args, (0, 1), order=order, mode=mode, cval=0.4, prefilter=prefilter)


def test_points_in_blocks_give_the_same_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large output's taps are weighted a block of points at a time: blocks of a few points
    give the gradients of one block, in input and coordinates."""
    from autoconvert._gradients import _ndimage_transforms

    x = torch.tensor(_image(5, 6), requires_grad=True)
    points = torch.tensor(_coordinates(3), requires_grad=True)
    op = ac.numpy_op(ndi.map_coordinates)
    whole = torch.autograd.grad(op(x, points, mode="grid-constant", cval=0.3).sum(), (x, points))
    monkeypatch.setattr(_ndimage_transforms, "_TAPS_AT_ONCE", 40)  # 2 points of 16 taps a block
    blocks = torch.autograd.grad(op(x, points, mode="grid-constant", cval=0.3).sum(), (x, points))
    for one, many in zip(whole, blocks, strict=True):
        torch.testing.assert_close(one, many, rtol=1e-14, atol=1e-14)


def test_map_coordinates_at_order_0_has_a_zero_slope() -> None:
    """Nearest-neighbour sampling is piecewise constant in the coordinates: their gradient is
    zero (not None), and the input's is the scatter of the output's."""
    coordinates = torch.tensor(_coordinates(0), requires_grad=True)
    x = torch.tensor(_image(5, 6), requires_grad=True)
    ac.numpy_op(ndi.map_coordinates)(x, coordinates, order=0, mode="wrap").sum().backward()
    assert coordinates.grad is not None and torch.equal(coordinates.grad, torch.zeros_like(coordinates))
    assert x.grad is not None and float(x.grad.sum()) == coordinates.shape[1] * coordinates.shape[2]


def test_a_zoom_of_one_is_the_identity() -> None:
    """SciPy returns the input for a zoom of 1 with the prefilter; without, it resamples."""
    assert_rule(ndi.zoom, (_image(5, 6), 1.0), (0,), order=3)
    assert_rule(ndi.zoom, (_image(5, 6), 1.0), (0,), order=3, prefilter=False)


@pytest.mark.parametrize(("axes", "reshape"), [((0, 2), True), ((2, 1), False), ((-1, 0), True)])
def test_rotate_every_plane_of_a_volume(axes: tuple[int, int], reshape: bool) -> None:
    """A 3-d input rotated along any two axes: each plane alike, its prefilter in-plane."""
    assert_rule(ndi.rotate, (_image(4, 5, 3), 27.0), (0,), axes=axes, reshape=reshape, mode="nearest", cval=0.3)


def test_affine_transform_to_a_lower_rank() -> None:
    """A matrix of fewer columns than the input's rank: an output of that rank (a slice)."""
    matrix = np.array([[0.8], [1.1], [0.3]])
    assert_rule(ndi.affine_transform, (_image(4, 5, 6),), (0,), matrix=matrix, offset=0.4, output_shape=(5,))


def test_torchify_takes_the_rule() -> None:
    ndimage = ac.torchify(ndi)
    x = torch.tensor(_image(6, 6), requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: ndimage.rotate(t, 20.0, mode="mirror"), (x,))


def test_explain_names_the_rule() -> None:
    notes = str(ac.explain(ac.numpy_op(ndi.map_coordinates))).splitlines()
    assert notes[1] == (
        "numpy_op(): a torch op; backward=the catalogue's rule for scipy.ndimage.map_coordinates (gradients in "
        "input, coordinates; every mode (reflect, constant, nearest, mirror, wrap, grid-mirror, grid-constant, "
        "grid-wrap); orders 0 to 5, prefilter or not; in coordinates, the spline's derivative (none at order 0)), "
        "fake=None, vmap='sequential', jvp=the rule's."
    )


def test_a_result_written_into_an_out_parameter_warns_of_its_gradient() -> None:
    x = torch.tensor(_image(5, 5), requires_grad=True)
    out = torch.zeros(5, 5, dtype=torch.float64)
    with pytest.warns(ac.GradientWarning, match=r"^shift\(\): argument input requires grad"):
        ac.torchify(ndi).shift(x, 1.5, output=out)
    assert np.array_equal(out.numpy(), ndi.shift(_image(5, 5), 1.5))
