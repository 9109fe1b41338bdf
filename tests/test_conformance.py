"""The conformance script's routing (``benchmarks/conformance.py``): which of a library's
callables and objects the tests' calls reach through torchify, and how differences are
classified; and the native benchmark's route count. On real scikit-learn, SciPy and torch.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np
import pytest
import scipy.spatial.transform
import scipy.special
import torch

import autoconvert as ac
from benchmarks.conformance import SCIPY, SKLEARN, _kind, _routed, _RoutedObject
from benchmarks.native import _route

if importlib.util.find_spec("sklearn") is None:
    if os.environ.get("AUTOCONVERT_TEST_RECIPES"):
        pytest.fail("needs scikit-learn: pip install -e '.[sklearn]'", pytrace=False)
    pytest.skip("needs scikit-learn: pip install -e '.[sklearn]'", allow_module_level=True)

import sklearn.base  # after the check above, which names the extra
import sklearn.metrics
import sklearn.utils._array_api
from sklearn.linear_model import Ridge


def test_a_library_s_callables_are_routed_and_its_tests_means_kept() -> None:
    """A metric and an array helper are routed, under the module torchify views them from;
    the namespace and device questions the tests ask, and other libraries' callables, are not."""
    routed = _routed(sklearn.metrics.r2_score, SKLEARN)
    assert routed.__wrapped__ is sklearn.metrics.r2_score
    assert routed.torchified.__name__ == "r2_score"
    assert _routed(sklearn.utils._array_api._average, SKLEARN) is not None
    kept = [sklearn.utils._array_api.get_namespace, sklearn.utils._array_api.move_to, scipy.special.expit]
    assert [_routed(value, SKLEARN) for value in kept] == [None, None, None]
    assert _routed(scipy.special.logsumexp, SCIPY) is not None


def test_a_partial_is_routed_with_its_arguments() -> None:
    """``partial(mean_tweedie_deviance, power=1.5)``, as scikit-learn's tables list it."""
    routed = _routed(functools.partial(sklearn.metrics.mean_tweedie_deviance, power=1.5), SKLEARN)
    assert isinstance(routed, functools.partial)
    assert routed.keywords == {"power": 1.5}
    a, b = torch.rand(8, dtype=torch.float64) + 0.1, torch.rand(8, dtype=torch.float64) + 0.1
    expected = sklearn.metrics.mean_tweedie_deviance(a.numpy(), b.numpy(), power=1.5)
    assert float(routed(a, b)) == pytest.approx(expected)


def test_a_routed_estimator_fits_arrays_itself_and_tensors_through_the_view() -> None:
    """A fit on arrays reaches the estimator as it was (its attributes arrays); after a fit
    on tensors, which goes through torchify's view, its attributes are read through the view;
    ``clone`` and ``vars`` see the estimator itself."""
    x, y = np.random.default_rng(0).random((12, 3)), np.arange(12.0)
    on_arrays = _RoutedObject(Ridge(), {"native": False})
    assert on_arrays.fit(x, y) is on_arrays
    assert type(on_arrays.coef_) is np.ndarray
    assert type(sklearn.base.clone(on_arrays)) is Ridge
    assert set(vars(on_arrays)) >= {"coef_", "intercept_"}
    on_tensors = _RoutedObject(Ridge(), {"native": False})
    assert on_tensors.fit(torch.from_numpy(x), torch.from_numpy(y)) is on_tensors
    assert type(on_tensors.coef_) is torch.Tensor
    assert type(on_tensors.predict(torch.from_numpy(x))) is torch.Tensor
    np.testing.assert_allclose(on_tensors.coef_.numpy(), on_arrays.coef_)


@pytest.mark.parametrize(
    ("nodeid", "error", "kind"),
    [
        (
            "test_array_api.py::test_fill_diagonal[torch-cpu-float64-standard]",
            "autoconvert.ReadOnlyError: _fill_diagonal(): argument array was written into by the function; ...",
            "policy: writes into arguments",
        ),
        (
            "test_array_api.py::test_average_raises_with_wrong_dtype[torch-cpu-float32]",
            "Failed: DID NOT RAISE <class 'NotImplementedError'>",
            "policy: scikit-learn's NumPy path",
        ),
        (
            "test_common.py::test_array_api_compliance[r2_score-torch-cpu-float32]",
            "AssertionError: 'r2' differs by 0.5",
            "unexplained: AssertionError: … differs by …",
        ),
    ],
)
def test_differences_are_classified_by_policy(nodeid: str, error: str, kind: str) -> None:
    assert _kind(nodeid, error) == kind


def test_the_objects_rows_say_which_route_stats_counted() -> None:
    """Converting, both calls of the Rotation pipeline take the host path, and so do the PCA
    row's (its constructor is a call too)."""
    import sklearn.decomposition

    angles, points = torch.rand(4, 3, dtype=torch.float64), torch.rand(4, 3, dtype=torch.float64)
    view = ac.torchify(scipy.spatial.transform, native=False)
    rotated = _route(
        lambda: view.Rotation.from_euler("zyx", angles).apply(points), ("Rotation.from_euler", "Rotation.apply")
    )
    assert rotated == "stats(): 0 of 2 calls native"
    pca = ac.torchify(sklearn.decomposition, native=False).PCA
    assert (
        _route(lambda: pca(2).fit_transform(torch.rand(8, 3)), ("PCA.fit_transform",)) == "stats(): 0 of 2 calls native"
    )
