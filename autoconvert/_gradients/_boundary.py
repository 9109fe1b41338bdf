"""ndimage's boundary modes as index maps: which sample of a line each padded position reads.

A filter under a boundary mode reads a line extended past its ends; the extension is a linear
map from the line to the padded line (each padded position copies one sample, or, under
``constant``, none). A filter's adjoint is the transposed filter on the padded grid, folded
back through that map: each padded position's value added onto the sample it copied.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

#: The filters' aliases (``grid-*``): for filters, SciPy reads them as these modes.
#: The words explain and the docs use for a rule that takes every mode ndimage has.
EVERY_MODE = "every mode (reflect, constant, nearest, mirror, wrap, grid-mirror, grid-constant, grid-wrap)"

_ALIASES = {"grid-mirror": "reflect", "grid-constant": "constant", "grid-wrap": "wrap"}
MODES = ("reflect", "constant", "nearest", "mirror", "wrap", "grid-mirror", "grid-constant", "grid-wrap")


def canonical(mode: str) -> str:
    """A filter's mode, aliases resolved."""
    return _ALIASES.get(mode, mode)


def sources(positions: NDArray[Any], n: int, mode: str) -> NDArray[Any]:
    """The sample each of ``positions`` (of a line of ``n`` samples, extended under ``mode``)
    reads; -1 where it reads none (``constant``'s padding)."""
    mode = canonical(mode)
    if mode == "nearest":
        return np.asarray(np.clip(positions, 0, n - 1))
    if mode == "wrap":
        return positions % n
    if mode == "reflect":  # d c b a | a b c d | d c b a: period 2n
        folded = positions % (2 * n)
        return np.where(folded < n, folded, 2 * n - 1 - folded)
    if mode == "mirror":  # d c b | a b c d | c b a: period 2n - 2
        if n == 1:
            return np.zeros_like(positions)
        folded = positions % (2 * n - 2)
        return np.where(folded < n, folded, 2 * n - 2 - folded)
    if mode == "constant":
        return np.where((positions >= 0) & (positions < n), positions, -1)
    raise ValueError(f"boundary mode {mode!r} is not one of {', '.join(MODES)}")


def extended(x: NDArray[Any], axis: int, left: int, right: int, *, mode: str, cval: Any) -> NDArray[Any]:
    """``x`` extended along ``axis`` by ``left`` and ``right`` samples, as ``mode`` reads it."""
    n = x.shape[axis]
    found = sources(np.arange(-left, n + right), n, mode)
    padded = np.take(x, np.maximum(found, 0), axis=axis)
    if (found < 0).any():
        index: list[Any] = [slice(None)] * x.ndim
        index[axis] = found < 0
        padded[tuple(index)] = cval
    return np.asarray(padded)


def folded(z: NDArray[Any], axis: int, n: int, left: int, mode: str) -> NDArray[Any]:
    """The transpose of ``extended``: ``z``, a padded line's values along ``axis`` (``left``
    samples before the line's ``n``), each added onto the sample it was read from."""
    z = np.moveaxis(z, axis, -1)
    positions = np.arange(z.shape[-1]) - left
    inside = (positions >= 0) & (positions < n)
    out = np.array(z[..., inside])  # the line itself reads each sample once
    pads = ~inside
    found = sources(positions[pads], n, mode)
    kept = found >= 0
    if kept.any():
        # NumPy's stubs take no Ellipsis in ufunc.at's index, which NumPy does.
        np.add.at(out, (Ellipsis, found[kept]), z[..., np.flatnonzero(pads)[kept]])  # type: ignore[arg-type]
    return np.moveaxis(out, -1, axis)
