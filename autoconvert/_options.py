"""Option values: validation, defaults, and ``config()`` through contextvars.

Options are checked once, when a decorator is applied or a ``config`` block is entered,
never per call. A ``config`` block changes defaults for the decorated calls inside it,
isolated per thread and per asyncio task; options given to a decorator explicitly win.
"""

from __future__ import annotations

import contextvars
import reprlib
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Literal, TypedDict

import torch

from . import _devices
from ._dtypes import INTEGERS, is_inexact
from ._leaves import SCIPY_LAYOUTS


class AdaptOptions(TypedDict, total=False):
    """The options of ``adapt``, for type checkers (``**options: Unpack[AdaptOptions]``)."""

    copy: bool | None
    writeback: bool
    grad: Literal["warn", "detach", "error"]
    nested: bool
    sparse: Literal["array", "matrix"]
    widen_float16: bool
    check_writes: bool
    device: torch.device | str | int | None
    transfers: Literal["allow", "log", "warn", "error"]


class PairOptions(AdaptOptions, total=False):
    """The options of ``accepts_numpy`` and ``returns_tensor`` together, as ``torchify`` and
    ``numpy_op`` take them: ``adapt``'s and the result's dtype and sparse layout."""

    dtype: torch.dtype | Literal["input"] | None
    sparse_layout: torch.layout | None
    callbacks: bool
    out_params: str | Iterable[str]


#: Options ``config()`` may set; ``only``/``exclude`` name one function's parameters.
CONFIGURABLE = frozenset(
    {
        "copy",
        "writeback",
        "grad",
        "nested",
        "device",
        "dtype",
        "sparse",
        "sparse_layout",
        "widen_float16",
        "check_writes",
        "transfers",
        "callbacks",
    }
)
SPARSE_KINDS = ("array", "matrix")
GRAD_MODES = ("warn", "detach", "error")
TRANSFER_POLICIES = ("allow", "log", "warn", "error")


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name}= takes True or False, got {value!r}")
    return value


def _copy(value: object) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"copy= takes None (copy only when needed), True (always) or False (never), got {value!r}")
    return value


def _grad(value: object) -> str:
    if value not in GRAD_MODES:
        raise ValueError(f"grad= takes 'warn', 'detach' or 'error', got {value!r}")
    return str(value)


def _transfers(value: object) -> str:
    if value not in TRANSFER_POLICIES:
        raise ValueError(f"transfers= takes 'allow', 'log', 'warn' or 'error', got {value!r}")
    return str(value)


def _device(value: object) -> torch.device | None:
    if value is None:
        return None
    try:
        device = _devices.parse(value)
    except (TypeError, RuntimeError) as e:
        raise TypeError(f"device= takes None (the caller's device) or a torch device: {e}") from None
    return _devices.normal(device)


def _dtype(value: object) -> torch.dtype | str | None:
    if value is None or value == "input":
        return value
    if not isinstance(value, torch.dtype):
        raise TypeError(f"dtype= takes None, 'input' or a torch.dtype, got {value!r}")
    if value == torch.bool:
        raise TypeError("dtype= casts results within their kind, and bool results are never cast; got torch.bool")
    if not is_inexact(value) and value not in INTEGERS:
        raise TypeError(f"dtype= takes a floating, complex or integer dtype NumPy also has, got {value}")
    return value


def _names(name: str, value: object) -> frozenset[str] | None:
    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, Iterable) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{name}= takes a parameter name or a list of them, got {value!r}")
    return frozenset(names)


def _sparse(value: object) -> str:
    if value not in SPARSE_KINDS:
        raise ValueError(f"sparse= takes 'array' (scipy.sparse arrays) or 'matrix' (spmatrix), got {value!r}")
    return str(value)


def _sparse_layout(value: object) -> torch.layout | None:
    if value is not None and value not in SCIPY_LAYOUTS:
        raise ValueError(
            "sparse_layout= takes None (as the SciPy format) or torch.sparse_coo, torch.sparse_csr, "
            f"torch.sparse_csc or torch.sparse_bsr, got {value!r}"
        )
    return value


_VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "sparse": _sparse,
    "sparse_layout": _sparse_layout,
    "copy": _copy,
    "writeback": lambda v: _flag("writeback", v),
    "grad": _grad,
    "nested": lambda v: _flag("nested", v),
    "widen_float16": lambda v: _flag("widen_float16", v),
    "check_writes": lambda v: _flag("check_writes", v),
    "callbacks": lambda v: _flag("callbacks", v),
    "device": _device,
    "dtype": _dtype,
    "transfers": _transfers,
    "only": lambda v: _names("only", v),
    "exclude": lambda v: _names("exclude", v),
    "out_params": lambda v: tuple(sorted(_names("out_params", v) or ())),
}


def validate(options: Mapping[str, Any], allowed: Iterable[str], where: str) -> dict[str, Any]:
    """Checked and normalised ``options``; unknown names and bad values raise ``TypeError``/``ValueError``."""
    allowed = set(allowed)
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(f"{where} got unknown option(s) {', '.join(unknown)}; it takes {', '.join(sorted(allowed))}")
    checked = {}
    for name, value in options.items():
        try:
            checked[name] = _VALIDATORS[name](value)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where}: {e}") from None
    return checked


def check_callable(func: object, decorator: str) -> None:
    """A decorator's positional argument is the function (or a descriptor of one, such as a
    classmethod): anything else (``@accepts_numpy("x")`` meaning ``only="x"``) would be wrapped
    as if callable and fail at the first call."""
    if not callable(func) and not hasattr(type(func), "__get__"):
        raise TypeError(
            f"autoconvert.{decorator}() decorates a function or other callable; got {reprlib.repr(func)} "
            f"({type(func).__name__}). Fix: decorate the function itself, and pass options by keyword: "
            f"@{decorator}(option=value)."
        )


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


def active() -> Config | None:
    """The current ``config`` block's options, or ``None`` outside any: one ContextVar read."""
    return _ACTIVE.get()


class config:  # noqa: N801 - used like a function: `with ac.config(copy=True):`
    """Set option defaults for the decorated calls inside a ``with`` block.

    Keywords are the decorators' option names (``copy``, ``writeback``, ``grad``,
    ``nested``, ``device``, ``dtype``, ``sparse``, ``sparse_layout``, ``widen_float16``,
    ``check_writes``, ``transfers``); each applies to every decorator that has that
    option, and to ``to_numpy``/``to_tensor``. Options passed to a decorator explicitly
    win. Blocks nest, and each thread and asyncio task sees only its own.

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
        self._options = validate(options, CONFIGURABLE, "autoconvert.config()")

    def __enter__(self) -> config:
        enter(self, self._options)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        leave(self, "autoconvert.config()")


def enter(block: object, options: dict[str, Any], counter: object = None) -> None:
    """Enter ``block``: ``options`` over the active ones, and ``counter`` (a ``stats``) added
    to those collecting."""
    outer = _ACTIVE.get()
    merged, counters = ({**outer.options, **options}, outer.counters) if outer is not None else (dict(options), ())
    _ACTIVE.set(Config(merged, outer, block, counters if counter is None else (*counters, counter)))


def leave(block: object, name: str) -> None:
    """Leave the block ``block`` entered: what was active before it is active again."""
    current = _ACTIVE.get()
    if current is None or current.block is not block:
        raise RuntimeError(
            f"{name}: a block was left in another thread or task than the one it was "
            "entered in, or out of order; use each `with` in the thread or task that runs its body"
        )
    _ACTIVE.set(current.outer)
