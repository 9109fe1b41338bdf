"""A NumPy-era estimator object used from torch with torchify: fit on tensors, chain, read back.

The class below stands for the legacy code a pipeline inherits: it only knows arrays.
torchify makes its constructor, methods and fitted attributes speak tensors, without
touching its source.
"""

from __future__ import annotations

import numpy as np
import torch

import autoconvert as ac


class PCA:
    """Principal components by SVD, written for NumPy arrays."""

    def __init__(self, n_components: int) -> None:
        self.n_components = n_components

    def fit(self, x: np.ndarray) -> PCA:
        self.mean_ = x.mean(axis=0)
        _, singular, vt = np.linalg.svd(x - self.mean_, full_matrices=False)
        self.components_ = vt[: self.n_components]
        self.explained_variance_ = singular[: self.n_components] ** 2 / (len(x) - 1)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean_) @ self.components_.T


def main() -> None:
    torch.manual_seed(0)
    latent = torch.randn(300, 2)
    data = latent @ torch.tensor([[3.0, 0.0, 1.0], [0.0, 0.5, 0.0]]) + 0.01 * torch.randn(300, 3)
    pca = ac.torchify(PCA, dtype="input")(n_components=2)
    codes = pca.fit(data).transform(data)  # fit returns the proxy: the chain stays in tensors
    assert isinstance(pca, PCA) and codes.shape == (300, 2) and codes.dtype == torch.float32
    assert isinstance(pca.components_, torch.Tensor) and pca.explained_variance_[0] > pca.explained_variance_[1]
    print("explained variance:", [round(v, 3) for v in pca.explained_variance_.tolist()])


if __name__ == "__main__":
    main()
