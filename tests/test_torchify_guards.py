"""torchify's read-only guard on every kind of torchified callable: compiled code that
refuses read-only arrays on entry (a Cython memoryview) gets the call made again with
private writable copies, for a module's functions, a class's constructor, static and class
methods, an object's methods and the callables it holds alike; where the error stands, it
names the array refused."""

from __future__ import annotations

import dataclasses
import functools
import pickle
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.interpolate
import scipy.signal
import scipy.spatial
import scipy.spatial.transform
import scipy.stats
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac
from autoconvert._failures._guards import guarded

SOS = scipy.signal.butter(2, 0.3, output="sos")


def _refuses_read_only_sos() -> bool:
    """Whether this SciPy's ``sosfilt`` refuses a read-only ``sos`` (a Cython memoryview, 1.17)."""
    read_only = SOS.copy()
    read_only.setflags(write=False)
    try:
        scipy.signal.sosfilt(read_only, np.ones(4))
    except ValueError:
        return True
    return False


needs_refusal = pytest.mark.skipif(not _refuses_read_only_sos(), reason="this SciPy's sosfilt takes read-only arrays")

LAYOUTS = ["contiguous", "transposed", "strided", "offset", "expanded"]
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def _laid_out(values: np.ndarray, dtype: torch.dtype, layout: str) -> torch.Tensor:
    """``values`` (2-D, float64) as a tensor of ``dtype`` in ``layout``: its own memory, a
    transposed view, every other row of a larger tensor, a view at an offset into a larger
    one, or its first row expanded along the rows (zero strides)."""
    t = torch.from_numpy(values).to(dtype)
    if layout == "transposed":
        return t.T.contiguous().T
    if layout == "strided":
        larger = torch.zeros((2 * t.shape[0], t.shape[1]), dtype=dtype)
        larger[::2] = t
        return larger[::2]
    if layout == "offset":
        flat = torch.zeros(t.numel() + 3, dtype=dtype)
        flat[3:] = t.reshape(-1)
        return flat[3:].view(t.shape)
    if layout == "expanded":
        return t[:1].expand(t.shape)
    return t


def _as_handed(t: torch.Tensor) -> np.ndarray:
    """The values SciPy gets for ``t``, as a writable array of its own: float16 and bfloat16
    cross as float32 (torchify's default for SciPy)."""
    return (t.float() if t.dtype in (torch.float16, torch.bfloat16) else t).numpy().copy()


def _as_returned(result: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """SciPy's ``result`` as torchify returns it for tensors of ``dtype``: a float32 result
    of float16 or bfloat16 tensors comes back in their dtype."""
    returned = torch.from_numpy(result)
    narrowed = returned.dtype is torch.float32 and dtype in (torch.float16, torch.bfloat16)
    return returned.to(dtype) if narrowed else returned


def _libraries(through: Callable[[Any], Any]) -> types.SimpleNamespace:
    """The SciPy modules the cases use, each passed through ``through`` (torchify, or as they are)."""
    return types.SimpleNamespace(
        transform=through(scipy.spatial.transform),
        spatial=through(scipy.spatial),
        interpolate=through(scipy.interpolate),
        stats=through(scipy.stats),
    )


def _rotation(lib: Any, values: Any, inside: Any) -> list[Any]:
    """Pose code: rotations from Euler angles and quaternions, applied to points."""
    turn = lib.transform.Rotation.from_euler("zy", values[:, :2])
    points = values[:, 1:]
    quat = lib.transform.Rotation.from_quat(inside)  # never the zero quaternion
    return [
        turn.apply(points),
        turn.apply(points, inverse=True),
        turn.apply(vectors=points[0]),
        turn.inv().apply(points),
        turn.as_matrix(),
        turn.magnitude(),
        quat.apply(points),
        quat.as_euler("xyz"),
    ]


def _kd_tree(lib: Any, values: Any, inside: Any) -> list[Any]:
    """Nearest neighbours of the points themselves."""
    points = values[:, 1:]
    return [*lib.spatial.KDTree(points).query(points, k=2), *lib.spatial.cKDTree(points).query(points[:1])]


def _interpolators(lib: Any, values: Any, inside: Any) -> list[Any]:
    """A regular grid's interpolator and a cubic spline, called on points inside their range."""
    n = values.shape[0]
    inside = inside[:, :2]
    rows, columns = np.linspace(0.0, 1.0, n), np.linspace(0.0, 1.0, values.shape[1])
    spline = lib.interpolate.CubicSpline(rows, values[:, 0])
    grid = lib.interpolate.RegularGridInterpolator((rows, columns), values)
    return [grid(inside), grid(inside, method="nearest"), spline(inside[:, 0]), spline.derivative()(inside[:, 1])]


def _density(lib: Any, values: Any, inside: Any) -> list[Any]:
    """A Gaussian kernel density estimate of the points, evaluated at them."""
    kde = lib.stats.gaussian_kde(values[:, 1:3].T)
    return [kde(values[:, 1:3].T), kde.evaluate(values[:2, 1:3].T), kde.logpdf(values[:, 1:3].T)]


#: case -> its calls, given the libraries, values and values in [0.1, 0.9) (arithmetic on either would
#: be torch's on one side and NumPy's on the other)
CASES: dict[str, Callable[[Any, Any, Any], list[Any]]] = {
    "Rotation": _rotation,
    "KDTree": _kd_tree,
    "interpolators": _interpolators,
    "gaussian_kde": _density,
}


@given(
    case=st.sampled_from(sorted(CASES)),
    dtype=st.sampled_from(DTYPES),
    layout=st.sampled_from(LAYOUTS),
    rows=st.integers(4, 7),
    seed=st.integers(0, 2**16),
)
def test_torchified_objects_give_what_scipy_gives_on_arrays(
    case: str, dtype: torch.dtype, layout: str, rows: int, seed: int
) -> None:
    """SciPy's objects through torchify, under default options, over dtype x layout: each
    result is SciPy's on arrays of the same values, the first call through a fresh view
    (where compiled code's refusal of a read-only array is made again with copies) and the
    next (which starts with copies) alike, and the caller's tensors never change.
    ``Rotation.apply`` raised ReadOnlyError here."""
    if case == "gaussian_kde" and layout == "expanded":
        layout = "strided"  # identical points: a singular covariance, which SciPy refuses
    random = np.random.default_rng(seed)
    tensor = _laid_out(random.standard_normal((rows, 4)), dtype, layout)
    inside = _laid_out(random.uniform(0.1, 0.9, (rows, 4)), dtype, layout)
    before = tensor.clone()
    expected = CASES[case](_libraries(lambda module: module), _as_handed(tensor), _as_handed(inside))
    view = _libraries(functools.partial(ac.torchify, native=False))  # the converting path, in SciPy's mode too
    for _ in range(2):
        got = CASES[case](view, tensor, inside)
        for g, e in zip(got, expected, strict=True):
            want = _as_returned(np.asarray(e), dtype)
            assert isinstance(g, torch.Tensor) and g.dtype == want.dtype
            np.testing.assert_allclose(g.double().numpy(), want.double().numpy(), rtol=1e-12, atol=1e-12)
    assert torch.equal(tensor, before)


def _smoothed(sos: Any, x: Any) -> Any:
    """A function of a user's module: its compiled code refuses a read-only ``sos``."""
    return scipy.signal.sosfilt(sos, x)


class Smoother:
    """A user's class whose every kind of callable calls compiled code refusing a read-only ``sos``."""

    def __init__(self, sos: Any) -> None:
        self.sos = sos
        self.primed = scipy.signal.sosfilt(sos, np.ones(3))  # the constructor calls it too
        self.held = _smoothed  # a callable the object holds

    def smooth(self, x: Any, sos: Any = None) -> Any:
        return scipy.signal.sosfilt(self.sos if sos is None else sos, x)

    @staticmethod
    def once(sos: Any, x: Any) -> Any:
        return scipy.signal.sosfilt(sos, x)

    @classmethod
    def made(cls, sos: Any) -> Smoother:
        return cls(sos)

    def __call__(self, sos: Any, x: Any) -> Any:
        return scipy.signal.sosfilt(sos, x)


def _module() -> types.ModuleType:
    """A user's module holding ``_smoothed`` and ``Smoother``."""
    module = types.ModuleType("filters")
    module._smoothed = _smoothed  # type: ignore[attr-defined]
    module.smoothed = _smoothed  # type: ignore[attr-defined]
    module.Smoother = Smoother  # type: ignore[attr-defined]
    return module


#: callable kind -> (the call through a torchified view of the user's module, given sos and x)
KINDS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "module function": lambda view, sos, x: view.smoothed(sos, x),
    "constructor": lambda view, sos, x: view.Smoother(sos).smooth(x),
    "static method": lambda view, sos, x: view.Smoother.once(sos, x),
    "class method": lambda view, sos, x: view.Smoother.made(sos).smooth(x),
    "object method": lambda view, sos, x: view.Smoother(SOS).smooth(x, sos),
    "object method by keyword": lambda view, sos, x: view.Smoother(SOS).smooth(x=x, sos=sos),
    "static method through the object": lambda view, sos, x: view.Smoother(SOS).once(sos, x),
    "held callable": lambda view, sos, x: view.Smoother(SOS).held(sos, x),
    "object called": lambda view, sos, x: view.Smoother(SOS)(sos, x),
}


@needs_refusal
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_kind_of_torchified_callable_copies_when_compiled_code_refuses(kind: str, layout: str) -> None:
    """Each kind of torchified callable whose compiled code refuses a read-only array on
    entry gives SciPy's result on arrays, the first call and the next, under default
    options; the caller's tensors never change. Methods and constructors raised ReadOnlyError."""
    sos = _laid_out(SOS, torch.float64, layout)
    x = torch.linspace(0.0, 1.0, 12, dtype=torch.float64)
    before = sos.clone()
    expected = scipy.signal.sosfilt(sos.numpy().copy(), x.numpy())
    view = ac.torchify(_module())
    for _ in range(2):
        got = KINDS[kind](view, sos, x)
        assert isinstance(got, torch.Tensor)
        np.testing.assert_array_equal(got.numpy(), expected)
    assert torch.equal(sos, before)


@dataclasses.dataclass
class Filtered:
    """A dataclass (a container autoconvert walks) holding a read-only array of its user's."""

    weights: np.ndarray
    last: Any = None

    def run(self, sos: Any) -> None:
        self.last = scipy.signal.sosfilt(sos, self.weights)


@needs_refusal
def test_a_method_made_again_runs_on_its_own_object() -> None:
    """The copies a refused method call is made again with are of its arguments only: the
    object (here a dataclass, whose read-only field a copy of the arguments would copy into
    a new object) is the caller's own, and what the method sets lands there."""
    weights = np.linspace(0.0, 1.0, 8)
    weights.setflags(write=False)
    target = Filtered(weights)
    ac.torchify(target).run(torch.from_numpy(SOS.copy()))
    assert target.weights is weights
    np.testing.assert_array_equal(target.last, scipy.signal.sosfilt(SOS, weights))


def _refused(function: str, path: str, maker: str = "") -> str:
    """The message naming argument ``path`` of ``function``, which ``maker`` made (default: accepts_numpy)."""
    maker = (
        maker or f"@ac.accepts_numpy(copy=True) on {function}, or a with ac.config(copy=True): block around the call"
    )
    return (
        f"{function}(): argument {path} was refused by compiled code that needs writable arrays (a Cython "
        "memoryview); arrays made from tensor arguments are read-only so that NumPy code never changes the "
        "caller's tensors. Found ValueError('buffer source array is read-only'). Fix: pass copy=True to give the "
        f"function private writable copies (in {maker})."
    )


#: copy=False given to torchify, which a config block cannot change.
_TORCHIFIED = (
    "the ac.torchify(..., copy=True) call that made it, where copy=False was given, so a config block cannot change it"
)


def _first(a: Any, b: Any, c: Any) -> Any:
    return scipy.signal.sosfilt(a, b + c)


def _second(a: Any, b: Any, c: Any) -> Any:
    return scipy.signal.sosfilt(b, a * c)


def _keyword_only(a: Any, b: Any, *, c: Any) -> Any:
    return scipy.signal.sosfilt(c, a - b)


def _written(a: Any, b: Any, c: Any) -> None:
    total = a.sum() + c.sum()
    b[0] = total  # the frame holds three read-only arrays; this statement writes one


class _Methods:
    def pick(self, a: Any, b: Any, c: Any) -> Any:
        return scipy.signal.sosfilt(b, a + c)

    @ac.accepts_numpy
    def decorated(self, a: Any, b: Any, c: Any) -> Any:
        return scipy.signal.sosfilt(b, a + c)


def _x() -> torch.Tensor:
    return torch.linspace(0.0, 1.0, 6, dtype=torch.float64)


def _sos() -> torch.Tensor:
    return torch.from_numpy(SOS.copy())


#: row -> (the call, given fresh tensors, the message it raises)
ATTRIBUTIONS: dict[str, tuple[Callable[[], Any], str]] = {
    "first of three": (lambda: ac.accepts_numpy(_first)(_sos(), _x(), _x()), _refused("_first", "a")),
    "second of three": (lambda: ac.accepts_numpy(_second)(_x(), _sos(), _x()), _refused("_second", "b")),
    "by keyword": (lambda: ac.accepts_numpy(_second)(_x(), c=_x(), b=_sos()), _refused("_second", "b")),
    "keyword-only": (lambda: ac.accepts_numpy(_keyword_only)(_x(), _x(), c=_sos()), _refused("_keyword_only", "c")),
    "decorated method": (lambda: _Methods().decorated(_x(), _sos(), _x()), _refused("_Methods.decorated", "b")),
    "torchified method, copy=False": (
        lambda: ac.torchify(_Methods(), copy=False).pick(_x(), _sos(), _x()),
        _refused("_Methods.pick", "b", _TORCHIFIED),
    ),
    "torchified method by keyword, copy=False": (
        lambda: ac.torchify(_Methods(), copy=False).pick(_x(), b=_sos(), c=_x()),
        _refused("_Methods.pick", "b", _TORCHIFIED),
    ),
    "a write among three": (
        lambda: ac.accepts_numpy(_written)(_x(), _x(), _x()),
        "_written(): argument b was written into by the function; arrays made from tensor arguments are read-only "
        "so that NumPy code never changes the caller's tensors behind its back. Found ValueError('assignment "
        "destination is read-only'). Fix: pass copy=True to give the function private writable copies, or "
        "writeback=True to let its changes reach the caller's tensors (in @ac.accepts_numpy(copy=True) on "
        "_written, or a with ac.config(copy=True): block around the call).",
    ),
}


@needs_refusal
@pytest.mark.parametrize("row", ATTRIBUTIONS)
def test_a_refusal_names_the_array_refused(row: str) -> None:
    """Where the error stands (functions users decorate, ``copy=False``), it names the one
    argument compiled code refused among several arrays: by position, keyword or
    keyword-only, in a function or a method (the method's object is no argument: a
    torchified ``Rotation.apply`` named its bool ``inverse``)."""
    call, message = ATTRIBUTIONS[row]
    with pytest.raises(ac.ReadOnlyError) as raised:
        call()
    assert str(raised.value) == message


def test_a_method_s_guard_pickles_as_a_method_s() -> None:
    """A method's guard pickles (by reference to its function) and unpickles still leaving
    the object, its first argument, alone."""
    guard = guarded(scipy.spatial.transform.Rotation.apply, True, method=True)
    copy = pickle.loads(pickle.dumps(guard))
    assert copy.__wrapped__ is guard.__wrapped__ and copy.retries and copy.skipped == 1
    cluster = pytest.importorskip("sklearn.cluster")
    fit = pickle.loads(pickle.dumps(guarded(cluster.KMeans.fit, True, method=True, owner=cluster.KMeans)))
    assert fit.owner is cluster.KMeans and fit.uncopied is not None  # the estimator's copy_x still read


#: Calls told not to copy, on the converting route, as each reads its answer: scikit-learn's code
#: then writes into the array it is handed (KMeans centres X and puts it back; scale scales it).
_TOLD_NOT_TO_COPY: dict[str, tuple[Callable[[Any], Callable[[Any], Any]], Callable[[Any], Any]]] = {
    "KMeans(copy_x=False).fit": (
        lambda lib: lib["cluster"].KMeans(2, random_state=0, n_init=1, copy_x=False).fit,
        lambda fitted: fitted.cluster_centers_,
    ),
    "scale(X, copy=False)": (lambda lib: functools.partial(lib["preprocessing"].scale, copy=False), lambda r: r),
    "StandardScaler().fit(X).transform(X, copy=False)": (
        lambda lib: lambda x: lib["preprocessing"].StandardScaler().fit(x).transform(x, copy=False),
        lambda r: r,
    ),
    "np.nan_to_num(X, copy=False)": (lambda lib: functools.partial(lib["numpy"].nan_to_num, copy=False), lambda r: r),
}


@pytest.mark.parametrize("case", _TOLD_NOT_TO_COPY)
def test_a_call_told_not_to_copy_is_handed_copies_on_the_converting_route(case: str) -> None:
    """A function or an estimator told not to copy writes into what it is handed: on the
    converting route it gets writable copies, as on scikit-learn's own torch path, and gives
    what it gives on the caller's arrays, the caller's tensor unchanged (it raised ReadOnlyError)."""
    pytest.importorskip("sklearn")
    import importlib

    names = ("cluster", "preprocessing")
    plain = {"numpy": np, **{n: importlib.import_module(f"sklearn.{n}") for n in names}}
    torchified = {k: ac.torchify(v, native=False) for k, v in plain.items()}
    make, read = _TOLD_NOT_TO_COPY[case]
    x = torch.rand(20, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x[0, 0] = float("nan") if "nan" in case else x[0, 0]
    before = x.clone()
    got = read(make(torchified)(x))
    torch.testing.assert_close(x, before, rtol=0, atol=0, equal_nan=True)
    expected = read(make(plain)(x.numpy().copy()))
    assert type(got) is torch.Tensor
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
