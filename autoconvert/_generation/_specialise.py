"""The specialised call: one flat function per decorated function, generated from its plan.

Like attrs' generated ``__init__``: the source is written once per kind of plan, for
exactly its sides and options, and compiled with a readable filename in ``linecache``.
Per positional count it unpacks the arguments, converts each bare tensor (or array), and
each item of an exact dict, list or tuple of them, inline (returns_tensor alone records the
CPU tensors instead), and converts an array result, or an exact tuple, list or dict of
them, straight to tensors (or a tensor result to an array); it has no loop over a plan
and no branch on options. It comes in three forms: the wrapper's
``__call__``, wrapt's bound ``call``, and a method form for a plain function called
through an instance (see _wrapper.wrap). For a plain function the first and the last
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

It is written from the plan's spec (_spec): the value step, the result step, and each
parameter's step for the exact forms.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from types import CodeType
from typing import Any

import numpy as np
import torch

from autoconvert._conversions._devices import CPU, default_device
from autoconvert._conversions._grad import FORWARD_AD
from autoconvert._conversions._mutations import changed
from autoconvert._conversions._to_torch import SMALL_COPY_BYTES, Target, array_to_tensor
from autoconvert._conversions._tree import place_stand_in, stand_in_device
from autoconvert._errors import ConversionError, LeafError
from autoconvert._escape import compiling
from autoconvert._failures._guards import Guarded
from autoconvert._failures._traceback import filter_traceback, raise_held
from autoconvert._observe._observe import PROFILER, RunnerCall
from autoconvert._options._config import active
from autoconvert._spec._emit import INSTANCE, MOST_POSITIONAL, Kind, Step, items_source, shared_items_source
from autoconvert._spec._signature import given_args
from autoconvert._spec._spec import Spec, finish_of

from ._exact import compiled, leading_of, shape_of, splitter, with_signature
from ._generate import delegating_source, exact_source, leading_source, star_source

#: A leading form's default for its parameters: nobody else's object, so never an argument.
_NOT_PASSED = object()


class Flat:
    """A plan's flat call, in its three forms: ``call(wrapped, instance, args, kwargs)`` for
    wrapt's bound calls; ``bind``'s ``__call__`` for the wrapper's unbound calls, which
    holds ``wrapped`` and ``instance`` as constants; and ``method``'s form for a plain
    function called through an instance. The last two take the function's own signature
    where ``_exact.shape_of`` can spell it (see ``_exact``), else ``*args, **kwargs``."""

    __slots__ = ("call", "codes", "kind", "method_escape", "namespace", "selects", "steps")

    def __init__(self, kind: Kind, codes: tuple[CodeType, ...], namespace: dict[str, Any], spec: Spec) -> None:
        self.kind, self.codes, self.namespace = kind, codes, namespace
        #: Each parameter's step by name (the spec's), for the exact forms.
        self.steps = dict(spec.parameters or ())
        self.selects = spec.selects
        self.method_escape = spec.method_escape
        exec(codes[0], namespace)  # our own source, compiled in specialised()
        self.call: RunnerCall = namespace["call"]

    def bind(self, wrapped: Any) -> tuple[Callable[..., Any], dict[str, Any]]:
        """``__call__`` for a wrapper of ``wrapped``, and its namespace (set ``instance`` there):
        a staticmethod with the function's own signature; else, where calls pass a known count
        of arguments positionally (a ufunc's inputs, see _exact.leading_of), a staticmethod
        taking those and ``*args, **kwargs``, which takes any other call as the ``*args`` form; else
        ``__call__(self, *args, **kwargs)``. A guard that only retries refusals on entry is
        called through its function (see Guarded.direct)."""
        kind, callee = self.kind, wrapped
        direct = wrapped.direct if type(wrapped) is Guarded and not self.selects else None
        if direct is not None:
            kind, callee = kind._replace(retries=True), direct
        namespace = {**self.namespace, "wrapped": wrapped, "callee": callee, "guard": wrapped, "instance": None}
        exact = self._exact(callee, namespace, kind, method=False)
        if exact is not None:
            return staticmethod(exact), namespace
        count = leading_of(callee) if not self.selects else 0
        if not 0 < count <= MOST_POSITIONAL:
            exec(self.codes[1] if kind is self.kind else _codes_of(kind)[1], namespace)
            return namespace["__call__"], namespace
        key = (kind, count)
        code = _LEADING.get(key) or _LEADING.setdefault(key, compiled(leading_source(kind, count), "flat call"))
        exec(code, namespace)
        return staticmethod(namespace["__call__"]), namespace

    def method(self, function: types.FunctionType, guard: Guarded | None = None) -> Callable[..., Any]:
        """``function``'s flat call through an instance, for a wrapper's ``__get__`` to bind
        (a bound method, as the function itself would give): ``function(instance, ...)``, the
        instance never converted; the generic call gets the bound method, as from wrapt. With
        a ``guard`` (see Plan.guard) the calls go through it, or where it only retries refusals
        on entry, to the function directly, as ``bind``'s do."""
        generic, stands_in = self.namespace["generic"], self.kind.stands_in

        def bound_generic(function: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            bound = types.MethodType(function, instance.__wrapped__ if stands_in else instance)
            return generic(bound, instance, args, kwargs)

        kind = self.kind
        if guard is not None and guard.direct is not None and not self.selects:
            kind = kind._replace(retries=True)
        called = function if guard is None else guard
        namespace = {
            **self.namespace,
            "wrapped": called,
            "callee": function,
            "guard": guard,
            "generic": bound_generic,
            "opaque": self.method_escape,
        }
        exact = self._exact(function, namespace, kind, method=True)
        if exact is not None:
            return exact
        exec(self.codes[2] if kind is self.kind else _codes_of(kind)[2], namespace)
        return functools.update_wrapper(namespace["method"], function)

    def _exact(
        self, function: Any, namespace: dict[str, Any], kind: Kind, *, method: bool
    ) -> Callable[..., Any] | None:
        """The flat call with ``function``'s own signature (see _exact), so that CPython binds
        the arguments, keywords included, and its messages for a bad call name the function;
        None where ``function`` has no such signature, or no parameter to take the instance."""
        shape = shape_of(function)
        if shape is None or (method and not shape.positional):
            return None
        first = 1 if method else 0
        namespace["split"] = splitter(function, shape, first=first)
        names = function.__code__.co_varnames[first : shape.arity]
        # Called unbound, a method's ``self`` is an argument like any other: it gets the value step.
        value = kind.value
        steps = tuple(self.steps.get(name, value) for name in names)
        steps = tuple(value if step is INSTANCE else step for step in steps)
        source = functools.partial(exact_source, kind, method, shape=shape, steps=steps)
        key = ("flat call", *kind, method, steps)
        return with_signature(function, shape, key, source, namespace)


def specialised(
    spec: Spec, generic: RunnerCall, failed: Callable[..., None], changes: Callable[..., None] | None = None
) -> Flat | None:
    """The flat call of ``spec``, or None where it has none (the generic call is then the
    only one; ``spec.generic_because`` says why). ``changes``: a NumPy side's step making
    the containers' changes the caller's (_after's ContainerChanges)."""
    if spec.generic_because is not None:
        return None
    kind = Kind(
        value=spec.value,
        result=spec.result,
        places=spec.inputs is not None and spec.inputs.places,
        read_only=spec.read_only,
        writes_at=spec.writes_at,
        stands_in=spec.stands_in,
    )
    namespace = _namespace(spec, generic, failed)
    namespace.update(changed=changed, container_changes=changes)
    if spec.selects:  # which values it converts is known by name
        return Flat(kind, _DELEGATING, namespace, spec)  # the exact forms only
    return Flat(kind, _codes_of(kind), namespace, spec)


def _namespace(spec: Spec, generic: RunnerCall, failed: Callable[..., None]) -> dict[str, Any]:
    """The constants the flat code of ``spec`` reads: its sides' tables (their
    ``flat_constants``), the generic call."""
    inputs, outputs = spec.inputs, spec.outputs
    writes = inputs.writes if inputs is not None else None
    namespace: dict[str, Any] = {
        "Tensor": torch.Tensor,
        "float16": torch.float16,
        "ndarray": np.ndarray,
        "LeafError": LeafError,
        "ConversionError": ConversionError,
        "filter_traceback": filter_traceback,
        "raise_held": raise_held,
        "compiling": compiling,
        "opaque": spec.escape,
        "active": active,
        "profiler": PROFILER,
        "forward_ad": FORWARD_AD,
        "default_device": default_device,
        "Target": Target,
        "CPU": CPU,
        "array_to_tensor": array_to_tensor,
        "from_numpy": torch.from_numpy,
        "small_copy": SMALL_COPY_BYTES,
        "generic": generic,
        "function": spec.function,
        "get": {}.get,
        "kept": frozenset(),
        "walk_dict": None,
        "walk_sequence": None,
        "tensors_in": None,
        "restored": {},
        "convert_out": finish_of(spec),
        "failed": failed,
        "given_args": given_args,
        "missing": _NOT_PASSED,
        "writes": writes.names if writes is not None else frozenset(),
        "stand_in_device": stand_in_device,
        "place_stand_in": place_stand_in,
    }
    if inputs is not None:
        namespace.update(inputs.flat_constants())
    if outputs is not None:
        namespace.update(outputs.flat_constants())
    # The emitters' helpers for the steps that inline containers' items, in the plan's namespace.
    if spec.value.kind == "numpy":
        exec(_items_code(spec.value), namespace)  # numpy_items (its kept)
    if spec.result.kind == "tensor":
        exec(_SHARED_ITEMS, namespace)  # shared_items (its kept_out)
    return namespace


def _codes_of(kind: Kind) -> tuple[CodeType, ...]:
    """The three forms' code for plans of ``kind``, compiled on first use."""
    return _CODES.get(kind) or _CODES.setdefault(
        kind, tuple(compiled(star_source(h, kind), "flat call") for h in _HEADS)
    )


#: The three forms' code per kind of plan (a few per program): what differs between plans of a
#: kind (the function, its sides' options) is in their namespaces.
_CODES: dict[Kind, tuple[CodeType, ...]] = {}
_HEADS = (
    "call(wrapped, instance, args, kwargs)",
    "__call__(self, *args, **kwargs)",
    "method(instance, *args, **kwargs)",
)
#: The three forms for a plan with a selection (only=/exclude=), which the exact forms serve:
#: without a signature to name the parameters by, each call goes to the generic call.
_DELEGATING = tuple(compiled(delegating_source(h), "flat call") for h in _HEADS)


def _items_code(step: Step) -> CodeType:
    """``numpy_items``'s code for a numpy ``step`` (see _emit.items_source), compiled on first use."""
    return _ITEMS.get(step) or _ITEMS.setdefault(step, compiled(items_source(step), "flat call items"))


_ITEMS: dict[Step, CodeType] = {}
_SHARED_ITEMS = compiled(shared_items_source(), "flat call items")


#: The leading forms' code per (kind of plan, count of leading positional parameters).
_LEADING: dict[tuple[Kind, int], CodeType] = {}
