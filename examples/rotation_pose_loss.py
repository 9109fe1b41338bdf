"""A pose loss through SciPy's ``Rotation``, trained with gradients: in SciPy's array API mode,
``Rotation.from_euler`` of a tensor makes a rotation holding tensors, and
``torchify(scipy.spatial.transform)`` keeps it on SciPy's own torch path, so ``apply``'s
result carries the gradient back to the angles.

SciPy reads the mode once, when it is imported: set ``SCIPY_ARRAY_API=1`` in the environment
that runs the program. This script sets it itself, before the import, so that it runs as it is.
"""

from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # before SciPy is imported (usually: in the shell)

import warnings

import scipy.spatial.transform
import torch

import autoconvert as ac

transform = ac.torchify(scipy.spatial.transform)
if ac.explain(transform.Rotation.from_euler).path != "native":  # SciPy before 1.17 declares none for Rotation
    print(f"SciPy {scipy.__version__}: Rotation converts; {ac.explain(transform.Rotation).notes}")
    raise SystemExit(0)

torch.manual_seed(0)
points = torch.randn(64, 3, dtype=torch.float64)
truth = torch.tensor([0.7, -0.3, 1.2], dtype=torch.float64)
observed = transform.Rotation.from_euler("zyx", truth).apply(points)  # the points seen by a camera

angles = torch.zeros(3, dtype=torch.float64, requires_grad=True)
optimizer = torch.optim.Adam([angles], lr=0.05)


def pose_loss() -> torch.Tensor:
    """Mean squared distance between the observed points and the model points under ``angles``."""
    pose = transform.Rotation.from_euler("zyx", angles)  # on SciPy's torch path: holds tensors
    return ((pose.apply(points) - observed) ** 2).sum(dim=1).mean()


with warnings.catch_warnings():
    # torch 2.13's asarray, called by SciPy's torch code on a tensor that requires grad.
    warnings.filterwarnings("ignore", "torch.asarray: unspecified requires_grad", UserWarning)
    first = pose_loss().item()
    for _ in range(300):
        optimizer.zero_grad()
        loss = pose_loss()
        loss.backward()  # through Rotation.apply and from_euler, SciPy's own torch code
        optimizer.step()

print(
    f"path: {ac.explain(transform.Rotation.from_euler('zyx', angles.detach()).apply).path}; loss {first:.3f} -> {loss.item():.2e}"
)
assert loss.item() < 1e-6 and torch.allclose(angles, truth, atol=1e-3)
