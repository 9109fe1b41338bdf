"""config(): defaults for the decorated calls in a block, per thread and per asyncio task."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import autoconvert as ac

from .conftest import shares


@ac.accepts_numpy
def writable(a: np.ndarray) -> bool:
    return bool(a.flags.writeable)


def test_config_sets_defaults_for_every_decorator_with_that_option() -> None:
    """config(copy=True) makes inputs private copies and results private too."""
    kept = np.zeros(2)

    @ac.returns_tensor
    def give() -> np.ndarray:
        return kept

    assert not writable(torch.ones(1)) and shares(give(), kept)
    with ac.config(copy=True):
        assert writable(torch.ones(1)) and not shares(give(), kept)
    assert not writable(torch.ones(1))


def test_explicit_decorator_options_win() -> None:
    @ac.accepts_numpy(copy=None)
    def f(a: np.ndarray) -> bool:
        return bool(a.flags.writeable)

    with ac.config(copy=True):
        assert not f(torch.ones(1))


def test_blocks_nest_and_restore() -> None:
    with ac.config(copy=True):
        with ac.config(writeback=True):
            assert writable(torch.ones(1))
        with ac.config(copy=None):
            assert not writable(torch.ones(1))
        assert writable(torch.ones(1))


def test_each_thread_sees_only_its_own_block() -> None:
    inside = threading.Event()
    release = threading.Event()
    seen: list[bool] = []

    def other() -> None:
        inside.wait()
        seen.append(writable(torch.ones(1)))
        release.set()

    thread = threading.Thread(target=other)
    thread.start()
    with ac.config(copy=True):
        inside.set()
        release.wait(10)
    thread.join()
    assert seen == [False]


def test_each_asyncio_task_sees_only_its_own_block() -> None:
    async def in_block() -> bool:
        with ac.config(copy=True):
            await asyncio.sleep(0.01)
            return writable(torch.ones(1))

    async def outside() -> bool:
        await asyncio.sleep(0.005)
        return writable(torch.ones(1))

    async def main() -> Any:
        return await asyncio.gather(in_block(), outside())

    assert asyncio.run(main()) == [True, False]


def test_device_and_dtype_apply_to_results() -> None:
    @ac.returns_tensor
    def give() -> np.ndarray:
        return np.ones(1)

    with ac.config(device="meta", dtype=torch.float16):
        out = give()
    assert out.device.type == "meta" and out.dtype == torch.float16


@pytest.mark.parametrize(
    ("options", "kind", "text"),
    [
        (
            {"colour": 1},
            TypeError,
            "autoconvert.config() got unknown option(s) colour; it takes callbacks, check_writes, copy, device, dtype, grad, nested, sparse, sparse_layout, transfers, widen_float16, writeback",
        ),
        ({"writeback": "yes"}, TypeError, "autoconvert.config(): writeback= takes True or False, got 'yes'"),
        (
            {"sparse": "csr"},
            ValueError,
            "autoconvert.config(): sparse= takes 'array' (scipy.sparse arrays) or 'matrix' (spmatrix), got 'csr'",
        ),
        (
            {"sparse_layout": torch.strided},
            ValueError,
            "autoconvert.config(): sparse_layout= takes None (as the SciPy format) or torch.sparse_coo, "
            "torch.sparse_csr, torch.sparse_csc or torch.sparse_bsr, got torch.strided",
        ),
        (
            {"dtype": "float"},
            TypeError,
            "autoconvert.config(): dtype= takes None, 'input' or a torch.dtype, got 'float'",
        ),
        (
            {"only": "x"},
            TypeError,
            "autoconvert.config() got unknown option(s) only; it takes callbacks, check_writes, copy, device, dtype, grad, nested, sparse, sparse_layout, transfers, widen_float16, writeback",
        ),
        (
            {"copy": "yes"},
            TypeError,
            "autoconvert.config(): copy= takes None (copy only when needed), True (always) or False (never), got 'yes'",
        ),
        ({"grad": "loud"}, ValueError, "autoconvert.config(): grad= takes 'warn', 'detach' or 'error', got 'loud'"),
        (
            {"device": 1.5},
            TypeError,
            "autoconvert.config(): device= takes None (the caller's device) or a torch device: expected a torch.device, a device string such as 'cuda:1', or an index; got 1.5",
        ),
    ],
)
def test_unknown_names_and_bad_values_are_rejected_on_creation(options: dict[str, Any], kind: type, text: str) -> None:
    with pytest.raises(kind) as info:
        ac.config(**options)
    assert str(info.value) == text


@pytest.mark.parametrize(
    ("decorator", "name"),
    [
        (ac.accepts_numpy, "accepts_numpy"),
        (ac.returns_tensor, "returns_tensor"),
        (ac.accepts_tensor, "accepts_tensor"),
        (ac.returns_numpy, "returns_numpy"),
        (ac.numpy_op, "numpy_op"),
        (ac.batched, "batched"),
    ],
)
@pytest.mark.parametrize("value", ["x", 3, np.ones(2)])
def test_a_decorator_given_something_not_callable_says_so_when_applied(
    decorator: Callable[..., Any], name: str, value: object
) -> None:
    """@accepts_numpy("x") for only="x": a TypeError now, not a wrapper of "x" that fails when called."""
    with pytest.raises(TypeError) as info:
        decorator(value)
    text = str(info.value)
    assert text.startswith(f"autoconvert.{name}() decorates a function or other callable; got ")
    assert f"({type(value).__name__})" in text and f"@{name}(option=value)" in text


def test_decorators_validate_their_options_when_applied() -> None:
    with pytest.raises(TypeError) as info:
        ac.accepts_numpy(device="cpu")
    assert str(info.value) == (
        "autoconvert.accepts_numpy() got unknown option(s) device; it takes callbacks, check_writes, compile, copy, exclude, grad, nested, only, out_params, sparse, transfers, widen_float16, writeback"
    )
    with pytest.raises(ValueError, match="grad= takes 'warn', 'detach' or 'error'"):
        ac.accepts_numpy(grad="never")
    with pytest.raises(TypeError, match=r"only= takes a parameter name or a list, tuple or set of them, got \[1\]"):
        ac.accepts_numpy(only=[1])
    assert ac.returns_tensor(device=None)(lambda: np.ones(1))().device.type == "cpu"


def test_one_config_object_shared_by_threads_and_tasks_never_leaks() -> None:
    """The sweep's case: one ``ac.config(copy=True)`` object entered concurrently by 8 threads
    and by asyncio tasks. Each block sees copy=True, every call after it sees the default, and
    no raw ``ValueError: Token ... created in a different Context`` escapes."""
    import asyncio
    import threading

    shared = ac.config(copy=True)
    writable = ac.accepts_numpy(lambda a: a.flags.writeable)
    results: list[tuple[bool, bool]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(200):
                with shared:
                    inside = writable(torch.ones(1))
                results.append((inside, writable(torch.ones(1))))
        except BaseException as e:  # pragma: no cover - the failure being tested for
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def task() -> tuple[bool, bool]:
        with shared:
            await asyncio.sleep(0)
            inside = writable(torch.ones(1))
        return inside, writable(torch.ones(1))

    async def many() -> list[tuple[bool, bool]]:
        return list(await asyncio.gather(*(task() for _ in range(50))))

    results += asyncio.run(many())
    assert errors == []
    assert len(results) == 8 * 200 + 50 and set(results) == {(True, False)}
    with shared, shared:  # re-entrant in one thread too
        assert writable(torch.ones(1))
    assert not writable(torch.ones(1))
