"""The specialised call: one flat function per decorated function, generated from its plan.

Like attrs' generated ``__init__``: the source is written once, when the decorator is
applied, for exactly the sides and options of one plan, and compiled with a readable
filename in ``linecache``. Per positional count it unpacks the arguments, converts each
bare tensor (or array) inline, and converts an array result straight to a tensor (or a
tensor result to an array); it has no loop over a plan and no branch on options.

Anything it does not cover (a container argument that needs a look, a tensor NumPy
cannot share, a tuple result, an error to report) goes to the generic :class:`Runner`
call, which gives the same result and the message with the argument's path. The guards
come first, as in the generic call: the compile escape, then the hand-over to a watched
Runner for ``config``/``stats`` blocks and the profiler.

``enabled`` is the test switch: False makes every plan built afterwards use the generic
call alone (``pytest --generic-calls``), so the suite proves both paths give one result.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable
from types import CodeType
from typing import Any

import numpy as np
import torch

from ._devices import CPU, default_device
from ._dtypes import WIDENED
from ._errors import LeafError
from ._escape import compiling, opaque
from ._inputs import Inputs, NumpyInputs, RecordingInputs, TensorInputs
from ._leaves import GENERATED, array_to_tensor
from ._observe import PROFILER
from ._options import _ACTIVE
from ._outputs import NumpyOutputs, Outputs, TensorOutputs
from ._tree import keep

Call = Callable[[Callable[..., Any], object, tuple[Any, ...], dict[str, Any]], Any]

#: False: plans use the generic call only (the test switch, see the module docstring).
enabled = True
#: Positional counts with a branch of their own; calls with more go to the generic call.
MOST_POSITIONAL = 8
_counter = itertools.count()

# Per value ``{v}``: the name it is converted in place under; a value the flat code does not cover takes
# the whole call to the generic path, which converts it (or reports it) with its path.
_NUMPY_VALUE = """\
{i}if type({v}) is Tensor and not {v}.requires_grad:
{i}    plain.append({v})
{i}    try:
{i}        {v} = {v}.numpy()
{i}    except (TypeError, RuntimeError):
{i}        return generic(wrapped, instance, args, kwargs)
{i}    {v}.setflags(False)
{i}elif get(type({v})) is not keep:
{i}    return generic(wrapped, instance, args, kwargs)
"""
_TENSOR_VALUE = """\
{i}if type({v}) is ndarray:
{i}    if target is None:
{i}        target = (device or default_device(), casts, copy)
{i}    try:
{i}        {v} = to_tensor({v}, target)
{i}    except LeafError:
{i}        return generic(wrapped, instance, args, kwargs)
{i}elif type({v}) is not Tensor and get(type({v})) is not keep:
{i}    return generic(wrapped, instance, args, kwargs)
"""
# Results: an array comes back through the one array -> tensor function, with the target a
# call whose tensors NumPy all shared has (decided when the plan was built).
_TO_TENSOR_RESULT = """\
    if plain and type(result) is ndarray:
{shares}        try:
            return to_tensor(result, shared_target)
        except LeafError as e:
            raise e.public(function, "", "result") from None
    return convert_out(result, plain, [], (args, kwargs, instance))
"""
# Where the result stays on the CPU uncast, array_to_tensor's own first step, inlined: its
# frame cost 0.1x on a 1-tensor call (one copy of these three lines, on purpose).
_SHARES = """\
        flags = result.flags
        if flags.behaved and flags.forc:
            try:
                return from_numpy(result)
            except (TypeError, ValueError):
                pass
"""
_TO_ARRAY_RESULT = """\
    if type(result) is Tensor and not result.requires_grad:
        try:
            return result.numpy()
        except (TypeError, RuntimeError):
            pass
    return convert_out(result, plain, [], (args, kwargs, instance))
"""
_ANY_RESULT = "    return convert_out(result, plain, [], (args, kwargs, instance))\n"


class Flat:
    """A plan's flat call, in its two forms: ``call(wrapped, instance, args, kwargs)`` for
    wrapt's bound calls, and :meth:`bind`'s ``__call__(self, *args, **kwargs)`` for the
    wrapper's unbound calls, which holds ``wrapped`` and ``instance`` as constants."""

    __slots__ = ("call", "codes", "namespace")

    def __init__(self, codes: tuple[CodeType, CodeType], namespace: dict[str, Any]) -> None:
        self.codes, self.namespace = codes, namespace
        exec(codes[0], namespace)  # our own source, compiled in _compiled
        self.call: Call = namespace["call"]

    def bind(self, wrapped: Any) -> tuple[Callable[..., Any], dict[str, Any]]:
        """``__call__`` for a wrapper of ``wrapped``, and its namespace (set ``instance`` there)."""
        namespace = {**self.namespace, "wrapped": wrapped, "instance": None}
        exec(self.codes[1], namespace)
        return namespace["__call__"], namespace


def specialised(
    inputs: Inputs | None, outputs: Outputs | None, function: str, generic: Call, failed: Callable[..., None]
) -> Flat | None:
    """The flat call for a plan with these sides, or None where it has none (the generic
    call is then the only one): a selection, writeback, check_writes, widened float16,
    private copies, and ``dtype="input"`` keep the generic call."""
    value = _value_code(inputs)
    result = _result_code(inputs, outputs)
    if not enabled or value is None or result is None:
        return None
    namespace: dict[str, Any] = {
        "Tensor": torch.Tensor,
        "ndarray": np.ndarray,
        "keep": keep,
        "LeafError": LeafError,
        "compiling": compiling,
        "opaque": opaque,
        "active": _ACTIVE.get,
        "profiler": PROFILER,
        "default_device": default_device,
        "to_tensor": array_to_tensor,
        "from_numpy": torch.from_numpy,
        "generic": generic,
        "function": function,
        "get": inputs.mapper.dispatch.get if inputs is not None else {}.get,
        "convert_out": outputs.convert if outputs is not None else None,
        "failed": failed,
    }
    if isinstance(inputs, TensorInputs):
        namespace.update(device=inputs.device, casts=inputs.fixed_casts, copy=inputs.copy)
    if isinstance(outputs, TensorOutputs):
        namespace["shared_target"] = outputs.all_plain
    kind = (value, result, isinstance(inputs, TensorInputs), isinstance(inputs, NumpyInputs))
    codes = _CODES.get(kind) or _CODES.setdefault(kind, _compiled(*kind))
    return Flat(codes, namespace)


#: Both forms' code per kind of plan (a few per program): what differs between plans of a
#: kind (the function, its sides' options) is in their namespaces.
_CODES: dict[tuple[str, str, bool, bool], tuple[CodeType, CodeType]] = {}


def _compiled(value: str, result: str, places: bool, hands_arrays: bool) -> tuple[CodeType, CodeType]:
    codes = []
    for head in ("call(wrapped, instance, args, kwargs)", "__call__(self, *args, **kwargs)"):
        source = _source(head, value, result, places, hands_arrays)
        filename = f"{GENERATED}flat call {next(_counter)}>"
        # Tracebacks through the generated code show its lines, as attrs does for its methods.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        codes.append(compile(source, filename, "exec"))
    return codes[0], codes[1]


def _value_code(inputs: Inputs | None) -> str | None:
    """The per-value template for this input side, or None when it needs the generic call."""
    if inputs is None:
        return ""
    if inputs.selection is not None:
        return None
    if isinstance(inputs, RecordingInputs):  # its tensors decide the device: the generic call votes
        return None
    if isinstance(inputs, NumpyInputs):
        plain_shared = inputs.readonly and not inputs.check_writes and inputs.widened is WIDENED
        return _NUMPY_VALUE if plain_shared else None
    if isinstance(inputs, TensorInputs) and inputs.dtype != "input":
        return _TENSOR_VALUE
    return None


def _result_code(inputs: Inputs | None, outputs: Outputs | None) -> str | None:
    if outputs is None:
        return "    return result\n"
    if isinstance(outputs, TensorOutputs):
        # The shared target holds only when every tensor argument was NumPy's to share.
        if outputs.all_plain is None or isinstance(inputs, TensorInputs):
            return None
        device, casts, copy = outputs.all_plain
        return _TO_TENSOR_RESULT.format(shares=_SHARES if device is CPU and not casts and not copy else "")
    if isinstance(outputs, NumpyOutputs):
        return _TO_ARRAY_RESULT if outputs.copy is not True else _ANY_RESULT
    return None  # pragma: no cover - every output side is one of the above


def _source(head: str, value: str, result: str, places: bool, hands_arrays: bool) -> str:
    """The flat call's source: the guards, one branch per positional count (its conversions,
    the keywords', the call), then the result's conversion."""
    lines = [
        f"def {head}:",
        "    if compiling():",
        "        return opaque(generic, wrapped, instance, args, kwargs)",
        "    if active() is not None or profiler._is_profiler_enabled:",
        "        return generic(wrapped, instance, args, kwargs)",
        "    plain = []",
    ]
    if places:
        lines.append("    target = None")
    lines.append("    n = len(args)")
    keyword = value.format(i="                ", v="value") if value else ""
    for count in range(MOST_POSITIONAL + 1):
        names = [f"a{k}" for k in range(count)]
        lines.append(f"    {'if' if count == 0 else 'elif'} n == {count}:")
        if count:
            lines.append(f"        {', '.join(names)}, = args")
        lines += [value.format(i="        ", v=name).rstrip("\n") for name in names if value]
        given = "".join(f"{name}, " for name in names)
        lines += [
            "        if kwargs:",
            "            new_kwargs = {}",
            "            for key, value in kwargs.items():",
            *([keyword.rstrip("\n")] if keyword else []),
            "                new_kwargs[key] = value",
        ]
        lines += _called(f"{given}**new_kwargs", f"({given}), new_kwargs", hands_arrays, "            ")
        lines.append("        else:")
        lines += _called(given.rstrip(", "), f"({given}), kwargs", hands_arrays, "            ")
    lines += ["    else:", "        return generic(wrapped, instance, args, kwargs)"]
    return "\n".join(lines) + "\n" + result


def _called(arguments: str, handed: str, hands_arrays: bool, indent: str) -> list[str]:
    """The call itself; where the function got arrays, NumPy refusing a write into one of
    them becomes a ReadOnlyError (see Runner.failed)."""
    if not hands_arrays:
        return [f"{indent}result = wrapped({arguments})"]
    return [
        f"{indent}try:",
        f"{indent}    result = wrapped({arguments})",
        f"{indent}except BaseException as e:",
        f"{indent}    failed(e, None, None, (args, kwargs, instance), handed=({handed}), read_only=plain)",
        f"{indent}    raise",
    ]
