"""On an accelerator: device index kept, one crossing, same semantics as on the CPU.

Skips where no accelerator exists; fails when AUTOCONVERT_TEST_DEVICE names one that can't be used.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

import autoconvert as ac

pytestmark = pytest.mark.gpu


@ac.returns_tensor
@ac.accepts_numpy
def flip(a: np.ndarray) -> np.ndarray:
    return a[::-1]


def test_results_return_to_the_same_device_index(accelerator: torch.device) -> None:
    t = torch.arange(5.0, device=accelerator)
    out = flip(t)
    assert out.device == t.device and torch.equal(out.cpu(), torch.arange(5.0).flip(0))


def test_arrays_from_a_gpu_tensor_are_read_only_like_on_the_cpu(accelerator: torch.device) -> None:
    @ac.accepts_numpy
    def write(a: np.ndarray) -> None:
        a[0] = 1

    with pytest.raises(ac.ReadOnlyError):
        write(torch.zeros(2, device=accelerator))


def test_copy_true_is_one_writable_host_copy(accelerator: torch.device) -> None:
    """The device-to-host transfer is the private copy: no memcpy after it (the array owns no data
    of its own; it views the host tensor the transfer made)."""

    @ac.accepts_numpy(copy=True)
    def f(a: np.ndarray) -> np.ndarray:
        return a

    a = f(torch.ones(3, device=accelerator))
    assert a.flags.writeable and not a.flags.owndata and a.tolist() == [1.0, 1.0, 1.0]


def test_several_arguments_cross_together_and_arrive_whole(accelerator: torch.device) -> None:
    """Every argument's transfer is queued before one wait: the function still sees each tensor's
    final values, written by kernels still running when the call began, in every mode."""
    seen: list[bool] = []

    def check(*arrays: np.ndarray) -> list[float]:
        with warnings.catch_warnings():  # torch.from_numpy warns of read-only arrays; only asked, never written
            warnings.simplefilter("ignore", UserWarning)
            seen.extend(torch.from_numpy(a).is_pinned() for a in arrays if accelerator.type == "cuda")
        return [float(a[-1]) for a in arrays]

    n = 1 << 22
    for options in ({}, {"copy": True}, {"writeback": True}):
        tensors = [torch.full((n,), float(i), device=accelerator).cumsum(0) for i in (1, 2, 3)]
        assert ac.accepts_numpy(**options)(check)(*tensors) == [float(n), 2.0 * n, 3.0 * n]
    assert all(seen)  # on CUDA the host side is pinned memory: the link's full speed


def test_copy_false_refuses_a_gpu_tensor(accelerator: torch.device) -> None:
    @ac.accepts_numpy(copy=False)
    def f(a: np.ndarray) -> None:
        pass

    with pytest.raises(ac.CopyError, match=f"it lives on {accelerator}"):
        f(torch.ones(1, device=accelerator))


def test_writeback_reaches_a_gpu_tensor_of_any_dtype(accelerator: torch.device) -> None:
    @ac.accepts_numpy(writeback=True)
    def fill(a: np.ndarray) -> None:
        a[...] = 3

    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        t = torch.zeros(4, device=accelerator, dtype=dtype)
        fill(t)
        assert t.device == accelerator and t.dtype == dtype and torch.equal(t.cpu(), torch.full((4,), 3, dtype=dtype))


def test_writeback_keeps_aliased_gpu_arguments_aliased(accelerator: torch.device) -> None:
    """f(t, t[0]) on a device: one host copy of the memory they share, one copy back."""

    @ac.accepts_numpy(writeback=True)
    def scribble(a: np.ndarray, row: np.ndarray) -> float:
        a[...] = 1
        row += 2
        return float(a.sum())

    t = torch.zeros(2, 3, device=accelerator)
    assert scribble(t, t[0]) == 12.0
    assert torch.equal(t.cpu(), torch.tensor([[3.0, 3.0, 3.0], [1.0, 1.0, 1.0]]))


def test_bfloat16_round_trips_on_the_device(accelerator: torch.device) -> None:
    t = torch.tensor([1.5, -2.0], dtype=torch.bfloat16, device=accelerator)
    out = flip(t)
    assert out.dtype == torch.bfloat16 and out.device == t.device and out.cpu().tolist() == [-2.0, 1.5]


def test_cpu_and_gpu_arguments_mismatch_unless_a_device_is_given(accelerator: torch.device) -> None:
    @ac.returns_tensor
    def f(a: Any, b: Any) -> np.ndarray:
        return np.zeros(1)

    with pytest.raises(ac.DeviceMismatchError, match=f"a on cpu, b on {accelerator}"):
        f(torch.ones(1), torch.ones(1, device=accelerator))
    assert f(torch.tensor(1.0), torch.ones(1, device=accelerator)).device == accelerator  # 0-d CPU: no vote
    assert ac.returns_tensor(device="cpu")(f.__wrapped__)(torch.ones(1), torch.ones(1, device=accelerator)).is_cpu


def test_accepts_tensor_and_to_tensor_place_arrays_on_the_device(accelerator: torch.device) -> None:
    @ac.accepts_tensor(device=accelerator)
    def where(x: torch.Tensor) -> torch.device:
        return x.device

    assert where(np.ones(2)) == accelerator
    ro = np.ones(2)
    ro.setflags(write=False)
    assert ac.to_tensor(ro, device=accelerator).device == accelerator
    assert ac.to_tensor(np.ones(4)[::-1], device=accelerator).cpu().tolist() == [1.0] * 4


_sin = ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x), fake="x")


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_registered_numpy_op_compiles_and_trains_on_the_device(accelerator: torch.device, backend: str) -> None:
    """Forward and backward ops run their NumPy code on the host and give results and gradients
    back on the tensor's own device, eagerly and with fullgraph=True."""
    import torch._dynamo

    torch._dynamo.reset()
    x = torch.linspace(0, 1, 6, device=accelerator, dtype=torch.float32, requires_grad=True)
    for call in (_sin, torch.compile(lambda v: _sin(v * 2) / 2, fullgraph=True, backend=backend)):
        x.grad = None
        call(x).sum().backward()
        assert x.grad is not None and x.grad.device == x.device and x.grad.dtype == torch.float32
    assert torch.allclose(x.grad, torch.cos(2 * x.detach()))
    assert set(torch.library.opcheck(_sin.op, (x,)).values()) == {"SUCCESS"}
    torch._dynamo.reset()


def test_an_out_parameter_on_the_device_is_written_and_given_back(accelerator: torch.device) -> None:
    """A device tensor as out= crosses as a host copy, written back after the call; the
    result is the caller's tensor itself, on its device. A device argument places results."""
    tnp = ac.torchify(np)
    x = torch.arange(4.0, device=accelerator)
    out = torch.zeros(4, device=accelerator, dtype=torch.bfloat16)
    assert tnp.add(x, 1, out=out) is out
    assert out.device == accelerator and out.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert tnp.zeros(2, device=accelerator).device == accelerator


@pytest.mark.slow
def test_batched_on_a_process_pool_returns_results_to_the_device(accelerator: torch.device) -> None:
    """The batch crosses to the host once (1 MiB: through shared memory), bfloat16 widened;
    each sample's result comes back on the batch's device index in its dtype."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    batch = torch.rand(16, 128, 128, device=accelerator).to(torch.bfloat16)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        out = ac.batched(np.negative, executor=pool)(batch)
    assert out.device == batch.device and out.dtype == torch.bfloat16 and torch.equal(out, -batch)


def test_an_object_s_results_without_tensor_arguments_stay_on_its_device(accelerator: torch.device) -> None:
    """``kde.resample(10)`` of a KDE fitted on the device, and ``rvs`` of a distribution frozen
    with a device tensor, come back on that device, as the objects' attributes read back."""
    import scipy.stats

    stats = ac.torchify(scipy.stats)
    points = torch.randn(2, 40, dtype=torch.float64, device=accelerator)
    kde = stats.gaussian_kde(points)
    for drawn in (kde.resample(10), kde.resample(size=10, seed=np.random.default_rng(0))):
        assert drawn.device == points.device and drawn.shape == (2, 10)
    assert kde.dataset.device == points.device and kde(points[:, :3]).device == points.device
    frozen = stats.norm(torch.zeros(3, dtype=torch.float64, device=accelerator), 1.0)
    assert frozen.rvs(size=3, random_state=0).device == points.device
    assert frozen.mean().device == points.device


def test_batched_crosses_once_each_way_over_a_device_batch(accelerator: torch.device) -> None:
    """A batch on the device reaches the host in one transfer and the stacked results come
    back in one, however many samples run."""
    batch = torch.rand(16, 32, 32, device=accelerator)
    with ac.stats() as s:
        out = ac.batched(np.negative)(batch)
    row = s["negative"]
    assert row.samples == 16 and row.copies["transfer"] == 2 and row.bytes["transfer"] == 2 * batch.nbytes
    assert out.device == batch.device and torch.equal(out, -batch)


@pytest.mark.parametrize(
    ("dtype", "cast", "order"),
    [
        (np.float32, None, "C"),
        (np.float64, torch.float32, "C"),  # narrowed on the host, before crossing
        (np.float32, torch.float64, "F"),  # widened on the device, after crossing
        (np.int32, None, "F"),
        (np.complex128, None, "C"),
        (np.bool_, None, "C"),
    ],
)
def test_large_results_cross_through_pinned_memory_whole(
    accelerator: torch.device, dtype: Any, cast: torch.dtype | None, order: str
) -> None:
    """A result of 1 MiB or more reaches the device through pinned memory, asynchronously: its
    values, dtype and layout are the direct copy's, it counts one transfer, and the array the
    function returned can be written the moment the call returns."""
    made: list[np.ndarray] = []

    @ac.returns_tensor(dtype=cast)
    @ac.accepts_numpy
    def f(x: np.ndarray) -> np.ndarray:
        out = np.asarray(np.random.default_rng(0).random((512, 1024)) * 100, dtype=dtype, order=order)
        made.append(out)
        return out

    x = torch.zeros(1, device=accelerator)
    with ac.stats() as s:
        got = f(x)
    made[0][...] = 0  # the host copy is done: this write cannot reach the result
    expected = torch.from_numpy(np.asarray(np.random.default_rng(0).random((512, 1024)) * 100, dtype=dtype))
    expected = expected.to(accelerator, cast or expected.dtype)
    assert (
        got.device == x.device
        and got.dtype == expected.dtype
        and got.stride() == ((1, 512) if order == "F" else (1024, 1))
    )
    assert torch.equal(got, expected) and s[f.__qualname__].copies["transfer"] == 2


def test_results_under_a_mebibyte_and_tensor_results_cross_as_they_are(accelerator: torch.device) -> None:
    @ac.returns_tensor
    @ac.accepts_numpy
    def f(x: np.ndarray, n: int) -> tuple[np.ndarray, torch.Tensor]:
        return np.arange(n, dtype=np.float32), torch.arange(n, dtype=torch.float32)

    x = torch.zeros(1, device=accelerator)
    for n in (1000, (1 << 18) + 5):  # 4 KB, and just over 1 MiB
        array, tensor = f(x, n)
        assert array.device == tensor.device == x.device
        assert torch.equal(array, torch.arange(n, dtype=torch.float32, device=x.device))
        assert torch.equal(tensor, array)
