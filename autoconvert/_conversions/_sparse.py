"""Sparse tensors and scipy.sparse matrices, both ways: COO, CSR, CSC and BSR (and n-d COO).

A sparse tensor crosses as the scipy.sparse array (or matrix) of its format, its values
and indices shared where the dtypes allow; a scipy.sparse matrix comes back in the tensor
layout of its format unless ``sparse_layout=`` names another."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._errors import ConversionError, LeafError

from ._copies import copied, crossing
from ._describe import describe_sparse, describe_tensor
from ._devices import CPU
from ._dtypes import WIDENED_HALF, Casts
from ._grad import DETACH, GradPolicy, may_lose_gradient
from ._memory import nbytes, needs_copy
from ._to_torch import Target, _cast, _needs_copy_array, _quiet_first, array_to_tensor

#: scipy.sparse format <-> torch layout; formats not listed (dia, lil, dok) become COO.
FORMAT_LAYOUT = {"coo": torch.sparse_coo, "csr": torch.sparse_csr, "csc": torch.sparse_csc, "bsr": torch.sparse_bsr}


LAYOUT_FORMAT = {layout: fmt for fmt, layout in FORMAT_LAYOUT.items()}


#: The layouts a result can be built in: those with a SciPy format (SciPy has no BSC).
SCIPY_LAYOUTS = tuple(FORMAT_LAYOUT.values())


#: Every sparse layout a tensor argument may have.
SPARSE_LAYOUTS = (*SCIPY_LAYOUTS, torch.sparse_bsc)


def tensor_to_sparse(t: torch.Tensor, copy: bool | None, grad: GradPolicy = DETACH, kind: str = "array") -> Any:
    """A 2-d sparse tensor as a scipy.sparse ``csr/csc/coo/bsr`` array (``kind="matrix"``: spmatrix).

    Always a private object: SciPy rebuilds index arrays in its own integer type, so no
    memory could be shared reliably; ``copy=False`` therefore refuses. Uncoalesced COO
    tensors are coalesced (duplicates summed); BSC, which SciPy lacks, becomes COO.
    """
    if copy is False:
        raise needs_copy(t, "scipy.sparse keeps index arrays in its own integer type, so it always copies")
    if t.dim() != 2 or t.dense_dim() != 0:
        raise LeafError(
            ConversionError,
            f"is a {t.dim()}-d sparse tensor with {t.dense_dim()} dense dimension(s); scipy.sparse holds 2-d matrices",
            describe_tensor(t),
            "{path}.to_dense(), or a 2-d sparse tensor where the function takes scipy.sparse matrices",
        )
    import scipy.sparse  # only ever reached with a sparse tensor in hand

    if may_lose_gradient(t):
        t = grad.detach(t)
    if t.layout == torch.sparse_bsc:  # SciPy has no BSC, and torch converts it only to COO
        t = t.to_sparse()
    if t.layout == torch.sparse_coo:
        t = t.coalesce()
    values = t.values().resolve_conj().resolve_neg()
    wide = WIDENED_HALF.get(values.dtype)  # scipy.sparse has no float16 either
    if t.is_cpu:
        copied("layout", t, nbytes(values))
    else:
        crossing(t, nbytes(values), t.device, CPU, lambda: describe_tensor(t))
    data = values.to(device=CPU, dtype=wide or values.dtype).numpy()
    fmt = LAYOUT_FORMAT[t.layout]
    make = getattr(scipy.sparse, f"{fmt}_{kind}")
    if fmt == "coo":
        row, col = t.indices().to(CPU).numpy()
        return make((data, (row, col)), shape=tuple(t.shape), copy=True)
    compressed, plain = (
        (t.crow_indices(), t.col_indices()) if fmt in ("csr", "bsr") else (t.ccol_indices(), t.row_indices())
    )
    return make((data, plain.to(CPU).numpy(), compressed.to(CPU).numpy()), shape=tuple(t.shape), copy=True)


_COMPRESSED_BUILDERS = {
    torch.sparse_csr: torch.sparse_csr_tensor,
    torch.sparse_csc: torch.sparse_csc_tensor,
    torch.sparse_bsr: torch.sparse_bsr_tensor,
}


def _index_tensor(a: NDArray[Any], copy: bool | None) -> torch.Tensor:
    """int64 indices, as torch's sparse tensors want them (SciPy often keeps int32)."""
    if a.dtype == np.int64 and not copy and a.flags.writeable:
        return torch.from_numpy(a)
    return torch.from_numpy(np.array(a, dtype=np.int64))


def sparse_to_tensor(
    m: Any, device: torch.device, casts: Casts, copy: bool | None, layout: torch.layout | None = None
) -> torch.Tensor:
    """A scipy.sparse array or matrix as a sparse tensor on ``device``: CSR, CSC, BSR or COO
    like its format (others become COO), or ``layout``; int64 indices, canonical structure.

    Values follow the dense rules (shared with ``m.data`` on the CPU when possible with
    ``copy=None``); indices become int64, a copy where SciPy holds int32.
    """
    if m.ndim != 2:  # SciPy 1.13's n-d COO arrays; torch's COO tensors take any sparse_dim
        return _nd_coo_to_tensor(m, device, casts, copy, layout)
    layout = layout or FORMAT_LAYOUT.get(m.format, torch.sparse_coo)
    converted = m.asformat(LAYOUT_FORMAT[layout])
    fresh = converted is not m
    if not converted.has_canonical_format:  # duplicates or unsorted indices: torch wants neither
        if copy is False:
            raise _needs_copy_array(m, "it has duplicate or unsorted entries, which must be merged")
        converted = converted if fresh else converted.copy()
        converted.sum_duplicates()
        fresh = True
    if copy is False and (fresh or converted.format == "coo"):
        raise _needs_copy_array(m, f"torch needs it as {layout}, with int64 indices, which SciPy does not hold")
    relaid = (
        fresh
        or layout == torch.sparse_coo
        or converted.indices.dtype != np.int64  # int32 indices become int64
        or converted.indptr.dtype != np.int64
    )
    _sparse_copies(m, converted.data.nbytes, device, relaid)
    values = array_to_tensor(converted.data, Target(CPU, casts, None if fresh else copy))
    size = tuple(converted.shape)
    if layout == torch.sparse_coo:
        indices = torch.from_numpy(np.vstack([converted.row, converted.col]).astype(np.int64))
        t = torch.sparse_coo_tensor(indices, values, size, is_coalesced=True, check_invariants=False)
    else:
        if copy is False and (converted.indices.dtype != np.int64 or converted.indptr.dtype != np.int64):
            raise _needs_copy_array(m, "its index arrays are int32, and torch's sparse tensors need int64")
        build = _COMPRESSED_BUILDERS[layout]
        compressed, plain = _index_tensor(converted.indptr, copy), _index_tensor(converted.indices, copy)
        t = _quiet_first("compressed", build, compressed, plain, values, size, check_invariants=False)
    return t if device is CPU else _cast(t.to, device=device, dtype=t.dtype)


def _nd_coo_to_tensor(
    m: Any, device: torch.device, casts: Casts, copy: bool | None, layout: torch.layout | None
) -> torch.Tensor:
    """A 1-d or 3-d (n-d) scipy.sparse array as a COO tensor: torch's CSR and other compressed
    layouts are 2-d, so a 1-d CSR array (SciPy 1.14's, a 2-d one's row) becomes COO too."""
    if layout not in (None, torch.sparse_coo):
        raise LeafError(
            ConversionError,
            f"is a {m.ndim}-d scipy.sparse array, which only the COO layout holds",
            describe_sparse(m),
            "pass {path}.toarray(), or leave sparse_layout= unset for a COO tensor",
        )
    if copy is False:
        raise _needs_copy_array(m, "torch needs its coordinates as one int64 array, which SciPy does not hold")
    coo = m.tocoo()  # the same array if it is COO
    _sparse_copies(m, coo.data.nbytes, device, True)
    values = array_to_tensor(coo.data, Target(CPU, casts, None))
    indices = torch.from_numpy(np.stack(coo.coords).astype(np.int64))
    t = torch.sparse_coo_tensor(indices, values, tuple(coo.shape), check_invariants=False)
    t = t.coalesce()  # duplicates summed, as for 2-d arrays
    return t if device is CPU else _cast(t.to, device=device, dtype=t.dtype)


def _sparse_copies(m: Any, nbytes: int, device: torch.device, relaid: bool) -> None:
    """Report a scipy.sparse object's copies before they are made: its new layout, its move."""
    if relaid:
        copied("layout", m, nbytes)
    if device is not CPU:
        crossing(m, nbytes, CPU, device, lambda: describe_sparse(m))
