"""A ``functools.partial`` given to a product is rebuilt around the decorated function: its
type, bound arguments and attributes kept, its bound arguments converted as the call's own."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import autoconvert as ac


class _Labelled(functools.partial):  # type: ignore[type-arg]
    """A partial subclass keeping a label in a slot, and more in its ``__dict__``."""

    __slots__ = ("label",)


def _scaled(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    return a * w


_PRODUCTS: dict[str, Callable[[Any], Any]] = {
    "accepts_numpy": ac.accepts_numpy,
    "the decorator pair": lambda fn: ac.returns_tensor(ac.accepts_numpy(fn)),
    "torchify": ac.torchify,
    "adapt": ac.adapt,
    "numpy_op": ac.numpy_op,
}


@pytest.mark.parametrize("product", _PRODUCTS)
def test_a_partial_subclass_is_kept_with_its_attributes(product: str) -> None:
    bound = _Labelled(_scaled, w=torch.tensor([2.0, 3.0]))
    bound.label, bound.owner = "detector head", "matcher"
    made = _PRODUCTS[product](bound)
    assert type(made) is _Labelled and made.keywords == bound.keywords
    assert (made.label, made.owner) == ("detector head", "matcher")
    assert torch.equal(torch.as_tensor(made(torch.ones(2))), torch.tensor([2.0, 3.0]))


@ac.adapt
class Scaler:
    """A class adapt converts, one of whose methods is a ``partialmethod``."""

    def scale(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        assert type(x) is np.ndarray and type(w) is np.ndarray
        return np.multiply(x, w)

    double = functools.partialmethod(scale, w=np.array(2.0))


@pytest.mark.filterwarnings("error")
def test_adapt_on_a_class_converts_its_partialmethods_as_its_methods() -> None:
    """A ``functools.partialmethod`` of an adapted class is one of its public methods: its call
    and its bound arguments are converted, its result comes back in the caller's dtype."""
    doubled = Scaler().double(torch.ones(2))
    assert type(doubled) is torch.Tensor and doubled.dtype == torch.float32
    assert torch.equal(doubled, Scaler().scale(torch.ones(2), w=np.array(2.0)))
