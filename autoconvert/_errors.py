"""Exception and warning classes, and the one place their messages are written.

Inner code raises a terse ``LeafError`` (what is wrong with one tensor or array);
the public boundary, which knows the function and the argument path, turns it into
the public exception once (einops' habit), so every message has the same four parts:
the function, the path, what was found, and the fix. A path is a root (``batch``,
``result``) and key entries below it (``['masks']``, ``[2]``, ``.mask``), as torch's pytree
has them, written by ``keystr`` alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """Item ``index`` of a sequence: ``[2]``."""

    index: int

    def __str__(self) -> str:
        return f"[{self.index}]"


@dataclasses.dataclass(frozen=True, slots=True)
class MappingKey:
    """The value under ``key`` in a mapping: ``['masks']``."""

    key: object

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """Attribute or field ``name``: ``.mask``."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


#: One step of a path; a ``str`` is a segment as written (a key function given to
#: ``register_container``, or torch's pytree entries, say their own).
KeyEntry = SequenceKey | MappingKey | GetAttrKey | str
#: The key entries from a root down to a value, outermost first.
KeyPath = tuple[KeyEntry, ...]


def keystr(root: str, keys: Iterable[KeyEntry]) -> str:
    """The path from ``root`` down ``keys``, outermost first: ``batch['masks'][2]``."""
    return root + "".join(map(str, keys))


class ConversionError(TypeError):
    """Base of everything autoconvert raises: a value could not cross between torch and NumPy."""


class CopyError(ConversionError, ValueError):
    """``copy=False`` was asked for, but the conversion cannot avoid a copy.

    A ``ValueError`` too, like NumPy 2's ``np.asarray(x, copy=False)``.
    """


class DeviceMismatchError(ConversionError, RuntimeError):
    """The call's tensor arguments live on different devices, so there is no caller's device."""


class GradientError(ConversionError, RuntimeError):
    """An argument requires grad and the decorator was told ``grad="error"``."""


class ReadOnlyError(ConversionError, ValueError):
    """The wrapped function wrote into a read-only array that autoconvert handed it.

    A ``ValueError`` too, like the NumPy error it replaces.
    """


class TransferError(ConversionError, RuntimeError):
    """A conversion would copy between devices, and ``transfers="error"`` forbids it.

    Raised before any copy is made, naming the value, both devices and the bytes.
    """


class NoDeviceError(Exception):
    """Internal: a leaf was asked to place a value on the call's device, and the call's
    tensors disagree on one. The output side, which knows the call, raises
    ``DeviceMismatchError`` naming them all."""


class GradientWarning(UserWarning):
    """A tensor that requires grad was detached on its way to NumPy: no gradient flows back."""


class TransferWarning(UserWarning):
    """A conversion copied between devices, and ``transfers="warn"`` asked to be told."""


class CompileWarning(UserWarning):
    """Under torch.compile, a function judged traceable (``compile="auto"``) could not be traced
    into the graph: its calls take the escape, one graph break each."""


class LeafError(Exception):
    """A fact about one leaf, raised deep inside; re-raised once as ``kind`` at the boundary.

    ``keys`` collects key entries innermost first, appended by the containers the error
    passes through on its way out, so the happy path never builds a path.
    """

    def __init__(self, kind: type[ConversionError], problem: str, found: str, fix: str) -> None:
        super().__init__(problem)
        self.kind = kind
        self.problem = problem
        self.found = found
        self.fix = fix
        self.keys: list[KeyEntry] = []

    def public(self, function: str, role: str, root: str) -> ConversionError:
        """The public exception, naming ``function`` and the path below ``root``."""
        path = keystr(root, reversed(self.keys))
        where = f"{role} {path}" if role else path
        return self.kind(message(function, where, self.problem, self.found, self.fix, path=path))


#: The way round a result whose body runs after the call (a generator, a coroutine: see
#: _signature.deferred_result), and round one a result's method stores on the result.
DEFERRED_FIX = (
    "decorate the plain function that holds the NumPy code, and call that from inside the generator, "
    "coroutine or context manager"
)
STORED_DEFERRED_FIX = (
    "store what it gives (list(...)), or a function that makes it when called, not the generator, coroutine or "
    "context manager itself"
)

#: The way round an argument holding itself (a result's is its output side's: see Outputs).
ARGUMENT_CYCLE_FIX = "break the cycle, or pass nested=False to convert top-level arguments only"


def cycle_error(fix: str = ARGUMENT_CYCLE_FIX) -> LeafError:
    """What a RecursionError from walking a value means, for the boundary to report: a
    container that contains itself (or an absurdly deep one)."""
    return LeafError(
        ConversionError,
        "contains itself, or nests deeper than Python's recursion limit, so it cannot be walked",
        "a container that reaches itself through its items",
        fix,
    )


def message(function: str, where: str, problem: str, found: str, fix: str, *, path: str = "") -> str:
    """The one message format: ``f(): argument x[0] <problem>. Found <what>. Fix: <how>.``

    ``where`` names the value (``argument batch['mask']``, ``result[1]``); ``fix`` may
    say ``{path}`` where the value's own path reads best (``{path}.to_dense()``).
    """
    return f"{function}: {where} {problem}. Found {found}. Fix: {fix.format(path=path)}."
