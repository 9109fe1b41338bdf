"""Out-parameters: arguments a function is handed to write its results into.

``np.add(x, 1, out=buf)``, ``scipy.ndimage.correlate(x, w, output=buf)``: the caller hands
``buf`` over to be written, so a tensor there reaches the function writable (its own memory
where NumPy can hold it, else a private copy written back after the call), and a result that
is that array comes back as the caller's tensor itself. Every other argument stays read-only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._signature import Parameters


class OutParams:
    """Where a function's out-parameters sit in a call: by keyword, and by position where
    its signature says (a ufunc's outputs follow its ``nin`` inputs)."""

    __slots__ = ("names", "positions")

    def __init__(self, names: tuple[str, ...], params: Parameters) -> None:
        self.names = frozenset(names)
        named = (i for i, name in enumerate(params.positional) if name in names)
        self.positions = tuple(params.outputs_at if "out" in names else ()) or tuple(named)

    def first_position(self, offset: int) -> int | None:
        """The first position (among the call's ``args``) that is an out-parameter."""
        return self.positions[0] - offset if self.positions else None

    def given(self, args: tuple[Any, ...], kwargs: dict[str, Any], offset: int) -> list[tuple[int | str, Any]]:
        """The out-parameters this call passes: ``(position or keyword, value)``; None values left out."""
        found: list[tuple[int | str, Any]] = [
            (p - offset, args[p - offset]) for p in self.positions if 0 <= p - offset < len(args)
        ]
        if kwargs:
            found += [(key, value) for key, value in kwargs.items() if key in self.names]
        return [(where, value) for where, value in found if value is not None]


class Returned:
    """A result that is an out-parameter's array: the output side gives back ``tensor``, the
    caller's own, written already."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def returned(result: Any, written: list[tuple[torch.Tensor, Any, Any]]) -> Any:
    """``result`` with each array that is an out-parameter's (itself or a view of all of it,
    as ``vectorized_filter`` returns; or an item of a tuple of them: ``np.divmod(x, y,
    out=(q, r))``) marked ``Returned``."""
    for t, a, _ in written:
        if _same(result, a):
            return Returned(t)
    if type(result) is tuple and any(_same(item, a) for item in result for _, a, _ in written):
        return tuple(returned(item, written) for item in result)
    return result


def _same(value: Any, a: np.ndarray[Any, Any]) -> bool:
    """Whether ``value`` is the array ``a``, or views exactly its memory as it does."""
    if value is a:
        return True
    return (
        type(value) is np.ndarray
        and (value.shape, value.strides, value.dtype) == (a.shape, a.strides, a.dtype)
        and value.__array_interface__["data"][0] == a.__array_interface__["data"][0]
    )
