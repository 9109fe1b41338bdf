"""What SciPy's own torch-backend tests expect of a torchified function.

Out-parameters are written (``out=``, ``output=``), compiled code that refuses read-only
arrays on entry gets writable copies (copy when needed), device arguments name where results
go, and NumPy's dtype promotion holds. Each case compares with the NumPy call on arrays.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.ndimage
import scipy.signal
import scipy.special
import torch
from hypothesis import given, settings

import autoconvert as ac

from .strategies import TENSOR_LAYOUTS, TORCH_DTYPES, Case, tensors

#: Every layout but the expanded one, which no output can be written into.
WRITABLE_LAYOUTS = [layout for layout in TENSOR_LAYOUTS if layout != "expanded"]

tnp = ac.torchify(np)
ndi = ac.torchify(scipy.ndimage)
signal = ac.torchify(scipy.signal)


class TestOutParameters:
    """A tensor handed as ``out=``/``output=`` is written, and comes back as itself."""

    def test_a_ufunc_writes_into_out_by_keyword_and_by_position(self) -> None:
        x = torch.arange(6.0).reshape(2, 3)
        for call in (lambda out: tnp.add(x, 1, out=out), lambda out: tnp.add(x, 1, out)):
            out = torch.zeros(2, 3)
            memory = out.data_ptr()
            assert call(out) is out
            assert out.data_ptr() == memory  # written in its own memory, not replaced
            torch.testing.assert_close(out, x + 1)

    def test_out_in_a_dtype_numpy_lacks_or_strided_is_written_back(self) -> None:
        """bfloat16 crosses as a float32 copy; a transposed tensor as a C-ordered copy: each is
        copied back after the call."""
        x = torch.arange(6.0).reshape(2, 3)
        half = torch.zeros(2, 3, dtype=torch.bfloat16)
        assert tnp.multiply(x, 2, out=half) is half
        assert half.tolist() == (x * 2).tolist()
        strided = torch.zeros(3, 2).t()
        assert tnp.add(x, 1, out=strided) is strided
        torch.testing.assert_close(strided, x + 1)

    def test_a_tuple_of_outs_and_ufunc_methods(self) -> None:
        x = torch.arange(6.0).reshape(2, 3)
        q, r = torch.zeros(2, 3), torch.zeros(2, 3)
        result = tnp.divmod(x, 4, out=(q, r))
        assert result[0] is q and result[1] is r
        assert (q.tolist(), r.tolist()) == ([[0, 0, 0], [0, 1, 1]], [[0, 1, 2], [3, 0, 1]])
        total = torch.zeros(3)
        assert tnp.add.reduce(x, axis=0, out=total) is total
        assert tnp.sum(x, axis=0, out=torch.zeros(3)).tolist() == [3.0, 5.0, 7.0]

    def test_ndimage_writes_output(self) -> None:
        """``zoom(x, 1, output=out)`` used to leave ``out`` all zeros: SciPy's zoom-of-one
        shortcut skips a read-only output silently."""
        x = torch.arange(12.0).reshape(3, 4)
        weights = torch.ones(3, 3)
        expected = scipy.ndimage.correlate(x.numpy(), weights.numpy())
        for call in (
            lambda out: ndi.correlate(x, weights, output=out),
            lambda out: ndi.correlate(x, weights, out),
        ):
            out = torch.zeros(3, 4)
            call(out)
            np.testing.assert_allclose(out.numpy(), expected)
        out = torch.zeros(3, 4)
        ndi.zoom(x, 1, output=out)
        torch.testing.assert_close(out, x)

    def test_no_other_argument_becomes_writable(self) -> None:
        destination = torch.zeros(3)
        with pytest.raises(ac.ReadOnlyError):
            tnp.copyto(destination, 1.0)
        assert destination.tolist() == [0.0, 0.0, 0.0]

    def test_the_same_tensor_as_input_and_out(self) -> None:
        x = torch.arange(3.0)
        assert tnp.add(x, 1, out=x) is x
        assert x.tolist() == [1.0, 2.0, 3.0]

    def test_with_check_writes_and_writeback(self) -> None:
        """check_writes leaves an out-parameter's writes alone (it is there to be written), even
        where it is an input too; writeback writes it as any argument."""
        x = torch.arange(3.0)
        for options in ({"check_writes": True}, {"writeback": True}):
            out = torch.zeros(3)
            assert ac.torchify(np, **options).add(x, 1, out=out) is out
            assert out.tolist() == [1.0, 2.0, 3.0]
        y = x.clone()
        assert ac.torchify(np, check_writes=True).add(y, 1, out=y) is y
        assert y.tolist() == [1.0, 2.0, 3.0]

    def test_an_expanded_out_is_refused_naming_it(self) -> None:
        with pytest.raises(ac.ConversionError) as info:
            tnp.add(torch.ones(2, 3), 1, out=torch.zeros(3).expand(2, 3))
        assert str(info.value) == (
            "add(): argument out is an expanded tensor (zero strides: its elements share memory), which no "
            "output can be written into. Found torch.Tensor(shape=(2, 3), dtype=torch.float32, "
            "layout=torch.strided, device=cpu). Fix: pass a tensor with memory of its own (torch.empty(...), "
            "or out.clone())."
        )

    def test_an_overlapping_out_is_refused_naming_it(self) -> None:
        """An out-parameter whose strides give elements one location cannot take one result each."""
        out = torch.zeros(10).as_strided((4, 4), (2, 1))
        with pytest.raises(ac.ConversionError) as info:
            tnp.add(torch.ones(4, 4), 1, out=out)
        assert str(info.value) == (
            "add(): argument out is an overlapping tensor (strides that give some of its elements one memory "
            "location, as as_strided and unfold make), which no output can be written into. Found "
            "torch.Tensor(shape=(4, 4), dtype=torch.float32, layout=torch.strided, device=cpu). Fix: pass a "
            "tensor with memory of its own (torch.empty(...), or out.clone())."
        )
        assert torch.equal(out, torch.zeros(4, 4))

    def test_decorated_functions_name_their_own(self) -> None:
        """A function the user decorates keeps its ReadOnlyError unless it names the parameter."""

        def shifted(a: Any, out: Any = None) -> Any:
            return np.add(a, 1, out=out)

        out = torch.zeros(2)
        with pytest.raises(ac.ReadOnlyError):
            ac.accepts_numpy(shifted)(torch.ones(2), out=out)
        written = ac.returns_tensor(ac.accepts_numpy(out_params="out")(shifted))
        assert written(torch.ones(2), out=out) is out
        assert written(torch.ones(2), out) is out  # by position too
        assert out.tolist() == [2.0, 2.0]
        fresh = ac.returns_tensor(ac.accepts_numpy(out_params="out")(lambda a, out: (np.add(a, 1, out=out), a * 2)[1]))
        result = fresh(torch.ones(2), out=out)  # a result of its own: a new tensor, out written too
        assert result is not out and result.tolist() == [2.0, 2.0] and out.tolist() == [2.0, 2.0]
        with pytest.raises(
            TypeError, match=r"out_params= takes a parameter name or a list, tuple or set of them, got 3"
        ):
            ac.accepts_numpy(out_params=3)

    def test_a_method_names_its_own(self) -> None:
        """Through an instance (the flat call's method form), by keyword and by position."""

        class Shifter:
            @ac.returns_tensor
            @ac.accepts_numpy(out_params="out")
            def shift(self, a: Any, out: Any = None) -> Any:
                return np.add(a, 1, out=out)

        out = torch.zeros(2)
        assert Shifter().shift(torch.ones(2), out=out) is out
        assert Shifter().shift(torch.zeros(2), out) is out
        assert out.tolist() == [1.0, 1.0]
        assert Shifter().shift(torch.ones(2)).tolist() == [2.0, 2.0]

    def test_torchify_takes_other_names_or_none(self) -> None:
        plain = ac.torchify(np, out_params=())
        with pytest.raises(ac.ReadOnlyError):
            plain.add(torch.ones(2), 1, out=torch.zeros(2))


@settings(max_examples=150, deadline=None)
@given(case=tensors(dtypes=[d for d in TORCH_DTYPES if d is not torch.bool], layouts=WRITABLE_LAYOUTS))
def test_any_out_tensor_is_written_and_given_back(case: Case) -> None:
    """Over dtype x shape x layout: the out tensor takes the ufunc's values, whether NumPy
    wrote its memory (CPU, a dtype NumPy has, strides it can express) or a private copy
    (bfloat16, a conjugate bit, strides) was written back; and it is the result."""
    out = case.tensor
    source = out.resolve_conj().resolve_neg().clone()
    assert tnp.negative(source, out=out) is out
    expected = torch.from_numpy(np.asarray(np.negative(ac.to_numpy(source)))).to(out.dtype)  # bfloat16: float32
    torch.testing.assert_close(out, expected, rtol=0, atol=0, equal_nan=True)


def _sosfilt_refuses_read_only() -> bool:
    """Whether the installed SciPy's sosfilt (Cython memoryviews) refuses read-only arrays, as
    SciPy 1.17's does."""
    sos = scipy.signal.butter(2, 0.2, output="sos")
    sos.setflags(write=False)
    try:
        scipy.signal.sosfilt(sos, np.ones(4))
    except ValueError:
        return True
    return False


class TestCopyWhenNeeded:
    """Compiled code that refuses read-only arrays on entry gets writable copies."""

    def test_sosfilt_runs_with_default_options(self) -> None:
        sos = scipy.signal.butter(2, 0.2, output="sos")
        x = torch.randn(50, dtype=torch.float64)
        with ac.stats() as counted:
            y = signal.sosfilt(torch.from_numpy(sos), x)
        np.testing.assert_allclose(y.numpy(), scipy.signal.sosfilt(sos, x.numpy()))
        assert counted.copies["writable"] == (2 if _sosfilt_refuses_read_only() else 0)
        assert x.tolist() == x.clone().tolist()

    @pytest.mark.skipif(not _sosfilt_refuses_read_only(), reason="this SciPy's sosfilt takes read-only arrays")
    def test_copy_false_and_decorated_functions_keep_the_error(self) -> None:
        sos = torch.from_numpy(scipy.signal.butter(2, 0.2, output="sos"))
        x = torch.randn(20, dtype=torch.float64)
        with pytest.raises(ac.ReadOnlyError, match=r"Fix: pass copy=True"):
            ac.torchify(scipy.signal, copy=False).sosfilt(sos, x)
        with pytest.raises(ac.ReadOnlyError, match=r"Fix: pass copy=True"):
            ac.accepts_numpy(scipy.signal.sosfilt)(sos, x)

    def test_the_refusal_is_remembered(self) -> None:
        """After one refusal each call hands writable copies at once: the function runs once."""
        calls: list[bool] = []

        def kernel(a: Any, scale: Any = 1) -> Any:
            calls.append(a.flags.writeable)
            if not a.flags.writeable:  # Cython's refusal of a read-only typed memoryview
                raise ValueError("buffer source array is read-only")
            return a * 2 * scale

        module = types.ModuleType("legacy_kernels")
        module.kernel = kernel  # type: ignore[attr-defined]
        kernel.__module__ = module.__name__
        twice = ac.torchify(module).kernel
        assert twice(torch.ones(2)).tolist() == [2.0, 2.0]
        scale = np.ones(2)  # the caller's own writable array: handed over as it is
        assert twice(torch.ones(2), scale=scale).tolist() == [2.0, 2.0]
        assert calls == [False, True, True]

    def test_a_refusal_without_a_read_only_array_is_not_retried(self) -> None:
        """The flat call sends a refusal on entry to the guard only where the call handed a
        read-only array: given its own writable array, the function's error stands, on both
        call paths, and later calls are not made with copies."""
        calls: list[bool] = []

        def kernel(a: Any) -> Any:
            calls.append(a.flags.writeable)
            raise ValueError("buffer source array is read-only")

        module = types.ModuleType("legacy_refusing")
        module.kernel = kernel  # type: ignore[attr-defined]
        kernel.__module__ = module.__name__
        refusing = ac.torchify(module).kernel
        with pytest.raises(ValueError, match=r"^buffer source array is read-only$"):
            refusing(np.ones(2))
        assert calls == [True] and refusing.__wrapped__.writable is False

    def test_other_errors_are_not_retried(self) -> None:
        calls: list[int] = []

        def broken(a: Any) -> Any:
            calls.append(1)
            raise ValueError("operands could not be broadcast")

        module = types.ModuleType("legacy_broken")
        module.broken = broken  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="operands could not be broadcast"):
            ac.torchify(module).broken(torch.ones(2))
        assert calls == [1]


def _takes_device() -> bool:
    """Whether NumPy's creation functions take ``device=`` (NumPy 2)."""
    try:
        np.zeros(1, device="cpu")
    except TypeError:
        return False
    return True


@pytest.mark.skipif(not _takes_device(), reason="NumPy before 2.0 takes no device=")
class TestDevicesAndNamespaces:
    def test_a_device_argument_names_where_results_go(self) -> None:
        if "xp" in inspect.signature(scipy.signal.savgol_coeffs).parameters:  # array-API SciPy
            coeffs = signal.savgol_coeffs(5, 2, xp=torch, device=torch.device("cpu"))
            torch.testing.assert_close(coeffs, torch.from_numpy(scipy.signal.savgol_coeffs(5, 2)))
        made = tnp.zeros(2, device=torch.device("meta"))
        assert made.device == torch.device("meta") and made.shape == (2,)

    def test_a_device_other_than_the_tensors_is_refused(self) -> None:
        with pytest.raises(ac.DeviceMismatchError) as info:
            tnp.asarray(torch.ones(2), device=torch.device("meta"))
        assert str(info.value) == (
            "asarray(): the tensor arguments are on different devices, so there is no caller's device to "
            "return results to. Found a on cpu, device on meta. Fix: move them to one device first, or pass "
            "device= to choose where results go."
        )


def test_numpy_promotion_holds() -> None:
    """The function runs in NumPy, so NumPy promotes: float32 with int32 weights gives float64
    (torch would keep float32)."""
    x = torch.ones(3)
    b = torch.tensor([1, 2, 3], dtype=torch.int32)
    result = ac.torchify(scipy.special).logsumexp(x, b=b)
    expected = scipy.special.logsumexp(x.numpy(), b=b.numpy())
    assert result.dtype == torch.from_numpy(np.asarray(expected)).dtype == torch.float64


def _compat_torch() -> types.ModuleType:
    """array-api-compat's torch namespace, as the installed SciPy vendors it (where it moved
    between versions), or the package itself."""
    for name in ("scipy._external.array_api_compat.torch", "scipy._lib.array_api_compat.torch"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return pytest.importorskip("array_api_compat.torch")


def test_array_api_compat_torch_names_its_numpy() -> None:
    """SciPy's tests pass ``xp=array_namespace(t)``: array-api-compat's torch namespace, which
    becomes the same package's NumPy namespace."""
    compat = _compat_torch()

    def namespace_of(a: Any, xp: Any) -> str:
        return f"{xp.__name__}:{type(a).__name__}"

    module = types.ModuleType("legacy_xp")
    module.namespace_of = namespace_of  # type: ignore[attr-defined]
    numpy_namespace = compat.__name__.removesuffix("torch") + "numpy"
    assert ac.torchify(module).namespace_of(torch.ones(1), xp=compat) == f"{numpy_namespace}:ndarray"
    assert ac.torchify(module).namespace_of(torch.ones(1), xp=torch) == "numpy:ndarray"


def test_array_api_compat_torch_functions_are_torch_callbacks() -> None:
    """``vectorized_filter(x, xp.mean, output=out)`` as SciPy's tests write it: the namespace's
    functions are torch's, taking tensors; the result views all of ``out``, so it is ``out``."""
    compat = _compat_torch()
    x = torch.rand(5, 6, dtype=torch.float64)
    expected = scipy.ndimage.vectorized_filter(x.numpy(), np.mean, size=3)
    np.testing.assert_allclose(ndi.vectorized_filter(x, compat.mean, size=3).numpy(), expected)
    out = torch.zeros(5, 6, dtype=torch.float64)
    assert ndi.vectorized_filter(x, compat.mean, size=3, output=out) is out
    np.testing.assert_allclose(out.numpy(), expected)


def _mean_in_torch(a: Any, axis: int) -> Any:
    return torch.mean(a, dim=axis)


class _TorchMean:
    def __call__(self, a: Any, axis: int = -1) -> Any:
        return torch.mean(a, dim=axis)


class _TorchMeanModule(torch.nn.Module):
    def forward(self, a: Any, axis: int = -1) -> Any:
        return a.mean(dim=axis)


def _nested_mean(a: Any, axis: int = -1) -> Any:
    def inner() -> Any:
        return torch.mean(a, dim=axis)

    return inner()


def _scaled_mean(scale: torch.Tensor) -> Any:
    return lambda a, axis=-1: (a * scale).mean(dim=axis) / scale


def _namespace_mean(xp: Any) -> Any:
    return lambda a, axis: xp.mean(a, axis=axis)


@pytest.mark.parametrize(
    "statistic",
    [
        pytest.param(lambda a, axis=-1: torch.mean(a, dim=axis), id="reads-torch"),
        pytest.param(_namespace_mean(torch), id="closure-xp-torch"),
        pytest.param(lambda a, axis=-1, xp=torch: xp.mean(a, dim=axis), id="default-xp-torch"),
        pytest.param(functools.partial(_mean_in_torch), id="partial"),
        pytest.param(_TorchMean(), id="callable-object"),
        pytest.param(_TorchMeanModule(), id="nn-module"),
        pytest.param(_nested_mean, id="nested-function"),
        pytest.param(_scaled_mean(torch.tensor(2.0, dtype=torch.float64)), id="closure-tensor"),
        pytest.param(
            lambda a, axis=-1: torch.mean(a, dim=axis) * torch.tensor(1.0, dtype=torch.float64), id="makes-a-constant"
        ),
    ],
)
def test_a_callable_written_in_torch_takes_tensors_without_an_option(statistic: Any) -> None:
    """A callable whose code reads torch (a global, a closure variable, a default, a nested
    function's name) or a tensor and no NumPy, a partial of one, a callable object and an
    nn.Module take tensors from SciPy: ``bootstrap``'s statistic, as SciPy's torch-backend
    tests write it."""
    import scipy.stats

    x = torch.rand(20, dtype=torch.float64)
    result = ac.torchify(scipy.stats).bootstrap((x,), statistic, n_resamples=20, random_state=0)
    expected = scipy.stats.bootstrap((x.numpy(),), np.mean, n_resamples=20, random_state=0)
    assert isinstance(result.standard_error, torch.Tensor)
    assert result.standard_error.item() == pytest.approx(expected.standard_error)


def _recorded_numpy_mean(seen: list[type]) -> Any:
    def statistic(a: Any, axis: int = -1) -> Any:
        seen.append(type(a))
        return np.mean(a, axis=axis)

    return statistic


def _recorded_namespace_mean(seen: list[type], xp: Any = np) -> Any:
    return lambda a, axis=-1: (seen.append(type(a)), xp.mean(a, axis=axis))[1]


def _recorded_from_numpy(seen: list[type]) -> Any:
    def statistic(a: Any, axis: int = -1) -> Any:
        seen.append(type(a))
        return torch.from_numpy(np.array(a)).mean(dim=axis).numpy()

    return statistic


def _recorded_as_tensor_of_numpy(seen: list[type]) -> Any:
    def statistic(a: Any, axis: int = -1) -> Any:  # NumPy code that makes its own tensor
        seen.append(type(a))
        return torch.as_tensor(np.array(a, dtype=np.float64)).mean(dim=axis).numpy()

    return statistic


def _recorded_weighted_in_numpy(seen: list[type]) -> Any:
    scale = torch.tensor(2.0, dtype=torch.float64)

    def statistic(a: Any, axis: int = -1) -> Any:  # SciPy's generic_filter tests: a tensor read through np
        seen.append(type(a))
        return np.mean(a * np.asarray(scale), axis=axis) / 2.0

    return statistic


@pytest.mark.parametrize(
    "make",
    [
        _recorded_numpy_mean,
        _recorded_namespace_mean,
        _recorded_from_numpy,
        _recorded_as_tensor_of_numpy,
        _recorded_weighted_in_numpy,
    ],
)
def test_a_callable_written_for_numpy_keeps_getting_arrays(make: Any) -> None:
    """NumPy-written callables (``np.mean``, a namespace ``xp`` that is NumPy, one closing over
    a tensor it reads through ``np``), and code that makes its own tensors from what it is
    handed (``torch.from_numpy``; NumPy code calling ``torch.as_tensor``), are handed arrays,
    as the caller wrote them for."""
    import scipy.stats

    seen: list[type] = []
    x = torch.rand(20, dtype=torch.float64)
    ac.torchify(scipy.stats).bootstrap((x,), make(seen), n_resamples=20, random_state=0)
    assert seen and set(seen) == {np.ndarray}


#: How a callback reads (or seems to read) torch: whether it is torch code, and its body's
#: lines (the last one returns). Each computes the population std, so every one has the
#: same right answer, and a NumPy body handed tensors gives another (``.std()``'s Bessel
#: correction) or fails. Where they are defined, ``std`` is ``torch.std`` (``from torch
#: import std``), so ``np.std`` and ``a.std`` share a torch global's name.
_TORCH_USES: dict[str, tuple[bool, list[str]]] = {
    "numpy": (False, ["return np.std(a)"]),
    "attribute-named-like-a-torch-global": (False, ["return a.std()"]),
    "unused-local-import": (False, ["import torch", "return np.std(a)"]),
    "unused-local-from-import": (False, ["from torch import std as unused", "return np.std(a)"]),
    "torch-module": (True, ["return torch.std(a, correction=0)"]),
    "torch-alias": (True, ["return T.std(a, correction=0)"]),
    "from-torch-import": (True, ["return std(a, correction=0)"]),
    "local-import": (True, ["import torch", "return torch.std(a, correction=0)"]),
    "local-import-in-a-nested-function": (
        True,
        ["import torch.nn.functional as F", "return (lambda: F.relu(a).std(correction=0))()"],
    ),
    "closure": (True, ["return xp.std(a, correction=0)"]),
    # ``torch.Tensor`` read as the type, beside NumPy: no sign of code making its own tensors.
    "type-check-beside-numpy": (
        True,
        ["assert isinstance(a, torch.Tensor)", "return torch.std(a, correction=0) + np.float64(0.0)"],
    ),
}

#: The callable's shape around a body: source where {body} is the body's lines, made inside
#: ``outer(xp)`` (called with torch) so that ``xp`` is a closure variable; ``made`` is it.
_SHAPES = {
    "def": "def statistic(a):\n{body}\nmade = statistic",
    "lambda": "made = lambda a: {expression}",
    "partial": "def statistic(a, scale=1.0):\n{body}\nmade = functools.partial(statistic, scale=1.0)",
    "bound-method": "class Holder:\n    def statistic(self, a):\n{body_in_class}\nmade = Holder().statistic",
    "callable-object": "class Statistic:\n    def __call__(self, a):\n{body_in_class}\nmade = Statistic()",
}


def _callback(shape: str, use: str) -> Any:
    """The callback of ``shape`` whose body is ``use``'s, recording what it is handed in ``seen``."""
    lines = ["seen.append(type(a))", *_TORCH_USES[use][1]]
    template = _SHAPES[shape]
    source = template.format(
        body="\n".join(f"    {line}" for line in lines),
        body_in_class="\n".join(f"        {line}" for line in lines),
        expression=f"(seen.append(type(a)), {lines[-1].removeprefix('return ')})[1]",
    )
    inside = "\n".join(f"    {line}" for line in source.splitlines())
    scope = {"np": np, "torch": torch, "T": torch, "std": torch.std, "functools": functools, "seen": []}
    scope["__name__"] = __name__
    exec(compile(f"def outer(xp):\n{inside}\n    return made\n", "<callback shapes>", "exec"), scope)
    return scope["outer"](torch), scope["seen"]


_SHAPED = [
    pytest.param(shape, use, id=f"{shape}-{use}")
    for shape in _SHAPES
    for use, (_, lines) in _TORCH_USES.items()
    if shape != "lambda" or len(lines) == 1  # a lambda holds one expression
]


@pytest.mark.parametrize(("shape", "use"), _SHAPED)
def test_a_callback_is_judged_torch_code_by_the_names_it_loads(shape: str, use: str) -> None:
    """Over callback shapes (def, lambda, partial, bound method, callable object, each a
    closure) x the ways code reads torch: torch through a global, an alias, ``from torch
    import std``, a used local import, a closure variable gets tensors; NumPy code gets arrays
    even beside a torch global of the same name as an attribute it reads (``a.std()``), or
    with an import it never uses. Values are the NumPy reference's either way."""
    callback, seen = _callback(shape, use)
    x = torch.tensor([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0], dtype=torch.float64)
    result = ac.torchify(scipy.ndimage).generic_filter(x, callback, size=3)
    expected = scipy.ndimage.generic_filter(x.numpy(), np.std, size=3)
    assert set(seen) == {torch.Tensor if _TORCH_USES[use][0] else np.ndarray}
    assert type(result) is torch.Tensor
    np.testing.assert_allclose(result.numpy(), expected)


def _offset(x: Any) -> Any:
    return (x - 1.5) ** 2


class _Computed:
    """Callables an object hands out through ``__getattr__``, which the callables' rule never
    runs: torch code reached there is not seen."""

    def __init__(self, **callables: Any) -> None:
        self._callables = callables

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_callables"][name]
        except KeyError:
            raise AttributeError(name) from None


#: torch code refusing NumPy values, in each family of torch's wordings (reached through an
#: attribute ``__getattr__`` computes, which the callables' rule does not run, so it sees no
#: torch in the objective).
_REFUSALS = {
    "torch.stack (NumPy scalars)": lambda x: torch.stack([x[1], x[0]]),
    "torch.cat": lambda x: torch.cat([x, x])[:2],
    "torch.einsum": lambda x: torch.einsum("i->i", x),
    "torch.where": lambda x: torch.where(x > 0, x, -x),
    "torch.clamp": lambda x: torch.clamp(x, -1, 1),
    "torch.add": lambda x: torch.add(x, 1.0),
    "Tensor.sub": lambda x: torch.zeros(2, dtype=torch.float64).sub(x),
    "torch.exp (a NumPy scalar)": lambda x: torch.exp(x[0]) * x,
    "the @ operator": lambda x: x @ torch.eye(2, dtype=torch.float64),
}


_UNSEEN_REFUSALS = _Computed(**_REFUSALS)


def _torch_gradient(x: Any, refusal: str) -> Any:
    return 2 * (x - 1.5) + 0 * getattr(_UNSEEN_REFUSALS, refusal)(x)


@pytest.mark.parametrize("refusal", list(_REFUSALS))
def test_torch_refusing_numpy_values_in_any_wording_gets_the_note_naming_callbacks(refusal: str) -> None:
    """An objective whose torch code sits in helpers (``jac=True``) is handed arrays, and torch
    refuses them in one of its wordings (torch.stack's "expected Tensor as element 0 ..., but
    got numpy.float64", "must be Tensor, not numpy.ndarray", "invalid combination of arguments
    - got (numpy.ndarray, ...)", an operator's): each gets the note naming callbacks=True, and
    callbacks=True hands the objective tensors."""
    import scipy.optimize

    def objective(x: Any) -> Any:
        return _offset(x).sum(), _torch_gradient(x, refusal)

    x0 = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(TypeError) as info:
        ac.torchify(scipy.optimize).minimize(objective, x0, jac=True)
    assert info.value.__notes__ == [
        "autoconvert: minimize(): argument fun is a callable, handed NumPy arrays when the function calls it; if "
        "it is written in torch, pass callbacks=True to hand it tensors (in the ac.torchify(..., callbacks=True) "
        "call that made it, or a with ac.config(callbacks=True): block around the call)"
    ]
    found = ac.torchify(scipy.optimize, callbacks=True).minimize(objective, x0, jac=True)
    torch.testing.assert_close(found.x, torch.full((2,), 1.5, dtype=torch.float64))


def test_the_note_names_the_callable_torch_refused_in_and_none_for_other_type_errors() -> None:
    """Where several callables are given, the note names the one whose code raised (the
    traceback's), not the first; a TypeError of a callable's own that is no refusal of NumPy
    values by torch gets no note."""
    import scipy.optimize

    optimize, x0 = ac.torchify(scipy.optimize), torch.zeros(2, dtype=torch.float64)
    with pytest.raises(TypeError) as info:
        optimize.minimize(lambda x: _offset(x).sum(), x0, jac=lambda x: _torch_gradient(x, "torch.cat"))
    assert info.value.__notes__ == [
        "autoconvert: minimize(): argument jac is a callable, handed NumPy arrays when the function calls it; if "
        "it is written in torch, pass callbacks=True to hand it tensors (in the ac.torchify(..., callbacks=True) "
        "call that made it, or a with ac.config(callbacks=True): block around the call)"
    ]
    with pytest.raises(TypeError) as unhashable:
        optimize.minimize(lambda x: {x: 1.0}[x], x0)
    assert str(unhashable.value) == "unhashable type: 'numpy.ndarray'"
    assert not hasattr(unhashable.value, "__notes__")


def test_a_torch_written_callable_given_arrays_gets_a_note_naming_callbacks() -> None:
    """Torch code a callable reaches only through a value the rule does not follow (an
    attribute ``__getattr__`` computes) is not seen: handed arrays, it fails, and the error
    says which fix to take."""
    import scipy.stats

    x = torch.rand(20, dtype=torch.float64)
    means = _Computed(mean=_mean_in_torch)

    def statistic(a: Any, axis: int = -1) -> Any:
        return means.mean(a, axis)

    with pytest.raises(TypeError) as info:
        ac.torchify(scipy.stats).bootstrap((x,), statistic, n_resamples=20)
    assert info.value.__notes__ == [
        "autoconvert: bootstrap(): argument statistic is a callable, handed NumPy arrays when the function "
        "calls it; if it is written in torch, pass callbacks=True to hand it tensors (in the ac.torchify(..., "
        "callbacks=True) call that made it, or a with ac.config(callbacks=True): block around the call)"
    ]
    result = ac.torchify(scipy.stats, callbacks=True).bootstrap((x,), statistic, n_resamples=20)
    assert isinstance(result.standard_error, torch.Tensor)


class _Energy:
    def torch_energy(self, t: Any) -> Any:
        return torch.sin(t)

    def numpy_energy(self, t: Any) -> Any:
        return np.sin(t)


_ENERGY = _Energy()


def _to_array(x: Any) -> Any:
    """A NumPy helper reading torch for a type check alone."""
    if isinstance(x, torch.Tensor):
        x = x.detach().numpy()
    return np.asarray(x)


def _calls_torch_mean(a: Any, axis: int) -> Any:
    return _mean_in_torch(a, axis)


def _deep(a: Any, axis: int) -> Any:
    return _calls_torch_mean(a, axis)


def _deeper(a: Any, axis: int) -> Any:
    return _deep(a, axis)


@pytest.mark.parametrize(
    ("statistic", "torch_written"),
    [
        pytest.param(lambda a, axis=-1: _mean_in_torch(a, axis), True, id="calls-a-torch-function"),
        pytest.param(lambda a, axis=-1: _deep(a, axis), True, id="three-calls-deep"),
        pytest.param(lambda a, axis=-1: _deeper(a, axis), False, id="four-calls-deep"),
        pytest.param(lambda a, axis=-1: np.asarray(_mean_in_torch(a, axis)), True, id="numpy-calling-torch"),
        pytest.param(lambda a, axis=-1: _ENERGY.torch_energy(a).mean(axis), True, id="torch-method"),
        pytest.param(lambda a, axis=-1: _ENERGY.numpy_energy(a).mean(axis), False, id="numpy-method"),
        pytest.param(lambda a, axis=-1: np.mean(_to_array(a), axis), False, id="numpy-helper-type-checking"),
        pytest.param(lambda a, axis=-1: functools.partial(_calls_torch_mean)(a, axis), True, id="partial"),
        pytest.param(lambda a, axis=-1: scipy.special.expit(a).mean(axis), False, id="scipy-function"),
    ],
)
def test_a_callable_reaching_torch_through_functions_of_its_own_takes_tensors(
    statistic: Callable[..., Any], torch_written: bool
) -> None:
    """The callables' rule follows the functions (methods of the caller's objects, partials) a
    callable loads, up to three calls deep: one reaching torch code that reads no NumPy is
    handed tensors under the default callbacks=False; a helper reading NumPy too (a type
    check, then np.asarray) wants arrays, as do SciPy's own functions."""
    import scipy.stats

    from autoconvert._spec._callbacks import written_in_torch

    x = torch.rand(20, dtype=torch.float64)
    if torch_written:
        result = ac.torchify(scipy.stats).bootstrap((x,), statistic, n_resamples=20)
        assert isinstance(result.standard_error, torch.Tensor)
    assert written_in_torch(statistic) is torch_written


@pytest.mark.parametrize("route", ["torchify", "pair"])
def test_a_tensor_requiring_grad_an_unseen_torch_callable_returns_gets_the_note_naming_callbacks(route: str) -> None:
    """Torch code the rule does not see (behind ``__getattr__``) takes the arrays it is
    handed but closes over a tensor requiring grad: NumPy refuses the result in torch's words,
    after the callable's frames, and the error still names the callable and callbacks=True.
    (``root``: SciPy 1.18's ``minimize`` reads the result's ``dtype.type`` before NumPy does.)"""
    import scipy.optimize

    a = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    models = _Computed(sin=lambda t: torch.sin(a * t))
    if route == "torchify":
        root, site = ac.torchify(scipy.optimize).root, "the ac.torchify(..., callbacks=True) call that made it"
    else:
        root = ac.returns_tensor(ac.accepts_numpy(scipy.optimize.root))
        site = "@ac.accepts_numpy(callbacks=True) on root"
    with pytest.raises(RuntimeError) as info:
        root(lambda x: models.sin(x[0]) - 0.1 * x, torch.tensor([0.1], dtype=torch.float64))
    assert str(info.value).startswith("Can't call numpy() on Tensor that requires grad")  # torch's words
    assert info.value.__notes__ == [
        "autoconvert: root(): argument fun is a callable, handed NumPy arrays when the function calls it; if "
        f"it is written in torch, pass callbacks=True to hand it tensors (in {site}, or a with "
        "ac.config(callbacks=True): block around the call)"
    ]


def _scalar_objective(fun: Any, x0: np.ndarray) -> Any:
    """A minimizer's first step as SciPy 1.18 words it: the objective's result made a NumPy
    scalar of its own dtype (``_ScalarFunctionWrapper``)."""
    fx = fun(np.copy(x0))
    return fx.dtype.type(np.asarray(fx).item())


@pytest.mark.parametrize("decorate", [ac.accepts_numpy, lambda f: ac.returns_tensor(ac.accepts_numpy(f))])
def test_a_tensor_an_unseen_torch_callable_returns_to_a_dtype_read_gets_the_note_naming_callbacks(
    decorate: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> None:
    """Torch code the rule does not see, handed arrays, returns a tensor; a function reading the
    result's ``dtype.type`` (SciPy 1.18's ``minimize``) fails in Python's words on the torch dtype,
    and the error names the callable and callbacks=True."""
    models = _Computed(square=lambda t: (torch.as_tensor(t) ** 2).sum())
    with pytest.raises(AttributeError) as info:
        decorate(_scalar_objective)(lambda x: models.square(x), torch.tensor([1.0, 2.0]))
    assert str(info.value) == "'torch.dtype' object has no attribute 'type'"  # Python's words
    assert info.value.__notes__ == [
        "autoconvert: _scalar_objective(): argument fun is a callable, handed NumPy arrays when the function "
        "calls it; if it is written in torch, pass callbacks=True to hand it tensors (in "
        "@ac.accepts_numpy(callbacks=True) on _scalar_objective, or a with ac.config(callbacks=True): block "
        "around the call)"
    ]
