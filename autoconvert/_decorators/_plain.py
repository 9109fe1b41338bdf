"""``to_numpy`` and ``to_tensor``: the output sides' conversions, for code that can't take a
decorator; each option set's converter built once and reused."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, TypedDict, Unpack, overload

import numpy as np
import torch
from numpy.typing import NDArray

from autoconvert._conversions._devices import CPU, default_device
from autoconvert._conversions._grad import DETACH, GradPolicy
from autoconvert._conversions._to_torch import array_to_tensor
from autoconvert._errors import ConversionError, LeafError, keystr
from autoconvert._escape import compiling, opaque
from autoconvert._failures._traceback import filter_traceback
from autoconvert._options._checks import DeviceLike, DtypeLike, Grad, Sparse
from autoconvert._options._config import active
from autoconvert._options._options import (
    policy_of,
    shows_options,
    validate,
)
from autoconvert._spec._outputs import NO_PARAMS, NumpyOutputs, TensorOutputs
from autoconvert._spec._signature import TENSORS


def to_numpy(obj: Any, **options: Unpack[NumpyOptions]) -> Any:
    """``obj`` with every tensor in it as a NumPy array, for code that can't take a decorator.

    The conversion of ``returns_numpy``: detached silently (the call itself says
    the value leaves autograd), moved to the host, dtypes NumPy lacks widened.

    Args:
        obj: a tensor, or a container of them; other values pass through untouched.
        **options: ``copy``, ``nested`` and ``sparse``, as for ``returns_numpy``; ``grad``
            as for ``accepts_numpy`` (``"detach"``, the default, silently; ``"warn"``
            once per process; ``"error"`` refuses a tensor that requires grad while grad
            mode is on).

    Example:
        >>> import torch, autoconvert as ac
        >>> ac.to_numpy({"x": torch.ones(2, dtype=torch.bfloat16)})
        {'x': array([1., 1.], dtype=float32)}
    """
    if compiling():  # pragma: no cover - runs under dynamo, unseen by coverage
        return opaque(to_numpy, obj, **options)
    try:  # the boundary where autoconvert's errors leave (see _traceback)
        outputs, grad = _converter("to_numpy", options)
        converted = outputs.convert(obj, [], [], ((), {}, None))
        if grad.unsaid is not None:  # grad="warn": the warning names where the tensor was
            grad.say([keystr("obj", path) for path, t in TENSORS.leaves_with_paths(obj) if t is grad.unsaid])
    except ConversionError as e:
        filter_traceback(e)
        raise
    return converted


@overload
def to_tensor(obj: NDArray[Any] | np.generic, **options: Unpack[TensorOptions]) -> torch.Tensor: ...
@overload
def to_tensor(obj: Any, **options: Unpack[TensorOptions]) -> Any: ...
def to_tensor(obj: Any, **options: Any) -> Any:
    """``obj`` with every NumPy array and scalar in it as a tensor.

    Args:
        obj: an array, a NumPy scalar, or a container of them.
        **options: ``device`` (default: torch's default device), ``dtype`` (a
            ``torch.dtype`` casts floating arrays), ``copy`` and ``nested``, as for
            ``returns_tensor``.

    Example:
        >>> import numpy as np, autoconvert as ac
        >>> ac.to_tensor([np.arange(2), np.float32(0.5)])
        [tensor([0, 1]), tensor(0.5000)]
    """
    if compiling():  # pragma: no cover - runs under dynamo, unseen by coverage
        return opaque(to_tensor, obj, **options)
    if type(obj) is np.ndarray and not options and active() is None:
        # The commonest call, one array with the defaults: its leaf straight away, with the default
        # converter's context, decided once while torch's default device is the CPU (benchmarks,
        # micro: "to_tensor of one array"). A refusal is said by the converter, which names the argument.
        try:
            return array_to_tensor(obj, _ON_CPU if default_device() is CPU else _DEFAULT.context([], []))
        except LeafError:
            pass
    try:  # the boundary where autoconvert's errors leave (see _traceback)
        outputs, _ = _converter("to_tensor", options)
        return outputs.convert(obj, [], [], ((), {}, None))
    except ConversionError as e:
        filter_traceback(e)
        raise


class TensorOptions(TypedDict, total=False):
    """The options of ``to_tensor`` (those of ``returns_tensor``), for type checkers."""

    device: DeviceLike
    dtype: DtypeLike
    copy: bool | None
    nested: bool
    sparse_layout: torch.layout | None


class NumpyOptions(TypedDict, total=False):
    """The options of ``to_numpy`` (``returns_numpy``'s and ``grad``), for type checkers."""

    copy: bool | None
    nested: bool
    sparse: Sparse
    grad: Grad


#: to_numpy()'s grad policies: "warn" says so once per process, as a decorator does once.
_TO_NUMPY_GRAD = {mode: GradPolicy(mode, "autoconvert.to_numpy()") for mode in ("warn", "detach", "error")}


def _converter(kind: str, options: Mapping[str, Any]) -> tuple[Any, GradPolicy]:
    """``to_numpy``'s or ``to_tensor``'s output side (and grad policy) for these options in the
    active ``config``: built once per distinct set, so a call in a loop pays only the lookup.
    Options are validated when their set is first seen; a set that fails is not kept."""
    config = active()
    key: tuple[Any, ...] | None = (kind, tuple(options.items()), config.key if config is not None else ())
    try:
        return _CONVERTERS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable option value: validation names it
        key = None
    policy = policy_of(kind, config.options if config is not None else {}, validate(options, kind))
    if kind == "to_numpy":
        grad = _TO_NUMPY_GRAD[policy.grad]
        made: tuple[Any, GradPolicy] = (
            NumpyOutputs("autoconvert.to_numpy()", NO_PARAMS, policy, grad, argument="obj"),
            grad,
        )
    else:
        made = (TensorOutputs("autoconvert.to_tensor()", NO_PARAMS, policy, argument="obj"), DETACH)
    if key is not None:
        if len(_CONVERTERS) >= _MOST_CONVERTERS:  # a program uses a handful; never grow without bound
            _CONVERTERS.clear()
        _CONVERTERS[key] = made
    return made


_CONVERTERS: dict[Any, tuple[Any, GradPolicy]] = {}
_MOST_CONVERTERS = 256


_DEFAULT = _converter("to_tensor", {})[0]
#: The default converter's context for a call without tensors, while torch's default device is the CPU.
_ON_CPU = _DEFAULT.shared_target


_OBJ = [inspect.Parameter("obj", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
shows_options(to_numpy, _OBJ, "to_numpy")
shows_options(to_tensor, _OBJ, "to_tensor")
