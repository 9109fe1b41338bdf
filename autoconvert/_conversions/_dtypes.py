"""The torch <-> NumPy dtype tables, built once at import.

NumPy lacks bfloat16, the float8 types and complex32; each widens losslessly to a
dtype NumPy has (every value of the narrow type is exactly representable in the wide
one). Results can be narrowed back; see ``restoring_casts`` and ``casts_to``.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

#: torch dtype -> the NumPy dtype ``Tensor.numpy()`` gives for it.
TORCH_TO_NUMPY: dict[torch.dtype, np.dtype[np.generic]] = {
    torch.bool: np.dtype(np.bool_),
    torch.uint8: np.dtype(np.uint8),
    torch.uint16: np.dtype(np.uint16),
    torch.uint32: np.dtype(np.uint32),
    torch.uint64: np.dtype(np.uint64),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.float16: np.dtype(np.float16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
}

#: native-byte-order NumPy dtype -> torch dtype; anything missing torch cannot hold.
NUMPY_TO_TORCH: dict[np.dtype[np.generic], torch.dtype] = {v: k for k, v in TORCH_TO_NUMPY.items()}

_FLOAT8 = tuple(
    getattr(torch, name)
    for name in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")
    if hasattr(torch, name)  # the set grows with torch releases
)

#: dtypes NumPy lacks -> the smallest NumPy-representable dtype holding every value exactly.
WIDENED: dict[torch.dtype, torch.dtype] = {
    torch.bfloat16: torch.float32,
    torch.complex32: torch.complex64,
    **dict.fromkeys(_FLOAT8, torch.float32),
}

_COMPLEX_OF: dict[torch.dtype, torch.dtype] = {
    torch.float16: torch.complex32,
    torch.float32: torch.complex64,
    torch.float64: torch.complex128,
}
_REAL_OF: dict[torch.dtype, torch.dtype] = {c: r for r, c in _COMPLEX_OF.items()}

Casts = dict[torch.dtype, torch.dtype]
NO_CASTS: Casts = {}


def is_inexact(dtype: torch.dtype) -> bool:
    """Floating or complex: the dtypes the ``dtype=`` options may cast."""
    return dtype.is_floating_point or dtype.is_complex


def real_of(dtype: torch.dtype) -> torch.dtype:
    """The real dtype of a complex one (complex64 -> float32); real dtypes map to themselves."""
    return _REAL_OF.get(dtype, dtype)


#: The integer dtypes (bool is not one: it is never cast).
INTEGERS = tuple(d for d in TORCH_TO_NUMPY if not is_inexact(d) and d != torch.bool)


def narrows(source: torch.dtype, target: torch.dtype) -> bool:
    """Whether some ``source`` integer falls outside ``target``'s range (a cast would wrap it)."""
    wide, narrow = torch.iinfo(source), torch.iinfo(target)
    return wide.min < narrow.min or wide.max > narrow.max


@functools.cache
def casts_to(target: torch.dtype) -> Casts:
    """Result dtype -> cast for ``dtype=target``, within its kind only: an integer target
    casts integer results; a floating one casts real floats to ``real_of(target)`` and
    complex to its complex counterpart. Bools, and the other kinds, are never touched."""
    if not is_inexact(target):
        return {d: target for d in INTEGERS if d != target}
    real = real_of(target)
    # bfloat16 and float8 have no complex twin in torch; complex64 is their lossless home.
    cplx = _COMPLEX_OF.get(real, torch.complex64)
    inexact = [d for d in (*_COMPLEX_OF, *_REAL_OF, *WIDENED) if is_inexact(d)]
    return {d: (cplx if d.is_complex else real) for d in inexact if d != (cplx if d.is_complex else real)}


#: narrow dtype NumPy lacks -> casts that return its widened results to it (a dict lookup
#: on the per-call path, so a plain dict rather than a cached function).
RESTORING: dict[torch.dtype, Casts] = {narrow: {wide: narrow} for narrow, wide in WIDENED.items()}

#: ``widen_float16=True``: float16 widens to float32 too, losslessly (float32 holds every
#: float16 value exactly: 11 of its 24 significand bits, 5 of its 8 exponent bits), for
#: SciPy code that rejects float16 ("array type not supported"); results come back in it.
WIDENED_HALF: dict[torch.dtype, torch.dtype] = {**WIDENED, torch.float16: torch.float32}
RESTORING_HALF: dict[torch.dtype, Casts] = {**RESTORING, torch.float16: {torch.float32: torch.float16}}


def restoring_casts(narrow: torch.dtype, restoring: dict[torch.dtype, Casts] = RESTORING) -> Casts:
    """For inputs all of dtype ``narrow`` that were widened: cast results in its wide dtype back."""
    return restoring.get(narrow, NO_CASTS)


def promote(dtypes: set[torch.dtype]) -> torch.dtype:
    """``torch.promote_types`` over the real parts of a non-empty set of inexact dtypes."""
    reals = sorted({real_of(d) for d in dtypes}, key=str)
    out = reals[0]
    for d in reals[1:]:
        try:
            out = torch.promote_types(out, d)
        except RuntimeError:  # torch refuses to promote two different float8 types
            out = torch.float32
    return out
