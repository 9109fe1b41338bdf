"""batched's conversion options (dtype=, device=, copy=, writeback=, grad=...): decided when it is
applied, held by the call that converts each batch, the same on every runner and under every
config block; added to a decorated function's own; where a fix goes, named as batched."""

from __future__ import annotations

import multiprocessing
import pickle
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import autoconvert as ac

# Module level: process pools and pickling receive these by reference.


def centred(a: np.ndarray) -> np.ndarray:
    """A sample less its mean, in float64 whatever it came as: SciPy's habit."""
    return a.astype(np.float64) - a.mean()


def zeroed(a: np.ndarray) -> np.ndarray:
    """A sample's first value set to zero: a write into the sample."""
    a[0] = 0
    return a


@pytest.fixture(
    scope="module",
    params=[
        "sequential",
        "threads",
        pytest.param("a process pool", marks=pytest.mark.slow),
        pytest.param("Dask", marks=pytest.mark.slow),
    ],
)
def runner(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Each runner as batched's options; every batch on the workers where there are some."""
    if request.param == "sequential":
        yield {}
    elif request.param == "threads":
        yield {"workers": 2, "in_caller": False}
    elif request.param == "a process pool":
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            yield {"executor": pool, "in_caller": False}
    else:
        yield {"executor": request.getfixturevalue("dask_client"), "in_caller": False}


DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, "input"]


@given(
    asked=st.sampled_from([None, *DTYPES]),
    device=st.sampled_from([None, "cpu"]),
    config=st.sampled_from([{}, {"dtype": torch.float16}, {"dtype": "input"}, {"copy": True}, {"device": "cpu"}]),
    given_as=st.sampled_from([torch.float16, torch.float32, torch.float64]),
    ragged=st.booleans(),
    copy=st.sampled_from([None, True, False]),
)
def test_the_result_dtype_is_the_one_asked_on_every_runner_under_every_block(
    runner: dict[str, Any],
    *,
    asked: torch.dtype | str | None,
    device: str | None,
    config: dict[str, Any],
    given_as: torch.dtype,
    ragged: bool,
    copy: bool | None,
) -> None:
    """batched's dtype= casts the gathered float64 results, dense (one tensor) or ragged (a
    list); a config block's applies where batched was given none; "input" is the batch's.
    batched's copy= says how the batch converts, never refusing the result's cast."""
    options = {k: v for k, v in {"dtype": asked, "device": device, "copy": copy}.items() if v is not None}
    values = torch.arange(1.0, 13.0, dtype=given_as)
    batch = list(values.split([1, 2, 3, 6])) if ragged else values.reshape(4, 3)
    with ac.config(**config):
        out = ac.batched(centred, **runner, **options)(batch)
    wanted = options.get("dtype", config.get("dtype", torch.float64))
    wanted = given_as if wanted == "input" else wanted
    results = out if ragged else [out]
    assert type(out) is (list if ragged else torch.Tensor)
    assert {(t.dtype, t.device) for t in results} == {(wanted, torch.device("cpu"))}
    expected = [centred(t.double().numpy()) for t in (batch if ragged else batch.unbind())]
    got = [t.double().numpy() for t in (out if ragged else out.unbind())]
    tolerance = 1e-2 if wanted in (torch.float16, torch.bfloat16) else 1e-6
    assert all(np.allclose(g, e, atol=tolerance * 8) for g, e in zip(got, expected, strict=True))


@pytest.mark.parametrize("workers", [None, 2])
def test_results_go_to_the_device_asked(accelerator: torch.device, workers: int | None) -> None:
    """device= moves the gathered result once, either way; dtype= casts it there."""
    on_host = ac.batched(centred, device=accelerator, dtype=torch.float32, workers=workers, in_caller=False)
    out = on_host(torch.ones(4, 3))
    assert out.device.type == accelerator.type and out.dtype == torch.float32
    back = ac.batched(centred, device="cpu", workers=workers, in_caller=False)(torch.ones(4, 3, device=accelerator))
    assert back.device == torch.device("cpu") and back.dtype == torch.float64
    ragged = ac.batched(centred, device=accelerator)([torch.ones(2), torch.ones(3)])
    assert [t.device.type for t in ragged] == [accelerator.type] * 2


def test_the_called_form_takes_them_and_a_decorated_function_gains_them() -> None:
    """@ac.batched(dtype=...) decorates; on a decorated function batched's options are added to
    its decorators' (a side it lacks is added, as stacking that decorator would: tensors then)."""

    @ac.batched(dtype=torch.float32, workers=2)
    def spread(a: np.ndarray) -> np.ndarray:
        return a - a.mean()

    assert spread(torch.ones(3, 2, dtype=torch.float64)).dtype == torch.float32

    @ac.accepts_numpy(writeback=True)
    def halved(a: np.ndarray) -> np.ndarray:
        a /= 2
        return a.astype(np.float64)

    assert type(ac.batched(halved)(torch.ones(2, 2))) is np.ndarray  # no output side: arrays, as before
    batch = torch.ones(2, 2)
    out = ac.batched(halved, dtype=torch.float16)(batch)
    assert out.dtype == torch.float16 and batch.tolist() == [[0.5, 0.5]] * 2  # fn's writeback kept
    explained = ac.explain(ac.batched(halved, dtype=torch.float16))
    assert explained.explicit == {"accepts_numpy": {"writeback": True}, "returns_tensor": {"dtype": torch.float16}}
    same = ac.batched(ac.returns_tensor(dtype=torch.float16)(ac.accepts_numpy(centred)), dtype=torch.float16)
    assert same(torch.ones(2, 2)).dtype == torch.float16  # the same value twice is no conflict


def test_an_option_given_twice_is_refused_naming_both_places() -> None:
    with pytest.raises(ValueError) as info:
        ac.batched(ac.returns_tensor(dtype=torch.float64)(centred), dtype=torch.float32)
    assert str(info.value) == (
        "autoconvert.batched(centred): dtype= is given twice: dtype=torch.float32 to batched, and "
        "dtype=torch.float64 in @ac.returns_tensor(dtype=torch.float64) on centred. Fix: give it in one place"
    )
    with pytest.raises(ValueError) as info:
        ac.batched(ac.accepts_numpy(copy=True)(centred), copy=False)
    assert str(info.value) == (
        "autoconvert.batched(centred): copy= is given twice: copy=False to batched, and copy=True in "
        "@ac.accepts_numpy(copy=True) on centred. Fix: give it in one place"
    )


def test_a_function_wrapped_otherwise_is_refused_with_where_they_go() -> None:
    start = (
        "autoconvert.batched({0}): batched adds its conversion options ({1}) to the accepts_numpy and "
        "returns_tensor decorators only, and {0}"
    )
    with pytest.raises(TypeError) as info:
        ac.batched(ac.torchify(np).negative, dtype=torch.float32)
    assert str(info.value) == start.format("negative", "dtype=torch.float32") + (
        " was not made by them. Fix: pass it undecorated, or give the options to the "
        "ac.torchify(..., dtype=torch.float32) call that made it instead"
    )
    with pytest.raises(TypeError) as info:
        ac.batched(ac.adapt(centred), copy=True, device="cpu")
    assert str(info.value) == start.format("centred", "copy=True, device='cpu'") + (
        " was not made by them. Fix: pass it undecorated, or give the options to @ac.adapt(copy=True, "
        "device='cpu') on centred instead"
    )
    with pytest.raises(TypeError) as info:  # adapt takes no dtype=: results come back in the caller's
        ac.batched(ac.adapt(centred), copy=True, dtype=torch.float32)
    assert str(info.value) == start.format("centred", "copy=True, dtype=torch.float32") + (
        " was not made by them. Fix: pass it undecorated, or give those it takes to @ac.adapt(copy=True) on "
        "centred instead; dtype= has no place there"
    )
    with pytest.raises(TypeError) as info:
        ac.batched(ac.adapt(centred), dtype=torch.float32)
    assert str(info.value) == start.format("centred", "dtype=torch.float32") + (
        " was not made by them. Fix: pass it undecorated; dtype= has no place there"
    )
    with pytest.raises(TypeError) as info:
        ac.batched(ac.returns_numpy(ac.accepts_tensor(centred)), dtype=torch.float32)
    assert str(info.value) == start.format("centred", "dtype=torch.float32") + (
        " is decorated with @ac.accepts_tensor + @ac.returns_numpy, the other way round. Fix: pass it undecorated"
    )


def test_options_about_parameters_and_containers_are_not_batched_s() -> None:
    """Its batches and their samples are the arguments: only=, exclude=, nested= and
    out_params= have nothing to say there."""
    with pytest.raises(TypeError) as info:
        ac.batched(centred, nested=False, only="a")
    assert str(info.value) == (
        "autoconvert.batched() got unknown option(s) nested, only; it takes callbacks, check_writes, chunksize, "
        "copy, device, dtype, executor, grad, in_caller, progress, seed, sparse, sparse_layout, threads_per_worker, "
        "transfers, widen_float16, workers, writeback"
    )
    with pytest.raises(TypeError) as info:
        ac.batched(centred, dtype="float32")
    assert str(info.value) == (
        "autoconvert.batched(): dtype= takes None, 'input' or a torch.dtype, got 'float32'. Fix: pass torch.float32, "
        "NumPy's float32 as a torch dtype"
    )


def test_a_fix_names_batched_where_batched_made_the_call() -> None:
    """A read-only sample written into: the fix is ac.batched(fn, copy=True), or, where batched was
    given copy=False, that; a decorated function's fix stays its decorator's."""
    message = (
        "zeroed(): argument a was written into by the function; arrays made from tensor arguments are read-only "
        "so that NumPy code never changes the caller's tensors behind its back. Found "
        "ValueError('assignment destination is read-only'). Fix: pass copy=True to give the function private "
        "writable copies, or writeback=True to let its changes reach the caller's tensors (in {})."
    )
    for made, where in [
        (ac.batched(zeroed), "ac.batched(zeroed, copy=True), or a with ac.config(copy=True): block around the call"),
        (
            ac.batched(zeroed, copy=False),
            "ac.batched(zeroed, copy=True), where copy=False was given, so a config block cannot change it",
        ),
        (
            ac.batched(ac.accepts_numpy(zeroed), dtype=torch.float32),
            "@ac.accepts_numpy(copy=True) on zeroed, or a with ac.config(copy=True): block around the call",
        ),
    ]:
        with pytest.raises(ac.ReadOnlyError) as info:
            made(torch.ones(2, 3))
        assert str(info.value) == message.format(where)
        assert info.value.__notes__ == ["autoconvert.batched(zeroed): raised by sample 0 of 2"]
    batch = torch.ones(2, 3, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ac.batched(np.sum)(batch)
    assert "pass grad='detach' (in ac.batched(sum, grad='detach'), or a with ac.config(" in str(caught[0].message)


def test_writes_asked_of_batched_reach_the_caller_on_threads_and_are_refused_on_an_executor() -> None:
    batch = torch.ones(4, 3)
    ac.batched(zeroed, writeback=True, workers=2, in_caller=False)(batch)
    assert batch[:, 0].tolist() == [0.0] * 4 and batch[:, 1:].eq(1).all()
    copies = torch.ones(4, 3)
    assert ac.batched(zeroed, copy=True)(copies)[:, 0].tolist() == [0.0] * 4 and copies.eq(1).all()
    with ThreadPoolExecutor(2) as pool:
        threads = ac.batched(zeroed, writeback=True, executor=pool)  # an executor on threads: threads
        threads(batch)
    with (
        ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool,
        pytest.raises(ValueError) as info,
    ):
        ac.batched(zeroed, writeback=True, executor=pool)
    assert str(info.value) == (
        "autoconvert.batched(zeroed): zeroed writes into its arguments (writeback=True or out_params), and on an "
        "executor it runs in other processes, whose writes cannot reach the caller's tensors. Fix: run it on "
        "threads (workers=), or return what it computes"
    )


def test_explain_says_what_batched_was_given_and_pickling_keeps_it() -> None:
    per_sample = ac.batched(centred, dtype=torch.float32, copy=True)
    explained = ac.explain(per_sample)
    assert explained.notes[1] == "Given to batched and held by the call below: dtype=torch.float32, copy=True."
    assert explained.explicit == {
        "accepts_numpy": {"copy": True},
        "returns_tensor": {"dtype": torch.float32},  # copy= is the batch's: the gathered result is batched's own
    }
    again = pickle.loads(pickle.dumps(per_sample))  # by recipe: no module attribute holds it
    assert again(torch.ones(2, 2, dtype=torch.float64)).dtype == torch.float32
    assert ac.explain(again).notes == explained.notes
