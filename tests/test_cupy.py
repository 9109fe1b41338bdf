"""torchify's CuPy path: CUDA tensors' calls run on CuPy's version of a function, on their memory.

Without CuPy (CI) the option's checks and the notes run; with CuPy and no GPU, the host path
for CPU tensors and array_module="cupy"'s refusals; on a GPU, every function touched is
compared on both paths, with the guarantees the host path gives.
"""

from __future__ import annotations

import functools
import importlib.util
import pickle
from typing import Any

import numpy as np
import pytest
import scipy.fft
import scipy.linalg
import scipy.ndimage
import scipy.signal
import scipy.special
import scipy.stats
import torch

import autoconvert as ac
from autoconvert._adapters._table import adapter_for
from autoconvert._interpreter._routes import Routed, described
from autoconvert._observe._observe import count_route
from autoconvert._torchify._cupy import CupyRoute, twin_of

HAS_CUPY = importlib.util.find_spec("cupy") is not None
needs_cupy = pytest.mark.skipif(not HAS_CUPY, reason="needs CuPy")
without_cupy = pytest.mark.skipif(HAS_CUPY, reason="CuPy is installed")


def _on_cupy(fn: Any) -> bool:
    """Whether ``fn`` takes CuPy's path first."""
    description = described(fn)
    return description is not None and [route.name for route in description.routes] == ["cupy"]


# --------------------------------------------------------------------------- anywhere


def test_array_module_takes_three_values() -> None:
    with pytest.raises(ValueError) as info:
        ac.torchify(np, array_module="jax")  # type: ignore[typeddict-item]
    assert str(info.value) == "autoconvert.torchify(): array_module= takes 'auto', 'numpy' or 'cupy', got 'jax'"


def test_what_cupy_cannot_take_is_refused_when_torchified() -> None:
    where = "autoconvert.torchify(array_module='cupy')"
    with pytest.raises(ValueError) as info:
        ac.torchify(scipy.stats, array_module="cupy")
    assert str(info.value) == f"{where}: CuPy mirrors no function of scipy.stats. Fix: torchify it without"
    with pytest.raises(TypeError) as type_info:
        ac.torchify(np.random.Generator, array_module="cupy")
    assert str(type_info.value) == (
        f"{where} takes a module CuPy mirrors or a function written for CuPy; got type "
        "<class 'numpy.random._generator.Generator'>. Fix: torchify it without array_module='cupy'"
    )
    with pytest.raises(ValueError) as info:
        ac.torchify(np, array_module="cupy", device="cpu", writeback=True)
    assert str(info.value) == (
        f"{where}: the host path honours device=device(type='cpu'), writeback=True, CuPy's path cannot. "
        "Fix: pass one of them"
    )
    with pytest.raises(ValueError) as info:
        ac.torchify(scipy.special, array_module="cupy", native=True)
    assert str(info.value) == f"{where}: native=True asks for SciPy's own torch path instead. Fix: pass one of them"


def test_explain_says_why_a_function_does_not_take_cupy() -> None:
    note = "CuPy's path is not taken: "
    assert note + "CuPy mirrors no function of scipy.stats" in ac.explain(ac.torchify(scipy.stats).zscore).notes
    host = ac.torchify(np, array_module="numpy")
    assert note + "array_module='numpy'" in ac.explain(host.cumsum).notes
    again = pickle.loads(pickle.dumps(host))  # the option travels with the view
    assert note + "array_module='numpy'" in ac.explain(again.cumsum).notes


@without_cupy
def test_without_cupy_the_host_path_is_all() -> None:
    view = ac.torchify(scipy.ndimage)
    assert "CuPy's path is not taken: CuPy is not installed" in ac.explain(view.gaussian_filter).notes
    assert not _on_cupy(view.gaussian_filter)
    with pytest.raises(ValueError) as info:
        ac.torchify(np, array_module="cupy")
    assert str(info.value) == (
        "autoconvert.torchify(array_module='cupy'): CuPy is not installed. Fix: install the CuPy package for your CUDA"
    )


def _written_for_cupy(fn: Any, explicit: dict[str, Any] | None = None) -> Routed:
    """What ``torchify(fn, array_module="cupy")`` makes where CuPy is installed."""
    route = CupyRoute(fn, lambda: (fn, None), strict=True, explicit=explicit or {}, adapter=adapter_for(fn))
    return Routed(fn, (route,), None)


def test_array_module_cupy_names_each_argument_cupy_cannot_take() -> None:
    def f(x: Any, y: Any = None, out: Any = None) -> Any:
        return x

    fn = _written_for_cupy(f)
    name = "test_array_module_cupy_names_each_argument_cupy_cannot_take.<locals>.f()"
    cases = [
        (
            (torch.ones(2),),
            {},
            "argument x is not on a CUDA device. Found a tensor on cpu. Fix: move it to a CUDA "
            "device (.cuda()), or torchify without array_module='cupy'",
        ),
        (
            (np.ones(2),),
            {},
            "argument x is a NumPy array: CuPy takes CUDA memory only. Found ndarray. Fix: pass it "
            "as a tensor on the same device",
        ),
        (
            (1.0, [2, (print,)]),
            {},
            "argument y[1][0] is a callable: CuPy's functions take CUDA arrays. Found "
            "builtin_function_or_method. Fix: torchify without array_module='cupy'",
        ),
        (
            (1.0,),
            {"y": object()},
            "argument y is a value CuPy's functions do not take. Found object. Fix: pass tensors and plain values",
        ),
        (
            (1.0, None, torch.ones(1)),
            {},
            "argument out is an out-parameter, written through the host path. Found an "
            "out-parameter. Fix: use the result, not out=",
        ),
        (
            (1.0,),
            {"out": torch.ones(1)},
            "argument out is an out-parameter, written through the host path. Found "
            "an out-parameter. Fix: use the result, not out=",
        ),
        (
            (1.0, [torch.float32, slice(2), ..., np.float32(1)]),
            {},
            "the call has no tensor on a CUDA device. Found no CUDA tensor. "
            "Fix: move the tensors to a CUDA device (.cuda()), or torchify without array_module='cupy'",
        ),
    ]
    for args, kwargs, said in cases:
        with pytest.raises(ac.ConversionError) as info:
            fn(*args, **kwargs)
        assert str(info.value) == f"{name}: {said}."
    tensors = [
        (torch.empty(2, dtype=torch.bits8), "has a dtype CuPy lacks (torch.bits8). Found torch.bits8"),
        (torch.ones(2, requires_grad=True), "requires grad: CuPy's functions have no gradient. Found requires_grad"),
        (torch.eye(2).to_sparse(), "is not a dense tensor. Found torch.sparse_coo"),
        (torch.ones(2, dtype=torch.complex64).conj(), "has a lazy conjugate or negative bit. Found a lazy view"),
    ]
    for tensor, said in tensors:
        with pytest.raises(ac.ConversionError) as info:
            fn(tensor)
        assert str(info.value).startswith(f"{name}: argument x {said}")
    # The dtypes the host path widens cross widened on the device: only where they live decides.
    widening = _written_for_cupy(f, {"widen_float16": True})
    for dtype in (torch.float16, torch.bfloat16, torch.complex32, torch.float8_e4m3fn):
        with pytest.raises(ac.ConversionError) as info:
            widening(torch.zeros(2, dtype=dtype))
        assert str(info.value).startswith(f"{name}: argument x is not on a CUDA device. Found a tensor on cpu.")
    with ac.config(writeback=True), pytest.raises(ac.ConversionError) as info:
        fn(1.0)
    assert str(info.value) == (
        f"{name}: the config block sets writeback=True. Found writeback=True. Fix: leave that option out of the "
        "block around this call."
    )
    with pytest.raises(ac.ConversionError) as info:
        _written_for_cupy(scipy.linalg.lu_factor)(torch.ones(2, 2), overwrite_a=True)
    assert str(info.value) == (
        "lu_factor(): argument overwrite_a asks it to write into an argument. Found overwrite_a=True. Fix: leave it "
        "out: CuPy arrays cannot refuse writes, so the host path takes it."
    )
    with pytest.raises(ac.ConversionError) as info:
        _written_for_cupy(np.add)(1, 2, torch.ones(1))  # a ufunc's output after its inputs
    assert str(info.value).startswith("add(): argument out is an out-parameter")
    with pytest.raises(ac.ConversionError) as info:
        _written_for_cupy(max)(np.ones(1))  # no signature to read: arguments by position
    assert str(info.value).startswith("max(): argument 0 is a NumPy array")
    assert ac.explain(fn).path == "cupy" and ac.explain(fn).made_by.endswith("a function written for CuPy")


# torch.func.jvp's first use scripts torch's decompositions, and torch deprecates torch.jit.script
# from its own internals: a DeprecationWarning in 2.13, a FutureWarning in the newest.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
def test_a_tangent_or_a_torch_func_tensor_never_goes_to_cupy() -> None:
    """A dual tensor's tangent and torch.func's tensors (vmap, jvp; grad's require grad) are the
    host path's to keep (its op gives a catalogued function's rule per sample or as a tangent):
    CuPy's path declines them before it asks where they live, so the host path takes them on a GPU."""

    def f(x: Any) -> Any:
        return x

    fn = _written_for_cupy(f)
    name = "test_a_tangent_or_a_torch_func_tensor_never_goes_to_cupy.<locals>.f()"
    wrapped = (
        f"{name}: argument x is a torch.func transform's tensor (vmap, grad, jvp), which CuPy cannot read. Found a "
        "tensor torch.func wraps. Fix: call it outside the transform, or torchify without array_module='cupy'."
    )
    x = torch.ones(3)
    for transform in (lambda: torch.vmap(fn)(x), lambda: torch.func.jvp(fn, (x,), (x,))):
        with pytest.raises(ac.ConversionError) as info:
            transform()
        assert str(info.value) == wrapped
    with pytest.raises(ac.ConversionError) as info:
        torch.func.grad(lambda t: fn(t).sum())(x)  # its tensors require grad
    assert str(info.value).startswith(f"{name}: argument x requires grad: CuPy's functions have no gradient.")
    with torch.autograd.forward_ad.dual_level(), pytest.raises(ac.ConversionError) as info:
        fn(torch.autograd.forward_ad.make_dual(x, x))
    assert str(info.value) == (
        f"{name}: argument x carries a forward-mode tangent: CuPy's functions have no derivative. Found a dual "
        "tensor (forward_ad.make_dual). Fix: detach it (.detach()), or give the function a jvp with "
        "autoconvert.numpy_op."
    )


def test_which_functions_cupy_mirrors() -> None:
    numpy, scipy_adapter = adapter_for(np), adapter_for(scipy.ndimage)
    assert twin_of(scipy_adapter, "scipy.stats", "zscore") == (None, "CuPy mirrors no function of scipy.stats")
    assert twin_of(numpy, "numpy.random", "shuffle") == (None, "CuPy mirrors no function of numpy.random")
    assert twin_of(numpy, "numpy", "copyto") == (
        None,
        "CuPy's copyto is not taken: it writes into an argument, and CuPy arrays cannot refuse writes",
    )
    assert scipy_adapter.cupy_module("scipy.signal.windows") == "cupyx.scipy.signal.windows"
    assert numpy.python_results >= {"allclose", "array_equal"}  # NumPy answers these in Python bools


@without_cupy
def test_a_cupy_path_with_no_cupy_converts_every_call() -> None:
    view, host = ac.torchify(np), ac.torchify(np, array_module="numpy")
    find = functools.partial(twin_of, adapter_for(np), "numpy", "add")
    route = CupyRoute(np.add, find, strict=False, explicit={}, adapter=adapter_for(np), module="numpy", name="add")
    fn = Routed(np.add, (route,), host.add, view=view, name="add")
    assert torch.equal(fn(torch.arange(3.0), 1), torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(fn.outer(torch.ones(2), torch.ones(3)), torch.full((2, 3), 2.0))  # the pair's members
    assert route.resolved() is None and route.missing == "CuPy could not be imported (No module named 'cupy')"
    explained = ac.explain(fn)
    assert explained.path != "cupy" and explained.notes[-1] == f"CuPy's path is not taken: {route.missing}"
    assert repr(fn) == f"<autoconvert CuPy path of {np.add!r}>"
    again = pickle.loads(pickle.dumps(fn))  # read again from a view like the one it came from
    assert repr(again) == repr(view.add) and torch.equal(again(torch.ones(1), 1), torch.full((1,), 2.0))


def test_stats_count_the_cupy_path_and_the_reasons_for_the_host_path() -> None:
    with ac.stats() as s:
        count_route("gaussian_filter", "cupy")
        count_route("gaussian_filter", "cupy", "is not a dense tensor")
        count_route("gaussian_filter", "cupy", "is not a dense tensor")
    counts = s["gaussian_filter"]
    assert counts.calls == 1 and counts.cupy == 1
    assert counts.not_cupy == {"is not a dense tensor": 2}
    assert "cupy=1, not_cupy={'is not a dense tensor': 2}" in repr(counts)
    assert str(s).splitlines()[0].split()[:3] == ["function", "calls", "cupy"]


# --------------------------------------------------------------------------- CuPy installed


@needs_cupy
def test_cpu_tensors_take_the_host_path() -> None:
    view = ac.torchify(scipy.ndimage)
    assert _on_cupy(view.gaussian_filter)
    x = torch.rand(6, 7, dtype=torch.float64)
    with ac.stats() as s:
        out = view.gaussian_filter(x, 1.5)
    assert torch.equal(out, torch.from_numpy(scipy.ndimage.gaussian_filter(x.numpy(), 1.5)))
    assert s["gaussian_filter"].cupy == 0 and s["gaussian_filter"].not_cupy == {}  # no CUDA tensor: nothing to say
    assert torch.equal(ac.torchify(np).add.outer(torch.ones(2), torch.ones(3)), torch.full((2, 3), 2.0))
    again = pickle.loads(pickle.dumps(view.gaussian_filter))
    assert _on_cupy(again) and torch.equal(again(x, 1.5), out)


@needs_cupy
def test_a_view_placing_or_casting_its_results_takes_the_host_path() -> None:
    placed = ac.torchify(scipy.ndimage, device="cpu", dtype=torch.float32)
    assert not _on_cupy(placed.gaussian_filter)
    assert (
        "CuPy's path is not taken: the host path honours device=device(type='cpu'), dtype=torch.float32"
        in ac.explain(placed.gaussian_filter).notes
    )


@needs_cupy
def test_array_module_cupy_refuses_what_cannot_run_on_cupy() -> None:
    strict = ac.torchify(scipy.ndimage, array_module="cupy")
    with pytest.raises(ac.ConversionError) as info:
        strict.gaussian_filter(torch.ones(3), 1.0)
    assert str(info.value) == (
        "gaussian_filter(): argument input is not on a CUDA device. Found a tensor on cpu. Fix: move it to a CUDA "
        "device (.cuda()), or torchify without array_module='cupy'."
    )

    def doubled(x: Any) -> Any:
        return x * 2

    mine = ac.torchify(doubled, array_module="cupy")
    with pytest.raises(ac.ConversionError) as info:
        mine(np.ones(2))
    assert str(info.value) == (
        "test_array_module_cupy_refuses_what_cannot_run_on_cupy.<locals>.doubled(): argument x is a NumPy array: "
        "CuPy takes CUDA memory only. Found ndarray. Fix: pass it as a tensor on the same device."
    )
    with pytest.raises(ValueError) as value_info:
        ac.torchify(np, array_module="cupy").copyto
    assert str(value_info.value) == (
        "autoconvert.torchify(array_module='cupy'): numpy.copyto: CuPy's copyto is not taken: it writes into an "
        "argument, and CuPy arrays cannot refuse writes. Fix: use the module torchified without "
        "array_module='cupy' for it"
    )
    explained = ac.explain(strict.gaussian_filter)
    assert explained.path == "cupy" and "runs cupyx.scipy.ndimage.gaussian_filter on their memory" in explained.why


# --------------------------------------------------------------------------- on a GPU

NDI, SIG, SPE, FFT, LIN = (
    ac.torchify(m) for m in (scipy.ndimage, scipy.signal, scipy.special, scipy.fft, scipy.linalg)
)
TNP = ac.torchify(np)


def _volume(device: torch.device) -> torch.Tensor:
    return torch.rand(12, 13, 14, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(device)


def _matrix(device: torch.device) -> torch.Tensor:
    a = torch.rand(6, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return (a + 6 * torch.eye(6, dtype=torch.float64)).to(device)


def _signal(device: torch.device) -> torch.Tensor:
    return torch.rand(256, generator=torch.Generator().manual_seed(2), dtype=torch.float32).to(device)


#: (view, name, arguments made on a device): every function the CuPy path is checked on.
CALLS = [
    (NDI, "gaussian_filter", lambda d: (_volume(d), 2.0)),
    (NDI, "distance_transform_edt", lambda d: (_volume(d) > 0.2,)),
    (NDI, "label", lambda d: (_volume(d) > 0.7,)),
    (NDI, "median_filter", lambda d: (_volume(d),), {"size": 3}),
    (NDI, "zoom", lambda d: (_volume(d), 1.5), {"order": 1}),
    (NDI, "sobel", lambda d: (_volume(d),)),
    (NDI, "binary_erosion", lambda d: (_volume(d) > 0.3,)),
    (NDI, "uniform_filter", lambda d: (_volume(d),), {"size": 5}),
    (SIG, "lfilter", lambda d: (torch.tensor([1.0], device=d), torch.tensor([1.0, -0.99], device=d), _signal(d))),
    (SIG, "fftconvolve", lambda d: (_signal(d), _signal(d)[:31])),
    (SIG, "convolve", lambda d: (_signal(d), _signal(d)[:9])),
    (SIG, "medfilt", lambda d: (_signal(d),), {"kernel_size": 5}),
    (SPE, "expit", lambda d: (_volume(d) - 0.5,)),
    (SPE, "erf", lambda d: (_volume(d),)),
    (SPE, "gammaln", lambda d: (_volume(d) + 0.5,)),
    (SPE, "logsumexp", lambda d: (_volume(d),), {"axis": 1}),
    (SPE, "softmax", lambda d: (_volume(d),), {"axis": 0}),
    (FFT, "fft", lambda d: (_signal(d),)),
    (FFT, "rfftn", lambda d: (_volume(d),)),
    (FFT, "fftshift", lambda d: (_volume(d),)),
    (FFT, "dct", lambda d: (_signal(d),)),
    (LIN, "lu_factor", lambda d: (_matrix(d),)),
    (LIN, "solve_triangular", lambda d: (_matrix(d), _matrix(d)[:, 0])),
    (LIN, "expm", lambda d: (_matrix(d) / 10,)),
    (LIN, "block_diag", lambda d: (_matrix(d), _matrix(d)[:2, :2])),
    (TNP, "sum", lambda d: (_volume(d),)),
    (TNP, "mean", lambda d: (_volume(d),), {"axis": 2}),
    (TNP, "argmax", lambda d: (_volume(d),)),
    (TNP, "sort", lambda d: (_volume(d),)),
    (TNP, "unique", lambda d: ((_volume(d) * 4).floor(),)),
    (TNP, "concatenate", lambda d: ([_volume(d), _volume(d)],)),
    (TNP, "where", lambda d: (_volume(d) > 0.5, _volume(d), 0.0)),
    (TNP, "einsum", lambda d: ("ij,jk->ik", _matrix(d), _matrix(d))),
    (TNP, "cumsum", lambda d: (_signal(d),)),
    (TNP, "allclose", lambda d: (_volume(d), _volume(d))),
    (TNP, "count_nonzero", lambda d: (_volume(d) > 0.5,)),
    (TNP, "histogram", lambda d: (_signal(d),), {"bins": 8}),
    (TNP, "transpose", lambda d: (_volume(d),)),
    (TNP, "add", lambda d: (_volume(d), 1)),
    (TNP.linalg, "solve", lambda d: (_matrix(d), _matrix(d)[:, 0])),
    (TNP.linalg, "norm", lambda d: (_matrix(d),)),
    (TNP.fft, "rfft", lambda d: (_signal(d),)),
]


def _same(on_cupy: Any, on_host: Any, where: str = "result") -> None:
    """The two paths' results agree: types, containers, dtypes, devices and values."""
    assert type(on_cupy) is type(on_host), f"{where}: {type(on_cupy)} on CuPy, {type(on_host)} on the host"
    if isinstance(on_host, torch.Tensor):
        assert on_cupy.device == on_host.device, f"{where}: devices {on_cupy.device}, {on_host.device}"
        assert on_cupy.dtype == on_host.dtype, f"{where}: dtypes {on_cupy.dtype}, {on_host.dtype}"
        assert on_cupy.shape == on_host.shape, f"{where}: shapes {on_cupy.shape}, {on_host.shape}"
        assert torch.allclose(on_cupy.cpu(), on_host.cpu(), rtol=1e-5, atol=1e-6), f"{where}: values differ"
    elif isinstance(on_host, (tuple, list)):
        assert len(on_cupy) == len(on_host), where
        for i, (a, b) in enumerate(zip(on_cupy, on_host, strict=True)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert on_cupy == on_host, f"{where}: {on_cupy!r} on CuPy, {on_host!r} on the host"


@needs_cupy
@pytest.mark.parametrize("call", CALLS, ids=lambda c: f"{c[0].__name__}.{c[1]}")
def test_both_paths_agree_and_cupy_never_leaves_the_gpu(accelerator: torch.device, call: tuple[Any, ...]) -> None:
    """The CuPy path gives what the host path gives, with no copy between devices (a
    transfers='error' block lets it through) and every call counted on CuPy."""
    view, name, make = call[:3]
    kwargs = call[3] if len(call) > 3 else {}
    fn, host = getattr(view, name), getattr(ac.torchify(view.__wrapped__, array_module="numpy"), name)
    assert _on_cupy(fn)
    args = make(accelerator)
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    with ac.config(transfers="error"), ac.stats() as s:
        on_cupy = fn(*args, **kwargs)
    assert s[fn.counted].cupy == 1 and s[fn.counted].not_cupy == {}
    _same(on_cupy, host(*args, **kwargs))
    for given, was in zip(args, before, strict=True):  # arguments untouched, results never alias them
        if isinstance(given, torch.Tensor):
            assert torch.equal(given, was)
            for result in on_cupy if isinstance(on_cupy, (tuple, list)) else [on_cupy]:
                if isinstance(result, torch.Tensor) and result.numel() and given.numel():
                    assert result.untyped_storage().data_ptr() != given.untyped_storage().data_ptr()


@needs_cupy
def test_results_live_in_torchs_allocator_on_torchs_stream(accelerator: torch.device) -> None:
    """On a side stream the call queues there (no wait on the default stream), and the
    result's memory is torch's: counted by memory_allocated, freed back to torch."""
    x = torch.rand(256, 256, 16, device=accelerator)
    side = torch.cuda.Stream(accelerator)
    side.wait_stream(torch.cuda.current_stream(accelerator))
    held = torch.cuda.memory_allocated(accelerator)
    with torch.cuda.stream(side):
        out = NDI.gaussian_filter(x, 3.0)
        grown = torch.cuda.memory_allocated(accelerator) - held
    side.synchronize()
    assert grown >= out.numel() * out.element_size()
    expected = torch.from_numpy(scipy.ndimage.gaussian_filter(x.cpu().numpy(), 3.0))
    assert torch.allclose(out.cpu(), expected, atol=1e-5)
    del out
    assert torch.cuda.memory_allocated(accelerator) < held + grown


@needs_cupy
def test_calls_cupy_cannot_take_go_the_host_path_with_the_reason_counted(accelerator: torch.device) -> None:
    x = _volume(accelerator)
    view = ac.torchify(scipy.ndimage, grad="detach")
    cases = [
        ((x.float().requires_grad_(), 1.0), {}, "requires grad: CuPy's functions have no gradient"),
        ((x, 1.0), {"output": torch.empty_like(x)}, "is an out-parameter, written through the host path"),
    ]
    for args, kwargs, reason in cases:
        with ac.stats() as s:
            out = view.gaussian_filter(*args, **kwargs)
        assert s["gaussian_filter"].cupy == 0 and s["gaussian_filter"].not_cupy == {reason: 1}
        out = kwargs.get("output", out)  # SciPy returns None where it wrote into output=
        assert out.device == x.device and out.dtype == args[0].dtype
    with ac.stats() as s:
        lu, _piv = LIN.lu_factor(_matrix(accelerator), overwrite_a=True)
    assert s["lu_factor"].not_cupy == {"asks it to write into an argument": 1} and lu.device == x.device
    half = ac.torchify(scipy.ndimage, widen_float16=False).gaussian_filter(x.half(), 1.0)
    assert half.dtype == torch.float16 and half.device == x.device  # no widening asked: CuPy computes float16


@needs_cupy
@pytest.mark.parametrize(
    ("dtype", "options"),
    [
        (torch.bfloat16, {}),
        (torch.float8_e4m3fn, {}),
        (torch.float16, {"widen_float16": True}),
        (torch.complex32, {}),
    ],
    ids=["bfloat16", "float8_e4m3fn", "float16-widened", "complex32"],
)
def test_a_dtype_numpy_lacks_runs_on_cupy_widened_on_the_device(
    accelerator: torch.device, dtype: torch.dtype, options: dict[str, Any]
) -> None:
    """bfloat16, the float8s and complex32 (float16 where widen_float16 says) widen on the
    device as the host path widens them on the host: CuPy computes in float32 (complex64), the
    results narrow back, and the values are the host path's, with no transfer."""
    x = _volume(accelerator).to(dtype)  # conftest spent torch's first-complex32 warning
    on_cupy, on_host = (ac.torchify(scipy.ndimage, array_module=m, **options) for m in ("auto", "numpy"))
    name = "gaussian_filter" if not dtype.is_complex else "shift"
    args = (x, 1.5) if name == "gaussian_filter" else (x, (0.0, 1.0, 0.0), None, 1)
    with ac.stats() as s, ac.config(transfers="error"):
        out = getattr(on_cupy, name)(*args)
    assert s[name].cupy == 1 and s[name].not_cupy == {}
    expected = getattr(on_host, name)(*args)
    assert out.dtype == expected.dtype == dtype and out.device == x.device
    wide = torch.complex64 if dtype.is_complex else torch.float32
    torch.testing.assert_close(out.to(wide), expected.to(wide), rtol=0.07, atol=0.07)
    assert torch.equal(x, _volume(accelerator).to(dtype))  # the argument is untouched
    with ac.stats() as s, ac.config(transfers="error"):  # two dtypes: none to narrow back to
        mixed = ac.torchify(np, **options).add(x.to(wide), x)
    assert s["add"].cupy == 1 and mixed.dtype == wide


@needs_cupy
@pytest.mark.parametrize(
    "options",
    [{"device": "cpu"}, {"dtype": torch.float32}, {"writeback": True}, {"check_writes": True}],
    ids=lambda options: next(iter(options)),
)
def test_a_view_placing_casting_or_writing_converts_every_cuda_call(
    accelerator: torch.device, options: dict[str, Any]
) -> None:
    """The host path honours what CuPy's cannot: each call of such a view converts, and its
    result is the host path's, placed and cast as asked."""
    view, x = ac.torchify(scipy.ndimage, **options), _volume(accelerator)
    assert not _on_cupy(view.gaussian_filter)
    with ac.stats() as s:
        out = view.gaussian_filter(x, 1.0)
    assert s["gaussian_filter"].calls == 1 and s["gaussian_filter"].cupy == 0
    assert out.device == (torch.device("cpu") if "device" in options else x.device)
    assert out.dtype == options.get("dtype", x.dtype)
    expected = torch.from_numpy(scipy.ndimage.gaussian_filter(x.cpu().numpy(), 1.0)).to(out.dtype)
    assert torch.allclose(out.cpu(), expected, rtol=1e-6, atol=1e-6)


@needs_cupy
def test_a_function_written_for_cupy_takes_cuda_tensors_as_cupy_arrays(accelerator: torch.device) -> None:
    import cupy

    def smooth(x: Any, weights: Any) -> tuple[Any, int]:
        assert isinstance(x, cupy.ndarray) and isinstance(weights, cupy.ndarray)
        return cupy.convolve(x, weights, mode="same"), int(x.size)

    fn = ac.torchify(smooth, array_module="cupy")
    x = _signal(accelerator)
    out, size = fn(x, torch.ones(3, device=accelerator) / 3)
    assert out.device == x.device and size == 256
    assert torch.allclose(
        out.cpu(), torch.from_numpy(np.convolve(x.cpu().numpy(), np.ones(3) / 3, mode="same")).float()
    )
    with pytest.raises(ac.ConversionError) as info:
        fn(x.cpu(), torch.ones(3))
    assert str(info.value).startswith(
        "test_a_function_written_for_cupy_takes_cuda_tensors_as_cupy_arrays.<locals>.smooth(): argument x is not on "
        "a CUDA device. Found a tensor on cpu."
    )
