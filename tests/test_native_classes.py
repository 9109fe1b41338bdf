"""``torchify(module, native=...)`` for classes: SciPy's declared classmethods, constructors and
the objects they make (``Rotation``, ``Slerp``), and scikit-learn's estimators by their tags.

Each object's route is decided where it is made: one made on the library's own torch path
holds tensors, and every method of it is called as it is. SciPy's array API mode (and
scikit-learn's dispatch, which needs it) is read when SciPy is imported, so the tests that
need it run in a process of their own (``test_scipy_s_array_api_mode``, which reruns this file
there); the suite's own process checks what holds with the mode off.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.spatial
import scipy.spatial.transform
import torch
from hypothesis import given
from hypothesis import strategies as hst
from torch.autograd import forward_ad

import autoconvert as ac
from autoconvert._adapters._scipy import SciPy, _array_api
from autoconvert._adapters._sklearn import ScikitLearn
from autoconvert._torchify._leaving import Leaving

from .modes import IN_MODE as MODE
from .modes import rerun_test

DECLARES = _array_api() is not None
in_mode = pytest.mark.skipif(
    not (MODE and DECLARES), reason="needs SciPy's array API mode, in a SciPy that declares its torch paths"
)
HAS_SKLEARN = importlib.util.find_spec("sklearn") is not None
in_dispatch = pytest.mark.skipif(
    not (MODE and HAS_SKLEARN and ScikitLearn().torch_mode() is None),
    reason="needs scikit-learn's array API dispatch, and SciPy's mode",
)
#: SciPy declares Rotation's constructor too (1.18 declares the class, every method with it; 1.17
#: its methods one by one, the constructor and ``random`` not among them).
CONSTRUCTS = DECLARES and SciPy().declared_torch_path(scipy.spatial.transform.Rotation.__init__) is None
# torch 2.13's asarray, called by SciPy's torch code (array-api-compat) on a tensor that requires grad.
pytestmark = pytest.mark.filterwarnings("ignore:torch.asarray. unspecified requires_grad:UserWarning")


test_scipy_s_array_api_mode = rerun_test(
    __file__,
    "needs SciPy's array API mode" if DECLARES else None,
    "This file's tests that need SciPy's array API mode, in a process with it on.",
)


@contextlib.contextmanager
def _unwritten(*tensors: torch.Tensor) -> Iterator[None]:
    """Asserts the block writes nothing into ``tensors``: their bits and ``_version`` alike."""
    before = [(t.detach().numpy().tobytes(), t._version) for t in tensors]
    yield
    assert [(t.detach().numpy().tobytes(), t._version) for t in tensors] == before


def _holds_tensors(obj: Any) -> bool:
    """Whether the proxy ``obj`` was made on its library's own torch path."""
    return bool(obj._self_class.holds_tensors)


# --------------------------------------------------------------------------- either way


@pytest.mark.skipif(MODE, reason="SciPy's array API mode is on in this process")
def test_without_the_mode_classes_convert_and_native_true_says_how_to_turn_it_on() -> None:
    view = ac.torchify(scipy.spatial.transform)
    rotation = view.Rotation.from_euler("z", torch.tensor([0.5], dtype=torch.float64))
    assert not _holds_tensors(rotation) and ac.explain(view.Rotation).notes == ()
    assert ac.explain(view.Rotation.from_euler).path != "native"
    off = (
        "SciPy's array API mode is off. Fix: set SCIPY_ARRAY_API=1 before SciPy is imported"
        if DECLARES
        else "this SciPy declares no torch path of its own (SciPy's array API mode declares one)"
    )
    with pytest.raises(ValueError) as raised:
        ac.torchify(scipy.spatial.transform.Rotation, native=True)
    assert str(raised.value) == (
        f"autoconvert.torchify(native=True): scipy.spatial.transform._rotation.Rotation has no torch path of its own: "
        f"{off}"
    )


@pytest.mark.skipif(MODE, reason="SciPy's array API mode is on in this process")
@pytest.mark.skipif(not DECLARES, reason="this SciPy declares no torch path of its own")
def test_without_the_mode_a_classmethod_says_why_and_how_to_keep_its_gradient() -> None:
    """explain's note and the gradient warning of a classmethod SciPy declares a torch path
    for say how to take it, as a module's function does."""
    from_euler = ac.torchify(scipy.spatial.transform.Rotation).from_euler
    assert ac.explain(from_euler).notes == (
        "SciPy's own torch path is not taken: SciPy's array API mode is off. Fix: set SCIPY_ARRAY_API=1 before "
        "SciPy is imported",
    )
    with pytest.warns(ac.GradientWarning) as warned:
        from_euler("z", torch.tensor([0.5], dtype=torch.float64, requires_grad=True))
    assert str(warned[0].message) == _kept_by_the_mode("Rotation.from_euler", "angles")


@pytest.mark.skipif(MODE, reason="SciPy's array API mode is on in this process")
@pytest.mark.skipif(not DECLARES, reason="this SciPy declares no torch path of its own")
def test_without_the_mode_an_objects_method_says_how_to_keep_its_gradient() -> None:
    """The gradient warning of a method SciPy declares a torch path for, called on an object
    made by converting, says how to take that path, as its classmethods do."""
    rotation = ac.torchify(scipy.spatial.transform).Rotation.from_euler("z", torch.tensor([0.5]))
    with pytest.warns(ac.GradientWarning) as warned:
        rotation.apply(torch.ones(1, 3, requires_grad=True))
    assert str(warned[0].message) == _kept_by_the_mode("Rotation.apply", "vectors")


def _kept_by_the_mode(function: str, argument: str) -> str:
    """The gradient warning of a SciPy function whose own torch path, off, would keep it."""
    return (
        f"{function}(): argument {argument} requires grad, and NumPy code cannot pass gradients back: it was "
        "detached, so no gradient flows through this call. To keep the gradient, set SCIPY_ARRAY_API=1 before SciPy "
        f"is imported: SciPy runs {function} on torch tensors itself, gradients kept, and torchify's "
        "native='auto' (the default) takes that path. To silence this, pass grad='detach' (in the ac.torchify(..., "
        "grad='detach') call that made it, or a with ac.config(grad='detach'): block around the call; grad='error' "
        "forbids it), or call under torch.no_grad()"
    )


@pytest.mark.skipif(MODE, reason="SciPy's array API mode is on in this process")
@pytest.mark.skipif(not DECLARES, reason="this SciPy declares no torch path of its own")
def test_the_mode_asked_for_after_scipy_was_imported_is_said_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    """SciPy reads SCIPY_ARRAY_API once, when imported: set later, the note says so."""
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    assert ac.explain(ac.torchify(scipy.spatial.transform.Rotation).from_quat).notes == (
        "SciPy's own torch path is not taken: SciPy's array API mode is off: SCIPY_ARRAY_API=1 was set after SciPy "
        "was imported, and SciPy reads it once, when first imported. Fix: set it before SciPy is imported (in the "
        "shell, or at the top of the program's first module)",
    )


@pytest.mark.slow
@pytest.mark.skipif(not DECLARES, reason="this SciPy declares no torch path of its own")
def test_in_the_mode_scipy_s_torch_asarray_warning_stays_inside_the_native_call() -> None:
    """torch 2.13 warns once per process of torch.asarray's new requires_grad default, which
    SciPy's torch code meets on the first tensor that requires grad: in a fresh process in the
    mode, under warnings as errors, a native call with one raises no warning."""
    code = textwrap.dedent(
        """\
        import warnings
        warnings.simplefilter("error")
        import scipy.spatial.transform, torch, autoconvert as ac
        rotation = ac.torchify(scipy.spatial.transform).Rotation
        assert ac.explain(rotation.from_euler).path == "native"
        angles = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
        rotation.from_euler("zy", angles).apply(torch.ones(3, dtype=torch.float64)).sum().backward()
        assert angles.grad is not None
        torch.asarray(torch.ones(1, requires_grad=True))  # spent: torch warns once per process
        """
    )
    env = {**os.environ, "SCIPY_ARRAY_API": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


# --------------------------------------------------------------------------- SciPy's classes


def _angles() -> torch.Tensor:
    return torch.tensor([[0.3, -0.4], [1.1, 0.2]], dtype=torch.float64, requires_grad=True)


@in_mode
def test_a_declared_classmethod_makes_an_object_whose_methods_keep_the_gradient() -> None:
    """``Rotation.from_euler`` of a tensor that requires grad: ``as_matrix`` and ``apply`` give
    SciPy's values on arrays, the gradient flows back to the angles (gradcheck), and nothing
    is written into the arguments."""
    view = ac.torchify(scipy.spatial.transform)
    angles, points = _angles(), torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], dtype=torch.float64)
    on_arrays = scipy.spatial.transform.Rotation.from_euler("zy", angles.detach().numpy())
    with _unwritten(angles, points):
        rotation = view.Rotation.from_euler("zy", angles)
        assert _holds_tensors(rotation) and isinstance(rotation, scipy.spatial.transform.Rotation)
        matrix, moved, quat = rotation.as_matrix(), rotation.apply(points), rotation.as_quat()
        inverse, twice, squared = rotation.inv(), rotation * rotation, rotation**2
        assert _holds_tensors(inverse) and _holds_tensors(twice) and _holds_tensors(squared)
        combined, inverted = twice.as_matrix(), inverse.as_quat()
    for got, expected in [
        (matrix, on_arrays.as_matrix()),
        (moved, on_arrays.apply(points.numpy())),
        (quat, on_arrays.as_quat()),
        (combined, (on_arrays * on_arrays).as_matrix()),
        (squared.as_matrix(), (on_arrays**2).as_matrix()),
        (inverted, on_arrays.inv().as_quat()),
    ]:
        assert type(got) is torch.Tensor and got.requires_grad
        np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a: view.Rotation.from_euler("zy", a).as_matrix(), (_angles(),))
    assert torch.autograd.gradcheck(
        lambda a, p: (view.Rotation.from_euler("zy", a) * view.Rotation.from_euler("zy", a)).apply(p),
        (_angles(), points.clone().requires_grad_()),
    )


@in_mode
@pytest.mark.filterwarnings("error::autoconvert.GradientWarning")
@pytest.mark.parametrize("kind", ["CubicSpline", "interp1d", "RegularGridInterpolator"])
def test_in_the_mode_an_interpolator_the_catalogue_has_keeps_its_gradients(kind: str) -> None:
    """The catalogue's interpolators built through a module torchified with native="auto": where
    SciPy takes no torch path of its own for them, they are built as with native=False, their
    calls keeping the gradient of the values they were built from and of the points."""
    knots = torch.linspace(0, 3, 7, dtype=torch.float64)
    at = torch.tensor([0.3, 1.1, 2.9], dtype=torch.float64)

    def read(values: torch.Tensor, points: torch.Tensor, native: str | bool) -> torch.Tensor:
        interpolate = ac.torchify(scipy.interpolate, native=native)
        if kind == "RegularGridInterpolator":
            return interpolate.RegularGridInterpolator((knots,), values)(points[:, None])
        made = interpolate.CubicSpline(knots, values) if kind == "CubicSpline" else interpolate.interp1d(knots, values)
        return made(points)  # type: ignore[no-any-return]

    got, expected = [], []
    for native, found in (("auto", got), (False, expected)):
        values, points = torch.sin(knots).requires_grad_(), at.clone().requires_grad_()
        result = read(values, points, native)
        result.sum().backward()
        found += [result.detach(), values.grad, points.grad]
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)


@in_mode
def test_explain_says_which_path_a_classmethod_and_a_method_take_and_stats_count_them() -> None:
    view = ac.torchify(scipy.spatial.transform)
    rotation = view.Rotation.from_euler("z", torch.tensor([0.5], dtype=torch.float64))
    assert ac.explain(view.Rotation.from_euler).path == "native" == ac.explain(rotation.__mul__).path
    explained = ac.explain(rotation.as_matrix)
    assert (explained.path, explained.why) == (
        "native",
        "Rotation.as_matrix() is called on the object as it is, its tensors handed as they are: SciPy declares a "
        "torch path for Rotation.as_matrix. A call with a NumPy array, or an object made by converting, raises.",
    )
    constructed = (
        "Rotation(...) with tensors (and no NumPy array) runs on SciPy's own torch path, and so does every method "
        "of the object it makes; made otherwise, an object converts"
    )
    converted = (
        "Rotation(...) takes its arguments converted (SciPy declares no array API support for it); the object it "
        "makes keeps SciPy's own torch path for all its methods where SciPy declares one for that object, as does "
        "one a classmethod makes on that path"
    )
    assert ac.explain(view.Rotation).notes == ((constructed,) if CONSTRUCTS else (converted,))
    assert ac.explain(rotation).notes == (
        "It was made on SciPy's own torch path and holds tensors: each of its methods is called as it is",
    )
    with ac.stats() as counted:
        view.Rotation.from_euler("z", torch.tensor([0.5], dtype=torch.float64)).as_matrix()
        rotation.apply(torch.ones(3, dtype=torch.float64))
        view.Rotation.from_euler("z", np.array([0.5])).as_matrix()  # an array: converts
    assert (counted["Rotation.from_euler"].calls, counted["Rotation.from_euler"].native) == (2, 1)
    assert (counted["Rotation.as_matrix"].calls, counted["Rotation.as_matrix"].native) == (2, 1)
    assert (counted["Rotation.apply"].calls, counted["Rotation.apply"].native) == (1, 1)


@in_mode
def test_an_object_made_from_arrays_converts_and_arrays_never_reach_one_made_from_tensors() -> None:
    view = ac.torchify(scipy.spatial.transform)
    converted = view.Rotation.from_euler("z", np.array([0.5]))
    assert not _holds_tensors(converted) and type(converted.as_matrix()) is torch.Tensor
    assert ac.explain(converted).notes == (
        "Its methods convert: it was made by converting, and SciPy declares no torch path for the object itself "
        "(SciPy declares no array API support for it)",
    )
    native = view.Rotation.from_euler("z", torch.tensor([0.5], dtype=torch.float64))
    with pytest.raises(ac.ConversionError) as raised:
        native.apply(np.ones(3))
    assert str(raised.value) == (
        "Rotation.apply(): argument vectors is a NumPy array, which the library's torch path does not mix. Found a "
        "NumPy array. Fix: pass tensors (and objects made from tensors): SciPy declares a torch path for "
        "Rotation.apply."
    )
    with pytest.raises(ac.ConversionError) as mixed:
        native * converted
    assert str(mixed.value) == (
        "Rotation.__mul__(): argument other is an object made by converting, which holds NumPy arrays. Found an object "
        "made by converting. Fix: pass tensors (and objects made from tensors): SciPy declares a torch path for "
        "Rotation.__mul__."
    )


@in_mode
def test_a_declared_constructor_takes_tensors_and_its_object_pickles() -> None:
    """``Slerp(times, rotations)`` with tensors is made on SciPy's own path; it and a native
    Rotation pickle as native proxies."""
    view = ac.torchify(scipy.spatial.transform)
    times, angles = torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    with _unwritten(times, angles):
        slerp = view.Slerp(times, view.Rotation.from_euler("z", angles))
        assert _holds_tensors(slerp)
        halfway = slerp(torch.tensor([0.5], dtype=torch.float64))
    assert _holds_tensors(halfway)
    torch.testing.assert_close(halfway.as_euler("zyx"), torch.tensor([[0.5, 0.0, 0.0]], dtype=torch.float64))
    assert ac.explain(view.Slerp).notes == (
        "Slerp(...) with tensors (and no NumPy array) runs on SciPy's own torch path, and so does every method of "
        "the object it makes; made otherwise, an object converts",
    )
    again = pickle.loads(pickle.dumps(halfway))
    assert _holds_tensors(again) and torch.equal(again.as_quat(), halfway.as_quat())


@in_mode
@pytest.mark.parametrize("read_from", ["module", "class"])
def test_a_declared_classmethod_pickles_and_keeps_its_path(read_from: str) -> None:
    """A classmethod SciPy declares a torch path for, read from a torchified module or class
    (``view.Rotation.from_euler``), pickles as what it was read from, as a converting one
    does, and runs on SciPy's path once loaded: the gradient flows."""
    module = ac.torchify(scipy.spatial.transform)
    rotations = module.Rotation if read_from == "module" else ac.torchify(scipy.spatial.transform.Rotation)
    from_euler = pickle.loads(pickle.dumps(rotations.from_euler))
    angles = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    pose = from_euler("z", angles)
    assert _holds_tensors(pose)
    pose.as_quat().sum().backward()
    assert angles.grad is not None


@in_mode
def test_native_true_refuses_a_class_a_classmethod_and_a_constructor_without_a_torch_path() -> None:
    with pytest.raises(ValueError) as of_a_class:
        ac.torchify(scipy.spatial.KDTree, native=True)
    assert str(of_a_class.value) == (
        "autoconvert.torchify(native=True): scipy.spatial._kdtree.KDTree has no torch path of SciPy's own: SciPy "
        "declares no array API support for it, and none for any of its methods. Fix: native='auto' converts where "
        "there is none"
    )
    rotations = ac.torchify(scipy.spatial.transform.Rotation, native=True)
    assert _holds_tensors(rotations.from_euler("z", torch.tensor([0.5])))
    if CONSTRUCTS:  # then random and the constructor are declared with the class
        assert _holds_tensors(rotations(torch.tensor([0.0, 0.0, 0.0, 1.0])))
        return
    with pytest.raises(ValueError) as of_a_classmethod:
        rotations.random
    assert str(of_a_classmethod.value) == (
        "autoconvert.torchify(native=True): scipy.spatial.transform._rotation.Rotation.random has no torch path of "
        "SciPy's own: SciPy declares no array API support for it. Fix: native='auto' converts where there is none"
    )
    with pytest.raises(ValueError) as of_a_constructor:
        rotations(torch.tensor([0.0, 0.0, 0.0, 1.0]))
    assert str(of_a_constructor.value) == (
        "autoconvert.torchify(native=True): scipy.spatial.transform._rotation.Rotation(...) has no torch path of "
        "SciPy's own: SciPy declares no array API support for it. Fix: native='auto' converts where there is none"
    )


def _rotation_stays_on(device: torch.device) -> None:
    """A native Rotation made from tensors on ``device``: its results stay there with no
    conversion's copy (a transfers='error' block lets every call through), the gradient flows
    back to the angles there, and the values are SciPy's on arrays."""
    view = ac.torchify(scipy.spatial.transform)
    angles = _angles().detach().to(device).requires_grad_()
    points = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], dtype=torch.float64, device=device)
    on_arrays = scipy.spatial.transform.Rotation.from_euler("zy", angles.detach().cpu().numpy())
    with ac.config(transfers="error"):
        rotation = view.Rotation.from_euler("zy", angles)
        matrix, moved, inverse = rotation.as_matrix(), rotation.apply(points), rotation.inv().as_quat()
    assert _holds_tensors(rotation)
    for got, expected in [
        (matrix, on_arrays.as_matrix()),
        (moved, on_arrays.apply(points.cpu().numpy())),
        (inverse, on_arrays.inv().as_quat()),
    ]:
        assert type(got) is torch.Tensor and got.device == angles.device and got.requires_grad
        np.testing.assert_allclose(got.detach().cpu().numpy(), expected, rtol=1e-12, atol=1e-12)
    moved.sum().backward()
    assert angles.grad is not None and angles.grad.device == angles.device
    assert torch.autograd.gradcheck(lambda a: view.Rotation.from_euler("zy", a).apply(points), (angles,))


@in_mode
def test_a_native_rotation_keeps_its_tensors_on_the_cpu() -> None:
    _rotation_stays_on(torch.device("cpu"))


@in_mode
def test_a_native_rotation_keeps_its_tensors_on_the_accelerator(accelerator: torch.device) -> None:
    _rotation_stays_on(accelerator)


# --------------------------------------------------------------------------- scikit-learn's estimators


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(40, 4, dtype=torch.float64, generator=generator)
    return x, (x[:, 0] + 0.3 * x[:, 1] > 0).long()


def _estimators() -> list[tuple[str, str, dict[str, Any], str]]:
    """(module, estimator, parameters, method called after fit), for estimators whose tags
    declare array API support."""
    return [
        ("preprocessing", "StandardScaler", {}, "transform"),
        ("decomposition", "PCA", {"n_components": 2}, "transform"),
        ("discriminant_analysis", "LinearDiscriminantAnalysis", {}, "transform"),
        ("linear_model", "Ridge", {"alpha": 0.5, "solver": "svd"}, "predict"),
    ]


@in_dispatch
@pytest.mark.parametrize(("module", "name", "parameters", "method"), _estimators())
def test_an_estimator_declaring_array_api_support_runs_natively(
    module: str, name: str, parameters: dict[str, Any], method: str
) -> None:
    """Made through the torchified module, fitted and called on tensors: scikit-learn's values
    on arrays, tensors kept (attributes too), nothing written into the inputs, explain and
    stats say native, and the fitted proxy pickles."""
    import importlib

    import sklearn

    library = importlib.import_module(f"sklearn.{module}")
    x, y = _data()
    target = x[:, 2].clone() if name == "Ridge" else y
    estimator = getattr(ac.torchify(library), name)(**parameters)
    assert _holds_tensors(estimator)
    with _unwritten(x, target), ac.stats() as counted:
        got = getattr(estimator.fit(x, target), method)(x)
    expected_estimator = getattr(library, name)(**parameters).fit(x.numpy(), target.numpy())
    expected = getattr(expected_estimator, method)(x.numpy())
    assert type(got) is torch.Tensor
    # Components and discriminants are defined up to their sign, which the two paths' solvers choose apart.
    np.testing.assert_allclose(np.abs(got.numpy()), np.abs(expected), rtol=1e-7, atol=1e-9)
    assert not sklearn.get_config()["array_api_dispatch"]  # switched on around each call alone
    called = [getattr(type(expected_estimator), m).__qualname__ for m in ("fit", method)]  # _BasePCA.transform
    assert {function: row.native for function, row in counted.functions.items()} == dict.fromkeys(called, 1)
    assert ac.explain(getattr(estimator, method)).path == "native"
    again = pickle.loads(pickle.dumps(estimator))
    assert _holds_tensors(again) and torch.equal(getattr(again, method)(x), got)


def _estimator_stays_on(device: torch.device, module: str, name: str, parameters: dict[str, Any], method: str) -> None:
    """A native estimator fitted and called on tensors on ``device``: results and fitted
    attributes stay there with no conversion's copy, with scikit-learn's values on arrays."""
    import importlib

    library = importlib.import_module(f"sklearn.{module}")
    x, y = _data()
    target = x[:, 2].clone() if name == "Ridge" else y
    estimator = getattr(ac.torchify(library), name)(**parameters)
    with ac.config(transfers="error"):
        got = getattr(estimator.fit(x.to(device), target.to(device)), method)(x.to(device))
    assert _holds_tensors(estimator) and type(got) is torch.Tensor and got.device == x.to(device).device
    fitted = [v for k, v in vars(estimator.__wrapped__).items() if k.endswith("_") and isinstance(v, torch.Tensor)]
    assert fitted and all(t.device == got.device for t in fitted)
    expected = getattr(getattr(library, name)(**parameters).fit(x.numpy(), target.numpy()), method)(x.numpy())
    np.testing.assert_allclose(np.abs(got.cpu().numpy()), np.abs(expected), rtol=1e-7, atol=1e-9)


@in_dispatch
@pytest.mark.parametrize(("module", "name", "parameters", "method"), _estimators())
def test_a_native_estimator_keeps_its_tensors_on_the_cpu(
    module: str, name: str, parameters: dict[str, Any], method: str
) -> None:
    _estimator_stays_on(torch.device("cpu"), module, name, parameters, method)


@in_dispatch
@pytest.mark.parametrize(("module", "name", "parameters", "method"), _estimators())
def test_a_native_estimator_keeps_its_tensors_on_the_accelerator(
    accelerator: torch.device, module: str, name: str, parameters: dict[str, Any], method: str
) -> None:
    _estimator_stays_on(accelerator, module, name, parameters, method)


@in_dispatch
def test_gradients_flow_through_native_estimators_where_scikit_learn_s_code_allows() -> None:
    """A fitted scaler's ``transform`` and a PCA fitted by ``covariance_eigh`` keep the graph
    (gradcheck); a full-SVD PCA's ``fit_transform`` writes in place what its backward needs,
    which torch refuses."""
    import sklearn.decomposition
    import sklearn.preprocessing

    preprocessing, decomposition = ac.torchify(sklearn.preprocessing), ac.torchify(sklearn.decomposition)
    x = _data()[0][:12, :3].clone().requires_grad_()
    scaler = preprocessing.StandardScaler().fit(x.detach())
    assert torch.autograd.gradcheck(scaler.transform, (x,))
    assert torch.autograd.gradcheck(
        lambda t: decomposition.PCA(2, svd_solver="covariance_eigh").fit_transform(t).abs(), (x,)
    )
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        decomposition.PCA(2).fit_transform(x).sum().backward()


def _leaving_fit(name: str, grad: str | None, block: str | None) -> tuple[Any, torch.Tensor, list[str]]:
    """``name`` (an estimator whose torch path hands its tensors to SciPy's NumPy optimizers)
    fitted natively on an X that requires grad, torchified with ``grad`` (None: not given),
    in a ``config(grad=block)`` block (None: none): the estimator, X, and the GradientWarnings."""
    import sklearn.linear_model

    x, y = _data()
    x = x.clone().requires_grad_()
    target = y if name == "LogisticRegression" else y.double() + 1.0
    options = {} if grad is None else {"grad": grad}
    estimator = getattr(ac.torchify(sklearn.linear_model, **options), name)()
    with warnings.catch_warnings(record=True) as caught, ac.config(**({} if block is None else {"grad": block})):
        warnings.simplefilter("always", ac.GradientWarning)
        assert estimator.fit(x, target) is estimator
    return estimator, x, [str(w.message) for w in caught if w.category is ac.GradientWarning]


_FIT = {"LogisticRegression": "LogisticRegression.fit", "PoissonRegressor": "_GeneralizedLinearRegressor.fit"}
_LEAVES = (
    "requires grad, and scikit-learn's own torch path for this call hands it to NumPy, which cannot pass gradients back"
)
#: LogisticRegression's lbfgs objective takes a float of a loss computed from X before it hands X
#: to NumPy: grad="error" refuses it there.
_NUMBER = (
    "requires grad, and scikit-learn's own torch path for this call turns it into a Python number, which carries "
    "no gradient"
)


@in_dispatch
@pytest.mark.parametrize("name", sorted(_FIT))
def test_a_native_estimator_handing_tensors_to_numpy_detaches_them_with_a_gradient_warning(name: str) -> None:
    """scikit-learn's torch path for some estimators hands the tensors to SciPy's NumPy
    optimizers itself, where torch refuses one that requires grad: by default it is detached
    there with a GradientWarning naming the argument, as the converting call does, and the
    estimator fits; what scikit-learn computes in torch afterwards keeps its gradient."""
    estimator, x, said = _leaving_fit(name, None, None)
    assert said == [
        f"{_FIT[name]}(): argument X {_LEAVES}: it was detached, so no gradient flows through this call. To keep "
        f"the gradient, compute {_FIT[name]} with torch operations: scikit-learn's own torch path for it leaves "
        "torch. To silence this, pass grad='detach' (in the ac.torchify(..., grad='detach') call that made it, or "
        "a with ac.config(grad='detach'): block around the call; grad='error' forbids it), or call under "
        "torch.no_grad()"
    ]
    assert not any(t.requires_grad for t in vars(estimator.__wrapped__).values() if isinstance(t, torch.Tensor))
    with warnings.catch_warnings():  # fitted again: detached as before, said once per function
        warnings.simplefilter("error", ac.GradientWarning)
        assert estimator.fit(x, estimator.predict(x.detach())) is estimator
    scores = estimator.predict(x) if name == "PoissonRegressor" else estimator.predict_proba(x)[:, 1]
    scores.sum().backward()
    assert x.grad is not None and bool(x.grad.abs().sum() > 0)


@in_dispatch
@pytest.mark.parametrize(("grad", "block"), [("error", None), (None, "error"), ("error", "detach")])
def test_a_native_estimator_handing_tensors_to_numpy_refuses_them_under_grad_error(
    grad: str | None, block: str | None
) -> None:
    """``grad="error"``, given to torchify or by a config block, raises GradientError naming
    the argument and the fixes where scikit-learn's torch path hands a tensor that requires
    grad to NumPy, or into a Python number first; one given to torchify wins over a block's."""
    with pytest.raises(ac.GradientError) as info:
        _leaving_fit("LogisticRegression", grad, block)
    site = (
        "where grad='error' was given, so a config block cannot change it"
        if grad
        else "or a with ac.config(grad='detach'): block around the call"
    )
    assert str(info.value) == (
        f"LogisticRegression.fit(): argument X {_NUMBER}. Found torch.Tensor(shape=(40, 4), dtype=torch.float64, "
        "layout=torch.strided, device=cpu). Fix: pass X.detach(), call under torch.no_grad(), or allow it detached "
        f"with grad='detach' (in the ac.torchify(..., grad='detach') call that made it, {site}; grad='warn' says so "
        "once); to keep the gradient, compute LogisticRegression.fit with torch operations: scikit-learn's own "
        "torch path for it leaves torch."
    )


@in_dispatch
@pytest.mark.parametrize(("grad", "block"), [("detach", None), (None, "detach")])
def test_a_native_estimator_handing_tensors_to_numpy_detaches_them_silently_under_grad_detach(
    grad: str | None, block: str | None
) -> None:
    """``grad="detach"`` (torchify's or a block's) detaches them without a word."""
    estimator, _, said = _leaving_fit("PoissonRegressor", grad, block)
    assert said == [] and estimator.coef_.shape == (4,)


@in_dispatch
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")  # torch's own, from make_dual's first use
@pytest.mark.parametrize("grad", [None, "error", "detach"])
def test_a_native_estimator_handing_a_dual_tensor_to_numpy_applies_grad(grad: str | None) -> None:
    """A dual tensor (forward_ad.make_dual) leaves torch with no refusal, its tangent dropped:
    the call is watched, and grad= applies where it leaves, as for one that requires grad."""
    import sklearn.linear_model

    x, y = _data()
    estimator = ac.torchify(sklearn.linear_model, **({} if grad is None else {"grad": grad})).LogisticRegression()
    with forward_ad.dual_level(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ac.GradientWarning)
        dual = forward_ad.make_dual(x, torch.ones_like(x))
        if grad == "error":
            with pytest.raises(ac.GradientError) as info:
                estimator.fit(dual, y)
        else:
            assert estimator.fit(dual, y) is estimator
    said = [str(w.message) for w in caught if w.category is ac.GradientWarning]
    carries = (
        "LogisticRegression.fit(): argument X carries a forward-mode tangent (a dual tensor of "
        "torch.autograd.forward_ad), and scikit-learn's own torch path for this call "
    )
    handed, number = "hands it to NumPy, which cannot pass gradients back", _NUMBER.partition("this call ")[2]
    keep = "compute LogisticRegression.fit with torch operations: scikit-learn's own torch path for it leaves torch"
    if grad == "error":
        assert str(info.value) == (
            f"{carries}{number}. Found torch.Tensor(shape=(40, 4), dtype=torch.float64, layout=torch.strided, device=cpu). "
            "Fix: pass X.detach(), call outside forward_ad.dual_level(), or allow it detached with grad='detach' (in "
            "the ac.torchify(..., grad='detach') call that made it, where grad='error' was given, so a config block "
            f"cannot change it; grad='warn' says so once); to keep the gradient, {keep}."
        )
    assert said == (
        []
        if grad is not None
        else [
            f"{carries}{handed}: it was detached, so no gradient flows through this call. To keep the gradient, {keep}. To "
            "silence this, pass grad='detach' (in the ac.torchify(..., grad='detach') call that made it, or a with "
            "ac.config(grad='detach'): block around the call; grad='error' forbids it), or call outside "
            "forward_ad.dual_level()"
        ]
    )


@in_dispatch
def test_a_native_estimator_keeping_its_gradient_is_not_detached() -> None:
    """Where scikit-learn's torch code keeps the gradient through ``fit`` (a ridge by SVD), the
    tensors are not detached up front: the fitted coefficients carry it, with no warning."""
    import sklearn.linear_model

    x, y = _data()
    x = x.clone().requires_grad_()
    ridge = ac.torchify(sklearn.linear_model).Ridge(solver="svd").fit(x, y.double())
    ridge.coef_.sum().backward()
    assert x.grad is not None and bool(x.grad.abs().sum() > 0)


@in_dispatch
def test_an_estimator_made_with_tensor_parameters_holds_them_as_scikit_learn_does() -> None:
    """scikit-learn's constructors only store their parameters: a tensor ``alpha`` or
    ``priors`` is stored as it is, as called directly, so the estimator fits on its torch path
    (not refused as one holding NumPy arrays), and the gradient flows into ``alpha``."""
    import sklearn
    import sklearn.discriminant_analysis
    import sklearn.linear_model

    x, y = _data()
    linear_model = ac.torchify(sklearn.linear_model)
    alpha = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    ridge = linear_model.Ridge(alpha=alpha, solver="svd").fit(x, y.double())
    assert _holds_tensors(ridge) and ridge.alpha is alpha
    with sklearn.config_context(array_api_dispatch=True):
        direct = sklearn.linear_model.Ridge(alpha=alpha, solver="svd").fit(x, y.double()).coef_
    assert torch.equal(ridge.coef_.detach(), direct.detach())
    (gradient,) = torch.autograd.grad(ridge.coef_.sum(), alpha)
    assert torch.equal(gradient, torch.autograd.grad(direct.sum(), alpha)[0]) and float(gradient) != 0.0
    priors = torch.tensor([0.3, 0.7], dtype=torch.float64)
    lda = ac.torchify(sklearn.discriminant_analysis).LinearDiscriminantAnalysis(priors=priors).fit(x, y)
    with sklearn.config_context(array_api_dispatch=True):
        expected = sklearn.discriminant_analysis.LinearDiscriminantAnalysis(priors=priors).fit(x, y).predict_proba(x)
    assert torch.equal(lda.predict_proba(x), expected)


@in_dispatch
def test_an_estimator_without_array_api_support_converts() -> None:
    """RobustScaler's tags declare no support: it converts (the caller's tensor is never
    written), and native=True refuses it by name."""
    import sklearn.preprocessing

    preprocessing, x = ac.torchify(sklearn.preprocessing), _data()[0]
    robust = preprocessing.RobustScaler()
    assert not _holds_tensors(robust)
    with _unwritten(x):
        assert type(robust.fit_transform(x)) is torch.Tensor
    assert ac.explain(robust).notes == (
        "Its methods convert: it was made by converting, and scikit-learn declares no torch path for the object "
        "itself (its tags declare no array API support)",
    )
    assert ac.explain(preprocessing.StandardScaler).notes == (
        "StandardScaler(...) makes an object that takes scikit-learn's own torch path for all its methods where "
        "scikit-learn declares one for that object (it does for StandardScaler() with default parameters); any "
        "other converts",
    )
    with pytest.raises(ValueError) as of_a_class:
        ac.torchify(sklearn.preprocessing.RobustScaler, native=True)
    assert str(of_a_class.value) == (
        "autoconvert.torchify(native=True): sklearn.preprocessing._data.RobustScaler has no torch path of "
        "scikit-learn's own: RobustScaler()'s tags declare no array API support, and none for any of its methods. "
        "Fix: native='auto' converts where there is none"
    )


# --------------------------------------------------------------------------- the caller's tensors never written

#: (module, estimator, its copy parameter, its methods taking ``copy=``, the method called after fit): each
#: estimator declaring array API support that can be told not to copy.
_TOLD_NOT_TO_COPY = [
    ("preprocessing", "StandardScaler", "copy", ("transform", "inverse_transform"), "transform"),
    ("preprocessing", "MinMaxScaler", "copy", (), "transform"),
    ("preprocessing", "Binarizer", "copy", ("transform",), "transform"),
    ("preprocessing", "Normalizer", "copy", ("transform",), "transform"),
    ("preprocessing", "KernelCenterer", None, ("transform",), "transform"),
    ("decomposition", "PCA", "copy", (), "transform"),
    ("linear_model", "Ridge", "copy_X", (), "predict"),
]
#: How an estimator is told not to copy: made so, set_params, assigned, a method's keyword (by name, by position).
_SPELLINGS = ("made", "set_params", "assigned", "keyword", "keyword by position")
_NO_COPY_CASES = [
    (case, spelling)
    for case in _TOLD_NOT_TO_COPY
    for spelling in _SPELLINGS
    if (case[2] is not None) == (spelling in ("made", "set_params", "assigned")) or (case[3] and "keyword" in spelling)
]


def _told_not_to_copy(library: Any, case: tuple[Any, ...], spelling: str) -> Any:
    """The estimator of ``case`` made from ``library``, told not to copy as ``spelling`` says
    (a keyword spelling tells its methods' calls instead)."""
    _, name, flag, _, _ = case
    parameters = {"solver": "svd"} if name == "Ridge" else {}  # the solver either path takes
    if spelling == "made":
        return getattr(library, name)(**{flag: False}, **parameters)
    estimator = getattr(library, name)(**parameters)
    if spelling == "set_params":
        assert estimator.set_params(**{flag: False}) is estimator
    elif spelling == "assigned":
        setattr(estimator, flag, False)
    return estimator


def _no_copy_calls(estimator: Any, case: tuple[Any, ...], spelling: str, x: Any, y: Any) -> list[Any]:
    """The case's calls on ``estimator`` (torchified or not), each handed ``x()`` and ``y()``:
    fit (which returns the estimator), the method after it, each method taking ``copy=`` as
    the spelling says, and fit_transform."""
    _, name, _, keywords, after = case
    fitted = estimator.fit(x(), y()) if name == "Ridge" else estimator.fit(x())
    assert fitted is estimator
    results = [getattr(estimator, after)(x())]
    for method in keywords if "keyword" in spelling else ():
        call = getattr(estimator, method)
        results.append(call(x(), False) if spelling == "keyword by position" else call(x(), copy=False))
    if hasattr(estimator, "fit_transform") and name != "KernelCenterer":
        results.append(estimator.fit_transform(x()))
    return results


@in_dispatch
@given(case=hst.sampled_from(_NO_COPY_CASES), dtype=hst.sampled_from([torch.float32, torch.float64]))
def test_an_estimator_told_not_to_copy_never_writes_the_caller_s_tensors(
    case: tuple[tuple[Any, ...], str], dtype: torch.dtype
) -> None:
    """On scikit-learn's own torch path, an estimator told not to copy (its parameter made so,
    set by set_params or assigned, or a method's ``copy=False`` by name or position) is handed
    copies: the caller's tensors keep their values and versions, the results are scikit-learn's
    on arrays, and fit returns the estimator's own proxy."""
    import importlib

    (module, name, *_), spelling = case
    library = importlib.import_module(f"sklearn.{module}")
    x, _ = _data()
    x = (x @ x.T if name == "KernelCenterer" else x).to(dtype)
    y = x[:, 0].clone()
    estimator = _told_not_to_copy(ac.torchify(library), case[0], spelling)
    assert _holds_tensors(estimator)
    with _unwritten(x, y):
        got = _no_copy_calls(estimator, case[0], spelling, lambda: x, lambda: y)
    on_arrays = _told_not_to_copy(library, case[0], spelling)  # written into: each call has a fresh copy
    expected = _no_copy_calls(on_arrays, case[0], spelling, lambda: x.numpy().copy(), lambda: y.numpy().copy())
    assert len(got) == len(expected)
    tolerance = 1e-4 if dtype == torch.float32 else 1e-9
    for value, on_arrays in zip(got, expected, strict=True):
        assert type(value) is torch.Tensor and value.dtype == dtype
        np.testing.assert_allclose(np.abs(value.numpy()), np.abs(on_arrays), rtol=tolerance, atol=tolerance)


@in_dispatch
def test_writeback_true_lets_an_estimator_told_not_to_copy_write_the_caller_s_tensor() -> None:
    """``writeback=True`` is autoconvert's own way to let a library write into the caller's
    tensors: StandardScaler(copy=False) then scales it in place, natively as converting."""
    import sklearn.preprocessing

    for native in ("auto", False):
        x = _data()[0]
        scaler = ac.torchify(sklearn.preprocessing, native=native, writeback=True).StandardScaler(copy=False)
        assert _holds_tensors(scaler) is (native == "auto")
        scaler.fit(x).transform(x)
        torch.testing.assert_close(x.mean(0), torch.zeros(4, dtype=torch.float64))


def _randn(*shape: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _catalogue(dtype: torch.dtype) -> list[tuple[str, Any, list[Any]]]:
    """Every function of SciPy's classes with a torch path of its own (``Rotation``,
    ``RigidTransform``, ``Slerp``): (name, call taking the namespace and the arguments,
    makers of the arguments from the namespace), on arguments a normalising write would
    change (quaternions of any norm, matrices not orthogonal)."""
    d = dtype

    def vectors(ns: Any, seed: int = 1) -> torch.Tensor:
        return _randn(3, 3, dtype=d, seed=seed)

    def rotations(ns: Any, seed: int = 2) -> Any:
        return ns.Rotation.from_quat(_randn(3, 4, dtype=d, seed=seed))

    def transforms(ns: Any, seed: int = 3) -> Any:
        return ns.RigidTransform.from_components(vectors(ns, seed), rotations(ns, seed))

    def matrices(ns: Any) -> torch.Tensor:
        exact = torch.as_tensor(scipy.spatial.transform.Rotation.random(3, rng=0).as_matrix(), dtype=d)
        return exact + 0.05 * _randn(3, 3, 3, dtype=d, seed=4)

    def rigid(ns: Any) -> torch.Tensor:
        made = torch.zeros(3, 4, 4, dtype=d)
        made[:, :3, :3], made[:, :3, 3], made[:, 3, 3] = matrices(ns), vectors(ns), 1
        return made

    def quats(ns: Any) -> torch.Tensor:
        return 3 * _randn(3, 4, dtype=d, seed=5)

    def weights(ns: Any) -> torch.Tensor:
        return _randn(3, dtype=d, seed=6).abs()

    def axes(ns: Any) -> torch.Tensor:
        return torch.eye(3, dtype=d)

    r, t = "Rotation", "RigidTransform"
    calls: list[tuple[str, Any, list[Any]]] = [
        (f"{r}.from_quat", lambda ns, q: ns.Rotation.from_quat(q), [quats]),
        (f"{r}.from_quat", lambda ns, q: ns.Rotation.from_quat(q, scalar_first=True), [quats]),
        (f"{r}.from_matrix", lambda ns, m: ns.Rotation.from_matrix(m), [matrices]),
        (f"{r}.from_rotvec", lambda ns, v: ns.Rotation.from_rotvec(v, degrees=True), [vectors]),
        (f"{r}.from_euler", lambda ns, v: ns.Rotation.from_euler("zyx", v), [vectors]),
        (f"{r}.from_davenport", lambda ns, a, v: ns.Rotation.from_davenport(a, "e", v), [axes, vectors]),
        (f"{r}.from_mrp", lambda ns, v: ns.Rotation.from_mrp(v), [vectors]),
        (f"{r}.concatenate", lambda ns, a, b: ns.Rotation.concatenate([a, b]), [rotations, rotations]),
        (f"{r}.align_vectors", lambda ns, a, b, w: ns.Rotation.align_vectors(a, b, w), [vectors, vectors, weights]),
        (f"{r}.apply", lambda ns, r, v: r.apply(v, inverse=True), [rotations, vectors]),
        (f"{r}.__mul__", lambda ns, a, b: a * b, [rotations, rotations]),
        (f"{r}.__pow__", lambda ns, a: a**0.5, [rotations]),
        (f"{r}.inv", lambda ns, a: a.inv(), [rotations]),
        (f"{r}.magnitude", lambda ns, a: a.magnitude(), [rotations]),
        (f"{r}.approx_equal", lambda ns, a, b: a.approx_equal(b), [rotations, rotations]),
        (f"{r}.mean", lambda ns, a, w: a.mean(w), [rotations, weights]),
        (f"{r}.reduce", lambda ns, a, b: a.reduce(b), [rotations, rotations]),
        (f"{r}.__getitem__", lambda ns, a: a[0], [rotations]),
        (f"{r}.__setitem__", lambda ns, b: rotations(ns, 7).__setitem__(0, b[1]), [rotations]),
        (f"{r}.as_euler", lambda ns, a: a.as_euler("zyx"), [rotations]),
        (f"{r}.as_davenport", lambda ns, a, x: a.as_davenport(x, "e"), [rotations, axes]),
        *[(f"{r}.{n}", lambda ns, a, n=n: getattr(a, n)(), [rotations]) for n in ("as_quat", "as_matrix")],
        *[(f"{r}.{n}", lambda ns, a, n=n: getattr(a, n)(), [rotations]) for n in ("as_rotvec", "as_mrp")],
        (f"{t}.from_matrix", lambda ns, m: ns.RigidTransform.from_matrix(m), [rigid]),
        (f"{t}.from_rotation", lambda ns, r: ns.RigidTransform.from_rotation(r), [rotations]),
        (f"{t}.from_translation", lambda ns, v: ns.RigidTransform.from_translation(v), [vectors]),
        (f"{t}.from_components", lambda ns, v, r: ns.RigidTransform.from_components(v, r), [vectors, rotations]),
        (f"{t}.from_exp_coords", lambda ns, v: ns.RigidTransform.from_exp_coords(v.repeat(1, 2)), [vectors]),
        (f"{t}.from_dual_quat", lambda ns, q: ns.RigidTransform.from_dual_quat(q.repeat(1, 2)), [quats]),
        (f"{t}.concatenate", lambda ns, a, b: ns.RigidTransform.concatenate([a, b]), [transforms, transforms]),
        (f"{t}.mean", lambda ns, a, w: a.mean(w), [transforms, weights]),
        *[(f"{t}.{n}", lambda ns, a, n=n: getattr(a, n)(), [transforms]) for n in ("as_matrix", "as_components")],
        *[(f"{t}.{n}", lambda ns, a, n=n: getattr(a, n)(), [transforms]) for n in ("as_exp_coords", "as_dual_quat")],
        (f"{t}.inv", lambda ns, a: a.inv(), [transforms]),
        (f"{t}.__getitem__", lambda ns, a: a[0], [transforms]),
        (f"{t}.__setitem__", lambda ns, b: transforms(ns, 8).__setitem__(0, b[1]), [transforms]),
        (f"{t}.__mul__", lambda ns, a, b: a * b, [transforms, transforms]),
        (f"{t}.__pow__", lambda ns, a: a**2, [transforms]),
        (f"{t}.apply", lambda ns, a, v: a.apply(v, inverse=True), [transforms, vectors]),
        ("Slerp", lambda ns, t, r: ns.Slerp(t, r), [lambda ns: torch.arange(3, dtype=d), rotations]),
        (
            "Slerp.__call__",
            lambda ns, t, r: ns.Slerp(t, r)(t[1:] - 0.5),
            [lambda ns: torch.arange(3, dtype=d), rotations],
        ),
    ]
    return calls


def _state(value: Any) -> list[tuple[bytes, int]]:
    """What a write into ``value`` changes: a tensor's bits and version, or those of the
    tensors an object (a proxy's, or SciPy's own) holds."""
    if isinstance(value, torch.Tensor):
        return [(value.detach().numpy().tobytes(), value._version)]
    held = vars(getattr(value, "__wrapped__", value)).values()
    return [state for v in held if isinstance(v, torch.Tensor) for state in _state(v)]


def _written(namespace: Any, dtype: torch.dtype) -> set[str]:
    """The write-probe: each call of the catalogue in ``namespace`` on fresh arguments, each
    argument's state compared before and after; the names of the calls that wrote one."""
    written = set()
    for name, call, makers in _catalogue(dtype):
        arguments = [make(namespace) for make in makers]
        before = [_state(value) for value in arguments]
        call(namespace, *arguments)
        if [_state(value) for value in arguments] != before:
            written.add(name)
    return written


#: The calls that write their own object, never the caller's tensors: RigidTransform's ``rotation``
#: hands Rotation.from_matrix a view of the transform's own matrix, orthogonalised in place in float32.
_WRITE_THEIR_OBJECT = {torch.float32: {"RigidTransform.as_components"}, torch.float64: set()}


@in_mode
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_write_probe_finds_what_scipy_s_torch_code_writes_and_the_view_writes_nothing(dtype: torch.dtype) -> None:
    """Over every function of SciPy's classes with a torch path of its own: called on SciPy's
    classes directly, the calls that write an argument are those SciPy's adapter hands copies
    (so none is copied that does not write); called through the torchified module, on its own
    torch path, none writes the caller's arguments."""
    import autoconvert._adapters._scipy as scipy_adapter

    view = ac.torchify(scipy.spatial.transform)
    made = [make(view) for _, _, makers in _catalogue(dtype) for make in makers]
    assert all(_holds_tensors(value) for value in made if not isinstance(value, torch.Tensor))
    assert _written(view, dtype) == _WRITE_THEIR_OBJECT[dtype]
    written = _written(scipy.spatial.transform, dtype) - _WRITE_THEIR_OBJECT[dtype]
    assert written == {"Rotation.from_matrix"} == set(scipy_adapter._TORCH_WRITES)


@in_mode
def test_from_matrix_leaves_the_caller_s_matrix_and_keeps_its_gradient() -> None:
    """SciPy's torch code sets a matrix that is not orthogonal to its nearest orthogonal one in
    place: handed a copy, a float32 leaf that requires grad gives its gradient (torch refuses the
    in-place write into a leaf) and keeps its values; float64 passes gradcheck."""
    view = ac.torchify(scipy.spatial.transform)
    exact = torch.as_tensor(scipy.spatial.transform.Rotation.random(3, rng=0).as_matrix())
    matrix = (exact + 0.05 * _randn(3, 3, 3, dtype=torch.float64, seed=4)).float().requires_grad_()
    with _unwritten(matrix):
        rotation = view.Rotation.from_matrix(matrix)
        rotation.as_rotvec().sum().backward()
    assert _holds_tensors(rotation) and matrix.grad is not None and bool(matrix.grad.isfinite().all())
    on_arrays = scipy.spatial.transform.Rotation.from_matrix(matrix.detach().numpy())
    np.testing.assert_allclose(rotation.as_quat().detach().numpy(), on_arrays.as_quat(), rtol=1e-5, atol=1e-5)
    doubled = (exact + 0.05 * _randn(3, 3, 3, dtype=torch.float64, seed=4)).requires_grad_()
    assert torch.autograd.gradcheck(lambda m: view.Rotation.from_matrix(m).as_rotvec(), (doubled,))


@in_mode
def test_a_write_into_the_caller_s_tensor_no_adapter_foresaw_raises() -> None:
    """The version counters catch a write the adapter did not declare (here from_matrix's, on a
    route told nothing of it): autoconvert's error, naming the argument and the fix."""
    from autoconvert._torchify._native import NativeRoute

    route = NativeRoute(scipy.spatial.transform.Rotation.from_matrix)
    exact = torch.as_tensor(scipy.spatial.transform.Rotation.random(3, rng=0).as_matrix())
    with pytest.raises(ac.ConversionError) as raised:
        route.call((exact + 0.05 * _randn(3, 3, 3, dtype=torch.float64, seed=4),), {})
    assert str(raised.value) == (
        "Rotation.from_matrix(): argument matrix was written into by SciPy's own torch path, which is handed the "
        "caller's tensors as they are. Found a tensor whose values changed during the call. Fix: pass a copy "
        "(.clone()) to keep the original, or torchify with native=False, which hands the library a read-only copy; "
        "writeback=True lets the library write into the caller's tensors."
    )


# --------------------------------------------------------------------------- objects of either path mixed


def _mixed() -> dict[str, Any]:
    """A native Rotation, one made by converting, one of SciPy's own made from arrays, and times."""
    view = ac.torchify(scipy.spatial.transform)
    return {
        "view": view,
        "native": view.Rotation.from_euler("z", torch.tensor([[0.5], [1.0]], dtype=torch.float64)),
        "converted": view.Rotation.from_euler("z", np.array([[0.5], [1.0]])),
        "raw": scipy.spatial.transform.Rotation.from_euler("z", [[0.5], [1.0]]),
        "times": torch.tensor([0.0, 1.0], dtype=torch.float64),
    }


_NATIVE_CROSSING = (
    "is an object made on SciPy's own torch path, which holds tensors, handed to a call that converts its arguments "
    "to NumPy. Found a Rotation made on SciPy's own torch path. Fix: make it by converting (torchify with "
    "native=False, or from NumPy arrays), or pass only objects made from tensors where every call has a torch path."
)


@ac.accepts_numpy
def _quaternions_of(rotation: Any) -> Any:
    return rotation.as_quat()


_MIXED = [
    (
        "accepts_numpy(f)(native)",
        lambda m: _quaternions_of(m["native"]),
        f"_quaternions_of(): argument rotation {_NATIVE_CROSSING}",
    ),
    (
        "concatenate([native, converted])",
        lambda m: m["view"].Rotation.concatenate([m["native"], m["converted"]]),
        f"Rotation.concatenate(): argument rotations[0] {_NATIVE_CROSSING}",
    ),
    (
        "concatenate((converted, native))",
        lambda m: m["view"].Rotation.concatenate((m["converted"], m["native"])),
        f"Rotation.concatenate(): argument rotations[1] {_NATIVE_CROSSING}",
    ),
    (
        "converted * native",
        lambda m: m["converted"] * m["native"],
        f"Rotation.__mul__(): argument other {_NATIVE_CROSSING}",
    ),
    (
        "RotationSpline(times, native)",
        lambda m: m["view"].RotationSpline(m["times"], m["native"]),
        f"RotationSpline(): argument rotations {_NATIVE_CROSSING}",
    ),
    (
        "native * raw",
        lambda m: m["native"] * m["raw"],
        "Rotation.__mul__(): argument other is an object of the library holding NumPy arrays, which its torch path does "
        "not mix. Found a Rotation holding NumPy arrays. Fix: pass tensors (and objects made from tensors): SciPy "
        "declares a torch path for Rotation.__mul__.",
    ),
    (
        "native.approx_equal(converted)",
        lambda m: m["native"].approx_equal(m["converted"]),
        "Rotation.approx_equal(): argument other is an object made by converting, which holds NumPy arrays. Found an "
        "object made by converting. Fix: pass tensors (and objects made from tensors): SciPy declares a torch path "
        "for Rotation.approx_equal.",
    ),
]


@in_mode
@pytest.mark.parametrize(("call", "expected"), [case[1:] for case in _MIXED], ids=[case[0] for case in _MIXED])
def test_mixing_a_native_object_with_others_raises_autoconvert_s_error_at_any_depth(call: Any, expected: str) -> None:
    """A native object beside one made by converting or one of SciPy's own made from arrays, at
    the top level or inside a list or tuple, through a call or an operator: autoconvert's
    error with the fix, never torch's or NumPy's TypeError."""
    with pytest.raises(ac.ConversionError) as raised:
        call(_mixed())
    assert str(raised.value) == expected


@in_mode
def test_native_objects_in_a_list_take_the_native_path() -> None:
    """``Rotation.concatenate`` of native objects: on SciPy's own path, its result native too."""
    mixed = _mixed()
    with ac.stats() as counted:
        joined = mixed["view"].Rotation.concatenate([mixed["native"], mixed["native"].inv()])
    assert _holds_tensors(joined) and counted["Rotation.concatenate"].native == 1
    torch.testing.assert_close(joined.as_euler("zyx")[:, 0], torch.tensor([0.5, 1.0, -0.5, -1.0], dtype=torch.float64))


# --------------------------------------------------------------------------- what native calls return


@in_dispatch
@pytest.mark.parametrize("native", ["auto", False])
def test_a_method_returning_its_estimator_returns_its_proxy_on_either_path(native: Any) -> None:
    """``fit``, ``partial_fit`` and ``set_params`` return the estimator (scikit-learn's ``self``):
    the proxy itself on the native path as converting."""
    import sklearn.preprocessing

    x = _data()[0]
    scaler = ac.torchify(sklearn.preprocessing, native=native).StandardScaler()
    assert _holds_tensors(scaler) is (native == "auto")
    assert scaler.fit(x) is scaler and scaler.partial_fit(x) is scaler and scaler.set_params(with_std=True) is scaler


@in_mode
@pytest.mark.parametrize("native", ["auto", False])
def test_objects_inside_a_result_come_back_as_proxies_on_either_path(native: Any) -> None:
    """``Rotation.align_vectors`` returns (rotation, rssd): the rotation a proxy of its path."""
    view = ac.torchify(scipy.spatial.transform, native=native)
    a = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
    rotation, rssd = view.Rotation.align_vectors(a, b)
    assert isinstance(rotation, scipy.spatial.transform.Rotation) and type(rotation).__name__ == "TorchifiedObject"
    assert _holds_tensors(rotation) is (native == "auto")
    assert type(rssd) is torch.Tensor
    torch.testing.assert_close(rotation.apply(b), a)


@in_mode
def test_batched_refuses_a_native_object_s_method_where_it_is_applied() -> None:
    """``batched`` hands NumPy samples, which a native object's method never takes: refused
    where batched is applied, with the fixes."""
    native = _mixed()["native"]
    with pytest.raises(TypeError) as raised:
        ac.batched(native.apply)
    assert str(raised.value) == (
        "autoconvert.batched(Rotation.apply): Rotation.apply is a method of an object made on its library's own "
        "torch path, which takes tensors as they are, and batched runs its function on NumPy samples. Fix: call it "
        "on the whole batch (its library's torch code takes stacked inputs), loop over the samples in torch, or make "
        "the object by converting (torchify with native=False) to map its method with batched"
    )
    converted = _mixed()["converted"][0]  # one rotation, applied to each point
    points = torch.eye(3, dtype=torch.float64)
    torch.testing.assert_close(ac.batched(converted.apply)(points), converted.apply(points))


def _nested(value: Any, path: list[str]) -> Any:
    """``value`` inside containers, outermost first (``list``, ``tuple``, ``dict``)."""
    for kind in reversed(path):
        value = {"list": lambda v: [0.5, v], "tuple": lambda v: (v, "x"), "dict": lambda v: {"k": v, "n": None}}[kind](
            value
        )
    return value


@in_mode
@given(
    path=hst.lists(hst.sampled_from(["list", "tuple", "dict"]), max_size=3),
    kind=hst.sampled_from(["native", "converted", "raw", "array", "tensor"]),
    beside=hst.booleans(),
)
def test_the_native_route_looks_into_containers_at_any_depth(path: list[str], kind: str, beside: bool) -> None:
    """A call's arguments, nested in lists, tuples and dicts: a native object takes the native
    route, one made by converting, SciPy's own made from arrays or an array refuses it, at any
    depth, named by its place (``argument rotations[1]['k']``); a tensor inside a container
    alone does not take it (SciPy's torch code takes arrays)."""
    from autoconvert._torchify import _native

    mixed = _mixed()
    value = {
        "native": mixed["native"],
        "converted": mixed["converted"],
        "raw": mixed["raw"],
        "array": np.ones(2),
        "tensor": torch.ones(2),
    }[kind]
    route = _native.NativeRoute(scipy.spatial.transform.Rotation.concatenate)
    args = (_nested(value, path), *([mixed["native"]] if beside else []))
    declined = route.declines(args, {})
    if kind == "native" or (kind == "tensor" and (beside or not path)):
        assert declined is None
    elif kind == "tensor":
        assert declined is _native._NO_TENSOR
    else:
        expected = {"converted": _native._CONVERTED, "array": _native._ARRAY}.get(kind)
        place = "argument rotations" + "".join({"list": "[1]", "tuple": "[0]", "dict": "['k']"}[k] for k in path)
        assert declined == (
            expected or _native._HOLDS_ARRAYS._replace(found="a Rotation holding NumPy arrays")
        )._replace(where=place)


def _declaring_estimators() -> list[type]:
    """scikit-learn's estimators whose tags, made with default parameters, declare array API support."""
    from sklearn.utils import all_estimators

    from autoconvert._adapters._sklearn import _made, _supports

    return [cls for _, cls in all_estimators() if (made := _made(cls)) is not None and _supports(made)]


@in_dispatch
# Making every estimator with default parameters: deprecated ones warn, and small fits may not converge.
@pytest.mark.filterwarnings(
    "ignore:Class .* is deprecated:FutureWarning",
    "ignore:Using Array API dispatch to namespace:UserWarning",  # Ridge's solver="auto" picks another solver
)
def test_the_write_probe_over_scikit_learn_s_estimators_finds_no_write() -> None:
    """Every estimator declaring array API support, made with default parameters through its
    torchified module, fitted and called on scikit-learn's own torch path: the caller's tensors
    keep their values and versions (and no write is caught)."""
    import importlib

    from sklearn.exceptions import ConvergenceWarning

    # Here, not in the mark: pytest resolves a mark's category before the skip where scikit-learn is absent.
    warnings.filterwarnings("ignore", category=ConvergenceWarning)

    generator = torch.Generator().manual_seed(0)
    x = torch.rand(120, 4, dtype=torch.float64, generator=generator) + 0.1  # Nystroem's 100 components
    y = (x[:, 0] > 0.6).long()
    estimators = _declaring_estimators()
    assert {"StandardScaler", "PCA", "Ridge"} <= {cls.__name__ for cls in estimators}
    for cls in estimators:
        library = importlib.import_module(cls.__module__.split("._")[0])
        estimator = getattr(ac.torchify(library), cls.__name__)()
        assert _holds_tensors(estimator), cls
        given = {"LabelEncoder": (y,), "KernelCenterer": (x @ x.T,)}.get(cls.__name__, (x, y))
        with _unwritten(x, y):
            estimator.fit(*given)
            for method in ("transform", "predict", "predict_proba", "inverse_transform"):
                if hasattr(estimator, method):
                    getattr(estimator, method)(given[0])
            if hasattr(estimator, "score"):
                estimator.score(*given)


@pytest.mark.filterwarnings("ignore:torch.asarray. unspecified requires_grad:UserWarning")
def test_the_array_api_s_asarray_keeps_the_gradient_on_every_torch() -> None:
    """A library's torch code converts its inputs with the array API's ``asarray``, which is
    ``torch.asarray``: before torch 2.13 it detached a tensor that requires grad. The native
    call keeps the gradient on every torch, through a move, a cast and a copy too."""

    def library_code(x: torch.Tensor) -> torch.Tensor:
        same, cast, copied = torch.asarray(x), torch.asarray(x, dtype=torch.float64), torch.asarray(x, copy=True)
        assert copied.data_ptr() != x.data_ptr()
        return same * 1 + cast.float() * 2 + copied * 4

    leaving = Leaving(library_code, "library_code()", "SciPy", None)
    x = torch.ones(3, requires_grad=True)
    leaving.call(lambda args, kwargs: library_code(*args, **kwargs), (x,), {}).sum().backward()
    assert x.grad is not None and torch.equal(x.grad, torch.full((3,), 7.0))
    with torch.no_grad():  # nothing to keep: the call is not watched
        assert not leaving.call(lambda args, kwargs: library_code(*args, **kwargs), (x,), {}).requires_grad
    with pytest.raises(ValueError) as refused:  # copy=False where a cast is needed: torch's own answer
        leaving.call(lambda args, kwargs: torch.asarray(args[0], dtype=torch.float64, copy=False), (x,), {})
    assert "alias" in str(refused.value)


#: Library code making a tensor that requires grad a Python number, each way torch has.
_TO_NUMBERS: dict[str, Any] = {
    "float": lambda x: torch.tensor(float(x.sum())),
    "int": lambda x: torch.tensor(int(x.sum())),
    "complex": lambda x: torch.tensor(complex(x.sum()).real),
    "item": lambda x: torch.tensor(x.sum().item()),
    "tolist": lambda x: torch.tensor(x.tolist()).sum(),
    # Tensor.__format__ takes item() where a torch function mode no longer sees it
    "format": lambda x: torch.tensor(float(format(x.sum(), ".17g"))),
    "f-string": lambda x: torch.tensor(float(f"{x.sum()}")),
    # a number taken midway and made a tensor again: the result still requires grad, without
    # the part through the number
    "float, midway": lambda x: x.sum() * float(x.sum()),
}


@pytest.mark.parametrize("grad", ["warn", "error", "detach"])
@pytest.mark.parametrize("way", sorted(_TO_NUMBERS))
def test_a_native_call_making_a_tensor_a_python_number_applies_grad(way: str, grad: str) -> None:
    """A library's torch code that makes a tensor that requires grad a Python number drops its
    gradient, which torch lets go (torch 2.13 on warns once per process): the native call
    applies grad= there, as where the code hands the tensor to NumPy, the gradient detached
    first so that torch's own warning is not issued; ``bool()`` gives no differentiable value
    and is let through."""
    library_code = _TO_NUMBERS[way]
    leaving = Leaving(library_code, "library_code()", "SciPy", grad)
    x = torch.ones(3, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if grad == "error":
            with pytest.raises(ac.GradientError) as info:
                leaving.call(lambda args, kwargs: library_code(*args, **kwargs), (x,), {})
        else:
            for _ in range(2):  # said once
                result = leaving.call(lambda args, kwargs: library_code(*args, **kwargs), (x,), {})
    lost = (
        "library_code(): argument x requires grad, and SciPy's own torch path for this call turns it into a Python "
        "number, which carries no gradient"
    )
    site = "the ac.torchify(..., grad='detach') call that made it, where grad={!r} was given, so a config block cannot "
    keep = "compute library_code with torch operations: SciPy's own torch path for it leaves torch"
    if grad == "error":
        assert [str(w.message) for w in caught] == []
        assert str(info.value) == (
            f"{lost}. Found torch.Tensor(shape=(3,), dtype=torch.float32, layout=torch.strided, device=cpu). Fix: pass "
            f"x.detach(), call under torch.no_grad(), or allow it detached with grad='detach' (in {site.format(grad)}"
            f"change it; grad='warn' says so once); to keep the gradient, {keep}."
        )
        return
    assert float(result.detach()) == (9.0 if way == "float, midway" else 3.0)
    assert [str(w.message) for w in caught] == (
        []
        if grad == "detach"
        else [
            f"{lost}: it was detached, so no gradient flows through this call. To keep the gradient, {keep}. To "
            f"silence this, pass grad='detach' (in {site.format(grad)}change it; grad='error' forbids it), or call "
            "under torch.no_grad()"
        ]
    )


def test_a_native_call_reading_a_truth_value_is_not_watched_for_it() -> None:
    """``bool()`` of a tensor that requires grad (a comparison's, or its own) gives no
    differentiable value: grad="error" lets it through, and the gradient flows."""

    def library_code(x: torch.Tensor) -> torch.Tensor:
        return x * 2 if bool(x.sum()) and bool((x > 0).all()) else x

    leaving = Leaving(library_code, "library_code()", "SciPy", "error")
    x = torch.ones(3, requires_grad=True)
    leaving.call(lambda args, kwargs: library_code(*args, **kwargs), (x,), {}).sum().backward()
    assert x.grad is not None and torch.equal(x.grad, torch.full((3,), 2.0))


def test_a_native_call_formatting_a_tensor_of_more_than_one_number_is_not_watched_for_it() -> None:
    """``format()`` of a tensor with dimensions is its repr, text rather than a number (the
    library's messages): grad="error" lets it through, and the gradient flows."""

    def library_code(x: torch.Tensor) -> torch.Tensor:
        assert f"{x}" == repr(x)
        return x * 2

    leaving = Leaving(library_code, "library_code()", "SciPy", "error")
    x = torch.ones(3, requires_grad=True)
    leaving.call(lambda args, kwargs: library_code(*args, **kwargs), (x,), {}).sum().backward()
    assert x.grad is not None and torch.equal(x.grad, torch.full((3,), 2.0))


def _labels_out(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Library code taking its labels ``y`` (which need no gradient) and a number of ``x`` out
    of torch, as scikit-learn's ``log_loss`` does (``__dlpack__``, ``float()``): inside
    torch.func's transforms neither has storage there."""
    classes = np.from_dlpack(y + 0)
    return x.sum() * 0 + float((x * torch.as_tensor(classes.astype(float)).to(x.dtype)).sum()) + x.numpy().sum()


@pytest.mark.parametrize("grad", ["warn", "error", "detach"])
@pytest.mark.parametrize("transform", ["grad", "jacrev"])
def test_a_native_call_under_torch_func_s_gradient_takes_tensors_out_as_their_values(transform: str, grad: str) -> None:
    """A tensor torch.func.grad or jacrev wraps has no storage: the library's torch code taking
    it (or a plain label tensor) out of torch gets its values, grad= applied where its gradient
    is lost, as in an eager call, rather than torch's "Cannot access data pointer of Tensor that
    doesn't have storage"."""
    leaving = Leaving(_labels_out, "library_code()", "scikit-learn", grad)
    y, x = torch.tensor([0, 1, 1]), torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(leaving.call(lambda args, kwargs: _labels_out(*args, **kwargs), (y, x), {}))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if grad == "error":
            with pytest.raises(ac.GradientError) as info:
                getattr(torch.func, transform)(loss)(x)
        else:
            gradient = getattr(torch.func, transform)(loss)(x)
    if grad == "error":
        assert str(info.value).startswith(
            "library_code(): argument x requires grad, and scikit-learn's own torch path for this call turns it into "
            "a Python number, which carries no gradient. Found torch.Tensor(shape=(3,), dtype=torch.float64"
        )
        return
    assert torch.equal(gradient, torch.zeros(3, dtype=torch.float64))  # the number and the array carry none
    assert [w.category for w in caught] == ([] if grad == "detach" else [ac.GradientWarning])


def test_a_native_call_under_torch_vmap_taking_a_batch_out_of_torch_is_refused_in_the_library_s_words() -> None:
    """A tensor torch.vmap batches cannot leave torch whole (NumPy, a Python number and a truth
    value see one value): refused naming the argument and the fix, not torch's "Cannot access
    data pointer" or "data-dependent control flow"; the library's pure torch code still maps."""
    batch = torch.tensor([[0.5, 1.0], [2.0, 3.0]], dtype=torch.float64)
    for way in (lambda x: x.numpy(), lambda x: float(x.sum()), lambda x: bool(x.sum() > 0)):
        leaving = Leaving(way, "library_code()", "SciPy", None)
        with pytest.raises(ac.ConversionError) as info:
            torch.vmap(
                lambda x, leaving=leaving, way=way: torch.as_tensor(leaving.call(lambda a, k: way(*a), (x,), {}))
            )(batch)
        assert str(info.value) == (
            "library_code(): argument x is batched by torch.vmap, and SciPy's own torch path for this call takes its "
            "values out of torch (to NumPy, a Python number or a truth value), which sees one value, not a batch. "
            "Found a tensor batched by torch.vmap (a functorch-wrapped tensor). Fix: loop over the batch instead of "
            "torch.vmap (autoconvert.batched maps a function over it)."
        )
    leaving = Leaving(torch.sin, "library_code()", "SciPy", None)
    mapped = torch.vmap(lambda x: leaving.call(lambda args, kwargs: torch.sin(*args), (x,), {}))(batch)
    assert torch.equal(mapped, torch.sin(batch))


@in_dispatch
@pytest.mark.parametrize("grad", ["error", "detach"])
def test_log_loss_under_torch_func_grad_applies_grad(grad: str) -> None:
    """scikit-learn's ``log_loss`` hands its labels to NumPy (``__dlpack__``) and returns a
    Python number: under torch.func.grad of ``sample_weight`` it is given grad=, not torch's
    "Cannot access data pointer of Tensor that doesn't have storage" (its own call's)."""
    import sklearn.metrics

    log_loss = ac.torchify(sklearn.metrics, native="auto", grad=grad).log_loss
    labels = torch.tensor([0, 1, 0, 1])
    p = torch.tensor([0.2, 0.7, 0.4, 0.9], dtype=torch.float64)
    weights = torch.tensor([1.0, 2.0, 0.5, 1.5], dtype=torch.float64)

    def loss(w: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(log_loss(labels, p, sample_weight=w))

    if grad == "error":
        with pytest.raises(ac.GradientError, match=r"^log_loss\(\): argument sample_weight requires grad"):
            torch.func.grad(loss)(weights)
    else:
        assert torch.equal(torch.func.grad(loss)(weights), torch.zeros(4, dtype=torch.float64))
        expected = sklearn.metrics.log_loss(labels.numpy(), p.numpy(), sample_weight=weights.numpy())
        assert log_loss(labels, p, sample_weight=weights) == expected


@in_dispatch
def test_pca_mle_s_rank_choice_is_warned_and_a_detach_block_keeps_its_gradient() -> None:
    """``PCA("mle")`` takes Python numbers of its eigenvalues only to choose its rank: the watch
    cannot tell that from a number feeding the result, so it warns (the guide's false alarm);
    a ``config(grad="detach")`` block around the call silences it, and the gradient through
    the components is scikit-learn's own, called directly."""
    import sklearn
    import sklearn.decomposition

    x0 = torch.rand(30, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x = x0.clone().requires_grad_()
    with sklearn.config_context(array_api_dispatch=True), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Converting a tensor with requires_grad=True to a scalar", UserWarning)
        sklearn.decomposition.PCA("mle", svd_solver="covariance_eigh").fit(x).transform(x).pow(2).sum().backward()
    decomposition = ac.torchify(sklearn.decomposition)
    with pytest.warns(ac.GradientWarning, match=r"^PCA\.fit\(\): argument X requires grad"):
        decomposition.PCA("mle", svd_solver="covariance_eigh").fit(x0.clone().requires_grad_())
    through = x0.clone().requires_grad_()
    with ac.config(grad="detach"):
        pca = decomposition.PCA("mle", svd_solver="covariance_eigh").fit(through)
    pca.transform(through).pow(2).sum().backward()
    assert torch.equal(through.grad, x.grad)
