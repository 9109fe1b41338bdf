"""scipy.sparse <-> torch sparse, both directions: exact values, shapes, dtypes and layouts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.ndimage
import scipy.sparse as sp
import scipy.sparse.csgraph
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac

with warnings.catch_warnings():  # the tests' own CSR tensors: torch's once-per-process beta notice
    warnings.simplefilter("ignore", UserWarning)
    torch.eye(1).to_sparse_csr()

FORMATS = ["coo", "csr", "csc", "bsr", "dia", "lil", "dok"]
LAYOUT_OF = {"coo": torch.sparse_coo, "csr": torch.sparse_csr, "csc": torch.sparse_csc, "bsr": torch.sparse_bsr}
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.complex64, np.bool_]


@st.composite
def matrices(draw: Any) -> Any:
    """SciPy sparse arrays and matrices over format x dtype x shape, duplicates included."""
    rows, cols = draw(st.integers(0, 6)), draw(st.integers(0, 6))
    fmt = draw(st.sampled_from(FORMATS))
    dtype = draw(st.sampled_from(DTYPES))
    kind = draw(st.sampled_from(["array", "matrix"]))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    dense = (rng.random((rows, cols)) * 10 * (rng.random((rows, cols)) < 0.4)).astype(dtype)
    coo = sp.coo_array(dense)
    if coo.nnz and draw(st.booleans()):  # split an entry in two: a duplicate to be summed
        coo = sp.coo_array(
            (
                np.concatenate([coo.data, coo.data[:1]]),
                (np.concatenate([coo.row, coo.row[:1]]), np.concatenate([coo.col, coo.col[:1]])),
            ),
            shape=coo.shape,
        )
    made = coo.asformat(fmt)
    return made if kind == "array" else sp.csr_matrix(made).asformat(fmt)


@given(m=matrices())
def test_scipy_results_become_exact_sparse_tensors(m: Any) -> None:
    """Layout follows the format (others: COO), indices int64, values and duplicates summed exactly."""
    t = ac.to_tensor(m)
    assert t.layout == LAYOUT_OF.get(m.format, torch.sparse_coo)
    assert tuple(t.shape) == m.shape
    expected = m.toarray()
    assert t.dtype == ac.to_tensor(expected).dtype
    np.testing.assert_array_equal(t.to_dense().numpy(), expected)
    indices = (
        [t.indices()]
        if t.layout == torch.sparse_coo
        else (
            [t.crow_indices(), t.col_indices()]
            if t.layout in (torch.sparse_csr, torch.sparse_bsr)
            else [t.ccol_indices(), t.row_indices()]
        )
    )
    assert all(i.dtype == torch.int64 for i in indices)
    if t.layout == torch.sparse_coo:
        assert t.is_coalesced()


@given(m=matrices(), layout=st.sampled_from(list(LAYOUT_OF.values())), kind=st.sampled_from(["array", "matrix"]))
def test_round_trips_keep_values_in_any_forced_layout(m: Any, layout: torch.layout, kind: str) -> None:
    """sparse_layout= forces a layout; back through sparse= the values are the same."""
    t = ac.to_tensor(m, sparse_layout=layout)
    assert t.layout == layout
    back = ac.to_numpy(t, sparse=kind)
    assert isinstance(back, sp.sparray if kind == "array" else sp.spmatrix)
    np.testing.assert_array_equal(back.toarray(), m.toarray())


def test_sparse_tensor_arguments_become_the_matching_scipy_type() -> None:
    seen: list[str] = []

    @ac.returns_tensor
    @ac.accepts_numpy
    def double(m: Any) -> Any:
        seen.append(type(m).__name__)
        return m * 2

    dense = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    for layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        t = (
            dense.to_sparse(layout=layout, blocksize=(1, 1))
            if layout in (torch.sparse_bsr, torch.sparse_bsc)
            else dense.to_sparse(layout=layout)
        )
        assert torch.equal(double(t).to_dense(), dense * 2)
    assert seen == ["coo_array", "csr_array", "csc_array", "bsr_array", "coo_array"]  # BSC: SciPy has none

    @ac.accepts_numpy(sparse="matrix")
    def kind(m: Any) -> str:
        return type(m).__name__

    assert kind(dense.to_sparse_csr()) == "csr_matrix"


def test_accepts_tensor_hands_torch_code_sparse_tensors() -> None:
    """A scipy.sparse argument reaches torch code as the matching sparse tensor, values exact."""
    seen: list[torch.layout] = []

    @ac.accepts_tensor(dtype=torch.float32)
    def total(m: torch.Tensor) -> float:
        seen.append(m.layout)
        return float(m.to_dense().sum())

    m = sp.csr_array(np.array([[0.0, 1.5], [2.0, 0.0]]))
    assert total(m) == 3.5
    assert total(m.tocoo()) == 3.5
    assert seen == [torch.sparse_csr, torch.sparse_coo]


def _recorded(seen: list[Any]) -> Any:
    def as_torch_sees_it(m: torch.Tensor) -> torch.Tensor:
        seen.append(m)
        return m

    return as_torch_sees_it


def _recorded_beside_a_tensor(seen: list[Any]) -> Any:
    def with_a_tensor(m: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        seen.append(m)
        return m

    return with_a_tensor


def _recorded_in_a_list(seen: list[Any]) -> Any:
    def each_item(ms: list[torch.Tensor]) -> list[torch.Tensor]:
        seen.extend(ms)
        return ms

    return each_item


#: The entry points handing torch code a scipy.sparse argument, each called with the matrix
#: and a list the function records what it was handed in.
_TENSOR_SIDES = {
    "adapt": lambda m, seen: ac.adapt(_recorded(seen))(m),
    "adapt-beside-a-tensor": lambda m, seen: ac.adapt(_recorded_beside_a_tensor(seen))(m, torch.ones(1)),
    "adapt-in-a-list": lambda m, seen: ac.adapt(_recorded_in_a_list(seen))([m]),
    "accepts_tensor": lambda m, seen: ac.accepts_tensor(_recorded(seen))(m),
    "to_tensor-in-a-dict": lambda m, seen: seen.append(ac.to_tensor({"m": m})["m"]),
}


@pytest.mark.parametrize("entry", list(_TENSOR_SIDES))
@given(m=matrices())
def test_every_format_and_dtype_reaches_torch_code_as_a_sparse_tensor(entry: str, m: Any) -> None:
    """A scipy.sparse argument of every format (DOK, a dict subclass, included) and dtype (bool
    included) becomes the sparse tensor of its format wherever torch code is handed one,
    ``adapt``'s ``torch.Tensor`` parameters too, its values exact; never taken apart as a
    container of its entries."""
    seen: list[Any] = []
    _TENSOR_SIDES[entry](m, seen)
    [t] = seen
    assert type(t) is torch.Tensor and t.layout == LAYOUT_OF.get(m.format, torch.sparse_coo)
    assert t.dtype == ac.to_tensor(m.toarray()).dtype
    np.testing.assert_array_equal(t.to_dense().numpy(), m.toarray())


@given(m=matrices())
def test_every_format_is_one_value_to_numpy_code_and_adapt_gives_it_back(m: Any) -> None:
    """NumPy's sides pass a scipy.sparse object through as the one value it is (DOK is never
    rebuilt as a dict), and ``adapt`` called with arrays only gives SciPy back from torch code."""
    assert ac.accepts_numpy(lambda d: d)({"m": m})["m"] is m
    assert ac.to_numpy([m])[0] is m
    back = ac.adapt(_recorded([]))(m)
    assert isinstance(back, sp.sparray)
    np.testing.assert_array_equal(back.toarray(), m.toarray())


def test_uncoalesced_tensors_are_coalesced_and_narrow_dtypes_widened() -> None:
    dup = torch.sparse_coo_tensor(
        torch.tensor([[0, 0], [1, 1]]), torch.tensor([1.0, 2.0]), (2, 2), check_invariants=True
    )
    assert ac.to_numpy(dup).toarray().tolist() == [[0.0, 3.0], [0.0, 0.0]]
    narrow = ac.to_numpy(torch.eye(2, dtype=torch.bfloat16).to_sparse())
    assert narrow.dtype == np.float32
    assert ac.to_tensor(sp.csr_array(np.eye(2)), dtype=torch.bfloat16).dtype == torch.bfloat16


def test_gradients_and_devices() -> None:
    """A sparse tensor that requires grad is detached per grad=; results go to the caller's device."""

    @ac.returns_tensor
    @ac.accepts_numpy(grad="error")
    def f(m: Any) -> Any:
        return m

    w = torch.eye(2).to_sparse().requires_grad_()
    with pytest.raises(ac.GradientError, match="argument m requires grad"):
        f(w)
    assert ac.to_tensor(sp.csr_array(np.eye(2)), device="meta").device.type == "meta"


def test_copies_are_documented_and_refused_when_asked() -> None:
    with pytest.raises(ac.CopyError, match=r"scipy\.sparse keeps index arrays in its own integer type"):
        ac.to_numpy(torch.eye(2).to_sparse(), copy=False)
    with pytest.raises(ac.CopyError, match="its index arrays are int32"):
        ac.to_tensor(sp.csr_array(np.eye(2)), copy=False)
    m = sp.csr_array(np.eye(3))
    t = ac.to_tensor(m)
    m.data[0] = 5  # copy=None: the values share SciPy's data array on the CPU
    assert t.to_dense()[0, 0] == 5
    private = ac.to_tensor(m, copy=True)
    m.data[0] = 7
    assert private.to_dense()[0, 0] == 5


def test_writeback_and_batched_sparse_dims_are_refused() -> None:
    @ac.accepts_numpy(writeback=True)
    def f(m: Any) -> None:
        pass

    with pytest.raises(ac.ConversionError, match="writeback=True cannot write a SciPy matrix's changes back"):
        f(torch.eye(2).to_sparse())

    @ac.accepts_numpy(out_params=("dense",))
    def accumulate(dense: np.ndarray, adjacency: Any) -> None:  # the fix the refusal names
        dense += adjacency @ np.ones(adjacency.shape[1])

    dense = torch.zeros(2, dtype=torch.float64)
    accumulate(dense, torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]], dtype=torch.float64).to_sparse())
    assert dense.tolist() == [3.0, 3.0]
    with pytest.raises(ac.ConversionError, match="is a 3-d sparse tensor"):
        ac.to_numpy(torch.ones(2, 2, 2).to_sparse())


def test_no_torch_sparse_warning_leaks_in_a_fresh_process() -> None:
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("error")
        import numpy as np, scipy.sparse as sp, torch, autoconvert as ac
        for fmt in ("csr", "csc", "bsr", "coo"):
            t = ac.to_tensor(sp.random(4, 4, density=0.5, format=fmt, random_state=0))
            ac.to_numpy(t)
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_float16_sparse_tensors_reach_scipy_as_float32() -> None:
    """scipy.sparse has no float16: COO raised SciPy's ValueError and CSR gave a matrix whose
    ``.toarray()`` raised. Values widen losslessly, as for dense bfloat16."""
    dense = torch.tensor([[0.0, 1.5], [2.25, 0.0]], dtype=torch.float16)
    for sparse in (dense.to_sparse(), dense.to_sparse_csr()):
        matrix = ac.to_numpy(sparse)
        assert matrix.dtype == np.float32 and np.array_equal(matrix.toarray(), dense.float().numpy())


def test_float16_sparse_arguments_get_float16_results_as_bfloat16_ones_do() -> None:
    """Widened for SciPy because it must be, a float16 sparse tensor's results narrow back,
    through the pair, numpy_op and torchify alike, sparse or dense, as bfloat16's do."""
    dense = torch.tensor([[0.0, 1.5], [2.25, 0.0]], dtype=torch.float16)
    twice = ac.returns_tensor(ac.accepts_numpy(lambda m: m * 2))
    as_dense = ac.returns_tensor(ac.accepts_numpy(lambda m: m.toarray()))
    op = ac.numpy_op(lambda m: m.toarray() * 2)
    for sparse in (dense.to_sparse(), dense.to_sparse_csr()):
        for result in (twice(sparse), as_dense(sparse), op(sparse), ac.torchify(sp).triu(sparse)):
            assert result.dtype == torch.float16
        assert torch.equal(twice(sparse).to_dense(), dense * 2)
    mixed = ac.returns_tensor(ac.accepts_numpy(lambda m, d: m.toarray() + d))
    assert mixed(dense.to_sparse(), torch.ones(2, 2)).dtype == torch.float32  # float32 among the inputs


def test_n_dimensional_scipy_coo_arrays_become_coo_tensors() -> None:
    """SciPy 1.13 made COO arrays n-d; torch's sparse_coo_tensor failed on them with
    "'len(size) == sparse_dim + dense_dim' is not satisfied"."""
    if not hasattr(sp.coo_array(np.ones((1, 1))), "coords"):
        pytest.skip("this SciPy's COO arrays are 2-d only (n-d COO arrived in SciPy 1.13)")
    for dense in (
        np.array([0.0, 2.0, 0.0, 3.0]),
        np.arange(8.0).reshape(2, 2, 2) * (np.arange(8).reshape(2, 2, 2) % 3 == 0),
    ):
        t = ac.to_tensor(sp.coo_array(dense))
        assert t.layout == torch.sparse_coo and t.is_coalesced()
        assert torch.equal(t.to_dense(), torch.from_numpy(dense))
    with pytest.raises(ac.ConversionError, match=r"is a 1-d scipy\.sparse array, which only the COO layout holds"):
        ac.to_tensor(sp.coo_array(np.ones(3)), sparse_layout=torch.sparse_csr)


@pytest.mark.parametrize("format", ["csr", "coo", "dok", "lil"])
def test_one_dimensional_scipy_arrays_of_every_format_become_coo_tensors(format: str) -> None:
    """A 1-d CSR array (SciPy 1.14's), a row of a 2-d one, iterating one through torchify: COO
    tensors, torch's compressed layouts being 2-d (they were refused as "only COO")."""
    dense = np.array([0.0, 2.0, 0.0, 3.0])
    try:
        m = sp.coo_array(dense).asformat(format)
    except (ValueError, NotImplementedError):
        pytest.skip(f"this SciPy has no 1-d {format} arrays")
    if m.ndim != 1:  # SciPy before 1.13 makes a (1, n) array of it, and iterates rows as such
        pytest.skip("this SciPy has no 1-d sparse arrays")
    t = ac.to_tensor(m)
    assert t.layout == torch.sparse_coo and t.is_coalesced()
    assert torch.equal(t.to_dense(), torch.from_numpy(dense))
    eye = torch.eye(3, dtype=torch.float64)
    rows = list(ac.torchify(sp).csr_array(eye))
    assert [row.to_dense().tolist() for row in rows] == eye.tolist()


def test_a_sparse_tensor_given_to_a_dense_only_function_is_named() -> None:
    """ndimage reads a SciPy matrix as one object and returns an object array: the error is
    about the sparse argument and says to densify it, not "result is an object array"."""
    with pytest.raises(ac.ConversionError) as info:
        ac.torchify(scipy.ndimage).gaussian_filter(torch.eye(3).to_sparse(), 1.0)
    assert str(info.value) == (
        "gaussian_filter(): argument input is a sparse tensor, handed over as a scipy.sparse matrix, and the "
        "function returned an object array: it needs a dense array, and NumPy read the matrix as one object. "
        "Found torch.Tensor(shape=(3, 3), dtype=torch.float32, layout=torch.sparse_coo, device=cpu). "
        "Fix: pass input.to_dense()."
    )

    @ac.accepts_numpy
    def dense_only(weights: Any, m: Any) -> Any:
        return np.linalg.inv(m)

    with pytest.raises(Exception) as raised:
        dense_only(1.0, m=torch.eye(2).to_sparse_csr())
    assert raised.value.__notes__[-1] == (
        "autoconvert: test_a_sparse_tensor_given_to_a_dense_only_function_is_named.<locals>.dense_only(): "
        "argument m is a sparse tensor, handed over as a scipy.sparse CSR array; if the function needs a dense "
        "array, pass m.to_dense()"
    )


def test_a_coo_tensor_given_to_a_function_that_refuses_coo_is_told_to_pass_csr() -> None:
    """csgraph's ``shortest_path`` (Floyd-Warshall) refuses COO, the layout ``torch.sparse_coo_tensor``
    makes; the note said "a scipy.sparse matrix" and offered only ``to_dense()``, a dense
    matrix of the whole graph. It names the format handed over and the CSR a solver takes."""
    graph = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 2]]), torch.ones(2), (3, 3), check_invariants=True)
    with pytest.raises(ValueError, match="csgraph must be lil, csr, or csc format") as raised:
        ac.torchify(scipy.sparse.csgraph).shortest_path(graph, method="FW")
    assert raised.value.__notes__[-1] == (
        "autoconvert: shortest_path(): argument csgraph is a sparse tensor, handed over as a scipy.sparse COO "
        "array; if the function needs CSR, pass csgraph.to_sparse_csr(); if it needs a dense array, pass "
        "csgraph.to_dense()"
    )
    distances = ac.torchify(scipy.sparse.csgraph).shortest_path(graph.to_sparse_csr(), method="FW")
    assert distances[0, 2].item() == 2.0
