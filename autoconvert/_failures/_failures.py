"""Why a decorated call failed, where how its arguments were handed is the cause.

NumPy, Cython, numba and OpenCV refuse read-only arrays in their own words (each library's
adapter holds them); these tell such a rejection of an array autoconvert handed over from the
function's own errors, and turn it into a ReadOnlyError naming the argument. Other errors get notes where a sparse tensor, a
float16 tensor or a callable handed arrays is the likely cause.
"""

from __future__ import annotations

import dis
import functools
import inspect
import re
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from autoconvert._adapters import _cython
from autoconvert._adapters._table import (
    READ_ONLY_VIEWS,
    REFUSED_FLAGS,
    REJECTED_BUFFERS,
    REJECTED_DEMANDS,
    REJECTED_ON_ENTRY,
    REJECTED_WRITES,
    WRITEABLE_DEFAULTS,
    compiled_rejection,
)
from autoconvert._conversions._dtypes import WIDENED_HALF
from autoconvert._conversions._memory import strides_overlap
from autoconvert._conversions._sparse import LAYOUT_FORMAT
from autoconvert._errors import GetAttrKey, ReadOnlyError, keystr, message
from autoconvert._spec._inputs import Inputs
from autoconvert._spec._signature import ARRAYS, Given, tensor_paths

#: The instructions of a ``raise`` statement: an error raised there is Python code's own.
_RAISES = frozenset({dis.opmap["RAISE_VARARGS"], dis.opmap["RERAISE"]})
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


#: The attribute of an error raised in another process (a batched map's worker), whose
#: traceback does not come back, that holds the handed arrays its refusal hit (see
#: wrote_into_handed): told apart where it was raised, then set to the caller's arrays.
REJECTED_ELSEWHERE = "autoconvert_refused"


def wrote_into_handed(
    error: ValueError | TypeError, arrays: list[tuple[str, Any]], kwargs: dict[str, Any]
) -> list[str] | None:
    """Whether ``error`` is NumPy refusing a write into an array autoconvert handed over, and
    if so the paths of the handed ``arrays`` (``(path, array)`` pairs) it may have hit
    (empty where none can be told); None where it is not that refusal.

    NumPy words each refusal "<what> is read-only", the what naming the write ("assignment
    destination", "output array", "sort array", "underlying array" for ``np.fill_diagonal``,
    "array" for ``Generator.shuffle``; SciPy's ndimage adds a full stop; scipy.fft's pybind11
    code says "array is not writeable"), and does not say which array it was. So: those
    words, raised by compiled code (not by a ``raise`` in the frame that raised), where every
    read-only array in that frame shares memory with a handed array; those are the ones hit.
    The user's own errors, and writes into read-only arrays the function made
    (``np.broadcast_to``, of its own arrays or of handed ones), keep their own error. Where
    the function is compiled code (a ufunc's ``out=``, a Cython method), the frame that
    raised is the caller's, whose traceback this is: the destination was an argument, ``out``
    where that was handed read-only.
    """
    elsewhere = getattr(error, REJECTED_ELSEWHERE, None)
    if elsewhere is not None:
        return [path for path, a in arrays if any(a is hit for hit in elsewhere)]
    tb = error.__traceback__
    if tb is None or not rejects_write(error):
        return None
    raised = tb
    while tb.tb_next is not None:
        tb = tb.tb_next
        if tb.tb_frame.f_code.co_code != _cython.FRAME:
            raised = tb
    read_only = [(path, a) for path, a in arrays if not a.flags.writeable]
    if raised is error.__traceback__:  # the caller's frame: compiled code was the function
        out = [path for path, a in read_only if any(a is o for _, o in ARRAYS.leaves_with_paths(kwargs.get("out")))]
        return (out or [path for path, _ in read_only]) if read_only else None
    code = raised.tb_frame.f_code
    if code.co_code[raised.tb_lasti] in _RAISES or _makes_read_only_views(code):
        return None
    values = raised.tb_frame.f_locals.values()
    local = [v for v in values if isinstance(v, np.ndarray) and not v.flags.writeable]
    local = local or [v for v in _arrays_held(values) if not v.flags.writeable]
    local = _written_by_failure(raised) or _read_by_failure(raised, local) or local
    if any(_broadcast(v) and not any(_views_expanded(v, h) for _, h in arrays) for v in local):
        return None  # np.broadcast_to's views are read-only by NumPy's own rule, whatever they view
    if not local or not all(any(_of_handed(v, h) for _, h in arrays) for v in local):
        return None
    return [path for path, h in read_only if any(_of_handed(v, h) for v in local)]


def _of_handed(v: np.ndarray[Any, Any], handed: np.ndarray[Any, Any]) -> bool:
    """Whether ``v`` is ``handed`` or a view of its memory; an empty one has no memory to
    share, so by the array both view (NumPy makes a view's base the array that owns it)."""
    return np.may_share_memory(v, handed) or _viewed(v) is _viewed(handed)


def _viewed(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The array ``a`` views, or ``a`` itself where it views none."""
    return a.base if isinstance(a.base, np.ndarray) else a


def _read_by_failure(tb: types.TracebackType, local: list[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    """Those of a frame's read-only ``local`` arrays that the expression which raised reads
    (its source span: a call's arguments, a store's target), itself or through an object or
    container: the array compiled code refused, among the others the frame holds; none where
    that cannot be told."""
    read = _values_read(tb)
    read_arrays = [v for v in read if isinstance(v, np.ndarray)] + _arrays_held(read)
    # None of the frame's: a global it reads (``TABLE.setflags(write=True)``), the function's own.
    return [a for a in local if any(a is r for r in read_arrays)] or [a for a in read_arrays if not a.flags.writeable]


def _values_read(tb: types.TracebackType) -> list[Any]:
    """The values of the variables (local, captured, global) the expression which raised reads,
    first read first; none where that cannot be told."""
    code = tb.tb_frame.f_code
    instructions = list(dis.get_instructions(code))
    failing = next((i for i in instructions if i.offset == tb.tb_lasti), None)
    # No source position: every read-only array of the frame (with no columns, under
    # ``python -X no_debug_ranges``, the span is the whole line).
    if failing is None or failing.positions is None or failing.positions.lineno is None:
        return []
    span = failing.positions
    names: dict[str, None] = {}  # ordered, once each
    for instruction, following in zip(instructions, [*instructions[1:], None], strict=True):
        if not instruction.opname.startswith(_READS):
            continue
        # A superinstruction reading two locals (``LOAD_FAST_LOAD_FAST``, Python 3.13 on) carries
        # its first read's position; its second read sits where the next instruction does.
        first, *second = instruction.argval if isinstance(instruction.argval, tuple) else [instruction.argval]
        if _within(instruction.positions, span):
            names[first] = None
        if second and following is not None and _within(following.positions, span):
            names.update(dict.fromkeys(second))
    frame, namespace = tb.tb_frame.f_locals, tb.tb_frame.f_globals
    return [frame[name] if name in frame else namespace[name] for name in names if name in frame or name in namespace]


def _written_by_failure(tb: types.TracebackType) -> list[np.ndarray[Any, Any]]:
    """The read-only arrays an augmented assignment that raised (``self.buf += o``, ``a -= b``,
    ``d["k"] *= 2``) writes into: its target, which the store after the operator names (an
    attribute of an object the expression reads, a local; for an item, the first value it
    reads, or the arrays of that object), never the operand it only reads; none for any
    other failure."""
    instructions = list(dis.get_instructions(tb.tb_frame.f_code))
    at = next((n for n, i in enumerate(instructions) if i.offset == tb.tb_lasti), None)
    if at is None or instructions[at].opname != "BINARY_OP" or not instructions[at].argrepr.endswith("="):
        return []
    store = next((i for i in instructions[at + 1 :] if i.opname.startswith("STORE_")), None)
    if store is None:
        return []
    read = _values_read(tb)
    if store.opname == "STORE_ATTR":
        targets = [vars(v).get(store.argval) for v in read if _has_attributes(v)]
    elif store.opname == "STORE_SUBSCR":  # the first value read holds the item: it, or an object's arrays
        targets = [*read[:1], *_arrays_held(read[:1])]
    else:
        targets = [tb.tb_frame.f_locals.get(store.argval)]
    arrays = [a for _, a in ARRAYS.leaves_with_paths(targets)]
    return [a for a in arrays if not a.flags.writeable]


def _within(at: dis.Positions | None, span: dis.Positions) -> bool:
    """Whether the source span ``at`` is known and lies inside ``span``."""
    if at is None or at.lineno is None:
        return False
    start, end = (span.lineno, span.col_offset or 0), (span.end_lineno or span.lineno, span.end_col_offset or 0)
    return start <= (at.lineno, at.col_offset or 0) and (at.end_lineno or at.lineno, at.end_col_offset or 0) <= end


#: The instructions that read a local, a closure's or a global variable (3.11 to 3.14's spellings).
_READS = ("LOAD_FAST", "LOAD_DEREF", "LOAD_NAME", "LOAD_GLOBAL")


def _makes_read_only_views(code: types.CodeType) -> bool:
    """Whether ``code`` calls a function whose views are read-only by NumPy's own rule, whatever
    they view (``broadcast_to``; ``sliding_window_view`` unless asked ``writeable=True``;
    ``as_strided`` asked ``writeable=False``): a write into one is the function's own error.
    ``as_strided(a, writeable=True)`` of a handed array is read-only because that array is."""
    called = READ_ONLY_VIEWS.intersection(code.co_names)
    if not called:
        return False
    asked = _writeable_asked(code)
    return any(
        name not in WRITEABLE_DEFAULTS or False in asked or (not WRITEABLE_DEFAULTS[name] and True not in asked)
        for name in called
    )


def _writeable_asked(code: types.CodeType) -> set[object]:
    """The constants ``code`` passes as ``writeable=`` where it is the call's last keyword:
    the value loaded just before the keyword names (``KW_NAMES``, or ``CALL_KW``'s tuple)."""
    asked: set[object] = set()
    previous = None
    for instruction in dis.get_instructions(code):
        # Python 3.11's dis leaves KW_NAMES' tuple unresolved: its argument indexes the constants.
        names = code.co_consts[instruction.arg or 0] if instruction.opname == "KW_NAMES" else instruction.argval
        if type(names) is tuple and names and names[-1] == "writeable" and previous is not None:
            asked.add(previous.argval if previous.opname == "LOAD_CONST" else None)
        previous = instruction
    return asked


def _arrays_held(values: Any) -> list[np.ndarray[Any, Any]]:
    """The arrays in the containers and the attributes of the objects among a frame's local
    ``values``, where none is a read-only array itself: NumPy's Python wrappers (``np.round``,
    ``np.cumsum``) keep the destination in ``**kwargs``, a method writes into ``self.buf``."""
    values = list(values)
    values += [vars(v) for v in values if _has_attributes(v)]
    return [a for _, a in ARRAYS.leaves_with_paths(values)]


def _has_attributes(value: Any) -> bool:
    """Whether ``value`` is an object whose ``vars()`` are its state (not a module, class or function)."""
    return hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType, types.FunctionType))


def rejects_write(error: BaseException) -> bool:
    """Whether ``error`` is worded as compiled code's rejection of a write into a read-only array."""
    text = str(error)
    if isinstance(error, TypeError):
        return any(words in text for words in REJECTED_BUFFERS)
    return text.removesuffix(".").endswith(REJECTED_WRITES) or any(words in text for words in REJECTED_DEMANDS)


class ReadOnlyRejection(NamedTuple):
    """Compiled code refused a read-only array handed over."""

    paths: list[str]  # where the arrays it may have been were (several: none can be told apart)
    writes: bool  # it refused a write (else the array itself, on entry)
    late: bool  # they are private copies of an earlier call with writeback=True, or views of them (see make_private_read_only)
    expanded: bool  # one is an expanded tensor's array, read-only since no write can reach back into it
    overlapping: bool  # one is an overlapping tensor's array (as_strided, unfold), read-only for the same reason


def read_only_rejection(
    error: BaseException, inputs: Inputs, handed: tuple[tuple[Any, ...], dict[str, Any]], given: Given
) -> ReadOnlyRejection | None:
    """Whether ``error`` is compiled code refusing a read-only array handed over, to this call
    or (kept by the method's object) to an earlier one; None where it is not such a rejection."""
    writes = compiled_rejection(error)
    if writes is None and not isinstance(error, (ValueError, TypeError)):
        return None
    # The caller's own arrays, handed as they were (np.frombuffer's, a read-only memmap's): the
    # refusal of a write into one is NumPy's, as without autoconvert.
    own = {id(a) for _, a in tensor_paths(inputs.params, given.args, given.kwargs, None, ARRAYS)}
    arrays = [(path, a) for path, a in tensor_paths(inputs.params, *handed, given.instance, ARRAYS) if id(a) not in own]
    if _has_attributes(given.instance):
        arrays += [
            (keystr("self", (GetAttrKey(name), *path)), a)
            for name, value in vars(given.instance).items()
            for path, a in ARRAYS.leaves_with_paths(value)
        ]
    if writes is not None:  # numba and OpenCV do not say which array: every read-only one handed over
        paths = [path for path, a in arrays if not a.flags.writeable]
    else:
        found = wrote_into_handed(error, arrays, handed[1])  # type: ignore[arg-type]  # one of the two
        if found is None:
            return None
        paths, writes = found, str(error) not in REJECTED_ON_ENTRY
    hit = [a for path, a in arrays if path in paths]
    return ReadOnlyRejection(
        paths=paths,
        writes=writes,
        late=bool(hit) and all(map(inputs.handed_earlier, hit)),
        expanded=any(map(_broadcast, hit)),
        overlapping=any(strides_overlap(a.shape, a.strides) for a in hit),
    )


def quoted(error: BaseException) -> str:
    """``error`` as the message's "Found": its first line that names the refusal (numba's run
    to pages, coloured), the whole error being chained."""
    lines = [_ANSI.sub("", line).strip(" >|-") for line in str(error).splitlines()]
    line = next(
        (x for x in lines if "readonly" in x or "read-only" in x or "writeable" in x), lines[0] if lines else ""
    )
    kind = type(error)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{name}({line!r})"


def _views_expanded(v: np.ndarray[Any, Any], handed: Any) -> bool:
    """Whether ``v`` is ``handed``, or a view of it where ``handed`` is an expanded tensor's
    array (a batch's sample, say): its memory takes no write, whichever view reaches it."""
    return v is handed or (_broadcast(handed) and np.may_share_memory(v, handed))


def _broadcast(a: np.ndarray[Any, Any]) -> bool:
    """Whether ``a`` repeats elements through a zero stride (a broadcast view; an empty one repeats none)."""
    return a.size > 0 and any(st == 0 and n > 1 for n, st in zip(a.shape, a.strides, strict=True))


def hints(error: Exception, inputs: Inputs, tensors: list[tuple[str, Any]], site: Callable[[str], str]) -> list[str]:
    """What the function's ``error`` may owe to how its tensor arguments (``(path, tensor)``)
    were handed: a sparse tensor crosses as a scipy.sparse array of its format, which
    dense-only code (and code that refuses COO) cannot read; float16 crosses as float16,
    which much of SciPy rejects ("array type not supported").
    ``site`` says where an option goes (see Spec.site)."""
    hints = []
    sparse = [(path, t.layout) for path, t in tensors if t.layout != torch.strided]
    if sparse:
        path, layout = sparse[0]
        fmt = LAYOUT_FORMAT.get(layout, "coo")  # SciPy has no BSC: it crosses as COO
        kind = "matrix" if inputs.policy.sparse == "matrix" else "array"
        # csgraph's shortest_path, spsolve's solvers and others take CSR or CSC, never COO.
        other = f"CSR, pass {path}.to_sparse_csr(); if it needs " if fmt == "coo" else ""
        hints.append(
            f"argument {path} is a sparse tensor, handed over as a scipy.sparse {fmt.upper()} {kind}; if the "
            f"function needs {other}a dense array, pass {path}.to_dense()"
        )
    half = [path for path, t in tensors if t.dtype is torch.float16]
    if half and inputs.widened is not WIDENED_HALF and "supported" in str(error):
        hints.append(
            f"argument {half[0]} is a float16 tensor, handed over as float16, which much of SciPy rejects; pass "
            "widen_float16=True to hand it over as float32 (results come back as float16), in "
            f"{site('widen_float16=True')}"
        )
    return hints


#: How torch refuses a NumPy value where it wants a tensor, in every torch's wordings: each names
#: the value's type (``numpy.ndarray``, a NumPy scalar's ``numpy.float64``) and the ``Tensor`` it
#: wanted ("must be Tensor, not numpy.ndarray", torch.stack's and torch.cat's "expected Tensor as
#: element 0 in argument 0, but got numpy.float64", "invalid combination of arguments - got
#: (Tensor, numpy.ndarray)", "'numpy.ndarray' and 'Tensor'"); or NumPy a torch dtype.
_REFUSED_NUMPY = re.compile(r"\bTensor\b.*\bnumpy\.\w+|\bnumpy\.\w+.*\bTensor\b|<class 'torch\.dtype'>", re.DOTALL)


#: torch's words for a tensor requiring grad that NumPy converts (``np.asarray`` of a callable's
#: result, or of a tensor ``adapt`` handed over as it is).
RETURNED_GRAD = "Can't call numpy() on Tensor that requires grad"

#: Python's words for a tensor a callable returned whose ``dtype.type`` the function reads (SciPy's
#: scalar objectives make a NumPy scalar of the result that way; a torch dtype has no ``type``).
_RETURNED_TENSOR = "'torch.dtype' object has no attribute"


def callback_hints(error: BaseException, inputs: Inputs, given: Given, site: Callable[[str], str]) -> list[str]:
    """The function passed its callable arguments arrays, and torch code in one refused them
    (``error``, in torch's words): such a callable (a statistic, an objective) is likely written
    in torch, and wants tensors. The callable named is the one the error was raised in, as the
    traceback shows; where none of them shows there (a builtin's frames do not), the first
    builtin one. A tensor requiring grad that one returned meets NumPy's conversion in the
    function's own code (torch's "Can't call numpy() on Tensor that requires grad"), after the
    callable's frames: the first callable argument of Python code is named; as is a tensor one
    returned whose dtype the function reads as a NumPy dtype."""
    returned = (isinstance(error, RuntimeError) and str(error).startswith(RETURNED_GRAD)) or (
        isinstance(error, AttributeError) and str(error).startswith(_RETURNED_TENSOR)
    )
    if not returned and (not isinstance(error, TypeError) or not _REFUSED_NUMPY.search(str(error))):
        return []
    args, kwargs, instance = given
    offset = inputs.params.offset(instance)
    named = [(inputs.params.positional_name(i, offset), a) for i, a in enumerate(args)]
    named += [(inputs.params.keyword_name(k), v) for k, v in kwargs.items()]
    codes: dict[types.CodeType | None, str] = {}
    for name, v in named:
        if callable(v) and not isinstance(v, (type, torch.Tensor, np.ndarray)):
            codes.setdefault(_code_of(v), name)
    traceback, raised_in = error.__traceback__, None
    while traceback is not None and raised_in is None:
        raised_in = codes.get(traceback.tb_frame.f_code)
        traceback = traceback.tb_next
    if raised_in is None and returned:
        raised_in = next((name for code, name in codes.items() if code is not None), None)
    if raised_in is None:  # raised in none of them: in one whose frames do not show, if any
        raised_in = codes.get(None)
    if raised_in is None:
        return []
    return [
        f"argument {raised_in} is a callable, handed NumPy arrays when the function calls it; if it is "
        f"written in torch, pass callbacks=True to hand it tensors (in {site('callbacks=True')})"
    ]


def _code_of(fn: Any) -> types.CodeType | None:
    """The code object whose frames run when ``fn`` is called (None: a builtin's, a C type's):
    a function's, a bound method's, a partial's function's, a callable object's ``__call__``'s."""
    for _ in range(8):  # partials of bound methods of callable objects ...
        if isinstance(fn, types.FunctionType):
            return fn.__code__
        if isinstance(fn, types.MethodType):
            fn = fn.__func__
        elif isinstance(fn, functools.partial):
            fn = fn.func
        else:
            fn = inspect.getattr_static(type(fn), "__call__", None)
    return None


def read_only_error(
    function: str, error: BaseException, rejection: ReadOnlyRejection, inputs: Inputs, site: Callable[[str], str]
) -> ReadOnlyError:
    """Compiled code refused a read-only array handed over (see ReadOnlyRejection): by writing into it
    (NumPy, OpenCV, a numba kernel's store), else on entry (a Cython memoryview, a numba
    kernel's signature), whether or not it would have written. ``inputs``: the side that handed
    it, whose features word some refusals; ``site`` says where an option goes (see Spec.site)."""
    paths, writes = rejection.paths, rejection.writes
    # several: the frame held them all; "self.buf": the method's object held it
    arguments = " or ".join(p for p in paths if not p.startswith("self."))
    attributes = " or ".join(p for p in paths if p.startswith("self."))
    named = " or ".join(filter(None, [arguments and f"argument {arguments}", attributes and f"attribute {attributes}"]))
    private_copies = f"pass copy=True to give the function private writable copies (in {site('copy=True')})"
    if not writes:
        rejecter = "a Cython memoryview" if isinstance(error, ValueError) else "a numba kernel's signature"
        what = (
            f"was refused by compiled code that needs writable arrays ({rejecter}); arrays made from tensor "
            "arguments are read-only so that NumPy code never changes the caller's tensors"
            if named
            else f"needs writable arrays: compiled code ({rejecter}) refused an array made from a tensor "
            "argument, which is read-only so that NumPy code never changes the caller's tensors"
        )
        fix = private_copies
    else:
        what = (
            "was written into by the function; arrays made from tensor arguments are read-only so that "
            "NumPy code never changes the caller's tensors behind its back"
            if named
            else "wrote into an array made from a tensor argument; those arrays are read-only "
            "so that NumPy code never changes the caller's tensors behind its back"
        )
        # writeback=True's arrays share the tensors' memory, which NumPy makes writable for no one
        copies_only = any(words in str(error) for words in REFUSED_FLAGS)
        fix = private_copies if copies_only else inputs.writable_fixes(site)
    words = inputs.refused_write_words(rejection.late, rejection.expanded, rejection.overlapping)
    if words is not None:
        what, fix = words
    where = named or "the function"
    return ReadOnlyError(message(function, where, what, quoted(error), fix, path=paths[0] if paths else ""))
