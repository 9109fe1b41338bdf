"""scikit-learn's ranking metrics in an evaluation loop over tensors.

The scores come out of the model with ``requires_grad`` and, on a GPU, on the device;
scikit-learn needs NumPy. ``grad="detach"`` says the metric is evaluation only, so no
warning is owed; a GPU tensor would cross to the host once. Cross-validation through
``torchify`` yields its folds as tensors, one at a time, as ``KFold.split`` yields arrays.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.model_selection import KFold

import autoconvert as ac


@ac.accepts_numpy(grad="detach")
def ranking_metrics(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """ROC AUC and average precision of ``scores`` against binary ``labels``."""
    return {
        "roc_auc": float(roc_auc_score(labels, scores)),
        "average_precision": float(average_precision_score(labels, scores)),
    }


def main() -> None:
    logits = torch.tensor([2.0, -1.0, 0.5, -0.2, 1.5], requires_grad=True)
    labels = torch.tensor([1, 0, 1, 0, 1])
    metrics = ranking_metrics(torch.sigmoid(logits), labels)
    assert metrics == {"roc_auc": 1.0, "average_precision": 1.0}
    print(", ".join(f"{name} {value:.3f}" for name, value in metrics.items()))

    folds = list(ac.torchify(KFold(n_splits=5)).split(labels))
    assert all(type(index) is torch.Tensor for fold in folds for index in fold)
    train, test = folds[-1]
    print(f"{len(folds)} folds; the last: train {train.tolist()}, test {test.tolist()}")


if __name__ == "__main__":
    main()
