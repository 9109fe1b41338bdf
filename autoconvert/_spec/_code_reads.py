"""What a code object reads, as its bytecode says: the names it loads, the attribute chains and
constant keys it reads on each variable, its local imports, ``super()`` in its forms.

The callables' rule (see _callbacks.written_in_torch) judges a callable by the values its code
reads; this module decodes which, once per code object, by opcode name as each Python version
names them (Python 3.11 calls in two instructions, 3.12 loads ``super()``'s attribute in one,
3.13 loads two locals in one). It reads; it never runs the code nor looks at a value.
"""

from __future__ import annotations

import dis
import functools
import types
from collections.abc import Iterator
from typing import Any, NamedTuple

#: What code reads on a variable: attribute names, and 1-tuples of the constant keys it
#: indexes by (``self.layers[0]`` on ``self`` is ``("layers", (0,))``); empty: the variable
#: read whole.
ReadPath = tuple[Any, ...]
#: The paths read on each variable, by its name: ``app.parts.head`` is ``{"app": (("parts", "head"),)}``.
_Chains = dict[str, tuple[ReadPath, ...]]


class CodeReads(NamedTuple):
    """What a code object (with the functions nested in it) reads, as its bytecode says."""

    #: The names it loads as globals (``LOAD_GLOBAL``), never attribute names.
    globals: frozenset[str]
    #: Every global and attribute name (``co_names``): ``torch.from_numpy`` is read as either.
    names: frozenset[str]
    #: Its imports whose names it loads afterwards: (module, name), name None for the module.
    imports: frozenset[tuple[str, str | None]]
    #: The attribute chains it reads on a global (``cfg.a``, ``mymod.helper``).
    global_chains: _Chains
    #: The attribute chains it reads on a local or closure variable (``self.layers``).
    local_chains: _Chains
    #: The local names its imports bind that it loads: name -> (module, name).
    local_imports: dict[str, tuple[str, str | None]]
    #: The (class name, variable) of each ``super(C, self)`` it reads attributes on, whose
    #: chains ``local_chains`` holds under ``super_of(C, self)``.
    named_supers: frozenset[tuple[str, str]]


#: The opcodes loading a global (LOAD_NAME in class bodies and exec'd code; the last one in
#: Python 3.12's annotation scopes).
_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})

#: The opcodes loading an attribute of what is on top of the stack (LOAD_METHOD: Python 3.11).
_ATTRIBUTE_LOADS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})

#: The opcodes that, between an import and the name it binds, keep the import's value in hand.
_IMPORTING = frozenset({"IMPORT_FROM", "SWAP", "COPY", "POP_TOP", "ROT_TWO"})


@functools.lru_cache(maxsize=4096)  # code objects outlive their functions: lambdas made in a loop share one
def code_reads(code: types.CodeType) -> CodeReads:
    """``code``'s ``CodeReads``, decided once per code object."""
    codes = _with_nested(code)
    instructions = [list(dis.get_instructions(c)) for c in codes]
    loaded = {name for each in instructions for i in each for name in _local_loads(i)}
    imports = {local: source for each in instructions for local, source in _local_imports(each) if local in loaded}
    chains: tuple[dict[str, set[ReadPath]], dict[str, set[ReadPath]]] = ({}, {})
    for each in instructions:
        for is_global, root, path in _chains(each):
            chains[is_global].setdefault(root, set()).add(path)
    local_chains, global_chains = ({root: tuple(paths) for root, paths in c.items()} for c in chains)
    return CodeReads(
        frozenset(i.argval for each in instructions for i in each if i.opname in _GLOBAL_LOADS),
        frozenset(name for c in codes for name in c.co_names),
        frozenset(imports.values()),
        global_chains,
        local_chains,
        imports,
        frozenset(named[:2] for each in instructions for at in range(len(each)) if (named := _named_super(each, at))),
    )


def _chains(instructions: list[dis.Instruction]) -> Iterator[tuple[bool, str, ReadPath]]:
    """(whether it starts at a global, the variable it starts at, the path read on it) of each
    load of a variable in one code object: ``app.parts.head`` is a global's load and two
    attribute loads, ``layers[0]`` a constant subscript, a path ending at the variable a
    read of it whole. ``getattr(self, "layer")`` with a constant name reads as
    ``self.layer``. Decoded by opcode name, as each Python version names them (Python 3.13
    loads two locals in one instruction, the second on top)."""
    end = len(instructions)
    for at, instruction in enumerate(instructions):
        if instruction.opname in _GLOBAL_LOADS:
            is_global, root = True, instruction.argval
        else:
            local = _local_loads(instruction)
            if not local:
                continue
            for name in local[:-1]:
                yield False, name, ()
            is_global, root = False, local[-1]
        path: list[Any] = []
        after = at + 1
        on_super = _super_attribute(instructions, at) if is_global and root == "super" else None
        if on_super is not None:
            is_global, root, after = False, SUPER, on_super
        named = _named_super(instructions, at) if on_super is None else None
        if named is not None:
            is_global, root, after = False, super_of(*named[:2]), named[2]
            on_super = after
        of_type = None if is_global else _type_call(instructions, at)
        if of_type is not None:  # type(self).layer, read as self.__class__.layer
            path.append("__class__")
            after = of_type
        while after < end:
            op = instructions[after].opname
            got = _constant_get(instructions, after) if op in _ATTRIBUTE_LOADS else None
            if got is not None:  # d.get("a"), read as d["a"] where d is a dict
                path += ["get", (instructions[after + 1].argval,)]
                after = got
                continue
            if op in _ATTRIBUTE_LOADS or after == on_super:
                path.append(instructions[after].argval)
            elif _constant_subscript(instructions, after):
                path.append((instructions[after].argval,))
                after += 1
            elif not (op == "COPY" and instructions[after].arg == 1):  # self.count += 1 copies self
                break
            after += 1
        if _getattr_call(instructions, at, after):
            path.append(instructions[after].argval)
        yield is_global, root, tuple(path)


#: The variable name the chains read on a zero-argument ``super()`` go under (no variable's name).
SUPER = "super()"


def super_of(cls_name: str, argument: str) -> str:
    """The name the chains read on ``super(<cls_name>, <argument>)`` go under (no variable's name)."""
    return f"super({cls_name}, {argument})"


def _named_super(instructions: list[dis.Instruction], at: int) -> tuple[str, str, int] | None:
    """(the class's name, the variable, where the member's name is) of a two-argument
    ``super(C, self)`` whose ``super`` is loaded at ``at``, then a member of it (None: no
    such call): the class a global or closure variable, the second argument a variable; then a
    call with two arguments and an attribute load or ``getattr``'s constant name (see
    ``_member_named``), or LOAD_SUPER_ATTR (3.12 on)."""
    if instructions[at].opname not in _GLOBAL_LOADS or instructions[at].argval != "super":
        return None
    following = instructions[at + 1 : at + 4]
    if len(following) < 3 or not (following[0].opname in _GLOBAL_LOADS or following[0].opname == "LOAD_DEREF"):
        return None
    argument = _local_loads(following[1])
    if len(argument) != 1:
        return None
    named = following[0].argval, argument[0]
    if following[2].opname == "LOAD_SUPER_ATTR":
        return (*named, at + 3)
    end = _call_end(instructions, at + 3, 2)
    if end is not None and _member_named(instructions, at, end):
        return (*named, end)
    return None


def _super_attribute(instructions: list[dis.Instruction], at: int) -> int | None:
    """Where the member's name read on a zero-argument ``super()``, whose ``super`` is loaded
    at ``at``, is (None: ``super`` is not called so): a call with no arguments, then an
    attribute load or ``getattr``'s constant name (see ``_member_named``), or the method's
    ``__class__`` cell and first argument loaded for LOAD_SUPER_ATTR (Python 3.12 on)."""
    following = instructions[at + 1 : at + 4]
    ops = [i.opname for i in following]
    if ops[:1] == ["LOAD_DEREF"] and following[0].argval == "__class__" and ops[2:3] == ["LOAD_SUPER_ATTR"]:
        return at + 3
    calls = 2 if ops[:1] == ["PRECALL"] else 1  # Python 3.11 calls in two instructions
    no_arguments = all(op in ("PRECALL", "CALL") and i.arg == 0 for op, i in zip(ops[:calls], following, strict=False))
    if len(ops) > calls and no_arguments and _member_named(instructions, at, at + 1 + calls):
        return at + 1 + calls
    return None


def _member_named(instructions: list[dis.Instruction], at: int, end: int) -> bool:
    """Whether ``instructions[end]``, after the call of the ``super`` loaded at ``at``, names
    the member read on it: an attribute load (``super().run``), or the constant name
    ``getattr`` is given (``getattr(super(), "run")``, a default after it)."""
    if end >= len(instructions):
        return False
    return instructions[end].opname in _ATTRIBUTE_LOADS or _getattr_call(instructions, at, end)


#: The opcodes loading a constant (LOAD_SMALL_INT: Python 3.14's small ints).
_CONSTANT_LOADS = frozenset({"LOAD_CONST", "LOAD_SMALL_INT"})


def _call_end(instructions: list[dis.Instruction], at: int, arguments: int) -> int | None:
    """Where the instruction after a call with ``arguments`` arguments starting at ``at`` is
    (None: no such call there; Python 3.11 calls in two instructions)."""
    if at < len(instructions) and instructions[at].opname == "PRECALL":
        at += 1
    if at < len(instructions) and instructions[at].opname == "CALL" and instructions[at].arg == arguments:
        return at + 1
    return None


def _type_call(instructions: list[dis.Instruction], at: int) -> int | None:
    """Where the instruction after ``type(<variable>)``, whose variable is loaded at ``at``,
    is (None: the variable is not ``type``'s one argument)."""
    if at == 0 or not (instructions[at - 1].opname in _GLOBAL_LOADS and instructions[at - 1].argval == "type"):
        return None
    return _call_end(instructions, at + 1, 1)


def _constant_get(instructions: list[dis.Instruction], at: int) -> int | None:
    """Where the instruction after ``.get(<constant>)`` (a constant default after it), whose
    ``get`` is loaded at ``at``, is (None: not so called)."""
    if instructions[at].argval != "get" or at + 1 >= len(instructions):
        return None
    if instructions[at + 1].opname not in _CONSTANT_LOADS:
        return None
    with_default = at + 2 < len(instructions) and instructions[at + 2].opname in _CONSTANT_LOADS
    return _call_end(instructions, at + 2 + with_default, 1 + with_default)


def _constant_subscript(instructions: list[dis.Instruction], at: int) -> bool:
    """Whether ``instructions[at]`` loads a constant the next one indexes by (``[0]``, ``["head"]``)."""
    if at + 1 >= len(instructions) or instructions[at].opname not in _CONSTANT_LOADS:
        return False
    subscript = instructions[at + 1]
    return subscript.opname == "BINARY_SUBSCR" or (subscript.opname == "BINARY_OP" and subscript.argrepr == "[]")


def _getattr_call(instructions: list[dis.Instruction], at: int, after: int) -> bool:
    """Whether the chain loaded from ``at`` up to ``after`` is ``getattr``'s first argument,
    with a constant string as its second (``getattr(self, "layer")``, a default after it)."""
    if at == 0 or after + 1 >= len(instructions):
        return False
    before, name = instructions[at - 1], instructions[after]
    if not (before.opname in _GLOBAL_LOADS and before.argval == "getattr"):
        return False
    if not (name.opname == "LOAD_CONST" and isinstance(name.argval, str)):
        return False
    call = instructions[after + 1]
    if call.opname.startswith("LOAD") and after + 2 < len(instructions):  # a default: getattr(self, "a", None)
        call = instructions[after + 2]
    return call.opname in ("PRECALL", "CALL")


def global_names(code: types.CodeType) -> frozenset[str]:
    """The names ``code`` (with the functions nested in it) loads as globals."""
    return code_reads(code).globals


def _with_nested(code: types.CodeType) -> list[types.CodeType]:
    """``code`` and the code of every function (lambda, comprehension) defined inside it."""
    nested = [const for const in code.co_consts if isinstance(const, types.CodeType)]
    return [code, *(inner for const in nested for inner in _with_nested(const))]


def _local_loads(instruction: dis.Instruction) -> tuple[str, ...]:
    """The local or closure variables ``instruction`` loads (Python 3.13's superinstructions
    load two; STORE_FAST_LOAD_FAST stores its first)."""
    op, value = instruction.opname, instruction.argval
    if op == "STORE_FAST_LOAD_FAST":
        return (value[1],)
    if op.startswith("LOAD_FAST") or op in ("LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"):
        return value if isinstance(value, tuple) else (value,)
    return ()


def _local_imports(instructions: list[dis.Instruction]) -> Iterator[tuple[str, tuple[str, str | None]]]:
    """(the local name bound, (module, name)) for each import statement in one code object:
    ``import a.b`` binds ``a`` to module ``a``; ``import a.b as c`` binds ``c`` to ``a.b``;
    ``from a import b`` binds ``b`` to ``a``'s ``b``."""
    module, from_list, chained, name = None, False, False, None
    previous = None
    for i in instructions:
        op = i.opname
        if op == "IMPORT_NAME":
            module, from_list, chained, name = (
                i.argval,
                previous is not None and previous.argval is not None,
                False,
                None,
            )
        elif module is not None and op == "IMPORT_FROM":
            name, chained = (i.argval, False) if from_list else (None, True)
        elif module is not None and op.startswith("STORE_"):
            if from_list:
                yield i.argval, (module, name)
            else:
                yield i.argval, (module if chained else module.partition(".")[0], None)
                module = None
        elif op not in _IMPORTING:
            module = None
        previous = i
