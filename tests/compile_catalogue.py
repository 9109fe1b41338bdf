"""NumPy-only bodies from real code (losses, metrics, augmentations, geometry), for the trace route.

Each entry: a name, the body (NumPy alone, as a user writes it), the shapes of its float
arguments, its plain arguments, and whether it is differentiable in its float arguments.
With them, what the trace route's tests on each device share: the bodies traced, each
decorated, its inputs, and the comparison of results.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
import torch._dynamo
from torch.utils._pytree import tree_flatten

import autoconvert as ac
from autoconvert._interpreter._trace import _UNFIT_DYNAMO

#: The mark of a test module of the trace route: skipped where this torch's dynamo cannot hold it.
ON_THE_TRACE_ROUTE = pytest.mark.skipif(
    _UNFIT_DYNAMO is not None, reason=f"the trace route is off on this torch: {_UNFIT_DYNAMO}"
)


class Body(NamedTuple):
    name: str
    body: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...]
    plain: tuple[Any, ...] = ()
    differentiable: bool = True
    writes_arguments: bool = False  # needs copy=True eagerly (the arrays it gets are read-only)
    data_dependent: bool = False  # a result's shape depends on the values (a boolean mask's selection)


def mse(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    return np.mean((pred - target) ** 2)


def huber(pred: np.ndarray, target: np.ndarray, delta: float) -> np.ndarray:
    err = np.abs(pred - target)
    quadratic = np.minimum(err, delta)
    return np.mean(0.5 * quadratic**2 + delta * (err - quadratic))


def log_sum_exp(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    return (m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)))[..., 0]


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -np.mean(np.sum(log_p * labels, axis=1))


def binary_cross_entropy(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))


def focal_weight(p: np.ndarray, gamma: float) -> np.ndarray:
    return (1 - p) ** gamma * np.log(np.clip(p, 1e-6, 1.0))


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) + 1e-8)


def pairwise_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    diff = a[:, None, :] - b[None, :, :]
    return np.sqrt(np.sum(diff**2, axis=-1) + 1e-12)


def squared_distances_einsum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("id,id->i", a, a)[:, None] + np.einsum("jd,jd->j", b, b)[None, :] - 2 * a @ b.T


def gram(x: np.ndarray) -> np.ndarray:
    return np.einsum("bi,bj->ij", x, x) / x.shape[0]


def rbf_kernel(a: np.ndarray, gamma: float) -> np.ndarray:
    sq = np.sum(a**2, axis=1)
    return np.exp(-gamma * (sq[:, None] + sq[None, :] - 2 * a @ a.T))


def normalise_rows(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def standardise(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-5)


def layer_norm(x: np.ndarray) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


def relu_where(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, 0.01 * x)


def masked_mean(x: np.ndarray, threshold: float) -> np.ndarray:
    mask = x > threshold
    return np.sum(np.where(mask, x, 0.0)) / np.maximum(np.sum(mask), 1)


def cumulative_returns(r: np.ndarray) -> np.ndarray:
    return np.cumsum(r, axis=-1)


def finite_differences(x: np.ndarray) -> np.ndarray:
    return np.diff(x, axis=-1)


def total_variation(img: np.ndarray) -> np.ndarray:
    return np.abs(np.diff(img, axis=0)).sum() + np.abs(np.diff(img, axis=1)).sum()


def clipped(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0.2, 0.8) * 3


def sorted_rows(x: np.ndarray) -> np.ndarray:
    return np.sort(x, axis=-1)


def argsort_gather(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x[:, 0])
    return x[order]


def top_k_mean(x: np.ndarray) -> np.ndarray:
    return np.sort(x, axis=-1)[..., -2:].mean(axis=-1)


def fancy_rows(x: np.ndarray) -> np.ndarray:
    return x[[0, 2, 1]] * 2


def boolean_select(x: np.ndarray) -> np.ndarray:
    return x[x[:, 0] > 0.5, :].sum(axis=0)


def broadcast_affine(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x * w[None, :] + w[None, :] ** 2


def stack_features(x: np.ndarray) -> np.ndarray:
    return np.stack([x, x**2, np.sin(x)], axis=-1)


def concat_halves(x: np.ndarray) -> np.ndarray:
    return np.concatenate([x[:, ::2], x[:, 1::2] * 2], axis=1)


def flip_augment(img: np.ndarray) -> np.ndarray:
    return np.flip(img, axis=1) * 0.5 + img * 0.5


def random_crop_fixed(img: np.ndarray, top: int, left: int) -> np.ndarray:
    return img[top : top + 2, left : left + 2]


def rotate90(img: np.ndarray) -> np.ndarray:
    return np.rot90(img, k=1, axes=(0, 1)) + 1


def local_buffer(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    out[:, 0] = x[:, 0] * 2
    out[:, 1:] = x[:, 1:] + x[:, :-1]
    return out


def in_place_local(x: np.ndarray) -> np.ndarray:
    y = x * 1.0
    y += 1
    y *= x
    return y


def writes_its_argument(x: np.ndarray) -> np.ndarray:
    x[x < 0.5] = 0.0
    return x * 2


def rotation_2d(points: np.ndarray, theta: float) -> np.ndarray:
    c, s = np.cos(theta), np.sin(theta)
    r = np.array([[c, -s], [s, c]])
    return points @ r.T


def polygon_area(pts: np.ndarray) -> np.ndarray:
    x, y = pts[:, 0], pts[:, 1]
    return 0.5 * np.abs(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lo = np.maximum(a[:, None, :2], b[None, :, :2])
    hi = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=-1)
    area_a = np.prod(a[:, 2:] - a[:, :2], axis=-1)
    area_b = np.prod(b[:, 2:] - b[:, :2], axis=-1)
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def cross_products(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.cross(u, v)


def solve_linear(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.solve(a @ a.T + 3 * np.eye(a.shape[0]), b)


def mean_and_std(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.mean(axis=0), x.std(axis=0)


def moments_dict(x: np.ndarray) -> dict[str, np.ndarray]:
    return {"mean": x.mean(), "max": x.max(axis=0)}


def accuracy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.mean(np.argmax(logits, axis=1) == np.argmax(labels, axis=1))


def histogram_counts(x: np.ndarray) -> np.ndarray:
    return np.sum((x[:, None] >= np.linspace(0, 1, 5)[None, :]), axis=0)


def gaussian_window(n_points: np.ndarray, sigma: float) -> np.ndarray:
    return np.exp(-0.5 * (n_points / sigma) ** 2)


def polyval_horner(x: np.ndarray) -> np.ndarray:
    return np.polyval(np.array([0.5, -1.0, 2.0]), x)


def interpolate_linear(x: np.ndarray) -> np.ndarray:
    return np.interp(x, np.array([0.0, 0.5, 1.0]), np.array([0.0, 2.0, 1.0]))


def kl_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    p = p / p.sum(axis=-1, keepdims=True)
    q = q / q.sum(axis=-1, keepdims=True)
    return np.sum(p * (np.log(p) - np.log(q)), axis=-1)


def uses_helper(x: np.ndarray) -> np.ndarray:
    return softmax(x) * layer_norm(x)


CATALOGUE = (
    Body("mse", mse, ((4, 3), (4, 3))),
    Body("huber", huber, ((4, 3), (4, 3)), (0.3,)),
    Body("log_sum_exp", log_sum_exp, ((4, 5),)),
    Body("softmax", softmax, ((4, 5),)),
    Body("cross_entropy", cross_entropy, ((4, 5), (4, 5))),
    Body("binary_cross_entropy", binary_cross_entropy, ((6,), (6,))),
    Body("focal_weight", focal_weight, ((6,),), (2.0,)),
    Body("cosine_similarity", cosine_similarity, ((4, 3), (4, 3))),
    Body("pairwise_distances", pairwise_distances, ((4, 3), (5, 3))),
    Body("squared_distances_einsum", squared_distances_einsum, ((4, 3), (5, 3))),
    Body("gram", gram, ((6, 3),)),
    Body("rbf_kernel", rbf_kernel, ((4, 3),), (0.5,)),
    Body("normalise_rows", normalise_rows, ((4, 3),)),
    Body("standardise", standardise, ((6, 3),)),
    Body("layer_norm", layer_norm, ((4, 5),)),
    Body("relu_where", relu_where, ((4, 5),)),
    Body("masked_mean", masked_mean, ((4, 5),), (0.4,)),
    Body("cumulative_returns", cumulative_returns, ((3, 6),)),
    Body("finite_differences", finite_differences, ((3, 6),)),
    Body("total_variation", total_variation, ((5, 5),)),
    Body("clipped", clipped, ((4, 5),)),
    Body("sorted_rows", sorted_rows, ((4, 5),)),
    Body("argsort_gather", argsort_gather, ((5, 3),)),
    Body("top_k_mean", top_k_mean, ((4, 5),)),
    Body("fancy_rows", fancy_rows, ((3, 4),)),
    Body("boolean_select", boolean_select, ((6, 3),), data_dependent=True),
    Body("broadcast_affine", broadcast_affine, ((4, 3), (3,))),
    Body("stack_features", stack_features, ((4, 3),)),
    Body("concat_halves", concat_halves, ((4, 6),)),
    Body("flip_augment", flip_augment, ((4, 5),)),
    Body("random_crop_fixed", random_crop_fixed, ((5, 5),), (1, 2)),
    Body("rotate90", rotate90, ((4, 5),)),
    Body("local_buffer", local_buffer, ((4, 5),)),
    # Traced, `y *= x` is an in-place torch op on a value autograd saved: torch refuses its
    # gradient ("modified by an inplace operation"); its values trace.
    Body("in_place_local", in_place_local, ((4, 5),), differentiable=False),
    Body("writes_its_argument", writes_its_argument, ((4, 5),), writes_arguments=True),
    Body("rotation_2d", rotation_2d, ((6, 2),), (0.3,)),
    Body("polygon_area", polygon_area, ((5, 2),)),
    Body("box_iou", box_iou, ((3, 4), (2, 4)), differentiable=False),
    # torch's NumPy tracing of np.cross writes in place into a tensor that requires grad.
    Body("cross_products", cross_products, ((4, 3), (4, 3)), differentiable=False),
    Body("solve_linear", solve_linear, ((3, 3), (3, 2))),
    Body("mean_and_std", mean_and_std, ((6, 3),)),
    Body("moments_dict", moments_dict, ((6, 3),)),
    Body("accuracy", accuracy, ((6, 4), (6, 4)), differentiable=False),
    Body("histogram_counts", histogram_counts, ((8,),), differentiable=False),
    Body("gaussian_window", gaussian_window, ((7,),), (1.5,)),
    Body("polyval_horner", polyval_horner, ((6,),)),
    Body("interpolate_linear", interpolate_linear, ((6,),), differentiable=False),
    Body("kl_divergence", kl_divergence, ((3, 4), (3, 4))),
    Body("uses_helper", uses_helper, ((4, 5),)),
)

#: The bodies torch cannot trace, each with the NumPy function it lacks.
UNTRACED = {"polyval_horner": "polyval", "interpolate_linear": "interp"}
#: The bodies traced (rotation_2d builds an array from Python floats, which torch's tracing refuses).
TRACED = [b for b in CATALOGUE if b.name not in UNTRACED and b.body is not rotation_2d]

#: The traced bodies whose code makes arrays torch's NumPy tracing puts on the CPU, and with what.
MADE_ON_THE_CPU = {"solve_linear": "eye", "histogram_counts": "linspace", "cross_products": "cross"}


def decorated(body: Body, **options: Any) -> Any:
    """``body`` as ``returns_tensor(accepts_numpy(**options)(body))``."""
    if body.writes_arguments:
        options.setdefault("copy", True)  # eagerly its arrays are read-only otherwise
    return ac.returns_tensor(ac.accepts_numpy(**options)(body.body))


def inputs(body: Body, dtype: torch.dtype = torch.float64, seed: int = 0) -> list[torch.Tensor]:
    """``body``'s float arguments, on the CPU: values in [0.1, 1.1)."""
    generator = torch.Generator().manual_seed(seed)
    return [(torch.rand(*s, generator=generator, dtype=torch.float64) + 0.1).to(dtype) for s in body.shapes]


def assert_close_trees(expected: Any, got: Any, **tolerance: Any) -> None:
    """The same containers, of tensors of the same types and dtypes, with close values."""
    flat_expected, spec_expected = tree_flatten(expected)
    flat_got, spec_got = tree_flatten(got)
    assert spec_expected == spec_got
    for e, g in zip(flat_expected, flat_got, strict=True):
        assert type(e) is type(g)
        assert e.dtype == g.dtype
        torch.testing.assert_close(
            g.float() if g.dtype == torch.bfloat16 else g, e.float() if e.dtype == torch.bfloat16 else e, **tolerance
        )


@functools.cache
def _traces_data_dependent_shapes() -> bool:
    """Whether torch.compile traces a boolean mask's selection, written in torch, fullgraph."""
    try:
        torch.compile(lambda t: t[t > 0.5].sum(), backend="eager", fullgraph=True)(torch.rand(4))
    except torch._dynamo.exc.Unsupported:
        return False
    return True


def skip_where_torch_refuses(body: Body) -> None:
    """A body whose result's shape depends on the values, where torch.compile refuses the line
    written by hand too: nothing for the library to trace."""
    if body.data_dependent and not _traces_data_dependent_shapes():
        pytest.skip(
            "this torch's dynamo refuses a shape that depends on the values under its default settings "
            "(torch 2.6 and 2.9: 'dynamic shape operator: aten.nonzero'), the line written by hand too"
        )
