"""Watching decorated calls: the transfer guard's reports, ``stats()``, and profiler ranges.

A call is watched only when something asks: a ``transfers`` policy other than "allow",
an active ``stats`` block, or torch's profiler recording. The plain per-call path (see
_call.Runner) asks with the ContextVar read it makes anyway and one module flag, and
hands such calls to a watched Runner, whose call is a ``Watched``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, NamedTuple

import torch
from torch.autograd import profiler as _autograd_profiler

from autoconvert._conversions._copies import CAUSES, IN_FUNCTION, WATCH, Copy, Watch, size
from autoconvert._conversions._describe import warn_at_caller
from autoconvert._errors import TransferWarning
from autoconvert._options._config import active, enter, leave

#: Where transfers="log" writes: transfers at INFO, the other copies at DEBUG.
logger = logging.getLogger("autoconvert")


class _AskingProfiler:  # pragma: no cover - for a torch without the module flag
    """For a torch that keeps no module flag: ask its C function (about 40 ns a call)."""

    @property
    def _is_profiler_enabled(self) -> bool:
        return bool(torch.autograd._profiler_enabled())  # type: ignore[attr-defined, unused-ignore]


#: ``PROFILER._is_profiler_enabled``: whether torch's profiler is recording. Torch's own
#: module flag where it has one, cheaper than the C call (benchmarks, micro: "is the
#: profiler recording").
PROFILER: Any = _autograd_profiler if hasattr(_autograd_profiler, "_is_profiler_enabled") else _AskingProfiler()

RunnerCall = Callable[[Callable[..., Any], object, tuple[Any, ...], dict[str, Any]], Any]
#: ``path_of(value, given, result)``: where a converted value was, for messages
#: (``argument batch['x']``, ``result[0]``), or None if it is not found.
PathOf = Callable[[Any, tuple[Any, ...], list[Any]], "str | None"]


class Watching(NamedTuple):
    """What a watched Runner needs to report: where values were, and each side's transfer policy."""

    path_of: PathOf
    transfers_in: str
    transfers_out: str


class Watched:
    """A Runner's call, watched when asked: copies reported as ``transfers`` says, counted
    into active ``stats`` blocks, and each side's conversions in a profiler range."""

    def __init__(
        self,
        call: RunnerCall,
        function: str,
        watching: Watching,
        directions: tuple[str | None, str | None],
    ) -> None:
        self.call = call
        self.function = function
        self.name = function.removesuffix("()")
        self.path_of = watching.path_of
        self.policy_in, self.policy_out = watching.transfers_in, watching.transfers_out
        self.guarded = (self.policy_in, self.policy_out) != ("allow", "allow")
        self.ranges = tuple(f"autoconvert::{self.name}::{d}" if d else None for d in directions)

    def __call__(
        self, wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        config = active()
        counters = config.counters if config is not None else ()
        profiling = bool(PROFILER._is_profiler_enabled)
        if not (self.guarded or counters or profiling):
            return self.call(wrapped, instance, args, kwargs)
        return _Observation(self, counters, profiling, time.perf_counter()).run(wrapped, instance, args, kwargs)

    def report(self, watch: Watch, inputs_end: int, given: tuple[Any, ...], result: list[Any]) -> None:
        """Log or warn each copy as its side's policy says: transfers for "log" and "warn",
        the other copies, under their own cause, for "log" only (at DEBUG)."""
        for i, made in enumerate(watch.copies):
            policy = self.policy_in if i < inputs_end else self.policy_out
            if policy == "allow" or (made.cause != "transfer" and policy != "log"):
                continue
            where = self.path_of(made.value, given if i < inputs_end else (), result)
            text = f"{self.function}: {where or ('an argument' if i < inputs_end else 'a result')} {_copy_words(made)}"
            if policy == "warn":
                warn_at_caller(f"{text}; transfers='error' refuses such copies, 'allow' silences this", TransferWarning)
            else:
                logger.log(logging.INFO if made.cause == "transfer" else logging.DEBUG, text)


def _copy_words(made: Copy) -> str:
    if made.cause == "transfer":
        source, target = made.route.split(" -> ")
        return f"was copied from {source} to {target} ({size(made.nbytes)})"
    return f"was copied ({made.cause}, {size(made.nbytes)})"


class _Observation:
    """One watched call: the Watch its leaves report to, the time in the function, ranges, and
    the time the watching itself took (its context variables, timers and counts): apart from
    the conversion's, which is the time before the function and after it, and the function's."""

    def __init__(self, watched: Watched, counters: tuple[Any, ...], profiling: bool, arrived: float) -> None:
        self.watched = watched
        self.counters = counters
        self.ranges = watched.ranges if profiling else (None, None)
        self.watch = Watch(watched.policy_in)
        self.inputs_end: int | None = None
        self.arrived = arrived  #: when the watching began
        self.before = -1.0  #: seconds converting before the function (-1: it was never called)
        self.left = 0.0  #: when the function's watching ended, the result's conversion began
        self.in_function = 0.0
        self.result: list[Any] = []
        self.open: Any = None

    def run(self, wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        outer = WATCH.get()
        token = WATCH.set(self.watch)
        self._enter(self.ranges[0])
        start = time.perf_counter()

        def body(*a: Any, **k: Any) -> Any:
            self.before = time.perf_counter() - start
            self.inputs_end = len(self.watch.copies)
            self._exit()
            WATCH.set(outer)  # calls the function makes watch themselves, or not at all
            inside = IN_FUNCTION.set(self.watch)
            begun = time.perf_counter()
            try:
                result = wrapped(*a, **k)
            finally:
                self.in_function = time.perf_counter() - begun
                IN_FUNCTION.reset(inside)
                self.watch.policy = self.watched.policy_out
                WATCH.set(self.watch)
                self._enter(self.ranges[1])
                self.left = time.perf_counter()
            self.result.append(result)
            return result

        try:
            return self.watched.call(body, instance, args, kwargs)
        finally:
            done = time.perf_counter()
            conversion = done - start if self.before < 0 else self.before + done - self.left
            WATCH.reset(token)
            self._exit()
            ends = len(self.watch.copies) if self.inputs_end is None else self.inputs_end
            if self.watched.guarded:
                self.watched.report(self.watch, ends, (args, kwargs, instance), self.result)
            observing = time.perf_counter() - self.arrived - conversion - self.in_function
            for counter in self.counters:
                counter._add(self.watched.name, self.watch, conversion, self.in_function, observing)

    def _enter(self, name: str | None) -> None:
        if name is not None:
            self.open = _autograd_profiler.record_function(name)
            self.open.__enter__()

    def _exit(self) -> None:
        if self.open is not None:
            self.open.__exit__(None, None, None)
            self.open = None


class FunctionStats:
    """One function's counts in a ``stats`` block. ``copies`` and ``bytes`` are by cause:
    "transfer" (between devices), "widening" (a dtype NumPy lacks), "layout" (strides, byte
    order, read-only or broadcast memory, conj/neg bits, sparse formats), "cast" (``dtype=``
    and dtypes restored), "copy=True", "writeback", "check_writes". A ``batched`` function
    counts one call per batch (its one conversion) and the batch's ``samples``;
    ``batches_in_caller`` are batches that had an executor but ran in the caller's thread,
    too small in all to pay for it. A torchified module's function with a route besides the
    converting wrapper counts in ``routes`` the calls each such route ran (``native``: handed as
    they are to its library's own torch path; ``cupy``: run by CuPy on a CUDA tensor's
    memory, for a ``batched`` function the batches whose samples all were), and in ``declined`` why calls a route could have taken took the host path
    instead (route: reason: calls; ``not_cupy`` is CuPy's). ``rule_backwards`` counts the
    backward passes the catalogue's rule of a SciPy function ran (gradients through SciPy with
    no backward written: ``numpy_op``, ``torchify``) for the calls made in the block, wherever
    and whenever the backward runs (autograd runs a CUDA graph's on threads of its own)."""

    __slots__ = (
        "batches_in_caller",
        "bytes",
        "calls",
        "conversion_seconds",
        "converted",
        "copies",
        "declined",
        "function_seconds",
        "observing_seconds",
        "routes",
        "rule_backwards",
        "samples",
        "shared",
    )

    def __init__(self) -> None:
        self.calls = 0
        self.routes: dict[str, int] = {}  #: of those, the calls each route besides the converting wrapper ran
        self.declined: dict[str, dict[str, int]] = {}  #: why calls a route could take took the host path
        self.rule_backwards = 0  #: backward passes of the catalogue's rule
        self.samples = 0  #: run by ``batched`` calls
        self.batches_in_caller = 0
        self.converted = 0  #: values that changed library
        self.shared = 0  #: of those, the ones that crossed with no copy
        self.copies: dict[str, int] = dict.fromkeys(CAUSES, 0)
        self.bytes: dict[str, int] = dict.fromkeys(CAUSES, 0)
        self.conversion_seconds = 0.0  #: in the decorator: converting, checking, copying
        self.function_seconds = 0.0  #: in the function itself
        #: in ``stats`` itself: its context variables, timers and counts around each call, which
        #: a call outside a block does not pay
        self.observing_seconds = 0.0

    @property
    def native(self) -> int:
        """Calls handed as they are to the library's own torch path (torchify's ``native=``)."""
        return self.routes.get("native", 0)

    @property
    def cupy(self) -> int:
        """Calls CuPy ran on the CUDA tensors' own memory (torchify's ``array_module=``)."""
        return self.routes.get("cupy", 0)

    @property
    def not_cupy(self) -> dict[str, int]:
        """Why calls with a CUDA tensor took the host path instead of CuPy's (reason: calls)."""
        return self.declined.get("cupy", {})

    @property
    def copied_bytes(self) -> int:
        """Bytes copied, all causes together."""
        return sum(self.bytes.values())

    def __repr__(self) -> str:
        copies = {cause: n for cause, n in self.copies.items() if n}
        batched = f"samples={self.samples}, batches_in_caller={self.batches_in_caller}, " if self.samples else ""
        routes = "".join(f"{route}={n}, " for route, n in self.routes.items())
        routes += "".join(f"not_{route}={reasons}, " for route, reasons in self.declined.items())
        routes += f"rule_backwards={self.rule_backwards}, " if self.rule_backwards else ""
        return (
            f"FunctionStats(calls={self.calls}, {routes}{batched}converted={self.converted}, shared={self.shared}, "
            f"copies={copies}, copied_bytes={self.copied_bytes}, conversion_seconds={self.conversion_seconds:.6f}, "
            f"function_seconds={self.function_seconds:.6f}, observing_seconds={self.observing_seconds:.6f})"
        )


class stats:  # noqa: N801 - used like a function: `with ac.stats() as s:`
    """Count what decorated calls convert and copy, and where their time goes, in a ``with`` block.

    Per decorated function (by qualname): calls, values converted, how many were shared
    with no copy, copies and bytes by cause, and seconds in conversion and in the function.
    ``print(s)`` shows a table; ``s["f"]`` is one function's ``FunctionStats`` (``"f" in s``,
    ``list(s)`` and ``len(s)`` tell the functions counted), and
    ``s.calls``, ``s.shared``, ``s.copies``, ``s.bytes`` the totals. Blocks nest (an outer
    block counts what inner ones do) and each thread and asyncio task sees only its own,
    like ``config``; ``batched`` threads count into the block their map was called in.
    Outside any block nothing is counted and nothing is paid.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> @ac.accepts_numpy
        ... def total(a):
        ...     return float(np.sum(a))
        >>> with ac.stats() as s:
        ...     total(torch.ones(3, dtype=torch.bfloat16))
        3.0
        >>> s["total"].calls, s["total"].copies["widening"]
        (1, 1)
    """

    def __init__(self) -> None:
        self.functions: dict[str, FunctionStats] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> stats:
        enter(self, {}, self)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        leave(self, "autoconvert.stats()")

    def _add(self, name: str, watch: Watch, conversion: float, in_function: float, observing: float) -> None:
        """Count one watched call of ``name``: seconds converting, in the function, and watching."""
        with self._lock:
            counts = self._of(name)
            counts.calls += 1
            counts.converted += watch.converted
            counts.shared += watch.shared
            for made in watch.copies:
                counts.copies[made.cause] += 1
                counts.bytes[made.cause] += made.nbytes
            counts.function_seconds += in_function
            counts.conversion_seconds += conversion
            counts.observing_seconds += observing

    def _add_route(self, name: str, route: str, declined: str | None) -> None:
        """Count one call of ``name`` that ``route`` ran (``declined`` None), or why ``route``
        declined one that the converting wrapper then ran (its call is counted by ``_add``)."""
        with self._lock:
            counts = self._of(name)
            if declined is None:
                counts.calls += 1
                counts.routes[route] = counts.routes.get(route, 0) + 1
            else:
                reasons = counts.declined.setdefault(route, {})
                reasons[declined] = reasons.get(declined, 0) + 1

    def _add_batch(self, name: str, samples: int, in_caller: bool) -> None:
        """Count one ``batched`` map of ``name``'s (its call is counted by ``add``)."""
        with self._lock:
            counts = self._of(name)
            counts.samples += samples
            counts.batches_in_caller += in_caller

    def _add_rule_backward(self, name: str) -> None:
        """Count one backward pass of ``name``'s catalogue rule."""
        with self._lock:
            self._of(name).rule_backwards += 1

    def _of(self, name: str) -> FunctionStats:
        counts = self.functions.get(name)
        if counts is None:
            counts = self.functions[name] = FunctionStats()
        return counts

    def __getitem__(self, name: str) -> FunctionStats:
        try:
            return self.functions[name]
        except KeyError:
            seen = ", ".join(sorted(self.functions)) or "none"
            raise KeyError(f"autoconvert.stats(): no calls of {name!r} were counted; counted: {seen}") from None

    def __contains__(self, name: object) -> bool:
        """Whether calls of ``name`` were counted (``"f" in s``), as ``s.functions`` says; without
        it, ``in`` would look through ``s[0]``, ``s[1]``, ..."""
        return name in self.functions

    def __iter__(self) -> Iterator[str]:
        """The names of the functions whose calls were counted, as ``s.functions`` holds them."""
        return iter(self.functions)

    def __len__(self) -> int:
        """How many functions' calls were counted (``len(s)``), as ``s.functions`` holds them."""
        return len(self.functions)

    @property
    def calls(self) -> int:
        return sum(f.calls for f in self.functions.values())

    @property
    def shared(self) -> int:
        return sum(f.shared for f in self.functions.values())

    @property
    def copies(self) -> dict[str, int]:
        return {cause: sum(f.copies[cause] for f in self.functions.values()) for cause in CAUSES}

    @property
    def bytes(self) -> dict[str, int]:
        return {cause: sum(f.bytes[cause] for f in self.functions.values()) for cause in CAUSES}

    def __str__(self) -> str:
        causes = [c for c in CAUSES if any(f.copies[c] for f in self.functions.values())]
        routes = list(dict.fromkeys(route for f in self.functions.values() for route in f.routes))
        # batched's columns, where a batched function was called: its samples, and the batches
        # that had an executor but ran in the caller's thread (too small to pay for it)
        batches = ["samples", "in caller"] if any(f.samples for f in self.functions.values()) else []
        ruled = ["rule backwards"] if any(f.rule_backwards for f in self.functions.values()) else []
        header = ["function", "calls", *routes, *batches, *ruled, "converted", "shared", *causes, "copied"]
        header += ["conversion", "in function", "observing"]
        rows = [
            [
                name,
                str(f.calls),
                *(str(f.routes.get(route, 0)) for route in routes),
                *((str(f.samples), str(f.batches_in_caller)) if batches else ()),
                *((str(f.rule_backwards),) if ruled else ()),
                str(f.converted),
                str(f.shared),
                *(str(f.copies[c]) for c in causes),
                size(f.copied_bytes),
                _seconds(f.conversion_seconds),
                _seconds(f.function_seconds),
                _seconds(f.observing_seconds),
            ]
            for name, f in sorted(self.functions.items())
        ]
        if not rows:
            return "autoconvert.stats(): no decorated calls counted"
        widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
        lines = [
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
            for row in (header, *rows)
        ]
        return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])

    def __repr__(self) -> str:
        return f"<autoconvert.stats: {self.calls} calls of {len(self.functions)} functions>"


def count_route(name: str, route: str, declined: str | None = None) -> None:
    """Count into the active ``stats`` blocks a call of ``name`` that ``route`` ran, or, with
    ``declined``, why that route declined one (the converting wrapper's call counts it)."""
    config = active()
    for counter in config.counters if config is not None else ():
        counter._add_route(name, route, declined)


def count_batch(name: str, samples: int, in_caller: bool) -> None:
    """Count a ``batched`` map of ``name`` (a function's qualname) into the active ``stats`` blocks."""
    config = active()
    for counter in config.counters if config is not None else ():
        counter._add_batch(name, samples, in_caller)


def counting() -> tuple[Any, ...]:
    """The active ``stats`` blocks, for a call to keep: its later events count into them."""
    config = active()
    return config.counters if config is not None else ()


def count_rule_backward(name: str, counters: tuple[Any, ...]) -> None:
    """Count a backward pass of the catalogue's rule of ``name`` (a function's qualname) into
    ``counters``, the blocks its call was made in (see ``counting``)."""
    for counter in counters:
        counter._add_rule_backward(name)


def _seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.3f} s"
