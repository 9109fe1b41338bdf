"""A numba kernel on tensors: a running maximum, compiled once, called with tensors.

numba compiles for the array types it is given; autoconvert hands it read-only views of the
caller's tensors, so the kernel compiles for read-only arrays and returns new ones. A kernel
that writes into its argument needs ``copy=True`` (private writable copies) or
``writeback=True`` (its writes reach the caller's tensor); so does a kernel compiled for an
explicit signature, whose arrays are writable ones. Without, numba's refusal comes back as
``ac.ReadOnlyError`` naming the argument and those fixes.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

import autoconvert as ac


@numba.njit
def _running_max(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    best = -np.inf
    for i in range(x.shape[0]):
        best = max(best, x[i])
        out[i] = best
    return out


running_max = ac.returns_tensor(ac.accepts_numpy(_running_max))


@numba.njit
def _clip_below_zero(x: np.ndarray) -> None:
    for i in range(x.shape[0]):
        x[i] = max(x[i], 0.0)


clip_in_place = ac.accepts_numpy(writeback=True)(_clip_below_zero)


@numba.njit(numba.float64(numba.float64[::1]))
def _energy(x: np.ndarray) -> float:
    return float((x * x).sum())


energy = ac.accepts_numpy(copy=True)(_energy)  # the signature asks for a writable array


def main() -> None:
    rewards = torch.tensor([1.0, 3.0, 2.0, 5.0, 4.0], dtype=torch.float64)
    peaks = running_max(rewards)
    assert peaks.tolist() == [1.0, 3.0, 3.0, 5.0, 5.0]
    signal = torch.tensor([-1.0, 2.0, -0.5], dtype=torch.float64)
    clip_in_place(signal)
    assert signal.tolist() == [0.0, 2.0, 0.0]
    print(f"running max {peaks.tolist()}; clipped in place {signal.tolist()}")
    try:
        ac.accepts_numpy(_energy)(rewards)
    except ac.ReadOnlyError as e:
        print("without copy=True:", str(e).split(";")[0])
    print(f"energy {energy(rewards)}")


if __name__ == "__main__":
    main()
