"""Hypothesis strategies: dtypes, shapes and memory layouts of tensors and arrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from autoconvert._conversions._dtypes import TORCH_TO_NUMPY, WIDENED

NUMPY_HELD = list(TORCH_TO_NUMPY)
WIDENED_DTYPES = list(WIDENED)
TORCH_DTYPES = NUMPY_HELD + WIDENED_DTYPES
COPY_MODES = [None, True, False]

shapes = st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple)


def _values(dtype: torch.dtype, shape: tuple[int, ...], seed: int, specials: bool) -> torch.Tensor:
    """A tensor of ``dtype`` with varied values: NaN/inf/-0.0 among floats when ``specials``."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not (dtype.is_floating_point or dtype.is_complex):
        info = torch.iinfo(dtype)
        low, high = max(info.min, -1000), min(info.max, 1000)
        return torch.randint(low, high + 1, shape, generator=g, dtype=torch.int64).to(dtype)
    base = torch.randn(shape, generator=g, dtype=torch.float64) * 10
    if specials and base.numel() >= 3:
        flat = base.view(-1)
        flat[0], flat[1], flat[2] = float("nan"), float("inf"), -0.0
    if dtype.is_complex:
        return torch.complex(base, base.flip(-1) if base.ndim else base).to(dtype)
    if str(dtype) == "torch.float8_e8m0fnu":  # powers of two only; NaN is its one special (torch >= 2.7)
        return (2.0 ** base.nan_to_num(0, 0, 0).clamp(-20, 20).round()).to(dtype)
    return base.to(dtype)


@dataclass
class Case:
    """A tensor made with a particular layout, with the base tensor it views."""

    tensor: torch.Tensor
    base: torch.Tensor
    layout: str

    def __repr__(self) -> str:
        t = self.tensor
        return f"Case({self.layout}, {t.dtype}, shape={tuple(t.shape)}, stride={t.stride()})"


TENSOR_LAYOUTS = ["contiguous", "transposed", "sliced", "expanded", "offset", "conj", "neg"]


@st.composite
def tensors(draw: Any, dtypes: list[torch.dtype] = TORCH_DTYPES, layouts: list[str] = TENSOR_LAYOUTS) -> Case:
    """Tensors over dtype × shape (0-d, empty, odd sizes) × layout."""
    dtype = draw(st.sampled_from(dtypes))
    layout = draw(st.sampled_from(layouts))
    shape = draw(shapes)
    seed = draw(st.integers(0, 2**16))
    if layout in ("conj", "neg") and not dtype.is_complex:
        layout = "contiguous"
    if layout == "transposed":
        base = _values(dtype, shape[::-1], seed, True)
        return Case(base.permute(tuple(reversed(range(base.ndim)))), base, layout)
    if layout == "sliced":
        base = _values(dtype, tuple(2 * n + 1 for n in shape), seed, True)
        return Case(base[tuple(slice(None, None, 2) for _ in shape)], base, layout)
    if layout == "expanded":
        base = _values(dtype, tuple(1 for _ in shape), seed, True)
        return Case(base.expand(shape), base, layout)
    if layout == "offset":
        base = _values(dtype, (int(np.prod(shape)) + 3,), seed, True)
        return Case(base[3:].view(shape), base, layout)
    base = _values(dtype, shape, seed, True)
    if layout == "conj":
        return Case(base.conj(), base, layout)
    if layout == "neg":
        return Case(base.conj().imag, base, layout)
    return Case(base, base, layout)


ARRAY_LAYOUTS = [
    "C",
    "F",
    "transposed",
    "sliced",
    "negative",
    "size1_negative",
    "broadcast",
    "byteswapped",
    "readonly",
    "unaligned",
    "matrix",
]
ARRAY_DTYPES = [np.dtype(d) for d in TORCH_TO_NUMPY.values()]


@st.composite
def arrays(draw: Any, dtypes: list[np.dtype[Any]] = ARRAY_DTYPES, layouts: list[str] = ARRAY_LAYOUTS) -> np.ndarray:
    """Arrays over dtype × shape × layout, including the ones torch can't share."""
    dtype = draw(st.sampled_from(dtypes))
    layout = draw(st.sampled_from(layouts))
    shape = draw(shapes)
    seed = draw(st.integers(0, 2**16))
    torch_dtype = {v: k for k, v in TORCH_TO_NUMPY.items()}[dtype]
    make = lambda s: _values(torch_dtype, s, seed, True).numpy()  # noqa: E731
    if layout == "F":
        return np.asfortranarray(make(shape))
    if layout == "transposed":
        return make(shape[::-1]).T
    if layout == "sliced":  # (index with ... too: a[()] of a 0-d array is a scalar, not a view)
        return make(tuple(2 * n + 1 for n in shape))[(..., *(slice(None, None, 2) for _ in shape))]
    if layout == "negative":
        return make(shape)[(..., *(slice(None, None, -1) for _ in shape))]
    if layout == "size1_negative":  # numpy#23349: the stride of a size-1 axis stays negative
        return make((1, *shape))[::-1]
    if layout == "broadcast":
        return np.broadcast_to(make(tuple(1 for _ in shape)), shape)
    if layout == "byteswapped":
        a = make(shape)
        return a.astype(a.dtype.newbyteorder("S"))
    if layout == "readonly":
        a = make(shape)
        a.setflags(write=False)
        return a
    if layout == "unaligned" and dtype.itemsize > 1:
        a = make(shape)
        raw = np.zeros(a.nbytes + 1, dtype=np.uint8)[1:]
        out = raw.view(dtype).reshape(shape)
        out[...] = a
        return out
    if layout == "matrix" and len(shape) == 2:
        import warnings

        with warnings.catch_warnings():  # np.matrix itself is pending deprecation
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            return np.asmatrix(make(shape))
    return make(shape)


def torch_can_share(a: np.ndarray) -> bool:
    """Whether torch.from_numpy could share ``a`` without any fix-up: restated from the spec."""
    used = [(s, n) for s, n in zip(a.strides, a.shape, strict=True) if n > 1] if a.size else []
    return a.dtype.isnative and a.flags.writeable and a.flags.aligned and not any(s <= 0 for s, _ in used)
