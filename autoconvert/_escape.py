"""The compile escape: how a decorated call steps out of torch.compile's trace."""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

# Under torch.compile, dynamo would trace the call into the NumPy body and can crash there
# ("Expected np.nditer base"). Whichever frame of ours dynamo starts tracing, the trace
# reaches a Runner's call closure, where is_dynamo_compiling() is True: the call is routed
# through a torch.compiler.disable'd function, a clean graph break, and the body runs
# eagerly. A frame dynamo meets after a graph break, run by Python, it compiles only where
# its locals hold a tensor (itself, or in a list, tuple, dict or named tuple) or its code reads
# a torch module by name (torch/_dynamo/convert_frame.py, has_tensor_in_frame); it skips the
# others (and from then on their code) and compiles their callees, past the escape. So a frame
# a call enters first with plain values (a torchified object's method: ``norm(0.0, 2.0)``; the
# generic call with a tensor inside a registered container) reads
# ``torch.compiler.is_dynamo_compiling`` through the module (the flat call reads torch's
# profiler module by name, as ``profiler``). Not is_compiling(): dynamo folds either to True
# while tracing, and eagerly this one is a bare `return False`, the cheaper (benchmarks,
# micro: "the compile check").
compiling = torch.compiler.is_dynamo_compiling
# numpy_op asks a wider question: is any tracer building a graph (dynamo, or torch.export's
# non-strict tracing, which runs Python on fake tensors)? Then its registered op must go in
# the graph instead of the NumPy body. Asked once per op call, never on the decorators' path.
tracing = torch.compiler.is_compiling
_opaque_call: Callable[..., Any] | None = None
# Set while dynamo builds a graph (its frames' analysis included), in every torch: the
# thread's TracingContext.
_tracing_context = torch._guards.TracingContext.try_get


def seen_class(proxy: Any, wrapped: Any) -> type:
    """A proxy's ``__class__``: its wrapped object's, as wrapt forwards it, save that a proxy of
    a plain function passes for one only to dynamo while it traces (to inline or skip its call
    by the markers it reads). cloudpickle (joblib, Ray, Dask) reduces whatever passes for a
    function from its code, which would send the undecorated function: outside a trace the
    proxy is its own type, and pickles by its ``__reduce_ex__``."""
    cls = type(wrapped)
    if cls is types.FunctionType and _tracing_context() is None:
        return type(proxy)
    return cls


#: The ``__class__`` of the package's proxies (wrappers, torchified objects): see seen_class.
proxy_class = property(lambda proxy: seen_class(proxy, proxy.__wrapped__))


def passes_for_function(value: Any) -> bool:
    """Whether ``value`` is a plain function, or a proxy of one, which dynamo takes for it: what
    the package's own checks ask of a decorated function (``isinstance`` answers for pickling)."""
    while inspect.getattr_static(type(value), "__class__", None) is proxy_class:
        value = value.__wrapped__
    return isinstance(value, types.FunctionType)


def _through(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - runs under dynamo
    return call(*args, **kwargs)  # inside the disabled call is_dynamo_compiling() is False: the body runs


def opaque(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - runs under dynamo
    """``call(*args, **kwargs)`` out of dynamo's sight: one graph break, the body run eagerly. Also for
    building wrappers and to_numpy/to_tensor inside a compiled function (dynamo cannot trace
    wrapt 1.x's constructor, nor, in torch 2.4, a bound dict.get)."""
    global _opaque_call
    if _opaque_call is None:
        _opaque_call = torch.compiler.disable(_through, recursive=True)  # type: ignore[no-untyped-call]
    return _opaque_call(call, *args, **kwargs)


def graph_break(msg: str) -> None:  # pragma: no cover - runs under dynamo
    """One graph break, ``msg`` in the library's words, which dynamo quotes where ``fullgraph=True``
    refuses it. dynamo reads ``msg=`` off the call without binding it; Python, running the call
    after the break, binds it, which a torch whose ``graph_break`` takes no message (2.4) refuses."""
    try:
        torch._dynamo.graph_break(msg=msg)  # type: ignore[call-arg, unused-ignore]  # torch 2.4: no message
    except TypeError:
        torch._dynamo.graph_break()


def escape_saying(reason: str) -> Callable[..., Any]:
    """A call as ``opaque`` makes it, ``escape(call, *args)``, whose graph break dynamo refuses
    under ``fullgraph=True`` in an error quoting ``reason``, where this torch's
    ``torch.compiler.disable`` takes one (a feature read: torch 2.4's has no ``reason``)."""
    if _DISABLE_TAKES_REASON:
        return torch.compiler.disable(_through, recursive=True, reason=reason)  # type: ignore[no-untyped-call, no-any-return, call-arg, unused-ignore]  # torch 2.4: no reason
    return torch.compiler.disable(_through, recursive=True)  # type: ignore[no-untyped-call, no-any-return]


#: Read once, at import: dynamo refuses to trace reading ``torch.compiler.disable`` itself.
_DISABLE_TAKES_REASON = "reason" in inspect.signature(torch.compiler.disable).parameters


def unseen(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, a wrapper being built, with dynamo's frame hook off where dynamo
    is loaded: built on first use inside a compiled function, run by Python after a graph break,
    its frames reading torch would each be compiled, and torch 2.6's dynamo fails inside on some
    ("frozenset not in co_names"). Where dynamo is not loaded no compiled function runs: no cost."""
    if "torch._dynamo" in sys.modules:
        return opaque(call, *args, **kwargs)
    return call(*args, **kwargs)
