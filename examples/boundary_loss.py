"""A distance-transform boundary loss (Kervadec et al.): SciPy's EDT per mask, torch for the rest.

The signed distance map depends only on the ground truth, so it needs no gradient; the
loss multiplies it with the predicted probabilities, which keep theirs.
"""

from __future__ import annotations

import numpy as np
import scipy.ndimage
import torch

import autoconvert as ac


@ac.batched
def signed_distance(mask: np.ndarray) -> np.ndarray:
    """Negative inside the object, positive outside, zero on the boundary."""
    if not mask.any():
        return np.zeros(mask.shape)
    outside = scipy.ndimage.distance_transform_edt(~mask)
    inside = scipy.ndimage.distance_transform_edt(mask)
    return outside - inside


def boundary_loss(probabilities: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    distances = signed_distance(masks.bool()).to(probabilities.dtype)  # per-sample SciPy, stacked
    return (probabilities * distances).mean()


def main() -> None:
    masks = torch.zeros(2, 16, 16)
    masks[:, 4:12, 4:12] = 1
    logits = torch.zeros(2, 16, 16, requires_grad=True)
    loss = boundary_loss(torch.sigmoid(logits), masks)
    loss.backward()
    assert logits.grad is not None
    assert logits.grad[0, 8, 8] < 0 < logits.grad[0, 0, 0]  # push up inside, down outside
    print(f"boundary loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
