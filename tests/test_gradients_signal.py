"""The catalogue's rules for scipy.signal (and the keyword spacing of scipy.integrate's rules):
values SciPy's to the bit, gradients through gradcheck in float64 in every differentiable
argument and option claimed, the jvp against the backward, and a dot-product test of the
adjoint where the function is linear. The ops are made without copy=True: the caller's
tensors reach SciPy read-only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy import integrate, signal

import autoconvert as ac

# torch.func.jacfwd's first use scripts torch's decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning"),
]


def _rng(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape)


def _real(results: Any) -> tuple[torch.Tensor, ...]:
    """A result, or a tuple of them, as real tensors (a complex one as its real and imaginary parts)."""
    found = results if isinstance(results, tuple) else (results,)
    return tuple(torch.view_as_real(r) if r.is_complex() else r for r in found)


def assert_rule(
    fn: Callable[..., Any], args: Sequence[Any], differentiable: Sequence[int | str], **kwargs: Any
) -> None:
    """``numpy_op(fn)`` gives SciPy's own values bit for bit, and passes gradcheck (reverse and
    forward mode) in the arguments ``differentiable`` names: positions in ``args``, or names
    in ``kwargs``."""
    op = ac.numpy_op(fn)
    expected = fn(*args, **kwargs)
    given = [args[d] if isinstance(d, int) else kwargs[d] for d in differentiable]
    leaves = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in given]

    def call(*tensors: torch.Tensor) -> Any:
        positional, named = list(args), dict(kwargs)
        for d, t in zip(differentiable, tensors, strict=True):
            if isinstance(d, int):
                positional[d] = t
            else:
                named[d] = t
        return op(*positional, **named)

    got = call(*leaves)
    for g, e in zip(
        got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,), strict=True
    ):
        assert np.array_equal(g.detach().numpy(), e)
    assert torch.autograd.gradcheck(call, tuple(leaves))
    # The jvp agrees with the backward, which gradcheck held against finite differences.
    argnums = tuple(range(len(leaves)))
    detached = [t.detach() for t in leaves]
    forward = torch.func.jacfwd(lambda *ts: _real(call(*ts)), argnums)(*detached)
    reverse = torch.func.jacrev(lambda *ts: _real(call(*ts)), argnums)(*detached)
    torch.testing.assert_close(forward, reverse)


def _first_fast(*cases: Any) -> list[Any]:
    """``cases`` for a parametrization: the first runs every time, the rest with ``--slow``."""
    return [
        cases[0],
        *(pytest.param(*(c if isinstance(c, tuple) else (c,)), marks=pytest.mark.slow) for c in cases[1:]),
    ]


@pytest.mark.parametrize(
    ("fn", "mode", "first", "second", "axes"),
    _first_fast(
        (signal.fftconvolve, "same", (1, 6), (3, 4), 1),
        *(
            (fn, mode, first, second, axes)
            for fn in (signal.fftconvolve, signal.oaconvolve)
            for mode in ("full", "same", "valid")
            for first, second, axes in (
                ((1, 6), (3, 4), -1),
                ((3, 6), (1, 4), [1]),
                ((2, 1, 6), (1, 3, 4), 2),
                ((2, 3, 1), (1, 3, 5), (1, 2)),
                ((3, 1), (1, 4), None),
            )
        ),
    ),
)
def test_fftconvolve_and_oaconvolve_broadcast_along_the_other_axes(
    fn: Any, mode: str, first: Any, second: Any, axes: Any
) -> None:
    """Inputs of length 1 along an axis broadcast on it; ``same`` centres the broadcast result
    on ``in1``'s length, which takes the middle of ``in2`` where ``in1`` has 1 (SciPy's window)."""
    assert_rule(fn, (_rng(*first), _rng(*second)), (0, 1), mode=mode, axes=axes)


def _dot_adjoint(forward: Callable[..., Any], backward: Callable[..., Any], inputs: Sequence[np.ndarray]) -> None:
    """``<forward(v), w> == <v, backward(w)>`` for random ``v`` and ``w``: ``backward`` is
    ``forward``'s adjoint (``forward`` linear in ``inputs``, a tuple of results allowed; a
    complex result in the real inner product, ``Re <a, b>``, torch's convention)."""
    rng = np.random.default_rng(7)
    v = [rng.standard_normal(np.shape(x)) for x in inputs]
    out = forward(*v)
    outs = out if isinstance(out, tuple) else (out,)
    w = tuple(
        rng.standard_normal(np.shape(o)) + (1j * rng.standard_normal(np.shape(o)) if np.iscomplexobj(o) else 0)
        for o in outs
    )
    back = backward(w if isinstance(out, tuple) else w[0])
    backs = back if isinstance(back, tuple) else (back,)
    left = sum(np.vdot(o, g).real for o, g in zip(outs, w, strict=True))
    right = sum(np.vdot(x, g).real for x, g in zip(v, backs, strict=True))
    assert np.isclose(left, right, rtol=1e-10, atol=1e-10), (left, right)


def _vjp_of(fn: Callable[..., Any], args: Sequence[Any], positions: Sequence[int], **kwargs: Any) -> Callable[..., Any]:
    """The op's backward as a function of the result's gradient: the gradients of ``args`` at ``positions``."""
    op = ac.numpy_op(fn)

    def backward(w: Any) -> tuple[np.ndarray, ...]:
        leaves = [torch.tensor(args[k], requires_grad=True) for k in positions]
        given = list(args)
        for k, t in zip(positions, leaves, strict=True):
            given[k] = t
        out = op(*given, **kwargs)
        outs, ws = (out, w) if isinstance(out, tuple) else ((out,), (w,))
        grads = torch.autograd.grad(outs, leaves, [torch.as_tensor(g) for g in ws])
        return tuple(g.numpy() for g in grads)

    return backward


@st.composite
def _broadcasting_pairs(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Two shapes of one rank and the axes convolved: along the others equal, or one of them 1."""
    ndim = draw(st.sampled_from([2, 3, 1]))
    axes = tuple(sorted(draw(st.sets(st.integers(0, ndim - 1), min_size=1))))
    first, second = [], []
    for a in range(ndim):
        if a in axes:
            first.append(draw(st.integers(1, 5)))
            second.append(draw(st.integers(1, 5)))
        else:
            size = draw(st.integers(2, 3))
            pair = draw(st.sampled_from([(size, size), (size, 1), (1, size)]))
            first.append(pair[0])
            second.append(pair[1])
    return tuple(first), tuple(second), axes


@given(
    shapes=_broadcasting_pairs(),
    fn=st.sampled_from([signal.fftconvolve, signal.oaconvolve]),
    mode=st.sampled_from(["full", "same", "valid"]),
)
def test_fftconvolve_rule_is_the_adjoint_in_each_input_for_any_broadcast(
    shapes: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], fn: Any, mode: str
) -> None:
    """Bilinear: the backward in each input is the transpose of the map in it, the other held."""
    first, second, axes = shapes
    in1, in2 = _rng(*first), _rng(*second) + 0.5
    try:
        fn(in1, in2, mode=mode, axes=axes)
    except ValueError:  # SciPy's own refusal ('valid' with neither input larger along every axis)
        assume(False)
    in1_backward = _vjp_of(fn, (in1, in2), (0,), mode=mode, axes=axes)
    _dot_adjoint(lambda u: fn(u, in2, mode=mode, axes=axes), lambda w: in1_backward(w)[0], (in1,))
    in2_backward = _vjp_of(fn, (in1, in2), (1,), mode=mode, axes=axes)
    _dot_adjoint(lambda v: fn(in1, v, mode=mode, axes=axes), lambda w: in2_backward(w)[0], (in2,))


def test_sosfilt_takes_read_only_tensors_without_copy() -> None:
    """sosfilt's Cython refuses read-only arrays: the op hands it writable copies (copy when
    needed), so the caller's tensors are never written, and its rule's gradient flows."""
    sos = torch.tensor(signal.butter(4, 0.3, output="sos"))
    x = torch.tensor(_rng(3, 8), requires_grad=True)
    before = sos.clone(), x.detach().clone()
    op = ac.numpy_op(signal.sosfilt)
    y = op(sos, x, axis=-1)
    assert np.array_equal(y.detach().numpy(), signal.sosfilt(sos.numpy(), x.detach().numpy()))
    assert torch.autograd.gradcheck(lambda t: op(sos, t), (x,))
    assert torch.equal(sos, before[0]) and torch.equal(x.detach(), before[1])


def test_sosfilt_with_copy_false_still_refuses_read_only_arrays() -> None:
    """``copy=False`` promises no copy: the refusal is said, with the fix, as before."""
    sos = torch.tensor(signal.butter(2, 0.3, output="sos"))
    with pytest.raises(ac.ReadOnlyError) as caught:
        ac.numpy_op(signal.sosfilt, copy=False)(sos, torch.tensor(_rng(5)))
    assert str(caught.value) == (
        "sosfilt(): argument sos was refused by compiled code that needs writable arrays (a Cython memoryview); "
        "arrays made from tensor arguments are read-only so that NumPy code never changes the caller's tensors. "
        "Found ValueError('buffer source array is read-only'). Fix: pass copy=True to give the function private "
        "writable copies (in ac.numpy_op(sosfilt, copy=True), where copy=False was given, so a config block cannot "
        "change it)."
    )


_Y, _LINE = _rng(3, 6), np.sort(np.random.default_rng(1).random(6)) * 3


@pytest.mark.parametrize("fn", [integrate.trapezoid, integrate.cumulative_trapezoid])
@pytest.mark.parametrize(
    ("differentiable", "options"),
    _first_fast(((0, "dx"), {"dx": 0.7}), ((0, "x"), {"x": _LINE}), (("dx",), {"dx": 0.3, "axis": -1})),
)
def test_trapezoidal_rules_take_x_and_dx_by_keyword(fn: Any, differentiable: Any, options: Any) -> None:
    """``trapezoid(y, dx=t)``: a tensor given by keyword after a parameter left out (``x``) is
    passed by position, ``x``'s default filled in, and gets its gradient."""
    assert_rule(fn, (_Y,), differentiable, **options)


def test_a_keyword_after_a_left_out_parameter_gets_its_gradient() -> None:
    """Any numpy_op: the defaults before the keyword are filled in, the values unchanged."""

    def scaled(x: np.ndarray, shift: float = 0.5, scale: np.ndarray | float = 1.0) -> np.ndarray:
        return (x + shift) * scale

    op = ac.numpy_op(scaled, backward=lambda g, x, shift, scale, output: (g * scale, np.sum(g * (x + shift))))
    x, scale = torch.ones(3, dtype=torch.float64, requires_grad=True), torch.tensor(2.0, dtype=torch.float64)
    scale.requires_grad_()
    op(x, scale=scale).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0, dtype=torch.float64)) and scale.grad == 4.5


_B, _A = signal.butter(3, 0.3)


@pytest.mark.parametrize(
    ("x", "a", "axis"),
    _first_fast(
        (_rng(2, 9), _A, -1),
        (_rng(9, 2), _A, 0),
        (_rng(2, 2), _A, -1),  # shorter than the state: zi's last slots pass on into zf
        (_rng(7), np.array([2.0, -0.4, 0.1, 0.05]), 0),  # a[0] other than 1
    ),
)
def test_lfilter_from_a_state_in_b_a_x_and_zi(x: np.ndarray, a: np.ndarray, axis: int) -> None:
    """Both results, ``y`` and ``zf``, in every argument; the state as SciPy shapes it."""
    shape = list(x.shape)
    shape[axis] = max(len(_B), len(a)) - 1
    zi = _rng(*shape)
    assert_rule(signal.lfilter, (_B, a, x, axis, zi), (0, 1, 2, 4))


def test_lfilter_is_linear_in_x_and_zi_and_its_rule_the_adjoint() -> None:
    x, zi = _rng(3, 10), _rng(3, 3)
    backward = _vjp_of(signal.lfilter, (_B, _A, x, -1, zi), (2, 4))
    _dot_adjoint(lambda x, zi: signal.lfilter(_B, _A, x, -1, zi), backward, (x, zi))


@pytest.mark.slow
def test_lfilter_with_a_broadcast_state_and_zf_unused() -> None:
    """A state of length 1 along the other axis (SciPy broadcasts it); a loss on ``y`` alone."""
    x, zi = _rng(3, 8), _rng(1, 3)
    assert_rule(signal.lfilter, (_B, _A, x, -1, zi), (2, 4))
    leaf = torch.tensor(zi, requires_grad=True)
    y, _ = ac.numpy_op(signal.lfilter)(_B, _A, torch.tensor(x), -1, leaf)
    y.sum().backward()
    assert leaf.grad is not None and leaf.grad.shape == (1, 3)


def test_sosfilt_with_an_initial_state_is_refused() -> None:
    sos = signal.butter(2, 0.3, output="sos")
    x = torch.tensor(_rng(6), requires_grad=True)
    y, _ = ac.numpy_op(signal.sosfilt)(sos, x, -1, np.zeros((1, 2)))
    with pytest.raises(ac.GradientError) as caught:
        y.sum().backward()
    assert str(caught.value) == (
        "scipy.signal.sosfilt: argument zi was given, and the catalogue's rule covers filters from rest only. "
        "Found an initial state. Fix: call it without zi=, or give numpy_op a backward= of your own."
    )


_PADS = [
    {"padtype": padtype, "padlen": padlen}
    for padtype in ("odd", "even", "constant", None)
    for padlen in (None, 0, 3)
    if not (padtype is None and padlen is not None)
]


@pytest.mark.parametrize("pad", _first_fast(*_PADS))
@pytest.mark.parametrize("axis", _first_fast(-1, 0))
def test_filtfilt_in_x(pad: dict[str, Any], axis: int) -> None:
    """Every padding SciPy takes; the steady states of both passes follow the signal's ends."""
    x = _rng(2, 16) if axis == -1 else _rng(16, 2)
    assert_rule(signal.filtfilt, (_B, _A, x), (2,), axis=axis, **pad)


@pytest.mark.parametrize("pad", _first_fast(*_PADS))
@pytest.mark.parametrize(
    ("b", "a", "axis"),
    _first_fast((_B, _A, -1), (_B * 1.5, _A * 1.5, 0), (np.array([0.3, 0.2]), np.array([1.0, -0.5, 0.2, 0.1]), -1)),
)
def test_filtfilt_in_b_a_and_x(pad: dict[str, Any], b: np.ndarray, a: np.ndarray, axis: int) -> None:
    """Through both passes and the steady state ``lfilter_zi(b, a)`` they start from; any
    ``a[0]``; coefficients of different lengths."""
    x = _rng(2, 16) if axis == -1 else _rng(16, 2)
    assert_rule(signal.filtfilt, (b, a, x), (0, 1, 2), axis=axis, **pad)


@pytest.mark.parametrize("pad", _first_fast(*_PADS))
def test_sosfiltfilt_in_x(pad: dict[str, Any]) -> None:
    sos = signal.butter(4, 0.25, output="sos")
    assert_rule(signal.sosfiltfilt, (sos, _rng(2, 40)), (1,), **pad)


@pytest.mark.parametrize("fn", [signal.filtfilt, signal.sosfiltfilt])
@pytest.mark.parametrize("padtype", _first_fast("odd", "even", "constant", None))
def test_filtfilt_rules_are_the_adjoints(fn: Any, padtype: Any) -> None:
    """The dot-product test: the backward is the transpose of the linear map x ↦ filtfilt(x)."""
    head = (_B, _A) if fn is signal.filtfilt else (signal.butter(4, 0.25, output="sos"),)
    x = _rng(3, 30)
    backward = _vjp_of(fn, (*head, x), (len(head),), padtype=padtype)
    _dot_adjoint(lambda x: fn(*head, x, padtype=padtype), lambda w: backward(w)[0], (x,))


def test_filtfilt_with_gusts_method_says_it_gives_no_gradient() -> None:
    x = torch.tensor(_rng(20), requires_grad=True)
    y = ac.numpy_op(signal.filtfilt)(_B, _A, x, method="gust")
    assert np.array_equal(y.detach().numpy(), signal.filtfilt(_B, _A, _rng(20), method="gust"))
    with pytest.raises(ac.GradientError) as caught:
        y.sum().backward()
    assert str(caught.value) == (
        'scipy.signal.filtfilt: method="gust" was given, and the catalogue\'s rule covers the padded method alone. '
        'Found Gustafsson\'s method. Fix: pass method="pad" (with padtype= and padlen= as needed), or give '
        "numpy_op a backward= of your own."
    )


@pytest.mark.parametrize("pad", _first_fast(*_PADS))
def test_sosfiltfilt_in_sos_and_x(pad: dict[str, Any]) -> None:
    """Through both passes and ``sosfilt_zi``'s steady states (each section's scaled by the gains
    before it). ``sos[:, 3]`` must stay 1 for SciPy: gradcheck varies the other coefficients."""
    sos = signal.butter(4, 0.25, output="sos")
    x = _rng(2, 40)
    op = ac.numpy_op(signal.sosfiltfilt)

    def call(b: torch.Tensor, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return op(torch.cat([b, torch.ones(len(b), 1, dtype=b.dtype), a], 1), x, **pad)  # type: ignore[no-any-return]

    leaves = tuple(torch.tensor(v, requires_grad=True) for v in (sos[:, :3], sos[:, 4:], x))
    assert np.array_equal(call(*leaves).detach().numpy(), signal.sosfiltfilt(sos, x, **pad))
    assert torch.autograd.gradcheck(call, leaves)
    detached = tuple(t.detach() for t in leaves)
    forward = torch.func.jacfwd(call, (0, 1, 2))(*detached)
    torch.testing.assert_close(forward, torch.func.jacrev(call, (0, 1, 2))(*detached))


@pytest.mark.parametrize(
    ("shape", "options"),
    _first_fast(
        ((2, 9), {"num": 6, "axis": 1}),
        ((9, 2), {"num": 12}),  # even and odd lengths up and down: SciPy's Nyquist bins
        ((10,), {"num": 7, "window": "hann"}),
        ((8,), {"num": 6, "window": ("kaiser", 4.0)}),
        ((9, 2), {"num": 4, "t": np.arange(9.0)}),
        ((7,), {"num": 7}),
    ),
)
def test_resample_in_x(shape: tuple[int, ...], options: dict[str, Any]) -> None:
    options = dict(options)
    num = options.pop("num")
    assert_rule(signal.resample, (_rng(*shape), num), (0,), **options)


@pytest.mark.parametrize(
    ("up", "down", "options"),
    _first_fast(
        (3, 2, {}),
        (2, 3, {"cval": 0.5}),
        (2, 3, {"padtype": "mean"}),
        (2, 3, {"padtype": "line"}),
        (5, 1, {"padtype": "reflect", "window": ("kaiser", 2.0)}),
        (1, 4, {"padtype": "smooth"}),
    ),
)
def test_resample_poly_in_x(up: int, down: int, options: dict[str, Any]) -> None:
    """Paddings linear in x (``cval`` makes the map affine: its offset takes no gradient)."""
    assert_rule(signal.resample_poly, (_rng(2, 20), up, down), (0,), axis=-1, **options)


def test_resample_poly_by_an_order_statistic_is_refused() -> None:
    x = torch.tensor(_rng(20), requires_grad=True)
    y = ac.numpy_op(signal.resample_poly)(x, 2, 3, padtype="median")
    with pytest.raises(ac.GradientError) as caught:
        y.sum().backward()
    assert str(caught.value) == (
        "scipy.signal.resample_poly: padtype='median' was given, and the catalogue's rule covers paddings linear in "
        "x alone. Found a padding by an order statistic of x. Fix: pass padtype='constant', 'mean' or one of "
        "upfirdn's modes, or give numpy_op a backward= of your own."
    )


@pytest.mark.parametrize(
    ("options"),
    _first_fast(
        {},
        {"ftype": "fir"},
        {"zero_phase": False},
        {"ftype": "fir", "zero_phase": False, "n": 12},
        {"n": 4, "axis": 0},
    ),
)
def test_decimate_in_x(options: dict[str, Any]) -> None:
    x = _rng(40, 2) if options.get("axis") == 0 else _rng(2, 40)
    assert_rule(signal.decimate, (x, 3), (0,), **options)


@pytest.mark.parametrize(
    ("shape", "options"), _first_fast(((2, 9), {}), ((2, 9), {"N": 12}), ((9, 2), {"N": 6, "axis": 0}))
)
def test_hilbert_in_x_through_its_complex_result(shape: tuple[int, ...], options: dict[str, Any]) -> None:
    """gradcheck on the complex result (torch's convention: the real and imaginary parts)."""
    assert_rule(signal.hilbert, (_rng(*shape),), (0,), **options)


@pytest.mark.parametrize(
    ("shape", "options"),
    _first_fast(
        ((2, 40), {"nperseg": 8}),
        ((40, 2), {"nperseg": 8, "axis": 0}),
        ((40,), {"nperseg": 10, "noverlap": 3, "boundary": None, "padded": False}),
        ((41,), {"nperseg": 8, "nfft": 12, "boundary": "even", "detrend": "linear"}),
        ((40,), {"nperseg": 8, "window": "boxcar", "return_onesided": False, "scaling": "psd"}),
    ),
)
def test_stft_in_x_through_its_complex_result(shape: tuple[int, ...], options: dict[str, Any]) -> None:
    assert_rule(signal.stft, (_rng(*shape),), (0,), **options)


@pytest.mark.parametrize(
    ("fn", "args", "options"),
    [
        (signal.resample, (_rng(2, 10), 6), {"axis": 1}),
        (signal.resample_poly, (_rng(2, 20), 3, 2), {"axis": -1}),
        (signal.decimate, (_rng(2, 60), 3), {}),
        (signal.hilbert, (_rng(2, 9),), {}),
        (signal.stft, (_rng(2, 40),), {"nperseg": 8}),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_the_resamplers_and_transforms_rules_are_their_adjoints(fn: Any, args: Any, options: Any) -> None:
    """The dot-product test on the signal (complex results in the real inner product)."""
    backward = _vjp_of(fn, args, (0,), **options)

    def forward(x: np.ndarray) -> Any:
        out = fn(x, *args[1:], **options)
        return out[2] if fn is signal.stft else out

    def adjoint(w: Any) -> Any:
        if fn is not signal.stft:
            return backward(w)[0]
        f, t, _ = signal.stft(args[0], **options)
        return backward((np.zeros_like(f), np.zeros_like(t), w))[0]

    _dot_adjoint(forward, adjoint, (args[0],))


@pytest.mark.parametrize(
    ("fn", "covers"),
    [
        (signal.lfilter, "gradients in b, a, x, zi; any axis, any a[0]; from rest or from zi (y and zf)"),
        (signal.filtfilt, 'gradients in b, a, x; any axis; padtype odd, even, constant or None; padlen; method="pad"'),
        (signal.hilbert, "gradients in x; any axis, N; a complex result (torch's convention)"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_explain_names_the_rule(fn: Any, covers: str) -> None:
    notes = str(ac.explain(ac.numpy_op(fn))).splitlines()
    assert notes[1] == (
        f"numpy_op(): a torch op; backward=the catalogue's rule for scipy.signal.{fn.__name__} ({covers}), "
        "fake=None, vmap='sequential', jvp=the rule's."
    )


def test_stats_counts_the_backward_passes_of_a_rule() -> None:
    """Eagerly and under torch.func, for the calls made in the block, wherever the backward
    runs; a call without a gradient asked runs no rule; a backward of one's own is not the
    catalogue's."""
    op = ac.numpy_op(signal.filtfilt)
    x = torch.tensor(_rng(30), requires_grad=True)
    before = op(_B, _A, x)
    with ac.stats() as s:
        op(_B, _A, x).sum().backward()
        torch.func.grad(lambda t: op(_B, _A, t).sum())(x.detach())
        op(_B, _A, x.detach())
        after = op(_B, _A, x)
        before.sum().backward()  # a call made outside the block
    after.sum().backward()  # a call made in the block
    assert (s["filtfilt"].calls, s["filtfilt"].rule_backwards) == (4, 3)
    assert "rule_backwards=3, " in repr(s["filtfilt"])
    assert str(s).splitlines()[0].split()[:4] == ["function", "calls", "rule", "backwards"]
    mine = ac.numpy_op(signal.filtfilt, backward=lambda g, b, a, x, output: g)
    with ac.stats() as s:
        mine(_B, _A, x).sum().backward()
    assert s["filtfilt"].rule_backwards == 0 and "rule" not in str(s)


@pytest.mark.parametrize(
    ("shape", "stft", "istft"),
    _first_fast(
        ((2, 40), {"nperseg": 8}, {"nperseg": 8}),
        ((40, 2), {"nperseg": 8, "axis": 0}, {"nperseg": 8, "freq_axis": 0, "time_axis": -1}),
        ((2, 40, 3), {"nperseg": 8, "axis": 1}, {"nperseg": 8, "freq_axis": 1, "time_axis": -1}),
        ((41,), {"nperseg": 10, "noverlap": 6, "nfft": 12}, {"nperseg": 10, "noverlap": 6, "nfft": 12}),
        ((40,), {"nperseg": 8, "noverlap": 6}, {"nperseg": 8, "noverlap": 6}),
        ((40,), {"nperseg": 8, "return_onesided": False}, {"nperseg": 8, "input_onesided": False}),
        (
            (40,),
            {"nperseg": 8, "window": "hamming", "scaling": "psd"},
            {"nperseg": 8, "window": "hamming", "scaling": "psd"},
        ),
    ),
)
def test_istft_in_its_complex_input(shape: tuple[int, ...], stft: dict[str, Any], istft: dict[str, Any]) -> None:
    """gradcheck in the complex ``Zxx`` (its real and imaginary parts apart, as torch checks
    them; a two-sided one gives a complex result); the jvp against the backward in the real
    inner product."""
    _, _, z = signal.stft(_rng(*shape), **stft)
    op = ac.numpy_op(signal.istft)
    leaf = torch.tensor(z, requires_grad=True)
    assert np.array_equal(op(leaf, **istft)[1].detach().numpy(), signal.istft(z, **istft)[1])
    assert torch.autograd.gradcheck(lambda t: op(t, **istft)[1], (leaf,))
    rng = np.random.default_rng(3)
    v = torch.tensor(rng.standard_normal(z.shape) + 1j * rng.standard_normal(z.shape))
    _, tangent = torch.func.jvp(lambda t: op(t, **istft)[1], (leaf.detach(),), (v,))
    w = torch.tensor(rng.standard_normal(tuple(tangent.shape)) * (1 + 1j if tangent.is_complex() else 1))
    _, pullback = torch.func.vjp(lambda t: op(t, **istft)[1], leaf.detach())
    (gradient,) = pullback(w)
    assert torch.isclose(torch.real((tangent.conj() * w).sum()), torch.real((gradient.conj() * v).sum()))
