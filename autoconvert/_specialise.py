"""The specialised call: one flat function per decorated function, generated from its plan.

Like attrs' generated ``__init__``: the source is written once per kind of plan, for
exactly its sides and options, and compiled with a readable filename in ``linecache``.
Per positional count it unpacks the arguments, converts each bare tensor (or array), and
each item of an exact dict, list or tuple of them, inline (returns_tensor alone records the
CPU tensors instead), and converts an array result, or an exact tuple, list or dict of
them, straight to tensors (or a tensor result to an array); it has no loop over a plan
and no branch on options. It comes in three forms: the wrapper's
``__call__``, wrapt's bound ``call``, and a method form for a plain function called
through an instance (see _decorators.wrap). For a plain function the first and the last
take its own signature (the exact forms, one source per signature shape), so CPython
binds positions and keywords as for the function itself, at no cost of ours. A callable
that calls pass a known count of arguments positionally (a ufunc's inputs) gets a
``__call__`` taking those, which takes any other call as the ``*args`` form does, in the
same frame (the leading form).

Anything it does not cover (a nested container, a tensor NumPy cannot share, a result
item torch cannot share, an error to report) goes to the generic ``Runner`` call,
which gives the same result and the message with the argument's path. The guards come
first, as in the generic call: the compile escape, then the hand-over to a watched Runner
for ``config``/``stats`` blocks and the profiler.

``enabled`` is the test switch: False makes every plan built afterwards use the generic
call alone (``pytest --generic-calls``), so the suite proves both paths give one result.
"""

from __future__ import annotations

import functools
import textwrap
import types
from collections.abc import Callable
from types import CodeType
from typing import Any, NamedTuple

import numpy as np
import torch

from ._config import _ACTIVE
from ._devices import CPU, default_device
from ._dtypes import WIDENED
from ._errors import LeafError
from ._escape import compiling, opaque
from ._exact import Shape, compiled, leading_of, shape_of, splitter, with_signature
from ._inputs import Inputs, NumpyInputs, RecordingInputs, TensorInputs
from ._leaves import SMALL_COPY_BYTES, Target, array_to_tensor
from ._observe import PROFILER
from ._outputs import NumpyOutputs, Outputs, TensorOutputs
from ._signature import Selection

Call = Callable[[Callable[..., Any], object, tuple[Any, ...], dict[str, Any]], Any]

#: False: plans use the generic call only (the test switch, see the module docstring).
enabled = True
#: A leading form's default for its parameters: nobody else's object, so never an argument.
_MISSING = object()
#: Positional counts with a branch of their own; calls with more go to the generic call.
MOST_POSITIONAL = 8

# Per value ``{v}``: the name it is converted in place under; a value the flat code does not cover takes
# the whole call to the generic path, which converts it (or reports it) with its path. A bare tensor
# NumPy shares becomes a read-only array; so do the values of an exact dict of them. With
# grad="detach", a tensor that requires grad too, detached (what the generic call does: its
# memory is the caller's, on the CPU, in a dtype NumPy has, so results go back as for the rest).
_NUMPY_LEAF = """\
{i}plain = True
{i}try:
{i}    {v} = {tensor}.numpy(){private}
{i}except (TypeError, RuntimeError{memory}):
{i}    return generic(wrapped, instance, args, kwargs)
"""
_READ_ONLY = "{i}{v}.setflags(False)\n"
# copy=True: a private copy in the tensor's layout, as tensor_to_array makes it (where one
# cannot be allocated, the generic call says so with the tensor's path).
_PRIVATE = '.copy("K")'
_NUMPY_VALUE = """\
{i}kind = type({v})
{i}if kind is Tensor{shares}:
{leaf}{i}elif kind in kept:  # a float, a string: as it is
{i}    pass
{i}elif kind is dict and get(kind) is walk_dict:
{i}    changed = False
{i}    items = {{}}
{i}    for item_key, item in {v}.items():
{item}{i}        items[item_key] = item
{i}    if changed:
{i}        {v} = items
{i}elif (kind is list or kind is tuple) and get(kind) is walk_sequence:
{i}    changed = False
{i}    items = []
{i}    for item in {v}:
{item}{i}        items.append(item)
{i}    if changed:
{i}        {v} = items if kind is list else tuple(items)
{i}else:
{i}    return generic(wrapped, instance, args, kwargs)
"""
# An item of an exact dict, list or tuple: converted as a bare value is, or left as it is;
# any other item (a nested container, a tensor NumPy cannot share) sends the call on.
_NUMPY_ITEM = """\
{i}item_kind = type(item)
{i}if item_kind is Tensor{shares}:
{leaf}{i}    changed = True
{i}elif item_kind not in kept:
{i}    return generic(wrapped, instance, args, kwargs)
"""
# A value left as it is (returns_tensor alone, a parameter accepts_numpy's only=/exclude= passes
# on): a CPU tensor whose results come back uncast sets ``plain`` (the output side's vote
# then gives the CPU); any other tensor, and a container, sends the call to the generic
# call, whose recording walk finds them.
_RECORDED_VALUE = """\
{i}kind = type({v})
{i}if kind is Tensor:
{i}    if not {v}.is_cpu or {v}.dtype in restored:
{i}        return generic(wrapped, instance, args, kwargs)
{i}    plain = True
{i}elif kind not in kept:
{i}    return generic(wrapped, instance, args, kwargs)
"""
# A value accepts_tensor's only=/exclude= passes on: tensors and arrays go through as they are
# (no output side of a flat call asks where its tensors were); a container, or another value
# this side would convert, sends the call to the generic call, whose recording walk it is.
_KEPT_VALUE = """\
{i}kind = type({v})
{i}if kind is not Tensor and kind is not ndarray and kind not in kept:
{i}    return generic(wrapped, instance, args, kwargs)
"""
_TENSOR_VALUE = """\
{i}kind = type({v})
{i}if kind is ndarray:
{i}    if placed is None:
{i}        placed = device or default_device()
{i}    try:
{convert}{i}    except {errors}:
{i}        return generic(wrapped, instance, args, kwargs)
{i}elif kind is not Tensor and kind not in kept:
{i}    return generic(wrapped, instance, args, kwargs)
"""
_TO_TENSOR = "{i}        {v} = to_tensor({v}, Target(placed, casts, copy))\n"
# Uncast and not copied: array_to_tensor's sharing step inlined, as for results (a frame
# fewer per array). What from_numpy refuses (a dtype torch lacks,
# byte order) goes to the generic call, which converts or reports it.
_SHARES_ARRAY = """\
{i}        flags = {v}.flags
{i}        if placed is CPU and flags.behaved and flags.forc:
{i}            {v} = from_numpy({v})
{i}        else:
{i}            {v} = to_tensor({v}, Target(placed, casts, copy))
"""
# A result the flat code leaves to the output side's generic conversion, with the call's
# tensors where it converted or recorded one (``plain``), found again only now.
_ANY_RESULT = (
    "    return convert_out(result, tensors_in(args, kwargs) if plain else [], [], (args, kwargs, instance))\n"
)
# Results: an array comes back through the one array -> tensor function, with the target a
# call whose tensors NumPy all shared has (decided when the plan was built), which is also a
# call's without tensors while torch's default device is the CPU; any other result, to
# _ANY_RESULT, which follows.
_TO_TENSOR_RESULT = """\
    if plain or default_device() is CPU:
        kind = type(result)
        if kind is ndarray:
{array}            try:
                return to_tensor(result, shared_target)
            except LeafError as e:
                raise e.public(function, "", "result") from None
{containers}"""
# Where the result stays on the CPU uncast, array_to_tensor's first two steps, inlined (a
# frame fewer per result; a returned view is copied on purpose, with the ``copy=None``
# check the template is chosen by).
_SHARES = """\
            flags = result.flags
            if flags.forc:
                if flags.behaved:
                    try:
                        return from_numpy(result)
                    except (TypeError, ValueError):
                        pass
"""
# ``copy=None`` only: a read-only array (a view of an input, most often) copied once by NumPy.
_COPIES_READ_ONLY = """\
                elif flags.aligned and result.nbytes < small_copy:
                    try:
                        return from_numpy(result.copy("K"))
                    except (TypeError, ValueError):  # a dtype torch lacks, byte order
                        pass
"""
# An exact tuple, list or dict of arrays NumPy lets torch share (what a batch comes back as):
# walked here, the same result as the Mapper's walk; any other item sends the whole result to
# the generic output side.
_SHARED_ITEM = """\
{i}if type(item) is ndarray:
{i}    flags = item.flags
{i}    if not (flags.behaved and flags.forc):
{i}        break
{i}    try:
{i}        item = from_numpy(item)
{i}    except (TypeError, ValueError):
{i}        break
{i}    changed = True
{i}elif type(item) not in kept_out:
{i}    break
"""
_SHARED_CONTAINERS = """\
        elif (kind is tuple or kind is list) and get_out(kind) is walk_sequence_out:
            changed = False
            out = []
            for item in result:
{item}                out.append(item)
            else:
                return result if not changed else out if kind is list else tuple(out)
        elif kind is dict and get_out(dict) is walk_dict_out:
            changed = False
            out = {{}}
            for item_key, item in result.items():
{item}                out[item_key] = item
            else:
                return out if changed else result
"""
_TO_ARRAY_RESULT = """\
    if type(result) is Tensor and not result.requires_grad:
        try:
            return result.numpy()
        except (TypeError, RuntimeError):
            pass
"""


class Flat:
    """A plan's flat call, in its three forms: ``call(wrapped, instance, args, kwargs)`` for
    wrapt's bound calls; ``bind``'s ``__call__`` for the wrapper's unbound calls, which
    holds ``wrapped`` and ``instance`` as constants; and ``method``'s form for a plain
    function called through an instance. The last two take the function's own signature
    where ``_exact.shape_of`` can spell it (see ``_exact``), else ``*args, **kwargs``."""

    __slots__ = ("call", "codes", "kind", "namespace", "selection")

    def __init__(
        self, kind: Kind, codes: tuple[CodeType, ...], namespace: dict[str, Any], selection: Selection | None = None
    ) -> None:
        self.kind, self.codes, self.namespace, self.selection = kind, codes, namespace, selection
        exec(codes[0], namespace)  # our own source, compiled in specialised()
        self.call: Call = namespace["call"]

    def bind(self, wrapped: Any) -> tuple[Callable[..., Any], dict[str, Any]]:
        """``__call__`` for a wrapper of ``wrapped``, and its namespace (set ``instance`` there):
        a staticmethod with the function's own signature; else, where calls pass a known count
        of arguments positionally (a ufunc's inputs, see _exact.leading_of), a staticmethod
        taking those and ``*args, **kwargs``, which takes any other call as the ``*args`` form; else
        ``__call__(self, *args, **kwargs)``."""
        namespace = {**self.namespace, "wrapped": wrapped, "instance": None}
        exact = self._exact(wrapped, namespace, method=False)
        if exact is not None:
            return staticmethod(exact), namespace
        count = leading_of(wrapped) if self.selection is None else 0
        if not 0 < count <= MOST_POSITIONAL:
            exec(self.codes[1], namespace)
            return namespace["__call__"], namespace
        key = (self.kind, count)
        code = _LEADING.get(key) or _LEADING.setdefault(key, compiled(_leading_source(self.kind, count), "flat call"))
        exec(code, namespace)
        return staticmethod(namespace["__call__"]), namespace

    def method(self, function: types.FunctionType) -> Callable[..., Any]:
        """``function``'s flat call through an instance, for a wrapper's ``__get__`` to bind
        (a bound method, as the function itself would give): ``function(instance, ...)``, the
        instance never converted; the generic call gets the bound method, as from wrapt."""
        generic = self.namespace["generic"]

        def bound_generic(function: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            return generic(types.MethodType(function, instance), instance, args, kwargs)

        namespace = {**self.namespace, "wrapped": function, "generic": bound_generic}
        exact = self._exact(function, namespace, method=True)
        if exact is not None:
            return exact
        exec(self.codes[2], namespace)
        return functools.update_wrapper(namespace["method"], function)

    def _exact(self, function: Any, namespace: dict[str, Any], *, method: bool) -> Callable[..., Any] | None:
        """The flat call with ``function``'s own signature (see _exact), so that CPython binds
        the arguments, keywords included, and its messages for a bad call name the function;
        None where ``function`` has no such signature, or no parameter to take the instance."""
        shape = shape_of(function)
        if shape is None or (method and not shape.positional):
            return None
        first = 1 if method else 0
        namespace["split"] = splitter(function, shape, first=first)
        names = function.__code__.co_varnames[first : shape.arity]
        passed = self._passed(names)
        written = frozenset(k for k, name in enumerate(names) if name in namespace["writes"])
        source = functools.partial(_exact_source, self.kind, method, shape=shape, passed=passed, written=written)
        key = ("flat call", *self.kind, method, passed, written)
        return with_signature(function, shape, key, source, namespace)

    def _passed(self, names: tuple[str, ...]) -> frozenset[int]:
        """The parameters (by position, the instance's not counted) that ``only=``/``exclude=``
        pass on unconverted."""
        selection = self.selection
        if selection is None:
            return frozenset()
        return frozenset(k for k, name in enumerate(names) if (name in selection.names) != selection.keep)


def specialised(
    inputs: Inputs | None, outputs: Outputs | None, function: str, generic: Call, failed: Callable[..., None]
) -> Flat | None:
    """The flat call for a plan with these sides, or None where it has none (the generic
    call is then the only one; ``generic_because`` says why)."""
    if generic_because(inputs, outputs) is not None:
        return None
    value = _value_code(inputs)
    result = _result_code(inputs, outputs)
    writes = inputs.writes if isinstance(inputs, NumpyInputs) else None
    namespace: dict[str, Any] = {
        "Tensor": torch.Tensor,
        "float16": torch.float16,
        "ndarray": np.ndarray,
        "LeafError": LeafError,
        "compiling": compiling,
        "opaque": opaque,
        "active": _ACTIVE.get,
        "profiler": PROFILER,
        "default_device": default_device,
        "Target": Target,
        "CPU": CPU,
        "to_tensor": array_to_tensor,
        "from_numpy": torch.from_numpy,
        "small_copy": SMALL_COPY_BYTES,
        "generic": generic,
        "function": function,
        "get": inputs.mapper.dispatch.get if inputs is not None else {}.get,
        "kept": inputs.mapper.kept if inputs is not None else frozenset(),
        "walk_dict": inputs.mapper.walk_dict if inputs is not None else None,
        "walk_sequence": inputs.mapper.walk_sequence if inputs is not None else None,
        # The call's tensors, for a result the flat code leaves to the output side (it votes on
        # them, or unaliases a tensor result): the flat code keeps only a flag, ``plain``. Any
        # call that gets there has no tensor deeper than the flat code walks.
        "tensors_in": inputs.tensors_in if inputs is not None else None,
        "convert_out": outputs.convert if outputs is not None else None,
        "failed": failed,
        "missing": _MISSING,
        "restored": outputs.restoring if isinstance(outputs, TensorOutputs) else {},
        "writes": writes.names if writes is not None else frozenset(),
    }
    # The containers the flat code walks are decided now (as the Mappers would on first sight),
    # so the first call walks them too; a registration later makes the generic call decide again.
    if isinstance(inputs, NumpyInputs):
        for cls in (tuple, list, dict):
            inputs.mapper.resolve(cls)
    if isinstance(inputs, TensorInputs):
        namespace.update(device=inputs.device, casts=inputs.fixed_casts, copy=inputs.copy)
    if isinstance(outputs, TensorOutputs):
        mapper = outputs.mapper
        for cls in (tuple, list, dict):
            mapper.resolve(cls)
        namespace.update(
            shared_target=outputs.all_plain,
            get_out=mapper.dispatch.get,
            kept_out=mapper.kept,
            walk_sequence_out=mapper.walk_sequence,
            walk_dict_out=mapper.walk_dict,
        )
    # Calls passing an out-parameter go to the generic call, which hands it over writable: by
    # keyword, or positionally from ``writes_at`` on (past MOST_POSITIONAL: by keyword only).
    writes_at = None if writes is None else writes.first_position(0)
    if writes is not None and writes_at is None:
        writes_at = MOST_POSITIONAL + 1
    kind = Kind(
        value,
        result,
        isinstance(inputs, TensorInputs),
        isinstance(inputs, NumpyInputs) and inputs.readonly,
        writes_at,
    )
    selection = inputs.selection if inputs is not None else None
    if selection is not None:  # which values it converts is known by name: the exact forms only
        return Flat(kind, _DELEGATING, namespace, selection)
    codes = _CODES.get(kind) or _CODES.setdefault(kind, tuple(compiled(_source(h, kind), "flat call") for h in _HEADS))
    return Flat(kind, codes, namespace)


#: Per value: its conversion's source, given the indent and the name the value is held in.
Template = Callable[[str, str], str]


class Kind(NamedTuple):
    """What the flat call's code depends on (plans of one kind share their code)."""

    value: Template  # each argument's conversion
    result: str  # the result's
    places: bool  # the function gets tensors placed on a device
    hands_read_only: bool  # the function gets read-only arrays
    writes_at: int | None  # the first positional out-parameter (None: it has none)


#: The three forms' code per kind of plan (a few per program): what differs between plans of a
#: kind (the function, its sides' options) is in their namespaces.
_CODES: dict[Kind, tuple[CodeType, ...]] = {}
_HEADS = (
    "call(wrapped, instance, args, kwargs)",
    "__call__(self, *args, **kwargs)",
    "method(instance, *args, **kwargs)",
)
#: How the templates spell the call's arguments (for the generic call, and the output side's
#: messages); the exact forms, which have no ``args``, spell them ``*split(p0, ...)``.
_ARGUMENTS = "args, kwargs"
#: The three forms for a plan with a selection (only=/exclude=), which the exact forms serve:
#: without a signature to name the parameters by, each call goes to the generic call.
_DELEGATING = tuple(
    compiled(f"def {h}:\n    return generic(wrapped, instance, {_ARGUMENTS})\n", "flat call") for h in _HEADS
)


def _numpy_template(i: str, v: str, *, detach: bool, private: bool, widens: bool) -> str:
    """``_NUMPY_VALUE`` for ``v`` and its containers' items: with ``detach``, a tensor that
    requires grad is detached; without, it leaves the flat code (the generic call has a word
    to say). Arrays are read-only views of the tensors' memory, or ``private`` copies. Where
    float16 ``widens``, a float16 tensor leaves the flat code too (the generic call widens it,
    and narrows the results back)."""

    def tensor(name: str) -> str:
        return f"({name}.detach() if {name}.requires_grad else {name})" if detach else name

    def shares(name: str) -> str:
        grad = "" if detach else f" and not {name}.requires_grad"
        half = f" and {name}.dtype is not float16" if widens else ""
        return grad + half

    def leaf(indent: str, name: str) -> str:
        copy = {"private": _PRIVATE, "memory": ", MemoryError"} if private else {"private": "", "memory": ""}
        code = _NUMPY_LEAF.format(i=indent, v=name, tensor=tensor(name), **copy)
        return code if private else code + _READ_ONLY.format(i=indent, v=name)

    item_indent = i + " " * 8
    item = _NUMPY_ITEM.format(i=item_indent, leaf=leaf(item_indent + "    ", "item"), shares=shares("item"))
    return _NUMPY_VALUE.format(i=i, v=v, leaf=leaf(i + "    ", v), item=item, shares=shares(v))


#: The NumPy side's templates by (detach, private, widens), made once so that plans' kinds compare equal.
_NUMPY_VALUES: dict[tuple[bool, bool, bool], Template] = {
    (detach, private, widens): functools.partial(_numpy_template, detach=detach, private=private, widens=widens)
    for detach in (False, True)
    for private in (False, True)
    for widens in (False, True)
}


def _recorded_value(i: str, v: str) -> str:
    return _RECORDED_VALUE.format(i=i, v=v)


def _kept_value(i: str, v: str) -> str:
    return _KEPT_VALUE.format(i=i, v=v)


def _tensor_value(i: str, v: str) -> str:
    return _TENSOR_VALUE.format(i=i, v=v, convert=_TO_TENSOR.format(i=i, v=v), errors="LeafError")


def _shared_tensor_value(i: str, v: str) -> str:
    convert = _SHARES_ARRAY.format(i=i, v=v)
    return _TENSOR_VALUE.format(i=i, v=v, convert=convert, errors="(LeafError, TypeError, ValueError)")


def _unconverted(i: str, v: str) -> str:
    return ""


_TO_GENERIC = "{i}return generic(wrapped, instance, args, kwargs)\n"


def generic_because(inputs: Inputs | None, outputs: Outputs | None) -> str | None:
    """Why a plan with these sides has no flat call, in words (``autoconvert.explain`` shows
    them); None where it has one."""
    if not enabled:
        return "flat calls are turned off (the test suite's --generic-calls)"
    if isinstance(inputs, NumpyInputs) and inputs.writeback:
        return "writeback=True writes the arrays back into the caller's tensors after the call"
    if isinstance(inputs, NumpyInputs) and inputs.check_writes:
        return "check_writes=True compares the caller's tensors with their copies after the call"
    if isinstance(inputs, TensorInputs) and inputs.dtype == "input":
        return "dtype='input' casts by the dtypes of all the call's tensors, known once every argument is seen"
    if isinstance(outputs, TensorOutputs) and outputs.all_plain is None:
        return "dtype='input' casts results by the dtypes of the call's tensors"
    if isinstance(inputs, TensorInputs) and isinstance(outputs, TensorOutputs):
        return "accepts_tensor with returns_tensor: results are placed by the tensors the arguments became"
    return None


def _value_code(inputs: Inputs | None) -> Template:
    """The per-value template for this input side (one ``generic_because`` lets through)."""
    if inputs is None:
        return _unconverted
    if isinstance(inputs, RecordingInputs):
        return _recorded_value
    if isinstance(inputs, NumpyInputs):
        return _NUMPY_VALUES[inputs.grad.mode == "detach", not inputs.readonly, inputs.widened is not WIDENED]
    assert isinstance(inputs, TensorInputs)
    return _tensor_value if inputs.fixed_casts or inputs.copy else _shared_tensor_value


def _result_code(inputs: Inputs | None, outputs: Outputs | None) -> str:
    if outputs is None:
        return "    return result\n"
    if isinstance(outputs, TensorOutputs):
        # The shared target holds only when every tensor argument was NumPy's to share.
        shared = outputs.all_plain
        assert shared is not None  # dtype="input" takes the generic call (generic_because)
        if shared.device is not CPU or shared.casts or shared.copy:  # placed, cast or copied by to_tensor
            return _TO_TENSOR_RESULT.format(array="", containers="") + _ANY_RESULT
        array = _SHARES + (_COPIES_READ_ONLY if shared.copy is None else "")
        containers = _SHARED_CONTAINERS.format(item=_SHARED_ITEM.format(i=" " * 16))
        return _TO_TENSOR_RESULT.format(array=array, containers=containers) + _ANY_RESULT
    assert isinstance(outputs, NumpyOutputs)
    return (_TO_ARRAY_RESULT if outputs.copy is not True else "") + _ANY_RESULT


def _source(head: str, kind: Kind) -> str:
    """The flat call's source: the guards, one branch per positional count (its conversions,
    the keywords', the call), then the result's conversion. The method form calls
    ``wrapped`` (the function) with the instance first. A call passing an out-parameter
    (from position ``writes_at``, or by keyword) goes to the generic call."""
    value, result, places, hands_read_only, writes_at = kind
    first = "instance, " if head.startswith("method(") else ""
    lines = [f"def {head}:", *_opening(places), "    n = len(args)"]
    keyword = value(" " * 16, "value").rstrip("\n")
    if writes_at is not None:
        lines += ["    if kwargs and not writes.isdisjoint(kwargs):", _TO_GENERIC.format(i=" " * 8).rstrip("\n")]
        # The call form may be bound (its args start after the instance): it counts from one sooner.
        writes_at -= 0 if head.startswith("__call__") else 1
    for count in range(MOST_POSITIONAL + 1):
        names = [f"a{k}" for k in range(count)]
        lines.append(f"    {'if' if count == 0 else 'elif'} n == {count}:")
        if writes_at is not None and count > writes_at:
            lines.append(_TO_GENERIC.format(i=" " * 8).rstrip("\n"))
            continue
        if count:
            lines.append(f"        {', '.join(names)}, = args")
        lines += [code for name in names if (code := value(" " * 8, name).rstrip("\n"))]
        given = "".join(f"{name}, " for name in names)
        lines += [
            "        if kwargs:",
            "            new_kwargs = {}",
            "            for key, value in kwargs.items():",
            *([keyword] if keyword else []),
            "                new_kwargs[key] = value",
        ]
        lines += _called(f"{first}{given}**new_kwargs", f"({given}), new_kwargs", hands_read_only, "            ")
        lines.append("        else:")
        lines += _called(f"{first}{given}".rstrip(", "), f"({given}), kwargs", hands_read_only, "            ")
    lines += ["    else:", "        return generic(wrapped, instance, args, kwargs)"]
    return "\n".join(lines) + "\n" + result


def _opening(places: bool) -> list[str]:
    """Every form's first lines: the guards, in the generic call's order (the compile escape,
    then the hand-over to a watched Runner), and the per-call state."""
    lines = [
        "    if compiling():",
        f"        return opaque(generic, wrapped, instance, {_ARGUMENTS})",
        "    if active() is not None or profiler._is_profiler_enabled:",
        f"        return generic(wrapped, instance, {_ARGUMENTS})",
        "    plain = False",
    ]
    return [*lines, "    placed = None"] if places else lines


def _called(arguments: str, handed: str, hands_read_only: bool, indent: str) -> list[str]:
    """The call itself; where the function got read-only arrays, NumPy refusing a write into
    one of them becomes a ReadOnlyError (see Runner.failed)."""
    if not hands_read_only:
        return [f"{indent}result = wrapped({arguments})"]
    return [
        f"{indent}try:",
        f"{indent}    result = wrapped({arguments})",
        f"{indent}except BaseException as e:",
        f"{indent}    failed(e, None, None, (args, kwargs, instance), handed=({handed}), read_only=plain)",
        f"{indent}    raise",
    ]


def _exact_source(
    kind: Kind,
    method: bool,
    *,
    shape: Shape,
    passed: frozenset[int],
    written: frozenset[int],
    arguments: str = "",
) -> str:
    """An exact form's source: the function's parameters as ``p0``, ``p1``..., each converted
    into ``c0``, ``c1``... (a parameter left at its default is not: the generic call never
    sees defaults), then the call and the result's conversion. The method form's ``p0`` is
    the instance, never converted. A ``passed`` parameter (a selection's) is only recorded
    (NumPy side) or let through (tensor side); a ``written`` one (an out-parameter) sends a
    call passing it to the generic call. ``arguments`` spells the call's arguments for the
    generic call, ``*split(p0, ...)`` unless given."""
    value, result, places, hands_read_only, _ = kind
    count = shape.arity
    lines = [f"def __call__({shape.parameters()}):", *(["    instance = p0"] if method else []), *_opening(places)]
    handed = ["p0"] if method else []
    first = len(handed)
    for k in sorted(first + w for w in written):  # checked first: a call passing one converts nothing here
        unless_default = f" and p{k} is not d{k}" if k in shape.defaulted else ""
        lines += [f"    if p{k} is not None{unless_default}:", _TO_GENERIC.format(i=" " * 8).rstrip("\n")]
    for k in range(first, count):
        defaulted = k in shape.defaulted
        template = value if k - first not in passed else _kept_value if places else _recorded_value
        template = _unconverted if k - first in written else template
        code = template(" " * (8 if defaulted else 4), f"c{k}").rstrip("\n")
        if code:
            lines.append(f"    c{k} = p{k}")
            lines += [f"    if p{k} is not d{k}:", code] if defaulted else [code]
        handed.append(f"c{k}" if code else f"p{k}")
    lines += _called(
        shape.passed(handed), f"({''.join(f'{name}, ' for name in handed)}), {{}}", hands_read_only, "    "
    )
    given = ", ".join(f"p{k}" for k in range(1 if method else 0, count))
    return ("\n".join(lines) + "\n" + result).replace(_ARGUMENTS, arguments or f"*split({given})")


#: The leading forms' code per (kind of plan, count of leading positional parameters).
_LEADING: dict[tuple[Kind, int], CodeType] = {}


def _leading_source(kind: Kind, count: int) -> str:
    """The form for a callable that calls pass ``count`` arguments positionally (see
    _exact.leading_of): a call passing exactly those, positionally, is the exact form's for
    that shape; CPython binds them with no ``len(args)`` to branch on. Any other call, which
    leaves a parameter at ``missing`` or fills ``args``/``kwargs``, puts the positional ones
    back in ``args`` and goes on as the ``*args`` form, in the same frame."""
    names = [f"p{k}" for k in range(count)]
    exact = _exact_source(
        kind,
        False,
        shape=Shape(count, count, (), ()),
        passed=frozenset(),
        written=frozenset(),  # a ufunc's outputs follow its inputs
        arguments=f"({''.join(f'{name}, ' for name in names)}), {{}}",
    )
    # Positional-only parameters fill from the left: the first one at ``missing`` ends them.
    lines = [f"def __call__({''.join(f'{name}=missing, ' for name in names)}/, *args, **kwargs):"]
    lines.append(f"    if args or kwargs or {names[-1]} is missing:")
    for k in range(count, 0, -1):
        given = "".join(f"{name}, " for name in names[:k])
        lines += [
            f"        {'if' if k == count else 'elif'} {names[k - 1]} is not missing:",
            f"            args = ({given}) + args",
        ]
    star = _source("__call__(*args, **kwargs)", kind)
    star = star.partition("\n")[2]
    return "\n".join(lines) + "\n" + textwrap.indent(star, "    ") + exact.partition("\n")[2]
