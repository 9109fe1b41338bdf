"""The emitters of generated source: one small function per kind of step.

A plan's ``Kind`` says what its flat code depends on: how each argument is converted (a
``Step``), how the result is (a ``Result``), and three flags. Each emitter appends its lines
for one value (or the result) to a ``Script`` at an indent level; the script also knows how
the call's arguments are spelled where a line hands the call to the generic call:
``args, kwargs`` in the ``*args`` forms, ``*split(p0, ...)`` in the exact forms. The forms
that lay the emitted lines out are in ``_generate``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

#: Positional counts with a branch of their own; calls with more go to the generic call.
MOST_POSITIONAL = 8
#: How the ``*args`` forms spell the call's arguments.
ARGUMENTS = "args, kwargs"


class Step(NamedTuple):
    """How one value is converted: by the flat code (see ``VALUES``), and as ``explain`` says.

    A plan's spec (_spec) gives one to each parameter: its side's step, or ``KEPT``/``RECORDED``
    for one that ``only=``/``exclude=`` pass on, ``WRITTEN`` for an out-parameter, ``INSTANCE``
    for ``self``/``cls``, and for ``adapt`` what the parameter's annotation asks (``asks``).
    """

    kind: str  # "numpy", "tensor", "recorded", "kept", "unconverted", "written", "instance" or "asks"
    detach: bool = False  # numpy: a tensor that requires grad is detached, not sent on
    private: bool = False  # numpy: a private copy (copy=True), not a read-only view
    widens: bool = False  # numpy: float16 is widened, so a float16 tensor is sent on
    shares: bool = False  # tensor: from_numpy inlined (uncast, not copied)
    asks: Any = None  # asks: the parameter's Want (_wants), None where its annotation asks for nothing


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
    read_only: bool  # the function gets read-only arrays (see _spec's ``Spec.read_only``)
    writes_at: int | None  # the first positional out-parameter (None: it has none)
    #: The function is a guard's (see _guards.Guarded.calls_directly): called directly, a
    #: refusal of read-only arrays on entry sent to the generic call, whose guard retries it.
    retries: bool = False
    #: The instance stands in for the object called (see _spec's ``Spec.stands_in``): the
    #: method forms call the function on its ``__wrapped__``, and CPU tensors set its device.
    stands_in: bool = False


RECORDED = Step("recorded")
KEPT = Step("kept")
UNCONVERTED = Step("unconverted")
WRITTEN = Step("written")
INSTANCE = Step("instance")


class Script:
    """Lines of generated source; ``arguments`` spells the call's arguments for the generic
    call, and ``base`` indents everything added (the leading form nests the ``*args`` form).
    ``gives_up``, where set, is the line that sends a value on instead (a helper's)."""

    __slots__ = ("arguments", "base", "gives_up", "lines")

    def __init__(self, arguments: str = ARGUMENTS, gives_up: str | None = None) -> None:
        self.arguments = arguments
        self.base = 0
        self.gives_up = gives_up
        self.lines: list[str] = []

    def add(self, level: int, *lines: str) -> None:
        pad = "    " * (self.base + level)
        self.lines += [pad + line for line in lines]

    def to_generic(self, level: int) -> None:
        """The line that hands the whole call to the generic call, which converts or reports it."""
        self.add(level, self.gives_up or f"return generic(wrapped, instance, {self.arguments})")

    def part(self) -> Script:
        """An empty script with these spellings, whose lines go into this one afterwards."""
        return Script(self.arguments, self.gives_up)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


# --------------------------------------------------------------------------- values
# Each value emitter converts the value held under ``name`` in place. A value the flat code
# does not cover takes the whole call to the generic call, which converts it (or reports it)
# with its path.


def _numpy_value(s: Script, level: int, name: str, step: Step) -> None:
    """accepts_numpy: a bare tensor NumPy shares becomes a read-only array; so do the items
    of an exact dict, list or tuple of them, by the plan's ``numpy_items`` (see items_source)."""
    s.add(level, f"kind = type({name})", f"if kind is Tensor{_shares(name, step)}:")
    _numpy_leaf(s, level + 1, name, step)
    s.add(
        level,
        "elif kind in kept:  # a float, a string: as it is",
        "    pass",
        "elif (kind is dict and get(kind) is walk_dict) or ((kind is list or kind is tuple) and get(kind) is walk_sequence):",
        f"    items = numpy_items({name})",
        "    if items is None:",
    )
    s.to_generic(level + 2)
    s.add(
        level,
        f"    if items is not {name}:",
        "        met_tensors = True",
        "        if kind is not tuple:  # its changes become the caller's after the call (see _mutations)",
        "            if changes is None:",
        f"                changes = [({name}, items, kind(items))]",
        "            else:",
        # A loop, not any() over a generator: a closure over the argument would make it a cell,
        # which the exact forms' renaming of parameters (see _exact) cannot rename.
        "                for handed in changes:",
        f"                    if handed[0] is {name}:  # passed twice: the generic call",
    )
    s.to_generic(level + 6)  # which hands the function one rebuilt container for it, as the caller has one
    s.add(
        level,
        f"                changes.append(({name}, items, kind(items)))",
        f"        {name} = items",
        "    elif kind is not tuple:  # no tensors: as it is, its new arrays the caller's kind after the call",
        "        if changes is None:",
        f"            changes = [({name}, {name}, kind({name}))]",
        "        else:",
        f"            changes.append(({name}, {name}, kind({name})))",
        "else:",
    )
    s.to_generic(level + 1)


def items_source(step: Step) -> str:
    """``numpy_items(value)``, the flat code's walk of an exact dict, list or tuple for a numpy
    ``step``: each tensor item converted as a bare tensor is, the rest kept (see
    _items_function). One function, not inlined per argument: a frame per container, and a
    form a fraction of the size."""
    return _items_function("numpy_items", lambda s, level: _numpy_item(s, level, step))


def _items_function(name: str, item: Callable[[Script, int], None]) -> str:
    """A generated helper ``name(value)`` walking an exact dict, list or tuple, ``item``
    converting each item in place: a new container, ``value`` itself where no item changed,
    or None where an item gives up (the call, or the result, then takes the generic path)."""
    s = Script(gives_up="return None")
    s.add(0, f"def {name}(value):", "    kind = type(value)", "    changed = False")
    s.add(1, "if kind is dict:", "    items = {}", "    for item_key, item in value.items():")
    item(s, 3)
    s.add(
        1,
        "        items[item_key] = item",
        "    return items if changed else value",
        "items = []",
        "for item in value:",
    )
    item(s, 2)
    s.add(
        1,
        "    items.append(item)",
        "if not changed:",
        "    return value",
        "return items if kind is list else tuple(items)",
    )
    return s.text()


def _numpy_item(s: Script, level: int, step: Step) -> None:
    """An item of an exact dict, list or tuple: converted as a bare value is, or left as it
    is; any other item (a nested container, a tensor NumPy cannot share) gives up."""
    s.add(level, "item_kind = type(item)", f"if item_kind is Tensor{_shares('item', step)}:")
    _numpy_leaf(s, level + 1, "item", step, records=False)
    s.add(level, "    changed = True", "elif item_kind not in kept:")
    s.to_generic(level + 1)


def _shares(name: str, step: Step) -> str:
    """What else a tensor needs for NumPy to take it here: no grad (unless detached silently),
    and not float16 where float16 widens (the generic call widens it, and narrows results)."""
    grad = "" if step.detach else f" and not {name}.requires_grad"
    return grad + (f" and {name}.dtype is not float16" if step.widens else "")


def _numpy_leaf(s: Script, level: int, name: str, step: Step, *, records: bool = True) -> None:
    """One tensor as an array: ``.numpy()`` (which torch refuses where NumPy cannot share the
    memory: the generic call copies then), read-only, or a ``private`` copy in the tensor's
    layout, as tensor_to_array makes it (where one cannot be allocated, the generic call
    says so with the tensor's path). ``records``: it sets ``met_tensors`` (not in a helper)."""
    tensor = f"({name}.detach() if {name}.requires_grad else {name})" if step.detach else name
    private, memory = ('.copy("K")', ", MemoryError") if step.private else ("", "")
    s.add(level, *(["met_tensors = True"] if records else []), "try:", f"    {name} = {tensor}.numpy(){private}")
    s.add(level, f"except (TypeError, RuntimeError{memory}):")
    s.to_generic(level + 1)
    if not step.private:
        s.add(level, f"{name}.setflags(False)")


def _recorded_value(s: Script, level: int, name: str, step: Step) -> None:
    """A value left as it is (returns_tensor alone, a parameter accepts_numpy's only=/exclude=
    passes on): a CPU tensor whose results come back uncast sets ``met_tensors`` (the output side's
    vote then gives the CPU); any other tensor, and a container, sends the call to the
    generic call, whose recording walk finds them."""
    s.add(level, f"kind = type({name})", "if kind is Tensor:", f"    if not {name}.is_cpu or {name}.dtype in restored:")
    s.to_generic(level + 2)
    s.add(level, "    met_tensors = True", "elif kind not in kept:")
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
    to the generic call, which converts or reports it. A writable array torch cannot share
    is handed as a private copy, recorded in ``copies`` (made on first need), which takes the
    function's writes back after the call (see _generate._called)."""
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
            "            if copies is None:",
            "                copies = []",
            f"            {name} = array_to_tensor({name}, Target(placed, casts, copy, None, copies))",
            "    except (LeafError, TypeError, ValueError):",
        )
    else:
        s.add(
            level,
            "        if copies is None:",
            "            copies = []",
            f"        {name} = array_to_tensor({name}, Target(placed, casts, copy, None, copies))",
            "    except LeafError:",
        )
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
    "written": _unconverted,
}


def emit_value(s: Script, level: int, name: str, step: Step) -> None:
    VALUES[step.kind](s, level, name, step)


# --------------------------------------------------------------------------- results


def emit_result(s: Script, result: Result, *, stands_in: bool = False) -> None:
    """The result's conversion, then the generic output side for what the flat code left.
    ``stands_in``: see ``Kind.stands_in``."""
    if result.kind == "none":
        s.add(1, "return result")
        return
    if result.kind == "tensor":
        _tensor_result(s, result, stands_in)
    elif result.converts:  # a 0-d result goes generic: it may come back a NumPy scalar (see as_result)
        s.add(
            1,
            "if type(result) is Tensor and not result.requires_grad and result.ndim:",
            "    try:",
            "        return result.numpy()",
            "    except (TypeError, RuntimeError):",
            "        pass",
        )
    # What the flat code leaves goes to the output side's generic conversion, with the call's
    # tensors where it converted or recorded one (``met_tensors``), found again only now.
    a = s.arguments
    s.add(1, f"return convert_out(result, tensors_in({a}) if met_tensors else [], [], given_args({a}, instance))")


def _tensor_result(s: Script, result: Result, stands_in: bool) -> None:
    """An array comes back through the one array -> tensor function, with the target a call
    whose tensors NumPy all shared has (decided when the plan was built), which is also a
    call's without tensors while torch's default device is the CPU. Where the result stays on
    the CPU uncast, array_to_tensor's first steps inlined (a frame fewer per result), and an
    exact tuple, list or dict of arrays torch shares (what a batch comes back as) walked here.
    A stand-in's call without tensors places results by its object's device, where it has one."""
    unplaced = "(stand_in_device(instance) or default_device())" if stands_in else "default_device()"
    s.add(1, f"if met_tensors or {unplaced} is CPU:", "    kind = type(result)", "    if kind is ndarray:")
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
        "    return array_to_tensor(result, shared_target)",
        "except LeafError as e:",
        '    raise e.public(function, "", "result") from None',
    )
    if result.shares:
        s.add(
            2,
            "elif ((kind is tuple or kind is list) and get_out(kind) is walk_sequence_out) or (",
            "    kind is dict and get_out(dict) is walk_dict_out",
            "):",
            "    out = shared_items(result)",
            "    if out is not None:",
            "        return out",
        )


def shared_items_source() -> str:
    """``shared_items(value)``, the flat code's walk of an exact tuple, list or dict returned:
    each array item as the tensor torch shares, the rest kept (see _items_function). One
    function for every plan that shares results, not inlined per form."""
    return _items_function("shared_items", _shared_item)


def _shared_item(s: Script, level: int) -> None:
    """An item of a returned container: an array torch shares, or a value kept as it is; any
    other item gives up (the generic output side then gives the same result)."""
    s.add(level, "if type(item) is ndarray:", "    flags = item.flags", "    if not (flags.behaved and flags.forc):")
    s.to_generic(level + 2)
    s.add(level, "    try:", "        item = from_numpy(item)", "    except (TypeError, ValueError):")
    s.to_generic(level + 2)
    s.add(level, "    changed = True", "elif type(item) not in kept_out:")
    s.to_generic(level + 1)
