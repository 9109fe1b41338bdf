"""``callbacks=True``: callables handed to NumPy code receive tensors and give back arrays.

``scipy.optimize.minimize(f, x0)`` calls ``f`` with arrays; an objective written in torch
(``jac=True`` returning ``(loss, grad)`` from autograd) wants tensors on the caller's device.
Under the option, each callable argument is handed over as a ``TensorCallback``: arrays in
its arguments become tensors on the device of the call's tensors, tensors in what it returns
become arrays. NumPy's and SciPy's own functions (``np.mean``, ufuncs) keep getting arrays.
Without it, torch's own functions (``statistic=torch.mean``), which cannot take arrays at
all, are handed over so; ``xp=torch`` names NumPy, the arrays' namespace; and a torch
device names where the results go.
"""

from __future__ import annotations

import dis
import functools
import inspect
import itertools
import math
import operator
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from autoconvert._adapters._adapter import module_of
from autoconvert._adapters._table import NUMPY, OTHERS, adapter_for
from autoconvert._adapters._torch import MAKES_TENSORS
from autoconvert._conversions._devices import default_device, vote
from autoconvert._conversions._dtypes import NO_CASTS
from autoconvert._conversions._grad import DETACH, FORWARD_AD, REVERSE, GradPolicy, Lost, forward_lost, has_tangent
from autoconvert._conversions._memory import functorch_wrapped, storage_address, ungraded, untransformed
from autoconvert._conversions._to_numpy import as_result, tensor_to_array
from autoconvert._conversions._to_torch import Target, array_to_tensor
from autoconvert._conversions._tree import Mapper, StandIn, stood_for
from autoconvert._errors import ConversionError, GradientError, LeafError
from autoconvert._escape import passes_for_function

from ._code_reads import SUPER, ReadPath, code_reads, super_of
from ._holders import holder_leaf
from ._signature import function_name

to_tensors = Mapper({np.ndarray: array_to_tensor, np.generic: array_to_tensor}, nested=True)


def _number_to_tensor(x: float | complex, ctx: Target) -> torch.Tensor:
    """A Python float or complex a callback is handed, as the 0-d tensor of its NumPy array."""
    return array_to_tensor(np.asarray(x), ctx)


#: What a callback's arguments become: arrays, NumPy scalars and the Python floats scalar
#: code hands (``quad``'s and ``brentq``'s ``x``, ``solve_ivp``'s ``t``) as tensors, float64
#: as NumPy's; ints and bools (counts, indices, flags) stay as they are.
_callback_tensors = Mapper(
    {np.ndarray: array_to_tensor, np.generic: array_to_tensor, float: _number_to_tensor, complex: _number_to_tensor},
    nested=True,
)


class _Evaluation(NamedTuple):
    """One call of a ``TensorCallback``: the callback, and the tensors it was handed."""

    callback: TensorCallback
    handed: tuple[Any, ...]


def _result_array(t: torch.Tensor, evaluation: _Evaluation) -> Any:
    """A tensor a callback returns, as the array its caller is handed: one that requires grad
    leaves autograd here, as ``.item()`` would, under the call's grad policy where its
    gradient reaches tensors from outside the callback (a closure's ``a`` in ``sin(a * t)``);
    so does a forward-mode tangent. Converted first: a result NumPy cannot hold is refused
    before any word about its gradient."""
    try:
        array = tensor_to_array(t, None)[0]
    except LeafError:  # asked only here: a result inside torch.func's transforms is rare
        array = _transformed_array(t)
        if array is None:
            raise
    callback = evaluation.callback
    lost = _lost_beyond(t, evaluation.handed)
    if lost is not None and callback.grad.returned(t, lost) and not callback.said:
        callback.said.append(True)  # once per call, not per evaluation (quad makes 21) nor per callback
        callback.grad.say_returned(function_name(callback.__wrapped__), lost)
    return as_result(array)


def _transformed_array(t: torch.Tensor) -> Any:
    """A callback's result inside torch.func's gradient transforms (torch.func.grad, jvp,
    jacfwd wrap it), as the array of its values: what becomes of its gradient is the grad
    policy's to say. None where no gradient transform wraps it, or torch.vmap batches it
    (one array cannot hold a batch it never sees): the conversion's refusal stands."""
    if not functorch_wrapped(t):
        return None
    with untransformed():
        values = ungraded(t)
        return None if functorch_wrapped(values) else tensor_to_array(values.detach(), None)[0]


def _lost_beyond(t: torch.Tensor, handed: tuple[Any, ...]) -> Lost | None:
    """The gradient a callback's result ``t`` loses as an array: one it requires through a
    tensor from outside the callback while grad mode is on, else its forward-mode tangent
    (which only a tensor from outside can give: the callback is handed none)."""
    if t.requires_grad and torch.is_grad_enabled() and _reaches_beyond(t, handed):
        return REVERSE
    if FORWARD_AD._current_level >= 0 and has_tangent(t):
        return forward_lost(t)
    return None


def _reaches_beyond(t: torch.Tensor, handed: tuple[Any, ...]) -> bool:
    """Whether ``t``'s autograd graph reaches a leaf other than the tensors a callback was
    handed: an objective taking autograd gradients in its own argument
    (``x.detach().requires_grad_()``, ``minimize(..., jac=True)``) loses nothing."""
    own: set[int] = set()
    _handed_tensors(handed, own)
    if t.grad_fn is None:  # t is a leaf itself
        return storage_address(t) not in own
    stack: list[Any] = [t.grad_fn]  # autograd nodes, None where an input needs no gradient
    seen = set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        leaf = getattr(node, "variable", None)  # an AccumulateGrad node's leaf
        if leaf is not None:
            if storage_address(leaf) not in own:
                return True
            continue
        stack.extend(following for following, _ in node.next_functions)
    return False


def _handed_tensors(value: Any, own: set[int]) -> None:
    """The storages of the tensors among a callback's (converted) arguments, into ``own``."""
    if isinstance(value, torch.Tensor):
        own.add(storage_address(value))
    elif isinstance(value, (tuple, list)):
        for item in value:
            _handed_tensors(item, own)
    elif isinstance(value, dict):
        for item in value.values():
            _handed_tensors(item, own)


_to_arrays = Mapper({torch.Tensor: _result_array}, nested=True)

#: What marks an error of autoconvert's that left a callback (see held_refusal).
_FROM_CALLBACK = "__autoconvert_from_callback__"


def held_refusal(error: BaseException) -> BaseException | None:
    """The error of autoconvert's that left a callback, the refusal of its result
    (grad="error") or one an autoconvert function the callback calls raised, and that the
    library calling the callback caught and raised an error of its own from, found among
    ``error``'s causes (SciPy's differential_evolution rewords any TypeError as a "map-like
    callable" RuntimeError, whose words would hide the refusal's fix); None: none. The call's
    boundary raises it in the library's error's place. The callback's own errors stay the
    library's to word."""
    cause = error.__cause__
    for _ in range(8):  # rewordings on rewordings, never a cycle
        if cause is None or getattr(cause, _FROM_CALLBACK, False):
            return cause
        cause = cause.__cause__
    return None


class TensorCallback:
    """A callable argument written in torch, as NumPy code calls it. ``shared``, ``odd``: the
    call's tensor arguments (still filling while the call's arguments convert), whose device
    its tensors go to. ``grad``: the call's grad policy, which a result that requires grad
    meets; ``said``: whether its warning was said, shared by the call's callbacks (a linear
    operator's ``matvec`` and ``rmatvec``), so that it is said once per call.

    It carries the callable's attributes, live, both ways: NumPy code reads arbitrary ones
    (``solve_ivp`` an event's ``terminal`` and ``direction``), set before or after the call
    began, and what it sets lands on the callable."""

    __slots__ = ("__wrapped__", "grad", "odd", "said", "shared")

    def __init__(
        self, function: Any, shared: list[torch.Tensor], odd: list[torch.Tensor], grad: GradPolicy, said: list[bool]
    ) -> None:
        self.__wrapped__ = function
        self.shared = shared
        self.odd = odd
        self.grad = grad
        self.said = said

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function = self.__wrapped__
        target = Target(vote(self.shared + self.odd) or default_device(), NO_CASTS, None)
        try:
            args = _callback_tensors(args, target)  # paths [0], [1], ... then ['name']
            kwargs = _callback_tensors(kwargs, target) if kwargs else kwargs
        except LeafError as e:
            raise e.public(function_name(function), "argument", "") from None
        try:
            result = function(*args, **kwargs)
        except ConversionError as e:  # an inner autoconvert call's refusal (see held_refusal)
            setattr(e, _FROM_CALLBACK, True)
            raise
        try:
            return _to_arrays(result, _Evaluation(self, (args, kwargs)))
        except LeafError as e:
            if e.kind is GradientError:
                refusal = e.public(self.grad.function, "", f"callback {function_name(function)}'s result")
                setattr(refusal, _FROM_CALLBACK, True)
                raise refusal from None
            raise e.public(function_name(function), "", "result") from None

    def __getattr__(self, name: str) -> Any:
        if name == "__wrapped__":  # asked before __init__ set it (copy, pickle)
            raise AttributeError(name)
        return getattr(self.__wrapped__, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in TensorCallback.__slots__:
            object.__setattr__(self, name, value)
        else:
            setattr(self.__wrapped__, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self.__wrapped__, name)

    def __repr__(self) -> str:
        return f"<autoconvert callback taking tensors: {self.__wrapped__!r}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """Sent to another process (batched's workers) with the device its tensors go to, not
        the call's tensors themselves (the whole batch, once per task)."""
        device = vote(self.shared + self.odd)
        return _placed_callback, (self.__wrapped__, None if device is None else str(device))


def _placed_callback(function: Any, device: str | None) -> TensorCallback:
    """A ``TensorCallback`` whose tensors go to ``device`` (None: the default device)."""
    placed = [] if device is None else [torch.empty(0, dtype=torch.bool, device=device)]  # as device_leaf records one
    return TensorCallback(function, [], placed, DETACH, [])


def takes_callbacks(every: bool, grad: GradPolicy) -> Callable[[type], Any]:
    """The fallback finding the leaf for arguments of a type whose instances are callables
    (functions, methods, ``functools.partial``, ``nn.Module``): ``every`` callable
    (``callbacks=True``), or those written in torch (torch's own functions, ``nn.Module``s,
    code that reads torch, see ``written_in_torch``), which cannot take arrays; any other
    callable is handed over as it is. Classes themselves are values. The callables SciPy's
    objects hold (see _holders) are judged so too. ``grad``: the call's grad policy, which
    the callbacks' results meet."""

    def leaf(function: Any, ctx: Any) -> Any:
        return (
            TensorCallback(function, ctx.shared, ctx.odd, grad, ctx.said)
            if takes_tensors(function, every)
            else function
        )

    def fallback(cls: type) -> Any:
        # A NonlinearConstraint's fun, a LinearOperator's matvec (a LinearOperator is callable itself).
        held = holder_leaf(cls, _callable_type, leaf)
        return held if held is not None or not _callable_type(cls) else leaf

    return fallback


def takes_tensors(function: Any, every: bool) -> bool:
    """Whether the callable ``function`` is handed tensors by the callables' rule: written in
    torch (see ``written_in_torch``), or ``every`` callable (``callbacks=True``) but NumPy's
    and SciPy's own functions."""
    if every:
        return not _numpy_code(function) or _torch_code(function)
    return written_in_torch(function)


def reads_numpy(function: Any) -> bool:
    """Whether the callable ``function`` is NumPy's own, or code reading NumPy: a NumPy module
    or function among the values its code loads (globals, closure cells, defaults, what a
    partial binds, local imports, the attribute chains it reads on objects of the caller's own,
    as ``written_in_torch`` reads them), or an attribute arrays have and tensors lack
    (``x.astype``), or code of the caller's own it calls that does so (``lambda u: helper(u)``),
    followed up to ``_HELPER_DEPTH`` calls deep. Partials and bound methods are judged by their
    function, callable objects by their class's ``__call__``; code reading neither (``lambda x:
    x ** 2``) runs on tensors too."""
    return _reads_numpy(function, _HELPER_DEPTH, set())


def _reads_numpy(function: Any, depth: int, seen: _Seen) -> bool:
    """``reads_numpy``, following ``depth`` more calls into functions of the caller's own not in ``seen``."""
    function, bound = _peeled(function)
    if _is_numpy(function):
        return True
    function, owner = _function_of(function)
    if not isinstance(function, types.FunctionType) or _seen_key(function, owner, bound) in seen:
        return False
    seen.add(_seen_key(function, owner, bound))
    reads = code_reads(function.__code__)
    if any(hasattr(np.ndarray, name) and not hasattr(torch.Tensor, name) for name in reads.names):
        return True
    values = _code_values(function, owner, bound, reads)
    if any(_is_numpy(value) for value in values):
        return True
    return depth > 0 and any(_own_code(value) and _reads_numpy(value, depth - 1, seen) for value in values)


def _own_code(value: Any) -> bool:
    """Whether ``value`` is a callable of the caller's own (a function, lambda, bound method,
    partial or callable object of one), whose code the rules follow: no library's, no class."""
    return callable(value) and not isinstance(value, type) and adapter_for(_peeled(value)[0]) is OTHERS


@functools.lru_cache(maxsize=1024)  # asked per call of each callable a SciPy object holds
def _callable_type(cls: type) -> bool:
    """Whether instances of ``cls`` are callables (classes themselves are values)."""
    return not issubclass(cls, type) and any("__call__" in vars(base) for base in cls.__mro__[:-1])


def namespace_leaf(module: Any, ctx: Any) -> Any:
    """A module among the arguments: a torch namespace (``xp=torch``, array-API SciPy's
    namespace argument; array-api-compat's torch namespace) becomes the namespace of the
    arrays the function is handed, as its library's adapter says (NumPy; array-api-compat's
    NumPy namespace); a torchified module is the module it stands for; any other module is
    handed over as it is."""
    namespace = adapter_for(module).array_namespace(module)
    if namespace is not None:
        return namespace
    return stood_for(module, ctx) if isinstance(module, StandIn) else module


def device_leaf(device: torch.device, ctx: Any) -> str:
    """A torch device among the arguments (``device=`` of array-API SciPy, NumPy 2's creation
    functions): NumPy's ``"cpu"``, since the function is handed host arrays. The device is
    recorded with the call's tensors (an empty bool tensor there, which no dtype rule counts),
    so results come back on it, and a call whose tensors live elsewhere is refused."""
    ctx.odd.append(torch.empty(0, dtype=torch.bool, device=device))
    return "cpu"


def _numpy_code(function: Any) -> bool:
    """Whether ``function`` is array code of a library whose callables take arrays (NumPy's,
    SciPy's; their test suites' functions are callers' code, written like anyone's)."""
    adapter = adapter_for(function)
    return adapter.takes_arrays and ".tests." not in f"{module_of(function)}."


def written_in_torch(function: Any) -> bool:
    """Whether ``function`` is written in torch: torch's own (see ``_torch_code``), an
    ``nn.Module``, or Python code that reads torch through a global name, a closure variable,
    a default (``lambda x, axis: xp.mean(x, axis=axis)`` with ``xp`` torch) or a local import
    it uses, its nested functions included, or reads a tensor and no NumPy (a statistic
    closing over a tensor; one reading ``np`` too converts it itself), or calls a function of
    the caller's own written in torch and reading no NumPy (``lambda u, v: model(u) * v``),
    followed up to ``_HELPER_DEPTH`` calls deep. What the code reads is what its bytecode
    loads: those names' values and, on a value that is an object, class or module of the
    caller's own, the attribute chains loaded on that very name (``cfg.a``,
    ``app.parts.head``, ``mymod.helper``, ``self.layers``), with the first items of a list,
    tuple or dict read so (``self.layers[0](x)``). An attribute name loaded on anything else
    (``x.mean()`` beside an object's ``self.mean``, ``w.std()`` beside ``from torch import
    std``) or an import it never uses is no reading of torch. Code that makes its own
    tensors from the arrays it is handed (``torch.from_numpy``, or NumPy code calling
    ``torch.as_tensor``, ``torch.tensor``) is NumPy-written. Partials, bound methods and
    callable objects are judged by their function, a partial's bound arguments read as the
    defaults they stand in for (``partial(apply, model)``), ``functools.lru_cache``'s wrapper by the
    function it wraps; the code followed includes the ``nn.Module``s it calls (``lambda t:
    model(t)``), callable objects (their ``__call__``), the methods and attributes of an
    object of the caller's own class it reads (``m.energy(x)``, and ``self.layer(x)`` inside
    them), and a class's static and class methods (``Stat.layer(x)``)."""
    return _written_in_torch(function, _HELPER_DEPTH, set(), helper=False)


#: How many calls deep the caller's own functions are followed (a callback calling a model
#: calling a layer); a visited set stops recursion through the same function.
_HELPER_DEPTH = 3


#: What a walk has judged: (function, the object it is a method of, the values a partial binds
#: to it) by identity, so that two closures of one factory (``scale(scale(layer))``), one method
#: of two objects or one function bound to two values (``partial(apply, np.sin)`` beside
#: ``partial(apply, model)``) are each judged.
_Seen = set[tuple[int, ...]]


class _Bound(NamedTuple):
    """The arguments ``functools.partial``s bind ahead of the caller's: positional, then by keyword."""

    args: tuple[Any, ...] = ()
    keywords: dict[str, Any] = {}  # noqa: RUF012 - never mutated: a new dict per partial peeled


_NOTHING_BOUND = _Bound()


def _peeled(function: Any) -> tuple[Any, _Bound]:
    """The callable ``function`` calls through its partials, with the arguments they bind:
    nested partials (a subclass's, which ``functools.partial`` does not flatten), a bound
    method of a partial (its object the partial's next positional argument) and
    ``functools.partialmethod``'s (a partial of a bound method) each add theirs, the outer's
    keywords over the inner's, as the call passes them."""
    bound = _NOTHING_BOUND
    while True:
        if isinstance(function, functools.partial):
            bound = _Bound((*function.args, *bound.args), {**function.keywords, **bound.keywords})
            function = function.func
        elif isinstance(function, types.MethodType) and isinstance(function.__func__, functools.partial):
            bound = _Bound((function.__self__, *bound.args), bound.keywords)
            function = function.__func__
        elif (call := _call_of(function)) is not None:  # a callable object: its class's __call__ read through
            partialmethod = isinstance(call, functools.partialmethod)
            function = _bound(call, function, type(function)) if partialmethod else call
        elif (wrapped := _wrapped(function)) is not None:  # lru_cache's wrapper: the function it wraps
            function = wrapped
        else:
            return function, bound


def _call_of(function: Any) -> Any:
    """The ``__call__`` its class gives ``function``, an object, where the rule reads through it:
    a ``functools.partialmethod`` of a Python function (read as the partial of the bound method
    it gives), or a callable no descriptor binds, called without the object
    (``__call__ = functools.partial(torch.mul, w)``, ``= w.mul``, ``= torch.sin``); else None."""
    if isinstance(function, (types.FunctionType, type)):
        return None
    cls: type = type(function)
    return _read_call(cls)


@functools.lru_cache(maxsize=1024)  # asked per judgement of each callable
def _read_call(cls: type) -> Any:
    """``_call_of`` an instance of ``cls``."""
    call = _class_member(cls, "__call__")
    if isinstance(call, functools.partialmethod) and isinstance(call.func, types.FunctionType):
        return call
    if isinstance(call, staticmethod) and not isinstance(call.__func__, types.FunctionType):
        return call.__func__  # called as it is too: a partial, a bound method, a builtin, a cached function
    return call if isinstance(call, (functools.partial, types.MethodType, types.BuiltinFunctionType)) else None


def _function_of(function: Any) -> tuple[Any, Any]:
    """The function whose code ``function`` (peeled: see ``_peeled``) runs, and the object it
    is a method of (None: none): a bound method's function and object, a callable object's
    class's ``__call__`` and the object; anything else as it is."""
    if isinstance(function, types.MethodType):  # never getattr(module, "__func__"): NumPy's __getattr__ is slow
        return function.__func__, function.__self__
    if isinstance(function, (types.FunctionType, type, types.BuiltinFunctionType)) or not callable(function):
        return function, None
    return _class_member(type(function), "__call__"), function


def _written_in_torch(function: Any, depth: int, seen: _Seen, *, helper: bool) -> bool:
    """``written_in_torch``, following ``depth`` more calls into functions of the caller's
    own not in ``seen``; a ``helper`` (one the callable calls) reading NumPy converts arrays
    itself, and is not torch's."""
    if isinstance(function, torch.nn.Module):
        return True
    function, bound = _peeled(function)
    if isinstance(function, torch.nn.Module) or _torch_code(function):
        return True
    if isinstance(function, operator.methodcaller):
        return _calls_a_tensor_method(function)
    function, owner = _function_of(function)
    if not isinstance(function, types.FunctionType) or _seen_key(function, owner, bound) in seen:
        return False
    return _reads_torch(function, owner, bound, depth, seen, helper=helper)


def _calls_a_tensor_method(caller: operator.methodcaller) -> bool:
    """Whether ``caller`` (``operator.methodcaller(name, *args, **kwargs)``) is torch code: it
    passes a tensor, or names a method tensors have and arrays lack (``"mul"``, ``"sin"``)."""
    reduced: Any = caller.__reduce__()
    make, args = reduced[:2]  # a partial of the type where it has keywords
    given: list[Any] = [*make.args, *args] if isinstance(make, functools.partial) else [*args]
    name, values = given[0], given[1:]
    keywords = make.keywords if isinstance(make, functools.partial) else {}
    if any(isinstance(value, torch.Tensor) for value in (*values, *keywords.values())):
        return True
    return hasattr(torch.Tensor, name) and not hasattr(np.ndarray, name)


def _seen_key(function: Any, owner: Any, bound: _Bound) -> tuple[int, ...]:
    """What ``seen`` holds for ``function``, a method of ``owner``, with what partials bind to it."""
    return (id(function), id(owner), *map(id, bound.args), *map(id, bound.keywords.values()))


def _parameter_values(function: types.FunctionType, owner: Any, bound: _Bound) -> dict[str, Any]:
    """The values ``function``'s parameters hold before the caller's arguments fill the rest:
    its defaults, and over them what partials bind (``bound``; after ``self`` where it is a
    method of ``owner``): positional arguments in order (those past the named ones as its
    ``*args`` tuple), keywords by name (those it does not name in its ``**kwargs`` dict)."""
    code, defaults, keyword_defaults = function.__code__, function.__defaults__, function.__kwdefaults__
    if bound is _NOTHING_BOUND and not defaults and not keyword_defaults:
        return {}
    defaults = defaults or ()
    values = dict(zip(code.co_varnames[code.co_argcount - len(defaults) : code.co_argcount], defaults, strict=False))
    values.update(keyword_defaults or {})
    if bound is _NOTHING_BOUND:
        return values
    named = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    first = 1 if owner is not None else 0
    positional = code.co_varnames[first : code.co_argcount]
    values.update(zip(positional, bound.args, strict=False))
    extra = code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & inspect.CO_VARARGS and len(bound.args) > len(positional):
        values[code.co_varnames[extra]] = bound.args[len(positional) :]
        extra += 1
    unnamed = {}
    for name, value in bound.keywords.items():
        if name in named[first:]:
            values[name] = value
        else:
            unnamed[name] = value
    if unnamed and code.co_flags & inspect.CO_VARKEYWORDS:
        values[code.co_varnames[extra]] = unnamed
    return values


def _reads_torch(function: Any, owner: Any, bound: _Bound, depth: int, seen: _Seen, *, helper: bool) -> bool:
    """``_written_in_torch`` of a Python function ``function``, a method of ``owner`` (None:
    none), with the arguments partials bind to it, from the values its code loads and the
    attribute chains it reads on them (``self.layers``, ``cfg.a``, ``mymod.helper``; see
    ``_read``): an argument a partial binds is read as the default it stands in for is."""
    seen.add(_seen_key(function, owner, bound))
    reads = code_reads(function.__code__)
    if "from_numpy" in reads.names:
        return False
    values = _code_values(function, owner, bound, reads)
    numpy = any(_is_numpy(value) for value in values)
    if numpy and helper:
        return False
    if numpy and not MAKES_TENSORS.isdisjoint(reads.names):
        return False  # NumPy code that makes its own tensors (torch.as_tensor(np.clip(x, 0, 1)))
    if any(_is_torch(value) for value in values):
        return True
    if not numpy and any(isinstance(value, torch.Tensor) for value in values):
        return True
    if depth == 0:
        return False
    return any(_torch_helper(value, depth - 1, seen) for value in values)


def _code_values(function: types.FunctionType, owner: Any, bound: _Bound, reads: Any) -> list[Any]:
    """The values ``function``'s code (which ``reads``) loads, a method of ``owner`` (None:
    none) with the arguments partials bind to it, and the attribute chains it reads on them
    (``self.layers``, ``cfg.a``, ``mymod.helper``; see ``_read``): an argument a partial binds is
    read as the default it stands in for is."""
    code = function.__code__
    values: list[Any] = []
    scope, chains = function.__globals__, reads.global_chains
    for name in reads.globals:
        if name in scope:
            _read(scope[name], chains.get(name), values)
    chains = reads.local_chains
    for name, cell in zip(code.co_freevars, function.__closure__ or (), strict=False):
        if _filled(cell):
            _read(cell.cell_contents, chains.get(name), values)
    for name, value in _parameter_values(function, owner, bound).items():
        _read(value, chains.get(name), values)
    for name, (module, attribute) in reads.local_imports.items():
        _read(_imported(module, attribute), chains.get(name), values)
    if owner is not None and code.co_argcount:
        for path in chains.get(code.co_varnames[0], ()):  # self.<name>: the owner's, whoever it is
            if path:
                _follow(owner, path, values)
        for path in chains.get(SUPER, ()):
            _read_on_super(_closure_or_global(function, "__class__"), owner, path, values)
        for cls_name, argument in reads.named_supers:  # super(C, self): C's next class, on self
            if argument == code.co_varnames[0]:
                for path in chains.get(super_of(cls_name, argument), ()):
                    _read_on_super(_closure_or_global(function, cls_name), owner, path, values)
    return values


#: How many items of a list, tuple or dict the code reads are judged (``layers[0](t)``).
_ITEMS_READ = 64
#: The containers whose items the code reads are judged, with any dict (``OrderedDict``,
#: ``defaultdict``: what its storage holds, read with dict's own methods, no code of theirs run).
_CONTAINERS = frozenset({list, tuple, dict})
#: A dict's methods whose call reads its values whole (``for f in d.values()``), or one of
#: them by a key the code computes (``d.get(key)``; by a constant: see ``_gets_item``).
_VALUES_READ = frozenset({"values", "items", "get"})
#: Types of values that are never torch nor hold any: not worth judging item by item.
_NO_CODE = (int, float, complex, str, bytes, type(None), np.generic, np.ndarray)
#: An attribute that cannot be read without running code (a property) or is not there.
_NOT_READ = object()


def _read(value: Any, paths: tuple[ReadPath, ...] | None, values: list[Any]) -> None:
    """``value``, which the code loads, into ``values``, with what it reads on it along each
    chain in ``paths`` (``app.parts.head``, ``layers[0]``; see ``_follow``), and the items of
    a list, tuple or dict it reads whole (iterated, indexed by a variable; None: a value,
    such as a default, the code may read whole)."""
    values.append(value)
    if (paths is None or () in paths) and _container(value):
        _items(value, values)
    followed = None
    for path in paths or ():
        if _reads_dict_values(value, path):
            _items(value, values)
        elif path and type(path[0]) is str and not _gets_item(value, path, 0):
            if followed is None:
                followed = _chain_followed(value)
            if not followed:
                continue
        if path:
            _follow(value, path, values)


def _follow(value: Any, path: ReadPath, values: list[Any]) -> None:
    """What ``path`` reads from ``value`` (its first step taken), into ``values``: attributes
    as far as each value is the caller's own (``app.parts`` is, a tensor or a module of
    torch's is not), items of lists, tuples and dicts by a constant key; at its end, the
    items of a list, tuple or dict it reads whole."""
    for at, step in enumerate(path):
        if type(step) is str:
            if at and _reads_dict_values(value, path[at:]):
                _items(value, values)
                return
            if _gets_item(value, path, at):
                continue  # d.get("a"): the next step reads d["a"]
            if at and not _chain_followed(value):
                return
            value = _attribute_read(value, step)
        else:
            value = _item(value, step[0])
        if value is _NOT_READ:
            return
        values.append(value)
    if _container(value):
        _items(value, values)


def _container(value: Any) -> bool:
    """Whether ``value`` is a list, tuple or dict whose items the code's reading of it reads."""
    return type(value) in _CONTAINERS or isinstance(value, dict)


def _reads_dict_values(value: Any, path: ReadPath) -> bool:
    """Whether ``path`` ends reading a dict's values whole (``d.values()``, ``d.items()``,
    ``d.get(key)``)."""
    return len(path) == 1 and path[0] in _VALUES_READ and isinstance(value, dict)


def _gets_item(value: Any, path: ReadPath, at: int) -> bool:
    """Whether ``path``'s step ``at`` is a dict's ``get`` by a constant key (``d.get("a")``),
    read as ``d["a"]``: the key its next step."""
    return path[at] == "get" and at + 1 < len(path) and type(path[at + 1]) is tuple and isinstance(value, dict)


def _item(container: Any, key: Any) -> Any:
    """``container[key]`` for a list, tuple or dict (``_NOT_READ``: another type, or no such item)."""
    kind = type(container)
    if isinstance(container, dict):  # never a defaultdict's factory, a subclass's __getitem__
        return dict.get(container, key, _NOT_READ)
    if (kind is list or kind is tuple) and type(key) is int and -len(container) <= key < len(container):
        return container[key]
    return _NOT_READ


def _items(value: Any, values: list[Any]) -> None:
    """The first items of a list, tuple or dict (a dict's values) into ``values``, numbers,
    strings and arrays aside."""
    items = dict.values(value) if isinstance(value, dict) else value
    values.extend(item for item in itertools.islice(items, _ITEMS_READ) if not isinstance(item, _NO_CODE))


def _chain_followed(value: Any) -> bool:
    """Whether the attributes the code reads on ``value`` are followed: an object, class or
    module of the caller's own."""
    return _own_module(value) if isinstance(value, types.ModuleType) else _own_object(value)


@functools.lru_cache(maxsize=1024)  # asked per judgement of each module a callable reads (np.sin)
def _own_module(module: types.ModuleType) -> bool:
    """Whether ``module`` is the caller's own: no library's, no standard module."""
    return module.__name__.partition(".")[0] not in sys.stdlib_module_names and adapter_for(module) is OTHERS


def _own_object(value: Any) -> bool:
    """Whether ``value`` is an object or a class of the caller's own: no number, string,
    function, module or library's object."""
    return (value if isinstance(value, type) else type(value)).__module__ != "builtins" and adapter_for(value) is OTHERS


def _read_on_super(defining: Any, owner: Any, path: ReadPath, values: list[Any]) -> None:
    """What ``super().<path>`` reads in a method of ``owner`` (an instance, or a class in a
    class method), into ``values``: the member of the first class after ``defining`` (the
    method's own, its ``__class__`` cell, for a zero-argument ``super()``; ``C`` for
    ``super(C, self)``) in the owner's class's method resolution order, bound as ``super()``
    binds it."""
    cls = owner if isinstance(owner, type) else type(owner)
    order = cls.__mro__
    if not isinstance(defining, type) or defining not in order:
        return
    for base in order[order.index(defining) + 1 :]:
        if path[0] in base.__dict__:
            member = _bound(base.__dict__[path[0]], owner, cls)
            if member is not _NOT_READ:
                _read(member, (path[1:],), values)
            return


def _closure_or_global(function: types.FunctionType, name: str) -> Any:
    """The value ``function`` loads as ``name``: its closure variable's, else its module's
    global (None: none)."""
    cells = dict(zip(function.__code__.co_freevars, function.__closure__ or (), strict=False))
    if name in cells:
        return cells[name].cell_contents if _filled(cells[name]) else None
    return function.__globals__.get(name)


def _attribute_read(value: Any, name: str) -> Any:
    """``value``'s attribute ``name`` as the code reading it gets it (``_NOT_READ``: none, or one
    computed by running code: a property, ``__getattr__``): a module's global; an object's
    own attribute, else its class's method bound to it, a static or class method, or a value
    the class holds; a class's likewise."""
    if isinstance(value, types.ModuleType):
        return value.__dict__.get(name, _NOT_READ)
    if isinstance(value, type):
        cls = value
    else:
        cls, own = type(value), getattr(value, "__dict__", None)
        if isinstance(own, dict) and name in own:
            return own[name]  # a cached_property's value once computed too
    member = _class_member(cls, name)
    if member is _CLASS_OF:  # self.__class__.table, unless a class computes its own __class__
        return type(value)
    return _NOT_READ if member is None else _bound(member, value, cls)


def _bound(member: Any, value: Any, cls: type) -> Any:
    """A class's ``member`` as reading it on ``value`` (an instance of ``cls``, or ``cls``
    itself) gives it, where no code of the caller's runs: a function bound to ``value``, a
    static or class method, a slot's value (``__slots__``, ``dataclass(slots=True)``), the
    function of a ``functools.lru_cache`` method or a ``functools.cached_property`` not yet
    computed bound to ``value`` (code that reads it runs that function), a value the class
    holds (``_NOT_READ``: a property or another descriptor, an empty slot)."""
    if isinstance(member, staticmethod):
        return member.__func__
    if isinstance(member, classmethod):  # over functools.lru_cache too: the function it wraps, bound to the class
        function = member.__func__
        wrapped = None if isinstance(function, types.FunctionType) else _wrapped(function)
        return types.MethodType(wrapped if isinstance(wrapped, types.FunctionType) else function, cls)
    if isinstance(member, types.FunctionType):
        return member if value is cls else types.MethodType(member, value)
    if isinstance(member, functools.partialmethod) and isinstance(member.func, types.FunctionType) and value is not cls:
        return functools.partial(types.MethodType(member.func, value), *member.args, **member.keywords)
    if isinstance(member, types.MemberDescriptorType) and value is not cls:
        try:
            return member.__get__(value, cls)
        except AttributeError:  # a slot not yet set
            return _NOT_READ
    if isinstance(member, functools.cached_property) and value is not cls:
        return types.MethodType(member.func, value)  # not yet computed: its function runs on the read
    if not hasattr(type(member), "__get__"):
        return member
    wrapped = _wrapped(member) if callable(member) else None
    if isinstance(wrapped, types.FunctionType):  # a method behind functools.lru_cache, bound as the wrapper binds
        return wrapped if value is cls else types.MethodType(wrapped, value)
    return _NOT_READ


#: What an object's ``__class__`` is where its class does not compute its own.
_CLASS_OF = object.__dict__["__class__"]


def _wrapped(function: Any) -> Any:
    """The function a callable object of the caller's own wraps in C code (``functools.lru_cache``'s
    wrapper), by its ``__wrapped__``; None for any other callable (a ``functools.wraps``
    wrapper in Python is followed through its own code; a library's object, numba's kernels,
    is its library's)."""
    if isinstance(function, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, type)):
        return None
    own = getattr(function, "__dict__", None)
    wrapped = own.get("__wrapped__") if isinstance(own, dict) else None
    if wrapped is None or wrapped is function or not _own_object(function):
        return None
    return None if isinstance(_class_member(type(function), "__call__"), types.FunctionType) else wrapped


def _class_member(cls: type, name: str) -> Any:
    """What ``cls`` or a base defines as ``name`` (None: nothing), as ``inspect.getattr_static``
    finds a class's member, without its metaclass and shadowed-dict checks a callable's judgement
    at each call cannot afford."""
    for base in cls.__mro__:
        if name in base.__dict__:
            return base.__dict__[name]
    return None


def _torch_helper(value: Any, depth: int, seen: _Seen) -> bool:
    """Whether ``value``, which a callable's code loads, is torch code the callable calls: an
    ``nn.Module``, or code of the caller's own (see ``_own_code``) written in torch and reading
    no NumPy; one that converts arrays itself (``isinstance(x, torch.Tensor)``, then
    ``np.asarray``) wants arrays."""
    if isinstance(_peeled(value)[0], torch.nn.Module):
        return True
    return _own_code(value) and _written_in_torch(value, depth, seen, helper=True)


def _imported(module: str, name: str | None) -> Any:
    """What a local import binds, if the module is imported (by the function's earlier calls,
    or by anyone: torch always is); None otherwise, which reads as neither torch nor NumPy."""
    found = sys.modules.get(module)
    if name is None or found is None:
        return found
    return getattr(found, name, None) or sys.modules.get(f"{module}.{name}")


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell (a name not yet bound) raises
    except ValueError:
        return False
    return True


def _is_torch(value: Any) -> bool:
    """Whether ``value`` is torch: a torch namespace, or torch's own function or class, or a
    partial of one (``g=partial(torch.mul, w)``), judged as a callable handed directly is."""
    if isinstance(value, types.ModuleType):
        return adapter_for(value).is_torch(value)
    return callable(value) and _torch_code(_peeled(value)[0])


def _is_numpy(value: Any) -> bool:
    """Whether ``value`` is NumPy: a NumPy module, or NumPy's own function or class."""
    return (isinstance(value, types.ModuleType) or callable(value)) and adapter_for(value) is NUMPY


def _torch_code(function: Any) -> bool:
    """Whether ``function`` is torch's own, or array-api-compat's torch namespace's
    (``xp.mean`` in SciPy's torch-backend code, from SciPy's vendored copy too), or a tensor's
    or module's own builtin method (``w.mul``: torch's code, though bound to the caller's tensor),
    or the tensor class's (``torch.Tensor.mul``, defined on torch's C base class)."""
    if isinstance(function, types.BuiltinMethodType) and isinstance(function.__self__, _TORCH_OWNERS):
        return True
    if isinstance(function, types.MethodDescriptorType) and function.__objclass__ in _TENSOR_BASES:
        return True
    return adapter_for(function).written_in_torch(function)


#: The objects whose builtin methods are torch's code.
_TORCH_OWNERS = (torch.Tensor, torch.nn.Module)
#: The classes ``torch.Tensor``'s builtin methods are defined on (not ``object``, whose are no torch's).
_TENSOR_BASES = frozenset(torch.Tensor.__mro__[:-1])


#: Names NumPy code reads that torch.compile's NumPy tracing has but cannot trace: an array's
#: ``dtype``, ``flags`` and ``base`` (dynamo: "Unsupported ndarray attribute access"), NumPy's
#: random streams, which it would draw from torch's generator instead, and ``copyto`` and
#: ``put``, which fail in its fake tensors; and those it traces to other results than NumPy's
#: (``median`` of a whole array, a percentile or quantile at a scalar ``q``, have shape (1,), not ()).
_UNTRACED = frozenset(
    {
        "dtype",
        "flags",
        "base",
        "random",
        "copyto",
        "put",
        "median",
        "nanmedian",
        "percentile",
        "nanpercentile",
        "quantile",
        "nanquantile",
    }
)
#: Builtins whose effect is outside the values (printing, files, frames): never in a graph.
_EFFECTS = frozenset({"print", "open", "input", "exec", "eval", "compile", "globals", "locals", "vars", "breakpoint"})
#: Values a traced body may hold as they are.
_CONSTANTS = (int, float, complex, bool, str, bytes, type(None), np.generic, np.dtype, np.ndarray)


def _numpy_traced() -> Any:
    """torch's NumPy tracing namespace (``torch._numpy``): the NumPy dynamo can trace (None
    where this torch has none). Imported on the first judgement: a plain import, not a cached
    function, since dynamo may meet a plan being made inside a compiled function."""
    try:
        import torch._numpy as traced
    except ImportError:
        return None
    return traced


def reads_numpy_alone(function: Any) -> str | None:
    """Why torch.compile cannot trace ``function``'s NumPy code into its graph, judged from
    what its code loads (with the Python functions it calls), as ``written_in_torch`` reads
    it; None where it reads NumPy (what torch's NumPy tracing has), ``math`` and builtins
    alone."""
    traced = _numpy_traced()
    if traced is None:
        return "this torch has no NumPy tracing (torch._numpy)"
    if not passes_for_function(function):
        # dynamo meets the wrapper of a ufunc or a builtin as an object, whose call it does not
        # inline: NumPy's own functions trace when called from a Python function decorated.
        if _is_numpy(function):
            return "a NumPy function itself, which dynamo does not inline; decorate a Python function calling it"
        return f"it is a {type(function).__name__}, not a Python function whose code can be read"
    return _numpy_alone(function, traced, {})


#: NumPy functions whose arrays torch's NumPy tracing makes on the default device, the CPU,
#: whatever device the arguments are on: from Python values, shapes and ranges, and np.cross,
#: which fills a result made so (torch/_numpy/_funcs_impl.py). Inside a graph on another device
#: they meet its tensors in a device mismatch (or land the result on the CPU); torch's own way
#: out, a torch.device context, fails in its NumPy tracing (pytorch/pytorch#140884).
_MADE_ON_THE_CPU = frozenset(
    {
        "array",
        "asarray",
        "arange",
        "linspace",
        "logspace",
        "geomspace",
        "zeros",
        "ones",
        "empty",
        "full",
        "eye",
        "identity",
        "tri",
        "indices",
        "diag_indices",
        "tril_indices",
        "triu_indices",
        "tril_indices_from",
        "triu_indices_from",
        "cross",
    }
)


#: Of those, the ones that make an array on the CPU only from a literal (``np.array([0.3, 0.7])``):
#: handed an array, ``np.asarray(x)`` keeps it where it is.
_FROM_LITERALS = frozenset({"array", "asarray", "asanyarray"})
#: The opcodes that end a literal argument: a constant, or a list, tuple or set built in place.
_LITERAL_ENDS = frozenset({"LOAD_CONST", "LOAD_SMALL_INT", "BUILD_LIST", "BUILD_TUPLE", "BUILD_SET", "LIST_EXTEND"})
#: The opcodes that load a global or closure variable by name.
_NAME_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME"})


@functools.lru_cache(maxsize=4096)
def _first_arguments(code: types.CodeType) -> tuple[tuple[str, dis.Instruction], ...]:
    """Each call ``code`` makes of a name in ``_FROM_LITERALS``, with the instruction that leaves
    its first argument on the stack (the last one before the call at one value above the
    callable)."""
    instructions = list(dis.get_instructions(code))
    found = []
    for at, loaded in enumerate(instructions):
        if loaded.argval not in _FROM_LITERALS or not loaded.opname.startswith(
            ("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL")
        ):
            continue
        depth, last = 0, None
        for following in instructions[at + 1 :]:
            if following.opname == "PUSH_NULL":  # Python 3.13's, after the callable: not an argument
                continue
            depth += dis.stack_effect(following.opcode, following.arg, jump=False)
            if depth < 0:  # the call, taking its arguments and the callable
                break
            if depth == 1:
                last = following
        if last is not None:
            found.append((loaded.argval, last))
    return tuple(found)


def _made_from_literals(code: types.CodeType) -> set[str]:
    """The names in ``_FROM_LITERALS`` that ``code`` calls with a literal first argument, which
    it builds or loads in place."""
    return {name for name, last in _first_arguments(code) if last.opname in _LITERAL_ENDS}


#: The opcodes that build a list or set in place (a tuple built in place is as often a result's).
_LIST_BUILDS = frozenset({"BUILD_LIST", "BUILD_SET", "LIST_EXTEND", "SET_UPDATE"})
#: The opcodes that load a value and leave the rest of the stack as it is.
_PLAIN_LOADS = frozenset(
    {"LOAD_FAST", "LOAD_CONST", "LOAD_SMALL_INT", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_FAST_BORROW", "LOAD_FAST_CHECK"}
)


@functools.lru_cache(maxsize=4096)
def _writes_out_floats(code: types.CodeType) -> bool:
    """Whether ``code`` writes out numbers as a list or tuple with a float among them
    (``np.dot(x, [0.2, 0.8])``, ``np.concatenate([x, [1.0]])``, ``np.quantile(x, (0.25, 0.75))``):
    Python values torch's NumPy tracing makes an array of on the CPU. A tuple returned as it
    is, or built in place around a value (``return y, 0.5``), is a result's."""
    instructions = list(dis.get_instructions(code))
    for at, loaded in enumerate(instructions):
        if loaded.opname != "LOAD_CONST":
            continue
        value = loaded.argval
        if isinstance(value, tuple) and any(isinstance(v, (float, complex)) for v in value):
            following = instructions[at + 1].opname if at + 1 < len(instructions) else ""
            if following not in {"RETURN_VALUE", "RETURN_CONST"}:
                return True
        elif isinstance(value, (float, complex)):
            after = next((i.opname for i in instructions[at + 1 :] if i.opname not in _PLAIN_LOADS), "")
            if after in _LIST_BUILDS:
                return True
    return False


#: What makes_arrays_on_the_cpu names for numbers the code writes out (see _writes_out_floats).
_WRITTEN_OUT = "a list of floats written out"


def makes_arrays_on_the_cpu(function: Any) -> str | None:
    """The first (by name) of the NumPy functions that torch's NumPy tracing makes arrays with
    on the CPU whatever the arguments' device (see ``_MADE_ON_THE_CPU``) which ``function``'s
    code reads, with the Python functions it calls as far as ``reads_numpy_alone`` walks them
    (all, where it judges the code traceable; ``compile="trace"`` traces the others too); None
    where it reads none."""
    traced = _numpy_traced()
    if traced is None or not passes_for_function(function):
        return None
    walked: dict[types.CodeType, types.FunctionType] = {}
    _numpy_alone(function, traced, walked)  # for the code it walks
    names = {name for code in walked for name in code_reads(code).names} & _MADE_ON_THE_CPU - _FROM_LITERALS
    names |= {name for code in walked for name in _made_from_literals(code)}
    names |= {name for walked_function in walked.values() for name in _values_on_the_cpu(walked_function)}
    if not names and any(_writes_out_floats(code) for code in walked):
        return _WRITTEN_OUT
    return min(names, default=None)


def _values_on_the_cpu(function: types.FunctionType) -> list[str]:
    """The globals, closure variables and parameters' defaults ``function``'s code reads that
    torch's NumPy tracing holds on the CPU: an array (``MEAN = np.array([0.485, 0.456, 0.406])``,
    ``def f(x, m=np.array(...))``), or a tuple or list of numbers with a float among them or
    handed to ``np.asarray`` (one of ints elsewhere is a shape or axes)."""
    code = function.__code__
    handed = {last.argval for _, last in _first_arguments(code) if last.opname in _NAME_LOADS}
    values = _values_loaded(function, code_reads(code))
    values += _parameter_values(function, None, _NOTHING_BOUND).items()
    return [
        name
        for name, value in values
        if (isinstance(value, np.ndarray) and value.ndim > 0)
        or (
            isinstance(value, (tuple, list))
            and value
            and (name in handed or any(isinstance(v, (float, complex)) for v in value))
        )
    ]


def _numpy_alone(
    function: types.FunctionType, traced: Any, seen: dict[types.CodeType, types.FunctionType]
) -> str | None:
    """``reads_numpy_alone`` of a Python function, ``seen`` the code already judged (with a
    function of it)."""
    code = function.__code__
    if code in seen:
        return None
    seen[code] = function
    reads = code_reads(code)
    untraced = sorted(name for name in reads.names - reads.globals if _untraced_name(name, traced))
    if untraced:
        return f"its code reads {untraced[0]}, which torch's NumPy tracing does not trace"
    if _catches(code):
        return (
            "its code catches exceptions (an except clause), and a compiled graph raises what NumPy raises at run "
            "time (np.linalg.LinAlgError) as torch's own errors, past the handler"
        )
    builtins = _builtins_of(function)
    defaults = _parameter_values(function, None, _NOTHING_BOUND).items()
    # run traced too, judged as the callables the code loads by name are (a partial: not traced),
    # bare or held in a tuple, list or dict (``hs=(helper,)``, then ``hs[0](a)``)
    helpers = [
        (name, item)
        for name, value in defaults
        for item in (
            value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else (value,)
        )
        if callable(item) and not isinstance(item, type)
    ]
    for name, value in [*_values_loaded(function, reads), *helpers]:
        why = _traced_value(name, value, builtins, traced, seen)
        if why is not None:
            return why
    return None


@functools.lru_cache(maxsize=4096)
def _catches(code: types.CodeType) -> bool:
    """Whether ``code``, or a function nested in it, has an except clause: one matching a type
    (``except E``, ``except* E``), or a bare ``except:``, whose handler drops the exception it
    pushed first (where a ``finally`` block's runs its own code, and a ``with`` block's hands
    it to ``__exit__``)."""
    instructions = list(dis.get_instructions(code))
    for instruction, following in itertools.pairwise(instructions):
        if instruction.opname in {"CHECK_EXC_MATCH", "CHECK_EG_MATCH"}:
            return True
        if instruction.opname == "PUSH_EXC_INFO" and following.opname == "POP_TOP":
            return True
    return any(_catches(const) for const in code.co_consts if isinstance(const, types.CodeType))


def _builtins_of(function: types.FunctionType) -> dict[str, Any]:
    """The builtins ``function``'s globals give it."""
    builtins = function.__globals__.get("__builtins__", {})
    return builtins if isinstance(builtins, dict) else vars(builtins)


def _values_loaded(function: types.FunctionType, reads: Any) -> list[tuple[str, Any]]:
    """What ``function``'s code (which ``reads``) loads by name: its globals (builtins where
    its module lacks one), its closure's filled cells, what it imports."""
    scope, builtins, code = function.__globals__, _builtins_of(function), function.__code__
    values = [(name, scope[name] if name in scope else builtins.get(name)) for name in sorted(reads.globals)]
    cells = zip(code.co_freevars, function.__closure__ or (), strict=True)
    values += [(name, cell.cell_contents) for name, cell in cells if _filled(cell)]
    values += [(name or module, _imported(module, name)) for module, name in sorted(reads.imports, key=str)]
    return values


def _untraced_name(name: str, traced: Any) -> bool:
    """Whether an attribute name the code reads is NumPy's that torch's NumPy tracing lacks."""
    if name in _UNTRACED:
        return True
    on_numpy = hasattr(np, name) or hasattr(np.ndarray, name)
    return on_numpy and not hasattr(traced, name) and not hasattr(traced.ndarray, name)


def _traced_value(
    name: str, value: Any, builtins: dict[str, Any], traced: Any, seen: dict[types.CodeType, types.FunctionType]
) -> str | None:
    """Why ``value``, which the code loads as ``name``, keeps it out of torch's graph (None: it does not)."""
    if isinstance(value, _CONSTANTS) or value is None:
        return None
    if isinstance(value, tuple) and all(isinstance(v, _CONSTANTS) for v in value):
        return None
    if builtins.get(name) is value and name not in _EFFECTS:
        return None
    if value is math or (callable(value) and getattr(value, "__module__", None) == "math"):
        return None
    if _is_numpy(value):
        if isinstance(value, types.ModuleType) or getattr(traced, getattr(value, "__name__", ""), None) is not None:
            return None
        return f"its code reads {name}, which torch's NumPy tracing does not have"
    if passes_for_function(value):  # a decorated function too: dynamo inlines it where it can (see _trace)
        return _numpy_alone(value, traced, seen)
    what = f"module {value.__name__}" if isinstance(value, types.ModuleType) else type(value).__name__
    return f"its code reads {name} ({what}), not NumPy"
