"""Rules for ``scipy.special``'s functions, in the argument each is a smooth function of.

Each derivative is SciPy's own: ``jvp``, ``yvp``, ``ivp``, ``kvp`` for the Bessel functions,
the scaled ones through the unscaled recurrences in their scaled form (no overflow), the
incomplete gamma and beta functions' densities through ``xlogy`` and the log-gamma and
log-beta functions, ``polygamma`` one order up. The orders and shape parameters (``v``, ``n``,
``a``, ``b``) take no gradient: SciPy has no derivative in them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ._rule import Call, Rule

#: A derivative: ``derivative(call)``, in the differentiated argument, elementwise.
Derivative = Callable[[Call], Any]


def _elementwise(argument: str, derivative: Derivative) -> tuple[Any, Any]:
    """The vjp and jvp of a function elementwise in ``argument``, ``derivative`` its derivative."""

    def vjp(call: Call, grad: Any, wanted: tuple[str, ...]) -> Mapping[str, Any]:
        return {argument: np.asarray(grad) * derivative(call)}

    def jvp(call: Call, tangents: Mapping[str, Any]) -> Any:
        return np.asarray(tangents[argument]) * derivative(call)

    return vjp, jvp


def _bessel(name: str) -> Derivative:
    def derivative(call: Call) -> Any:
        from scipy import special

        return getattr(special, name)(call["v"], call["z"])

    return derivative


def _ive(call: Call) -> Any:
    """``ive = iv exp(-|z|)``: ``(ive(v-1) + ive(v+1)) / 2 - sign(z) ive(v)``."""
    from scipy import special

    v, z = call["v"], call["z"]
    return (special.ive(v - 1, z) + special.ive(v + 1, z)) / 2 - np.sign(z) * call.output


def _kve(call: Call) -> Any:
    """``kve = kv exp(z)``: ``-(kve(v-1) + kve(v+1)) / 2 + kve(v)``."""
    from scipy import special

    v, z = call["v"], call["z"]
    return -(special.kve(v - 1, z) + special.kve(v + 1, z)) / 2 + call.output


def _erfcx(call: Call) -> Any:
    return 2 * call["x"] * call.output - 2 / np.sqrt(np.pi)


def _gammainc(call: Call) -> Any:
    """The gamma distribution's density: ``x^(a-1) e^-x / Γ(a)``."""
    from scipy import special

    a, x = call["a"], call["x"]
    return np.exp(special.xlogy(a - 1, x) - x - special.gammaln(a))


def _gammaincc(call: Call) -> Any:
    return -_gammainc(call)


def _betainc(call: Call) -> Any:
    """The beta distribution's density: ``x^(a-1) (1-x)^(b-1) / B(a, b)``."""
    from scipy import special

    a, b, x = call["a"], call["b"], call["x"]
    return np.exp(special.xlogy(a - 1, x) + special.xlog1py(b - 1, -x) - special.betaln(a, b))


def _polygamma(call: Call) -> Any:
    from scipy import special

    return special.polygamma(np.asarray(call["n"]) + 1, call["x"])


def _zeta(call: Call) -> Any:
    """Hurwitz's zeta in ``q``: ``-x zeta(x + 1, q)``."""
    from scipy import special

    return -call["x"] * special.zeta(call["x"] + 1, call["q"])


def _spherical(name: str, modified: bool) -> Derivative:
    """``spherical_jn``'s (and the others') derivative, SciPy's own; of the derivative
    (``derivative=True``), the one the spherical Bessel equation gives,
    ``f'' = (n(n+1)/z² ∓ 1) f - 2 f' / z`` (+ for the ``modified`` ones, ``in`` and ``kn``)."""

    def derivative(call: Call) -> Any:
        from scipy import special

        fn, n, z = getattr(special, name), call["n"], call["z"]
        first = fn(n, z, derivative=True)
        if not call.arguments.get("derivative", False):  # a parameter left at its default is not bound
            return first
        return (n * (n + 1) / z**2 + (1 if modified else -1)) * fn(n, z) - 2 * first / z

    return derivative


def _exp1(call: Call) -> Any:
    return -np.exp(-call["x"]) / call["x"]


def _expi(call: Call) -> Any:
    return np.exp(call["x"]) / call["x"]


def _ellipk(call: Call) -> Any:
    """``(E(m) - (1 - m) K(m)) / (2 m (1 - m))``."""
    from scipy import special

    m = call["m"]
    return (special.ellipe(m) - (1 - m) * call.output) / (2 * m * (1 - m))


def _ellipe(call: Call) -> Any:
    """``(E(m) - K(m)) / (2 m)``."""
    from scipy import special

    m = call["m"]
    return (call.output - special.ellipk(m)) / (2 * m)


def _struve(name: str) -> Derivative:
    """Struve's ``H`` (``L``, modified): ``F(v-1, x) - v F(v, x) / x``."""

    def derivative(call: Call) -> Any:
        from scipy import special

        v, x = call["v"], call["x"]
        return getattr(special, name)(np.asarray(v) - 1, x) - v * call.output / x

    return derivative


def rules() -> dict[Any, Rule]:
    """The rules of ``scipy.special``'s functions, by function."""
    from scipy import special

    made: dict[Any, Rule] = {}

    def add(name: str, parameters: tuple[str, ...], argument: str, derivative: Derivative, covers: str) -> None:
        fn = getattr(special, name)
        made[fn] = Rule(
            f"scipy.special.{name}",
            fn,
            (argument,),
            *_elementwise(argument, derivative),
            covers=covers,
            parameters=parameters,
        )

    real = "real arguments; any order"
    for name, prime in (("jv", "jvp"), ("yv", "yvp"), ("iv", "ivp"), ("kv", "kvp")):
        add(name, ("v", "z"), "z", _bessel(prime), f"{real}; SciPy's {prime}")
    add("ive", ("v", "z"), "z", _ive, real)
    add("kve", ("v", "z"), "z", _kve, real)
    add("erfcx", ("x",), "x", _erfcx, "real arguments")
    add("gammainc", ("a", "x"), "x", _gammainc, "x > 0")
    add("gammaincc", ("a", "x"), "x", _gammaincc, "x > 0")
    add("betainc", ("a", "b", "x"), "x", _betainc, "0 < x < 1")
    add("polygamma", ("n", "x"), "x", _polygamma, "any order n")
    add("zeta", ("x", "q"), "q", _zeta, "Hurwitz's zeta (q given); none in x, which SciPy has no derivative in")
    for name in ("spherical_jn", "spherical_yn", "spherical_in", "spherical_kn"):
        modified = name in {"spherical_in", "spherical_kn"}
        add(name, ("n", "z", "derivative"), "z", _spherical(name, modified), "derivative=False and True")
    for name, prime in (("jve", "jvp"), ("yve", "yvp")):  # equal to jv and yv for real z
        add(name, ("v", "z"), "z", _bessel(prime), f"{real}; SciPy's {prime}")
    add("exp1", ("x",), "x", _exp1, "x > 0")
    add("expi", ("x",), "x", _expi, "real x other than 0")
    add("ellipk", ("m",), "m", _ellipk, "0 < m < 1")
    add("ellipe", ("m",), "m", _ellipe, "0 < m < 1")
    add("struve", ("v", "x"), "x", _struve("struve"), "x > 0; any order")
    add("modstruve", ("v", "x"), "x", _struve("modstruve"), "x > 0; any order")
    return made
