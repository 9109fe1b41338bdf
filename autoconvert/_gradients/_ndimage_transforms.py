"""Rules for ``scipy.ndimage``'s geometric transforms: shift, zoom, rotate, affine_transform
and map_coordinates.

A transform reads, for each output point, a spline's coefficients at ``order + 1`` taps per
axis around the point's coordinate in the input, each folded back inside the array as the mode
folds it, and weights each by the spline there (a ``Sampling``, computed in NumPy as SciPy's C
code computes it). The coefficients are the input itself (orders 0 and 1, or ``prefilter=False``),
or the input padded (``nearest``, ``grid-constant``) and spline-filtered along each axis. The
input's gradient is the transpose: the output's gradient scattered back onto the taps with
their weights, then each axis's prefilter transposed, its matrix read from SciPy's own
``spline_filter1d`` applied to the identity (so each mode's boundary handling is SciPy's). The
coordinates' gradient (``map_coordinates``) is the spline's derivative at each point. The
transforms are linear in the input: the jvp in input is the transform of the tangent, with a
zero ``cval`` (the constant padding is no function of the input).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autoconvert._errors import GradientError, message

from ._boundary import EVERY_MODE
from ._rule import Call, Rule, per_axis

#: SciPy's interpolation reads ``grid-mirror`` as ``reflect`` (``_extend_mode_to_code``).
_FOLDED_AS = {"grid-mirror": "reflect"}
#: The modes SciPy prepads by 12 samples before the spline filter (``_prepad_for_spline_filter``).
_PREPADDED = ("nearest", "grid-constant")
_PREPAD = 12
#: Taps weighted at once in a backward (a block of points' worth): some 16 MB of weights and indices.
_TAPS_AT_ONCE = 1 << 20


def _folded(x: NDArray[Any], n: int, mode: str) -> tuple[NDArray[Any], NDArray[Any]]:
    """SciPy's ``map_coordinate``: coordinates ``x`` of a line of ``n`` samples folded inside
    it as ``mode`` extends the line (``constant``: -1 outside), and the fold's slope (1, -1
    where it reflects, 0 where it clamps)."""
    x = np.array(x, dtype=np.float64)
    slope = np.ones_like(x)
    low, high = x < 0, x > n - 1
    if mode in ("constant", "nearest") or n <= 1:
        x[low] = -1.0 if mode == "constant" else 0.0
        x[high] = -1.0 if mode == "constant" else (n - 1 if mode == "nearest" else 0.0)
        slope[low | high] = 0.0
        return x, slope
    v, w = x[low], x[high]
    if mode == "mirror":
        period = 2 * n - 2
        v = period * np.trunc(-v / period) + v
        up = v <= 1 - n
        x[low], slope[low] = np.where(up, v + period, -v), np.where(up, 1.0, -1.0)
        w = w - period * np.trunc(w / period)
        back = w >= n
        x[high], slope[high] = np.where(back, period - w, w), np.where(back, -1.0, 1.0)
    elif mode == "reflect":
        period = 2 * n
        v = np.where(v < -period, period * np.trunc(-v / period) + v, v)
        up = v < -n
        # SciPy keeps -in - 1 off -1 itself for a coordinate a hair below 0.
        x[low] = np.where(up, v + period, np.where(v > -1e-15, 1e-15, -v) - 1)
        slope[low] = np.where(up, 1.0, -1.0)
        w = w - period * np.trunc(w / period)
        back = w >= n
        x[high], slope[high] = np.where(back, period - w - 1, w), np.where(back, -1.0, 1.0)
    elif mode == "wrap":  # SciPy's wrap repeats with period n - 1: the last sample is the first
        period = n - 1
        x[low] = v + period * (np.trunc(-v / period) + 1)
        x[high] = w - period * np.trunc(w / period)
    elif mode == "grid-wrap":
        x[low] = v + n * (np.trunc((-1 - v) / n) + 1)
        x[high] = w - n * np.trunc(w / n)
    else:
        raise ValueError(f"boundary mode {mode!r} is not one SciPy's interpolation takes")
    return x, slope


def _weights(x: NDArray[Any], order: int) -> tuple[NDArray[Any], NDArray[Any]]:
    """SciPy's ``get_spline_interpolation_weights`` at coordinates ``x``, one row of ``order
    + 1`` per coordinate, and their derivatives in the coordinate."""
    if order == 0:
        return np.ones((len(x), 1)), np.zeros((len(x), 1))
    x = x - np.floor(x if order & 1 else x + 0.5)
    z = 1.0 - x
    w: list[Any] = [None] * (order + 1)
    d: list[Any] = [None] * (order + 1)
    if order == 1:
        w[0], d[0] = 1.0 - x, -np.ones_like(x)
    elif order == 2:
        w[1], d[1] = 0.75 - x * x, -2.0 * x
        y = 0.5 - x
        w[0], d[0] = 0.5 * y * y, -y
    elif order == 3:
        w[1], d[1] = (x * x * (x - 2.0) * 3.0 + 4.0) / 6.0, (3.0 * x * x - 4.0 * x) / 2.0
        w[2], d[2] = (z * z * (z - 2.0) * 3.0 + 4.0) / 6.0, -(3.0 * z * z - 4.0 * z) / 2.0
        w[0], d[0] = z * z * z / 6.0, -z * z / 2.0
    elif order == 4:
        t = x * x
        w[2], d[2] = t * (t * 0.25 - 0.625) + 115.0 / 192.0, x * (t - 1.25)

        def quartic(y: Any) -> tuple[Any, Any]:
            value = y * (y * (y * (5.0 - y) / 6.0 - 1.25) + 5.0 / 24.0) + 55.0 / 96.0
            return value, y * y * (15.0 - 4.0 * y) / 6.0 - 2.5 * y + 5.0 / 24.0

        (w[1], d[1]), (w[3], d[3]) = quartic(1.0 + x), quartic(z)
        d[3] = -d[3]
        y = 0.5 - x
        w[0], d[0] = y**4 / 24.0, -(y**3) / 6.0
    elif order == 5:

        def inner(y: Any) -> tuple[Any, Any]:
            t = y * y
            return t * (t * (0.25 - y / 12.0) - 0.5) + 0.55, y * t - 5.0 * t * t / 12.0 - y

        def outer(y: Any) -> tuple[Any, Any]:
            value = y * (y * (y * (y * (y / 24.0 - 0.375) + 1.25) - 1.75) + 0.625) + 0.425
            return value, y * (y * (y * (5.0 * y / 24.0 - 1.5) + 3.75) - 3.5) + 0.625

        (w[2], d[2]), (w[3], d[3]) = inner(x), inner(z)
        (w[1], d[1]), (w[4], d[4]) = outer(1.0 + x), outer(1.0 + z)
        d[3], d[4] = -d[3], -d[4]
        w[0], d[0] = z**5 / 120.0, -(z**4) / 24.0
    else:
        raise ValueError(f"spline order {order} is not one SciPy takes (0 to 5)")
    # SciPy takes the last weight as 1 less the others: they sum to 1.
    w[order] = 1.0 - sum(w[:order])
    d[order] = -sum(d[:order])
    return np.stack(w, axis=-1), np.stack(d, axis=-1)


@dataclasses.dataclass(frozen=True)
class _Axis:
    """Along one axis, where each point reads: its taps' ``index`` into the coefficients
    (-1: the tap reads ``cval``, under ``grid-constant``), their ``weight`` and its ``slope`` in
    the point's coordinate; ``inside`` False where the point reads ``cval`` alone (``constant``)."""

    index: NDArray[Any]
    weight: NDArray[Any]
    slope: NDArray[Any]
    inside: NDArray[Any]

    def take(self, rows: NDArray[Any]) -> _Axis:
        return _Axis(self.index[rows], self.weight[rows], self.slope[rows], self.inside[rows])


def _axis(coordinate: NDArray[Any], n: int, order: int, mode: str) -> _Axis:
    """Where points at ``coordinate`` (on the coefficients' axis of ``n``) read, as SciPy's
    ``NI_GeometricTransform`` and ``NI_ZoomShift`` find it."""
    if mode in ("grid-constant", "nearest"):  # SciPy folds the taps alone, not the coordinate
        cc, slope = np.asarray(coordinate, dtype=np.float64), np.ones(len(coordinate))
        inside = np.ones(len(coordinate), dtype=bool)
    else:
        cc, slope = _folded(coordinate, n, mode)
        inside = cc > -1.0
    start = np.floor(cc if order & 1 else cc + 0.5).astype(np.intp) - order // 2
    taps = start[:, None] + np.arange(order + 1)
    if mode == "grid-constant":
        index = np.where((taps >= 0) & (taps < n), taps, -1)
    else:  # constant and wrap read the spline's taps mirrored
        spline_mode = "mirror" if mode in ("constant", "wrap") else mode
        index = _folded(taps, n, spline_mode)[0].astype(np.intp)
    weight, derivative = _weights(cc, order)
    return _Axis(index, weight, derivative * slope[:, None], inside)


@dataclasses.dataclass(frozen=True)
class _Sampling:
    """A transform of images of ``shape`` (a batch of them, for rotate's planes): each output
    point's taps along every axis, and how the spline's coefficients were made."""

    axes: tuple[_Axis, ...]
    shape: tuple[int, ...]
    order: int
    mode: str
    prefilter: bool

    @property
    def pad(self) -> int:
        """The samples SciPy pads each side with before the spline filter."""
        return _PREPAD if self.filtered and self.mode in _PREPADDED else 0

    @property
    def filtered(self) -> bool:
        return self.prefilter and self.order > 1

    def _taps(self, rows: slice) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
        """Every tap over all axes of the points ``rows``: its flat index into the
        coefficients (0 where it reads cval), its weight (0 where the point reads cval alone),
        and whether it reads cval."""
        dims = [n + 2 * self.pad for n in self.shape]
        strides = np.cumprod([1, *dims[::-1]])[-2::-1]
        rank = len(self.axes)
        flat: Any = 0
        inside = np.logical_and.reduce([a.inside[rows] for a in self.axes])
        weight: Any = inside.astype(np.float64)[_along(-1, rank)]
        cval: Any = False
        for k, (axis, stride) in enumerate(zip(self.axes, strides, strict=True)):
            place = _along(k, rank)
            index = axis.index[rows]
            flat = flat + np.maximum(index, 0)[place] * stride
            cval = cval | (index < 0)[place]
            weight = weight * axis.weight[rows][place]
        shape = (len(inside), (self.order + 1) ** rank)
        return flat.reshape(shape), weight.reshape(shape), np.broadcast_to(cval, weight.shape).reshape(shape)

    def _blocks(self) -> list[slice]:
        """The points in blocks, so that their taps (``(order + 1) ** rank`` each) stay small."""
        count = len(self.axes[0].inside)
        size = max(1, _TAPS_AT_ONCE // (self.order + 1) ** len(self.axes))
        return [slice(begin, begin + size) for begin in range(0, count, size)]

    def transpose(self, grad: NDArray[Any]) -> NDArray[Any]:
        """The gradient of images ``(batch, *shape)``, given their outputs' ``(batch, points)``."""
        dims = tuple(n + 2 * self.pad for n in self.shape)
        size = int(np.prod(dims))
        coefficients = np.zeros((len(grad), size))
        for rows in self._blocks():
            flat, weight, cval = self._taps(rows)
            reads = np.where(cval, 0.0, weight)
            for b, g in enumerate(grad):
                coefficients[b] += np.bincount(flat.ravel(), weights=(g[rows, None] * reads).ravel(), minlength=size)
        coefficients = coefficients.reshape((len(grad), *dims))
        if not self.filtered:
            return coefficients
        for k, n in enumerate(self.shape):
            line = _line_filter(n, self.order, self.mode, self.pad)
            coefficients = np.moveaxis(np.moveaxis(coefficients, k + 1, -1) @ line, -1, k + 1)
        return coefficients

    def slopes(self, x: NDArray[Any], grad: NDArray[Any], cval: float) -> NDArray[Any]:
        """The gradient of the coordinates ``(rank, points)``, given the outputs' ``grad`` for
        the image ``x``: the spline's derivative along each axis at each point, times ``grad``."""
        from scipy import ndimage

        coefficients = np.asarray(x, dtype=np.float64)
        if self.filtered:
            if self.pad:
                padding = {"mode": "edge"} if self.mode == "nearest" else {"constant_values": cval}
                coefficients = np.pad(coefficients, self.pad, **padding)
            coefficients = ndimage.spline_filter(coefficients, self.order, output=np.float64, mode=self.mode)
        coefficients = coefficients.ravel()
        rank = len(self.axes)
        found = np.zeros((rank, len(grad)))
        for rows in self._blocks():
            flat, _, cval_taps = self._taps(rows)
            values = np.where(cval_taps, cval, coefficients[flat]).reshape((-1,) + (self.order + 1,) * rank)
            inside = np.logical_and.reduce([a.inside[rows] for a in self.axes])
            for k in range(rank):
                product = values
                for j, axis in enumerate(self.axes):
                    product = product * (axis.slope if j == k else axis.weight)[rows][_along(j, rank)]
                found[k, rows] = np.where(inside, product.reshape(len(inside), -1).sum(axis=1), 0.0) * grad[rows]
        return found


def _along(k: int, rank: int) -> tuple[Any, ...]:
    """The index placing an axis's ``(points, taps)`` array along tap axis ``k`` of ``rank``
    (-1: a ``(points,)`` array, broadcast along every tap axis)."""
    return (slice(None), *(slice(None) if j == k else None for j in range(rank)))


@functools.lru_cache(maxsize=64)
def _line_filter(n: int, order: int, mode: str, pad: int) -> NDArray[Any]:
    """The matrix taking a line of ``n`` samples to its spline coefficients: SciPy's padding
    and ``spline_filter1d`` applied to the identity, so each mode's boundary is SciPy's own."""
    from scipy import ndimage

    basis = np.eye(n)
    if pad:  # the padding's linear part: edge copies (nearest), zeros (grid-constant's cval)
        basis = np.pad(basis, ((pad, pad), (0, 0)), mode="edge" if mode == "nearest" else "constant")
    matrix = np.asarray(ndimage.spline_filter1d(basis, order, axis=0, output=np.float64, mode=mode))
    matrix.flags.writeable = False
    return matrix


def _sampling(coordinates: list[NDArray[Any]], shape: tuple[int, ...], call: Call, rows: Any = None) -> _Sampling:
    """The sampling of images of ``shape`` at ``coordinates`` (one array per axis, in the
    input's frame), under the call's order, mode and prefilter; ``rows``: per axis, the
    output points' index into that axis's ``coordinates`` (a separable transform's lines)."""
    order, prefilter = int(call["order"]), bool(call["prefilter"])
    mode = _FOLDED_AS.get(call["mode"], call["mode"])
    pad = _PREPAD if prefilter and order > 1 and mode in _PREPADDED else 0
    axes = tuple(_axis(c + pad, n + 2 * pad, order, mode) for c, n in zip(coordinates, shape, strict=True))
    if rows is not None:
        axes = tuple(a.take(r) for a, r in zip(axes, rows, strict=True))
    return _Sampling(axes, shape, order, mode, prefilter)


def _grid(shape: tuple[int, ...]) -> list[NDArray[Any]]:
    """Each output point's index along each axis, points in C order."""
    return [i.ravel() for i in np.indices(shape)]


def _zoom_shift(call: Call, zoom: Any, shift: Any, grid_mode: bool = False) -> _Sampling:
    """SciPy's ``NI_ZoomShift``: along each axis, output index ``k`` reads ``(k + shift) * zoom``."""
    shape, out = np.shape(call["input"]), np.shape(call.output)
    lines = []
    for axis, size in enumerate(out):
        c = np.arange(size, dtype=np.float64)
        if shift is not None:
            c = c + shift[axis]
        if zoom is not None:
            c = ((c + 0.5) * zoom[axis] - 0.5) if grid_mode else c * zoom[axis]
        lines.append(c)
    return _sampling(lines, shape, call, _grid(out))


def _affine(call: Call, matrix: NDArray[Any], offset: NDArray[Any], shape: tuple[int, ...], out: Any) -> _Sampling:
    """SciPy's ``NI_GeometricTransform`` with a matrix: output point ``o`` reads
    ``offset + matrix @ o``, summed in SciPy's order."""
    points = _grid(tuple(out))
    coordinates = []
    for row, start in zip(matrix, offset, strict=True):
        c = np.full(len(points[0]), start)
        for index, m in zip(points, row, strict=True):
            c = c + index * m
        coordinates.append(c)
    return _sampling(coordinates, shape, call)


def _shift_sampling(call: Call) -> _Sampling:
    ndim = np.ndim(call["input"])
    return _zoom_shift(call, None, [-float(s) for s in per_axis(call["shift"], ndim)])


def _zoom_sampling(call: Call) -> _Sampling:
    shape, out = np.array(np.shape(call["input"])), np.array(np.shape(call.output))
    grid_mode = bool(call.arguments.get("grid_mode", False))
    if not grid_mode:
        shape, out = shape - 1, out - 1
    zoom = np.divide(shape, out, out=np.ones(len(shape), dtype=np.float64), where=out != 0)
    return _zoom_shift(call, zoom, None, grid_mode)


def _is_identity_zoom(call: Call) -> bool:
    """SciPy returns the input itself for a zoom of 1 along every axis, with the prefilter."""
    zooms = per_axis(call["zoom"], np.ndim(call["input"]))
    return bool(call["prefilter"]) and all(z == 1 for z in zooms)


def _affine_sampling(call: Call) -> _Sampling:
    shape = np.shape(call["input"])
    ndim = len(shape)
    matrix = np.asarray(call["matrix"], dtype=np.float64)
    offset: Any = call["offset"]
    if matrix.ndim == 2 and matrix.shape[1] == ndim + 1 and matrix.shape[0] in (ndim, ndim + 1):
        offset, matrix = matrix[:ndim, ndim], matrix[:ndim, :ndim]  # a homogeneous matrix
    offset = np.asarray(per_axis(offset, ndim), dtype=np.float64)
    if matrix.ndim == 1:  # a diagonal: SciPy zooms and shifts
        return _zoom_shift(call, matrix, offset / matrix)
    return _affine(call, matrix, offset, shape, np.shape(call.output))


def _map_sampling(call: Call) -> _Sampling:
    coordinates = np.asarray(call["coordinates"], dtype=np.float64)
    return _sampling([c.ravel() for c in coordinates], np.shape(call["input"]), call)


def _rotation(call: Call) -> tuple[_Sampling, list[int]]:
    """rotate's sampling of one plane (SciPy rotates each plane along ``axes`` alike), and the
    plane's axes."""
    from scipy import special

    shape = np.shape(call["input"])
    ndim = len(shape)
    axes = sorted(int(a) % ndim for a in call["axes"])
    angle = call["angle"]
    c, s = special.cosdg(angle), special.sindg(angle)
    matrix = np.array([[c, s], [-s, c]])
    plane = np.asarray(shape)[axes]
    out_plane = np.asarray(np.shape(call.output))[axes]
    offset = (plane - 1) / 2 - matrix @ ((out_plane - 1) / 2)
    return _affine(call, matrix, offset, tuple(int(n) for n in plane), out_plane), axes


def _whole(sampling_of: Callable[[Call], _Sampling | None]) -> Callable[[Call, NDArray[Any]], NDArray[Any]]:
    """The transpose of a transform of the whole input whose sampling is ``sampling_of(call)``
    (None: the output is the input itself)."""

    def transposed(call: Call, grad: NDArray[Any]) -> NDArray[Any]:
        sampling = sampling_of(call)
        return grad if sampling is None else sampling.transpose(grad.reshape(1, -1))[0]

    return transposed


def _planes(call: Call, grad: NDArray[Any]) -> NDArray[Any]:
    """rotate's transpose: every plane along ``axes`` transposed alike, as a batch."""
    sampling, axes = _rotation(call)
    g = np.moveaxis(grad, axes, (-2, -1))
    planes = sampling.transpose(g.reshape(-1, g.shape[-2] * g.shape[-1]))
    shape = np.moveaxis(np.empty(np.shape(call["input"]), dtype=bool), axes, (-2, -1)).shape
    return np.moveaxis(planes.reshape(shape), (-2, -1), axes)


def _verified(
    fn: Any,
    transposed: Callable[[Call, NDArray[Any]], NDArray[Any]],
    probes: tuple[Callable[[dict[str, Any]], dict[str, Any]], ...] = (dict,),
) -> Callable[[Call, NDArray[Any]], NDArray[Any]]:
    """``transposed``, checked once per form of call (shapes, matrix shape, order, mode,
    prefilter) to be the transpose of ``fn`` as this SciPy computes it: ``<A x, g> == <x, A^T g>``
    on random probes, the call's own arguments and those ``probes`` make of them (a generic
    angle). SciPy 1.12 samples affine_transform's and rotate's ``constant`` and ``wrap`` modes
    otherwise than later releases; such a form is a GradientError, never a wrong gradient."""
    holds: dict[Any, bool] = {}

    def checked(call: Call, grad: NDArray[Any]) -> NDArray[Any]:
        form = (
            np.shape(call["input"]),
            np.shape(call.arguments.get("matrix", ())),
            np.shape(call.output),
            call["order"],
            call["mode"],
            bool(call["prefilter"]),
        )
        if form not in holds:
            holds[form] = all(_adjoint_holds(fn, transposed, probe(dict(call.arguments))) for probe in probes)
        if not holds[form]:
            raise GradientError(
                message(
                    f"{fn.__name__}()",
                    "argument input",
                    "requires grad, and this SciPy samples this form of the call otherwise than the catalogue's "
                    "rule transposes it (checked against SciPy's own result)",
                    f"mode={call['mode']!r}, order={call['order']}",
                    "call it without requires_grad (.detach()), or pass another mode; a newer SciPy samples every "
                    "form as the rule does",
                )
            )
        return transposed(call, grad)

    return checked


def _adjoint_holds(fn: Any, transposed: Callable[[Call, NDArray[Any]], NDArray[Any]], given: dict[str, Any]) -> bool:
    """``<A x, g> == <x, A^T g>`` for random ``x`` and ``g``: A the call's linear part, A^T the rule's."""
    rng = np.random.default_rng(0)
    x = rng.random(np.shape(given["input"]))
    probe = {**given, "input": x}
    forward = _transformed(fn, Call(probe, None), x)
    g = rng.random(forward.shape)
    back = transposed(Call(probe, forward), g)
    scale = float(np.abs(forward).sum() * np.abs(g).max()) + 1.0
    return abs(float(np.vdot(forward, g)) - float(np.vdot(x, back))) <= 1e-9 * scale


def _input_rules(fn: Any, transposed: Callable[[Call, NDArray[Any]], NDArray[Any]]) -> tuple[Any, Any]:
    """The vjp and jvp in ``input`` of ``fn``, whose transpose is ``transposed(call, grad)``."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        return {"input": transposed(call, np.asarray(grad, dtype=np.float64))}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        return _transformed(fn, call, tangents["input"])

    return vjp, jvp


def _transformed(fn: Any, call: Call, tangent: Any) -> NDArray[Any]:
    """``fn`` as called, on the input's tangent, with a zero cval: the transform's linear part."""
    given = {**call.arguments, "input": np.asarray(tangent), "cval": 0.0, "output": None}
    return np.asarray(fn(**given))


def _map_coordinates_rules(fn: Any) -> tuple[Any, Any]:
    """map_coordinates' vjp and jvp in ``input`` and ``coordinates``."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        g = np.asarray(grad, dtype=np.float64).ravel()
        sampling = _map_sampling(call)
        found: dict[str, Any] = {}
        if "input" in wanted:
            found["input"] = sampling.transpose(g.reshape(1, -1))[0]
        if "coordinates" in wanted:
            slopes = sampling.slopes(call["input"], g, float(call["cval"]))
            found["coordinates"] = slopes.reshape(np.shape(call["coordinates"]))
        return found

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        total: Any = _transformed(fn, call, tangents["input"]) if "input" in tangents else 0.0
        if "coordinates" in tangents:
            t = np.asarray(tangents["coordinates"], dtype=np.float64)
            count = t[0].size
            slopes = _map_sampling(call).slopes(call["input"], np.ones(count), float(call["cval"]))
            total = total + (slopes * t.reshape(len(t), count)).sum(axis=0).reshape(t.shape[1:])
        return total

    return vjp, jvp


_ORDERS = "orders 0 to 5, prefilter or not"


def rules() -> dict[Any, Rule]:
    """The rules of ``scipy.ndimage``'s geometric transforms, by function."""
    import scipy.ndimage as ndi

    made: dict[Any, Rule] = {}

    def add(fn: Any, takes: tuple[str, ...], pair: tuple[Any, Any], covers: str) -> None:
        made[fn] = Rule(f"scipy.ndimage.{fn.__name__}", fn, takes, *pair, covers=covers)

    def zoom(call: Call) -> _Sampling | None:
        return None if _is_identity_zoom(call) else _zoom_sampling(call)

    add(ndi.shift, ("input",), _input_rules(ndi.shift, _whole(_shift_sampling)), f"{EVERY_MODE}; {_ORDERS}")
    add(ndi.zoom, ("input",), _input_rules(ndi.zoom, _whole(zoom)), f"{EVERY_MODE}; {_ORDERS}; grid_mode")
    add(
        ndi.affine_transform,
        ("input",),
        _input_rules(ndi.affine_transform, _verified(ndi.affine_transform, _whole(_affine_sampling))),
        f"{EVERY_MODE}; {_ORDERS}; a matrix, a diagonal, or a homogeneous matrix; offset, output_shape",
    )
    add(
        ndi.rotate,
        ("input",),
        _input_rules(ndi.rotate, _verified(ndi.rotate, _planes, (dict, lambda given: {**given, "angle": 33.0}))),
        f"{EVERY_MODE}; {_ORDERS}; any axes, reshape or not",
    )
    add(
        ndi.map_coordinates,
        ("input", "coordinates"),
        _map_coordinates_rules(ndi.map_coordinates),
        f"{EVERY_MODE}; {_ORDERS}; in coordinates, the spline's derivative (none at order 0)",
    )
    return made
