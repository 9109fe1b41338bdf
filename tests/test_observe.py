"""Seeing what conversions cost: the transfer guard, ``stats()`` and profiler ranges.

Host-to-device transfers are real here: ``device="meta"`` is a device torch copies to
(keeping no data), so the guard's host-to-device side runs on any machine; the
device-to-host side needs a GPU and skips without one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse
import torch

import autoconvert as ac
from autoconvert._conversions import _copies


@ac.returns_tensor
@ac.accepts_numpy
def flip(a: Any) -> Any:
    return a[::-1]


@ac.returns_tensor(device="meta")
def to_meta(a: Any) -> Any:
    return {"x": np.asarray(a, dtype=np.float32)}


# --------------------------------------------------------------------------- stats


def test_stats_count_calls_shared_values_and_copies_by_cause() -> None:
    """Each copy is counted under its own cause, with its bytes; zero-copy values as shared."""
    with ac.stats() as s:
        flip(torch.ones(4))  # in: shared; out: negative strides (layout)
        flip(torch.ones(4, dtype=torch.bfloat16))  # in: widening; out: layout copy, cast back to bfloat16
    f = s["flip"]
    assert (f.calls, f.converted, f.shared) == (2, 4, 1)
    assert {c: n for c, n in f.copies.items() if n} == {"widening": 1, "layout": 2, "cast": 1}
    # Bytes each copy wrote: float32 when widened, bfloat16 when cast back.
    assert f.bytes["widening"] == 16 and f.bytes["layout"] == 32 and f.bytes["cast"] == 8
    assert f.copied_bytes == 56
    assert f.conversion_seconds > 0 and f.function_seconds > 0
    assert s.calls == 2 and s.shared == 1 and s.copies["layout"] == 2 and s.bytes["cast"] == 8


def test_stats_name_copy_true_writeback_and_check_writes_copies() -> None:
    """The explicit copies are counted apart from the implicit ones."""

    @ac.accepts_numpy(copy=True)
    def private(a: Any) -> None:
        a[0] = 1

    @ac.accepts_numpy(writeback=True)
    def written(a: Any) -> None:
        a[0] = 1

    @ac.accepts_numpy(check_writes=True)
    def checked(a: Any) -> float:
        return float(a.sum())

    with ac.stats() as s:
        private(torch.zeros(3))
        written(torch.zeros(3, dtype=torch.bfloat16))  # widened, then written back
        checked(torch.zeros(3))
    assert s[private.__qualname__].copies["copy=True"] == 1 and s[private.__qualname__].shared == 0
    assert s[written.__qualname__].copies["widening"] == 1 and s[written.__qualname__].copies["writeback"] == 1
    assert s[checked.__qualname__].copies["check_writes"] == 1 and s[checked.__qualname__].shared == 1


def test_stats_table_shows_each_function_and_only_causes_seen() -> None:
    """print(s) is a table: one row per function, a column per cause that occurred."""
    with ac.stats() as s:
        flip(torch.ones(2))
    lines = str(s).splitlines()
    assert lines[0].split() == [
        "function",
        "calls",
        "converted",
        "shared",
        "layout",
        "copied",
        "conversion",
        "in",
        "function",
        "observing",
    ]
    assert set(lines[1]) == {"-"}
    assert lines[2].split()[:6] == ["flip", "1", "2", "1", "1", "8"]
    assert "widening" not in lines[0]
    assert str(ac.stats()) == "autoconvert.stats(): no decorated calls counted"
    assert repr(s) == "<autoconvert.stats: 1 calls of 1 functions>"
    assert repr(s["flip"]).startswith(
        "FunctionStats(calls=1, converted=2, shared=1, copies={'layout': 1}, copied_bytes=8, conversion_seconds="
    )


def test_stats_unknown_function_names_what_was_counted() -> None:
    """A lookup of a function that was not called says which ones were."""
    with ac.stats() as s:
        flip(torch.ones(2))
    with pytest.raises(KeyError) as info:
        s["flop"]
    assert info.value.args[0] == "autoconvert.stats(): no calls of 'flop' were counted; counted: flip"


def test_stats_say_which_functions_were_counted() -> None:
    """``"name" in s`` raised ``KeyError: no calls of 0`` (``in`` looked through ``s[0]``, ``s[1]``):
    it says whether the function was counted, iterating ``s`` gives the names and ``len(s)``
    (a TypeError before) their number."""
    with ac.stats() as s:
        assert len(s) == 0
        flip(torch.ones(2))
    assert "flip" in s and "flop" not in s and 0 not in s
    assert list(s) == ["flip"] and len(s) == 1


def test_stats_blocks_nest_and_outer_ones_count_inner_calls() -> None:
    """An outer block counts what happens inside an inner block; config blocks keep counting."""
    with ac.stats() as outer:
        flip(torch.ones(2))
        with ac.stats() as inner, ac.config(copy=True):
            flip(torch.ones(2))
    assert outer["flip"].calls == 2 and inner["flip"].calls == 1
    # The reversed result needs a copy anyway: that one copy is the private one copy=True asks for.
    assert {c: n for c, n in inner["flip"].copies.items() if n} == {"copy=True": 1, "layout": 1}
    assert outer["flip"].copies["copy=True"] == 1 and outer["flip"].copies["layout"] == 2


def per_row_flip(row: np.ndarray) -> Any:
    """A batched sample that calls a decorated function itself."""
    return flip(torch.from_numpy(row.copy()))


def test_stats_see_only_their_own_thread_but_batched_threads_count() -> None:
    """Another thread's calls are not counted; batched's worker threads are the caller's: the
    batch's one conversion, and the decorated calls its samples make there."""
    with ac.stats() as s:
        worker = threading.Thread(target=flip, args=(torch.ones(2),))
        worker.start()
        worker.join()
        ac.batched(per_row_flip, workers=2, in_caller=False)(torch.ones(4, 3))
    assert s["flip"].calls == 4
    assert (s["per_row_flip"].calls, s["per_row_flip"].samples, s["per_row_flip"].batches_in_caller) == (1, 4, 0)
    rows = {line.split()[0]: line.split() for line in str(s).splitlines()[2:]}
    assert str(s).split()[:5] == ["function", "calls", "samples", "in", "caller"]
    assert rows["flip"][:4] == ["flip", "4", "0", "0"] and rows["per_row_flip"][:4] == ["per_row_flip", "1", "4", "0"]


def test_stats_time_the_conversion_the_function_and_their_own_watching_apart() -> None:
    """The three times are apart: the function's sleep is in function_seconds only, the
    watching (observing_seconds) is neither, and the three fit in the block's wall time."""

    @ac.accepts_numpy
    def nap(a: np.ndarray) -> None:
        time.sleep(0.02)

    nap(torch.ones(2))  # planned outside the block
    with ac.stats() as s:
        began = time.perf_counter()
        for _ in range(3):
            nap(torch.ones(2))
        wall = time.perf_counter() - began
    f = s[nap.__qualname__]
    assert f.function_seconds >= 0.06 and f.conversion_seconds < 0.02 and 0 < f.observing_seconds < 0.02
    assert f.conversion_seconds > 0
    assert f.conversion_seconds + f.function_seconds + f.observing_seconds <= wall


def test_stats_count_adapt_numpy_op_and_torchify() -> None:
    """Every decorator kind reports through the same counters."""

    @ac.adapt
    def scale(a: np.ndarray) -> np.ndarray:
        return a * 2

    op = ac.numpy_op(np.negative, backward=lambda ctx, g: -g)
    ndimage = pytest.importorskip("scipy.ndimage")
    shift = ac.torchify(ndimage.shift)
    with ac.stats() as s:
        scale(torch.ones(2, dtype=torch.bfloat16))  # widened in, cast back out
        op(torch.ones(2))
        shift(torch.ones(4), 1.0)
    counted = s[scale.__qualname__]
    assert (
        counted.calls == 1
        and counted.converted == 2
        and counted.copies["widening"] == 1
        and counted.copies["cast"] == 1
    )
    assert s["negative"].calls == 1 and s["shift"].calls == 1


def test_nothing_is_watched_outside_any_block() -> None:
    """Unwatched calls build no watched Runner and leave no Watch set."""

    @ac.accepts_numpy
    def f(a: Any) -> Any:
        return a

    f(torch.ones(2))
    assert f._self_plan._variants == {}
    assert _copies.watching() is None
    with ac.stats():
        f(torch.ones(2))
        assert _copies.watching() is None  # set only while a call converts


def test_calls_inside_the_function_are_counted_as_their_own() -> None:
    """A decorated function calling another: each counts its own conversions."""

    @ac.accepts_numpy(copy=True)
    def inner(a: Any) -> float:
        return float(a.sum())

    @ac.accepts_tensor
    def outer(x: Any) -> float:
        return inner(x)

    with ac.stats() as s:
        outer(np.ones(3))
    assert s[outer.__qualname__].converted == 1 and s[outer.__qualname__].shared == 1
    assert s[inner.__qualname__].copies["copy=True"] == 1 and s[inner.__qualname__].shared == 0


# --------------------------------------------------------------------------- transfer guard


def test_error_refuses_a_transfer_before_copying_and_names_all_of_it() -> None:
    """transfers='error': TransferError (a ConversionError) with the path, devices and bytes."""
    with ac.stats() as s, ac.config(transfers="error"), pytest.raises(ac.TransferError) as info:
        to_meta(np.ones(4))
    assert str(info.value) == (
        "to_meta(): result['x'] would be copied from cpu to meta (16 B), and transfers='error' forbids the "
        "copies autoconvert makes between devices. Found numpy.ndarray(shape=(4,), dtype=<f4). Fix: move it "
        "to meta yourself where that is meant, or allow this call's transfers with transfers='allow', 'log' or 'warn'."
    )
    assert isinstance(info.value, ac.ConversionError) and isinstance(info.value, RuntimeError)
    assert s["to_meta"].calls == 1 and s["to_meta"].copies["transfer"] == 0


def test_error_names_the_argument_path_on_the_input_side() -> None:
    """An argument bound for another device is refused with its path."""

    @ac.accepts_tensor(device="meta", transfers="error")
    def total(batch: Any) -> Any:
        return batch

    with pytest.raises(
        ac.TransferError, match=r"total\(\): argument batch\['x'\]\[1\] would be copied from cpu to meta \(8 B\)"
    ):
        total({"x": [1.0, np.ones(1)]})


def test_warn_uses_its_own_category_and_names_the_path() -> None:
    """transfers='warn': a TransferWarning at the caller's line, naming path, devices and size."""
    with ac.config(transfers="warn"), pytest.warns(ac.TransferWarning) as record:
        out = to_meta(np.ones(4))
    assert out["x"].device == torch.device("meta")
    assert [str(w.message) for w in record] == [
        "to_meta(): result['x'] was copied from cpu to meta (16 B); transfers='error' refuses such copies, "
        "'allow' silences this"
    ]
    assert record[0].filename == __file__


def test_warn_leaves_copies_that_are_not_transfers_alone() -> None:
    """Widening, layout and copy=True copies are not transfers: no TransferWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ac.config(transfers="warn", copy=True):
            flip(torch.ones(2, dtype=torch.bfloat16))


def test_log_reports_transfers_at_info_and_other_copies_by_cause_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """transfers='log': the 'autoconvert' logger, each copy under its own cause."""
    caplog.set_level(logging.DEBUG, logger="autoconvert")
    with ac.config(transfers="log"):
        to_meta(torch.ones(2))  # returns_tensor alone: the argument is not converted
        flip(torch.ones(2, dtype=torch.bfloat16))
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("autoconvert", "INFO", "to_meta(): result['x'] was copied from cpu to meta (8 B)"),
        ("autoconvert", "DEBUG", "flip(): argument a was copied (widening, 8 B)"),
        ("autoconvert", "DEBUG", "flip(): result was copied (layout, 8 B)"),
        ("autoconvert", "DEBUG", "flip(): result was copied (cast, 4 B)"),
    ]


def test_allow_is_the_default_and_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Without a policy, transfers happen silently, as before."""
    caplog.set_level(logging.DEBUG, logger="autoconvert")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert to_meta(np.ones(2))["x"].is_meta
    assert caplog.records == []


def test_a_decorator_policy_applies_to_its_function_and_beats_config() -> None:
    """The decorator option governs one function; its explicit value wins over config's."""

    @ac.returns_tensor(device="meta", transfers="error")
    def strict() -> Any:
        return np.ones(1)

    with pytest.raises(ac.TransferError):
        strict()
    with ac.config(transfers="allow"), pytest.raises(ac.TransferError):
        strict()
    assert to_meta(np.ones(1))["x"].is_meta  # other functions are untouched


def test_policies_are_per_thread_and_per_task() -> None:
    """A config block in one thread or asyncio task does not reach another."""
    outcomes: dict[str, str] = {}

    def attempt(name: str, policy: str) -> None:
        with ac.config(transfers=policy):
            try:
                to_meta(np.ones(1))
                outcomes[name] = "copied"
            except ac.TransferError:
                outcomes[name] = "refused"

    threads = [threading.Thread(target=attempt, args=(n, p)) for n, p in (("a", "error"), ("b", "allow"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def task(name: str, policy: str) -> None:
        await asyncio.sleep(0)
        attempt(name, policy)

    async def both() -> None:
        await asyncio.gather(task("c", "allow"), task("d", "error"))

    asyncio.run(both())
    assert outcomes == {"a": "refused", "b": "copied", "c": "copied", "d": "refused"}


def test_the_guard_covers_sparse_results_and_adapt() -> None:
    """scipy.sparse results and adapt's tensor parameters cross through the same guard."""

    @ac.returns_tensor(device="meta")
    def graph() -> Any:
        return scipy.sparse.eye(3, format="csr")

    @ac.adapt(device="meta")
    def total(t: torch.Tensor) -> torch.Tensor:
        return t

    with ac.config(transfers="error"):
        with pytest.raises(ac.TransferError, match=r"graph\(\): result would be copied from cpu to meta \(24 B\)"):
            graph()
        with pytest.raises(ac.TransferError, match=r"total\(\): argument t would be copied from cpu to meta"):
            total(np.ones(2))


def test_invalid_policy_is_refused_when_given() -> None:
    """An unknown policy fails at decoration or block creation, not per call."""
    with pytest.raises(ValueError) as info:
        ac.config(transfers="sometimes")
    assert (
        str(info.value) == "autoconvert.config(): transfers= takes 'allow', 'log', 'warn' or 'error', got 'sometimes'"
    )
    with pytest.raises(ValueError, match=r"^autoconvert.returns_tensor\(\): transfers= takes"):
        ac.returns_tensor(transfers=True)


def test_device_to_host_transfers_are_guarded(accelerator: torch.device) -> None:
    """A GPU tensor bound for NumPy: refused before the copy, or counted with its bytes."""
    x = torch.ones(256, device=accelerator)
    with ac.config(transfers="error"), pytest.raises(ac.TransferError) as info:
        flip(x)
    assert str(info.value).startswith(f"flip(): argument a would be copied from {x.device} to cpu (1.0 KiB)")
    with ac.stats() as s:
        out = flip(x)
    assert out.device == x.device
    assert s["flip"].copies["transfer"] == 2 and s["flip"].bytes["transfer"] == 2048


# --------------------------------------------------------------------------- profiler


def test_profiler_ranges_name_each_side_of_each_function() -> None:
    """While torch.profiler records, each side's conversions are a named range."""

    @ac.returns_numpy
    @ac.accepts_tensor
    def reverse(x: Any) -> Any:
        return -x

    @ac.adapt
    def twice(a: np.ndarray) -> np.ndarray:
        return a * 2

    with torch.profiler.profile() as prof:
        flip(torch.ones(2))
        reverse(np.ones(2))
        twice(torch.ones(2))
    names = {e.key for e in prof.key_averages() if e.key.startswith("autoconvert::")}
    assert names == {
        "autoconvert::flip::to_numpy",
        "autoconvert::flip::to_tensor",
        "autoconvert::test_profiler_ranges_name_each_side_of_each_function.<locals>.reverse::to_tensor",
        "autoconvert::test_profiler_ranges_name_each_side_of_each_function.<locals>.reverse::to_numpy",
        "autoconvert::test_profiler_ranges_name_each_side_of_each_function.<locals>.twice::arguments",
        "autoconvert::test_profiler_ranges_name_each_side_of_each_function.<locals>.twice::results",
    }
    flip(torch.ones(2))  # after the profiler: the plain path again, with results as before
    assert torch.equal(flip(torch.arange(3)), torch.tensor([2, 1, 0]))


def test_sizes_read_as_people_write_them() -> None:
    """Messages and tables give bytes in B, KiB, MiB or GiB, whichever reads best."""
    assert [_copies.size(n) for n in (12, 4096, 3 * 2**19, 5 * 2**30, 2**42)] == [
        "12 B",
        "4.0 KiB",
        "1.5 MiB",
        "5.0 GiB",
        "4096.0 GiB",
    ]


def _unaligned(a: np.ndarray) -> np.ndarray:
    out = np.zeros(a.nbytes + 1, dtype=np.uint8)[1:].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.ones((2, 4))[..., ::-1],
        lambda: np.ones((2, 4), dtype=">f8"),
        lambda: np.ones((2, 4), dtype=">f8")[::-1],
        lambda: _unaligned(np.ones((2, 4))),
        lambda: _read_only(np.ones((2, 4))),
    ],
    ids=["reversed", "byteswapped", "byteswapped reversed", "unaligned", "read-only"],
)
@pytest.mark.parametrize("route", ["result", "argument"])
def test_a_layout_torch_cannot_share_is_one_counted_copy(make: Callable[[], np.ndarray], route: str) -> None:
    """An array torch cannot share as it is becomes one "layout" copy of its bytes, as a
    returns_tensor result or an accepts_tensor argument."""
    a = make()

    @ac.returns_tensor
    def give() -> np.ndarray:
        return a

    @ac.accepts_tensor
    def take(t: torch.Tensor) -> torch.Tensor:
        return t

    with ac.stats() as s:
        out = give() if route == "result" else take(a)
    (g,) = s.functions.values()
    assert (g.calls, g.converted, g.shared) == (1, 1, 0)
    assert {c: n for c, n in g.copies.items() if n} == {"layout": 1}
    assert g.bytes["layout"] == 64 and out.tolist() == [[1.0] * 4] * 2
