"""A mypy plugin: decorated functions typed as they behave at run time.

Enabled with ``plugins = ["autoconvert.mypy_plugin"]`` in a project's mypy configuration.
Without it, a decorator's overloads can keep either the parameters or the result of the
function they wrap, not change their types: ``accepts_numpy`` takes a tensor where an
array is annotated, so it must accept any arguments. The plugin rewrites the decorated
function's own signature instead, which composes through stacked decorators:

- ``accepts_numpy``: each parameter annotated as an ``ndarray`` (alone, in a union, or in a
  list, tuple, dict, ``Sequence`` or ``Mapping``) also takes a ``torch.Tensor``;
- ``returns_tensor``: each ``ndarray`` or NumPy scalar in the result is a ``torch.Tensor``;
- ``accepts_tensor`` and ``returns_numpy``: the same, the other way round;
- ``numpy_op``: both of the first two (its op takes tensors and gives tensors), the
  ``residuals=`` it names left out of the result; with ``fake=``, its ``NumpyOp`` is called
  so too, and on a method it is an error, as at run time;
- ``batched``: array parameters take a batch (a tensor, or a list or tuple of tensors);
  the result stays ``Any``, since whether the samples' results stack into one tensor or
  come back as a list depends on the values, whatever its options (``dtype=``, ``device=``:
  typed by ``BatchedOptions``) say of each tensor.

It imports mypy only (never torch or NumPy): types are found by their full names in what
mypy has already read, as autoconvert's own modules import both.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import CallExpr, FakeInfo, FuncDef, RefExpr, StrExpr, TupleExpr
from mypy.plugin import FunctionContext, MethodContext, Plugin
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    Overloaded,
    Parameters,
    ProperType,
    TupleType,
    Type,
    TypeOfAny,
    UnionType,
    get_proper_type,
)

NDARRAY = "numpy.ndarray"
NUMPY_SCALAR = "numpy.generic"
TENSOR_CLASS = "torch._tensor.Tensor"  # has_base compares full names: where the class is defined
NUMPY_OP = "autoconvert._numpy_op._ops.NumpyOp"
TENSOR_NAME = "torch.Tensor"  # named_generic_type looks names up from a package's own
#: The containers whose items a conversion reaches (the container registry's, as typeshed names them).
CONTAINERS = frozenset(
    {
        "builtins.list",
        "builtins.tuple",
        "builtins.dict",
        "typing.Sequence",
        "typing.Mapping",
        "typing.Iterable",
    }
)

HookContext = FunctionContext | MethodContext
#: How one leaf type is rewritten, given the call's context: None leaves it as it is.
LeafRewrite = Callable[[Instance, HookContext], Type | None]


def _rewrite(typ: Type, leaf: LeafRewrite, ctx: HookContext) -> Type:
    """``typ`` with each leaf ``leaf`` rewrites replaced, through unions, tuples and containers."""
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return UnionType.make_union([_rewrite(item, leaf, ctx) for item in proper.items])
    if isinstance(proper, TupleType):
        return proper.copy_modified(items=[_rewrite(item, leaf, ctx) for item in proper.items])
    if isinstance(proper, Instance):
        rewritten = leaf(proper, ctx)
        if rewritten is not None:
            return rewritten
        if proper.type.fullname in CONTAINERS:
            return proper.copy_modified(args=[_rewrite(arg, leaf, ctx) for arg in proper.args])
    return typ


def _named_type(ctx: HookContext, fullname: str, args: list[Type] | None = None) -> Type:
    """The type ``fullname`` names, or Any where mypy has not read its module."""
    try:
        return ctx.api.named_generic_type(fullname, args or [])
    except (KeyError, AssertionError):  # the module is not among those mypy follows
        return AnyType(TypeOfAny.special_form)


def _tensor(ctx: HookContext) -> Type:
    return _named_type(ctx, TENSOR_NAME)


def _array(ctx: HookContext) -> Type:
    anything = AnyType(TypeOfAny.special_form)
    return _named_type(ctx, NDARRAY, [anything, _named_type(ctx, "numpy.dtype", [anything])])


def _tensor_too(leaf: Instance, ctx: HookContext) -> Type | None:
    """An array parameter of ``accepts_numpy`` also takes a tensor."""
    return UnionType.make_union([leaf, _tensor(ctx)]) if leaf.type.has_base(NDARRAY) else None


def _array_too(leaf: Instance, ctx: HookContext) -> Type | None:
    """A tensor parameter of ``accepts_tensor`` also takes an array."""
    return UnionType.make_union([leaf, _array(ctx)]) if leaf.type.has_base(TENSOR_CLASS) else None


def _a_batch(leaf: Instance, ctx: HookContext) -> Type | None:
    """A sample's array parameter of ``batched`` takes a batch: a tensor, a list or tuple of them."""
    if not leaf.type.has_base(NDARRAY):
        return None
    tensor = _tensor(ctx)
    listed = _named_type(ctx, "builtins.list", [tensor])
    tupled = _named_type(ctx, "builtins.tuple", [tensor])
    return UnionType.make_union([leaf, tensor, listed, tupled])


def _as_tensor(leaf: Instance, ctx: HookContext) -> Type | None:
    """An array or NumPy scalar result of ``returns_tensor`` is a tensor."""
    return _tensor(ctx) if leaf.type.has_base(NDARRAY) or leaf.type.has_base(NUMPY_SCALAR) else None


def _as_array(leaf: Instance, ctx: HookContext) -> Type | None:
    """A tensor result of ``returns_numpy`` is an array."""
    return _array(ctx) if leaf.type.has_base(TENSOR_CLASS) else None


def _signature(
    func: Type, ctx: HookContext, parameter: LeafRewrite | None, result: LeafRewrite | None, keep: bool = True
) -> Type | None:
    """The decorated function's type: ``func``'s own, each parameter's and the result's leaves
    rewritten (``keep=False``: the result is Any); None where ``func`` is not a function."""
    proper = get_proper_type(func)
    if isinstance(proper, Overloaded):
        items = [_signature(item, ctx, parameter, result, keep) for item in proper.items]
        return Overloaded([item for item in items if isinstance(item, CallableType)])
    if not isinstance(proper, CallableType):
        return None
    params = proper.arg_types if parameter is None else [_rewrite(arg, parameter, ctx) for arg in proper.arg_types]
    returned = proper.ret_type if result is None else _rewrite(proper.ret_type, result, ctx)
    return proper.copy_modified(arg_types=params, ret_type=returned if keep else AnyType(TypeOfAny.special_form))


def _hook(
    parameter: LeafRewrite | None, result: LeafRewrite | None, keep: bool = True
) -> Callable[[HookContext], Type]:
    """The hook of a decorator applied to a function: bare (``accepts_numpy(f)``) or as its
    options' decorator (``accepts_numpy(copy=True)(f)``). Called with options alone, the
    decorator keeps its declared type, whose ``__call__`` this hook types in turn."""

    def typed(ctx: HookContext) -> Type:
        if not ctx.arg_types or not ctx.arg_types[0]:
            return ctx.default_return_type
        made = _signature(ctx.arg_types[0][0], ctx, parameter, result, keep)
        return ctx.default_return_type if made is None else made

    return typed


_PAIR_HOOK = _hook(_tensor_too, _as_tensor)


def _op(ctx: HookContext) -> Type:
    """``numpy_op``'s hook: as a pair's, and with ``fake=`` the ``NumpyOp`` it returns is given
    the function's rewritten parameters and result as its type arguments. With ``fake=`` on a
    method it reports the refusal the class's creation raises (see ``_Op.__set_name__``)."""
    made = get_proper_type(_PAIR_HOOK(ctx))
    residuals = _residuals(ctx)
    if residuals != 0:
        made = _without_residuals(made, residuals)
    declared = get_proper_type(ctx.default_return_type)
    if not (isinstance(declared, Instance) and declared.type.fullname == NUMPY_OP):
        return made
    if _is_method(ctx.arg_types[0][0] if ctx.arg_types and ctx.arg_types[0] else None):
        ctx.api.fail(FAKE_ON_A_METHOD, ctx.context)
        return AnyType(TypeOfAny.from_error)
    if not isinstance(made, CallableType):  # an overloaded function: one signature cannot say it
        return declared
    parameters = Parameters(made.arg_types, made.arg_kinds, made.arg_names)
    return declared.copy_modified(args=[parameters, made.ret_type])


def _residuals(ctx: HookContext) -> int | None:
    """How many residuals the ``numpy_op`` call (or decorator) names: 0 without
    ``residuals=``, None where its value is not written out as a name or a tuple of names."""
    context = ctx.context
    calls = [context] if isinstance(context, CallExpr) else getattr(context, "original_decorators", [])
    for call in calls:
        callee = call.callee if isinstance(call, CallExpr) else None
        if not (isinstance(callee, RefExpr) and callee.fullname.rpartition(".")[2] == "numpy_op"):
            continue
        for name, value in zip(call.arg_names, call.args, strict=True):
            if name != "residuals":
                continue
            if isinstance(value, StrExpr):
                return 1
            if isinstance(value, TupleExpr) and all(isinstance(item, StrExpr) for item in value.items):
                return len(value.items)
            return None
    return 0


def _without_residuals(made: ProperType, residuals: int | None) -> ProperType:
    """``made`` returning its annotated results without the last ``residuals`` (Any where they
    cannot be told apart): the caller never gets the residuals."""
    if isinstance(made, Overloaded):
        items = [_without_residuals(item, residuals) for item in made.items]
        return Overloaded([item for item in items if isinstance(item, CallableType)])
    if not isinstance(made, CallableType):
        return made
    returned = get_proper_type(made.ret_type)
    kept: Type = AnyType(TypeOfAny.special_form)
    if residuals is not None and isinstance(returned, TupleType) and len(returned.items) > residuals:
        results = returned.items[: len(returned.items) - residuals]
        kept = results[0] if len(results) == 1 else returned.copy_modified(items=results)
    return made.copy_modified(ret_type=kept)


#: What ``numpy_op(fake=...)`` on a method is told, as at run time (in short).
FAKE_ON_A_METHOD = (
    "numpy_op(fake=...) cannot decorate a method: its torch op would take the instance, which "
    "torch.compile cannot pass; decorate a module-level function taking what the method reads of "
    "self and call it from the method, or drop fake="
)


def _is_method(func: Type | None) -> bool:
    """Whether ``func`` is a function defined in a class body that binds to its instance."""
    proper = get_proper_type(func) if func is not None else None
    definition = proper.definition if isinstance(proper, CallableType) else None
    return (
        isinstance(definition, FuncDef)
        and not isinstance(definition.info, FakeInfo)
        and not (definition.is_static or definition.is_class)
    )


_DECORATORS = {
    "accepts_numpy": _hook(_tensor_too, None),
    "returns_tensor": _hook(None, _as_tensor),
    "accepts_tensor": _hook(_array_too, None),
    "returns_numpy": _hook(None, _as_array),
    "numpy_op": _op,
    "batched": _hook(_a_batch, None, keep=False),
}
#: Each decorator by its full name, and the type its options' form returns by its ``__call__``'s.
FUNCTIONS = {
    **{f"autoconvert._decorators._decorators.{name}": _DECORATORS[name] for name in list(_DECORATORS)[:4]},
    "autoconvert._numpy_op._ops.numpy_op": _DECORATORS["numpy_op"],
    "autoconvert._batched._batched.batched": _DECORATORS["batched"],
}
METHODS = {
    "autoconvert._decorators._decorators.AcceptsNumpy.__call__": _DECORATORS["accepts_numpy"],
    "autoconvert._decorators._decorators.ReturnsTensor.__call__": _DECORATORS["returns_tensor"],
    "autoconvert._decorators._decorators.AcceptsTensor.__call__": _DECORATORS["accepts_tensor"],
    "autoconvert._decorators._decorators.ReturnsNumpy.__call__": _DECORATORS["returns_numpy"],
    "autoconvert._numpy_op._ops.OpDecorator.__call__": _DECORATORS["numpy_op"],
    "autoconvert._numpy_op._ops.FakeOpDecorator.__call__": _DECORATORS["numpy_op"],
    "autoconvert._batched._batched.BatchedDecorator.__call__": _DECORATORS["batched"],
}


class AutoconvertPlugin(Plugin):
    """Types the decorators' results; everything else is mypy's."""

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        return FUNCTIONS.get(fullname)

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return METHODS.get(fullname)


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: the same plugin for every mypy version the test extra allows."""
    return AutoconvertPlugin
