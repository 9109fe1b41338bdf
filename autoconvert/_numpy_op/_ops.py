"""``numpy_op``: a NumPy function that lives in a torch graph, with a NumPy backward.

Wrapping NumPy code cuts the autograd graph. Given the vector-Jacobian product as a NumPy
function, ``numpy_op`` makes the wrapped function differentiable: eagerly a
``torch.autograd.Function`` (the cheapest way in), and given ``fake=`` also a
``torch.library`` op that ``torch.compile`` traces as one node. Both run the same
``autoconvert._numpy_op._opspec.OpSpec``, so they give the same answer. The eager form and its
torch.func rules live in ``_autograd``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, Unpack, overload

import torch

from autoconvert._adapters._adapter import signature_of
from autoconvert._conversions._grad import FORWARD_AD, has_tangent
from autoconvert._conversions._memory import transforming, untracked, untransformed
from autoconvert._conversions._tree import Mapper, keep
from autoconvert._decorators._decorators import replanned, wrap_pair
from autoconvert._errors import ConversionError, GradientError, keystr, message
from autoconvert._escape import compiling, graph_break, opaque, tracing
from autoconvert._failures._guards import guarded
from autoconvert._failures._traceback import filter_traceback
from autoconvert._gradients._catalogue import hand_down, rule_for
from autoconvert._gradients._rule import say_dropped, say_untaken
from autoconvert._interpreter._plan import Plan
from autoconvert._interpreter._routes import Description, described, plan_of
from autoconvert._options._checks import Fake, Residuals, Rule, Vmap
from autoconvert._options._config import active
from autoconvert._options._options import (
    OpOptions,
    OpSettings,
    Policy,
    check_callable,
    gives_way,
    policy_of,
    reject_given,
    settings_of,
    shows_options,
    validate,
)
from autoconvert._partials import binds_arguments, rebound
from autoconvert._pickling import by_recipe, calling_module
from autoconvert._spec._signature import TENSORS, function_name, record, unfitting

from ._autograd import apply_op, apply_traced, dual, wants_grad
from ._library import Registration
from ._opspec import OpSpec
from ._schema import Schema, SchemaError, bound_types, schema_of

P = ParamSpec("P")
R_co = TypeVar("R_co", covariant=True)


class NumpyOp(Protocol[P, R_co]):
    """A ``numpy_op`` made with ``fake=``: called like the function, its torch op as ``.op``.
    Generic so that autoconvert.mypy_plugin can give its call the function's parameters."""

    op: Any  # a torch._ops.OpOverload, a class torch keeps private

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...


class OpDecorator(Protocol):
    """What ``numpy_op(...)`` with options and no ``fake=`` returns, named for autoconvert.mypy_plugin."""

    def __call__(self, fn: Callable[..., Any], /) -> Callable[..., Any]: ...


class FakeOpDecorator(Protocol):
    """What ``numpy_op(...)`` with ``fake=`` and no function returns, named for autoconvert.mypy_plugin."""

    def __call__(self, fn: Callable[..., Any], /) -> NumpyOp[..., Any]: ...


@overload
def numpy_op(
    fn: Callable[..., Any],
    /,
    *,
    backward: Rule = None,
    fake: Fake,
    vmap: Vmap = "sequential",
    jvp: Rule = None,
    residuals: Residuals = (),
    **options: Unpack[OpOptions],
) -> NumpyOp[..., Any]: ...
@overload
def numpy_op(
    fn: Callable[..., Any],
    /,
    *,
    backward: Rule = None,
    fake: None = None,
    vmap: Vmap = "sequential",
    jvp: Rule = None,
    residuals: Residuals = (),
    **options: Unpack[OpOptions],
) -> Callable[..., Any]: ...
@overload
def numpy_op(
    fn: None = None,
    /,
    *,
    backward: Rule = None,
    fake: Fake,
    vmap: Vmap = "sequential",
    jvp: Rule = None,
    residuals: Residuals = (),
    **options: Unpack[OpOptions],
) -> FakeOpDecorator: ...
@overload
def numpy_op(
    fn: None = None,
    /,
    *,
    backward: Rule = None,
    fake: None = None,
    vmap: Vmap = "sequential",
    jvp: Rule = None,
    residuals: Residuals = (),
    **options: Unpack[OpOptions],
) -> OpDecorator: ...
def numpy_op(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Make a NumPy function a torch operation: differentiable, and traceable by torch.compile.

    Args:
        fn: the NumPy function (bare use), or omitted (``@numpy_op(backward=...)``).
        backward: ``backward(grad, *args, output=output, **kwargs)``, all as read-only arrays
            (private writable copies with ``copy=True``): ``grad`` is the output's gradient (a tuple when ``fn`` returns a tuple), ``args``
            and ``kwargs`` the call's arguments, ``output`` the forward result. It returns
            one gradient per positional tensor argument (a tensor given by keyword to a
            positional parameter counts), in order: a single array when there is one, a tuple
            otherwise, ``None`` where no gradient flows.
        fake: what the results look like, for tracing without running NumPy: a parameter's
            name (``fake="x"``: shaped like argument ``x``, with its dtype and device), a
            tuple of names for a tuple result, or a function of the call's arguments that
            returns empty tensors, as for ``torch.library.register_fake``. With it the op is
            registered under ``torch.ops.autoconvert`` (``op.op`` is the overload) and
            ``torch.compile(fullgraph=True)`` traces it as one node; parameter types come
            from annotations (``np.ndarray`` is a tensor), or from defaults. Torch keeps
            what it builds for a registered op for the life of the process (about 8 KiB,
            50 KiB with ``backward``): make such ops once, not per call.
        vmap: how the op runs under ``torch.vmap`` (and ``torch.func`` transforms batching
            it, as per-sample gradients do): ``"sequential"``, the NumPy function (and its
            backward) once per sample, the results stacked, which is what a loop gives; or
            ``"vectorized"``, once for the whole batch, every tensor argument with a leading
            batch axis: batched ones with theirs moved to the front, unbatched ones broadcast
            along one (a view, no copy), so nested transforms stay consistent. For functions
            that work along a leading axis, such as ufuncs; the backward (and ``jvp``) are
            called the same way and give each gradient per sample.
        jvp: the forward-mode rule, ``jvp(tangent, *args, output=output, **kwargs)``, all as
            arrays: ``tangent`` is the tangent of the positional tensor argument (a tuple of
            one per such argument when there are several); it returns the result's tangent
            (a tuple for a tuple result; ``None`` where a tangent is zero). ``torch.func.jvp`` and ``jacfwd`` need it.
        residuals: what the forward saves for its rules, as JAX's ``custom_vjp`` forward does: a
            name, or a tuple of names. ``fn`` then returns its results and after them one array
            per name (``return output, matrix``); the caller gets the results alone, and
            ``backward`` and ``jvp`` get each residual as a read-only array by its name
            (``backward(grad, *args, output=output, matrix=matrix, **kwargs)``). They cross as
            results do, once, and are kept by autograd with the op's node. ``fake`` describes
            them too, after the results.
        **options: the options of ``accepts_numpy`` (``copy``, ``writeback``, ``grad``,
            ``nested``, ``sparse``) and ``returns_tensor`` (``device``, ``dtype``,
            ``sparse_layout``). ``writeback`` declares the tensor arguments mutated.

    Without ``backward`` or ``fake`` a call converts as ``returns_tensor(accepts_numpy(fn))``
    does (``grad="warn"`` and all), and under ``torch.vmap`` runs per ``vmap=``; a gradient
    asked for through ``torch.func`` raises ``GradientError``
    naming ``backward=``, never a silent zero.
    With ``backward``, the results must be a tensor or a tuple of tensors; integer and bool
    results carry no gradient; gradients reach the inputs on their own device and dtype;
    double backward raises. Without ``fake``, a call inside ``torch.compile`` is a graph break.

    Raises:
        TypeError: ``fake`` was given for a function whose signature has no schema; ``backward``
            or ``jvp`` is not a function.

    Example:
        >>> import numpy as np, torch, autoconvert as ac
        >>> sin = ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x), fake="x")
        >>> x = torch.tensor([0.0, 1.0], requires_grad=True)
        >>> torch.compile(sin, fullgraph=True, backend="eager")(x).sum().backward()
        >>> x.grad
        tensor([1.0000, 0.5403])
    """
    # An op returns new tensors: out-parameters are torch.library's to declare, not autoconvert's.
    checked = validate(options, "numpy_op")
    if fn is None:
        return lambda f: numpy_op(f, **checked)
    check_callable(fn, "numpy_op")
    return _op_of(fn, checked, {})


def _op_of(fn: Callable[..., Any], checked: dict[str, Any], bound: dict[str, str]) -> Any:
    """numpy_op's product; ``bound``: the schema types of what partials around ``fn`` bind."""
    if binds_arguments(fn):  # its bound arguments are the op's arguments: its backward and jvp get them
        return rebound(fn, _op_of(fn.func, checked, {**bound_types(fn), **bound}))
    settings, sides = settings_of(OpSettings, checked)
    if compiling():  # pragma: no cover - made inside a compiled function: dynamo cannot trace the frame walk
        return opaque(_make_op, fn, settings, sides, None, bound=bound)
    return _make_op(fn, settings, sides, calling_module(), bound=bound)


class OpPlan(Plan):
    """The plan of a numpy_op's forward: its options, and its backward, go to numpy_op."""

    def maker(self, assignment: str) -> str:
        return f"ac.numpy_op({self.function.removesuffix('()')}, {assignment})"

    def nested_off(self, side: str) -> str | None:
        return None  # its results are tensors, or tuples of them, whatever nested= says

    def keeps_gradient(self) -> str:
        name = self.function.removesuffix("()")
        return f"give ac.numpy_op({name}, backward=...) its vector-Jacobian product, written in NumPy"


def _make_op(
    fn: Callable[..., Any],
    settings: OpSettings,
    checked: dict[str, Any],
    home: str | None,
    *,
    forward: Any = None,
    bound: dict[str, str] | None = None,
) -> Any:
    """An ``_Op`` around the eager and registered forms; ``checked``: the options of its sides;
    ``forward``: the converting pair it runs (None: made here, as numpy_op's options say);
    ``bound``: the schema types of what a partial around it binds (see ``bound_types``)."""
    backward, fake, jvp = settings.backward, settings.fake, settings.jvp
    policy = policy_of("numpy_op", {}, checked)  # outside any config block: what the op registers
    mutates = gives_way("numpy_op's pure op", policy)  # its writes reach the caller's tensors
    name = function_name(fn)
    if settings.residuals:
        _check_residuals(fn, name, settings)
    # With no rule given, a SciPy function's rule from the catalogue (see AFTER_CALL).
    looked_up = backward is None and jvp is None and not gives_way("the gradient catalogue", policy)
    rule = rule_for(fn) if looked_up else None
    if rule is not None:
        backward, jvp = rule.backward, None if rule.jvp is None else rule.forward
    if backward is not None:
        reject_given("numpy_op's backward", policy, name=name)
    # With a backward the gradient flows through autograd, so the forward detaches silently.
    if forward is None:
        # Guarded as on torchify's host route: an argument SciPy's compiled code may overwrite
        # (solve(a, b, overwrite_b=True)) is handed as a private copy, never the caller's
        # tensor; and for a rule's SciPy function, compiled code that refuses read-only arrays
        # (sosfilt's Cython) gets writable copies where copy= allows them.
        run = guarded(fn, rule is not None and policy.retries_with_copies())
        forward = replanned(wrap_pair(run, checked if backward is None else {**checked, "grad": "detach"}), OpPlan)
    registered: Registration | None = None  # the op's registrations live as long as it does
    schema = None if fake is None else _schema(fn, name, fake, backward is not None, bound)
    spec = OpSpec(
        forward,
        backward,
        name,
        None if schema is None else schema.results,
        shares=schema is not None and mutates,
        vectorized=settings.vmap == "vectorized",
        jvp=jvp,
        catalogued=rule is not None,
        private=policy.copy is True,
        residuals=settings.residuals,
    )
    bind = _binder(fn)
    returned = spec.returned if spec.residuals else None  # the caller gets the results alone
    told: set[str] = set()  # the arguments a rule takes no gradient in, said once each (see _untaken)

    def call(_op: _Op, *args: Any, **kwargs: Any) -> Any:  # the op's __call__
        if tracing():  # pragma: no cover - runs under dynamo, unseen by coverage
            result = _traced(spec, registered, name, args, kwargs)
            return result if returned is None else returned(result)
        try:  # the boundary where autoconvert's errors leave (see _traceback)
            level = transforming()
            # Derivatives a container's tensors would lose: under torch.func (which unwraps them),
            # and with a backward (whose forward detaches); without one, eagerly, grad= says so.
            if (
                (
                    level is not None
                    or (spec.backward is not None and (torch.is_grad_enabled() or FORWARD_AD._current_level >= 0))
                )
                and _nested(name, (checked, policy.grad), args, kwargs, told)
                and level is not None
            ):
                args, kwargs = _untracked(args), dict(zip(kwargs, _untracked(kwargs.values()), strict=True))
            if (
                level is None
                and (
                    spec.backward is None
                    or not (torch.is_grad_enabled() and wants_grad(args, kwargs))
                    # A result written into an out-parameter: no rule follows it, the pair's grad= says so.
                    or (rule is not None and rule.written_into(args, kwargs, torch.Tensor) is not None)
                )
                and not dual(args, kwargs)
            ):
                # No graph to join, no transform: the plain pair (run_op's first step, inlined: a frame
                # fewer on every eager call).
                result = spec.run(args, kwargs)
            else:
                if kwargs:  # first: a call its signature refuses gets no word about gradients
                    args, kwargs = bind(args, kwargs)
                if rule is not None:
                    _untaken(rule, name, _grad_now(checked, policy.grad), args, kwargs, told=told)
                result = apply_op(spec, kwargs, *args)
        except ConversionError as e:
            filter_traceback(e)
            raise
        return result if returned is None else returned(result)

    op = _Op.made(call, fn, (fn, settings, checked, bound), home)
    op._forward, op._rule = forward, rule  # what autoconvert.explain shows
    if fake is not None:
        assert schema is not None  # made with a fake
        registered = _registered(spec, schema, fake, mutates, policy)
        op.op = registered.forward
    return op


def _traced(  # pragma: no cover - runs under dynamo, unseen by coverage
    spec: OpSpec, registered: Registration | None, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """A call under a tracer: the registered op, one node of the graph; without one, or given a
    value it refuses, the escape (dynamo must not trace the NumPy body), outside any try."""
    if registered is None:
        return opaque(apply_traced, spec, kwargs, *args)
    misfit = registered.schema.misfit(args, kwargs)
    if misfit is not None:  # a value the eager call takes and the registered op refuses
        graph_break(
            f"autoconvert: {name}: argument {misfit} is given another kind of value than the op's schema holds for "
            "it (a tensor for an unannotated parameter without a default, else a number typed by its annotation, "
            "its default or the value a partial binds), which the registered op refuses: the call takes the escape, "
            f"one graph break, the body run eagerly. Fix: annotate the parameter with the type it takes ({misfit}: "
            "np.ndarray, float, int, bool or str) and pass that, or leave fullgraph off"
        )
        return opaque(apply_traced, spec, kwargs, *args)
    if spec.backward is None:  # no gradient can flow; eagerly, grad= says so
        args, kwargs = _detached(args), dict(zip(kwargs, _detached(kwargs.values()), strict=True))
    return registered.forward(*args, **kwargs)


def _registered(spec: OpSpec, schema: Schema, fake: Fake, mutates: bool, policy: Policy) -> Registration:
    """The op's registration as a torch op under the names ``fake=`` gives."""
    names = (fake,) if isinstance(fake, str) else fake
    return Registration(spec, schema, names, mutated=mutates, device=policy.device, dtype=policy.dtype)


class _Op:
    """What ``numpy_op`` returns with ``backward=`` or ``fake=``: called like the function it
    wraps (whose name, docstring and signature it shows); ``.op`` is its torch op, if any.

    Pickles by reference where a module holds it (the child's import registers the op
    again), else by its recipe: the function, backward, fake and options, which must pickle.
    """

    if TYPE_CHECKING:  # no class annotations at run time: ``__annotations__`` is the function's
        op: Any
        __call__: Callable[..., Any]  # each op's own class sets it: see made()
        __wrapped__: Callable[..., Any]
        _recipe: tuple[Any, OpSettings, dict[str, Any], dict[str, str] | None]
        _forward: Any  # the NumPy pair each eager call without a graph runs
        _rule: Any  # the catalogue's rule it differentiates with (autoconvert._gradients), or None
        _home: str | None

    @classmethod
    def made(cls, call: Callable[..., Any], fn: Callable[..., Any], recipe: Any, home: str | None) -> _Op:
        # A class per op with the call as its __call__ (a constant to it, no attribute read per
        # call): a plain function's speed, and an instance can have a __reduce__.
        kind = type("numpy_op", (cls,), {"__call__": call, "__module__": cls.__module__})
        op: _Op = kind()
        functools.update_wrapper(op, fn)
        op._recipe, op._home = recipe, home
        return op

    def __reduce__(self) -> Any:
        fn, *made = self._recipe
        return by_recipe(self, fn, (getattr(self, "__module__", None), self._home), _remake, tuple(made))

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """Read from an instance, an op of a plain function binds as the function does: the
        instance is its first argument (``backward(grad, self, x, output=...)``)."""
        if instance is None or not isinstance(self.__wrapped__, types.FunctionType):
            return self
        return types.MethodType(self, instance)

    def __set_name__(self, owner: type, name: str) -> None:
        """An op with ``fake=`` that binds (see ``__get__``) is refused as its class is made: its
        torch op would take the instance, which no torch.library schema can hold."""
        fn = self.__wrapped__
        if self._recipe[1].fake is None or not isinstance(fn, types.FunctionType):
            return
        raise TypeError(
            message(
                f"autoconvert.numpy_op() on {function_name(fn)}",
                "fake=",
                "registers a torch op, whose arguments are tensors and numbers; read from an instance, a "
                "method's op takes the instance as its first argument, which torch.compile cannot pass to it",
                f"the method {owner.__qualname__}.{name}",
                "decorate a module-level function that takes the arrays and the numbers the method reads of "
                "self (def scale(x: np.ndarray, k: float)) and call it from the method (return scale(x, self.k)); "
                "or drop fake= (the method's op then works eagerly and under torch.func, and torch.compile "
                "breaks the graph at its call)",
            )
        )

    # Atomic to copy, as functions are: a deepcopy of a module holding an op keeps it (by its
    # recipe it would be made again, its torch op with it).
    def __copy__(self) -> _Op:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Op:
        return self

    def __autoconvert_description__(self) -> Description:
        """The NumPy pair its eager calls without a graph run, with the torch op around it."""
        own: OpSettings = self._recipe[1]
        inner = described(self._forward)
        assert inner is not None  # a wrapper
        backward, jvp = ("given" if own.backward is not None else "none"), ("given" if own.jvp is not None else "none")
        if self._rule is not None:
            backward, jvp = self._rule.describe(), "the rule's" if self._rule.jvp is not None else "none"
        notes = (
            f"numpy_op(): a torch op; backward={backward}, fake={own.fake!r}, vmap={own.vmap!r}, jvp={jvp}"
            + (
                f", residuals={own.residuals!r} (returned after the results, kept for the rules)."
                if own.residuals
                else "."
            ),
            "A call that needs a gradient, or runs under torch.func or torch.compile, goes through the op; "
            "any other call runs the pair below directly.",
        )
        # The pair's own notes first (why torchify's other routes were not taken, where the op is
        # a SciPy function's rule's), then the op's; under torch.compile the op is what runs.
        compiled = (
            "each call is one node of the graph, its registered op (fake= gives its result's shape)"
            if own.fake is not None
            else "each call is one graph break, the op run eagerly: pass fake= to make it one node of the graph"
        )
        return dataclasses.replace(
            inner, made_by="numpy_op() around ", notes=(*inner.notes, *notes), compiled=compiled, torch_op=True
        )

    def __repr__(self) -> str:
        return f"<numpy_op {function_name(self.__wrapped__)}>"


def _grad_now(checked: dict[str, Any], made: str) -> str:
    """``grad=`` as this call sees it: the op's own option, else a ``config`` block's, else
    the default the op was ``made`` with."""
    block = active()
    grad: str = checked.get("grad", made if block is None else block.options.get("grad", made))
    return grad


def _nested(
    name: str, grad: tuple[dict[str, Any], str], args: tuple[Any, ...], kwargs: dict[str, Any], told: set[str]
) -> bool:
    """A tensor carrying a derivative (it requires grad, or has a forward-mode tangent) inside a
    container argument (a list, tuple, dict, namedtuple, dataclass or registered container, as
    ``accepts_numpy`` walks them) gets none: a backward gives one gradient, a jvp takes one
    tangent, per tensor argument. Said as a dropped gradient is (``grad``: what ``_grad_now``
    reads the call's ``grad=`` from), never silently; whether any was found."""
    found = False
    for i, value in enumerate(args):
        if type(value) is not torch.Tensor and _is_walked_container(value):  # the type first: a call fewer per tensor
            found = _say_nested(name, grad, _carrying(value, f"args[{i}]"), told) or found
    for key, value in kwargs.items():
        if type(value) is not torch.Tensor and _is_walked_container(value):
            found = _say_nested(name, grad, _carrying(value, key), told) or found
    return found


def _untracked(values: Any) -> tuple[Any, ...]:
    """``values`` with the tensors in their containers untracked (see ``untracked``): under
    torch.func, whose transforms wrap what they do not look into, they reach NumPy as values
    (their derivatives dropped, as ``_nested`` said); top-level tensors as they are."""
    with untransformed():  # else detach() wraps again
        return tuple(
            _UNTRACKED(v, None) if type(v) is not torch.Tensor and _is_walked_container(v) else v for v in values
        )


_UNTRACKED = Mapper({torch.Tensor: lambda t, ctx: untracked(t)})


def _is_walked_container(value: Any) -> bool:
    """Whether ``value`` is a container the library walks (one dict lookup once its type is known)."""
    handler = TENSORS.dispatch.get(type(value)) or TENSORS.resolve(type(value))
    return handler is not keep and handler is not record


def _say_nested(
    name: str, grad_of: tuple[dict[str, Any], str], found: list[tuple[str, str, str]], told: set[str]
) -> bool:
    """Say each of ``found`` (see ``_carrying``) as ``grad=`` says; whether there was any."""
    grad = _grad_now(*grad_of) if found else "detach"
    if grad == "detach":
        return bool(found)
    for where, what, kind in found:
        derivatives, way = ("gradients", "into") if what == _REQUIRES_GRAD else ("tangents", "out of")
        text = message(
            name,
            f"argument {where}",
            f"{what} inside a container, and a numpy_op gives {derivatives} to its tensor arguments alone: "
            f"none flows {way} it",
            f"a tensor that {what} in a {kind}",
            "pass it as an argument of its own, or .detach() it; grad='detach' silences this",
        )
        say_dropped(text, f"{where} ({what})", grad=grad, told=told, stacklevel=4)  # once each
    return True


_REQUIRES_GRAD = "requires grad"


def _carried(t: torch.Tensor) -> str | None:
    """The derivative ``t`` carries that an op gives only its positional tensor arguments: it
    requires grad (grad mode on), or it has a forward-mode tangent; None where neither."""
    if t.requires_grad and torch.is_grad_enabled():
        return _REQUIRES_GRAD
    if FORWARD_AD._current_level >= 0 and has_tangent(t):
        return "carries a forward-mode tangent"
    return None


def _carrying(value: Any, path: str) -> list[tuple[str, str, str]]:
    """``(path, what it carries, the container's kind)`` for each tensor in the container
    ``value`` that carries a derivative (see ``_carried``), at any depth."""
    kind = type(value).__qualname__
    found = ((keystr(path, keys), _carried(t)) for keys, t in TENSORS.leaves_with_paths(value))
    return [(where, what, kind) for where, what in found if what is not None]


def _untaken(rule: Any, name: str, grad: str, args: Any, kwargs: dict[str, Any], *, told: set[str]) -> None:
    """A tensor argument that requires grad, or carries a tangent, where the catalogue's rule
    gives none (``jv``'s order) is said dropped (see autoconvert._gradients._rule.say_untaken)."""
    for where, lost in rule.untaken(args, kwargs).items():
        say_untaken(name, rule.name, rule.takes, where, lost, grad=grad, told=told, stacklevel=3)


def _ruled(fn: Any, converting: Any, options: dict[str, Any]) -> Any:
    """torchify's host route for a SciPy function with a catalogue rule: ``converting``, its
    torchified pair, as the op's forward (see autoconvert._gradients._catalogue.hand_down);
    torchify's ``grad=`` says what a gradient the rule cannot give becomes. ``converting`` as it
    is where its writes reach the caller's tensors, which a rule has no formula for."""
    if gives_way("the gradient catalogue", options):
        return converting
    op = _make_op(fn, OpSettings(), {k: v for k, v in options.items() if k == "grad"}, None, forward=converting)
    for name in plan_of(converting).members(fn):  # a ufunc's methods (jv.outer) convert as before
        setattr(op, name, getattr(converting, name))
    return op


hand_down(_ruled)


def _remake(fn: Any, settings: OpSettings, checked: dict[str, Any], bound: dict[str, str] | None) -> Any:
    return _make_op(fn, settings, checked, None, bound=bound)


def _schema(
    fn: Callable[..., Any], name: str, fake: Fake, differentiable: bool, bound: dict[str, str] | None
) -> Schema:
    """``fn``'s schema, or a TypeError that says what to change."""
    names = (fake,) if isinstance(fake, str) else fake
    try:
        if not callable(names) and not (isinstance(names, tuple) and names and all(isinstance(n, str) for n in names)):
            raise SchemaError(
                "fake=",
                "must be a function, a parameter's name or a tuple of names",
                repr(fake),
                'pass e.g. fake="x" for results shaped like argument x',
            )
        schema = schema_of(fn, None if callable(names) else len(names), bound)
        for n in () if callable(names) else names:
            schema.place(n)
        for p in schema.parameters:
            if differentiable and p.keyword_only and "Tensor" in p.type:
                raise SchemaError(
                    f"parameter {p.name!r}",
                    "is a keyword-only array, which torch.library ops give no gradient",
                    "keyword-only",
                    "make it positional",
                )
    except SchemaError as e:
        where, problem, found, fix = e.parts
        raise TypeError(
            message(
                f"autoconvert.numpy_op() on {name}",
                where,
                f"{problem}, so no torch op can be registered",
                found,
                f"{fix}; or drop fake= (then each call is a graph break in torch.compile)",
            )
        ) from None
    return schema


def _check_residuals(fn: Callable[..., Any], name: str, settings: OpSettings) -> None:
    """``residuals=`` names what only the rules read: an op with one, by names its rules'
    other keywords do not take."""
    if settings.backward is None and settings.jvp is None:
        raise TypeError(
            message(
                f"autoconvert.numpy_op() on {name}",
                "residuals=",
                "saves arrays for the backward and jvp, and the op has neither",
                repr(settings.residuals),
                "pass backward= (or jvp=) that takes them by name, or drop residuals=",
            )
        )
    try:
        taken = {"output", *inspect.signature(fn).parameters}
    except (TypeError, ValueError):
        taken = {"output"}
    clash = [n for n in settings.residuals if n in taken]
    if clash:
        raise TypeError(
            message(
                f"autoconvert.numpy_op() on {name}",
                f"residual {clash[0]!r}",
                "is a name the rules already get (output=, or the function's own parameter)",
                repr(settings.residuals),
                "name the residual something else",
            )
        )


def _binder(
    fn: Callable[..., Any],
) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[tuple[Any, ...], dict[str, Any]]]:
    """Arguments given by keyword moved to their positions: gradients go to positional tensors.
    A tensor after a parameter left out (``trapezoid(y, dx=t)``) gets its place, the defaults
    before it filled in."""
    signature = signature_of(fn)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if signature is not None:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as e:
                raise unfitting(function_name(fn), signature, args, kwargs, e) from None
            if bound.kwargs:
                bound = _keywords_placed(signature, bound)
            args, kwargs = bound.args, bound.kwargs
        for key, value in kwargs.items():
            what = _carried(value) if isinstance(value, torch.Tensor) else None
            if what is not None:
                derivatives = "gradients" if what == _REQUIRES_GRAD else "tangents"
                raise GradientError(
                    message(
                        function_name(fn),
                        f"argument {key}",
                        f"{what}, but {derivatives} flow to positional tensor arguments only",
                        f"a keyword-only tensor that {what}",
                        f"make {key} a positional parameter, or pass {key}.detach()",
                    )
                )
        return args, kwargs

    return bind


def _keywords_placed(signature: inspect.Signature, bound: inspect.BoundArguments) -> inspect.BoundArguments:
    """``bound`` with the defaults filled in before the last positional parameter given a
    tensor by keyword, which is then passed by position (under torch.func, where no tensor
    requires grad, too)."""
    parameters = list(signature.parameters.values())
    tensors = [
        k
        for k, p in enumerate(parameters)
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and isinstance(bound.arguments.get(p.name), torch.Tensor)
    ]
    for p in parameters[: max(tensors, default=0)]:
        bound.arguments.setdefault(p.name, p.default)
    return bound


def _detached(values: Any) -> tuple[Any, ...]:  # pragma: no cover - runs under dynamo
    return tuple(v.detach() if isinstance(v, torch.Tensor) else v for v in values)


shows_options(numpy_op, [inspect.Parameter("fn", inspect.Parameter.POSITIONAL_ONLY, default=None)], "numpy_op")
