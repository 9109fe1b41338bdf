"""A plain CPU tensor crossing to or from a worker as its storage's bytes (a NumPy array) and
where it lies in them: torch's own pickling sends a storage through ``torch.load``, which on
torch 2.4 and 2.5 warns of its ``weights_only`` default as the worker unpickles a tensor a
partial or a closure carries. Torch is imported only where such a tensor arrives.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numpy.typing import NDArray


def plain_tensor(obj: Any) -> tuple[Any, ...] | None:
    """The reduction of a plain CPU tensor (or ``nn.Parameter``) as its storage's bytes, a NumPy
    array, and where it lies in them (one that records grad crosses as a leaf, as torch pickles
    it); None for any other value."""
    torch = sys.modules.get("torch")  # a tensor crossing means torch is imported
    if torch is None or type(obj) not in (torch.Tensor, torch.nn.Parameter):
        return None
    if obj.layout != torch.strided or obj.device.type != "cpu" or obj.is_quantized:
        return None
    if any(getattr(obj, "names", ())) or vars(obj) or obj._backward_hooks:
        return None  # what torch's own pickling keeps (named tensors: torch before 2.13)
    if obj.is_conj() or obj.is_neg():  # a lazy view: its values, in memory of their own
        obj = obj.resolve_conj().resolve_neg()
    raw = torch.empty(0, dtype=torch.uint8).set_(obj.untyped_storage()).numpy()
    where = (obj.storage_offset(), tuple(obj.shape), obj.stride())
    return _tensor_over, (raw, obj.dtype, where, obj.requires_grad, type(obj) is torch.nn.Parameter)


def _tensor_over(
    raw: NDArray[np.uint8], dtype: Any, where: tuple[int, tuple[int, ...], tuple[int, ...]], grad: bool, parameter: bool
) -> Any:
    import torch  # a tensor crossed: the worker has torch

    offset, shape, stride = where
    tensor = torch.empty(0, dtype=dtype).set_(torch.from_numpy(raw).untyped_storage(), offset, shape, stride)
    return torch.nn.Parameter(tensor, grad) if parameter else tensor.requires_grad_(grad)
