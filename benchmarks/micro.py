"""The small costs autoconvert's code is shaped around, each against the way not taken.

A comment in the code says why it is shaped so and names its row here (``micro: ...``); the
figures live in benchmarks/RESULTS.md, measured on the machine of the run, not in comments.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

import autoconvert as ac
from autoconvert._conversions._devices import CPU
from autoconvert._conversions._dtypes import NO_CASTS
from autoconvert._conversions._to_torch import _slow_array_to_tensor, array_to_tensor, target
from autoconvert._decorators._plain import _converter

from .harness import Row, compare

Settings = dict[str, Any]


class _Three(NamedTuple):
    a: Any
    b: Any
    c: Any


def _raising(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` called for the exception it raises."""

    def call() -> None:
        with contextlib.suppress(TypeError, RuntimeError, ValueError):
            fn()

    return call


def micro(settings: Settings) -> list[Row]:
    """Each pair: the way the code goes (baseline) against the way it avoids."""
    repeats, target = settings["repeats"], settings["target_s"]
    rows: list[Row] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch.tensor(read-only array) warns
        for case, contenders in _pairs():
            baseline = next(iter(contenders))
            rows += compare(case, baseline, contenders, repeats, target)
        for mib in (8, 128):
            a = np.ones(mib * 2**18, dtype=np.float32)
            t = torch.from_numpy(a)
            rows += compare(
                f"micro: a {mib} MiB host copy (_to_torch)",
                "NumPy's copy",
                {"NumPy's copy": lambda a=a: torch.from_numpy(a.copy()), "torch's clone": lambda t=t: t.clone()},
                settings["copy_repeats"],
                target,
            )
    return rows


def _pairs() -> list[tuple[str, dict[str, Callable[[], Any]]]]:
    """The cases: each a way the code goes, then the way it avoids, on values made here."""
    small = np.ones(16, dtype=np.float32)
    view = small[:8]
    view.setflags(write=False)
    swapped = small.astype(">f4")
    grads = torch.ones(16, requires_grad=True)
    bits = torch.arange(2**18, dtype=torch.int32)
    same = bits.clone()
    fields = (1, 2, 3)
    from_numpy = torch.from_numpy
    profiler = torch.autograd.profiler
    reversed_ = np.ones((8, 128))[..., ::-1]
    cpu = target(CPU, NO_CASTS, None)

    def walk(a: np.ndarray) -> Any:  # the way every other call of to_tensor goes
        return _converter("to_tensor", {})[0].convert(a, [], [], ((), {}, None))

    return [
        (
            "micro: the default device (_devices)",
            {
                "the torch-function mode stack's depth (C)": torch._C._len_torch_function_stack,
                "torch.get_default_device()": torch.get_default_device,
            },
        ),
        (
            "micro: the compile check (_escape)",
            {
                "torch.compiler.is_dynamo_compiling()": torch.compiler.is_dynamo_compiling,
                "torch.compiler.is_compiling()": torch.compiler.is_compiling,
            },
        ),
        (
            "micro: read-only guard (_inputs)",
            {
                "a.setflags(False)": lambda: small.setflags(False),
                "a.setflags(write=False)": lambda: small.setflags(write=False),
            },
        ),
        (
            "micro: a tensor that requires grad (_to_numpy)",
            {"checking t.requires_grad": lambda: grads.requires_grad, "t.numpy() refusing it": _raising(grads.numpy)},
        ),
        (
            "micro: an array torch refuses (_to_torch)",
            {
                "checking a.flags and the dtype": lambda: swapped.flags.behaved and swapped.dtype.isnative,
                "torch.from_numpy(a) refusing it": _raising(lambda: torch.from_numpy(swapped)),
            },
        ),
        (
            "micro: a bound name or a module attribute (_to_torch)",
            {"from_numpy(a), bound": lambda: from_numpy(small), "torch.from_numpy(a)": lambda: torch.from_numpy(small)},
        ),
        (
            "micro: a per-call NamedTuple (_call, _inputs, _to_torch)",
            {
                "tuple.__new__(cls, fields)": lambda: tuple.__new__(_Three, fields),
                "cls(*fields)": lambda: _Three(*fields),
            },
        ),
        (
            "micro: copying a read-only 8-element view (_to_torch)",
            {
                "from_numpy(a.copy())": lambda: torch.from_numpy(view.copy()),
                "torch.tensor(a)": lambda: torch.tensor(view),
            },
        ),
        (
            "micro: a negatively strided array (_to_torch)",
            {
                "array_to_tensor's reversed-view branch": lambda: array_to_tensor(reversed_, cpu),
                "the careful route": lambda: _slow_array_to_tensor(reversed_, CPU, NO_CASTS, None),
            },
        ),
        (
            "micro: to_tensor of one array (_plain)",
            {"its leaf straight away": lambda: ac.to_tensor(small), "the converter's walk": lambda: walk(small)},
        ),
        (
            "micro: comparing 1 MiB bit for bit (_memory, check_writes)",
            {
                "np.array_equal on numpy() views": lambda: np.array_equal(bits.numpy(), same.numpy()),
                "torch.equal": lambda: torch.equal(bits, same),
            },
        ),
        (
            "micro: is the profiler recording (_observe)",
            {
                "the module flag": lambda: profiler._is_profiler_enabled,
                "torch.autograd._profiler_enabled()": torch.autograd._profiler_enabled,
            },
        ),
    ]
