"""Rules for ``scipy.integrate``'s rules on samples: trapezoid, cumulative_trapezoid, simpson.

Each is linear in the samples ``y``; the trapezoidal ones are sums of ``d_j (y_j + y_j+1) / 2``
over the spacings ``d = diff(x)`` (or ``dx``), so ``x`` and ``dx`` take gradients too.
Simpson's weights on the samples are SciPy's own: the integrals of the unit samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._rule import Call, Rule


def _line(call: Call) -> tuple[NDArray[Any], int, Any]:
    """The samples, the axis integrated along (counted from 0) and the spacings, shaped to
    broadcast against the ``n - 1`` intervals along it (as SciPy shapes them)."""
    y = np.asarray(call["y"], dtype=float)
    axis = int(call["axis"]) % y.ndim
    x = call["x"]
    if x is None:
        return y, axis, call["dx"]
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        shape = [1] * y.ndim
        shape[axis] = x.shape[0] - 1
        return y, axis, np.diff(x).reshape(shape)
    return y, axis, np.diff(x, axis=axis)


def _ends(y: NDArray[Any], axis: int) -> tuple[NDArray[Any], NDArray[Any]]:
    """The samples opening and closing each interval along ``axis``."""
    n = y.shape[axis]
    return np.take(y, range(n - 1), axis=axis), np.take(y, range(1, n), axis=axis)


def _spread(per_interval: NDArray[Any], axis: int, sign: float = 1.0) -> NDArray[Any]:
    """Each interval's value added onto its closing sample, and ``sign`` times onto its opening one."""
    shape = list(per_interval.shape)
    shape[axis] += 1
    out = np.zeros(shape, dtype=per_interval.dtype)
    index = [slice(None)] * len(shape)
    index[axis] = slice(0, -1)
    out[tuple(index)] += sign * per_interval
    index[axis] = slice(1, None)
    out[tuple(index)] += per_interval
    return out


def _trapezoidal_vjp(call: Call, weights: NDArray[Any], axis: int, wanted: tuple[str, ...]) -> dict[str, Any]:
    """The gradients of ``sum(weights_j * d_j * (y_j + y_j+1) / 2)``, ``weights`` per interval."""
    y, axis, d = _line(call)
    first, last = _ends(y, axis)
    found: dict[str, Any] = {}
    if "y" in wanted:
        found["y"] = _spread(np.broadcast_to(weights * d / 2.0, first.shape), axis)
    mean = weights * (first + last) / 2.0
    if "x" in wanted and call["x"] is not None:
        x = np.asarray(call["x"])
        if x.ndim == 1:
            mean = np.sum(mean, axis=tuple(a for a in range(y.ndim) if a != axis))
            found["x"] = _spread(mean, 0, -1.0)
        else:
            found["x"] = _spread(mean, axis, -1.0)
    if "dx" in wanted and call["x"] is None:
        found["dx"] = np.sum(mean)
    return found


def _trapezoid_rules() -> tuple[Any, Any]:
    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        y = np.asarray(call["y"])
        axis = int(call["axis"]) % y.ndim
        return _trapezoidal_vjp(call, np.expand_dims(np.asarray(grad, dtype=float), axis), axis, wanted)

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        from scipy import integrate

        total: Any = 0.0
        if "y" in tangents:
            total = integrate.trapezoid(tangents["y"], call["x"], call["dx"], call["axis"])
        y, axis, _ = _line(call)
        first, last = _ends(y, axis)
        if "x" in tangents and call["x"] is not None:
            _, _, moved = _line(Call({**call.arguments, "x": tangents["x"]}, None))
            total = total + np.sum(moved * (first + last) / 2.0, axis=axis)
        if "dx" in tangents and call["x"] is None:
            total = total + tangents["dx"] * np.sum((first + last) / 2.0, axis=axis)
        return total

    return vjp, jvp


def _cumulative_rules() -> tuple[Any, Any]:
    """``cumulative_trapezoid``: the interval ``j`` counts in every result from ``j`` on, so
    its weight is the sum of the result's gradient from there (the leading ``initial`` is
    a constant)."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        y = np.asarray(call["y"])
        axis = int(call["axis"]) % y.ndim
        g = np.asarray(grad, dtype=float)
        if call["initial"] is not None:
            g = np.take(g, range(1, g.shape[axis]), axis=axis)
        weights = np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)
        return _trapezoidal_vjp(call, weights, axis, wanted)

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        from scipy import integrate

        y, axis, _ = _line(call)
        first, last = _ends(y, axis)
        total: Any = 0.0
        if "y" in tangents:
            total = integrate.cumulative_trapezoid(tangents["y"], call["x"], call["dx"], axis, initial=None)
        if "x" in tangents and call["x"] is not None:
            _, _, moved = _line(Call({**call.arguments, "x": tangents["x"]}, None))
            total = total + np.cumsum(moved * (first + last) / 2.0, axis=axis)
        if "dx" in tangents and call["x"] is None:
            total = total + tangents["dx"] * np.cumsum((first + last) / 2.0, axis=axis)
        if call["initial"] is not None:
            total = np.concatenate([np.zeros_like(np.take(y, [0], axis=axis)), total], axis=axis)
        return total

    return vjp, jvp


def _simpson_weights(call: Call) -> NDArray[Any]:
    """Simpson's weight of each sample, in the samples' shape: SciPy's integral of each unit
    sample (one line's where ``x`` is a line or absent)."""
    from scipy import integrate

    y = np.asarray(call["y"])
    axis, n, x = int(call["axis"]) % y.ndim, y.shape[int(call["axis"]) % y.ndim], call["x"]
    if x is None or np.ndim(x) == 1:
        line = integrate.simpson(np.eye(n), x=x, dx=call["dx"], axis=-1)
        shape = [1] * y.ndim
        shape[axis] = n
        return np.broadcast_to(line.reshape(shape), y.shape)
    units = np.broadcast_to(np.eye(n).reshape((n, *([1] * axis), n, *([1] * (y.ndim - axis - 1)))), (n, *y.shape))
    each = integrate.simpson(units, x=np.broadcast_to(x, units.shape), dx=call["dx"], axis=axis + 1)
    return np.moveaxis(each, 0, axis)


def _simpson_rules() -> tuple[Any, Any]:
    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        axis = int(call["axis"]) % np.ndim(call["y"])
        return {"y": _simpson_weights(call) * np.expand_dims(np.asarray(grad, dtype=float), axis)}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        from scipy import integrate

        return integrate.simpson(tangents["y"], x=call["x"], dx=call["dx"], axis=call["axis"])

    return vjp, jvp


def rules() -> dict[Any, Rule]:
    """The rules of ``scipy.integrate``'s functions, by function."""
    from scipy import integrate

    spacing = "x as a line along the axis or in the samples' shape, or dx"
    return {
        integrate.trapezoid: Rule(
            "scipy.integrate.trapezoid", integrate.trapezoid, ("y", "x", "dx"), *_trapezoid_rules(), covers=spacing
        ),
        integrate.cumulative_trapezoid: Rule(
            "scipy.integrate.cumulative_trapezoid",
            integrate.cumulative_trapezoid,
            ("y", "x", "dx"),
            *_cumulative_rules(),
            covers=f"{spacing}; initial",
        ),
        integrate.simpson: Rule(
            "scipy.integrate.simpson",
            integrate.simpson,
            ("y",),
            *_simpson_rules(),
            covers=f"{spacing}; odd and even counts",
        ),
    }
