"""What each option accepts: the types the signatures show, and each option's check, which
takes a value as given and gives it normalised, or raises TypeError/ValueError saying what the
option takes (``_options.validate`` puts the taker and the option's name before it).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Any, Literal

import numpy as np
import torch

from autoconvert._conversions import _devices
from autoconvert._conversions._dtypes import INTEGERS, NUMPY_TO_TORCH, is_inexact
from autoconvert._conversions._sparse import SCIPY_LAYOUTS

# What the signatures and the typing overloads say an option accepts.
Grad = Literal["warn", "detach", "error"]
Names = str | Iterable[str] | None
Sparse = Literal["array", "matrix"]
Transfers = Literal["allow", "log", "warn", "error"]
Compile = Literal["auto", "trace", "escape"]
DeviceLike = torch.device | str | int | None
DtypeLike = torch.dtype | Literal["input"] | None

Vmap = Literal["sequential", "vectorized"]
Rule = Callable[..., Any] | None  # numpy_op's backward= and jvp=
Fake = Callable[..., Any] | str | tuple[str, ...]
Residuals = str | tuple[str, ...]  # numpy_op's residuals=: the names its rules get them by
Seed = int | np.random.SeedSequence | None
Native = Literal["auto"] | bool  # torchify's native=
ArrayModule = Literal["auto", "numpy", "cupy"]  # torchify's array_module=

SPARSE_KINDS = typing.get_args(Sparse)
GRAD_MODES = typing.get_args(Grad)
TRANSFER_POLICIES = typing.get_args(Transfers)
COMPILE_MODES = typing.get_args(Compile)
VMAP_MODES = typing.get_args(Vmap)
ARRAY_MODULES = typing.get_args(ArrayModule)


def flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"takes True or False, got {value!r}")
    return value


def native(value: object) -> str | bool:
    if isinstance(value, bool) or (isinstance(value, str) and value == "auto"):
        return value
    raise ValueError(
        f"takes 'auto' (a library's own torch path where it has one), True (that path only) or False "
        f"(always convert), got {value!r}"
    )


def copy_mode(value: object) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"takes None (copy only when needed), True (always) or False (never), got {value!r}")
    return value


def one_of(allowed: tuple[str, ...]) -> Callable[[object], str]:
    listed = ", ".join(repr(a) for a in allowed[:-1]) + f" or {allowed[-1]!r}"

    def check(value: object) -> str:
        if value not in allowed:
            raise ValueError(f"takes {listed}, got {value!r}")
        return str(value)

    return check


def sparse_kind(value: object) -> str:
    if value not in SPARSE_KINDS:
        raise ValueError(f"takes 'array' (scipy.sparse arrays) or 'matrix' (spmatrix), got {value!r}")
    return str(value)


def device(value: object) -> torch.device | None:
    if value is None:
        return None
    try:
        device = _devices.parse(value)
    except (TypeError, RuntimeError) as e:
        raise TypeError(f"takes None (the caller's device) or a torch device: {e}") from None
    return _devices.normal(device)


def dtype(value: object) -> torch.dtype | str | None:
    if value is None or value == "input":
        return value
    if not isinstance(value, torch.dtype):
        raise TypeError(f"takes None, 'input' or a torch.dtype, got {value!r}{_torch_dtype_for(value)}")
    if value == torch.bool:
        raise TypeError("casts results within their kind, and bool results are never cast; got torch.bool")
    if not is_inexact(value) and value not in INTEGERS:
        raise TypeError(f"takes a floating, complex or integer dtype NumPy also has, got {value}")
    return value


def _torch_dtype_for(value: object) -> str:
    """``. Fix: pass torch.float32`` for a NumPy dtype (or its exact name) that torch has: the
    option is the result tensor's dtype, and torch takes no NumPy dtype (``torch.zeros`` neither).
    A loose name is left alone: NumPy's ``'float'`` is float64, torch's ``torch.float`` float32."""
    try:
        numpy_dtype = np.dtype(value)  # type: ignore[call-overload]  # any option value may come
    except (TypeError, ValueError):
        return ""
    found = NUMPY_TO_TORCH.get(numpy_dtype)
    if found is None or found == torch.bool or (isinstance(value, str) and value != numpy_dtype.name):
        return ""
    return f". Fix: pass {found}, NumPy's {numpy_dtype} as a torch dtype"


def names(value: object) -> frozenset[str] | None:
    if value is None:
        return None
    names = [value] if isinstance(value, str) else value
    # A dict or another mapping would pass as the names of its keys, its values unread.
    if not isinstance(names, (list, tuple, set, frozenset)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"takes a parameter name or a list, tuple or set of them, got {value!r}")
    return frozenset(names)


def out_params(value: object) -> tuple[str, ...]:
    return tuple(sorted(names(value) or ()))


def sparse_layout(value: object) -> torch.layout | None:
    if value is not None and value not in SCIPY_LAYOUTS:
        raise ValueError(
            "takes None (as the SciPy format) or torch.sparse_coo, torch.sparse_csr, "
            f"torch.sparse_csc or torch.sparse_bsr, got {value!r}"
        )
    return value


def rule(name: str, first: str) -> Callable[[object], Callable[..., Any] | None]:
    def check(value: object) -> Callable[..., Any] | None:
        if value is not None and not callable(value):
            raise TypeError(
                f"takes None or a function {name}({first}, *args, output=output, **kwargs), "
                f"got {value!r} ({type(value).__name__})"
            )
        return value

    return check


def fake(value: object) -> object:
    """Passed on: what ``fake=`` names is checked against the function's parameters, when the
    op is made (the message names the function)."""
    return value


def residuals(value: object) -> tuple[str, ...]:
    """Names, in the order the function returns its residuals (after its results)."""
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, tuple) or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise TypeError(f"takes a name, or a tuple of names, the rules get the residuals by; got {value!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"takes distinct names, got {value!r}")
    return names


def count(unit: str) -> Callable[[object], int | None]:
    def check(value: object) -> int | None:
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"takes None or a positive number of {unit}, got {value!r}")
        return value

    return check


def is_dask(executor: Any) -> bool:
    """A Dask client or its executor (``client.get_executor()``), told apart without importing Dask."""
    return type(executor).__module__.partition(".")[0] == "distributed" and (
        hasattr(executor, "scatter") or hasattr(executor, "_client")
    )


def is_ray(executor: Any) -> bool:
    """The ``ray`` module itself, told apart without importing Ray."""
    return getattr(executor, "__name__", None) == "ray" and hasattr(executor, "remote") and hasattr(executor, "get")


#: The modules whose ``Pool`` (and the stdlib's ``ThreadPool``) ``batched`` takes as an executor.
_POOL_MODULES = frozenset({"multiprocessing.pool", "ray.util.multiprocessing.pool"})


def is_pool(executor: Any) -> bool:
    """A ``multiprocessing`` or Ray multiprocessing pool, told apart without importing either."""
    return type(executor).__module__ in _POOL_MODULES and callable(getattr(executor, "apply_async", None))


def executor(value: object) -> Any:
    if value is not None and not (isinstance(value, Executor) or is_dask(value) or is_ray(value) or is_pool(value)):
        raise ValueError(
            "takes None, a concurrent.futures.Executor, a multiprocessing pool, a Dask client or the ray module; "
            f"got {value!r}"
        )
    return value


def seed(value: object) -> Any:
    if not (value is None or isinstance(value, np.random.SeedSequence)) and (
        not isinstance(value, int) or isinstance(value, bool) or value < 0
    ):
        raise ValueError(f"takes None, a non-negative int or a np.random.SeedSequence, got {value!r}")
    return value
