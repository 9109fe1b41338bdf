"""The flat call's source, written from a plan's kind by small emitters, one per kind of step.

A ``Kind`` says what a plan's flat code depends on: how each argument is converted (a
``Step``), how the result is (a ``Result``), and three flags. The forms (``star_source``,
``exact_source``, ``leading_source``) lay out the guards, the branches and the call, and ask
an emitter for each value and for the result; each emitter appends its lines to a
``Script`` at an indent level. The script also knows how the call's arguments are spelled
where a line hands the call to the generic call: ``args, kwargs`` in the ``*args`` forms,
``*split(p0, ...)`` in the exact forms. A torchified object's methods have a form of their
own (``proxy_source``). ``tests/golden/`` pins what they write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ._exact import Shape

#: Positional counts with a branch of their own; calls with more go to the generic call.
MOST_POSITIONAL = 8
#: How the ``*args`` forms spell the call's arguments.
ARGUMENTS = "args, kwargs"


class Step(NamedTuple):
    """How the flat code converts one value (see ``VALUES``)."""

    kind: str  # "numpy", "tensor", "recorded", "kept" or "unconverted"
    detach: bool = False  # numpy: a tensor that requires grad is detached, not sent on
    private: bool = False  # numpy: a private copy (copy=True), not a read-only view
    widens: bool = False  # numpy: float16 is widened, so a float16 tensor is sent on
    shares: bool = False  # tensor: from_numpy inlined (uncast, not copied)


class Result(NamedTuple):
    """How the flat code converts the result (see ``emit_result``)."""

    kind: str  # "none" (as it is), "tensor" or "array"
    shares: bool = False  # tensor: torch shares an array (and exact containers of them) inline
    copies_read_only: bool = False  # tensor: a read-only array copied once by NumPy (copy=None)
    converts: bool = True  # array: a tensor's .numpy() inline (not with copy=True)


class Kind(NamedTuple):
    """What the flat call's code depends on (plans of one kind share their code)."""

    value: Step  # each argument's conversion
    result: Result  # the result's
    places: bool  # the function gets tensors placed on a device
    hands_read_only: bool  # the function gets read-only arrays
    writes_at: int | None  # the first positional out-parameter (None: it has none)


RECORDED = Step("recorded")
KEPT = Step("kept")
UNCONVERTED = Step("unconverted")


class Script:
    """Lines of generated source; ``arguments`` spells the call's arguments for the generic
    call, and ``base`` indents everything added (the leading form nests the ``*args`` form)."""

    __slots__ = ("arguments", "base", "lines")

    def __init__(self, arguments: str = ARGUMENTS) -> None:
        self.arguments = arguments
        self.base = 0
        self.lines: list[str] = []

    def add(self, level: int, *lines: str) -> None:
        pad = "    " * (self.base + level)
        self.lines += [pad + line for line in lines]

    def to_generic(self, level: int) -> None:
        """The line that hands the whole call to the generic call, which converts or reports it."""
        self.add(level, f"return generic(wrapped, instance, {self.arguments})")

    def part(self) -> Script:
        """An empty script with these spellings, whose lines go into this one afterwards."""
        return Script(self.arguments)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


# --------------------------------------------------------------------------- values
# Each value emitter converts the value held under ``name`` in place. A value the flat code
# does not cover takes the whole call to the generic call, which converts it (or reports it)
# with its path.


def _numpy_value(s: Script, level: int, name: str, step: Step) -> None:
    """accepts_numpy: a bare tensor NumPy shares becomes a read-only array; so do the items
    of an exact dict, list or tuple of them."""
    s.add(level, f"kind = type({name})", f"if kind is Tensor{_shares(name, step)}:")
    _numpy_leaf(s, level + 1, name, step)
    s.add(
        level,
        "elif kind in kept:  # a float, a string: as it is",
        "    pass",
        "elif kind is dict and get(kind) is walk_dict:",
        "    changed = False",
        "    items = {}",
        f"    for item_key, item in {name}.items():",
    )
    _numpy_item(s, level + 2, step)
    s.add(level, "        items[item_key] = item", "    if changed:", f"        {name} = items")
    s.add(
        level,
        "elif (kind is list or kind is tuple) and get(kind) is walk_sequence:",
        "    changed = False",
        "    items = []",
        f"    for item in {name}:",
    )
    _numpy_item(s, level + 2, step)
    s.add(
        level,
        "        items.append(item)",
        "    if changed:",
        f"        {name} = items if kind is list else tuple(items)",
        "else:",
    )
    s.to_generic(level + 1)


def _numpy_item(s: Script, level: int, step: Step) -> None:
    """An item of an exact dict, list or tuple: converted as a bare value is, or left as it
    is; any other item (a nested container, a tensor NumPy cannot share) sends the call on."""
    s.add(level, "item_kind = type(item)", f"if item_kind is Tensor{_shares('item', step)}:")
    _numpy_leaf(s, level + 1, "item", step)
    s.add(level, "    changed = True", "elif item_kind not in kept:")
    s.to_generic(level + 1)


def _shares(name: str, step: Step) -> str:
    """What else a tensor needs for NumPy to take it here: no grad (unless detached silently),
    and not float16 where float16 widens (the generic call widens it, and narrows results)."""
    grad = "" if step.detach else f" and not {name}.requires_grad"
    return grad + (f" and {name}.dtype is not float16" if step.widens else "")


def _numpy_leaf(s: Script, level: int, name: str, step: Step) -> None:
    """One tensor as an array: ``.numpy()`` (which torch refuses where NumPy cannot share the
    memory: the generic call copies then), read-only, or a ``private`` copy in the tensor's
    layout, as tensor_to_array makes it (where one cannot be allocated, the generic call
    says so with the tensor's path)."""
    tensor = f"({name}.detach() if {name}.requires_grad else {name})" if step.detach else name
    private, memory = ('.copy("K")', ", MemoryError") if step.private else ("", "")
    s.add(level, "plain = True", "try:", f"    {name} = {tensor}.numpy(){private}")
    s.add(level, f"except (TypeError, RuntimeError{memory}):")
    s.to_generic(level + 1)
    if not step.private:
        s.add(level, f"{name}.setflags(False)")


def _recorded_value(s: Script, level: int, name: str, step: Step) -> None:
    """A value left as it is (returns_tensor alone, a parameter accepts_numpy's only=/exclude=
    passes on): a CPU tensor whose results come back uncast sets ``plain`` (the output side's
    vote then gives the CPU); any other tensor, and a container, sends the call to the
    generic call, whose recording walk finds them."""
    s.add(level, f"kind = type({name})", "if kind is Tensor:", f"    if not {name}.is_cpu or {name}.dtype in restored:")
    s.to_generic(level + 2)
    s.add(level, "    plain = True", "elif kind not in kept:")
    s.to_generic(level + 1)


def _kept_value(s: Script, level: int, name: str, step: Step) -> None:
    """A value accepts_tensor's only=/exclude= passes on: tensors and arrays go through as
    they are (no output side of a flat call asks where its tensors were); a container, or
    another value this side would convert, sends the call to the generic call."""
    s.add(level, f"kind = type({name})", "if kind is not Tensor and kind is not ndarray and kind not in kept:")
    s.to_generic(level + 1)


def _tensor_value(s: Script, level: int, name: str, step: Step) -> None:
    """accepts_tensor: an array becomes a tensor on the plan's device (torch's default,
    asked once per call); uncast and not copied, array_to_tensor's sharing step inlined (a
    frame fewer per array). What from_numpy refuses (a dtype torch lacks, byte order) goes
    to the generic call, which converts or reports it."""
    s.add(
        level,
        f"kind = type({name})",
        "if kind is ndarray:",
        "    if placed is None:",
        "        placed = device or default_device()",
        "    try:",
    )
    if step.shares:
        s.add(
            level,
            f"        flags = {name}.flags",
            "        if placed is CPU and flags.behaved and flags.forc:",
            f"            {name} = from_numpy({name})",
            "        else:",
            f"            {name} = to_tensor({name}, Target(placed, casts, copy))",
            "    except (LeafError, TypeError, ValueError):",
        )
    else:
        s.add(level, f"        {name} = to_tensor({name}, Target(placed, casts, copy))", "    except LeafError:")
    s.to_generic(level + 2)
    s.add(level, "elif kind is not Tensor and kind not in kept:")
    s.to_generic(level + 1)


def _unconverted(s: Script, level: int, name: str, step: Step) -> None:
    """No input side, or an out-parameter's value (a call passing one takes the generic call)."""


#: The emitter of each kind of step.
VALUES: dict[str, Callable[[Script, int, str, Step], None]] = {
    "numpy": _numpy_value,
    "tensor": _tensor_value,
    "recorded": _recorded_value,
    "kept": _kept_value,
    "unconverted": _unconverted,
}


def emit_value(s: Script, level: int, name: str, step: Step) -> None:
    VALUES[step.kind](s, level, name, step)


# --------------------------------------------------------------------------- results


def emit_result(s: Script, result: Result) -> None:
    """The result's conversion, then the generic output side for what the flat code left."""
    if result.kind == "none":
        s.add(1, "return result")
        return
    if result.kind == "tensor":
        _tensor_result(s, result)
    elif result.converts:
        s.add(
            1,
            "if type(result) is Tensor and not result.requires_grad:",
            "    try:",
            "        return result.numpy()",
            "    except (TypeError, RuntimeError):",
            "        pass",
        )
    # What the flat code leaves goes to the output side's generic conversion, with the call's
    # tensors where it converted or recorded one (``plain``), found again only now.
    a = s.arguments
    s.add(1, f"return convert_out(result, tensors_in({a}) if plain else [], [], given_args({a}, instance))")


def _tensor_result(s: Script, result: Result) -> None:
    """An array comes back through the one array -> tensor function, with the target a call
    whose tensors NumPy all shared has (decided when the plan was built), which is also a
    call's without tensors while torch's default device is the CPU. Where the result stays on
    the CPU uncast, array_to_tensor's first steps inlined (a frame fewer per result), and an
    exact tuple, list or dict of arrays torch shares (what a batch comes back as) walked here."""
    s.add(1, "if plain or default_device() is CPU:", "    kind = type(result)", "    if kind is ndarray:")
    if result.shares:
        s.add(
            3,
            "flags = result.flags",
            "if flags.forc:",
            "    if flags.behaved:",
            "        try:",
            "            return from_numpy(result)",
            "        except (TypeError, ValueError):",
            "            pass",
        )
    if result.copies_read_only:  # a read-only array (a view of an input, most often) copied once
        s.add(
            3,
            "    elif flags.aligned and result.nbytes < small_copy:",
            "        try:",
            '            return from_numpy(result.copy("K"))',
            "        except (TypeError, ValueError):  # a dtype torch lacks, byte order",
            "            pass",
        )
    s.add(
        3,
        "try:",
        "    return to_tensor(result, shared_target)",
        "except LeafError as e:",
        '    raise e.public(function, "", "result") from None',
    )
    if result.shares:
        s.add(
            2,
            "elif (kind is tuple or kind is list) and get_out(kind) is walk_sequence_out:",
            "    changed = False",
            "    out = []",
            "    for item in result:",
        )
        _shared_item(s)
        s.add(
            2,
            "        out.append(item)",
            "    else:",
            "        return result if not changed else out if kind is list else tuple(out)",
            "elif kind is dict and get_out(dict) is walk_dict_out:",
            "    changed = False",
            "    out = {}",
            "    for item_key, item in result.items():",
        )
        _shared_item(s)
        s.add(2, "        out[item_key] = item", "    else:", "        return out if changed else result")


def _shared_item(s: Script) -> None:
    """An item of a returned container: an array torch shares, or a value kept as it is; any
    other item sends the whole result to the generic output side (the same result)."""
    s.add(
        4,
        "if type(item) is ndarray:",
        "    flags = item.flags",
        "    if not (flags.behaved and flags.forc):",
        "        break",
        "    try:",
        "        item = from_numpy(item)",
        "    except (TypeError, ValueError):",
        "        break",
        "    changed = True",
        "elif type(item) not in kept_out:",
        "    break",
    )


# --------------------------------------------------------------------------- the forms


def _opening(s: Script, places: bool) -> None:
    """Every form's first lines: the guards, in the generic call's order (the compile escape,
    then the hand-over to a watched Runner), and the per-call state."""
    s.add(1, "if compiling():", f"    return opaque(generic, wrapped, instance, {s.arguments})")
    s.add(1, "if active() is not None or profiler._is_profiler_enabled:")
    s.to_generic(2)
    s.add(1, "plain = False")
    if places:
        s.add(1, "placed = None")


def _called(s: Script, level: int, arguments: str, handed: str, hands_read_only: bool) -> None:
    """The call itself; where the function got read-only arrays, NumPy refusing a write into
    one of them becomes a ReadOnlyError (see Runner.failed)."""
    if not hands_read_only:
        s.add(level, f"result = wrapped({arguments})")
        return
    s.add(
        level,
        "try:",
        f"    result = wrapped({arguments})",
        "except BaseException as e:",
        f"    failed(e, None, None, given_args({s.arguments}, instance), handed=({handed}), read_only=plain)",
        "    raise",
    )


def star_source(head: str, kind: Kind) -> str:
    """A ``*args`` form's source: the guards, one branch per positional count (its
    conversions, the keywords', the call), then the result's conversion. The method form
    calls ``wrapped`` (the function) with the instance first. A call passing an
    out-parameter (from position ``writes_at``, or by keyword) goes to the generic call."""
    s = Script()
    s.add(0, f"def {head}:")
    _star_body(s, head, kind)
    return s.text()


def _star_body(s: Script, head: str, kind: Kind) -> None:
    first = "instance, " if head.startswith("method(") else ""
    writes_at = kind.writes_at
    _opening(s, kind.places)
    s.add(1, "n = len(args)")
    if writes_at is not None:
        s.add(1, "if kwargs and not writes.isdisjoint(kwargs):")
        s.to_generic(2)
        # The call form may be bound (its args start after the instance): it counts from one sooner.
        writes_at -= 0 if head.startswith("__call__") else 1
    for count in range(MOST_POSITIONAL + 1):
        names = [f"a{k}" for k in range(count)]
        s.add(1, f"{'if' if count == 0 else 'elif'} n == {count}:")
        if writes_at is not None and count > writes_at:
            s.to_generic(2)
            continue
        if count:
            s.add(2, f"{', '.join(names)}, = args")
        for name in names:
            emit_value(s, 2, name, kind.value)
        given = "".join(f"{name}, " for name in names)
        s.add(2, "if kwargs:", "    new_kwargs = {}", "    for key, value in kwargs.items():")
        emit_value(s, 4, "value", kind.value)
        s.add(2, "        new_kwargs[key] = value")
        _called(s, 3, f"{first}{given}**new_kwargs", f"({given}), new_kwargs", kind.hands_read_only)
        s.add(2, "else:")
        _called(s, 3, f"{first}{given}".rstrip(", "), f"({given}), kwargs", kind.hands_read_only)
    s.add(1, "else:")
    s.to_generic(2)
    emit_result(s, kind.result)


def exact_source(
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
    given = ", ".join(f"p{k}" for k in range(1 if method else 0, shape.arity))
    s = Script(arguments or f"*split({given})")
    s.add(0, f"def __call__({shape.parameters()}):")
    _exact_body(s, kind, method, shape, passed=passed, written=written)
    return s.text()


def _exact_body(
    s: Script, kind: Kind, method: bool, shape: Shape, *, passed: frozenset[int], written: frozenset[int]
) -> None:
    if method:
        s.add(1, "instance = p0")
    _opening(s, kind.places)
    handed = ["p0"] if method else []
    first = len(handed)
    for k in sorted(first + w for w in written):  # checked first: a call passing one converts nothing here
        unless_default = f" and p{k} is not d{k}" if k in shape.defaulted else ""
        s.add(1, f"if p{k} is not None{unless_default}:")
        s.to_generic(2)
    for k in range(first, shape.arity):
        defaulted = k in shape.defaulted
        step = kind.value if k - first not in passed else KEPT if kind.places else RECORDED
        part = s.part()
        emit_value(part, 2 if defaulted else 1, f"c{k}", UNCONVERTED if k - first in written else step)
        if part.lines:
            s.add(1, f"c{k} = p{k}", *([f"if p{k} is not d{k}:"] if defaulted else []))
            s.lines += part.lines
        handed.append(f"c{k}" if part.lines else f"p{k}")
    _called(s, 1, shape.passed(handed), f"({''.join(f'{name}, ' for name in handed)}), {{}}", kind.hands_read_only)
    emit_result(s, kind.result)


def leading_source(kind: Kind, count: int) -> str:
    """The form for a callable that calls pass ``count`` arguments positionally (see
    _exact.leading_of): a call passing exactly those, positionally, is the exact form's for
    that shape; CPython binds them with no ``len(args)`` to branch on. Any other call, which
    leaves a parameter at ``missing`` or fills ``args``/``kwargs``, puts the positional ones
    back in ``args`` and goes on as the ``*args`` form, in the same frame."""
    names = [f"p{k}" for k in range(count)]
    s = Script()
    # Positional-only parameters fill from the left: the first one at ``missing`` ends them.
    s.add(0, f"def __call__({''.join(f'{name}=missing, ' for name in names)}/, *args, **kwargs):")
    s.add(1, f"if args or kwargs or {names[-1]} is missing:")
    for k in range(count, 0, -1):
        given = "".join(f"{name}, " for name in names[:k])
        s.add(2, f"{'if' if k == count else 'elif'} {names[k - 1]} is not missing:", f"    args = ({given}) + args")
    s.base = 1
    _star_body(s, "__call__(*args, **kwargs)", kind)
    s.base = 0
    s.arguments = f"({''.join(f'{name}, ' for name in names)}), {{}}"
    # a ufunc's outputs follow its inputs: none of these is written
    _exact_body(s, kind, False, Shape(count, count, (), ()), passed=frozenset(), written=frozenset())
    return s.text()


def proxy_source(shape: Shape) -> str:
    """A torchified object's method (see _torchify._proxy_method): ``p0`` is the proxy; each
    other parameter given (not left at its default) that is a CPU tensor votes for the CPU,
    and anything else but a plain value takes the full walk of ``device_of``; the call is
    the wrapped function's method form on the object itself, and a result that is the
    object comes back as the proxy, any other as a view on the device the call's tensors had."""
    s = Script(", ".join(f"p{k}" for k in range(shape.arity)))
    s.add(0, f"def __call__({shape.parameters()}):")
    s.add(1, "if compiling():  # under dynamo: the whole call runs eagerly, out of its sight")
    s.add(2, f"return opaque(itself, {shape.passed([f'p{k}' for k in range(shape.arity)])})")
    s.add(1, "target = p0.__wrapped__", "device = None", "walks = False")
    for k in range(1, shape.arity):
        level = 2 if k in shape.defaulted else 1
        if k in shape.defaulted:
            s.add(1, f"if p{k} is not d{k}:")
        s.add(
            level,
            f"kind = type(p{k})",
            f"if kind is Tensor and p{k}.is_cpu:",
            "    device = CPU",
            "elif kind not in plain:",
            "    walks = True",
        )
    given = ", ".join(f"p{k}" for k in range(1, shape.arity))
    s.add(
        1,
        "if walks:",
        f"    device = device_of(*split({given}))",
        "if device is not None and device is not p0._ac_device:",
        "    record(p0, '_ac_device', device)",
        f"result = method_of({shape.passed(['target', *(f'p{k}' for k in range(1, shape.arity))])})",
        "if result is target:",
        "    return p0",
        "return result if type(result) is Tensor else p0._ac_class.viewed(result, p0._ac_device)",
    )
    return s.text()
