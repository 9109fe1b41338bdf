"""A MONAI-style intensity transform written once for NumPy, used from a training loop on
tensors and from an evaluation script on arrays.

MONAI's transforms accept either kind and hand back the input's kind, calling
``convert_to_dst_type`` by hand in nearly every transform. With ``ac.adapt`` the
annotations say it once: the body sees arrays, the caller gets back what it passed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

import autoconvert as ac


@ac.adapt
class ScaleIntensityRange:
    """Clip intensities to [low, high] and rescale them to [0, 1], as CT windowing does."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def __call__(self, img: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        clipped = np.clip(img, self.low, self.high)
        return (clipped - self.low) / (self.high - self.low)


def training_step(window: ScaleIntensityRange, batch: torch.Tensor) -> torch.Tensor:
    """Tensors in a training loop: a tensor back, on the batch's device, in its dtype."""
    return window(batch)


def evaluation(window: ScaleIntensityRange, volume: np.ndarray) -> np.ndarray:
    """Arrays in an evaluation script: an array back, no torch in sight."""
    return window(volume)


def main() -> None:
    window = ScaleIntensityRange(-1000.0, 1000.0)
    batch = torch.tensor([[-2000.0, 0.0, 500.0]], dtype=torch.bfloat16)
    out = training_step(window, batch)
    assert type(out) is torch.Tensor and out.dtype == torch.bfloat16 and out.tolist() == [[0.0, 0.5, 0.75]]
    volume = np.array([-1000.0, 1000.0, 3000.0])
    scaled = evaluation(window, volume)
    assert type(scaled) is np.ndarray and scaled.tolist() == [0.0, 1.0, 1.0]
    print(f"training: {type(out).__name__} {out.dtype}; evaluation: {type(scaled).__name__} {scaled.dtype}")


if __name__ == "__main__":
    main()
