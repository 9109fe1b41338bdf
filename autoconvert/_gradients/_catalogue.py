"""The catalogue: each SciPy function's rule, found by the function object itself.

One module per SciPy subpackage builds its rules; it is loaded the first time a function is
looked up while that subpackage is imported (a function of it can exist only then), so
looking up any other function imports nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from ._built import Built
from ._rule import Rule

#: SciPy's subpackages with rules, and the module of this package holding them.
_MODULES = {
    "scipy.ndimage": "_ndimage",
    "scipy.signal": "_signal",
    "scipy.integrate": "_integrate",
    "scipy.linalg": "_linalg",
    "scipy.special": "_special",
    "scipy.interpolate": "_interpolate",
}

_loaded: dict[str, dict[Any, Rule]] = {}


def rule_for(fn: Any) -> Rule | None:
    """The catalogue's rule for ``fn``, a SciPy function (None: none, or not SciPy's)."""
    if "scipy" not in sys.modules:
        return None
    for package in _MODULES:
        if package not in sys.modules:
            continue
        try:
            found = _rules(package).get(fn)
        except TypeError:  # an unhashable callable: never in the catalogue
            return None
        if found is not None:
            return found
    return None


def builder_for(fn: Any) -> Built | None:
    """The catalogue's builder ``fn`` is (a class or factory whose objects' calls keep the
    gradient of the tensors they were built from), or None."""
    if "scipy" not in sys.modules:
        return None
    for package, module in _MODULES.items():
        if package not in sys.modules:
            continue
        builders = getattr(importlib.import_module(f"{__package__}.{module}"), "builders", None)
        try:
            found: Built | None = None if builders is None else builders().get(fn)
        except TypeError:  # an unhashable callable: never in the catalogue
            return None
        if found is not None:
            return found
    return None


def catalogued() -> list[Rule]:
    """Every rule, their subpackages imported (for the docs and tests)."""
    found: list[Rule] = []
    for package in _MODULES:
        importlib.import_module(package)
        found.extend(_rules(package).values())
    return found


def _rules(package: str) -> dict[Any, Rule]:
    """``package``'s rules by function, built once."""
    rules = _loaded.get(package)
    if rules is None:
        module = importlib.import_module(f"{__package__}.{_MODULES[package]}")
        rules = _loaded[package] = module.rules()
    return rules


#: numpy_op's maker of an op around a converting function, for torchify's host route: numpy_op
#: sits above torchify in the layers, so it hands the maker down when imported (see hand_down).
_makers: list[Callable[[Any, Any, dict[str, Any]], Any]] = []


def hand_down(maker: Callable[[Any, Any, dict[str, Any]], Any]) -> None:
    """Keep numpy_op's ``maker(fn, converting, options)`` for ``differentiable``."""
    _makers[:] = [maker]


def differentiable(fn: Any, converting: Any, options: dict[str, Any]) -> Any:
    """torchify's host conversion of ``fn``, ``converting``, made a torch op that takes ``fn``'s
    rule where the catalogue has one (the maker declines where torchify's ``options`` write into
    the arguments)."""
    if not _makers or rule_for(fn) is None:
        return converting
    return _makers[0](fn, converting, options)
