"""``explain``: what autoconvert does on a call of one decorated, torchified or adapted function.

It reads what the plan decided when the decorator was applied (each side's policy, the
parameters, which call runs and the generated source) and puts it in words; it changes
nothing and converts nothing.
"""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import types
from collections.abc import Mapping
from typing import Any

from ._adapt import AdaptPlan
from ._batched import Batched
from ._config import active
from ._emit import Step
from ._executors import Threads
from ._ops import _Op
from ._options import DEFAULTS, INPUT_SIDE, OUTPUT_SIDE, Policy, policy_of
from ._plan import Plan
from ._signature import function_name
from ._spec import RESTORE_WRITES, WRITE_BACK, WRITE_BACK_OUT, Spec
from ._torchify import view_options
from ._wants import ANY, ARRAY, EACH, ITEMS, TENSOR, Want
from ._wrapper import _BoundWrapper, _shown, _Wrapper


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
            interpreted), or ``"per function"`` (a torchified module, class or object).
        why: why that call runs.
        source: the flat call's generated source (None for the generic call).
        notes: how the function was made, where more than decorators made it (torchify,
            numpy_op, batched).
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

    def __str__(self) -> str:
        lines = [f"{self.function}: {self.made_by}", *self.notes, ""]
        for side, policy in self.policies.items():
            lines.append(f"{side}:")
            explicit = self.explicit.get(side, {})
            for name in DEFAULTS[side]:
                value = getattr(policy, name)
                said = "given" if name in explicit else "config" if name in self.config else "default"
                lines.append(f"    {name}={_value(value)}".ljust(34) + f" ({said})")
            if self.configurable.get(side):
                lines.append(f"    a config block may change: {', '.join(self.configurable[side])}")
        lines += ["", f"Arguments: {self.arguments}"]
        width = max((len(name) for name, _ in self.parameters), default=0)
        lines += [f"    {name.ljust(width)}  {what}" for name, what in self.parameters]
        lines.append(f"Result: {self.result}")
        if self.after is not None:
            lines.append(f"After the call: {self.after}")
        lines += ["", f"Call path: {self.path}. {self.why}"]
        if self.source is not None:
            lines += ["", self.source.rstrip("\n")]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


def explain(func: Any) -> Explanation:
    """What autoconvert does on a call of ``func``: each side's resolved options (and which a
    ``config`` block would change), what each parameter and the result become, what runs
    after the call, which call path runs and why, and the generated source of the flat call.

    Args:
        func: a function decorated by autoconvert (any decorator, fused pairs, ``adapt``), a
            function read from a torchified module, class or object, a ``numpy_op`` or a
            ``batched`` function.

    Returns:
        An [`Explanation`][autoconvert.Explanation]: ``print()`` it, or read its attributes.

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
    if isinstance(func, _BoundWrapper):
        func = func._self_parent
    elif isinstance(func, types.MethodType):  # a decorated function bound through an instance
        func = inspect.getattr_static(func.__self__, func.__func__.__name__, func)
    if isinstance(func, Batched):
        return _batched(func)
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
    adapted = isinstance(plan, AdaptPlan)
    because = plan.default.spec.generic_because
    if plan.default.flat is not None:
        path = "flat"
        why = (
            "Generated for this plan: it converts bare tensors, and exact dicts, lists and tuples of them, "
            "inline; any other call (deeper containers, a tensor NumPy cannot share, an out-parameter passed, a "
            "config block, stats() or the profiler active, an error to report) goes to the generic call, which "
            "gives the same result."
        )
    elif spec.routes and not adapted:
        path, why = (
            "generic",
            "A transfers= policy other than 'allow' watches every call, to guard its copies between devices.",
        )
    else:
        path, why = "generic", f"{because}." if adapted else f"The plan has no flat call: {because}."
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
        arguments=_arguments(spec.policies, adapted),
        parameters=_parameters(spec),
        result=_result(spec.policies, plan),
        after=_AFTER.get(spec.after),  # type: ignore[arg-type]
        path=path,
        why=why,
        source=_source(wrapper) if path == "flat" and block is None else None,
    )


def _configurable(explicit: dict[str, dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Each side's options a ``config`` block would change: those it takes, not given explicitly."""
    return {
        side: tuple(name for name in DEFAULTS[side] if name not in given and name in DEFAULTS["config"])
        for side, given in explicit.items()
    }


def _value(option: Any) -> str:
    """An option's value as the decorator's repr shows it; parameter names as a sorted list."""
    return repr(sorted(option)) if isinstance(option, frozenset) else _shown(option)


def _arguments(policies: Mapping[str, Policy], adapted: bool) -> str:
    numpy_side = policies.get("accepts_numpy") or policies.get("adapt")
    if numpy_side is not None:
        words = _to_arrays(numpy_side)
        if adapted:
            words = (
                f"where a parameter asks for an array, {words}; where it asks for a tensor, an array becomes a tensor"
            )
        return words
    tensor_side = policies.get("accepts_tensor")
    if tensor_side is not None:
        return _to_tensors(tensor_side)
    if "returns_tensor" in policies:
        return "passed as they are; the tensors among them decide the results' device"
    return "passed as they are"


def _to_arrays(p: Policy) -> str:
    if p.writeback:
        words = (
            "a tensor becomes a writable NumPy array (its own memory on the CPU, else a private copy), and what "
            "the function writes reaches the tensor after the call, even if it raises"
        )
    elif p.copy:
        words = "a tensor becomes a private, writable NumPy copy"
    else:
        words = (
            "a tensor becomes a read-only NumPy array sharing its memory on the CPU; "
            + ("a copy is refused (CopyError)" if p.copy is False else "a copy only where NumPy cannot share it")
            + " (a GPU tensor, a dtype NumPy lacks such as bfloat16, a conjugate bit)"
        )
    grad = {"warn": "detached with a GradientWarning once", "detach": "detached", "error": "refused (GradientError)"}
    words += f"; one that requires grad is {grad[p.grad]}"
    if p.widen_float16:
        words += "; float16 crosses as float32"
    words += f"; sparse tensors as scipy.sparse {'arrays' if p.sparse == 'array' else 'matrices'}"
    if p.callbacks:
        words += "; callables are handed arrays-to-tensors adapters (callbacks=True)"
    return words + _nested(p)


def _to_tensors(p: Policy) -> str:
    where = f"on {p.device}" if p.device is not None else "on torch's default device"
    copy = {
        None: "sharing its memory where torch can",
        True: "a private copy",
        False: "sharing, never copied (CopyError)",
    }
    return f"an array or NumPy scalar becomes a tensor {where}, {copy[p.copy]}{_dtype(p)}" + _nested(p)


def _nested(p: Policy) -> str:
    return "; inside lists, tuples, dicts, namedtuples and dataclasses too" if p.nested else "; top-level values only"


def _dtype(p: Policy) -> str:
    if p.dtype == "input":
        return "; floating ones cast to the floating dtype of the call's tensors"
    if p.dtype is not None:
        return f"; floating ones cast to {p.dtype}"
    return ""


def _parameters(spec: Spec) -> tuple[tuple[str, str], ...]:
    """Each parameter's step in words."""
    if spec.parameters is None:
        return (("(no signature)", "every argument " + _converted(spec.value)),)
    return tuple((name, _parameter(name, step, spec.value)) for name, step in spec.parameters)


def _parameter(name: str, step: Step, value: Step) -> str:
    if step.kind == "instance":
        return f"the {'class' if name == 'cls' else 'instance'}: never converted"
    if step.kind == "asks":
        return _want(step.asks, "each one " if name[0] == "*" else "")
    if step.kind == "written":
        return "an out-parameter: a tensor here is handed over writable, returned as itself"
    if step != value:
        return "left as it is (only=/exclude=)"
    return _converted(step)


def _converted(step: Step) -> str:
    """What a value with this step (the side's own) becomes, in short."""
    if step.kind == "unconverted":
        return "passed as it is"
    if step.kind == "recorded":
        return "passed as it is, its tensors recorded"
    return "converted"


def _want(want: Want | None, prefix: str = "") -> str:
    if want is None:
        return "left as it is (no annotation asks for an array or a tensor)"
    return prefix + _asked(want)


def _asked(want: Want) -> str:
    if want.kind == ARRAY:
        return (
            "an array"
            + (f" of {want.dtype}" if want.dtype is not None else "")
            + (" (or None)" if not want.bare else "")
        )
    if want.kind == TENSOR:
        return "a tensor"
    if want.kind == EACH and want.each is not None:
        return f"each item {_asked(want.each)}"
    if want.kind == ITEMS:
        return "items: " + ", ".join(_asked(w) for w in want.items)
    return "as it is" if want.kind != ANY else "whatever it holds"


def _result(policies: Mapping[str, Policy], plan: Plan | None) -> str:
    if isinstance(plan, AdaptPlan):
        return (
            "arrays become tensors when the caller passed tensors (on their device, in their floating dtype); "
            "tensors become arrays when it passed arrays and no tensors; "
            f"the return annotation asks for {_asked(plan.signature.result)}"
        )
    out = policies.get("returns_tensor")
    if out is not None:
        where = (
            f"on {out.device}"
            if out.device is not None
            else "on the device of the call's tensors (torch's default without any)"
        )
        copy = {
            None: "sharing the array's memory where torch can, else copied once",
            True: "always in memory of their own",
            False: "sharing, never copied (CopyError)",
        }
        dtype = (
            _dtype(out)
            or "; NumPy's dtype, with bfloat16, float8 and complex32 restored when every floating argument had it"
        )
        layout = f"; scipy.sparse as {out.sparse_layout}" if out.sparse_layout is not None else ""
        return f"arrays and NumPy scalars become tensors {where}, {copy[out.copy]}{dtype}{layout}{_nested(out)}"
    back = policies.get("returns_numpy")
    if back is not None:
        copy = {None: "sharing a CPU tensor's memory", True: "always copied", False: "never copied (CopyError)"}
        return (
            f"tensors become NumPy arrays: detached, on the host, dtypes NumPy lacks widened, {copy[back.copy]}"
            + _nested(back)
        )
    return "returned as it is"


#: Each after step (see _spec) in words.
_AFTER = {
    RESTORE_WRITES: "each CPU tensor argument is compared with its copy; a change is put back and raises ReadOnlyError",
    WRITE_BACK: "what the function wrote into the arrays is written back into the caller's tensors",
    WRITE_BACK_OUT: "out-parameters' private copies (off the CPU) are written back into the caller's tensors",
}


def _source(wrapper: _Wrapper) -> str | None:
    """The generated ``__call__`` of the wrapper's class, as linecache holds it."""
    call = type(wrapper).__dict__["__call__"]
    code = getattr(call, "__func__", call).__code__
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    renamed = [f"p{i} is {name}" for i, name in enumerate(names) if name != f"p{i}"]  # see _exact
    header = f"# {code.co_filename}" + ("; " + ", ".join(renamed) if renamed else "")
    return header + "\n" + "".join(lines)


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
        arguments=_arguments(policies, adapted=False),
        parameters=(),
        result=_result(policies, None),
        after=None,
        path="per function",
        why="Each function is wrapped on first access; explain one of them (explain(view.name)) for its call.",
        source=None,
    )


def _numpy_op(op: _Op) -> Explanation:
    """A numpy_op with ``backward=`` or ``fake=``: the torch op around its NumPy pair."""
    _, backward, fake, _, vmap, jvp = op._recipe
    inner = _wrapper(op._forward)
    notes = (
        f"numpy_op(): a torch op; backward={'given' if backward is not None else 'none'}, "
        f"fake={fake!r}, vmap={vmap!r}, jvp={'given' if jvp is not None else 'none'}.",
        "A call that needs a gradient, or runs under torch.func or torch.compile, goes through the op; "
        "any other call runs the pair below directly.",
    )
    return dataclasses.replace(inner, made_by="numpy_op() around " + inner.made_by, notes=notes)


def _batched(batched: Batched) -> Explanation:
    """A batched function: where its samples run, and the call each sample gets."""
    runner = batched._runner
    if runner is None:
        where = "one after another in the caller's thread"
    elif isinstance(runner, Threads):
        where = f"on {runner.workers} threads, in chunks, each sample through the call below"
    else:
        where = (
            f"on {type(runner.executor).__name__}, in chunks: the function unwrapped, on NumPy arrays, results "
            "converted back in the caller's process as below"
        )
    assert isinstance(batched._call, _Wrapper)  # fn itself, or fn as a fused pair
    inner = _wrapper(batched._call)
    notes = (f"batched(): once per sample along dim 0, {where}.",)
    return dataclasses.replace(inner, made_by="batched() over " + inner.made_by, notes=notes)
