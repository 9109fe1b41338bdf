"""Checked by mypy --strict in CI (tests/test_typing.py): the decorators keep the types they wrap."""

from typing import Any, assert_type

import numpy as np
import torch

import autoconvert as ac


@ac.accepts_numpy
def bare(a: np.ndarray, k: int = 1) -> float:
    return float(a.sum()) * k


@ac.returns_tensor(device="cpu", dtype="input")
@ac.accepts_numpy(copy=True, grad="detach", only=["a"])
def called(a: np.ndarray) -> np.ndarray:
    return a


class Model:
    @ac.returns_numpy
    @ac.accepts_tensor(dtype=torch.float32)
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @classmethod
    @ac.accepts_numpy
    def build(cls, a: np.ndarray) -> "Model":
        return cls()


assert_type(bare(torch.zeros(1), k=2), float)  # tensors accepted, return type kept
assert_type(called(torch.zeros(1)), Any)  # a tensor in, a tensor out
assert_type(Model().predict(np.zeros(1)), Any)
assert_type(Model.build(torch.zeros(1)), Model)
with ac.config(copy=True, dtype=torch.float16):
    pass
assert_type(ac.to_numpy({"x": 1}), Any)
