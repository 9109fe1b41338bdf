"""A GCN's normalised adjacency D^-1/2 (A + I) D^-1/2, built with scipy.sparse, used by torch.

Graph code builds its adjacency with scipy.sparse and used to hand-convert it with the
deprecated torch.sparse.FloatTensor and int32 indices. Here the SciPy function takes the
edge tensor's sparse COO matrix and returns a CSR matrix that arrives as a sparse CSR
tensor with int64 indices, ready for torch.sparse.mm.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import torch

import autoconvert as ac


@ac.returns_tensor(dtype=torch.float32)
@ac.accepts_numpy
def normalised_adjacency(adjacency: scipy.sparse.coo_array) -> scipy.sparse.csr_array:
    with_loops = adjacency + scipy.sparse.eye_array(adjacency.shape[0])
    degree = np.asarray(with_loops.sum(axis=1)).ravel()
    scale = scipy.sparse.diags_array(1.0 / np.sqrt(degree))
    return (scale @ with_loops @ scale).tocsr()


def gcn_layer(a_hat: torch.Tensor, features: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.relu(a_hat.to_sparse_coo() @ (features @ weight))


def main() -> None:
    edges = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])  # a path graph 0-1-2-3
    adjacency = torch.sparse_coo_tensor(edges, torch.ones(edges.shape[1]), (4, 4), check_invariants=True)
    a_hat = normalised_adjacency(adjacency)
    assert a_hat.layout == torch.sparse_csr and a_hat.col_indices().dtype == torch.int64
    assert torch.allclose(a_hat.to_dense(), a_hat.to_dense().T)  # symmetric, as it must be
    weight = torch.randn(3, 2, requires_grad=True)
    out = gcn_layer(a_hat, torch.randn(4, 3), weight)
    out.sum().backward()
    assert out.shape == (4, 2) and weight.grad is not None
    print("A_hat row sums:", [round(v, 3) for v in a_hat.to_dense().sum(1).tolist()])


if __name__ == "__main__":
    main()
