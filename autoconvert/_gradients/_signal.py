"""Rules for ``scipy.signal``: convolutions in both inputs and every mode; the other modules' rules gathered.

A convolution's ``same`` and ``valid`` results are a window of its ``full`` one: the gradient
of either input is the ``full`` gradient (the window's, zero elsewhere) correlated with the
other input, a ``valid`` convolution with it reversed, run by the same SciPy function.
The filters' rules are in ``_filters`` and ``_filtfilt``, the resamplers' and transforms' in
``_spectral``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import _filters, _filtfilt, _spectral
from ._rule import Call, Rule, axes_of

Convolve = Callable[[NDArray[Any], NDArray[Any], str], NDArray[Any]]


def _reversed(x: NDArray[Any], axes: tuple[int, ...]) -> NDArray[Any]:
    return np.flip(x, axes) if x.ndim else x


def _window(call: Call, g: NDArray[Any], in1: NDArray[Any], in2: NDArray[Any], axes: tuple[int, ...]) -> NDArray[Any]:
    """The gradient of the ``full`` convolution: ``g`` where the mode's window of it lies, 0 elsewhere.

    Along an axis the inputs broadcast on (not in ``axes``), ``same`` centres the broadcast
    result on ``in1``'s length as SciPy does: where ``in1`` has 1 there, the middle of ``in2``'s."""
    mode = call["mode"]
    shape, start = list(g.shape), [0] * g.ndim
    for a in range(g.ndim):
        n1, n2 = in1.shape[a], in2.shape[a]
        if a in axes:
            shape[a] = n1 + n2 - 1
            start[a] = 0 if mode == "full" else (n2 - 1) // 2 if mode == "same" else min(n1, n2) - 1
        elif mode == "same":
            shape[a] = max(n1, n2)
            start[a] = (shape[a] - n1) // 2
    full = np.zeros(shape, dtype=g.dtype)
    full[tuple(slice(s, s + n) for s, n in zip(start, g.shape, strict=True))] = g
    return full


def _convolution_rules(convolve: Callable[[Call], Convolve], correlation: bool) -> tuple[Any, Any]:
    """The vjp and jvp of ``convolve(in1, in2)`` (``correlation``: of ``in1`` with ``in2``,
    the convolution with ``in2`` reversed), ``convolve(call)`` the SciPy function the call ran."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        in1, in2 = np.asarray(call["in1"]), np.asarray(call["in2"])
        axes = axes_of(call.arguments.get("axes"), in1.ndim)
        kernel = _reversed(in2, axes) if correlation else in2
        full, run = _window(call, np.asarray(grad), in1, kernel, axes), convolve(call)
        found: dict[str, Any] = {}
        if "in1" in wanted:
            found["in1"] = run(full, _reversed(kernel, axes), "valid")
        if "in2" in wanted:
            other = run(full, _reversed(in1, axes), "valid")
            found["in2"] = _reversed(other, axes) if correlation else other
        return found

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        in1, in2 = np.asarray(call["in1"]), np.asarray(call["in2"])
        run, mode = convolve(call), call["mode"]

        def kernel(k: Any) -> NDArray[Any]:
            return (
                _reversed(np.asarray(k), axes_of(call.arguments.get("axes"), in1.ndim))
                if correlation
                else np.asarray(k)
            )

        total: Any = 0.0
        if "in1" in tangents:
            total = run(np.asarray(tangents["in1"]), kernel(in2), mode)
        if "in2" in tangents:
            total = total + run(in1, kernel(tangents["in2"]), mode)
        return total

    return vjp, jvp


def _by_method(call: Call) -> Convolve:
    """``signal.convolve`` with the call's method (``auto`` resolved as SciPy resolves it)."""
    from scipy import signal

    method = call["method"]
    if method == "auto":
        method = signal.choose_conv_method(call["in1"], call["in2"], mode=call["mode"])
    return lambda a, b, mode: signal.convolve(a, b, mode, method=method)


def _along_axes(name: str) -> Callable[[Call], Convolve]:
    """``fftconvolve`` or ``oaconvolve`` along the call's axes."""

    def run(call: Call) -> Convolve:
        from scipy import signal

        fn, axes = getattr(signal, name), call.arguments.get("axes")
        return lambda a, b, mode: fn(a, b, mode, axes=axes)

    return run


def rules() -> dict[Any, Rule]:
    """The rules of ``scipy.signal``'s functions, by function."""
    from scipy import signal

    modes = "modes full, same and valid"
    made: dict[Any, Rule] = {}
    for fn, pair, covers in (
        (signal.convolve, _convolution_rules(_by_method, False), f"{modes}; methods direct, fft and auto"),
        (signal.correlate, _convolution_rules(_by_method, True), f"{modes}; methods direct, fft and auto"),
        (signal.fftconvolve, _convolution_rules(_along_axes("fftconvolve"), False), f"{modes}; axes"),
        (signal.oaconvolve, _convolution_rules(_along_axes("oaconvolve"), False), f"{modes}; axes"),
    ):
        made[fn] = Rule(f"scipy.signal.{fn.__name__}", fn, ("in1", "in2"), *pair, covers=covers)
    for module in (_filters, _filtfilt, _spectral):
        made.update(module.rules())
    return made
