"""What an adapter says about one library on the other side of a call, and its defaults.

An ``Adapter`` holds, for one library autoconvert calls into (or whose callables it is
handed), what the call path needs to know of it: how it rejects read-only memory, which
arguments its functions write into, the options ``torchify`` gives it, how its callables
take arguments. The defaults are those of a library nothing special is known of.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np


class RejectionWords(NamedTuple):
    """How compiled code words its rejection of a read-only array, told by the module of the
    error's class (so recognising it imports nothing) and words all found in its message."""

    module: str  # the top-level module of the error's class (numba's TypingError, cv2.error)
    words: tuple[str, ...]
    writes: bool  # a rejected write; else a rejection on entry, before any work


class Overwritten:
    """One argument a function may write into: by name and position, and the flag (name,
    position, default) that lets the library do it, or no flag where it always may."""

    __slots__ = ("default", "flag", "flag_position", "name", "position")

    def __init__(
        self, name: str, position: int | None, flag: str | None, flag_position: int | None, default: Any
    ) -> None:
        self.name, self.position = name, position
        self.flag, self.flag_position, self.default = flag, flag_position, default

    def asked(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether this call lets the library write into the argument."""
        if self.flag is None:
            return True
        if self.flag in kwargs:
            return bool(kwargs[self.flag])
        position = self.flag_position
        return bool(args[position] if position is not None and position < len(args) else self.default)


class CopyParameter(NamedTuple):
    """A parameter telling a function whether to copy its input (``copy``, ``copy_X``): by name
    and position, and its default; False lets the function write into the input."""

    name: str
    position: int | None
    default: Any

    def says_no_copy(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool | None:
        """Whether this call tells the function not to copy (None: the call leaves it to the
        function, ``copy=None``)."""
        if self.name in kwargs:
            given = kwargs[self.name]
        elif self.position is not None and self.position < len(args):
            given = args[self.position]
        else:
            given = self.default
        return None if given is None or given is inspect.Parameter.empty else not given


def copy_parameters(fn: Any) -> list[CopyParameter]:
    """``fn``'s parameters named ``copy`` or ``copy_<something>``."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    return [
        CopyParameter(p.name, i if p.kind in _POSITIONAL else None, p.default)
        for i, p in enumerate(parameters)
        if p.name == "copy" or p.name.startswith("copy_")
    ]


class Bracket(NamedTuple):
    """A parameter whose tuple of arrays a function unpacks (see ``Adapter.bracket``)."""

    #: Where it is passed by position (None: by keyword alone).
    position: int | None
    name: str


#: Whether one call (its arguments and keywords, a method's object first) writes into its tensors.
WritesArguments = Callable[[tuple[Any, ...], dict[str, Any]], bool]


def always(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """The ``WritesArguments`` of a function that writes whatever its call says."""
    return True


class Adapter:
    """One library as the call path meets it; subclasses override what differs."""

    #: The library's name, as its users write it.
    name = "code of another library"
    #: The top-level packages whose functions and classes are the library's.
    packages: tuple[str, ...] = ()
    #: Endings of the messages its compiled code rejects a write into a read-only array with
    #: (NumPy's "<what> is read-only"), told from a function's own errors by where they were raised.
    rejected_writes: tuple[str, ...] = ()
    #: Those of them refusing to make an array writable, which no array sharing a tensor's memory
    #: may be (NumPy's ``a.setflags(write=True)``): a private copy alone answers them.
    refused_flags: tuple[str, ...] = ()
    #: Words of such rejections worded as a list of demands ("must be contiguous, writable, aligned").
    rejected_demands: tuple[str, ...] = ()
    #: Words of the TypeErrors it rejects a read-only buffer for writing with.
    rejected_buffers: tuple[str, ...] = ()
    #: Whole messages it rejects a read-only array with on entry, before reading it.
    rejected_on_entry: tuple[str, ...] = ()
    #: Refusals told by the error's class (its own exception types).
    rejections: tuple[RejectionWords, ...] = ()
    #: Functions whose views are read-only by the library's own rule, whatever they view.
    read_only_views: frozenset[str] = frozenset()
    #: Of those, the ones taking ``writeable=``, and its default: their views are read-only
    #: by the library's rule only where it is False (else only where what they view is).
    writeable_defaults: Mapping[str, bool] = types.MappingProxyType({})
    #: Whether its functions take read-only arrays, never rejecting them on entry.
    takes_read_only = False
    #: Whether its callables are array code: under ``callbacks=True`` they keep receiving arrays.
    takes_arrays = False
    #: Options ``torchify`` gives the library's modules, classes and objects over the table's
    #: torchify defaults (the caller's win).
    torchify_defaults: Mapping[str, Any] = types.MappingProxyType({})
    #: Functions of its CuPy-mirrored modules whose CuPy version is not taken, and why.
    cupy_declined: Mapping[str, str] = types.MappingProxyType({})
    #: Functions answering a Python scalar where CuPy's version answers a 0-d array.
    python_results: frozenset[str] = frozenset()

    def claims(self, value: Any) -> bool:
        """Whether ``value`` is the library's where its module does not say so."""
        return False

    def overwritten(self, fn: Any) -> list[Overwritten]:
        """The arguments ``fn`` may write into even where NumPy marks them read-only: by
        default ``X`` for each ``overwrite_X`` parameter, the flag SciPy's compiled code
        (``scipy.linalg.solve(a, b, overwrite_b=True)`` writes its solution into ``b``) and
        the interfaces mirroring it take."""
        signature = signature_of(fn)
        if signature is None:
            return []
        parameters = list(signature.parameters.values())
        positions = {p.name: i for i, p in enumerate(parameters) if p.kind in _POSITIONAL}
        # overwrite_a names A in ldl, null_space, qz and ordqz: matched whatever the case.
        names = {p.name.lower(): p.name for p in parameters}
        found = []
        for p in parameters:
            target = names.get(p.name.removeprefix("overwrite_").lower()) if p.name.startswith("overwrite_") else None
            if target is not None:
                default = p.default if p.default is not inspect.Parameter.empty else False
                found.append(Overwritten(target, positions.get(target), p.name, positions.get(p.name), default))
        return found

    def written_in_torch(self, fn: Any) -> bool:
        """Whether the callable ``fn`` is torch code, which takes tensors, never arrays."""
        return False

    def is_torch(self, module: types.ModuleType) -> bool:
        """Whether ``module`` is a torch namespace (torch itself, or one standing for it)."""
        return False

    def array_namespace(self, module: types.ModuleType) -> types.ModuleType | None:
        """The namespace to hand a function in place of the torch namespace ``module``
        (``xp=torch``), whose arrays it is handed; None where ``module`` is not the library's."""
        return None

    def cupy_module(self, module: str) -> str | None:
        """The CuPy module mirroring the library's ``module`` (its functions of the same name on
        CUDA memory, which a torchified module calls for CUDA tensors), or None."""
        return None

    #: What a user does to switch the library's own torch path on (its mode), or None.
    switch_on: str | None = None

    def torch_mode(self) -> str | None:
        """Why none of the library's functions take torch tensors as they are, in words (None:
        its own torch path is on, for the functions ``torch_path`` says)."""
        return f"autoconvert knows no torch path of {self.name}'s own"

    def torch_path(self, fn: Any) -> str | None:
        """Why ``fn`` does not take torch tensors as they are, in words (None: the library runs
        it on tensors itself, on their device, gradients kept, which ``torchify(native=...)``
        hands them to)."""
        return self.torch_mode() or self.declared_torch_path(fn)

    def declared_torch_path(self, fn: Any) -> str | None:
        """Why ``fn`` has no torch path of the library's own even where its mode is on, in
        words (None: it has one, taken while ``torch_mode`` says the mode is on)."""
        return f"autoconvert knows no torch path of {self.name}'s own"

    def bracket(self, fn: Any) -> Bracket | None:
        """The parameter of ``fn`` whose tuple the library's own torch path unpacks into arrays,
        taking its namespace from them (``find_root(f, (a, b))``); None: ``fn`` reads a list or
        tuple as one array-like."""
        return None

    def stores_arguments(self, cls: type) -> bool:
        """Whether ``cls``'s constructor only stores its arguments, as they are: an object made
        from tensors then holds them, as the library's own torch path for it expects."""
        return False

    def torch_writes(self, fn: Any, owner: type | None = None) -> WritesArguments | None:
        """Which calls of ``fn`` on the library's own torch path write into their tensors
        (None: none), so that they are handed copies: by default those whose ``overwrite_X``
        flags ask for it (see ``overwritten``) or that are told not to copy (see ``uncopied``).
        ``owner``: the class of the object a method of it is called on, its first argument."""
        found, uncopied = self.overwritten(fn), self.uncopied(fn, owner)
        if not found and uncopied is None:
            return None

        def writes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
            return any(o.asked(args, kwargs) for o in found) or (uncopied is not None and uncopied(args, kwargs))

        return writes

    def uncopied(self, fn: Any, owner: type | None = None) -> WritesArguments | None:
        """Which calls of ``fn`` are told not to copy their input, and so write into it in place
        (None: none): on every route they are handed copies, the caller's own left unchanged. By
        default those whose ``copy`` parameter says so (``nan_to_num(x, copy=False)``)."""
        copies = copy_parameters(fn)
        if not copies:
            return None

        def told(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
            return any(c.says_no_copy(args, kwargs) for c in copies)

        return told

    def switched_on(self) -> contextlib.AbstractContextManager[Any]:
        """The library's own torch path switched on for a with block, in this thread only, where
        the library switches it per call (scikit-learn's array API dispatch), so it is never
        left on for code that did not ask for it; by default nothing: a library's mode is on
        for the whole process (SciPy's, read when it is imported) or off."""
        return contextlib.nullcontext()

    def torch_call(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` as its library's own torch path calls it: inside ``switched_on`` where the
        library switches that path per call, else ``fn`` itself, at no cost per call."""
        if type(self).switched_on is Adapter.switched_on:
            return fn
        switched_on = self.switched_on

        @functools.wraps(fn)
        def switched(*args: Any, **kwargs: Any) -> Any:
            with switched_on():
                return fn(*args, **kwargs)

        return switched

    def __repr__(self) -> str:
        return f"<adapter for {self.name}>"


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def signature_of(fn: Any) -> inspect.Signature | None:
    """``fn``'s signature, or None where it has none that can be read: builtins, ufuncs and
    dispatchers have none (TypeError, ValueError), and objects computing it may raise
    anything (numpoly's polynomials, chaospy's expansions: IndexError), which the call
    itself may never meet."""
    try:
        return inspect.signature(fn)
    except Exception:  # any error: see above
        return _ufunc_signature(fn) if isinstance(fn, np.ufunc) else None


def parameter_position(fn: Any, name: str) -> int | None:
    """The position ``fn``'s parameter ``name`` is passed at (None: by keyword alone, or unread)."""
    signature = signature_of(fn)
    parameters = [] if signature is None else list(signature.parameters.values())
    return next((i for i, p in enumerate(parameters) if p.name == name and p.kind in _POSITIONAL), None)


def _ufunc_signature(ufunc: np.ufunc) -> inspect.Signature:
    """The signature NumPy 2 gives ``ufunc``, which NumPy 1 gives none: its inputs by position
    only, so that a call by keyword (``jv(v=..., z=...)``) is refused alike on every NumPy."""
    parameter = inspect.Parameter
    inputs = ["x"] if ufunc.nin == 1 else [f"x{i}" for i in range(1, ufunc.nin + 1)]
    out = None if ufunc.nout == 1 else (None,) * ufunc.nout
    keywords: dict[str, Any] = (
        {"where": True} if ufunc.signature is None else {"axes": None, "axis": None, "keepdims": False}
    )
    keywords.update(casting="same_kind", order="K", dtype=None, subok=True, signature=None)
    return inspect.Signature(
        [parameter(name, parameter.POSITIONAL_ONLY) for name in inputs]
        + [parameter("out", parameter.POSITIONAL_OR_KEYWORD, default=out)]
        + [parameter(name, parameter.KEYWORD_ONLY, default=default) for name, default in keywords.items()]
    )


def module_of(value: Any) -> str:
    """The module ``value`` (a module, class, callable or object) comes from."""
    if isinstance(value, types.ModuleType):
        return value.__name__
    return str(getattr(value, "__module__", None) or type(value).__module__)
