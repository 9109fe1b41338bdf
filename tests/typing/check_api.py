# pyright: strict
"""Checked by mypy --strict in CI (tests/test_typing.py), as a user's file outside the repo:
the decorators keep the types they wrap, and every documented option type-checks."""

from collections.abc import Callable
from typing import Any, assert_type

import numpy as np
import numpy.typing as npt
import torch

import autoconvert as ac

Array = npt.NDArray[np.float64]  # bare np.ndarray needs type arguments under --strict on NumPy 1.26


@ac.accepts_numpy
def bare(a: Array, k: int = 1) -> float:
    return float(a.sum()) * k


@ac.returns_tensor(device="cpu", dtype="input", sparse_layout=torch.sparse_csr)
@ac.accepts_numpy(copy=True, grad="detach", only=["a"], sparse="matrix")
def called(a: Array) -> Array:
    return a


@ac.returns_tensor
def made() -> Array:
    return np.zeros(2)


@ac.returns_tensor(dtype=torch.long)
def pair() -> tuple[Array, Array]:
    return np.zeros(1), np.ones(1)


class Model:
    @ac.returns_numpy(sparse="array")
    @ac.accepts_tensor(dtype=torch.float32, sparse_layout=torch.sparse_coo)
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @classmethod
    @ac.accepts_numpy
    def build(cls, a: Array) -> "Model":
        return cls()


def sine_backward(g: Array, x: Array, output: Array) -> Array:
    grad: Array = g * np.cos(x)  # NumPy 1.26's stubs type the product as Any
    return grad


@ac.numpy_op(backward=sine_backward, fake="x")
def sine(x: Array) -> Array:
    return np.sin(x)


def cosine_backward(g: Array, x: Array, output: Array, sin: Array) -> Array:
    grad: Array = -g * sin
    return grad


@ac.numpy_op(backward=cosine_backward, residuals="sin")
def cosine(x: Array) -> tuple[Array, Array]:
    return np.cos(x), np.sin(x)


@ac.adapt
def centred(img: Array) -> Array:
    out: Array = img - img.mean()
    return out


@ac.adapt(copy=True, device="cpu")
def scaled(img: Array, k: float) -> Array:
    out: Array = img * k
    return out


@ac.adapt
class Transform:
    def __call__(self, img: Array) -> Array:
        return img


assert_type(bare(torch.zeros(1), k=2), float)  # tensors accepted, return type kept
# Declared as they are at run time: Any without autoconvert.mypy_plugin, these types with it.
called_out: torch.Tensor = called(torch.zeros(1))  # the pair: arrays annotated, tensors passed
made_out: torch.Tensor = made()
pair_out: tuple[torch.Tensor, torch.Tensor] = pair()  # containers are converted element by element
predicted: Array = Model().predict(np.zeros(1))
assert_type(Model.build(torch.zeros(1)), Model)
sine_out: torch.Tensor = sine(torch.zeros(1))  # fake=: a NumpyOp
cosine_out: torch.Tensor = cosine(torch.zeros(1))  # residuals=: the caller gets the result alone
assert_type(centred(torch.zeros(1)), Any)  # adapt: the caller's kind comes back, tensors or arrays
assert_type(scaled(np.zeros(1), 2.0), Any)
assert_type(Transform(), Transform)  # a class keeps its type
assert_type(sine.op, Any)
assert_type(ac.numpy_op(np.negative)(torch.ones(1)), Any)
assert_type(ac.to_tensor(np.zeros(2), device="cpu", sparse_layout=None), torch.Tensor)
assert_type(ac.to_numpy({"x": 1}, copy=True, sparse="matrix"), Any)
assert_type(ac.torchify(np, dtype=torch.float32, sparse="array"), Any)
assert_type(ac.torchify(np, native=False), Any)
assert_type(ac.torchify(np, array_module="numpy"), Any)
with ac.config(copy=True, dtype=torch.float16):
    pass


@ac.returns_tensor(device="cpu", transfers="error")
@ac.accepts_numpy(transfers="warn")
def guarded(a: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return a


with ac.config(transfers="log"), ac.stats() as counted:
    guarded(torch.zeros(1))
assert_type(counted["guarded"], ac.FunctionStats)
assert_type(counted["guarded"].copies, dict[str, int])
assert_type(counted.calls, int)


@ac.accepts_numpy(out_params="out")
def shifted(a: npt.NDArray[np.float32], out: npt.NDArray[np.float32] | None = None) -> npt.NDArray[np.float32]:
    return np.add(a, 1, out=out)


assert_type(shifted(torch.zeros(1), out=torch.zeros(1)), npt.NDArray[np.float32])
assert_type(ac.torchify(np, out_params=("out", "output"), callbacks=True), Any)

per_row_max = ac.batched(np.max, workers=2, chunksize=8)
per_row: Callable[..., Any] = per_row_max
decorate: Callable[[Callable[..., Any]], Callable[..., Any]] = ac.batched(chunksize=4, progress=True)
seeded = ac.batched(np.max, workers=2, threads_per_worker=1, seed=np.random.SeedSequence(0), in_caller=False)
seeded_call: Callable[..., Any] = seeded
as_float32 = ac.batched(
    np.max,
    dtype=torch.float32,
    device="cpu",
    copy=True,
    writeback=False,
    grad="detach",
    sparse="array",
    sparse_layout=None,
    widen_float16=True,
    check_writes=False,
    transfers="warn",
    callbacks=False,
)
as_float32_call: Callable[..., Any] = as_float32
as_input: Callable[[Callable[..., Any]], Callable[..., Any]] = ac.batched(dtype="input", device=0, workers=2)
