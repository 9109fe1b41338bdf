"""A loss built from SciPy's special functions, trained with gradients and compiled: SciPy
runs them on torch tensors itself in its array API mode, and
``torchify(scipy.special)`` hands them the tensors as they are (``native="auto"``, the
default), converting only for functions SciPy has no torch path for.

SciPy reads the mode once, when it is imported: set ``SCIPY_ARRAY_API=1`` in the environment
that runs the program. This script sets it itself, before the import, so that it runs as it is.
"""

from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # before SciPy is imported (usually: in the shell)

import warnings

import scipy.special
import torch

import autoconvert as ac

special = ac.torchify(scipy.special)
if ac.explain(special.expit).path != "native":  # SciPy before 1.15 declares no torch path
    print(f"SciPy {scipy.__version__}: {ac.explain(special.expit).notes[0]}")
    raise SystemExit(0)


def binary_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Written with SciPy's functions, as NumPy-era code is: xlogy is 0 where its label is."""
    p = special.expit(logits)
    return -(special.xlogy(labels, p) + special.xlogy(1 - labels, 1 - p)).mean()


torch.manual_seed(0)
features = torch.randn(256, 3, dtype=torch.float64)
labels = (features @ torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64) > 0).double()
weights = torch.zeros(3, dtype=torch.float64, requires_grad=True)
optimizer = torch.optim.SGD([weights], lr=1.0)

# The hand-over adds no graph break: where dynamo traces SciPy's own torch code whole (SciPy 1.17
# with torch 2.13), fullgraph=True holds too.
step = torch.compile(lambda: binary_cross_entropy(features @ weights, labels), backend="eager")
with warnings.catch_warnings():
    # dynamo's and torch's own notes while they trace SciPy's code (lru_cache calls, torch.asarray's
    # requires_grad default, .grad of non-leaf tensors): a lost gradient would fail below instead.
    warnings.simplefilter("ignore", UserWarning)
    warnings.filterwarnings("ignore", "Guards may run slower on Python 3.13.0", RuntimeWarning)  # dynamo's
    first = step().item()
    for _ in range(50):
        optimizer.zero_grad()
        loss = step()
        loss.backward()  # the gradient flows through SciPy's own torch code
        optimizer.step()

print(f"path: {ac.explain(special.expit).path}; loss {first:.3f} -> {loss.item():.3f}")
assert loss.item() < first / 2 and weights.grad is not None
