"""torch, as a callee: its callables take tensors, ``xp=torch`` stands for NumPy."""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from ._adapter import Adapter

#: torch's functions that make a tensor from an array: code reading NumPy and one of these
#: converts what it is handed itself (``from_numpy`` whatever else it reads). Never
#: ``Tensor``: code reads it as the type (``isinstance(x, torch.Tensor)``) far more than it
#: calls the legacy constructor, and a torch callable checking its argument wants tensors.
MAKES_TENSORS = frozenset({"as_tensor", "tensor", "FloatTensor", "DoubleTensor", "LongTensor"})


class Torch(Adapter):
    name = "torch"
    packages = ("torch",)

    def written_in_torch(self, fn: Any) -> bool:
        return True

    def is_torch(self, module: types.ModuleType) -> bool:
        return True

    def array_namespace(self, module: types.ModuleType) -> types.ModuleType | None:
        return np if module.__name__ == "torch" else None
