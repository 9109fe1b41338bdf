"""batched converts each batch once: the same results as the function's call per sample,
one conversion counted, results gathered in NumPy, small batches kept in the caller's thread."""

from __future__ import annotations

import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac

from .conftest import raised
from .strategies import tensors


def _per_sample(fn: Any, batch: torch.Tensor) -> Any:
    """What batched gave when it called the decorated pair once per sample: each result a
    tensor, stacked where they agree."""
    call = ac.returns_tensor(ac.accepts_numpy(fn))
    results = [call(batch[i]) for i in range(batch.size(0))]
    first = results[0]
    if all(r.shape == first.shape and r.dtype == first.dtype for r in results):
        return torch.stack(results)
    return results


@given(case=tensors(), fn=st.sampled_from([np.copy, np.sum, np.flatnonzero, np.negative]))
def test_a_batch_converted_once_gives_what_each_sample_converted_alone_gives(case: Any, fn: Any) -> None:
    """Over dtypes (bfloat16, float16, complex, bool), layouts (transposed, expanded, conj,
    neg) and shapes: the same values, dtype and device as the per-sample calls, or the same error."""
    batch = case.tensor
    if batch.dim() == 0 or batch.size(0) == 0:
        return
    try:
        expected = _per_sample(fn, batch)
    except Exception as e:
        with pytest.raises(type(e)):
            ac.batched(fn)(batch)
        return
    out = ac.batched(fn)(batch)
    if isinstance(expected, list):
        assert isinstance(out, list) and len(out) == len(expected)
        for got, want in zip(out, expected, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    else:
        torch.testing.assert_close(out, expected, rtol=0, atol=0, equal_nan=True)


def test_one_conversion_per_batch_counted_with_its_samples() -> None:
    """A bfloat16 batch of 16 widens once (one copy), not once per sample; stats() counts one
    call of the function with its 16 samples."""
    batch = torch.ones(16, 8, dtype=torch.bfloat16)
    per_row = ac.batched(np.cumsum)
    with ac.stats() as s:
        out = per_row(batch)
    assert out.dtype == torch.bfloat16 and out.shape == (16, 8)
    counted = s["cumsum"]
    assert (counted.calls, counted.samples, counted.batches_in_caller) == (1, 16, 0)
    assert counted.copies["widening"] == 1 and counted.copies["cast"] == 1  # in, and the result restored


def test_samples_are_views_of_the_one_converted_batch() -> None:
    """Each sample is a read-only view of one array, not a conversion of its own."""
    bases: list[Any] = []

    def keep_base(x: np.ndarray) -> np.ndarray:
        bases.append(x.base if x.base is not None else x)
        assert not x.flags.writeable
        return x.sum()

    ac.batched(keep_base)(torch.ones(5, 3))
    assert len({id(b) for b in bases}) == 1


def test_results_gather_as_the_hand_written_loop_gathers() -> None:
    """Arrays and NumPy scalars of one dtype stack with np.stack; mixed dtypes, strings and
    Python numbers stay a list, each converted as the call converts it."""
    batch = torch.arange(6.0).reshape(3, 2)
    assert ac.batched(lambda x: x.sum())(batch).tolist() == [1.0, 5.0, 9.0]
    mixed = ac.batched(lambda x: x.astype(np.int32) if x[0] > 1 else x)(batch)
    assert isinstance(mixed, list) and [m.dtype for m in mixed] == [torch.float32, torch.int32, torch.int32]
    assert ac.batched(lambda x: float(x[0]))(batch) == [0.0, 2.0, 4.0]
    assert ac.batched(lambda x: str(x[0]))(batch) == ["0.0", "2.0", "4.0"]


def test_a_one_dimensional_batch_gives_zero_d_samples() -> None:
    """Sample i of a 1-d batch is a 0-d array, as the 0-d tensor t[i] would become."""
    shapes: list[tuple[int, ...]] = []
    ac.batched(lambda x: shapes.append(x.shape) or x)(torch.arange(3.0))
    assert shapes == [(), (), ()]


def bump(x: np.ndarray) -> np.ndarray:
    x += 1
    return x


def test_a_failing_write_into_a_sample_is_a_read_only_error_naming_the_sample() -> None:
    with pytest.raises(ac.ReadOnlyError) as info:
        ac.batched(bump)(torch.ones(3, 2))
    assert str(info.value).startswith("bump(): argument x was written into by the function")
    assert info.value.__notes__ == ["autoconvert.batched(bump): raised by sample 0 of 3"]


def test_a_sparse_batch_is_refused_with_the_fix() -> None:
    with warnings.catch_warnings():  # torch: "Sparse CSR tensor support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        batch = torch.eye(3).to_sparse_csr()
    assert raised(ValueError, ac.batched(np.sum), batch) == (
        "autoconvert.batched(sum): args[0] is a sparse tensor (torch.sparse_csr), which cannot be sliced into "
        "samples along dim 0. Fix: pass a list of per-sample tensors, or a dense tensor (.to_dense())"
    )


def test_a_small_batch_runs_in_the_callers_thread_and_is_counted() -> None:
    """Samples of microseconds on threads: the pool would cost more than the work, so the
    batch runs in the caller's thread; stats() and explain() say so. Were a timing thrown off
    (the machine busy with something else), the map it sent ends quickly and the next batch is
    timed again: a later call runs in the caller's thread, within ten."""
    ran_on: set[int] = set()

    def where(x: np.ndarray) -> np.ndarray:
        ran_on.add(threading.get_ident())
        return x

    with ThreadPoolExecutor(2) as pool:
        per_sample = ac.batched(where, executor=pool)
        for _ in range(10):
            ran_on.clear()
            with ac.stats() as s:
                per_sample(torch.ones(50, 2))
            if ran_on == {threading.get_ident()}:
                break
    assert ran_on == {threading.get_ident()}
    assert s["test_a_small_batch_runs_in_the_callers_thread_and_is_counted.<locals>.where"].batches_in_caller == 1
    assert "under 10 ms in all" in ac.explain(per_sample).notes[2]


def test_a_batch_that_pays_for_its_executor_runs_there_after_its_first_samples() -> None:
    """The first call times its first two blocks (1 + 2 samples) in the caller's thread and
    sends the rest to the threads; later calls decide from that timing, sending every sample."""
    main = threading.get_ident()
    ran_on: list[int] = []

    def slow(x: np.ndarray) -> np.ndarray:
        ran_on.append(threading.get_ident())
        time.sleep(0.005)
        return x

    per_sample = ac.batched(slow, workers=2)
    per_sample(torch.ones(8, 1))
    assert ran_on[:3] == [main] * 3 and main not in ran_on[3:]
    ran_on.clear()
    per_sample(torch.ones(8, 1))
    assert main not in ran_on and len(ran_on) == 8


def test_a_pool_with_an_initializer_always_runs_the_samples() -> None:
    """Its workers were set up for the function: the caller's thread was not."""
    local = threading.local()

    def set_up() -> None:
        local.ready = True

    def needs_setup(x: np.ndarray) -> np.ndarray:
        assert local.ready
        return x

    with ThreadPoolExecutor(2, initializer=set_up) as pool:
        assert ac.batched(needs_setup, executor=pool)(torch.ones(3, 2)).shape == (3, 2)


def test_in_caller_and_progress_take_booleans() -> None:
    """As every True/False option: a TypeError."""
    with pytest.raises(TypeError, match=r"^autoconvert\.batched\(\): in_caller= takes True or False, got 'no'$"):
        ac.batched(np.sum, workers=2, in_caller="no")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"^autoconvert\.batched\(\): progress= takes True or False, got 'yes'$"):
        ac.batched(np.sum, progress="yes")  # type: ignore[call-overload]


def test_a_nested_batch_is_converted_sample_by_sample_once() -> None:
    with warnings.catch_warnings():  # torch: "The PyTorch API of nested tensors is in prototype stage"
        warnings.simplefilter("ignore", UserWarning)
        nested = torch.nested.nested_tensor([torch.ones(2), torch.arange(3.0)])
    with ac.stats() as s:
        out = ac.batched(np.sum)(nested)
    assert out.tolist() == [2.0, 3.0] and s["sum"].calls == 1


@given(
    size=st.integers(1, 30),
    change_at=st.integers(0, 35),
    change=st.sampled_from(["shape", "dtype", "scalar", "none"]),
    chunksize=st.none() | st.integers(1, 8),
)
def test_threads_write_results_into_one_array_or_fall_back_to_the_loops_gathering(
    size: int, change_at: int, change: str, chunksize: int | None
) -> None:
    """On threads, array results are written into one array as they come; a result of another
    shape, dtype or kind from any sample on gives what the sequential loop gives."""

    def result(x: np.ndarray) -> Any:
        if int(x[0]) < change_at:
            return x * 2
        return {"shape": x[:1], "dtype": x.astype(np.float32), "scalar": x.sum(), "none": x * 2}[change]

    batch = torch.arange(float(size)).repeat_interleave(3).reshape(size, 3).to(torch.float64)
    expected = ac.batched(result)(batch)
    out = ac.batched(result, workers=3, chunksize=chunksize, in_caller=False)(batch)
    if isinstance(expected, list):
        assert isinstance(out, list) and len(out) == size
        for got, want in zip(out, expected, strict=True):
            assert torch.equal(got, want) and got.dtype == want.dtype
    else:
        assert torch.equal(out, expected) and out.dtype == expected.dtype


def test_a_timing_that_no_longer_holds_is_taken_again() -> None:
    """Samples that were slow on the first call (a cold cache, a loaded machine) and fast since:
    the next map ends quickly, so a call after it times its samples again and keeps the batch
    in the caller's thread (within ten calls: a loaded machine can throw off a timing)."""
    calls = [0]

    def slow_at_first(x: np.ndarray) -> np.ndarray:
        if calls[0] == 0:
            time.sleep(0.005)
        return x

    per_sample = ac.batched(slow_at_first, workers=2)
    kept = []
    for calls[0] in range(10):
        with ac.stats() as s:
            per_sample(torch.ones(8, 1))
        kept.append(s["test_a_timing_that_no_longer_holds_is_taken_again.<locals>.slow_at_first"].batches_in_caller)
    assert kept[:2] == [0, 0] and 1 in kept, kept
