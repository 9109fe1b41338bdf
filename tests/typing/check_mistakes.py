# pyright: strict
"""A typed user's file: decorated NumPy code called from torch code, with 16 mistakes.

tests/test_typing.py checks it with mypy --strict and autoconvert.mypy_plugin: each line
with an ``E:`` comment gives exactly the error code it names, and every other line none (the correct
calls: a tensor where an array is annotated, a tensor result where a tensor is declared).
Without the plugin, mypy flags only the lines that also say ``bare`` (a pair's result is
Any, so ``loss`` returns Any), and pyright the mistakes among them.
"""

import numpy as np
import numpy.typing as npt
import torch

import autoconvert as ac

Array = npt.NDArray[np.float64]


@ac.returns_tensor
@ac.accepts_numpy
def smooth(x: Array, k: int) -> Array:
    kernel = np.ones(k) / k
    out: Array = np.convolve(x, kernel, mode="same")
    return out


@ac.returns_tensor(device="cpu")
@ac.accepts_numpy(copy=True)
def peak(x: Array, *, axis: int = 0) -> np.float64:
    return np.float64(x.max(axis=axis))


@ac.accepts_numpy
def total(a: Array) -> float:
    return float(a.sum())


def sine_backward(g: Array, x: Array, output: Array) -> Array:
    grad: Array = g * np.cos(x)
    return grad


@ac.numpy_op(backward=sine_backward)
def sine(x: Array) -> Array:
    return np.sin(x)


@ac.numpy_op(backward=sine_backward, fake="x")
def compiled_sine(x: Array, scale: float = 1.0) -> Array:
    out: Array = np.sin(x) * scale
    return out


class Layer:
    """A method's op with fake=: refused as the class is made (its op cannot take the instance)."""

    k = 2.0

    @ac.numpy_op(fake="x")  # E: [misc]
    def scale(self, x: Array) -> Array:
        out: Array = x * self.k
        return out

    @staticmethod
    @ac.numpy_op(fake="x")
    def doubled(x: Array) -> Array:
        out: Array = x * 2
        return out


@ac.batched(chunksize=4, dtype=torch.float32)
def row_norm(row: Array, order: int = 2) -> float:
    return float(np.linalg.norm(row, ord=order))


def loss(pred: torch.Tensor) -> torch.Tensor:
    return smooth(pred, 3).mean()  # no cast; bare: [no-any-return] under mypy, the pair returning Any


x = torch.rand(8, dtype=torch.float64)
batch = torch.rand(4, 8, dtype=torch.float64)
smoothed: torch.Tensor = smooth(x, 3)
from_array: torch.Tensor = smooth(np.zeros(8), k=3)
highest: torch.Tensor = peak(x, axis=0)
summed: float = total(x)
waves: torch.Tensor = sine(x)
compiled: torch.Tensor = compiled_sine(x, scale=2.0)
static: torch.Tensor = Layer.doubled(x)
norms = row_norm(batch, order=1)
ragged = row_norm([torch.rand(3), torch.rand(5)])

smooth(x, kk=3)  # E: [call-arg]
smooth(x, 3, 4)  # E: [call-arg]
smooth(x)  # E: [call-arg]
smooth(x, "3")  # E: [arg-type]
smooth(x, torch.tensor(3))  # E: [arg-type]
as_array: Array = smooth(x, 3)  # E: [assignment]
smooth(x, 3).astype(np.float32)  # E: [attr-defined]
peak(x, axes=0)  # E: [call-arg]
highest_value: float = peak(x)  # E: [assignment]
count: int = total(x)  # E: [assignment]; bare: [assignment]
total(x, 2)  # E: [call-arg]
sine(x, 2)  # E: [call-arg]
waves_array: Array = sine(x)  # E: [assignment]
compiled_sine(x, scales=2.0)  # E: [call-arg]
row_norm(batch, order="2")  # E: [arg-type]
