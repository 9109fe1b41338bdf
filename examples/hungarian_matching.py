"""Hungarian matching in a DETR-style detection loss: SciPy's linear_sum_assignment per image.

Predictions live on the batch's device and require grad; the matcher needs NumPy. The
matching itself carries no gradient (it picks pairs), so it runs under no_grad, and the
loss on the matched pairs is plain torch, differentiable as usual.
"""

from __future__ import annotations

import scipy.optimize
import torch

import autoconvert as ac

match_each = ac.batched(scipy.optimize.linear_sum_assignment)  # one cost matrix per image


def matching_loss(pred_boxes: torch.Tensor, target_boxes: list[torch.Tensor]) -> torch.Tensor:
    """L1 loss between each image's targets and the predictions matched to them."""
    with torch.no_grad():
        costs = [torch.cdist(pred, target, p=1) for pred, target in zip(pred_boxes, target_boxes, strict=True)]
        rows, cols = match_each(costs)  # ragged: a list of index tensors per image
    losses = [
        (pred[r] - target[c]).abs().sum()
        for pred, target, r, c in zip(pred_boxes, target_boxes, rows, cols, strict=True)
    ]
    return torch.stack(losses).mean()


def main() -> None:
    torch.manual_seed(0)
    pred = torch.rand(2, 5, 4, requires_grad=True)  # 2 images, 5 predicted boxes each
    targets = [pred[0, [3, 1]].detach() + 0.01, pred[1, [4]].detach() - 0.02]  # 2 and 1 ground-truth boxes
    loss = matching_loss(pred, targets)
    loss.backward()
    assert pred.grad is not None and pred.grad[0, 3].abs().sum() > 0  # the matched box learns
    print(f"matching loss {loss.item():.4f}; gradient reaches the matched predictions")


if __name__ == "__main__":
    main()
