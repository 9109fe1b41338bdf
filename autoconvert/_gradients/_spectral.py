"""Rules for ``scipy.signal``'s resamplers and transforms, each linear in ``x`` along one axis:
``resample``, ``resample_poly``, ``decimate``, ``stft`` and ``hilbert``.

``hilbert`` is ``ifft(fft(x) h)``, which is its own adjoint: its transpose is one FFT pair.
The others' spectra are cut and padded with version-dependent care at the Nyquist bin, their
filters designed inside them: their transpose is read off the function itself, SciPy's own
call on the unit samples of one line (the Jacobian of the line's map, minus the call on zeros
where a constant padding makes it affine), shared by every line of the call. That is exact on
every SciPy and option, and costs about as many SciPy calls as the line has samples, batched.
The jvp of each is SciPy's own call on the tangent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autoconvert._errors import GradientError, message

from ._rule import Call, Rule

#: A function's map of a stack of lines (the samples along the last axis) to its results for each.
Lines = Callable[[NDArray[Any]], NDArray[Any]]

#: The unit samples fed to a function at once: a bound on the probe's memory (8 MiB in float64).
_PROBE_ELEMENTS = 1 << 20


def _transpose_by_probing(
    apply: Lines, shape: tuple[int, ...], g: NDArray[Any], *, complex_input: bool = False
) -> NDArray[Any]:
    """``Jᴴ g`` for each line of ``g`` (its leading axes the lines', the rest one line's
    result): ``J`` the Jacobian of ``apply`` on a line of ``shape`` (its samples), from SciPy's
    own results on the unit samples; real (a complex result's real part, torch's convention),
    or, with ``complex_input``, each sample's real and imaginary parts probed apart."""
    n = int(np.prod(shape))
    zero = np.asarray(apply(np.zeros((1, *shape))))[0]
    width = zero.ndim
    lines = g.reshape(-1, int(np.prod(g.shape[g.ndim - width :], dtype=int)))
    found = np.zeros((lines.shape[0], n), dtype=complex if complex_input else float)
    chunk = max(1, _PROBE_ELEMENTS // n)
    for unit in (1.0, 1j) if complex_input else (1.0,):
        for start in range(0, n, chunk):
            count = min(chunk, n - start)
            units = np.zeros((count, n), dtype=type(unit))
            units[np.arange(count), start + np.arange(count)] = unit
            columns = (np.asarray(apply(units.reshape(count, *shape))) - zero).reshape(count, -1)
            found[:, start : start + count] += unit * (lines @ np.conj(columns).T).real
    return found.reshape((*g.shape[: g.ndim - width], *shape))


def _linear_rules(
    lines: Callable[[Call], Lines],
    result: Callable[[Call, Any], Any],
    layout: Callable[[Call, NDArray[Any]], NDArray[Any]],
) -> tuple[Any, Any]:
    """The vjp and jvp of a function linear (or affine) in ``x`` along ``axis``: ``lines(call)``
    its map of stacked lines; ``result(call, tangent)`` its results' tangents from the one
    differentiated; ``layout(call, g)`` that gradient with the lines' axes first."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        x = np.asarray(call["x"])
        axis = int(call["axis"]) % x.ndim
        g = layout(call, np.asarray(_differentiated(grad)))
        found = _transpose_by_probing(lines(call), (x.shape[axis],), g)
        return {"x": np.moveaxis(found, -1, axis)}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        x = np.asarray(call["x"])
        axis = int(call["axis"]) % x.ndim
        apply = lines(call)
        moved = np.moveaxis(np.asarray(tangents["x"]), axis, -1)
        flat = moved.reshape(-1, moved.shape[-1])
        tangent = np.asarray(apply(flat)) - np.asarray(apply(np.zeros((1, flat.shape[-1]))))
        return result(call, tangent.reshape((*moved.shape[:-1], *tangent.shape[1:])))

    return vjp, jvp


def _differentiated(grad: Any) -> Any:
    """The gradient of the result differentiated: the signal (``resample``'s first, ``stft``'s last)."""
    if not isinstance(grad, tuple):
        return grad
    return grad[-1] if len(grad) == 3 else grad[0]


def _samples_along(call: Call, g: NDArray[Any]) -> NDArray[Any]:
    return np.moveaxis(g, int(call["axis"]) % g.ndim, -1)


def _samples_back(call: Call, tangent: NDArray[Any]) -> Any:
    moved = np.moveaxis(tangent, -1, int(call["axis"]) % tangent.ndim)
    return (moved, None) if call.arguments.get("t") is not None else moved


def _resample(call: Call) -> Lines:
    from scipy import signal

    return lambda x: signal.resample(x, call["num"], axis=-1, window=call["window"], domain=call["domain"])


#: resample_poly's paddings that are not linear in x (an order statistic of it).
_ORDERED = ("median", "minimum", "maximum")


def _resample_poly(call: Call) -> Lines:
    from scipy import signal

    if call["padtype"] in _ORDERED:
        raise GradientError(
            message(
                "scipy.signal.resample_poly",
                f"padtype={call['padtype']!r}",
                "was given, and the catalogue's rule covers paddings linear in x alone",
                "a padding by an order statistic of x",
                "pass padtype='constant', 'mean' or one of upfirdn's modes, or give numpy_op a backward= of your own",
            )
        )
    options = {k: call[k] for k in ("window", "padtype", "cval")}
    return lambda x: signal.resample_poly(x, call["up"], call["down"], axis=-1, **options)


def _decimate(call: Call) -> Lines:
    from scipy import signal

    options = {k: call[k] for k in ("n", "ftype", "zero_phase")}
    return lambda x: signal.decimate(x, call["q"], axis=-1, **options)


_STFT_OPTIONS = (
    "fs",
    "window",
    "nperseg",
    "noverlap",
    "nfft",
    "detrend",
    "return_onesided",
    "boundary",
    "padded",
    "scaling",
)


def _stft(call: Call) -> Lines:
    from scipy import signal

    options = {k: call[k] for k in _STFT_OPTIONS}
    return lambda x: signal.stft(x, axis=-1, **options)[2]


def _frequencies_along(call: Call, g: NDArray[Any]) -> NDArray[Any]:
    """stft's result has the frequencies where ``x``'s axis was and the segments last."""
    return np.moveaxis(g, int(call["axis"]) % (g.ndim - 1), -2)


def _frequencies_back(call: Call, tangent: NDArray[Any]) -> Any:
    return None, None, np.moveaxis(tangent, -2, int(call["axis"]) % (tangent.ndim - 1))


_ISTFT_OPTIONS = ("fs", "window", "nperseg", "noverlap", "nfft", "input_onesided", "boundary", "scaling")


def _istft_axes(call: Call) -> tuple[int, int, int]:
    """The frequencies' and segments' axes of ``Zxx``, and where SciPy puts the result's samples."""
    ndim = np.ndim(call["Zxx"])
    frequencies, segments = int(call["freq_axis"]) % ndim, int(call["time_axis"]) % ndim
    return frequencies, segments, segments - (frequencies < segments)


def _istft(call: Call) -> Lines:
    from scipy import signal

    options = {k: call[k] for k in _ISTFT_OPTIONS}
    return lambda z: signal.istft(z, time_axis=-1, freq_axis=-2, **options)[1]


def _istft_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    """Real in the real and imaginary parts of ``Zxx`` (``irfft`` drops the imaginary parts of
    its first and last bins): each probed apart."""
    z = np.asarray(call["Zxx"])
    frequencies, segments, samples = _istft_axes(call)
    g = np.asarray(grad[1])
    g = np.moveaxis(g, samples, -1) if g.ndim > 1 else g
    plane = (z.shape[frequencies], z.shape[segments])
    found = _transpose_by_probing(_istft(call), plane, g, complex_input=True)
    return {"Zxx": np.moveaxis(found, (-2, -1), (frequencies, segments))}


def _istft_jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
    from scipy import signal

    options = {k: call[k] for k in (*_ISTFT_OPTIONS, "time_axis", "freq_axis")}
    return None, signal.istft(tangents["Zxx"], **options)[1]


def _hilbert_vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
    """``L = F⁻¹ diag(h) F`` with ``h`` real, so ``Lᴴ = L``: the gradient is ``Re(L g)``, cut or
    padded back to ``x``'s length (the transpose of ``fft(x, N)``'s padding or cut)."""
    x = np.asarray(call["x"])
    axis = int(call["axis"]) % x.ndim
    g = np.moveaxis(np.asarray(grad), axis, -1)
    size, n = g.shape[-1], x.shape[axis]
    h = np.zeros(size)
    h[0] = 1.0
    h[1 : (size + 1) // 2] = 2.0
    if size % 2 == 0:
        h[size // 2] = 1.0
    back = np.fft.ifft(np.fft.fft(g, axis=-1) * h, axis=-1).real
    found = back[..., :n] if size >= n else np.pad(back, [(0, 0)] * (g.ndim - 1) + [(0, n - size)])
    return {"x": np.moveaxis(found, -1, axis)}


def _hilbert_jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
    from scipy import signal

    return signal.hilbert(tangents["x"], call["N"], call["axis"])


def rules() -> dict[Any, Rule]:
    """The rules of the resamplers and transforms, by function."""
    from scipy import signal

    along, frequencies = (_samples_back, _samples_along), (_frequencies_back, _frequencies_along)
    linear = {
        signal.resample: (_resample, along, "any axis, num, window, domain; with t"),
        signal.resample_poly: (
            _resample_poly,
            along,
            "any axis, up and down, window; padtype constant (any cval), mean, and upfirdn's modes",
        ),
        signal.decimate: (_decimate, along, "any axis, q, n; ftype iir and fir, zero_phase"),
        signal.stft: (
            _stft,
            frequencies,
            "any axis; every window, nperseg, noverlap, nfft, detrend, boundary, padded, onesided, scaling",
        ),
    }
    made = {
        fn: Rule(f"scipy.signal.{fn.__name__}", fn, ("x",), *_linear_rules(lines, *layout), covers=covers)
        for fn, (lines, layout, covers) in linear.items()
    }
    made[signal.hilbert] = Rule(
        "scipy.signal.hilbert",
        signal.hilbert,
        ("x",),
        _hilbert_vjp,
        _hilbert_jvp,
        covers="any axis, N; a complex result (torch's convention)",
    )
    made[signal.istft] = Rule(
        "scipy.signal.istft",
        signal.istft,
        ("Zxx",),
        _istft_vjp,
        _istft_jvp,
        covers="any axes; every window, nperseg, noverlap, nfft, input_onesided, boundary, scaling; complex Zxx",
        complex_takes=("Zxx",),
    )
    return made
