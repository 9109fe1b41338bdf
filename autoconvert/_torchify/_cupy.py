"""CuPy on a CUDA tensor's own memory: a torchified function that never leaves the GPU.

Where a call's tensors live on one CUDA device and CuPy is installed, a torchified module
that CuPy mirrors (``scipy.ndimage`` as ``cupyx.scipy.ndimage``, ``numpy`` as ``cupy``: the
adapter's ``cupy_module``) calls CuPy's function of the same name on the tensors' memory:
DLPack, no copy, on torch's current stream, CuPy's allocations taken from torch's caching
allocator (so the results' memory goes back to torch). Results come back as tensors on that
memory; one that views an argument is copied, since a host-path result never aliases the
caller's tensors. CuPy arrays have no read-only flag, so only calls that cannot write into
an argument go: any out-parameter or ``overwrite_*=True`` takes the host path, as does a call
with a CPU tensor, a NumPy array, a callable or a tensor that requires grad (``stats()``
counts each reason). A dtype NumPy lacks (bfloat16) widens on the device, as the host path
widens it on the host: the results' values and dtypes are the host path's. ``array_module="cupy"`` makes that path the only one:
a call that cannot take it raises, naming the argument.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import types
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from autoconvert._adapters._adapter import Adapter, signature_of
from autoconvert._conversions._dtypes import WIDENED, WIDENED_HALF
from autoconvert._conversions._grad import FORWARD_AD, has_tangent
from autoconvert._conversions._memory import functorch_wrapped
from autoconvert._errors import SequenceKey, keystr
from autoconvert._escape import compiling
from autoconvert._interpreter._routes import Declined, DeclinedError, Route, RouteWords
from autoconvert._options._config import Config, active
from autoconvert._options._options import AFTER_CALL, DEFAULTS
from autoconvert._spec._signature import function_name

from ._cupy_call import on_device

#: The torch dtypes CuPy has; bfloat16, complex32 and the float8s (WIDENED) cross widened.
CUPY_DTYPES = frozenset(
    {
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
        *(getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name)),
    }
)
#: Values handed to CuPy as they are.
_MOVES_AS_IT_IS = (int, float, complex, str, bytes, type(None), slice, types.EllipsisType, range, np.generic, np.dtype)
#: Options under which a call must take the host path, with the value that lets it go.
_ROUTED_ONLY_WITH = {"device": None, "dtype": None, **dict.fromkeys(AFTER_CALL["CuPy's path"].features, False)}


def declined_options(explicit: dict[str, Any]) -> str | None:
    """Why a view given the options ``explicit`` can never take CuPy's path (None: it can):
    CuPy's results stay where its arguments are, in its dtypes, and nothing is written back."""
    given = [f"{k}={explicit[k]!r}" for k, allowed in _ROUTED_ONLY_WITH.items() if explicit.get(k, allowed) != allowed]
    return f"the host path honours {', '.join(given)}" if given else None


class Write(NamedTuple):
    """An argument that asks the function to write into an argument where true: by name,
    position (None: keyword-only) and default."""

    name: str
    position: int | None
    default: Any


_TRACED = Declined(
    "the call", "is being traced by torch.compile, which CuPy's path is not", "torch.compile", "call it eagerly"
)
#: A call with no CUDA tensor, which only a strict route looks closer at (and which stats() does not count).
_ON_HOST = Declined("the call", "has no tensor on a CUDA device", "no CUDA tensor", "", counted=False)
#: What explain says of CuPy's path.
_ON_CUPY = (
    "A call whose tensors all live on one CUDA device runs {twin} on their memory (DLPack, no copy, on torch's "
    "current stream, allocating from torch's caching allocator); a result viewing an argument is copied. "
)


@functools.cache
def installed() -> bool:
    """Whether CuPy can be imported, asked without importing it."""
    return importlib.util.find_spec("cupy") is not None


def twin_of(adapter: Adapter, module: str, name: str) -> tuple[Any, str | None]:
    """CuPy's version of ``module.name``, or None and why there is none (imports CuPy)."""
    mirror = adapter.cupy_module(module)
    if mirror is None:
        return None, f"CuPy mirrors no function of {module}"
    if name in adapter.cupy_declined:
        return None, f"CuPy's {name} is not taken: {adapter.cupy_declined[name]}"
    try:
        with warnings.catch_warnings():  # cupyx.scipy.signal's import warns of a CuPy feature it uses
            warnings.filterwarnings("ignore", r"cupyx\.jit\.rawkernel is experimental", FutureWarning)
            twin = getattr(importlib.import_module(mirror), name, None)
    except ImportError as e:
        return None, f"CuPy could not be imported ({e})"
    if not callable(twin):
        return None, f"{mirror} has no {name}"
    return twin, None


class CupyRoute(Route):
    """The route of ``fn`` on CuPy's version of it, ``twin`` (resolved on the first CUDA call
    by ``find``): a call whose tensors all live on one CUDA device and that writes into no
    argument; a ``strict`` one (``array_module="cupy"``) takes every call or raises."""

    name = "cupy"
    label = "CuPy path"

    def __init__(
        self,
        fn: Any,
        find: Callable[[], tuple[Any, str | None]],
        *,
        strict: bool,
        explicit: dict[str, Any],
        adapter: Adapter,
        module: str | None = None,
        name: str = "",
    ) -> None:
        self.find = find
        self.twin: Any = None
        self.missing: str | None = None  # why CuPy has no version of it, once asked
        self.strict = strict
        self.function = function_name(fn)
        self.python_results = name in adapter.python_results
        self.mirror = None if module is None else f"{adapter.cupy_module(module)}.{name}"
        self.out_params = tuple(explicit.get("out_params", DEFAULTS["torchify"]["out_params"]))
        self.watched = {k: v for k, v in _ROUTED_ONLY_WITH.items() if k not in explicit}
        self.widens = explicit.get("widen_float16")  # None: as a config block says (False outside any)
        self.parameters, self.writes = _parameters(fn, adapter, self.out_params)

    def declines(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Declined | None:
        if compiling():
            return _TRACED
        if not self.strict and _cuda_device(args, kwargs) is None:
            return _ON_HOST
        declined = self.refusal(args, kwargs, active())
        if declined is None and self.resolved() is None:
            return Declined("the function", "has no CuPy version", self.missing or "", "")
        return declined

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        device = _cuda_device(args, kwargs)
        assert device is not None  # declines found one
        try:
            return on_device(self.twin, device, args, kwargs, self.python_results, widened=self._widened(active()))
        except (TypeError, NotImplementedError) as e:  # CuPy's own refusal: the host path has it all
            if self.strict:
                raise
            raise DeclinedError(Declined("CuPy", f"refused the call ({type(e).__name__})", str(e), "")) from e

    def describe(self) -> RouteWords:
        if self.resolved() is None:  # CuPy has no version after all: every call converts
            return RouteWords("cupy", "", "", not_taken=f"CuPy's path is not taken: {self.missing}")
        on_cupy = _ON_CUPY.format(twin=self.mirror or self.function)
        others = (
            "Any other call raises ConversionError (array_module='cupy')."
            if self.strict
            else "Any other call (a CPU tensor, a NumPy array or callable, a dtype CuPy lacks, a tensor that requires "
            "grad, an out-parameter or overwrite_*=True) takes the converting call; stats() counts why. The "
            "converting call: {path}. {why}"
        )
        alone = (
            "torchify(array_module='cupy'): a function written for CuPy",
            "a tensor on a CUDA device becomes a CuPy array on its memory; any other tensor, a NumPy array or a "
            "tensor that requires grad raises ConversionError",
            "CuPy arrays become tensors on their memory, in containers too",
        )
        return RouteWords("cupy", on_cupy, others, keeps_source=True, alone=alone)

    def resolved(self) -> Any:
        """CuPy's version of the function (None where it has none: see ``missing``), found once."""
        if self.twin is None and self.missing is None:
            self.twin, self.missing = self.find()
        return self.twin

    def refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any], config: Config | None) -> Declined | None:
        """Why this call cannot run on CuPy (None if it can: its tensors on one CUDA device);
        ``config`` is the active block, if any."""
        if config is not None:
            for option, allowed in self.watched.items():
                value = config.options.get(option, allowed)
                if value != allowed:
                    fix = "leave that option out of the block around this call"
                    return Declined("the config block", f"sets {option}={value!r}", f"{option}={value!r}", fix)
        for flag, position, default in self.writes:
            wants = kwargs.get(flag, args[position] if position is not None and position < len(args) else default)
            if default is None and wants is not None:  # an out-parameter passed by position
                return _out_parameter(flag)
            if default is not None and wants:
                fix = "leave it out: CuPy arrays cannot refuse writes, so the host path takes it"
                return Declined(f"argument {flag}", "asks it to write into an argument", f"{flag}={wants!r}", fix)
        device: list[torch.device] = []
        for i, value in enumerate(args):
            where = self.parameters[i] if i < len(self.parameters) else f"argument {i}"
            found = self.argument(where, value, device)
            if found is not None:
                return found
        for key, value in kwargs.items():
            if key in self.out_params and value is not None:
                return _out_parameter(key)
            found = self.argument(f"argument {key}", value, device)
            if found is not None:
                return found
        if not device:
            fix = "move the tensors to a CUDA device (.cuda()), or torchify without array_module='cupy'"
            return _ON_HOST._replace(fix=fix, counted=True)
        return None

    def _widened(self, config: Config | None) -> dict[torch.dtype, torch.dtype]:
        """The dtypes that cross widened, as the host path widens them: float16 too where
        ``widen_float16`` is given, or set by the block around the call."""
        widens = self.widens if self.widens is not None else bool(config and config.options.get("widen_float16"))
        return WIDENED_HALF if widens else WIDENED

    def argument(self, where: str, value: Any, device: list[torch.device]) -> Declined | None:
        """Why ``value`` cannot go to CuPy, recording the CUDA device of a tensor in ``device``."""
        if isinstance(value, torch.Tensor):
            return _declined_tensor(where, value, device)
        if type(value) in (list, tuple):  # a namedtuple or other subclass is no CuPy argument
            for i, item in enumerate(value):
                found = self.argument(keystr(where, [SequenceKey(i)]), item, device)
                if found is not None:
                    return found
            return None
        if isinstance(value, (_MOVES_AS_IT_IS, torch.dtype)):
            return None
        if isinstance(value, np.ndarray):
            problem, fix = "is a NumPy array: CuPy takes CUDA memory only", "pass it as a tensor on the same device"
        elif callable(value):
            problem, fix = "is a callable: CuPy's functions take CUDA arrays", "torchify without array_module='cupy'"
        else:
            problem, fix = "is a value CuPy's functions do not take", "pass tensors and plain values"
        return Declined(where, problem, type(value).__name__, fix)


def _out_parameter(name: str) -> Declined:
    problem = "is an out-parameter, written through the host path"
    return Declined(f"argument {name}", problem, "an out-parameter", f"use the result, not {name}=")


def _declined_tensor(where: str, t: torch.Tensor, device: list[torch.device]) -> Declined | None:
    """Why the tensor ``t`` cannot go to CuPy: what it is first, then where it lives (recorded
    in ``device``, the call's one CUDA device)."""
    if t.dtype not in CUPY_DTYPES and t.dtype not in WIDENED:
        return Declined(where, f"has a dtype CuPy lacks ({t.dtype})", str(t.dtype), "cast it (.float())")
    if t.requires_grad:
        fix = "detach it (.detach()), or give the function a gradient with autoconvert.numpy_op"
        return Declined(where, "requires grad: CuPy's functions have no gradient", "requires_grad=True", fix)
    # The host path gives these their rule, per sample or as a tangent; CuPy would drop the
    # tangent without a word, and DLPack cannot export a transform's tensor.
    if functorch_wrapped(t):
        fix = "call it outside the transform, or torchify without array_module='cupy'"
        problem = "is a torch.func transform's tensor (vmap, grad, jvp), which CuPy cannot read"
        return Declined(where, problem, "a tensor torch.func wraps", fix)
    if FORWARD_AD._current_level >= 0 and has_tangent(t):
        fix = "detach it (.detach()), or give the function a jvp with autoconvert.numpy_op"
        problem = "carries a forward-mode tangent: CuPy's functions have no derivative"
        return Declined(where, problem, "a dual tensor (forward_ad.make_dual)", fix)
    if t.layout is not torch.strided:
        return Declined(where, "is not a dense tensor", str(t.layout), "make it dense (.to_dense())")
    if t.is_conj() or t.is_neg():
        return Declined(where, "has a lazy conjugate or negative bit", "a lazy view", "resolve it (.resolve_conj())")
    if not t.is_cuda:
        fix = "move it to a CUDA device (.cuda()), or torchify without array_module='cupy'"
        return Declined(where, "is not on a CUDA device", f"a tensor on {t.device}", fix)
    if device and t.device != device[0]:
        return Declined(where, "is on another CUDA device", f"{t.device}, beside {device[0]}", "use one device")
    device[:1] = [t.device]
    return None


def _cuda_device(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    """The device of the first CUDA tensor among the arguments or the items of a list or tuple
    among them (None: none is)."""
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, torch.Tensor):
            if value.is_cuda:
                return value.device
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor) and item.is_cuda:
                    return item.device
    return None


def _parameters(fn: Any, adapter: Adapter, out_params: tuple[str, ...]) -> tuple[list[str], list[Write]]:
    """``fn``'s positional parameters as message paths, and the arguments that ask it to write
    into an argument: ``overwrite_a=True``'s flags, and out-parameters passed by position (a
    ufunc's outputs after its inputs)."""
    if isinstance(fn, np.ufunc):
        return [f"argument {i}" for i in range(fn.nin)], [Write("out", fn.nin, None)]
    signature = signature_of(fn)
    if signature is None:
        return [], []
    parameters = list(signature.parameters.values())
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    writes = [Write(o.flag, o.flag_position, o.default) for o in adapter.overwritten(fn) if o.flag is not None]
    writes += [Write(n, positional.index(n), None) for n in out_params if n in positional]
    return [f"argument {n}" for n in positional], writes
