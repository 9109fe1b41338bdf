"""scikit-learn's adapter: which estimators and functions scikit-learn runs on torch tensors
itself (its array API dispatch), read from scikit-learn, its dispatch switched on around a
call only, and the facts of that path, established on real scikit-learn and torch CPU tensors.

The dispatch needs SciPy's array API mode, read when SciPy is imported, so the tests that need
it run in a process of their own with ``SCIPY_ARRAY_API=1`` (``test_scikit_learn_s_array_api_dispatch``,
which runs this file there); the suite's own process checks what holds with the mode off.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
import threading
import warnings
from typing import Any

import numpy as np
import pytest
import torch

import autoconvert as ac
from autoconvert._adapters._scipy import array_api_mode
from autoconvert._adapters._sklearn import ScikitLearn, _declared_functions
from autoconvert._adapters._table import adapter_for
from autoconvert._interpreter._routes import described

from .modes import IN_MODE as MODE
from .modes import rerun_test

if importlib.util.find_spec("sklearn") is None:
    if os.environ.get("AUTOCONVERT_TEST_RECIPES"):
        pytest.fail("needs scikit-learn: pip install -e '.[sklearn]'", pytrace=False)
    pytest.skip("needs scikit-learn: pip install -e '.[sklearn]'", allow_module_level=True)

import sklearn  # after the check above, which names the extra
import sklearn.metrics
import sklearn.metrics.pairwise
import sklearn.utils
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import RobustScaler, StandardScaler, scale

ADAPTER = ScikitLearn()
in_mode = pytest.mark.skipif(
    not MODE or ADAPTER.torch_mode() is not None, reason="needs scikit-learn's array API dispatch, and SciPy's mode"
)
# torch 2.13's asarray, called by scikit-learn's torch code (array-api-compat) on a tensor that requires grad.
pytestmark = pytest.mark.filterwarnings("ignore:torch.asarray. unspecified requires_grad:UserWarning")


test_scikit_learn_s_array_api_dispatch = rerun_test(
    __file__,
    "needs scikit-learn's array API dispatch",
    "This file's tests that need the dispatch, in a process with SciPy's mode on.",
)


def _tables() -> dict[Any, list[Any]]:
    """scikit-learn's array API tests' tables of functions (its test modules, imported)."""
    tables = {}
    for module in ("sklearn.metrics.tests.test_common", "sklearn.metrics.cluster.tests.test_common"):
        # Its mark thread_unsafe, registered by its own conftest, is registered in pyproject.toml too.
        tables.update(getattr(importlib.import_module(module), "array_api_metric_checkers", {}))
    return tables


def _dispatching() -> bool:
    return bool(sklearn.get_config()["array_api_dispatch"])


# --------------------------------------------------------------------------- either way


@pytest.mark.parametrize("value", [sklearn, sklearn.metrics.accuracy_score, PCA, PCA(), PCA().fit, KFold(3)])
def test_scikit_learn_s_values_find_its_adapter(value: Any) -> None:
    assert type(adapter_for(value)) is ScikitLearn


@pytest.mark.skipif(MODE, reason="SciPy's array API mode is on in this process")
def test_its_torch_path_is_off_while_scipy_s_mode_is() -> None:
    assert not array_api_mode()
    assert ADAPTER.torch_mode() == (
        "scikit-learn's array API dispatch needs SciPy's array API mode, which is off. "
        "Fix: set SCIPY_ARRAY_API=1 before SciPy and scikit-learn are imported"
    )
    assert ADAPTER.torch_path(PCA().fit) == ADAPTER.torch_mode()


def test_an_estimator_is_declared_by_its_tags() -> None:
    """Instances by their own tags, bound methods by their estimator's, classes by their
    instance with default parameters."""
    lda = LinearDiscriminantAnalysis
    for value in (PCA, PCA(n_components=2), PCA().fit_transform, lda, lda().fit, lda().transform):
        assert ADAPTER.declared_torch_path(value) is None, value
    assert ADAPTER.declared_torch_path(RobustScaler) == "RobustScaler()'s tags declare no array API support"
    assert ADAPTER.declared_torch_path(RobustScaler()) == "its tags declare no array API support"
    assert ADAPTER.declared_torch_path(RobustScaler().fit) == "its tags declare no array API support"


def test_an_estimator_whose_parameters_take_its_support_away_names_them() -> None:
    """PCA's tags declare the array API for some solvers only (scikit-learn 1.6 and later)."""
    arpack = PCA(n_components=3, svd_solver="arpack")
    if arpack.__sklearn_tags__().array_api_support if hasattr(arpack, "__sklearn_tags__") else True:
        pytest.skip("this scikit-learn's tags do not depend on PCA's parameters")
    assert ADAPTER.declared_torch_path(arpack.fit) == (
        "its tags declare no array API support with n_components=3, svd_solver='arpack', where PCA()'s do"
    )


def test_a_class_made_with_arguments_only_is_asked_through_an_instance() -> None:
    assert ADAPTER.declared_torch_path(Pipeline) == (
        "scikit-learn declares array API support in each estimator's tags, and Pipeline takes arguments to be "
        "made: ask of an instance"
    )
    pipeline = Pipeline([("pca", PCA())])
    assert (
        ADAPTER.declared_torch_path(pipeline.fit) == "its tags declare no array API support"
    )  # a Pipeline's declare none


def test_values_neither_estimators_nor_functions_have_none() -> None:
    why = "scikit-learn declares array API support of estimators, in their tags, and of functions only"
    assert [ADAPTER.declared_torch_path(v) for v in (KFold, KFold(3), sklearn.metrics)] == [why] * 3


def test_a_function_is_declared_by_scikit_learn_s_array_api_tests() -> None:
    """The functions its array API tests' tables list (read from their source, not imported)
    are exactly those tables' keys, partials unwrapped; any other function has none."""
    tables = [k.func if isinstance(k, functools.partial) else k for k in _tables()]
    assert tables and _declared_functions() == frozenset(tables)
    assert ADAPTER.declared_torch_path(sklearn.metrics.accuracy_score) is None
    why = "scikit-learn's array API tests of functions leave it out"
    assert ADAPTER.declared_torch_path(scale) == why
    assert ADAPTER.declared_torch_path(sklearn.metrics.get_scorer_names) == why
    assert ADAPTER.declared_torch_path(sklearn.utils.Bunch().keys) == why  # unhashable, as its Bunch is


def test_importing_autoconvert_and_asking_of_other_libraries_imports_no_scikit_learn() -> None:
    code = (
        "import sys, scipy.special, autoconvert as ac\n"
        "from autoconvert._adapters._table import adapter_for\n"
        "adapter_for(scipy.special.erf).torch_path(scipy.special.erf)\n"
        "ac.torchify(scipy.special).erf\n"
        "assert 'sklearn' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_library_switching_nothing_per_call_gets_its_function_back() -> None:
    """SciPy's mode is the process's: its torch path calls a function as it is."""
    fn = sklearn.metrics.r2_score
    assert adapter_for(np.mean).torch_call(fn) is fn
    assert adapter_for(PCA).torch_call(fn) is not fn


# --------------------------------------------------------------------------- the dispatch


@in_mode
def test_its_torch_path_is_on_in_scipy_s_mode() -> None:
    assert array_api_mode() and ADAPTER.torch_mode() is None and ADAPTER.declared_torch_path(PCA().fit) is None
    assert not _dispatching()  # never switched on for the process


def _refusal() -> RuntimeError | None:
    """scikit-learn's own refusal to switch its dispatch on, if any."""
    try:
        with sklearn.config_context(array_api_dispatch=True):
            return None
    except RuntimeError as error:
        return error


@in_mode
def test_torchify_takes_scikit_learn_s_own_torch_path_with_its_dispatch_on_around_the_call() -> None:
    """A function scikit-learn declares runs on the tensor itself through torchify's native
    route, its dispatch switched on around that call alone: the graph is kept, and the
    dispatch is off again afterwards; one it does not declare converts."""
    view = ac.torchify(sklearn.metrics.pairwise, native="auto")
    x = torch.rand(5, 3, dtype=torch.float64, requires_grad=True)
    distances = view.euclidean_distances(x)
    assert [route.name for route in described(view.euclidean_distances).routes] == ["native"]
    assert type(distances) is torch.Tensor and distances.requires_grad
    assert not sklearn.get_config()["array_api_dispatch"]
    strict = ac.torchify(sklearn.metrics.pairwise, native=True).euclidean_distances
    assert strict(x.detach()).shape == (5, 5)


@in_mode
def test_scikit_learn_s_own_refusal_is_given_in_its_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """scikit-learn checks SCIPY_ARRAY_API itself, each time its dispatch is switched on."""
    monkeypatch.delenv("SCIPY_ARRAY_API")
    refused = _refusal()
    # scikit-learn before 1.6 checks SciPy's version only: SciPy's mode, read at import, holds.
    assert ADAPTER.torch_mode() == (
        None if refused is None else f"scikit-learn refuses its array API dispatch: {refused}"
    )


@in_mode
def test_torch_call_switches_dispatch_on_around_the_call_only() -> None:
    """On while the call runs, off again after it, whether it returns or raises."""
    seen = []

    def probe(x: torch.Tensor) -> torch.Tensor:
        seen.append(_dispatching())
        return x

    dispatched = ADAPTER.torch_call(probe)
    assert dispatched.__name__ == "probe" and dispatched.__wrapped__ is probe  # type: ignore[attr-defined]
    x = torch.ones(2)
    assert dispatched(x) is x and seen == [True] and not _dispatching()
    with pytest.raises(TypeError):
        ADAPTER.torch_call(RobustScaler().fit)(x.reshape(2, 1))
    assert not _dispatching()
    with sklearn.config_context(array_api_dispatch=True):  # a caller's own block stays on
        dispatched(x)
        assert _dispatching()


@in_mode
def test_torch_call_switches_dispatch_on_in_its_own_thread_only() -> None:
    """scikit-learn's configuration is per thread: a thread beside a dispatched call sees none."""
    inside, done = threading.Event(), threading.Event()
    beside = []

    def wait(x: torch.Tensor) -> torch.Tensor:
        inside.set()
        assert done.wait(10)
        return x

    def look() -> None:
        assert inside.wait(10)
        beside.append(_dispatching())
        done.set()

    thread = threading.Thread(target=look)
    thread.start()
    ADAPTER.torch_call(wait)(torch.ones(1))
    thread.join()
    assert beside == [False]


# --------------------------------------------------------------------------- facts of the path


def _data(dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(30, 4, dtype=dtype, generator=generator), (torch.arange(30) % 3).to(dtype)


def _declared(*estimators: Any) -> None:
    """Skip where this scikit-learn's tags do not declare the array API for ``estimators``
    (StandardScaler and Ridge's declare it from 1.6 on, PCA's covariance solver exists from 1.5)."""
    missing = [e for e in estimators if ADAPTER.declared_torch_path(e) is not None]
    if missing:
        pytest.skip(f"this scikit-learn declares no array API support for {missing}")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().view(torch.uint8).clone()


def _unchanged(args: tuple[torch.Tensor, ...], before: list[tuple[torch.Tensor, int]]) -> bool:
    """Whether each tensor holds the bits and version ``before`` recorded of it."""
    return all(
        torch.equal(_bits(a), bits) and a._version == version for a, (bits, version) in zip(args, before, strict=True)
    )


def _record(args: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, int]]:
    return [(_bits(a), a._version) for a in args]


@in_mode
def test_pca_keeps_the_graph_on_the_tensor_s_device_and_writes_nothing() -> None:
    x = _data()[0].requires_grad_()
    before = _record((x,))
    pca = PCA(n_components=2)
    out = ADAPTER.torch_call(pca.fit_transform)(x)
    assert type(out) is torch.Tensor and out.requires_grad and out.device == x.device and out.dtype == torch.float64
    assert out.shape == (30, 2) and _unchanged((x,), before)
    fitted = {k: type(v) for k, v in vars(pca).items() if k.endswith("_") and not isinstance(v, int)}
    assert set(fitted.values()) == {torch.Tensor}, fitted  # components_, mean_, explained_variance_...


@in_mode
def test_native_results_are_scikit_learn_s_numpy_results() -> None:
    """StandardScaler, Ridge and LinearDiscriminantAnalysis: tensors in, tensors out, equal
    to what scikit-learn gives for the same data in NumPy. (Ridge's solver='auto' warns
    under the dispatch that it takes 'svd', which NumPy's 'auto' does not choose.)"""
    _declared(StandardScaler, Ridge(solver="svd"), LinearDiscriminantAnalysis)
    x, y = _data()
    cases = [
        (StandardScaler, lambda e, a, b: e.fit(a).transform(a)),
        (StandardScaler, lambda e, a, b: e.fit(a).inverse_transform(e.transform(a))),
        (functools.partial(Ridge, solver="svd"), lambda e, a, b: e.fit(a, b).predict(a)),
        (LinearDiscriminantAnalysis, lambda e, a, b: e.fit(a, b).transform(a)),
        (LinearDiscriminantAnalysis, lambda e, a, b: e.fit(a, b).predict_proba(a)),
    ]
    for cls, run in cases:
        native = ADAPTER.torch_call(lambda a, b, cls=cls, run=run: run(cls(), a, b))(x, y)
        expected = run(cls(), x.numpy(), y.numpy())
        assert type(native) is torch.Tensor and native.dtype == torch.float64, cls
        np.testing.assert_allclose(native.numpy(), expected, rtol=1e-10, atol=1e-12)
    fitted = ADAPTER.torch_call(Ridge(solver="svd").fit)(x, y)
    assert type(ADAPTER.torch_call(fitted.score)(x, y)) is float


@in_mode
def test_an_estimator_without_support_fails_under_dispatch_with_torch_s_words() -> None:
    with pytest.raises(TypeError) as raised:
        ADAPTER.torch_call(RobustScaler().fit_transform)(_data()[0])
    assert str(raised.value) == "asarray(): argument 'dtype' must be torch.dtype, not type"


@in_mode
def test_an_estimator_keeps_the_kind_it_was_fitted_on() -> None:
    """Fitted on tensors, its methods need the dispatch; fitted on arrays, the dispatch refuses
    tensors: the path an estimator takes is decided when it is fitted, for all its calls."""
    x = _data()[0]
    natively = ADAPTER.torch_call(PCA(n_components=2).fit)(x)
    with pytest.raises(TypeError):  # 1.9: "unsupported operand type(s) for @: 'numpy.ndarray' and 'Tensor'"
        natively.transform(x)
    converted = PCA(n_components=2).fit(x.numpy())
    # 1.9: "Inputs passed to PCA.transform() must use the same namespace ... as those passed to fit()"
    with pytest.raises((TypeError, ValueError)):
        ADAPTER.torch_call(converted.transform)(x)


@in_mode
def test_some_native_graphs_differentiate_and_some_raise() -> None:
    """Ridge, euclidean_distances and PCA's covariance solver: gradients as torch computes
    them (checked against finite differences). PCA's full SVD and StandardScaler's fit write
    in place into what their graph saved: backward raises torch's error, never a wrong gradient."""
    _declared(Ridge(solver="svd"), PCA(svd_solver="covariance_eigh"), PCA(svd_solver="full"), StandardScaler)
    x, y = _data()
    differentiable = [
        lambda a: Ridge(solver="svd").fit(a, y).predict(a),
        lambda a: sklearn.metrics.pairwise.euclidean_distances(a, x + 1),
        lambda a: PCA(n_components=2, svd_solver="covariance_eigh").fit_transform(a).abs(),
    ]
    for fn in differentiable:
        assert torch.autograd.gradcheck(ADAPTER.torch_call(fn), (x.clone().requires_grad_(),))
    for fn in (PCA(n_components=2, svd_solver="full").fit_transform, StandardScaler().fit_transform):
        out = ADAPTER.torch_call(fn)(x.clone().requires_grad_())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


@in_mode
def test_copy_false_writes_into_the_caller_s_tensor() -> None:
    """scikit-learn's copy=False is a write into X under the dispatch as in NumPy: what the
    native path hands over is the caller's tensor itself."""
    _declared(StandardScaler)
    x = _data()[0]
    version = x._version
    out = ADAPTER.torch_call(StandardScaler(copy=False).fit_transform)(x)
    assert out.data_ptr() == x.data_ptr() and x._version > version
    assert torch.allclose(x.mean(0), torch.zeros(4, dtype=torch.float64), atol=1e-12)


def _metric_inputs(checker: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Two arguments of the kind scikit-learn's checker of a metric passes it."""
    g = torch.Generator().manual_seed(1)
    n = 12

    def floats(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=g, dtype=torch.float64) + 0.5

    def labels(k: int, *shape: int) -> torch.Tensor:
        return torch.randint(0, k, shape or (n,), generator=g)

    kinds = {
        "multilabel_continuous": lambda: (labels(2, n, 3), floats(n, 3) - 0.5),
        "multiclass_continuous": lambda: (torch.arange(n) % 3, torch.softmax(floats(n, 3), 1)),
        "binary_continuous": lambda: (torch.arange(n) % 2, floats(n) - 0.5),
        "multilabel": lambda: (labels(2, n, 3), labels(2, n, 3)),
        "multiclass": lambda: (torch.arange(n) % 3, labels(3)),
        "binary": lambda: (torch.arange(n) % 2, labels(2)),
        "regression": lambda: (floats(n), floats(n)),
        "pairwise": lambda: (floats(n, 4), floats(n, 4)),
        "unsupervised": lambda: (floats(n, 4), torch.arange(n) % 3),
    }
    return next(make() for kind, make in kinds.items() if kind in checker)


@in_mode
def test_scikit_learn_s_declared_functions_never_write_into_their_inputs() -> None:
    """Every function of its array API tests' tables, on tensors of the kind its own checker
    passes: the caller's tensors bit for bit as they were, their version counters untouched."""
    checked = []
    for metric, checkers in _tables().items():
        fn = metric.func if isinstance(metric, functools.partial) else metric
        args = _metric_inputs(checkers[0].__name__)
        before = _record(args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn's own about the values (ill-defined scores)
            ADAPTER.torch_call(metric)(*args, **({"beta": 1.0} if fn is sklearn.metrics.fbeta_score else {}))
        assert _unchanged(args, before), fn.__name__
        checked.append(fn)
    assert set(checked) == _declared_functions()


@in_mode
def test_declared_estimators_never_write_into_their_inputs() -> None:
    """Fitting and each method of the estimators the docs name, with their default copy=True."""
    estimators = (StandardScaler(), PCA(n_components=2), Ridge(solver="svd"), LinearDiscriminantAnalysis())
    _declared(*estimators)
    x, y = _data()
    before = _record((x, y))
    for estimator in estimators:
        fitted = ADAPTER.torch_call(estimator.fit)(x, y)
        for method in ("transform", "predict", "predict_proba", "score", "inverse_transform"):
            if not hasattr(fitted, method):
                continue
            called = ADAPTER.torch_call(getattr(fitted, method))
            if method == "inverse_transform":
                z = ADAPTER.torch_call(fitted.transform)(x)
                before_z = _record((z,))
                called(z)
                assert _unchanged((z,), before_z), estimator
            else:
                called(*((x, y) if method == "score" else (x,)))
        assert _unchanged((x, y), before), estimator


@pytest.mark.parametrize(
    ("told", "keywords", "writes"),
    [
        ({}, {}, False),
        ({"copy": False}, {}, True),  # the estimator's parameter
        ({"copy": False}, {"copy": None}, True),  # None: the method leaves it to the parameter
        ({"copy": False}, {"copy": True}, False),  # the method's keyword decides over it
        ({}, {"copy": False}, True),
        ({}, {"copy": 0}, True),
    ],
)
def test_which_estimator_calls_write_into_their_tensors(
    told: dict[str, Any], keywords: dict[str, Any], writes: bool
) -> None:
    """scikit-learn's path writes into its input where the estimator is told not to copy: by
    its parameter, however set, unless the method's own ``copy=`` says otherwise; a method
    without that keyword, and an estimator without such a parameter, never."""
    scaler = StandardScaler()
    scaler.copy = told.get("copy", True)  # set after it was made: read at each call
    x = np.ones((2, 2))
    transform = ADAPTER.torch_writes(StandardScaler.transform, StandardScaler)
    assert transform is not None and transform((scaler, x), keywords) is writes
    if "copy" in keywords:  # by position too
        assert transform((scaler, x, keywords["copy"]), {}) is writes
    fit = ADAPTER.torch_writes(StandardScaler.fit, StandardScaler)
    assert fit is not None and fit((scaler, x), {}) is (told.get("copy") is False)
    assert ADAPTER.torch_writes(LinearDiscriminantAnalysis.fit, LinearDiscriminantAnalysis) is None
    assert ADAPTER.torch_writes(sklearn.metrics.r2_score) is None


def test_a_meta_estimator_reading_its_tags_from_its_estimator_is_asked_of_an_instance() -> None:
    """SelfTrainingClassifier() has no tags without its estimator (scikit-learn raises
    AttributeError reading them): its class is asked of an instance, and one made with its
    estimator answers for itself."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.semi_supervised import SelfTrainingClassifier

    assert ADAPTER.declared_torch_path(SelfTrainingClassifier) == (
        "scikit-learn declares array API support in each estimator's tags, and SelfTrainingClassifier takes "
        "arguments to be made: ask of an instance"
    )
    assert ADAPTER.declared_torch_path(SelfTrainingClassifier(LogisticRegression())) in (
        None,
        "its tags declare no array API support",
    )
