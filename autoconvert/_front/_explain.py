"""``explain``: what autoconvert does on a call of one decorated, torchified or adapted function.

It reads what the plan decided when the decorator was applied (its call's spec: each
side's policy, each parameter's step, the result's, the after step; which call runs; the
generated source) and puts it in words (_wording); it changes nothing and converts nothing.
"""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import types
from typing import Any

from autoconvert._calls._callbacks import global_names
from autoconvert._calls._config import active
from autoconvert._calls._options import DEFAULTS, INPUT_SIDE, OUTPUT_SIDE, OpSettings, Policy, policy_of
from autoconvert._calls._plan import Plan
from autoconvert._calls._signature import function_name
from autoconvert._calls._wrapper import _BoundWrapper, _Wrapper
from autoconvert._conversions._describe import GENERATED

from ._adapt import AdaptPlan
from ._batched import Batched
from ._caps import has_threadpoolctl
from ._cupy import CupyFunction
from ._executors import Threads
from ._native import NativeFunction
from ._ops import _Op
from ._proxies import TorchifiedObject
from ._torchify import view_options
from ._wording import AFTER_WORDS, arguments_words, option_words, parameters_words, result_words


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
    """``explain(func)``, each kind of function its own way."""
    if isinstance(func, _BoundWrapper):
        func = func._self_parent
    elif isinstance(func, types.MethodType) and isinstance(func.__self__, TorchifiedObject):  # a proxy's method
        func = func.__self__._ac_wrapper(func.__func__.__name__) or func
    elif isinstance(func, types.MethodType):  # a decorated function bound through an instance
        func = inspect.getattr_static(func.__self__, func.__func__.__name__, func)
    if isinstance(func, Batched):
        return _batched(func)
    if isinstance(func, NativeFunction):
        return _native(func)
    if isinstance(func, CupyFunction):
        return _cupy(func)
    options = view_options(func)
    if options is not None:
        return _torchified(func, options)
    if isinstance(func, _Op):  # a numpy_op with backward= or fake=
        return _numpy_op(func)
    if not isinstance(func, _Wrapper):
        raise TypeError(
            f"autoconvert.explain() explains what autoconvert made (a decorated, torchified or adapted function, "
            f"a numpy_op, a batched function); got {function_name(func)} ({type(func).__name__}). Fix: pass the "
            "decorated function itself"
        )
    return _wrapper(func)


def _wrapper(wrapper: _Wrapper) -> Explanation:
    plan: Plan = wrapper._self_plan
    block = active()
    spec = (plan.variant(block) if block is not None else plan.default).spec
    adapts = plan.signature.result if isinstance(plan, AdaptPlan) else None  # its return annotation's ask
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
    elif plan.default.spec.routes:
        path, why = (
            "generic",
            "A transfers= policy other than 'allow' watches every call, to guard its copies between devices.",
        )
    else:
        path, why = "generic", f"The plan has no flat call: {because}."
    if block is not None:
        why += " Inside this config block, every call takes the generic call, watched."
    return Explanation(
        function=function_name(wrapper.__wrapped__),
        made_by=" + ".join(f"{side}()" for side in plan.sides)
        + (", fused into one wrapper" if len(plan.sides) > 1 else ""),
        policies=dict(spec.policies),
        explicit={side: dict(options) for side, options in plan.sides.items()},
        configurable=_configurable(plan.sides),
        config=dict(block.options) if block is not None else {},
        arguments=arguments_words(spec.policies, adapted),
        parameters=parameters_words(spec),
        result=result_words(spec.policies, adapts),
        after=AFTER_WORDS.get(spec.after),  # type: ignore[arg-type]
        path=path,
        why=why,
        source=_source(wrapper) if path == "flat" and block is None else None,
        notes=getattr(plan, "not_taken", ()),  # a torchified module's function
    )


def _native(func: NativeFunction) -> Explanation:
    """A torchified module's function on its library's own torch path: the converting pair's
    explanation (for the calls it takes), with the native path first."""
    converting = _wrapper(func.converting)
    why = (
        f"A call whose arguments hold a tensor and no array goes to {converting.function} as it is: its "
        "library runs it on torch tensors itself (gradients kept, on the tensors' device, traced by "
        f"torch.compile). Any other call takes the converting call: {converting.path}. {converting.why}"
    )
    return dataclasses.replace(converting, path="native", why=why, source=None)


_ON_CUPY = (
    "A call whose tensors all live on one CUDA device runs {twin} on their memory (DLPack, no copy, on torch's "
    "current stream, allocating from torch's caching allocator); a result viewing an argument is copied. "
)
_CUPY_RESULTS = "CuPy arrays become tensors on their memory, in containers too"


def _cupy(func: CupyFunction) -> Explanation:
    """A torchified function whose CUDA calls CuPy runs: the converting pair's explanation (for
    the calls CuPy does not take), with CuPy's path first; or a function written for CuPy."""
    twin = func.resolved()
    if twin is None:  # CuPy has no version after all: every call converts
        converting = _wrapper(func.converting)
        return dataclasses.replace(converting, notes=(*converting.notes, f"CuPy's path is not taken: {func.missing}"))
    on_cupy = _ON_CUPY.format(twin=func.twin_name())
    if func.converting is None:
        return Explanation(
            function=func.function,
            made_by="torchify(array_module='cupy'): a function written for CuPy",
            policies={},
            explicit={},
            configurable={},
            config={},
            arguments="a tensor on a CUDA device becomes a CuPy array on its memory; any other tensor, a NumPy "
            "array or a tensor that requires grad raises ConversionError",
            parameters=(),
            result=_CUPY_RESULTS,
            after=None,
            path="cupy",
            why=on_cupy,
            source=None,
        )
    converting = _wrapper(func.converting)
    others = (
        "Any other call raises ConversionError (array_module='cupy')."
        if func.strict
        else "Any other call (a CPU tensor, a NumPy array or callable, a dtype CuPy lacks, a tensor that requires "
        "grad, an out-parameter or overwrite_*=True) takes the converting call; stats() counts why. The "
        f"converting call: {converting.path}. {converting.why}"
    )
    return dataclasses.replace(converting, path="cupy", why=on_cupy + others)  # the converting call's source


def _configurable(explicit: dict[str, dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Each side's options a ``config`` block would change: those it takes, not given explicitly."""
    return {
        side: tuple(name for name in DEFAULTS[side] if name not in given and name in DEFAULTS["config"])
        for side, given in explicit.items()
    }


def _source(wrapper: _Wrapper) -> str | None:
    """The generated ``__call__`` of the wrapper's class, as linecache holds it, and the
    generated helpers it calls (``numpy_items``)."""
    plan = wrapper._self_plan
    call = type(wrapper).__dict__["__call__"]
    if plan.stands_in:  # a torchified object's method: its method form, or its call form for a callable it holds
        call = plan.default.call if plan.held else wrapper._self_method
    function = getattr(call, "__func__", call)
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
        return f"{_qualified(type(owner))}.{value.__name__}, bound"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        code = getattr(value, "__code__", None)
        return "generated, below" if code is not None and code.co_filename.startswith(GENERATED) else _qualified(value)
    return f"a {_qualified(type(value))}"


def _qualified(value: Any) -> str:
    module = getattr(value, "__module__", None)
    return f"{module}.{value.__qualname__}" if module and module != "builtins" else value.__qualname__


def _torchified(view: Any, options: dict[str, Any]) -> Explanation:
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
    )


def _numpy_op(op: _Op) -> Explanation:
    """A numpy_op with ``backward=`` or ``fake=``: the torch op around its NumPy pair."""
    own: OpSettings = op._recipe[1]
    inner = _wrapper(op._forward)
    notes = (
        f"numpy_op(): a torch op; backward={'given' if own.backward is not None else 'none'}, "
        f"fake={own.fake!r}, vmap={own.vmap!r}, jvp={'given' if own.jvp is not None else 'none'}.",
        "A call that needs a gradient, or runs under torch.func or torch.compile, goes through the op; "
        "any other call runs the pair below directly.",
    )
    return dataclasses.replace(inner, made_by="numpy_op() around " + inner.made_by, notes=notes)


def _batched(batched: Batched) -> Explanation:
    """A batched function: the call below converting each batch once, where its samples run,
    when a batch stays in the caller's thread, the libraries' threads, and the seeds."""
    where = batched._runner
    notes = [
        "batched(): each batch converted once by the call below, the function run once per sample along dim 0 "
        "on NumPy views of it, the results gathered with np.stack (field by field for tuples and dicts) and "
        "converted once."
    ]
    if batched._options:
        given = ", ".join(f"{name}={option_words(value)}" for name, value in batched._options.items())
        notes.append(f"Given to batched and held by the call below: {given}.")
    if where is None:
        notes.append("Samples run one after another in the caller's thread.")
    else:
        on = f"{where.workers} threads" if isinstance(where, Threads) else type(where.executor).__name__
        notes.append(f"Samples run on {on}, in chunks.")
        if where.in_caller:
            notes.append(
                f"A batch whose samples take under {where.least_seconds * 1e3:g} ms in all (timed on its first "
                "samples) runs in the caller's thread instead: the executor would cost more than it gives."
            )
        blas = "BLAS, OpenMP and torch" if has_threadpoolctl() else "torch (BLAS and OpenMP: install threadpoolctl)"
        notes.append(
            f"While a map runs, {blas} use at most {where.threads} thread{'s' * (where.threads > 1)} per worker."
        )
    seeds = batched._seeds
    if seeds is not None:
        streams = "a Generator as rng=" if seeds.rng else ""
        if seeds.globals:
            streams += (" and " if streams else "") + "np.random, random and torch's CPU generator seeded per sample"
        notes.append(f"seed=: each sample its own stream ({streams}).")
    inner = _wrapper(batched._call)
    return dataclasses.replace(inner, made_by="batched() over " + inner.made_by, notes=tuple(notes))
