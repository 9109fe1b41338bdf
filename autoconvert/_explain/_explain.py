"""``explain``: what autoconvert does on a call of one decorated, torchified or adapted function.

It asks the function for its description (_routes.described: the converting wrapper's plan,
the routes tried before it, what made it) and puts what the plan decided when the
decorator was applied (its call's spec: each side's policy, each parameter's step, the
result's, the after step; which call runs; the generated source) and each route's own
words in words (_wording); it changes nothing and converts nothing.
"""

from __future__ import annotations

import dataclasses
import linecache
import types
from typing import Any

from autoconvert._conversions._describe import GENERATED, qualified
from autoconvert._interpreter._routes import Description, Route, described
from autoconvert._options._config import active
from autoconvert._options._options import DEFAULTS, INPUT_SIDE, OUTPUT_SIDE, Policy, policy_of
from autoconvert._partials import binds_arguments
from autoconvert._spec._code_reads import global_names
from autoconvert._spec._inputs import AFTER_WORDS
from autoconvert._spec._signature import function_name

from ._wording import arguments_words, option_words, parameters_words, result_words


@dataclasses.dataclass(frozen=True)
class Explanation:
    """What autoconvert does on a call of one function. ``str()`` (and the REPL) show it as
    text; the attributes hold the same facts for code.

    Attributes:
        function: the function's qualified name.
        made_by: what wraps it: the sides fused into one wrapper, or what else made it.
        policies: each side's options (a frozen ``Policy``) as a call resolves them: outside
            any ``config`` block, or inside the one active where ``explain`` runs.
        explicit: each side's options given explicitly (they win over a block's).
        configurable: each side's options that a ``config`` block would change.
        config: the active ``config`` block's options, where ``explain`` runs inside one.
        arguments: what a tensor (or array) argument becomes.
        parameters: each parameter's name and what happens to it.
        result: what the result becomes.
        after: what runs after the function returns (or raises), if anything.
        path: ``"flat"`` (the call generated for this plan), ``"generic"`` (the plan
            interpreted), ``"native"`` (a torchified module's function its library runs on
            torch tensors itself: see ``torchify``'s ``native``), ``"cupy"`` (CuPy's version
            of it on a CUDA tensor's memory: see ``torchify``'s ``array_module``), or ``"per
            function"`` (a torchified module, class or object).
        why: why that call runs.
        source: the flat call's generated source (None for the generic call).
        notes: how the function was made, where more than decorators made it (torchify,
            numpy_op, batched).
        compiled: how its calls go inside a function compiled with ``torch.compile``: traced
            into the graph, or one graph break each and why (None: as eagerly).
        verbose: ``str()`` lists every option and the generated source, not only what
            differs from the defaults.
    """

    function: str
    made_by: str
    policies: dict[str, Policy]
    explicit: dict[str, dict[str, Any]]
    configurable: dict[str, tuple[str, ...]]
    config: dict[str, Any]
    arguments: str
    parameters: tuple[tuple[str, str], ...]
    result: str
    after: str | None
    path: str
    why: str
    source: str | None
    notes: tuple[str, ...] = ()
    compiled: str | None = None
    verbose: bool = False

    def __str__(self) -> str:
        return self._long() if self.verbose else self._short()

    def _short(self) -> str:
        """The facts a user looks for first: the call path, what converts and copies, and the
        options that differ from the defaults."""
        lines = [f"{self.function}: {self.made_by}", *self.notes, f"Call path: {self.path}. {self.why}"]
        lines += self._conversions()
        given = [
            f"{side}({', '.join(f'{name}={option_words(value)}' for name, value in options.items())})"
            for side, options in self.explicit.items()
            if options
        ]
        options = f"given: {'; '.join(given)}, the rest default" if given else "the defaults"
        applied = [  # a block's option applies where no side was given it explicitly
            f"{name}={option_words(value)}"
            for name, value in self.config.items()
            if any(name in DEFAULTS[side] and name not in self.explicit.get(side, {}) for side in self.policies)
        ]
        if applied:
            options += f"; the active config block sets {', '.join(applied)}"
        lines.append(f"Options: {options}")
        if self.policies or self.source is not None:
            lines.append(
                "explain(f, verbose=True) lists every option" + (" and the generated source" if self.source else "")
            )
        return "\n".join(lines)

    def _conversions(self) -> list[str]:
        """What the arguments, each parameter and the result become, and what runs after."""
        lines = [f"Arguments: {self.arguments}"]
        width = max((len(name) for name, _ in self.parameters), default=0)
        lines += [f"    {name.ljust(width)}  {what}" for name, what in self.parameters]
        lines.append(f"Result: {self.result}")
        if self.after is not None:
            lines.append(f"After the call: {self.after}")
        return lines

    def _long(self) -> str:
        """Every option of each side with where its value comes from, and the generated source."""
        lines = [f"{self.function}: {self.made_by}", *self.notes, ""]
        for side, policy in self.policies.items():
            lines.append(f"{side}:")
            explicit = self.explicit.get(side, {})
            for name in DEFAULTS[side]:
                value = getattr(policy, name)
                said = "given" if name in explicit else "config" if name in self.config else "default"
                lines.append(f"    {name}={option_words(value)}".ljust(34) + f" ({said})")
            if self.configurable.get(side):
                lines.append(f"    a config block may change: {', '.join(self.configurable[side])}")
        lines += ["", *self._conversions()]
        lines += ["", f"Call path: {self.path}. {self.why}"]
        if self.compiled is not None:
            lines.append(f"Under torch.compile: {self.compiled}")
        if self.source is not None:
            lines += ["", self.source.rstrip("\n")]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


def explain(func: Any, *, verbose: bool = False) -> Explanation:
    """What autoconvert does on a call of ``func``: each side's resolved options (and which a
    ``config`` block would change), what each parameter and the result become, what runs
    after the call, which call path runs and why, and the generated source of the flat call.

    Args:
        func: a function decorated by autoconvert (any decorator, fused pairs, ``adapt``), a
            function read from a torchified module, class or object, a ``numpy_op`` or a
            ``batched`` function.
        verbose: ``print()`` shows every option and the generated source; by default it
            shows the call path, what converts, and the options that differ from the defaults.
            The attributes hold every fact either way.

    Returns:
        An ``Explanation``: ``print()`` it, or read its attributes.

    Raises:
        TypeError: ``func`` is not made by autoconvert.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> @ac.accepts_numpy(copy=True)
        ... def total(a):
        ...     return float(np.sum(a))
        >>> e = ac.explain(total)
        >>> e.parameters
        (('a', 'converted'),)
        >>> e.policies["accepts_numpy"].copy, e.explicit
        (True, {'accepts_numpy': {'copy': True}})
        >>> e.arguments.split(";")[0]
        'a tensor becomes a private, writable NumPy copy'
    """
    explained = _explain(func)
    return dataclasses.replace(explained, verbose=True) if verbose else explained


def _explain(func: Any) -> Explanation:
    """``explain(func)``: what ``func`` describes itself as (see _routes.described), in words;
    a partial the decorators or torchify made of one (its bound arguments converted as
    arguments), what the function it calls describes itself as."""
    if binds_arguments(func) and described(func.func) is not None:
        func = func.func
    description = described(func)
    if description is None:
        raise TypeError(
            f"autoconvert.explain() explains what autoconvert made (a decorated, torchified or adapted function, "
            f"a numpy_op, a batched function); got {function_name(func)} ({type(func).__name__}). Fix: pass the "
            "decorated function itself"
        )
    if description.options is not None:
        return _torchified(func, description.options, description.notes)
    if description.converting is None:  # a function its one route runs, with no converting wrapper behind it
        return _alone(func, description.routes[0])
    explained = _explained_conversion(description)
    for route in description.routes:
        explained = _routed(explained, route)
    if description.made_by:
        explained = dataclasses.replace(explained, made_by=description.made_by + explained.made_by)
    return explained


def _explained_conversion(description: Description) -> Explanation:
    """The converting wrapper: what its plan's spec does, its call path and why."""
    plan = description.plan
    assert plan is not None  # a converting wrapper has one
    block = active()
    spec = (plan.variant(block) if block is not None else plan.default).spec
    adapts = plan.result_asks()  # adapt's return annotation's ask
    adapted = adapts is not None
    because = plan.default.spec.generic_because
    if plan.default.flat is not None:
        path = "flat"
        why = (
            "Generated for this plan: it converts bare tensors, and exact dicts, lists and tuples of them, "
            "inline; any other call (deeper containers, a tensor NumPy cannot share, an out-parameter passed, a "
            "config block, stats() or the profiler active, an error to report) goes to the generic call, which "
            "gives the same result."
        )
    elif adapted:
        path, why = "generic", f"{because}."
    elif plan.default.spec.watched:
        path, why = (
            "generic",
            "A transfers= policy other than 'allow' watches every call, to guard its copies between devices.",
        )
    else:
        path, why = "generic", f"The plan has no flat call: {because}."
    if block is not None:
        why += " Inside this config block, every call takes the generic call, watched."
    generated = description.generated if path == "flat" and block is None else None
    return Explanation(
        function=plan.function,
        made_by=" + ".join(f"{side}()" for side in plan.sides)
        + (", fused into one wrapper" if len(plan.sides) > 1 else ""),
        policies=dict(spec.policies),
        explicit={side: dict(options) for side, options in plan.sides.items()},
        configurable=_configurable(plan.sides),
        config=dict(block.options) if block is not None else {},
        arguments=arguments_words(spec.policies, adapted),
        parameters=parameters_words(spec, plan.params.scalars),
        result=result_words(spec.policies, adapts),
        after=AFTER_WORDS.get(spec.after),  # type: ignore[arg-type]
        path=path,
        why=why,
        source=None if generated is None else _source(generated),
        notes=description.notes,
        compiled=description.compiled,
    )


def _routed(converting: Explanation, route: Route) -> Explanation:
    """A route taken before the converting wrapper: its calls first, then the converting call's
    explanation for the calls it leaves (or why it never runs)."""
    words = route.describe()
    if words.not_taken is not None:
        return dataclasses.replace(converting, notes=(*converting.notes, words.not_taken))
    why = words.taken + words.others.format(path=converting.path, why=converting.why)
    source = converting.source if words.keeps_source else None
    return dataclasses.replace(converting, path=words.path, why=why, source=source)


def _alone(func: Any, route: Route) -> Explanation:
    """A function ``route`` runs with no converting wrapper behind it (one written for CuPy, a
    method of an object made on its library's own torch path): it takes every call, or raises."""
    words = route.describe()
    assert words.alone is not None  # a route that can run alone says how
    made_by, arguments, result = words.alone
    return Explanation(
        function=function_name(getattr(func, "__wrapped__", func)),
        made_by=made_by,
        policies={},
        explicit={},
        configurable={},
        config={},
        arguments=arguments,
        parameters=(),
        result=result,
        after=None,
        path=words.path,
        why=words.taken,
        source=None,
    )


def _configurable(explicit: dict[str, dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Each side's options a ``config`` block would change: those it takes, not given explicitly."""
    return {
        side: tuple(name for name in DEFAULTS[side] if name not in given and name in DEFAULTS["config"])
        for side, given in explicit.items()
    }


def _source(function: Any) -> str | None:
    """The flat call's generated ``function``, as linecache holds it, and the generated
    helpers it calls (``numpy_items``)."""
    code = function.__code__
    lines = [*linecache.getlines(code.co_filename)]  # a copy: linecache's own list serves tracebacks
    if not lines:
        return None
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    renamed = [f"p{i} is {name}" for i, name in enumerate(names) if name != f"p{i}"]  # see _exact
    header = f"# {code.co_filename}" + ("; " + ", ".join(renamed) if renamed else "")
    lines += _free_names(function)
    helpers = [function.__globals__.get(name) for name in code.co_names]
    for helper in helpers:
        helper_code = getattr(helper, "__code__", None)
        if helper_code is not None and helper_code.co_filename.startswith(GENERATED):
            lines += ["\n", f"# {helper_code.co_filename}\n", *linecache.getlines(helper_code.co_filename)]
            lines += _free_names(helper)
    return header + "\n" + "".join(lines)


def _free_names(function: Any) -> list[str]:
    """What each name a generated function reads from its namespace is, as comment lines:
    the plan's constants and the helpers the source calls, which the source cannot show."""
    namespace = function.__globals__
    found = sorted(name for name in global_names(function.__code__) if name in namespace)
    return ["# its free names:\n", *(f"#   {name}: {_named(namespace[name])}\n" for name in found)]


def _named(value: Any) -> str:
    """A free name's value in a few words: a plain value as it is, a function or class by its
    qualified name, a bound method by its class's, anything else by its type."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (set, frozenset)):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, types.ModuleType):
        return f"the module {value.__name__}"
    owner = getattr(value, "__self__", None)
    if isinstance(value, (types.MethodType, types.BuiltinMethodType)) and not isinstance(
        owner, (type(None), types.ModuleType)
    ):
        return f"{qualified(type(owner))}.{value.__name__}, bound"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        code = getattr(value, "__code__", None)
        return "generated, below" if code is not None and code.co_filename.startswith(GENERATED) else qualified(value)
    return f"a {qualified(type(value))}"


def _torchified(view: Any, options: dict[str, Any], notes: tuple[str, ...]) -> Explanation:
    """A torchified module, class or object: the pair each of its functions becomes."""
    block = active()
    configured = block.options if block is not None else {}
    explicit = {
        "accepts_numpy": {k: v for k, v in options.items() if k in INPUT_SIDE},
        "returns_tensor": {k: v for k, v in options.items() if k in OUTPUT_SIDE},
    }
    policies = {side: policy_of(side, configured, given) for side, given in explicit.items()}
    return Explanation(
        function=repr(view),
        made_by="torchify(): each function read from it becomes accepts_numpy() + returns_tensor(), fused",
        policies=policies,
        explicit=explicit,
        configurable=_configurable(explicit),
        config=dict(configured),
        arguments=arguments_words(policies, adapted=False),
        parameters=(),
        result=result_words(policies),
        after=None,
        path="per function",
        why="Each function is wrapped on first access; explain one of them (explain(view.name)) for its call.",
        source=None,
        notes=notes,
    )
