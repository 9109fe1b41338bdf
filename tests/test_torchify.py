"""torchify(): modules, classes and objects that take and return tensors."""

from __future__ import annotations

import dataclasses
import functools
import pickle
import threading
import types
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import scipy.ndimage
import scipy.stats
import torch

import autoconvert as ac
from autoconvert._spec import _spec

from .estimators import Whitener

ndi = ac.torchify(scipy.ndimage)


def _same(got: Any, expected: Any) -> None:
    """A torchified result equals the NumPy one: tensors for arrays, containers alike."""
    if isinstance(expected, dict):
        assert type(got) is dict and list(got) == list(expected)
        for key in expected:
            _same(got[key], expected[key])
    elif isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            _same(g, e)
    elif isinstance(expected, (np.ndarray, np.generic)):
        assert isinstance(got, torch.Tensor)
        np.testing.assert_array_equal(got.numpy(), np.asarray(expected))
    else:
        assert got == expected


IMAGE = np.random.default_rng(0).random((9, 9))
MASK = IMAGE > 0.5
LABELS = scipy.ndimage.label(MASK)[0]
# Positional extras for the callables that need more than the image (others take it alone).
EXTRA: dict[str, tuple[Any, ...]] = {
    "affine_transform": (np.eye(2),),
    "convolve": (np.ones((3, 3)),),
    "correlate": (np.ones((3, 3)),),
    "convolve1d": (np.ones(3),),
    "correlate1d": (np.ones(3),),
    "gaussian_filter": (1.0,),
    "gaussian_filter1d": (1.0,),
    "gaussian_gradient_magnitude": (1.0,),
    "gaussian_laplace": (1.0,),
    "generic_filter": (np.mean, 3),
    "generic_filter1d": (lambda i, o: o.__setitem__(slice(None), i[1:-1]), 3),
    "generic_gradient_magnitude": (scipy.ndimage.sobel,),
    "generic_laplace": (scipy.ndimage.sobel,),
    "map_coordinates": (np.array([[1.5, 2.0], [3.0, 4.5]]),),
    "maximum_filter": (3,),
    "maximum_filter1d": (3,),
    "median_filter": (3,),
    "minimum_filter": (3,),
    "minimum_filter1d": (3,),
    "percentile_filter": (50, 3),
    "rank_filter": (2, 3),
    "uniform_filter1d": (3,),
    "rotate": (30,),
    "shift": (1.5,),
    "zoom": (1.5,),
    "fourier_ellipsoid": (2.0,),
    "fourier_gaussian": (2.0,),
    "fourier_shift": (1.5,),
    "fourier_uniform": (2.0,),
    "geometric_transform": (lambda c: (c[0] * 0.5, c[1] * 0.5),),
    "spline_filter1d": (),
    "value_indices": (),
}
BINARY = {n for n in dir(scipy.ndimage) if n.startswith("binary_")} | {
    "distance_transform_bf",
    "distance_transform_cdt",
    "distance_transform_edt",
    "label",
}
LABELED = {"find_objects", "value_indices"}
MEASUREMENTS = {
    "center_of_mass",
    "extrema",
    "histogram",
    "labeled_comprehension",
    "maximum",
    "maximum_position",
    "mean",
    "median",
    "minimum",
    "minimum_position",
    "standard_deviation",
    "sum",
    "sum_labels",
    "variance",
    "watershed_ift",
}
NOT_ARRAY_IN = {
    "generate_binary_structure",
    "iterate_structure",
    "morphological_laplace",
    "morphological_gradient",
    "grey_closing",
    "grey_dilation",
    "grey_erosion",
    "grey_opening",
    "black_tophat",
    "white_tophat",
}


def _call_for(name: str) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """Arguments a tensor-taking call of scipy.ndimage.<name> can use, or None to skip."""
    if name in MEASUREMENTS:
        extra: tuple[Any, ...] = (np.array(LABELS, dtype=np.int32),) if name != "histogram" else (0.0, 1.0, 4)
        if name == "labeled_comprehension":
            return (IMAGE, LABELS, [1, 2], np.mean, float, 0.0), {}
        if name == "watershed_ift":
            return (np.asarray(IMAGE * 100, dtype=np.uint8), np.asarray(LABELS, dtype=np.int32)), {}
        return (IMAGE, *extra), {}
    if name in ("generate_binary_structure", "iterate_structure"):
        return None
    if name in NOT_ARRAY_IN:
        return (IMAGE,), {"size": 3}
    if name == "vectorized_filter":
        return (IMAGE, np.mean), {"size": 3}
    if name in BINARY:
        return (MASK,), {}
    if name in LABELED:
        return (LABELS,), {}
    return (IMAGE, *EXTRA.get(name, ())), {}


PUBLIC = sorted(
    n
    for n in scipy.ndimage.__all__
    if callable(getattr(scipy.ndimage, n)) and not isinstance(getattr(scipy.ndimage, n), type)
)


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_ndimage_callable_takes_tensors(name: str) -> None:
    """Each public callable of scipy.ndimage, called with tensors, equals the NumPy call."""
    call = _call_for(name)
    if call is None:
        pytest.skip(f"{name} takes no array input")
    args, kwargs = call
    expected = getattr(scipy.ndimage, name)(*args, **kwargs)
    tensors = [torch.from_numpy(np.array(a)) if isinstance(a, np.ndarray) else a for a in args]
    got = getattr(ndi, name)(*tensors, **kwargs)
    _same(got, expected)


def test_module_view_is_lazy_cached_and_mirrors_the_module() -> None:
    view = ac.torchify(scipy.ndimage, copy=True)
    assert isinstance(view, types.ModuleType) and view.__name__ == "scipy.ndimage"
    assert "gaussian_filter" not in vars(view)
    first = view.gaussian_filter
    assert view.gaussian_filter is first and "gaussian_filter" in vars(view)
    assert dir(view) == dir(scipy.ndimage)
    assert repr(view) == "<torchified module 'scipy.ndimage'>"


def test_numpy_itself_ufuncs_dispatchers_and_plain_types() -> None:
    tnp = ac.torchify(np)
    x = torch.tensor([1.0, -2.0], dtype=torch.bfloat16)
    assert torch.equal(tnp.abs(x), torch.tensor([1.0, 2.0], dtype=torch.bfloat16))
    assert tnp.concatenate([x, x]).shape == (4,)
    assert tnp.linalg.norm(torch.tensor([3.0, 4.0])).item() == 5.0  # a submodule, torchified on access
    assert tnp.float32 is np.float32 and tnp.pi == np.pi and tnp.linalg.LinAlgError is np.linalg.LinAlgError
    assert tnp._NoValue is np._NoValue  # private names pass through


def test_an_estimator_class_fits_on_tensors_and_chains() -> None:
    TWhitener = ac.torchify(Whitener)  # noqa: N806 - a class, named as one
    x = torch.randn(200, 3, dtype=torch.float64) * torch.tensor([1.0, 5.0, 0.2], dtype=torch.float64)
    model = TWhitener(eps=1e-9)
    assert isinstance(model, Whitener) and isinstance(model, TWhitener)
    out = model.fit(x).transform(x)  # fit returns self: the proxy, so the chain keeps taking tensors
    assert isinstance(out, torch.Tensor) and out.shape == (200, 3)
    assert torch.allclose(torch.cov(out.T), torch.eye(3, dtype=torch.float64), atol=1e-6)
    assert isinstance(model.mean_, torch.Tensor) and model.eps == 1e-9
    assert model.__wrapped__.mean_.shape == (3,) and isinstance(model.__wrapped__, Whitener)


def test_attribute_reads_follow_the_device_of_the_last_tensors() -> None:
    model = ac.torchify(Whitener).identity(2)  # a classmethod building an instance: a proxy too
    assert isinstance(model.mean_, torch.Tensor) and model.mean_.device.type == "cpu"
    with pytest.raises(ac.ConversionError):  # meta tensors hold no data, but the device is recorded
        model.transform(torch.empty(1, 2, device="meta"))
    assert model.mean_.device.type == "meta"


def test_attribute_reads_take_an_explicit_dtype_and_else_the_config_block_s() -> None:
    """``dtype=`` (resolved once per torchified class) casts what is read off its objects;
    "input" has no inputs there, so reads keep NumPy's dtype; without one a config block's applies."""
    x = torch.randn(20, 2, dtype=torch.float64)
    assert ac.torchify(Whitener, dtype=torch.float32)().fit(x).mean_.dtype == torch.float32
    assert ac.torchify(Whitener, dtype="input")().fit(x.float()).components_.dtype == torch.float64  # np.cov
    model = ac.torchify(Whitener)().fit(x)
    assert model.mean_.dtype == torch.float64
    with ac.config(dtype=torch.float16):
        assert model.mean_.dtype == torch.float16


def test_setting_attributes_stores_arrays_and_proxies_pickle() -> None:
    model = ac.torchify(Whitener)()
    model.mean_ = torch.zeros(2)
    model.components_ = torch.eye(2)
    assert isinstance(model.__wrapped__.mean_, np.ndarray)
    restored = pickle.loads(pickle.dumps(model))
    assert torch.equal(restored.transform(torch.ones(1, 2)), torch.ones(1, 2))
    assert pickle.loads(pickle.dumps(ndi)).gaussian_filter(torch.zeros(3), 1.0).shape == (3,)


def test_a_proxy_loaded_where_its_device_is_absent_forgets_it() -> None:
    """A proxy keeps the device of the tensors last passed to it through pickling; loaded in
    a process without that device (a model fitted on ``cuda:63``, loaded on this machine),
    it reads back on torch's default device until a call records a device again."""
    model = ac.torchify(Whitener).identity(2)
    with pytest.raises(ac.ConversionError):  # meta tensors hold no data, but the device is recorded
        model.transform(torch.empty(1, 2, device="meta"))
    assert pickle.loads(pickle.dumps(model)).mean_.device.type == "meta"  # present here: kept
    object.__setattr__(model, "_self_device", torch.device("cuda", 63))  # as recorded on a machine with it
    restored = pickle.loads(pickle.dumps(model))
    assert restored._self_device is None and restored.mean_.device.type == "cpu"
    with torch.device("meta"):
        assert restored.mean_.device.type == "meta"
    assert restored.transform(torch.ones(1, 2, dtype=torch.float64)).device.type == "cpu"


def test_options_are_checked() -> None:
    with pytest.raises(TypeError, match=r"autoconvert\.torchify\(\) got unknown option\(s\) only"):
        ac.torchify(np, only="x")


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("kind", ["a module's function with a rule", "a numpy_op", "a partial of one"])
def test_a_torch_op_is_returned_as_it_is_its_gradient_kept(kind: str) -> None:
    """A torch op takes tensors and gives their gradient: torchify converting them first
    dropped the gradient, with a warning naming an internal function."""
    op = {
        "a module's function with a rule": ndi.gaussian_filter,
        "a numpy_op": ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x)),
        "a partial of one": functools.partial(ndi.gaussian_filter, sigma=1.0),
    }[kind]
    made = ac.torchify(op)
    assert made is op if kind != "a partial of one" else made.func is op.func and made.keywords == op.keywords
    x = torch.rand(4, 5, dtype=torch.float64, requires_grad=True)
    y = made(x) if kind == "a numpy_op" else made(x, sigma=1.0) if kind != "a partial of one" else made(x)
    y.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_instances_classes_and_views_read_naturally() -> None:
    """An existing object can be torchified; views are idempotent; statics, constants, repr, dir."""
    from .estimators import Clipper

    raw = Clipper()
    proxy = ac.torchify(raw)
    assert ac.torchify(proxy) is proxy and ac.torchify(ndi) is ndi
    assert torch.equal(proxy.apply(torch.tensor([-3.0, 0.5])), torch.tensor([-1.0, 0.5]))
    assert torch.equal(proxy.clip(torch.tensor([5.0]), 2.0), torch.tensor([2.0]))  # a staticmethod via the object
    TClipper = ac.torchify(Clipper)  # noqa: N806 - a class, named as one
    assert TClipper.limit == 1.0 and TClipper.__name__ == "Clipper"
    assert torch.equal(TClipper.clip(torch.tensor([-5.0]), 1.0), torch.tensor([-1.0]))
    assert repr(TClipper) == "<torchified class tests.estimators.Clipper>"
    assert repr(proxy).startswith("torchified(<tests.estimators.Clipper object")
    assert "apply" in dir(proxy) and proxy.__wrapped__ is raw


def test_a_torchified_callable_object_is_called_through_the_conversion() -> None:
    """A KDE density for a loss, as the authors of density-based sampling code write it:
    ``torchify(gaussian_kde(samples))(points)`` takes and returns tensors."""
    samples = torch.randn(200, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    kde = ac.torchify(scipy.stats.gaussian_kde(samples))
    density = kde(torch.zeros(3, dtype=torch.float64))
    expected = scipy.stats.gaussian_kde(samples.numpy())(np.zeros(3))
    assert isinstance(density, torch.Tensor) and np.allclose(density.numpy(), expected)
    built = ac.torchify(scipy.stats.gaussian_kde)(samples)  # the class torchified, then called
    assert torch.equal(built(torch.zeros(3, dtype=torch.float64)), density)
    again = pickle.loads(pickle.dumps(kde))
    assert callable(again) and torch.equal(again(torch.zeros(3, dtype=torch.float64)), density)


def test_a_transform_object_is_callable_and_other_proxies_are_not() -> None:
    """Speech and imaging pipelines keep NumPy transform objects (``Resample()(signal)``)."""

    class Resample:
        def __init__(self, factor: int) -> None:
            self.factor = factor

        def __call__(self, signal: np.ndarray) -> np.ndarray:
            return signal[:: self.factor].copy()

    resample = ac.torchify(Resample(2))
    assert torch.equal(resample(torch.arange(6.0)), torch.tensor([0.0, 2.0, 4.0]))
    frozen = ac.torchify(scipy.stats.norm(0, 1))  # a frozen distribution has no __call__
    assert not callable(frozen)
    with pytest.raises(TypeError, match="not callable"):
        frozen(torch.zeros(1))


def test_an_object_whose_call_is_no_python_function_is_wrapped_once() -> None:
    """A class whose ``__call__`` is a builtin (here a ufunc, a C type's slot elsewhere) has
    no method to generate: its call is wrapped on the first call and kept, as a callable the
    object holds is, not made again per call."""

    class Negate:
        __call__ = np.negative  # a ufunc is no descriptor: Negate()(x) is np.negative(x)

    negate = ac.torchify(Negate())
    assert torch.equal(negate(torch.ones(2)), -torch.ones(2))
    first = negate._self_bound["__call__"]
    assert torch.equal(negate(torch.arange(3.0)), -torch.arange(3.0))
    assert negate._self_bound["__call__"] is first


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("median_filter", lambda m, x: m.ndimage.median_filter(x, 3)),
        ("gaussian_filter", lambda m, x: m.ndimage.gaussian_filter(x, 1.0)),
        ("zoom", lambda m, x: m.ndimage.zoom(x, 2)),
        ("convolve", lambda m, x: m.ndimage.convolve(x, np.ones((3, 3), np.float32))),
        ("medfilt", lambda m, x: m.signal.medfilt(x[0], 3)),
    ],
)
def test_scipy_modules_widen_float16_and_narrow_the_results_back(name: str, call: Any) -> None:
    """whisper's alignment code medfilts float16 attention weights after a hand-written
    ``.float()``: torchified SciPy takes float16 as float32 (lossless) and returns float16,
    exactly SciPy's float32 answer rounded to float16."""
    import scipy.signal

    x = torch.rand(12, 12, generator=torch.Generator().manual_seed(1)).half()
    torchified = types.SimpleNamespace(ndimage=ac.torchify(scipy.ndimage), signal=ac.torchify(scipy.signal))
    plain = types.SimpleNamespace(ndimage=scipy.ndimage, signal=scipy.signal)
    out = call(torchified, x)
    expected = torch.from_numpy(np.asarray(call(plain, x.float().numpy()))).half()
    assert out.dtype == torch.float16 and torch.equal(out, expected), name
    with pytest.raises((RuntimeError, ValueError), match="not supported"):  # what a user hit before
        call(plain, x.numpy())


def test_widen_float16_is_an_option_of_accepts_numpy_and_config() -> None:
    @ac.returns_tensor
    @ac.accepts_numpy(widen_float16=True)
    def smooth(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, str]:
        return scipy.ndimage.uniform_filter(a, 3), a.dtype.name

    smoothed, seen = smooth(torch.ones(5, dtype=torch.float16), torch.ones(1, dtype=torch.float16))
    assert seen == "float32" and smoothed.dtype == torch.float16
    mixed, _ = smooth(torch.ones(5, dtype=torch.float16), torch.ones(1))  # a float32 argument: no narrowing
    assert mixed.dtype == torch.float32
    plain = ac.accepts_numpy(lambda a: a.dtype.name)
    with ac.config(widen_float16=True):
        assert plain(torch.ones(1, dtype=torch.float16)) == "float32"
    assert plain(torch.ones(1, dtype=torch.float16)) == "float16"
    numpy_view = ac.torchify(np)  # NumPy handles float16 itself: not widened
    assert numpy_view.sin(torch.zeros(1, dtype=torch.float16)).dtype == torch.float16


def test_torchify_caches_are_bounded_and_wrap_each_callable_once() -> None:
    """The sweep's cases: 20,000 lookups of missing names grew the class cache by 20,000
    entries; a callable stored on the object, and a staticmethod read off the class, were
    wrapped again (a new plan, ~0.3-0.5 ms) on every access."""

    class Legacy:
        def __init__(self) -> None:
            self.transform = np.negative  # a callable stored as an instance attribute

        @staticmethod
        def scale(x: np.ndarray) -> np.ndarray:
            return x * 2

    torchified = ac.torchify(Legacy)
    obj = torchified()
    for i in range(2000):
        with pytest.raises(AttributeError):
            getattr(obj, f"missing_{i}")
    assert len(obj._self_class._methods) <= len(dir(Legacy))  # only names the class has
    assert torchified.scale is torchified.scale  # one wrapper per static attribute
    assert torch.equal(torchified.scale(torch.ones(2)), torch.full((2,), 2.0))
    assert torch.equal(obj.transform(torch.ones(2)), -torch.ones(2))
    first = obj._self_bound["transform"]
    obj.transform(torch.ones(2))
    assert obj._self_bound["transform"] is first  # not wrapped again
    obj.transform = np.positive  # replaced: wrapped anew
    assert torch.equal(obj.transform(torch.ones(2)), torch.ones(2))


def test_methods_become_the_proxy_types_own_and_no_proxy_holds_itself() -> None:
    """After the first access a method is a plain attribute of the class's own proxy type; the
    object is freed when its last proxy goes, with no cycle for the collector to find."""
    import gc
    import weakref

    torchified = ac.torchify(Whitener)
    model = torchified().fit(torch.randn(20, 3))
    assert "transform" not in type(model).__dict__
    model.transform(torch.randn(2, 3))
    assert "transform" in type(model).__dict__ and isinstance(model.transform, types.MethodType)
    assert type(torchified()) is type(model)  # one proxy type per torchified class
    assert type(ac.torchify(Whitener)()) is not type(model)  # another view, its own type

    gc.disable()
    try:
        target = Whitener()
        alive = weakref.ref(target)
        proxy = ac.torchify(target)
        proxy.fit(torch.randn(20, 3)).transform(torch.randn(2, 3))
        del target, proxy
        assert alive() is None
    finally:
        gc.enable()


def test_a_static_method_is_cached_on_the_view_and_a_factory_returns_a_proxy() -> None:
    """The second access of a static or class method is a plain attribute read of the view;
    a factory's instance is a proxy of the view's own proxy type, as the constructor's is."""
    torchified = ac.torchify(Whitener)
    built = torchified.identity(2)
    assert "identity" in vars(torchified) and isinstance(built, Whitener) and type(built) is not Whitener
    assert type(built) is type(torchified()) and built._self_class is torchified
    assert torch.equal(built.transform(torch.ones(1, 2, dtype=torch.float64)), torch.ones(1, 2, dtype=torch.float64))


class _Pairs:
    """A class whose static method returns its own instances in a container."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def apply(self, x: np.ndarray) -> np.ndarray:
        return x * self.scale

    @staticmethod
    def both(x: np.ndarray) -> dict[str, Any]:
        return {"half": _Pairs(0.5), "mean": x.mean()}


def test_a_static_methods_objects_in_a_container_come_back_as_proxies() -> None:
    """Static methods take a module function's plan: objects of the class's package come back
    as proxies wherever the result holds them, on the device of the call's tensors."""
    made = ac.torchify(_Pairs).both(torch.ones(3))
    assert isinstance(made["half"], _Pairs) and type(made["half"]) is not _Pairs
    assert torch.equal(made["half"].apply(torch.ones(2)), torch.full((2,), 0.5))
    assert torch.equal(made["mean"], torch.tensor(1.0, dtype=torch.float32))


def test_a_method_is_called_on_the_object_itself_never_on_a_converted_copy() -> None:
    """The object is the method's instance, as ``obj.fit(...)`` makes it: never walked as an
    argument (a dataclass holding a tensor would be rebuilt with an array, and fit the copy)."""

    @dataclasses.dataclass
    class Shift:
        offset: Any
        fitted: bool = False

        def fit(self, x: np.ndarray) -> Shift:
            self.fitted = True
            return self

        def apply(self, x: np.ndarray, *, scale: float = 1.0) -> np.ndarray:
            return (x + np.asarray(self.offset)) * scale

    obj = Shift(torch.ones(2))
    view = ac.torchify(obj)
    assert view.fit(torch.zeros(2)) is view and obj.fitted and type(obj.offset) is torch.Tensor
    assert view.apply(torch.zeros(2), scale=2.0).tolist() == [2.0, 2.0]
    # The method binds as the function does, and records the device of each call's tensors.
    with pytest.raises(TypeError, match=r"Shift\.apply\(\) missing 1 required positional argument: 'x'"):
        view.apply(scale=2.0)
    with pytest.raises(ac.ConversionError):
        view.apply(torch.zeros(2, device="meta"))
    assert view.offset.device.type == "meta"
    view.apply(x=torch.zeros(2))
    assert view.offset.device.type == "cpu"


@pytest.mark.parametrize("call", ["positional", "keywords"])  # the flat call, and the generic one
def test_a_method_called_without_tensors_returns_them_where_the_object_s_tensors_are(call: str) -> None:
    """``kde.resample(10)`` hands no tensor to follow: its results go where the object's
    attributes read back (the device of the tensors last passed to it), not to torch's
    default device; an object that never met a tensor follows the default, ``device=`` wins."""

    def resample(kde: Any) -> torch.Tensor:
        drawn = kde.resample(4, 0) if call == "positional" else kde.resample(size=4, seed=np.random.default_rng(0))
        assert isinstance(drawn, torch.Tensor) and drawn.shape == (2, 4)
        return drawn

    points = torch.randn(2, 30, dtype=torch.float64)
    kde = ac.torchify(scipy.stats.gaussian_kde)(points)
    with torch.device("meta"):
        assert resample(kde).device.type == "cpu" and kde.dataset.device.type == "cpu"
    with pytest.raises(ac.ConversionError):  # meta tensors hold no data, but the device is recorded
        kde(torch.empty(2, 1, dtype=torch.float64, device="meta"))
    assert resample(kde).device.type == "meta" and kde.dataset.device.type == "meta"
    assert kde(points[:, :3]).device.type == "cpu"  # tensors to follow: theirs
    assert resample(kde).device.type == "cpu"

    unplaced = ac.torchify(scipy.stats.gaussian_kde(points.numpy()))  # never met a tensor
    with torch.device("meta"):
        assert resample(unplaced).device.type == "meta"
    assert resample(unplaced).device.type == "cpu"

    placed = ac.torchify(scipy.stats.gaussian_kde, device="meta")(points)  # its tensors on the CPU
    assert placed.dataset.device.type == "cpu" and resample(placed).device.type == "meta"

    frozen = ac.torchify(scipy.stats).norm(torch.zeros(3, dtype=torch.float64), 1.0)  # a method's object
    with pytest.raises(ac.ConversionError):
        frozen.cdf(torch.empty(3, dtype=torch.float64, device="meta"))
    assert frozen.rvs(size=3, random_state=0).device.type == "meta"


def _combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a + 2 * b


def test_a_callable_the_object_holds_takes_the_method_plan_too() -> None:
    """A callable stored on the object (a bound method of it, a function) is called as it is:
    its parameters are named from the first, the call's tensors set the device attribute
    reads follow, and a result that is the object comes back as the proxy."""

    class Model:
        def __init__(self) -> None:
            self.weights = np.ones(2)
            self.refit = self.fit  # a bound method of the object, held as an attribute
            self.combine = _combine  # a function, never bound

        def fit(self, x: np.ndarray) -> Model:
            self.weights = np.asarray(x).mean(axis=0)
            return self

    view = ac.torchify(Model())
    assert view.refit(torch.ones(3, 2)) is view  # the object itself: the proxy, so chains go on
    assert torch.equal(view.combine(torch.zeros(2), torch.ones(2)), torch.full((2,), 2.0))
    with pytest.raises(ac.ConversionError) as raised:
        view.combine(torch.zeros(2), torch.zeros(2, device="meta"))
    assert str(raised.value) == (
        "_combine(): argument b is a meta tensor, which holds no data. Found torch.Tensor(shape=(2,), "
        "dtype=torch.float32, layout=torch.strided, device=meta). Fix: run the call on tensors with real data."
    )
    assert view.weights.device.type == "cpu"  # a CPU and a meta tensor share no device: it stays
    with pytest.raises(ac.ConversionError):
        view.refit(torch.zeros(1, 2, device="meta"))
    assert view.weights.device.type == "meta"


def test_explain_tells_a_torchified_object_s_method_call() -> None:
    """``explain(view.name)`` on a torchified object explains the method's own plan: the
    method form its proxy type calls, which calls the function on the object itself."""

    class Scaler:
        def scale(self, a: np.ndarray) -> np.ndarray:
            return a * 2

    view = ac.torchify(Scaler())
    view.combine = _combine
    explained = ac.explain(view.scale)
    assert explained.function.endswith("Scaler.scale()") and explained.path == ("flat" if _spec.enabled else "generic")
    assert explained.parameters == (("self", "the instance: never converted"), ("a", "converted"))
    held = ac.explain(view.combine)
    assert held.function == "_combine()" and held.parameters == (("a", "converted"), ("b", "converted"))
    if _spec.enabled:  # the generated forms (the suite's --generic-calls turns them off)
        # The function itself on the object; its guard takes a refusal of read-only arrays (see _guards).
        assert explained.source is not None and "    result = callee(target, c1)\n" in explained.source
        assert held.source is not None and "def call(wrapped, instance, args, kwargs):" in held.source
    with pytest.raises(TypeError) as raised:  # the class's own function: nothing autoconvert made
        ac.explain(Scaler.scale)
    assert str(raised.value) == (
        "autoconvert.explain() explains what autoconvert made (a decorated, torchified or adapted function, a "
        f"numpy_op, a batched function); got {Scaler.scale.__qualname__}() (function). Fix: pass the decorated "
        "function itself"
    )


class _Bag:
    """A container-like class: its protocols live on its type, where Python looks them up."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.entered = 0

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, key: Any) -> Any:
        return self.values[key]

    def __contains__(self, value: Any) -> bool:
        return bool(np.any(self.values == value))

    def __enter__(self) -> _Bag:
        self.entered += 1
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.entered -= 1


def test_a_proxy_forwards_the_protocols_its_class_has_converting_as_its_methods_do() -> None:
    bag = ac.torchify(_Bag)(torch.arange(4.0))
    assert len(bag) == 4 and 2.0 in bag and torch.tensor(2.0) in bag and 7.0 not in bag
    assert torch.equal(bag[1], torch.tensor(1.0, dtype=torch.float32))
    assert torch.equal(bag[torch.tensor([0, 2])], torch.tensor([0.0, 2.0]))  # a tensor key, an array's index
    assert [v.item() for v in bag] == [0.0, 1.0, 2.0, 3.0]  # the sequence protocol, items as tensors
    with bag as entered:
        assert entered is bag and bag.__wrapped__.entered == 1
    assert bag.__wrapped__.entered == 0 and bool(bag)


def test_a_proxy_has_no_protocol_its_class_lacks() -> None:
    """No __len__ of ours on a class without one: ``bool(proxy)`` stays True, as for the object."""
    whitener = ac.torchify(Whitener)()
    assert not any(hasattr(type(whitener), name) for name in ("__len__", "__iter__", "__enter__", "__bool__"))
    assert bool(whitener)


def test_numpy_s_context_managers_and_iterators_work_through_torchify() -> None:
    tnp = ac.torchify(np)
    with tnp.errstate(divide="ignore"):  # no RuntimeWarning: the block silences it
        assert torch.isinf(tnp.divide(torch.ones(1), torch.zeros(1))).all()
    assert [v.item() for v in tnp.nditer(torch.arange(3.0))] == [0.0, 1.0, 2.0]
    poly = tnp.poly1d(torch.tensor([1.0, 2.0]))
    assert len(poly) == 1 and torch.equal(poly[0], torch.tensor(2.0, dtype=torch.float64))


def test_a_torchified_object_handed_back_to_scipy_arrives_as_the_object_itself() -> None:
    """SciPy's functions and methods take their own objects: a tree's ``query_ball_tree(other)``
    type-checks ``other``, and csgraph reads ``graph.tocsr().astype()``, which a view's
    tensors lack. Both used to fail on the proxy; they now get what it stands for."""
    import scipy.sparse
    import scipy.spatial

    tsp = ac.torchify(scipy)
    rng = np.random.default_rng(1)
    left, right = rng.random((12, 2)), rng.random((9, 2))
    tree = tsp.spatial.cKDTree(torch.from_numpy(left))
    other = tsp.spatial.cKDTree(torch.from_numpy(right))
    expected = scipy.spatial.cKDTree(left).query_ball_tree(scipy.spatial.cKDTree(right), 0.3)
    assert tree.query_ball_tree(other, 0.3) == expected

    adjacency = np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]], dtype=np.float64)
    graph = tsp.sparse.csr_matrix(torch.from_numpy(adjacency))
    count, labels = tsp.sparse.csgraph.connected_components(graph)
    expected_count, expected_labels = scipy.sparse.csgraph.connected_components(scipy.sparse.csr_matrix(adjacency))
    assert count == expected_count == 2
    _same(labels, expected_labels)


def test_every_torchified_view_crosses_to_numpy_as_what_it_stands_for() -> None:
    """A module (an ``xp`` argument), a class and an object, bare or inside a container, reach a
    NumPy-side function as the originals; to_numpy and returns_numpy give the originals too.
    The tensor side leaves them as they are."""
    import scipy.spatial

    tnp, tsp = ac.torchify(np), ac.torchify(scipy)
    tree = tsp.spatial.cKDTree(torch.rand(5, 2))
    seen: list[Any] = []

    @ac.accepts_numpy
    def take(xp: Any, cls: Any, things: dict[str, Any]) -> None:
        seen.extend([xp, cls, things["tree"]])

    take(tnp, tsp.spatial.cKDTree, {"tree": tree})
    assert seen == [np, scipy.spatial.cKDTree, tree.__wrapped__]
    assert ac.to_numpy([tree])[0] is tree.__wrapped__
    assert ac.returns_numpy(lambda: tree)() is tree.__wrapped__
    assert ac.accepts_tensor(lambda view: view)(tree) is tree


def test_scipy_stats_distributions_take_and_return_tensors_frozen_or_not() -> None:
    """``scipy.stats.norm`` is an object, not a function: its methods (``pdf``, ``ppf``, ``rvs``)
    returned arrays through the view, and ``norm(0, 2)``'s frozen distribution too. A
    distribution is now a proxy, and an object of SciPy's that a proxy's method returns
    (a frozen distribution, a ``Rotation``'s ``inv()``) comes back as a proxy."""
    import scipy.spatial.transform

    stats = ac.torchify(scipy.stats)
    x = np.linspace(-2.0, 2.0, 7)
    t = torch.from_numpy(x)
    assert isinstance(stats.norm, scipy.stats.rv_continuous)
    for name, method, extra in [
        ("norm", "pdf", ()),
        ("norm", "logcdf", ()),
        ("norm", "ppf", ()),
        ("t", "sf", (3,)),
        ("chi2", "cdf", (2,)),
        ("poisson", "pmf", (2.0,)),
    ]:
        value = np.abs(x) / 4 if method == "ppf" else np.round(np.abs(x)) if name == "poisson" else x
        got = getattr(getattr(stats, name), method)(torch.from_numpy(value), *extra)
        _same(got, getattr(getattr(scipy.stats, name), method)(value, *extra))
    _same(stats.norm.rvs(size=3, random_state=0), scipy.stats.norm.rvs(size=3, random_state=0))

    frozen = stats.norm(0.5, 2.0)
    assert isinstance(frozen, type(scipy.stats.norm(0.5, 2.0)))
    _same(frozen.cdf(t), scipy.stats.norm(0.5, 2.0).cdf(x))
    mean = np.array([0.5, -1.0])
    _same(
        stats.multivariate_normal(mean=torch.from_numpy(mean)).logpdf(torch.zeros(3, 2, dtype=torch.float64)),
        scipy.stats.multivariate_normal(mean=mean).logpdf(np.zeros((3, 2))),
    )
    # SciPy 1.17's Rotation.apply refuses read-only arrays (a Cython memoryview): its guard copies.
    angle = torch.tensor([90.0], dtype=torch.float64)  # float64 on SciPy's own torch path too (its array API mode)
    turn = ac.torchify(scipy.spatial.transform).Rotation.from_euler("z", angle, degrees=True)
    back = turn.inv().apply(torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64))
    assert isinstance(back, torch.Tensor) and torch.allclose(back, torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64))


def test_objects_a_module_function_returns_come_back_as_proxies() -> None:
    """``tnp.random.default_rng(0)`` gave NumPy's Generator itself, so ``rng.normal()`` was an
    array in the middle of tensor code; an object of the function's package now comes back as
    a torchified object, also inside a container (``minimize``'s ``hess_inv``). Functions,
    ufuncs and values pass as before."""
    import scipy.interpolate
    import scipy.optimize

    tnp, tsp = ac.torchify(np), ac.torchify(scipy)
    rng = tnp.random.default_rng(0)
    assert isinstance(rng, np.random.Generator)
    _same(rng.normal(size=3), np.random.default_rng(0).normal(size=3))
    x, y = np.arange(5.0), np.arange(5.0) ** 2
    spline = tsp.interpolate.make_interp_spline(torch.from_numpy(x), torch.from_numpy(y))
    _same(spline(torch.tensor([1.5], dtype=torch.float64)), scipy.interpolate.make_interp_spline(x, y)([1.5]))
    fit = tsp.optimize.minimize(
        lambda v: ((v - 1.0) ** 2).sum(), torch.zeros(2, dtype=torch.float64), method="L-BFGS-B"
    )
    assert isinstance(fit.hess_inv, scipy.optimize.LbfgsInvHessProduct)
    assert isinstance(fit.hess_inv.todense(), torch.Tensor)
    assert isinstance(tnp.frompyfunc(abs, 1, 1), np.ufunc)  # a ufunc is called, not proxied
    default_rng = pickle.loads(pickle.dumps(tnp.random.default_rng))  # the plan's kind travels
    assert isinstance(default_rng(1).integers(0, 10, size=2), torch.Tensor)


def test_a_dataclass_with_methods_of_the_package_keeps_its_methods_converting() -> None:
    """``stats.ecdf(t).cdf`` (SciPy's EmpiricalDistributionFunction, a dataclass with
    ``evaluate`` and ``confidence_interval``) came back as a copy with every field a tensor,
    private state included: ``evaluate`` returned an array and ``confidence_interval`` raised
    a TypeError from torch. A dataclass with methods of its own comes back with its public
    fields as tensors and its methods running on the original, taking and giving tensors
    (``quantile_test``'s result too, whose ``confidence_interval`` gave NumPy floats), as
    through the decorators (test_results); one with none (``ECDFResult``) stays a record."""
    x = np.random.default_rng(0).normal(size=40)
    got, expected = ac.torchify(scipy.stats).ecdf(torch.from_numpy(x)), scipy.stats.ecdf(x)
    assert type(got) is scipy.stats._survival.ECDFResult
    assert isinstance(got.cdf, scipy.stats._survival.EmpiricalDistributionFunction)
    _same(got.cdf.quantiles, expected.cdf.quantiles)
    points = np.array([-0.5, 0.0, 0.5])
    _same(got.sf.evaluate(torch.from_numpy(points)), expected.sf.evaluate(points))
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The confidence interval is undefined", RuntimeWarning)
        interval, wanted = got.cdf.confidence_interval(0.9), expected.cdf.confidence_interval(0.9)
    assert type(interval) is type(wanted)
    test = ac.torchify(scipy.stats).quantile_test(torch.from_numpy(x), q=0.0)  # returned whole
    _same(test.confidence_interval(0.9).low, scipy.stats.quantile_test(x, q=0.0).confidence_interval(0.9).low)


def test_objects_inside_a_method_s_result_come_back_as_proxies() -> None:
    """``rng.spawn(2)`` gave NumPy's Generators themselves in its list, so ``kids[0].normal()``
    was an array: a method's result was made a proxy only where it was the object of the
    package itself, not inside a container, as a function's is. Both now are."""
    kids = ac.torchify(np).random.default_rng(0).spawn(2)
    assert type(kids) is list and all(isinstance(kid, np.random.Generator) for kid in kids)
    _same(kids[1].normal(size=3), np.random.default_rng(0).spawn(2)[1].normal(size=3))
    x = np.random.default_rng(1).normal(size=30)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The confidence interval is undefined", RuntimeWarning)
        interval = ac.torchify(scipy.stats).ecdf(torch.from_numpy(x)).cdf.confidence_interval()
        wanted = scipy.stats.ecdf(x).cdf.confidence_interval()
    _same(interval.low.probabilities, wanted.low.probabilities)
    _same(interval.high.evaluate(torch.tensor([0.0], dtype=torch.float64)), wanted.high.evaluate([0.0]))


def test_a_torchified_ufunc_s_methods_convert_as_the_ufunc_does() -> None:
    """``tnp.subtract.outer`` (pairwise differences) returned an array and ``tnp.add.reduce`` handed
    NumPy the tensor itself (a DeprecationWarning about torch's ``__array_wrap__``): a ufunc's
    methods were the ufunc's own. They now convert as the ufunc does, and survive pickling."""
    tnp = ac.torchify(np)
    a, b = np.arange(3.0), np.array([0.5, 2.0])
    _same(tnp.subtract.outer(torch.from_numpy(a), torch.from_numpy(b)), np.subtract.outer(a, b))
    _same(tnp.maximum.reduce(torch.from_numpy(a)), np.maximum.reduce(a))
    _same(tnp.add.accumulate(torch.from_numpy(a)), np.add.accumulate(a))
    _same(tnp.add.reduceat(torch.from_numpy(a), [0, 2]), np.add.reduceat(a, [0, 2]))
    _same(pickle.loads(pickle.dumps(tnp.add)).reduce(torch.from_numpy(a)), np.add.reduce(a))
    assert tnp.add.nin == 2 and tnp.add(torch.ones(1), 1.0).item() == 2.0


def test_ufunc_at_on_a_tensor_is_refused_by_default_and_written_back_when_asked() -> None:
    """``ufunc.at`` ignores the read-only flag before NumPy 2.5, so ``tnp.add.at(t, idx, 1)``
    changed the caller's tensor behind the read-only guarantee. It is a ReadOnlyError, as on
    NumPy 2.5; with ``writeback=True`` the scatter reaches the tensor."""
    t = torch.zeros(3)
    with pytest.raises(ac.ReadOnlyError, match=r"^add\.at\(\): argument a was written into by the function"):
        ac.torchify(np).add.at(t, [0, 0], 1.0)
    assert torch.equal(t, torch.zeros(3))
    ac.torchify(np, writeback=True).add.at(t, torch.tensor([0, 0, 2]), 1.0)
    assert torch.equal(t, torch.tensor([2.0, 0.0, 1.0]))


class _Scaler:
    @staticmethod
    def twice(x: np.ndarray) -> np.ndarray:
        return x * 2


def test_threads_reading_a_fresh_name_get_one_wrapper() -> None:
    """Six threads reading the same name of a fresh torchified module, or a torchified class's
    static method, at once: one wrapper for all (one per-wrapper state), not six."""
    import scipy.special

    barrier = threading.Barrier(6, timeout=10)

    def read(view: Any, name: str) -> Any:
        barrier.wait()
        return getattr(view, name)

    for view, name in ((ac.torchify(scipy.special), "expit"), (ac.torchify(_Scaler), "twice")):
        with ThreadPoolExecutor(6) as pool:
            seen = list(pool.map(read, [view] * 6, [name] * 6))
        assert all(s is seen[0] for s in seen) and getattr(view, name) is seen[0]
