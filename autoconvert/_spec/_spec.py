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

from autoconvert._escape import opaque
from autoconvert._options._options import Policy

from ._emit import INSTANCE, MOST_POSITIONAL, UNCONVERTED, WRITTEN, Result, Step
from ._inputs import Inputs
from ._outputs import Convert, Outputs, through_stand_in
from ._signature import Parameters

#: False: plans use the generic call only (the test switch, see the module docstring).
enabled = True


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
    after: str | None  # the after step's name (see Inputs.after), if any
    watched: bool  # the default Runner hands every call to a watched one (a transfer policy asks for one)
    generic_because: str | None  # why no flat call is generated, in words (None: one is)
    #: The function gets read-only arrays (the NumPy side's decision, see NumpyInputs.read_only).
    read_only: bool
    #: The function may be handed a read-only array, and a write into one is told as a
    #: ReadOnlyError: it gets read-only arrays (``read_only``), or writeback hands it expanded
    #: tensors (read-only too, a write into one would be lost). A call's ``handed_read_only``.
    hands_read_only: bool
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
    writes = inputs.writes if inputs is not None else None
    value = UNCONVERTED if inputs is None else inputs.step()
    watches_body = yields and read_only
    return Spec(
        function=function,
        policies=types.MappingProxyType(policies),
        inputs=inputs,
        outputs=outputs,
        value=value,
        parameters=parameter_steps(params, inputs, value),
        result=Result("none") if outputs is None else outputs.step(),
        after=inputs.after if inputs is not None else None,
        watched=any(p.transfers != "allow" for p in policies.values()),
        generic_because=generic_because(inputs, outputs, watches_body=watches_body),
        read_only=read_only,
        hands_read_only=inputs is not None and inputs.hands_read_only,
        selects=inputs is not None and inputs.selection is not None,
        writes_at=None if writes is None else _first_written(writes.first_position(0)),
        gives_back=writes is not None and outputs is not None and outputs.gives_back,
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


def parameter_steps(params: Parameters, inputs: Inputs | None, value: Step) -> tuple[tuple[str, Step], ...] | None:
    """Each parameter's step: the instance is never converted, an out-parameter is handed
    over writable, one that ``only=``/``exclude=`` pass on is let through (a tensor side) or
    only has its tensors recorded (a NumPy side), and every other gets ``value``."""
    if not params.known:
        return None
    if inputs is None:
        selection, writes, passed = None, frozenset[str](), UNCONVERTED
    else:
        selection, passed = inputs.selection, inputs.passed
        writes = inputs.writes.names if inputs.writes is not None else frozenset()
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


def generic_because(inputs: Inputs | None, outputs: Outputs | None, *, watches_body: bool = False) -> str | None:
    """Why a plan with these sides has no flat call, in words (``autoconvert.explain`` shows
    them); None where it has one."""
    if not enabled:
        return "flat calls are turned off (the test suite's --generic-calls)"
    if watches_body:
        return "a generator function's body runs as the caller iterates, watched for writes into read-only arrays"
    because = inputs.generic_because() if inputs is not None else None
    if because is None and outputs is not None:
        because = outputs.generic_because(inputs)
    return because
