"""A call's specification: what a call of one decorated function does, decided once.

A plan resolves each of its Runners (the default one, and one per ``config`` option set)
into a ``Spec``: each side's policy, the sides themselves, the step every parameter gets
and the one the result gets, the after step, and the guards' routing. The Runner (_call)
interprets it on the generic call, the generator (_specialise, _generate) writes the flat
call from it, and ``explain`` puts it in words; ``adapt`` gives its own steps in one.

``enabled`` is the test switch: False makes every plan built afterwards use the generic
call alone (``pytest --generic-calls``), so the suite proves both paths give one result.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from typing import Any

from autoconvert._conversions._devices import CPU
from autoconvert._conversions._dtypes import WIDENED
from autoconvert._escape import opaque
from autoconvert._options._options import Policy

from ._emit import INSTANCE, KEPT, MOST_POSITIONAL, RECORDED, UNCONVERTED, WRITTEN, Result, Step
from ._inputs import Inputs, NumpyInputs, RecordingInputs, TensorInputs
from ._outputs import Convert, NumpyOutputs, Outputs, TensorOutputs, through_stand_in
from ._signature import Parameters

#: False: plans use the generic call only (the test switch, see the module docstring).
enabled = True

#: The after steps, by name: what runs once the function returned or raised.
RESTORE_WRITES = "restore writes"  # check_writes: changes to the caller's tensors put back, and refused
WRITE_BACK = "write back"  # writeback: what the function wrote reaches the caller's tensors
WRITE_BACK_OUT = "write back out-parameters"  # out_params: their private copies reach the caller's tensors


def option_anywhere(assignment: str) -> str:
    """Where ``assignment`` (``"copy=True"``) goes when the decorator is not known, in words."""
    return f"the decorator, {in_a_block(assignment)}"


def in_a_block(assignment: str) -> str:
    """The other place every option goes: a ``config`` block around the call."""
    return f"or a with ac.config({assignment}): block around the call"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """What a call does, for one set of resolved options (see the module docstring): every
    fact derived from the options lives here, under one name, and its readers (the
    interpreter, the generator, ``explain``) read it rather than derive it again."""

    function: str  # the function's name, for messages
    policies: Mapping[str, Policy]  # each side's resolved options, read-only
    inputs: Inputs | None  # the input side (None: arguments pass as they are)
    outputs: Outputs | None  # the output side (None: the result returns as it is)
    value: Step  # what a converted argument gets
    parameters: tuple[tuple[str, Step], ...] | None  # each parameter's step, in signature order (None: no signature)
    result: Result  # what the result gets
    after: str | None  # the after step's name (RESTORE_WRITES, WRITE_BACK, WRITE_BACK_OUT), if any
    watched: bool  # the default Runner hands every call to a watched one (a transfer policy asks for one)
    generic_because: str | None  # why no flat call is generated, in words (None: one is)
    #: The function gets read-only arrays (the NumPy side's decision, see NumpyInputs.read_only).
    read_only: bool
    #: A write by the function may be refused as a ReadOnlyError: it gets read-only arrays, or
    #: writeback hands it expanded tensors (read-only too, a write into one would be lost).
    refuses_writes: bool
    #: The input side converts a selection of parameters (``only=``/``exclude=``), known by name.
    selects: bool = False
    #: The first positional out-parameter: a flat call passing as many arguments goes to the
    #: generic call, which hands it over writable (MOST_POSITIONAL + 1: by keyword only; None:
    #: the function has no out-parameter).
    writes_at: int | None = None
    #: An out-parameter's array the function returns comes back as the caller's tensor.
    gives_back: bool = False
    #: A generator function's body runs as the caller iterates: a write it makes into a
    #: read-only array handed over is still told apart and refused as a ReadOnlyError.
    watches_body: bool = False
    #: The call's instance stands in for the object the function is called on (a torchified
    #: object, a ``StandIn``): the function is called on its ``__wrapped__``, where a refused
    #: write is looked for too; each call's tensors set its device (``stand_in_device``); a result that is
    #: the object comes back as the instance, so chains (``model.fit(x).transform(x)``) stay
    #: on it, and any other as ``stand_in_returns`` makes it.
    stands_in: bool = False
    #: Where a user sets an option for this function, in a message's fix: ``site("copy=True")``.
    site: Callable[[str], str] = option_anywhere
    #: How a call under torch.compile steps out of the trace, ``escape(call, wrapped, instance,
    #: args, kwargs)``, and the flat call's method form's (see _interpreter/_trace): one graph
    #: break, or the call traced into the graph in its place.
    escape: Callable[..., Any] = opaque
    method_escape: Callable[..., Any] = opaque


def spec_of(
    function: str,
    params: Parameters,
    policies: dict[str, Policy],
    inputs: Inputs | None,
    outputs: Outputs | None,
    *,
    yields: bool = False,
    stands_in: bool = False,
    site: Callable[[str], str] = option_anywhere,
) -> Spec:
    """The spec of a Runner with these sides (a decorator's, or a fused pair's); ``yields``:
    the function is a generator function; ``stands_in``: see ``Spec.stands_in``; ``site``:
    see ``Spec.site``."""
    read_only = inputs is not None and inputs.read_only
    writes = inputs.writes if isinstance(inputs, NumpyInputs) else None
    value = value_step(inputs)
    watches_body = yields and read_only
    return Spec(
        function=function,
        policies=types.MappingProxyType(policies),
        inputs=inputs,
        outputs=outputs,
        value=value,
        parameters=parameter_steps(params, inputs, value),
        result=result_step(outputs),
        after=after_step(inputs),
        watched=any(p.transfers != "allow" for p in policies.values()),
        generic_because=generic_because(inputs, outputs, watches_body=watches_body),
        read_only=read_only,
        refuses_writes=read_only or (isinstance(inputs, NumpyInputs) and inputs.policy.writeback),
        selects=inputs is not None and inputs.selection is not None,
        writes_at=None if writes is None else _first_written(writes.first_position(0)),
        gives_back=writes is not None and isinstance(outputs, TensorOutputs),
        watches_body=watches_body,
        stands_in=stands_in,
        site=site,
    )


def _first_written(position: int | None) -> int:
    """``Spec.writes_at`` of a function whose out-parameters start at ``position`` (None:
    they are keyword-only, so no positional count reaches them)."""
    return MOST_POSITIONAL + 1 if position is None else position


def finish_of(spec: Spec) -> Convert | None:
    """What converts the result (None: it returns as it is): the output side, through the
    stand-in instance (see ``Spec.stands_in``) where the call has one."""
    outputs = spec.outputs
    if outputs is None:
        return None
    return through_stand_in(outputs) if spec.stands_in else outputs.convert


def value_step(inputs: Inputs | None) -> Step:
    """What each argument gets from this input side."""
    if inputs is None:
        return UNCONVERTED
    if isinstance(inputs, RecordingInputs):
        return RECORDED
    if isinstance(inputs, NumpyInputs):
        detach, private = inputs.grad.mode == "detach", not inputs.read_only
        return Step("numpy", detach=detach, private=private, widens=inputs.widened is not WIDENED)
    assert isinstance(inputs, TensorInputs)
    return Step("tensor", shares=not (inputs.fixed_casts or inputs.policy.copy))


def parameter_steps(params: Parameters, inputs: Inputs | None, value: Step) -> tuple[tuple[str, Step], ...] | None:
    """Each parameter's step: the instance is never converted, an out-parameter is handed
    over writable, one that ``only=``/``exclude=`` pass on is let through (a tensor side) or
    only has its tensors recorded (a NumPy side), and every other gets ``value``."""
    if not params.known:
        return None
    selection = inputs.selection if inputs is not None else None
    writes = inputs.writes.names if isinstance(inputs, NumpyInputs) and inputs.writes is not None else frozenset()
    passed = KEPT if isinstance(inputs, TensorInputs) else RECORDED
    steps = []
    for i, shown in enumerate(params.shown):
        name = shown.lstrip("*")
        if i == 0 and params.first_is_instance():
            step = INSTANCE
        elif name in writes:
            step = WRITTEN
        elif selection is not None and (name in selection.names) != selection.keep:
            step = passed
        else:
            step = value
        steps.append((shown, step))
    return tuple(steps)


def result_step(outputs: Outputs | None) -> Result:
    """What the result gets from this output side."""
    if outputs is None:
        return Result("none")
    if isinstance(outputs, TensorOutputs):
        # The shared target holds only when every tensor argument was NumPy's to share.
        shared = outputs.shared_target
        if shared is None or shared.device is not CPU or shared.casts or shared.copy:  # placed, cast or copied
            return Result("tensor")
        return Result("tensor", shares=True, copies_read_only=shared.copy is None)
    assert isinstance(outputs, NumpyOutputs)
    return Result("array", converts=outputs.copy is not True)


def after_step(inputs: Inputs | None) -> str | None:
    """What runs after the function, even when it raised (None: nothing)."""
    if not isinstance(inputs, NumpyInputs):
        return None
    if inputs.snapshots:
        return RESTORE_WRITES
    if inputs.policy.writeback:
        return WRITE_BACK
    if inputs.writes is not None:
        return WRITE_BACK_OUT
    return None


def generic_because(inputs: Inputs | None, outputs: Outputs | None, *, watches_body: bool = False) -> str | None:
    """Why a plan with these sides has no flat call, in words (``autoconvert.explain`` shows
    them); None where it has one."""
    if not enabled:
        return "flat calls are turned off (the test suite's --generic-calls)"
    if watches_body:
        return "a generator function's body runs as the caller iterates, watched for writes into read-only arrays"
    if isinstance(inputs, NumpyInputs) and inputs.policy.writeback:
        return "writeback=True writes the arrays back into the caller's tensors after the call"
    if isinstance(inputs, NumpyInputs) and inputs.snapshots:
        return "check_writes=True compares the caller's tensors with their copies after the call"
    if isinstance(inputs, TensorInputs) and inputs.policy.dtype == "input":
        return "dtype='input' casts by the dtypes of all the call's tensors, known once every argument is seen"
    if isinstance(outputs, TensorOutputs) and outputs.shared_target is None:
        return "dtype='input' casts results by the dtypes of the call's tensors"
    if isinstance(inputs, TensorInputs) and isinstance(outputs, TensorOutputs):
        return "accepts_tensor with returns_tensor: results are placed by the tensors the arguments became"
    return None
