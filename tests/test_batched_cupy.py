"""``batched`` over a torchified function CuPy mirrors: each sample of a CUDA batch on CuPy.

On the CPU (CuPy or not), what decides the route: the host path is the torchified function's
converting call, a plain function never takes CuPy, a strict route's refusals, seed='s; on a
GPU with CuPy, the per-sample path against the host path, with no transfer.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import scipy.ndimage
import torch

import autoconvert as ac
from autoconvert._adapters._table import adapter_for
from autoconvert._interpreter._routes import Routed
from autoconvert._torchify._cupy import CupyRoute, twin_of

from .test_cupy import _same

EDT = "distance_transform_edt"
ON_CUDA = (
    "A batch on a CUDA device that CuPy's path takes for every sample runs each sample there instead, on its view "
    "of the batch, the results gathered on the device (torch.stack): no conversion. Any other batch is converted "
    "as above; stats() counts why."
)


def _routed(name: str, *, strict: bool = False) -> Routed:
    """``torchify(scipy.ndimage).<name>`` as a machine with CuPy makes it: CuPy's route first,
    then the converting call (CuPy itself is imported only by a call the route takes)."""
    view, fn, adapter = ac.torchify(scipy.ndimage), getattr(scipy.ndimage, name), adapter_for(scipy.ndimage)
    find = functools.partial(twin_of, adapter, "scipy.ndimage", name)
    route = CupyRoute(fn, find, strict=strict, explicit={}, adapter=adapter, module="scipy.ndimage", name=name)
    converting = getattr(ac.torchify(scipy.ndimage, array_module="numpy"), name)
    return Routed(fn, (route,), converting, view=view, name=name)


def _masks() -> torch.Tensor:
    return torch.rand(3, 6, 7, generator=torch.Generator().manual_seed(0)) > 0.4


def test_a_cpu_batch_converts_once_through_the_torchified_call() -> None:
    """The host path is the torchified function's converting call, once per batch (never a
    conversion per sample), and gives what batching the plain function gives."""
    fn, masks = ac.batched(_routed(EDT)), _masks()
    with ac.stats() as s:
        out = fn(masks)
    row = s[EDT]
    assert row.calls == 1 and row.converted == 2 and row.samples == 3
    assert row.cupy == 0 and row.not_cupy == {}  # a CPU batch is never CuPy's
    assert torch.equal(out, ac.batched(scipy.ndimage.distance_transform_edt)(masks))
    assert ON_CUDA in ac.explain(fn).notes


def test_a_plain_function_keeps_the_host_path() -> None:
    """batched never swaps a plain function for CuPy's: its numerics stay SciPy's."""
    notes = ac.explain(ac.batched(scipy.ndimage.distance_transform_edt)).notes
    assert not any("CuPy" in note for note in notes)


def test_options_for_a_torchified_function_are_refused_as_without_cupy() -> None:
    with pytest.raises(TypeError) as info:
        ac.batched(_routed(EDT), dtype=torch.float32)
    assert str(info.value) == (
        "autoconvert.batched(distance_transform_edt): batched adds its conversion options (dtype=torch.float32) to "
        "the accepts_numpy and returns_tensor decorators only, and distance_transform_edt was not made by them. "
        "Fix: pass it undecorated, or give the options to the ac.torchify(..., dtype=torch.float32) call that made "
        "it instead"
    )


def test_seed_keeps_the_host_path_and_a_strict_route_refuses_it() -> None:
    notes = ac.explain(ac.batched(_routed(EDT), seed=0)).notes
    assert "CuPy's path is not taken: seed= seeds NumPy's generators per sample, on the host path." in notes
    with pytest.raises(ValueError) as info:
        ac.batched(_routed(EDT, strict=True), seed=0)
    assert str(info.value) == (
        "autoconvert.batched(distance_transform_edt): seed= seeds NumPy's generators per sample, on the host path, "
        "and distance_transform_edt runs on CuPy alone (array_module='cupy'). Fix: leave seed= out, or torchify "
        "without array_module='cupy'"
    )


def test_a_strict_route_refuses_a_batch_it_cannot_take_naming_the_argument() -> None:
    """array_module='cupy': a batch whose samples CuPy's path declines raises, as one call would."""
    fn, masks = ac.batched(_routed(EDT, strict=True)), _masks()
    with pytest.raises(ac.ConversionError) as info:
        fn(masks)
    assert str(info.value) == (
        "distance_transform_edt(): argument input is not on a CUDA device. Found a tensor on cpu. Fix: move it to a "
        "CUDA device (.cuda()), or torchify without array_module='cupy'."
    )
    with pytest.raises(ac.ConversionError) as info:
        fn(masks.double().requires_grad_())
    assert str(info.value) == (
        "distance_transform_edt(): argument input requires grad: CuPy's functions have no gradient. Found "
        "requires_grad=True. Fix: detach it (.detach()), or give the function a gradient with autoconvert.numpy_op."
    )


# --------------------------------------------------------------------------- on a GPU with CuPy


def _batch(name: str) -> tuple[Any, ...]:
    """A batch of 4 volumes for ``name``, and its other arguments."""
    volumes = torch.rand(4, 10, 11, 12, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return {"gaussian_filter": (volumes, 1.5), EDT: (volumes > 0.3,), "label": (volumes > 0.7,)}[name]


@pytest.mark.parametrize("name", ["gaussian_filter", EDT, "label"])
def test_each_sample_runs_on_cupy_on_the_device(accelerator: torch.device, name: str) -> None:
    """No transfer (a transfers='error' block lets the map through), one batch counted on CuPy,
    the results equal the host path's (the plain function batched: one crossing each way)."""
    pytest.importorskip("cupy")
    args = tuple(a.to(accelerator) if isinstance(a, torch.Tensor) else a for a in _batch(name))
    fn = ac.batched(getattr(ac.torchify(scipy.ndimage), name))
    with ac.config(transfers="error"), ac.stats() as s:
        on_cupy = fn(*args)
    row = s[name]
    assert row.cupy == 1 and row.samples == 4 and row.not_cupy == {} and row.copies["transfer"] == 0
    _same(on_cupy, ac.batched(getattr(scipy.ndimage, name))(*args))


def test_a_ragged_batch_runs_sample_by_sample_on_cupy(accelerator: torch.device) -> None:
    pytest.importorskip("cupy")
    masks = [torch.rand(*shape, device=accelerator) > 0.3 for shape in [(8, 9, 10), (5, 12, 7)]]
    with ac.config(transfers="error"), ac.stats() as s:
        out = ac.batched(ac.torchify(scipy.ndimage).distance_transform_edt)(masks)
    assert s[EDT].cupy == 1 and s[EDT].samples == 2
    _same(out, [torch.from_numpy(scipy.ndimage.distance_transform_edt(m.cpu().numpy())).to(accelerator) for m in masks])


def test_a_batch_cupy_declines_crosses_once_each_way(accelerator: torch.device) -> None:
    pytest.importorskip("cupy")
    masks, sampling = torch.rand(4, 8, 8, 8, device=accelerator) > 0.3, np.array([1.0, 2.0, 0.5])
    with ac.stats() as s:
        out = ac.batched(ac.torchify(scipy.ndimage).distance_transform_edt)(masks, sampling=sampling)
    row = s[EDT]
    assert row.cupy == 0 and row.not_cupy == {"is a NumPy array: CuPy takes CUDA memory only": 1}
    assert row.calls == 1 and row.copies["transfer"] == 2 and out.device == masks.device
    expected = [scipy.ndimage.distance_transform_edt(m, sampling=sampling) for m in masks.cpu().numpy()]
    assert torch.equal(out.cpu(), torch.from_numpy(np.stack(expected)))


def test_array_module_cupy_maps_a_cuda_batch_on_cupy(accelerator: torch.device) -> None:
    pytest.importorskip("cupy")
    batch = torch.rand(3, 9, 9, device=accelerator)
    strict = ac.torchify(scipy.ndimage, array_module="cupy")
    with ac.config(transfers="error"), ac.stats() as s:
        out = ac.batched(strict.uniform_filter)(batch, size=3)
    assert s["uniform_filter"].cupy == 1
    expected = np.stack([scipy.ndimage.uniform_filter(v, size=3) for v in batch.cpu().numpy()])
    assert out.device == batch.device and torch.allclose(out.cpu(), torch.from_numpy(expected), atol=1e-5)
