"""FID's matrix square root: scipy.linalg.sqrtm on the product of two covariance matrices.

The statistics come from torch features (float32, on the batch's device); sqrtm runs in
float64 in SciPy and may return a complex result with a negligible imaginary part. The
distance is computed in float64 and returned as a 0-d tensor where the features were.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import torch

import autoconvert as ac


@ac.returns_tensor
@ac.accepts_numpy
def frechet_distance(mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray) -> np.float64:
    mu1, mu2 = mu1.astype(np.float64), mu2.astype(np.float64)
    covmean = scipy.linalg.sqrtm(sigma1.astype(np.float64) @ sigma2.astype(np.float64))
    covmean = covmean.real if np.iscomplexobj(covmean) else covmean
    diff = mu1 - mu2
    return np.float64(diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2 * np.trace(covmean))


def statistics(features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return features.mean(0), torch.cov(features.T)


def main() -> None:
    torch.manual_seed(0)
    real, fake = torch.randn(500, 8), torch.randn(500, 8) + 0.5
    same = frechet_distance(*statistics(real), *statistics(real))
    apart = frechet_distance(*statistics(real), *statistics(fake))
    assert same.shape == () and abs(same.item()) < 1e-6 and apart.item() > 1.5
    print(f"FID(real, real) = {same.item():.2e}, FID(real, fake) = {apart.item():.3f}")


if __name__ == "__main__":
    main()
