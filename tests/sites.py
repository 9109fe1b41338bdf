"""Decorated callables at every binding site, each beside an undecorated twin (wrapt's test habit)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import autoconvert as ac


def kinds(*xs: Any) -> tuple[str, ...]:
    return tuple(type(x).__name__ for x in xs)


def plain(x: Any, y: Any = None) -> tuple[str, ...]:
    """A module-level function."""
    return kinds(x, y)


decorated = ac.returns_tensor(ac.accepts_numpy(plain))


@ac.returns_tensor
@ac.accepts_numpy
def scaled(x: np.ndarray, factor: float = 2.0) -> np.ndarray:
    """Module level, decorated with @: what multiprocessing workers receive by reference."""
    return x * factor


class Twin:
    """Undecorated twins of Sites' methods, same names, same docs."""

    def method(self, x: Any, y: Any = None) -> tuple[str, ...]:
        """An instance method."""
        return kinds(x, y)

    @classmethod
    def cmethod_inside(cls, x: Any, y: Any = None) -> tuple[str, ...]:
        """A classmethod."""
        return kinds(x, y)

    @classmethod
    def cmethod_outside(cls, x: Any, y: Any = None) -> tuple[str, ...]:
        """A classmethod."""
        return kinds(x, y)

    @staticmethod
    def smethod_inside(x: Any, y: Any = None) -> tuple[str, ...]:
        """A staticmethod."""
        return kinds(x, y)

    @staticmethod
    def smethod_outside(x: Any, y: Any = None) -> tuple[str, ...]:
        """A staticmethod."""
        return kinds(x, y)


class Sites:
    @ac.accepts_numpy(only="x")
    def method(self, x: Any, y: Any = None) -> tuple[str, ...]:
        """An instance method."""
        assert isinstance(self, Sites)
        return kinds(x, y)

    @classmethod
    @ac.accepts_numpy(only="x")
    def cmethod_inside(cls, x: Any, y: Any = None) -> tuple[str, ...]:
        """A classmethod."""
        assert cls is Sites
        return kinds(x, y)

    @ac.accepts_numpy(only="x")
    @classmethod
    def cmethod_outside(cls, x: Any, y: Any = None) -> tuple[str, ...]:
        """A classmethod."""
        assert cls is Sites
        return kinds(x, y)

    @staticmethod
    @ac.accepts_numpy(only="x")
    def smethod_inside(x: Any, y: Any = None) -> tuple[str, ...]:
        """A staticmethod."""
        return kinds(x, y)

    @ac.accepts_numpy(only="x")
    @staticmethod
    def smethod_outside(x: Any, y: Any = None) -> tuple[str, ...]:
        """A staticmethod."""
        return kinds(x, y)

    @ac.returns_tensor
    @ac.accepts_numpy
    def scale(self, x: np.ndarray) -> np.ndarray:
        return x * 3


def make_nested() -> tuple[Any, Any]:
    def nested(x: Any, y: Any = None) -> tuple[str, ...]:
        """A nested function."""
        return kinds(x, y)

    return nested, ac.accepts_numpy(only="x")(nested)


def worker_total(batch: Any) -> float:
    """Runs in a spawned process: calls a decorated function received by reference."""
    return float(scaled(batch).sum())


@ac.numpy_op(backward=lambda g, x, output: 2 * g * x, fake="x")
def registered_square(x: np.ndarray) -> np.ndarray:
    """A registered numpy_op at module level: workers get it by reference, registered on import."""
    return x**2


def worker_square_and_gradient(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Runs in a spawned process: the op's forward and backward, and its overload, work there."""
    x = x.clone().requires_grad_()
    registered_square(x).sum().backward()
    return registered_square.op(x.detach()), x.grad


@ac.accepts_numpy
def halved(x: np.ndarray) -> np.ndarray:
    """Decorated in place at module level; wrapped again below under another name."""
    return x / 2


#: returns_tensor of a module-level wrapper, under another name: pickles by that name.
halved_tensor = ac.returns_tensor(halved)


def cos_backward(g: np.ndarray, x: np.ndarray, output: np.ndarray) -> np.ndarray:
    return g * np.cos(x)


#: numpy_op of a ufunc, the docstring's form: numpy.sin is not this op, sites.sine is.
sine = ac.numpy_op(np.sin, backward=cos_backward, fake="x")


def call_with_gradient(op: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Runs in a spawned process: ``op`` arrives pickled; its forward and backward run there."""
    x = x.clone().requires_grad_()
    value = op(x)
    value.sum().backward()
    return value.detach(), x.grad


def row_total(x: np.ndarray) -> Any:
    return np.sum(x)


#: batched at module level: pickles by this name, so a spawned pool can use it.
row_totals = ac.batched(row_total)
#: A ufunc wrapped at module level.
negated = ac.accepts_numpy(np.negative)
