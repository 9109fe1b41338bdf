"""Pickling decorated callables: by reference where a module holds them, else by recipe.

multiprocessing spawn, DataLoader workers and Dask send functions by pickling them. A
wrapper or a numpy_op pickles as a reference to the module attribute that holds it (the
child's import rebuilds it, registered ops included); one no module but a script holds is
rebuilt from its recipe, the wrapped function and the options, the wrapped function itself
found through whatever module attribute wraps it (``g = returns_tensor(f)`` with ``f``
decorated in place), or sent by value by cloudpickle (see ``by_recipe``).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

import wrapt

#: How many ``__wrapped__`` links a module attribute may sit above the function it wraps.
_MAX_HOPS = 8


def _attribute(module: Any, qualname: str) -> Any:
    target = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target


def holder_of(obj: Any, modules: tuple[str | None, ...]) -> tuple[str, str] | None:
    """``(module, name)`` of an attribute of one of the (imported) ``modules`` that is ``obj``:
    at its ``__qualname__`` first, else under any name; None where none holds it."""
    qualname = getattr(obj, "__qualname__", None)
    for name in dict.fromkeys(modules):
        module = sys.modules.get(name) if name else None
        if module is None:
            continue
        if isinstance(qualname, str) and _attribute(module, qualname) is obj:
            return name, qualname  # type: ignore[return-value]  # name is a str: sys.modules had it
        for key, value in list(vars(module).items()):
            if value is obj:
                return name, key  # type: ignore[return-value]
    return None


def by_reference(obj: Any, modules: tuple[str | None, ...]) -> Any:
    """What ``__reduce_ex__`` returns to pickle ``obj`` by reference, or None if no module holds it."""
    found = holder_of(obj, modules)
    return None if found is None else _reference(obj, *found)


def _reference(obj: Any, module: str, name: str) -> Any:
    if module == getattr(obj, "__module__", None):
        return name  # pickle's own global reference: the module and the name, nothing of ours
    return resolve, (module, name)


def by_recipe(
    obj: Any, fn: Any, modules: tuple[str | None, ...], rebuild: Callable[..., Any], recipe: tuple[Any, ...]
) -> Any:
    """What ``__reduce_ex__`` returns for ``obj``, which autoconvert made of ``fn`` and
    ``rebuild(fn, *recipe)`` makes again: a reference where one of the ``modules`` other than a
    script holds it; else the recipe, ``fn`` found by ``locate``. A plain function goes as a
    ``ByValue``: cloudpickle (joblib, Ray, Dask), whose workers cannot import a script, sends it by
    value; pickle sends the script's attribute holding ``obj`` where there is one (multiprocessing's
    children run the script again, and find it by its name), else the function as ``locate`` finds it."""
    found = holder_of(obj, modules)
    if found is not None and found[0] != "__main__":
        return _reference(obj, *found)
    if type(fn) is not types.FunctionType:
        return _rebuilt, (rebuild, *locate(fn), recipe)
    return _remade, (rebuild, ByValue(fn, (unwrap, locate(fn)) if found is None else (resolve, found)), recipe)


def _rebuilt(rebuild: Callable[..., Any], holder: Any, hops: int, recipe: tuple[Any, ...]) -> Any:
    return rebuild(unwrap(holder, hops), *recipe)


def _remade(rebuild: Callable[..., Any], sent: Any, recipe: tuple[Any, ...]) -> Any:
    """The object again, around the function cloudpickle sent; or the script's own, which pickle named."""
    return rebuild(sent, *recipe) if type(sent) is types.FunctionType else sent


def resolve(module: str, qualname: str) -> Any:
    """The object a reference names (unpickling runs this in the child)."""
    return _attribute(importlib.import_module(module), qualname)


def locate(fn: Any) -> tuple[Any, int]:
    """``(holder, hops)``: something pickle finds by reference, and how many ``__wrapped__``
    links lead from it down to ``fn``. ``(fn, 0)`` where ``fn`` is its own module attribute,
    or where nothing better is known (pickle then says what fails); an ``Exported`` where a
    package above its module exports it (see ``exported``)."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    qualname = getattr(fn, "__qualname__", None)
    holder = _attribute(module, qualname) if module is not None and isinstance(qualname, str) else None
    target, hops = holder, 0
    while target is not None and hops <= _MAX_HOPS:
        if target is fn:
            return (holder, hops) if hops else (fn, 0)
        target, hops = getattr(target, "__wrapped__", None), hops + 1
    return exported(fn), 0


def exported(fn: Any) -> Any:
    """``fn``, as something that pickles: an ``Exported`` of it where its module's attribute of
    its name is another object and a package above the module holds ``fn`` itself (SciPy's
    array API mode wraps ``scipy.ndimage.distance_transform_edt``, named after
    ``scipy.ndimage._morphology``, whose attribute is the function wrapped); else ``fn``."""
    name, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is None or not isinstance(qualname, str) or _attribute(module, qualname) is fn:
        return fn
    parts = name.split(".")  # type: ignore[union-attr]  # a str: sys.modules had it
    found = holder_of(fn, tuple(".".join(parts[:k]) for k in range(len(parts) - 1, 0, -1)))
    return fn if found is None else Exported(fn, *found)


class Exported:
    """A function called as it is, pickled as the package attribute that holds it (``exported``):
    unpickled, it is the function itself."""

    __slots__ = ("__wrapped__", "_where")

    def __init__(self, fn: Any, module: str, qualname: str) -> None:
        self.__wrapped__ = fn
        self._where = (module, qualname)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return resolve, self._where


class ByValue(wrapt.ObjectProxy):  # type: ignore[type-arg, misc, unused-ignore]  # wrapt 1.x: untyped
    """A plain function in a recipe, which pickle sends by ``reduced`` (a reference) and cloudpickle
    by value: it passes for the function (wrapt forwards ``__class__``), so cloudpickle (joblib,
    Ray, Dask) sends it as it sends a function of a script, a lambda or a nested function, which
    its workers cannot import."""

    def __init__(self, fn: Any, reduced: tuple[Any, ...]) -> None:
        super().__init__(fn)
        self._self_reduced = reduced

    def __reduce_ex__(self, protocol: object) -> tuple[Any, ...]:
        return self._self_reduced


def unwrap(holder: Any, hops: int) -> Any:
    """The function ``locate`` found, from its holder."""
    for _ in range(hops):
        holder = holder.__wrapped__
    return holder


def calling_module() -> str | None:
    """The module of the nearest caller outside autoconvert: where ``name = numpy_op(np.sin, ...)``
    is most likely assigned, so pickling can look there for it."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if not (isinstance(name, str) and (name == "autoconvert" or name.startswith("autoconvert."))):
            return name if isinstance(name, str) else None
        frame = frame.f_back  # type: ignore[assignment]
    return None
