"""The benchmark cases: each compares contenders against the hand-written idiom, in one process."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import autoconvert as ac

from . import batches, compiled, floor, gradients, micro, native
from .func import func_transforms
from .harness import Row, compare, synced

Settings = dict[str, Any]


# --------------------------------------------------------------------------- peers


def minimal_decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The smallest correct-looking functools.wraps decorator people write by hand."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args = tuple(a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a for a in args)
        out = fn(*args, **kwargs)
        return torch.from_numpy(out) if isinstance(out, np.ndarray) else out

    return wrapper


def _tree_map_peer(fn: Callable[..., Any]) -> Callable[..., Any]:
    from torch.utils import _pytree

    def wrapper(*args: Any) -> Any:
        arrays = _pytree.tree_map(lambda x: x.numpy() if isinstance(x, torch.Tensor) else x, args)
        return _pytree.tree_map(lambda x: torch.from_numpy(x) if isinstance(x, np.ndarray) else x, fn(*arrays))

    return wrapper


def _lightning_peer(fn: Callable[..., Any]) -> Callable[..., Any] | None:
    if importlib.util.find_spec("lightning_utilities") is None:
        return None
    from lightning_utilities.core.apply_func import apply_to_collection

    def wrapper(*args: Any) -> Any:
        arrays = apply_to_collection(args, torch.Tensor, lambda t: t.numpy())
        return apply_to_collection(fn(*arrays), np.ndarray, torch.from_numpy)

    return wrapper


def _numpy_fn_peer(fn: Callable[..., Any]) -> Callable[..., Any] | None:
    if importlib.util.find_spec("numpy_fn") is None:
        return None
    from numpy_fn import numpy_fn

    wrapped = numpy_fn(fn)

    def call(*args: Any) -> Any:
        with warnings.catch_warnings():  # it warns on every call
            warnings.simplefilter("ignore")
            return wrapped(*args)

    return call


_custom_ops: dict[str, Any] = {}


def _custom_op_peer() -> Callable[[torch.Tensor], torch.Tensor]:
    if "neg" not in _custom_ops:

        @torch.library.custom_op("autoconvert_bench::np_negative", mutates_args=())
        def np_negative(x: torch.Tensor) -> torch.Tensor:
            return torch.from_numpy(np.negative(x.numpy()))

        _custom_ops["neg"] = np_negative
    return _custom_ops["neg"]  # type: ignore[no-any-return]


def peers(fn: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """Every installed peer applied to ``fn`` (missing ones skipped)."""
    found: dict[str, Callable[..., Any] | None] = {
        "functools.wraps decorator": minimal_decorator(fn),
        "torch.compiler.wrap_numpy": torch.compiler.wrap_numpy(fn),
        "torch.utils._pytree.tree_map": _tree_map_peer(fn),
        "lightning apply_to_collection": _lightning_peer(fn),
        "numpy-fn": _numpy_fn_peer(fn),
    }
    return {name: f for name, f in found.items() if f is not None}


# --------------------------------------------------------------------------- case 1: per-call overhead


class _Scaler:
    """A NumPy-only class, for torchify's per-attribute cost."""

    @staticmethod
    def negate(v: np.ndarray) -> np.ndarray:
        return np.negative(v)

    def scale(self, v: np.ndarray) -> np.ndarray:
        return np.negative(v)


@dataclasses.dataclass
class _Fitted:
    """A result with methods: a fitted state, a history of 8 arrays, a count its methods change."""

    w: np.ndarray
    hist: list[np.ndarray]
    n: int = 0

    def predict(self, v: np.ndarray) -> np.ndarray:
        return v * self.w

    def step(self) -> None:
        self.n += 1


def _fitted(w: np.ndarray) -> _Fitted:
    return _Fitted(w * 1, [w * i for i in range(8)])


def _other_plans(t: torch.Tensor, eight: list[torch.Tensor], repeats: int, target: float) -> list[Row]:
    """Plans beyond the plain pair's defaults, each on the flat call too."""
    rows: list[Row] = []
    # A list of tensors (what np.stack and np.concatenate take), and returns_tensor alone on a
    # function that takes no tensor (a window, a grid): both on the flat call.
    stack = ac.returns_tensor(ac.accepts_numpy(np.stack))
    rows += compare(
        "a list of 8 tensors (np.stack)",
        "hand-written",
        {
            "hand-written": lambda: torch.from_numpy(np.stack([v.numpy() for v in eight])),
            "autoconvert": lambda: stack(eight),
        },
        repeats,
        target,
    )

    def grid(n: int) -> np.ndarray:
        return np.linspace(0.0, 1.0, n)

    made = ac.returns_tensor(grid)
    rows += compare(
        "returns_tensor alone, no tensor argument (np.linspace)",
        "hand-written",
        {"hand-written": lambda: torch.from_numpy(grid(16)), "autoconvert": lambda: made(16)},
        repeats,
        target,
    )

    return rows + _torchified_modules(t, repeats, target)


def _torchified_modules(t: torch.Tensor, repeats: int, target: float) -> list[Row]:
    """torchify's module functions: SciPy's (where installed), and NumPy's with an out-parameter."""
    rows: list[Row] = []
    # torchify of a SciPy module: its functions widen float16 (SciPy rejects it), a check per tensor.
    if importlib.util.find_spec("scipy") is not None:
        import scipy.special

        special = ac.torchify(scipy.special)
        rows += compare(
            "torchify(scipy.special).expit, 16 float32",
            "hand-written",
            {
                "hand-written": lambda: torch.from_numpy(scipy.special.expit(t.numpy())),
                "autoconvert": lambda: special.expit(t),
            },
            repeats,
            target,
        )
        # A SciPy function written in Python is guarded (copy when needed), its flat call calling it directly.
        import scipy.ndimage

        ndimage = ac.torchify(scipy.ndimage)
        rows += compare(
            "torchify(scipy.ndimage).uniform_filter1d, 16 float32",
            "hand-written",
            {
                "hand-written": lambda: torch.from_numpy(scipy.ndimage.uniform_filter1d(t.numpy(), 3)),
                "autoconvert": lambda: ndimage.uniform_filter1d(t, 3),
            },
            repeats,
            target,
        )
    # An out-parameter: the generic call, writing into the caller's tensor.
    numpy = ac.torchify(np)
    out = torch.empty(16)
    rows += compare(
        "torchify(np).add(t, 1, out=out), 16 float32",
        "hand-written",
        {
            "hand-written": lambda: (np.add(t.numpy(), 1, out=out.numpy()), out)[1],
            "autoconvert": lambda: numpy.add(t, 1, out=out),
        },
        repeats,
        target,
    )
    return rows


def per_call(settings: Settings) -> list[Row]:
    """Decorator cost on small CPU arrays, against hand-written conversion."""
    repeats, target = settings["repeats"], settings["target_s"]
    t = torch.rand(16)
    eight = [torch.rand(16) for _ in range(8)]
    rows = _one_tensor(t, repeats, target) + _several_arguments(repeats, target)
    rows += _per_leaf(eight, repeats, target) + _other_plans(t, eight, repeats, target)
    rows += _methods(t, repeats, target) + _gradients(t, repeats, target)
    rows += _views_and_adapt(t, repeats, target) + _check_writes(t, repeats, target)
    return rows


def _affine(a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return np.add(np.multiply(a, alpha), np.multiply(b, beta)) + c


def _one_tensor(t: torch.Tensor, repeats: int, target: float) -> list[Row]:
    """The plain pair on one tensor, against the peers."""
    neg = ac.returns_tensor(ac.accepts_numpy(np.negative))
    contenders = {
        "hand-written": lambda: torch.from_numpy(np.negative(t.numpy())),
        "autoconvert": lambda: neg(t),
        "autoconvert numpy_op(fake=)": functools.partial(ac.numpy_op(np.negative, fake="x"), t),
        **{name: functools.partial(f, t) for name, f in peers(np.negative).items()},
        "torch.library.custom_op": functools.partial(_custom_op_peer(), t),
    }
    return compare("1 tensor arg (np.negative, 16 float32)", "hand-written", contenders, repeats, target)


def _several_arguments(repeats: int, target: float) -> list[Row]:
    """Three tensors and two plain values, by position and by keyword, against the floor."""
    rows: list[Row] = []
    a, b, c = torch.rand(16), torch.rand(16), torch.rand(16)
    fused = ac.returns_tensor(ac.accepts_numpy(_affine))
    floored = floor.three_and_two(_affine, fused)
    rows += compare(
        "3 tensor + 2 plain args",
        "hand-written",
        {
            "hand-written": lambda: torch.from_numpy(_affine(a.numpy(), b.numpy(), c.numpy(), 0.5, 2.0)),
            "autoconvert": lambda: fused(a, b, c, 0.5, 2.0),
            "pure-Python floor (same guards)": lambda: floored(a, b, c, 0.5, 2.0),
            "functools.wraps decorator": functools.partial(minimal_decorator(_affine), a, b, c, 0.5, 2.0),
        },
        repeats,
        target,
    )

    rows += compare(
        "3 tensor + 2 plain args, plain ones by keyword",
        "hand-written",
        {
            "hand-written": lambda: torch.from_numpy(_affine(a.numpy(), b.numpy(), c.numpy(), alpha=0.5, beta=2.0)),
            "autoconvert": lambda: fused(a, b, c, alpha=0.5, beta=2.0),
            "pure-Python floor (same guards)": lambda: floored(a, b, c, alpha=0.5, beta=2.0),
        },
        repeats,
        target,
    )

    return rows


def _per_leaf(eight: list[torch.Tensor], repeats: int, target: float) -> list[Row]:
    """What each tensor costs: 8 arguments and results, a dict of 8."""
    rows: list[Row] = []

    # Per leaf: 8 tensors in, 8 out; the ratio is what each tensor costs against numpy() + from_numpy.
    def negate8(*vs: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(np.negative(v) for v in vs)

    on_eight = ac.returns_tensor(ac.accepts_numpy(negate8))
    rows += compare(
        "8 tensor args, 8 results (per-leaf cost)",
        "hand-written",
        {
            "hand-written": lambda: tuple(torch.from_numpy(r) for r in negate8(*(v.numpy() for v in eight))),
            "autoconvert": lambda: on_eight(*eight),
        },
        repeats,
        target,
    )

    def negate_all(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: np.negative(v) for k, v in batch.items()}

    batch = {f"k{i}": torch.rand(16) for i in range(8)}
    on_dict = ac.returns_tensor(ac.accepts_numpy(negate_all))
    dict_peers = {k: v for k, v in peers(negate_all).items() if k not in ("functools.wraps decorator", "numpy-fn")}
    rows += compare(
        "dict of 8 tensors in and out",
        "hand-written",
        {
            "hand-written": lambda: {
                k: torch.from_numpy(v) for k, v in negate_all({k: t.numpy() for k, t in batch.items()}).items()
            },
            "autoconvert": lambda: on_dict(batch),
            **{name: functools.partial(f, batch) for name, f in dict_peers.items()},
        },
        repeats,
        target,
    )

    return rows


def _methods(t: torch.Tensor, repeats: int, target: float) -> list[Row]:
    """The reverse pair, a decorated method, a torchified class's and object's methods."""
    rows: list[Row] = []
    x = np.random.default_rng(0).random(16)
    reverse = ac.returns_numpy(ac.accepts_tensor(torch.neg))
    rows += compare(
        "reverse pair (torch.neg on 16 float64)",
        "hand-written",
        {
            "hand-written": lambda: torch.neg(torch.from_numpy(x)).numpy(),
            "autoconvert": lambda: reverse(x),
        },
        repeats,
        target,
    )

    class Model:
        def hand(self, v: torch.Tensor) -> torch.Tensor:
            return torch.from_numpy(np.negative(v.numpy()))

        @ac.returns_tensor
        @ac.accepts_numpy
        def ours(self, v: np.ndarray) -> np.ndarray:
            return np.negative(v)

    model = Model()
    rows += compare(
        "a method",
        "hand-written",
        {"hand-written": lambda: model.hand(t), "autoconvert": lambda: model.ours(t)},
        repeats,
        target,
    )

    # A result's methods: nothing changed (a check of identities), a count changed (carried back),
    # and a bfloat16 result, whose 9 arrays the caller holds as copies kept one state by value.
    plain = _fitted(t.numpy())
    fitted = ac.returns_tensor(ac.accepts_numpy(_fitted))(t)
    halves = t.to(torch.bfloat16)
    plain_halves = _fitted(halves.float().numpy())
    fitted_halves = ac.returns_tensor(ac.accepts_numpy(_fitted))(halves)
    rows += compare(
        "a result's method (predict, 16 float32)",
        "hand-written",
        {
            "hand-written": lambda: torch.from_numpy(plain.predict(t.numpy())),
            "autoconvert": lambda: fitted.predict(t),
            "autoconvert, bfloat16 result (9 copies)": lambda: fitted_halves.predict(halves),
            "hand-written, bfloat16": lambda: torch.from_numpy(plain_halves.predict(halves.float().numpy())).to(
                torch.bfloat16
            ),
        },
        repeats,
        target,
    )
    rows += compare(
        "a result's method that changes it (self.n += 1)",
        "hand-written",
        {"hand-written": plain.step, "autoconvert": fitted.step, "autoconvert, bfloat16 result": fitted_halves.step},
        repeats,
        target,
    )

    # torchify of a class and of an instance: the wrapped callables are cached per attribute.
    torchified_class, torchified_object = ac.torchify(_Scaler), ac.torchify(_Scaler())
    rows += compare(
        "torchified staticmethod and instance method",
        "hand-written",
        {
            "hand-written": lambda: torch.from_numpy(_Scaler.negate(t.numpy())),
            "autoconvert staticmethod": lambda: torchified_class.negate(t),
            "autoconvert instance method": lambda: torchified_object.scale(t),
        },
        repeats,
        target,
    )

    return rows


def _gradients(t: torch.Tensor, repeats: int, target: float) -> list[Row]:
    """Tensors that require grad: detached, or through numpy_op's backward."""
    rows: list[Row] = []
    # Training code passes tensors that require grad (a matcher fed the model's predictions).
    g = torch.rand(16, requires_grad=True)
    detaching = ac.returns_tensor(ac.accepts_numpy(grad="detach")(np.negative))
    rows += compare(
        "1 tensor arg that requires grad (grad='detach')",
        "hand-written",
        {
            "hand-written": lambda: torch.from_numpy(np.negative(g.detach().numpy())),
            "autoconvert": lambda: detaching(g),
        },
        repeats,
        target,
    )

    # numpy_op with a backward: eagerly, a call that needs no graph skips the autograd.Function.
    class HandSine(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, v: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(v)
            return torch.from_numpy(np.sin(v.detach().numpy()))

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            (v,) = ctx.saved_tensors
            return torch.from_numpy(g.numpy() * np.cos(v.detach().numpy()))

    sine = ac.numpy_op(np.sin, backward=lambda g, v, output: g * np.cos(v))
    needs = torch.rand(16, requires_grad=True)
    rows += compare(
        "numpy_op(backward=), input needs no grad",
        "hand-written",
        {"hand-written": lambda: torch.from_numpy(np.sin(t.numpy())), "autoconvert": lambda: sine(t)},
        repeats,
        target,
    )
    rows += compare(
        "numpy_op(backward=), input requires grad",
        "hand-written autograd.Function",
        {"hand-written autograd.Function": lambda: HandSine.apply(needs), "autoconvert": lambda: sine(needs)},
        repeats,
        target,
    )

    return rows


def _views_and_adapt(t: torch.Tensor, repeats: int, target: float) -> list[Row]:
    """A view of the input returned; adapt, with tensors and with arrays."""
    rows: list[Row] = []

    # A function returning a view of its read-only input: the result must be a copy.
    def first8(v: np.ndarray) -> np.ndarray:
        return v[:8]

    head = ac.returns_tensor(ac.accepts_numpy(first8))
    head_floor = floor.one_view(first8, head)
    rows += compare(
        "a view of the input returned (v[:8])",
        "hand-written",
        {
            "hand-written": lambda: torch.from_numpy(t.numpy()[:8].copy()),
            "autoconvert": lambda: head(t),
            "pure-Python floor (same guards)": lambda: head_floor(t),
        },
        repeats,
        target,
    )

    a, b, c = torch.rand(16), torch.rand(16), torch.rand(16)

    # adapt: the annotations decide; results come back in the caller's kind and floating dtype.
    def affine_annotated(a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float) -> np.ndarray:
        return _affine(a, b, c, alpha, beta)

    adapted, pair_input = ac.adapt(affine_annotated), ac.returns_tensor(dtype="input")(ac.accepts_numpy(_affine))
    rows += compare(
        "adapt, 3 tensor + 2 plain args",
        "hand-written",
        {
            "hand-written": lambda: torch.from_numpy(_affine(a.numpy(), b.numpy(), c.numpy(), 0.5, 2.0)).to(a.dtype),
            "autoconvert pair, dtype='input'": lambda: pair_input(a, b, c, 0.5, 2.0),
            "autoconvert adapt": lambda: adapted(a, b, c, 0.5, 2.0),
        },
        repeats,
        target,
    )
    xa, xb, xc = a.numpy(), b.numpy(), c.numpy()
    rows += compare(
        "adapt called with arrays (nothing to convert)",
        "direct call",
        {
            "direct call": lambda: _affine(xa, xb, xc, 0.5, 2.0),
            "autoconvert adapt": lambda: adapted(xa, xb, xc, 0.5, 2.0),
        },
        repeats,
        target,
    )

    return rows


def _check_writes(t: torch.Tensor, repeats: int, target: float) -> list[Row]:
    """check_writes=True against the plain pair, on a small and a large tensor."""
    rows: list[Row] = []
    neg = ac.returns_tensor(ac.accepts_numpy(np.negative))
    # check_writes=True (tests and debugging): one snapshot and one bitwise compare per argument.
    for label, arg in (("16 float32", t), ("1 MiB float32", torch.rand(2**18))):
        checked = ac.returns_tensor(ac.accepts_numpy(check_writes=True)(np.negative))
        rows += compare(
            f"check_writes=True, 1 tensor arg ({label})",
            "hand-written",
            {
                "hand-written": functools.partial(lambda v: torch.from_numpy(np.negative(v.numpy())), arg),
                "autoconvert": functools.partial(neg, arg),
                "autoconvert check_writes": functools.partial(checked, arg),
            },
            repeats,
            target,
        )
    return rows


# --------------------------------------------------------------------------- case 2: zero-copy is O(1)


def _traced_bytes(fn: Callable[[], Any], calls: int = 50) -> int:
    """Peak bytes NumPy/Python allocate across ``calls`` calls (tracemalloc sees NumPy's data)."""
    fn()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(calls):
            fn()
        return max(0, tracemalloc.get_traced_memory()[1] - base)
    finally:
        tracemalloc.stop()


def zero_copy(settings: Settings) -> list[Row]:
    """The default path on 1 KiB vs 64 MiB: same time, no bytes allocated per call."""
    repeats, target = settings["repeats"], settings["target_s"]
    small, large = torch.rand(256), torch.rand(16 * 1024 * 1024)
    small_a, large_a = small.numpy().copy(), large.numpy().copy()

    take = ac.accepts_numpy(lambda a: a.ndim)
    give = ac.returns_tensor(lambda a: a)  # returns the array it was given: shareable, writable
    rows = compare(
        "zero-copy in: accepts_numpy, 64 MiB vs 1 KiB",
        "1 KiB",
        {"1 KiB": lambda: take(small), "64 MiB": lambda: take(large)},
        repeats,
        target,
    )
    rows += compare(
        "zero-copy out: returns_tensor, 64 MiB vs 1 KiB",
        "1 KiB",
        {"1 KiB": lambda: give(small_a), "64 MiB": lambda: give(large_a)},
        repeats,
        target,
    )
    for row in rows:
        if row.contender == "64 MiB":
            fn = (lambda: take(large)) if "in:" in row.case else (lambda: give(large_a))
            row.extra["peak_bytes_50_calls"] = _traced_bytes(fn)
            row.note = f"peak {row.extra['peak_bytes_50_calls']:,} B traced over 50 calls"
    return rows


# --------------------------------------------------------------------------- case 3: copies at memory speed


def copies(settings: Settings) -> list[Row]:
    """copy=True on 128 MiB runs at memcpy speed and holds one extra copy at most."""
    repeats, target = settings["copy_repeats"], settings["target_s"]
    n = settings["copy_mib"] * 1024 * 1024 // 4
    t = torch.rand(n)
    a = t.numpy().copy()
    private_in = ac.accepts_numpy(copy=True)(lambda x: x)
    private_out = ac.returns_tensor(copy=True)(lambda x: x)
    label = f"{settings['copy_mib']} MiB"
    rows = compare(
        f"copy=True in, {label}",
        "t.numpy().copy()",
        {"t.numpy().copy()": lambda: t.numpy().copy(), "autoconvert": lambda: private_in(t)},
        repeats,
        target,
    )
    peak = _traced_bytes(lambda: private_in(t), calls=1)
    rows[-1].extra["peak_bytes"] = peak
    rows[-1].note = f"peak {peak / 2**20:,.0f} MiB traced (one copy = {settings['copy_mib']} MiB)"
    rows += compare(
        f"copy=True out, {label}",
        "from_numpy(a).clone()",
        {"from_numpy(a).clone()": lambda: torch.from_numpy(a).clone(), "autoconvert": lambda: private_out(a)},
        repeats,
        target,
    )
    return rows


# --------------------------------------------------------------------------- case 5: GPU


def gpu(settings: Settings) -> list[Row]:
    """Host <-> device transfers against the pinned-memory bandwidth measured in the same run."""
    if not torch.cuda.is_available():
        return []
    device = torch.device("cuda", torch.cuda.current_device())
    rows: list[Row] = []
    for mib in settings["gpu_mib"]:
        rows += _gpu_size(device, mib, settings)
    return rows + _gpu_several(device, settings)


def _gpu_size(device: torch.device, mib: int, settings: Settings) -> list[Row]:
    n = mib * 1024 * 1024 // 4
    t = torch.rand(n, device=device)
    a = t.cpu().numpy()
    pinned = torch.empty(n, pin_memory=True)
    take = ac.accepts_numpy(lambda x: x.ndim)
    give = ac.returns_tensor(device=device)(lambda x: x)

    repeats, target = settings["copy_repeats"], settings["target_s"]
    down = compare(
        f"GPU -> host, {mib} MiB",
        "pinned copy_",
        {
            "pinned copy_": synced(device, lambda: pinned.copy_(t)),
            ".cpu().numpy()": synced(device, lambda: t.cpu().numpy()),
            "autoconvert": synced(device, lambda: take(t)),
        },
        repeats,
        target,
    )
    up = compare(
        f"host -> GPU, {mib} MiB",
        "pinned to(device)",
        {
            "pinned to(device)": synced(device, lambda: pinned.to(device, non_blocking=True)),
            "from_numpy(a).to(device)": synced(device, lambda: torch.from_numpy(a).to(device)),
            "staged: copy_ into pinned memory, then to(device)": synced(
                device, lambda: torch.empty(n, pin_memory=True).copy_(torch.from_numpy(a)).to(device, non_blocking=True)
            ),
            "autoconvert": synced(device, lambda: give(a)),
        },
        repeats,
        target,
    )
    for row in down + up:
        row.extra["GiB_per_s"] = mib / 1024 / (row.median_us / 1e6)
        row.note = f"{row.extra['GiB_per_s']:,.1f} GiB/s"
    return down + up


def _gpu_several(device: torch.device, settings: Settings) -> list[Row]:
    """1, 4 and 16 arguments of 16 MiB, then a round trip with the result back on the device."""
    mib = 16
    rows = [row for count in (1, 4, 16) for row in _gpu_arguments(device, count, mib, settings)]
    return rows + _gpu_round_trip(device, mib, settings)


def _gpu_arguments(device: torch.device, count: int, mib: int, settings: Settings) -> list[Row]:
    """``count`` arguments: their transfers queued together and one wait, against ``.cpu().numpy()``
    each and against the pinned bandwidth (a ``copy_`` into pinned memory per tensor, one wait)."""
    tensors = [torch.rand(mib * 2**20 // 4, device=device) for _ in range(count)]
    pinned = [torch.empty(t.shape, pin_memory=True) for t in tensors]
    take = ac.accepts_numpy(lambda *arrays: len(arrays))
    rows = compare(
        f"{count} GPU tensor argument{'s' * (count > 1)} -> NumPy, {mib} MiB each",
        "pinned copy_ each",
        {
            "pinned copy_ each": synced(
                device, lambda: [p.copy_(t, non_blocking=True) for p, t in zip(pinned, tensors, strict=True)]
            ),
            ".cpu().numpy() each": synced(device, lambda: [t.cpu().numpy() for t in tensors]),
            "autoconvert": synced(device, lambda: take(*tensors)),
        },
        settings["copy_repeats"],
        settings["target_s"],
    )
    for row in rows:
        row.extra["GiB_per_s"] = count * mib / 1024 / (row.median_us / 1e6)
        row.note = f"{row.extra['GiB_per_s']:,.1f} GiB/s"
    return rows


def _gpu_round_trip(device: torch.device, mib: int, settings: Settings) -> list[Row]:
    """A NumPy function on a GPU tensor, its result restored to the tensor's device."""
    t = torch.rand(mib * 2**20 // 4, device=device)
    negate = ac.returns_tensor(ac.accepts_numpy(np.negative))
    return compare(
        f"GPU tensor through np.negative and back, {mib} MiB",
        "torch.from_numpy(f(t.cpu().numpy())).to(t.device)",
        {
            "torch.from_numpy(f(t.cpu().numpy())).to(t.device)": synced(
                device, lambda: torch.from_numpy(np.negative(t.cpu().numpy())).to(t.device)
            ),
            "autoconvert": synced(device, lambda: negate(t)),
        },
        settings["copy_repeats"],
        settings["target_s"],
    )


def gpu_resident(settings: Settings) -> list[Row]:
    """SciPy on a 128^3 CUDA volume: CuPy on the tensor's memory (torchify's array_module="auto")
    against the host round trip (array_module="numpy") and the hand-written ``.cpu().numpy()``."""
    if not torch.cuda.is_available() or importlib.util.find_spec("cupy") is None:
        return []
    import scipy.ndimage

    device = torch.device("cuda", torch.cuda.current_device())
    volume = torch.rand(128, 128, 128, device=device)
    mask = volume > 0.01
    on_gpu, on_host = ac.torchify(scipy.ndimage), ac.torchify(scipy.ndimage, array_module="numpy")
    rows = []
    for label, name, args in (
        ("distance_transform_edt", "distance_transform_edt", (mask,)),
        ("gaussian_filter, sigma 2", "gaussian_filter", (volume, 2.0)),
    ):
        scipy_fn, host, resident = getattr(scipy.ndimage, name), getattr(on_host, name), getattr(on_gpu, name)
        assert torch.allclose(resident(*args), _by_hand(scipy_fn, args, device), atol=1e-4)
        case = compare(
            f"{label}, 128^3 on the GPU",
            "hand-written .cpu().numpy()",
            {
                "hand-written .cpu().numpy()": synced(
                    device,
                    functools.partial(_by_hand, scipy_fn, args, device),
                ),
                "autoconvert, host path": synced(device, functools.partial(host, *args)),
                "autoconvert, CuPy on the tensor": synced(device, functools.partial(resident, *args)),
            },
            max(3, settings["copy_repeats"] // 3),
            settings["target_s"],
        )
        host_round_trip = case[1].median_us
        case[2].note = f"{host_round_trip / case[2].median_us:,.1f}x faster than the host path"
        rows += case
    return rows


def _by_hand(fn: Callable[..., Any], args: tuple[Any, ...], device: torch.device) -> torch.Tensor:
    arrays = [a.cpu().numpy() if isinstance(a, torch.Tensor) else a for a in args]
    return torch.from_numpy(fn(*arrays)).to(device)


def plain_functions(settings: Settings) -> list[Row]:
    """``to_numpy``/``to_tensor`` in a loop against the idioms they replace: 16 elements, and 8 x 128
    arrays torch cannot share as they are."""
    t, a = torch.ones(16), np.ones(16, dtype=np.float32)
    repeats, target = settings["repeats"], settings["target_s"]
    rows = compare(
        "to_numpy, 16 float32",
        "t.detach().cpu().numpy()",
        {"t.detach().cpu().numpy()": lambda: t.detach().cpu().numpy(), "autoconvert": lambda: ac.to_numpy(t)},
        repeats,
        target,
    )
    rows += compare(
        "to_tensor, 16 float32",
        "torch.as_tensor(a)",
        {"torch.as_tensor(a)": lambda: torch.as_tensor(a), "autoconvert": lambda: ac.to_tensor(a)},
        repeats,
        target,
    )
    reversed_ = np.ones((8, 128))[..., ::-1]  # the self-check's result: a[..., ::-1]
    rows += compare(
        "to_tensor, 8 x 128 float64 reversed",
        "torch.from_numpy(np.ascontiguousarray(a))",
        {
            "torch.from_numpy(np.ascontiguousarray(a))": lambda: torch.from_numpy(np.ascontiguousarray(reversed_)),
            "autoconvert": lambda: ac.to_tensor(reversed_),
        },
        repeats,
        target,
    )
    swapped = np.ones((8, 128), dtype=">f8")  # read from a big-endian file format
    return rows + compare(
        "to_tensor, 8 x 128 float64 byte-swapped",
        "torch.from_numpy(a.astype('=f8'))",
        {
            "torch.from_numpy(a.astype('=f8'))": lambda: torch.from_numpy(swapped.astype("=f8")),
            "autoconvert": lambda: ac.to_tensor(swapped),
        },
        repeats,
        target,
    )


CASES: dict[str, Callable[[Settings], list[Row]]] = {
    "per_call": per_call,
    "plain": plain_functions,
    "zero_copy": zero_copy,
    "copies": copies,
    "per_sample": batches.per_sample,
    "executors": batches.executors,
    "scaling": batches.scaling,
    "ray": batches.on_ray,
    "breakdown": batches.breakdown,
    "gpu": gpu,
    "gpu_resident": gpu_resident,
    "gpu_batched": batches.gpu_batched,
    "func": func_transforms,
    "gradients": gradients.gradients,
    "gpu_gradients": gradients.gpu_gradients,
    "micro": micro.micro,
    "native": native.native,
    "compiled": compiled.compiled,
    "gpu_compiled": compiled.gpu_compiled,
    "gpu_native": native.gpu_native,
}
