"""The per-function call: guards, conversions in, the call, conversions out; and its failures."""

from __future__ import annotations

import dis
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._config import _ACTIVE, Config
from ._devices import settle
from ._dtypes import WIDENED_HALF
from ._errors import ConversionError, LeafError, ReadOnlyError, message
from ._escape import compiling, opaque
from ._inputs import Collected, Context, Inputs, NumpyInputs, RecordingInputs, TensorInputs, collected
from ._leaves import describe_tensor, restore_writes
from ._observe import PROFILER, Watched, Watching
from ._outparams import Returned, returned
from ._outputs import NumpyOutputs, Outputs, TensorOutputs
from ._signature import DEFERRED_RESULTS, Given, _record, _tensor_paths, deferred_result
from ._specialise import Flat, specialised
from ._tree import Mapper, cycle_error, keep
from ._writeback import WriteBackFailed, write_back

Call = Callable[[Callable[..., Any], object, tuple[Any, ...], dict[str, Any]], Any]
#: The steps a Runner gives the protocol (see Runner._steps).
Begin = Callable[[list[torch.Tensor], list[torch.Tensor], tuple[Any, ...], dict[str, Any]], Context]
ConvertIn = Callable[
    [tuple[Any, ...], dict[str, Any], object, Any, list[torch.Tensor]], tuple[tuple[Any, ...], dict[str, Any]]
]
Finish = Callable[[Any, list[torch.Tensor], list[torch.Tensor], Given, Any], Any]
AfterStep = Callable[[Collected, Given], None]


_active = _ACTIVE.get  # the bound C method: one call fewer than active()
_new = tuple.__new__  # a NamedTuple's own __new__ costs more (benchmarks, micro)


#: The instructions of a ``raise`` statement: an error raised there is Python code's own.
_RAISES = frozenset({dis.opmap["RAISE_VARARGS"], dis.opmap["RERAISE"]})
#: The code of the frames Cython reports for its functions (``PyCode_NewEmpty``'s, never run).
_CYTHON_FRAME = bytes([dis.opmap["RESUME"], 0, dis.opmap["LOAD_ASSERTION_ERROR"], 0, dis.opmap["RAISE_VARARGS"], 1])
#: Cython's refusal of a read-only buffer for a typed memoryview (``scipy.signal.sosfilt``,
#: ``Rotation.apply`` in SciPy 1.17): raised on entry, before the function reads or writes.
_CYTHON_READ_ONLY = "buffer source array is read-only"
#: How compiled code words a refused write: NumPy's "<what> is read-only", and pybind11's
#: "array is not writeable" (``scipy.fft.fft(x, overwrite_x=True)``).
_REFUSALS = (" is read-only", " is not writeable")
#: How numba and OpenCV refuse a read-only array, by the module of the error's class (so
#: recognising them imports neither) and words of its message: ``(module, words, writes)``,
#: ``writes`` telling a refused write from a refusal on entry (a kernel's explicit signature).
_COMPILED_REFUSALS = (
    ("numba", "Cannot modify readonly array", True),
    ("numba", "setitem(readonly array(", True),
    ("numba", "readonly array(", False),
    ("builtins", "No matching definition for argument type(s) readonly array(", False),
    ("cv2", "provided NumPy array marked as readonly", True),
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_array_walker = Mapper({np.ndarray: _record}, nested=True)


def wrote_into_handed(error: ValueError, handed: list[tuple[str, Any]], kwargs: dict[str, Any]) -> list[str] | None:
    """Whether ``error`` is NumPy refusing a write into an array autoconvert handed over, and
    if so the paths of the handed arrays (``handed``: ``(path, array)`` pairs) it may have hit
    (empty where none can be told); None where it is not that refusal.

    NumPy words each refusal "<what> is read-only", the what naming the write ("assignment
    destination", "output array", "sort array", "underlying array" for ``np.fill_diagonal``,
    "array" for ``Generator.shuffle``; SciPy's ndimage adds a full stop; scipy.fft's pybind11
    code says "array is not writeable"), and does not say which array it was. So: those
    words, raised by compiled code (not by a ``raise`` in the frame that raised), where every
    read-only array in that frame shares memory with a handed array; those are the ones hit.
    The user's own errors, and writes into read-only arrays the function made
    (``np.broadcast_to``, of its own arrays or of handed ones), keep their own error. Where
    the function is compiled code (a ufunc's ``out=``, a Cython method), the frame that
    raised is the caller's, whose traceback this is: the destination was an argument, ``out``
    where that was handed read-only.
    """
    tb = error.__traceback__
    if tb is None or not str(error).removesuffix(".").endswith(_REFUSALS):
        return None
    raised = tb
    while tb.tb_next is not None:
        tb = tb.tb_next
        if tb.tb_frame.f_code.co_code != _CYTHON_FRAME:
            raised = tb
    read_only = [(path, a) for path, a in handed if not a.flags.writeable]
    if raised is error.__traceback__:  # the caller's frame: compiled code was the function
        out = [
            path for path, a in read_only if any(a is o for _, o in _array_walker.leaves_with_paths(kwargs.get("out")))
        ]
        return (out or [path for path, _ in read_only]) if read_only else None
    if raised.tb_frame.f_code.co_code[raised.tb_lasti] in _RAISES:
        return None
    local = [v for v in raised.tb_frame.f_locals.values() if isinstance(v, np.ndarray) and not v.flags.writeable]
    if any(_broadcast(v) and all(v is not h for _, h in handed) for v in local):
        return None  # np.broadcast_to's views are read-only by NumPy's own rule, whatever they view
    if not local or not all(any(np.may_share_memory(v, h) for _, h in handed) for v in local):
        return None
    return [path for path, h in read_only if any(np.may_share_memory(v, h) for v in local)]


def compiled_refusal(error: BaseException) -> bool | None:
    """Whether ``error`` is numba or OpenCV refusing a read-only array: True for a refused
    write (a kernel storing into it, ``cv2.fillPoly`` drawing on it), False for a refusal on
    entry (a kernel whose signature asks for writable arrays); None where it is neither."""
    module = type(error).__module__.partition(".")[0]
    text = str(error)
    for owner, words, writes in _COMPILED_REFUSALS:
        if module == owner and words in text:
            return writes
    return None


def refused_on_entry(error: BaseException) -> bool:
    """Whether ``error`` is compiled code refusing a read-only array before doing any work: a
    Cython memoryview, a numba kernel's explicit signature."""
    if isinstance(error, ValueError) and str(error) == _CYTHON_READ_ONLY:
        return True
    return compiled_refusal(error) is False


def _refused(
    error: BaseException, inputs: NumpyInputs, handed: tuple[tuple[Any, ...], dict[str, Any]], given: Given
) -> tuple[list[str], bool] | None:
    """Whether ``error`` is compiled code refusing a read-only array handed over: the paths
    of those it may have been and whether it refused a write (else the array on entry); None
    where it is not such a refusal."""
    writes = None if isinstance(error, ValueError) else compiled_refusal(error)
    if writes is None and not isinstance(error, ValueError):
        return None
    arrays = _tensor_paths(inputs.params, *handed, given.instance, _array_walker)
    if writes is not None:  # numba and OpenCV do not say which array: every read-only one handed over
        return [path for path, a in arrays if not a.flags.writeable], writes
    paths = wrote_into_handed(error, arrays, handed[1])  # type: ignore[arg-type]  # a ValueError
    return None if paths is None else (paths, str(error) != _CYTHON_READ_ONLY)


def _quoted(error: BaseException) -> str:
    """``error`` as the message's "Found": its first line that names the refusal (numba's run
    to pages, coloured), the whole error being chained."""
    lines = [_ANSI.sub("", line).strip(" >|-") for line in str(error).splitlines()]
    line = next(
        (x for x in lines if "readonly" in x or "read-only" in x or "writeable" in x), lines[0] if lines else ""
    )
    kind = type(error)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{name}({line!r})"


def _broadcast(a: np.ndarray[Any, Any]) -> bool:
    """Whether ``a`` repeats elements through a zero stride (a broadcast view)."""
    return any(st == 0 and n > 1 for n, st in zip(a.shape, a.strides, strict=True))


def _hints(error: Exception, inputs: NumpyInputs, tensors: list[tuple[str, Any]]) -> list[str]:
    """What the function's ``error`` may owe to how its tensor arguments (``(path, tensor)``)
    were handed: a sparse tensor crosses as a SciPy matrix, which dense-only code cannot read;
    float16 crosses as float16, which much of SciPy rejects ("array type not supported")."""
    hints = []
    sparse = [path for path, t in tensors if t.layout != torch.strided]
    if sparse:
        hints.append(
            f"argument {sparse[0]} is a sparse tensor, handed over as a scipy.sparse matrix; if the function "
            f"needs a dense array, pass {sparse[0]}.to_dense()"
        )
    half = [path for path, t in tensors if t.dtype is torch.float16]
    if half and inputs.widened is not WIDENED_HALF and "supported" in str(error):
        hints.append(
            f"argument {half[0]} is a float16 tensor, handed over as float16, which much of SciPy rejects; "
            "pass widen_float16=True to hand it over as float32 (results come back as float16)"
        )
    return hints


#: How torch refuses an array where it wants a tensor, or NumPy a torch dtype.
_MIXED = ("not numpy.ndarray", "(numpy.ndarray,", "'numpy.ndarray' and 'Tensor'", "<class 'torch.dtype'>")


def _arrays_met_torch(text: str) -> bool:
    return any(words in text for words in _MIXED)


def _callback_hints(inputs: NumpyInputs, given: Given) -> list[str]:
    """The function passed its callable arguments arrays, and torch code refused one: such a
    callable (a statistic, an objective) is likely written in torch, and wants tensors."""
    args, kwargs, instance = given
    offset = inputs.params.offset(instance)
    named = [(inputs.params.positional_name(i, offset), a) for i, a in enumerate(args)]
    named += [(inputs.params.keyword_name(k), v) for k, v in kwargs.items()]
    callables = [path for path, v in named if callable(v) and not isinstance(v, (type, torch.Tensor, np.ndarray))]
    if not callables:
        return []
    return [
        f"argument {callables[0]} is a callable, handed NumPy arrays when the function calls it; if it is "
        "written in torch, pass callbacks=True to hand it tensors"
    ]


def refuse_deferred(result: Any, function: str) -> None:
    """Before an after step (writeback, check_writes): a result whose body has not run yet
    (a generator, a coroutine) is refused, since the step would run before its writes."""
    if type(result) in DEFERRED_RESULTS:
        try:
            deferred_result(result)
        except LeafError as e:
            raise e.public(function, "", "result") from None


class Runner:
    """One decorated call, for one set of resolved options: convert in, call, convert out.

    ``runner.call(wrapped, instance, args, kwargs)`` is the per-call path: a check for an
    active ``config`` block, two lists for the call's tensors, one dict lookup per argument
    and result, and the conversions. It is a closure, so everything decided here is a
    constant to it rather than an attribute. A plan's default Runner hands calls made
    inside a ``config`` block to ``variants(config)``; the variants themselves don't look.
    """

    def __init__(
        self,
        inputs: Inputs | None,
        outputs: Outputs | None,
        function: str,
        variants: Callable[[Config | None], Runner] | None = None,
        *,
        routes: bool = False,
        watch: Watching | None = None,
    ) -> None:
        """``routes``: hand every call to ``variants`` (a decorator asked for a transfer policy,
        which only a watched Runner carries out); ``watch``: this is such a Runner, with where
        values were and each side's transfer policy (see _observe)."""
        self.inputs = inputs
        self.outputs = outputs
        self.function = function
        self.routes = routes
        self.flat: Flat | None = None
        call = self._make_call(variants)
        if variants is not None and not routes:  # the plan's default Runner: its flat call, where it has one
            self.flat = specialised(inputs, outputs, function, call, self.failed)
            call = self.flat.call if self.flat is not None else call
        if watch is not None:
            call = Watched(call, function, watch, self.directions())
        self.call = call

    def directions(self) -> tuple[str | None, str | None]:
        """The profiler range names of the two sides' conversions (None: a side converts nothing)."""
        inputs = self.inputs
        into = None if inputs is None or isinstance(inputs, RecordingInputs) else "to_numpy"
        if isinstance(inputs, TensorInputs):
            into = "to_tensor"
        out = None if self.outputs is None else "to_numpy" if isinstance(self.outputs, NumpyOutputs) else "to_tensor"
        return into, out

    def _make_call(self, variants: Callable[[Config | None], Runner] | None) -> Call:
        """The one per-call protocol: the compile escape; the hand-over to a watched Runner
        (``config``, ``stats``, the profiler, a transfer policy); the arguments converted (by
        this Runner's steps, see ``_steps``); the call and its failures; the after step
        (writeback, check_writes, out-parameters); the result converted."""
        inputs = self.inputs
        # writeback hands expanded tensors read-only too: a write into one is refused, not lost.
        readonly = isinstance(inputs, NumpyInputs) and (inputs.readonly or inputs.writeback)
        gives_back = isinstance(inputs, NumpyInputs) and inputs.writes is not None
        gives_back = gives_back and isinstance(self.outputs, TensorOutputs)
        # NumPy leaves queue CUDA tensors' copies to the host and record the tensors in odd.
        settles = isinstance(inputs, NumpyInputs)
        grad = inputs.grad if isinstance(inputs, NumpyInputs) else None
        after = self._after_step()
        begin, convert_in, finish = self._steps(after)
        failed, routes, profiler, function = self.failed, self.routes, PROFILER, self.function

        def call(wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            # The compile guard comes first: dynamo must not trace the ContextVar read (torch
            # 2.4 fails on it, later versions warn "ContextVar.get" on every compiled call).
            if compiling():
                return opaque(call, wrapped, instance, args, kwargs)
            if variants is not None:
                config = _active()
                if config is not None or routes or profiler._is_profiler_enabled:
                    return variants(config).call(wrapped, instance, args, kwargs)
            plain: list[torch.Tensor] = []
            odd: list[torch.Tensor] = []
            given = _new(Given, (args, kwargs, instance))  # a Given, at a tuple's cost
            ctx: Context | None = None
            if convert_in is not None:
                ctx = collected(plain, odd) if begin is None else begin(plain, odd, args, kwargs)
                args, kwargs = convert_in(args, kwargs, instance, ctx, odd)
                if settles and odd:  # one wait for all the arguments' transfers
                    settle(odd)
                    if grad.unsaid is not None:  # type: ignore[union-attr]  # settles: NumpyInputs have one
                        self.say_gradient(given)
            try:  # free in CPython 3.11+ when nothing is raised
                result = wrapped(*args, **kwargs)
            except BaseException as e:
                failed(e, after, ctx, given, handed=(args, kwargs), read_only=readonly and (plain or odd))
                raise
            if after is not None:
                assert isinstance(ctx, Collected)  # an after step is a NumPy side's
                if ctx.pairs or ctx.written:
                    refuse_deferred(result, function)
                after(ctx, given)
                if gives_back and ctx.written:
                    result = returned(result, ctx.written)
                    if type(result) is Returned:  # the caller's own tensor, written already
                        return result.tensor
            return result if finish is None else finish(result, plain, odd, given, ctx)

        return call

    def _steps(self, after: AfterStep | None) -> tuple[Begin | None, ConvertIn | None, Finish | None]:
        """This Runner's steps of the protocol: ``begin(plain, odd, args, kwargs)``, the input
        side's per-call context (None: ``collected(plain, odd)``, all a NumPy side without an
        after step needs); ``convert_in(args, kwargs, instance, ctx, odd)``, the arguments
        converted (None: nothing to convert or record); ``finish(result, plain, odd, given,
        ctx)``, the result converted (None: returned as it is)."""
        inputs = self.inputs
        finish = self.outputs.convert if self.outputs is not None else None
        if inputs is None:
            return None, None, finish
        begin = None if isinstance(inputs, NumpyInputs) and after is None else inputs.context
        writes = inputs.writes if isinstance(inputs, NumpyInputs) else None
        selected = inputs.selection is not None
        get, resolve = inputs.mapper.dispatch.get, inputs.mapper.resolve

        def convert_in(
            args: tuple[Any, ...], kwargs: dict[str, Any], instance: object, ctx: Any, odd: list[torch.Tensor]
        ) -> tuple[tuple[Any, ...], dict[str, Any]]:
            if writes is not None:
                args, kwargs = inputs.convert_written(args, kwargs, instance, ctx)  # type: ignore[attr-defined]
            if selected:
                return inputs.convert_selected(args, kwargs, instance, ctx, odd)
            out: list[Any] = []  # the hot loop: one dict lookup per argument, then its leaf function
            key = None
            try:
                for a in args:
                    handler = get(type(a)) or resolve(type(a))
                    # Plain arguments (floats, strings) skip their identity handler, `keep`.
                    out.append(a if handler is keep else handler(a, ctx))
                if kwargs:
                    converted = {}
                    for key, v in kwargs.items():
                        converted[key] = (get(type(v)) or resolve(type(v)))(v, ctx)
                    kwargs = converted
            except (LeafError, RecursionError) as e:  # a RecursionError: a container that holds itself
                fact = e if isinstance(e, LeafError) else cycle_error()
                raise inputs.public(fact, instance, key, len(out)) from None
            return tuple(out), kwargs

        return begin, convert_in, finish

    def _after_step(self) -> AfterStep | None:
        """What runs after the function, even when it raised: the write-back (of writeback's
        arguments and the out-parameters), or the check for writes behind the read-only guard;
        None for neither."""
        inputs = self.inputs
        if not isinstance(inputs, NumpyInputs):
            return None
        if inputs.check_writes:
            return self._restore_writes
        if inputs.writeback or inputs.writes is not None:
            return self._write_back
        return None

    def _write_back(self, ctx: Collected, given: Given) -> None:
        """What the function wrote reaches the caller, even when it raised; a tensor that cannot
        take its array back is named."""
        pairs = ctx.pairs or []
        if ctx.written:
            pairs = [*pairs, *((t, private) for t, _, private in ctx.written)]
        try:
            write_back(pairs)
        except WriteBackFailed as failed:
            raise ConversionError(
                message(
                    self.function,
                    "argument " + self._paths_of([failed.tensor], given),
                    "could not take back what the function wrote (writeback=True): "
                    f"{type(failed.error).__name__}: {failed.error}",
                    describe_tensor(failed.tensor),
                    "keep the array's shape and dtype in the function (write into it with a[...] = ...), "
                    "or return the new array instead, with writeback=False",
                )
            ) from failed.error

    def say_gradient(self, given: Given) -> None:
        """The once-per-function GradientWarning, naming where its tensor was in ``given``."""
        assert isinstance(self.inputs, NumpyInputs)
        grad = self.inputs.grad
        paths = [path for path, t in _tensor_paths(self.inputs.params, *given) if t is grad.unsaid]
        grad.say(paths)

    def _paths_of(self, tensors: list[Any], given: Given) -> str:
        """Where ``tensors`` were among the call's arguments, for messages."""
        assert self.inputs is not None
        paths = [path for path, t in _tensor_paths(self.inputs.params, *given) if any(t is c for c in tensors)]
        return ", ".join(paths or ["(a tensor argument)"])

    def _restore_writes(self, ctx: Collected, given: Given) -> None:
        """check_writes: put back what the function changed in the caller's tensors, and say so
        (out-parameters are the function's to change: written back first)."""
        pairs = ctx.pairs or []
        if ctx.written:
            self._write_back(ctx._replace(pairs=[]), given)
            pairs = [(t, snapshot) for t, snapshot in pairs if all(t is not out for out, _, _ in ctx.written)]
        changed = restore_writes(pairs)
        if not changed:
            return
        raise ReadOnlyError(
            message(
                self.function,
                "argument " + self._paths_of(changed, given),
                "was changed by the function, through a route the read-only guard cannot see (torch.from_numpy "
                "or torch.as_tensor on the array, its .base, np.frombuffer); the values were put back",
                describe_tensor(changed[0]),
                "pass copy=True to give the function private writable copies, or "
                "writeback=True to let its changes reach the caller's tensors",
            )
        )

    def failed(
        self,
        error: BaseException,
        after: Callable[[Collected, Given], None] | None,
        ctx: Context | None,
        given: Given,
        *,
        handed: tuple[tuple[Any, ...], dict[str, Any]],
        read_only: Any,
    ) -> None:
        """The function raised ``error``: the after step still runs (a failure of its own is a
        note on ``error``), and NumPy's refusal to write into a read-only array handed to it
        (``handed``: the arguments it got) becomes a ReadOnlyError; otherwise ``error`` stands,
        with notes where how an argument was handed is the likely cause (see ``_hints``)."""
        if after is not None and isinstance(ctx, Collected):  # an after step is a NumPy side's
            self._after_failure(after, ctx, given, error)
        inputs = self.inputs
        if not isinstance(inputs, NumpyInputs):
            return
        try:  # the walks below meet what the call met: a container holding itself (nested=False)
            refused = _refused(error, inputs, handed, given) if read_only else None
            if refused is not None:
                raise self._read_only_error(error, *refused) from error
            notes = _hints(error, inputs, _tensor_paths(inputs.params, *given)) if isinstance(error, Exception) else []
            if isinstance(error, TypeError) and not inputs.callbacks and _arrays_met_torch(str(error)):
                notes += _callback_hints(inputs, given)
        except RecursionError:
            return
        for note in notes:
            error.add_note(f"autoconvert: {self.function}: {note}")

    def _after_failure(
        self,
        after: Callable[[Collected, Given], None],
        ctx: Collected,
        given: Given,
        error: BaseException,
    ) -> None:
        """Run ``after`` for a call that raised ``error``: the user's exception wins, and what
        ``after`` had to say (a write-back that failed, a write put back) becomes a note on it."""
        try:
            after(ctx, given)
        except Exception as failure:
            error.add_note(f"autoconvert: after {self.function} raised: {type(failure).__name__}: {failure}")

    def _read_only_error(self, error: BaseException, paths: list[str], writes: bool) -> ReadOnlyError:
        """Compiled code refused a read-only array handed over (at ``paths``): ``writes``, by
        writing into it (NumPy, OpenCV, a numba kernel's store), else on entry (a Cython
        memoryview, a numba kernel's signature), whether or not it would have written."""
        named = f"argument {' or '.join(paths)}" if paths else ""  # several: the frame held them all
        if not writes:
            refuser = "a Cython memoryview" if isinstance(error, ValueError) else "a numba kernel's signature"
            what = (
                f"was refused by compiled code that needs writable arrays ({refuser}); arrays made from tensor "
                "arguments are read-only so that NumPy code never changes the caller's tensors"
                if named
                else f"needs writable arrays: compiled code ({refuser}) refused an array made from a tensor "
                "argument, which is read-only so that NumPy code never changes the caller's tensors"
            )
            fix = "pass copy=True to give the function private writable copies"
        else:
            what = (
                "was written into by the function; arrays made from tensor arguments are read-only so that "
                "NumPy code never changes the caller's tensors behind its back"
                if named
                else "wrote into an array made from a tensor argument; those arrays are read-only "
                "so that NumPy code never changes the caller's tensors behind its back"
            )
            fix = (
                "pass copy=True to give the function private writable copies, or "
                "writeback=True to let its changes reach the caller's tensors"
            )
        if isinstance(self.inputs, NumpyInputs) and self.inputs.writeback:  # only expanded tensors are read-only
            what = (
                "is an expanded tensor (zero strides: its elements share memory), handed over read-only since no "
                "write can reach back into it, and the function wrote into it"
            )
            fix = "pass {path}.contiguous() (then writes reach that copy only), or return the changed array instead"
        where = named or "the function"
        return ReadOnlyError(message(self.function, where, what, _quoted(error), fix, path=paths[0] if paths else ""))
