"""Arguments compiled code may write into, handed to it as private copies.

f2py and BLAS/LAPACK ignore NumPy's read-only flag: ``scipy.linalg.solve(a, b,
overwrite_b=True)`` writes its solution into ``b``, ``scipy.linalg.blas.daxpy(x, y)``
writes into ``y`` with no flag at all, even where those are read-only views of the
caller's tensors (the library's adapter says which arguments, ``Adapter.overwritten``).
A torchified function that may do so is ``Guarded``: it copies exactly the arguments the
call lets the library overwrite, which costs what the call costs without the flag (SciPy
copies them itself then). So is one told not to copy its input, which it then writes in
place (scikit-learn's ``copy=False``, an estimator's ``copy_x=False``): its arrays are copied.

Compiled code may also refuse read-only arrays outright, before it reads them (a Cython
memoryview not declared ``const``: ``scipy.signal.sosfilt``): a torchified function then
copies when needed, as NumPy 2's ``copy=None`` means, and remembers it. A method of a
torchified object is guarded alike: its object, passed first, is never copied nor looked into.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from autoconvert._adapters._adapter import Overwritten, WritesArguments
from autoconvert._adapters._table import adapter_for, rejected_on_entry
from autoconvert._conversions._copies import copied_in_function
from autoconvert._conversions._tree import Mapper
from autoconvert._spec._signature import deferred_kind


class Guarded:
    """``fn`` with the guards compiled code needs: the arguments a call lets it overwrite
    handed as private copies where they are read-only (a tensor's memory, or any array the
    caller cannot mean to be written); every read-only array of a call told not to copy
    (``uncopied``: ``scale(X, copy=False)``, ``KMeans(copy_x=False).fit``) as a writable copy; and, with ``retries``, a call whose compiled code
    refuses read-only arrays on entry (a Cython memoryview, a numba kernel's signature) made
    again with writable copies, as every later call of ``fn`` is (copy when needed). With
    ``method``, ``fn`` is a method's function, called with its object first: the object is
    no argument of the call (copying it, a dataclass, would make a new object)."""

    def __init__(
        self,
        fn: Any,
        arguments: list[Overwritten],
        retries: bool,
        method: bool = False,
        *,
        uncopied: WritesArguments | None = None,
        owner: type | None = None,
    ) -> None:
        self.__wrapped__ = fn
        self.arguments = arguments
        self.retries = retries
        self.uncopied = uncopied  # the calls told not to copy (see Adapter.uncopied): writable copies
        self.owner = owner
        self.skipped = 1 if method else 0  # the leading arguments that are no arrays of the call
        self.writable = False  # compiled code refused read-only arrays once: copy from then on
        self.__module__ = getattr(fn, "__module__", None)  # type: ignore[assignment]  # None for extension builtins (see _torchify)
        for name in ("__name__", "__qualname__", "__doc__"):
            value = getattr(fn, name, None)
            if value is not None:
                setattr(self, name, value)

    @property
    def direct(self) -> Any:
        """What a flat call may call in place of this guard, which then costs nothing per call
        (see _generate._called): the function, where the guard only retries refusals on
        entry, the flat call sending those to the guard; None where every call needs it."""
        return self.__wrapped__ if self.retries and not self.arguments and self.uncopied is None else None

    def rejected(self, error: BaseException, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether ``error``, raised by the function called directly with ``args`` (after a
        method's object) and ``kwargs``, is a refusal this guard retries; if so, it copies
        from then on."""
        if not self.retries or not isinstance(error, (ValueError, TypeError)):
            return False
        if not _rejected_read_only(error, args, kwargs):
            return False
        self.writable = True
        return True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.arguments:
            args = self._overwritable(args, kwargs)
        if self.writable or (self.uncopied is not None and self.uncopied(args, kwargs)):
            return self._writable_call(args, kwargs)
        try:
            return self.__wrapped__(*args, **kwargs)
        except (ValueError, TypeError) as error:  # numba's TypingError is a TypeError
            if not self.rejected(error, args[self.skipped :], kwargs):
                raise
        return self._writable_call(args, kwargs)

    def _writable_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The call with writable copies of read-only arrays (a method's object as it is)."""
        skipped = self.skipped
        return self.__wrapped__(*args[:skipped], *_WRITABLE(args[skipped:], None), **_WRITABLE(kwargs, None))

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
        return guarded, (self.__wrapped__, self.retries or self.uncopied is not None, self.skipped == 1, self.owner)


def _rejected_read_only(error: BaseException, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``error`` is compiled code refusing, on entry, a read-only array of the call."""
    return rejected_on_entry(error) and any(not a.flags.writeable for a in _arrays_in(args, kwargs))


def _private(value: Any) -> Any:
    """A writable copy of a read-only array, in its own memory order (so an in-place
    LAPACK call on a Fortran-ordered array stays in place); anything else as it is."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value.copy(order="K")
    return value


def _writable_copy(a: NDArray[Any], ctx: object) -> NDArray[Any]:
    """A read-only array as a private writable copy, counted (``stats``' "writable")."""
    if a.flags.writeable:
        return a
    copied_in_function("writable", a, a.nbytes)
    return a.copy(order="K")


_WRITABLE = Mapper({np.ndarray: _writable_copy}, nested=True)


def _arrays_in(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[NDArray[Any]]:
    return [a for _, a in _WRITABLE.leaves_with_paths((args, kwargs))]


def guarded(fn: Any, retries: bool = False, method: bool = False, owner: type | None = None) -> Any:
    """``fn`` as a ``Guarded`` where it may write into its arguments or, with ``retries``
    (copies allowed), where it is told not to copy them or its compiled code may refuse
    read-only arrays (anything but the functions of a library that takes them, NumPy's, and
    generator functions); else ``fn`` itself. ``method``: ``fn`` is a method's function, called
    with its object first, of class ``owner``."""
    adapter = adapter_for(fn)
    arguments = adapter.overwritten(fn)
    uncopied = adapter.uncopied(fn, owner) if retries else None
    # A generator's body runs after the call: a refusal there comes too late to make it again.
    retries = retries and not adapter.takes_read_only and deferred_kind(fn) is None
    made = arguments or retries or uncopied
    return Guarded(fn, arguments, retries, method, uncopied=uncopied, owner=owner) if made else fn
