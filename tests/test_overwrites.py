"""Compiled SciPy code that ignores NumPy's read-only flag: f2py in/out arguments, BLAS.

Through ``torchify`` the caller's tensors never change; inside a user's own function,
``check_writes=True`` finds every such write and puts the values back.
"""

from __future__ import annotations

import inspect
import pickle
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.fft
import scipy.linalg
import scipy.ndimage
import torch
from scipy.linalg import blas, lapack

import autoconvert as ac
from autoconvert._adapters._table import adapter_for
from autoconvert._failures._guards import guarded

tsl = ac.torchify(scipy.linalg)
tblas = ac.torchify(blas)
tlapack = ac.torchify(lapack)


def _spd(n: int = 3) -> torch.Tensor:
    """A symmetric positive definite float64 matrix, Fortran-ordered (a transposed tensor),
    which is what LAPACK overwrites in place."""
    g = torch.arange(1.0, n * n + 1, dtype=torch.float64).reshape(n, n) / 10
    return (g @ g.T + n * torch.eye(n, dtype=torch.float64)).T


def _vector(n: int = 3) -> torch.Tensor:
    return torch.arange(1.0, n + 1, dtype=torch.float64)


#: name -> (the call through a torchified module, the same call on plain arrays, its arguments)
CALLS: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]]]] = {
    "solve overwrite_b": (
        lambda a, b: tsl.solve(a, b, overwrite_b=True, check_finite=False),
        lambda a, b: scipy.linalg.solve(a, b, overwrite_b=True, check_finite=False),
        lambda: (_spd(), _vector()),
    ),
    "solve overwrite_a and _b": (
        lambda a, b: tsl.solve(a, b, overwrite_a=True, overwrite_b=True),
        lambda a, b: scipy.linalg.solve(a, b, overwrite_a=True, overwrite_b=True),
        lambda: (_spd(), _vector()),
    ),
    "cholesky overwrite_a": (
        lambda m: tsl.cholesky(m, overwrite_a=True, check_finite=False),
        lambda m: scipy.linalg.cholesky(m, overwrite_a=True, check_finite=False),
        lambda: (_spd(),),
    ),
    "solve_triangular overwrite_b": (
        lambda a, b: tsl.solve_triangular(a, b, overwrite_b=True, check_finite=False),
        lambda a, b: scipy.linalg.solve_triangular(a, b, overwrite_b=True, check_finite=False),
        lambda: (torch.triu(_spd()).T.contiguous().T, _vector()),
    ),
    "lu_factor overwrite_a": (
        lambda m: tsl.lu_factor(m, overwrite_a=True)[0],
        lambda m: scipy.linalg.lu_factor(m, overwrite_a=True)[0],
        lambda: (_spd(),),
    ),
    "cho_factor overwrite_a": (
        lambda m: tsl.cho_factor(m, overwrite_a=True)[0],
        lambda m: scipy.linalg.cho_factor(m, overwrite_a=True)[0],
        lambda: (_spd(),),
    ),
    "eigh overwrite_a": (
        lambda m: tsl.eigh(m, overwrite_a=True, eigvals_only=True),
        lambda m: scipy.linalg.eigh(m, overwrite_a=True, eigvals_only=True),
        lambda: (_spd(),),
    ),
    "inv overwrite_a": (
        lambda m: tsl.inv(m, overwrite_a=True),
        lambda m: scipy.linalg.inv(m, overwrite_a=True),
        lambda: (_spd(),),
    ),
    "dgetrf overwrite_a=1 by keyword": (
        lambda m: tlapack.dgetrf(m, overwrite_a=1)[0],
        lambda m: lapack.dgetrf(m, overwrite_a=1)[0],
        lambda: (_spd(),),
    ),
    "dgetrf overwrite_a=1 by position": (
        lambda m: tlapack.dgetrf(m, 1)[0],
        lambda m: lapack.dgetrf(m, 1)[0],
        lambda: (_spd(),),
    ),
    "daxpy, no flag": (
        lambda x, y: tblas.daxpy(x, y, a=2.0),
        lambda x, y: blas.daxpy(x, y, a=2.0),
        lambda: (_vector(), _vector()),
    ),
    "dscal, no flag": (
        lambda x: tblas.dscal(3.0, x),
        lambda x: blas.dscal(3.0, x),
        lambda: (_vector(),),
    ),
    "fft overwrite_x": (
        lambda x: ac.torchify(scipy.fft).fft(x, overwrite_x=True),
        lambda x: scipy.fft.fft(x, overwrite_x=True),
        lambda: (_vector(4).to(torch.complex128),),
    ),
}


@pytest.mark.parametrize("name", CALLS)
def test_torchify_never_lets_scipy_overwrite_the_callers_tensors(name: str) -> None:
    """Each call that lets SciPy overwrite an argument leaves the caller's tensors as they
    were, and gives what SciPy gives on private arrays. Without the private copies, every
    one of these writes into the caller's tensor (f2py and BLAS ignore the read-only flag)."""
    through, plain, make = CALLS[name]
    args = make()
    before = [t.clone() for t in args]
    got = through(*args)
    for t, was in zip(args, before, strict=True):
        assert torch.equal(t, was), f"{name} changed the caller's tensor"
    expected = plain(*(t.numpy().copy(order="K") for t in before))
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), expected)


def test_with_writeback_the_overwrite_reaches_the_callers_tensor() -> None:
    """writeback=True makes the arrays the caller's to write: BLAS's in-place update is
    then the caller's, and no private copy stands in between."""
    x, y = _vector(), _vector()
    z = ac.torchify(blas, writeback=True).daxpy(x, y, a=2.0)
    assert y.tolist() == [3.0, 6.0, 9.0]
    assert z.tolist() == [3.0, 6.0, 9.0]
    assert x.tolist() == [1.0, 2.0, 3.0]


def test_a_call_without_the_flag_makes_no_private_copy() -> None:
    """The copy is made only when the call lets SciPy overwrite: the guard hands a
    read-only array through as it is otherwise, and copies it when the flag is set."""
    seen: list[np.ndarray] = []

    def solve(a: Any, b: Any, overwrite_b: bool = False) -> Any:
        seen.append(b)
        return b

    assert adapter_for(solve).overwritten(solve)
    guarded_solve = guarded(solve)
    b = np.ones(3)
    b.setflags(write=False)
    guarded_solve(None, b)
    guarded_solve(None, b, False)
    guarded_solve(None, b=b, overwrite_b=False)
    assert all(s is b for s in seen)
    guarded_solve(None, b, True)
    guarded_solve(None, b=b, overwrite_b=True)
    assert all(s is not b and s.flags.writeable for s in seen[3:])
    writable = np.ones(3)
    guarded_solve(None, writable, overwrite_b=True)  # the caller's own writable array: theirs to overwrite
    assert seen[-1] is writable


def test_the_arguments_each_kind_of_routine_may_write_into() -> None:
    """``overwrite_X`` parameters of Python functions name X (whatever its case); an f2py
    routine may write into every argument, those with a flag only when it is set."""

    def described(fn: Any) -> list[tuple[Any, ...]]:
        return [(o.name, o.position, o.flag, o.flag_position, o.default) for o in adapter_for(fn).overwritten(fn)]

    assert described(scipy.linalg.solve_triangular) == [("b", 1, "overwrite_b", 5, False)]
    assert described(scipy.linalg.ldl) == [("A", 0, "overwrite_a", 3, False)]
    assert described(scipy.linalg.norm) == []
    assert described(lapack.dgetrf) == [("a", 0, "overwrite_a", 1, 0)]
    assert described(lapack.dsbev)[0] == ("ab", 0, "overwrite_ab", 4, 1)  # on unless asked off
    assert described(lapack.dppsv)[:3] == [
        ("n", 0, None, None, True),
        ("ap", 1, None, None, True),  # declared an input, written all the same
        ("b", 2, "overwrite_b", 4, 0),
    ]
    assert [d[0] for d in described(blas.daxpy)][:2] == ["x", "y"]
    assert described(blas.dgemm)[4] == ("c", 4, "overwrite_c", 7, 0)


def test_a_guarded_function_pickles_and_keeps_its_guard() -> None:
    """A torchified function with a guard pickles (spawn pools, DataLoader workers) and the
    copy it unpickles to still guards."""
    solve = pickle.loads(pickle.dumps(tsl.solve))
    a, b = _spd(), _vector()
    before = b.clone()
    solve(a, b, overwrite_b=True)
    assert torch.equal(b, before)


#: name -> (a function of the user's own, making a write NumPy's flag cannot stop, its arguments)
BYPASSES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]]]] = {
    "solve overwrite_b": (
        lambda a, b: scipy.linalg.solve(a, b, overwrite_b=True, check_finite=False),
        lambda: (_spd(), _vector()),
    ),
    "cholesky overwrite_a": (
        lambda m: scipy.linalg.cholesky(m, overwrite_a=True, check_finite=False),
        lambda: (_spd(),),
    ),
    "dgetrf overwrite_a": (lambda m: lapack.dgetrf(m, overwrite_a=1), lambda: (_spd(),)),
    "daxpy": (lambda x, y: blas.daxpy(x, y), lambda: (_vector(), _vector())),
    "dscal": (lambda x: blas.dscal(2.0, x), lambda: (_vector(),)),
    "ndimage.label output=": (
        lambda image, out: scipy.ndimage.label(image, output=out),
        lambda: (torch.tensor([1, 0, 1, 1]), torch.zeros(4, dtype=torch.int32)),
    ),
}


@pytest.mark.parametrize("name", BYPASSES)
def test_check_writes_finds_and_puts_back_every_write_around_the_flag(name: str) -> None:
    """Inside a decorated function autoconvert cannot see the SciPy call: these writes go
    around the read-only flag (the first half proves it), and check_writes=True catches
    each one, restores the caller's values and names the argument."""
    fn, make = BYPASSES[name]
    args = make()
    before = [t.clone() for t in args]
    ac.accepts_numpy(fn)(*args)
    assert any(not torch.equal(t, was) for t, was in zip(args, before, strict=True)), "no longer a bypass"

    args = make()
    with pytest.raises(ac.ReadOnlyError, match=r"was changed by the function, through a route"):
        ac.accepts_numpy(check_writes=True)(fn)(*args)
    for t, was in zip(args, before, strict=True):
        assert torch.equal(t, was)


def test_pybind11_s_refusal_is_a_read_only_error_naming_the_fixes() -> None:
    """scipy.fft refuses a read-only array it was told to overwrite in pybind11's words;
    inside a decorated function that becomes the ReadOnlyError, NumPy's error chained."""

    @ac.accepts_numpy
    def spectrum(x: Any) -> Any:
        return scipy.fft.fft(x, overwrite_x=True)

    with pytest.raises(ac.ReadOnlyError) as caught:
        spectrum(torch.ones(4, dtype=torch.complex128))
    assert str(caught.value) == (
        "test_pybind11_s_refusal_is_a_read_only_error_naming_the_fixes.<locals>.spectrum(): argument x was "
        "written into by the function; arrays made from tensor arguments are read-only so that NumPy code never "
        "changes the caller's tensors behind its back. Found ValueError('array is not writeable'). Fix: pass copy=True to "
        "give the function private writable copies, or writeback=True to let its changes reach the caller's "
        "tensors (in @ac.accepts_numpy(copy=True) on "
        "test_pybind11_s_refusal_is_a_read_only_error_naming_the_fixes.<locals>.spectrum, or a with "
        "ac.config(copy=True): block around the call)."
    )
    assert isinstance(caught.value.__cause__, ValueError)
    assert spectrum.__wrapped__ is not None
    np.testing.assert_allclose(
        ac.accepts_numpy(copy=True)(spectrum.__wrapped__)(torch.ones(4, dtype=torch.complex128)),
        [4, 0, 0, 0],
    )


def _overwriting_linalg() -> dict[str, list[str]]:
    """Every public function of scipy.linalg with ``overwrite_*`` parameters, and those names."""
    found = {}
    for name in dir(scipy.linalg):
        fn = getattr(scipy.linalg, name)
        if name.startswith("_") or not callable(fn) or isinstance(fn, type):
            continue
        try:
            flags = [p for p in inspect.signature(fn).parameters if p.startswith("overwrite_")]
        except (TypeError, ValueError):
            continue
        if flags:
            found[name] = flags
    return found


OVERWRITING = _overwriting_linalg()


@pytest.mark.parametrize("name", OVERWRITING)
def test_no_scipy_linalg_function_writes_into_the_callers_tensors_with_every_flag_set(name: str) -> None:
    """The sweep: each function given one, two and three SPD matrices with every overwrite
    flag set. Many of those calls are SciPy's own errors (wrong arguments for the function);
    none, failing or not, may change the caller's tensors. Before the private copies, ldl,
    null_space, qz and ordqz wrote through (their parameter is A, the flag overwrite_a)."""
    fn = getattr(tsl, name)
    for count in (1, 2, 3):
        args = [_spd(4) for _ in range(count)]
        before = [t.clone() for t in args]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SciPy's own warnings for unsuited arguments
                fn(*args, **dict.fromkeys(OVERWRITING[name], True))
        except ac.ConversionError:
            raise
        except Exception:  # SciPy refusing arguments that do not suit this function
            pass
        for t, was in zip(args, before, strict=True):
            assert torch.equal(t, was), f"{name} with {count} arguments changed the caller's tensor"
    assert len(OVERWRITING) >= 30  # the sweep covers scipy.linalg, not a handful


@pytest.mark.parametrize(
    "name", [n for n in dir(blas) if n.startswith("d") and type(getattr(blas, n)).__name__ == "fortran"]
)
def test_no_blas_routine_writes_into_the_callers_tensors(name: str) -> None:
    """Every double-precision BLAS routine, given one to three vectors or matrices: whatever
    it computes or refuses, the caller's tensors stay as they were."""
    for count in (1, 2, 3):
        for shape in ((4,), (4, 4)):
            args = [
                torch.arange(1.0, 17.0, dtype=torch.float64)[: int(np.prod(shape))].reshape(shape) for _ in range(count)
            ]
            before = [t.clone() for t in args]
            try:
                getattr(tblas, name)(*args)
            except ac.ConversionError:
                raise
            except Exception:  # f2py refusing arguments that do not suit this routine
                pass
            for t, was in zip(args, before, strict=True):
                assert torch.equal(t, was), (
                    f"{name} with {count} arguments of shape {shape} changed the caller's tensor"
                )


def _lapack_routines() -> list[str]:
    return [n for n in dir(lapack) if n.startswith("d") and type(getattr(lapack, n)).__name__ == "fortran"]


@pytest.mark.parametrize("name", _lapack_routines())
def test_no_lapack_routine_writes_into_the_callers_tensors_with_every_flag_set(name: str) -> None:
    """Every double-precision LAPACK routine, given one to three SPD matrices with every
    overwrite flag set. Before every argument was guarded, dppsv wrote into ap (declared an
    input) and dsbev/dsbevd into ab (overwrite_ab is on by default, and ab is no result)."""
    routine = getattr(lapack, name)
    flags = {o.flag: 1 for o in adapter_for(routine).overwritten(routine) if o.flag is not None}
    for count in (1, 2, 3):
        args = [_spd(4) for _ in range(count)]
        before = [t.clone() for t in args]
        try:
            getattr(tlapack, name)(*args, **flags)
        except ac.ConversionError:
            raise
        except Exception:  # f2py or LAPACK refusing arguments that do not suit this routine
            pass
        for t, was in zip(args, before, strict=True):
            assert torch.equal(t, was), f"{name} with {count} arguments changed the caller's tensor"


def _solve_with_lu(a: torch.Tensor, b: torch.Tensor) -> Any:
    return scipy.linalg.lu_solve(scipy.linalg.lu_factor(a), b, overwrite_b=True, check_finite=False)


def _solve_with_cholesky(a: torch.Tensor, b: torch.Tensor) -> Any:
    return scipy.linalg.cho_solve(scipy.linalg.cho_factor(a), b, overwrite_b=True, check_finite=False)


@pytest.mark.parametrize("fn", [_solve_with_lu, _solve_with_cholesky])
@pytest.mark.parametrize("route", ["numpy_op", "torchify"])
def test_check_writes_finds_an_overwrite_inside_a_numpy_op_or_torchified_function(
    route: str, fn: Callable[..., Any]
) -> None:
    """The overwrite_b=True of a SciPy call inside the user's own function writes a
    Fortran-ordered caller tensor around the read-only flag (the first half proves it): the
    op or torchified function cannot know which arguments the function lets SciPy overwrite,
    and check_writes=True, as its guide says, catches the write and puts the values back."""
    decorate = {"numpy_op": ac.numpy_op, "torchify": ac.torchify}[route]
    a, b = _spd(), torch.ones(2, 3, dtype=torch.float64).T  # b Fortran-ordered
    before = b.clone()
    decorate(fn)(a, b)
    assert not torch.equal(b, before), "no longer a bypass"

    b = before.clone().T.contiguous().T
    with pytest.raises(ac.ReadOnlyError) as info:
        decorate(fn, check_writes=True)(a, b)
    assert torch.equal(b, before)
    made = (
        "in ac.numpy_op(" + fn.__name__ + ", copy=True)"
        if route == "numpy_op"
        else "in the ac.torchify(..., copy=True) call that made it"
    )
    assert str(info.value) == (
        f"{fn.__name__}(): argument b was changed by the function, through a route the read-only guard cannot see "
        "(torch.from_numpy or torch.as_tensor on the array, its .base, np.frombuffer, compiled code ignoring the "
        "flag such as SciPy's overwrite_*=True); the values were put back. "
        "Found torch.Tensor(shape=(3, 2), dtype=torch.float64, layout=torch.strided, device=cpu). Fix: pass "
        "copy=True to give the function private writable copies, or writeback=True to let its changes reach the "
        f"caller's tensors ({made}, or a with ac.config(copy=True): block around the call)."
    )
