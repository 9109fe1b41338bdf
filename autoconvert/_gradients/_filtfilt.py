"""Rules for ``scipy.signal.filtfilt`` and ``sosfiltfilt`` (``method="pad"``), in ``x``.

Both are linear in ``x``: the signal is extended at both ends (``padtype``, ``padlen``),
filtered forward from the steady state of its first sample (``zi * ext[0]``, ``zi`` from
``lfilter_zi``), filtered backward alike from its last output, and cut back to ``x``'s
length. The adjoint takes the steps in reverse, each transposed: the cut's transpose pads
the gradient with zeros, each pass's transpose is the filter run backwards in time plus what
the initial state adds onto the sample it was scaled by, and the extension's transpose adds
each padded sample's gradient back onto the samples it was made from. The jvp is the same
SciPy call on the tangent. Gustafsson's method (``method="gust"``) has no rule here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autoconvert._errors import GradientError, message

from ._filters import _transposed
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
    zi = signal.lfilter_zi(b, a)
    g = np.moveaxis(np.asarray(grad), axis, -1)
    found = _both_ways(g, _edge(call, max(b.size, a.size)), call["padtype"], _from_its_first_sample(b, a, zi))
    return {"x": np.moveaxis(found, -1, axis)}


def _filtfilt_jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
    from scipy import signal

    _not_gust(call)
    options = {k: call[k] for k in ("axis", "padtype", "padlen", "method")}
    return signal.filtfilt(call["b"], call["a"], tangents["x"], **options)


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
        signal.filtfilt: (("x",), (_filtfilt_vjp, _filtfilt_jvp), f'{pads}; method="pad"'),
        signal.sosfiltfilt: (("x",), (_sosfiltfilt_vjp, _sosfiltfilt_jvp), pads),
    }
