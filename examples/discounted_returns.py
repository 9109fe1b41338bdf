"""Discounted returns for RL with scipy.signal.lfilter on reversed arrays.

``lfilter(..., x[::-1])[::-1]`` is the classic one-liner; its result has negative strides,
which ``torch.from_numpy`` rejects. autoconvert copies it once and returns it on the
rollout's device, in the rollout's dtype with ``dtype="input"``.
"""

from __future__ import annotations

import numpy as np
import scipy.signal
import torch

import autoconvert as ac


@ac.returns_tensor(dtype="input")
@ac.accepts_numpy
def discounted(rewards: np.ndarray, gamma: float) -> np.ndarray:
    """G_t = r_t + gamma * G_{t+1}, along the last axis."""
    return scipy.signal.lfilter([1.0], [1.0, -gamma], rewards[..., ::-1], axis=-1)[..., ::-1]


def main() -> None:
    rewards = torch.tensor([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    returns = discounted(rewards, 0.5)
    assert returns.dtype == torch.float32 and returns.device == rewards.device
    assert torch.allclose(returns, torch.tensor([[0.25, 0.5, 1.0], [1.75, 1.5, 1.0]]))
    print("returns:", returns.tolist())


if __name__ == "__main__":
    main()
