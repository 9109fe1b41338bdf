"""Rules for ``scipy.interpolate``'s ``interpn``, ``griddata`` and ``RegularGridInterpolator``'s
call; with those of its interpolants on a line (see _lines), its catalogue.

Each interpolant here is linear in the values it interpolates, so the gradient in the values
is the interpolation's transpose: each query's gradient added onto the samples it read, with
the weights it read them with (grid corners, a simplex's vertices, the nearest sample). The
gradient in the query points is the interpolant's own derivative there.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._built import Built, Construction
from ._lines import line_builders, uncovered, unit_responses
from ._rule import Call, Rule


def _queries(xi: Any, ndim: int) -> NDArray[Any]:
    """The query points as rows ``(m, ndim)``: an array ``(..., ndim)`` or a tuple of coordinates."""
    if isinstance(xi, tuple):
        xi = np.stack(np.broadcast_arrays(*(np.asarray(c, dtype=float) for c in xi)), axis=-1)
    return np.asarray(xi, dtype=float).reshape(-1, ndim)


def _per_query(grad: Any, m: int) -> NDArray[Any]:
    """The result's gradient as one row per query, ``(m, T)`` for values of ``T`` components."""
    return np.asarray(grad, dtype=float).reshape(m, -1)


# interpn: a regular grid's corners.


def _corners(
    grids: list[NDArray[Any]], queries: NDArray[Any], method: str
) -> list[tuple[tuple[NDArray[Any], ...], NDArray[Any], list[NDArray[Any]]]]:
    """Each grid corner a query reads, as SciPy's ``RegularGridInterpolator`` finds them: its
    index per axis, its weight, and the weight's derivative in each coordinate."""
    cells, fractions, widths = [], [], []
    for k, grid in enumerate(grids):
        x = queries[:, k]
        i = np.clip(np.searchsorted(grid, x) - 1, 0, grid.shape[0] - 2)
        widths.append(grid[i + 1] - grid[i])
        fractions.append((x - grid[i]) / widths[-1])
        cells.append(i)
    if method == "nearest":
        index = tuple(np.where(t <= 0.5, i, i + 1) for i, t in zip(cells, fractions, strict=True))
        return [(index, np.ones(queries.shape[0]), [np.zeros(queries.shape[0])] * len(grids))]
    found = []
    for upper in itertools.product((False, True), repeat=len(grids)):
        factors = [t if u else 1.0 - t for t, u in zip(fractions, upper, strict=True)]
        slopes = []
        for j, (u, width) in enumerate(zip(upper, widths, strict=True)):
            others = np.prod([f for k, f in enumerate(factors) if k != j], axis=0)
            slopes.append(others * (1.0 if u else -1.0) / width)
        index = tuple(i + u for i, u in zip(cells, upper, strict=True))
        found.append((index, np.prod(factors, axis=0), slopes))
    return found


def _interpn_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    grid = (call["points"], call["values"], call["method"], call["fill_value"])
    return _grid_vjp("scipy.interpolate.interpn", grid, call["xi"], grad, wanted)


def _grid_vjp(
    name: str, grid: tuple[Any, Any, str, Any], xi: Any, grad: Any, wanted: tuple[str, ...]
) -> dict[str, Any]:
    """The gradients of a regular grid's interpolation at ``xi``, ``grid`` its points, values,
    method and fill value (None: extrapolated)."""
    points, values, method, fill_value = grid
    if method not in ("linear", "nearest"):
        raise uncovered(name, "argument method", "is one the catalogue's rule does not cover", repr(method))
    grids = [np.asarray(p, dtype=float) for p in points]
    values = np.asarray(values, dtype=float)
    ndim = len(grids)
    descending = [k for k, g in enumerate(grids) if g.shape[0] > 1 and g[0] > g[-1]]
    grids = [g[::-1] if k in descending else g for k, g in enumerate(grids)]
    values = np.flip(values, tuple(descending)) if descending else values  # as SciPy reads a descending grid
    queries = _queries(xi, ndim)
    g = _per_query(grad, queries.shape[0])
    unread = np.isnan(queries).any(axis=1)  # a NaN query reads no sample
    if fill_value is not None:  # outside the grid the result is the fill, read from no sample
        unread |= np.any([(q < grid[0]) | (q > grid[-1]) for q, grid in zip(queries.T, grids, strict=True)], axis=0)
    g = np.where(unread[:, None], 0.0, g)
    queries = np.where(unread[:, None], np.array([grid[0] for grid in grids]), queries)
    corners = _corners(grids, queries, method)
    table = values.reshape((*values.shape[:ndim], -1))
    found: dict[str, Any] = {}
    if "values" in wanted:
        into: NDArray[Any] = np.zeros(table.shape)
        for index, weight, _ in corners:
            np.add.at(into, index, weight[:, None] * g)
        into = into.reshape(values.shape)
        found["values"] = np.flip(into, tuple(descending)) if descending else into
    if "xi" in wanted:
        moved = np.zeros(queries.shape)
        for index, _, slopes in corners:
            read = np.sum(table[index] * g, axis=1)
            for j, slope in enumerate(slopes):
                moved[:, j] += slope * read
        found["xi"] = moved.reshape(np.shape(xi))
    return found


# griddata: simplices, the nearest sample, or a spline on a line.


def _griddata_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    points, method = call["points"], call["method"]
    points = np.column_stack(points) if isinstance(points, tuple) else np.asarray(points, dtype=float)
    points = points.reshape(points.shape[0], -1)
    n, ndim = points.shape
    values = np.asarray(call["values"], dtype=float)
    queries = _queries(call["xi"], ndim)
    g = _per_query(grad, queries.shape[0])
    table = values.reshape(n, -1)
    if method == "nearest":
        found = _nearest(call, points, queries, g, wanted)
    elif ndim == 1:
        found = _on_a_line(call, points[:, 0], table, queries[:, 0], g, wanted=wanted)
    elif method == "linear":
        found = _simplices(call, points, table, queries, g, wanted=wanted)
    else:
        raise uncovered(
            "scipy.interpolate.griddata",
            "argument method",
            "is 'cubic' in more than one dimension, whose Clough-Tocher gradients SciPy estimates iteratively, to a "
            "tolerance: the result is not linear in values, and the catalogue's rule does not cover it",
            f"method {method!r} on points in {ndim} dimensions",
        )
    if "values" in found:
        found["values"] = found["values"].reshape(values.shape)
    if "xi" in found:
        found["xi"] = found["xi"].reshape(np.shape(call["xi"]))
    return found


def _nearest(
    call: Call, points: NDArray[Any], queries: NDArray[Any], g: NDArray[Any], wanted: tuple[str, ...]
) -> dict[str, Any]:
    """The nearest sample of each query, SciPy's own: its interpolation of the samples' indices.
    The result is piecewise constant in ``xi``: its derivative there is zero."""
    from scipy.interpolate import griddata

    n = points.shape[0]
    on_line = queries[:, 0] if points.shape[1] == 1 else queries
    read = griddata(points, np.arange(n, dtype=float), on_line, method="nearest", rescale=call["rescale"])
    found: dict[str, Any] = {"xi": np.zeros(queries.shape)} if "xi" in wanted else {}
    if "values" in wanted:
        into = np.zeros((n, g.shape[1]))
        np.add.at(into, read.astype(np.intp).reshape(-1), g)
        found["values"] = into
    return found


def _simplices(
    call: Call,
    points: NDArray[Any],
    table: NDArray[Any],
    queries: NDArray[Any],
    g: NDArray[Any],
    *,
    wanted: tuple[str, ...],
) -> dict[str, Any]:
    """The simplex of SciPy's own triangulation each query falls in, and its barycentric
    weights there (the transform SciPy's linear interpolation reads them with)."""
    from scipy.interpolate import LinearNDInterpolator

    made = LinearNDInterpolator(points, np.zeros(points.shape[0]), rescale=call["rescale"])
    tri, ndim = made.tri, points.shape[1]
    scale = made.scale if call["rescale"] else np.ones(ndim)
    scaled = (queries - made.offset) / scale if call["rescale"] else queries
    simplex = tri.find_simplex(scaled)
    inside = simplex >= 0
    transform = tri.transform[simplex]  # outside (-1): some simplex's, weighted by no gradient
    partial = np.einsum("mij,mj->mi", transform[:, :ndim], scaled - transform[:, ndim])
    weights = np.column_stack([partial, 1.0 - partial.sum(axis=1)])
    vertices = tri.simplices[simplex]
    g = np.where(inside[:, None], g, 0.0)
    found: dict[str, Any] = {}
    if "values" in wanted:
        into = np.zeros(table.shape)
        np.add.at(into, vertices, weights[:, :, None] * g[:, None, :])
        found["values"] = into
    if "xi" in wanted:
        read = np.einsum("mkt,mt->mk", table[vertices], g)  # each vertex's value, against the gradient
        rows = np.concatenate([transform[:, :ndim], -transform[:, :ndim].sum(axis=1, keepdims=True)], axis=1)
        found["xi"] = np.einsum("mk,mkj->mj", read, rows) / scale
    return found


def _on_a_line(
    call: Call,
    points: NDArray[Any],
    table: NDArray[Any],
    queries: NDArray[Any],
    g: NDArray[Any],
    *,
    wanted: tuple[str, ...],
) -> dict[str, Any]:
    """griddata on a line: SciPy's ``interp1d`` through the sorted samples, linear or cubic."""
    from scipy.interpolate import interp1d, make_interp_spline

    order = np.argsort(points)
    line = points[order]
    inside = (queries >= line[0]) & (queries <= line[-1])  # outside, the fill: no sample read
    g = np.where(inside[:, None], g, 0.0)
    kind = call["method"]
    found: dict[str, Any] = {}
    if "values" in wanted:
        units = unit_responses(
            lambda u: interp1d(line, u, kind=kind, axis=0, bounds_error=False, fill_value=0.0),
            line.shape[0],
            queries,
            g,
        )
        into = np.empty_like(units)
        into[order] = units
        found["values"] = into
    if "xi" in wanted:
        spline = make_interp_spline(line, table[order], k=1 if kind == "linear" else 3)
        slope = spline.derivative()(np.clip(queries, line[0], line[-1]))
        found["xi"] = np.where(inside, np.sum(slope * g, axis=1), 0.0)
    return found


def _grid_call(
    interpolator: Any, built: Construction, values: Any, xi: Any, method: str | None = None, **nu: Any
) -> Any:
    return interpolator(xi, method, **nu)


def _grid_call_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    given = call["built"].arguments
    name = "scipy.interpolate.RegularGridInterpolator"
    nu = call["nu"].get("nu")  # keyword-only, where SciPy has it
    if nu is not None:
        raise uncovered(
            name, "argument nu", "asks for derivatives, which the catalogue's rule does not cover", repr(nu)
        )
    grid = (given["points"], call["values"], call["method"] or given["method"], given["fill_value"])
    return _grid_vjp(name, grid, call["xi"], grad, wanted)


def rules() -> dict[Any, Rule]:
    """The rules of ``scipy.interpolate``'s functions (and its splines' calls), by function."""
    from scipy import interpolate

    rules = {
        interpolate.interpn: Rule(
            "scipy.interpolate.interpn",
            interpolate.interpn,
            ("values", "xi"),
            _interpn_vjp,
            covers="methods linear and nearest (zero in xi: piecewise constant); descending grids; fill or extrapolation",
        ),
        interpolate.griddata: Rule(
            "scipy.interpolate.griddata",
            interpolate.griddata,
            ("values", "xi"),
            _griddata_vjp,
            covers="methods linear and nearest (zero in xi) in any dimension, cubic on a line; rescale",
        ),
    }
    for built in builders().values():
        for evaluator, rule in built.calls.values():
            rules[evaluator] = rule
    return rules


@functools.cache
def builders() -> dict[Any, Built]:
    """The classes (and factories) of ``scipy.interpolate`` whose objects' calls keep the
    gradient of the tensors they were built from, by class."""
    from scipy import interpolate

    found = line_builders()
    grid = Built.evaluator(_grid_call, "RegularGridInterpolator.__call__", "scipy.interpolate")
    name = "scipy.interpolate.RegularGridInterpolator"
    rule = Rule(name, grid, ("values", "xi"), _grid_call_vjp, covers="methods linear and nearest, as interpn")
    found[interpolate.RegularGridInterpolator] = Built(
        name,
        interpolate.RegularGridInterpolator,
        ("values",),
        {"__call__": (grid, rule)},
        frozenset({"grid", "method", "bounds_error", "fill_value"}),
    )
    return found
