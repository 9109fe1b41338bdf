"""Rules for the calls of ``scipy.interpolate``'s interpolants on a line: the splines
``CubicSpline`` and ``make_interp_spline`` build, ``interp1d``, and (in the points alone)
``PchipInterpolator`` and ``Akima1DInterpolator``.

A spline couples every sample, but is linear in them: the gradient in the samples is the
spline of each unit sample read at the queries, against the result's gradient. The gradient in
the points is the interpolant's own derivative there.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autoconvert._errors import GradientError, message

from ._built import Built, Construction
from ._rule import Call, Rule

#: How many unit samples a spline's gradient builds at once: memory stays within a block's
#: splines read at every query.
_BLOCK = 256


def uncovered(name: str, where: str, problem: str, found: str) -> GradientError:
    """The GradientError of a call whose gradient the catalogue's rule does not cover."""
    return GradientError(
        message(name, where, problem, found, "call it without requires_grad (.detach()), or pass a method it covers")
    )


def unit_responses(
    build: Callable[[NDArray[Any]], Callable[[NDArray[Any]], Any]], n: int, queries: NDArray[Any], g: NDArray[Any]
) -> NDArray[Any]:
    """``sum_i g[i] * S_j(queries[i])`` for each of ``n`` samples ``j``, ``S_j`` the spline
    ``build`` makes of the unit sample ``j`` (samples along axis 0): the transpose of a spline
    linear in its samples, built a block of unit samples at a time. A query where ``S_j`` is
    NaN (outside, not extrapolated) reads no sample."""
    into = np.empty((n, g.shape[1]))
    for start in range(0, n, _BLOCK):
        units = np.eye(n, min(_BLOCK, n - start), -start)
        read = np.asarray(build(units)(queries)).reshape(queries.shape[0], -1)
        into[start : start + units.shape[1]] = np.nan_to_num(read, nan=0.0).T @ g
    return into


def _bc_of_units(bc_type: Any, units: NDArray[Any]) -> Any:
    """``bc_type`` for the splines of ``units``, unit samples: derivative values at the ends
    are the spline's affine part, no sample's, so they are zeros there."""
    zeros = np.zeros(units.shape[1:])
    if isinstance(bc_type, tuple) and len(bc_type) == 2 and not isinstance(bc_type[0], str):
        return tuple(
            None if end is None else [(order, zeros) for order, _ in end] if isinstance(end, list) else (end[0], zeros)
            for end in bc_type
        )
    return bc_type


@dataclasses.dataclass(frozen=True)
class _Line:
    """How an interpolant on a line is read by its call, for the call's rule: ``units(call,
    units)``, the same interpolant of unit samples, read as the call reads it (None: the
    interpolant is not linear in its samples); ``slope(call, points)``, its derivative at the
    points, laid out as the call's result."""

    units: Callable[[Call, NDArray[Any]], Callable[[NDArray[Any]], Any]] | None
    slope: Callable[[Call, NDArray[Any]], Any]


def _line_vjp(name: str, line: _Line) -> Callable[[Call, Any, tuple[str, ...]], Mapping[str, Any]]:
    """The vjp of the call of ``line``'s interpolant (``call["spline"]``, samples ``y`` along
    its ``axis``) at the points ``x``."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        axis = call["spline"].axis
        x = np.asarray(call["x"], dtype=float)
        g = np.asarray(grad, dtype=float)
        lead, trail = g.shape[:axis], g.shape[axis + x.ndim :]

        def per_query(a: NDArray[Any]) -> NDArray[Any]:
            return np.moveaxis(a.reshape((*lead, x.size, *trail)), axis, 0).reshape(x.size, -1)

        found: dict[str, Any] = {}
        if "y" in wanted:
            assert line.units is not None  # y is taken only where the interpolant is linear in it
            n = np.shape(call["y"])[axis]
            into = unit_responses(functools.partial(line.units, call), n, x.reshape(-1), per_query(g))
            found["y"] = np.moveaxis(into.reshape((n, *lead, *trail)), 0, axis)
        if "x" in wanted:
            slope = per_query(np.asarray(line.slope(call, x.reshape(-1)), dtype=float))
            found["x"] = np.nansum(slope * per_query(g), axis=1).reshape(x.shape)
        return found

    return vjp


def _periodic_samples(arguments: Mapping[str, Any]) -> Mapping[str, tuple[str, str]]:
    """A periodic spline's samples take no gradient: its first and last are one sample, which
    the rule of unit samples cannot vary alone (see ``Built.unkept``)."""
    bc_type = arguments.get("bc_type")
    if not (isinstance(bc_type, str) and bc_type == "periodic"):
        return {}
    return {
        "y": (
            "is a periodic spline's samples, whose first and last are one sample, and the catalogue's rule gives "
            "them no gradient: none flows into them, while the points the spline is read at take theirs",
            "bc_type='periodic'",
        )
    }


def _spline_slope(call: Call, points: NDArray[Any]) -> Any:
    """A PPoly's or BSpline's derivative, of the call's order ``nu``, at ``points``."""
    return call["spline"](points, call["nu"] + 1, call["extrapolate"])


def _cubic_spline(call: Call, units: NDArray[Any]) -> Callable[[NDArray[Any]], Any]:
    from scipy.interpolate import CubicSpline

    given = call["built"].arguments
    made = CubicSpline(given["x"], units, 0, _bc_of_units(given["bc_type"], units), given["extrapolate"])
    derived = call["built"].derive(made)
    return lambda q: derived(q, call["nu"], call["extrapolate"])


def _interp_spline(call: Call, units: NDArray[Any]) -> Callable[[NDArray[Any]], Any]:
    from scipy.interpolate import make_interp_spline

    given = call["built"].arguments
    made = make_interp_spline(given["x"], units, given["k"], given["t"], _bc_of_units(given["bc_type"], units), axis=0)
    derived = call["built"].derive(made)
    return lambda q: derived(q, call["nu"], call["extrapolate"])


#: interp1d's kinds as spline orders (0 for the piecewise constant ones: no slope).
_KIND_ORDERS = {"linear": 1, "slinear": 1, "quadratic": 2, "cubic": 3}


def _interp1d_units(call: Call, units: NDArray[Any]) -> Callable[[NDArray[Any]], Any]:
    """interp1d of unit samples: its fill (no sample's) is zero, its extrapolation kept."""
    from scipy.interpolate import interp1d

    given = call["built"].arguments
    fill = "extrapolate" if _extrapolates(given) else 0.0
    made: Callable[[NDArray[Any]], Any] = interp1d(
        given["x"], units, given["kind"], 0, bounds_error=False, fill_value=fill
    )
    return made


def _extrapolates(given: Mapping[str, Any]) -> bool:
    """Whether interp1d was built to extrapolate (its fill_value may also be an array)."""
    fill = given["fill_value"]
    return isinstance(fill, str) and fill == "extrapolate"


def _interp1d_slope(call: Call, points: NDArray[Any]) -> Any:
    """interp1d's slope: its spline's derivative (SciPy's kinds are splines of the sorted
    samples), zero for the piecewise constant kinds and where the result is the fill."""
    from scipy.interpolate import make_interp_spline

    made, given = call["spline"], call["built"].arguments
    kind = given["kind"]
    order = kind if isinstance(kind, int) else _KIND_ORDERS.get(kind, 0)
    shape = np.shape(made(points))
    if order == 0:
        return np.zeros(shape)
    order_of_x = np.argsort(np.asarray(given["x"]), kind="stable")
    y = np.take(np.asarray(call["y"], dtype=float), order_of_x, axis=made.axis)
    slope = make_interp_spline(np.asarray(given["x"])[order_of_x], y, order, axis=made.axis).derivative()
    line = np.asarray(given["x"])
    inside = (points >= line.min()) & (points <= line.max())
    if not _extrapolates(given):
        points = np.where(inside, points, line.min())
    found = np.asarray(slope(points))
    if not _extrapolates(given):
        where = [1] * found.ndim
        where[made.axis] = points.size
        found = np.where(inside.reshape(where), found, 0.0)
    return found


# The object's own call's parameters, after the object and what built it: positional, as the
# op gives gradients to positional tensors, and as the object takes them.
def _spline_call(  # noqa: PLR0917
    spline: Any, built: Construction, y: Any, x: Any, nu: int = 0, extrapolate: Any = None
) -> Any:
    return spline(x, nu, extrapolate)


def _shape_call(spline: Any, built: Construction, x: Any, nu: int = 0, extrapolate: Any = None) -> Any:
    return spline(x, nu, extrapolate)


def _interp1d_call(spline: Any, built: Construction, y: Any, x: Any) -> Any:
    return spline(x)


_SPLINES = "the spline's call, any nu and extrapolate; y along any axis"
_BC = "every bc_type (end derivatives' values take no gradient; periodic: none in y)"
_SHAPE_PRESERVING = (
    "the call's x alone: the interpolant is not linear in y, which takes no gradient; any nu and extrapolate"
)


def line_builders() -> dict[Any, Built]:
    """The interpolants on a line whose objects' calls keep the gradient of the samples they
    were built from, by class (or factory)."""
    from scipy import interpolate

    spline = ("y", "x"), _spline_call, {"x", "axis", "extrapolate"}  # what the samples do not change
    table: list[tuple[Any, tuple[tuple[str, ...], Any, set[str]], _Line, str]] = [
        (interpolate.CubicSpline, spline, _Line(_cubic_spline, _spline_slope), f"{_SPLINES}; {_BC}"),
        (
            interpolate.make_interp_spline,
            (("y", "x"), _spline_call, {"t", "k", "axis", "extrapolate"}),
            _Line(_interp_spline, _spline_slope),
            f"{_SPLINES}; any k; {_BC}",
        ),
        (
            interpolate.interp1d,
            (("y", "x"), _interp1d_call, {"x", "axis", "bounds_error", "fill_value", "assume_sorted"}),
            _Line(_interp1d_units, _interp1d_slope),
            "every kind (zero in x for the piecewise constant ones); y along any axis; fill_value, also extrapolate",
        ),
        (interpolate.PchipInterpolator, (("x",), _shape_call, set()), _Line(None, _spline_slope), _SHAPE_PRESERVING),
        (interpolate.Akima1DInterpolator, (("x",), _shape_call, set()), _Line(None, _spline_slope), _SHAPE_PRESERVING),
    ]
    found = {}
    for builder, (takes, call, unrelated), line, covers in table:
        name = f"scipy.interpolate.{builder.__name__}"
        evaluator = Built.evaluator(call, f"{builder.__name__}.__call__", "scipy.interpolate")
        rule = Rule(name, evaluator, takes, _line_vjp(name, line), covers=covers)
        keeps = tuple(t for t in takes if t != "x")
        derived = frozenset() if builder is interpolate.interp1d else frozenset({"derivative", "antiderivative"})
        unkept = _periodic_samples if builder in (interpolate.CubicSpline, interpolate.make_interp_spline) else None
        calls = {"__call__": (evaluator, rule)}
        found[builder] = Built(name, builder, keeps, calls, frozenset(unrelated), derived, unkept)
    return found
