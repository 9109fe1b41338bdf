"""OpenCV on CHW image tensors: a blur per image, boxes drawn in place, CLAHE objects.

OpenCV wants height x width x channels; a torch image is channels first. The HWC view
(``permute``) is no copy, and autoconvert hands it to OpenCV as a read-only array view of
the caller's memory, which OpenCV only reads. ``batched`` loops over the batch.

Drawing writes into the image: ``writeback=True``. OpenCV refuses strided output memory, so
a permuted view is handed over as a C-ordered private array and copied back after the call
(YOLOv5's annotator, without its hand-written copy and copy-back). ``torchify(cv2)`` gives
OpenCV's objects (``createCLAHE``, ``SIFT_create``) as proxies whose methods take tensors.
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


@ac.accepts_numpy(writeback=True)
def draw_box(image: np.ndarray, box: tuple[int, int, int, int]) -> None:
    """A red rectangle on one HWC uint8 image, in place."""
    x0, y0, x1, y1 = box
    cv2.rectangle(image, (x0, y0), (x1, y1), (255, 0, 0), 1)


def main() -> None:
    images = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    blurred = ac.batched(blur)(images.permute(0, 2, 3, 1), 1.5).permute(0, 3, 1, 2)
    assert blurred.shape == images.shape and blurred.dtype == torch.float32
    assert blurred.std() < images.std()  # a blur smooths
    print(f"blurred {tuple(blurred.shape)} {blurred.dtype}: std {images.std():.3f} -> {blurred.std():.3f}")

    canvas = torch.zeros(3, 16, 16, dtype=torch.uint8)  # CHW, as a detector's input
    draw_box(canvas.permute(1, 2, 0), (2, 3, 12, 10))
    print(f"box drawn into the CHW tensor: {int((canvas[0] == 255).sum())} red pixels")

    tcv = ac.torchify(cv2)
    clahe = tcv.createCLAHE(clipLimit=2.0, tileGridSize=(4, 4))
    gray = (images[0, 0] * 255).to(torch.uint8)
    equalised = clahe.apply(gray)
    assert type(equalised) is torch.Tensor and equalised.dtype == torch.uint8
    print(f"CLAHE through torchify(cv2): {type(equalised).__name__} {tuple(equalised.shape)}")


if __name__ == "__main__":
    main()
