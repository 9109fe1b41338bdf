"""What a decorator decides once: each side's options, and the Runner that carries them out.

A ``Plan`` is built when a decorator is applied. It reads the signature once
(_signature), checks ``only``/``exclude`` against it, and builds a ``Runner`` (_call)
from the input side (_inputs) and the output side (_outputs) for the decorator's options.
A ``config`` block yields another Runner, built on first use and cached by its option
values, so the per-call path never validates or merges options.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ._call import Runner
from ._copies import counted
from ._dtypes import RESTORING, RESTORING_HALF
from ._inputs import Inputs, NumpyInputs, RecordingInputs, TensorInputs, hands_read_only
from ._leaves import GradPolicy
from ._options import Config, validate
from ._outputs import NumpyOutputs, Outputs, TensorOutputs
from ._signature import Parameters, _refuse_deferred, function_name, path_finder
from ._tree import Leaf

#: Each decorator's options and their defaults; config() fills in what a decorator was not told.
DEFAULTS: dict[str, dict[str, Any]] = {
    "accepts_numpy": {
        "copy": None,
        "writeback": False,
        "grad": "warn",
        "only": None,
        "exclude": None,
        "nested": True,
        "sparse": "array",
        "widen_float16": False,
        "check_writes": False,
        "transfers": "allow",
        "callbacks": False,
        "out_params": (),
    },
    "returns_tensor": {
        "device": None,
        "dtype": None,
        "copy": None,
        "nested": True,
        "sparse_layout": None,
        "transfers": "allow",
    },
    "accepts_tensor": {
        "device": None,
        "dtype": None,
        "copy": None,
        "only": None,
        "exclude": None,
        "nested": True,
        "sparse_layout": None,
        "transfers": "allow",
    },
    "returns_numpy": {"copy": None, "nested": True, "sparse": "array", "transfers": "allow"},
    # adapt(): accepts_numpy's options for array parameters, and where arrays go for tensor ones.
    "adapt": {
        "copy": None,
        "writeback": False,
        "grad": "warn",
        "nested": True,
        "sparse": "array",
        "widen_float16": False,
        "check_writes": False,
        "device": None,
        "transfers": "allow",
    },
    # to_numpy(): returns_numpy's conversion, with a grad policy (the call itself says the
    # value leaves autograd, so by default it detaches silently).
    "to_numpy": {"copy": None, "nested": True, "sparse": "array", "grad": "detach"},
}

#: The options of a fused pair's two sides (torchify, numpy_op): one source for both.
PAIR_INPUT_OPTIONS = frozenset(DEFAULTS["accepts_numpy"]) - {"only", "exclude"}
PAIR_OUTPUT_OPTIONS = frozenset(DEFAULTS["returns_tensor"])


class Plan:
    """Everything decided when a decorator is applied (or two, fused into one wrapper)."""

    def __init__(self, func: Any, sides: dict[str, dict[str, Any]]) -> None:
        _refuse_deferred(func, sides)
        self.function = function_name(func)
        self.params = Parameters(func)
        self.sides = sides  # decorator name -> its explicit options, already validated
        self.grad_policies: dict[str, GradPolicy] = {}  # "once per decorated function" outlives configs
        self._variants: dict[tuple[tuple[str, Any], ...], Runner] = {}
        routes = any(options.get("transfers", "allow") != "allow" for options in sides.values())
        self.default = self._build({}, self.variant, routes=routes)

    def remade(self) -> Callable[[Any, dict[str, dict[str, Any]]], Plan]:
        """What makes this plan again from the function and its sides (for pickling)."""
        return type(self)

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

    def policies(self, configured: dict[str, Any]) -> tuple[str, str]:
        """The transfer policies of the input side and the output side (one side: both its own)."""
        found = {side: self.resolved(side, configured)["transfers"] for side in self.sides}
        into = next((p for side, p in found.items() if not side.startswith("returns")), None)
        out = next((p for side, p in found.items() if not side.startswith("accepts")), None)
        return into or out or "allow", out or into or "allow"

    def resolved(self, side: str, configured: dict[str, Any]) -> dict[str, Any]:
        defaults = DEFAULTS[side]
        return {**defaults, **{k: v for k, v in configured.items() if k in defaults}, **self.sides[side]}

    def _build(
        self,
        configured: dict[str, Any],
        variants: Callable[[Config | None], Runner] | None = None,
        *,
        routes: bool = False,
        watched: bool = False,
    ) -> Runner:
        inputs: Inputs | None = None
        outputs: Outputs | None = None
        numpy_in = self.resolved("accepts_numpy", configured) if "accepts_numpy" in self.sides else None
        # Results narrow back to float16 when the input side widened it (fused pairs only).
        half = numpy_in is not None and numpy_in["widen_float16"]
        handed = numpy_in is not None and hands_read_only(numpy_in)
        for side in self.sides:
            options = self.resolved(side, configured)
            where = f"{side}() on {self.function}"
            if side == "accepts_numpy":
                grad = self.grad_policies.setdefault(options["grad"], GradPolicy(options["grad"], self.function))
                inputs = NumpyInputs(self.params, self.function, grad, options, where)
            elif side == "accepts_tensor":
                inputs = TensorInputs(self.params, self.function, options, where)
            elif side == "returns_tensor":
                restoring = RESTORING_HALF if half else RESTORING
                outputs = TensorOutputs(
                    self.function, self.params, options, restoring=restoring, handed=handed, objects=self.objects
                )
            else:
                outputs = NumpyOutputs(self.function, self.params, options)
        if inputs is None and isinstance(outputs, TensorOutputs):
            inputs = RecordingInputs(self.params, self.function)
        if not watched:
            return Runner(inputs, outputs, self.function, variants, routes=routes)
        for converting in (inputs, outputs):
            if converting is not None:
                converting.mapper.wrap_leaves(counted)
        watch = (path_finder(self.params), self.policies(configured))
        return Runner(inputs, outputs, self.function, watch=watch)


def check_options(side: str, options: dict[str, Any]) -> dict[str, Any]:
    """A decorator's explicit options, validated when it is applied."""
    return validate(options, DEFAULTS[side], f"autoconvert.{side}()")


def shows_options(function: Any, leading: list[inspect.Parameter], *sides: str, skip: tuple[str, ...] = ()) -> None:
    """Give ``function`` (a decorator, or a function taking options as ``**options``) the
    signature ``help()``, ``inspect.signature`` and editors show: ``leading``, then each
    option of ``sides`` keyword-only, with its default, from the table above."""
    parameters = list(leading)
    named = {p.name for p in leading} | set(skip)
    for side in sides:
        for name, default in DEFAULTS[side].items():
            if name not in named:
                named.add(name)
                parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default))
    function.__signature__ = inspect.Signature(parameters, return_annotation=inspect.Signature.empty)


#: The leading parameter of a decorator used bare or called: ``func`` (positional-only, optional).
FUNC = inspect.Parameter("func", inspect.Parameter.POSITIONAL_ONLY, default=None)
