"""The catalogue of SciPy rules: each rule's values are SciPy's to the bit, and its gradients
(and tangents) pass torch's gradcheck in float64 in every differentiable argument, mode and
order; numpy_op and torchify take a function's rule with no backward written."""

from __future__ import annotations

import contextlib
import inspect
import pickle
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import scipy.ndimage as ndi
import torch
from scipy import integrate, linalg, signal, special

import autoconvert as ac
from autoconvert._gradients._catalogue import catalogued, rule_for

# torch.func.jacfwd's first use scripts torch's decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning"),
]

MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-mirror", "grid-constant", "grid-wrap"]


def assert_rule(
    fn: Callable[..., Any], args: Sequence[Any], differentiable: Sequence[int], *, jvp: bool = True, **kwargs: Any
) -> None:
    """``numpy_op(fn)`` gives SciPy's own values bit for bit, and passes gradcheck (reverse
    and, where the rule has a ``jvp``, forward mode) in the arguments at the ``differentiable``
    positions."""
    op = ac.numpy_op(fn, copy=True)  # copies: sosfilt's Cython refuses read-only arrays
    expected = fn(*args, **kwargs)
    leaves = [torch.tensor(args[k], dtype=torch.float64, requires_grad=True) for k in differentiable]

    def call(*tensors: torch.Tensor) -> torch.Tensor:
        given = list(args)
        for k, t in zip(differentiable, tensors, strict=True):
            given[k] = t
        return op(*given, **kwargs)  # type: ignore[no-any-return]

    got = call(*leaves)
    assert got.dtype == torch.float64 and np.array_equal(got.detach().numpy(), expected, equal_nan=True)
    assert torch.autograd.gradcheck(call, tuple(leaves))
    if not jvp:
        return
    # The jvp agrees with the backward, which gradcheck held against finite differences.
    argnums = tuple(range(len(leaves)))
    forward = torch.func.jacfwd(call, argnums)(*(t.detach() for t in leaves))
    reverse = torch.func.jacrev(call, argnums)(*(t.detach() for t in leaves))
    for f, r in zip(forward, reverse, strict=True):
        torch.testing.assert_close(f, r)


def _first_fast(*cases: Any) -> list[Any]:
    """``cases`` for a parametrization: the first runs every time, the rest with ``--slow``."""
    return [
        cases[0],
        *(pytest.param(*(c if isinstance(c, tuple) else (c,)), marks=pytest.mark.slow) for c in cases[1:]),
    ]


def _rng(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [ndi.correlate1d, ndi.convolve1d])
@pytest.mark.parametrize(
    ("size", "origin"), _first_fast((4, -1), (3, 0), (3, 1), (3, -1), (4, -2), (4, 0), (4, 1), (9, 0))
)
def test_correlate1d_and_convolve1d_in_input_and_weights(fn: Any, mode: str, size: int, origin: int) -> None:
    """Every mode and origin, even and odd weights, and weights longer than the line (9 > 5)."""
    assert_rule(fn, (_rng(3, 5), _rng(size)), (0, 1), axis=1, mode=mode, cval=0.5, origin=origin)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [ndi.correlate, ndi.convolve])
@pytest.mark.parametrize(("shape", "origin"), _first_fast(((3, 2), (1, -1)), ((3, 2), 0), ((2, 7), (0, -3))))
def test_correlate_and_convolve_in_input_and_weights(fn: Any, mode: str, shape: tuple[int, int], origin: Any) -> None:
    assert_rule(fn, (_rng(4, 5), _rng(*shape)), (0, 1), mode=mode, cval=-0.25, origin=origin)


@pytest.mark.parametrize("fn", [ndi.correlate, ndi.convolve])
def test_correlate_along_chosen_axes(fn: Any) -> None:
    """``axes=``: weights of fewer dimensions than the input, along the axes named."""
    if "axes" not in inspect.signature(fn).parameters:
        pytest.skip(f"this SciPy's {fn.__name__} has no axes=")
    assert_rule(fn, (_rng(3, 4, 5), _rng(2, 3)), (0, 1), mode="mirror", axes=(2, 0), origin=(0, -1))


@pytest.mark.parametrize("mode", [*MODES, ("reflect", "wrap"), ("constant", "mirror")])
@pytest.mark.parametrize(
    ("sigma", "order"), _first_fast(((0.8, 2.5), (0, 1)), (1.0, 0), ((1.5, 0.6), (2, 3)), ((0.0, 1.2), 0))
)
def test_gaussian_filter(mode: Any, sigma: Any, order: Any) -> None:
    """Per-axis sigma (0 leaves an axis unfiltered), orders, modes per axis; 2.5 reaches past a 5-sample line."""
    assert_rule(ndi.gaussian_filter, (_rng(4, 5), sigma), (0,), order=order, mode=mode, cval=0.7)


@pytest.mark.parametrize("options", [{"truncate": 1.5}, {"radius": (1, 2)}, {"axes": (1,), "sigma": 1.3}])
def test_gaussian_filter_truncate_radius_and_axes(options: dict[str, Any]) -> None:
    sigma = options.pop("sigma", (1.0, 0.9))
    assert_rule(ndi.gaussian_filter, (_rng(3, 6), sigma), (0,), mode="nearest", **options)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", _first_fast(1, 0, 2, 3))
def test_gaussian_filter1d(mode: str, order: int) -> None:
    assert_rule(ndi.gaussian_filter1d, (_rng(3, 6), 1.1), (0,), axis=0, order=order, mode=mode, cval=1.5)


def test_gaussian_filter1d_radius() -> None:
    assert_rule(ndi.gaussian_filter1d, (_rng(7), 2.0), (0,), radius=2, mode="wrap")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("size", "origin"), _first_fast(((3, 2), (0, -1)), (2, 0), (3, -1), (4, 1), (7, 0)))
def test_uniform_filter(mode: str, size: Any, origin: Any) -> None:
    assert_rule(ndi.uniform_filter, (_rng(4, 5), size), (0,), mode=mode, cval=2.0, origin=origin)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("size", "origin"), _first_fast((2, -1), (1, 0), (3, 1), (6, 2)))
def test_uniform_filter1d(mode: str, size: int, origin: int) -> None:
    assert_rule(ndi.uniform_filter1d, (_rng(3, 5), size), (0,), axis=-1, mode=mode, origin=origin)


@pytest.mark.parametrize("mode", [*MODES, ("wrap", "constant", "mirror")])
@pytest.mark.parametrize("fn", [ndi.sobel, ndi.prewitt])
@pytest.mark.parametrize("axis", _first_fast(0, -1))
def test_sobel_and_prewitt(fn: Any, mode: Any, axis: int) -> None:
    assert_rule(fn, (_rng(3, 4, 5),), (0,), axis=axis, mode=mode, cval=0.3)


@pytest.mark.parametrize("mode", [*MODES, ("nearest", "grid-wrap")])
def test_laplace(mode: Any) -> None:
    assert_rule(ndi.laplace, (_rng(4, 5),), (0,), mode=mode, cval=-1.0)


@pytest.mark.parametrize("mode", [*MODES, ("mirror", "constant")])
@pytest.mark.parametrize("fn", [ndi.gaussian_laplace, ndi.gaussian_gradient_magnitude])
def test_gaussian_laplace_and_gradient_magnitude(fn: Any, mode: Any) -> None:
    assert_rule(fn, (_rng(4, 5), (0.9, 1.4)), (0,), mode=mode, cval=0.5, truncate=3.0)


def test_gaussian_laplace_along_chosen_axes() -> None:
    if "axes" not in inspect.signature(ndi.gaussian_laplace).parameters:
        pytest.skip("this SciPy's gaussian_laplace takes no axes=")
    assert_rule(ndi.gaussian_laplace, (_rng(3, 4, 5), 1.2), (0,), axes=(0, 2), mode="reflect")


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("method", _first_fast("auto", "direct", "fft"))
@pytest.mark.parametrize("fn", [signal.convolve, signal.correlate])
@pytest.mark.parametrize(("first", "second"), _first_fast(((4, 5), (2, 3)), ((7,), (3,)), ((7,), (4,)), ((3,), (6,))))
def test_convolve_and_correlate_in_both_inputs(fn: Any, mode: str, method: str, first: Any, second: Any) -> None:
    """Every mode and method; odd and even kernels; a second input longer than the first."""
    assert_rule(fn, (_rng(*first), _rng(*second)), (0, 1), mode=mode, method=method)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("fn", [signal.fftconvolve, signal.oaconvolve])
@pytest.mark.parametrize(("second", "axes"), [((2, 4), None), ((1, 4), 1), ((3, 1), 0)])
def test_fftconvolve_and_oaconvolve_in_both_inputs(fn: Any, mode: str, second: tuple[int, int], axes: Any) -> None:
    """``axes=``: along some axes, broadcast along the others."""
    assert_rule(fn, (_rng(3, 6), _rng(*second)), (0, 1), mode=mode, axes=axes)


@pytest.mark.parametrize("axis", [0, -1])
def test_lfilter_in_b_a_and_x(axis: int) -> None:
    b, a = signal.butter(3, 0.3)
    assert_rule(signal.lfilter, (b, a, _rng(5, 6)), (0, 1, 2), axis=axis)


def test_lfilter_without_a_leading_one() -> None:
    """``a[0]`` other than 1 normalizes the filter: its gradient counts it."""
    assert_rule(signal.lfilter, (np.array([0.5, 0.2]), np.array([2.0, -0.4, 0.1]), _rng(9)), (0, 1, 2))


@pytest.mark.parametrize("axis", [0, -1])
def test_sosfilt_in_sos_and_x(axis: int) -> None:
    """``sos[:, 3]`` must stay 1 for SciPy: gradcheck varies the other coefficients."""
    sos = signal.butter(4, 0.3, output="sos")

    def made(b: torch.Tensor, a: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.cat([b, torch.ones(len(b), 1, dtype=b.dtype), a], 1), x

    op = ac.numpy_op(signal.sosfilt, copy=True)
    x = _rng(3, 8)
    assert np.array_equal(op(torch.tensor(sos), torch.tensor(x), axis=axis).numpy(), signal.sosfilt(sos, x, axis=axis))
    leaves = tuple(torch.tensor(v, requires_grad=True) for v in (sos[:, :3], sos[:, 4:], x))
    assert torch.autograd.gradcheck(lambda *ts: op(*made(*ts), axis=axis), leaves)
    forward = torch.func.jacfwd(lambda *ts: op(*made(*ts), axis=axis), (0, 1, 2))(*(t.detach() for t in leaves))
    reverse = torch.func.jacrev(lambda *ts: op(*made(*ts), axis=axis), (0, 1, 2))(*(t.detach() for t in leaves))
    for f, r in zip(forward, reverse, strict=True):
        torch.testing.assert_close(f, r)


_Y, _LINE = _rng(3, 6), np.sort(np.random.default_rng(1).random(6)) * 3
_GRID = np.sort(np.random.default_rng(2).random((3, 6)), axis=1)


@pytest.mark.parametrize("fn", [integrate.trapezoid, integrate.cumulative_trapezoid])
@pytest.mark.parametrize(
    ("args", "differentiable", "options"),
    [
        ((_Y,), (0,), {}),
        ((_Y, _LINE), (0, 1), {}),
        ((_Y, _GRID), (0, 1), {}),
        ((_Y, None, 0.7), (0, 2), {}),
        ((np.ascontiguousarray(_Y.T), _LINE), (0, 1), {"axis": 0}),
    ],
)
def test_trapezoidal_rules_in_y_x_and_dx(fn: Any, args: Any, differentiable: Any, options: Any) -> None:
    """``x`` as a line along the axis or in the samples' shape, or ``dx``; any axis."""
    assert_rule(fn, args, differentiable, **options)


def test_cumulative_trapezoid_with_an_initial_value() -> None:
    assert_rule(integrate.cumulative_trapezoid, (_Y, _LINE), (0, 1), initial=0)


@pytest.mark.parametrize("count", [5, 6, 7])
@pytest.mark.parametrize("spacing", ["dx", "line", "grid"])
def test_simpson_in_y(count: int, spacing: str) -> None:
    """Odd and even sample counts (SciPy's even-count correction), each spacing."""
    rng = np.random.default_rng(count)
    given = {
        "dx": {"dx": 0.3},
        "line": {"x": np.sort(rng.random(count))},
        "grid": {"x": np.sort(rng.random((2, count)), axis=1)},
    }
    assert_rule(integrate.simpson, (_rng(2, count),), (0,), **given[spacing])


_A = np.random.default_rng(3).standard_normal((4, 4)) * 0.3
_SPD = _A @ _A.T + np.eye(4)


@pytest.mark.parametrize("fn", [linalg.expm, linalg.sqrtm, pytest.param(linalg.logm, marks=pytest.mark.slow)])
@pytest.mark.parametrize("matrix", [_SPD, _SPD + 0.2 * _A], ids=["symmetric", "general"])
def test_matrix_functions(fn: Any, matrix: np.ndarray) -> None:
    assert_rule(fn, (matrix,), (0,))


@pytest.mark.slow
def test_expm_of_a_stack() -> None:
    assert_rule(linalg.expm, (_rng(2, 3, 3) * 0.5,), (0,))


def test_a_complex_square_root_is_refused() -> None:
    x = torch.tensor([[-1.0, 0.0], [0.0, 4.0]], dtype=torch.float64, requires_grad=True)
    root = ac.numpy_op(linalg.sqrtm)(x)
    with pytest.raises(ac.GradientError) as caught:
        root.real.sum().backward()
    assert str(caught.value) == (
        "scipy.linalg.sqrtm: the result is complex, and the catalogue's rule covers real results only. Found a "
        "complex result of dtype complex128 (the matrix has eigenvalues on the negative real axis). Fix: pass a "
        "matrix whose function is real, or give numpy_op a backward= of your own."
    )


def test_solve_sylvester_in_a_b_and_q() -> None:
    b = _rng(3, 3) * 0.3 + 2 * np.eye(3)
    assert_rule(linalg.solve_sylvester, (_A + 2 * np.eye(4), b, _rng(4, 3)), (0, 1, 2))


def test_solve_continuous_lyapunov_in_a_and_q() -> None:
    assert_rule(linalg.solve_continuous_lyapunov, (_A - 2 * np.eye(4), _rng(4, 4)), (0, 1))


@pytest.mark.parametrize("method", [None, "direct", "bilinear"])
def test_solve_discrete_lyapunov_in_a_and_q(method: str | None) -> None:
    assert_rule(linalg.solve_discrete_lyapunov, (_A * 0.8, _rng(4, 4)), (0, 1), method=method)


@pytest.mark.parametrize(("shape", "side"), [((4, 4), "right"), ((4, 4), "left"), ((5, 3), "right"), ((3, 5), "left")])
def test_polar_in_a(shape: tuple[int, int], side: str) -> None:
    """Both results, U and P, on each side; tall and wide matrices of full rank."""
    matrix = _rng(*shape) + 2 * np.eye(*shape)
    op = ac.numpy_op(linalg.polar)
    leaf = torch.tensor(matrix, requires_grad=True)
    for got, expected in zip(op(leaf, side=side), linalg.polar(matrix, side=side), strict=True):
        assert np.array_equal(got.detach().numpy(), expected)
    assert torch.autograd.gradcheck(lambda a: op(a, side=side), (leaf,))
    forward = torch.func.jacfwd(lambda a: op(a, side=side))(leaf.detach())
    reverse = torch.func.jacrev(lambda a: op(a, side=side))(leaf.detach())
    for f, r in zip(forward, reverse, strict=True):
        torch.testing.assert_close(f, r)


_ORDERS, _Z = np.array([0.0, 0.5, 1.0, 2.5, 3.0]), np.linspace(0.3, 6.0, 5)
_SHAPE, _X = np.array([0.5, 1.0, 2.5]), np.array([0.3, 1.2, 4.0])


@pytest.mark.parametrize(
    ("fn", "args", "position"),
    [
        *((getattr(special, name), (_ORDERS, _Z), 1) for name in ("jv", "yv", "iv", "kv", "ive", "kve")),
        *((getattr(special, name), (np.arange(5.0), -_Z), 1) for name in ("jv", "iv", "ive")),
        (special.kve, (1.5, _Z), 1),
        (special.erfcx, (np.linspace(-2.0, 3.0, 6),), 0),
        (special.gammainc, (_SHAPE, _X), 1),
        (special.gammaincc, (_SHAPE, _X), 1),
        (special.betainc, (_SHAPE, np.array([1.5, 2.0, 0.7]), np.array([0.2, 0.5, 0.9])), 2),
        (special.polygamma, (np.array([0, 1, 2]), _X), 1),
        (special.zeta, (np.array([2.0, 3.5, 5.0]), _X + 0.5), 1),
        *((getattr(special, name), (_ORDERS, _Z), 1) for name in ("jve", "yve", "struve", "modstruve")),
        (special.exp1, (_X,), 0),
        (special.expi, (np.array([-2.0, -0.5, 0.7, 3.0]),), 0),
        (special.ellipk, (np.array([0.1, 0.5, 0.9]),), 0),
        (special.ellipe, (np.array([0.1, 0.5, 0.9]),), 0),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_special_functions(fn: Any, args: Any, position: int) -> None:
    """Orders and shapes broadcast against the argument differentiated; negative z where real."""
    assert_rule(fn, args, (position,))


@pytest.mark.parametrize("fn", [special.spherical_jn, special.spherical_yn, special.spherical_in, special.spherical_kn])
@pytest.mark.parametrize("derivative", [False, True])
def test_spherical_bessel_functions(fn: Any, derivative: bool) -> None:
    assert_rule(fn, (np.array([0, 1, 3]), _X), (1,), derivative=derivative)


def test_a_numpy_argument_takes_no_gradient() -> None:
    """Weights given as a NumPy array: the rule gives the tensor input's gradient alone."""
    weights = _rng(3)
    x = torch.tensor(_rng(6), requires_grad=True)
    ac.numpy_op(ndi.correlate1d)(x, weights, mode="wrap").sum().backward()
    assert x.grad is not None
    expected = ndi.correlate1d(np.ones(6), weights[::-1], mode="wrap", origin=-1)  # the transpose of a wrap
    assert torch.allclose(x.grad, torch.from_numpy(expected))


def test_torchify_takes_the_rule_without_a_warning() -> None:
    ndimage = ac.torchify(ndi)
    x = torch.tensor(_rng(5, 6), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = ndimage.gaussian_filter(x, 1.5, mode="mirror")
    assert np.array_equal(y.detach().numpy(), ndi.gaussian_filter(_rng(5, 6), 1.5, mode="mirror"))
    assert torch.autograd.gradcheck(lambda t: ndimage.gaussian_filter(t, 1.5, mode="mirror"), (x,))


def test_torchify_without_a_rule_warns_as_before() -> None:
    ndimage = ac.torchify(ndi)
    x = torch.tensor(_rng(5, 6), requires_grad=True)
    with pytest.warns(ac.GradientWarning, match="median_filter"):
        ndimage.median_filter(x, 3)


def test_torchified_function_with_a_rule_pickles() -> None:
    ndimage = ac.torchify(ndi)
    again = pickle.loads(pickle.dumps(ndimage.uniform_filter))
    x = torch.tensor(_rng(5), requires_grad=True)
    again(x, 3).sum().backward()
    assert x.grad is not None


def test_a_backward_given_is_used_rather_than_the_rule() -> None:
    op = ac.numpy_op(ndi.uniform_filter1d, backward=lambda g, x, size, output: np.full_like(x, 7.0))
    x = torch.tensor(_rng(4), requires_grad=True)
    op(x, 3).sum().backward()
    assert torch.equal(x.grad, torch.full((4,), 7.0, dtype=torch.float64))


def test_per_sample_gradients_through_a_rule() -> None:
    """torch.func composes with a rule as with any numpy_op."""
    op = ac.numpy_op(ndi.gaussian_filter1d)
    xs = torch.tensor(_rng(3, 6))
    per_sample = torch.func.vmap(torch.func.grad(lambda x: (op(x, 1.0, mode="wrap") ** 2).sum()))(xs)
    loop = []
    for x in xs:
        leaf = x.clone().requires_grad_()
        (op(leaf, 1.0, mode="wrap") ** 2).sum().backward()
        loop.append(leaf.grad)
    assert torch.allclose(per_sample, torch.stack(loop))


def test_a_complex_argument_is_refused_with_the_fix() -> None:
    x = torch.tensor(_rng(4) + 1j * _rng(4), requires_grad=True)
    y = ac.numpy_op(ndi.uniform_filter1d)(x, 3)
    with pytest.raises(ac.GradientError) as caught:
        y.abs().sum().backward()
    assert str(caught.value) == (
        "scipy.ndimage.uniform_filter1d: argument input is complex, and the catalogue's rule covers real "
        "arguments only. Found a complex array of dtype complex128. Fix: pass real tensors, or give numpy_op a "
        "backward= of your own."
    )


def test_explain_names_the_rule() -> None:
    notes = str(ac.explain(ac.numpy_op(ndi.sobel))).splitlines()
    assert notes[1] == (
        "numpy_op(): a torch op; backward=the catalogue's rule for scipy.ndimage.sobel (gradients in input; every "
        "mode (reflect, constant, nearest, mirror, wrap, grid-mirror, grid-constant, grid-wrap) per axis), "
        "fake=None, vmap='sequential', jvp=the rule's."
    )


def test_every_rule_is_on_the_gradients_page() -> None:
    import pathlib

    page = (pathlib.Path(__file__).parent.parent / "docs" / "guide" / "gradients.md").read_text()
    for rule in catalogued():
        assert f"`{rule.name}`" in page, rule.name
        assert rule_for(rule.function) is rule


def test_no_rule_for_other_functions() -> None:
    assert rule_for(np.sin) is None and rule_for(ndi.median_filter) is None and rule_for([]) is None


def test_an_argument_the_rule_takes_no_gradient_in_is_said_never_a_silent_zero() -> None:
    """jv's order and simpson's sample points take no gradient in the catalogue: an argument
    there that requires grad is a GradientWarning naming it, once (eagerly and under
    torch.func), and a GradientError with grad='error'; its gradient is None, never a zero."""
    v = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    z = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    jv = ac.torchify(special).jv

    def twice() -> None:  # said once
        jv(v, z).sum().backward()
        jv(v, z).sum().backward()

    with pytest.warns(ac.GradientWarning) as warned:
        twice()
    assert [str(w.message) for w in warned] == [
        "jv(): argument v requires grad, and the catalogue's rule for scipy.special.jv gives no gradient in v: none "
        "flows into it. Found gradients in z alone. Fix: pass v without requires_grad (.detach()), or give numpy_op "
        "a backward= of your own; grad='detach' silences this."
    ]
    assert v.grad is None and z.grad is not None
    with pytest.warns(ac.GradientWarning, match=r"^jv\(\): argument v requires grad"):
        torch.func.grad(lambda v: ac.numpy_op(special.jv)(v, z.detach()).sum())(v.detach())
    with pytest.raises(ac.GradientError, match=r"^simpson\(\): argument x requires grad"):
        ac.numpy_op(integrate.simpson, grad="error")(z, x=z)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ac.numpy_op(special.jv, grad="detach")(v, z)


@pytest.mark.parametrize(
    "asked",
    [
        "torchify",
        "config",
    ],
)
def test_grad_error_reaches_the_catalogue_rules_through_torchify_and_config(asked: str) -> None:
    """``grad="error"`` given to torchify, or by a ``config`` block around the call, refuses an
    argument the rule gives no gradient in, as numpy_op's own option does (not a warning once)."""
    v = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    z = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    with contextlib.ExitStack() as stack:
        if asked == "torchify":
            jv = ac.torchify(special, grad="error").jv
        else:
            jv = ac.torchify(special).jv
            stack.enter_context(ac.config(grad="error"))
        for _ in range(2):  # every call, not the first alone
            with pytest.raises(ac.GradientError, match=r"^jv\(\): argument v requires grad"):
                jv(v, z)
    with ac.config(grad="detach"), warnings.catch_warnings():
        warnings.simplefilter("error")
        ac.torchify(special).jv(v, z).sum().backward()
    assert v.grad is None and z.grad is not None


def test_spherical_bessel_functions_with_derivative_left_at_its_default() -> None:
    """``derivative=`` not passed: the rule reads SciPy's default (False)."""
    z = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    ac.torchify(special).spherical_jn(2, z).sum().backward()
    assert torch.allclose(z.grad, torch.from_numpy(special.spherical_jn(2, z.detach().numpy(), derivative=True)))


@pytest.mark.parametrize("fn", [ndi.uniform_filter, ndi.gaussian_filter])
def test_a_result_written_into_an_out_parameter_warns_of_its_gradient(fn: Any) -> None:
    """``output=`` a tensor: the values are SciPy's, written into it, and no rule follows a
    tensor NumPy code wrote: the dropped gradient is said, as without a rule."""
    x = torch.tensor(_rng(5, 5), requires_grad=True)
    out = torch.zeros(5, 5, dtype=torch.float64)
    with pytest.warns(ac.GradientWarning, match=rf"^{fn.__name__}\(\): argument input requires grad"):
        getattr(ac.torchify(ndi), fn.__name__)(x, 3, output=out)
    assert np.array_equal(out.numpy(), fn(_rng(5, 5), 3))
