"""A ``functools.partial``'s bound arguments are arguments: a product made of one is made of its
function and binds the same arguments, so that they are converted (and handed to a backward)
as the call's own are."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeGuard


def binds_arguments(func: Any) -> TypeGuard[functools.partial[Any]]:
    """Whether ``func`` is a partial (a subclass's too) that calls its function with its bound
    arguments first: a subclass with a ``__call__`` of its own is a callable object."""
    return isinstance(func, functools.partial) and type(func).__call__ is functools.partial.__call__


def rebound(partial: functools.partial[Any], func: Callable[..., Any]) -> functools.partial[Any]:
    """``partial`` around ``func``: its type, its bound arguments and its attributes (in its
    ``__dict__`` and in a subclass's ``__slots__``) kept."""
    made = functools.partial.__new__(type(partial), func, *partial.args, **partial.keywords)
    made.__dict__.update(vars(partial))
    for kind in type(partial).__mro__:
        slots = vars(kind).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(partial, name):
                setattr(made, name, getattr(partial, name))
    return made
