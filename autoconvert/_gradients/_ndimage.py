"""Rules for ``scipy.ndimage``'s linear filters, and the gradient magnitude built on them.

Each filter is SciPy's ``correlate1d`` along axes in turn, or a sum of such chains (a
``Term`` of ``Pass``es each), with its weights read from SciPy itself, so the rule follows
every mode, order, origin, truncation and radius the forward took. A pass's adjoint is the
correlation with the flipped weights on the padded grid, folded back over the padding as its
mode extended the line (see _boundary); its jvp is the pass itself on the tangent, with a
zero ``cval`` (the constant padding is no function of the input).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import _ndimage_transforms
from ._boundary import EVERY_MODE, extended, folded
from ._rule import Call, Rule, axes_of, per_axis


@dataclasses.dataclass(frozen=True)
class Pass:
    """One ``correlate1d`` along ``axis``: its ``weights``, ``origin`` and boundary ``mode``."""

    axis: int
    weights: NDArray[Any]
    origin: int
    mode: str

    @property
    def left(self) -> int:
        """How many samples the padded line reaches before the first (the kernel's centre)."""
        return len(self.weights) // 2 + self.origin

    def __call__(self, x: NDArray[Any], cval: Any = 0.0) -> NDArray[Any]:
        from scipy import ndimage

        return np.asarray(
            ndimage.correlate1d(x, self.weights, self.axis, mode=self.mode, cval=cval, origin=self.origin)
        )

    def adjoint(self, g: NDArray[Any]) -> NDArray[Any]:
        """The pass transposed: the full convolution of ``g`` with the weights, folded back."""
        from scipy import ndimage

        n = len(self.weights)
        widths = [(0, 0)] * g.ndim
        widths[self.axis] = (n - 1, 0)
        full = ndimage.correlate1d(
            np.pad(g, widths), self.weights[::-1], self.axis, mode="constant", cval=0.0, origin=-(n // 2)
        )
        return folded(full, self.axis, g.shape[self.axis], self.left, self.mode)

    def weights_gradient(self, x: NDArray[Any], g: NDArray[Any], cval: Any) -> NDArray[Any]:
        """The gradient of the weights: each weight's sum of ``g`` times the samples it met."""
        n, size = len(self.weights), x.shape[self.axis]
        line = extended(x, self.axis, self.left, n - 1 - self.left, mode=self.mode, cval=cval)
        return np.array([np.sum(g * np.take(line, range(j, j + size), axis=self.axis)) for j in range(n)])


Term = tuple[Pass, ...]


def _applied(terms: Sequence[Term], x: NDArray[Any]) -> NDArray[Any]:
    """The sum of the terms' chains applied to a tangent ``x`` (zero padding for constant)."""
    total: NDArray[Any] | None = None
    for term in terms:
        y = x
        for p in term:
            y = p(y)
        total = y if total is None else total + y
    assert total is not None  # every filter has a term
    return total


def _transposed(terms: Sequence[Term], g: NDArray[Any]) -> NDArray[Any]:
    """The sum of the terms' adjoint chains applied to a gradient ``g``."""
    total: NDArray[Any] | None = None
    for term in terms:
        y = g
        for p in reversed(term):
            y = p.adjoint(y)
        total = y if total is None else total + y
    assert total is not None
    return total


def _gaussian_weights(sigma: float, order: int, truncate: float, radius: int | None) -> NDArray[Any]:
    """The weights ``gaussian_filter1d`` correlates with: its response to an impulse, read
    back to front (the response of a correlation is its kernel reversed)."""
    from scipy import ndimage

    reach = int(truncate * float(sigma) + 0.5) if radius is None else int(radius)
    impulse = np.zeros(2 * reach + 1)
    impulse[reach] = 1.0
    response = ndimage.gaussian_filter1d(impulse, sigma, order=order, mode="constant", truncate=truncate, radius=radius)
    return np.array(response[::-1])


def _gaussian_term(
    ndim: int, sigma: Any, order: Any, *, mode: Any, truncate: float, radius: Any, axes: Any = None
) -> Term:
    """``gaussian_filter``'s chain: a pass per axis whose sigma is above SciPy's 1e-15."""
    chosen = axes_of(axes, ndim)
    count = len(chosen)
    each = zip(
        chosen,
        per_axis(sigma, count),
        per_axis(order, count),
        per_axis(mode, count),
        per_axis(radius, count),
        strict=True,
    )
    return tuple(Pass(axis, _gaussian_weights(s, o, truncate, r), 0, m) for axis, s, o, m, r in each if s > 1e-15)


def _uniform_term(ndim: int, size: Any, origin: Any, mode: Any, axes: Any = None) -> Term:
    """``uniform_filter``'s chain: a pass of ``size`` equal weights per axis of size above one."""
    chosen = axes_of(axes, ndim)
    count = len(chosen)
    each = zip(chosen, per_axis(size, count), per_axis(origin, count), per_axis(mode, count), strict=True)
    return tuple(Pass(axis, np.full(int(n), 1.0 / int(n)), o, m) for axis, n, o, m in each if n > 1)


def _convolved(weights: NDArray[Any], origin: Any) -> tuple[NDArray[Any], list[int]]:
    """A convolution's weights and origins as the correlation SciPy runs: weights reversed,
    origins negated, an even length's shifted by one."""
    flipped = weights[tuple(slice(None, None, -1) for _ in range(weights.ndim))]
    origins = [
        -int(o) - (0 if n & 1 else 1) for o, n in zip(per_axis(origin, weights.ndim), weights.shape, strict=True)
    ]
    return flipped, origins


def _linear(terms_of: Any) -> tuple[Any, Any]:
    """The vjp and jvp of a filter linear in its input, ``terms_of(call)`` its chains."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        return {"input": _transposed(terms_of(call), np.asarray(grad))}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        return _applied(terms_of(call), np.asarray(tangents["input"]))

    return vjp, jvp


def _ndim(call: Call) -> int:
    return int(np.ndim(call["input"]))


def _one_pass(call: Call, convolution: bool) -> Pass:
    """``correlate1d``'s (or ``convolve1d``'s) pass."""
    weights, origin = np.asarray(call["weights"], dtype=float), int(call["origin"])
    if convolution:
        weights, (origin,) = _convolved(weights, origin)
    return Pass(int(call["axis"]) % _ndim(call), weights, origin, call["mode"])


def _correlate1d_rules(convolution: bool) -> tuple[Any, Any]:
    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        p, g = _one_pass(call, convolution), np.asarray(grad)
        found: dict[str, Any] = {}
        if "input" in wanted:
            found["input"] = p.adjoint(g)
        if "weights" in wanted:
            w = p.weights_gradient(np.asarray(call["input"]), g, call["cval"])
            found["weights"] = w[::-1] if convolution else w
        return found

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        p = _one_pass(call, convolution)
        total = p(np.asarray(tangents["input"])) if "input" in tangents else 0.0
        if "weights" in tangents:
            t = np.asarray(tangents["weights"], dtype=float)
            moved = Pass(p.axis, t[::-1] if convolution else t, p.origin, p.mode)
            total = total + moved(np.asarray(call["input"]), call["cval"])
        return total

    return vjp, jvp


def _nd_parts(call: Call, convolution: bool) -> tuple[NDArray[Any], list[int]]:
    """``correlate``'s (``convolve``'s) weights over every axis of the input, and origins,
    as the correlation SciPy runs."""
    ndim = _ndim(call)
    given = call.arguments.get("axes")
    chosen = axes_of(given, ndim)
    weights = np.asarray(call["weights"], dtype=float)
    if len(chosen) < ndim:
        weights = np.expand_dims(weights, tuple(a for a in range(ndim) if a not in chosen))
    origins = [0] * ndim
    for o, a in zip(per_axis(call["origin"], len(chosen)), chosen, strict=True):
        origins[a] = int(o)
    if convolution:
        weights, origins = _convolved(weights, origins)
    return weights, origins


def _correlate_rules(convolution: bool) -> tuple[Any, Any]:
    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        from scipy import ndimage, signal

        weights, origins = _nd_parts(call, convolution)
        g, mode = np.asarray(grad), call["mode"]
        lefts = [n // 2 + o for n, o in zip(weights.shape, origins, strict=True)]
        found: dict[str, Any] = {}
        if "input" in wanted:
            full = ndimage.correlate(
                np.pad(g, [(n - 1, 0) for n in weights.shape]),
                weights[tuple(slice(None, None, -1) for _ in range(g.ndim))],
                mode="constant",
                cval=0.0,
                origin=[-(n // 2) for n in weights.shape],
            )
            for axis in range(g.ndim):
                full = folded(full, axis, g.shape[axis], lefts[axis], mode)
            found["input"] = full
        if "weights" in wanted:
            grid = np.asarray(call["input"])
            for axis, n in enumerate(weights.shape):
                grid = extended(grid, axis, lefts[axis], n - 1 - lefts[axis], mode=mode, cval=call["cval"])
            w = signal.correlate(grid, g, mode="valid")
            if convolution:
                w = w[tuple(slice(None, None, -1) for _ in range(w.ndim))]
            found["weights"] = w.reshape(np.shape(call["weights"]))
        return found

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        from scipy import ndimage

        weights, origins = _nd_parts(call, convolution)
        mode = call["mode"]
        total: Any = 0.0
        if "input" in tangents:
            total = ndimage.correlate(np.asarray(tangents["input"]), weights, mode=mode, cval=0.0, origin=origins)
        if "weights" in tangents:
            t = np.asarray(tangents["weights"], dtype=float).reshape(np.shape(call["weights"]))
            moved = _nd_parts(Call({**call.arguments, "weights": t}, None), convolution)[0]
            total = total + ndimage.correlate(
                np.asarray(call["input"]), moved, mode=mode, cval=call["cval"], origin=origins
            )
        return total

    return vjp, jvp


def _gaussian_filter_terms(call: Call) -> list[Term]:
    return [
        _gaussian_term(
            _ndim(call),
            call["sigma"],
            call["order"],
            mode=call["mode"],
            truncate=call["truncate"],
            radius=call.arguments.get("radius"),
            axes=call.arguments.get("axes"),
        )
    ]


def _gaussian_filter1d_terms(call: Call) -> list[Term]:
    axis = int(call["axis"]) % _ndim(call)
    weights = _gaussian_weights(call["sigma"], call["order"], call["truncate"], call.arguments.get("radius"))
    return [(Pass(axis, weights, 0, call["mode"]),)]


def _uniform_filter_terms(call: Call) -> list[Term]:
    return [_uniform_term(_ndim(call), call["size"], call["origin"], call["mode"], call.arguments.get("axes"))]


def _uniform_filter1d_terms(call: Call) -> list[Term]:
    size = int(call["size"])
    return [(Pass(int(call["axis"]) % _ndim(call), np.full(size, 1.0 / size), int(call["origin"]), call["mode"]),)]


def _edge_terms(smoothing: Sequence[float]) -> Any:
    """``sobel``'s (``prewitt``'s) chain: a central difference along ``axis``, then
    ``smoothing`` along each other axis."""

    def terms(call: Call) -> list[Term]:
        ndim = _ndim(call)
        axis = int(call["axis"]) % ndim
        modes = per_axis(call["mode"], ndim)
        first = Pass(axis, np.array([-1.0, 0.0, 1.0]), 0, modes[axis])
        rest = (Pass(a, np.asarray(smoothing, dtype=float), 0, modes[a]) for a in range(ndim) if a != axis)
        return [(first, *rest)]

    return terms


def _laplace_terms(call: Call) -> list[Term]:
    chosen = axes_of(call.arguments.get("axes"), _ndim(call))
    modes = per_axis(call["mode"], len(chosen))
    return [(Pass(a, np.array([1.0, -2.0, 1.0]), 0, m),) for a, m in zip(chosen, modes, strict=True)]


def _derivative_terms(call: Call, order: int) -> list[Term]:
    """``gaussian_laplace``'s (order 2) and ``gaussian_gradient_magnitude``'s (order 1)
    chains: per axis filtered, a Gaussian filter differentiating along it, in that axis's mode."""
    ndim = _ndim(call)
    chosen = axes_of(call.arguments.get("axes"), ndim)
    sigma = call["sigma"]
    if order == 2 and len(chosen) < ndim:  # gaussian_laplace leaves the other axes unfiltered
        full = [0.0] * ndim
        for s, a in zip(per_axis(sigma, len(chosen)), chosen, strict=True):
            full[a] = s
        sigma = full
    options: dict[str, Any] = call.arguments.get("kwargs", {})
    truncate, radius = options.get("truncate", 4.0), options.get("radius")
    modes = per_axis(call["mode"], len(chosen))
    return [
        _gaussian_term(
            ndim, sigma, [order if a == axis else 0 for a in range(ndim)], mode=mode, truncate=truncate, radius=radius
        )
        for axis, mode in zip(chosen, modes, strict=True)
    ]


def _gradient_magnitude_rules() -> tuple[Any, Any]:
    """``gaussian_gradient_magnitude``, sqrt of the sum of squared derivatives ``d``: its
    gradient is each derivative's adjoint of ``grad * d / output`` (none where the output is 0)."""

    def parts(call: Call) -> tuple[list[Term], list[NDArray[Any]], NDArray[Any]]:
        terms = _derivative_terms(call, 1)
        x, cval = np.asarray(call["input"]), call["cval"]
        derivatives = []
        for term in terms:
            y = x
            for p in term:
                y = p(y, cval)
            derivatives.append(y)
        magnitude = np.sqrt(sum(d * d for d in derivatives))
        return terms, derivatives, magnitude

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        terms, derivatives, magnitude = parts(call)
        scale = np.divide(np.asarray(grad), magnitude, out=np.zeros_like(magnitude), where=magnitude > 0)
        return {"input": sum(_transposed([t], scale * d) for t, d in zip(terms, derivatives, strict=True))}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        terms, derivatives, magnitude = parts(call)
        t = np.asarray(tangents["input"])
        moved = sum(d * _applied([term], t) for term, d in zip(terms, derivatives, strict=True))
        return np.divide(moved, magnitude, out=np.zeros_like(magnitude), where=magnitude > 0)

    return vjp, jvp


def rules() -> dict[Any, Rule]:
    """The rules of ``scipy.ndimage``'s functions, by function."""
    import scipy.ndimage as ndi

    made: dict[Any, Rule] = {}

    def add(fn: Any, takes: tuple[str, ...], pair: tuple[Any, Any], covers: str) -> None:
        made[fn] = Rule(f"scipy.ndimage.{fn.__name__}", fn, takes, *pair, covers=covers)

    orders = "; orders 0 and up per axis"
    add(ndi.correlate1d, ("input", "weights"), _correlate1d_rules(False), f"{EVERY_MODE}, every origin")
    add(ndi.convolve1d, ("input", "weights"), _correlate1d_rules(True), f"{EVERY_MODE}, every origin")
    add(ndi.correlate, ("input", "weights"), _correlate_rules(False), f"{EVERY_MODE}, every origin and axes")
    add(ndi.convolve, ("input", "weights"), _correlate_rules(True), f"{EVERY_MODE}, every origin and axes")
    add(
        ndi.gaussian_filter,
        ("input",),
        _linear(_gaussian_filter_terms),
        f"{EVERY_MODE} per axis, sigma per axis{orders}",
    )
    add(ndi.gaussian_filter1d, ("input",), _linear(_gaussian_filter1d_terms), f"{EVERY_MODE}{orders}")
    add(
        ndi.uniform_filter,
        ("input",),
        _linear(_uniform_filter_terms),
        f"{EVERY_MODE} per axis, size and origin per axis",
    )
    add(ndi.uniform_filter1d, ("input",), _linear(_uniform_filter1d_terms), f"{EVERY_MODE}, every origin")
    add(ndi.sobel, ("input",), _linear(_edge_terms((1.0, 2.0, 1.0))), f"{EVERY_MODE} per axis")
    add(ndi.prewitt, ("input",), _linear(_edge_terms((1.0, 1.0, 1.0))), f"{EVERY_MODE} per axis")
    add(ndi.laplace, ("input",), _linear(_laplace_terms), f"{EVERY_MODE} per axis")
    add(ndi.gaussian_laplace, ("input",), _linear(lambda call: _derivative_terms(call, 2)), f"{EVERY_MODE} per axis")
    add(ndi.gaussian_gradient_magnitude, ("input",), _gradient_magnitude_rules(), f"{EVERY_MODE} per axis")
    return made | _ndimage_transforms.rules()
