"""The adapters' table: each real library's values find their library's adapter, and what
the table gathers from the adapters is what the call path consults."""

from __future__ import annotations

import importlib
import types
from typing import Any

import numpy as np
import pytest
import scipy.linalg
import scipy.linalg.blas
import scipy.ndimage
import scipy.special
import torch

from autoconvert._adapters._table import ADAPTERS, OTHERS, REJECTIONS, adapter_for


def _helper(x: Any) -> Any:
    return x


def _vendored() -> tuple[types.ModuleType, types.ModuleType]:
    """SciPy's vendored array-api-compat torch and NumPy namespaces (what SciPy's
    ``array_namespace(t)`` gives), where this SciPy has them (1.12 has none)."""
    try:
        return (
            importlib.import_module("scipy._lib.array_api_compat.torch"),
            importlib.import_module("scipy._lib.array_api_compat.numpy"),
        )
    except ImportError:
        pytest.skip("this SciPy vendors no array-api-compat torch namespace")


@pytest.mark.parametrize(
    ("value", "adapter"),
    [
        (np, "NumPy"),
        (np.mean, "NumPy"),
        (np.add, "NumPy"),  # a ufunc names no module: its type does
        (scipy.special.erf, "NumPy"),  # SciPy's ufuncs are NumPy ufuncs, which take read-only arrays
        (np.random.default_rng(0), "NumPy"),
        (scipy.ndimage.gaussian_filter, "SciPy"),
        (scipy.linalg.solve, "SciPy"),
        (scipy.ndimage, "SciPy"),
        (scipy.linalg.blas.daxpy, "F2py"),  # an f2py routine: builtins by its module
        (torch.mean, "Torch"),
        (torch.nn.Linear(1, 1), "Torch"),
        (torch, "Torch"),
        (_helper, "Adapter"),
        (len, "Adapter"),
    ],
)
def test_a_value_finds_its_librarys_adapter(value: Any, adapter: str) -> None:
    assert type(adapter_for(value)).__name__ == adapter


def test_every_adapter_is_in_the_table_once_and_the_others_default_to_nothing_special() -> None:
    """Each library has one adapter; the fallback refuses nothing, writes nothing, takes no torch."""
    kinds = [type(a) for a in ADAPTERS]
    assert len(kinds) == len(set(kinds))
    assert OTHERS.overwritten(_helper) == []
    assert not OTHERS.written_in_torch(_helper)
    assert OTHERS.array_namespace(types.ModuleType("m")) is None
    assert dict(OTHERS.torchify_defaults) == {}  # the table's torchify defaults stand


def test_the_torch_namespaces_give_the_namespaces_of_the_arrays() -> None:
    """``xp=torch`` stands for NumPy; array-api-compat's torch namespace (SciPy's vendored
    copy, whose module names scipy) for its NumPy one, its functions being torch code."""
    assert adapter_for(torch).array_namespace(torch) is np
    assert adapter_for(torch.linalg).array_namespace(torch.linalg) is None
    compat_torch, compat_numpy = _vendored()
    assert type(adapter_for(compat_torch)).__name__ == type(adapter_for(compat_torch.mean)).__name__ == "ArrayApiCompat"
    assert adapter_for(compat_torch.mean).written_in_torch(compat_torch.mean)
    assert adapter_for(compat_torch).array_namespace(compat_torch) is compat_numpy


def test_scipy_gets_float16_widened_over_the_table_s_torchify_defaults() -> None:
    assert dict(adapter_for(scipy.ndimage).torchify_defaults) == {"widen_float16": True}
    assert dict(adapter_for(np).torchify_defaults) == {}


def test_the_refusals_told_by_an_error_class_are_numbas_and_opencvs() -> None:
    """numba raises its TypingError from ``numba`` and a builtin TypeError for a signature
    mismatch; OpenCV raises ``cv2.error`` (tests/test_call_sites.py raises each for real)."""
    assert [(r.module, r.writes) for r in REJECTIONS] == [
        ("numba", True),
        ("numba", True),
        ("numba", False),
        ("builtins", False),
        ("cv2", True),
    ]


class Transform:
    """A class whose methods SciPy's capabilities table could declare (see below)."""

    def __init__(self) -> None:
        self.angle = 0.0

    def apply(self) -> float:
        return self.angle

    @classmethod
    def from_angle(cls, angle: float) -> Transform:
        made = cls()
        made.angle = angle
        return made


def test_scipy_s_declarations_of_a_method_are_its_own_or_its_class_s() -> None:
    """SciPy 1.17 lists a class's methods one by one in its capabilities table, 1.18 the class
    with overrides per method (``method_capabilities``): a method's declaration is its own
    entry, else its class's entry for that method, else its class's."""
    from autoconvert._adapters._scipy import _declared

    def entry(reason: str) -> dict[str, Any]:
        return {"reason": reason}

    own, cls, apply = entry("own"), entry("class"), entry("apply")
    by_method = {Transform.from_angle.__func__: own}
    by_class = {Transform: {**cls, "method_capabilities": {"apply": apply}}}
    assert _declared(by_method, Transform.from_angle.__func__) is own
    assert _declared(by_method, Transform.apply) is None
    assert _declared(by_class, Transform.apply) is apply
    assert _declared(by_class, Transform.__init__) == {**cls, "method_capabilities": {"apply": apply}}
    assert _declared(by_class, Transform.from_angle) == by_class[Transform]  # bound to the class
    assert _declared(by_class, scipy.special.expit) is None  # a ufunc: no class
    assert _declared(by_class, lambda: None) is None  # defined in a function: no class
    assert _declared(by_class, {}.keys) is None  # unhashable in a table: never in one
