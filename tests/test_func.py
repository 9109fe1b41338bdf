"""``numpy_op`` under torch.func: grad, vjp, jacrev, vmap, jvp and jacfwd in any order, each
compared with a Python loop of ``torch.autograd`` calls on the same op."""

from __future__ import annotations

import functools
import inspect
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import scipy.linalg
import scipy.special
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from torch.autograd import forward_ad
from torch.func import grad, jacfwd, jacrev, jvp, vjp, vmap

import autoconvert as ac


def _erfcx_grad(g: np.ndarray, x: np.ndarray, output: np.ndarray) -> np.ndarray:
    return g * (2 * x * output - 2 / np.sqrt(np.pi))


def _erfcx_jvp(t: np.ndarray, x: np.ndarray, output: np.ndarray) -> np.ndarray:
    return t * (2 * x * output - 2 / np.sqrt(np.pi))


# torch.func.jvp's first use scripts its decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest (2.4-2.12
# do not warn).
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning"),
]

OPS = {
    f"{mode}{'-fake' if fake else ''}": ac.numpy_op(
        scipy.special.erfcx, backward=_erfcx_grad, jvp=_erfcx_jvp, vmap=mode, **({"fake": "x"} if fake else {})
    )
    for mode in ("sequential", "vectorized")
    for fake in (False, True)
}
X = torch.linspace(0.1, 2.0, 6, dtype=torch.float64)
XS = torch.linspace(-1.0, 1.0, 12, dtype=torch.float64).reshape(4, 3)
W = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)


def _autograd_grad(f: Any, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The gradient of scalar ``f(*inputs)`` by torch.autograd.grad: what a loop would call."""
    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    return torch.autograd.grad(f(*leaves), leaves)


@pytest.mark.parametrize("name", OPS)
def test_grad_vjp_and_jacrev_give_what_autograd_gives(name: str) -> None:
    op = OPS[name]
    (expected,) = _autograd_grad(lambda v: op(v).sum(), X)
    assert torch.allclose(grad(lambda v: op(v).sum())(X), expected)
    out, pullback = vjp(op, X)
    assert torch.allclose(out, op(X)) and torch.allclose(pullback(torch.ones_like(X))[0], expected)
    jacobian = torch.autograd.functional.jacobian(op, X)
    assert torch.allclose(jacrev(op)(X), jacobian) and torch.allclose(jacobian, torch.diag(expected))


@pytest.mark.parametrize("name", OPS)
def test_vmap_gives_what_a_loop_gives(name: str) -> None:
    op = OPS[name]
    loop = torch.stack([op(row) for row in XS])
    assert torch.allclose(vmap(op)(XS), loop)
    assert torch.allclose(vmap(op, in_dims=1, out_dims=1)(XS.T), loop.T)


@pytest.mark.parametrize("name", OPS)
def test_per_sample_gradients_compose_in_either_order(name: str) -> None:
    """Opacus' pattern, ``vmap(grad(loss), in_dims=(None, 0))``, against a loop of
    ``torch.autograd.grad`` calls; and ``jacrev(vmap(f))`` against the Jacobian of the batch."""
    op = OPS[name]

    def loss(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return op(w * x).sum()

    loop = torch.stack([_autograd_grad(lambda w, x=x: loss(w, x), W)[0] for x in XS])
    assert torch.allclose(vmap(grad(loss), in_dims=(None, 0))(W, XS), loop)
    batch_jacobian = torch.autograd.functional.jacobian(vmap(op), XS)
    assert torch.allclose(jacrev(vmap(op))(XS), batch_jacobian)
    assert torch.allclose(grad(lambda w: vmap(lambda x: loss(w, x))(XS).sum())(W), loop.sum(0))


@pytest.mark.parametrize("name", OPS)
def test_forward_mode_uses_the_jvp_rule(name: str) -> None:
    op = OPS[name]
    (expected,) = _autograd_grad(lambda v: op(v).sum(), X)
    out, tangent = jvp(op, (X,), (torch.ones_like(X),))
    assert torch.allclose(out, op(X)) and torch.allclose(tangent, expected)
    assert torch.allclose(jacfwd(op)(X), torch.diag(expected))
    assert torch.allclose(vmap(jacfwd(op))(XS), vmap(jacrev(op))(XS))


@pytest.mark.parametrize("name", OPS)
def test_forward_mode_with_dual_tensors_outside_torch_func_uses_the_jvp_rule(name: str) -> None:
    """torch.autograd.forward_ad's dual tensors (what gradcheck's check_forward_ad makes)
    require no grad, yet carry a tangent: the op's rule gives it, never a silent None."""
    op = OPS[name]
    (expected,) = _autograd_grad(lambda v: op(v).sum(), X)
    with forward_ad.dual_level():
        out = forward_ad.unpack_dual(op(forward_ad.make_dual(X, torch.ones_like(X))))
    assert torch.allclose(out.primal, op(X)) and torch.allclose(out.tangent, expected)
    # An op with no jvp rule, with a backward or with none (a ufunc): the GradientError, never a None tangent.
    for without in (ac.numpy_op(scipy.special.erfcx, backward=_erfcx_grad), ac.numpy_op(np.sin)):
        with forward_ad.dual_level(), pytest.raises(ac.GradientError, match="has no NumPy rule for it"):
            without(forward_ad.make_dual(X, torch.ones_like(X)))
    leaf = X.clone().requires_grad_()
    assert torch.autograd.gradcheck(op, (leaf,), check_forward_ad=True)


def test_an_op_with_two_arguments_and_a_tuple_result() -> None:
    """Gradients for each positional tensor; a tuple result's gradients come as a tuple."""

    def both(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return x * y, x + y

    def both_grad(g: tuple[np.ndarray, np.ndarray], x: np.ndarray, y: np.ndarray, output: Any) -> Any:
        return g[0] * y + g[1], g[0] * x + g[1]

    op = ac.numpy_op(both, backward=both_grad)
    x, y = XS[0], XS[1]

    def total(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        product, summed = op(a, b)
        return (product + 2 * summed).sum()

    expected = _autograd_grad(total, x, y)
    found = grad(total, argnums=(0, 1))(x, y)
    assert all(torch.allclose(f, e) for f, e in zip(found, expected, strict=True))
    assert torch.allclose(
        vmap(total)(XS, XS.flip(0)), torch.stack([total(a, b) for a, b in zip(XS, XS.flip(0), strict=True)])
    )


def test_a_jvp_rule_gives_none_for_a_result_whose_tangent_is_zero() -> None:
    """``None`` from the jvp rule is a zero tangent for that result, as ``None`` from the
    backward is a zero gradient: an index result, or a result the inputs do not move."""

    def with_order(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.sin(x), np.argsort(x).astype(np.float64)

    op = ac.numpy_op(
        with_order,
        backward=lambda g, x, output: g[0] * np.cos(x),
        jvp=lambda t, x, output: (t * np.cos(x), None),
    )
    (values, order), (moved, unmoved) = jvp(op, (X,), (torch.ones_like(X),))
    assert torch.allclose(values, torch.sin(X)) and torch.allclose(moved, torch.cos(X))
    assert torch.equal(unmoved, torch.zeros_like(order))
    single = ac.numpy_op(np.sin, backward=lambda g, x, output: g * np.cos(x), jvp=lambda t, x, output: None)
    assert torch.equal(jacfwd(single)(X), torch.zeros(len(X), len(X), dtype=X.dtype))


def test_without_rules_the_transforms_say_which_rule_is_missing() -> None:
    """No backward: vmap works (sequentially), a gradient raises naming backward=, never a zero;
    no jvp: forward mode raises naming jvp=."""
    plain = ac.numpy_op(scipy.special.dawsn)  # a function the catalogue of SciPy rules has none for
    assert torch.allclose(vmap(plain)(XS), torch.stack([plain(row) for row in XS]))
    with pytest.raises(ac.GradientError) as info:
        grad(lambda v: plain(v).sum())(X)
    assert str(info.value) == (
        "dawsn(): the numpy_op was asked for a gradient, and has no NumPy rule for it. Found a numpy_op without "
        "backward=. Fix: pass backward= to autoconvert.numpy_op."
    )
    reverse_only = ac.numpy_op(scipy.special.erfcx, backward=_erfcx_grad)
    with pytest.raises(ac.GradientError) as info:
        jacfwd(reverse_only)(X)
    assert str(info.value) == (
        "erfcx(): the numpy_op was asked for forward-mode derivatives (torch.func.jvp, jacfwd, forward_ad), and has "
        "no NumPy rule for it. Found a numpy_op without jvp=. Fix: pass jvp= to autoconvert.numpy_op."
    )
    for second in (jacrev(jacrev(reverse_only)), jacfwd(jacrev(OPS["sequential"]))):
        with pytest.raises(
            ac.GradientError, match=r"erfcx\(\): double backward is not supported: its backward is NumPy"
        ):
            second(X)
    with pytest.raises(
        ac.GradientError, match=r"erfcx\(\): derivatives of its jvp are not supported.* Fix: take first"
    ):
        jacrev(jacfwd(OPS["sequential"]))(X)
    with pytest.raises(ValueError, match="vmap= takes 'sequential' or 'vectorized', got 'parallel'"):
        ac.numpy_op(np.sin, vmap="parallel")  # type: ignore[call-overload]


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
def test_the_plain_pair_under_a_transform_names_numpy_op(transform: str) -> None:
    """A decorated function (not a numpy_op) under torch.func is refused with the fix, the
    numpy_op rule for each kind of transform named."""
    pair = ac.returns_tensor(ac.accepts_numpy(scipy.special.erfcx))
    transformed = {
        "grad": lambda: grad(lambda v: pair(v).sum())(X),
        "jvp": lambda: jvp(pair, (X,), (torch.ones_like(X),)),
        "vmap": lambda: vmap(pair)(XS),
    }[transform]
    with pytest.raises(ac.ConversionError) as info:
        transformed()
    shape = tuple(X.shape) if transform != "vmap" else tuple(XS.shape[1:])
    assert str(info.value) == (
        "erfcx(): argument x is being transformed by torch.vmap or torch.func (a functorch-wrapped tensor), which "
        f"NumPy code cannot see. Found torch.Tensor(shape={shape}, dtype=torch.float64, layout=torch.strided, "
        "device=cpu). Fix: for gradients, make the function an autoconvert.numpy_op with backward= (torch.func.grad, "
        "vjp, jacrev) or jvp= (torch.func.jvp, jacfwd); for a batch, loop over it (autoconvert.batched) instead of "
        "torch.vmap."
    )


_SQUARE = torch.eye(3, dtype=torch.float64) * 4
_RIGHT = torch.ones(3, 2, dtype=torch.float64)


@pytest.mark.parametrize("transform", ["grad", "jvp", "vjp", "vmap"])
@pytest.mark.parametrize("form", ["torchify(module)", "torchify(function)", "pair"])
@pytest.mark.parametrize("name", ["solve", "lstsq"])
def test_a_constant_before_the_transformed_argument_crosses_and_the_argument_is_refused(
    name: str, form: str, transform: str
) -> None:
    """A plain tensor the transformed function closes over (``a``) converts as it is, though
    the transform's ops would wrap it with no storage; the transformed ``b`` after it is refused
    with the fix, never torch's "Cannot access data pointer"."""
    function = getattr(scipy.linalg, name)
    wrapped = {
        "torchify(module)": lambda: getattr(ac.torchify(scipy.linalg), name),
        "torchify(function)": lambda: ac.torchify(function),
        "pair": lambda: ac.returns_tensor(ac.accepts_numpy(function)),
    }[form]()

    def solved(b: torch.Tensor) -> torch.Tensor:
        result = wrapped(_SQUARE, b)
        return result if name == "solve" else result[0]

    transformed = {
        "grad": lambda: grad(lambda b: solved(b).sum())(_RIGHT),
        "jvp": lambda: jvp(solved, (_RIGHT,), (torch.ones_like(_RIGHT),)),
        "vjp": lambda: vjp(solved, _RIGHT),
        "vmap": lambda: vmap(solved)(_RIGHT.expand(2, 3, 2)),
    }[transform]
    with pytest.raises(ac.ConversionError) as info:
        transformed()
    assert str(info.value) == (
        f"{name}(): argument b is being transformed by torch.vmap or torch.func (a functorch-wrapped tensor), which "
        "NumPy code cannot see. Found torch.Tensor(shape=(3, 2), dtype=torch.float64, layout=torch.strided, "
        "device=cpu). Fix: for gradients, make the function an autoconvert.numpy_op with backward= (torch.func.grad, "
        "vjp, jacrev) or jvp= (torch.func.jvp, jacfwd); for a batch, loop over it (autoconvert.batched) instead of "
        "torch.vmap."
    )


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 5),
    size=st.integers(1, 4),
    dim=st.integers(0, 1),
)
def test_sequential_and_vectorized_agree(batch: int, size: int, dim: int) -> None:
    """Over batch sizes, sample sizes and the batch dim's place: both modes give the loop's
    values and per-sample gradients."""
    xs = torch.linspace(-1.5, 1.5, batch * size, dtype=torch.float64).reshape(batch, size)
    xs = xs if dim == 0 else xs.T.contiguous()
    sequential, vectorized = OPS["sequential"], OPS["vectorized"]
    for op in (sequential, vectorized):
        values = vmap(op, in_dims=dim)(xs)
        assert torch.allclose(values, vmap(sequential, in_dims=dim)(xs))
        per_sample = vmap(grad(lambda v, op=op: op(v * W[0]).sum()), in_dims=dim)(xs)
        loop = torch.stack([_autograd_grad(lambda v: sequential(v * W[0]).sum(), row)[0] for row in xs.movedim(dim, 0)])
        assert torch.allclose(per_sample, loop)


# Every argument position: two or three tensors ("t") with up to two floats ("f") among them.
LAYOUTS = sorted(
    {
        "".join(p)
        for tensors in (2, 3)
        for floats in range(5 - tensors)
        for p in itertools.permutations("t" * tensors + "f" * floats)
    }
)
#: The forms of a numpy_op, and its options: reverse mode only, with a jvp rule, registered, vectorized.
FORMS: dict[str, dict[str, Any]] = {
    "backward": {},
    "jvp": {"jvp": True},
    "vectorized": {"jvp": True, "vmap": "vectorized"},
    "fake": {"jvp": True, "fake": True},
    "fake-vectorized": {"jvp": True, "fake": True, "vmap": "vectorized"},
}
TRANSFORMS = (
    *("grad", "jacrev", "vjp", "autograd", "autograd(create_graph)", "jvp", "jacfwd"),
    *("vmap(grad)", "vmap(jacrev)", "vmap(vjp)", "vmap(jacfwd)"),  # per-sample derivatives
)


def _mix(xp: Any, args: Sequence[Any]) -> Any:
    """A function whose derivative differs for each tensor's position and reads the others:
    ``(1 + sum of floats) * prod(tensors) + sum((i + 1) * sin(tensor i))``; ``xp``: np or torch."""
    tensors = [a for a in args if not isinstance(a, float)]
    scale = 1 + sum(a for a in args if isinstance(a, float))
    return scale * math.prod(tensors) + sum((i + 1) * xp.sin(t) for i, t in enumerate(tensors))


def _mix_partials(args: Sequence[Any]) -> list[np.ndarray]:
    """``_mix``'s partial derivative by each tensor, in NumPy."""
    tensors = [a for a in args if not isinstance(a, float)]
    scale = 1 + sum(a for a in args if isinstance(a, float))
    others = [math.prod(t for j, t in enumerate(tensors) if j != i) for i in range(len(tensors))]
    return [scale * other + (i + 1) * np.cos(t) for i, (t, other) in enumerate(zip(tensors, others, strict=True))]


def _mix_backward(g: np.ndarray, *args: Any, output: np.ndarray) -> tuple[np.ndarray, ...]:
    return tuple(g * p for p in _mix_partials(args))


def _mix_jvp(tangents: tuple[np.ndarray, ...], *args: Any, output: np.ndarray) -> Any:
    return sum(t * p for t, p in zip(tangents, _mix_partials(args), strict=True))


@functools.cache
def _mix_op(layout: str, form: str) -> Any:
    """``_mix`` as a numpy_op of ``layout``'s parameters (``t0``, ``f1``, ...: arrays and
    floats, a signature torch.library reads) in ``form``; one per pair, for the process."""

    def mix(*args: Any) -> np.ndarray:
        return np.asarray(_mix(np, args))

    kinds = {"t": np.ndarray, "f": float}
    parameters = [
        inspect.Parameter(f"{kind}{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kinds[kind])
        for i, kind in enumerate(layout)
    ]
    mix.__signature__ = inspect.Signature(parameters, return_annotation=np.ndarray)  # type: ignore[attr-defined]
    options = FORMS[form]
    return ac.numpy_op(
        mix,
        backward=_mix_backward,
        jvp=_mix_jvp if options.get("jvp") else None,
        vmap=options.get("vmap", "sequential"),
        fake=f"t{layout.index('t')}" if options.get("fake") else None,
    )


def _transformed(
    transform: str, f: Callable[..., Any], tensors: list[torch.Tensor], chosen: tuple[int, ...], dims: tuple[Any, ...]
) -> tuple[torch.Tensor, ...]:
    """``transform`` of ``f`` (a function of the tensors) by the tensors at ``chosen``, flat:
    torch.func's with ``argnums=chosen``, or, for those without argnums, of ``f`` with the
    other tensors held; ``vmap(...)``: per sample, the tensors batched along ``dims``."""
    if transform.startswith("vmap("):
        inner = transform.removeprefix("vmap(").removesuffix(")")
        return vmap(lambda *ts: _transformed(inner, f, list(ts), chosen, dims), in_dims=dims)(*tensors)
    total = lambda *ts: f(*ts).sum()  # noqa: E731 - a scalar for grad
    if transform == "grad":
        return grad(total, argnums=chosen)(*tensors)
    if transform in ("jacrev", "jacfwd"):
        return (jacrev if transform == "jacrev" else jacfwd)(f, argnums=chosen)(*tensors)
    held = lambda *picked: f(*_placed(tensors, chosen, picked))  # noqa: E731 - f of the chosen tensors only
    picked = [tensors[i] for i in chosen]
    if transform == "vjp":
        out, pullback = vjp(held, *picked)
        return (out, *pullback(torch.cos(out)))
    if transform == "jvp":
        return jvp(held, tuple(picked), tuple(torch.cos(t) for t in picked))
    leaves = [t.detach().clone().requires_grad_() for t in picked]
    return torch.autograd.grad(total(*_placed(tensors, chosen, leaves)), leaves, create_graph="create" in transform)


def _placed(tensors: list[torch.Tensor], chosen: tuple[int, ...], picked: Sequence[torch.Tensor]) -> list[Any]:
    replaced = dict(zip(chosen, picked, strict=True))
    return [replaced.get(i, t) for i, t in enumerate(tensors)]


@settings(deadline=None)
@given(data=st.data(), layout=st.sampled_from(LAYOUTS), transform=st.sampled_from(TRANSFORMS))
def test_every_argument_position_gets_its_own_derivative(data: Any, layout: str, transform: str) -> None:
    """Over argnums (any order) x transforms (grad, jacrev, jacfwd, vjp, jvp; the first four
    per sample under vmap; eager autograd with and without create_graph) x argument positions
    (2-3 tensors, floats between them, the last argument by keyword or not) x op forms: the
    derivative by each differentiated tensor is the one of the same function written in
    torch, never another tensor's."""
    forward_mode = "jvp" in transform or "jacfwd" in transform
    forms = [f for f in FORMS if not forward_mode or FORMS[f].get("jvp")]
    form = data.draw(st.sampled_from(forms), label="form")
    count = layout.count("t")
    chosen = tuple(data.draw(st.lists(st.integers(0, count - 1), min_size=1, unique=True), label="argnums"))
    last_by_keyword = data.draw(st.booleans(), label="last argument by keyword")
    floats = data.draw(st.lists(st.floats(-0.9, 0.9), min_size=len(layout), max_size=len(layout)), label="floats")
    batched = [True] * count
    if transform.startswith("vmap("):
        batched = data.draw(st.lists(st.booleans(), min_size=count, max_size=count).filter(any), label="batched")
    values = data.draw(hnp.arrays(np.float64, (count, 2, 3), elements=st.floats(-2, 2)), label="values")
    tensors = [torch.tensor(v if b else v[0]) for v, b in zip(values, batched, strict=True)]
    dims = tuple(0 if b else None for b in batched)
    op = _mix_op(layout, form)

    def arguments(ts: Sequence[torch.Tensor]) -> list[Any]:
        given = iter(ts)
        return [next(given) if kind == "t" else f for kind, f in zip(layout, floats, strict=True)]

    def called(*ts: torch.Tensor) -> Any:
        args = arguments(ts)
        if last_by_keyword:  # moved to its place: the op's gradients go to positional tensors
            return op(*args[:-1], **{f"{layout[-1]}{len(layout) - 1}": args[-1]})
        return op(*args)

    found = _transformed(transform, called, tensors, chosen, dims)
    expected = _transformed(transform, lambda *ts: _mix(torch, arguments(ts)), tensors, chosen, dims)
    assert len(found) == len(expected)
    for f, e in zip(found, expected, strict=True):
        assert f.shape == e.shape and torch.allclose(f, e), (f, e)


class _MaskedLike(np.ndarray):
    """An array subclass carrying its mask as data, as astropy's ``Masked`` does."""

    mask: Any = None


def _masked_like(values: np.ndarray, mask: list[bool]) -> np.ndarray:
    masked = values.view(_MaskedLike)
    masked.mask = np.array(mask)
    return masked


@pytest.mark.parametrize("make", [np.ma.MaskedArray, _masked_like])
@pytest.mark.parametrize("rule", ["backward", "jvp"])
@pytest.mark.parametrize("mask", [[False, True, False], [False, False, False]])
def test_a_masked_gradient_or_tangent_is_refused_naming_the_rule(make: Any, rule: str, mask: list[bool]) -> None:
    """A NumPy rule returning a masked array (NumPy's, or a subclass carrying a mask as
    astropy's does), masked entries or none, is refused naming the op and the rule: its
    gradient or tangent would hold the hidden numbers as if they were data."""
    hidden = make(np.array([2.0, -999.0, 2.0]), mask)
    op = ac.numpy_op(np.sin, backward=lambda g, x, output: hidden, jvp=lambda t, x, output: hidden)
    x = torch.ones(3, dtype=torch.float64)
    derive = (lambda: op(x.requires_grad_()).sum().backward()) if rule == "backward" else (lambda: jvp(op, (x,), (x,)))
    with pytest.raises(ac.ConversionError) as info:
        derive()
    where = "the backward's gradient for tensor argument 0" if rule == "backward" else "the jvp's tangent of result 0"
    kind = type(hidden)
    assert str(info.value) == (
        f"sin(): {where} is a masked array; a tensor has no mask, and dropping it would silently unmask values. "
        f"Found {kind.__module__}.{kind.__qualname__}(shape=(3,), dtype=<f8). Fix: use value.filled(fill_value), "
        "or the data and the mask as two arrays."
    )


# Under torch.func too, what the NumPy rules are handed is read-only.


def _scaled(x: np.ndarray) -> np.ndarray:
    return x * 2


def _writing(position: str, rule: str) -> Any:
    """A backward (or jvp) of ``_scaled`` writing 9 into what it was handed at ``position``."""

    def written(first: Any, x: Any, output: Any) -> Any:
        target = {"first": first, "x": x, "output": output}[position]
        target[...] = 9.0
        return first * 2

    return {rule: written}


_TRANSFORMS: dict[str, Callable[[Any, torch.Tensor], Any]] = {
    "grad": lambda op, x: grad(lambda v: op(v).sum())(x),
    "vmap(grad)": lambda op, x: vmap(grad(lambda v: op(v).sum()))(x.reshape(2, 3)),
    "jacrev": lambda op, x: jacrev(op)(x),
    "vjp": lambda op, x: vjp(op, x)[1](torch.ones_like(x)),
    "jvp": lambda op, x: jvp(op, (x,), (torch.ones_like(x),)),
    "jacfwd": lambda op, x: jacfwd(op)(x),
}


@pytest.mark.parametrize("fake", [False, True], ids=["eager", "fake"])
@pytest.mark.parametrize("vmap_mode", ["sequential", "vectorized"])
@pytest.mark.parametrize("position", ["first", "x", "output"])
@pytest.mark.parametrize("transform", _TRANSFORMS)
def test_a_rule_writing_what_it_was_handed_is_refused_under_every_transform(
    transform: str, position: str, vmap_mode: str, fake: bool
) -> None:
    """grad, vmap(grad), jacrev, vjp (the backward) and jvp, jacfwd (the jvp): a write into
    the saved input, the output or the incoming gradient or tangent raises, and changes no
    tensor; before, the rule got the tensors' own writable memory."""
    rule = "jvp" if transform.startswith("j") and transform != "jacrev" else "backward"
    op = ac.numpy_op(_scaled, vmap=vmap_mode, **_writing(position, rule), **({"fake": "x"} if fake else {}))
    x = torch.arange(6, dtype=torch.float64)
    with pytest.raises(ac.ReadOnlyError) as info:
        _TRANSFORMS[transform](op, x)
    given = "gradient" if rule == "backward" else "tangent"
    assert str(info.value).startswith(
        f"_scaled(): the {rule}'s argument {position} was written into; a numpy_op's {rule} "
    )
    assert f"and the incoming {given}, so that" in str(info.value)
    assert torch.equal(x, torch.arange(6, dtype=torch.float64))


@pytest.mark.parametrize("transform", _TRANSFORMS)
def test_copy_true_rules_write_their_own_copies_under_every_transform(transform: str) -> None:
    """``copy=True``: the rules' writes land in copies of their own, and the results are right."""
    rule = "jvp" if transform.startswith("j") and transform != "jacrev" else "backward"
    op = ac.numpy_op(_scaled, copy=True, **_writing("x", rule))
    x = torch.arange(6, dtype=torch.float64)
    _TRANSFORMS[transform](op, x)
    assert torch.equal(x, torch.arange(6, dtype=torch.float64))


def _logsumexp(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = x.max(-1, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(-1, keepdims=True)
    return (m + np.log(s))[..., 0], e / s


def _lse_backward(g: np.ndarray, x: np.ndarray, output: np.ndarray, softmax: np.ndarray) -> np.ndarray:
    return g[..., None] * softmax


def _lse_jvp(t: np.ndarray, x: np.ndarray, output: np.ndarray, softmax: np.ndarray) -> np.ndarray:
    return (t * softmax).sum(-1)


def _lse_fake(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(x.shape[:-1]), torch.empty_like(x)


_LSE_TRANSFORMS: dict[str, Callable[[Any, torch.Tensor], Any]] = {
    "grad": lambda op, x: grad(lambda v: op(v).sum())(x),
    "vmap(grad)": lambda op, x: vmap(grad(op))(x),
    "grad(vmap)": lambda op, x: grad(lambda v: vmap(op)(v).sum())(x),
    "jacrev": lambda op, x: torch.stack([jacrev(op)(row) for row in x]),
    "vjp": lambda op, x: vjp(op, x)[1](torch.ones(x.shape[:-1], dtype=x.dtype))[0],
    "jvp": lambda op, x: jvp(op, (x,), (torch.ones_like(x),))[1],
    "vmap(jvp)": lambda op, x: vmap(lambda v: jvp(op, (v,), (torch.ones_like(v),))[1])(x),
    "jacfwd": lambda op, x: torch.stack([jacfwd(op)(row) for row in x]),
}


@pytest.mark.parametrize("fake", [False, True], ids=["eager", "fake"])
@pytest.mark.parametrize("vmap_mode", ["sequential", "vectorized"])
@pytest.mark.parametrize("transform", _LSE_TRANSFORMS)
def test_residuals_reach_the_rules_under_every_transform(transform: str, vmap_mode: str, fake: bool) -> None:
    """The forward's saved softmax reaches the backward and the jvp, per sample under vmap,
    and the caller never sees it: the gradient is the softmax, the tangent of ones is one."""
    op = ac.numpy_op(
        _logsumexp,
        backward=_lse_backward,
        jvp=_lse_jvp,
        residuals="softmax",
        vmap=vmap_mode,
        **({"fake": _lse_fake} if fake else {}),
    )
    x = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    found = _LSE_TRANSFORMS[transform](op, x)
    expected = torch.ones(4, dtype=x.dtype) if "jvp" in transform else torch.softmax(x, -1)
    assert torch.allclose(found, expected)
    assert torch.allclose(vmap(op)(x), torch.logsumexp(x, -1))
