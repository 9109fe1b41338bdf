"""What annotations ask for: an array, a tensor, or containers of them, read once.

``adapt`` reads a function's annotations when it decorates: ``np.ndarray`` and
``npt.NDArray[...]`` ask for arrays (with a dtype where one is named), ``torch.Tensor`` for
tensors; ``X | None``, ``list[X]``, ``Sequence[X]``, ``tuple[X, ...]``, ``tuple[X, Y]``,
``dict[str, X]`` and NamedTuples ask for the same element-wise; a union of arrays
(``NDArray[np.float32] | NDArray[np.float64]``) asks for an array, one of tensors for a
tensor. Anything else asks for nothing: the value passes untouched (``np.ndarray |
torch.Tensor`` takes either, as it is).
"""

from __future__ import annotations

import collections.abc
import types
import typing
import warnings
from typing import Any

import numpy as np
import torch

ARRAY = "array"  # an ndarray (``dtype``: cast to it, within its kind)
TENSOR = "tensor"
EACH = "each"  # every element of a list, tuple, sequence, or every value of a mapping: ``each``
ITEMS = "items"  # a fixed tuple, position by position: ``items`` (``record``: a NamedTuple class)
KEEP = "keep"  # untouched
ANY = "any"  # no annotation on a result: whatever it holds

# typing.Sequence[X] and typing.List[X] have these origins too.
_SEQUENCES = {list, collections.abc.Sequence, collections.abc.MutableSequence}
_MAPPINGS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}


class Want:
    """What one annotation asks for (see the module docstring); ``bare`` when it is an array
    or tensor itself, perhaps optional, rather than one inside a container."""

    __slots__ = ("bare", "dtype", "each", "items", "kind", "record")

    def __init__(
        self,
        kind: str,
        *,
        dtype: np.dtype[Any] | None = None,
        each: Want | None = None,
        items: tuple[Want, ...] = (),
        record: type | None = None,
        bare: bool = False,
    ) -> None:
        self.kind = kind
        self.dtype = dtype
        self.each = each
        self.items = items
        self.record = record
        self.bare = bare

    def leaf_kinds(self) -> set[str]:
        """The leaf kinds anywhere inside: {ARRAY}, {TENSOR}, both, or neither."""
        if self.kind in (ARRAY, TENSOR):
            return {self.kind}
        inner = [self.each] if self.each is not None else list(self.items)
        return set().union(*(w.leaf_kinds() for w in inner)) if inner else set()

    def __repr__(self) -> str:
        return f"Want({self.kind})"


AS_GIVEN = Want(KEEP)
UNKNOWN = Want(ANY)


def unaliased(annotation: Any) -> Any:
    """What a ``type X = ...`` alias stands for (NumPy 2.5 makes ``npt.NDArray`` one), also
    when subscripted (``NDArray[np.float32]``): the alias's value, or its value's origin."""
    origin = typing.get_origin(annotation)
    if hasattr(origin, "__value__"):  # a subscripted alias: its value, with the arguments put in
        annotation = _substituted(origin.__value__, typing.get_args(annotation))
    while hasattr(annotation, "__value__") and hasattr(annotation, "__type_params__"):
        annotation = annotation.__value__
    return annotation


def _substituted(value: Any, arguments: tuple[Any, ...]) -> Any:
    if not getattr(value, "__parameters__", ()):
        return value
    try:
        return value[arguments]
    except TypeError:  # a value that takes no subscript after all: the origin is what counts
        return value


def want_of(annotation: Any, default: Want = AS_GIVEN) -> Want:
    """The Want of one (resolved) annotation; ``default`` for ``Any`` and the unannotated."""
    annotation = unaliased(annotation)
    if annotation is Any or annotation is typing.Any:
        return default
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if annotation is np.ndarray or origin is np.ndarray:
        return Want(ARRAY, dtype=_dtype(arguments), bare=True)
    if isinstance(annotation, type) and issubclass(annotation, torch.Tensor):
        return Want(TENSOR, bare=True)
    if origin in (typing.Union, types.UnionType):
        wants = [want_of(a, default) for a in arguments if a is not type(None)]
        asking = [w for w in wants if w.kind != KEEP]
        if len(asking) == 1:  # Optional[X], or X | float: X's Want (other values pass untouched)
            only = asking[0]
            if only.bare and len(wants) > 1:  # X | float: a float stays a float
                only.bare = False
            return only
        kinds = {w.kind for w in asking}
        if len(kinds) == 1 and kinds <= {ARRAY, TENSOR} and all(w.bare for w in asking):
            # NDArray[np.float32] | NDArray[np.float64]: an array, cast only where all name one dtype
            dtypes = {w.dtype for w in asking}
            return Want(kinds.pop(), dtype=dtypes.pop() if len(dtypes) == 1 else None, bare=len(asking) == len(wants))
        return default if asking else AS_GIVEN  # ndarray | Tensor: either will do, as it is
    if origin in _SEQUENCES or (origin is tuple and len(arguments) == 2 and arguments[1] is Ellipsis):
        return Want(EACH, each=want_of(arguments[0], default)) if arguments else default
    if origin is tuple:
        return Want(ITEMS, items=tuple(want_of(a, default) for a in arguments))
    if origin in _MAPPINGS:
        return Want(EACH, each=want_of(arguments[1], default)) if len(arguments) == 2 else default
    if isinstance(annotation, type) and issubclass(annotation, tuple) and hasattr(annotation, "_fields"):
        hints = typing.get_type_hints(annotation)
        return Want(
            ITEMS, items=tuple(want_of(hints.get(f, Any), default) for f in annotation._fields), record=annotation
        )
    return AS_GIVEN


def _dtype(arguments: tuple[Any, ...]) -> np.dtype[Any] | None:
    """The dtype of ``np.ndarray[shape, np.dtype[X]]`` when X is a concrete scalar type."""
    if len(arguments) != 2:
        return None
    inner = typing.get_args(arguments[1])
    scalar = inner[0] if inner else None
    if not (isinstance(scalar, type) and issubclass(scalar, np.generic)):
        return None  # Any, a TypeVar
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy 1.x: np.dtype(np.floating) is deprecated, not refused
        try:
            dtype = np.dtype(scalar)
        except TypeError:  # NumPy 2: np.floating and the other abstract types have no dtype
            return None
    return dtype if dtype.type is scalar else None
