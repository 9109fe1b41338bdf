"""The trace route: under torch.compile, a function whose code is NumPy alone traced into the graph.

torch.compile's dynamo traces NumPy code run on ``tensor.numpy()`` into torch operations
(torch's NumPy tracing, ``torch._numpy``): the graph holds the body, its gradients flow,
and it runs on the tensors' device. Where a plan's function reads NumPy alone (decided
once, from the names its code loads: see _callbacks.reads_numpy_alone), its escape (see
_escape) carries ``_torchdynamo_inline``: dynamo, meeting a call to it, inlines the traced
conversion in its place; eagerly, and wherever dynamo cannot trace the body, the escape
runs as before, one graph break and the body run by Python. The traced conversion keeps
the eager promises: each tensor argument handed as a private copy the function may write
(the compiler drops it where nothing writes) unless ``writeback=True`` asks for its own
memory (``copy=False``, which hands it read-only, takes the escape), ``grad="detach"``
detached, dtypes NumPy lacks widened and the results narrowed back, ``dtype=`` and
``device=`` applied to the results.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import numpy as np
import torch

from autoconvert._conversions._containers import node_for, registered
from autoconvert._conversions._devices import vote
from autoconvert._conversions._dtypes import WIDENED, is_inexact, promote
from autoconvert._errors import CompileWarning, KeyEntry, keystr
from autoconvert._escape import compiling, escape_saying, graph_break, opaque
from autoconvert._failures._guards import Guarded
from autoconvert._options import _config
from autoconvert._options._options import Policy, gives_way
from autoconvert._spec._callbacks import makes_arrays_on_the_cpu, reads_numpy_alone
from autoconvert._spec._signature import Parameters, Selection

#: The escape's signature: ``call(wrapped, instance, args, kwargs)`` out of dynamo's sight.
Escape = Callable[..., Any]


def _unrebuilt_escape(call: Callable[..., Any], *args: Any) -> Any:  # pragma: no cover - runs under dynamo
    """``call(*args)`` out of dynamo's sight (as ``opaque``), for a call whose tensors the trace
    cannot hand over: under ``fullgraph=True`` dynamo's refusal of the break carries the
    library's words as its reason, where this torch's ``torch.compiler.disable`` takes one."""
    if _unrebuilt_call is None:  # made by the first such call, run by Python (see Trace.said_unrebuilt)
        return opaque(call, *args)
    return _unrebuilt_call(call, *args)


_unrebuilt_call: Callable[..., Any] | None = None
#: The containers the trace route rebuilds (see _rebuilt_in_graph), in its words.
_REBUILT = "tuples, named tuples, lists, dicts, OrderedDicts, defaultdicts and dataclasses"
_UNREBUILT = (
    "autoconvert: a decorated function's argument holds a tensor inside a container the trace route does not "
    f"rebuild (a registered container, a dict subclass, a structseq): the call takes the escape, one graph break. "
    f"Fix: hand the tensors in {_REBUILT}, or as arguments"
)


def traced_function(function: Any) -> Any:
    """The function a call runs, past a guard (see _guards) that only copies refused arrays:
    inside a graph no array is read-only, so nothing is refused."""
    return function.__wrapped__ if type(function) is Guarded else function


def _judged(judge: Callable[[Any], str | None], function: Any) -> str | None:
    """``judge(function)``, out of dynamo's sight where a plan is made in compiled code (a
    torchified object's method met there): it reads bytecode, through caches."""
    if compiling():  # pragma: no cover - runs under dynamo
        return cast("str | None", opaque(judge, function))
    return judge(function)


#: Why this torch's dynamo cannot hold the trace route (None: it can). torch 2.4's guards a
#: traced call's state as constants and hands NumPy results out of the graph as other types
#: than the eager call's; torch.compiler.set_stance marks a dynamo that does neither (torch 2.6
#: on; a feature read, not a version, and one import-free attribute at decoration).
_UNFIT_DYNAMO = (
    None
    if hasattr(torch.compiler, "set_stance")
    else "this torch's dynamo gives NumPy results back as other types than the eager call (the trace route "
    "needs torch 2.6 or later, whose torch.compiler has set_stance)"
)
#: Whether an untraced call's graph break says why in the library's words (see
#: ``Trace.untraced``): where this dynamo can hold the trace route; an older one, inlining that
#: break, traces the conversions the call then runs by Python.
SAYS_UNTRACED = _UNFIT_DYNAMO is None


class Trace:
    """How one plan's calls go under torch.compile: traced into the graph where its function
    reads NumPy alone (``compile="auto"``) or ``compile="trace"`` asks, else the escape (a
    route beside the converting wrapper, taken only under torch.compile, so explain shows it as
    a note, ``words``)."""

    def __init__(
        self,
        function: str,
        func: Any,
        *,
        params: Parameters,
        inputs: Policy,
        outputs: Policy | None,
        refusal: str | None,
    ) -> None:
        """``func``: the decorated callable, judged; ``inputs``, ``outputs``: the sides'
        policies (``outputs`` None: results come back as they are); ``refusal``: why the
        plan's kind cannot be traced whatever its code (None: its code decides)."""
        self.function = function
        self.mode = inputs.compile
        if refusal is None and inputs.copy is False and not gives_way("trace's private copies", inputs):
            refusal = _READ_ONLY_MEMORY
        #: The function judged: a call running another (batched's map of it) takes the escape.
        self.judged = traced_function(func)
        why = refusal or (None if self.mode == "escape" else _judged(reads_numpy_alone, self.judged))
        if self.mode == "escape":
            why = "compile='escape' was given"
        elif self.mode == "trace" and refusal is None:
            why = None  # asked for: torch's tracing says where it cannot
        #: Why calls under torch.compile take the escape (None: they are traced).
        self.why_not = why or _UNFIT_DYNAMO
        #: The NumPy function its code makes arrays on the CPU with, whatever the arguments'
        #: device (see makes_arrays_on_the_cpu): calls with tensors elsewhere take the escape.
        self.cpu_made = _judged(makes_arrays_on_the_cpu, self.judged) if self.why_not is None else None
        self.detach = inputs.grad == "detach"
        eager = _EAGER_GRAD.get(inputs.grad, "detaches it")  # what the eager call does with a tensor that requires grad
        #: Why a call with a tensor that requires grad does not fit, in the words of the call's grad= (see unfit).
        self.unfit_leaf_write, self.unfit_grad_dropped = _unfit_leaf_write(eager), _unfit_grad_dropped(eager)
        self.private = inputs.copy is not False and not gives_way("trace's private copies", inputs)
        self.widened = {**WIDENED, torch.float16: torch.float32} if inputs.widen_float16 else WIDENED
        self.nested = inputs.nested
        self.params = params
        selected = inputs.only is not None or inputs.exclude is not None
        where = f"accepts_numpy() on {function}"  # only accepts_numpy takes them: its words, as its side's checks
        self.selection = Selection(params, inputs.only, inputs.exclude, where) if selected else None
        self.converts_results = outputs is not None
        self.device = outputs.device if outputs is not None else None
        self.dtype = outputs.dtype if outputs is not None else None
        #: The graph break's words where a traced call raises (see _breaking).
        self.raised = (
            f"autoconvert: {function} raised while torch.compile traced it, or gave a result the graph cannot give "
            f"as the eager call does (np.linalg's named results, containers nested more than {_DEEPEST} deep): the "
            "call runs by Python, outside the graph, to give the eager call's exception or result. Fix: leave "
            "fullgraph off, or call it outside the compiled function"
        )
        #: Whether a call inside a config or stats block took the escape (see _fell_back).
        self.escaped_in_a_block = False
        #: Why a call judged traceable ran through the escape instead (None: none has).
        self.fell_back: str | None = None
        #: Said where a call's tensor in a container the trace does not rebuild took the escape.
        self.untraced_container: str | None = None
        self.escape = self._escape(bound=False)
        self.method_escape = self._escape(bound=True)

    @property
    def traces(self) -> bool:
        """Whether calls under torch.compile are traced into the graph."""
        return self.why_not is None

    def _escape(self, *, bound: bool) -> Escape:
        """The escape of this plan's calls, ``escape(call, wrapped, instance, args, kwargs)``;
        where they trace, dynamo inlines the traced call in its place. ``bound``: ``wrapped``
        is a method's function, called with ``instance`` first (the flat call's method form)."""
        if not self.traces and not SAYS_UNTRACED:  # the graph break alone, as dynamo words it
            return opaque
        if not self.traces:  # the graph break alone, in the library's words where fullgraph=True refuses it

            def escaped(call: Any, *rest: Any) -> Any:  # pragma: no cover - runs under dynamo
                return opaque(call, *rest)

            escaped._torchdynamo_inline = self.untraced  # type: ignore[attr-defined]  # see the module's docstring
            return escaped
        # Their state in keyword defaults, never closure cells: torch 2.4's dynamo guards the
        # cells of a function it inlines by value, and refuses an object there ("Unexpected type").

        # dynamo 2.4 reads the inlined function's defaults through the escape's: the same ones.
        def escape(  # pragma: no cover - runs under dynamo
            call: Any, *rest: Any, _trace: Trace = self, _bound: bool = bound
        ) -> Any:
            return opaque(_trace._fell_back, call, *rest)

        def traced(  # pragma: no cover - runs under dynamo
            call: Any,
            wrapped: Any,
            instance: Any,
            args: Any,
            kwargs: Any,
            *,
            _trace: Trace = self,
            _bound: bool = bound,
        ) -> Any:
            return _breaking(_trace._route, _trace.raised, call, wrapped, instance, args, kwargs, bound=_bound)

        escape._torchdynamo_inline = traced  # type: ignore[attr-defined]  # see the module's docstring
        return escape

    def untraced(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - runs under dynamo
        """What dynamo inlines for a call of a plan whose calls are not traced (see ``traces``):
        one graph break, in the library's words, which dynamo quotes where ``fullgraph=True``
        refuses it; the call then runs by Python, through the escape."""
        graph_break(
            f"autoconvert: {self.function}: its calls under torch.compile take the escape, one graph break, the "
            f"body run eagerly: {self.why_not}. Fix: leave fullgraph off, or call it outside the compiled function"
        )

    def _route(  # pragma: no cover - runs under dynamo
        self, call: Escape, wrapped: Any, instance: Any, args: Any, kwargs: Any, *, bound: bool
    ) -> Any:
        """The escape's call as dynamo inlines it: traced, or the escape where the call does not
        fit (see ``fits``) or runs another function than the one judged."""
        if not self.runs_judged(wrapped):
            return opaque(call, wrapped, instance, args, kwargs)
        why = self.unfit(args, kwargs)
        if why is not None:
            self.unfit_break(why, self.unfit_at(args, kwargs, self.params.offset(instance)))
            return opaque(call, wrapped, instance, args, kwargs)
        if not self.rebuilds(args, kwargs):
            return _unrebuilt_escape(self.said_unrebuilt, call, wrapped, instance, args, kwargs)
        if bound:
            return self.call_traced(wrapped, (instance, *args), kwargs, 1)
        return self.call_traced(wrapped, args, kwargs, self.params.offset(instance))

    def inline(self, wrapped: Any, instance: Any, eager: Escape) -> Callable[..., Any]:
        """What dynamo inlines for a call of the wrapper of ``wrapped`` (see _wrapper): a
        bound method, which dynamo reads with its object, and guards through its attributes
        (a closure's cells it would look for through the wrapper's ``__closure__``, which wrapt
        forwards to the wrapped function's); ``eager``: the wrapper's own call,
        ``eager(wrapped, instance, args, kwargs)``, for a call the graph cannot hold."""
        return _Inline(self, wrapped, instance, eager).call

    def fits(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether a call with these arguments gives in the graph what it gives eagerly (see ``unfit``)."""
        return self.unfit(args, kwargs) is None

    def unfit(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Unfit | None:
        """Why a call with these arguments would not give in the graph what it gives eagerly
        (None: it would). torch's NumPy tracing follows torch's dtype rules where NumPy's differ on
        integers and booleans (``a / 2`` of int64 is float32 there, a sum of uint8 int64); a tensor
        NumPy lacks the dtype of crosses as a widened copy, which ``writeback=True`` and
        ``copy=False`` refuse, as they refuse a tensor whose elements share memory. Such calls take
        the escape. Tensors in the containers the trace rebuilds count as the arguments' own (with
        ``nested=False`` they are handed as they are). Where the code makes arrays on the CPU
        (``cpu_made``), a tensor on another device does not fit: in the graph they would meet in a
        device mismatch, as tensors on two devices (0-d CPU tensors aside, as ``_devices.vote``
        counts) would, which the eager call refuses with a DeviceMismatchError, or, given
        ``device=``, takes through the host. A leaf tensor requiring grad handed as its own memory
        (``writeback=True``, ``copy=False``) does not fit either: in the graph autograd refuses a
        write into it, where the eager call detaches it and warns; nor does one requiring grad where
        the results come back as NumPy's (``accepts_numpy`` alone): the graph would drop its
        gradient unsaid. While a ``config`` or ``stats`` block is open, in any thread, calls take the
        escape: the eager call applies the block's options and counts (dynamo guards the flag it reads)."""
        if _config.blocks_open:  # a block's options are its eager call's, which sees them
            return _UNFIT_BLOCK
        devices: list[torch.device] = []
        for value in (*args, *kwargs.values()) if kwargs else args:
            why = self._unfit(value, devices)
            if why is not None:
                return why
        return None if all(device == devices[0] for device in devices) else _UNFIT_DEVICES

    def _unfit(self, value: Any, devices: list[torch.device], within: tuple[Any, ...] = ()) -> _Unfit | None:
        """Why ``value``, an argument or an item of one inside the containers ``within``, does
        not fit the graph (see ``unfit``; None: it does), its tensors' devices added to
        ``devices``. A container holding itself does not: the eager call refuses it (a
        ConversionError), and its rebuild would never end."""
        if isinstance(value, torch.Tensor):
            if value.ndim or not value.is_cpu:  # a 0-d CPU tensor, a scalar, goes to any device
                devices.append(value.device)
            if not (value.is_floating_point() or value.is_complex()):
                return _UNFIT_INTEGER
            if not self.private and value.dtype in self.widened:
                return _UNFIT_WIDENED
            if not self.private and _overlaps_itself(value):
                return _UNFIT_OVERLAPS
            if self.cpu_made is not None and value.device.type != "cpu":
                return _UNFIT_DEVICE
            if not (self.private or self.detach) and value.requires_grad and value.is_leaf:
                return self.unfit_leaf_write
            if not (self.converts_results or self.detach) and value.requires_grad:
                return self.unfit_grad_dropped
            return None
        if not self.nested:  # containers handed as they are, as eagerly
            return None
        if not isinstance(value, tuple):  # a tuple can hold itself only through a list, dict or dataclass
            if any(value is outer for outer in within):
                return _UNFIT_CYCLE
            within = (*within, value)
        found: list[_Unfit] = []

        def look(item: Any) -> Any:
            why = self._unfit(item, devices, within)
            if why is not None:
                found.append(why)
            return item

        _rebuilt_in_graph(value, look)
        return found[0] if found else None

    def unfit_at(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], offset: int
    ) -> str | None:  # pragma: no cover - runs under dynamo
        """Where the first value that does not fit sits (``b['k'][0][0]``; see ``unfit``), for the
        words of ``unfit_break``; None where no one value does not (tensors on two devices, a block)."""
        for root, value in self._roots(args, kwargs, offset):
            below = self._unfit_below(value, ())
            if below is not None:
                return root + below
        return None

    def _roots(self, args: tuple[Any, ...], kwargs: dict[str, Any], offset: int) -> list[tuple[str, Any]]:
        """Each argument with the root of its path (its parameter's name, ``rest[0]``), for messages."""
        roots = [(self.params.positional_name(i, offset), a) for i, a in enumerate(args)]
        return roots + [(self.params.keyword_name(k), v) for k, v in kwargs.items()]

    def _unfit_below(self, value: Any, within: tuple[Any, ...]) -> str | None:  # pragma: no cover - under dynamo
        """The path below ``value`` (inside the containers ``within``) to the first item that does not
        fit (see ``_unfit``): a tensor, or a container holding itself; None where none."""
        if isinstance(value, torch.Tensor):
            return "" if self._unfit(value, [], within) is not None else None
        if not self.nested:
            return None
        if any(value is outer for outer in within):
            return ""
        for key, item in _keyed_in_graph(value):
            below = self._unfit_below(item, (*within, value))
            if below is not None:
                return key + below
        return None

    def unfit_break(self, why: _Unfit, where: str | None) -> None:  # pragma: no cover - runs under dynamo
        """The graph break of a call that does not fit (see ``unfit``; ``where``: the argument
        path of what does not, see ``unfit_at``), in the library's words, which dynamo quotes where
        ``fullgraph=True`` refuses it: the escape then runs the call by Python, as eagerly."""
        what, because, fix = why
        if where is not None:  # "a tensor ..., handed as its own memory (argument a),"
            what = f"{what.rstrip(',')} (argument {where}){',' if what.endswith(',') else ''}"
        graph_break(
            f"autoconvert: {self.function}: a call with {what} takes the escape, one graph break, to give what "
            f"the eager call gives: {because}. Fix: {fix}, leave fullgraph off, or call it outside the compiled function"
        )

    def runs_judged(self, wrapped: Any) -> bool:
        """Whether a call of ``wrapped`` runs the function judged: itself, bound, or guarded."""
        function = traced_function(wrapped)
        return function is self.judged or getattr(function, "__func__", None) is self.judged

    def rebuilds(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether the traced call can hand the function every tensor of these arguments as an
        array: each one is an argument or inside the containers the trace rebuilds (see
        ``_rebuilt_in_graph``); one inside another container (see ``_unrebuilt``) it cannot."""
        if not self.nested:  # handed as they are, tensors and all, as eagerly
            return True
        return not any(map(_unrebuilt, (*args, *kwargs.values()) if kwargs else args))

    def said_unrebuilt(self, call: Any, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """The escape of a call with a tensor in a container the trace does not rebuild, run by
        Python: said once (naming the argument path), and kept for explain."""
        global _unrebuilt_call
        if _unrebuilt_call is None:  # made out of the graph (dynamo refuses to make one in it)
            _unrebuilt_call = escape_saying(_UNREBUILT)
        if self.untraced_container is None:
            path = self._path_to_tensor(args, kwargs, instance)
            self.untraced_container = (
                f"a call with a tensor inside a container the trace route does not rebuild (its argument {path}) "
                f"takes the escape: it rebuilds {_REBUILT}"
            )
            warnings.warn(
                f"autoconvert: {self.function}: {self.untraced_container}. Fix: hand the tensors in one of those, or "
                "as arguments, to keep the call in the graph",
                CompileWarning,
                stacklevel=2,
            )
        return call(wrapped, instance, args, kwargs)

    def _path_to_tensor(self, args: tuple[Any, ...], kwargs: dict[str, Any], instance: Any) -> str:
        """The path of the first tensor inside a container the trace does not rebuild
        (``batch.x``, ``pair[0].w``), for the words of ``said_unrebuilt``: eager, out of the graph."""
        for root, value in self._roots(args, kwargs, self.params.offset(instance)):
            below = _tensor_path(value, False)
            if below is not None:
                return keystr(root, below)
        return "(a container argument)"

    def _fell_back(self, call: Any, *rest: Any) -> Any:
        """The escape, run by Python: where this plan's calls trace, dynamo could not trace this
        one (or this torch inlines no escape): said once, after a call that returned (one that
        raises gives the eager call's exception alone), and kept for explain."""
        wrapped, _, args, kwargs = rest
        if not (self.traces and self.runs_judged(wrapped) and self.fits(args, kwargs)):
            # dynamo keeps the graph broken here by a block's escape for later calls (its
            # guards never saw the flag): their escapes, run so, are no failed trace either
            self.escaped_in_a_block = self.escaped_in_a_block or _config.blocks_open
            return call(*rest)  # the escape the traced call takes too: nothing to say
        if not self.rebuilds(args, kwargs):
            return self.said_unrebuilt(call, *rest)  # the said escape could not be made in the graph: made now
        result = call(*rest)
        if self.fell_back is None and not self.escaped_in_a_block:
            self.fell_back = (
                "torch.compile could not trace its NumPy code into the graph, so its calls there take the escape "
                "(torch._dynamo.explain shows where the trace stopped)"
            )
            warnings.warn(
                f"autoconvert: {self.function}: {self.fell_back}. Fix: pass compile='escape' where it is decorated "
                "to skip the attempt, or rewrite the unsupported NumPy call",
                CompileWarning,
                stacklevel=2,
            )
        return result

    def call_traced(self, function: Any, args: tuple[Any, ...], kwargs: dict[str, Any], offset: int) -> Any:
        """``function`` called on the arrays of the call's tensors, under dynamo: its NumPy
        code becomes torch operations in the graph, and its arrays come back as tensors."""
        function = traced_function(function)
        handed = _Handed([], [], [])
        selection = self.selection
        if selection is None:
            args = tuple(self._array(a, handed) for a in args)
            kwargs = {k: self._array(v, handed) for k, v in kwargs.items()}
        else:
            args = tuple(
                self._array(a, handed) if i < offset or selection.wants(i - offset, None, offset) else a
                for i, a in enumerate(args)
            )
            kwargs = {k: self._array(v, handed) if selection.wants(None, k, offset) else v for k, v in kwargs.items()}
        # Where dynamo stops inside the function, its error shows this line: the way out.
        result = function(*args, **kwargs)  # traced by compile=: pass compile="escape" to keep it out of the graph
        # The caller's device, as an eager call's results go back to it: an array the code made
        # from a Python value or a global is on the CPU in the graph, whatever the arguments' device.
        device = self.device or _device_of(handed)
        if handed.containers:
            self._changes_back(handed, device)
        if not self.converts_results:
            return result
        return self._tensors(result, self._result_dtype(handed.floats), device)

    def _array(self, value: Any, handed: _Handed) -> Any:
        """``value`` with its tensors as the arrays the function is handed (see the module),
        each container the trace rebuilds (see ``_rebuilt_in_graph``) rebuilt and recorded in
        ``handed``, so that what the function changes in them reaches the caller's (see
        ``_changes_back``); a list, dict or dataclass met twice (``f(l, l)``, ``f((l, l))``) is
        rebuilt once and handed twice, so that the function's changes through both land."""
        if isinstance(value, torch.Tensor):
            if value.is_floating_point() or value.is_complex():
                handed.floats.append(value.dtype)
            tensor = value.detach() if self.detach else value
            wide = self.widened.get(tensor.dtype)
            if wide is not None:
                tensor = tensor.to(wide)  # a copy already
            elif self.private:
                tensor = tensor.clone()
            array = tensor.numpy()
            handed.callers.append((array, value))
            return array
        if not self.nested:
            return value
        for caller, made, _ in handed.containers:  # one container met twice is handed twice, as eagerly
            if caller is value:
                return made
        made = _rebuilt_in_graph(value, self._array, handed)
        if made is None:
            return value
        kind = type(value)
        if kind is list or kind in _REBUILT_MAPPINGS:
            handed.containers.append((value, made, list(made) if kind is list else dict(made)))
        elif not isinstance(value, tuple) and not type(value).__dataclass_params__.frozen:  # a dataclass
            handed.containers.append((value, made, [getattr(made, f.name) for f in dataclasses.fields(made)]))
        handed.callers.append((made, value))  # a tuple as one of the same items (see _alike)
        return made

    def _changes_back(self, handed: _Handed, device: torch.device | None) -> None:
        """What the function changed in the lists, dicts and dataclasses it was handed, made the
        caller's, as an eager call makes it (see _conversions._mutations): a value it was handed
        is the caller's again (an array its tensor, a rebuilt container the caller's), a new
        array a tensor, narrowed back to the one dtype NumPy lacks every floating tensor had.
        Plain Python on what dynamo knows while it traces: the checks cost the graph nothing."""
        kinds = set(handed.floats)
        restore = next(iter(kinds)) if len(kinds) == 1 and kinds <= self.widened.keys() else None

        def back(value: Any) -> Any:
            for made, caller in handed.callers:
                if _alike(made, value):
                    return caller
            if isinstance(value, (np.ndarray, np.generic)) and handed.floats:
                tensor = _to_callers_device(torch.as_tensor(value), device)
                return tensor.to(restore) if restore is not None and tensor.dtype == self.widened[restore] else tensor
            made = _rebuilt_in_graph(value, back)  # a new container
            return value if made is None else made

        for caller, made, before in handed.containers:
            kind = type(made)
            if kind is list:
                if len(made) != len(before) or not all(map(_alike, made, before)):
                    caller[:] = [back(v) for v in made]
            elif kind in _REBUILT_MAPPINGS:
                if list(made) != list(before) or not all(_alike(made[k], before[k]) for k in made):
                    now = {k: back(v) for k, v in made.items()}
                    caller.clear()
                    caller.update(now)
            else:  # a dataclass (not frozen: an eager call refuses a change to one): each field set anew
                fields = dataclasses.fields(made)
                for field, then in zip(fields, before, strict=True):
                    now = getattr(made, field.name)
                    if not _alike(now, then):
                        object.__setattr__(caller, field.name, back(now))
                # and an attribute no field declares, set or deleted by the function, as eagerly
                held, kept = vars(caller), vars(made)
                declared = {field.name for field in fields}
                for name in [name for name in held if name not in declared and name not in kept]:
                    delattr(caller, name)
                for name, now in kept.items():
                    if name not in declared and (name not in held or held[name] is not now):
                        object.__setattr__(caller, name, back(now))

    def _result_dtype(self, floats: list[torch.dtype]) -> torch.dtype | None:
        """The dtype floating results are cast to: ``dtype=``'s, or the arguments' narrow dtype
        NumPy lacks, restored where every floating argument had it (None: as computed)."""
        if isinstance(self.dtype, torch.dtype):
            return self.dtype
        if self.dtype == "input":
            return promote(set(floats)) if floats else None
        kinds = set(floats)
        if len(kinds) == 1:
            (only,) = kinds
            return only if only in self.widened else None
        return None

    def _tensors(self, value: Any, dtype: torch.dtype | None, device: torch.device | None, depth: int = 0) -> Any:
        """``value`` with its arrays as tensors on ``device`` (None: where they are), cast to ``dtype``."""
        # isinstance, not type(): torch 2.6's dynamo gives a traced array's type as its own
        # ndarray class, and a traced NumPy scalar is a 0-d array there.
        if isinstance(value, (np.ndarray, np.generic)):
            tensor = torch.as_tensor(value)
            if dtype is not None and is_inexact(tensor.dtype) and tensor.dtype != dtype:
                tensor = tensor.to(dtype)
            return _to_callers_device(tensor, device)
        if depth > _DEEPEST:  # a result holding itself, whose walk would end dynamo's own recursion
            raise RecursionError(f"a result nests more than {_DEEPEST} containers deep")  # see _breaking
        if isinstance(value, tuple) and hasattr(type(value), "n_fields"):  # see _breaking
            # torch's NumPy tracing gives np.linalg's named results (EighResult) as torch's structseqs
            raise TypeError(f"{type(value).__name__}: a structseq, where the eager call gives NumPy's named tuple")
        return _inside(value, self._tensors, dtype, device, depth + 1)

    def words(self) -> str:
        """The route in explain's words: a note beside the converting wrapper's."""
        if not self.traces:
            return f"each call is one graph break, the body run eagerly: {self.why_not}"
        note = (
            "its calls are traced into the graph, its NumPy code as torch operations (a call with an integer or "
            "boolean tensor, or inside a config or stats block, takes the escape)"
        )
        if self.cpu_made is not None:
            note = (
                f"{note}, with tensors on the CPU; with tensors on another device they take the escape: its code "
                f"makes arrays with {self.cpu_made}, which torch's NumPy tracing makes on the CPU whatever the "
                "arguments' device"
            )
        for but in (self.untraced_container, self.fell_back):
            if but is not None:
                note = f"{note}; but {but}"
        return note


class _Inline:
    """A wrapper's call as dynamo inlines it: the traced call of ``wrapped``, or the wrapper's
    own call out of the graph where the arguments do not fit it (see Trace.fits)."""

    __slots__ = ("eager", "instance", "offset", "trace", "wrapped")

    def __init__(self, trace: Trace, wrapped: Any, instance: Any, eager: Escape) -> None:
        self.trace, self.wrapped, self.instance, self.eager = trace, wrapped, instance, eager
        self.offset = trace.params.offset(instance)

    def call(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - runs under dynamo
        return _breaking(self._route, self.trace.raised, args, kwargs)

    def _route(self, args: Any, kwargs: Any) -> Any:  # pragma: no cover - runs under dynamo
        why = self.trace.unfit(args, kwargs)
        if why is not None:
            self.trace.unfit_break(why, self.trace.unfit_at(args, kwargs, self.offset))
            return opaque(self.eager, self.wrapped, self.instance, args, kwargs)
        if not self.trace.rebuilds(args, kwargs):
            return _unrebuilt_escape(self.trace.said_unrebuilt, self.eager, self.wrapped, self.instance, args, kwargs)
        return self.trace.call_traced(self.wrapped, args, kwargs, self.offset)


#: Why a call does not fit the graph (see Trace.unfit): what it holds, why that takes the
#: escape, and the fix.
_Unfit = tuple[str, str, str]
_UNFIT_INTEGER = (
    "an integer or boolean tensor",
    "torch's NumPy tracing computes with it by torch's dtype rules where NumPy's differ (a / 2 of int64 is "
    "float32 there)",
    "pass it as a floating tensor where the code allows",
)
_UNFIT_WIDENED = (
    "a tensor of a dtype NumPy lacks, handed as its own memory,",
    "it would cross as a widened copy, which the function's writes would not reach",
    "pass a float32 or float64 tensor",
)
_UNFIT_OVERLAPS = (
    "a tensor whose elements share memory (expand, as_strided), handed as its own memory,",
    "the eager call refuses to hand it over so",
    "pass a tensor with memory of its own (.contiguous())",
)
_UNFIT_DEVICE = (
    "a tensor off the CPU",
    "its code makes arrays with a NumPy function that torch's NumPy tracing makes on the CPU whatever the "
    "arguments' device",
    "call it with CPU tensors",
)


def _unfit_leaf_write(eager: str) -> _Unfit:
    """Why a leaf tensor that requires grad, handed as its own memory, does not fit, where the
    eager call does ``eager`` with it (see ``_EAGER_GRAD``)."""
    return (
        "a leaf tensor that requires grad, handed as its own memory,",
        f"autograd refuses its write in the graph, where the eager call {eager}",
        "pass it detached",
    )


def _unfit_grad_dropped(eager: str) -> _Unfit:
    """Why a tensor that requires grad does not fit a call whose results come back as NumPy's,
    where the eager call does ``eager`` with it (see ``_EAGER_GRAD``)."""
    return (
        "a tensor that requires grad",
        "its results come back as NumPy's (accepts_numpy alone), so the graph would drop the gradient unsaid, where "
        f"the eager call {eager}",
        "add returns_tensor to keep the gradient, or pass grad='detach'",
    )


#: What the eager call does with a tensor that requires grad, by its grad= (see the reasons above).
_EAGER_GRAD = {"warn": "detaches it and warns", "error": "raises GradientError"}
_UNFIT_CYCLE = (
    "a container holding itself",
    "the eager call refuses it",
    "pass one that does not hold itself",
)
_UNFIT_DEVICES = (
    "tensors on more than one device",
    "the eager call refuses them (or, given device=, takes them through the host)",
    "move them to one device",
)
_UNFIT_BLOCK = (
    "a config or stats block open",
    "the eager call applies the block's options and counts",
    "call it outside the block",
)

#: Why a plan with ``copy=False`` and no ``writeback`` takes the escape: the function's arrays
#: are the caller's memory, read-only, which torch's NumPy tracing cannot keep so (a write would
#: reach the caller's tensor, and a result the argument itself would share it).
_READ_ONLY_MEMORY = (
    "copy=False hands it the caller's memory read-only, which torch's NumPy tracing cannot keep read-only"
)


#: How many containers deep a traced call's result is walked: deeper, it takes the escape,
#: whose conversion refuses a result holding itself (dynamo's own walk of a deeper one fails).
_DEEPEST = 8


def _breaking(
    route: Callable[..., Any], raised: str, *args: Any, **kwargs: Any
) -> Any:  # pragma: no cover - runs under dynamo
    """``route(*args, **kwargs)`` as dynamo traces it, its graph broken at the decorated call where it
    raises (the function's own ``raise``, dynamo's copy of a slotted dataclass): the escape then
    runs the call by Python, and the exception is the eager call's. Left to itself, dynamo runs
    the whole calling frame by Python and traces the function's frame alone, on arrays it cannot
    take (pytorch's "Expected np.nditer base"), and the library's conversions as graphs.
    ``raised``: the break's message, which dynamo quotes where ``fullgraph=True`` refuses it."""
    try:
        return route(*args, **kwargs)
    except Exception:
        graph_break(raised)
        raise


class _Handed(NamedTuple):
    """What a traced call handed the function (a NamedTuple: dynamo traces its making)."""

    #: The dtype of each floating tensor among the arguments.
    floats: list[torch.dtype]
    #: (what the function was handed, the caller's value it stands for): arrays, containers.
    callers: list[tuple[Any, Any]]
    #: (the caller's list, dict or dataclass, the one the function was handed, what that held then).
    containers: list[tuple[Any, Any, Any]]


def _overlaps_itself(t: torch.Tensor) -> bool:
    """Whether elements of ``t`` share memory (``expand``, ``unfold``, ``as_strided``), found from
    its strides as dynamo knows them: its dims by stride, each must step past all the smaller
    ones reach. The eager call refuses to hand such a tensor's own memory to the function."""
    reach = 0
    for stride, size in sorted((stride, size) for stride, size in zip(t.stride(), t.shape, strict=True) if size > 1):
        if stride <= reach:
            return True
        reach += stride * (size - 1)
    return False


def _device_of(handed: _Handed) -> torch.device | None:
    """The device the tensors the call handed over share, 0-d CPU tensors not voting, as
    ``_devices.vote`` counts (None: none, or they differ, where the results stay where they are)."""
    tensors = [caller for _, caller in handed.callers if isinstance(caller, torch.Tensor)]
    return vote(tensors) if tensors else None


def _to_callers_device(tensor: torch.Tensor, device: torch.device | None) -> torch.Tensor:
    return tensor if device is None or tensor.device == device else tensor.to(device)


#: The mappings the trace rebuilds: dicts, ordered and defaulting ones too.
_REBUILT_MAPPINGS = (dict, collections.OrderedDict, collections.defaultdict)


def _rebuilt_in_graph(value: Any, each: Callable[..., Any], *extra: Any) -> Any:
    """``value`` rebuilt with ``each(item, *extra)`` of its items where it is a container the
    trace rebuilds (a tuple, named tuple, list, dict, OrderedDict, defaultdict or dataclass
    instance), else None: plain Python that dynamo traces, where the library's container walk
    is not."""
    kind = type(value)
    if kind is tuple or kind is list or kind is dict:
        return _inside(value, each, *extra)
    if kind is collections.OrderedDict:
        return collections.OrderedDict((k, each(v, *extra)) for k, v in value.items())
    if kind is collections.defaultdict:
        return collections.defaultdict(value.default_factory, {k: each(v, *extra) for k, v in value.items()})
    if isinstance(value, tuple) and hasattr(kind, "_fields"):
        return kind(*[each(v, *extra) for v in value])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        made = copy.copy(value)
        for field in dataclasses.fields(value):
            object.__setattr__(made, field.name, each(getattr(value, field.name), *extra))
        return made
    return None


def _keyed_in_graph(value: Any) -> list[tuple[str, Any]]:
    """The items of ``value``, a container the trace rebuilds (see ``_rebuilt_in_graph``), each
    with the key that names it in a path (``[0]``, ``['k']``, ``.w``); none for another value."""
    kind = type(value)
    if kind is tuple or kind is list:
        return [(f"[{i}]", item) for i, item in enumerate(value)]
    if kind is dict or kind is collections.OrderedDict or kind is collections.defaultdict:
        return [(f"[{key!r}]", item) for key, item in value.items()]
    if isinstance(value, tuple) and hasattr(kind, "_fields"):
        return [(f".{name}", item) for name, item in zip(kind._fields, value, strict=True)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f".{field.name}", getattr(value, field.name)) for field in dataclasses.fields(value)]
    return []


def _unrebuilt(value: Any) -> bool:
    """Whether ``value`` (an argument) holds a tensor inside a container the trace does not
    rebuild (see ``_rebuilt_in_graph``): a dict subclass of another kind, a structseq, a container
    registered with ``register_container``, whose insides dynamo cannot read through the
    library's walk: a registered one is taken to hold one."""
    found: list[bool] = []

    def look(item: Any) -> Any:
        if not isinstance(item, torch.Tensor) and _rebuilt_in_graph(item, look) is None and _holds_tensor(item):
            found.append(True)
        return item

    look(value)
    return bool(found)


def _holds_tensor(value: Any) -> bool:
    """Whether ``value``, a container the trace does not rebuild, holds a tensor, as far as
    dynamo can look while it traces (see ``_unrebuilt``)."""
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(map(_holds_tensor, value))
    if isinstance(value, dict):
        return any(map(_holds_tensor, value.values()))
    return registered(type(value))


def _tensor_path(value: Any, inside: bool) -> list[KeyEntry] | None:
    """The key entries down to the first tensor of ``value`` held in a container the trace does
    not rebuild (``inside``: ``value`` is within one), by the library's container walk: eager,
    for a message."""
    if isinstance(value, torch.Tensor):
        return [] if inside else None
    node = node_for(type(value))
    if node is None:
        return None
    inside = inside or _rebuilt_in_graph(value, lambda item: item) is None
    for key, child in node.items(value):
        below = _tensor_path(child, inside)
        if below is not None:
            return [key, *below]
    return None


def _alike(a: Any, b: Any) -> bool:
    """``a is b``, save that tuples (named ones too), which dynamo cannot compare so, are the
    same where their items are: a tuple the function was handed and one it made of the same
    items are alike."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_alike, a, b))
    return a is b


def _inside(value: Any, each: Callable[..., Any], *extra: Any) -> Any:
    """A list, tuple or dict with ``each(item, *extra)`` of its items (``value`` itself where it
    is none of them): plain Python that dynamo traces, where the library's container walk is not."""
    kind = type(value)
    if kind is tuple or kind is list:
        items = [each(v, *extra) for v in value]
        return items if kind is list else tuple(items)
    if kind is dict:
        return {k: each(v, *extra) for k, v in value.items()}
    return value
