"""SciPy: its pybind11 and distance code's rejections, torchify's defaults for it, and which of
its functions run on torch tensors themselves (its array API mode)."""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any

from ._adapter import Adapter, Bracket, WritesArguments, always, parameter_position

#: The subpackages cupyx.scipy mirrors, as the CuPy path takes them (its sparse and stats follow
#: other conventions: sparse matrices of its own, results of other types).
_CUPY_MIRRORED = frozenset({"fft", "linalg", "ndimage", "signal", "special"})
#: The functions of SciPy's classes whose own torch path writes into an argument whatever the
#: call says (the write-probe of tests/test_native_classes.py finds them): ``Rotation.from_matrix``
#: sets a matrix that is not orthogonal to its nearest orthogonal one in place
#: (``xpx.at(matrix)[...].set``, which writes where the array is writable).
_TORCH_WRITES = frozenset({"Rotation.from_matrix"})
#: SciPy's functions whose bracket, a tuple, its torch path unpacks into arrays and takes the
#: namespace from (a tensor in every place: ``find_root(f, (a, b))``); elsewhere SciPy reads a
#: list or tuple as one NumPy array-like (``logsumexp([a, b])`` gives an ndarray).
#: ``find_minimum`` is left out: its torch path writes into a view of its bracket, which raises
#: for a tensor that requires grad, where the converting call gives the minimum.
_BRACKETS = {"find_root": "init"}


class SciPy(Adapter):
    name = "SciPy"
    packages = ("scipy",)
    # scipy.fft's pybind11 code: scipy.fft.fft(x, overwrite_x=True) -> "array is not writeable".
    rejected_writes = (" is not writeable",)
    # cdist(out=a): "must be aligned, writable and native byte order".
    rejected_demands = (" aligned, writable",)
    takes_arrays = True
    # Most of SciPy rejects float16 ("array type not supported"): float32 in, float16 back.
    torchify_defaults = types.MappingProxyType({"widen_float16": True})

    def cupy_module(self, module: str) -> str | None:
        top = module.split(".")[1:2]
        return f"cupyx.{module}" if top and top[0] in _CUPY_MIRRORED else None

    switch_on = "set SCIPY_ARRAY_API=1 before SciPy is imported"

    def torch_mode(self) -> str | None:
        api = _array_api()
        if api is None:
            return "this SciPy declares no torch path of its own (SciPy's array API mode declares one)"
        if not array_api_mode():
            if os.environ.get("SCIPY_ARRAY_API") == "1":  # SciPy reads it once, when first imported
                return (
                    "SciPy's array API mode is off: SCIPY_ARRAY_API=1 was set after SciPy was imported, and SciPy "
                    "reads it once, when first imported. Fix: set it before SciPy is imported (in the shell, or at the "
                    "top of the program's first module)"
                )
            return f"SciPy's array API mode is off. Fix: {self.switch_on}"
        return None

    def torch_writes(self, fn: Any, owner: type | None = None) -> WritesArguments | None:
        if getattr(fn, "__qualname__", None) in _TORCH_WRITES and str(getattr(fn, "__module__", "")).startswith(
            "scipy."
        ):
            return always
        return super().torch_writes(fn, owner)

    def bracket(self, fn: Any) -> Bracket | None:
        name = _BRACKETS.get(getattr(fn, "__qualname__", None))  # type: ignore[arg-type]
        if name is None or not str(getattr(fn, "__module__", "")).startswith("scipy.optimize"):
            return None
        return Bracket(parameter_position(fn, name), name)

    def declared_torch_path(self, fn: Any) -> str | None:
        """What SciPy declares of ``fn`` (``xp_capabilities``, the table its docs and tests are
        made from, filled whether or not its array API mode is on): a torch path of its own
        unless NumPy-only, out of the array API's scope, skipped or failing for torch in
        SciPy's own tests, or CPU-only (SciPy then converts a CPU tensor to NumPy itself,
        without its gradient) where torch is not excepted."""
        api = _array_api()
        declared = None if api is None else _declared(api.xp_capabilities_table, fn)
        if declared is None:
            return "SciPy declares no array API support for it"
        why = f" ({declared['reason']})" if declared.get("reason") else ""
        if declared.get("np_only") or declared.get("out_of_scope"):
            return f"SciPy declares it NumPy-only{why}"
        tested = [*declared.get("skip_backends", ()), *declared.get("xfail_backends", ())]
        left_out = next((reason for backend, reason in tested if backend == "torch"), None)
        if left_out is not None:
            return f"SciPy's own tests leave torch out for it ({left_out})"
        if declared.get("cpu_only") and "torch" not in declared.get("exceptions", ()):
            return "SciPy declares it CPU-only: it converts a tensor to NumPy itself, without its gradient"
        return None


def _declared(table: dict[Any, Any], fn: Any) -> dict[str, Any] | None:
    """``fn``'s entry in SciPy's capabilities table: its own (SciPy 1.17 lists a class's methods
    one by one), else, for a method, its class's, where the class's entry for that method
    overrides it (SciPy 1.18 lists a class, with ``method_capabilities``)."""
    try:
        own = table.get(fn)
    except TypeError:  # an unhashable callable: never in the table
        return None
    if own is not None:
        return own  # type: ignore[no-any-return]
    declared = table.get(_owner(fn))
    if declared is None:
        return None
    return declared.get("method_capabilities", {}).get(getattr(fn, "__name__", None), declared)  # type: ignore[no-any-return]


def _owner(fn: Any) -> type | None:
    """The class ``fn`` is defined in, found by its module and qualified name (None: not a
    method of a class its module holds)."""
    path = str(getattr(fn, "__qualname__", "")).split(".")[:-1]
    owner: Any = sys.modules.get(str(getattr(fn, "__module__", "")))
    if not path or "<locals>" in path:
        return None
    for name in path:
        owner = getattr(owner, name, None)
    return owner if isinstance(owner, type) else None


def _array_api() -> Any:
    """SciPy's array API support module where it declares its functions' capabilities (1.15 and
    later; feature-detected), else None."""
    try:
        api = importlib.import_module("scipy._lib._array_api")
    except ImportError:
        return None
    return api if isinstance(getattr(api, "xp_capabilities_table", None), dict) else None


def array_api_mode() -> bool:
    """Whether SciPy's array API mode is on, as SciPy read ``SCIPY_ARRAY_API`` when imported."""
    try:
        api = importlib.import_module("scipy._lib._array_api")
    except ImportError:
        return False
    return bool(getattr(api, "SCIPY_ARRAY_API", False))
