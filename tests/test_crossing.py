"""What ``batched`` sends to a worker in another process, or a Dask or Ray worker: a plain CPU
tensor (one a partial, a closure or an object carries) crosses as its storage's bytes, not
through torch's pickling, whose ``torch.load`` warns on torch 2.4 and 2.5 as a worker unpickles
it. Every other tensor crosses as torch pickles it; both come back the same tensor."""

from __future__ import annotations

import pickle
import warnings

import torch
from hypothesis import given
from hypothesis import strategies as st

from autoconvert._batched._chunks import dumps

from .strategies import Case, tensors


def _same(crossed: torch.Tensor, tensor: torch.Tensor) -> None:
    assert type(crossed) is type(tensor)
    assert (crossed.dtype, crossed.shape, crossed.stride(), crossed.requires_grad) == (
        tensor.dtype,
        tensor.shape,
        tensor.stride(),
        tensor.requires_grad,
    )
    assert torch.equal(_bytes(crossed), _bytes(tensor))


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor's values as bytes, in order (``torch.equal`` takes no complex32, and no NaN equals NaN)."""
    return tensor.detach().clone(memory_format=torch.contiguous_format).reshape(-1).view(torch.uint8)


@given(case=tensors(), grad=st.booleans(), parameter=st.booleans(), by_value=st.booleans())
def test_a_tensor_crosses_unchanged_and_unwarned(case: Case, grad: bool, parameter: bool, by_value: bool) -> None:
    """Every dtype (bfloat16, complex, bool), layout (transposed, sliced, expanded, at an
    offset; a conjugate or negative view crosses as torch pickles it) and shape; a leaf that
    requires grad, an ``nn.Parameter``: the same values, dtype, strides and type, with no warning."""
    tensor = case.tensor
    if case.layout in ("conj", "neg"):
        grad = parameter = False
    grad = grad and (tensor.dtype.is_floating_point or tensor.dtype.is_complex)
    if parameter:
        tensor = torch.nn.Parameter(tensor.clone(memory_format=torch.preserve_format), grad)
    elif grad:
        tensor = tensor.detach().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        crossed = pickle.loads(dumps(tensor, by_value=by_value))
    if case.layout in ("conj", "neg"):
        assert torch.equal(_bytes(crossed.resolve_conj().resolve_neg()), _bytes(tensor.resolve_conj().resolve_neg()))
        return
    _same(crossed, tensor)


def test_views_of_one_tensor_cross_apart_and_a_tensor_that_records_grad_as_torch_pickles_it() -> None:
    """A crossed tensor is a copy, its views copies of their own (as torch's pickling gives them);
    a tensor with a grad_fn crosses as a leaf that requires grad, as torch pickles it."""
    base = torch.arange(6.0)
    view, crossed_base = pickle.loads(dumps((base[2:4], base)))
    view.add_(1)
    assert crossed_base.tolist() == base.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    recorded = torch.ones(2, requires_grad=True) * 2
    crossed = pickle.loads(dumps(recorded))
    assert crossed.is_leaf and crossed.requires_grad and crossed.tolist() == [2.0, 2.0]
