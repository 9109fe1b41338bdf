"""``torchify(module, native=...)``: SciPy's own torch path where SciPy declares one.

SciPy's array API mode is read when SciPy is imported, so the tests that need it run in a
process of their own with ``SCIPY_ARRAY_API=1`` (``test_scipy_s_array_api_mode``, which runs
this file there); the suite's own process checks what holds with the mode off.
"""

from __future__ import annotations

import functools
import pickle
import warnings
from collections.abc import Callable
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
from autoconvert._adapters._scipy import _array_api
from autoconvert._adapters._table import adapter_for
from autoconvert._interpreter._routes import described

from .modes import IN_MODE as MODE
from .modes import rerun_test

#: SciPy 1.15 and later declare their functions' torch paths (feature-detected, as the adapter does).
DECLARES = _array_api() is not None
in_mode = pytest.mark.skipif(
    not (MODE and DECLARES), reason="needs SciPy's array API mode, in a SciPy that declares its torch paths"
)
MODULES = (scipy.special, scipy.stats, scipy.fft, scipy.signal, scipy.ndimage, scipy.linalg)


def _native(fn: Any) -> bool:
    """Whether ``fn`` takes SciPy's own torch path first."""
    description = described(fn)
    return description is not None and [route.name for route in description.routes] == ["native"]


# torch 2.13's asarray, called by SciPy's torch code (array-api-compat) on a tensor that requires grad.
pytestmark = pytest.mark.filterwarnings("ignore:torch.asarray. unspecified requires_grad:UserWarning")


test_scipy_s_array_api_mode = rerun_test(
    __file__,
    "needs SciPy's array API mode" if DECLARES else None,
    "This file's tests that need SciPy's array API mode, in a process with it on.",
)


# --------------------------------------------------------------------------- either way


def test_native_takes_auto_true_or_false() -> None:
    with pytest.raises(ValueError) as raised:
        ac.torchify(scipy.special, native="yes")
    assert str(raised.value) == (
        "autoconvert.torchify(): native= takes 'auto' (a library's own torch path where it has one), True "
        "(that path only) or False (always convert), got 'yes'"
    )


def test_native_true_takes_a_module_or_class_whose_library_has_a_torch_path() -> None:
    with pytest.raises(TypeError) as raised:
        ac.torchify(1.5, native=True)
    assert str(raised.value) == (
        "autoconvert.torchify(native=True) takes a module or a class, whose functions its library may run on torch "
        "tensors itself; got float 1.5. Fix: torchify it without native=True"
    )
    with pytest.raises(ValueError) as of_a_class:
        ac.torchify(np.random.Generator, native=True)
    assert str(of_a_class.value) == (
        "autoconvert.torchify(native=True): numpy.random._generator.Generator has no torch path of its own: NumPy "
        "runs on NumPy arrays only: it would convert a tensor itself, without its gradient"
    )
    with pytest.raises(ValueError) as refused:
        ac.torchify(np, native=True)
    assert str(refused.value) == (
        "autoconvert.torchify(native=True): numpy has no torch path of its own: NumPy runs on NumPy arrays "
        "only: it would convert a tensor itself, without its gradient"
    )


@pytest.mark.skipif(MODE, reason="SciPy's array API mode is on in this process")
def test_without_scipy_s_array_api_mode_auto_converts_and_true_says_how_to_turn_it_on() -> None:
    view = ac.torchify(scipy.special)
    off = (  # a SciPy before 1.15 declares no torch paths at all
        "SciPy's array API mode is off. Fix: set SCIPY_ARRAY_API=1 before SciPy is imported"
        if DECLARES
        else "this SciPy declares no torch path of its own (SciPy's array API mode declares one)"
    )
    assert not _native(view.logsumexp) and ac.explain(view.logsumexp).path != "native"
    assert ac.explain(view.logsumexp).notes[0] == f"SciPy's own torch path is not taken: {off}"
    unasked = ac.explain(ac.torchify(scipy.special, native=False).logsumexp).notes
    assert not [note for note in unasked if note.startswith("SciPy's")]  # nobody asked
    assert torch.equal(view.expit(torch.zeros(2)), torch.full((2,), 0.5))
    with pytest.raises(ValueError) as raised:
        ac.torchify(scipy.special, native=True)
    assert str(raised.value) == f"autoconvert.torchify(native=True): scipy.special has no torch path of its own: {off}"


def _keeps_the_gradient(call: Any, *args: Any) -> str:
    """What the grad warning of ``call(x, *args)`` says keeps the gradient (x requires grad)."""
    x = torch.tensor([0.5, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.warns(ac.GradientWarning) as record:
        call(x, *args)
    assert len(record) == 1
    said = str(record[0].message)
    assert said.endswith(
        "To silence this, pass grad='detach' (in the ac.torchify(..., grad='detach') call that made it, or a with "
        "ac.config(grad='detach'): block around the call; grad='error' forbids it), or call under torch.no_grad()"
    )
    return said.split("To keep the gradient, ")[1].split(". To silence", maxsplit=1)[0]


_RUNS = "SciPy runs scipy.special.{} on torch tensors itself, gradients kept"


@pytest.mark.skipif(MODE or not DECLARES, reason="needs a SciPy that declares its torch paths, its mode off")
def test_the_grad_warning_names_scipy_s_switch_where_scipy_declares_a_torch_path() -> None:
    """A converting call of a function SciPy runs on torch itself in its array API mode says how
    to switch it on; one SciPy declares none for, numpy_op."""
    assert _keeps_the_gradient(ac.torchify(scipy.special).expit) == (
        "set SCIPY_ARRAY_API=1 before SciPy is imported: "
        + _RUNS.format("expit")
        + ", and torchify's native='auto' (the default) takes that path"
    )
    detrend = ac.torchify(scipy.signal).detrend  # CPU-only in SciPy's declarations, and no catalogue rule
    assert _keeps_the_gradient(detrend) == (
        "make detrend a differentiable torch operation with ac.numpy_op(detrend, backward=...), its "
        "vector-Jacobian product written in NumPy"
    )


# --------------------------------------------------------------------------- SciPy's array API mode on


@in_mode
def test_the_grad_warning_of_a_converting_call_says_how_scipy_s_torch_path_takes_it() -> None:
    """native=False converts every call: the warning names native='auto'; under "auto" only a
    call mixing an array in converts: the warning says to pass tensors only."""
    assert _keeps_the_gradient(ac.torchify(scipy.special, native=False).expit) == (
        "torchify the module with native='auto' (the default): " + _RUNS.format("expit")
    )
    mixed = ac.torchify(scipy.special).logsumexp
    assert _keeps_the_gradient(lambda x: mixed(x, b=np.ones(2))) == (
        "pass tensors as its arguments, not inside lists or dicts, with no NumPy array beside them nor a callable "
        "reading NumPy: " + _RUNS.format("logsumexp")
    )


@in_mode
def test_auto_hands_tensors_to_scipy_s_torch_path_and_gradients_flow() -> None:
    """The functions the issue measured: SciPy's torch path keeps the graph; torchify by
    conversion lost it (a GradientWarning, no grad_fn)."""
    view = ac.torchify(scipy.special)
    stats, fft = ac.torchify(scipy.stats), ac.torchify(scipy.fft)
    x = torch.tensor([0.5, -1.0, 2.0, 0.25], dtype=torch.float64, requires_grad=True)
    for value in (view.logsumexp(x), view.expit(x).sum(), view.gammaln(x.abs() + 1).sum(), stats.skew(x)):
        assert isinstance(value, torch.Tensor) and value.grad_fn is not None
    (grad,) = torch.autograd.grad(view.expit(x).sum(), x)
    s = torch.sigmoid(x.detach())
    assert torch.allclose(grad, s * (1 - s))
    (grad,) = torch.autograd.grad(view.logsumexp(x), x)
    assert torch.allclose(grad, torch.softmax(x.detach(), 0))
    spectrum = fft.fft(x)
    assert spectrum.dtype == torch.complex128 and spectrum.grad_fn is not None
    assert _native(view.logsumexp) and ac.explain(view.logsumexp).path == "native"


@in_mode
def test_stats_count_the_calls_each_path_takes() -> None:
    view = ac.torchify(scipy.special)
    with ac.stats() as counted:
        view.expit(torch.zeros(2))
        view.expit(torch.ones(2))
        view.expit(0.5)  # no tensor: converted
    assert counted["expit"].calls == 3 and counted["expit"].native == 2 and counted["expit"].converted == 1
    assert repr(counted["expit"]).startswith("FunctionStats(calls=3, native=2, converted=1, shared=1,")
    assert str(counted).splitlines()[0].split() == [
        "function",
        "calls",
        "native",
        "converted",
        "shared",
        "copied",
        "conversion",
        "in",
        "function",
        "observing",
    ]


@in_mode
def test_auto_converts_calls_without_a_tensor_or_with_an_array_beside_one() -> None:
    """SciPy's torch path takes tensors alone: plain values, arrays and a mix go the converting
    way, and come back as tensors as every function of the view gives them."""
    view = ac.torchify(scipy.special)
    assert torch.equal(view.expit(0.0), torch.tensor(0.5, dtype=torch.float64))
    assert torch.equal(view.expit(np.zeros(2)), torch.full((2,), 0.5, dtype=torch.float64))
    mixed = view.logsumexp(torch.zeros(3, dtype=torch.float64), b=np.ones(3))
    assert isinstance(mixed, torch.Tensor) and torch.allclose(mixed, torch.log(torch.tensor(3.0, dtype=torch.float64)))


@in_mode
def test_a_numpy_written_callable_takes_the_converting_path_and_is_handed_arrays() -> None:
    """SciPy's torch path hands a function's callable the tensors themselves: a callable reading
    NumPy and no torch (``x.astype``, ``np.sin``) makes the call convert, handed arrays as with
    plain SciPy; torch code, and code reading neither, keep SciPy's torch path, the gradient
    flowing; ``callbacks=True`` hands every callable but NumPy's own tensors."""
    differentiate = pytest.importorskip("scipy.differentiate")
    handed: list[str] = []

    def numpy_code(x: Any) -> Any:
        handed.append(type(x).__name__)
        return np.sin(x.astype(np.float64)) * 2

    x = np.array([0.3, 0.7])
    expected = differentiate.derivative(numpy_code, x).df
    handed.clear()
    view = ac.torchify(differentiate)
    with ac.stats() as counted:
        df = view.derivative(numpy_code, torch.tensor(x)).df
    assert torch.equal(df, torch.from_numpy(expected)) and set(handed) == {"ndarray"}
    assert (counted["derivative"].calls, counted["derivative"].native) == (1, 0)
    t = torch.tensor(x, requires_grad=True)
    with ac.stats() as counted:
        view.derivative(lambda u: torch.sin(u) * u, t).df.sum().backward()
    assert counted["derivative"].native == 1 and t.grad is not None
    duck = torch.tensor(x, requires_grad=True)  # code reading neither runs on tensors: SciPy's torch path
    with ac.stats() as counted:
        view.derivative(lambda u: u**3, duck).df.sum().backward()
    assert counted["derivative"].native == 1
    torch.testing.assert_close(duck.grad, 6 * duck.detach())
    handed.clear()
    with ac.stats() as counted:
        ac.torchify(differentiate, callbacks=True).derivative(lambda u: handed.append(type(u).__name__) or u * u, t)
    assert counted["derivative"].native == 1 and set(handed) == {"Tensor"}
    with ac.stats() as counted:
        ac.torchify(differentiate, callbacks=True).derivative(np.sin, torch.tensor(x))
    assert counted["derivative"].native == 0


@in_mode
def test_find_root_s_bracket_of_tensors_takes_scipy_s_torch_path() -> None:
    """``find_root(f, (a, b))`` takes its bracket as a tuple, which SciPy's torch path unpacks:
    a bracket of tensors converted (its gradient detached with a warning whose fix the call
    cannot follow) where plain SciPy on the tensors keeps the gradient. A tensor in every place
    of the bracket holds the call's tensors now; a float beside one, or a list or tuple argument
    of another function (read by SciPy as one NumPy array-like), converts as before."""
    elementwise = pytest.importorskip("scipy.optimize.elementwise")
    x = torch.tensor([0.3, 0.9], dtype=torch.float64, requires_grad=True)
    plain = elementwise.find_root(lambda u: torch.sin(u) - x / 2, (0 * x, x + 1.0)).x
    view = ac.torchify(elementwise)
    for bracket in ((0 * x, x + 1.0), [0 * x, x + 1.0]):
        with ac.stats() as counted, warnings.catch_warnings():
            warnings.simplefilter("error", ac.GradientWarning)
            got = view.find_root(lambda u: torch.sin(u) - x / 2, bracket).x
        assert counted["find_root"].native == 1
        torch.testing.assert_close(got, plain)
        (grad,) = torch.autograd.grad(got.sum(), x)
        torch.testing.assert_close(grad, torch.autograd.grad(plain.sum(), x, retain_graph=True)[0])
    with ac.stats() as counted, pytest.warns(ac.GradientWarning, match=r"\(its init: a tensor in every place\)"):
        view.find_root(lambda u: u**3 - 0.5, (0.0, x + 1.0))
    assert counted["find_root"].native == 0
    with ac.stats() as counted:
        summed = ac.torchify(scipy.special).logsumexp([x.detach(), x.detach()])
    assert counted["logsumexp"].native == 0 and isinstance(summed, torch.Tensor)
    assert "or whose init holds tensors only" in str(ac.explain(view.find_root))


def _sine_of_array(x: Any) -> Any:
    return np.sin(x.astype(np.float64)) * 2


def _calls_sine(x: Any) -> Any:
    return _sine_of_array(x)


class _Model:
    """An object of the caller's whose method calls a NumPy helper, and holds one."""

    def __init__(self) -> None:
        self.transform = _calls_sine

    def energy(self, x: Any) -> Any:
        return _calls_sine(x)

    def through_attribute(self, x: Any) -> Any:
        return self.transform(x)


_MODEL = _Model()
#: Callables whose NumPy code is in a helper of the caller's they call, up to three calls deep.
_HELPER_CALLERS: dict[str, Callable[[Any], Any]] = {
    "a lambda calling a helper": lambda u: _sine_of_array(u),
    "a helper calling a helper": _calls_sine,
    "a lambda two helpers above": lambda u: _calls_sine(u),
    "a bound method calling a helper": _MODEL.energy,
    "a lambda calling a method": lambda u: _MODEL.energy(u),
    "a method calling a helper it holds": _MODEL.through_attribute,
    "a partial of a helper caller": functools.partial(lambda u, k: _calls_sine(u) * k, k=1.0),
}


@in_mode
@pytest.mark.parametrize("case", list(_HELPER_CALLERS))
def test_a_callable_whose_helper_reads_numpy_takes_the_converting_path(case: str) -> None:
    """A callable whose own code reads no NumPy but calls a helper of the caller's that does
    (``lambda u: helper(u)``) was handed SciPy's torch path's tensors, and failed in the helper
    (``'Tensor' object has no attribute 'astype'``). The helpers it calls are read too, three
    calls deep, as the callables' rule reads torch code: the call converts, handed arrays."""
    differentiate = pytest.importorskip("scipy.differentiate")
    callback = _HELPER_CALLERS[case]
    x = np.array([0.3, 0.7])
    expected = differentiate.derivative(_sine_of_array, x).df
    with ac.stats() as counted:
        df = ac.torchify(differentiate).derivative(callback, torch.tensor(x)).df
    assert (counted["derivative"].calls, counted["derivative"].native) == (1, 0)
    torch.testing.assert_close(df, torch.from_numpy(expected))


@in_mode
def test_a_sparse_or_nested_tensor_takes_the_converting_path() -> None:
    """SciPy's torch path takes dense tensors (handed a sparse one, it raised torch's "can't
    convert Sparse layout tensor to numpy"): a sparse tensor goes the converting way, as a
    scipy.sparse array, and a nested one gets the converting path's message."""
    view = ac.torchify(scipy.ndimage)
    with ac.stats() as counted, pytest.raises(ValueError, match="Sparse arrays/matrices are not supported") as raised:
        view.gaussian_filter(torch.eye(3).to_sparse(), 1.0)  # SciPy's own refusal of scipy.sparse input
    assert (counted["gaussian_filter"].calls, counted["gaussian_filter"].native) == (1, 0)
    assert raised.value.__notes__[-1] == (
        "autoconvert: gaussian_filter(): argument input is a sparse tensor, handed over as a scipy.sparse COO array; "
        "if the function needs CSR, pass input.to_sparse_csr(); if it needs a dense array, pass input.to_dense()"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's: nested tensors are a prototype
        ragged = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    with pytest.raises(ac.ConversionError, match=r"^expit\(\): argument x is a nested \(ragged\) tensor\."):
        ac.torchify(scipy.special).expit(ragged)


@in_mode
@pytest.mark.slow
def test_scipy_s_wrapped_functions_reach_a_process_pool() -> None:
    """In SciPy's array API mode ``scipy.ndimage.distance_transform_edt`` is a wrapper pickle
    cannot find under its own module's name: ``batched`` sends it by where ``scipy.ndimage``
    holds it, and a spawned worker runs it."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    masks = torch.rand(4, 16, 16, generator=torch.Generator().manual_seed(0)) > 0.2
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        out = ac.batched(scipy.ndimage.distance_transform_edt, executor=pool, in_caller=False)(masks)
    expected = [torch.from_numpy(scipy.ndimage.distance_transform_edt(mask.numpy())) for mask in masks]
    assert torch.equal(out, torch.stack(expected))


@in_mode
def test_cpu_only_functions_convert_under_auto_and_are_refused_under_true() -> None:
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    signal = ac.torchify(scipy.signal)
    assert not _native(signal.lfilter)
    assert ac.explain(signal.lfilter).notes[0] == (
        "SciPy's own torch path is not taken: SciPy declares it CPU-only: it converts a tensor to NumPy itself, "
        "without its gradient"
    )
    assert torch.allclose(signal.lfilter([1.0], [1.0, -0.5], x), torch.tensor([1.0, 2.5, 4.25], dtype=torch.float64))
    strict = ac.torchify(scipy.signal, native=True)
    with pytest.raises(ValueError) as raised:
        _ = strict.lfilter
    assert str(raised.value) == (
        "autoconvert.torchify(native=True): scipy.signal.lfilter has no torch path of SciPy's own: SciPy "
        "declares it CPU-only: it converts a tensor to NumPy itself, without its gradient. Fix: native='auto' "
        "converts where there is none"
    )
    with pytest.raises(ValueError, match=r"scipy\.linalg\.expm has no torch path of SciPy's own: SciPy declares "):
        _ = ac.torchify(scipy.linalg, native=True).expm
    assert _native(ac.torchify(scipy.special, native=True).expit)


@in_mode
def test_an_error_raised_on_scipy_s_torch_path_says_so_and_how_to_convert_instead() -> None:
    """SciPy's torch path can fail where its NumPy code works (SciPy 1.17's ``bracket_root`` on a
    bare tensor: torch's ``minimum`` refuses a float), which SciPy's own error did not tell: a
    note names the path and ``native=False``."""
    view = ac.torchify(scipy.special)
    with pytest.raises((IndexError, ValueError)) as info:
        view.logsumexp(torch.ones(3, dtype=torch.float64), axis=5)
    assert info.value.__notes__[-1] == (
        "autoconvert: logsumexp() raised this on SciPy's own torch path, which torchify takes for calls holding "
        "tensors (native='auto'); where SciPy gives the answer on NumPy arrays, torchify(..., native=False) "
        "converts the tensors instead"
    )


@in_mode
def test_native_false_converts_every_call() -> None:
    view = ac.torchify(scipy.special, native=False)
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    assert not _native(view.expit)
    with pytest.warns(ac.GradientWarning):
        assert view.expit(x).grad_fn is None


@in_mode
def test_the_native_path_adds_no_graph_break_and_pickles() -> None:
    """Compiled, the call gives the eager result with its gradient; and where dynamo traces
    SciPy's own torch code as one graph (SciPy 1.17 with torch 2.13), it traces the view's
    call as one graph too: the hand-over adds no break of its own."""
    view = ac.torchify(scipy.special)
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():  # dynamo's own notes on SciPy's code, not ours
        warnings.simplefilter("ignore")
        out = torch.compile(lambda t: view.expit(t).sum(), backend="eager")(x)
        assert torch.allclose(out, torch.sigmoid(x).sum()) and out.grad_fn is not None
        torch._dynamo.reset()
        try:
            torch.compile(lambda t: scipy.special.expit(t).sum(), fullgraph=True, backend="eager")(x)
        except Exception:  # SciPy's own code breaks the graph in this SciPy and torch
            traces_whole = False
        else:
            traces_whole = True
        if traces_whole:
            torch._dynamo.reset()
            whole = torch.compile(lambda t: view.expit(t).sum(), fullgraph=True, backend="eager")(x)
            assert torch.allclose(whole, out)
    again = pickle.loads(pickle.dumps(view.expit))
    assert _native(again) and torch.equal(again(x.detach()), view.expit(x.detach()))


@in_mode
@pytest.mark.gpu
def test_the_native_path_keeps_the_tensors_device(accelerator: torch.device) -> None:
    """SciPy's torch path computes on the tensor's device: no copy to the host and back."""
    view = ac.torchify(scipy.special)
    x = torch.linspace(-2.0, 2.0, 5, dtype=torch.float64, device=accelerator, requires_grad=True)
    out = view.expit(x)
    assert out.device == x.device and out.grad_fn is not None
    assert torch.allclose(out.detach().cpu(), torch.sigmoid(x.detach().cpu()))


def _native_functions() -> list[tuple[str, Any]]:
    found = []
    for module in MODULES:
        adapter = adapter_for(module)
        for name in sorted(dir(module)):
            fn = getattr(module, name)
            if name.startswith("_") or isinstance(fn, type) or not callable(fn):
                continue
            if adapter.torch_path(fn) is None:
                found.append((f"{module.__name__}.{name}", fn))
    return found


@in_mode
def test_scipy_s_torch_path_never_writes_into_its_inputs() -> None:
    """The native path hands the caller's tensors over as they are, with none of the
    conversion's guards (read-only arrays, writeback): checked, not assumed, on every
    function SciPy runs natively in the modules above that takes one to three float tensors."""
    checked = []
    for name, fn in _native_functions():
        for arity in (1, 2, 3):
            args = [
                torch.rand(6, dtype=torch.float64, generator=torch.Generator().manual_seed(i)) + 0.5
                for i in range(arity)
            ]
            before = [a.clone() for a in args]
            try:
                with torch.no_grad(), np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # SciPy's own about the values (domain, precision)
                    fn(*args)
            except Exception:
                continue
            assert all(torch.equal(a, b) for a, b in zip(args, before, strict=True)), name
            checked.append(name)
            break
    assert len(checked) >= 100, checked  # 116 with SciPy 1.17


@in_mode
def test_a_call_asking_its_function_to_write_is_handed_copies_and_explain_says_so() -> None:
    """``overwrite_x=True`` lets SciPy write into its input: on SciPy's torch path that call is
    handed a copy (one without it, the tensor itself), the caller's tensor keeps its values,
    and explain says which calls are copied."""
    view = ac.torchify(scipy.fft)
    route = described(view.fft).routes[0]
    x = torch.arange(4.0, dtype=torch.float64)
    assert route.writes is not None and route.writes((x,), {"overwrite_x": True}) and not route.writes((x,), {})
    before = x.clone()
    torch.testing.assert_close(view.fft(x, overwrite_x=True), torch.fft.fft(before))
    assert torch.equal(x, before) and x._version == 0
    assert "A call that would write into its tensors (as its library says) is handed copies of them." in (
        ac.explain(view.fft).why
    )
