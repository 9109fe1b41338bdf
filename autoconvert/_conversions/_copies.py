"""Every copy a conversion makes, told to whoever watches: the transfer guard and the counters.

Leaf functions call ``copied``, or ``crossing`` before a copy between devices, on
their copy paths only. Zero-copy paths say nothing, so an unwatched call pays nothing and
a copy pays one ContextVar read. A ``Watch`` is set only while a watched call
converts its arguments or its results (see _observe).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from autoconvert._errors import LeafError, TransferError

#: What a copy was for. "layout": memory the other library cannot hold as it is (strides,
#: byte order, alignment, read-only or broadcast memory, lazy conj/neg bits, sparse formats);
#: "writable": compiled code that refused read-only arrays (torchify's copy when needed).
CAUSES = ("transfer", "widening", "layout", "cast", "copy=True", "writeback", "check_writes", "writable")
POLICIES = ("allow", "log", "warn", "error")


class Copy:
    """One copy: its cause, the value copied, its size, and for a transfer ``"cuda:0 -> cpu"``."""

    __slots__ = ("cause", "nbytes", "route", "value")

    def __init__(self, cause: str, value: Any, nbytes: int, route: str = "") -> None:
        self.cause = cause
        self.value = value
        self.nbytes = nbytes
        self.route = route


class Watch:
    """One watched call's copies so far, its conversions, and the transfer policy of the side
    converting now."""

    __slots__ = ("converted", "copies", "policy", "shared")

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.copies: list[Copy] = []
        self.converted = 0  # values that changed library
        self.shared = 0  # of those, the ones that crossed with no copy

    def transfer(self, value: Any, nbytes: int, source: object, target: object, found: Callable[[], str]) -> None:
        """Record a copy from ``source`` to ``target``, or refuse it before it is made."""
        if self.policy == "error":
            raise LeafError(
                TransferError,
                f"would be copied from {source} to {target} ({size(nbytes)}), and transfers='error' forbids "
                "the copies autoconvert makes between devices",
                found(),
                f"move it to {target} yourself where that is meant, or allow this call's transfers with "
                "transfers='allow', 'log' or 'warn'",
            )
        self.copies.append(Copy("transfer", value, nbytes, f"{source} -> {target}"))


WATCH: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("autoconvert_watch", default=None)
watching = WATCH.get


def copied(cause: str, value: Any, nbytes: int) -> None:
    """Tell the watching call, if any, that ``value`` was copied (``nbytes``) for ``cause``."""
    watch = watching()
    if watch is not None:
        watch.copies.append(Copy(cause, value, nbytes))


#: The watch of the decorated call whose function is running (see _observe): copies the
#: function's own guards make (torchify's writable copies) count for that call.
IN_FUNCTION: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("autoconvert_in_function", default=None)


def copied_in_function(cause: str, value: Any, nbytes: int) -> None:
    """``copied``, for a copy made while the decorated function runs."""
    watch = IN_FUNCTION.get()
    if watch is not None:
        watch.copies.append(Copy(cause, value, nbytes))


def crossing(value: Any, nbytes: int, source: object, target: object, found: Callable[[], str]) -> None:
    """Before ``value`` is copied from device ``source`` to ``target``: the guard may refuse.
    ``found`` describes the value, for the refusal's message."""
    watch = watching()
    if watch is not None:
        watch.transfer(value, nbytes, source, target, found)


def counted(leaf: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``leaf``, counting its conversions for the watching call, and marking the copies made
    for one as the value's (a leaf may detach, resolve or re-stride it first)."""

    def counting(value: Any, ctx: Any) -> Any:
        watch = watching()
        if watch is None:
            return leaf(value, ctx)
        before = len(watch.copies)
        out = leaf(value, ctx)
        if out is not value:
            watch.converted += 1
            made_now = watch.copies[before:]
            # check_writes' snapshot is a copy kept aside: the value itself still crossed shared.
            watch.shared += all(made.cause == "check_writes" for made in made_now)
            for made in made_now:
                made.value = value
        return out

    return counting


def size(nbytes: int) -> str:
    """``"12 B"``, ``"4.0 KiB"``, ``"1.5 MiB"``: sizes as messages and tables show them."""
    if nbytes < 1024:
        return f"{nbytes} B"
    value = nbytes / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
