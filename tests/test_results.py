"""SciPy's and NumPy's real result types come back as the same type, arrays inside converted.

Named tuples (NumPy's SVDResult), SciPy's tuple bunches with extra attributes and methods
(PearsonRResult, TtestResult, LinregressResult), OptimizeResult (a dict subclass with
attribute access), dataclasses (BootstrapResult), plain tuples of arrays and dicts.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import scipy.signal
import scipy.stats
import torch

import autoconvert as ac

from .conftest import raised

stats = ac.torchify(scipy.stats)
optimize = ac.torchify(scipy.optimize)
signal = ac.torchify(scipy.signal)
linalg = ac.torchify(scipy.linalg)
nplinalg = ac.torchify(np.linalg)

_g = torch.Generator().manual_seed(0)
X = torch.rand(20, generator=_g, dtype=torch.float64)
Y = 2 * X + torch.rand(20, generator=_g, dtype=torch.float64)
SPD = torch.rand(4, 4, generator=_g, dtype=torch.float64)
SPD = SPD @ SPD.T + 4 * torch.eye(4, dtype=torch.float64)

CALLS: dict[str, Callable[[], Any]] = {
    # scipy.stats: tuple bunches, some with extra fields, private state and methods
    "pearsonr": lambda: stats.pearsonr(X, Y),
    "spearmanr": lambda: stats.spearmanr(X, Y),
    "kendalltau": lambda: stats.kendalltau(X, Y),
    "linregress": lambda: stats.linregress(X, Y),
    "ttest_ind": lambda: stats.ttest_ind(X, Y),
    "ttest_rel": lambda: stats.ttest_rel(X, Y),
    "ttest_1samp": lambda: stats.ttest_1samp(X, 0.5),
    "describe": lambda: stats.describe(X),
    "mode": lambda: stats.mode(torch.tensor([1.0, 2.0, 2.0])),
    "kstest": lambda: stats.kstest(X, "norm"),
    "ks_2samp": lambda: stats.ks_2samp(X, Y),
    "mannwhitneyu": lambda: stats.mannwhitneyu(X, Y),
    "wilcoxon": lambda: stats.wilcoxon(X - Y),
    "pointbiserialr": lambda: stats.pointbiserialr(X > 0.5, Y),
    "f_oneway": lambda: stats.f_oneway(X, Y),
    "theilslopes": lambda: stats.theilslopes(Y, X),
    "levene": lambda: stats.levene(X, Y),
    "bootstrap": lambda: stats.bootstrap((X,), np.mean, n_resamples=99),
    # scipy.optimize: OptimizeResult (a dict subclass), tuples
    "minimize": lambda: optimize.minimize(lambda v: float(((v - 3) ** 2).sum()), torch.zeros(2, dtype=torch.float64)),
    "least_squares": lambda: optimize.least_squares(lambda v: v - 1.0, torch.zeros(2, dtype=torch.float64)),
    "minimize_scalar": lambda: optimize.minimize_scalar(lambda v: (v - 2.0) ** 2),
    "curve_fit": lambda: optimize.curve_fit(lambda x, a: a * x, X, Y),
    "linear_sum_assignment": lambda: optimize.linear_sum_assignment(SPD),
    # scipy.signal: tuples, a tuple holding a dict of arrays
    "find_peaks": lambda: signal.find_peaks(torch.sin(torch.linspace(0, 20, 200, dtype=torch.float64)), height=0),
    "welch": lambda: signal.welch(torch.rand(256, generator=_g, dtype=torch.float64)),
    "butter": lambda: signal.butter(4, 0.2),
    # scipy.linalg and numpy.linalg: tuples and named tuples
    "scipy.linalg.lu": lambda: linalg.lu(SPD),
    "scipy.linalg.eigh": lambda: linalg.eigh(SPD),
    "scipy.linalg.qr": lambda: linalg.qr(SPD),
    "numpy.linalg.svd": lambda: nplinalg.svd(SPD),
    "numpy.linalg.eigh": lambda: nplinalg.eigh(SPD),
    "numpy.linalg.slogdet": lambda: nplinalg.slogdet(SPD),
    "numpy.linalg.lstsq": lambda: nplinalg.lstsq(SPD, X[:4], rcond=None),
}


def _plain(value: Any) -> Any:
    """The same call without autoconvert: tensors in as arrays."""
    if isinstance(value, torch.Tensor):
        return value.numpy()
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _leaves(value: Any, seen: list[Any]) -> list[Any]:
    """Every array-like leaf in a result: fields, extra attributes, dict values, dataclass fields."""
    if isinstance(value, (torch.Tensor, np.ndarray, np.generic)):
        seen.append(value)
    elif isinstance(value, tuple):
        for v in value:
            _leaves(v, seen)
        for k, v in getattr(value, "__dict__", {}).items():
            if not k.startswith("_"):
                _leaves(v, seen)
    elif isinstance(value, dict):
        for v in value.values():
            _leaves(v, seen)
    elif hasattr(value, "__dataclass_fields__"):
        for k in value.__dataclass_fields__:
            _leaves(getattr(value, k), seen)
    return seen


@pytest.mark.parametrize("name", list(CALLS))
def test_real_results_come_back_as_their_own_type_with_tensors_inside(name: str) -> None:
    """The type is the one SciPy/NumPy returns (isinstance and type identity), and every array
    inside it, in fields, extra attributes, dict values or dataclass fields, is a tensor."""
    result = CALLS[name]()
    assert type(result).__module__.split(".")[0] in {"scipy", "numpy", "builtins"}, type(result)
    leaves = _leaves(result, [])
    assert leaves, f"{name}: no array-like values found in {result!r}"
    assert all(isinstance(v, torch.Tensor) for v in leaves), [type(v) for v in leaves]


def test_pearsonr_keeps_its_type_fields_and_methods() -> None:
    """torchmetrics-style evaluation: ``pearsonr(preds, target)`` then its confidence interval."""
    result = stats.pearsonr(X, Y)
    expected = scipy.stats.pearsonr(X.numpy(), Y.numpy())
    assert type(result) is type(expected)
    assert torch.equal(result.statistic, torch.as_tensor(expected.statistic))
    assert result[1] == result.pvalue and len(result) == 2
    low, high = result.confidence_interval(confidence_level=0.9)
    expected_low, expected_high = expected.confidence_interval(confidence_level=0.9)
    assert isinstance(low, torch.Tensor) and float(low) == pytest.approx(float(expected_low))
    assert float(high) == pytest.approx(float(expected_high))


def test_tuple_bunch_extras_are_converted_and_private_state_kept() -> None:
    """TtestResult's ``df`` and LinregressResult's ``intercept_stderr`` are tensors; the private
    fields SciPy's methods compute from stay NumPy."""
    ttest = stats.ttest_ind(X, Y)
    assert isinstance(ttest.df, torch.Tensor) and ttest.df.item() == 38.0
    assert isinstance(ttest.confidence_interval().low, torch.Tensor)
    regress = stats.linregress(X, Y)
    assert isinstance(regress.intercept_stderr, torch.Tensor)
    assert regress.slope.dtype == torch.float64 and len(regress) == 5


def test_optimize_result_is_an_optimize_result_with_tensors() -> None:
    """The most used optimizer: ``r.x`` is a tensor, ``r["x"]`` the same, flags stay Python."""
    result = optimize.minimize(lambda v: float(((v - 3) ** 2).sum()), torch.zeros(2, dtype=torch.float64))
    assert type(result) is scipy.optimize.OptimizeResult
    assert isinstance(result.x, torch.Tensor) and result.x is result["x"]
    assert torch.allclose(result.x, torch.full((2,), 3.0, dtype=torch.float64), atol=1e-4)
    assert result.success is True and isinstance(result.message, str)


# torch 2.4 and 2.5 warn from their own unpickler (torch.storage) for every tensor pickle.loads() meets.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
def test_results_pickle_as_the_original_type() -> None:
    """A converted result pickles; its methods come back as the original's (NumPy) methods."""
    result = pickle.loads(pickle.dumps(stats.pearsonr(X, Y)))
    assert type(result) is type(scipy.stats.pearsonr(X.numpy(), Y.numpy()))
    assert isinstance(result.statistic, torch.Tensor)
    assert result.confidence_interval().low == pytest.approx(float(result.confidence_interval().low))


def test_a_dict_subclass_that_cannot_be_copied_raises_naming_register_container() -> None:
    """Never a raw error from deep inside: the path, the type and the fix."""

    class Frozen(dict[str, Any]):
        def __reduce_ex__(self, protocol: Any) -> Any:
            raise TypeError("Frozen cannot be copied")

    @ac.returns_tensor
    def report() -> Any:
        return {"scores": Frozen(best=np.ones(2))}

    assert raised(ac.ConversionError, report) == (
        "test_a_dict_subclass_that_cannot_be_copied_raises_naming_register_container.<locals>.report(): "
        "result['scores'] is a test_a_dict_subclass_that_cannot_be_copied_raises_naming_register_container."
        "<locals>.Frozen (a dict subclass) that copy.copy() cannot rebuild: Frozen cannot be copied. Found "
        "tests.test_results.test_a_dict_subclass_that_cannot_be_copied_raises_naming_register_container."
        "<locals>.Frozen. Fix: register it with autoconvert.register_container(cls, flatten, unflatten)."
    )


def test_objects_that_are_not_containers_pass_through_unchanged() -> None:
    """BinomTestResult is a plain class: it is a leaf, returned as the very object SciPy made."""
    made: list[Any] = []

    @ac.returns_tensor
    def test() -> Any:
        made.append(scipy.stats.binomtest(7, 10))
        return made[-1]

    assert test() is made[0]
