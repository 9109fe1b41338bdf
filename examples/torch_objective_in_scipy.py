"""A torch objective inside scipy.optimize.minimize: value and gradient from autograd.

SciPy passes float64 arrays and wants float64 arrays back; the model is torch. The
reverse pair converts at the boundary, and detaches the results silently: SciPy only
needs the numbers. Or, with no decorator on the objective: ``torchify(scipy.optimize,
callbacks=True)`` hands every callable given to SciPy tensors on the caller's device, and
hands SciPy back arrays.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
import torch

import autoconvert as ac

torch.manual_seed(0)
X = torch.randn(200, 3, dtype=torch.float64)
y = X @ torch.tensor([1.5, -2.0, 0.5], dtype=torch.float64) + 0.3


@ac.returns_numpy
@ac.accepts_tensor
def loss_and_grad(params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    params = params.detach().requires_grad_()
    weights, bias = params[:3], params[3]
    loss = ((X @ weights + bias - y) ** 2).mean()
    loss.backward()
    return loss, params.grad  # type: ignore[return-value]


def torch_loss_and_grad(params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same objective, undecorated: torch in, torch out."""
    params = params.detach().requires_grad_()
    loss = ((X @ params[:3] + params[3] - y) ** 2).mean()
    (grad,) = torch.autograd.grad(loss, params)
    return loss, grad


def main() -> None:
    result = scipy.optimize.minimize(loss_and_grad, np.zeros(4), jac=True, method="L-BFGS-B")
    assert result.success and np.allclose(result.x, [1.5, -2.0, 0.5, 0.3], atol=1e-5)
    print("fitted:", np.round(result.x, 4).tolist())

    optimize = ac.torchify(scipy.optimize, callbacks=True)
    start = torch.zeros(4, dtype=torch.float64)
    fitted = optimize.minimize(torch_loss_and_grad, start, jac=True, method="L-BFGS-B").x
    assert type(fitted) is torch.Tensor and np.allclose(fitted.numpy(), result.x)
    print("fitted through torchify(callbacks=True):", fitted.round(decimals=4).tolist())


if __name__ == "__main__":
    main()
