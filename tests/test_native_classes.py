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
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.spatial
import scipy.spatial.transform
import torch

import autoconvert as ac
from autoconvert._adapters._scipy import SciPy, _array_api
from autoconvert._adapters._sklearn import ScikitLearn

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
    return bool(obj._ac_class.holds_tensors)


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
    assert str(warned[0].message) == (
        "Rotation.from_euler(): argument angles requires grad, and NumPy code cannot pass gradients back: it was "
        "detached, so no gradient flows through this call. To keep the gradient, set SCIPY_ARRAY_API=1 before SciPy "
        "is imported: SciPy runs Rotation.from_euler on torch tensors itself, gradients kept, and torchify's "
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
        "Rotation.apply(): an argument is a NumPy array, which the library's torch path does not mix. Found a "
        "NumPy array. Fix: pass tensors (and objects made from tensors): SciPy declares a torch path for "
        "Rotation.apply."
    )
    with pytest.raises(ac.ConversionError) as mixed:
        native * converted
    assert str(mixed.value) == (
        "Rotation.__mul__(): an argument is an object made by converting, which holds NumPy arrays. Found an object "
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


@in_dispatch
def test_an_estimator_without_array_api_support_or_with_copy_false_converts() -> None:
    """RobustScaler's tags declare no support, and StandardScaler(copy=False) would scale the
    caller's tensor in place on scikit-learn's path: both convert (the caller's tensor is
    never written); native=True refuses them by name."""
    import sklearn.preprocessing

    preprocessing, x = ac.torchify(sklearn.preprocessing), _data()[0]
    robust, in_place = preprocessing.RobustScaler(), preprocessing.StandardScaler(copy=False)
    assert not _holds_tensors(robust) and not _holds_tensors(in_place)
    with _unwritten(x):
        assert type(robust.fit_transform(x)) is torch.Tensor and type(in_place.fit_transform(x)) is torch.Tensor
    assert ac.explain(in_place).notes == (
        "Its methods convert: it was made by converting, and scikit-learn declares no torch path for the object "
        "itself (copy=False: on scikit-learn's torch path it writes into the caller's tensor)",
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
    with pytest.raises(ValueError) as of_an_estimator:
        ac.torchify(sklearn.preprocessing.StandardScaler, native=True)(copy=False)
    assert str(of_an_estimator.value) == (
        "autoconvert.torchify(native=True): sklearn.preprocessing._data.StandardScaler(...) has no torch path of "
        "scikit-learn's own: copy=False: on scikit-learn's torch path it writes into the caller's tensor. Fix: "
        "native='auto' converts where there is none"
    )
