"""Out-parameters: arguments a function is handed to write its results into.

``np.add(x, 1, out=buf)``, ``scipy.ndimage.correlate(x, w, output=buf)``: the caller hands
``buf`` over to be written, so a tensor there reaches the function writable (its own memory
where NumPy can hold it, else a private copy written back after the call), and a result that
is that array comes back as the caller's tensor itself. Every other argument stays read-only.

The feature composed onto the NumPy side, in one place: where out-parameters sit
(``OutParams``), their leaf (``out_leaf``) and the step handing them over first
(``handing_out``), an array returned given back (``returned``), and the words of their after
step (``WriteBack`` in _writeback runs it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autoconvert._conversions._copies import copied
from autoconvert._conversions._describe import describe_tensor
from autoconvert._conversions._dtypes import Casts
from autoconvert._conversions._grad import GradPolicy
from autoconvert._conversions._memory import expanded, overlapping
from autoconvert._conversions._to_numpy import tensor_to_array
from autoconvert._conversions._tree import Mapper
from autoconvert._errors import ConversionError, LeafError, cycle_error

from ._signature import Parameters

#: Its after step's name (see Inputs.after): the private copies written back.
WRITE_BACK_OUT = "write back out-parameters"
#: What ``explain`` says of that step.
OUT_WRITTEN_BACK = "out-parameters' private copies (off the CPU) are written back into the caller's tensors"


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


def writable(t: torch.Tensor, copy: bool | None, grad: GradPolicy, widened: Casts) -> tuple[Any, Any]:
    """``t`` as a writable array, and the private array to copy back after the call (None
    where the array is ``t``'s memory): out-parameters' and writeback's."""
    a, shared = tensor_to_array(t, copy, grad, settle=False, widened=widened)
    if copy is not False and not a.flags.c_contiguous and t.is_cpu:
        # Compiled consumers refuse strided output memory (OpenCV drawing on t.permute(1, 2, 0),
        # numba's [::1], Cython's [:, ::1]): the function gets C order, copied back afterwards,
        # a private copy too (widening and copy=True keep a dense tensor's strides). Not a
        # device's: its copy to the host may still be under way (settled after the arguments).
        copied("layout", t, a.nbytes)
        a, shared = np.ascontiguousarray(a), False
    return a, None if shared else a


def refuse_sparse(t: torch.Tensor, role: str, fix: str) -> None:
    """A sparse tensor crosses as a new SciPy matrix, whose changes nothing copies back:
    refused where the function writes (``role``: writeback's or an out-parameter's)."""
    if t.layout != torch.strided and not t.is_nested:
        raise LeafError(
            ConversionError,
            f"is a sparse tensor; {role} cannot write a SciPy matrix's changes back into it",
            describe_tensor(t),
            fix,
        )


def out_leaf(copy: bool | None, grad: GradPolicy, widened: Casts) -> Callable[[torch.Tensor, Any], Any]:
    """The leaf of a tensor handed over as an out-parameter: writable, written back after the call."""

    def leaf(t: torch.Tensor, ctx: Any) -> Any:
        ctx.odd.append(t)
        refuse_sparse(
            t, "an out-parameter", "pass a dense tensor ({path}.to_dense() gives one, written instead of {path})"
        )
        if not t.is_nested and (expanded(t) or overlapping(t)):
            kind = (
                "an expanded tensor (zero strides: its elements share memory)"
                if expanded(t)
                else "an overlapping tensor (strides that give some of its elements one memory location, as "
                "as_strided and unfold make)"
            )
            raise LeafError(
                ConversionError,
                f"is {kind}, which no output can be written into",
                describe_tensor(t),
                "pass a tensor with memory of its own (torch.empty(...), or {path}.clone())",
            )
        a, private = writable(t, copy, grad, widened)
        ctx.writes.written.append((t, a, private))
        return a

    return leaf


def handing_out(
    out: OutParams,
    params: Parameters,
    nested: bool,
    leaf: Callable[[torch.Tensor, Any], Any],
    public: Callable[[LeafError, object, str | None, int], Exception],
) -> Callable[[tuple[Any, ...], dict[str, Any], object, Any], tuple[tuple[Any, ...], dict[str, Any]]]:
    """The NumPy side's ``prepare`` step (see Inputs.prepare): the call's out-parameters handed
    over writable by ``leaf``, before the rest; ``public`` makes a failure's error."""
    mapper = Mapper({torch.Tensor: leaf}, nested=nested)

    def prepare(
        args: tuple[Any, ...], kwargs: dict[str, Any], instance: object, ctx: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        found = out.given(args, kwargs, params.offset(instance))
        if not found:
            return args, kwargs
        positional, keywords = list(args), dict(kwargs)
        for where, value in found:
            try:
                converted = mapper(value, ctx)
            except (LeafError, RecursionError) as e:  # a RecursionError: a container that holds itself
                key, position = (where, 0) if isinstance(where, str) else (None, where)
                fact = e if isinstance(e, LeafError) else cycle_error()
                raise public(fact, instance, key, position) from None
            if isinstance(where, str):
                keywords[where] = converted
            else:
                positional[where] = converted
        return tuple(positional), keywords

    return prepare
