"""The flat call's source, and torchify's proxy methods', laid out from a plan's kind.

The forms (``star_source``, ``exact_source``, ``leading_source``) write the guards, the
branches and the call, and ask ``_emit``'s emitters for each value and for the result.
``tests/golden/`` pins what they write.
"""

from __future__ import annotations

from autoconvert._spec._emit import MOST_POSITIONAL, Kind, Script, Step, emit_result, emit_value

from ._exact import Shape


def _opening(s: Script, kind: Kind) -> None:
    """Every form's first lines: the guards, in the generic call's order (the compile escape,
    then the hand-over to a watched Runner), and the per-call state. All but the compile
    escape sit in the boundary where autoconvert's errors leave (closed by ``_closing``), which
    costs nothing in CPython 3.11+ until something is raised; dynamo cannot break its graph
    inside a try block, so the escape stays out of it. Inside a ``forward_ad.dual_level`` a
    NumPy side's call is generic, which looks for the tangents ``numpy()`` would drop unsaid
    (a side that detaches silently drops them silently too)."""
    s.add(1, "if compiling():", f"    return opaque(generic, wrapped, instance, {s.arguments})")
    s.add(1, "try:")
    s.base += 1
    dual = " or forward_ad._current_level >= 0" if kind.value.kind == "numpy" and not kind.value.detach else ""
    s.add(1, f"if active() is not None or profiler._is_profiler_enabled{dual}:")
    s.to_generic(2)
    if kind.retries:  # the guard's function refused read-only arrays once: it copies from then on
        s.add(1, "if guard.writable:")
        s.to_generic(2)
    s.add(1, "met_tensors = False")
    if kind.value.kind == "numpy":  # the containers rebuilt for the function (see _mutations)
        s.add(1, "changes = None")
    if kind.places:  # and the private copies of writable arrays, made where torch cannot share one
        s.add(1, "placed = None", "copies = None")


def _closing(s: Script) -> None:
    """The end of the boundary ``_opening`` opened: autoconvert's errors leave without its
    frames, and a callback's refusal that the function raised an error of its own from leaves
    in that error's place (see _failures._traceback)."""
    s.base -= 1
    s.add(1, "except ConversionError as e:", "    filter_traceback(e)", "    raise")
    s.add(1, "except Exception as e:", "    raise_held(e)", "    raise")


def _called(s: Script, level: int, arguments: str, handed: str, kind: Kind, *, keywords: str = "") -> None:
    """The call itself; where the function got read-only arrays, NumPy refusing a write into
    one of them becomes a ReadOnlyError (see Runner.failed). A guard's function is called
    directly, and a refusal on entry goes to the generic call, through the guard. With
    ``keywords`` (the ``*args`` forms' converted ``new_kwargs``) the call passes them where
    the call had any: one block for both, and no ``**{}`` on a call without."""
    if kind.stands_in:  # the stand-in's device: the CPU, where the call had (CPU) tensors
        s.add(level, "if met_tensors and stand_in_device(instance) is not CPU:", "    place_stand_in(instance, CPU)")
    callee = "callee" if kind.retries or kind.places else "wrapped"
    if kind.places:  # the tensor side's step after the call, where it made private copies (see _copy_back)
        s.add(
            level, f"callee = copying_back(wrapped, copies, given_args({s.arguments}, instance)) if copies else wrapped"
        )
    guarded = kind.read_only or kind.retries
    inner = level + 1 if guarded else level
    if guarded:
        s.add(level, "try:")
    if keywords:
        both = f"{arguments}, **{keywords}" if arguments else f"**{keywords}"
        s.add(inner, "if kwargs:", f"    result = {callee}({both})", "else:", f"    result = {callee}({arguments})")
    else:
        s.add(inner, f"result = {callee}({arguments})")
    if guarded:
        s.add(level, "except BaseException as e:")
        if kind.retries:  # the guard copies from now on: the generic call makes the call again through it
            s.add(level + 1, f"if guard.rejected(e, {handed}):")
            s.to_generic(level + 2)
        s.add(
            level,
            f"    failed(e, None, None, given_args({s.arguments}, instance), handed=({handed}), "
            "handed_read_only=met_tensors)",
            "    raise",
        )
    _changed(s, level, handed, kind)


def _changed(s: Script, level: int, handed: str, kind: Kind) -> None:
    """After the call, on the NumPy side: what the function changed in the containers it was
    handed rebuilt reaches the caller's (the same step as the generic call's); ``handed``:
    the arguments it got, whose arrays it put in are the caller's tensors again."""
    if kind.value.kind == "numpy":
        s.add(
            level,
            "if changes is not None and changed(changes):",
            f"    container_changes(changes, given_args({s.arguments}, instance), met_tensors, ({handed}))",
        )


def star_source(head: str, kind: Kind) -> str:
    """A ``*args`` form's source: the guards, one branch per positional count (its
    conversions, the keywords', the call), then the result's conversion. The method form
    calls ``wrapped`` (the function) with the instance first (the object it stands in for,
    where it is a stand-in). A call passing an
    out-parameter (from position ``writes_at``, or by keyword) goes to the generic call."""
    s = Script()
    s.add(0, f"def {head}:")
    _star_body(s, head, kind)
    return s.text()


def _star_body(s: Script, head: str, kind: Kind) -> None:
    first = ""
    if head.startswith("method("):
        first = "instance.__wrapped__, " if kind.stands_in else "instance, "
    writes_at = kind.writes_at
    _opening(s, kind)
    s.add(1, "n = len(args)")
    if writes_at is not None:
        s.add(1, "if kwargs and not writes.isdisjoint(kwargs):")
        s.to_generic(2)
        # The call form may be bound (its args start after the instance): it counts from one sooner.
        writes_at -= 0 if head.startswith("__call__") else 1
    # The keywords first, once for every positional count: a call that gives up on a later
    # value goes to the generic call, which converts them all again in order.
    s.add(1, "if kwargs:", "    new_kwargs = {}", "    for key, value in kwargs.items():")
    emit_value(s, 3, "value", kind.value)
    s.add(1, "        new_kwargs[key] = value")
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
        passed = f"{first}{given}".rstrip(", ")
        _called(s, 2, passed, f"({given}), new_kwargs if kwargs else kwargs", kind, keywords="new_kwargs")
    s.add(1, "else:")
    s.to_generic(2)
    emit_result(s, kind.result, stands_in=kind.stands_in)
    _closing(s)


def exact_source(
    kind: Kind,
    method: bool,
    *,
    shape: Shape,
    steps: tuple[Step, ...],
    arguments: str = "",
) -> str:
    """An exact form's source: the function's parameters as ``p0``, ``p1``..., each converted
    into ``c0``, ``c1``... by its step in ``steps`` (the instance's not counted; a parameter
    left at its default is not converted: the generic call never sees defaults), then the
    call and the result's conversion. The method form's ``p0`` is the instance, never
    converted. A call passing an out-parameter (a ``WRITTEN`` step) goes to the generic
    call. ``arguments`` spells the call's arguments for the generic call, ``*split(p0, ...)``
    unless given."""
    given = ", ".join(f"p{k}" for k in range(1 if method else 0, shape.arity))
    s = Script(arguments or f"*split({given})")
    s.add(0, f"def __call__({shape.parameters()}):")
    _exact_body(s, kind, method, shape, steps)
    return s.text()


def _exact_body(s: Script, kind: Kind, method: bool, shape: Shape, steps: tuple[Step, ...]) -> None:
    if method:
        s.add(1, "instance = p0")
    _opening(s, kind)
    if method and kind.stands_in:  # after the compile escape: dynamo never reads the proxy
        s.add(1, "target = p0.__wrapped__")
    passed = (["target"] if kind.stands_in else ["p0"]) if method else []
    first = len(passed)
    for k, step in enumerate(steps, first):  # checked first: a call passing one converts nothing here
        if step.kind == "written":
            unless_default = f" and p{k} is not d{k}" if k in shape.defaulted else ""
            s.add(1, f"if p{k} is not None{unless_default}:")
            s.to_generic(2)
    for k, step in enumerate(steps, first):
        defaulted = k in shape.defaulted
        part = s.part()
        part.base = s.base  # inside the boundary
        emit_value(part, 2 if defaulted else 1, f"c{k}", step)
        if part.lines:
            s.add(1, f"c{k} = p{k}", *([f"if p{k} is not d{k}:"] if defaulted else []))
            s.lines += part.lines
        passed.append(f"c{k}" if part.lines else f"p{k}")
    # The call's arguments as the generic call hands them: the instance is none of them.
    _called(s, 1, shape.passed(passed), shape.handed(passed, first), kind)
    emit_result(s, kind.result, stands_in=kind.stands_in)
    _closing(s)


def delegating_source(head: str) -> str:
    """A form that hands every call to the generic call (see _specialise's ``_DELEGATING``),
    inside the boundary but for the compile escape, as ``_opening`` lays it."""
    s = Script()
    s.add(0, f"def {head}:", "    if compiling():")
    s.to_generic(2)
    s.add(1, "try:")
    s.base += 1
    s.to_generic(1)
    _closing(s)
    return s.text()


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
    _exact_body(s, kind, False, Shape(count, count, (), ()), (kind.value,) * count)
    return s.text()
