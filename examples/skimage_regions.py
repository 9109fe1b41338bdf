"""scikit-image's connected components on a segmentation mask: region sizes as a tensor.

``measure.label`` and ``regionprops`` take a NumPy mask; the model's mask is a bool tensor.
The per-region areas come back as a tensor on the mask's device, ready for a loss that
penalises small fragments.
"""

from __future__ import annotations

import numpy as np
import torch
from skimage import measure

import autoconvert as ac


@ac.returns_tensor
@ac.accepts_numpy
def region_areas(mask: np.ndarray) -> np.ndarray:
    """The area, in pixels, of each connected region of ``mask``."""
    labels = measure.label(mask)
    return np.array([region.area for region in measure.regionprops(labels)], dtype=np.float64)


def main() -> None:
    mask = torch.zeros(16, 16, dtype=torch.bool)
    mask[2:5, 2:5] = True  # 9 pixels
    mask[9:14, 9:12] = True  # 15 pixels
    areas = region_areas(mask)
    assert areas.tolist() == [9.0, 15.0] and areas.device == mask.device
    print(f"{len(areas)} regions, areas {areas.tolist()}")


if __name__ == "__main__":
    main()
