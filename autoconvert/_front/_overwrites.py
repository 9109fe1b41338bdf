"""Arguments compiled SciPy code may write into, handed to it as private copies.

f2py and BLAS/LAPACK ignore NumPy's read-only flag: ``scipy.linalg.solve(a, b,
overwrite_b=True)`` writes its solution into ``b``, ``scipy.linalg.blas.daxpy(x, y)``
writes into ``y`` with no flag at all, and ``lapack.dppsv`` into ``ap``, which its
signature calls an input, even where those are read-only views of the caller's tensors.
A torchified function that may do so is ``Guarded``: it copies exactly the arguments the
call lets SciPy overwrite, which costs what the call costs without the flag (SciPy copies
them itself then).

Compiled code may also refuse read-only arrays outright, before it reads them (a Cython
memoryview not declared ``const``: ``scipy.signal.sosfilt``): a torchified function then
copies when needed, as NumPy 2's ``copy=None`` means, and remembers it.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autoconvert._calls._failures import refused_on_entry
from autoconvert._calls._signature import deferred_kind
from autoconvert._conversions._copies import copied_in_function
from autoconvert._conversions._tree import Mapper

#: f2py's docstring starts with its signature: ``lu,piv,info = dgetrf(a,[overwrite_a])``
#: (a routine with no results has no ``=``).
_F2PY_SIGNATURE = re.compile(r"^(?:[^=(]*=\s*)?\w+\((?P<names>[^)]*)\)")


class Overwritten:
    """One argument that may be overwritten: by name and position, and the flag (name,
    position, default) that lets SciPy do it, or no flag where it always may."""

    __slots__ = ("default", "flag", "flag_position", "name", "position")

    def __init__(
        self, name: str, position: int | None, flag: str | None, flag_position: int | None, default: Any
    ) -> None:
        self.name, self.position = name, position
        self.flag, self.flag_position, self.default = flag, flag_position, default

    def asked(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether this call lets SciPy write into the argument."""
        if self.flag is None:
            return True
        if self.flag in kwargs:
            return bool(kwargs[self.flag])
        position = self.flag_position
        return bool(args[position] if position is not None and position < len(args) else self.default)


def overwritten(fn: Any) -> list[Overwritten]:
    """The arguments ``fn`` may write into: ``X`` for each ``overwrite_X`` parameter of a
    Python function; every argument of an f2py routine (see ``_f2py_arguments``)."""
    if type(fn).__name__ == "fortran" and isinstance(fn.__doc__, str):
        return _f2py_arguments(fn.__doc__)
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
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


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _f2py_arguments(doc: str) -> list[Overwritten]:
    """An f2py routine may write into any array it is handed: an argument with an
    ``overwrite_X`` flag when the flag is set (else f2py copies it), and every other one
    always, since f2py passes arrays of the right type and order through uncopied and the
    signatures do not always say which the routine writes (``dppsv`` writes into ``ap``,
    declared an input)."""
    signature = _F2PY_SIGNATURE.match(doc)
    if signature is None:
        return []
    names = [n.strip(" []") for n in signature["names"].split(",") if n.strip(" []")]
    found = []
    for position, name in enumerate(names):
        if name.startswith("overwrite_"):
            continue
        flag = f"overwrite_{name}"
        if flag in names:
            default = re.search(rf"^{flag} : .*\n\s+Default: (\d+)", doc, re.MULTILINE)
            on = int(default[1]) if default else 1  # a default not found: assume it overwrites
            found.append(Overwritten(name, position, flag, names.index(flag), on))
        else:
            found.append(Overwritten(name, position, None, None, True))
    return found


class Guarded:
    """``fn`` with the guards compiled code needs: the arguments a call lets it overwrite
    handed as private copies where they are read-only (a tensor's memory, or any array the
    caller cannot mean to be written); and, with ``retries``, a call whose compiled code
    refuses read-only arrays on entry (a Cython memoryview, a numba kernel's signature) made
    again with writable copies, as every later call of ``fn`` is (copy when needed)."""

    def __init__(self, fn: Any, arguments: list[Overwritten], retries: bool) -> None:
        self.__wrapped__ = fn
        self.arguments = arguments
        self.retries = retries
        self.writable = False  # compiled code refused read-only arrays once: copy from then on
        self.__module__ = getattr(fn, "__module__", None)  # type: ignore[assignment]  # None for extension builtins (see _torchify)
        for name in ("__name__", "__qualname__", "__doc__"):
            value = getattr(fn, name, None)
            if value is not None:
                setattr(self, name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.arguments:
            args = self._overwritable(args, kwargs)
        if self.writable:
            return self.__wrapped__(*_WRITABLE(args, None), **_WRITABLE(kwargs, None))
        if not self.retries:
            return self.__wrapped__(*args, **kwargs)
        try:
            return self.__wrapped__(*args, **kwargs)
        except (ValueError, TypeError) as error:  # numba's TypingError is a TypeError
            if not refused_on_entry(error) or not any(not a.flags.writeable for a in _arrays_in(args, kwargs)):
                raise
        self.writable = True
        return self.__wrapped__(*_WRITABLE(args, None), **_WRITABLE(kwargs, None))

    def _overwritable(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """``args`` with private copies where the call lets SciPy overwrite; ``kwargs`` changed in place."""
        copied: list[Any] | None = None  # the positional arguments, once one is replaced
        for argument in self.arguments:
            if not argument.asked(args, kwargs):
                continue
            name, position = argument.name, argument.position
            if name in kwargs:
                kwargs[name] = _private(kwargs[name])
            elif position is not None and position < len(args):
                value = args[position]
                private = _private(value)
                if private is not value:
                    copied = copied or list(args)
                    copied[position] = private
        return args if copied is None else tuple(copied)

    def __reduce__(self) -> tuple[Any, ...]:
        return guarded, (self.__wrapped__, self.retries)


def _private(value: Any) -> Any:
    """A writable copy of a read-only array, in its own memory order (so an in-place
    LAPACK call on a Fortran-ordered array stays in place); anything else as it is."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value.copy(order="K")
    return value


def _writable(a: NDArray[Any], ctx: object) -> NDArray[Any]:
    """A read-only array as a private writable copy, counted (``stats``' "writable")."""
    if a.flags.writeable:
        return a
    copied_in_function("writable", a, a.nbytes)
    return a.copy(order="K")


_WRITABLE = Mapper({np.ndarray: _writable}, nested=True)


def _arrays_in(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[NDArray[Any]]:
    return [a for _, a in _WRITABLE.leaves_with_paths((args, kwargs))]


def guarded(fn: Any, retries: bool = False) -> Any:
    """``fn`` as a ``Guarded`` where it may write into its arguments or, with ``retries``,
    where its compiled code may refuse read-only arrays (anything but NumPy's own functions
    and ufuncs, which take them, and generator functions); else ``fn`` itself."""
    arguments = overwritten(fn)
    numpy_own = isinstance(fn, np.ufunc) or (getattr(fn, "__module__", None) or "").startswith("numpy")
    # A generator's body runs after the call: a refusal there comes too late to make it again.
    retries = retries and not numpy_own and deferred_kind(fn) is None
    return Guarded(fn, arguments, retries) if arguments or retries else fn
