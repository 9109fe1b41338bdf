"""copy=None on the tensor side (``accepts_tensor``), in one place: what the function writes
into a private copy of a writable array reaches the caller's array, as a write into the
memory ``torch.from_numpy`` shares does.

torch cannot share a writable array with negative strides (``a[::-1]``), a zero stride
(``as_strided``), non-native byte order or unaligned data, so the function gets a private
copy, recorded by the leaf with its values as handed (see _to_torch.Target.copies). The after step
(``CopyBack``) writes back the elements the function changed in each copy, compared bit for bit
with those values: only those, so that a write through another argument viewing the same array
stays, and any write, whether torch's version counter counts it or not (``x.data[0] = v``,
``x.numpy()``). It refuses a write into an array whose elements share memory, which no copy back
can make faithfully, and a copy whose shape the function changed in place. Its words for ``explain``: ``COPIED_BACK``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from types import GeneratorType
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._conversions._describe import describe_array
from autoconvert._conversions._memory import strides_overlap
from autoconvert._conversions._to_torch import Target
from autoconvert._errors import ConversionError, ReadOnlyError, message

from ._collected import Handed, after_failure_note
from ._signature import ARRAYS, Given, Parameters, tensor_paths

#: (caller's array, its private copy, the copy's version and values when made), as the leaves record them.
Copies = list[tuple[NDArray[Any], torch.Tensor, int, NDArray[Any]]]

#: Its after step's name (see Inputs.after).
COPY_BACK = "copy back"
#: What ``explain`` says of the after step.
COPIED_BACK = (
    "what the function wrote into a private copy of a writable array torch cannot share (negative strides, "
    "non-native byte order, unaligned data) is copied back into the caller's array"
)
#: A write into the private copy of an array whose elements share memory.
SHARED_ELEMENTS_WRITTEN = (
    "is a NumPy view whose elements share memory (a zero stride, or strides that overlap) in a layout torch "
    "cannot share, so the function got a private copy, and wrote into it; a write into one element cannot "
    "reach back apart from the others sharing its memory, so the caller's array was left unchanged"
)
#: Its fix; ``{path}`` is the argument's path.
SHARED_ELEMENTS_FIX = "pass {path}.copy() (then the writes reach that copy only), or return the changed tensor instead"


class CopyBack:
    """The tensor side's step after a call (its ``begin``: the side's context, recording the
    private copies): what the function wrote into a private copy of a writable array
    reaches the caller's array, even when the function raised."""

    def __init__(self, function: str, params: Parameters, begin: Any) -> None:
        self.function = function
        self.params = params
        self.begin = begin

    def __call__(self, ctx: Target, given: Given, handed: Handed, result: Any) -> Any:
        """The generic call's step, after a call whose leaves recorded ``ctx.copies``."""
        if ctx.copies:
            return self.after(ctx.copies, given, result)
        return result

    def calling(self, wrapped: Callable[..., Any], copies: Copies, given: Given) -> Callable[..., Any]:
        """``wrapped``, with this step after it: how a flat call that made private ``copies``
        calls the function (the generic call's protocol does the same around its call)."""

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as e:
                self.noting(e, copies, given)
                raise
            return self.after(copies, given, result)

        return call

    def after(self, copies: Copies, given: Given, result: Any) -> Any:
        """The copy back after the call; a generator function's body runs as it is iterated, so
        its generator copies back after each step instead (its writes reach the caller as it yields)."""
        self.copy_back(copies, given)
        if type(result) is GeneratorType:
            return self._stepping(result, copies, given)
        return result

    def noting(self, e: BaseException, copies: Copies, given: Given) -> None:
        """The copy back after the function raised ``e``: a failure of its own is a note on ``e``."""
        try:
            self.copy_back(copies, given)
        except Exception as failure:
            e.add_note(after_failure_note(self.function, failure))

    def _stepping(self, generator: Generator[Any, Any, Any], copies: Copies, given: Given) -> Generator[Any, Any, Any]:
        """``generator``, copying back after each step it takes (``next``, ``send``, ``throw``, ``close``)."""
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                item = generator.send(sent) if thrown is None else generator.throw(thrown)
            except StopIteration as stop:
                self.copy_back(copies, given)
                return stop.value
            except BaseException as e:
                self.noting(e, copies, given)
                raise
            self.copy_back(copies, given)
            sent, thrown = None, None
            try:
                sent = yield item
            except GeneratorExit:
                try:
                    generator.close()
                except BaseException as failure:
                    self.noting(failure, copies, given)
                    raise
                self.copy_back(copies, given)  # its failure is close()'s
                raise
            except BaseException as e:
                thrown = e

    def copy_back(self, copies: Copies, given: Given) -> None:
        """Each private copy the function wrote into, copied back into the caller's array (the
        others still are when one cannot be); a write into one whose elements share memory, refused."""
        refused: list[NDArray[Any]] = []
        reshaped: tuple[NDArray[Any], str] | None = None
        for a, t, version, handed in copies:
            layout = _layout_change(t, handed)
            if layout:
                reshaped = reshaped or (a, layout)
                continue
            now = t.numpy(force=True)  # detached, its conjugate and negative bits resolved
            changed = _changed_bits(now, handed)
            written = changed.any()
            if (written or t._version != version) and _shares_elements(a):
                refused.append(a)  # a write of the same values too: the version counter says it was made
            elif written:
                a[changed] = now[changed]
                handed[changed] = now[changed]  # a generator's next step gives back only its new changes
        if reshaped is not None:
            a, layout = reshaped
            raise ConversionError(
                message(
                    self.function,
                    "argument " + self._paths_of([a], given),
                    "was handed as a private copy (torch cannot share the array's layout), and the function "
                    f"changed that copy's {layout} in place, so what it wrote could not reach the caller's array",
                    describe_array(a),
                    "keep the tensor's shape in the function (write into it with x[...] = ...), or return the "
                    "new tensor instead",
                )
            )
        if refused:
            paths = self._paths_of(refused, given)
            raise ReadOnlyError(
                message(
                    self.function,
                    "argument " + paths,
                    SHARED_ELEMENTS_WRITTEN,
                    describe_array(refused[0]),
                    SHARED_ELEMENTS_FIX,
                    path=paths.split(", ")[0],
                )
            )

    def _paths_of(self, arrays: list[NDArray[Any]], given: Given) -> str:
        """Where ``arrays`` were among the call's arguments, for messages."""
        found = tensor_paths(self.params, *given, walker=ARRAYS)
        paths = [path for path, a in found if any(a is b for b in arrays)]
        return ", ".join(paths or ["(an array argument)"])


def _shares_elements(a: NDArray[Any]) -> bool:
    """Whether two of ``a``'s elements are one memory location (a zero stride, overlapping strides)."""
    if any(st == 0 and n > 1 for n, st in zip(a.shape, a.strides, strict=True)):
        return a.size > 1
    return strides_overlap(a.shape, a.strides)


def _layout_change(t: torch.Tensor, handed: NDArray[Any]) -> str:
    """How an in-place op (``resize_``, ``unsqueeze_``, ``t_``) changed the private copy ``t``'s
    layout from ``handed``'s, in words; empty where it kept it."""
    if tuple(t.shape) != handed.shape:
        return f"shape from {handed.shape} to {tuple(t.shape)}"
    if tuple(st * handed.itemsize for st in t.stride()) != handed.strides and t.numel() > 1:
        return f"strides from {handed.strides} to {tuple(st * handed.itemsize for st in t.stride())} bytes"
    return ""


def _changed_bits(now: NDArray[Any], handed: NDArray[Any]) -> NDArray[np.bool_]:
    """Which elements differ bit for bit (a NaN written over itself is no change; -0.0 over 0.0 is one)."""
    if now.dtype.kind == "c":
        return _changed_bits(now.real, handed.real) | _changed_bits(now.imag, handed.imag)
    bits = np.dtype(f"u{now.dtype.itemsize}")
    return now.view(bits) != handed.view(bits)  # type: ignore[no-any-return]
