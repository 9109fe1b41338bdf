"""Call sites of public torch projects, written with autoconvert, each beside the project's own
hand-written conversion: compiled consumers (numba kernels, OpenCV drawing), torchified OpenCV
objects and scikit-learn generators, union annotations, torch dtypes and torch-written
callbacks handed to SciPy."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import importlib.util
import operator
import os
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import scipy.ndimage
import scipy.optimize
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac
from autoconvert._adapters._table import adapter_for
from autoconvert._spec._callbacks import written_in_torch

#: CI installs the recipes extra (numba, OpenCV, scikit-learn): a missing library fails there.
REQUIRED = bool(os.environ.get("AUTOCONVERT_TEST_RECIPES"))


def _needs(module: str) -> Any:
    if importlib.util.find_spec(module.partition(".")[0]) is None:
        message = f"needs {module}: pip install -e '.[recipes]'"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return importlib.import_module(module)


def _site(function: Any) -> str:
    """Where a fix's copy=True goes for ``accepts_numpy(function)``, as messages say it."""
    return f"@ac.accepts_numpy(copy=True) on {function.__qualname__}, or a with ac.config(copy=True): block around the call"


def _refusal(function: Any, *args: Any) -> ac.ReadOnlyError:
    """The ReadOnlyError of ``accepts_numpy(function)(*args)``, whose cause is the library's own error."""
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.accepts_numpy(function)(*args)
    assert info.value.__cause__ is not None
    return info.value


# --------------------------------------------------------------------------- numba


def test_numba_kernels_and_opencv_find_their_adapters() -> None:
    """A kernel is numba's (it names the module of the function it compiled), ``cv2`` and its
    classes OpenCV's (its builtins name no module: torchify(cv2) tells them by the module);
    their errors' classes come from the modules the adapters' refusals name."""
    numba, cv2 = _needs("numba"), _needs("cv2")
    kernel = numba.njit(lambda a: a)
    assert [type(adapter_for(v)).__name__ for v in (kernel, cv2, cv2.CLAHE)] == ["Numba", "OpenCV", "OpenCV"]
    assert type(numba.core.errors.TypingError("")).__module__ == "numba.core.errors"
    assert type(cv2.error()).__module__ == "cv2"


def test_a_numba_kernel_with_a_signature_refuses_read_only_arrays_as_a_read_only_error() -> None:
    """Bert-VITS2 / hippynn style: an explicit signature asks for a writable C array, which
    a read-only array does not match. The ReadOnlyError says so; copy=True runs it."""
    numba = _needs("numba")

    @numba.njit(numba.float64(numba.float32[::1]))
    def total(a: Any) -> float:
        s = 0.0
        for v in a:
            s += v
        return s

    t = torch.arange(4.0)
    error = _refusal(total, t)
    assert str(error) == (
        f"{total.__qualname__}(): argument a was refused by compiled code that needs writable arrays (a numba kernel's "
        "signature); arrays made from tensor arguments are read-only so that NumPy code never changes the "
        "caller's tensors. Found TypeError('No matching definition for argument type(s) readonly array(float32, "
        "1d, C)'). Fix: pass copy=True to give the function private writable copies (in "
        f"{_site(total)})."
    )
    assert type(error.__cause__) is TypeError
    assert ac.accepts_numpy(copy=True)(total)(t) == total(t.numpy().copy()) == 6.0


def test_a_numba_signature_refusing_a_later_argument_is_a_read_only_error() -> None:
    """numba lists every argument's type in its refusal ("float64, readonly array(...)"):
    a read-only array anywhere in the list is the refusal, not only in first place."""
    numba = _needs("numba")

    @numba.njit(numba.float64(numba.float64, numba.float32[::1]))
    def scaled_total(scale: float, a: Any) -> float:
        s = 0.0
        for v in a:
            s += v * scale
        return s

    error = _refusal(scaled_total, 2.0, torch.arange(4.0))
    assert str(error).startswith(
        f"{scaled_total.__qualname__}(): argument a was refused by compiled code that needs writable arrays"
    )
    assert "No matching definition for argument type(s) float64, readonly array(float32, 1d, C)" in str(error)
    assert ac.accepts_numpy(copy=True)(scaled_total)(2.0, torch.arange(4.0)) == 12.0


def test_a_numba_kernel_storing_into_an_argument_is_named_with_both_fixes() -> None:
    """CenterPoint / mmdetection3d style: a kernel fills a buffer it was handed. The numba
    TypingError becomes a ReadOnlyError naming the argument; writeback=True fills the caller's
    tensor, copy=True leaves it as it was."""
    numba = _needs("numba")

    @numba.njit
    def suppress(keep: Any, scores: Any, threshold: float) -> None:
        for i in range(scores.shape[0]):
            if scores[i] < threshold:
                keep[i] = 0

    def nms(keep: Any, scores: Any) -> Any:
        suppress(keep, scores, 0.5)
        return keep

    scores = torch.tensor([0.9, 0.2, 0.7, 0.1])
    keep = torch.ones(4, dtype=torch.uint8)
    message = str(_refusal(nms, keep, scores))
    assert message.startswith(f"{nms.__qualname__}(): argument keep or scores was written into by the function;"), (
        message
    )
    assert "Found numba.core.errors.TypingError(" in message and "readonly array(uint8, 1d, C)" in message
    assert message.endswith(
        "Fix: pass copy=True to give the function private writable copies, or writeback=True to let its "
        f"changes reach the caller's tensors (in {_site(nms)})."
    )
    assert keep.tolist() == [1, 1, 1, 1]

    hand = keep.numpy().copy()  # the project's own: a copy, filled, then copied back
    suppress(hand, scores.numpy(), 0.5)
    ac.accepts_numpy(writeback=True)(nms)(keep, scores)
    assert keep.tolist() == hand.tolist() == [1, 0, 1, 0]
    fresh = torch.ones(4, dtype=torch.uint8)
    assert ac.accepts_numpy(copy=True)(nms)(fresh, scores).tolist() == [1, 0, 1, 0]
    assert fresh.tolist() == [1, 1, 1, 1]


# --------------------------------------------------------------------------- OpenCV


def test_opencv_drawing_into_a_handed_array_is_a_read_only_error() -> None:
    """DB / PSENet style: ``cv2.fillPoly(mask, polys, 1)`` on a mask made from a tensor."""
    cv2 = _needs("cv2")
    polygon = [np.array([[1, 1], [6, 1], [6, 6]], dtype=np.int32)]

    def draw(mask: Any) -> Any:
        cv2.fillPoly(mask, polygon, 1)
        return mask

    mask = torch.zeros(8, 8, dtype=torch.uint8)
    error = _refusal(draw, mask)
    assert str(error) == (
        f"{draw.__qualname__}(): argument mask was written into by the function; arrays made from tensor arguments are "
        "read-only so that NumPy code never changes the caller's tensors behind its back. Found "
        "cv2.error('img marked as output argument, but provided NumPy array marked as readonly'). Fix: pass "
        "copy=True to give the function private writable copies, or writeback=True to let its changes reach "
        f"the caller's tensors (in {_site(draw)})."
    )
    assert type(error.__cause__).__module__ == "cv2"
    hand = draw(np.zeros((8, 8), np.uint8))
    drawn = ac.returns_tensor(ac.accepts_numpy(copy=True)(draw))(mask)
    assert np.array_equal(drawn.numpy(), hand) and not mask.any()
    ac.accepts_numpy(writeback=True)(draw)(mask)
    assert np.array_equal(mask.numpy(), hand)


def test_writeback_draws_into_a_permuted_tensor_through_a_contiguous_copy() -> None:
    """YOLOv5's Annotator draws boxes on ``img.permute(1, 2, 0)`` of a CHW uint8 tensor; OpenCV
    refuses strided output memory, so writeback hands a C-ordered private array and copies it
    back: the boxes land in the CHW tensor, as the project's copy-and-copy-back does."""
    cv2 = _needs("cv2")

    def box(im: Any) -> None:
        cv2.rectangle(im, (2, 2), (9, 7), (255, 0, 128), 1)

    chw = torch.zeros(3, 12, 12, dtype=torch.uint8)
    hand = np.ascontiguousarray(chw.permute(1, 2, 0).numpy())
    box(hand)
    with ac.stats() as seen:
        ac.accepts_numpy(writeback=True)(box)(chw.permute(1, 2, 0))
    assert np.array_equal(chw.permute(1, 2, 0).numpy(), hand) and chw.sum() > 0
    assert {cause: n for cause, n in seen.copies.items() if n} == {"layout": 1, "writeback": 1}
    contiguous = torch.zeros(12, 12, 3, dtype=torch.uint8)  # C order: shared, no copy
    with ac.stats() as seen:
        ac.accepts_numpy(writeback=True)(box)(contiguous)
    assert np.array_equal(contiguous.numpy(), hand) and not any(seen.copies.values())


def test_a_torchified_opencv_function_names_its_arguments_from_its_docstring() -> None:
    """OpenCV's builtins have no signature; their docstrings' signature lines name the
    parameters (``rectangle(img, pt1, pt2, color[, ...]) -> img``, and a second overload
    ``rectangle(img, rec, color...)``), so a refusal names ``img``, where every overload agrees."""
    cv2 = _needs("cv2")
    chw = torch.zeros(3, 12, 12, dtype=torch.uint8)
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.torchify(cv2).rectangle(chw.permute(1, 2, 0), (2, 2), (9, 7), (255, 0, 128), 1)
    assert str(info.value).startswith("rectangle(): argument img was written into by the function; ")


def test_torchified_opencv_factories_give_objects_that_take_tensors() -> None:
    """EasyOCR / BasicSR style: ``cv2.createCLAHE(...).apply(img)``, ``SIFT_create()``,
    ``createBackgroundSubtractorMOG2()``: OpenCV's builtins name no module, and their objects
    come back as proxies whose methods take and return tensors."""
    cv2 = _needs("cv2")
    tcv = ac.torchify(cv2)
    image = torch.randint(0, 256, (64, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))

    clahe = tcv.createCLAHE(clipLimit=2.0, tileGridSize=(8, 8))
    assert isinstance(clahe, cv2.CLAHE) and repr(clahe).startswith("torchified(")
    equalised = clahe.apply(image)
    hand = torch.from_numpy(cv2.createCLAHE(clipLimit=2.0, tileGridSize=(8, 8)).apply(image.numpy()))
    assert type(equalised) is torch.Tensor and torch.equal(equalised, hand)

    keypoints, descriptors = tcv.SIFT_create().detectAndCompute(image, None)
    hand_points, hand_descriptors = cv2.SIFT_create().detectAndCompute(image.numpy(), None)
    assert len(keypoints) == len(hand_points)
    assert type(descriptors) is torch.Tensor and np.array_equal(descriptors.numpy(), hand_descriptors)

    foreground = tcv.createBackgroundSubtractorMOG2().apply(image)
    assert type(foreground) is torch.Tensor and foreground.shape == (64, 64)
    assert isinstance(tcv.ORB_create(), cv2.ORB)


# --------------------------------------------------------------------------- adapt's unions


def test_adapt_reads_a_union_of_array_annotations_as_an_array() -> None:
    """pytorch-grad-cam's ``img: NDArray[float16] | NDArray[float32] | NDArray[float64]``."""

    @ac.adapt
    def scale(img: npt.NDArray[np.float16] | npt.NDArray[np.float32] | npt.NDArray[np.float64]) -> np.ndarray:
        assert isinstance(img, np.ndarray)
        return (img - img.min()) / (img.max() - img.min())

    t = torch.tensor([1.0, 3.0, 5.0])
    assert torch.equal(scale(t), torch.tensor([0.0, 0.5, 1.0]))
    assert scale(np.array([2.0, 4.0])).tolist() == [0.0, 1.0]


def test_adapt_takes_either_kind_as_it_is_for_an_array_or_tensor_union() -> None:
    """MONAI's ``NdarrayOrTensor``: either will do, so neither is converted."""

    @ac.adapt
    def kind(x: np.ndarray | torch.Tensor) -> str:
        return type(x).__name__

    assert kind(torch.ones(1)) == "Tensor" and kind(np.ones(1)) == "ndarray"


# --------------------------------------------------------------------------- generators


def test_torchified_cross_validation_yields_tensor_folds() -> None:
    """PyG wraps every ``KFold.split`` fold in ``torch.from_numpy``; a torchified splitter yields
    tensors, lazily, one fold at a time."""
    sklearn = _needs("sklearn.model_selection")
    data = torch.zeros(6, 2)
    folds = ac.torchify(sklearn.KFold(3)).split(data)
    assert isinstance(folds, types.GeneratorType)
    hand = [tuple(torch.from_numpy(i) for i in fold) for fold in sklearn.KFold(3).split(data.numpy())]
    got = list(folds)
    assert len(got) == len(hand) == 3
    for (train, test), (hand_train, hand_test) in zip(got, hand, strict=True):
        assert type(train) is torch.Tensor and torch.equal(train, hand_train) and torch.equal(test, hand_test)


def test_a_generator_result_converts_what_it_yields_sends_and_returns() -> None:
    """``send`` reaches the generator, each yield and the return value are converted as they come."""

    @ac.returns_tensor
    @ac.accepts_numpy
    def running(a: np.ndarray) -> Any:
        total = np.zeros_like(a)
        while True:
            step = yield total
            if step is None:
                return total.sum()
            total = total + a * step

    g = running(torch.ones(2))
    assert torch.equal(next(g), torch.zeros(2))
    assert torch.equal(g.send(3.0), torch.full((2,), 3.0))
    with pytest.raises(StopIteration) as stop:
        g.send(None)
    assert torch.equal(stop.value.value, torch.tensor(6.0))
    closed = running(torch.ones(2))
    next(closed)
    closed.close()
    thrown = running(torch.ones(2))
    next(thrown)
    with pytest.raises(KeyError, match="stop"):  # thrown into the generator, which does not catch it
        thrown.throw(KeyError("stop"))


# --------------------------------------------------------------------------- torch dtypes


def test_a_torch_dtype_argument_reaches_numpy_as_its_dtype() -> None:
    """``np.zeros(n, dtype)`` called with the torch dtype the caller works in."""

    @ac.accepts_numpy
    def zeros_like_scores(scores: np.ndarray, dtype: Any) -> np.ndarray:
        return np.zeros(scores.shape, dtype)

    assert zeros_like_scores(torch.ones(3), torch.float64).dtype == np.float64
    assert zeros_like_scores(torch.ones(3), torch.bfloat16).dtype == np.float32  # widened, as tensors are
    tnp = ac.torchify(np)
    made = tnp.zeros(2, dtype=torch.int32)
    assert type(made) is torch.Tensor and made.dtype == torch.int32
    with pytest.raises(ac.ConversionError) as info:
        tnp.zeros(2, dtype=torch.qint8)
    assert str(info.value) == (
        "zeros(): argument dtype is a torch dtype that NumPy has no dtype for, nor a wider one holding its "
        "values exactly. Found torch dtype torch.qint8. Fix: pass a NumPy dtype, or do this step in torch."
    )


# --------------------------------------------------------------------------- callbacks


def test_callbacks_written_in_torch_minimise_with_autograd_gradients() -> None:
    """pytorch-minimize style: ``minimize(f, x0, jac=True)`` with ``f`` returning ``(loss, grad)``
    from autograd, beside the hand-written loop converting at every call."""
    target = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)

    def objective(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        assert type(x) is torch.Tensor and x.dtype == torch.float64
        x = x.detach().requires_grad_()
        loss = ((x - target) ** 4).sum()
        (grad,) = torch.autograd.grad(loss, x)
        return loss, grad

    def hand_objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grad = objective(torch.from_numpy(x))
        return loss.item(), grad.numpy()

    x0 = torch.zeros(3, dtype=torch.float64)
    seen: list[type] = []
    optimize = ac.torchify(scipy.optimize, callbacks=True, grad="error")  # the loss's graph is its own argument's
    result = optimize.minimize(objective, x0, jac=True, method="BFGS", callback=lambda xk: seen.append(type(xk)))
    hand = scipy.optimize.minimize(hand_objective, x0.numpy(), jac=True, method="BFGS")
    assert type(result.x) is torch.Tensor and np.allclose(result.x.numpy(), hand.x)
    assert result.nit == hand.nit and set(seen) == {torch.Tensor}


F64 = torch.float64
#: Routines called with a torch callback that closes over ``a`` (a tensor that requires grad),
#: with the shape of the callback's result.
CLOSING_CALLS: dict[str, tuple[Callable[[Any, torch.Tensor], Any], tuple[int, ...]]] = {
    "quad": (lambda m, a: m.integrate.quad(lambda t: torch.sin(a * t), 0.0, 1.0), ()),
    "brentq": (lambda m, a: m.optimize.brentq(lambda t: torch.cos(t) - a * t, 0.0, 1.0), ()),
    "minimize": (lambda m, a: m.optimize.minimize(lambda v: ((v - a) ** 2).sum(), torch.zeros(1, dtype=F64)), ()),
    "quad_vec": (
        lambda m, a: m.integrate.quad_vec(lambda t: torch.sin(a * t) * torch.ones(2, dtype=F64), 0.0, 1.0),
        (2,),
    ),
    "dblquad": (lambda m, a: m.integrate.dblquad(lambda y, x: torch.sin(a * x * y), 0.0, 1.0, 0.0, 1.0), ()),
    "fixed_quad": (lambda m, a: m.integrate.fixed_quad(lambda t: torch.sin(a * t), 0.0, 1.0), (5,)),
    "solve_ivp": (lambda m, a: m.integrate.solve_ivp(lambda t, y: -a * y, (0.0, 1.0), torch.ones(1, dtype=F64)), (1,)),
    "odeint": (lambda m, a: m.integrate.odeint(lambda y, t: -a * y, torch.ones(1, dtype=F64), torch.arange(3.0)), (1,)),
    "newton": (lambda m, a: m.optimize.newton(lambda t: torch.cos(t) - a * t, 0.5), ()),
    "root_scalar": (lambda m, a: m.optimize.root_scalar(lambda t: torch.cos(t) - a * t, bracket=(0.0, 2.0)), ()),
    "minimize_scalar": (lambda m, a: m.optimize.minimize_scalar(lambda t: (t - a) ** 2), ()),
    "least_squares": (lambda m, a: m.optimize.least_squares(lambda v: v - a, torch.zeros(2, dtype=F64)), (2,)),
    "fsolve": (lambda m, a: m.optimize.fsolve(lambda v: v - a, torch.zeros(2, dtype=F64)), (2,)),
    "root": (lambda m, a: m.optimize.root(lambda v: v - a, torch.zeros(2, dtype=F64)), (2,)),
}
#: The routines every run covers; the rest run with --slow.
FAST_CLOSING = ("quad", "brentq", "minimize")


def _closing_words(route: str, name: str, forward: bool) -> tuple[str, str, str]:
    """``keep, site, given``: what keeps the gradient (numpy_op's rule for the mode), where
    grad='detach' goes, and that site where grad='error' was given, as ``route``'s messages say."""
    rule, product = ("jvp", "Jacobian-vector") if forward else ("backward", "vector-Jacobian")
    if route == "torchify":
        keep = f"ac.numpy_op({name}, {rule}=...), its {product} product written in NumPy"
        site = "the ac.torchify(..., grad='detach') call that made it"
    else:
        keep = f"@ac.numpy_op({rule}=...) in place of the decorators, its {product} product written in NumPy"
        site = f"@ac.accepts_numpy(grad='detach') on {name}"
    return keep, site, f"{site}, where grad='error' was given, so a config block cannot change it"


def _kept_by(route: str, name: str, keep: str) -> str:
    """What keeps the gradient, in the words of the call's messages: SciPy's own torch path
    where this SciPy declares one for the routine (torchify's), else the numpy_op ``keep``."""
    import scipy.integrate

    module = scipy.integrate if hasattr(scipy.integrate, name) else scipy.optimize
    if route == "torchify" and adapter_for(module).declared_torch_path(getattr(module, name)) is None:
        return (
            f"set SCIPY_ARRAY_API=1 before SciPy is imported: SciPy runs {module.__name__}.{name} on torch tensors "
            "itself, gradients kept, and torchify's native='auto' (the default) takes that path"
        )
    return f"make {name} a differentiable torch operation with {keep}"


def _closing_route(route: str, name: str, grad: str | None) -> Any:
    """``scipy.integrate``/``scipy.optimize`` as ``route`` reaches them, with ``grad=`` where given."""
    import scipy.integrate

    options = {} if grad is None else {"grad": grad}
    if route == "torchify":
        return types.SimpleNamespace(
            integrate=ac.torchify(scipy.integrate, **options), optimize=ac.torchify(scipy.optimize, **options)
        )
    module = scipy.integrate if hasattr(scipy.integrate, name) else scipy.optimize
    pair = types.SimpleNamespace(
        **{name: ac.returns_tensor(ac.accepts_numpy(getattr(module, name), callbacks=True, **options))}
    )
    return types.SimpleNamespace(integrate=pair, optimize=pair)


@pytest.mark.parametrize("route", ["torchify", "pair"])
@pytest.mark.parametrize(
    "name", [n if n in FAST_CLOSING else pytest.param(n, marks=pytest.mark.slow) for n in CLOSING_CALLS]
)
def test_a_torch_callback_closing_over_a_tensor_needing_grad_warns_once_per_call(name: str, route: str) -> None:
    """A torch callback whose result requires grad through a tensor it closes over hands SciPy
    that result as an array: the gradient in ``a`` cannot flow, and the call's grad policy
    says so, once per call (``quad`` evaluates its callback 21 times), at the caller's line;
    ``grad="detach"`` is silent, and ``grad="error"`` (given, or a config block) refuses the
    first evaluation."""
    a = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    call, shape = CLOSING_CALLS[name]
    callback = "<lambda>.<locals>.<lambda>()"
    keep, site, given = _closing_words(route, name, forward=False)
    with pytest.warns(ac.GradientWarning) as caught:
        call(_closing_route(route, name, None), a)
    assert [str(w.message) for w in caught] == [
        f"{name}(): the result of its callback {callback} requires grad, and NumPy code cannot pass gradients "
        "back: it was detached, so no gradient flows from the callback through this call. To keep the gradient, "
        f"{_kept_by(route, name, keep)}. To silence this, .detach() the callback's "
        f"result, pass grad='detach' (in {site}, or a with ac.config(grad='detach'): block around the call; "
        "grad='error' forbids it), or call under torch.no_grad()"
    ]
    assert caught[0].filename == __file__
    call(_closing_route(route, name, "detach"), a)  # silent: pytest runs with warnings as errors
    with torch.no_grad():
        call(_closing_route(route, name, None), a)
    refusal = (
        f"{name}(): callback {callback}'s result requires grad, and NumPy code cannot pass gradients back. Found "
        f"torch.Tensor(shape={shape}, dtype=torch.float64, layout=torch.strided, device=cpu). Fix: .detach() the "
        "callback's result, call under torch.no_grad(), or allow it detached with grad='detach' (in {site}; "
        f"grad='warn' says so once); to keep the gradient, {_kept_by(route, name, keep)}."
    )
    with pytest.raises(ac.GradientError) as info:
        call(_closing_route(route, name, "error"), a)
    assert str(info.value) == refusal.format(site=given)
    with ac.config(grad="error"), pytest.raises(ac.GradientError) as info:
        call(_closing_route(route, name, None), a)
    assert str(info.value) == refusal.format(site=f"{site}, or a with ac.config(grad='detach'): block around the call")


# make_dual's first use scripts torch's decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
@pytest.mark.parametrize("route", ["torchify", "pair"])
@pytest.mark.parametrize(
    "name", [n if n in FAST_CLOSING else pytest.param(n, marks=pytest.mark.slow) for n in CLOSING_CALLS]
)
def test_a_torch_callback_closing_over_a_dual_tensor_says_its_tangent_dropped(name: str, route: str) -> None:
    """As one closing over a tensor that requires grad: a callback closing over a dual tensor
    (forward_ad) hands SciPy an array without its tangent, said once per call by the call's
    grad policy (torch.no_grad(), which keeps tangents, too), refused under grad="error"."""
    from torch.autograd import forward_ad

    call, shape = CLOSING_CALLS[name]
    callback = "<lambda>.<locals>.<lambda>()"
    keep, site, given = _closing_words(route, name, forward=True)
    site += ", or a with ac.config(grad='detach'): block around the call"
    carries = "carries a forward-mode tangent (a dual tensor of torch.autograd.forward_ad), and NumPy code cannot pass gradients back"
    with forward_ad.dual_level():
        a = forward_ad.make_dual(torch.tensor(2.0, dtype=F64), torch.tensor(1.0, dtype=F64))
        for context in (contextlib.nullcontext(), torch.no_grad()):
            with context, pytest.warns(ac.GradientWarning) as caught:
                call(_closing_route(route, name, None), a)
            assert [str(w.message) for w in caught] == [
                f"{name}(): the result of its callback {callback} {carries}: it was detached, so no gradient flows "
                f"from the callback through this call. To keep the gradient, {_kept_by(route, name, keep)}. To "
                "silence this, .detach() the callback's result, pass grad='detach' (in "
                f"{site}; grad='error' forbids it), or call outside forward_ad.dual_level()"
            ]
            assert caught[0].filename == __file__
        call(_closing_route(route, name, "detach"), a)  # silent: pytest runs with warnings as errors
        with pytest.raises(ac.GradientError) as info:
            call(_closing_route(route, name, "error"), a)
    assert str(info.value) == (
        f"{name}(): callback {callback}'s result {carries}. Found torch.Tensor(shape={shape}, dtype=torch.float64, "
        "layout=torch.strided, device=cpu). Fix: .detach() the callback's result, call outside "
        f"forward_ad.dual_level(), or allow it detached with grad='detach' (in {given}; grad='warn' says so once); "
        f"to keep the gradient, {_kept_by(route, name, keep)}."
    )


#: The closing calls whose tensors are all the callback's (the rest take a tensor x0 or y0
#: made inside the transform, which torch.func wraps and the conversion refuses).
CLOSING_SCALARS = ("quad", "brentq", "quad_vec", "dblquad", "fixed_quad", "newton", "root_scalar", "minimize_scalar")


def _solution(result: Any) -> torch.Tensor:
    """A closing call's value as a tensor: a quadrature's integral, a root, a minimiser."""
    found = result[0] if isinstance(result, tuple) else getattr(result, "root", getattr(result, "x", result))
    return torch.as_tensor(found, dtype=F64)


def _through(transform: str, f: Callable[[torch.Tensor], torch.Tensor], a: torch.Tensor) -> torch.Tensor:
    """``transform`` of ``f`` at ``a``: torch.func.jvp's primal and tangent, jacfwd's Jacobian,
    or torch.func.grad of ``a * f(a)`` (the gradient then f's value, where f's own is lost)."""
    if transform == "jvp":
        return torch.stack(torch.func.jvp(f, (a,), (torch.ones_like(a),)))
    if transform == "jacfwd":
        return torch.func.jacfwd(f)(a)
    return torch.func.grad(lambda v: v * f(v))(a)


# make_dual's first use scripts torch's decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
@pytest.mark.parametrize("transform", ["jvp", "jacfwd", "grad"])
@pytest.mark.parametrize("route", ["torchify", "pair"])
@pytest.mark.parametrize(
    "name", [n if n in FAST_CLOSING else pytest.param(n, marks=pytest.mark.slow) for n in CLOSING_SCALARS]
)
def test_a_torch_callback_closing_over_a_tensor_torch_func_differentiates(
    name: str, route: str, transform: str
) -> None:
    """Under torch.func.jvp, jacfwd and grad, a callback closing over the differentiated tensor
    loses its gradient as in eager mode: said once per call in the words of the transform (no
    dual level the user opened, no call outside it to suggest), the call's value kept;
    grad="detach" is silent; grad="error" refuses it."""
    call, shape = CLOSING_CALLS[name]
    a = torch.tensor(2.0, dtype=F64)
    value = _solution(call(_closing_route(route, name, "detach"), a)).sum()
    forward = transform != "grad"
    zero = torch.zeros((), dtype=F64)
    expected = {"jvp": torch.stack([value, zero]), "jacfwd": zero, "grad": value}[transform]
    callback = "<lambda>.<locals>.<lambda>()"
    keep, site, given = _closing_words(route, name, forward=forward)
    site += ", or a with ac.config(grad='detach'): block around the call"
    found, outside = (
        ("carries a tangent of torch.func's forward mode (jvp, jacfwd)", "")
        if forward
        else ("requires grad", ", or call under torch.no_grad()")
    )

    def solved(grad: str | None) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda v: _solution(call(_closing_route(route, name, grad), v)).sum()

    with pytest.warns(ac.GradientWarning) as caught:
        assert torch.allclose(_through(transform, solved(None), a), expected)
    said = [w for w in caught if w.category is ac.GradientWarning]  # torch.jit.script's warning aside (above)
    assert [str(w.message) for w in said] == [
        f"{name}(): the result of its callback {callback} {found}, and NumPy code cannot pass gradients back: it was "
        f"detached, so no gradient flows from the callback through this call. To keep the gradient, "
        f"{_kept_by(route, name, keep)}. To silence this, .detach() the callback's result, "
        f"{'or ' if forward else ''}pass grad='detach' (in {site}; grad='error' forbids it){outside}"
    ]
    assert said[0].filename == __file__
    quiet = _through(transform, solved("detach"), a)  # silent: pytest runs with warnings as errors
    assert torch.allclose(quiet, expected)
    with pytest.raises(ac.GradientError) as info:
        _through(transform, solved("error"), a)
    assert str(info.value) == (
        f"{name}(): callback {callback}'s result {found}, and NumPy code cannot pass gradients back. Found "
        f"torch.Tensor(shape={shape}, dtype=torch.float64, layout=torch.strided, device=cpu). Fix: .detach() the "
        f"callback's result, {'' if forward else 'call under torch.no_grad(), '}or allow it detached with "
        f"grad='detach' (in {given}; grad='warn' says so once); to keep the gradient, {_kept_by(route, name, keep)}."
    )


@pytest.mark.parametrize("route", ["torchify", "pair"])
def test_a_callback_inside_torch_func_that_closes_over_nothing_is_handed_on(route: str) -> None:
    """A torch callback that closes over nothing loses nothing under torch.func's transforms
    (whose wrapping its tensors still get): its result is handed on in silence, under any
    grad=; under torch.vmap, whose batch one array cannot hold, it is refused."""
    a = torch.tensor(2.0, dtype=F64)
    quad = _closing_route(route, "quad", "error").integrate.quad
    integral = float(1 - np.cos(1.0))

    def scaled(v: torch.Tensor) -> torch.Tensor:
        return v * torch.as_tensor(quad(lambda t: torch.sin(t), 0.0, 1.0)[0])

    assert torch.allclose(torch.func.grad(scaled)(a), torch.tensor(integral, dtype=F64))
    assert torch.allclose(torch.func.jvp(scaled, (a,), (torch.ones_like(a),))[1], torch.tensor(integral, dtype=F64))
    with pytest.raises(ac.ConversionError) as info:
        torch.func.vmap(lambda v: torch.as_tensor(quad(lambda t: torch.sin(v * t), 0.0, 1.0)[0]))(a[None])
    here = f"{test_a_callback_inside_torch_func_that_closes_over_nothing_is_handed_on.__qualname__}.<locals>."
    assert str(info.value) == (
        f"{here}<lambda>.<locals>.<lambda>(): result is being transformed by torch.vmap or torch.func (a "
        "functorch-wrapped tensor), which NumPy code cannot see. Found torch.Tensor(shape=(), dtype=torch.float64, "
        "layout=torch.strided, device=cpu). Fix: for gradients, make the function an autoconvert.numpy_op with "
        "backward= (torch.func.grad, vjp, jacrev) or jvp= (torch.func.jvp, jacfwd); for a batch, loop over it "
        "(autoconvert.batched) instead of torch.vmap."
    )


@pytest.mark.parametrize("route", ["torchify", "pair"])
def test_a_callbacks_refusal_a_library_rewords_reaches_the_caller_as_itself(route: str) -> None:
    """differential_evolution rewords any TypeError its objective raises as a "map-like
    callable" RuntimeError: grad="error"'s GradientError, raised from it, leaves the call as
    itself; an error of the callback's own stays SciPy's to word."""
    a = torch.tensor(2.0, dtype=F64, requires_grad=True)
    if route == "torchify":
        evolve = ac.torchify(scipy.optimize, grad="error").differential_evolution
        site = "the ac.torchify(..., grad='detach') call that made it"
        keep = "ac.numpy_op(differential_evolution, backward=...)"
    else:
        evolve = ac.returns_tensor(
            ac.accepts_numpy(scipy.optimize.differential_evolution, callbacks=True, grad="error")
        )
        site = "@ac.accepts_numpy(grad='detach') on differential_evolution"
        keep = "@ac.numpy_op(backward=...) in place of the decorators"
    with pytest.raises(ac.GradientError) as info:
        evolve(lambda v: ((torch.sin(a * v) - 0.5) ** 2).sum(), [(0, 1)], maxiter=2, popsize=3, seed=0)
    here = f"{test_a_callbacks_refusal_a_library_rewords_reaches_the_caller_as_itself.__qualname__}.<locals>."
    assert str(info.value) == (
        f"differential_evolution(): callback {here}<lambda>()'s result requires grad, and NumPy code cannot pass gradients "
        "back. Found torch.Tensor(shape=(), dtype=torch.float64, layout=torch.strided, device=cpu). Fix: .detach() "
        f"the callback's result, call under torch.no_grad(), or allow it detached with grad='detach' (in {site}, "
        "where grad='error' was given, so a config block cannot change it; grad='warn' says so once); to keep the "
        f"gradient, make differential_evolution a differentiable torch operation with {keep}, its vector-Jacobian "
        "product written in NumPy."
    )
    assert info.value.__cause__ is None and info.value.__suppress_context__

    def own_error(v: torch.Tensor) -> torch.Tensor:
        raise TypeError("the objective's own")

    with pytest.raises(RuntimeError, match=r"^The map-like callable must be of the form") as info:
        evolve(own_error, [(0, 1)], maxiter=2, popsize=3, seed=0)
    assert str(info.value.__cause__) == "the objective's own"


def test_a_callbacks_result_is_judged_by_the_leaves_its_gradient_reaches() -> None:
    """A result that is the outside leaf itself is said; one whose gradient reaches only the
    tensors the callback was handed (in a list too, made to require grad in place) is not; a
    callback called on another thread alone is said at the line of the code calling it there."""
    from concurrent.futures import ThreadPoolExecutor

    a = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)

    @ac.accepts_numpy(callbacks=True, grad="error")
    def call_with(f: Any, value: Any) -> Any:
        return f(value)

    here = f"{test_a_callbacks_result_is_judged_by_the_leaves_its_gradient_reaches.__qualname__}.<locals>."
    keep = "a differentiable torch operation with @ac.numpy_op(backward=...) in place of the decorators, its "
    with pytest.raises(ac.GradientError) as refused:
        call_with(lambda v: a, np.ones(2))
    assert str(refused.value) == (
        f"{here}call_with(): callback {here}<lambda>()'s result requires grad, and NumPy code cannot pass gradients "
        "back. Found torch.Tensor(shape=(), dtype=torch.float64, layout=torch.strided, device=cpu). Fix: .detach() "
        "the callback's result, call under torch.no_grad(), or allow it detached with grad='detach' (in "
        f"@ac.accepts_numpy(grad='detach') on {here}call_with, where grad='error' was given, so a config block "
        f"cannot change it; grad='warn' says so once); to keep the gradient, make {here}call_with {keep}"
        "vector-Jacobian product written in NumPy."
    )
    own = call_with(lambda v: (v[0].requires_grad_() * 2).sum(), [np.ones(2)])
    assert own == 4.0

    @ac.accepts_numpy(callbacks=True)
    def on_a_thread(f: Any, value: Any) -> Any:
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(f, value).result()

    with pytest.warns(ac.GradientWarning) as caught:
        on_a_thread(lambda v: (v * a).sum(), np.ones(2))
    assert [str(w.message) for w in caught] == [
        f"{here}on_a_thread(): the result of its callback {here}<lambda>() requires grad, and NumPy code cannot pass "
        "gradients back: it was detached, so no gradient flows from the callback through this call. To keep the "
        f"gradient, make {here}on_a_thread {keep}vector-Jacobian product written in NumPy. To silence this, "
        f".detach() the callback's result, pass grad='detach' (in @ac.accepts_numpy(grad='detach') on "
        f"{here}on_a_thread, or a with ac.config(grad='detach'): block around the call; grad='error' forbids it), "
        "or call under torch.no_grad()"
    ]
    assert caught[0].filename.endswith(os.path.join("concurrent", "futures", "thread.py"))


def test_callbacks_stay_arrays_unless_asked_and_numpy_functions_stay_numpy() -> None:
    """The default hands callbacks arrays (NumPy-written ones keep working); under
    ``callbacks=True`` NumPy's own functions are still handed over as they are."""
    kinds: list[type] = []
    ndi = ac.torchify(scipy.ndimage)
    ndi.generic_filter(torch.arange(5.0), lambda v: kinds.append(type(v)) or 0.0, size=3)
    assert set(kinds) == {np.ndarray}
    kinds.clear()
    tndi = ac.torchify(scipy.ndimage, callbacks=True)
    peaks = tndi.generic_filter(torch.arange(5.0), lambda v: kinds.append(type(v)) or torch.max(v), size=3)
    assert set(kinds) == {torch.Tensor} and peaks.tolist() == [1.0, 2.0, 3.0, 4.0, 4.0]
    assert tndi.generic_filter(torch.arange(5.0), np.max, size=3).tolist() == [1.0, 2.0, 3.0, 4.0, 4.0]
    with pytest.raises(TypeError, match="callbacks= takes True or False, got 1"):
        ac.accepts_numpy(callbacks=1)  # type: ignore[call-overload]


@pytest.mark.parametrize("callbacks", [False, True])
def test_solve_ivp_events_keep_their_attributes(callbacks: bool) -> None:
    """``solve_ivp`` reads an event's ``terminal`` and ``direction``: the callback handed to it
    carries them, so a torch event (by default) and any event under ``callbacks=True`` stop
    where SciPy's own call stops."""
    import scipy.integrate

    def torch_event(t: Any, y: torch.Tensor) -> torch.Tensor:
        return y[0] - torch.tensor(0.5, dtype=y.dtype)

    event: Any = (lambda t, y: y[0] - 0.5) if callbacks else torch_event
    event.terminal = True
    event.direction = -1
    integrate = ac.torchify(scipy.integrate, callbacks=callbacks)
    result = integrate.solve_ivp(lambda t, y: -0.5 * y, (0.0, 10.0), torch.tensor([1.0]), events=event)
    ends: Any = lambda t, y: y[0] - 0.5  # noqa: E731 - SciPy's own call, NumPy-written
    ends.terminal, ends.direction = True, -1
    expected = scipy.integrate.solve_ivp(lambda t, y: -0.5 * y, (0.0, 10.0), np.array([1.0]), events=ends)
    assert (result.status, expected.status) == (1, 1)
    assert float(result.t[-1]) == pytest.approx(expected.t[-1]) == pytest.approx(np.log(4.0), rel=1e-3)


SCALAR_CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "quad": lambda m, f: m.integrate.quad(f, 0.0, 1.0)[0],
    "quad_args": lambda m, f: m.integrate.quad(lambda x, k: f(x) * k, 0.0, 1.0, args=(2,))[0] / 2,
    "brentq": lambda m, f: m.optimize.brentq(f, -1.0, 1.0),
    "newton": lambda m, f: m.optimize.newton(f, 0.5),
    "minimize_scalar": lambda m, f: m.optimize.minimize_scalar(f, bounds=(-2.0, 0.0), method="bounded").x,
    "fixed_quad": lambda m, f: m.integrate.fixed_quad(f, 0.0, 1.0)[0],
    "root_scalar": lambda m, f: m.optimize.root_scalar(f, bracket=(-1.0, 1.0)).root,
}


@pytest.mark.parametrize("route", ["pair", "torchify"])
@pytest.mark.parametrize("name", list(SCALAR_CALLS))
def test_a_torch_callback_handed_python_floats_takes_0d_tensors(name: str, route: str) -> None:
    """``quad(f, 0, 1)`` and ``brentq(f, -1, 1)`` hand ``f`` a Python float, which a torch
    callable refused (``torch.sin(0.5)``: torch's TypeError): the callback converted arrays
    and NumPy scalars only. A float now reaches it as a 0-d float64 tensor on the call's
    device (an int, ``args=(2,)``, stays an int), and its 0-d result goes back as the scalar
    SciPy wants, so every scalar routine gives SciPy's own answer."""
    import scipy.integrate

    seen: set[tuple[type, Any, Any]] = set()

    def f(x: Any) -> torch.Tensor:
        seen.add((type(x), getattr(x, "dtype", None), getattr(x, "shape", None)))
        return torch.sin(x) + 0.25 * x

    def pair(module: Any) -> Any:  # the module's functions through the decorator pair
        names = [
            n for n in dir(module) if n in {"quad", "fixed_quad", "brentq", "newton", "minimize_scalar", "root_scalar"}
        ]
        return types.SimpleNamespace(
            **{n: ac.returns_tensor(ac.accepts_numpy(callbacks=True)(getattr(module, n))) for n in names}
        )

    view = functools.partial(ac.torchify, callbacks=True) if route == "torchify" else pair
    modules = types.SimpleNamespace(integrate=view(scipy.integrate), optimize=view(scipy.optimize))
    got = SCALAR_CALLS[name](modules, f)
    wanted = SCALAR_CALLS[name](scipy, lambda x: np.sin(x) + 0.25 * x)
    assert float(got) == pytest.approx(float(wanted), abs=1e-9)
    assert {kind for kind, _, _ in seen} == {torch.Tensor}
    assert {dtype for _, dtype, _ in seen} == {torch.float64}


def test_a_callback_carries_the_callables_attributes_live() -> None:
    """The callback a function is handed reads the callable's attributes as they are when
    read (set after the call began too), and what the function sets lands on the callable."""

    def loss(x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x)

    loss.tolerance = 1e-3

    @ac.accepts_numpy
    def fit(f: Any) -> tuple[Any, ...]:
        before = f.tolerance
        loss.tolerance = 1e-6  # the caller's callable changed while the function runs
        after = f.tolerance
        f.calls = 1
        del f.tolerance
        return before, after, f.__name__, f.calls, hasattr(f, "tolerance"), f(np.ones(2))

    assert fit(loss) == (1e-3, 1e-6, "loss", 1, False, 2.0)
    assert loss.calls == 1 and not hasattr(loss, "tolerance")


def test_a_callback_whose_values_cannot_cross_is_named() -> None:
    """An array torch cannot hold reaching a torch callback, or a result NumPy cannot hold
    coming back from one, raises a ConversionError naming the callback and the value."""

    def objective(x: torch.Tensor) -> torch.Tensor:
        return torch.empty(2, device="meta")  # a tensor with no data

    @ac.accepts_numpy(callbacks=True)
    def call_with(f: Any, value: Any) -> Any:
        assert repr(f) == f"<autoconvert callback taking tensors: {objective!r}>"
        return f(value)

    with pytest.raises(ac.ConversionError) as info:
        call_with(objective, np.array([object()]))
    assert str(info.value).startswith(f"{objective.__qualname__}(): argument [0] ")
    with pytest.raises(ac.ConversionError) as info:
        call_with(objective, np.zeros(2))
    assert str(info.value).startswith(f"{objective.__qualname__}(): result ")


def test_torch_functions_given_as_callbacks_take_tensors_by_default() -> None:
    """SciPy's own torch-backend tests pass ``statistic=torch.mean`` and
    ``function=torch.sum``: torch's functions cannot take arrays, so they take tensors and
    hand SciPy arrays back, without any option; the hand-written call converts by hand."""
    import scipy.stats

    x = torch.rand(20, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    stats = ac.torchify(scipy.stats)
    # torch.mean has no signature for SciPy to find ``axis`` in: vectorized=True says it takes one
    found = stats.bootstrap((x,), torch.mean, n_resamples=99, random_state=0, vectorized=True).confidence_interval
    hand = scipy.stats.bootstrap(
        (x.numpy(),), lambda a, axis: torch.mean(torch.tensor(a), axis).numpy(), n_resamples=99, random_state=0
    ).confidence_interval
    assert type(found.low) is torch.Tensor and np.isclose(found.low.item(), hand.low)
    assert np.isclose(found.high.item(), hand.high)
    peaks = ac.torchify(scipy.ndimage).generic_filter(torch.arange(5.0), torch.amax, size=3)
    assert peaks.tolist() == [1.0, 2.0, 3.0, 4.0, 4.0]


def test_xp_torch_names_numpy_for_the_arrays_handed_over() -> None:
    """Array-API SciPy takes ``xp=``; through torchify the arrays are NumPy's, so is ``xp``."""
    import inspect

    import scipy.signal

    tnp = ac.torchify(np)
    assert ac.accepts_numpy(lambda xp: xp)(torch) is np and ac.accepts_numpy(lambda xp: xp)(tnp) is np
    if "xp" not in inspect.signature(scipy.signal.savgol_coeffs).parameters:
        return  # an older SciPy, whose savgol_coeffs takes no array-API namespace
    coefficients = ac.torchify(scipy.signal).savgol_coeffs(5, 2, xp=torch)
    assert type(coefficients) is torch.Tensor
    assert np.allclose(coefficients.numpy(), scipy.signal.savgol_coeffs(5, 2))


# --------------------------------------------------------------------------- astropy


def test_an_astropy_quantity_is_refused_naming_its_unit() -> None:
    """A Quantity's numbers mean nothing without its unit, which a tensor cannot carry: as a
    result or to_tensor's argument it is refused, naming the unit and ``to_value``; its
    numbers in a chosen unit convert."""
    u = _needs("astropy.units")
    distances = np.arange(3.0) * u.m

    with pytest.raises(ac.ConversionError) as info:
        ac.returns_tensor(lambda: distances)()
    assert str(info.value) == (
        "test_an_astropy_quantity_is_refused_naming_its_unit.<locals>.<lambda>(): result is a Quantity in m, an array subclass that carries a unit; a tensor holds the "
        "numbers only, and the unit would be silently lost. Found astropy.units.quantity.Quantity(shape=(3,), "
        "dtype=<f8). Fix: pass the numbers in the unit you choose: result.to_value(unit) (astropy), or "
        "result.value."
    )
    with pytest.raises(ac.ConversionError, match=r"argument obj\[0\] is a Quantity in s, "):
        ac.to_tensor([u.Quantity(3.0, u.s)])
    assert ac.to_tensor(distances.to_value(u.cm)).tolist() == [0.0, 100.0, 200.0]


def _numpy_masked(values: np.ndarray, mask: list[bool]) -> Any:
    return np.ma.MaskedArray(values, mask=mask)


def _astropy_masked(values: np.ndarray, mask: list[bool]) -> Any:
    return _needs("astropy.utils.masked").Masked(values, mask=mask)


def _astropy_masked_quantity(values: np.ndarray, mask: list[bool]) -> Any:
    return _needs("astropy.utils.masked").Masked(values * _needs("astropy.units").m, mask=mask)


def _returning(value: Any) -> Any:
    def masked_result(*args: Any) -> Any:
        return value

    return masked_result


def _tensor_parameter(x: torch.Tensor) -> torch.Tensor:
    return x


def _array_parameter(x: np.ndarray) -> np.ndarray:
    return x


_TENSOR = "a tensor"

#: Every entry point where an array becomes a tensor, or items one array: (the call, the
#: function and the path named, what would hold the numbers alone).
_TO_TENSOR_ENTRIES = {
    "to_tensor": (lambda v: ac.to_tensor({"k": [v]}), "autoconvert.to_tensor()", "argument obj['k'][0]", _TENSOR),
    "returns_tensor": (
        lambda v: ac.returns_tensor(_returning(v))(),
        "_returning.<locals>.masked_result()",
        "result",
        _TENSOR,
    ),
    "returns_tensor-nested": (
        lambda v: ac.returns_tensor(_returning((1, {"m": v})))(),
        "_returning.<locals>.masked_result()",
        "result[1]['m']",
        _TENSOR,
    ),
    "accepts_tensor": (lambda v: ac.accepts_tensor(_tensor_parameter)(v), "_tensor_parameter()", "argument x", _TENSOR),
    "adapt": (lambda v: ac.adapt(_tensor_parameter)(v), "_tensor_parameter()", "argument x", _TENSOR),
    "adapt-a-list-for-a-tensor": (
        lambda v: ac.adapt(_tensor_parameter)([v, v]),
        "_tensor_parameter()",
        "argument x[0]",
        "the one tensor its annotation asks for",
    ),
    "adapt-a-list-for-an-array": (
        lambda v: ac.adapt(_array_parameter)([[np.zeros(v.shape)], [v]]),
        "_array_parameter()",
        "argument x[1][0]",
        "the one array its annotation asks for",
    ),
    "torchify": (
        lambda v: ac.torchify(_returning(v))(torch.ones(2)),
        "_returning.<locals>.masked_result()",
        "result",
        _TENSOR,
    ),
    "batched": (
        lambda v: ac.batched(_returning(v))(torch.ones(2, 3)),
        "_returning.<locals>.masked_result()",
        "result[0]",
        _TENSOR,
    ),
    "numpy_op": (
        lambda v: ac.numpy_op(_returning(v))(torch.ones(3)),
        "_returning.<locals>.masked_result()",
        "result",
        _TENSOR,
    ),
}


@pytest.mark.parametrize("entry", list(_TO_TENSOR_ENTRIES))
@pytest.mark.parametrize("make", [_numpy_masked, _astropy_masked, _astropy_masked_quantity])
@given(mask=st.lists(st.booleans(), min_size=1, max_size=4))
def test_a_masked_array_of_any_library_is_refused_at_every_entry_point(make: Any, entry: str, mask: list[bool]) -> None:
    """A masked array (NumPy's ``np.ma``, astropy's ``Masked``, with a unit too) is refused
    wherever an array becomes a tensor, or a list's items one array, masked entries or none,
    naming the path and ``.filled`` (with a unit, the unit's fix too: ``.filled`` alone met
    the unit's refusal next): the tensor or array would hold the hidden numbers as if they
    were data. The fix named works (the masked numbers as the fill value)."""
    values = np.arange(len(mask), dtype=np.float64) - 999.0 * np.array(mask)
    masked = make(values, mask)
    call, function, path, holder = _TO_TENSOR_ENTRIES[entry]
    with pytest.raises(ac.ConversionError) as info:
        call(masked)
    kind, name = type(masked), path.removeprefix("argument ")
    found = f"Found {kind.__module__}.{kind.__qualname__}(shape=({len(mask)},), dtype=<f8)."
    expected = [-1.0 if hidden else float(i) for i, hidden in enumerate(mask)]
    if make is _astropy_masked_quantity:
        assert str(info.value) == (
            f"{function}: {path} is a masked array in m; {holder} has no mask and no unit, and dropping them "
            f"would silently unmask values and lose the unit. {found} Fix: use "
            f"{name}.filled(fill_value).to_value(unit), the numbers in the unit you choose, or "
            f"{name}.unmasked.to_value(unit) and {name}.mask as two arrays."
        )
        assert ac.to_tensor(masked.filled(-1.0 * masked.unit).to_value("m")).tolist() == expected
        assert ac.to_tensor(masked.unmasked.to_value("m")).tolist() == values.tolist()
        return
    assert str(info.value) == (
        f"{function}: {path} is a masked array; {holder} has no mask, and dropping it would silently unmask "
        f"values. {found} Fix: use {name}.filled(fill_value), or the data and the mask as two arrays."
    )
    assert ac.to_tensor(masked.filled(-1.0)).tolist() == expected


def test_array_subclasses_without_a_unit_convert_by_their_values(tmp_path: Any) -> None:
    """``np.memmap`` and ``np.matrix`` carry no unit: their values are the data."""
    mapped = np.memmap(tmp_path / "values.bin", dtype=np.float32, mode="w+", shape=(3,))
    mapped[:] = [1.0, 2.0, 3.0]
    assert ac.to_tensor(mapped).tolist() == [1.0, 2.0, 3.0]
    with pytest.warns(PendingDeprecationWarning):
        matrix = np.matrix([[1.0, 2.0]])
    assert ac.to_tensor(matrix).tolist() == [[1.0, 2.0]]


#: Routines called with a callback reaching torch only through a function of the caller's
#: (``model``, closing over ``a``), under the default ``callbacks=False``.
HELPER_CALLS: dict[str, Callable[[Any, Callable[[Any], Any]], Any]] = {
    "nquad": lambda m, model: m.nquad(lambda u, v: model(u) * v, [[0.0, 1.0], [0.0, 1.0]]),
    "minimize": lambda m, model: m.minimize(lambda x: model(x[0]) ** 2, torch.tensor([0.1], dtype=F64)),
    "solve_ivp": lambda m, model: m.solve_ivp(lambda t, y: model(t) * y, (0.0, 1.0), torch.ones(1, dtype=F64)),
}


def _default_route(route: str, name: str, grad: str) -> Any:
    """SciPy's ``name`` as ``route`` reaches it with ``grad=`` and the default callbacks=False."""
    import scipy.integrate

    module = scipy.integrate if hasattr(scipy.integrate, name) else scipy.optimize
    if route == "torchify":
        return ac.torchify(module, grad=grad)
    return types.SimpleNamespace(**{name: ac.returns_tensor(ac.accepts_numpy(getattr(module, name), grad=grad))})


# make_dual's first use scripts torch's decompositions (see above).
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
@pytest.mark.parametrize("forward", [False, True], ids=["requires-grad", "dual"])
@pytest.mark.parametrize("route", ["torchify", "pair"])
@pytest.mark.parametrize("name", list(HELPER_CALLS))
def test_a_callback_reaching_torch_through_a_function_of_its_own_is_a_torch_callback(
    name: str, route: str, forward: bool
) -> None:
    """``lambda u, v: model(u) * v`` with ``model = lambda t: torch.sin(a * t)``: the callables'
    rule follows the functions a callback calls, so it is handed tensors under the default
    callbacks=False, and the gradient its result loses meets the call's grad policy (a warning
    once, a GradientError under "error", silence and the plain value under "detach"), as a
    callback reading torch itself does."""
    from torch.autograd import forward_ad

    call = HELPER_CALLS[name]
    plain = call(_default_route(route, name, "detach"), lambda t: torch.sin(0.7 * t))
    with forward_ad.dual_level():
        if forward:
            a = forward_ad.make_dual(torch.tensor(0.7, dtype=F64), torch.tensor(1.0, dtype=F64))
        else:
            a = torch.tensor(0.7, dtype=F64, requires_grad=True)

        def model(t: Any) -> Any:
            return torch.sin(a * t)

        with pytest.warns(ac.GradientWarning) as caught:
            call(_default_route(route, name, "warn"), model)
        assert len(caught) == 1 and "the result of its callback" in str(caught[0].message)
        with pytest.raises(ac.GradientError, match=r"'s result (requires grad|carries a forward-mode tangent)"):
            call(_default_route(route, name, "error"), model)
        detached = call(_default_route(route, name, "detach"), model)  # silent: warnings are errors
    value = (lambda r: r[0]) if name == "nquad" else (lambda r: r.y if name == "solve_ivp" else r.x)
    assert torch.allclose(torch.as_tensor(value(detached)), torch.as_tensor(value(plain)))


class _Sine(torch.nn.Module):
    """A torch layer: ``sin(a * t)``."""

    def __init__(self, a: torch.Tensor) -> None:
        super().__init__()
        self.a = a

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.a * t)


class _Net:
    """A callable object of the caller's own: ``__call__`` calls a method of self, which reads torch."""

    def __init__(self, a: torch.Tensor) -> None:
        self.a = a

    def __call__(self, t: Any) -> Any:
        return self.block(t)

    def block(self, t: Any) -> Any:
        return torch.sin(self.a * t)


class _Energy:
    """A method calling another method of self (a model calling its layer)."""

    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.layer = layer

    def energy(self, t: Any) -> Any:
        return self.scaled(t)

    def scaled(self, t: Any) -> Any:
        return self.layer(t) * 1.0


class _Static:
    """Torch code held by a class: a static and a class method."""

    a: torch.Tensor

    @staticmethod
    def layer(t: Any) -> Any:
        return torch.sin(_Static.a * t)

    @classmethod
    def scaled(cls, t: Any) -> Any:
        return torch.sin(cls.a * t)


def _scale(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda t: f(t) * 1.0


def _calling(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A lambda calling ``f``, closed over: ``lambda t: model(t)``."""
    return lambda t: f(t)


def _calling_energy(e: _Energy) -> Callable[[Any], Any]:
    return lambda t: e.energy(t)


def _sine(a: torch.Tensor) -> Callable[[Any], Any]:
    return lambda t: torch.sin(a * t)


def _static(a: torch.Tensor, name: str) -> Callable[[Any], Any]:
    """A lambda calling ``_Static.<name>`` through the class, a global."""
    _Static.a = a
    return (lambda t: _Static.layer(t)) if name == "layer" else (lambda t: _Static.scaled(t))


def _callers_module(name: str, source: str) -> types.ModuleType:
    """A module of the caller's own (no library's), made from ``source``."""
    module = types.ModuleType(name)
    exec(source, module.__dict__)
    return module


#: Another module of the caller's, read as a global (``_HELPERS.helper(t)``); its ``a`` is set by each test.
_HELPERS = _callers_module(
    "_callers_helpers",
    "import numpy as np\nimport torch\na = None\n"
    "def helper(t):\n    return torch.sin(a * t)\n"
    "def numpy_helper(t):\n    return np.sin(0.7 * t)\n",
)


def _module_helper(a: torch.Tensor) -> Callable[[Any], Any]:
    _HELPERS.a = a
    return lambda t: _HELPERS.helper(t)


def _module_helper_closed_over(a: torch.Tensor) -> Callable[[Any], Any]:
    module = _callers_module("_callers_closed_over", "import torch\ndef helper(t):\n    return torch.sin(a * t)\n")
    module.a = a
    return lambda t: module.helper(t)


def _cached(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``f`` behind ``functools.lru_cache`` (a C wrapper; tensors hash by identity)."""
    return functools.lru_cache(maxsize=None)(lambda t: f(t))


class _Config:
    """An object of the caller's holding what a callback reads (``cfg.a``)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


class _Holder:
    """A model holding its layers in a plain list."""

    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.layers = [layer]

    def run(self, t: Any) -> Any:
        return self.layers[0](t)


class _Dynamic:
    """``getattr(self, "layer")`` with a constant name, as ``self.layer``."""

    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.layer = layer

    def __call__(self, t: Any) -> Any:
        return getattr(self, "layer")(t)  # noqa: B009 - the shape under test


class _Base:
    """A parent whose methods a child reaches through ``super()``."""

    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.layer = layer

    def __call__(self, t: Any) -> Any:
        return self.layer(t)

    def run(self, t: Any) -> Any:
        return self.layer(t)


class _SuperCall(_Base):
    def __call__(self, t: Any) -> Any:
        return super().__call__(t)


class _SuperRun(_Base):
    def __call__(self, t: Any) -> Any:
        return super().run(t)

    def run(self, t: Any) -> Any:  # the child's own, which super() passes over
        return t


class _SuperNamed(_Base):
    def __call__(self, t: Any) -> Any:
        return super(_SuperNamed, self).run(t)  # noqa: UP008 - the shape under test

    def run(self, t: Any) -> Any:  # the child's own, which super() passes over
        return t


class _SuperGot(_Base):
    def __call__(self, t: Any) -> Any:
        return getattr(super(), "run")(t)  # noqa: B009 - the shape under test

    def run(self, t: Any) -> Any:  # the child's own, which super() passes over
        return t


class _SuperNamedGot(_Base):
    def __call__(self, t: Any) -> Any:
        return getattr(super(_SuperNamedGot, self), "run", None)(t)  # noqa: UP008 - the shape under test

    def run(self, t: Any) -> Any:  # the child's own, which super() passes over
        return t


def _super_named_in_closure(layer: Callable[[Any], Any]) -> _Base:
    """``super(C, self)`` where ``C`` is a closure variable (a class made in a function)."""

    class Child(_Base):
        def __call__(self, t: Any) -> Any:
            return super(Child, self).run(t)  # noqa: UP008 - the shape under test

    return Child(layer)


class _Slots:
    """An object with ``__slots__``: its attributes are member descriptors of its class."""

    __slots__ = ("layer",)

    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.layer = layer

    def __call__(self, t: Any) -> Any:
        return self.layer(t)


@dataclasses.dataclass(slots=True)
class _SlotsRecord:
    layer: Callable[[Any], Any]

    def __call__(self, t: Any) -> Any:
        return self.layer(t)


def _defaultdict(**items: Any) -> collections.defaultdict[str, Any]:
    held: collections.defaultdict[str, Any] = collections.defaultdict(lambda: None)
    held.update(items)
    return held


def _summing_values(layers: dict[str, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    return lambda t: sum(f(t) for f in layers.values())


class _Branches:
    """A model summing the layers of a dict it holds, iterated through ``items()``."""

    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.branches = {"a": layer}

    def __call__(self, t: Any) -> Any:
        return sum(f(t) for _, f in self.branches.items())


class _CachedMethod:
    """A model whose layer runs behind a ``functools.lru_cache``'d method."""

    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.layer = layer

    @functools.lru_cache(maxsize=64)  # noqa: B019 - the shape under test
    def cached(self, t: Any) -> Any:
        return self.layer(t)

    def __call__(self, t: Any) -> Any:
        return self.cached(t)


class _LazyLayer:
    """A model whose layer a ``functools.cached_property`` makes on first read."""

    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.made = layer

    @functools.cached_property
    def layer(self) -> Callable[[Any], Any]:
        return self.made

    def __call__(self, t: Any) -> Any:
        return self.layer(t)


def _class_table(layer: Callable[[Any], Any]) -> Any:
    """An object reading its class's table through ``self.__class__``."""
    table = type("Table", (), {"table": {"k": layer}, "__call__": lambda self, t: self.__class__.table["k"](t)})
    return table()


def _type_of_self(layer: Callable[[Any], Any]) -> Any:
    """An object reading its class's layer through ``type(self)``."""
    return type("TypeLayer", (), {"layer": layer, "__call__": lambda self, t: type(self).layer(t)})()


class _CachedClassMethod:
    """A model whose class's layer runs behind a class method over ``functools.lru_cache``."""

    layer: Callable[[Any], Any]

    @classmethod
    @functools.lru_cache(maxsize=64)
    def cached(cls, t: Any) -> Any:
        return cls.layer(t)

    def __call__(self, t: Any) -> Any:
        return self.cached(t)


def _cached_class_method(layer: Callable[[Any], Any]) -> _CachedClassMethod:
    held = type("Cached", (_CachedClassMethod,), {"layer": layer})
    return held()


def _got(layers: dict[str, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """A lambda calling a dict's item it gets by a constant key (``d.get("sin")``)."""
    return lambda t: layers.get("sin")(t)  # type: ignore[misc]


class _GotWithDefault:
    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.layers = {"sin": layer}

    def __call__(self, t: Any) -> Any:
        return self.layers.get("sin", None)(t)  # type: ignore[misc]


def _got_by(layers: dict[str, Callable[[Any], Any]], key: str) -> Callable[[Any], Any]:
    """A lambda calling a dict's item it gets by a variable key (``d.get(key)``)."""
    return lambda t: layers.get(key)(t)  # type: ignore[misc]


class _GotByAttribute:
    def __init__(self, layer: Callable[[Any], Any]) -> None:
        self.layers, self.key = {"sin": layer, "scale": 0.7}, "sin"

    def __call__(self, t: Any) -> Any:
        return self.layers.get(self.key)(t)  # type: ignore[misc]


def _two_down(layer: Callable[[Any], Any]) -> Callable[[Any], Any]:
    app = _Config(parts=_Config(head=layer))
    return lambda t: app.parts.head(t)


def _item(container: Any, key: Any) -> Callable[[Any], Any]:
    return lambda t: container[key](t)


def _scaled_by_attribute(cfg: _Config) -> Callable[[Any], Any]:
    """A lambda whose only torch is a tensor an object it closes over holds."""
    return lambda t: (cfg.a * t).sin()


def _numpy_scaled_by_attribute(cfg: _Config) -> Callable[[Any], Any]:
    return lambda t: np.sin(cfg.a * t)


#: Torch code reached through another module of the caller's, a C wrapper (lru_cache), an
#: object's attributes (a tensor; two attributes down; getattr with a constant name) and the
#: items of a plain list, tuple or dict.
_REACHED_FURTHER: dict[str, Callable[[torch.Tensor], Callable[[Any], Any]]] = {
    "helper-of-another-module": _module_helper,
    "helper-of-another-module-closed-over": _module_helper_closed_over,
    "lru-cache-helper-in-lambda": lambda a: _calling(_cached(_sine(a))),
    "lru-cache-helper": lambda a: _cached(_sine(a)),
    "tensor-attribute-of-an-object": lambda a: _scaled_by_attribute(_Config(a=a)),
    "module-in-a-list": lambda a: _item([_Sine(a)], 0),
    "function-in-a-tuple": lambda a: _item((_sine(a),), 0),
    "module-in-a-dict": lambda a: _item({"sin": _Sine(a)}, "sin"),
    "list-attribute-of-self": lambda a: _Holder(_Sine(a)).run,
    "list-attribute-of-self-in-lambda": lambda a: _calling(_Holder(_sine(a)).run),
    "two-attributes-down": lambda a: _two_down(_Sine(a)),
    "getattr-with-a-constant-name": lambda a: _Dynamic(_sine(a)),
    "super-call": lambda a: _SuperCall(_Sine(a)),
    "super-method": lambda a: _SuperRun(_sine(a)),
    "two-argument-super-method": lambda a: _SuperNamed(_sine(a)),
    "two-argument-super-of-a-closure-class": lambda a: _super_named_in_closure(_Sine(a)),
    "getattr-of-super-method": lambda a: _SuperGot(_sine(a)),
    "getattr-of-two-argument-super-method": lambda a: _SuperNamedGot(_Sine(a)),
    "slots-object": lambda a: _Slots(_sine(a)),
    "slots-object-in-lambda": lambda a: _calling(_Slots(_Sine(a))),
    "slots-dataclass": lambda a: _SlotsRecord(_sine(a)),
    "module-in-an-ordered-dict": lambda a: _item(collections.OrderedDict(sin=_Sine(a)), "sin"),
    "function-in-a-defaultdict": lambda a: _item(_defaultdict(sin=_sine(a)), "sin"),
    "dict-values-iterated": lambda a: _summing_values({"sin": _sine(a)}),
    "dict-items-of-self-iterated": lambda a: _Branches(_Sine(a)),
    "lru-cache-method": lambda a: _CachedMethod(_sine(a)),
    "cached-property-not-yet-computed": lambda a: _LazyLayer(_Sine(a)),
    "class-attribute-through-dunder-class": lambda a: _class_table(_sine(a)),
    "class-attribute-through-type-of-self": lambda a: _type_of_self(_Sine(a)),
    "lru-cache-class-method": lambda a: _cached_class_method(_Sine(a)),
    "dict-get-with-a-constant-key": lambda a: _got({"sin": _sine(a)}),
    "dict-get-of-self-with-a-default": lambda a: _GotWithDefault(_Sine(a)),
    "dict-get-with-a-variable-key": lambda a: _got_by({"cos": np.cos, "sin": _sine(a)}, "sin"),
    "dict-get-of-self-with-a-variable-key": lambda a: _GotByAttribute(_Sine(a)),
}


#: Torch code the callables' rule reaches through the caller's objects, made for a tensor ``a``:
#: ``sin(a * t)``, which torch computes from the Python floats ``quad`` hands, losing ``a``'s
#: gradient, unless the rule hands the callable tensors.
REACHED: dict[str, Callable[[torch.Tensor], Callable[[Any], Any]]] = {
    "module-in-lambda": lambda a: _calling(_Sine(a)),
    "callable-object": _Net,
    "callable-object-in-lambda": lambda a: _calling(_Net(a)),
    "method-calling-self": lambda a: _Energy(_sine(a)).energy,
    "method-calling-self-in-lambda": lambda a: _calling_energy(_Energy(_Sine(a))),
    "closures-of-one-factory": lambda a: _scale(_scale(_sine(a))),
    "static-method-in-lambda": lambda a: _static(a, "layer"),
    "class-method-in-lambda": lambda a: _static(a, "scaled"),
    **_REACHED_FURTHER,
}


@pytest.mark.parametrize("grad", [None, "warn", "detach", "error"])
@pytest.mark.parametrize("route", ["torchify", "pair"])
@pytest.mark.parametrize("reached", sorted(REACHED))
def test_torch_code_reached_through_the_callers_objects_takes_tensors(
    reached: str, route: str, grad: str | None
) -> None:
    """Under the default callbacks=False, a callable reaching torch through an ``nn.Module``
    it calls, a callable object's ``__call__``, ``self.<name>`` in a method, a class's static
    or class method, or closures of one factory, is handed tensors: ``quad``'s value is
    NumPy's, and a gradient its result loses meets the call's grad policy (grad=None: a plain
    tensor, nothing lost)."""
    import scipy.integrate

    a = torch.tensor(0.7, dtype=torch.float64, requires_grad=grad is not None)
    callable_ = REACHED[reached](a)
    assert written_in_torch(callable_)
    options = {} if grad is None else {"grad": grad}
    if route == "torchify":
        quad = ac.torchify(scipy.integrate, **options).quad
    else:
        quad = ac.returns_tensor(ac.accepts_numpy(scipy.integrate.quad, **options))
    expected = scipy.integrate.quad(lambda t: np.sin(0.7 * t), 0, 1)[0]
    if grad == "error":
        with pytest.raises(ac.GradientError, match=r"^quad\(\): callback .*'s result requires grad"):
            quad(callable_, 0, 1)
        return
    with pytest.warns(ac.GradientWarning) if grad == "warn" else contextlib.nullcontext() as caught:
        value = quad(callable_, 0, 1)[0]
    assert float(value) == pytest.approx(expected, rel=1e-12)
    if grad == "warn":
        assert len(caught) == 1


class _NumpyNet:
    def __call__(self, t: Any) -> Any:
        return self.block(t)

    def block(self, t: Any) -> Any:
        return np.sin(0.7 * t)


class _NumpyStatic:
    @staticmethod
    def layer(t: Any) -> Any:
        return np.sin(0.7 * t)


@pytest.mark.parametrize(
    "callable_",
    [
        pytest.param(_NumpyNet(), id="callable-object"),
        pytest.param(_calling(_NumpyNet()), id="callable-object-in-lambda"),
        pytest.param(_Energy(lambda t: np.sin(0.7 * t)).energy, id="method-calling-self"),
        pytest.param(lambda t: _NumpyStatic.layer(t), id="static-method-in-lambda"),
        pytest.param(_scale(_scale(lambda t: np.sin(0.7 * t))), id="closures-of-one-factory"),
        pytest.param(lambda t: _HELPERS.numpy_helper(t), id="helper-of-another-module"),
        pytest.param(_cached(lambda t: np.sin(0.7 * t)), id="lru-cache-helper"),
        pytest.param(_calling(_cached(lambda t: np.sin(0.7 * t))), id="lru-cache-helper-in-lambda"),
        pytest.param(_numpy_scaled_by_attribute(_Config(a=np.float64(0.7))), id="array-attribute-of-an-object"),
        pytest.param(_item([np.sin], 0), id="function-in-a-list"),
        pytest.param(_item((lambda t: np.sin(0.7 * t),), 0), id="function-in-a-tuple"),
        pytest.param(_item({"sin": np.sin}, "sin"), id="function-in-a-dict"),
        pytest.param(_Holder(lambda t: np.sin(0.7 * t)).run, id="list-attribute-of-self"),
        pytest.param(_two_down(lambda t: np.sin(0.7 * t)), id="two-attributes-down"),
        pytest.param(_Dynamic(lambda t: np.sin(0.7 * t)), id="getattr-with-a-constant-name"),
        pytest.param(_SuperCall(lambda t: np.sin(0.7 * t)), id="super-call"),
        pytest.param(_SuperRun(lambda t: np.sin(0.7 * t)), id="super-method"),
        pytest.param(_SuperNamed(lambda t: np.sin(0.7 * t)), id="two-argument-super-method"),
        pytest.param(_super_named_in_closure(np.sin), id="two-argument-super-of-a-closure-class"),
        pytest.param(_SuperGot(lambda t: np.sin(0.7 * t)), id="getattr-of-super-method"),
        pytest.param(_SuperNamedGot(np.sin), id="getattr-of-two-argument-super-method"),
        pytest.param(_Slots(lambda t: np.sin(0.7 * t)), id="slots-object"),
        pytest.param(_SlotsRecord(lambda t: np.sin(0.7 * t)), id="slots-dataclass"),
        pytest.param(_item(collections.OrderedDict(sin=np.sin), "sin"), id="function-in-an-ordered-dict"),
        pytest.param(_item(_defaultdict(sin=np.sin), "sin"), id="function-in-a-defaultdict"),
        pytest.param(_summing_values({"sin": lambda t: np.sin(0.7 * t)}), id="dict-values-iterated"),
        pytest.param(_Branches(lambda t: np.sin(0.7 * t)), id="dict-items-of-self-iterated"),
        pytest.param(_CachedMethod(lambda t: np.sin(0.7 * t)), id="lru-cache-method"),
        pytest.param(_LazyLayer(lambda t: np.sin(0.7 * t)), id="cached-property-not-yet-computed"),
        pytest.param(_class_table(lambda t: np.sin(0.7 * t)), id="class-attribute-through-dunder-class"),
        pytest.param(_type_of_self(np.sin), id="class-attribute-through-type-of-self"),
        pytest.param(_cached_class_method(np.sin), id="lru-cache-class-method"),
        pytest.param(_got({"sin": lambda t: np.sin(0.7 * t)}), id="dict-get-with-a-constant-key"),
        pytest.param(_GotWithDefault(lambda t: np.sin(0.7 * t)), id="dict-get-of-self-with-a-default"),
        pytest.param(_got_by({"cos": np.cos, "sin": np.sin}, "sin"), id="dict-get-with-a-variable-key"),
        pytest.param(_GotByAttribute(lambda t: np.sin(0.7 * t)), id="dict-get-of-self-with-a-variable-key"),
    ],
)
def test_numpy_code_reached_through_the_callers_objects_gets_arrays(callable_: Callable[[Any], Any]) -> None:
    """The same shapes written in NumPy are no torch code: handed arrays, as SciPy hands them."""
    assert not written_in_torch(callable_)


@pytest.mark.parametrize("route", ["torchify", "pair"])
def test_an_lru_cache_method_in_torch_is_handed_hashable_tensors(route: str) -> None:
    """A callable object whose torch code runs behind an ``lru_cache``'d method is handed
    tensors (hashed by identity), never arrays, which ``lru_cache`` cannot hash."""
    objective = _CachedMethod(lambda x: ((x - 2.0) ** 2).sum() + 0.0 * torch.sin(x).sum())
    if route == "torchify":
        minimize = ac.torchify(scipy.optimize).minimize
    else:
        minimize = ac.returns_tensor(ac.accepts_numpy(scipy.optimize.minimize))
    found = minimize(objective, torch.zeros(2, dtype=torch.float64), method="Nelder-Mead")
    np.testing.assert_allclose(found.x.numpy(), [2.0, 2.0], atol=1e-4)


class _ReadsItsModel:
    """NumPy code that reads a model it holds, never calling it."""

    def __init__(self) -> None:
        self.model = torch.nn.Linear(1, 1, dtype=torch.float64).eval()

    def __call__(self, x: Any) -> float:
        assert isinstance(x, np.ndarray), type(x)
        return float(np.sum((x.copy() - 0.3) ** 2)) * (2.0 if self.model.training else 1.0)


def _numpy_loss(x: Any) -> float:
    assert isinstance(x, np.ndarray), type(x)
    return float(np.sum((x.copy() - 0.3) ** 2))


class _DictOfNumpyCode(dict[str, Any]):
    """A dict holding a model whose own ``__getitem__`` gives NumPy code instead."""

    def __getitem__(self, key: str) -> Any:
        return _numpy_loss


class _CachedFlag:
    """NumPy code whose ``functools.cached_property`` helper uses torch for a flag alone."""

    @functools.cached_property
    def gpu(self) -> bool:
        return torch.cuda.is_available()

    def __call__(self, x: Any) -> float:
        return _numpy_loss(x) + 0.0 * self.gpu


class _CachedScale:
    """NumPy code whose ``functools.lru_cache`` method uses torch for a constant alone."""

    @functools.lru_cache(maxsize=4)  # noqa: B019 - the shape under test
    def scale(self, k: int) -> float:
        return float(torch.tensor(k, dtype=torch.float64))

    def __call__(self, x: Any) -> float:
        return _numpy_loss(x) * self.scale(1)


def _indexing_a_dict_of_numpy_code() -> Callable[[Any], float]:
    held = _DictOfNumpyCode(loss=torch.nn.Identity())
    return lambda x: held["loss"](x)


#: NumPy code the rule judges torch, as the guide's limits name them: code reading a model it
#: holds without calling it, indexing a dict whose own ``__getitem__`` gives other code than
#: it holds, calling a helper of its own that uses torch for a flag or a constant alone.
_JUDGED_TORCH: dict[str, Callable[[], Callable[[Any], float]]] = {
    "reads-a-model-it-holds": _ReadsItsModel,
    "dict-subclass-getitem-giving-numpy-code": _indexing_a_dict_of_numpy_code,
    "cached-property-torch-flag": _CachedFlag,
    "lru-cache-method-torch-constant": _CachedScale,
}


@pytest.mark.parametrize("made", sorted(_JUDGED_TORCH))
def test_numpy_code_judged_torch_gets_arrays_through_accepts_numpy(made: str) -> None:
    """The documented fix for NumPy code judged torch (the rule reads code, it does not run
    it): ``accepts_numpy`` around it hands its code arrays again, and minimize finds SciPy's
    minimum."""
    objective = _JUDGED_TORCH[made]()
    assert written_in_torch(objective)
    found = ac.torchify(scipy.optimize).minimize(ac.accepts_numpy(objective), np.array([0.5]), method="Nelder-Mead")
    expected = scipy.optimize.minimize(objective, np.array([0.5]), method="Nelder-Mead")
    np.testing.assert_allclose(found.x.numpy(), expected.x)


def test_a_dicts_items_are_read_without_running_its_code() -> None:
    """A dict subclass's items are read from its storage: a ``defaultdict``'s factory never
    runs for a key the code reads that it lacks, nor does a subclass's ``__getitem__``."""
    made: list[str] = []

    class Logged(dict[str, Any]):
        def __getitem__(self, key: str) -> Any:
            made.append(key)
            return torch.sin

    missing = collections.defaultdict(lambda: made.append("factory"))
    assert not written_in_torch(lambda t: missing["layer"](t))
    assert not written_in_torch(lambda t: Logged()["layer"](t))
    assert made == []
    assert "layer" not in missing


class _NumpyObjective:
    """A NumPy objective whose object also holds, under the name of an array method its code
    calls on its argument (``x.mean()``), something of torch's: never read by its code."""

    def __init__(self, name: str, held: Any) -> None:
        setattr(self, name, held)

    def __call__(self, x: Any) -> Any:
        return self.loss(x)

    def loss(self, x: Any) -> Any:
        d = x.copy() - 2.0
        return float((d * d).mean() + 0.0 * d.sum() + 0.0 * d.T.std())


#: What a NumPy objective's object holds under an array method's name: a tensor, torch's own
#: function, an nn.Module.
_HELD = {
    "tensor": lambda: torch.tensor(2.0, dtype=torch.float64),
    "torch-function": lambda: torch.mean,
    "module": torch.nn.Identity,
}


def _numpy_objectives(name: str, held: Any) -> dict[str, Callable[[Any], Any]]:
    """The shapes of a NumPy objective whose code calls ``x.<name>()``: the callable object, its
    bound method, a lambda calling it, and a lambda reading another attribute of a global or
    closed-over object holding ``held`` under ``name``."""
    objective = _NumpyObjective(name, held)
    cfg = _Config(target=2.0, **{name: held})
    _CFG.__dict__.clear()
    _CFG.__dict__.update(target=2.0, **{name: held})
    return {
        "callable-object": objective,
        "bound-method": objective.loss,
        "lambda-calling-it": lambda x: objective(x),
        "closed-over-object": lambda x: float(((x.copy() - cfg.target) ** 2).mean() + 0.0 * x.sum() + 0.0 * x.T.std()),
        "global-object": lambda x: float(((x.copy() - _CFG.target) ** 2).mean() + 0.0 * x.sum() + 0.0 * x.T.std()),
    }


_CFG = _Config()


@pytest.mark.parametrize("name", ["mean", "sum", "T", "copy", "std"])
@pytest.mark.parametrize("held", sorted(_HELD))
def test_numpy_code_beside_torch_held_under_an_array_methods_name_is_no_torch_code(name: str, held: str) -> None:
    """Only the attributes the code loads on an object count (``self.loss``, ``cfg.target``),
    never an attribute name it loads on its argument (``x.mean()``): NumPy code whose object
    holds a tensor, torch's function or an nn.Module under that name is no torch code."""
    for shape, objective in _numpy_objectives(name, _HELD[held]()).items():
        assert not written_in_torch(objective), shape


@pytest.mark.parametrize(
    "shape", ["callable-object", "bound-method", "lambda-calling-it", "closed-over-object", "global-object"]
)
def test_numpy_code_beside_torch_held_under_an_array_methods_name_gets_arrays(shape: str) -> None:
    """Such an objective is handed arrays by minimize, as plain SciPy hands them (a tensor has
    no ``copy()``), and finds SciPy's minimum (an nn.Module under ``mean``)."""
    objective = _numpy_objectives("mean", torch.nn.Identity())[shape]
    found = ac.torchify(scipy.optimize).minimize(objective, torch.zeros(2, dtype=torch.float64), method="Nelder-Mead")
    expected = scipy.optimize.minimize(objective, np.zeros(2), method="Nelder-Mead")
    np.testing.assert_allclose(found.x.numpy(), expected.x)


def _chained(self: Any, x: Any, cfg: Any = None) -> Any:
    """Attribute chains in each shape the bytecode gives them (a closure's ``self`` inside a
    lambda, a comprehension's, ``getattr`` with a constant name and a default, constant keys)."""
    self.count += 1
    return (
        self.layers[0](x),
        _APP.parts.head(x),
        cfg.a * x.T,
        [self.w * v for v in x],
        getattr(self, "layer")(x),  # noqa: B009 - the shape under test
        getattr(self.parts, "head", None),
        (lambda: self.inner)(),  # noqa: PLC3002 - a nested function reading self
        _SETTINGS["scale"] * self.blocks[-1].layer(x),
    )


_APP = _Config()
_SETTINGS: dict[str, Any] = {}


def test_attribute_chains_are_read_from_the_bytecode() -> None:
    """Which attribute names and constant keys are loaded on which variable, as each Python's
    opcodes say (LOAD_METHOD on 3.11; two locals in one instruction on 3.13); one on an
    argument without a default (``x.T``) is read too, and never followed."""
    from autoconvert._spec._code_reads import SUPER, code_reads

    reads = code_reads(_chained.__code__)
    assert reads.global_chains["_APP"] == (("parts", "head"),)
    assert reads.global_chains["_SETTINGS"] == ((("scale",),),)
    assert set(reads.local_chains["self"]) - {()} == {  # Python 3.13 loads self whole for the lambda's closure
        ("count",),
        ("layers", (0,)),
        ("w",),
        ("layer",),
        ("parts", "head"),
        ("inner",),
        ("blocks", (-1,), "layer"),
    }
    assert reads.local_chains["cfg"] == (("a",),)
    assert code_reads(_SuperRun.__call__.__code__).local_chains[SUPER] == (("run",),)  # LOAD_SUPER_ATTR on 3.12+
    assert code_reads(_SuperGot.__call__.__code__).local_chains[SUPER] == (("run",),)  # getattr(super(), "run")
    assert set(reads.local_chains["x"]) == {(), ("T",)}


def _scaled_sine(c: float, t: Any, a: torch.Tensor) -> Any:
    return torch.sin(c * a * t)


def test_a_partial_callback_is_named_by_the_function_it_calls() -> None:
    """A ``functools.partial`` given as the callback is named by the function it calls in the
    refusal of its result, not as ``partial()``."""
    import scipy.integrate

    a = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ac.GradientError) as info:
        ac.torchify(scipy.integrate, grad="error").quad(functools.partial(_scaled_sine, 1.0, a=a), 0, 1)
    assert str(info.value) == (
        "quad(): callback _scaled_sine()'s result requires grad, and NumPy code cannot pass gradients back. Found "
        "torch.Tensor(shape=(), dtype=torch.float64, layout=torch.strided, device=cpu). Fix: .detach() the "
        "callback's result, call under torch.no_grad(), or allow it detached with grad='detach' (in the "
        "ac.torchify(..., grad='detach') call that made it, where grad='error' was given, so a config block cannot "
        "change it; grad='warn' says so once); to keep the gradient, make quad a differentiable torch operation "
        "with ac.numpy_op(quad, backward=...), its vector-Jacobian product written in NumPy."
    )


class _Cosine(torch.nn.Module):
    """``cos(w * x) - 0.5``, its weight a parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(0.7, dtype=torch.float64))

    def forward(self, x: Any) -> Any:
        return torch.cos(self.w * x) - 0.5


def _apply(f: Any, x: Any) -> Any:
    return f(x)


def _apply_scaled(f: Any, c: float, x: Any) -> Any:
    return f(c * x)


def _apply_with(f: Any, holder: Any, x: Any) -> Any:
    return f(x)


def _apply_named(x: Any, **named: Any) -> Any:
    return named["f"](x)


class _Partial(functools.partial):  # type: ignore[type-arg]
    """A partial subclass, which ``functools.partial`` does not flatten into one around it."""


def _partial_method(f: Any) -> Any:
    """A method made with ``functools.partialmethod`` binding the callable ``f``, as an object gives it."""

    class Runs:
        def _run(self, f: Any, x: Any) -> Any:
            return f(x)

        run = functools.partialmethod(_run, f)

    return Runs().run


#: The ways a partial binds the callable its function calls (``f``: torch code, or its NumPy
#: twin), each a callable of ``x``.
_BOUND_SHAPES: dict[str, Callable[[Any], Any]] = {
    "keyword": lambda f: functools.partial(lambda x, f: f(x), f=f),
    "positional": lambda f: functools.partial(_apply, f),
    "nested": lambda f: functools.partial(functools.partial(_apply_scaled, f), 1.0),
    "nested-subclass": lambda f: functools.partial(_Partial(_apply_scaled, f), 1.0),
    "kwargs": lambda f: functools.partial(_apply_named, f=f),
    "method-of-a-partial": lambda f: types.MethodType(functools.partial(_apply_with, f), object()),
    "partialmethod": _partial_method,
}

#: The function each shape calls, as messages name the callback.
_BOUND_NAMES = {
    "keyword": "<lambda>.<locals>.<lambda>",
    "positional": "_apply",
    "nested": "_apply_scaled",
    "nested-subclass": "_apply_scaled",
    "kwargs": "_apply_named",
    "method-of-a-partial": "_apply_with",
    "partialmethod": "_partial_method.<locals>.Runs._run",
}


def _torch_core(kind: str, seen: list[type]) -> Any:
    """``cos(0.7 x) - 0.5`` written in torch as ``kind`` says: a function of the caller's
    closing over a weight requiring grad, or an ``nn.Module`` with the weight its parameter."""
    w = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    if kind == "module":
        module = _Cosine()
        module.register_forward_pre_hook(lambda _, args: seen.append(type(args[0])))
        return module

    def model(x: Any) -> Any:
        seen.append(type(x))
        return torch.cos(w * x) - 0.5

    return model


def _bound_callback(shape: str, kind: str, seen: list[type]) -> Any:
    """The callback of ``shape`` binding the torch code of ``kind`` (``numpy``: its NumPy twin)."""
    if kind == "numpy":
        return _BOUND_SHAPES[shape](lambda x: (seen.append(type(x)), np.cos(0.7 * x) - 0.5)[1])
    if kind == "torch-function":  # torch.cos itself bound, in a function reading no torch
        return functools.partial(lambda x, f: (seen.append(type(x)), f(0.7 * x) - 0.5)[1], f=torch.cos)
    if kind == "tensor":  # the weight alone bound, in a function reading no torch
        w = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
        return functools.partial(lambda x, w: (seen.append(type(x)), (w * x).cos() - 0.5)[1], w=w)
    return _BOUND_SHAPES[shape](_torch_core(kind, seen))


#: Each SciPy routine calling the callback with Python floats, its plain value from the result.
_ROUTINES: dict[str, tuple[str, Callable[..., Any], Callable[[Any], float]]] = {
    "quad": ("integrate", lambda m, f: m.quad(f, 0, 1), lambda r: float(r[0])),
    "brentq": ("optimize", lambda m, f: m.brentq(f, 0, 3), float),
    "minimize_scalar": (
        "optimize",
        lambda m, f: m.minimize_scalar(f, bounds=(2, 7), method="bounded"),
        lambda r: float(r.x),
    ),
}

_BOUND_CASES = [
    *(pytest.param(shape, "function", id=f"{shape}-function") for shape in _BOUND_SHAPES),
    *(pytest.param(shape, "module", id=f"{shape}-module") for shape in ("keyword", "positional", "nested")),
    pytest.param("keyword", "tensor", id="tensor"),
]


def _plain(routine: str) -> float:
    module, call, value = _ROUTINES[routine]
    return value(call(importlib.import_module(f"scipy.{module}"), lambda x: np.cos(0.7 * x) - 0.5))


def _run_bound(routine: str, callback: Any, grad: str) -> float:
    module, call, value = _ROUTINES[routine]
    return value(call(ac.torchify(importlib.import_module(f"scipy.{module}"), grad=grad), callback))


def _callback_grad_error(routine: str, name: str) -> str:
    """The GradientError of ``routine`` handed a torch callback ``name`` under grad="error"."""
    return (
        f"{routine}(): callback {name}()'s result requires grad, and NumPy code cannot pass gradients back. Found "
        "torch.Tensor(shape=(), dtype=torch.float64, layout=torch.strided, device=cpu). Fix: .detach() the "
        "callback's result, call under torch.no_grad(), or allow it detached with grad='detach' (in the "
        "ac.torchify(..., grad='detach') call that made it, where grad='error' was given, so a config block cannot "
        f"change it; grad='warn' says so once); to keep the gradient, make {routine} a differentiable torch "
        f"operation with ac.numpy_op({routine}, backward=...), its vector-Jacobian product written in NumPy."
    )


@pytest.mark.parametrize("routine", list(_ROUTINES))
@pytest.mark.parametrize(("shape", "kind"), _BOUND_CASES)
def test_torch_code_bound_in_a_partial_makes_the_partial_torch_code(shape: str, kind: str, routine: str) -> None:
    """A torch callable a partial binds (by keyword, by position, through nested partials and
    a partial subclass, into ``**kwargs``, a bound method of a partial, a
    ``functools.partialmethod``), an ``nn.Module``, a torch function or a tensor bound, is
    read as a default is: the partial is torch code, handed tensors by quad, brentq and
    minimize_scalar, and its result requiring grad meets grad="error"."""
    seen: list[type] = []
    with pytest.raises(ac.GradientError) as info:
        _run_bound(routine, _bound_callback(shape, kind, seen), "error")
    assert seen == [torch.Tensor]
    name = "_bound_callback.<locals>.<lambda>" if kind == "tensor" else _BOUND_NAMES[shape]
    assert str(info.value) == _callback_grad_error(routine, name)


@pytest.mark.parametrize("grad", ["warn", "detach"])
@pytest.mark.parametrize("routine", list(_ROUTINES))
@pytest.mark.parametrize(("shape", "kind"), _BOUND_CASES)
def test_torch_code_bound_in_a_partial_gives_scipys_value_under_each_grad_policy(
    shape: str, kind: str, routine: str, grad: str
) -> None:
    """Under grad="warn" a partial binding torch code gives SciPy's value with one
    GradientWarning; under "detach" the value alone; its torch code is handed tensors."""
    seen: list[type] = []
    context = pytest.warns(ac.GradientWarning) if grad == "warn" else contextlib.nullcontext()
    with context as caught:
        found = _run_bound(routine, _bound_callback(shape, kind, seen), grad)
    if caught is not None:
        assert len([w for w in caught if w.category is ac.GradientWarning]) == 1
    assert set(seen) == {torch.Tensor}
    assert found == pytest.approx(_plain(routine), rel=1e-9)


@pytest.mark.parametrize("grad", ["error", "warn", "detach"])
@pytest.mark.parametrize("routine", list(_ROUTINES))
@pytest.mark.parametrize("shape", list(_BOUND_SHAPES))
def test_numpy_code_bound_in_a_partial_keeps_getting_floats(shape: str, routine: str, grad: str) -> None:
    """The NumPy twin of each bound shape stays NumPy code: handed SciPy's floats, it gives
    plain SciPy's value, with nothing said under any grad policy."""
    seen: list[type] = []
    found = _run_bound(routine, _bound_callback(shape, "numpy", seen), grad)
    assert seen and all(issubclass(t, float) for t in seen)
    assert found == _plain(routine)


@pytest.mark.parametrize("grad", ["error", "warn"])
@pytest.mark.parametrize("routine", list(_ROUTINES))
def test_a_torch_function_bound_in_a_partial_makes_the_partial_torch_code(routine: str, grad: str) -> None:
    """A torch function a partial binds (``f=torch.cos``) in a function reading no torch
    makes the partial torch code: handed tensors, it gives SciPy's value, with nothing for
    any grad policy to say (no tensor requiring grad)."""
    seen: list[type] = []
    found = _run_bound(routine, _bound_callback("keyword", "torch-function", seen), grad)
    assert set(seen) == {torch.Tensor}
    assert found == pytest.approx(_plain(routine), rel=1e-9)


def _model(x: Any) -> Any:
    return torch.sin(_WEIGHT * x)


_WEIGHT = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
_NUMPY_BOUND = functools.partial(_apply, np.sin)
_TORCH_BOUND = functools.partial(_apply, _model)


class _Methods:
    """Methods made with ``functools.partialmethod``, binding torch code or NumPy's."""

    def _run(self, f: Any, x: Any) -> Any:
        return f(x)

    run = functools.partialmethod(_run, _model)
    run_numpy = functools.partialmethod(_run, np.sin)

    def calls(self, x: Any) -> Any:
        return self.run(x)

    def calls_numpy(self, x: Any) -> Any:
        return self.run_numpy(x)


class _PartialCall:
    """A callable object whose ``__call__`` is a ``functools.partialmethod``."""

    def _run(self, f: Any, x: Any) -> Any:
        return f(x)

    __call__ = functools.partialmethod(_run, _model)


@pytest.mark.parametrize(
    ("callback", "torch_written"),
    [
        pytest.param(functools.partial(lambda x, f=np.sin: f(x), f=_model), True, id="bound-over-a-numpy-default"),
        pytest.param(functools.partial(lambda x, f=_model: f(x), f=np.sin), False, id="bound-over-a-torch-default"),
        pytest.param(functools.partial(lambda x, *fs: fs[0](x), _model), True, id="bound-into-args"),
        pytest.param(lambda x: _NUMPY_BOUND(x) + _TORCH_BOUND(x), True, id="one-function-bound-twice"),
        pytest.param(lambda x: _TORCH_BOUND(x), True, id="a-helper-partial"),
        pytest.param(_Methods().calls, True, id="self-partialmethod"),
        pytest.param(_Methods().calls_numpy, False, id="self-partialmethod-numpy"),
        pytest.param(_PartialCall(), True, id="call-partialmethod"),
    ],
)
def test_a_partials_bound_arguments_are_read_as_the_defaults_they_stand_in_for(
    callback: Any, torch_written: bool
) -> None:
    """What a partial binds replaces the default it stands in for (a torch callable bound over
    a NumPy default is torch code, and the reverse), fills ``*args``, and is read in a partial
    the callable calls; one function bound to NumPy's and to torch code in two partials is
    judged twice; a ``functools.partialmethod`` read on ``self`` or as ``__call__`` is read
    as the partial it gives."""
    assert written_in_torch(callback) is torch_written


_OFFSET = torch.tensor(-0.5, dtype=torch.float64, requires_grad=True)
_TORCH_SCALE = functools.partial(torch.mul, _WEIGHT)
_NUMPY_SCALE = functools.partial(np.multiply, 0.7)


def _scaled(reach: str, scale: Any) -> Any:
    """``0.7 x - 0.5`` calling ``scale`` (``0.7 x``) one call deeper, reached as ``reach`` says."""
    if reach == "bound-in-a-partial":
        return functools.partial(lambda x, g: g(x) - 0.5, g=scale)
    if reach == "default":
        return lambda x, g=scale: g(x) - 0.5
    if reach == "closure":

        def closing(x: Any) -> Any:
            return scale(x) - 0.5

        return closing
    if reach == "torch-global":
        return lambda x: _TORCH_SCALE(x) - 0.5
    return lambda x: _NUMPY_SCALE(x) - 0.5


#: Torch code one call deeper than the callable, as a partial of a torch builtin or a tensor's
#: own method: (the callable, its name in messages).
_DEEPER_TORCH: dict[str, tuple[Callable[[], Any], str]] = {
    **{
        f"partial-of-torch.mul-{reach}": (lambda reach=reach: _scaled(reach, _TORCH_SCALE), name)
        for reach, name in [
            ("bound-in-a-partial", "_scaled.<locals>.<lambda>"),
            ("default", "_scaled.<locals>.<lambda>"),
            ("closure", "_scaled.<locals>.closing"),
        ]
    },
    "partial-of-torch.mul-global": (lambda: _scaled("torch-global", None), "_scaled.<locals>.<lambda>"),
    "tensor-method-default": (lambda: _scaled("default", _WEIGHT.mul), "_scaled.<locals>.<lambda>"),
    "tensor-class-method-bound": (
        lambda: _scaled("default", functools.partial(torch.Tensor.mul, other=_WEIGHT)),
        "_scaled.<locals>.<lambda>",
    ),
    "partial-of-a-tensor-method": (lambda: functools.partial(_OFFSET.add, alpha=0.7), "Tensor.add"),
}
#: Their NumPy twins: a partial of a NumPy ufunc, an array's own method.
_DEEPER_NUMPY: dict[str, Callable[[], Any]] = {
    "partial-of-np.multiply-bound-in-a-partial": lambda: _scaled("bound-in-a-partial", _NUMPY_SCALE),
    "partial-of-np.multiply-default": lambda: _scaled("default", _NUMPY_SCALE),
    "partial-of-np.multiply-closure": lambda: _scaled("closure", _NUMPY_SCALE),
    "partial-of-np.multiply-global": lambda: _scaled("numpy-global", None),
    "array-method-default": lambda: _scaled("default", np.array(0.7).dot),
}
_LINEAR_ROUTINES = ["quad", "brentq"]


def _plain_linear(routine: str) -> float:
    module, call, value = _ROUTINES[routine]
    return value(call(importlib.import_module(f"scipy.{module}"), lambda x: 0.7 * x - 0.5))


@pytest.mark.parametrize("routine", _LINEAR_ROUTINES)
@pytest.mark.parametrize("shape", list(_DEEPER_TORCH))
def test_torch_code_one_call_deeper_meets_grad_error(shape: str, routine: str) -> None:
    """A partial of a torch builtin (``partial(torch.mul, w)``) or a tensor's own method
    (``w.mul``, ``torch.Tensor.mul``) is torch code wherever the callable reaches it (bound in a
    partial, a default, a closure cell, a global) as when handed directly: the callable is handed
    tensors, and its result requiring grad meets grad="error"."""
    make, name = _DEEPER_TORCH[shape]
    with pytest.raises(ac.GradientError) as info:
        _run_bound(routine, make(), "error")
    assert str(info.value) == _callback_grad_error(routine, name)


@pytest.mark.parametrize("routine", _LINEAR_ROUTINES)
@pytest.mark.parametrize("shape", list(_DEEPER_TORCH))
def test_torch_code_one_call_deeper_warns_under_grad_warn(shape: str, routine: str) -> None:
    """Under grad="warn" the same callables give SciPy's value with one GradientWarning."""
    with pytest.warns(ac.GradientWarning) as caught:
        found = _run_bound(routine, _DEEPER_TORCH[shape][0](), "warn")
    assert len([w for w in caught if w.category is ac.GradientWarning]) == 1
    assert found == pytest.approx(_plain_linear(routine), rel=1e-9)


@pytest.mark.parametrize("grad", ["error", "warn"])
@pytest.mark.parametrize("routine", _LINEAR_ROUTINES)
@pytest.mark.parametrize("shape", list(_DEEPER_NUMPY))
def test_numpy_code_one_call_deeper_keeps_getting_floats(shape: str, routine: str, grad: str) -> None:
    """The NumPy twins (a partial of ``np.multiply``, an array's ``dot``, reached the same
    ways) stay NumPy code: SciPy's plain value, nothing said under any grad policy."""
    assert not written_in_torch(_DEEPER_NUMPY[shape]())
    assert _run_bound(routine, _DEEPER_NUMPY[shape](), grad) == _plain_linear(routine)


def test_a_tensors_own_methods_are_torch_code() -> None:
    """A tensor's or module's builtin method, handed directly, in a partial or as a default, is
    torch code; an array's, and ``object``'s own methods, are not."""
    for function in [_WEIGHT.mul, functools.partial(_WEIGHT.mul), torch.Tensor.mul, torch.nn.Linear(1, 1).__dir__]:
        assert written_in_torch(function)
    assert written_in_torch(lambda x, f=_WEIGHT.mul: f(x))
    for function in [np.array(0.7).dot, functools.partial(np.array(0.7).dot), object.__repr__, [].append]:
        assert not written_in_torch(function)


class _CallsAPartial:
    __call__ = functools.partial(torch.mul, _WEIGHT)


class _CallsATensorMethod:
    __call__ = _WEIGHT.mul


class _CallsABuiltin:
    __call__ = torch.sin


class _CallsAStaticPartial:
    __call__ = staticmethod(functools.partial(torch.mul, _WEIGHT))


class _CallsANumpyPartial:
    __call__ = functools.partial(np.add, -0.5)


# Python 3.13's own, calling an object whose class holds a partial as __call__ (the shape under test)
@pytest.mark.filterwarnings("ignore:functools.partial will be a method descriptor:FutureWarning")
@pytest.mark.parametrize("routine", _LINEAR_ROUTINES)
def test_an_object_whose_class_call_is_a_partial_or_a_tensor_method_is_torch_code(routine: str) -> None:
    """A class's ``__call__`` that no descriptor binds (a partial of torch's function, a tensor's
    bound method, a torch builtin, one in a staticmethod) is the object's call, read as it is,
    a methodcaller a lambda reads by default too; ``operator.methodcaller``
    passing a tensor or naming a method tensors have and arrays lack is torch code too: handed
    tensors, their result requiring grad meets grad="error". The NumPy twins stay NumPy code."""
    torch_code = [
        _CallsAPartial(),
        _CallsATensorMethod(),
        functools.partial(_CallsATensorMethod()),
        _CallsABuiltin(),
        operator.methodcaller("mul", _WEIGHT),
        operator.methodcaller("mul", other=_WEIGHT),
        operator.methodcaller("sin"),
        _CallsAStaticPartial(),
        lambda t, m=operator.methodcaller("mul", _WEIGHT): m(t),
    ]
    for function in torch_code:
        assert written_in_torch(function)
    for function in torch_code[:3] + torch_code[4:6] + torch_code[7:]:
        with pytest.raises(ac.GradientError):
            _run_bound(routine, function, "error")
    for function in [_CallsANumpyPartial(), operator.methodcaller("dot", 0.7), operator.methodcaller("sum")]:
        assert not written_in_torch(function)
    module, call, value = _ROUTINES[routine]
    plain = value(call(importlib.import_module(f"scipy.{module}"), _CallsANumpyPartial()))
    assert _run_bound(routine, _CallsANumpyPartial(), "error") == plain


def test_the_items_a_list_or_dict_is_read_by_are_judged() -> None:
    """An item read by a constant key is judged alone (a dict of settings holding a model
    beside the number NumPy code reads); a list read whole (indexed by a variable, iterated) is
    judged item by item up to its 64th: a model past it is not seen (the guide's limit), so
    judging a long list costs a bounded time per call."""
    a = torch.tensor(0.7, dtype=torch.float64)
    first, past = [_Sine(a), *[np.sin] * 64], [*[np.sin] * 64, _Sine(a)]
    settings = {"scale": 0.7, "model": _Sine(a)}
    assert written_in_torch(lambda t: first[0](t))
    assert written_in_torch(lambda t, i=0: first[i](t))
    assert written_in_torch(lambda t: past[64](t))
    assert not written_in_torch(lambda t, i=64: past[i](t))
    assert not written_in_torch(lambda t: np.sin(settings["scale"] * t))
    assert written_in_torch(lambda t: settings["model"](t))


def test_what_code_reads_inside_an_item_of_a_container_read_whole_is_not_seen() -> None:
    """Of a container read whole each item is judged itself (a model, a callable object of
    yours); what the code reads inside an item, through a loop variable or a variable index
    (its items, its attributes), is not read: the guide's limit, whose fix is callbacks=True."""
    model = _Sine(torch.tensor(0.7, dtype=torch.float64))
    nested, by_name, blocks = [[model]], {"g": {"a": model}}, [_Config(layer=model)]
    models, nets = [model], [_Net(torch.tensor(0.7, dtype=torch.float64))]
    assert written_in_torch(lambda t: sum(f(t) for f in models))
    assert written_in_torch(lambda t: sum(net(t) for net in nets))
    assert written_in_torch(lambda t: nested[0][0](t))  # constant keys: read
    assert not written_in_torch(lambda t: sum(items[0](t) for items in nested))
    assert not written_in_torch(lambda t, i=0: nested[i][0](t))
    assert not written_in_torch(lambda t: sum(g["a"](t) for g in by_name.values()))
    assert not written_in_torch(lambda t: sum(b.layer(t) for b in blocks))
