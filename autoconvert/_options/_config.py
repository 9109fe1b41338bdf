"""``config()``: option defaults for the decorated calls inside a ``with`` block.

A block's options are validated when it is created, never per call. They live in a
ContextVar, so each thread and asyncio task sees only its own blocks; a plan resolves its
sides' policies once per distinct set of a block's options (_plan).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ._options import shows_options, validate


class Config:
    """The options of the innermost active ``config`` block, merged with its outer ones.

    ``outer`` is what was active before the block and ``block`` the ``config`` or ``stats``
    object that entered it: leaving restores ``outer`` in the current context, so one
    object can be entered in many threads and tasks at once (and re-entered), with no
    tokens kept on the object. ``counters`` are the ``stats`` blocks collecting, innermost last.
    """

    __slots__ = ("block", "counters", "key", "options", "outer")

    def __init__(self, options: dict[str, Any], outer: Config | None, block: object, counters: tuple[Any, ...] = ()):
        self.options = options
        self.key = tuple(sorted(options.items(), key=lambda kv: kv[0]))
        self.outer = outer
        self.block = block
        self.counters = counters


_ACTIVE: contextvars.ContextVar[Config | None] = contextvars.ContextVar("autoconvert_config", default=None)


#: The current ``config`` block's options, or ``None`` outside any: the ContextVar's own
#: ``get``, bound, so a per-call check pays no Python frame for it.
active: Callable[[], Config | None] = _ACTIVE.get

#: Whether a block is open in any thread or task: what a call traced by torch.compile reads
#: (dynamo reads no ContextVar, and guards a module's attribute), to take the eager call
#: there, which sees its own blocks, while one is.
blocks_open = False
_opened = [0]  # blocks open, in every thread and task
_counting_blocks = threading.Lock()


class config:  # noqa: N801 - used like a function: `with ac.config(copy=True):`
    """Set option defaults for the decorated calls inside a ``with`` block.

    Keywords are the decorators' options, all but those naming one function's parameters
    (``only``, ``exclude``, ``out_params``): see its signature or the API page's table of
    options. Each applies to every decorator that has that option, and to
    ``to_numpy``/``to_tensor``. Options passed to a decorator explicitly win. Blocks nest,
    and each thread and asyncio task sees only its own.

    Raises:
        TypeError, ValueError: an unknown option or an invalid value, when created.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> @ac.accepts_numpy
        ... def zero_first(a):
        ...     a[0] = 0
        ...     return a
        >>> with ac.config(copy=True):
        ...     zero_first(torch.ones(2))
        array([0., 1.], dtype=float32)
    """

    def __init__(self, **options: Any) -> None:
        self._options = validate(options, "config")

    def __enter__(self) -> config:
        enter(self, self._options)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        leave(self, "autoconvert.config()")


def enter(block: object, options: dict[str, Any], counter: object = None) -> None:
    """Enter ``block``: ``options`` over the active ones, and ``counter`` (a ``stats``) added
    to those collecting."""
    global blocks_open  # the flag dynamo guards
    outer = _ACTIVE.get()
    merged, counters = ({**outer.options, **options}, outer.counters) if outer is not None else (dict(options), ())
    _ACTIVE.set(Config(merged, outer, block, counters if counter is None else (*counters, counter)))
    with _counting_blocks:
        _opened[0] += 1
        blocks_open = True


def leave(block: object, name: str) -> None:
    """Leave the block ``block`` entered: what was active before it is active again."""
    current = _ACTIVE.get()
    if current is None or current.block is not block:
        raise RuntimeError(
            f"{name}: a block was left in another thread or task than the one it was "
            "entered in, or out of order; use each `with` in the thread or task that runs its body"
        )
    global blocks_open  # the flag dynamo guards
    _ACTIVE.set(current.outer)
    with _counting_blocks:
        _opened[0] -= 1
        blocks_open = _opened[0] > 0


shows_options(config, [], "config")
