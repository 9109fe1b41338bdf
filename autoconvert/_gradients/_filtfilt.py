"""Rules for ``scipy.signal.filtfilt`` (``method="pad"``), in ``b``, ``a`` and ``x``, and
``sosfiltfilt``, in ``sos`` and ``x``.

Both are linear in ``x``: the signal is extended at both ends (``padtype``, ``padlen``),
filtered forward from the steady state of its first sample (``zi * ext[0]``, ``zi`` from
``lfilter_zi``), filtered backward alike from its last output, and cut back to ``x``'s
length. The adjoint takes the steps in reverse, each transposed: the cut's transpose pads
the gradient with zeros, each pass's transpose is the filter run backwards in time plus what
the initial state adds onto the sample it was scaled by, and the extension's transpose adds
each padded sample's gradient back onto the samples it was made from. The jvp is the same
SciPy call on the tangent. In the coefficients, the passes are replayed as ``lfilter`` calls
from a state, section by section, whose rule gives their share, and the steady states
(``lfilter_zi``, ``sosfilt_zi``) are differentiated through their linear systems. Gustafsson's method (``method="gust"``) has no rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autoconvert._errors import GradientError, message

from ._filters import _lfilter_jvp, _lfilter_vjp, _run_backwards
from ._rule import Call, Rule

#: One pass's transpose: the gradient of its output onto its input (the state's share included).
FilterPass = Callable[[NDArray[Any]], NDArray[Any]]


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


def _both_ways(g: NDArray[Any], edge: int, padtype: str | None, transposed: FilterPass) -> NDArray[Any]:
    """The adjoint of the two passes and the extension around them, along the last axis."""
    if edge:
        g = np.pad(g, [(0, 0)] * (g.ndim - 1) + [(edge, edge)])
    g = transposed(np.flip(transposed(np.flip(g, -1)), -1))  # the second pass ran on the first's reversal
    return _unextended(g, edge, padtype) if edge else g  # type: ignore[arg-type]  # a padtype where edge > 0


def _from_its_first_sample(b: Any, a: Any, zi: NDArray[Any]) -> FilterPass:
    """The transpose of ``s ↦ lfilter(b, a, s, zi=zi * s[0])`` along the last axis."""
    a0 = float(np.ravel(a)[0])

    def transposed(g: NDArray[Any]) -> NDArray[Any]:
        u = _run_backwards([1.0], a, g)
        found = np.array(_run_backwards(b, [1.0], u))
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


def _coefficients(call: Call) -> tuple[NDArray[Any], NDArray[Any], int]:
    b, a = np.atleast_1d(np.asarray(call["b"], dtype=float)), np.atleast_1d(np.asarray(call["a"], dtype=float))
    return b, a, int(call["axis"]) % max(np.ndim(call["x"]), 1)


def _filtfilt_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    from scipy import signal

    _not_gust(call)
    b, a, axis = _coefficients(call)
    g = np.moveaxis(np.asarray(grad), axis, -1)
    edge = _edge(call, max(b.size, a.size))
    if "b" in wanted or "a" in wanted:
        x = np.moveaxis(np.asarray(call["x"]), axis, -1)
        found, gb, ga = _Passes(x, [(b, a)], edge, call["padtype"]).vjp(g)
        return {"x": np.moveaxis(found, -1, axis), "b": gb[0], "a": ga[0]}
    found = _both_ways(g, edge, call["padtype"], _from_its_first_sample(b, a, signal.lfilter_zi(b, a)))
    return {"x": np.moveaxis(found, -1, axis)}


def _filtfilt_jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
    from scipy import signal

    _not_gust(call)
    if "b" not in tangents and "a" not in tangents:
        options = {k: call[k] for k in ("axis", "padtype", "padlen", "method")}
        return signal.filtfilt(call["b"], call["a"], tangents["x"], **options)
    b, a, axis = _coefficients(call)
    tb = np.asarray(tangents["b"], dtype=float) if "b" in tangents else np.zeros_like(b)
    ta = np.asarray(tangents["a"], dtype=float) if "a" in tangents else np.zeros_like(a)
    tx = np.moveaxis(np.asarray(tangents["x"]), axis, -1) if "x" in tangents else None
    x = np.moveaxis(np.asarray(call["x"]), axis, -1)
    passes = _Passes(x, [(b, a)], _edge(call, max(b.size, a.size)), call["padtype"])
    return np.moveaxis(passes.jvp([tb], [ta], tx), -1, axis)


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


class _Steadies:
    """``sosfilt_zi``: each section's steady state ``lfilter_zi(b, a)`` scaled by the gain at
    frequency 0 (``sum(b) / sum(a)``) of the sections before it, and its derivative; one
    section is ``filtfilt``'s ``lfilter_zi``."""

    def __init__(self, sections: list[tuple[NDArray[Any], NDArray[Any]]]) -> None:
        self.sections = sections
        self.each = [_Steady(b, a) for b, a in sections]
        self.gains = [float(b.sum() / a.sum()) for b, a in sections]
        self.scales = [float(np.prod(self.gains[:k])) for k in range(len(sections))]
        self.zi = [scale * steady.zi for scale, steady in zip(self.scales, self.each, strict=True)]

    def _without(self, k: int, j: int) -> float:
        """The product of the gains before section ``k`` but ``j``'s: ``∂ scale_k / ∂ gain_j``."""
        return float(np.prod([g for i, g in enumerate(self.gains[:k]) if i != j]))

    def tangent(self, tb: list[NDArray[Any]], ta: list[NDArray[Any]]) -> list[NDArray[Any]]:
        dgains = [
            t.sum() / a.sum() - b.sum() * u.sum() / a.sum() ** 2
            for (b, a), t, u in zip(self.sections, tb, ta, strict=True)
        ]
        return [
            sum((dgains[j] * self._without(k, j) for j in range(k)), 0.0) * steady.zi
            + scale * steady.tangent(tb[k], ta[k])
            for k, (scale, steady) in enumerate(zip(self.scales, self.each, strict=True))
        ]

    def transposed(self, gz: list[NDArray[Any]]) -> tuple[list[NDArray[Any]], list[NDArray[Any]]]:
        """The gradients of each section's ``b`` and ``a`` from ``gz``, those of the states."""
        pairs = [steady.transposed(scale * g) for scale, steady, g in zip(self.scales, self.each, gz, strict=True)]
        gb, ga = [p[0] for p in pairs], [p[1] for p in pairs]
        gscales = [g @ steady.zi for g, steady in zip(gz, self.each, strict=True)]
        for j, (b, a) in enumerate(self.sections):
            ggain = sum((gscales[k] * self._without(k, j) for k in range(j + 1, len(gz))), 0.0)
            gb[j] = gb[j] + ggain / a.sum()
            ga[j] = ga[j] - ggain * b.sum() / a.sum() ** 2
        return gb, ga


class _Passes:
    """A two-pass filter's steps along the last axis, replayed for the gradients in its
    coefficients: each pass runs the sections in turn, each an ``lfilter`` call from the
    section's steady state times the pass's first sample, whose rule gives its share."""

    def __init__(
        self, x: NDArray[Any], sections: list[tuple[NDArray[Any], NDArray[Any]]], edge: int, padtype: Any
    ) -> None:
        self.sections, self.steady = sections, _Steadies(sections)
        self.edge, self.padtype = edge, padtype
        self.ext = _extended(x, edge, padtype)
        first = self._run(self.ext)
        self.runs = [first, self._run(np.flip(first[-1], -1))]  # each pass's signals, in and out of each section

    def _run(self, s: NDArray[Any]) -> list[NDArray[Any]]:
        from scipy import signal

        signals = [s]
        for (b, a), zi in zip(self.sections, self.steady.zi, strict=True):
            signals.append(signal.lfilter(b, a, signals[-1], zi=zi * s[..., :1])[0])
        return signals

    def _call(self, k: int, signals: list[NDArray[Any]]) -> Call:
        (b, a), state = self.sections[k], self.steady.zi[k] * signals[0][..., :1]
        return Call({"b": b, "a": a, "x": signals[k], "axis": -1, "zi": state}, (signals[k + 1], None))

    def vjp(self, g: NDArray[Any]) -> tuple[NDArray[Any], list[NDArray[Any]], list[NDArray[Any]]]:
        """The gradients of ``x`` and of each section's ``b`` and ``a``."""
        gb = [np.zeros_like(b) for b, _ in self.sections]
        ga = [np.zeros_like(a) for _, a in self.sections]
        gz = [np.zeros_like(zi) for zi in self.steady.zi]
        g = np.flip(np.pad(g, [(0, 0)] * (g.ndim - 1) + [(self.edge, self.edge)]), -1)
        for signals in self.runs[::-1]:
            start, lines = signals[0][..., :1], tuple(range(g.ndim - 1))
            first: Any = 0.0
            for k in range(len(self.sections) - 1, -1, -1):
                found = _lfilter_vjp(self._call(k, signals), (g, None), ("b", "a", "x", "zi"))
                gb[k], ga[k] = gb[k] + found["b"], ga[k] + found["a"]
                gz[k] = gz[k] + np.sum(found["zi"] * start, axis=lines)
                first = first + found["zi"] @ self.steady.zi[k]
                g = found["x"]
            g = np.array(g)
            g[..., 0] += first
            g = np.flip(g, -1) if signals is self.runs[1] else g
        sb, sa = self.steady.transposed(gz)
        x = _unextended(g, self.edge, self.padtype) if self.edge and self.padtype else g
        return x, [u + v for u, v in zip(gb, sb, strict=True)], [u + v for u, v in zip(ga, sa, strict=True)]

    def jvp(self, tb: list[NDArray[Any]], ta: list[NDArray[Any]], tx: NDArray[Any] | None) -> NDArray[Any]:
        """The result's tangent along the last axis."""
        dzi = self.steady.tangent(tb, ta)
        moving = np.zeros_like(self.ext) if tx is None else _extended(tx, self.edge, self.padtype)
        for signals in self.runs:
            start, moving_start = signals[0][..., :1], moving[..., :1]
            for k in range(len(self.sections)):
                state = dzi[k] * start + self.steady.zi[k] * moving_start
                tangents = {"b": tb[k], "a": ta[k], "x": moving, "zi": state}
                moving = _lfilter_jvp(self._call(k, signals), tangents)[0]
            moving = np.flip(moving, -1)
        return moving[..., self.edge : moving.shape[-1] - self.edge]


def _sos_taps(sos: NDArray[Any]) -> int:
    """SciPy's count of taps of a cascade, which sets its default padding."""
    return int(2 * len(sos) + 1 - min((sos[:, 2] == 0).sum(), (sos[:, 5] == 0).sum()))


def _cascade_from_its_first_sample(sos: NDArray[Any]) -> FilterPass:
    """The transpose of ``s ↦ sosfilt(sos, s, zi=sosfilt_zi(sos) * s[0])`` along the last axis."""
    from scipy import signal

    states = signal.sosfilt_zi(sos)

    def transposed(g: NDArray[Any]) -> NDArray[Any]:
        first = np.zeros(g.shape[:-1])
        for row, zi in zip(sos[::-1], states[::-1], strict=True):
            u = _run_backwards([1.0], row[3:], g)
            g = _run_backwards(row[:3], [1.0], u)
            width = min(zi.size, u.shape[-1])
            first = first + u[..., :width] @ zi[:width]  # sosfilt's a[0] is 1
        found = np.array(g)
        found[..., 0] += first
        return found

    return transposed


def _sections(sos: NDArray[Any]) -> list[tuple[NDArray[Any], NDArray[Any]]]:
    return [(row[:3], row[3:]) for row in sos]


def _sosfiltfilt_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    sos = np.atleast_2d(np.asarray(call["sos"], dtype=float))
    axis = int(call["axis"]) % max(np.ndim(call["x"]), 1)
    g = np.moveaxis(np.asarray(grad), axis, -1)
    edge = _edge(call, _sos_taps(sos))
    if "sos" in wanted:
        x = np.moveaxis(np.asarray(call["x"]), axis, -1)
        found, gb, ga = _Passes(x, _sections(sos), edge, call["padtype"]).vjp(g)
        rows = np.concatenate([np.stack(gb), np.stack(ga)], axis=1)
        return {"x": np.moveaxis(found, -1, axis), "sos": rows.reshape(np.shape(call["sos"]))}
    found = _both_ways(g, edge, call["padtype"], _cascade_from_its_first_sample(sos))
    return {"x": np.moveaxis(found, -1, axis)}


def _sosfiltfilt_jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
    from scipy import signal

    if "sos" not in tangents:
        options = {k: call[k] for k in ("axis", "padtype", "padlen")}
        return signal.sosfiltfilt(np.array(call["sos"]), tangents["x"], **options)
    sos = np.atleast_2d(np.asarray(call["sos"], dtype=float))
    axis = int(call["axis"]) % max(np.ndim(call["x"]), 1)
    step = np.atleast_2d(np.asarray(tangents["sos"], dtype=float))
    tx = np.moveaxis(np.asarray(tangents["x"]), axis, -1) if "x" in tangents else None
    x = np.moveaxis(np.asarray(call["x"]), axis, -1)
    passes = _Passes(x, _sections(sos), _edge(call, _sos_taps(sos)), call["padtype"])
    return np.moveaxis(passes.jvp([r[:3] for r in step], [r[3:] for r in step], tx), -1, axis)


def rules() -> dict[Any, Rule]:
    """The two-pass filters' rules, by function."""
    from scipy import signal

    pads = "any axis; padtype odd, even, constant or None; padlen"
    return {
        signal.filtfilt: Rule(
            "scipy.signal.filtfilt",
            signal.filtfilt,
            ("b", "a", "x"),
            _filtfilt_vjp,
            _filtfilt_jvp,
            covers=f'{pads}; method="pad"',
        ),
        signal.sosfiltfilt: Rule(
            "scipy.signal.sosfiltfilt",
            signal.sosfiltfilt,
            ("sos", "x"),
            _sosfiltfilt_vjp,
            _sosfiltfilt_jvp,
            covers=pads,
        ),
    }
