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
