"""Callables held inside SciPy's objects: a constraint's ``fun``, a linear operator's ``matvec``.

SciPy calls the callables a ``NonlinearConstraint`` or a ``LinearOperator`` holds as it calls
a callable argument: with arrays, taking arrays back. So the callables' rule (see
_callbacks.takes_callbacks) reaches them too: such an object among a call's arguments is
handed over as a shallow copy holding, in place of each callable the rule takes, its
callback; one holding none is handed over as it is, and the caller's object never changes.
The classes are SciPy's, looked up where SciPy is imported (an object of one means it is);
one a SciPy lacks is skipped.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from typing import Any

#: What the callables' rule makes of a callable: ``rule(callable, ctx)``, the callable itself
#: where the rule leaves it as it is.
Rule = Callable[[Any, Any], Any]

#: SciPy's classes holding callables SciPy calls with arrays: (module, class name, the
#: attributes holding them; None for a linear operator, see _operator_attributes).
_HOLDERS: tuple[tuple[str, str, tuple[str, ...] | None], ...] = (
    ("scipy.optimize", "NonlinearConstraint", ("fun", "jac", "hess")),
    ("scipy.sparse.linalg", "LinearOperator", None),
)

#: The methods a subclass of ``LinearOperator`` implements, which SciPy calls with arrays.
_OPERATOR_METHODS = ("_matvec", "_rmatvec", "_matmat", "_rmatmat")


def holder_leaf(cls: type, takes: Callable[[type], bool], rule: Rule) -> Callable[[Any, Any], Any] | None:
    """The leaf handing over an object of ``cls`` with its callables as the rule makes them,
    where ``cls`` is one of SciPy's callable-holding classes (None: it is not). ``takes(type)``:
    whether values of a type are callables the rule judges."""
    for module, name, attributes in _HOLDERS:
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type) and issubclass(cls, found):
            return _Holder(attributes, takes, rule, found).leaf
    return None


class _Holder:
    """How objects of one holding class are handed over (see holder_leaf)."""

    __slots__ = ("attributes", "operator", "rule", "takes")

    def __init__(self, attributes: tuple[str, ...] | None, takes: Callable[[type], bool], rule: Rule, base: type):
        self.attributes, self.takes, self.rule = attributes, takes, rule
        self.operator = base  # LinearOperator: the operators an operator is made of are walked too

    def leaf(self, obj: Any, ctx: Any) -> Any:
        return self._handed(obj, ctx, {})

    def _handed(self, obj: Any, ctx: Any, made: dict[int, Any]) -> Any:
        """``obj`` holding the rule's callables: a copy where one changed, else ``obj``;
        ``made``: the copies made in this walk, so that an operator held twice (``A.H``'s
        ``A`` and ``args``) is one copy."""
        if id(obj) in made:
            return made[id(obj)]
        made[id(obj)] = obj  # an operator reaching itself (a subclass's attribute) is itself there
        names = self.attributes if self.attributes is not None else _operator_attributes(obj)
        changed = {}
        for name in names:
            value = getattr(obj, name, None)
            new = self._value(value, ctx, made)
            if new is not value:
                changed[name] = new
        new_obj = obj
        if changed:
            new_obj = copy.copy(obj)
            for name, value in changed.items():
                setattr(new_obj, name, value)  # a method's callback, as the copy's own attribute
        made[id(obj)] = new_obj
        return new_obj

    def _value(self, value: Any, ctx: Any, made: dict[int, Any]) -> Any:
        """One attribute's value as the copy holds it."""
        if self.attributes is None and isinstance(value, self.operator):
            return self._handed(value, ctx, made)
        if self.attributes is None and type(value) is tuple:  # an operator's args: (A, B), (A, alpha)
            items = tuple(self._value(item, ctx, made) for item in value)
            return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
        if value is not None and self.takes(type(value)):
            return self.rule(value, ctx)
        return value


def _operator_attributes(operator: Any) -> list[str]:
    """The attributes of a linear operator that may hold what SciPy calls: the own attributes
    of SciPy's operators (the functions ``LinearOperator(matvec=...)`` keeps, the operators
    ``A + B`` is made of), and the methods a class outside SciPy implements (a user's
    subclass, whose other attributes are its own code's to call, with what it holds)."""
    names = list(getattr(operator, "__dict__", ())) if _scipys(type(operator)) else []
    for name in _OPERATOR_METHODS:
        owner = next((base for base in type(operator).__mro__ if name in vars(base)), None)
        if owner is not None and not _scipys(owner):
            names.append(name)
    return names


def _scipys(cls: type) -> bool:
    return f"{cls.__module__}.".startswith("scipy.")
