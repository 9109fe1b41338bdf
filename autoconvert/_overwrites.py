"""Arguments compiled SciPy code may write into, handed to it as private copies.

f2py and BLAS/LAPACK ignore NumPy's read-only flag: ``scipy.linalg.solve(a, b,
overwrite_b=True)`` writes its solution into ``b``, ``scipy.linalg.blas.daxpy(x, y)``
writes into ``y`` with no flag at all, and ``lapack.dppsv`` into ``ap``, which its
signature calls an input, even where those are read-only views of the caller's tensors. A torchified function that may do so is an ``Overwrites``:
it copies exactly the arguments the call lets SciPy overwrite, which costs what the call
costs without the flag (SciPy copies them itself then).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np

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


class Overwrites:
    """``fn``, handing the arguments a call lets it overwrite as private copies where they
    are read-only (a tensor's memory, or any array the caller cannot mean to be written)."""

    def __init__(self, fn: Any, arguments: list[Overwritten]) -> None:
        self.__wrapped__ = fn
        self.arguments = arguments
        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            value = getattr(fn, name, None)
            if value is not None:
                setattr(self, name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
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
        return self.__wrapped__(*(args if copied is None else copied), **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return guarded, (self.__wrapped__,)


def _private(value: Any) -> Any:
    """A writable copy of a read-only array, in its own memory order (so an in-place
    LAPACK call on a Fortran-ordered array stays in place); anything else as it is."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value.copy(order="K")
    return value


def guarded(fn: Any) -> Any:
    """``fn`` as an ``Overwrites`` where it may write into its arguments, else ``fn``."""
    arguments = overwritten(fn)
    return Overwrites(fn, arguments) if arguments else fn
