"""What a decorator decides once: each side's options, the call's spec, and the Runner that carries it out.

A ``Plan`` is built when a decorator is applied. It reads the signature once
(_signature), checks ``only``/``exclude`` against it, resolves each side's policy, builds
the input side (_inputs) and the output side (_outputs) into the call's ``Spec`` (_spec),
and builds the ``Runner`` (_call) that carries the spec out. A ``config`` block yields
another spec and Runner, built on first use and cached by its option values, so the
per-call path never validates or merges options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from autoconvert._conversions._copies import counted
from autoconvert._conversions._dtypes import RESTORING, RESTORING_HALF
from autoconvert._conversions._grad import GradFixes, GradPolicy
from autoconvert._conversions._tree import Leaf
from autoconvert._failures._guards import Guarded
from autoconvert._observe._observe import Watching
from autoconvert._options._config import Config
from autoconvert._options._options import DEFAULTS, Policy, policy_of
from autoconvert._spec._inputs import Inputs, NumpyInputs, RecordingInputs, TensorInputs
from autoconvert._spec._outputs import NumpyOutputs, Outputs, TensorOutputs
from autoconvert._spec._signature import (
    GENERATOR_FUNCTION,
    Parameters,
    deferred_kind,
    function_name,
    path_finder,
    refuse_deferred_function,
)
from autoconvert._spec._spec import Spec, in_a_block, spec_of

from ._call import Runner
from ._trace import Trace

_NOT_SET = object()


class Plan:
    """Everything decided when a decorator is applied (or two, fused into one wrapper)."""

    #: The call's instance stands in for the object the function is called on (see
    #: Spec.stands_in): torchify's method plans set it.
    stands_in = False
    #: The function is a callable the instance holds, called as it is (see Parameters).
    held = False
    #: What a method form calls, the object first, in place of the function: its guard (see
    #: _guards), which torchify's method plans set; None: the function itself.
    guard: Guarded | None = None
    #: How the function was made, where more than its decorators made it (explain's notes).
    notes: tuple[str, ...] = ()

    def __init__(self, func: Any, sides: dict[str, dict[str, Any]]) -> None:
        self.sides = sides  # decorator name -> its explicit options, already validated: the recipe
        #: Each side's policy outside any ``config`` block.
        self.policies = {side: policy_of(side, {}, options) for side, options in sides.items()}
        refuse_deferred_function(func, sides, self.policies.values())
        self.function = function_name(func)
        self.params = Parameters(func, held=self.held)
        self.yields = deferred_kind(func) == GENERATOR_FUNCTION
        self.grad_policies: dict[str, GradPolicy] = {}  # "once per decorated function" outlives configs
        self._variants: dict[tuple[tuple[str, Any], ...], Runner] = {}
        #: How calls go under torch.compile (see _trace); None: the plan hands NumPy no arrays.
        self.trace = self._trace(func)
        self.default = self._build({}, self.variant)

    def _trace(self, func: Any) -> Trace | None:
        """The plan's trace route, where its input side hands NumPy arrays: decided once."""
        side = next((s for s in ("accepts_numpy", "adapt") if s in self.policies), None)
        if side is None:
            return None
        policy = self.policies[side]
        outputs = self.policies.get("returns_tensor")
        if side == "adapt":
            outputs = dataclasses.replace(policy, dtype="input")  # results in the caller's kind
        return Trace(
            self.function, func, params=self.params, inputs=policy, outputs=outputs, refusal=self.untraced(policy)
        )

    def untraced(self, policy: Policy) -> str | None:
        """Why this plan's calls cannot be traced into torch.compile's graph, whatever the
        function's code (None: its code decides)."""
        if self.stands_in and not self.held:
            return "a torchified object's methods take the escape"
        if self.yields:
            return "a generator function's body runs as the caller iterates, outside the graph"
        if policy.callbacks:
            return "callbacks=True hands its callables tensors at each call"
        if set(policy.out_params) & self.params.bound_names():
            return "out-parameters are written back to the caller's tensors at each call"
        return None

    def remade(self) -> Callable[[Any, dict[str, dict[str, Any]]], Plan]:
        """What makes this plan again from the function and its sides (for pickling)."""
        return type(self)

    def result_asks(self) -> Any:
        """What the function's return annotation asks its result to become, where the plan
        converts as annotations say (adapt's); None: as the sides' policies say."""
        return None

    def grad_policy(self, mode: str) -> GradPolicy:
        """The grad policy for ``mode``: one per plan and mode, so that "warn" warns once per
        decorated function whatever ``config`` blocks its calls run in."""
        policy = self.grad_policies.get(mode)
        if policy is None:
            policy = self.grad_policies[mode] = GradPolicy(mode, self.function, self.grad_fixes)
        return policy

    def grad_fixes(self) -> GradFixes:
        """What a grad warning offers: what keeps the gradient, and where ``grad=`` goes."""
        return GradFixes(self.keeps_gradient(), self.option_site)

    def keeps_gradient(self) -> str:
        """How a user keeps the gradient through this plan's function, in words."""
        name = self.function.removesuffix("()")
        return (
            f"make {name} a differentiable torch operation with @ac.numpy_op(backward=...) in place of the "
            "decorators, its vector-Jacobian product written in NumPy"
        )

    def option_site(self, assignment: str) -> str:
        """Where a user writes ``assignment`` (``"copy=True"``) for this plan's function, in
        words: what made it (``maker``), or a ``config`` block around the call, unless the
        option was given explicitly, which a block cannot change."""
        option = assignment.partition("=")[0]
        given = next((options[option] for options in self.sides.values() if option in options), _NOT_SET)
        if given is _NOT_SET:
            return f"{self.maker(assignment)}, {in_a_block(assignment)}"
        return f"{self.maker(assignment)}, where {option}={given!r} was given, so a config block cannot change it"

    def maker(self, assignment: str) -> str:
        """What made this plan's function, written with ``assignment``: the decorator that
        takes the option (the one it was given to; an input side's before an output side's)."""
        option = assignment.partition("=")[0]
        takers = [side for side in self.sides if option in DEFAULTS.get(side, ())] or list(self.sides)
        side = next((s for s in takers if option in self.sides[s]), None)
        side = side or next((s for s in takers if not s.startswith("returns")), takers[0])
        return f"@ac.{side}({assignment}) on {self.function.removesuffix('()')}"

    def nested_off(self, side: str) -> str | None:
        """Where a user gives ``nested=False`` to the output ``side`` of this plan's function,
        in words (None: nothing it was made by takes the option)."""
        return f"@ac.{side}(nested=False) on {self.function.removesuffix('()')}"

    def members(self, wrapped: Any) -> dict[str, Any]:
        """Attributes the wrapper's own class gets besides its call (torchify's ufunc methods);
        they take precedence over the wrapped object's, which the wrapper forwards."""
        return {}

    def objects(self, cls: type) -> Leaf | None:
        """The output side's leaf for results of type ``cls`` that no handler takes: none, so
        they come back as they are (torchify's plans give their package's objects as proxies)."""
        return None

    def variant(self, config: Config | None) -> Runner:
        """The watched Runner for an active ``config`` or ``stats`` block, or for the profiler
        or a transfer policy: built once per distinct option set."""
        key = config.key if config is not None else ()
        runner = self._variants.get(key)
        if runner is None:
            runner = self._variants[key] = self._build(config.options if config is not None else {}, watched=True)
        return runner

    def watching(self, configured: dict[str, Any]) -> Watching:
        """What a watched Runner reports with: where values were, and the transfer policies of
        the input side and the output side (one side: both its own)."""
        found = {side: self.resolved(side, configured).transfers for side in self.sides}
        into = next((p for side, p in found.items() if not side.startswith("returns")), None)
        out = next((p for side, p in found.items() if not side.startswith("accepts")), None)
        return Watching(path_finder(self.params), into or out or "allow", out or into or "allow")

    def resolved(self, side: str, configured: dict[str, Any]) -> Policy:
        """``side``'s policy under a ``config`` block's options (none: the default policy)."""
        return policy_of(side, configured, self.sides[side]) if configured else self.policies[side]

    def _build(
        self,
        configured: dict[str, Any],
        variants: Callable[[Config | None], Runner] | None = None,
        *,
        watched: bool = False,
    ) -> Runner:
        """The Runner for the default options (``configured`` empty) or a ``config`` block's:
        its spec, then the Runner carrying it out; a watched one counts each conversion."""
        spec = self._spec({side: self.resolved(side, configured) for side in self.sides})
        if self.trace is not None:
            spec = dataclasses.replace(spec, escape=self.trace.escape, method_escape=self.trace.method_escape)
        if not watched:
            return self._runner(spec, variants)
        for converting in (spec.inputs, spec.outputs):
            if converting is not None:
                converting.mapper.wrap_leaves(counted)
        return self._runner(spec, None, watch=self.watching(configured))

    def _spec(self, policies: dict[str, Policy]) -> Spec:
        """The spec of a call with these policies: the sides built, and what each step is."""
        inputs: Inputs | None = None
        outputs: Outputs | None = None
        numpy_in = policies.get("accepts_numpy")
        if numpy_in is not None:
            inputs = NumpyInputs(
                self.params,
                self.function,
                self.grad_policy(numpy_in.grad),
                numpy_in,
                f"accepts_numpy() on {self.function}",
            )
        elif "accepts_tensor" in policies:
            where = f"accepts_tensor() on {self.function}"
            inputs = TensorInputs(self.params, self.function, policies["accepts_tensor"], where)
        # Results narrow back to float16 when the input side widened it (fused pairs only).
        half = numpy_in is not None and numpy_in.widen_float16
        for side, policy in policies.items():
            if side.startswith("accepts"):
                continue
            if side == "returns_tensor":
                restoring = RESTORING_HALF if half else RESTORING
                outputs = TensorOutputs(
                    self.function,
                    self.params,
                    policy,
                    nested_off=self.nested_off(side),
                    restoring=restoring,
                    read_only=inputs is not None and inputs.read_only,
                    objects=self.objects,
                    grad=("warn", False, None)
                    if numpy_in is None
                    else (numpy_in.grad, "grad" in self.sides["accepts_numpy"], self.maker("grad={}")),
                )
            else:
                outputs = NumpyOutputs(
                    self.function, self.params, policy, nested_off=self.nested_off(side), scalars=True
                )
        if inputs is None and outputs is not None and outputs.records_arguments:
            inputs = RecordingInputs(self.params, self.function)
        return spec_of(
            self.function,
            self.params,
            policies,
            inputs,
            outputs,
            yields=self.yields,
            stands_in=self.stands_in,
            site=self.option_site,
        )

    def _runner(
        self, spec: Spec, variants: Callable[[Config | None], Runner] | None, *, watch: Watching | None = None
    ) -> Runner:
        """The Runner that carries ``spec`` out (see Runner for ``variants`` and ``watch``)."""
        return Runner(spec, variants, watch=watch)
