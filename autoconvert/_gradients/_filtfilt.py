"""Rules for ``scipy.signal.filtfilt`` (``method="pad"``), in ``b``, ``a`` and ``x``, and
``sosfiltfilt`` in ``x``.

Both are linear in ``x``: the signal is extended at both ends (``padtype``, ``padlen``),
filtered forward from the steady state of its first sample (``zi * ext[0]``, ``zi`` from
``lfilter_zi``), filtered backward alike from its last output, and cut back to ``x``'s
length. The adjoint takes the steps in reverse, each transposed: the cut's transpose pads
the gradient with zeros, each pass's transpose is the filter run backwards in time plus what
the initial state adds onto the sample it was scaled by, and the extension's transpose adds
each padded sample's gradient back onto the samples it was made from. The jvp is the same
SciPy call on the tangent. In the coefficients, the passes are replayed as ``lfilter`` calls
from a state, whose rule gives their share, and ``lfilter_zi``'s steady state is
differentiated through its linear system. Gustafsson's method (``method="gust"``) has no rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autoconvert._errors import GradientError, message

from ._filters import _lfilter_jvp, _lfilter_vjp, _transposed
from ._rule import Call

#: One pass's transpose: the gradient of its output onto its input (the state's share included).
Pass = Callable[[NDArray[Any]], NDArray[Any]]


def _edge(call: Call, taps: int) -> int:
    """The samples added at each end, as SciPy's ``_validate_pad`` counts them."""
    if call["padtype"] is None:
        return 0
    return 3 * taps if call["padlen"] is None else int(call["padlen"])


def _unextended(g: NDArray[Any], edge: int, padtype: str) -> NDArray[Any]:
    """The transpose of SciPy's ``odd_ext``, ``even_ext`` and ``const_ext`` along the last axis:
    each padded sample's gradient added onto the samples it was made from."""
    left, found, right = g[..., :edge], np.array(g[..., edge:-edge]), g[..., -edge:]
    n = found.shape[-1]
    if padtype == "constant":
        found[..., 0] += left.sum(-1)
        found[..., -1] += right.sum(-1)
        return found
    # odd: 2 x[0] - x[edge - k] on the left, 2 x[-1] - x[-2 - k] on the right; even: x[edge - k], x[-2 - k]
    sign = -1.0 if padtype == "odd" else 1.0
    if padtype == "odd":
        found[..., 0] += 2 * left.sum(-1)
        found[..., -1] += 2 * right.sum(-1)
    found[..., 1 : edge + 1] += sign * left[..., ::-1]
    found[..., n - 1 - edge : n - 1] += sign * right[..., ::-1]
    return found


def _both_ways(g: NDArray[Any], edge: int, padtype: str | None, transposed: Pass) -> NDArray[Any]:
    """The adjoint of the two passes and the extension around them, along the last axis."""
    if edge:
        g = np.pad(g, [(0, 0)] * (g.ndim - 1) + [(edge, edge)])
    g = transposed(np.flip(transposed(np.flip(g, -1)), -1))  # the second pass ran on the first's reversal
    return _unextended(g, edge, padtype) if edge else g  # type: ignore[arg-type]  # a padtype where edge > 0


def _from_its_first_sample(b: Any, a: Any, zi: NDArray[Any]) -> Pass:
    """The transpose of ``s ↦ lfilter(b, a, s, zi=zi * s[0])`` along the last axis."""
    a0 = float(np.ravel(a)[0])

    def transposed(g: NDArray[Any]) -> NDArray[Any]:
        u = _transposed([1.0], a, g)
        found = np.array(_transposed(b, [1.0], u))
        first = min(zi.size, u.shape[-1])
        found[..., 0] += a0 * (u[..., :first] @ zi[:first])
        return found

    return transposed


def _not_gust(call: Call) -> None:
    if call["method"] == "gust":
        raise GradientError(
            message(
                "scipy.signal.filtfilt",
                'method="gust"',
                "was given, and the catalogue's rule covers the padded method alone",
                "Gustafsson's method",
                'pass method="pad" (with padtype= and padlen= as needed), or give numpy_op a backward= of your own',
            )
        )


def _filtfilt_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    from scipy import signal

    _not_gust(call)
    b, a = np.atleast_1d(np.asarray(call["b"], dtype=float)), np.atleast_1d(np.asarray(call["a"], dtype=float))
    axis = int(call["axis"]) % max(np.ndim(call["x"]), 1)
    g = np.moveaxis(np.asarray(grad), axis, -1)
    if "b" in wanted or "a" in wanted:
        found = _Passes(call, b, a).vjp(g)
        return {"x": np.moveaxis(found.pop("x"), -1, axis), **found}
    zi = signal.lfilter_zi(b, a)
    x = _both_ways(g, _edge(call, max(b.size, a.size)), call["padtype"], _from_its_first_sample(b, a, zi))
    return {"x": np.moveaxis(x, -1, axis)}


def _filtfilt_jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
    from scipy import signal

    _not_gust(call)
    if "b" in tangents or "a" in tangents:
        b, a = np.atleast_1d(np.asarray(call["b"], dtype=float)), np.atleast_1d(np.asarray(call["a"], dtype=float))
        return _Passes(call, b, a).jvp(tangents, int(call["axis"]) % max(np.ndim(call["x"]), 1))
    options = {k: call[k] for k in ("axis", "padtype", "padlen", "method")}
    return signal.filtfilt(call["b"], call["a"], tangents["x"], **options)


def _extended(x: NDArray[Any], edge: int, padtype: str | None) -> NDArray[Any]:
    """SciPy's ``odd_ext``, ``even_ext`` or ``const_ext`` along the last axis (none for 0 or None)."""
    if not edge or padtype is None:
        return x
    first, last = x[..., :1], x[..., -1:]
    left, right = x[..., edge:0:-1], x[..., -2 : -edge - 2 : -1]
    if padtype == "odd":
        left, right = 2 * first - left, 2 * last - right
    elif padtype == "constant":
        left, right = np.repeat(first, edge, -1), np.repeat(last, edge, -1)
    return np.concatenate([left, x, right], -1)


class _Steady:
    """``lfilter_zi(b, a)``, the steady state of the step response, and its derivative in the
    coefficients: ``zi = M⁻¹ (b'[1:] - a'[1:] b'[0])``, ``M = I - companion(a')ᵀ``, over the
    coefficients ``b' = b / a[0]``, ``a' = a / a[0]`` padded to one length."""

    def __init__(self, b: NDArray[Any], a: NDArray[Any]) -> None:
        from scipy import linalg, signal

        self.b, self.a, self.a0 = b, a, a[0]
        size = max(b.size, a.size)
        self.bn = np.pad(b / a[0], (0, size - b.size))
        self.an = np.pad(a / a[0], (0, size - a.size))
        self.m = np.eye(size - 1) - linalg.companion(self.an).T
        self.zi = signal.lfilter_zi(b, a)

    def tangent(self, tb: NDArray[Any], ta: NDArray[Any]) -> NDArray[Any]:
        size = self.bn.size
        dbn = np.pad(tb / self.a0, (0, size - tb.size)) - self.bn * ta[0] / self.a0
        dan = np.pad(ta / self.a0, (0, size - ta.size)) - self.an * ta[0] / self.a0
        right = dbn[1:] - dan[1:] * self.bn[0] - self.an[1:] * dbn[0] - dan[1:] * self.zi[0]
        return np.linalg.solve(self.m, right)

    def transposed(self, gz: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
        """The gradients of ``b`` and ``a`` from ``gz``, the gradient of ``zi``."""
        w = np.linalg.solve(self.m.T, gz)
        gbn = np.concatenate([[-w @ self.an[1:]], w])
        gan = np.concatenate([[0.0], -w * (self.bn[0] + self.zi[0])])
        gb = gbn[: self.b.size] / self.a0
        ga = gan[: self.a.size] / self.a0
        ga[0] -= (gbn @ self.bn + gan @ self.an) / self.a0
        return gb, ga


class _Passes:
    """``filtfilt``'s steps along the last axis, replayed for the gradients in ``b`` and ``a``:
    each pass an ``lfilter`` call from ``zi * s[0]``, whose rule gives its share."""

    def __init__(self, call: Call, b: NDArray[Any], a: NDArray[Any]) -> None:
        from scipy import signal

        x = np.asarray(call["x"])
        self.b, self.a, self.steady = b, a, _Steady(b, a)
        self.edge, self.padtype = _edge(call, max(b.size, a.size)), call["padtype"]
        self.ext = _extended(np.moveaxis(x, int(call["axis"]) % max(x.ndim, 1), -1), self.edge, self.padtype)
        zi = self.steady.zi
        self.first = signal.lfilter(b, a, self.ext, zi=zi * self.ext[..., :1])[0]
        self.reversed = np.flip(self.first, -1)
        self.second = signal.lfilter(b, a, self.reversed, zi=zi * self.reversed[..., :1])[0]

    def _call(self, s: NDArray[Any], y: NDArray[Any]) -> Call:
        state = self.steady.zi * s[..., :1]
        return Call({"b": self.b, "a": self.a, "x": s, "axis": -1, "zi": state}, (y, None))

    def _cut(self, y: NDArray[Any]) -> NDArray[Any]:
        return y[..., self.edge : y.shape[-1] - self.edge]

    def vjp(self, g: NDArray[Any]) -> dict[str, NDArray[Any]]:
        gb, ga, gz = np.zeros_like(self.b), np.zeros_like(self.a), np.zeros_like(self.steady.zi)
        g = np.flip(np.pad(g, [(0, 0)] * (g.ndim - 1) + [(self.edge, self.edge)]), -1)
        for s, y in ((self.reversed, self.second), (self.ext, self.first)):
            found = _lfilter_vjp(self._call(s, y), (g, None), ("b", "a", "x", "zi"))
            gb, ga = gb + found["b"], ga + found["a"]
            start = s[..., :1]
            gz = gz + np.sum(found["zi"] * start, axis=tuple(range(s.ndim - 1)))
            g = np.array(found["x"])
            g[..., 0] += found["zi"] @ self.steady.zi
            g = np.flip(g, -1) if s is self.reversed else g
        sb, sa = self.steady.transposed(gz)
        x = _unextended(g, self.edge, self.padtype) if self.edge and self.padtype else g
        return {"x": x, "b": gb + sb, "a": ga + sa}

    def jvp(self, tangents: Mapping[str, Any], axis: int) -> NDArray[Any]:
        tb = np.asarray(tangents["b"], dtype=float) if "b" in tangents else np.zeros_like(self.b)
        ta = np.asarray(tangents["a"], dtype=float) if "a" in tangents else np.zeros_like(self.a)
        tx = np.moveaxis(np.asarray(tangents["x"]), axis, -1) if "x" in tangents else np.zeros(self.ext.shape[:-1])
        moving = _extended(tx, self.edge, self.padtype) if "x" in tangents else np.zeros_like(self.ext)
        zi, dzi = self.steady.zi, self.steady.tangent(tb, ta)
        for s, y in ((self.ext, self.first), (self.reversed, self.second)):
            state = dzi * s[..., :1] + zi * moving[..., :1]
            moved = _lfilter_jvp(self._call(s, y), {"b": tb, "a": ta, "x": moving, "zi": state})[0]
            moving = np.flip(moved, -1)
        return np.moveaxis(self._cut(moving), -1, axis)


def _sos_taps(sos: NDArray[Any]) -> int:
    """SciPy's count of taps of a cascade, which sets its default padding."""
    return int(2 * len(sos) + 1 - min((sos[:, 2] == 0).sum(), (sos[:, 5] == 0).sum()))


def _cascade_from_its_first_sample(sos: NDArray[Any]) -> Pass:
    """The transpose of ``s ↦ sosfilt(sos, s, zi=sosfilt_zi(sos) * s[0])`` along the last axis."""
    from scipy import signal

    states = signal.sosfilt_zi(sos)

    def transposed(g: NDArray[Any]) -> NDArray[Any]:
        first = np.zeros(g.shape[:-1])
        for row, zi in zip(sos[::-1], states[::-1], strict=True):
            u = _transposed([1.0], row[3:], g)
            g = _transposed(row[:3], [1.0], u)
            width = min(zi.size, u.shape[-1])
            first = first + u[..., :width] @ zi[:width]  # sosfilt's a[0] is 1
        found = np.array(g)
        found[..., 0] += first
        return found

    return transposed


def _sosfiltfilt_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    sos = np.atleast_2d(np.asarray(call["sos"], dtype=float))
    axis = int(call["axis"]) % max(np.ndim(call["x"]), 1)
    g = np.moveaxis(np.asarray(grad), axis, -1)
    found = _both_ways(g, _edge(call, _sos_taps(sos)), call["padtype"], _cascade_from_its_first_sample(sos))
    return {"x": np.moveaxis(found, -1, axis)}


def _sosfiltfilt_jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
    from scipy import signal

    options = {k: call[k] for k in ("axis", "padtype", "padlen")}
    return signal.sosfiltfilt(np.array(call["sos"]), tangents["x"], **options)


def rules() -> dict[Any, tuple[tuple[str, ...], tuple[Any, Any], str]]:
    """The two-pass filters' rules: for each function, the parameters taking gradients, the vjp and jvp, and what they cover."""
    from scipy import signal

    pads = "any axis; padtype odd, even, constant or None; padlen"
    return {
        signal.filtfilt: (("b", "a", "x"), (_filtfilt_vjp, _filtfilt_jvp), f'{pads}; method="pad"'),
        signal.sosfiltfilt: (("x",), (_sosfiltfilt_vjp, _sosfiltfilt_jvp), pads),
    }
