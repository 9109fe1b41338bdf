"""A per-sample SciPy function over a torch DataLoader's batches, on a Ray cluster.

``scipy.ndimage.distance_transform_edt`` runs once per mask and holds no state, so each
batch's masks are spread over the cluster's CPUs as Ray tasks: ``batched`` converts the
batch once, sends one task per chunk of masks through Ray's object store, and stacks the
results into one tensor. ``ray.init()`` connects to a running cluster where one is
(``RAY_ADDRESS``); here it starts a local one of two CPUs.
"""

from __future__ import annotations

import ray
import scipy.ndimage
import torch
from torch.utils.data import DataLoader, TensorDataset

import autoconvert as ac

# Module level: Ray's workers import it by this name.
distances = ac.batched(scipy.ndimage.distance_transform_edt, executor=ray, in_caller=False)


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        masks = torch.ones(16, 64, 64, dtype=torch.bool)
        masks[:, 32, 32] = False  # each mask's one background pixel
        for (batch,) in DataLoader(TensorDataset(masks), batch_size=8):
            field = distances(batch)  # (8, 64, 64) float64: each pixel's distance to the background pixel
            print(f"{tuple(field.shape)} {field.dtype}: farthest pixel {field.amax().item():.2f} away")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
