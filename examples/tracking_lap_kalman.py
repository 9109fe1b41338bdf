"""Multi-object tracking: lap's Jonker-Volgenant assignment and filterpy's Kalman filter.

A SORT-style tracker's two NumPy steps, fed tensors: ``lap.lapjv`` matches detections to
tracks on a cost matrix made with torch, and a filterpy ``KalmanFilter`` (a NumPy-era
object, through ``torchify``) predicts and updates a track from tensor measurements,
its state reading back as a tensor.
"""

from __future__ import annotations

import lap
import numpy as np
import torch
from filterpy.kalman import KalmanFilter

import autoconvert as ac


@ac.returns_tensor
@ac.accepts_numpy
def assign(cost: np.ndarray) -> np.ndarray:
    """For each track (row), the detection it is matched to, or -1."""
    _, track_to_detection, _ = lap.lapjv(cost, extend_cost=True)
    return track_to_detection


def main() -> None:
    tracks = torch.tensor([[0.0, 0.0], [10.0, 10.0]], dtype=torch.float64)
    detections = torch.tensor([[9.5, 10.2], [0.3, -0.1], [50.0, 50.0]], dtype=torch.float64)
    matched = assign(torch.cdist(tracks, detections))
    assert matched.tolist() == [1, 0]

    kalman = ac.torchify(KalmanFilter)(dim_x=2, dim_z=1)  # position and velocity, position measured
    kalman.F = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    kalman.H = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    for position in (1.0, 2.0, 3.0, 4.0):
        kalman.predict()
        kalman.update(torch.tensor([[position]], dtype=torch.float64))
    state = kalman.x
    assert isinstance(state, torch.Tensor) and state.shape == (2, 1)
    position, velocity = state.flatten().tolist()
    print(
        f"matched tracks to detections {matched.tolist()}; Kalman state: position {position:.2f}, velocity {velocity:.2f}"
    )


if __name__ == "__main__":
    main()
