"""Tracebacks of autoconvert's own errors end at the user's code, as JAX's do
(jax/_src/traceback_util.py): the library's frames, its generated code's and wrapt's are
left out of a ``ConversionError``'s traceback where it leaves the library.
``AUTOCONVERT_TRACEBACK_FILTERING=off`` keeps every frame (docs/errors.md says so). Any other
exception, the user's function's own included, keeps its traceback as it is.
"""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from autoconvert._conversions._describe import is_ours
from autoconvert._errors import ConversionError
from autoconvert._escape import compiling
from autoconvert._spec._callbacks import held_refusal

#: Where the full traceback is asked for: read when an error leaves, so that setting it in a
#: running program (a notebook) takes effect at the next error.
SWITCH = "AUTOCONVERT_TRACEBACK_FILTERING"

P = ParamSpec("P")
R = TypeVar("R")


def filter_traceback(error: BaseException) -> None:
    """Leave autoconvert's frames out of ``error``'s traceback, where it is autoconvert's own
    error and filtering is on; called where an error leaves a call of autoconvert's (the
    flat call, the generic call, a wrapper): each such boundary filters what is below it."""
    if not isinstance(error, ConversionError) or os.environ.get(SWITCH, "").lower() in ("off", "0", "false"):
        return
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    users = [tb for tb in frames if not is_ours(tb.tb_frame.f_code.co_filename)]
    # The frames above this boundary, the user's, join as the error goes on up.
    kept: types.TracebackType | None = None
    for tb in reversed(users):
        kept = types.TracebackType(kept, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    error.with_traceback(kept)


def raise_held(error: BaseException) -> None:
    """Raise, in ``error``'s place, the error of autoconvert's that left a callback (the
    refusal of its result, an inner autoconvert call's) that the library calling the callback
    raised ``error`` from (see held_refusal): grad="error" promises the caller a GradientError,
    and autoconvert's words say the fix. Returns where ``error`` holds none, for the boundary
    to raise it."""
    held = held_refusal(error)
    if held is not None:
        filter_traceback(held)
        raise held from None


def boundary(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` as a boundary (see filter_traceback), for the entries that are not the
    flat or the generic call (which hold their own, at no cost: see _generate.bounded)."""

    @functools.wraps(function)
    def bounded(*args: P.args, **kwargs: P.kwargs) -> R:
        if compiling():  # pragma: no cover - under dynamo, which cannot break its graph inside a try block
            return function(*args, **kwargs)
        try:
            return function(*args, **kwargs)
        except ConversionError as e:
            filter_traceback(e)
            raise
        except Exception as e:
            raise_held(e)
            raise

    return bounded
