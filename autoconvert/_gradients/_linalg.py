"""Rules for ``scipy.linalg``'s matrix functions and matrix equations.

A matrix function's derivative is its Fréchet derivative ``L(A, E)``, whose adjoint, for a
real matrix, is ``L(Aᵀ, ·)``: ``expm``'s comes from ``expm_frechet``, ``sqrtm``'s from a
Sylvester equation (``X dX + dX X = dA``), ``logm``'s from ``logm`` of the block matrix
``[[A, E], [0, A]]``, whose upper right block it is. A matrix equation's gradient solves the
adjoint equation (``solve_sylvester`` with the transposes). A stack of matrices
(``(..., n, n)``) is taken one matrix at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from autoconvert._errors import GradientError, message

from ._rule import Call, Rule


def _each(fn: Callable[..., NDArray[Any]], *matrices: NDArray[Any]) -> NDArray[Any]:
    """``fn`` of each matrix of the stacks ``matrices`` (broadcast along their leading axes)."""
    arrays = [np.asarray(m) for m in matrices]
    lead = np.broadcast_shapes(*(a.shape[:-2] for a in arrays))
    if not lead:
        return fn(*arrays)
    stacks = [np.broadcast_to(a, (*lead, *a.shape[-2:])) for a in arrays]
    first = fn(*(s[(0,) * len(lead)] for s in stacks))
    out = np.empty((*lead, *first.shape), dtype=first.dtype)
    for index in np.ndindex(*lead):
        out[index] = fn(*(s[index] for s in stacks))
    return out


def _t(m: NDArray[Any]) -> NDArray[Any]:
    return np.swapaxes(m, -1, -2)


def _real(call: Call, name: str) -> NDArray[Any]:
    """The call's result, refused where complex: the rules cover real matrix functions."""
    output = np.asarray(call.output)
    if output.dtype.kind == "c":
        raise GradientError(
            message(
                name,
                "the result",
                "is complex, and the catalogue's rule covers real results only",
                f"a complex result of dtype {output.dtype} (the matrix has eigenvalues on the negative real axis)",
                "pass a matrix whose function is real, or give numpy_op a backward= of your own",
            )
        )
    return output


def _expm_rules() -> tuple[Any, Any]:
    def frechet(a: NDArray[Any], e: NDArray[Any]) -> NDArray[Any]:
        from scipy import linalg

        return linalg.expm_frechet(a, e, compute_expm=False)  # type: ignore[no-any-return]

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        return {"A": _each(frechet, _t(np.asarray(call["A"])), np.asarray(grad))}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        return _each(frechet, np.asarray(call["A"]), np.asarray(tangents["A"]))

    return vjp, jvp


def _sqrtm_rules() -> tuple[Any, Any]:
    def sylvester(x: NDArray[Any], e: NDArray[Any]) -> NDArray[Any]:
        from scipy import linalg

        return linalg.solve_sylvester(x, x, e)  # type: ignore[no-any-return]

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        root = _real(call, "scipy.linalg.sqrtm")
        return {"A": _each(sylvester, _t(root), np.asarray(grad))}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        return _each(sylvester, _real(call, "scipy.linalg.sqrtm"), np.asarray(tangents["A"]))

    return vjp, jvp


def _logm_rules() -> tuple[Any, Any]:
    def frechet(a: NDArray[Any], e: NDArray[Any]) -> NDArray[Any]:
        from scipy import linalg

        n = a.shape[-1]
        block = np.block([[a, e], [np.zeros_like(a), a]])
        return np.real_if_close(linalg.logm(block)[:n, n:])

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        _real(call, "scipy.linalg.logm")
        return {"A": _each(frechet, _t(np.asarray(call["A"])), np.asarray(grad))}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        _real(call, "scipy.linalg.logm")
        return _each(frechet, np.asarray(call["A"]), np.asarray(tangents["A"]))

    return vjp, jvp


def _sylvester_rules() -> tuple[Any, Any]:
    """``AX + XB = Q``: ``Λ`` solves ``AᵀΛ + ΛBᵀ = G``; ``Q``'s gradient is ``Λ``, ``A``'s
    ``-ΛXᵀ``, ``B``'s ``-XᵀΛ``."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        from scipy import linalg

        a, b, x = np.asarray(call["a"]), np.asarray(call["b"]), np.asarray(call.output)
        dual = linalg.solve_sylvester(a.T, b.T, np.asarray(grad))
        return {"q": dual, "a": -dual @ x.T, "b": -x.T @ dual}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        from scipy import linalg

        a, b, x = np.asarray(call["a"]), np.asarray(call["b"]), np.asarray(call.output)
        moved = np.zeros_like(x)
        if "q" in tangents:
            moved = moved + tangents["q"]
        if "a" in tangents:
            moved = moved - tangents["a"] @ x
        if "b" in tangents:
            moved = moved - x @ tangents["b"]
        return linalg.solve_sylvester(a, b, moved)

    return vjp, jvp


def _continuous_lyapunov_rules() -> tuple[Any, Any]:
    """``AX + XAᵀ = Q``: ``Λ`` solves ``AᵀΛ + ΛA = G``; ``A``'s gradient is ``-(ΛXᵀ + ΛᵀX)``."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        from scipy import linalg

        a, x = np.asarray(call["a"]), np.asarray(call.output)
        dual = linalg.solve_continuous_lyapunov(a.T, np.asarray(grad))
        return {"q": dual, "a": -(dual @ x.T + dual.T @ x)}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        from scipy import linalg

        a, x = np.asarray(call["a"]), np.asarray(call.output)
        moved = np.asarray(tangents["q"]) if "q" in tangents else np.zeros_like(x)
        if "a" in tangents:
            da = np.asarray(tangents["a"])
            moved = moved - da @ x - x @ da.T
        return linalg.solve_continuous_lyapunov(a, moved)

    return vjp, jvp


def _discrete_lyapunov_rules() -> tuple[Any, Any]:
    """``X = AXAᵀ + Q``: ``Λ`` solves ``Λ = AᵀΛA + G``; ``A``'s gradient is ``ΛAXᵀ + ΛᵀAX``."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        from scipy import linalg

        a, x = np.asarray(call["a"]), np.asarray(call.output)
        dual = linalg.solve_discrete_lyapunov(a.T, np.asarray(grad), method=call["method"])
        return {"q": dual, "a": dual @ a @ x.T + dual.T @ a @ x}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        from scipy import linalg

        a, x = np.asarray(call["a"]), np.asarray(call.output)
        moved = np.asarray(tangents["q"]) if "q" in tangents else np.zeros_like(x)
        if "a" in tangents:
            da = np.asarray(tangents["a"])
            moved = moved + da @ x @ a.T + a @ x @ da.T
        return linalg.solve_discrete_lyapunov(a, moved, method=call["method"])

    return vjp, jvp


def _polar_rules() -> tuple[Any, Any]:
    """``A = UP`` (``side="right"``): ``P = sqrtm(AᵀA)``, ``U = AP⁻¹``. With ``Λ`` solving
    ``PΛ + ΛP = P̄ - UᵀŪP⁻¹``, ``A``'s gradient is ``ŪP⁻¹ + A(Λ + Λᵀ)``; ``side="left"``
    (``A = PU``) is the right one of ``Aᵀ``, transposed."""

    def parts(call: Call) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any], bool]:
        left = call["side"] == "left"
        u, p = (np.asarray(r) for r in call.output)
        a = np.asarray(call["a"])
        return (a.T, u.T, p, left) if left else (a, u, p, left)

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        from scipy import linalg

        a, u, p, left = parts(call)
        du, dp = (np.asarray(g) for g in grad)
        du = du.T if left else du
        inverse = np.linalg.inv(p)
        dual = linalg.solve_sylvester(p, p, dp - u.T @ du @ inverse)
        found = du @ inverse + a @ (dual + dual.T)
        return {"a": found.T if left else found}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        from scipy import linalg

        a, u, p, left = parts(call)
        da = np.asarray(tangents["a"])
        da = da.T if left else da
        dp = linalg.solve_sylvester(p, p, da.T @ a + a.T @ da)
        du = (da - u @ dp) @ np.linalg.inv(p)
        return (du.T if left else du), dp

    return vjp, jvp


def rules() -> dict[Any, Rule]:
    """The rules of ``scipy.linalg``'s functions, by function."""
    from scipy import linalg

    real = "real matrices"
    table: list[tuple[Any, tuple[str, ...], tuple[Any, Any], str]] = [
        (linalg.expm, ("A",), _expm_rules(), f"{real}, stacks (..., n, n); through expm_frechet"),
        (linalg.sqrtm, ("A",), _sqrtm_rules(), f"{real} with a real square root; through solve_sylvester"),
        (linalg.logm, ("A",), _logm_rules(), f"{real} with a real logarithm"),
        (linalg.solve_sylvester, ("a", "b", "q"), _sylvester_rules(), real),
        (linalg.solve_continuous_lyapunov, ("a", "q"), _continuous_lyapunov_rules(), real),
        (linalg.solve_discrete_lyapunov, ("a", "q"), _discrete_lyapunov_rules(), f"{real}; every method"),
        (linalg.polar, ("a",), _polar_rules(), f"{real} of full rank; sides right and left"),
    ]
    return {
        fn: Rule(f"scipy.linalg.{fn.__name__}", fn, takes, *pair, covers=covers) for fn, takes, pair, covers in table
    }
