"""OpenCV on a CHW image batch: a Gaussian blur per image, back as tensors.

OpenCV wants height x width x channels; a torch image is channels first. The HWC view
(``permute``) is no copy, and autoconvert hands it to OpenCV as a read-only array view of
the caller's memory, which OpenCV only reads. ``batched`` loops over the batch.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch

import autoconvert as ac


@ac.returns_tensor
@ac.accepts_numpy
def blur(image: np.ndarray, sigma: float) -> np.ndarray:
    """One HWC float32 image, blurred by OpenCV."""
    return cv2.GaussianBlur(image, (0, 0), sigma)


def main() -> None:
    images = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    blurred = ac.batched(blur)(images.permute(0, 2, 3, 1), 1.5).permute(0, 3, 1, 2)
    assert blurred.shape == images.shape and blurred.dtype == torch.float32
    assert blurred.std() < images.std()  # a blur smooths
    print(f"blurred {tuple(blurred.shape)} {blurred.dtype}: std {images.std():.3f} -> {blurred.std():.3f}")


if __name__ == "__main__":
    main()
