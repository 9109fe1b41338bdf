"""Rules for ``scipy.signal``'s linear filters: ``lfilter`` (from rest or from a state ``zi``)
and ``sosfilt``.

``lfilter`` solves ``a * y = b * x + a[0] e`` (causal convolutions over the ``N`` samples),
``e`` the initial state ``zi`` laid over the first samples; its final state is the tail the
past leaves on the next ``K`` outputs: ``zf[i] = T[i] / a[0] + zi[N + i]``, with
``T[i] = sum(b[j] x[N+i-j] - a[j] y[N+i-j] for j > i)``. The transpose of ``a *`` is the
filter by ``1/a`` run backwards in time, so every gradient is SciPy's ``lfilter`` on the
reversed gradient plus the tail's own terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from autoconvert._errors import GradientError, message

from ._rule import Call, Rule


def _backwards(x: NDArray[Any]) -> NDArray[Any]:
    return np.flip(x, -1)


def _causal(kernel: ArrayLike, x: NDArray[Any]) -> NDArray[Any]:
    """``kernel * x`` over the first ``N`` samples (the last axis)."""
    from scipy import signal

    return np.asarray(signal.lfilter(kernel, [1.0], x, axis=-1))


def _run_backwards(kernel: ArrayLike, denominator: ArrayLike, g: NDArray[Any]) -> NDArray[Any]:
    """The transpose of ``lfilter(kernel, denominator)`` applied to ``g``: the filter run backwards."""
    from scipy import signal

    return _backwards(signal.lfilter(kernel, denominator, _backwards(g), axis=-1))


def _lagged(u: NDArray[Any], v: NDArray[Any], count: int) -> NDArray[Any]:
    """``sum(u[n] * v[n - k])`` over ``n`` and every leading axis, for lags ``k`` below ``count``."""
    n = u.shape[-1]
    found = np.zeros(count, dtype=np.result_type(u, v))
    for k in range(min(count, n)):
        found[k] = np.sum(u[..., k:] * v[..., : n - k])
    return found


def _taps(b: NDArray[Any], count: int) -> list[tuple[int, int, int]]:
    """The ``(i, j, m)`` of the tail: ``zf[i]`` takes ``b[j] x[m]`` for ``j > i``, ``m = N+i-j`` in the signal."""
    k = b.size  # the filter's order plus one
    return [(i, j, count + i - j) for i in range(k - 1) for j in range(i + 1, k) if 0 <= count + i - j < count]


class _Filter:
    """One ``lfilter`` call along the last axis: ``b`` and ``a`` padded to ``K + 1``, the state
    ``zi`` (None: from rest) at its full shape, and the output ``y``."""

    def __init__(self, call: Call) -> None:
        x = np.asarray(call["x"])
        self.axis = int(call["axis"]) % max(x.ndim, 1)
        self.given_b, self.given_a = np.asarray(call["b"]), np.asarray(call["a"])
        order = max(self.given_b.size, self.given_a.size)
        self.b = np.pad(np.ravel(self.given_b).astype(float), (0, order - self.given_b.size))
        self.a = np.pad(np.ravel(self.given_a).astype(float), (0, order - self.given_a.size))
        self.x = np.moveaxis(x, self.axis, -1)
        self.n = self.x.shape[-1]
        output = call.output
        self.stateful = call["zi"] is not None
        self.y = np.moveaxis(np.asarray(output[0] if self.stateful else output), self.axis, -1)
        self.zi: NDArray[Any] | None = None
        if self.stateful:
            state = np.moveaxis(np.asarray(call["zi"]), self.axis, -1)
            self.zi = np.broadcast_to(state, (*self.x.shape[:-1], order - 1))

    def moved(self, value: NDArray[Any]) -> NDArray[Any]:
        return np.moveaxis(value, self.axis, -1)

    def back(self, value: NDArray[Any]) -> NDArray[Any]:
        return np.moveaxis(value, -1, self.axis)

    def laid(self, state: NDArray[Any]) -> NDArray[Any]:
        """``e``: a state laid over the first samples (0 after them)."""
        e = np.zeros((*state.shape[:-1], self.n), dtype=np.result_type(state, float))
        first = min(self.n, state.shape[-1])
        e[..., :first] = state[..., :first]
        return e

    def tail(self, b: NDArray[Any], a: NDArray[Any], x: NDArray[Any], y: NDArray[Any]) -> NDArray[Any]:
        """``T``: what the last samples of ``x`` and ``y`` leave in each slot of the state."""
        found = np.zeros((*np.broadcast_shapes(x.shape[:-1], y.shape[:-1]), self.b.size - 1))
        for i, j, m in _taps(self.b, self.n):
            found[..., i] += b[j] * x[..., m] - a[j] * y[..., m]
        return found

    def leftover(self, state: NDArray[Any]) -> NDArray[Any]:
        """The slots of ``state`` the signal is too short to read: they pass on into ``zf``."""
        kept = np.zeros_like(state)
        kept[..., : max(state.shape[-1] - self.n, 0)] = state[..., self.n :]
        return kept

    def passed_back(self, g: NDArray[Any]) -> NDArray[Any]:
        """The transpose of ``leftover``: ``zf``'s gradient onto the slots that passed on."""
        found = np.zeros_like(g)
        found[..., self.n :] = g[..., : max(g.shape[-1] - self.n, 0)]
        return found


def _grads(grad: Any, stateful: bool) -> tuple[NDArray[Any], NDArray[Any] | None]:
    if not stateful:
        return np.asarray(grad), None
    gy, gzf = grad
    return np.asarray(gy), None if gzf is None else np.asarray(gzf)


def _lfilter_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    """``(y, zf) = lfilter(b, a, x, zi=zi)`` (see the module's docstring): with ``h = gzf / a[0]``,
    the tail sends ``h`` onto ``x``, ``y``, ``b`` and ``a`` along its taps; ``u = A⁻ᵀ (gy + that
    on y)`` then gives ``x``'s gradient ``Bᵀ u``, ``b[k]``'s ``sum(u[n] x[n-k])``, ``a[k]``'s
    ``-sum(u[n] y[n-k])``, ``zi``'s ``a[0] u`` (and ``gzf`` on the slots left over)."""
    f = _Filter(call)
    gy, gzf = _grads(grad, f.stateful)
    gy = f.moved(gy)
    a0 = f.a[0]
    gx: Any = 0.0
    db, da = np.zeros_like(f.b), np.zeros_like(f.a)
    if gzf is not None:
        h = f.moved(gzf) / a0
        gx, gy = np.zeros(gy.shape), np.array(gy, dtype=np.result_type(gy, h))
        for i, j, m in _taps(f.b, f.n):
            gx[..., m] += h[..., i] * f.b[j]
            gy[..., m] -= h[..., i] * f.a[j]
            db[j] += np.sum(h[..., i] * f.x[..., m])
            da[j] -= np.sum(h[..., i] * f.y[..., m])
        da[0] -= np.sum(h * f.tail(f.b, f.a, f.x, f.y)) / a0
    found: dict[str, Any] = {}
    if "x" in wanted:  # Bᵀ A⁻ᵀ in one pass: causal filters commute
        found["x"] = f.back(_run_backwards(f.b, f.a, gy) + gx)
    if not {"b", "a", "zi"} & set(wanted):
        return found
    u = _run_backwards([1.0], f.a, gy)
    if "b" in wanted:
        found["b"] = (_lagged(u, f.x, f.b.size) + db)[: f.given_b.size].reshape(f.given_b.shape)
    if "a" in wanted:
        da -= _lagged(u, f.y, f.a.size)
        if f.zi is not None:
            da[0] += np.sum(u * f.laid(f.zi))
        found["a"] = da[: f.given_a.size].reshape(f.given_a.shape)
    if "zi" in wanted and f.zi is not None:
        state: NDArray[Any] = np.zeros(f.zi.shape)
        first = min(f.n, state.shape[-1])
        state[..., :first] = a0 * u[..., :first]
        if gzf is not None:
            state += f.passed_back(np.broadcast_to(f.moved(gzf), state.shape))
        found["zi"] = f.back(state)
    return found


def _lfilter_jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
    f = _Filter(call)
    tb = np.zeros_like(f.b)
    ta = np.zeros_like(f.a)
    if "b" in tangents:
        tb[: f.given_b.size] = np.ravel(tangents["b"])
    if "a" in tangents:
        ta[: f.given_a.size] = np.ravel(tangents["a"])
    tx = f.moved(np.asarray(tangents["x"])) if "x" in tangents else np.zeros_like(f.x, dtype=float)
    # a * ẏ = b * ẋ + ḃ * x - ȧ * y + (a[0] e)˙
    right = _causal(f.b, tx) + _causal(tb, f.x) - _causal(ta, f.y)
    tzi = None
    if f.zi is not None:
        tzi = np.broadcast_to(f.moved(np.asarray(tangents["zi"])), f.zi.shape) if "zi" in tangents else None
        right = right + ta[0] * f.laid(f.zi)
        if tzi is not None:
            right = right + f.a[0] * f.laid(tzi)
    ty = _transposed_forward(f.a, right)
    if f.zi is None:
        return f.back(ty)
    a0 = f.a[0]
    tail = f.tail(f.b, f.a, f.x, f.y)
    moving = f.tail(tb, ta, f.x, f.y) + f.tail(f.b, f.a, tx, ty)
    tzf = moving / a0 - tail * ta[0] / a0**2
    if tzi is not None:
        tzf = tzf + f.leftover(tzi)
    return f.back(ty), f.back(tzf)


def _transposed_forward(a: NDArray[Any], right: NDArray[Any]) -> NDArray[Any]:
    """``A⁻¹ right``: the filter by ``1/a``."""
    from scipy import signal

    return np.asarray(signal.lfilter([1.0], a, right, axis=-1))


def _no_state(call: Call, name: str) -> None:
    if call["zi"] is not None:
        raise GradientError(
            message(
                name,
                "argument zi",
                "was given, and the catalogue's rule covers filters from rest only",
                "an initial state",
                "call it without zi=, or give numpy_op a backward= of your own",
            )
        )


def _sosfilt_rules() -> tuple[Any, Any]:
    """``sosfilt``: ``lfilter`` section after section; each section's gradients from the
    signal that entered it and the one that left it."""

    def sections(call: Call) -> tuple[NDArray[Any], int, list[NDArray[Any]]]:
        from scipy import signal

        _no_state(call, "scipy.signal.sosfilt")
        sos, x = np.atleast_2d(np.asarray(call["sos"], dtype=float)), np.asarray(call["x"])
        axis = int(call["axis"]) % max(x.ndim, 1)
        signals = [np.moveaxis(x, axis, -1)]
        for row in sos:
            signals.append(signal.lfilter(row[:3], row[3:], signals[-1], axis=-1))
        return sos, axis, signals

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        sos, axis, signals = sections(call)
        g = np.moveaxis(np.asarray(grad), axis, -1)
        rows = np.zeros_like(sos)
        for k in range(len(sos) - 1, -1, -1):
            b, a = sos[k, :3], sos[k, 3:]
            if "sos" in wanted:
                u = _run_backwards([1.0], a, g)
                rows[k, :3] = _lagged(u, signals[k], 3)
                rows[k, 3:] = -_lagged(u, signals[k + 1], 3)
            g = _run_backwards(b, a, g)
        return {"x": np.moveaxis(g, -1, axis), "sos": rows.reshape(np.shape(call["sos"]))}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        from scipy import signal

        sos, axis, signals = sections(call)
        given = tangents.get("x")
        moved = (
            np.moveaxis(np.asarray(given), axis, -1) if given is not None else np.zeros_like(signals[0], dtype=float)
        )
        step = np.atleast_2d(np.asarray(tangents["sos"], dtype=float)) if "sos" in tangents else None
        for k, row in enumerate(sos):
            moved = signal.lfilter(row[:3], row[3:], moved, axis=-1)
            if step is not None:
                moved = moved + signal.lfilter(step[k, :3], row[3:], signals[k], axis=-1)
                moved = moved - signal.lfilter(step[k, 3:], row[3:], signals[k + 1], axis=-1)
        return np.moveaxis(moved, -1, axis)

    return vjp, jvp


def rules() -> dict[Any, Rule]:
    """The filters' rules, by function."""
    from scipy import signal

    return {
        signal.lfilter: Rule(
            "scipy.signal.lfilter",
            signal.lfilter,
            ("b", "a", "x", "zi"),
            _lfilter_vjp,
            _lfilter_jvp,
            covers="any axis, any a[0]; from rest or from zi (y and zf)",
        ),
        signal.sosfilt: Rule(
            "scipy.signal.sosfilt", signal.sosfilt, ("sos", "x"), *_sosfilt_rules(), covers="any axis; without zi"
        ),
    }
