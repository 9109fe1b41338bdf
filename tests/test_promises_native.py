"""The promise matrix's native routes: calls that hand the caller's tensors to SciPy's or
scikit-learn's own torch code where SciPy's array API mode is on (this file reruns itself in
the mode), and convert where it is off."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import autoconvert as ac
from tests.modes import rerun_test


def _native_calls() -> dict[str, Callable[[], tuple[Any, list[torch.Tensor]]]]:
    """Calls that hand the caller's tensors to SciPy's or scikit-learn's own torch path where
    its array API mode is on (and convert where it is off): each gives its tensors."""

    def rotation() -> tuple[Any, list[torch.Tensor]]:
        transform = pytest.importorskip("scipy.spatial.transform")
        m = torch.eye(3) * 2.0
        return lambda: ac.torchify(transform, native="auto").Rotation.from_matrix(m), [m]

    def scaler_transform_copy_false() -> tuple[Any, list[torch.Tensor]]:
        preprocessing = pytest.importorskip("sklearn.preprocessing")
        x = torch.rand(6, 3, dtype=torch.float64) * 5
        scaler = ac.torchify(preprocessing, native="auto").StandardScaler()
        return lambda: scaler.fit(x).transform(x, copy=False), [x]

    def ridge_copy_x_false() -> tuple[Any, list[torch.Tensor]]:
        linear_model = pytest.importorskip("sklearn.linear_model")
        x, y = torch.rand(6, 3, dtype=torch.float64) * 5, torch.rand(6, dtype=torch.float64)
        return lambda: ac.torchify(linear_model, native="auto").Ridge(copy_X=False, solver="svd").fit(x, y), [x, y]

    return {
        "Rotation.from_matrix": rotation,
        "StandardScaler.transform(copy=False)": scaler_transform_copy_false,
        "Ridge(copy_X=False).fit": ridge_copy_x_false,
    }


@pytest.mark.parametrize("name", sorted(_native_calls()))
def test_native_paths_never_change_the_callers_tensors(name: str) -> None:
    """SciPy's and scikit-learn's own torch code may write into what it is handed; through
    torchify the caller's tensors stay as they were, whatever the path."""
    call, tensors = _native_calls()[name]()
    before = [t.clone() for t in tensors]
    call()
    assert all(torch.equal(t, b) for t, b in zip(tensors, before, strict=True))


test_in_scipy_s_array_api_mode = rerun_test(
    __file__,
    None,
    "The native promises again with SciPy's array API mode on, where torchify's native routes "
    "hand tensors to SciPy's and scikit-learn's own torch code.",
)
