"""SciPy's and NumPy's real result types come back as the same type, arrays inside converted.

Named tuples (NumPy's SVDResult), SciPy's tuple bunches with extra attributes and methods
(PearsonRResult, TtestResult, LinregressResult), OptimizeResult (a dict subclass with
attribute access), dataclasses (BootstrapResult), plain tuples of arrays and dicts.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import pickle
import re
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import scipy.signal
import scipy.stats
import torch

import autoconvert as ac
from autoconvert._conversions import _result_methods

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
    """A converted result pickles as its own type; its methods still take and give tensors."""
    result = pickle.loads(pickle.dumps(stats.pearsonr(X, Y)))
    assert type(result) is type(scipy.stats.pearsonr(X.numpy(), Y.numpy()))
    assert isinstance(result.statistic, torch.Tensor)
    low = result.confidence_interval().low
    assert type(low) is torch.Tensor
    assert float(low) == pytest.approx(scipy.stats.pearsonr(X.numpy(), Y.numpy()).confidence_interval().low)


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


#: The three ways a SciPy function's result comes back: the decorator pair, returns_tensor
#: alone (the tensors reach SciPy as they are) and torchify.
VIEWS: dict[str, Callable[[Any], Any]] = {
    "pair": lambda f: ac.returns_tensor(ac.accepts_numpy(f)),
    "returns_tensor": ac.returns_tensor,
    "torchify": lambda f: getattr(ac.torchify(__import__(f.__module__, fromlist=["_"])), f.__name__),
}
POINTS = torch.tensor([0.2, 0.5, 0.9], dtype=torch.float64)


def _ecdf(f: Any) -> list[tuple[Any, Any]]:
    got, want = f(X), scipy.stats.ecdf(X.numpy())
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The confidence interval is undefined", RuntimeWarning)
        interval, wanted = got.cdf.confidence_interval(0.9), want.cdf.confidence_interval(0.9)
    return [
        (got.cdf.quantiles, want.cdf.quantiles),
        (got.sf.evaluate(POINTS), want.sf.evaluate(POINTS.numpy())),
        (got.cdf.evaluate(x=POINTS), want.cdf.evaluate(POINTS.numpy())),
        (interval.low.probabilities, wanted.low.probabilities),
        (interval.high.evaluate(POINTS), wanted.high.evaluate(POINTS.numpy())),
    ]


def _ttest(f: Any) -> list[tuple[Any, Any]]:
    got, want = f(X, Y), scipy.stats.ttest_ind(X.numpy(), Y.numpy())
    return [(got.df, want.df), (got.confidence_interval(0.9).low, want.confidence_interval(0.9).low)]


def _pearsonr(f: Any) -> list[tuple[Any, Any]]:
    got, want = f(X, Y), scipy.stats.pearsonr(X.numpy(), Y.numpy())
    return [(got.statistic, want.statistic), (got.confidence_interval().high, want.confidence_interval().high)]


def _linregress(f: Any) -> list[tuple[Any, Any]]:
    got, want = f(X, Y), scipy.stats.linregress(X.numpy(), Y.numpy())
    return [(got.slope, want.slope), (got.intercept_stderr, want.intercept_stderr)]


def _bootstrap(f: Any) -> list[tuple[Any, Any]]:
    got = f((X,), np.mean, n_resamples=30, random_state=0)
    want = scipy.stats.bootstrap((X.numpy(),), np.mean, n_resamples=30, random_state=0)
    return [(got.confidence_interval.low, want.confidence_interval.low), (got.standard_error, want.standard_error)]


def _minimize(f: Any) -> list[tuple[Any, Any]]:
    got = f(lambda v: float(((v - 3) ** 2).sum()), torch.zeros(2, dtype=torch.float64))
    want = scipy.optimize.minimize(lambda v: float(((v - 3) ** 2).sum()), np.zeros(2))
    return [(got.x, want.x), (got["jac"], want["jac"]), (got.hess_inv, want.hess_inv)]


RESULTS_WITH_METHODS = {
    scipy.stats.ecdf: _ecdf,
    scipy.stats.ttest_ind: _ttest,
    scipy.stats.pearsonr: _pearsonr,
    scipy.stats.linregress: _linregress,
    scipy.stats.bootstrap: _bootstrap,
    scipy.optimize.minimize: _minimize,
}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("function", list(RESULTS_WITH_METHODS), ids=lambda f: f.__name__)
def test_a_result_s_methods_take_and_give_tensors_on_every_route(view: str, function: Any) -> None:
    """``returns_tensor(accepts_numpy(scipy.stats.ecdf))(t).cdf.evaluate(x)`` gave an array and
    ``cdf.confidence_interval()`` raised torch's TypeError: the result side converted the
    fields of a dataclass with methods (an object, its private state among them), and its
    methods computed on tensors, where torchify proxied it. A result container's methods now
    run on the original result on every route, their tensor arguments crossing as arrays and
    their values coming back as tensors, so every value read off a result is a tensor equal
    to SciPy's, attributes and methods' alike."""
    with warnings.catch_warnings():
        if view == "returns_tensor":  # SciPy handed the tensors themselves: torch's own warning (NumPy 2)
            warnings.filterwarnings("ignore", "__array_wrap__ must accept context", DeprecationWarning)
        pairs = RESULTS_WITH_METHODS[function](VIEWS[view](function))
    for got, want in pairs:
        assert type(got) is torch.Tensor and got.dtype == torch.float64
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_a_result_method_s_tensor_argument_crosses_read_only_and_warns_of_its_gradient() -> None:
    """A result's method is handed the caller's tensors read-only (a write raises ReadOnlyError
    naming the method and the argument, the tensor unchanged) and a tensor that requires grad detached, with the grad
    warning naming the method and where the tensor was."""

    @dataclasses.dataclass
    class Scaled:
        scale: np.ndarray

        def apply(self, x: np.ndarray) -> np.ndarray:
            return x * self.scale

        def write(self, x: np.ndarray) -> None:
            x[0] = 0.0

    made = ac.returns_tensor(lambda: Scaled(np.array(2.0)))()
    assert type(made.scale) is torch.Tensor
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    with pytest.warns(ac.GradientWarning) as caught:
        assert torch.equal(made.apply(x), torch.full((2,), 2.0, dtype=torch.float64))
    assert str(caught[0].message) == (
        "test_a_result_method_s_tensor_argument_crosses_read_only_and_warns_of_its_gradient.<locals>.Scaled.apply(): "
        "argument args[0] requires grad, and NumPy code cannot pass gradients back: it was detached, so no gradient "
        "flows through this call. To keep the gradient, keep the computation in torch, or make the NumPy code a "
        "differentiable torch operation with ac.numpy_op(fn, backward=...). To silence this, pass grad='detach' (in "
        "a with ac.config(grad='detach'): block around the method call; grad='error' forbids it), or call under "
        "torch.no_grad()"
    )  # returns_tensor alone: nothing takes grad= but a config block
    plain = torch.ones(2)
    refused = (
        "test_a_result_method_s_tensor_argument_crosses_read_only_and_warns_of_its_gradient.<locals>.Scaled.write(): "
        "argument args[0] was written into by the method; arrays made from a result method's tensor arguments are "
        "read-only so that NumPy code never changes the caller's tensors behind its back. Found "
        "ValueError('assignment destination is read-only'). Fix: pass a writable private copy in its place, "
        "ac.to_numpy(args[0], copy=True) (the method's writes then stay in that array)."
    )
    assert raised(ac.ReadOnlyError, made.write, plain) == refused
    assert raised(ac.ReadOnlyError, lambda: made.write(x=plain)) == refused.replace("args[0]", "kwargs['x']")
    assert torch.equal(plain, torch.ones(2))
    written = made.write(ac.to_numpy(plain, copy=True))  # the fix: a writable copy, the caller's tensor kept
    assert written is None and torch.equal(plain, torch.ones(2))


# --------------------------------------------------------------------------- what the caller sets on a result

Q = np.linspace(0.0, 1.0, len(X))  # quantiles in place of ecdf(X)'s


def _set_quantiles(r: Any, kind: Callable[[Any], Any]) -> None:
    r.cdf.quantiles = kind(Q)


def _del_quantiles(r: Any, kind: Callable[[Any], Any]) -> None:
    del r.cdf.quantiles


def _set_df(r: Any, kind: Callable[[Any], Any]) -> None:
    r.df = kind(np.float64(2.0))


def _del_df(r: Any, kind: Callable[[Any], Any]) -> None:
    del r.__dict__["df"]  # a tuple bunch's extra is a property without a deleter: its __dict__ holds it


def _add_note(r: Any, kind: Callable[[Any], Any]) -> None:
    r.note = kind(np.ones(2))


def _set_x_item(r: Any, kind: Callable[[Any], Any]) -> None:
    r["x"] = kind(np.array([1.0, -1.0]))


def _set_x_attribute(r: Any, kind: Callable[[Any], Any]) -> None:
    r.x = kind(np.array([1.0, -1.0]))


def _set_standard_error(r: Any, kind: Callable[[Any], Any]) -> None:
    r.standard_error = kind(np.float64(0.5))


def _set_intercept_stderr(r: Any, kind: Callable[[Any], Any]) -> None:
    r.intercept_stderr = kind(np.float64(0.5))


def _squared(v: Any) -> Any:
    return float(((v - 3) ** 2).sum())


#: SciPy's result types, each with a change its caller makes (a field reassigned, an item
#: set, a field deleted, one added) and what is read after it, through the result's methods
#: where it has them: (call, change, read).
CHANGES: dict[str, tuple[Callable[[Any, bool], Any], Callable[..., None], Callable[[Any], Any]]] = {
    "ECDFResult reassigned": (
        lambda f, t: f(scipy.stats.ecdf)(X if t else X.numpy()),
        _set_quantiles,
        lambda r: r.cdf.confidence_interval(0.9).low.quantiles,
    ),
    "ECDFResult deleted": (
        lambda f, t: f(scipy.stats.ecdf)(X if t else X.numpy()),
        _del_quantiles,
        lambda r: r.cdf.confidence_interval(0.9).low.quantiles,
    ),
    "TtestResult reassigned": (
        lambda f, t: f(scipy.stats.ttest_ind)(*((X, Y) if t else (X.numpy(), Y.numpy()))),
        _set_df,
        lambda r: r.confidence_interval(0.9).low,
    ),
    "TtestResult deleted": (
        lambda f, t: f(scipy.stats.ttest_ind)(*((X, Y) if t else (X.numpy(), Y.numpy()))),
        _del_df,
        lambda r: r.confidence_interval(0.9).low,
    ),
    "PearsonRResult added": (
        lambda f, t: f(scipy.stats.pearsonr)(*((X, Y) if t else (X.numpy(), Y.numpy()))),
        _add_note,
        lambda r: (r.confidence_interval(0.9).low, r.note),
    ),
    "OptimizeResult item set": (
        lambda f, t: f(scipy.optimize.minimize)(_squared, torch.zeros(2, dtype=torch.float64) if t else np.zeros(2)),
        _set_x_item,
        lambda r: (r.x, r["x"], r.fun),
    ),
    "OptimizeResult attribute set": (
        lambda f, t: f(scipy.optimize.minimize)(_squared, torch.zeros(2, dtype=torch.float64) if t else np.zeros(2)),
        _set_x_attribute,
        lambda r: (r.x, r["x"], r.fun),
    ),
    "BootstrapResult reassigned": (
        lambda f, t: f(scipy.stats.bootstrap)((X if t else X.numpy(),), np.mean, n_resamples=30, random_state=0),
        _set_standard_error,
        lambda r: (r.standard_error, r.confidence_interval.low),
    ),
    "LinregressResult reassigned": (
        lambda f, t: f(scipy.stats.linregress)(*((X, Y) if t else (X.numpy(), Y.numpy()))),
        _set_intercept_stderr,
        lambda r: (r.slope, r.intercept_stderr),
    ),
}


def _outcome(read: Callable[[Any], Any], result: Any) -> Any:
    """What ``read`` gives, as arrays, or the exception it raised as (type, message)."""
    try:
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "The confidence interval is undefined", RuntimeWarning)
            got = read(result)
    except Exception as e:
        return type(e), str(e)
    return [ac.to_numpy(v) for v in (got if isinstance(got, tuple) else (got,))]


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_result_s_methods_see_what_its_caller_set_on_it(view: str, change: str) -> None:
    """``r.df = t; r.confidence_interval()`` computed from the df SciPy returned: a result's
    methods ran on the original result, and a field the caller reassigned there was never seen
    (an in-place change was, through shared memory). On every route the converted result now
    behaves as SciPy's own after the same change: a field reassigned or added is converted
    back when a method is called, one deleted is missing there too (the same error as
    SciPy's), and a result without methods keeps what was set."""
    call, make_change, read = CHANGES[change]
    plain = call(lambda f: f, False)
    make_change(plain, lambda a: a)
    with warnings.catch_warnings():
        if view == "returns_tensor":  # SciPy handed the tensors themselves: torch's own warning (NumPy 2)
            warnings.filterwarnings("ignore", "__array_wrap__ must accept context", DeprecationWarning)
        converted = call(VIEWS[view], True)
        make_change(converted, torch.as_tensor)
        got, want = _outcome(read, converted), _outcome(read, plain)
    if isinstance(want, tuple):
        assert got == want
        return
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@dataclasses.dataclass
class Model:
    """Torch code's fitted result, with a method of its own."""

    w: torch.Tensor
    seen: list[Any] = dataclasses.field(default_factory=list)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(self)
        return x @ self.w


@dataclasses.dataclass(frozen=True)
class FrozenModel:
    w: torch.Tensor

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


class Bunch(tuple[torch.Tensor]):
    """A tuple with a named field and an extra attribute in its __dict__, as SciPy's bunches."""

    _fields = ("w",)

    def __new__(cls, w: torch.Tensor, **extras: Any) -> Bunch:
        new = super().__new__(cls, (w,))
        new.__dict__.update(extras)
        return new

    def __getnewargs_ex__(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return tuple(self), self.__dict__  # SciPy's bunches pickle so

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self[0] + self.bias


def _reassign(r: Any, value: np.ndarray) -> None:
    r.w = value


def _reassign_frozen(r: Any, value: np.ndarray) -> None:
    object.__setattr__(r, "w", value)  # the caller gets past frozen as dataclasses.replace() would not


def _reassign_extra(r: Any, value: np.ndarray) -> None:
    r.bias = value - 1.0


REVERSE_VIEWS: dict[str, Callable[[Any], Any]] = {
    "pair": lambda f: ac.returns_numpy(ac.accepts_tensor(f)),
    "returns_numpy": lambda f: ac.returns_numpy(lambda w: f(torch.as_tensor(w))),
}
#: Torch code's results with methods: (make from the weights, the caller's change, predict's value after it).
TORCH_RESULTS: dict[str, tuple[Callable[[torch.Tensor], Any], Callable[[Any, np.ndarray], None], list[float]]] = {
    "dataclass": (lambda w: Model(w), _reassign, [1.0]),
    "frozen dataclass": (lambda w: FrozenModel(w), _reassign_frozen, [1.0]),
    "tuple bunch": (lambda w: Bunch(w, bias=torch.zeros((), dtype=torch.float64)), _reassign_extra, [2.0, 3.0]),
}


@pytest.mark.parametrize("view", list(REVERSE_VIEWS))
@pytest.mark.parametrize("kind", list(TORCH_RESULTS))
def test_a_torch_result_s_methods_see_what_its_numpy_caller_set_on_it(view: str, kind: str) -> None:
    """The reverse direction: ``m.w = a; m.predict(x)`` used the tensor torch code returned.
    The method now runs on the caller's array, as a tensor; the original result is never
    changed by it; a call after nothing changed runs on the original itself."""
    make, reassign, changed = TORCH_RESULTS[kind]
    made: list[Any] = []
    m = REVERSE_VIEWS[view](lambda w: made.append(make(w)) or made[-1])(np.array([1.0, 2.0]))
    x = np.ones((1, 2))
    assert m.predict(x).tolist() == [3.0]
    reassign(m, np.array([0.0, 1.0]))
    assert m.predict(x).tolist() == changed
    assert m.predict(x).tolist() == changed  # and on the next call
    assert made[0].predict(torch.ones(1, 2, dtype=torch.float64)).tolist() == [3.0]  # the function's own, unchanged


def test_an_untouched_result_s_methods_run_on_the_original_and_a_deleted_field_is_missing() -> None:
    """Until the caller changes an attribute, the original is what the method runs on; a
    field deleted is missing there too (the dataclass's own AttributeError); set again, it is
    seen. What the method appends to its list reaches the caller's as the caller's twin of it."""
    made: list[Model] = []
    m = ac.returns_numpy(ac.accepts_tensor(lambda w: made.append(Model(w)) or made[-1]))(np.array([1.0, 2.0]))
    m.predict(np.ones((1, 2)))
    assert made[0].seen[-1] is made[0] and [s is m for s in m.seen] == [True]
    del m.w
    assert raised(AttributeError, m.predict, np.ones((1, 2))) == "'Model' object has no attribute 'w'"
    m.w = np.array([2.0, 0.0])
    assert m.predict(np.ones((1, 2))).tolist() == [2.0]
    # the function's own unchanged: the twin the methods run on holds a list of its own where
    # the original's held the original
    assert [s is made[0] for s in made[0].seen] == [True] and made[0].w.tolist() == [1.0, 2.0]
    assert [s is m for s in m.seen] == [True] * 3  # the call that raised appended too, as on the plain object


def test_a_field_set_to_what_cannot_cross_is_autoconverts_error_naming_the_field() -> None:
    """A value the caller set is converted at the method call with the arguments' rules: one
    that cannot cross raises autoconvert's error naming the method and ``self.<field>``,
    either way; the result keeps working once the field holds what can cross."""
    m = ac.returns_numpy(ac.accepts_tensor(lambda w: Model(w)))(np.array([1.0, 2.0]))
    m.w = np.array(["a", "b"])
    assert raised(ac.ConversionError, m.predict, np.ones((1, 2))) == (
        "Model.predict(): field self.w holds strings, which torch cannot hold. Found numpy.ndarray(shape=(2,), "
        "dtype=<U1). Fix: use a list of str, or integer codes."
    )
    m.w = np.array([1.0, 1.0])
    assert m.predict(np.ones((1, 2))).tolist() == [2.0]
    t = ac.returns_tensor(ac.accepts_numpy(scipy.stats.ttest_ind))(X, Y)
    t.df = torch.ones(2).to_sparse()
    assert raised(ac.ConversionError, t.confidence_interval) == (
        "TtestResult.confidence_interval(): field self.df is a 1-d sparse tensor with 0 dense dimension(s); "
        "scipy.sparse holds 2-d matrices. Found torch.Tensor(shape=(2,), dtype=torch.float32, "
        "layout=torch.sparse_coo, device=cpu). Fix: self.df.to_dense(), or a 2-d sparse tensor where the function "
        "takes scipy.sparse matrices."
    )


def test_a_field_set_to_a_tensor_that_requires_grad_is_detached_with_the_warning_naming_it() -> None:
    """The gradient rule of a result method's arguments holds for the fields the caller sets:
    detached, said once, naming the field."""
    t = stats.ttest_ind(X, Y)
    t.df = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    with pytest.warns(ac.GradientWarning) as caught:
        low = t.confidence_interval(0.9).low
    assert [str(w.message) for w in caught] == [
        "TtestResult.confidence_interval(): field self.df requires grad, and NumPy code cannot pass gradients back: "
        "it was detached, so no gradient flows through this call. To keep the gradient, keep the computation in "
        "torch, or make the NumPy code a differentiable torch operation with ac.numpy_op(fn, backward=...). To "
        "silence this, pass grad='detach' (in the ac.torchify(..., grad='detach') call that made it, for its results' "
        "methods too, or a with ac.config(grad='detach'): block around the method call; grad='error' forbids it), or "
        "call under torch.no_grad()"
    ]
    plain = scipy.stats.ttest_ind(X.numpy(), Y.numpy())
    plain.df = 2.0
    assert type(low) is torch.Tensor and float(low) == pytest.approx(plain.confidence_interval(0.9).low)


# torch 2.4 and 2.5 warn from their own unpickler (torch.storage) for every tensor pickle.loads() meets.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("view", list(REVERSE_VIEWS))
@pytest.mark.parametrize("kind", list(TORCH_RESULTS))
def test_an_unpickled_torch_result_s_methods_still_take_arrays_and_see_its_fields(view: str, kind: str) -> None:
    """``pickle.loads(pickle.dumps(m)).predict(a)`` raised torch's TypeError: a result's methods
    pickled as the original's, which take tensors. They now pickle as themselves: arrays in and
    out, and a field the caller set before pickling, or after, is what they see."""
    make, reassign, changed = TORCH_RESULTS[kind]
    m = REVERSE_VIEWS[view](make)(np.array([1.0, 2.0]))
    x = np.ones((1, 2))
    again = pickle.loads(pickle.dumps(m))
    assert type(again.predict(x)) is np.ndarray and again.predict(x).tolist() == [3.0]
    reassign(m, np.array([0.0, 1.0]))
    assert pickle.loads(pickle.dumps(m)).predict(x).tolist() == changed
    if kind != "tuple bunch":  # a bunch unpickles apart from its methods' view of it (see ResultFields)
        reassign(again, np.array([0.0, 1.0]))
        assert again.predict(x).tolist() == changed


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("view", list(VIEWS))
def test_an_unpickled_scipy_result_s_methods_still_take_and_give_tensors(view: str) -> None:
    """Forward too: an unpickled ``ecdf`` result's methods gave arrays (the original's
    methods); they now give tensors, and see a field set after unpickling."""
    with warnings.catch_warnings():
        if view == "returns_tensor":  # SciPy handed the tensors themselves: torch's own warning (NumPy 2)
            warnings.filterwarnings("ignore", "__array_wrap__ must accept context", DeprecationWarning)
        cdf = pickle.loads(pickle.dumps(VIEWS[view](scipy.stats.ecdf)(X))).cdf
    assert torch.equal(cdf.evaluate(POINTS), torch.from_numpy(scipy.stats.ecdf(X.numpy()).cdf.evaluate(POINTS.numpy())))
    cdf.quantiles = torch.from_numpy(Q)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The confidence interval is undefined", RuntimeWarning)
        assert torch.equal(cdf.confidence_interval(0.9).low.quantiles, torch.from_numpy(Q))


@dataclasses.dataclass
class Weights:
    """NumPy code's fitted result, with a method of its own."""

    w: np.ndarray

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x @ self.w)


def _weighted(w: np.ndarray) -> Weights:
    return Weights(np.asarray(w, dtype=np.float64) * 1.0)


class _Pair(NamedTuple):
    w: np.ndarray
    b: np.ndarray


class Pair(_Pair):
    """A named tuple with a method of its own: its fields are the tuple's items."""

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x @ self.w + self.b)


def _paired(w: np.ndarray) -> Pair:
    return Pair(np.asarray(w, dtype=np.float64) * 1.0, np.zeros(()))


# torch 2.4 and 2.5 warn from their own unpickler (torch.storage) for every tensor pickle.loads() meets.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("pickled", [False, True], ids=["held", "unpickled"])
@pytest.mark.parametrize(
    "make",
    [
        lambda: ac.returns_tensor(ac.accepts_numpy(_weighted))(torch.tensor([1.0, 2.0], dtype=torch.float64)),
        lambda: ac.returns_tensor(ac.accepts_numpy(_weighted), copy=True)(
            torch.tensor([1.0, 2.0], dtype=torch.float64)
        ),
        lambda: ac.returns_tensor(ac.accepts_numpy(_weighted), dtype=torch.float32)(torch.tensor([1.0, 2.0])),
        lambda: ac.returns_tensor(ac.accepts_numpy(_paired), copy=True)(torch.tensor([1.0, 2.0], dtype=torch.float64)),
        lambda: ac.returns_numpy(ac.accepts_tensor(lambda w: Model(w)))(np.array([1.0, 2.0])),
        lambda: ac.returns_numpy(ac.accepts_tensor(lambda w: Model(w)), copy=True)(np.array([1.0, 2.0])),
    ],
    ids=["shared", "copy=True", "dtype=float32", "named tuple copy=True", "reverse", "reverse copy=True"],
)
def test_an_in_place_change_to_a_field_is_seen_by_the_methods(make: Callable[[], Any], pickled: bool) -> None:
    """``m.w[0] = 7; m.predict(x)`` was seen only where the field shared the original's memory:
    a field copied (``copy=True``, a dtype cast) or unpickled (the two no longer share it) kept
    the value the function returned. Such fields are now converted back at every call."""
    m = make()
    if pickled:
        m = pickle.loads(pickle.dumps(m))
    m.w[0] = 7.0
    x = np.ones((1, 2)) if isinstance(m.w, np.ndarray) else torch.ones(1, 2, dtype=m.w.dtype)
    assert m.predict(x).tolist() == [9.0]


def test_a_result_with_methods_is_freed_when_its_last_reference_goes() -> None:
    """Its methods follow its fields without a reference cycle: its tensors are freed as soon
    as the caller drops it, not when the garbage collector next runs (GPU memory with them)."""
    gc.disable()
    try:
        result = ac.returns_tensor(ac.accepts_numpy(scipy.stats.ecdf))(X)
        result.cdf.quantiles = torch.from_numpy(Q)
        result.cdf.evaluate(POINTS)  # the caller's field converted back, held by the twin
        quantiles, probabilities = weakref.ref(result.cdf.quantiles), weakref.ref(result.cdf.probabilities)
        del result
        assert quantiles() is None and probabilities() is None
    finally:
        gc.enable()


#: Where a result method's grad= goes, in its messages: what made the function, and a config
#: block around the method call unless grad= was given there.
_DECORATOR_SITE = "@ac.accepts_numpy(grad='detach') on _weighted, for its results' methods too"
_TORCHIFY_SITE = "the ac.torchify(..., grad='detach') call that made it, for its results' methods too"
_METHOD_BLOCK = "a with ac.config(grad='detach'): block around the method call"
GRAD_REFUSAL = (
    "Weights.predict(): argument args[0] requires grad, and NumPy code cannot pass gradients back. Found "
    "torch.Tensor(shape=(1, 2), dtype=torch.float64, layout=torch.strided, device=cpu). Fix: pass args[0].detach(), "
    "call under torch.no_grad(), or allow it detached with grad='detach' (in {site}; "
    "grad='warn' says so once); to keep the gradient, keep the computation in torch, or make the NumPy code a "
    "differentiable torch operation with ac.numpy_op(fn, backward=...)."
)
GRAD_WARNING = (
    "Weights.predict(): argument args[0] requires grad, and NumPy code cannot pass gradients back: it was detached, "
    "so no gradient flows through this call. To keep the gradient, keep the computation in torch, or make the NumPy "
    "code a differentiable torch operation with ac.numpy_op(fn, backward=...). To silence this, pass grad='detach' "
    "(in {site}; grad='error' forbids it), or call under torch.no_grad()"
)


@pytest.mark.parametrize(
    ("made", "around_method", "outcome"),
    [
        ({"grad": "error"}, None, "error"),
        ({"grad": "detach"}, None, "quiet"),
        ({"grad": "warn"}, None, "warning"),
        ({}, "error", "error"),  # a block around the method call
        ({}, "detach", "quiet"),
        ({"grad": "warn"}, "detach", "warning"),  # given explicitly: no block changes it
        ({"block": "error"}, None, "error"),  # a block around the call that made the result
        ({"block": "error"}, "detach", "quiet"),  # the block around the method call wins
        ({"torchify": "error"}, None, "error"),
        ({"torchify": "detach"}, None, "quiet"),
    ],
)
def test_a_result_s_methods_follow_the_grad_policy_of_the_call_that_made_it(
    made: dict[str, str], around_method: str | None, outcome: str
) -> None:
    """A result's method warned and detached a tensor that requires grad whatever grad= the
    decorator, torchify or a config block said: grad="error" did not refuse, "detach" still
    warned. The method now follows the policy of the call that made the result, a config block
    around the method call over it unless grad= was given explicitly."""
    w = torch.tensor([1.0, 2.0], dtype=torch.float64)
    if "torchify" in made:
        result = ac.torchify(_weighted, grad=made["torchify"])(w)
    elif "block" in made:
        with ac.config(grad=made["block"]):
            result = ac.returns_tensor(ac.accepts_numpy(_weighted))(w)
    else:
        result = ac.returns_tensor(ac.accepts_numpy(_weighted, **made))(w)
    x = torch.ones(1, 2, dtype=torch.float64, requires_grad=True)

    def call() -> Any:
        if around_method is None:
            return result.predict(x)
        with ac.config(grad=around_method):
            return result.predict(x)

    maker = _TORCHIFY_SITE if "torchify" in made else _DECORATOR_SITE
    given = made.get("grad", made.get("torchify"))
    site = (
        f"{maker}, where grad={given!r} was given, so a config block cannot change it"
        if given is not None
        else f"{maker}, or {_METHOD_BLOCK}"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if outcome == "error":
            assert raised(ac.GradientError, call) == GRAD_REFUSAL.format(site=site)
        else:
            assert call().tolist() == [3.0]
    assert [str(w.message) for w in caught] == ([GRAD_WARNING.format(site=site)] if outcome == "warning" else [])


def test_a_field_set_to_a_tensor_that_requires_grad_follows_the_grad_policy() -> None:
    """The rule holds for the fields the caller sets: refused under grad="error", naming the field."""
    result = ac.returns_tensor(ac.accepts_numpy(_weighted, grad="error"))(torch.tensor([1.0, 2.0], dtype=torch.float64))
    result.w = torch.ones(2, dtype=torch.float64, requires_grad=True)
    site = f"{_DECORATOR_SITE}, where grad='error' was given, so a config block cannot change it"
    assert raised(ac.GradientError, result.predict, torch.ones(1, 2, dtype=torch.float64)) == (
        GRAD_REFUSAL.format(site=site)
        .replace("argument args[0]", "field self.w")
        .replace("shape=(1, 2)", "shape=(2,)")
        .replace("pass args[0]", "pass self.w")
    )


@dataclasses.dataclass
class Running:
    """A result whose methods change it, one returning itself (a fluent interface)."""

    total: Any
    n: int = 0

    def add(self, x: Any) -> Any:
        self.total = self.total + x
        self.n += 1
        return self.total

    def with_n(self, n: int) -> Running:
        self.n = n
        return self


@pytest.mark.parametrize(
    ("view", "kind"),
    [
        (lambda f: ac.returns_tensor(ac.accepts_numpy(f)), torch.Tensor),
        (lambda f: ac.returns_tensor(lambda x: f(ac.to_numpy(x))), torch.Tensor),
        (ac.torchify, torch.Tensor),
        (lambda f: ac.returns_numpy(ac.accepts_tensor(f)), np.ndarray),
    ],
    ids=["pair", "returns_tensor", "torchify", "reverse pair"],
)
def test_a_method_that_changes_its_result_changes_the_caller_s_result(view: Callable[[Any], Any], kind: type) -> None:
    """``r.add(x)`` (``self.n += 1``) left the converted result unchanged, and ``r.with_n(5)``
    (``return self``) gave a new object: the method ran on the original or a copy of it. What a
    method changes is now carried to the caller's result, converted as its fields were, and a
    method returning the object it ran on returns the caller's result, as the plain object does."""
    r = view(lambda x: Running(x * 1.0))(torch.ones(2, dtype=torch.float64) if kind is torch.Tensor else np.ones(2))
    one = torch.ones(2, dtype=torch.float64) if kind is torch.Tensor else np.ones(2)
    added = r.add(one)
    assert type(added) is kind and type(r.total) is kind and r.total.tolist() == [2.0, 2.0] and r.n == 1
    r.total = r.total * 0.0  # the caller's change and the method's, one after the other
    r.add(one)
    assert type(r.total) is kind and r.total.tolist() == [1.0, 1.0] and r.n == 2
    assert r.with_n(5) is r and r.n == 5


@dataclasses.dataclass
class Checked:
    """A result whose method changes it before refusing, and a static method."""

    total: Any
    n: int = 0

    def fail(self) -> None:
        self.n += 1
        raise KeyError("refused")

    @staticmethod
    def halved(x: Any) -> Any:
        return x / 2


_ROUTES = pytest.mark.parametrize(
    ("view", "kind"),
    [
        (lambda f: ac.returns_tensor(ac.accepts_numpy(f)), torch.Tensor),
        (ac.torchify, torch.Tensor),
        (lambda f: ac.returns_numpy(ac.accepts_tensor(f)), np.ndarray),
    ],
    ids=["pair", "torchify", "reverse pair"],
)


@_ROUTES
def test_what_a_method_changed_before_raising_stays_on_the_caller_s_result(
    view: Callable[[Any], Any], kind: type
) -> None:
    """The plain object keeps what a method changed before it raised; so does the caller's result."""
    r = view(lambda x: Checked(x * 1.0))(torch.ones(2, dtype=torch.float64) if kind is torch.Tensor else np.ones(2))
    with pytest.raises(KeyError, match="refused"):
        r.fail()
    assert r.n == 1


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@_ROUTES
def test_a_result_with_a_static_method_copies_and_pickles(view: Callable[[Any], Any], kind: type) -> None:
    """A static method binds no object: copying or pickling the result raised AttributeError
    ("'function' object has no attribute '__self__'")."""
    r = view(lambda x: Checked(x * 1.0))(torch.ones(2, dtype=torch.float64) if kind is torch.Tensor else np.ones(2))
    two = torch.full((2,), 2.0, dtype=torch.float64) if kind is torch.Tensor else np.full(2, 2.0)
    for again in (copy.deepcopy(r), pickle.loads(pickle.dumps(r)), copy.copy(r)):
        assert type(again.total) is kind and again.halved(two).tolist() == [1.0, 1.0]


def _doubled(self: Any) -> Any:
    return self.total * 2


@dataclasses.dataclass
class Aliased:
    """A result whose methods are held under other names than their ``__name__``."""

    total: Any

    def _scaled(self, k: float) -> Any:
        return self.total * k

    scaled = _scaled


Aliased.doubled = _doubled  # type: ignore[attr-defined]


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@_ROUTES
def test_a_result_whose_method_is_held_under_another_name_copies_and_pickles(
    view: Callable[[Any], Any], kind: type
) -> None:
    """A method held under another name than its ``__name__`` (``scaled = _scaled``, a function
    set on the class) made ``copy.deepcopy`` and pickle raise AttributeError ("'Aliased' object has
    no attribute '_doubled'"), and so a call after the caller set a field: the method was looked up
    by its ``__name__``. It is looked up by the attribute's name."""
    one = torch.ones(2, dtype=torch.float64) if kind is torch.Tensor else np.ones(2)
    r = view(lambda x: Aliased(x * 1.0))(one)
    for again in (r, copy.deepcopy(r), pickle.loads(pickle.dumps(r)), copy.copy(r)):
        assert type(again.total) is kind and again.scaled(3.0).tolist() == [3.0, 3.0]
        assert again.doubled().tolist() == [2.0, 2.0]
        again.total = again.total * 0 + 5
        assert again.scaled(1.0).tolist() == [5.0, 5.0] and again.doubled().tolist() == [10.0, 10.0]


@dataclasses.dataclass
class Streaming:
    """A result whose method is a generator."""

    w: Any

    def each(self, xs: list[Any]) -> Any:
        for x in xs:
            yield x * self.w


@_ROUTES
def test_a_result_s_generator_method_yields_in_the_caller_s_kind(view: Callable[[Any], Any], kind: type) -> None:
    """A generator method raised the library's internal signal (an empty YieldsLater): its
    items now come converted as it yields them, as a decorated generator function's do."""
    one = torch.ones(2, dtype=torch.float64) if kind is torch.Tensor else np.ones(2)
    r = view(lambda x: Streaming(x * 3.0))(one)
    items = list(r.each([one, one * 2]))
    assert [type(i) for i in items] == [kind, kind] and [i.tolist() for i in items] == [[3.0, 3.0], [6.0, 6.0]]


@dataclasses.dataclass
class Outer:
    """A result holding a result with methods, which its own method calls."""

    inner: Weights
    k: float

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.inner.predict(x) * self.k


def _nested(w: np.ndarray) -> Outer:
    return Outer(_weighted(w), 3.0)


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("pickled", [False, True], ids=["held", "unpickled"])
@pytest.mark.parametrize("options", [{}, {"copy": True}, {"dtype": torch.float32}], ids=["shared", "copy", "float32"])
@pytest.mark.parametrize("how", ["reassigned", "in place"])
def test_a_change_to_a_nested_result_is_seen_by_the_outer_result_s_methods(
    how: str, options: dict[str, Any], pickled: bool
) -> None:
    """``r.inner.w = t; r.predict(x)`` (``self.inner.predict``) used the function's inner
    result: only the outer result's own attributes were looked at. A result held in an
    attribute of a result with methods is now followed too, at any depth: what its caller
    changed there, reassigned or in place, is what the outer method sees."""
    dtype = options.get("dtype", torch.float64)
    r = ac.returns_tensor(ac.accepts_numpy(_nested), **options)(torch.tensor([1.0, 2.0], dtype=dtype))
    if pickled:
        r = pickle.loads(pickle.dumps(r))
    x = torch.ones(1, 2, dtype=dtype)
    assert r.predict(x).tolist() == [9.0]
    if how == "reassigned":
        r.inner.w = torch.tensor([10.0, 10.0], dtype=dtype)
    else:
        r.inner.w[0] = 10.0
    want = [60.0] if how == "reassigned" else [36.0]
    assert r.predict(x).tolist() == want and r.predict(x).tolist() == want  # and on the next call
    assert r.inner.predict(x).tolist() == [want[0] / 3.0]


@pytest.mark.parametrize("changed_first", [False, True], ids=["untouched", "changed first"])
@pytest.mark.parametrize(
    ("make", "change", "read", "want"),
    [
        (
            lambda: ac.returns_tensor(ac.accepts_numpy(_weighted))(torch.tensor([1.0, 2.0], dtype=torch.float64)),
            lambda r, v: setattr(r, "w", torch.full((2,), v, dtype=torch.float64)),
            lambda r: r.predict(torch.ones(1, 2, dtype=torch.float64)).tolist(),
            lambda v: [2 * v],
        ),
        (
            lambda: ac.torchify(scipy.stats).ttest_1samp(X, 0.5),
            lambda r, v: setattr(r, "df", v),
            lambda r: float(r.confidence_interval(0.8).low),
            lambda v: _plain_ttest_low(v),
        ),
        (
            lambda: ac.returns_numpy(ac.accepts_tensor(lambda w: Model(w)))(np.array([1.0, 2.0])),
            lambda r, v: setattr(r, "w", np.full(2, v)),
            lambda r: r.predict(np.ones((1, 2))).tolist(),
            lambda v: [2 * v],
        ),
    ],
    ids=["pair dataclass", "torchify TtestResult", "reverse pair dataclass"],
)
def test_a_shallow_copy_s_methods_see_what_is_set_on_the_copy(
    make: Callable[[], Any],
    change: Callable[[Any, float], None],
    read: Callable[[Any], Any],
    want: Callable[[float], Any],
    changed_first: bool,
) -> None:
    """``m = copy.copy(r); m.w = t; m.predict(x)`` used the value the function returned: the copy
    shared its methods with ``r``, which follow ``r``. A shallow copy now gets methods of its
    own: each sees what is set on it, and neither sees the other's change."""
    r = make()
    if changed_first:
        change(r, 3.0)
    m = copy.copy(r)
    change(m, 10.0)
    assert read(m) == pytest.approx(want(10.0))
    if changed_first:
        assert read(r) == pytest.approx(want(3.0))
    again = copy.copy(m)
    change(again, 20.0)
    assert read(again) == pytest.approx(want(20.0)) and read(m) == pytest.approx(want(10.0))


@dataclasses.dataclass
class Counted:
    """A result whose methods set attributes of their own on it."""

    w: Any
    n: int = 0
    kept: Any = None

    def count(self) -> int:
        self.n += 1
        return self.n

    def keep(self) -> None:
        self.kept = self.w

    def seen(self) -> tuple[int, bool]:
        return self.n, self.kept is None


@pytest.mark.parametrize(
    "decorate",
    [
        lambda f: ac.returns_tensor(ac.accepts_numpy(f))(torch.ones(2, dtype=torch.float64)),
        lambda f: ac.returns_tensor(ac.accepts_numpy(f))(torch.ones(2, dtype=torch.bfloat16)),
        lambda f: ac.torchify(f)(torch.ones(2)),
        lambda f: ac.returns_numpy(ac.accepts_tensor(f))(np.ones(2)),
    ],
    ids=["pair", "bfloat16 pair", "torchify", "reverse pair"],
)
def test_what_a_shallow_copy_s_method_sets_is_not_its_source_s(decorate: Callable[[Any], Any]) -> None:
    """``r1 = copy.copy(r0); r0.count()``: r1's methods saw ``n`` set by r0's, which its caller's
    ``r1.n`` never showed, and r1's own ``keep()`` never reached r1's caller. Each runs on an
    object of its own, as two shallow copies of the plain object do."""
    r0 = decorate(lambda w: Counted(w * 1))
    r1 = copy.copy(r0)
    assert r0.count() == 1 and r0.n == 1
    assert r1.seen() == (0, True) and r1.n == 0
    r1.keep()
    assert r1.kept is r1.w and r0.kept is None and r0.seen() == (1, True)
    assert r1.count() == 1 and r0.count() == 2


def _plain_ttest_low(df: float) -> float:
    plain = copy.copy(scipy.stats.ttest_1samp(X.numpy(), 0.5))
    plain.df = df
    return float(plain.confidence_interval(0.8).low)


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("kind", list(TORCH_RESULTS))
def test_a_result_copied_or_pickled_again_keeps_methods_of_its_own(kind: str) -> None:
    """What gives a shallow copy methods of its own is left out of pickles and deep copies: an
    unpickled or deep-copied result pickles and copies again, and a shallow copy of it follows
    the copy."""
    make, reassign, changed = TORCH_RESULTS[kind]
    m = ac.returns_numpy(ac.accepts_tensor(make))(np.array([1.0, 2.0]))
    x = np.ones((1, 2))
    for again in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        twice = pickle.loads(pickle.dumps(again))
        assert twice.predict(x).tolist() == [3.0] and copy.deepcopy(again).predict(x).tolist() == [3.0]
        if kind != "tuple bunch":  # a bunch unpickles apart from its methods' view of it (see ResultFields)
            shallow = copy.copy(again)
            reassign(shallow, np.array([0.0, 1.0]))
            assert shallow.predict(x).tolist() == changed and again.predict(x).tolist() == [3.0]


@dataclasses.dataclass
class Record:
    """A dataclass with no methods: converted as a record, inside a result with methods."""

    w: Any


@dataclasses.dataclass
class Scaled:
    """A result with methods of its own, inside a result with methods."""

    w: Any

    def read(self) -> Any:
        return self.w


@dataclasses.dataclass
class Holder:
    """A result whose method changes its field as it is told (``change(self, x)``); ``w``
    makes it a converted result whatever the field holds."""

    field: Any
    w: Any

    def apply(self, change: Callable[[Any, Any], None], x: Any) -> None:
        change(self, x)

    def read(self) -> Any:
        return self.field

    def leaves(self) -> list[str]:
        """The arrays the field holds, as the method sees them: kind and values."""
        return [f"{type(a).__name__}{a.tolist()}" for a in _held_arrays(self.field)]


def _held_arrays(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _held_arrays(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _held_arrays(item)]
    return _held_arrays(value.w) if dataclasses.is_dataclass(value) else [value]


#: Field kinds: what the result is made with from an array ``a``, and a fresh one to reassign.
FIELD_KINDS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "array": (lambda a: a * 1.0, lambda a: a * 2),
    "list of arrays": (lambda a: [a * 1.0], lambda a: [a * 2]),
    "empty list": (lambda a: [], lambda a: [a * 2]),
    "dict": (lambda a: {"a": a * 1.0}, lambda a: {"b": a * 2}),
    "dataclass": (lambda a: Record(a * 1.0), lambda a: Record(a * 2)),
    "result with methods": (lambda a: Scaled(a * 1.0), lambda a: Scaled(a * 2)),
}


def _grow(h: Holder, x: Any) -> None:
    """An item added, or an attribute of the object held reassigned."""
    if isinstance(h.field, list):
        h.field.append(x * 2)
    elif isinstance(h.field, dict):
        h.field["b"] = x * 2
    else:
        h.field.w = x * 2


def _set_item(h: Holder, x: Any) -> None:
    """An item replaced, or an array's element written."""
    if isinstance(h.field, list):
        h.field[0] = x * 2
    elif isinstance(h.field, dict):
        h.field["a"] = x * 2
    elif dataclasses.is_dataclass(h.field):
        h.field.w[0] = 7.0
    else:
        h.field[0] = 7.0


CHANGE_KINDS: dict[str, Callable[[str], Callable[[Holder, Any], None]]] = {
    "reassign": lambda kind: lambda h, x: setattr(h, "field", FIELD_KINDS[kind][1](x)),
    "append": lambda kind: _grow,
    "item set": lambda kind: _set_item,
}
#: Each field kind with each change it takes (an array takes no item, an empty list has none to set).
_FIELD_CHANGES = [
    pytest.param(field, change, id=f"{field}-{change}")
    for field in FIELD_KINDS
    for change in CHANGE_KINDS
    if (field, change) not in {("array", "append"), ("empty list", "item set")}
]


def _described(value: Any, kind: type) -> Any:
    """``value`` as plain data, each array found asserted to be of ``kind``."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        assert type(value) is kind, f"{type(value).__name__} where {kind.__name__} was expected"
        return value.tolist()
    if isinstance(value, list):
        return [_described(item, kind) for item in value]
    if isinstance(value, tuple):
        return type(value).__name__, [_described(item, kind) for item in value]
    if isinstance(value, dict):
        return {key: _described(item, kind) for key, item in value.items()}
    if dataclasses.is_dataclass(value):
        return type(value).__name__, _described(value.w, kind)
    return value


@_ROUTES
@pytest.mark.parametrize(("field", "change"), _FIELD_CHANGES)
def test_what_a_method_changes_anywhere_in_its_result_reaches_the_caller_s_converted(
    field: str, change: str, view: Callable[[Any], Any], kind: type
) -> None:
    """A method's change inside its result (``self.hist.append(x)``, ``self.d['a'] = x``,
    ``self.inner.w = x``) was lost on the caller's result, or reached it unconverted (an
    array in a tensor result's list that was empty when made): only the result's own
    attributes were compared. Whatever the method reassigns, adds or replaces anywhere in
    the result now reaches the caller's objects, converted as the result was, as on the plain
    object; the caller's lists and dicts stay the caller's, and the next method sees the same."""
    how = CHANGE_KINDS[change](field)
    make = FIELD_KINDS[field][0]
    plain_kind = np.ndarray if kind is torch.Tensor else torch.Tensor
    start = [1.0, 2.0]
    plain_start = np.array(start) if plain_kind is np.ndarray else torch.tensor(start, dtype=torch.float64)
    plain = Holder(make(plain_start), plain_start)
    r = view(lambda a: Holder(make(a), a))(
        torch.tensor(start, dtype=torch.float64) if kind is torch.Tensor else np.array(start)
    )
    held = r.field
    x = np.ones(2) if kind is np.ndarray else torch.ones(2, dtype=torch.float64)
    plain.apply(how, np.ones(2) if plain_kind is np.ndarray else torch.ones(2, dtype=torch.float64))
    r.apply(how, x)
    want = _described(plain.field, plain_kind)
    assert _described(r.field, kind) == want
    if change != "reassign":
        assert r.field is held  # changed in place on the caller's own object
    read = r.read()
    assert _described(read, kind) == want
    if field != "array":
        assert read is r.field  # the method's value is the caller's object, not a new one
    if field == "result with methods":
        assert _described(r.field.read(), kind) == _described(plain.field.read(), plain_kind)


@dataclasses.dataclass
class Middle:
    """A record between a result and what its method changes, two levels down."""

    inner: Scaled
    hist: list[Any]


@dataclasses.dataclass
class Deep:
    """A result whose methods change and return objects inside it."""

    middle: Middle
    n: int = 0

    def change(self, x: Any) -> None:
        self.middle.hist.append(x * 2)
        self.middle.inner.w = x * 3

    def pair(self) -> tuple[Any, int]:
        self.n += 1
        return self, self.n

    def parts(self) -> dict[str, Any]:
        return {
            "inner": self.middle.inner,
            "all": [self, self.middle],
            "hist": self.middle.hist,
            "w": self.middle.inner.w,
        }


@_ROUTES
def test_a_method_s_value_holding_its_result_s_objects_gives_the_caller_s(
    view: Callable[[Any], Any], kind: type
) -> None:
    """Only a bare ``return self`` gave the caller's result: ``(self, n)``, ``self.inner`` and
    such came back as new converted objects, apart from the caller's. The objects of the result
    a method returns, in tuples, lists and dicts, are now the caller's own; what it changed two
    levels down reached the caller's too."""
    one = torch.ones(2, dtype=torch.float64) if kind is torch.Tensor else np.ones(2)
    r = view(lambda a: Deep(Middle(Scaled(a * 1.0), [])))(one)
    r.change(one)
    assert type(r.middle.hist[0]) is kind and r.middle.hist[0].tolist() == [2.0, 2.0]
    assert type(r.middle.inner.w) is kind and r.middle.inner.w.tolist() == [3.0, 3.0]
    assert r.middle.inner.read().tolist() == [3.0, 3.0]
    s, n = r.pair()
    assert s is r and n == 1 and r.n == 1
    parts = r.parts()
    assert parts["inner"] is r.middle.inner and parts["all"][0] is r and parts["all"][1] is r.middle
    assert parts["hist"] is r.middle.hist and type(parts["w"]) is kind and parts["w"].tolist() == [3.0, 3.0]


@_ROUTES
@pytest.mark.parametrize(
    ("field", "change"),
    [
        pytest.param(field, change, id=f"{field}-{change}")
        for field in FIELD_KINDS
        for change, how in (("append", _grow), ("item set", _set_item))
        if field != "array" and (field, change) != ("empty list", "item set")
    ],
)
def test_what_the_caller_changes_inside_its_result_is_what_the_method_sees(
    field: str, change: str, view: Callable[[Any], Any], kind: type
) -> None:
    """The caller's change inside its result (``r.hist.append(t)``, ``r.d['a'] = t``,
    ``r.rec.w = t``) was never seen by the result's methods, which compared the result's own
    attributes alone: the method ran on the function's list, dict or dataclass. What the caller
    changed there in place is now converted back at the next method call, as a value it set."""
    how = _grow if change == "append" else _set_item
    make = FIELD_KINDS[field][0]
    plain_kind = np.ndarray if kind is torch.Tensor else torch.Tensor

    def array(values: list[float], of: type) -> Any:
        return np.array(values) if of is np.ndarray else torch.tensor(values, dtype=torch.float64)

    plain = Holder(make(array([1.0, 2.0], plain_kind)), array([1.0, 2.0], plain_kind))
    r = view(lambda a: Holder(make(a), a))(array([1.0, 2.0], kind))
    how(plain, array([5.0, 6.0], plain_kind))
    how(r, array([5.0, 6.0], kind))
    assert r.leaves() == plain.leaves()
    assert r.leaves() == plain.leaves()  # and on the next call


@dataclasses.dataclass
class Bumped:
    """A dataclass with a method of its own that changes it, held inside a list or dict."""

    w: Any

    def bump(self, x: Any) -> None:
        self.w = x * 2


class History(NamedTuple):
    """A namedtuple holding a list, as a result's field."""

    items: list[Any]
    w: Any


#: What a result's field holds one container below it, made from an array ``a``.
NESTED_KINDS: dict[str, Callable[[Any], Any]] = {
    "list in a dict": lambda a: {"a": [a * 1.0]},
    "list in a list": lambda a: [[a * 1.0]],
    "dataclass in a list": lambda a: [Record(a * 1.0)],
    "dataclass in a dict": lambda a: {"k": Record(a * 1.0)},
    "dataclass with a method in a list": lambda a: [Bumped(a * 1.0)],
    "dataclass with a method in a dict": lambda a: {"k": Bumped(a * 1.0)},
    "list in a tuple": lambda a: ([a * 1.0], a * 1.0),
    "empty list in a tuple": lambda a: ([], a * 1.0),
    "dict in a tuple": lambda a: ({"a": a * 1.0},),
    "dataclass in a tuple": lambda a: (Record(a * 1.0),),
    "list in a namedtuple": lambda a: History([a * 1.0], a * 1.0),
}


def _first(field: Any) -> Any:
    """The list, dict or dataclass one container below a result's field."""
    return field[0] if isinstance(field, (list, tuple)) else next(iter(field.values()))


def _deeper_grow(h: Holder, x: Any) -> None:
    """An item added to the inner list or dict, or an attribute of the inner dataclass reassigned."""
    inner = _first(h.field)
    if isinstance(inner, list):
        inner.append(x * 2)
    elif isinstance(inner, dict):
        inner["b"] = x * 2
    else:
        inner.w = x * 2


def _deeper_set_item(h: Holder, x: Any) -> None:
    """An item of the inner list replaced."""
    _first(h.field)[0] = x * 2


def _deeper_own_method(h: Holder, x: Any) -> None:
    """The inner dataclass's own method, changing it."""
    _first(h.field).bump(x)


NESTED_CHANGES: dict[str, Callable[[Holder, Any], None]] = {
    "grow": _deeper_grow,
    "item set": _deeper_set_item,
    "own method": _deeper_own_method,
}
#: Each nested kind with each change it takes (a dataclass has no item, a list no method).
_NESTED_CHANGES = [
    (field, change)
    for field in NESTED_KINDS
    for change in NESTED_CHANGES
    if change == "grow"
    or (change == "item set" and field.startswith("list"))
    or (change == "own method" and "with a method" in field)
]
#: How the caller holds the result: as the function returned it, a copy of it, or inside the
#: list, tuple or dict the function returned.
HELD: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "as returned": (lambda r: r, lambda r: r),
    "copy.copy": (lambda r: r, copy.copy),
    "copy.deepcopy": (lambda r: r, copy.deepcopy),
    "pickled": (lambda r: r, lambda r: pickle.loads(pickle.dumps(r))),
    "in a list": (lambda r: [r], lambda out: out[0]),
    "in a tuple": (lambda r: (r, 1), lambda out: out[0]),
    "in a dict": (lambda r: {"r": r}, lambda out: out["r"]),
}
_ALL_ROUTES: dict[str, tuple[Callable[[Any], Any], type]] = {
    "pair": (lambda f: ac.returns_tensor(ac.accepts_numpy(f)), torch.Tensor),
    "returns_tensor": (lambda f: ac.returns_tensor(lambda x: f(ac.to_numpy(x))), torch.Tensor),
    "torchify": (ac.torchify, torch.Tensor),
    "reverse pair": (lambda f: ac.returns_numpy(ac.accepts_tensor(f)), np.ndarray),
}

#: Unpickling a tensor on torch 2.4 warns of torch.load's own default, not of the result's.
_UNPICKLING = pytest.mark.filterwarnings(
    "ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage"
)


def _held_marks(held: str, slow: bool) -> list[pytest.MarkDecorator]:
    return [*([pytest.mark.slow] if slow else []), *([_UNPICKLING] if held == "pickled" else [])]


#: Every route with each way of holding a result; "as returned" on each route by default, the rest slow.
_ROUTES_HELD = [
    pytest.param(route, held, id=f"{route}-{held}", marks=_held_marks(held, held != "as returned"))
    for route in _ALL_ROUTES
    for held in HELD
]

#: The cross product of routes, nested kinds and changes, and ways of holding the result; the
#: default run keeps each route with each kind and change, held as returned, and each way of
#: holding on the pair.
_DEEPER_CASES = [
    pytest.param(
        route,
        field,
        change,
        held,
        id=f"{route}-{field}-{change}-{held}",
        marks=_held_marks(held, not (held == "as returned" or (route == "pair" and field == "list in a dict"))),
    )
    for route in _ALL_ROUTES
    for field, change in _NESTED_CHANGES
    for held in HELD
]


def _array(values: list[float], of: type) -> Any:
    return np.array(values) if of is np.ndarray else torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize(("route", "field", "change", "held"), _DEEPER_CASES)
def test_what_a_method_changes_one_container_below_an_attribute_reaches_the_caller(
    route: str, field: str, change: str, held: str
) -> None:
    """A method's change inside a list or dataclass held in a list or dict attribute
    (``self.d['a'].append(x)``, ``self.ll[0][0] = x``, ``self.items[0].w = x``,
    ``self.items[0].bump(x)``) was lost on the caller's result while the next method saw it:
    items were compared by identity one level down. It now reaches the caller's result,
    converted as its fields were, as on the plain object, and the next method sees the same.
    So inside a tuple or namedtuple attribute (``self.pair[0].append(x)``), which was not
    followed at all: the change was lost, or, where the tuple's list was empty when made, the
    caller's result shared the function's list and the method's values arrived unconverted."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    make = NESTED_KINDS[field]
    how = NESTED_CHANGES[change]
    plain_kind = np.ndarray if kind is torch.Tensor else torch.Tensor
    plain = Holder(make(_array([1.0, 2.0], plain_kind)), _array([1.0, 2.0], plain_kind))
    r = unwrap(view(lambda a: wrap(Holder(make(a), a)))(_array([1.0, 2.0], kind)))
    field_held = r.field
    how(plain, _array([1.0, 1.0], plain_kind))
    r.apply(how, _array([1.0, 1.0], kind))
    want = _described(plain.field, plain_kind)
    assert _described(r.field, kind) == want
    if not (isinstance(field_held, tuple) and dataclasses.is_dataclass(_first(field_held))):
        assert r.field is field_held  # the caller's own (a tuple's dataclass changed is converted again)
    assert _described(r.read(), kind) == want
    assert r.leaves() == plain.leaves()


@dataclasses.dataclass
class Logging:
    """A result whose generator method changes it before, between and after its items."""

    w: Any
    hist: list[Any]
    n: int = 0
    closed: bool = False

    def log(self, xs: list[Any]) -> Any:
        try:
            for x in xs:
                self.hist.append(x * self.w)
                yield len(self.hist)
            self.n += 1
        finally:
            self.closed = True


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_what_a_generator_method_changes_reaches_the_caller_as_it_is_consumed(route: str, held: str) -> None:
    """A generator method's changes never reached the caller's result (not even
    ``self.hist.append(x)``), while the next method saw them: the result was compared when the
    method returned, before its body ran. What the body changed is now carried each time it
    stops, at each item, at its end and where it is closed, converted as the result's fields were."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    one = _array([1.0, 1.0], kind)
    r = unwrap(view(lambda a: wrap(Logging(a * 3.0, [])))(one))
    hist = r.hist
    items = r.log([one, one * 2])
    assert r.hist == []  # nothing ran yet, as on the plain object
    assert next(items) == 1 and _described(r.hist, kind) == [[3.0, 3.0]] and r.n == 0
    assert list(items) == [2] and _described(r.hist, kind) == [[3.0, 3.0], [6.0, 6.0]] and r.n == 1
    assert r.hist is hist and r.closed
    r.closed = False
    stopped = r.log([one])
    assert next(stopped) == 3
    stopped.close()
    assert r.closed and r.n == 1 and len(r.hist) == 3


@dataclasses.dataclass
class Deferring:
    """A result whose methods store generators on it, as it is and inside a list, beside
    changes the caller's result can take."""

    w: Any
    later: Any = None
    n: int = 0
    hist: list[Any] = dataclasses.field(default_factory=list)

    def keep(self, xs: list[Any]) -> None:
        self.n += 1
        self.later = (x * self.w for x in xs)

    def keep_listed(self, xs: list[Any]) -> None:
        self.later = [1, (x * self.w for x in xs)]
        self.hist.append(self.w * 2)

    def keep_and_raise(self, xs: list[Any]) -> None:
        self.n += 1
        self.later = (x * self.w for x in xs)
        raise KeyError("the method's own")

    def keep_looped(self) -> None:
        self.n += 1
        looped: list[Any] = [self.w]
        looped.append(looped)
        self.later = looped

    def seen(self) -> tuple[int, Any, int]:
        return self.n, self.later, len(self.hist)


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize(("method", "where"), [("keep", "self.later"), ("keep_listed", "self.later[1]")])
def test_a_generator_a_result_s_method_stores_is_refused_naming_the_field(route: str, method: str, where: str) -> None:
    """A generator a method stored on its result raised the library's internal signal (an
    empty YieldsLater). It is refused now, naming the method and the field, as one inside a
    decorated function's result is: its body would run after the conversion, on the original's arrays."""
    view, kind = _ALL_ROUTES[route]
    one = _array([1.0, 1.0], kind)
    r = view(lambda a: Deferring(a * 3.0))(one)
    with pytest.raises(ac.ConversionError) as caught:
        getattr(r, method)([one])
    message = str(caught.value)
    assert message.startswith(f"Deferring.{method}(): field {where} is a generator, whose body runs after the call")
    assert message.endswith(  # no function of the caller's returns it: the fix for one is no way round
        "Fix: store what it gives (list(...)), or a function that makes it when called, not the generator, "
        "coroutine or context manager itself."
    )


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
def test_a_refused_field_leaves_the_caller_s_result_and_its_methods_one_state(route: str) -> None:
    """A method refused for a field the caller's result cannot take dropped its other changes
    from the caller's result (``r.n`` stayed 0) while the object its methods run on kept them
    and the refused generator, closed: the next method saw ``n == 1`` and a generator yielding
    nothing. The other changes are carried now, and the refused field is the caller's again on
    both sides (a list holding itself too); a method raising its own error after such a store
    raises it (``except KeyError`` works), the refusal in a note."""
    view, kind = _ALL_ROUTES[route]
    one = _array([1.0, 1.0], kind)
    r = view(lambda a: Deferring(a * 3.0))(one)
    with pytest.raises(ac.ConversionError):
        r.keep([one])
    assert (r.n, r.later) == (1, None) and r.seen() == (1, None, 0)
    assert copy.deepcopy(r).seen() == (1, None, 0)  # the function's own result no longer holds the generator
    with pytest.raises(ac.ConversionError):
        r.keep_listed([one])
    assert r.later is None and len(r.hist) == 1 and type(r.hist[0]) is kind and r.seen() == (1, None, 1)
    with pytest.raises(KeyError) as raised:
        r.keep_and_raise([one])
    assert raised.value.__notes__[-1].startswith(
        "autoconvert: Deferring.keep_and_raise(): field self.later is a generator, whose body runs after the call"
    )
    assert (r.n, r.later) == (2, None) and r.seen() == (2, None, 1)
    fresh = view(lambda a: Deferring(a * 3.0))(one)  # its methods run on the function's object itself
    with pytest.raises(ac.ConversionError, match=r"Deferring.keep_looped\(\): field self.later contains itself"):
        fresh.keep_looped()  # the next method raised RecursionError, walking the refused list on that object
    assert (fresh.n, fresh.later) == (1, None) and fresh.seen() == (1, None, 0)


@dataclasses.dataclass
class Slot:
    """A record held in the items of a result's containers, holding no array."""

    later: Any = None
    hist: list[Any] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Shelved:
    """A result whose records sit in a list, a dict, a tuple and a list in a list, holding no array."""

    w: Any
    items: list[Any] = dataclasses.field(default_factory=lambda: [Slot()])
    reg: dict[str, Any] = dataclasses.field(default_factory=lambda: {"k": Slot()})
    pair: tuple[Any, ...] = dataclasses.field(default_factory=lambda: (Slot(),))
    deep: list[Any] = dataclasses.field(default_factory=lambda: [[Slot()]])
    paired: list[Any] = dataclasses.field(default_factory=lambda: [(Slot(),)])
    n: int = 0

    def slot(self, where: str) -> Any:
        held = {"items": self.items, "appended": self.items, "reg": self.reg, "pair": self.pair, "deep": self.deep[0]}
        return held[where]["k"] if where == "reg" else held.get(where, self.paired[0])[-1]

    def add(self) -> None:
        self.items.append(Slot())

    def keep(self, where: str, knotted: bool) -> None:
        self.n += 1
        slot = self.slot(where)
        if knotted:
            knot = Knot([])
            knot.kids.append(knot)
            slot.later = knot
        else:
            slot.later = (x for x in [self.w])
        slot.hist.append(self.w * 2)

    def add_and_keep(self, knotted: bool) -> None:
        self.add()
        self.keep("appended", knotted)

    def seen(self, where: str) -> tuple[int, Any, list[type]]:
        slot = self.slot(where)
        return self.n, slot.later, [type(h) for h in slot.hist]


_SHELVES = {"items": "self.items[0]", "appended": "self.items[1]", "reg": "self.reg['k']", "pair": "self.pair[0]"}


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize(
    ("where", "path"), [*_SHELVES.items(), ("deep", "self.deep[0][0]"), ("paired", "self.paired[0][0]")]
)
@pytest.mark.parametrize("knotted", [False, True], ids=["generator", "knot"])
def test_a_refused_field_of_a_record_in_a_container_leaves_one_state(
    route: str, where: str, path: str, knotted: bool
) -> None:
    """A record holding no array in a list or dict of the result was one object on both sides,
    and a method's store there that the result cannot take (``self.items[0].later = gen``) was
    refused with the caller's result holding the refused value and the method's other change in
    that record unconverted (an array in a tensor result); a record holding itself there was
    named by the item and left every later method refused. The refused field is the caller's
    again on both sides now, the record's other changes carried (under a tuple in a list too),
    the message names the field, and no refused value stays in the result for ``copy.deepcopy``
    and pickling to meet."""
    view, kind = _ALL_ROUTES[route]
    other = np.ndarray if kind is torch.Tensor else torch.Tensor
    r = view(lambda a: Shelved(a * 1.0))(_array([1.0, 1.0], kind))
    if where == "appended":
        r.add()
    reason = "contains itself" if knotted else "is a generator"
    with pytest.raises(ac.ConversionError, match=rf"^Shelved.keep\(\): field {re.escape(path)}.later {reason}"):
        r.keep(where, knotted)
    slot = r.slot(where)
    assert (r.n, slot.later, [type(h) for h in slot.hist]) == (1, None, [kind])
    again = pickle.loads(pickle.dumps(r))  # no refused value left in the result (a generator raised)
    assert copy.deepcopy(r).seen(where) == again.seen(where) == r.seen(where) == (1, None, [other])


@dataclasses.dataclass
class Shifting:
    """A result whose method refuses a store in a record of a list it also reorders, adds
    records in tuples to, and sets an attribute no field declares on."""

    w: Any
    items: list[Any] = dataclasses.field(default_factory=list)

    def shift(self, how: str) -> None:
        self.items[0].hist.append(self.w)
        self.items[0].extra = self.w * 2  # no field declares it: held as it is
        self.items[0].later = (x for x in [self.w])
        getattr(self, how)()

    def insert(self) -> None:
        self.items.insert(0, Slot(hist=[self.w * 5]))

    def pop(self) -> None:
        self.items.pop(1)

    def reverse(self) -> None:
        self.items.reverse()

    def tag(self, tags: str) -> None:
        for tag in tags:
            self.items.append((self.w, Slot(tag)))

    def tag_knotted(self) -> None:
        knot = Knot([])
        knot.kids.append(knot)
        self.items.append((self.w, Slot(knot)))

    def seen(self) -> list[Any]:
        return [(item.later, [type(h) for h in item.hist]) for item in self.items]


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("how", ["insert", "pop", "reverse"])
def test_a_record_refused_in_part_in_a_reordered_list_stands_for_itself(route: str, how: str) -> None:
    """A method refused for a record's field in a list it also reordered (``insert(0, ...)``)
    carried that record's other changes into the caller's record at its old index, another
    record's, whose values were lost: the caller's record standing for it is found by
    identity now. An attribute no field declares stays as it is there, as without a refusal."""
    view, kind = _ALL_ROUTES[route]
    other = np.ndarray if kind is torch.Tensor else torch.Tensor
    r = view(lambda a: Shifting(a * 1.0, [Slot(hist=[a * 0.0]), Slot(hist=[a * 1.0])]))(_array([1.0], kind))
    order = {"insert": [5.0, 0.0, 1.0], "pop": [0.0], "reverse": [1.0, 0.0]}[how]
    with pytest.raises(ac.ConversionError, match=rf"field self.items\[{order.index(0.0)}\].later is a generator"):
        r.shift(how)
    assert [float(item.hist[0][0]) for item in r.items] == order
    assert [len(item.hist) for item in r.items] == [2 if first == 0.0 else 1 for first in order]
    carried = r.items[order.index(0.0)]
    assert type(carried.hist[1]) is kind and type(carried.extra) is other
    assert r.seen() == [(None, [other] * (2 if first == 0.0 else 1)) for first in order]


@dataclasses.dataclass
class Moving:
    """A result whose method moves one of its records elsewhere in it, or sets a list of them
    anew, storing in the record what the result cannot take."""

    w: Any
    items: list[Any] = dataclasses.field(default_factory=lambda: [Slot(), Slot()])
    reg: dict[str, Any] = dataclasses.field(default_factory=lambda: {"k": Slot()})
    box: Any = None

    def move(self, how: str, refuse: bool) -> None:
        record = self.items[0] if how == "rebuild" else self.items.pop(0)
        if refuse:
            record.later = (x for x in [self.w])
        record.hist.append(self.w * 2)
        if how == "to_dict":
            self.reg["m"] = record
        elif how == "to_list_in_dict":
            self.reg["l"] = [record]
        elif how == "to_tuple":
            self.reg["t"] = (self.w, record)
        elif how == "to_attribute":
            self.box = record
        elif how == "wrapped":
            self.box = Shelf(record)
        else:
            self.items = list(reversed(self.items))

    def move_beside(self, how: str, refuse: bool, change: bool) -> None:
        record = self.items.pop(0)
        if change:
            record.hist.append(self.w * 2)
        beside = [Slot(later=(x for x in [self.w]))] if refuse else []
        if how == "to_dict":
            self.reg.update({"m": record, **dict(zip("n", beside, strict=False))})
        elif how == "to_list_in_dict":
            self.reg["l"] = [record, *beside]
        else:
            self.box = [record, *beside]

    def knot(self, how: str) -> None:
        record = self.items[0]
        record.later = (x for x in [self.w])
        record.hist.append(self.w * 2)
        if how == "itself":
            record.hist.append(record)
        elif how == "each_other":
            self.items[1].hist.append(record)
            record.hist.append(self.items[1])
        else:
            moved = [self.items.pop(0)]
            moved.append(moved)
            self.box = moved

    def replace(self, moved: bool) -> None:
        if moved:
            self.box = self.items.pop(1)
            self.items.append(Slot(later=(x for x in [self.w])))
            self.items[0].hist.append(self.w * 2)
        else:
            self.items[0] = Slot(later=(x for x in [self.w]))
            self.items[1].hist.append(self.w * 2)

    def seen(self) -> Any:
        return _laid_out(self)


def _laid_out(value: Any) -> Any:
    """What ``value`` holds, arrays and tensors as their sums: one layout on every side."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return float(value.sum())
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *map(_laid_out, value)]
    if isinstance(value, dict):
        return {key: _laid_out(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value):
        return {field.name: _laid_out(getattr(value, field.name)) for field in dataclasses.fields(value)}
    return value


_MOVES = {
    "to_dict": "self.reg['m']",
    "to_list_in_dict": "self.reg['l'][0]",
    "to_tuple": "self.reg['t'][1]",
    "to_attribute": "self.box",
    "wrapped": "self.box.held",
    "rebuild": "self.items[1]",
}


@dataclasses.dataclass
class Shelf:
    """A record holding another."""

    held: Any


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize(("how", "path"), _MOVES.items())
def test_a_record_moved_elsewhere_in_the_result_and_refused_in_part_arrives_there(
    route: str, how: str, path: str
) -> None:
    """A method that moved one of the result's records to another of its containers
    (``self.reg['m'] = self.items.pop(0)``), or set a list of them anew, and stored in it what
    the result cannot take, left the caller's result without the record: its removal from
    the list was carried, its arrival refused whole. The record now arrives at its new place
    with its other changes, the refused field the caller's, one state on both sides."""
    view, kind = _ALL_ROUTES[route]
    plain = Moving(np.ones(1))
    plain.move(how, refuse=False)
    r = view(lambda a: Moving(a * 1.0))(_array([1.0], kind))
    with pytest.raises(ac.ConversionError, match=rf"^Moving.move\(\): field {re.escape(path)}.later is a generator"):
        r.move(how, refuse=True)
    assert _laid_out(r) == r.seen() == _laid_out(plain)
    again = pickle.loads(pickle.dumps(r))
    assert copy.deepcopy(r).seen() == again.seen() == _laid_out(plain)


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("how", ["itself", "each_other", "moved_in_a_list_holding_itself"])
def test_a_record_refused_in_part_in_a_cycle_leaves_the_cycle_out(route: str, how: str) -> None:
    """A record refused in part that holds itself (``rec.hist.append(rec)``), or another such
    record holding it, raised RecursionError, leaving the generator in the object the methods
    run on for every later call; a new list holding itself and a moved record was given to the
    caller as it was, a value the result refuses. The cycle, which the result cannot hold, is
    left out; the record's other changes arrive, and later calls, copies and pickling work."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: Moving(a * 1.0))(_array([1.0], kind))
    with pytest.raises(ac.ConversionError, match=r"^Moving.knot\(\): field self.(items|box)\[0\].later is a gen"):
        r.knot(how)
    layout = _laid_out(r)
    at = layout["box"][1] if how.startswith("moved") else layout["items"][1]
    held = [_laid_out(Slot())] if how == "each_other" else []  # the other record, the cycle back left out
    assert at == {"later": None, "hist": ["list", 2.0, *held]}
    assert r.seen() == layout and pickle.loads(pickle.dumps(r)).seen() == copy.deepcopy(r).seen() == layout
    r.move("to_dict", refuse=False)
    assert r.seen() == _laid_out(r)


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("how", ["replace", "moved_then_appended"])
def test_a_refused_item_in_a_list_is_left_out_and_what_it_replaced_stays_where_the_method_put_it(
    route: str, how: str
) -> None:
    """``self.items[0] = Slot(later=gen)`` is refused whole and left out, the other item's change
    carried. Where the method moved the item it replaced (``self.box = self.items.pop(1)``, then
    a refused record appended), keeping the caller's item at its old index would hold the
    record twice, once stale: it is where the method put it."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: Moving(a * 1.0))(_array([1.0], kind))
    with pytest.raises(ac.ConversionError, match=r"^Moving.replace\(\): field self.items\[\d\].later is a gen"):
        r.replace(moved=how == "moved_then_appended")
    assert _laid_out(r.items) == ["list", _laid_out(Slot(hist=[2.0]))]
    assert _laid_out(r.box) == (_laid_out(Slot()) if how == "moved_then_appended" else None)
    assert r.seen() == _laid_out(r)


@dataclasses.dataclass
class Rotating:
    """A result whose method hands its lists of records from one attribute to another."""

    w: Any
    items: list[Any] = dataclasses.field(default_factory=lambda: [Slot(), Slot()])
    alt: list[Any] = dataclasses.field(default_factory=lambda: [Slot()])
    extra: list[Any] = dataclasses.field(default_factory=lambda: [Slot()])

    def turn(self, how: str) -> None:
        if how == "swap":
            self.items, self.alt = self.alt, self.items
        else:
            self.items, self.alt, self.extra = self.extra, self.items, self.alt
        self.alt[0].later = (x for x in [self.w])
        self.alt[0].hist.append(self.w * 2)


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("how", ["swap", "rotate"])
def test_lists_handed_between_attributes_leave_no_refused_value_behind(route: str, how: str) -> None:
    """``self.items, self.alt = self.alt, self.items`` and a refused store in a record of the
    list handed over: the generator stayed in the object the result was made from, which
    shared that list, and ``copy.deepcopy`` and pickling of the result raised ``cannot pickle
    'generator'``, after the first or the second such call."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: Rotating(a * 1.0))(_array([1.0], kind))
    plain = Rotating(np.ones(1))
    for _ in range(2):
        with pytest.raises(ac.ConversionError, match=r"^Rotating.turn\(\): field self.alt\[0\].later is a gen"):
            r.turn(how)
        plain.turn(how)
        plain.alt[0].later = None
        layout = _laid_out(plain)
        assert _laid_out(r) == layout
        assert _laid_out(copy.deepcopy(r)) == _laid_out(pickle.loads(pickle.dumps(r))) == layout


@dataclasses.dataclass
class Headed:
    """A result whose method hands the records its attributes hold from one to another."""

    w: Any
    head: Any = dataclasses.field(default_factory=Slot)
    head2: Any = dataclasses.field(default_factory=Slot)
    reg: dict[str, Any] = dataclasses.field(default_factory=dict)

    def hand(self, how: str, refuse: bool) -> None:
        if how == "swap":
            self.head, self.head2 = self.head2, self.head
            moved = self.head
        elif how == "hand":
            self.head2, self.head = self.head, Slot()
            moved = self.head2
        elif how == "into_dict":
            self.reg["h"], self.head, self.head2 = self.head, self.head2, Slot()
            moved = self.reg["h"]
        elif how == "up":
            moved, self.head2.held = self.head2.held, None
            self.head2 = moved
        else:  # kept in place, and put at a second place
            moved = self.reg["s"] = self.head2.held
        moved.hist.append(self.w * 2)
        if refuse:
            moved.later = (x for x in [self.w])

    def seen(self) -> Any:
        return _laid_out(self)


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize(
    ("how", "path"),
    [
        ("swap", "self.head"),
        ("hand", "self.head2"),
        ("into_dict", "self.reg['h']"),
        ("up", "self.head2"),
        ("shared", "self.head2.held"),
    ],
)
def test_a_record_handed_from_one_attribute_to_another_and_refused_in_part_arrives(
    route: str, how: str, path: str
) -> None:
    """``self.head, self.head2 = self.head2, self.head`` with a refused store in the record
    handed over: it was refused whole, the attribute keeping the caller's record, so the
    handed record and its other changes were lost (the other record at two places). It
    arrives now, as a record moved between containers does; so does one taken from a field of
    the record an attribute holds and set as that attribute (``self.head2 = self.head2.held``).
    One kept in place and put at a second place (``self.reg['s'] = self.head2.held``) left the
    refused value there in the object the methods run on, which ``copy.deepcopy`` and pickling
    of the result met."""
    view, kind = _ALL_ROUTES[route]
    second = (lambda: Shelf(Slot())) if how in ("up", "shared") else Slot
    plain = Headed(np.ones(1), Slot(hist=[np.zeros(1)]), second())
    plain.hand(how, refuse=False)
    r = view(lambda a: Headed(a * 1.0, Slot(hist=[a * 0.0]), second()))(_array([1.0], kind))
    with pytest.raises(ac.ConversionError, match=rf"^Headed.hand\(\): field {re.escape(path)}.later is a gen"):
        r.hand(how, refuse=True)
    assert _laid_out(r) == _laid_out(plain)
    assert _laid_out(pickle.loads(pickle.dumps(r))) == _laid_out(copy.deepcopy(r)) == _laid_out(plain)
    assert r.seen() == _laid_out(plain)  # what the methods run on


@dataclasses.dataclass
class TwoPlaced:
    """A result whose method puts one record at a second place, keeping the first."""

    w: Any
    head: Any = dataclasses.field(default_factory=Slot)
    items: list[Any] = dataclasses.field(default_factory=lambda: [Shelf(Slot()), Shelf(Slot())])

    def alias(self, how: str, refuse: bool) -> None:
        if how == "head":
            self.head = self.items[0].held
        elif how == "field":
            self.items[0].held = self.head
        else:
            self.items[1].held = self.items[0].held
        moved = self.items[0].held
        moved.hist.append(self.w * 2)
        if refuse:
            moved.later = (x for x in [self.w])

    def bump(self) -> tuple[bool, bool]:
        self.items[0].held.hist.append(self.w * 3)
        return self.head is self.items[0].held, self.items[1].held is self.items[0].held


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("how", ["head", "field", "sibling"])
@pytest.mark.parametrize("refuse", [False, True], ids=["kept", "refused"])
def test_a_record_put_at_a_second_place_stays_one_object_on_both_sides(route: str, how: str, refuse: bool) -> None:
    """``self.head = self.items[0].held`` with a refused store in it: the caller's result held
    one record at both places, the object the methods run on two copies (each attribute given
    back converted on its own), so a later method's change through one place reached the
    caller's other place and never its own, which the next method read stale. With no refusal,
    ``self.items[1].held = self.items[0].held`` gave the caller a copy at the second place."""
    view, kind = _ALL_ROUTES[route]
    plain = TwoPlaced(np.ones(1))
    plain.alias(how, refuse=False)
    shared = plain.bump()
    r = view(lambda a: TwoPlaced(a * 1.0))(_array([1.0], kind))
    if refuse:
        with pytest.raises(ac.ConversionError, match=r"^TwoPlaced.alias\(\): field self\.\S+\.later is a gen"):
            r.alias(how, refuse=True)
    else:
        r.alias(how, refuse=False)
    assert r.bump() == shared  # where the methods run
    assert (r.head is r.items[0].held, r.items[1].held is r.items[0].held) == shared
    assert _laid_out(r) == _laid_out(plain)


@dataclasses.dataclass
class Shared:
    """A result whose records and lists the caller or its methods put at second places."""

    w: Any
    head: Any = dataclasses.field(default_factory=Slot)
    items: list[Any] = dataclasses.field(default_factory=lambda: [Slot(), Slot(), Slot()])
    al2: Any = None
    box: Any = None

    def mark(self, refuse: bool) -> None:
        self.items[1].hist.append(self.w * 2)
        if refuse:
            self.items[1].later = (x for x in [self.w])

    def alias_and_mark(self) -> None:
        self.al2 = self.items
        self.items[0].later = (x for x in [self.w])
        self.items[0].hist.append(self.w * 2)

    def box_last(self) -> None:
        self.box = self.items[2]
        self.head = self.items[1]

    def mark_last(self) -> None:
        self.items[2].later = (x for x in [self.w])

    def views(self) -> tuple[bool, bool, bool]:
        return self.head is self.items[1], self.al2 is self.items, self.box is self.items[2]

    def share(self, where: str) -> None:
        self.al2 = self.items if where == "list" else self.items[0].hist

    def grow(self, where: str) -> tuple[bool, int]:
        target = self.items if where == "list" else self.items[0].hist
        self.al2.append(self.w * 5)
        return self.al2 is target, len(target)


def _shared(w: Any) -> Shared:
    return Shared(w, Slot(hist=[w]), [Slot(hist=[w]), Slot(hist=[w]), Slot(hist=[w])])


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("alias", ["item", "list"])
@pytest.mark.parametrize("refuse", [False, True], ids=["kept", "refused"])
def test_what_the_caller_puts_at_a_second_place_is_one_object_where_the_methods_run(
    route: str, alias: str, refuse: bool
) -> None:
    """``r.items[1] = r.head`` or ``r.al2 = r.items`` by the caller, then a method changing
    through ``items``: the methods ran on a copy at the second place (the caller's value there
    converted back on its own), so the change never reached the first, on either side."""
    view, kind = _ALL_ROUTES[route]
    plain, r = _shared(np.ones(1)), view(lambda a: _shared(a * 1.0))(_array([1.0], kind))
    for result in (plain, r):
        if alias == "item":
            result.items[1] = result.head
        else:
            result.al2 = result.items
    plain.mark(refuse=False)
    if refuse:
        with pytest.raises(ac.ConversionError, match=r"^Shared.mark\(\): field self.(head|items\[1\]).later is a gen"):
            r.mark(refuse=True)
    else:
        r.mark(refuse=False)
    assert r.views() == plain.views()
    assert (r.head is r.items[1], r.al2 is r.items) == plain.views()[:2]
    assert _laid_out(r) == _laid_out(plain)


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("where", ["list", "nested"])
@pytest.mark.parametrize("change", ["tag", "hist"])
def test_a_list_a_method_put_at_two_attributes_stays_one_after_the_caller_changes_inside_it(
    route: str, where: str, change: str
) -> None:
    """``self.al2 = self.items`` (or ``self.items[0].hist``), then the caller's change inside a
    record of the list (``r.items[0].later = 5``): each attribute's list was converted back on its
    own, so a later method appending through ``al2`` never reached ``items``, on either side."""
    view, kind = _ALL_ROUTES[route]
    plain, r = _shared(np.ones(1)), view(lambda a: _shared(a * 1.0))(_array([1.0], kind))
    for result, w in ((plain, np.ones(1)), (r, _array([1.0], kind))):
        result.share(where)
        if change == "tag":
            result.items[0].later = 5
        else:
            result.items[0].hist.append(w * 3)
    assert r.grow(where) == plain.grow(where)
    assert r.al2 is (r.items if where == "list" else r.items[0].hist)
    assert _laid_out(r) == _laid_out(plain)


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
def test_a_refused_store_in_a_list_a_method_also_put_at_a_new_attribute_is_refused(route: str) -> None:
    """``self.al2 = self.items; self.items[0].later = gen``: the new attribute's list was taken
    for the caller's, its records paired with the caller's before their changes were looked at,
    so the store raised nothing, the caller's field was silently None and the generator stayed
    where the methods run (``copy.deepcopy`` and pickling then raised ``cannot pickle``)."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: _shared(a * 1.0))(_array([1.0], kind))
    with pytest.raises(ac.ConversionError, match=r"^Shared.alias_and_mark\(\): field self.items\[0\].later is a gen"):
        r.alias_and_mark()
    plain = _shared(np.ones(1))
    plain.al2 = plain.items
    plain.items[0].hist.append(np.ones(1) * 2)
    assert r.views() == plain.views() and r.al2 is r.items
    assert _laid_out(r) == _laid_out(plain)
    assert _laid_out(copy.deepcopy(r)) == _laid_out(pickle.loads(pickle.dumps(r))) == _laid_out(plain)


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
def test_a_refused_record_at_two_places_leaves_the_other_sharing_whole(route: str) -> None:
    """``self.box = self.items[2]; self.head = self.items[1]``, then a refused store in
    ``items[2]``: ``items`` and ``box`` were given back, ``head`` not, so where the methods run
    ``head`` and ``items[1]`` became two objects, one on the caller's side."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: _shared(a * 1.0))(_array([1.0], kind))
    r.box_last()
    with pytest.raises(ac.ConversionError, match=r"^Shared.mark_last\(\): field self.(box|items\[2\]).later is a gen"):
        r.mark_last()
    assert r.views() == (True, False, True)
    assert (r.head is r.items[1], r.box is r.items[2]) == (True, True)
    r.mark(refuse=False)
    assert len(r.head.hist) == len(r.items[1].hist) == 2
    assert _laid_out(copy.deepcopy(r)) == _laid_out(pickle.loads(pickle.dumps(r))) == _laid_out(r)


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("how", ["reverse", "swap", "rotate"])
def test_a_refused_store_after_the_caller_reordered_a_list_leaves_no_trace(route: str, how: str) -> None:
    """``r.items.reverse()`` by the caller, then a method's refused store in ``items[1]``: the
    record stayed shared with the object the result was made from, which kept the generator,
    and ``copy.deepcopy`` and pickling of the result raised ``cannot pickle 'generator'``."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: _shared(a * 1.0))(_array([1.0], kind))
    if how == "reverse":
        r.items.reverse()
    elif how == "swap":
        r.items[0], r.items[2] = r.items[2], r.items[0]
    else:
        r.items.append(r.items.pop(0))
    with pytest.raises(ac.ConversionError, match=r"^Shared.mark\(\): field self.items\[1\].later is a gen"):
        r.mark(refuse=True)
    layout = _laid_out(r)
    assert _laid_out(copy.deepcopy(r)) == _laid_out(pickle.loads(pickle.dumps(r))) == layout
    r.mark(refuse=False)
    assert _laid_out(copy.deepcopy(r)) == _laid_out(pickle.loads(pickle.dumps(r))) == _laid_out(r)


@dataclasses.dataclass
class Filed:
    """A result whose method files a new record in a list and a dict."""

    w: Any
    items: list[Any] = dataclasses.field(default_factory=list)
    reg: dict[str, Any] = dataclasses.field(default_factory=dict)

    def file(self) -> None:
        record = Slot(hist=[self.w])
        self.items.append(record)
        self.reg["k"] = record

    def bump(self) -> bool:
        self.reg["k"].hist.append(self.w * 2)
        return self.reg["k"] is self.items[0]


def _filed(w: Any) -> Filed:
    record = Slot(hist=[w])
    return Filed(w, [record], {"k": record})


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("by", ["method", "function"])
def test_a_record_filed_in_two_containers_is_one_object_on_both_sides(route: str, by: str) -> None:
    """``self.items.append(s); self.reg["k"] = s`` in a method, or ``Filed(w, [s], {"k": s})``
    returned by the function: the caller's result held a copy in each, so a later method's
    change through ``reg`` reached the caller's ``reg`` alone."""
    view, kind = _ALL_ROUTES[route]
    plain = _filed(np.ones(1)) if by == "function" else Filed(np.ones(1))
    if by == "method":
        plain.file()
    plain.bump()
    r = view((lambda a: _filed(a * 1.0)) if by == "function" else (lambda a: Filed(a * 1.0)))(_array([1.0], kind))
    if by == "method":
        r.file()
    assert r.reg["k"] is r.items[0]
    assert r.bump() is True
    assert _laid_out(r) == _laid_out(plain)


@dataclasses.dataclass
class SharedRecord:
    """A result two of whose attributes hold one record."""

    a: list[Any]
    b: list[Any]

    def rebuild(self) -> Any:
        self.a = list(self.a)
        return self.b[0]

    def bump(self, w: Any) -> None:
        self.b[0].hist.append(w)


def _shared_record(w: Any) -> SharedRecord:
    record = Slot(hist=[w])
    return SharedRecord([record], [record])


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
def test_a_record_two_attributes_hold_stays_one_when_one_is_set_anew(route: str) -> None:
    """``self.a = list(self.a)``, ``b`` holding the same record: the record ``b`` held was no
    longer the caller's (the returned record neither), so a later change through ``b`` never
    reached ``a``. No refusal involved."""
    view, kind = _ALL_ROUTES[route]
    r = view(_shared_record)(_array([1.0], kind))
    assert r.rebuild() is r.b[0] and r.a[0] is r.b[0]
    r.bump(_array([5.0], kind))
    assert _laid_out(r.a) == _laid_out(r.b) == ["list", {"later": None, "hist": ["list", 1.0, 5.0]}]


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize(
    ("how", "path"), [("to_dict", "self.reg['n']"), ("to_list_in_dict", "self.reg['l'][1]"), ("to_box", "self.box[1]")]
)
@pytest.mark.parametrize("change", [False, True], ids=["moved", "moved_and_changed"])
def test_a_record_moved_beside_a_refused_new_one_arrives_the_new_one_left_out(
    route: str, how: str, path: str, change: bool
) -> None:
    """A record the method made and stored what the result cannot take in is left out of the
    list or dict it put it in; that container's other changes were dropped with it, a record
    moved there from elsewhere in the result too, whose removal was carried: it vanished. It
    arrives now, the refusal naming the new record's field."""
    view, kind = _ALL_ROUTES[route]
    plain = Moving(np.ones(1))
    plain.move_beside(how, refuse=False, change=change)
    r = view(lambda a: Moving(a * 1.0))(_array([1.0], kind))
    with pytest.raises(ac.ConversionError, match=rf"^Moving.move_beside\(\): field {re.escape(path)}.later is a gen"):
        r.move_beside(how, refuse=True, change=change)
    assert _laid_out(r) == r.seen() == _laid_out(plain)


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("knotted", [False, True], ids=["generator", "knot"])
def test_a_record_a_method_made_with_a_refused_field_is_left_out_naming_the_field(route: str, knotted: bool) -> None:
    """A record a method made and stored what the result cannot take in, in one call, is
    left out of the list it put it in, on both sides; a record holding itself there was named
    by the record (``self.items[1]``): the field is named, as elsewhere."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: Shelved(a * 1.0))(_array([1.0], kind))
    reason = "contains itself" if knotted else "is a generator"
    with pytest.raises(ac.ConversionError, match=rf"^Shelved.add_and_keep\(\): field self.items\[1\].later {reason}"):
        r.add_and_keep(knotted)
    assert len(r.items) == 1 and r.seen("items") == (1, None, [])  # n += 1 carried, the new record not


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
def test_a_refused_value_leaves_no_trace_in_a_result_whose_methods_run_on_a_twin() -> None:
    """With a bfloat16 field (held apart, widened: the methods run on a twin sharing the
    original's lists), a refused store in a record of a list stayed in the original's record:
    ``copy.deepcopy`` and pickling of the caller's result raised ``cannot pickle 'generator'``."""
    pair = ac.returns_tensor(ac.accepts_numpy(lambda a: Shelved(a * 1)))
    r = pair(torch.ones(2, dtype=torch.bfloat16))
    with pytest.raises(ac.ConversionError, match=r"field self.items\[0\].later is a generator"):
        r.keep("items", False)
    again = pickle.loads(pickle.dumps(r))
    assert copy.deepcopy(r).seen("items") == again.seen("items") == r.seen("items") == (1, None, [np.ndarray])
    assert r.items[0].hist[0].dtype == torch.bfloat16


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
def test_tuples_a_method_appends_each_come_as_their_own(route: str) -> None:
    """Several tuples a method appended in one call came back as the first's where a tuple
    freed during the carry gave its id to the next: each is its own again."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: Shifting(a * 1.0))(_array([1.0], kind))
    r.tag("abc")
    assert [item[1].later for item in r.items] == ["a", "b", "c"]
    assert all(type(item[0]) is kind for item in r.items)
    with pytest.raises(
        ac.ConversionError, match=r"^Shifting.tag_knotted\(\): field self.items\[3\]\[1\].later contains"
    ):
        r.tag_knotted()  # a record holding itself in a tuple made in the call: named by the field
    assert len(r.items) == 3


@dataclasses.dataclass
class Child:
    """A record pointing back at the result holding it."""

    parent: Any


@dataclasses.dataclass
class Kin:
    """A record with a method of its own, holding records of its kind."""

    w: Any
    n: int = 0
    children: list[Any] = dataclasses.field(default_factory=list)

    def bump(self) -> None:
        self.n += 1


class Couple(NamedTuple):
    """Two records regrouped by a method."""

    a: Kin
    b: Kin


@dataclasses.dataclass
class Family:
    """A result whose methods hand out its records' bound methods and regroup its records."""

    members: list[Kin]

    def child_bumper(self, i: int, j: int) -> Callable[[], None]:
        return self.members[i].children[j].bump  # type: ignore[no-any-return]

    def total(self) -> int:
        return sum(m.n + sum(c.n for c in m.children) for m in self.members)

    def couple(self) -> Couple:
        return Couple(self.members[0], self.members[1])


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_records_a_method_hands_out_are_the_caller_s_and_the_next_method_sees_their_changes(
    route: str, held: str
) -> None:
    """A nested record's bound method a method returned changed the caller's record, yet on a
    deep copy or an unpickled result the next method did not see it (it ran on records of its
    own); records regrouped into a namedtuple came back as copies. Both now act on one record,
    as on the plain object."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(
        view(lambda a: wrap(Family([Kin(a * 1.0, children=[Kin(a * 2.0)]) for _ in range(2)])))(
            _array([1.0, 2.0], kind)
        )
    )
    r.child_bumper(1, 0)()
    assert r.members[1].children[0].n == 1 and r.total() == 1
    r.members[0].bump()
    assert r.total() == 2
    couple = r.couple()
    assert type(couple) is Couple and couple.a is r.members[0] and couple.b is r.members[1]
    assert type(couple.a.w) is kind


@dataclasses.dataclass
class Bud:
    """A record with a method of its own."""

    w: Any

    def grow(self) -> Bud:
        self.w = self.w + 1
        return self


@dataclasses.dataclass
class Stem:
    """A result whose method replaces a field by a new record pointing back at the result."""

    w: Any
    head: Bud

    def nest(self) -> Bud:
        self.head = Bud(self.w * 1)
        self.head.owner = self  # type: ignore[attr-defined]
        return self.head

    def total(self) -> float:
        return float(self.w.sum() + self.head.w.sum())


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_a_new_record_pointing_back_at_the_result_leaves_the_next_method_working(route: str, held: str) -> None:
    """``self.head = Bud(...); self.head.owner = self``, the record with a method of its own:
    the next method raised RecursionError, each result making the other's object in turn."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Stem(a * 2.0, Bud(a + 3.0))))(_array([1.0, 2.0, 3.0], kind)))
    head = r.nest()
    assert head is r.head and head.owner is r
    assert r.total() == 24.0
    assert r.head.grow() is r.head and r.total() == 27.0


def _stem(a: np.ndarray) -> Stem:
    return Stem(a * 2.0, Bud(a + 3.0))


@_UNPICKLING
@pytest.mark.parametrize("again", [copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))], ids=["deepcopy", "pickled"])
def test_a_copied_result_s_methods_share_under_copy_false(again: Callable[[Any], Any]) -> None:
    """A ``copy=False`` result copied or unpickled: its methods' new arrays were refused with
    a CopyError saying a float32 array must be cast to float32 (the copied call's CPU was no
    longer the one CPU object the conversion tells "stays on the CPU" by)."""
    r = again(ac.returns_tensor(ac.accepts_numpy(_stem), copy=False)(torch.tensor([1.0, 2.0, 3.0])))
    head = r.nest()
    assert head is r.head and type(head.w) is torch.Tensor and r.total() == 24.0


@dataclasses.dataclass
class Tree:
    """A result whose methods store objects pointing back at it inside its lists."""

    w: Any
    children: list[Any]
    records: dict[str, list[Any]]

    def grow(self) -> int:
        self.children.append(Child(self))
        return len(self.children)

    def point_back(self) -> None:
        self.records["a"][0].w = self

    def point_back_with_method(self) -> None:
        self.records["b"][0].w = self  # a dataclass with a method of its own

    def parents(self) -> list[bool]:
        return [child.parent is self for child in self.children]


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_a_method_storing_an_object_pointing_back_at_its_result_in_a_list_gives_the_caller_s(
    route: str, held: str
) -> None:
    """``self.children.append(Child(self))`` or ``self.records['a'][0].w = self`` raised
    RecursionError: the new record was converted with the result it points at, which holds it.
    The record now comes to the caller pointing at the caller's result, as on the plain object."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(
        view(lambda a: wrap(Tree(a * 1.0, [], {"a": [Record(a * 1.0)], "b": [Bumped(a * 1.0)]})))(
            _array([1.0, 2.0], kind)
        )
    )
    assert r.grow() == 1 and r.grow() == 2
    assert [type(child) for child in r.children] == [Child, Child]
    assert [child.parent is r for child in r.children] == [True, True] and r.parents() == [True, True]
    r.point_back()
    assert r.records["a"][0].w is r and type(r.w) is kind


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_a_method_storing_a_dataclass_with_methods_pointing_back_at_its_result_gives_the_caller_s(
    route: str, held: str
) -> None:
    """``self.records['b'][0].w = self``, the record a dataclass with a method of its own, raised
    RecursionError. It now comes to the caller pointing at the caller's result, with its
    converting methods."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Tree(a * 1.0, [], {"b": [Bumped(a * 1.0)]})))(_array([1.0, 2.0], kind)))
    r.point_back_with_method()
    assert r.records["b"][0].w is r
    r.records["b"][0].bump(_array([1.0], kind))
    assert type(r.records["b"][0].w) is kind and r.records["b"][0].w.tolist() == [2.0]


@dataclasses.dataclass
class Grouped:
    """A result whose methods return objects held in its lists, dicts and tuples."""

    w: Any
    groups: list[dict[str, Any]]
    pair: tuple[list[Any], Any]
    records: list[Record]
    nested: dict[str, list[list[Any]]]

    def first(self) -> dict[str, Any]:
        return self.groups[0]

    def left(self) -> list[Any]:
        return self.pair[0]

    def record(self) -> Record:
        return self.records[1]

    def innermost(self) -> list[Any]:
        return self.nested["k"][0]

    def sizes(self) -> list[int]:
        return [len(self.groups[0]), len(self.pair[0]), len(self.nested["k"][0])]

    def record_w(self) -> Any:
        return self.records[1].w

    def loop(self) -> None:
        self.pair[0].append(self.pair[0])


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_a_method_returning_an_item_of_its_result_s_container_returns_the_caller_s(route: str, held: str) -> None:
    """``return self.groups[0]`` (an object one container below an attribute, or deeper) gave a
    new converted object: the caller's change to it was lost, and the next method did not see
    it. The caller's own object at that place comes back, as on the plain object."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]

    def make(a: Any) -> Grouped:
        return Grouped(a * 1.0, [{"a": a * 1.0}], ([a * 1.0], a * 1.0), [Record(a), Record(a * 2)], {"k": [[a]]})

    r = unwrap(view(lambda a: wrap(make(a)))(_array([1.0, 2.0], kind)))
    assert r.first() is r.groups[0] and r.left() is r.pair[0]
    assert r.record() is r.records[1] and r.innermost() is r.nested["k"][0]
    r.first()["b"] = _array([3.0], kind)
    r.left().append(_array([4.0], kind))
    r.innermost().append(_array([5.0], kind))
    r.record().w = _array([6.0], kind)
    assert r.sizes() == [2, 2, 2] and r.record_w().tolist() == [6.0] and type(r.record_w()) is kind
    r.loop()  # the tuple's list holding itself: the caller's holds the caller's
    assert r.pair[0][-1] is r.pair[0] and r.sizes() == [2, 3, 2]


@_ROUTES
@pytest.mark.parametrize(("field", "change"), [(f, c) for f, c in _NESTED_CHANGES if "with a method" not in f])
def test_what_the_caller_changes_one_container_below_an_attribute_is_what_the_method_sees(
    field: str, change: str, view: Callable[[Any], Any], kind: type
) -> None:
    """The caller's change inside a list or dataclass held in a list or dict attribute
    (``r.d['a'].append(t)``, ``r.items[0].w = t``) was not seen by the result's methods, which
    looked one level down alone. It is now converted back at the next method call."""
    make = NESTED_KINDS[field]
    how = NESTED_CHANGES[change]
    plain_kind = np.ndarray if kind is torch.Tensor else torch.Tensor
    plain = Holder(make(_array([1.0, 2.0], plain_kind)), _array([1.0, 2.0], plain_kind))
    r = view(lambda a: Holder(make(a), a))(_array([1.0, 2.0], kind))
    how(plain, _array([5.0, 6.0], plain_kind))
    how(r, _array([5.0, 6.0], kind))
    assert r.leaves() == plain.leaves()
    assert r.leaves() == plain.leaves()  # and on the next call


def test_a_method_s_change_as_deep_as_the_bound_reaches_the_caller() -> None:
    """A change in place is looked for ``_DEPTH`` containers deep, the attribute's own list the
    first (the documented bound on the work at each method call): one in the deepest list still
    reaches the caller."""
    depth = _result_methods._DEPTH

    def nested(a: Any) -> Any:
        field: Any = [a * 1.0]
        for _ in range(depth - 1):
            field = [field]
        return field

    def deepest(h: Holder, x: Any) -> None:
        inner = h.field
        for _ in range(depth - 1):
            inner = inner[0]
        inner.append(x * 2)

    r = ac.returns_tensor(ac.accepts_numpy(lambda a: Holder(nested(a), a)))(torch.ones(2, dtype=torch.float64))
    r.apply(deepest, np.ones(2))
    plain = Holder(nested(np.ones(2)), np.ones(2))
    deepest(plain, np.ones(2))
    assert _described(r.field, torch.Tensor) == _described(plain.field, np.ndarray)


@dataclasses.dataclass
class Spoiled:
    """A result whose methods put what torch cannot hold inside it."""

    w: Any
    hist: list[Any]
    record: Record

    def log(self) -> None:
        self.hist.append(np.array(["a"]))

    def relabel(self) -> None:
        self.record.w = np.array(["a"])


@pytest.mark.parametrize(("method", "path"), [("log", "self.hist[1]"), ("relabel", "self.record.w")])
def test_what_a_method_puts_inside_its_result_that_cannot_cross_is_autoconverts_error_naming_where(
    method: str, path: str
) -> None:
    """A value a method puts inside its result is converted as the result's fields were: one
    that cannot cross raises autoconvert's error naming the method and where it was put."""
    r = ac.returns_tensor(ac.accepts_numpy(lambda a: Spoiled(a * 1.0, [a * 1.0], Record(a * 1.0))))(torch.ones(2))
    assert raised(ac.ConversionError, getattr(r, method)) == (
        f"Spoiled.{method}(): field {path} holds strings, which torch cannot hold. Found numpy.ndarray(shape=(1,), "
        "dtype=<U1). Fix: use a list of str, or integer codes."
    )


@dataclasses.dataclass
class Making:
    """A result whose methods change or make objects inside it and return them."""

    w: Any
    items: list[Record]
    hist: list[Any]

    def first_set(self, x: Any) -> Record:
        self.items[0].w = x
        return self.items[0]

    def new_record(self) -> Record:
        self.leaf = Record(self.w * 2)
        return self.leaf

    def new_hist(self) -> list[Any]:
        self.hist = [self.w]
        return self.hist

    def logged(self) -> dict[str, Any]:
        self.hist.append({"w": self.w})
        return self.hist[-1]

    def reads(self) -> list[Any]:
        return [self.items[0].w, self.leaf.w, len(self.hist), sorted(self.hist[-1])]


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_a_method_returning_what_it_changed_or_made_in_its_result_returns_the_caller_s(route: str, held: str) -> None:
    """``self.items[0].w = x; return self.items[0]``, ``self.leaf = Record(x); return self.leaf``
    gave a new converted object, apart from the one carried to the caller's result: the caller's
    change to what it got was lost, and the next method did not see it. The caller's own object
    at that place comes back, as on the plain object."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Making(a * 1.0, [Record(a * 1.0)], [])))(_array([1.0, 2.0], kind)))
    assert r.first_set(_array([3.0], kind)) is r.items[0]
    assert r.new_record() is r.leaf
    assert r.new_hist() is r.hist
    assert r.logged() is r.hist[-1]
    r.items[0].w = _array([7.0], kind)
    r.leaf.w = _array([8.0], kind)
    r.hist[-1]["v"] = _array([9.0], kind)
    first, leaf, size, keys = r.reads()
    assert (first.tolist(), leaf.tolist(), size, keys) == ([7.0], [8.0], 2, ["v", "w"])
    assert type(first) is kind and type(leaf) is kind


@dataclasses.dataclass
class Linked:
    """A result whose method makes a cycle through attributes: self.other.other = self."""

    w: Any
    other: Record
    hist: list[Any]

    def link(self) -> None:
        self.other.other = self  # type: ignore[attr-defined]

    def add(self) -> int:
        self.hist.append(self.w * 2)
        return len(self.hist)


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_a_method_making_its_result_point_back_through_an_attribute_leaves_its_methods_working(
    route: str, held: str
) -> None:
    """After ``self.other.other = self`` every later method call raised RecursionError: what a
    method may change inside its result was followed around the cycle. It is followed once, as
    on the plain object."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Linked(a * 1.0, Record(a * 1.0), [])))(_array([1.0, 2.0], kind)))
    r.link()
    assert r.other.other is r
    assert r.add() == 1 and r.add() == 2
    assert len(r.hist) == 2 and type(r.hist[1]) is kind and r.other.other is r


@dataclasses.dataclass(eq=False)
class Member:
    """A record hashable by identity, which a set can hold."""

    w: Any


class Held(NamedTuple):
    """A named tuple a method stores, holding a set."""

    items: frozenset[Any]
    n: int


@dataclasses.dataclass
class Cycling:
    """A result whose methods make a cycle through new objects, in attributes no field declares."""

    w: Any
    hist: list[Any]

    def back_to_self(self) -> None:
        self.b = Record(None)
        self.b.a = self  # type: ignore[attr-defined]

    def three_round(self) -> None:
        self.b = Record(None)
        self.b.c = Record(None)  # type: ignore[attr-defined]
        self.b.c.a = self  # type: ignore[attr-defined]

    def node_holding_itself(self) -> None:
        self.n = Record(self.w)
        self.n.me = self.n  # type: ignore[attr-defined]

    def two_nodes(self) -> None:
        x, y = Record(self.w), Record(self.w)
        x.o, y.o = y, x  # type: ignore[attr-defined]
        self.x = x

    def through_a_set(self) -> None:
        c = Member(None)
        self.s = frozenset([c])
        c.a = self  # type: ignore[attr-defined]

    def through_a_set_on_a_new_object(self) -> None:
        self.b = Member(None)
        c = Member(None)
        self.b.s = frozenset([c])  # type: ignore[attr-defined]
        c.a = self  # type: ignore[attr-defined]

    def through_a_set_two_objects_deep(self) -> None:
        self.b = Member(None)
        self.b.c = Member(None)  # type: ignore[attr-defined]
        d = Member(None)
        self.b.c.s = frozenset([d])  # type: ignore[attr-defined]
        d.a = self  # type: ignore[attr-defined]

    def through_a_named_tuple_holding_a_set(self) -> None:
        c = Member(None)
        self.t = Held(frozenset([c]), 1)
        c.a = self  # type: ignore[attr-defined]

    def a_set_member_pointing_at_its_holder(self) -> None:
        self.b = Member(None)
        c = Member(None)
        self.b.s = frozenset([c])  # type: ignore[attr-defined]
        c.up = self.b  # type: ignore[attr-defined]

    def through_a_set_of_tuples(self) -> None:
        self.b = Member(None)
        c, d = Member(None), Member(None)
        self.b.s = frozenset([(c, 0)])  # type: ignore[attr-defined]
        c.t = (d,)  # type: ignore[attr-defined]
        d.a = self  # type: ignore[attr-defined]

    def add(self) -> int:
        self.hist.append(self.w * 2)
        return len(self.hist)


#: Where a Cycling method makes its cycle, and a field on it the caller reads converted (or None).
_CYCLES: dict[str, Callable[[Any], Any] | None] = {
    "back_to_self": None,
    "three_round": None,
    "node_holding_itself": lambda r: r.n.w,
    "two_nodes": lambda r: r.x.w,
    "through_a_set": None,
    "through_a_set_on_a_new_object": None,
    "through_a_set_of_tuples": None,
    "through_a_set_two_objects_deep": None,
    "through_a_named_tuple_holding_a_set": None,
    "a_set_member_pointing_at_its_holder": None,
}


@pytest.mark.parametrize(
    ("route", "held", "cycle"),
    [
        pytest.param(
            *param.values,
            cycle,
            id=f"{param.id}-{cycle}",
            marks=param.marks if route == "pair" or cycle == "two_nodes" else _held_marks(param.values[1], True),
        )
        for param in _ROUTES_HELD
        for route in [param.values[0]]
        for cycle in _CYCLES
    ],
)
def test_a_method_making_a_cycle_through_new_objects_returns(route: str, held: str, cycle: str) -> None:
    """``self.b = Record(None); self.b.a = self`` (a -> b -> c -> a, a node holding itself, two
    nodes holding each other) raised RecursionError in the method call itself: the caller's
    snapshot of what its result holds followed the cycle. Each object is looked in once, as on
    the plain object: the call returns, and the next ones work, their values converted."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Cycling(a * 1.0, [])))(_array([1.0, 2.0], kind)))
    assert getattr(r, cycle)() is None
    assert r.add() == 1 and r.add() == 2
    assert getattr(r, cycle)() is None
    assert r.add() == 3 and type(r.hist[2]) is kind
    field = _CYCLES[cycle]
    if field is not None:
        assert type(field(r)) is kind and field(r).tolist() == [1.0, 2.0]


#: Where a Cycling method's cycle closes on the caller's result: the object reached, and the
#: caller's object it is to be.
_CYCLES_CLOSED: dict[str, Callable[[Any], tuple[Any, Any]]] = {
    "back_to_self": lambda r: (r.b.a, r),
    "three_round": lambda r: (r.b.c.a, r),
    "node_holding_itself": lambda r: (r.n.me, r.n),
    "two_nodes": lambda r: (r.x.o.o, r.x),
    "through_a_set": lambda r: (next(iter(r.s)).a, r),
    "through_a_set_on_a_new_object": lambda r: (next(iter(r.b.s)).a, r),
    "through_a_set_of_tuples": lambda r: (next(iter(r.b.s))[0].t[0].a, r),
    "through_a_set_two_objects_deep": lambda r: (next(iter(r.b.c.s)).a, r),
    "through_a_named_tuple_holding_a_set": lambda r: (next(iter(r.t.items)).a, r),
    "a_set_member_pointing_at_its_holder": lambda r: (next(iter(r.b.s)).up, r.b),
}


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
@pytest.mark.parametrize("cycle", list(_CYCLES_CLOSED))
def test_a_cycle_a_method_makes_through_new_objects_closes_on_the_caller_s_objects(
    route: str, held: str, cycle: str
) -> None:
    """``self.b = Record(None); self.b.a = self`` (a -> b -> c -> a) gave the caller's ``r.b.a``
    a copy of the object the method ran on, not ``r``: a change through it was lost; through a
    set (``self.s = frozenset([c]); c.a = self``, on the result or a new object), the method
    side's object, holding its arrays. The cycle closes on the caller's objects, as on the plain
    object, and the next method sees a change made through it."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Cycling(a * 1.0, [])))(_array([1.0, 2.0], kind)))
    getattr(r, cycle)()
    reached, expected = _CYCLES_CLOSED[cycle](r)
    assert reached is expected
    if expected is r:
        reached.hist.append(_array([5.0], kind))
        assert r.add() == 2 and type(r.hist[1]) is kind


@dataclasses.dataclass(eq=False)
class InSet:
    """A result whose methods store it in a set attribute (eq=False: hashable by identity)."""

    w: Any
    n: int = 0

    def in_frozenset(self) -> None:
        self.held = frozenset([self])

    def in_set(self) -> None:
        self.held = {self, 1}

    def in_a_set_two_objects_deep(self) -> None:
        self.b = Member(None)
        self.b.c = Member(None)  # type: ignore[attr-defined]
        self.b.c.held = frozenset([self])  # type: ignore[attr-defined]

    def bump_held(self) -> bool:
        (item,) = (item for item in self.held if isinstance(item, InSet))
        item.n += 1
        return item is self


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
@pytest.mark.parametrize("method", ["in_frozenset", "in_set"])
def test_a_result_a_method_puts_in_a_set_is_the_caller_s_there(route: str, held: str, method: str) -> None:
    """``self.held = frozenset([self])`` gave the caller's ``r.held`` the object the method ran
    on (its fields the method side's: arrays for a torch caller), not ``r``. The set holds the
    caller's result, its other items as they are, as on the plain object; a method then finds
    itself there."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(InSet(a * 1.0)))(_array([1.0, 2.0], kind)))
    getattr(r, method)()
    assert type(r.held) is (frozenset if method == "in_frozenset" else set)
    assert [item is r for item in r.held if isinstance(item, InSet)] == [True]
    assert method == "in_frozenset" or 1 in r.held
    assert r.bump_held() and r.n == 1


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_a_result_a_method_puts_in_a_set_two_new_objects_deep_is_the_caller_s_there(route: str, held: str) -> None:
    """``self.b.c.held = frozenset([self])`` (new objects in attributes no field declares) gave
    the caller's set the object the method ran on, holding the other side's arrays: it holds the
    caller's result, as a set on the result does."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(InSet(a * 1.0)))(_array([1.0, 2.0], kind)))
    r.in_a_set_two_objects_deep()
    assert [item is r for item in r.b.c.held] == [True]


@dataclasses.dataclass(eq=False)
class Calling:
    """A result holding a bound method of itself: set by a method, or when it is made."""

    w: Any

    def __post_init__(self) -> None:
        self.made = self.bump

    def bump(self) -> None:
        self.w = self.w + 1

    def keep(self) -> None:
        self.kept = self.bump


@pytest.mark.parametrize(
    ("route", "held"),
    # a shallow copy shares the source's attributes: its bound method is the source's, as in plain Python
    [param for param in _ROUTES_HELD if param.values[1] != "copy.copy"],
)
@pytest.mark.parametrize("where", ["made", "kept"])
def test_a_bound_method_of_the_result_it_holds_is_the_caller_s(route: str, held: str, where: str) -> None:
    """``self.kept = self.bump`` (or in ``__post_init__``) gave the caller a method bound to the
    object the methods run on: calling it changed that object, not the caller's result. It is
    the caller's result's converting method, as the plain object's is bound to it."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Calling(a * 1.0)))(_array([1.0, 2.0], kind)))
    r.keep()
    method = getattr(r, where)
    assert method.__self__ is r and method.__func__ is Calling.bump
    method()
    assert type(r.w) is kind and r.w.tolist() == [2.0, 3.0]
    r.bump()
    assert r.w.tolist() == [3.0, 4.0]


@dataclasses.dataclass(eq=False)
class Hooking:
    """A result whose methods store callables pointing back at it (or at objects it made)."""

    w: Any

    def bump(self, k: float = 1.0) -> None:
        self.w = self.w + k

    def store(self, how: str) -> None:
        self.cb = _HOOKS[how][0](self)

    def hand(self, how: str) -> Any:
        return _RETURNED_HOOKS[how](self)


def _on_a_new_object(result: Hooking) -> Member:
    leaf = Member(None)
    leaf.cb = result.bump  # type: ignore[attr-defined]
    return leaf


#: How a Hooking result's method stores a callable pointing back at it, and how its caller calls it.
_HOOKS: dict[str, tuple[Callable[[Hooking], Any], Callable[[Any], Any]]] = {
    "a partial of its bound method": (lambda s: functools.partial(s.bump, 1.0), lambda cb: cb()),
    "a lambda over self": (lambda s: lambda: s.bump(), lambda cb: cb()),
    "its bound method in a list": (lambda s: [s.bump], lambda cb: cb[0]()),
    "its bound method in a dict": (lambda s: {"b": s.bump}, lambda cb: cb["b"]()),
    "its bound method in a tuple": (lambda s: (s.bump,), lambda cb: cb[0]()),
    "its bound method in a set": (lambda s: {s.bump}, lambda cb: next(iter(cb))()),
    "a partial of its class's function": (lambda s: functools.partial(Hooking.bump, s), lambda cb: cb()),
    "its bound method on a new object": (_on_a_new_object, lambda cb: cb.cb()),
    "a weak reference to it": (weakref.ref, lambda cb: cb().bump()),
}
#: What follows the method storing the callable; a lambda and a weak reference do not pickle,
#: and copy.deepcopy holds them as they are, pointing at the source, as in plain Python.
_THEN: dict[str, Callable[[Any], Any]] = {
    "at once": lambda r: r,
    "after a second method": lambda r: (r.bump(), r)[1],
    "copy.deepcopy": copy.deepcopy,
    "pickle": lambda r: pickle.loads(pickle.dumps(r)),
}
_HOOK_CASES = [
    pytest.param(
        route,
        how,
        then,
        id=f"{route}-{how}-{then}",
        marks=() if then == "at once" or route == "pair" else pytest.mark.slow,
    )
    for route in _ALL_ROUTES
    for how in _HOOKS
    for then in _THEN
    if then in ("at once", "after a second method") or how not in ("a lambda over self", "a weak reference to it")
]


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize(("route", "how", "then"), _HOOK_CASES)
def test_a_callable_a_method_stores_pointing_at_the_result_is_the_caller_s(route: str, how: str, then: str) -> None:
    """``self.cb = functools.partial(self.bump, 1)`` (a lambda over ``self``, ``[self.bump]``,
    ``{"b": self.bump}``, ``(self.bump,)``, ``{self.bump}``, ``partial(Res.bump, self)``, a new
    object's ``leaf.cb = self.bump``, ``weakref.ref(self)``) gave the caller a callable pointing
    at the object the methods run on: calling it changed that object, not the caller's result,
    without a word. It points at the caller's result, its converting method, as on the plain object."""
    view, kind = _ALL_ROUTES[route]
    call = _HOOKS[how][1]
    r = _THEN[then](_stored(view(lambda a: Hooking(a * 1.0))(_array([1.0, 2.0], kind)), how))
    call(r.cb)
    expected = [3.0, 4.0] if then == "after a second method" else [2.0, 3.0]
    assert type(r.w) is kind and r.w.tolist() == expected
    r.bump()
    assert r.w.tolist() == [x + 1 for x in expected]


def _stored(r: Hooking, how: str) -> Hooking:
    r.store(how)
    return r


#: A callable a Hooking result's method returns pointing back at it, changing nothing itself.
_RETURNED_HOOKS: dict[str, Callable[[Hooking], Any]] = {
    "its bound method": lambda s: s.bump,
    "a partial of its bound method": lambda s: functools.partial(s.bump, 1.0),
    "a lambda over self": lambda s: lambda: s.bump(),
}


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("how", list(_RETURNED_HOOKS))
def test_a_callable_a_method_returns_pointing_at_the_result_is_the_caller_s(route: str, how: str) -> None:
    """A method changing nothing that returned ``self.bump`` (a partial of it, a lambda over
    ``self``) gave the caller a callable changing the object the methods run on: the caller's
    result stayed as it was. It changes the caller's result, as on the plain object."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: Hooking(a * 1.0))(_array([1.0, 2.0], kind))
    r.hand(how)()
    assert type(r.w) is kind and r.w.tolist() == [2.0, 3.0]


@dataclasses.dataclass(eq=False)
class HookingMade:
    """A result holding callables pointing back at it from when it is made."""

    w: Any

    def __post_init__(self) -> None:
        self.listed = [self.bump]
        self.partial = functools.partial(self.bump, 1.0)
        self.closure = lambda: self.bump()

    def bump(self, k: float = 1.0) -> None:
        self.w = self.w + k


@pytest.mark.parametrize(
    ("route", "held"),
    [param for param in _ROUTES_HELD if param.values[1] != "pickled"],  # the plain object's lambda does not pickle
)
@pytest.mark.parametrize("where", ["listed", "partial", "closure"])
def test_a_callable_pointing_at_the_result_from_its_post_init_is_the_caller_s(
    route: str, held: str, where: str
) -> None:
    """``self.cbs = [self.bump]`` (a partial of it, a lambda over ``self``) in ``__post_init__``
    gave the caller a callable changing the function's own result, not the caller's: it points
    at the caller's result's converting method, as the plain object's at itself (a shallow
    copy's at its source, as copy.deepcopy's function: they are shared, as in plain Python)."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(HookingMade(a * 1.0)))(_array([1.0, 2.0], kind)))
    plain = unwrap(wrap(HookingMade(_array([1.0, 2.0], kind))))
    for held_by in (r, plain):
        held_there = getattr(held_by, where)
        (held_there[0] if where == "listed" else held_there)()
    assert type(r.w) is kind and r.w.tolist() == plain.w.tolist()
    assert (r.listed[0].__self__ is r) == (plain.listed[0].__self__ is plain)


@dataclasses.dataclass(eq=False)
class Counter:
    """A record with a method of its own, which a result's method makes and stores."""

    v: int = 0

    def inc(self) -> Counter:
        self.v += 1
        return self


#: How a Linking result's method stores a new Counter both on itself and somewhere else there,
#: and where the caller then finds the Counter through that second place.
_TWO_PLACES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "its bound method": (lambda s: s.b.inc, lambda r: r.elsewhere.__self__),
    "its bound method in a list": (lambda s: [s.b.inc], lambda r: r.elsewhere[0].__self__),
    "a frozenset": (lambda s: frozenset([s.b]), lambda r: next(iter(r.elsewhere))),
    "a set": (lambda s: {s.b}, lambda r: next(iter(r.elsewhere))),
    "a tuple in a set": (lambda s: frozenset([(s.b,)]), lambda r: next(iter(r.elsewhere))[0]),
    "a frozen record in a set": (lambda s: frozenset([Frozen(s.b)]), lambda r: next(iter(r.elsewhere)).w),
    "a dict's key": (lambda s: {s.b: "hit"}, lambda r: next(iter(r.elsewhere))),
    "a weak reference": (lambda s: weakref.ref(s.b), lambda r: r.elsewhere()),
}


@dataclasses.dataclass(frozen=True)
class Frozen:
    """A frozen record, hashable by its field, which a set can hold."""

    w: Any


@dataclasses.dataclass(eq=False)
class Linking:
    """A result whose method makes a Counter and stores it in two places of its own."""

    w: Any

    def link(self, how: str) -> None:
        self.b = Counter()
        self.elsewhere = _TWO_PLACES[how][0](self)

    def link_first(self, how: str) -> None:
        """The second place set before the Counter's own attribute."""
        b = Counter()
        self.elsewhere = _TWO_PLACES[how][0](types.SimpleNamespace(b=b))
        self.b = b


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
@pytest.mark.parametrize("how", list(_TWO_PLACES))
@pytest.mark.parametrize("method", ["link", "link_first"])
def test_a_new_object_a_method_stores_in_two_places_is_one_object_for_the_caller(
    route: str, held: str, how: str, method: str
) -> None:
    """``self.b = Counter(); self.cb = self.b.inc`` (``{self.b}``, ``frozenset([(self.b,)])``,
    ``{self.b: 1}``, ``weakref.ref(self.b)``; the second place set first too) gave the caller's
    second place a hidden twin of ``r.b``, the method side's, which a change through ``r.b`` did
    not reach (``r.cb()`` counted on the twin; ``r.dk[r.b]`` raised KeyError). It is ``r.b``, as
    on the plain object."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Linking(a * 1.0)))(_array([1.0, 2.0], kind)))
    getattr(r, method)(how)
    assert _TWO_PLACES[how][1](r) is r.b
    if how.startswith("its bound method"):
        assert (r.elsewhere[0] if how.endswith("list") else r.elsewhere)() is r.b and r.b.v == 1
    if how == "a dict's key":
        assert r.elsewhere[r.b] == "hit"


@dataclasses.dataclass(eq=False)
class Keying:
    """A result whose method keys a dict by a new record pointing back at it."""

    w: Any

    def index(self) -> None:
        key = Member(None)
        key.r = self  # type: ignore[attr-defined]
        self.dk = {key: 1}


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_a_dict_key_a_method_stores_pointing_at_the_result_points_at_the_caller_s(route: str, held: str) -> None:
    """``c.r = self; self.dk = {c: 1}`` gave the caller's key the object the methods run on,
    holding the method side's arrays: dict keys were held as they are. The key points at the
    caller's result, as a dict's value does."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Keying(a * 1.0)))(_array([1.0, 2.0], kind)))
    r.index()
    (key,) = r.dk
    assert key.r is r and type(key.r.w) is kind


@dataclasses.dataclass
class Listing:
    """A result whose method stores a list whose item points back at it, through an attribute no
    field declares: self.l = [Record(w)]; self.l[0].lst = self.l."""

    w: Any

    def node_list(self) -> None:
        self.l = [Record(self.w)]
        self.l[0].lst = self.l  # type: ignore[attr-defined]

    def size(self) -> int:
        return len(self.l)


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_an_item_pointing_back_at_the_list_a_method_made_points_at_the_caller_s(route: str, held: str) -> None:
    """``self.l = [Record(w)]; self.l[0].lst = self.l`` gave the caller's ``r.l[0].lst`` the
    method's list, not ``r.l``: a change through it did not reach ``r.l``. It points at the
    caller's list, as on the plain object, and the next method sees a change through it."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    r = unwrap(view(lambda a: wrap(Listing(a * 1.0)))(_array([1.0, 2.0], kind)))
    r.node_list()
    assert r.l[0].lst is r.l and type(r.l[0].w) is kind
    r.l[0].lst.append(Record(_array([3.0], kind)))
    assert len(r.l) == 2 and r.size() == 2


@dataclasses.dataclass
class Registering:
    """A result whose method stores it in its own dict: self.reg['me'] = self."""

    w: Any
    hist: list[Any]
    reg: dict[str, Any]
    kids: list[Any] = dataclasses.field(default_factory=list)

    def register(self) -> None:
        self.reg["me"] = self

    def in_attribute(self) -> None:
        self.me = self

    def in_tuple(self) -> None:
        self.pair = (self, self.w)

    def in_record(self) -> None:
        self.back = Record(self)

    def in_list(self) -> None:
        self.kids.append(self)

    def in_record_in_list(self) -> None:
        self.kids.append(Record(self))

    def add(self) -> int:
        self.hist.append(self.w * 4)
        return len(self.hist)

    def holds_itself(self) -> bool:
        return self.me is self  # type: ignore[no-any-return]

    def through(self, holding: str) -> tuple[bool, int]:
        """Whether the object ``holding`` names is this one, and the count of an append there."""
        found = _HOLDING_ITSELF[holding][1](self)
        found.hist.append(self.w * 4)
        return found is self, len(self.hist)


#: How a Registering result comes to hold itself, and where its copy then finds itself.
_HOLDING_ITSELF: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "in a dict": ("register", lambda c: c.reg["me"]),
    "in its own attribute": ("in_attribute", lambda c: c.me),
    "in a tuple": ("in_tuple", lambda c: c.pair[0]),
    "in a record's field": ("in_record", lambda c: c.back.w),
    "in a list": ("in_list", lambda c: c.kids[0]),
    "in a record in a list": ("in_record_in_list", lambda c: c.kids[0].w),
}


@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("holding", list(_HOLDING_ITSELF))
@pytest.mark.parametrize("how", ["as it is", "deepcopy", "pickle"])
def test_a_copy_of_a_result_holding_itself_keeps_its_methods_working(route: str, how: str, holding: str) -> None:
    """After ``self.reg['me'] = self`` (``self.me = self``, ``self.pair = (self, w)``,
    ``self.back = Record(self)``, ``self.kids.append(self)``), the result's next method call
    (``self.me``), or a ``copy.deepcopy`` or pickled copy's, raised RecursionError: what it held,
    converted back for the methods, converted the result holding it again, or was walked around
    the cycle; the reverse pair's copy found its methods' device again by walking the result,
    which held itself. The methods run, on an object holding itself as the plain one does
    (``self.me``: after the caller set a field too, where the methods run on a twin)."""
    view, kind = _ALL_ROUTES[route]
    method, itself = _HOLDING_ITSELF[holding]
    r = view(lambda a: Registering(a * 1.0, [], {}))(_array([1.0, 2.0], kind))
    getattr(r, method)()
    c = r if how == "as it is" else copy.deepcopy(r) if how == "deepcopy" else pickle.loads(pickle.dumps(r))
    assert c.add() == 1 and c.add() == 2
    assert itself(c) is c and type(c.hist[0]) is kind and (c is r or r.hist == [])
    if holding == "in its own attribute":  # the methods run on a twin after the caller sets a field: it holds itself
        c.w = _array([3.0, 4.0], kind)
        assert c.holds_itself() and c.add() == 3 and itself(c) is c


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("holding", list(_HOLDING_ITSELF))
def test_a_result_holding_itself_finds_itself_there_after_the_caller_sets_a_field(route: str, holding: str) -> None:
    """After ``self.reg['me'] = self`` (a tuple, a record's field) and the caller's ``r.w = t``,
    the methods ran on a twin of the function's object whose dict still held the function's
    object: ``self.reg['me']`` was not ``self``, and a change through it was lost. The twin
    holds itself there, as the plain object does, and the caller's result holds itself."""
    view, kind = _ALL_ROUTES[route]
    method, itself = _HOLDING_ITSELF[holding]
    made: list[Registering] = []
    r = view(lambda a: made.append(Registering(a * 1.0, [], {})) or made[-1])(_array([1.0, 2.0], kind))
    getattr(r, method)()
    r.w = _array([3.0, 4.0], kind)
    assert r.through(holding) == (True, 1) and r.through(holding) == (True, 2)
    assert itself(r) is r and len(r.hist) == 2 and type(r.hist[1]) is kind
    assert itself(made[0]) is made[0]  # the function's own still holds itself


@dataclasses.dataclass
class Knot:
    """A record whose declared list field may hold the record itself: ``n.kids.append(n)``."""

    kids: list[Any]
    w: Any = None


@dataclasses.dataclass
class Growing:
    """A result whose methods make a record holding itself through a field its class declares."""

    w: Any

    def grow(self) -> None:
        self.n = Knot([], self.w)
        self.n.kids.append(self.n)

    def grown(self) -> Knot:
        n = Knot([], self.w)
        n.kids.append(n)
        return n

    def looped(self) -> list[Any]:
        held: list[Any] = [self.w]
        held.append(held)
        return held

    def size(self) -> int:
        return len(vars(self))


def growing(a: Any) -> Growing:
    return Growing(a * 1.0)


#: Who makes the cycle a Growing result meets, and where the refusal names it, by route.
_GROWN_CYCLES: dict[str, Callable[[Any, type], Any]] = {
    "a method sets it": lambda r, kind: r.grow(),
    "a method returns it": lambda r, kind: r.grown(),
    "a method returns a list holding itself": lambda r, kind: r.looped(),
    "the caller sets it": lambda r, kind: (
        setattr(r, "n", Knot([], _array([1.0], kind))),
        r.n.kids.append(r.n),
        r.size(),
    ),
}
_GROWN_WHERE = {
    "a method sets it": dict.fromkeys(_ALL_ROUTES, "Growing.grow(): field self.n"),
    "a method returns it": {
        "pair": "growing(): result of Growing.grown()",
        "returns_tensor": "<lambda>.<locals>.<lambda>(): result of Growing.grown()",  # the route's own lambda
        "torchify": "growing(): result of Growing.grown()",
        "reverse pair": "Growing.grown(): result",
    },
    "a method returns a list holding itself": {
        "pair": "growing(): result of Growing.looped()",
        "returns_tensor": "<lambda>.<locals>.<lambda>(): result of Growing.looped()",  # the route's own lambda
        "torchify": "growing(): result of Growing.looped()",
        "reverse pair": "Growing.looped(): result",
    },
    "the caller sets it": dict.fromkeys(_ALL_ROUTES, "Growing.size(): field self.n"),
}


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
@pytest.mark.parametrize("who", list(_GROWN_CYCLES))
def test_a_record_holding_itself_through_a_declared_field_is_refused_as_a_function_s_result_is(
    route: str, who: str
) -> None:
    """``n = Knot([]); n.kids.append(n)`` set or returned by a method, or set by the caller,
    raised Python's RecursionError from the conversion's walk: the library's ConversionError
    now names the method and the field or result, as a decorated function's result holding
    itself is refused; the result's methods work after it."""
    view, kind = _ALL_ROUTES[route]
    r = view(growing)(_array([1.0, 2.0], kind))
    assert raised(ac.ConversionError, _GROWN_CYCLES[who], r, kind) == (
        f"{_GROWN_WHERE[who][route]} contains itself, or nests deeper than Python's recursion limit, so it "
        "cannot be walked. Found a container that reaches itself through its items. Fix: break the cycle, or "
        "point back through an attribute no dataclass field declares, which is held as it is."
    )
    if who != "the caller sets it":  # the refused field is the caller's again: neither side holds it
        assert r.size() == 1 and not hasattr(r, "n")


@dataclasses.dataclass
class Yielding:
    """A result whose generator method yields itself and objects it holds."""

    w: Any
    hist: list[Any]
    pair: tuple[list[Any], Any]

    def each(self) -> Any:
        yield self
        yield self.pair
        self.leaf = Record(self.w * 2)
        yield self.leaf
        return self.hist

    def sizes(self) -> list[int]:
        return [len(self.hist), len(self.pair[0])]


@pytest.mark.parametrize(("route", "held"), _ROUTES_HELD)
def test_a_generator_method_yielding_its_result_s_objects_yields_the_caller_s(route: str, held: str) -> None:
    """``yield self``, ``yield self.pair``, ``self.leaf = Record(x); yield self.leaf`` gave new
    converted objects (a plain method's ``return self`` gave the caller's): the caller's changes
    to them were lost. The caller's own objects come, as on the plain object."""
    view, kind = _ALL_ROUTES[route]
    wrap, unwrap = HELD[held]
    one = _array([1.0, 2.0], kind)
    r = unwrap(view(lambda a: wrap(Yielding(a * 1.0, [], ([a * 1.0], a * 1.0))))(one))
    items = r.each()
    assert next(items) is r
    assert next(items) is r.pair
    leaf = next(items)
    assert leaf is r.leaf and type(leaf.w) is kind
    r.hist.append(one)
    r.pair[0].append(one)
    with pytest.raises(StopIteration) as stop:
        next(items)
    assert stop.value.value is r.hist
    assert r.sizes() == [1, 2]


@dataclasses.dataclass
class Counting:
    """A result whose class method changes a class attribute, with a class-level default."""

    w: Any
    inner: Any = None
    count: ClassVar[int] = 0

    @classmethod
    def tick(cls) -> int:
        cls.count += 1
        return cls.count


@pytest.mark.parametrize("route", list(_ALL_ROUTES))
def test_a_class_method_of_a_result_changes_its_class_not_the_result(route: str) -> None:
    """A class method (``cls.count += 1``) was run as if on the result: the class attribute was
    copied onto the caller's result, shadowing the class's, and where an attribute held a
    dataclass with a class-level default None it raised a raw AttributeError. It changes the
    class alone, as on the plain object."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: Counting(a * 1.0, Linked(a * 1.0, Record(a), [])))(_array([1.0, 2.0], kind))
    try:
        assert r.tick() == 1 and "count" not in vars(r)
        Counting.count = 100
        assert r.count == 100
    finally:
        Counting.count = 0


_GLOBAL_TENSOR = torch.zeros(2, dtype=torch.float64)


@dataclasses.dataclass
class Handing:
    """A result whose methods give back tensors no conversion made: a global one, one sent in."""

    w: Any

    def held(self) -> torch.Tensor:
        return _GLOBAL_TENSOR

    def echo(self) -> Any:
        got = yield 1
        self.last = got
        yield got


@pytest.mark.parametrize("route", ["pair", "torchify"])
def test_a_tensor_a_result_method_holds_or_is_sent_comes_back_as_it_is(route: str) -> None:
    """A method giving back a tensor it holds (a global) or was sent (``g.send(t)``) raised the
    library's internal signal asking for the call's tensors, with an empty message: the method's
    value is no tensor of the call's, and comes back as it is, as on the plain object."""
    view, kind = _ALL_ROUTES[route]
    r = view(lambda a: Handing(a * 1.0))(_array([1.0, 2.0], kind))
    assert r.held() is _GLOBAL_TENSOR
    sent = torch.full((2,), 10.0, dtype=torch.float64)
    g = r.echo()
    assert next(g) == 1
    assert g.send(sent) is sent and r.last is sent
