"""pycocotools' run-length encoding of a predicted mask, for COCO-style evaluation.

``pycocotools.mask.encode`` wants a Fortran-ordered uint8 array of height x width x N; a
model's masks are a C-ordered bool tensor of N x height x width. The transposed view is
already Fortran-ordered memory, so after the cast the only copy is the uint8 one that
encode needs anyway.
"""

from __future__ import annotations

import numpy as np
import torch
from pycocotools import mask as coco_mask

import autoconvert as ac


@ac.accepts_numpy
def encode(masks: np.ndarray) -> list[dict[str, object]]:
    """COCO RLEs of ``masks`` (height x width x N)."""
    return coco_mask.encode(np.asfortranarray(masks, dtype=np.uint8))  # type: ignore[no-any-return]


def main() -> None:
    masks = torch.zeros(2, 8, 8, dtype=torch.bool)
    masks[0, 1:4, 1:4] = True
    masks[1, 2:8, 5:7] = True
    rles = encode(masks.permute(1, 2, 0))
    areas = [int(coco_mask.area(rle)) for rle in rles]
    assert areas == [9, 12]
    print(f"{len(rles)} RLEs, areas {areas}")


if __name__ == "__main__":
    main()
