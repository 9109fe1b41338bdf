"""A NumPy-era estimator, written the way legacy code is: arrays in, fitted arrays as attributes."""

from __future__ import annotations

import numpy as np


class Whitener:
    """Fits a mean and a whitening matrix; transform() applies them."""

    def __init__(self, eps: float = 1e-6) -> None:
        self.eps = eps

    def fit(self, x: np.ndarray) -> Whitener:
        assert isinstance(x, np.ndarray), type(x)
        self.mean_ = x.mean(axis=0)
        cov = np.cov(x - self.mean_, rowvar=False)
        values, vectors = np.linalg.eigh(cov)
        self.components_ = vectors / np.sqrt(values + self.eps)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        assert isinstance(x, np.ndarray), type(x)
        return (x - self.mean_) @ self.components_

    @classmethod
    def identity(cls, dim: int) -> Whitener:
        made = cls()
        made.mean_, made.components_ = np.zeros(dim), np.eye(dim)
        return made


class Clipper:
    """A class with a staticmethod and a class constant, beside its methods."""

    limit = 1.0

    @staticmethod
    def clip(x: np.ndarray, limit: float) -> np.ndarray:
        return np.clip(x, -limit, limit)

    def apply(self, x: np.ndarray) -> np.ndarray:
        return self.clip(x, self.limit)
