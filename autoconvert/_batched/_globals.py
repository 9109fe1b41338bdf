"""The module globals a function reads, where a worker holds copies of them: a worker in
another process has its own module (forked or imported again), and a function Dask or Ray
sent by value (a script's, a lambda) carries copies of the globals it names. A change the
function makes to one there (``counts[0] += 1``, ``log.append(x)``, ``global n; n += 1``)
changes the copy alone, where the same call in the caller's process changes the caller's.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

from ._states import BY_REFERENCE


class ReadGlobals:
    """The globals a function's code names (its nested functions' and comprehensions' too, and
    those of the functions of its module it names), read as a state: ``__getstate__`` gives
    them as they are now, so that ``_states`` compares them as an object's attributes. Code
    (functions, classes, modules) is left out: it pickles by reference."""

    __slots__ = ("module", "names", "namespace")

    def __init__(self, fn: types.FunctionType) -> None:
        self.namespace, self.module = fn.__globals__, fn.__globals__["__name__"]
        self.names = _names(fn)

    def __getstate__(self) -> dict[str, Any]:
        namespace = self.namespace
        return {
            name: namespace[name]
            for name in self.names
            if name in namespace and not isinstance(namespace[name], BY_REFERENCE)
        }


def copied_globals(fn: Any, caller: int) -> ReadGlobals | None:
    """The globals ``fn`` (a function) reads, where they are copies of the caller's: in
    another process than ``caller``'s, or sent with the function by value (its globals then a
    dict of their own, not its module's); None where they are the caller's own, or it reads none,
    or they are no module's (code autoconvert generated) or autoconvert's."""
    name = fn.__globals__.get("__name__") if type(fn) is types.FunctionType else None
    if not isinstance(name, str) or name.partition(".")[0] == "autoconvert":
        return None  # generated code's namespace (a torchified method's call), autoconvert's own caches
    module = sys.modules.get(name)
    if os.getpid() == caller and module is not None and vars(module) is fn.__globals__:
        return None
    reads = ReadGlobals(fn)
    return reads if reads.names else None


def _names(fn: types.FunctionType) -> tuple[str, ...]:
    """The global names ``fn``'s code, and the code of the functions of its module it names,
    may read or bind, each once."""
    names: dict[str, None] = {}
    codes = [fn.__code__]
    seen: set[int] = set()
    while codes:
        code = codes.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        for name in code.co_names:  # attribute names too: a superset, looked up in the globals
            value = fn.__globals__.get(name)
            if type(value) is types.FunctionType and value.__globals__ is fn.__globals__:
                codes.append(value.__code__)
            elif name != "__builtins__" and name in fn.__globals__:
                names[name] = None
    return tuple(names)
