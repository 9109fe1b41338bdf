"""What a function reads by name, where a worker holds copies of it: the module globals its code
names, and what its closure captured. A worker in another process has its own module (forked
or imported again); Dask and Ray send a script's function, a lambda or a closure by value, with
copies of the globals it names and of its captures. A change the function makes to one there
(``counts[0] += 1``, ``log.append(x)``, ``global n; n += 1``, ``nonlocal calls; calls += 1``,
``Counter.total += 1``) changes the copy alone, where the same call in the caller's process
changes the caller's.

Each is read as an object's state (see _states): what was there must be there unchanged, and
what is only added (a memo's new key, a value where there was None) is a cache filling.
"""

from __future__ import annotations

import builtins
import collections
import dis
import functools
import inspect
import itertools
import logging
import os
import re
import sys
import types
import weakref
from typing import Any, TypeGuard, TypeVar

import numpy as np

from ._states import (
    BY_REFERENCE,
    CODE,
    REBOUND_ONLY,
    cached_function,
    captured,
    data_defaults,
    function_state,
    holds_through,
    own_dict,
    special,
    unwrapped,
    users_file,
    users_function,
    value_type,
)

PerThread = TypeVar("PerThread")


class ReadGlobals:
    """Globals of one module a function reads (through the functions and classes of that module
    it reaches too), code left out; a class or a function of the module by its own attributes
    (``Counter.total``, ``helper.calls``) and a function by what its closure captured. With
    ``unnamed``, every class and function the module defines and every number or string it
    binds too: code no walk follows changes them as well (a class an Enum member or a
    ``partial`` holds counting its calls; ``global hits; hits += 1`` in a descriptor's
    ``__get__``, a metaclass's ``__call__``, a callback in a ``__slots__`` object)."""

    __slots__ = ("module", "names", "namespace", "unnamed")

    def __init__(self, namespace: dict[str, Any], names: tuple[str, ...], unnamed: bool = False) -> None:
        self.namespace, self.module, self.names, self.unnamed = namespace, namespace["__name__"], names, unnamed

    def __getstate__(self) -> dict[str, Any]:
        namespace, state = self.namespace, {}
        behind: dict[str, Attributes] = {}  # the classes aliases and partials stand for
        for name in self.names:
            value = namespace.get(name, _UNBOUND)
            if _users_code_held(value, self.module):
                state[name] = attributes_of(value)
            elif isinstance(value, types.MethodType) and _module_class(owner := value.__self__, self.module):
                state[name] = attributes_of(owner)  # register = Registry.register: cls.names.append(x)
            elif value is not _UNBOUND and (not isinstance(value, BY_REFERENCE) or holds_through(value)):
                state[name] = value
                if type(value) in (dict, list, tuple):  # a registry of classes: MODELS["double"]
                    state.update((f"{name}[{k!r}]", attributes_of(c)) for k, c in _classes_held(value, self.module))
            kind = type(value)
            if kind is not type and _module_class(kind, self.module):
                state[f"type({name})"] = attributes_of(kind)  # type(obj).count += 1, a property's, a metaclass's
            behind.update((f"{name}{at}", attributes_of(cls)) for at, cls in _classes_behind(value))
        if self.unnamed:
            for name, value in namespace.items():
                if name in state or special(name):
                    continue
                if type(value) in REBOUND_ONLY or value_type(type(value)):
                    state[name] = value
                elif _users_code_held(value, self.module):
                    state[name] = attributes_of(value)
                behind.update((f"{name}{at}", attributes_of(cls)) for at, cls in _classes_behind(value))
        compared = {id(v) for v in state.values()}  # a class the module holds itself is named as it is
        state.update((k, v) for k, v in behind.items() if id(v) not in compared)
        return state

    def reads(self, entry: str) -> bool:
        """Whether the function reads ``entry`` of the state by a name its code names (or through
        one: ``type(obj)``, ``MODELS['double']``), not one compared for what no code followed reaches."""
        root = entry[5:-1] if entry.startswith("type(") else re.split(r"[.\[]", entry, maxsplit=1)[0]
        return root in self.names or root not in self.namespace

    def place(self, name: str) -> str:
        """Where ``name`` is, for a refusal."""
        # A script imported anew in a spawned worker is __mp_main__ there: named as its user knows it.
        return f"global {name} of module {'__main__' if self.module == '__mp_main__' else self.module}"

    def named(self, name: str) -> str:
        """``name`` as the code reads it."""
        return name


def _classes_held(table: dict[Any, Any] | list[Any] | tuple[Any, ...], module: str) -> list[tuple[Any, type]]:
    """The classes of ``module`` among the first items of a dict, list or tuple, by key or index:
    their attributes are what code creating or calling them changes (``type(self).calls += 1``)."""
    items = table.items() if type(table) is dict else enumerate(table)
    return [(k, v) for k, v in itertools.islice(items, _HANDLERS_LOOKED_AT) if _module_class(v, module)]


def _classes_behind(value: Any) -> list[tuple[str, type]]:
    """The user's classes a value stands for without being one, each with where it holds it: a
    partial's (``partial(Box, 3)``), a typing alias's (``Box[int]``, ``Annotated[Box, ...]``,
    ``Optional[Box]``), whose calls make that class's objects."""
    held: list[tuple[str, Any]]
    if isinstance(value, type):  # its plugins: Base.__subclasses__()
        subclasses: list[type] = type.__subclasses__(value)
        held = [(f".__subclasses__()[{i}]", sub) for i, sub in enumerate(subclasses)]
    elif isinstance(value, functools.partial):
        held = [(".func", value.func)]
    elif isinstance(value, types.GenericAlias) or type(value).__module__ == "typing":
        held = [(".__origin__", getattr(value, "__origin__", None))]
        held += [(f".__args__[{i}]", a) for i, a in enumerate(getattr(value, "__args__", ()))]
    else:
        return []
    return [(at, cls) for at, cls in held if isinstance(cls, type) and _users_class(cls)]


def _users_code_held(value: Any, module: str) -> TypeGuard[type | types.FunctionType]:
    """Whether ``value`` is a class or a function ``module`` defines, or one of the user's it holds
    (``from othermod import Counter``): compared by its own attributes."""
    if isinstance(value, type):
        return _module_class(value, module)
    if type(value) is not types.FunctionType:
        return False
    # A library's wrapper of the user's function too: a singledispatch function's registry.
    return value.__module__ == module or users_function(value) or users_function(unwrapped(value))


def _module_class(value: Any, module: str) -> TypeGuard[type]:
    """Whether ``value`` is a class of ``module``, or one of the user's it holds (a registry's)."""
    return isinstance(value, type) and (value.__module__ == module or _users_class(value))


class Attributes:
    """What a class or a function holds of its own that is data, as a state: a class's
    attributes (``total = 0``, ``registry = []``), a function's attributes (``f.calls``) and
    what its closure captured; methods, properties, dunder entries and code left out."""

    __slots__ = ("owner",)

    def __init__(self, owner: type | types.FunctionType) -> None:
        self.owner = owner

    def __getstate__(self) -> dict[str, Any]:
        owner = self.owner
        if type(owner) is types.FunctionType:
            return function_state(owner)
        # What it inherits of its user's bases too: type(self).hits += 1 on a subclass binds its own.
        bases = [base for base in reversed(owner.__mro__) if base is owner or _users_class(base)]
        state = {
            k: v
            for base in bases
            for k, v in vars(base).items()
            if not special(k) and (not isinstance(v, CODE) or type(v) is types.ModuleType)  # Holder.mod.HITS += 1
        }
        # A cached static or class method's results (Tok.encode("ab").append(1)); what a method
        # holds (a mutable default, seen=[]; in a class a factory made, what its closure captured).
        members = [(k, v) for base in bases for k, v in vars(base).items()]
        state.update(
            (k, v.__func__)
            for k, v in members
            if isinstance(v, (staticmethod, classmethod)) and cached_function(v.__func__)
        )
        state.update((k, attributes_of(v)) for k, v in members if type(v) is types.FunctionType and function_state(v))
        # Outer.Inner.count: a class of its module it holds, by module, not by qualified name
        # (cloudpickle's copy of a nested class has its bare name for one).
        nested = ((k, v) for k, v in vars(owner).items() if _module_class(v, owner.__module__) and v is not owner)
        state.update((k, attributes_of(cls)) for k, cls in nested if not special(k))
        return state

    def place(self, name: str) -> str:
        """Where ``name`` is, for a refusal: what the function captured, a default, an attribute."""
        owner = self.owner
        if type(owner) is types.FunctionType and name in owner.__code__.co_freevars:
            return f"{name}, captured by the function"
        if type(owner) is types.FunctionType and name in data_defaults(owner):
            return f"{name}, the default of the function's parameter"
        return f"{self.named(name)}, an attribute of {'the class' if isinstance(owner, type) else 'the function'}"

    def named(self, name: str) -> str:
        """``name`` as the code reads it: a capture or a default by itself, an attribute on its owner."""
        owner = self.owner
        own = type(owner) is types.FunctionType and (name in owner.__code__.co_freevars or name in data_defaults(owner))
        return name if own else f"{owner.__qualname__}.{name}"


_ATTRIBUTES: weakref.WeakKeyDictionary[Any, Attributes] = weakref.WeakKeyDictionary()


def attributes_of(owner: type | types.FunctionType) -> Attributes:
    """``owner``'s own data, one object per owner: a refusal finds it where it was compared."""
    if owner not in _ATTRIBUTES:
        _ATTRIBUTES[owner] = Attributes(owner)
    return _ATTRIBUTES[owner]


_UNBOUND = object()


#: What a function reads by name, as _states compares it.
Reads = ReadGlobals | Attributes


def reads_of(fn: Any, caller: int, carried: list[Any]) -> list[Reads]:
    """What ``fn`` (a function) reads by name, where it holds copies of the caller's: in another
    process than ``caller``'s (in the caller's process every function is the caller's own, one
    sent by value found again: see _chunks). What it holds itself (its captures, its
    attributes), and the globals it names (through the functions and classes it reaches): its
    own module's, and other modules' (Dask and Ray send a module by reference). None of a
    library's function (its file in the standard library or installed packages), of code
    autoconvert generated (its namespace no module's) or of autoconvert's own. ``carried``: what
    the function carries whose code it may run (the object a method is bound to, with its
    class's methods and the functions its attributes hold; a partial's function arguments; a
    wrapper's registry of functions)."""
    if not users_function(fn) or os.getpid() == caller:
        return []
    seeds = [code for value in carried for code in _code_reached(value)]
    reads: list[Reads] = [attributes_of(fn)]
    # Its own module's whatever it names: what no code followed reaches changes there too.
    found = _names(fn, True, seeds)
    # Every class and number of a module compared, but of builtins (what the user added there, by name).
    found = [(ns, names) for ns, names in found if names or ns is fn.__globals__]
    return reads + [ReadGlobals(ns, tuple(names), ns is not vars(builtins)) for ns, names in found]


def globals_named(fn: Any) -> list[tuple[str, Any]]:
    """The globals ``fn`` (through its wrappers) names, as they are now, each with where it is
    (``global SQUARE of module __main__``): what cloudpickle sends with a script's function."""
    fn = unwrapped(fn)
    if not users_function(fn):
        return []
    named = []
    for namespace, names in _names(fn, True, []):
        reads = ReadGlobals(namespace, tuple(names))
        named += [(reads.place(name), namespace[name]) for name in names if name in namespace]
    return named


def per_thread_named(fn: Any, kind: type[PerThread]) -> list[tuple[str, PerThread]]:
    """The globals of ``kind`` (a ``ContextVar``, a ``threading.local``) ``fn`` (through partials,
    bound methods, callable objects and wrappers) names among its module's globals, through the
    code of its module it reaches (its object's methods too: ``self.helper()``), each with where
    it is (``global depth of module __main__``): what a sample sets there is its context's, its
    thread's. None where its module holds none."""
    carried: list[Any] = []
    for _ in range(16):
        if isinstance(fn, functools.partial):
            carried += [*fn.args, *fn.keywords.values()]
            fn = fn.func
        elif isinstance(fn, types.MethodType):
            carried.append(fn.__self__)
            fn = fn.__func__
        elif unwrapped(fn, 1) is not fn:
            fn = unwrapped(fn, 1)
        elif not isinstance(fn, types.FunctionType) and isinstance(
            inspect.getattr_static(type(fn), "__call__", None), types.FunctionType
        ):
            carried.append(fn)  # a callable object: its __call__ and its other methods
            fn = type(fn).__call__
        else:
            break
    if not users_function(fn) or not any(isinstance(v, kind) for v in fn.__globals__.values()):
        return []
    named = []
    for namespace, names in _names(fn, False, [code for value in carried for code in _code_reached(value)]):
        reads = ReadGlobals(namespace, tuple(names))
        named += [(reads.place(n), namespace[n]) for n in names if isinstance(namespace.get(n), kind)]
    return named


def class_attributes(cls: type, caller: int) -> list[Attributes]:
    """A class's attributes (a class method's, a method's object's: ``type(self).count += 1``),
    where they are copies of the caller's: in another process. None in the caller's process,
    where every class is the caller's own (one sent by value is found again there, see _chunks),
    nor of a library's class."""
    return [attributes_of(cls)] if os.getpid() != caller and _users_class(cls) else []


@functools.lru_cache(maxsize=1024)
def _users_class(cls: type) -> bool:
    """Whether ``cls`` is a class of the user's code: by its own methods' file (a script's class
    sent by value has no module where it arrives), else by its module's (an Enum, a dataclass
    without methods of its own), else by its bases' methods'."""
    if cls.__module__.partition(".")[0] == "autoconvert":
        return False
    members = (m for k, m in vars(cls).items() if not k.startswith("_"))  # a library's own (Enum's __new__) left out
    own = [m for m in members if isinstance(m, (types.FunctionType, staticmethod, classmethod, property))]
    files = [_file_of(own[0]) if own else None, getattr(sys.modules.get(cls.__module__), "__file__", None)]
    files += [f.__code__.co_filename for f in methods_of(cls)[:1]]
    return users_file(next((f for f in files if f is not None), None))


def _file_of(member: Any) -> str | None:
    """The file of a class member's code: a method's, a static or class method's, a property's getter's."""
    function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
    return getattr(getattr(function, "__code__", None), "co_filename", None)


def modules_of(classes: Any, caller: int) -> list[ReadGlobals]:
    """The modules of the user's that define ``classes`` (an argument's, an argument that is a
    class), each compared as its function's own is (every class and number it holds), where
    they are copies of the caller's: in another process. An argument's method changes its
    class there (``type(self).hits += 1``) as the function's own module's code does; a class
    sent by value (a script's, on Dask) is compared where it is made (see _chunks)."""
    if os.getpid() == caller:
        return []
    modules: dict[int, ReadGlobals] = {}
    for cls in classes:
        module = sys.modules.get(cls.__module__)
        namespace = getattr(module, "__dict__", None)
        if (
            type(namespace) is dict
            and id(namespace) not in modules
            and namespace.get(cls.__qualname__.partition(".")[0]) is not None  # defined there, not sent by value
            and _users_class(cls)
        ):
            modules[id(namespace)] = ReadGlobals(namespace, (), True)
    return list(modules.values())


def kinds_of(value: Any) -> list[type]:
    """The classes ``value`` brings whose code may change them: its own (itself, a class), what
    autoconvert wraps of it (a torch module handed as a callback), and, for a function's
    compared attributes, the classes of what its closure captured and its parameters'
    defaults hold (``def f(x, obj=models.Det())``, ``cls=models.Det``)."""
    inner = unwrapped(value, 1) if type(value).__module__.startswith("autoconvert.") else value
    attributes = own_dict(inner)  # and the classes its attributes hold (h.kind.uses += 1)
    held = (
        [value, inner, *(v for v in attributes.values() if isinstance(v, type))]
        if type(attributes) is dict
        else [value, inner]
    )
    if type(value) is Attributes and type(value.owner) is types.FunctionType:
        fn = value.owner
        held += [*captured(fn).values(), *(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()]
    return [v if isinstance(v, type) else type(v) for v in held]


def _names(
    fn: types.FunctionType, elsewhere: bool, seeds: list[tuple[types.CodeType, dict[str, Any]]]
) -> list[tuple[dict[str, Any], dict[str, None]]]:
    """The global names ``fn``'s code (and the code ``seeds`` of what it carries) loads, binds or deletes,
    with the namespace they are in: its module's, and (``elsewhere``: in another process) the
    modules' of the user's functions it reaches and of the attributes it reads of the user's
    modules (``othermod.state``); through its nested code and the functions (decorated,
    partial, in a dict of handlers), classes and objects of its module it names."""
    found: dict[int, tuple[dict[str, Any], dict[str, None]]] = {}
    codes = [(fn.__code__, fn.__globals__), *seeds]
    seen: set[int] = set()
    while codes:
        code, namespace = codes.pop()
        if id(code) in seen or (namespace is not fn.__globals__ and not elsewhere):
            continue  # another module's, in the caller's process: the caller's own
        seen.add(id(code))
        codes += _names_in(code, namespace, found, elsewhere)
    return list(found.values())


def _names_in(
    code: types.CodeType,
    namespace: dict[str, Any],
    found: dict[int, tuple[dict[str, Any], dict[str, None]]],
    elsewhere: bool,
) -> list[tuple[types.CodeType, dict[str, Any]]]:
    """The global names ``code`` loads, binds or deletes, added to ``found`` by namespace (and,
    ``elsewhere``, the user's modules' attributes it reads: ``othermod.STEP += 1``, through a
    package, ``pk.sub.STEP``, or a module imported in the function, ``import m as L``); the
    code it reaches (nested code, what the names hold)."""
    codes: list[tuple[types.CodeType, dict[str, Any]]] = []
    names = found.setdefault(id(namespace), (namespace, {}))[1]
    module: dict[str, Any] | None = None  # the user's module the instruction before left on the stack
    importing: dict[str, Any] | None = None  # the user's module a from-import takes names of
    aliases: dict[str, dict[str, Any]] = {}  # local names bound to the user's modules (import m as L)
    fromlist: Any = None
    for instruction in dis.get_instructions(code):
        name, reached, opname = instruction.argval, _UNBOUND, instruction.opname
        if opname in _KEEPING_THE_MODULE:
            continue  # othermod.STEP += 1 copies the module before its attribute is read
        if opname in _LOCAL_LOADS and name in aliases:  # a module imported in the function
            module = aliases[name]
            continue
        if opname in _GLOBAL_OPS:
            value = _global(namespace, name, elsewhere, found)
            if isinstance(value, types.ModuleType):
                module = _users_module(elsewhere, value)
                continue
            if value is not _UNBOUND:
                names[name], reached = None, value
        elif opname == "IMPORT_NAME":  # a local import: the package itself, but for a from-import
            imported = sys.modules.get(name if fromlist else name.partition(".")[0])
            module = importing = _users_module(elsewhere, imported)
            continue
        elif opname == "IMPORT_FROM" and importing is not None and name in importing:
            module = _users_module(elsewhere, importing[name])
            if module is None:
                found.setdefault(id(importing), (importing, {}))[1][name] = None
                reached = importing[name]
            else:
                continue
        elif opname in _LOCAL_STORES and module is not None:
            aliases[name] = module
        elif opname in _ATTRIBUTE_OPS and module is not None and name in module:
            submodule = _users_module(elsewhere, module[name])
            if submodule is not None:  # a package's module: pk.sub.STEP += 1
                module = submodule
                continue
            found.setdefault(id(module), (module, {}))[1][name] = None
            reached = module[name]
        elif opname in _ATTRIBUTE_OPS and module is not None and "__getattr__" in module:
            reached = module["__getattr__"]  # an attribute the module makes up (PEP 562): what its code reads
        elif isinstance(name, types.CodeType):
            codes.append((name, namespace))
        elif opname == "POP_TOP":
            importing = None
        fromlist = name if opname == "LOAD_CONST" else None
        module = None
        if reached is not _UNBOUND:
            codes += _code_reached(reached)
    return codes


def _users_module(elsewhere: bool, value: Any) -> dict[str, Any] | None:
    """A module of the user's namespace, where the function runs in another process."""
    if elsewhere and type(value) is types.ModuleType and users_file(value.__dict__.get("__file__")):
        return vars(value)
    return None


@functools.lru_cache(maxsize=256)
def names_class_bodies_read(code: types.CodeType) -> tuple[str, ...]:
    """The globals the bodies of the class statements inside ``code`` (nested ones too) read
    by name: the names they load and do not bind themselves, dunders left out."""
    names: dict[str, None] = {}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(dict.fromkeys(names_class_bodies_read(const)))
            instructions = list(dis.get_instructions(const))
            bound = {i.argval for i in instructions if i.opname == "STORE_NAME"}
            names.update(
                (i.argval, None)
                for i in instructions
                if i.opname in _BY_NAME and i.argval not in bound and not special(i.argval)
            )
    return tuple(names)


#: The instructions a class statement's body reads a global with (an annotation scope's too).
_BY_NAME = frozenset({"LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})

#: The instructions that read, bind or delete a global (a class statement's body inside the
#: function reads them by ``LOAD_NAME``, an annotation scope by ``LOAD_FROM_DICT_OR_GLOBALS``);
#: those that read an attribute.
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", *_BY_NAME})
_ATTRIBUTE_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR"})


def _global(
    namespace: dict[str, Any], name: str, elsewhere: bool, found: dict[int, tuple[dict[str, Any], dict[str, None]]]
) -> Any:
    """The global ``name`` of ``namespace``; where it has none, one the user's code added to
    builtins is found there instead (``elsewhere``), as builtins' own name."""
    value = namespace.get(name, _UNBOUND)
    if value is _UNBOUND and elsewhere and _added_builtin(name):
        found.setdefault(id(vars(builtins)), (vars(builtins), {}))[1][name] = None
    return value


def _added_builtin(name: str) -> bool:
    """Whether ``name`` is one the user's code added to ``builtins`` (``builtins.LOG = []``), which
    any module's code reads as its global: data, not Python's functions, classes, constants or
    the site's helpers (``help``, ``exit``)."""
    value = vars(builtins).get(name, _UNBOUND)
    return not (
        value is _UNBOUND
        or name.startswith("__")
        or isinstance(value, (type, types.BuiltinFunctionType, bool))
        or value is None
        or value is Ellipsis
        or value is NotImplemented
        or type(value).__module__ == "_sitebuiltins"
    )


#: The instructions that read or bind a local name (an alias of a module imported in the function).
_LOCAL_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF"})
_LOCAL_STORES = frozenset({"STORE_FAST", "STORE_DEREF"})
#: The instructions between a module's load and its attribute's that leave it on top of the stack.
_KEEPING_THE_MODULE = frozenset({"COPY", "CACHE", "EXTENDED_ARG", "NOP"})


def _code_reached(value: Any, depth: int = 4) -> list[tuple[types.CodeType, dict[str, Any]]]:
    """The user's code ``value`` runs that may read globals: a function's (through decorators
    and partials: an ``lru_cache``'d helper), the methods (properties, cached properties too)
    of a class or of an object's class; and, ``depth`` levels down, the functions and objects a
    table holds (``_TABLES``: a dict by its keys and values, a list, a tuple, a set, a deque, an
    object array; a table of handlers; a list of callback objects; a pipeline's
    ``(name, step)`` pairs, which take no level of their own; a torch module's hooks, in an
    ``OrderedDict``), a function's or an object's attributes hold (a ``singledispatch``
    function's registry, ``np.vectorize``'s function, ``self.fn``, ``self.step.fn``), a partial
    binds."""
    if depth == 0 or isinstance(value, types.ModuleType):  # a module held runs nothing by being held
        return []
    reached = []
    if isinstance(value, _TABLES):  # an OrderedDict too (a torch module's hooks)
        for item in _table_items(value):
            if type(item) is tuple:
                reached += _code_reached(item, depth)
            elif _may_run_code(item):
                reached += _code_reached(item, depth - 1)
        if type(value) in _TABLES:
            return reached
    kind = value if isinstance(value, type) else type(value)
    if not isinstance(value, types.FunctionType):  # its class's methods, where they are the user's
        reached += [(f.__code__, f.__globals__) for f in methods_of(kind) if users_function(f)]
        # A dataclass's default factories, which its generated __init__ calls.
        fields = getattr(kind, "__dataclass_fields__", None)
        factories = [getattr(f, "default_factory", None) for f in fields.values()] if type(fields) is dict else []
        reached += [c for factory in factories if callable(factory) for c in _code_reached(factory, depth - 1)]
    if isinstance(value, functools.partial):
        reached += [c for a in (*value.args, *value.keywords.values()) for c in _code_reached(a, depth - 1)]
        value = value.func
    if isinstance(value, types.MethodType):  # a bound method: its function's code, its object's methods
        return reached + _code_reached(value.__func__, depth) + _code_reached(value.__self__, depth - 1)
    inner = unwrapped(value)
    if users_function(inner):
        reached.append((inner.__code__, inner.__globals__))
        captures = captured(inner).values()  # a closure's captured closures (a handler's handler)
        reached += [c for v in captures if callable(v) for c in _code_reached(v, depth - 1)]
    if _hooked(value):  # the hooks register_hook gave a tensor (a module's parameter), which backward() runs
        reached += [c for hook in _table_items(value._backward_hooks) for c in _code_reached(hook, depth)]
    if isinstance(value, logging.Logger):  # what its records reach: its handlers' emit
        reached += [c for handler in _users_handlers(value) for c in _code_reached(handler, depth - 1)]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.nn.Module):  # the hooks every module's forward runs
        tables = [getattr(torch.nn.modules.module, name, None) for name in _GLOBAL_MODULE_HOOKS]
        reached += [c for table in tables if table for c in _code_reached(table, depth - 1)]
    # An object's attributes; a class's own, data not methods (a table of handlers: table = {"sum": h}).
    attributes = (
        own_dict(value) if not isinstance(value, type) else {k: v for k, v in vars(value).items() if not special(k)}
    )
    held = [v for v in attributes.values() if v is not value] if type(attributes) is dict else []
    if isinstance(value, type):
        held = [v for v in held if isinstance(v, _TABLES)]
    # A table an attribute holds takes no level of its own: its items do (a pipeline's steps).
    reached += [
        c for v in held if _may_run_code(v) for c in _code_reached(v, depth if isinstance(v, _TABLES) else depth - 1)
    ]
    return reached


def _may_run_code(value: Any) -> bool:
    """Whether ``value``, held by a table or an object, may hold code the function runs: a
    callable, a table, a tensor with hooks, an object with attributes (``cb.fn``)."""
    return callable(value) or isinstance(value, _TABLES) or _hooked(value) or type(own_dict(value)) is dict


#: torch's tables of the hooks every module runs (``register_module_forward_hook``): its
#: private names, read where torch has them.
_GLOBAL_MODULE_HOOKS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)


def _users_handlers(logger: logging.Logger) -> list[logging.Handler]:
    """The handlers of classes of the user's code a record logged to ``logger`` reaches (its
    own and its ancestors' while they propagate), whose ``emit`` may change globals (a list of
    records). The library's (a stream's, a file's) write where they are."""
    handlers: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        handlers += [h for h in current.handlers if users_function(getattr(type(h), "emit", None))]
        current = current.parent if current.propagate else None
    return handlers


def _hooked(value: Any) -> bool:
    """Whether ``value`` is a tensor with hooks of ``register_hook``."""
    torch = sys.modules.get("torch")  # never imported here
    return torch is not None and isinstance(value, torch.Tensor) and bool(value._backward_hooks)


def _table_items(table: Any) -> list[Any]:
    """The first ``_HANDLERS_LOOKED_AT`` items of a table (a mapping's keys and values; an object
    array's items), read as the builtin holds them: a subclass's own ``values()`` (a lazy mapping
    importing what it names) is not called."""
    if isinstance(table, dict):
        items: Any = itertools.chain(dict.values(table), dict.keys(table))
    elif isinstance(table, types.MappingProxyType):
        items = itertools.chain(table.values(), table.keys())
    elif isinstance(table, np.ndarray):
        items = table.flat if table.dtype.hasobject else ()
    else:  # a list, a tuple, a set, a deque (a subclass of one)
        items = next(iterate for base, iterate in _ITERATORS.items() if isinstance(table, base))(table)
    return list(itertools.islice(items, _HANDLERS_LOOKED_AT))


#: How a table that is no mapping is iterated: as its builtin base iterates it.
_ITERATORS: dict[type, Any] = {
    list: list.__iter__,
    tuple: tuple.__iter__,
    set: set.__iter__,
    frozenset: frozenset.__iter__,
    collections.deque: collections.deque.__iter__,
}

#: The containers whose items are looked at for functions (a table of handlers, a registry of
#: callbacks, a set of them, an object array holding them).
_TABLES = (dict, list, tuple, set, frozenset, collections.deque, np.ndarray, types.MappingProxyType)


#: The items of a table a function names looked at for functions (a table of handlers).
_HANDLERS_LOOKED_AT = 64


def methods_of(kind: type) -> list[types.FunctionType]:
    """The Python functions of a class's methods, static methods, class methods, properties
    and cached properties, its bases' too (an inherited method, ``super().step()``)."""
    functions: list[Any] = []
    for member in (m for klass in kind.__mro__ if klass is not object for m in vars(klass).values()):
        if isinstance(member, (staticmethod, classmethod)):
            functions.append(member.__func__)
        elif isinstance(member, property):
            functions += [member.fget, member.fset, member.fdel]
        elif isinstance(member, functools.cached_property):
            functions.append(member.func)
        else:
            functions.append(member)
    return [f for f in functions if type(f) is types.FunctionType]
