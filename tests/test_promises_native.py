"""The promise matrix's native routes: calls that hand the caller's tensors to SciPy's or
scikit-learn's own torch code where SciPy's array API mode is on (this file reruns itself in
the mode), and convert where it is off."""

from __future__ import annotations

import contextlib
import importlib.util
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import autoconvert as ac
from tests.modes import IN_MODE, rerun_test


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


def _dispatching() -> bool:
    """Whether scikit-learn's array API dispatch works here (SciPy's mode on, scikit-learn present)."""
    if not (IN_MODE and importlib.util.find_spec("sklearn")):
        return False
    from autoconvert._adapters._sklearn import ScikitLearn

    return ScikitLearn().torch_mode() is None


in_dispatch = pytest.mark.skipif(not _dispatching(), reason="needs scikit-learn's array API dispatch, and SciPy's mode")
#: scikit-learn's scalar regression metrics, whose torch code returns ``float()`` of its 0-d
#: result (SciPy's native functions tried keep their results tensors, or convert).
_METRICS = ("r2_score", "mean_squared_error", "max_error", "median_absolute_error")
_MORE_METRICS = (
    "mean_absolute_error",
    "explained_variance_score",
    "mean_squared_log_error",
    "d2_tweedie_score",
    "mean_tweedie_deviance",
    "mean_pinball_loss",
    "mean_absolute_percentage_error",
    "mean_poisson_deviance",
)
#: How grad= reaches the call: given to torchify, by a config block, or given to torchify in
#: an ac.stats() block.
_CALL_PATHS = ("flat", "config", "stats")


def _metric_through_torchify(name: str, grad: str, path: str) -> tuple[list[Any], list[str], float]:
    """scikit-learn's ``name`` torchified natively, called twice on a y_pred that requires grad
    with ``grad`` reaching it by ``path``: the two results (or the GradientError), every warning
    of the calls (GradientWarnings as their message, others as their category and message),
    and the metric's value computed without grad."""
    import sklearn.metrics

    y = torch.linspace(0.1, 1, 9, dtype=torch.float64)
    metrics = ac.torchify(sklearn.metrics, native="auto", **({} if path == "config" else {"grad": grad}))
    if ac.explain(getattr(metrics, name)).path != "native":
        pytest.skip(f"scikit-learn {sklearn.__version__} has no torch path for {name}")
    block = {"config": lambda: ac.config(grad=grad), "stats": ac.stats}.get(path, contextlib.nullcontext)
    got: list[Any] = []
    with warnings.catch_warnings(record=True) as caught, block():
        warnings.simplefilter("always")
        for _ in range(2):
            try:
                got.append(getattr(metrics, name)(y, (y * 0.9 + 0.05).requires_grad_()))
            except ac.GradientError as e:
                got.append(e)
    said = [str(w.message) if w.category is ac.GradientWarning else f"{w.category}: {w.message}" for w in caught]
    with torch.no_grad():
        value = getattr(metrics, name)(y, y * 0.9 + 0.05)
    return got, said, value


def _check_metric(name: str, grad: str, path: str) -> None:
    """The whole of what ``grad`` gives for ``name`` (see ``_metric_through_torchify``)."""
    got, said, value = _metric_through_torchify(name, grad, path)
    site = (
        "or a with ac.config(grad='detach'): block around the call"
        if path == "config"
        else f"where grad={grad!r} was given, so a config block cannot change it"
    )
    lost = (
        f"{name}(): argument y_pred requires grad, and scikit-learn's own torch path for this call turns it into a "
        "Python number, which carries no gradient"
    )
    keep = f"compute {name} with torch operations: scikit-learn's own torch path for it leaves torch"
    if grad == "error":
        assert said == [] and all(type(e) is ac.GradientError for e in got)
        assert [str(e) for e in got] == 2 * [
            f"{lost}. Found torch.Tensor(shape=(9,), dtype=torch.float64, layout=torch.strided, device=cpu). Fix: pass "
            "y_pred.detach(), call under torch.no_grad(), or allow it detached with grad='detach' (in the "
            f"ac.torchify(..., grad='detach') call that made it, {site}; grad='warn' says so once); to keep the "
            f"gradient, {keep}."
        ]
        return
    assert got == [value, value] and type(value) is float
    silence = f"{site}; grad='error' forbids it"
    assert said == (
        []
        if grad == "detach"
        else [
            f"{lost}: it was detached, so no gradient flows through this call. To keep the gradient, {keep}. To "
            f"silence this, pass grad='detach' (in the ac.torchify(..., grad='detach') call that made it, {silence}), "
            "or call under torch.no_grad()"
        ]
    )


@in_dispatch
@pytest.mark.parametrize("path", _CALL_PATHS)
@pytest.mark.parametrize("grad", ["warn", "error", "detach"])
@pytest.mark.parametrize("name", _METRICS)
def test_a_native_metric_returning_a_python_float_applies_grad(name: str, grad: str, path: str) -> None:
    """scikit-learn's torch code for a scalar metric returns ``float()`` of its result, which
    drops the gradient of a y_pred that requires grad: grad= applies there as where the code
    hands a tensor to NumPy (one GradientWarning for the function, GradientError under
    "error", nothing under "detach"), and torch's own warning about the conversion is not
    issued through the library's call."""
    _check_metric(name, grad, path)


@in_dispatch
@pytest.mark.slow
@pytest.mark.parametrize("path", _CALL_PATHS)
@pytest.mark.parametrize("grad", ["warn", "error", "detach"])
@pytest.mark.parametrize("name", _MORE_METRICS)
def test_every_native_scalar_metric_applies_grad(name: str, grad: str, path: str) -> None:
    """The same for the rest of scikit-learn's scalar regression metrics."""
    _check_metric(name, grad, path)


test_in_scipy_s_array_api_mode = rerun_test(
    __file__,
    None,
    "The native promises again with SciPy's array API mode on, where torchify's native routes "
    "hand tensors to SciPy's and scikit-learn's own torch code.",
)
