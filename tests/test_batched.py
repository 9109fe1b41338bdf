"""batched(): once per sample, results gathered, threads when asked."""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import pickle
import threading
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import pytest
import scipy.ndimage
import scipy.optimize
import torch

import autoconvert as ac


def test_batched_tensors_run_per_sample_and_stack() -> None:
    """Distance transforms per mask: one result per sample, stacked, dim 0 sliced not squeezed."""
    masks = torch.zeros(3, 1, 5, dtype=torch.bool)  # a size-1 axis that .squeeze() would eat
    masks[:, 0, 2] = True
    edt = ac.batched(scipy.ndimage.distance_transform_edt)
    out = edt(~masks)
    assert out.shape == (3, 1, 5) and out.dtype == torch.float64
    assert out[0, 0].tolist() == [2.0, 1.0, 0.0, 1.0, 2.0]


def test_ragged_lists_and_tuple_results() -> None:
    """Hungarian matching per image, cost matrices of different sizes: tuple of lists."""
    costs = [torch.tensor([[4.0, 1.0], [2.0, 8.0]]), torch.tensor([[1.0, 9.0, 9.0]])]
    rows, cols = ac.batched(scipy.optimize.linear_sum_assignment)(costs)
    assert [r.tolist() for r in rows] == [[0, 1], [0]]
    assert [c.tolist() for c in cols] == [[1, 0], [0]]


def test_a_nested_tensor_is_a_ragged_batch() -> None:
    """A nested tensor has no shape, only a leading size: its components are the samples."""
    with warnings.catch_warnings():  # torch: "The PyTorch API of nested tensors is in prototype stage"
        warnings.simplefilter("ignore", UserWarning)
        nested = torch.nested.nested_tensor([torch.ones(2), torch.arange(3.0)])
    assert ac.batched(np.sum)(nested).tolist() == [2.0, 3.0]
    assert ac.batched(np.cumsum)(nested)[1].tolist() == [0.0, 1.0, 3.0]


def test_same_shaped_tuple_results_stack_per_position() -> None:
    rows, cols = ac.batched(scipy.optimize.linear_sum_assignment)(1 - torch.eye(3).expand(4, 3, 3))
    assert rows.shape == (4, 3) and cols.tolist() == [[0, 1, 2]] * 4


class _Moments(NamedTuple):
    mean: Any
    spread: Any


def test_namedtuple_struct_sequence_and_dict_results_gather_field_by_field() -> None:
    """A per-sample metric returned as a dict, a namedtuple (NumPy's ``EighResult``) or torch's
    struct sequences comes back as one of those, each field stacked, as tuples do; these came
    back as lists of per-sample results."""
    batch = torch.rand(3, 4, dtype=torch.float64)
    moments = ac.batched(lambda x: _Moments(x.mean(), x.std()))(batch)
    assert type(moments) is _Moments and torch.allclose(moments.mean, batch.mean(1))
    scores = ac.batched(lambda x: {"mean": x.mean(), "max": x.max()})(batch)
    assert list(scores) == ["mean", "max"] and torch.equal(scores["max"], batch.max(1).values)
    eigen = ac.batched(np.linalg.eigh)(torch.eye(2, dtype=torch.float64).expand(3, 2, 2).contiguous())
    assert type(eigen) is type(np.linalg.eigh(np.eye(2))) and eigen[0].shape == (3, 2)
    peak = ac.batched(lambda x: torch.max(torch.from_numpy(x.copy()), 0))(batch)
    assert type(peak) is torch.return_types.max and torch.equal(peak.values, batch.max(1).values)


def test_results_that_are_more_than_their_fields_or_differ_in_keys_stay_a_list() -> None:
    """SciPy's result bunches keep each sample's data for their methods (``confidence_interval``):
    one rebuilt result would answer for the first sample only. Dicts with other keys cannot merge."""
    import scipy.stats

    tests = ac.batched(lambda x, y: scipy.stats.pearsonr(x, y))(torch.rand(3, 6), torch.rand(3, 6))
    assert type(tests) is list and len(tests) == 3 and tests[2].confidence_interval().low.shape == ()
    keyed = ac.batched(lambda x: {"first": x[0]} if x[0] > 0.5 else {"other": x[0]})(torch.tensor([[0.9], [0.1]]))
    assert keyed == [{"first": torch.tensor(0.9)}, {"other": torch.tensor(0.1)}]


def test_other_arguments_reach_every_sample_unchanged() -> None:
    seen: list[float] = []

    def scale(x: np.ndarray, factor: float) -> np.ndarray:
        seen.append(factor)
        return x * factor

    out = ac.batched(scale)(torch.ones(3, 2), factor=2.5)
    assert torch.equal(out, torch.full((3, 2), 2.5)) and seen == [2.5, 2.5, 2.5]


@dataclasses.dataclass
class _Boundary:
    """A loss holding a tensor, whose per-sample method is batched: the instance is no batch."""

    weight: torch.Tensor

    @ac.batched
    def per_sample(self, mask: np.ndarray) -> np.ndarray:
        assert isinstance(self.weight, torch.Tensor)  # the instance, never converted
        return scipy.ndimage.distance_transform_edt(mask) * float(self.weight)

    @ac.batched(workers=2, in_caller=False)
    def on_threads(self, mask: np.ndarray) -> np.ndarray:
        return scipy.ndimage.distance_transform_edt(mask) * float(self.weight)

    @classmethod
    @ac.batched
    def made(cls, mask: np.ndarray) -> np.ndarray:
        assert cls is _Boundary
        return scipy.ndimage.distance_transform_edt(mask) * 2.0

    @staticmethod
    @ac.batched
    def plain(mask: np.ndarray) -> np.ndarray:
        return scipy.ndimage.distance_transform_edt(mask) * 2.0


# torch 2.4's torch.load, unpickling the instance's tensor, warns of its weights_only default.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`:FutureWarning:torch.storage")
def test_a_method_binds_its_instance_which_reaches_every_sample_unchanged() -> None:
    """``@ac.batched`` on a method binds as a function does: the instance is ``self`` for every
    sample, passed as it is (not batched, not converted), the arguments batched; through the
    class the instance is the first argument. Called bound, the instance was dropped and each
    sample was one argument short."""
    masks = torch.rand(3, 6, 6) > 0.5
    expected = torch.from_numpy(np.stack([scipy.ndimage.distance_transform_edt(m) for m in masks.numpy()])) * 2
    loss = _Boundary(torch.tensor(2.0))
    assert torch.equal(loss.per_sample(masks), expected)
    assert torch.equal(loss.on_threads(masks), expected)
    assert torch.equal(_Boundary.per_sample(loss, masks), expected)
    assert torch.equal(_Boundary.made(masks), expected) and torch.equal(loss.made(masks), expected)
    assert torch.equal(loss.plain(masks), expected) and torch.equal(_Boundary.plain(masks), expected)
    assert torch.equal(pickle.loads(pickle.dumps(loss.per_sample))(masks), expected)  # a spawned pool's copy
    assert ac.explain(loss.per_sample) == ac.explain(_Boundary.per_sample)


def test_results_of_different_shapes_come_back_as_a_list() -> None:
    out = ac.batched(np.flatnonzero)(torch.tensor([[0, 1, 1], [1, 0, 0]]))
    assert isinstance(out, list) and [o.tolist() for o in out] == [[1, 2], [0]]


@pytest.mark.parametrize("workers", [None, 2])
def test_an_empty_batch_runs_nothing_and_gives_an_empty_list(workers: int | None) -> None:
    """No sample ran, so nothing says what a stacked result would look like."""
    calls: list[object] = []
    per_sample = ac.batched(lambda a: calls.append(a) or a, workers=workers)
    assert per_sample(torch.ones(0, 3)) == [] and calls == []


def test_a_wrapped_function_keeps_its_options() -> None:
    @ac.accepts_numpy(writeback=True)
    def zero_first(a: np.ndarray) -> None:
        a[0] = 0

    batch = torch.ones(2, 3)
    ac.batched(zero_first)(batch)
    assert batch[:, 0].tolist() == [0.0, 0.0] and batch[:, 1:].eq(1).all()


def test_the_called_form_decorates() -> None:
    @ac.batched(workers=2)
    def total(x: np.ndarray) -> np.float64:
        return x.sum()

    assert total(torch.ones(3, 4)).tolist() == [4.0, 4.0, 4.0]
    with pytest.raises(ValueError, match="workers= takes None or a positive number of threads, got 0"):
        ac.batched(np.sum, workers=0)


def test_mismatched_batch_sizes_are_refused() -> None:
    with pytest.raises(ValueError) as info:
        ac.batched(np.add)(torch.ones(2, 3), torch.ones(3, 3))
    assert str(info.value) == (
        "autoconvert.batched(add): batched arguments must share one leading size. Found args[0]: 2, "
        "args[1]: 3. Fix: pass tensors batched along dim 0 with the same length, or lists of equal length"
    )
    with pytest.raises(ValueError, match="no batched argument"):
        ac.batched(np.add)(1, 2)


@pytest.mark.parametrize("workers", [None, 2])
def test_a_failing_sample_keeps_its_type_and_is_named(workers: int | None) -> None:
    def picky(x: np.ndarray) -> np.ndarray:
        if x[0] == 3:
            raise KeyError("three")
        return x

    with pytest.raises(KeyError) as info:
        ac.batched(picky, workers=workers)(torch.arange(5.0).reshape(5, 1))
    assert info.value.__notes__ == [
        "autoconvert.batched(test_a_failing_sample_keeps_its_type_and_is_named.<locals>.picky): raised by sample 3 of 5"
    ]


def test_threads_keep_order_and_run_concurrently() -> None:
    """Samples run on two threads at once (a barrier both must reach), results in order."""
    barrier = threading.Barrier(2, timeout=10)

    def slow_identity(x: np.ndarray) -> np.ndarray:
        if x[0] < 2:
            barrier.wait()  # only passes if two samples are in flight together
        return x.copy()

    out = ac.batched(slow_identity, workers=2, in_caller=False)(torch.arange(6.0).reshape(6, 1))
    assert out.flatten().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_threads_see_the_callers_config_and_grad_mode() -> None:
    def writable(x: np.ndarray) -> Any:
        return np.asarray(x.flags.writeable)

    with ac.config(copy=True):
        assert ac.batched(writable, workers=2)(torch.ones(4, 1)).all()
    assert not ac.batched(writable, workers=2)(torch.ones(4, 1)).any()

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a GradientWarning from a worker thread would fail here
        ac.batched(np.negative, workers=2)(torch.ones(4, 2, requires_grad=True))


def test_the_gradient_warning_offers_a_mapped_numpy_op_which_keeps_the_gradient() -> None:
    """batched runs NumPy per sample and detaches; its warning names the fix that keeps the
    gradient, and that fix gives the gradient torch's own operation gives."""

    def double(a: np.ndarray) -> np.ndarray:
        return a * 2

    batch = torch.arange(6.0).reshape(3, 2).requires_grad_()
    with pytest.warns(ac.GradientWarning) as caught:
        ac.batched(double)(batch)
    name = double.__qualname__
    assert str(caught[0].message) == (
        f"{name}(): argument a requires grad, and NumPy code cannot pass gradients back: it was "
        "detached, so no gradient flows through this call. To keep the gradient, map a "
        "differentiable torch operation over the batch in place of ac.batched: "
        f"torch.vmap(ac.numpy_op({name}, backward=...)), its vector-Jacobian product written in "
        f"NumPy. To silence this, pass grad='detach' (in ac.batched({name}, grad='detach'), or a "
        "with ac.config(grad='detach'): block around the call; grad='error' forbids it), or call "
        "under torch.no_grad()"
    )
    op = ac.numpy_op(double, backward=lambda grad, a, output: grad * 2)
    (torch.vmap(op)(batch) * batch).sum().backward()
    assert batch.grad is not None and torch.equal(batch.grad, 4 * batch.detach())


class TestExecutors:
    """batched(executor=...): samples cross as arrays to any Executor, results come back in order."""

    MASKS = torch.rand(5, 6, 6, generator=torch.Generator().manual_seed(0)) > 0.5

    def _expected(self) -> torch.Tensor:
        return ac.batched(scipy.ndimage.distance_transform_edt)(self.MASKS)  # type: ignore[no-any-return]

    @pytest.mark.slow
    def test_a_process_pool(self) -> None:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(2, mp_context=context) as pool:
            edt = ac.batched(scipy.ndimage.distance_transform_edt, executor=pool, in_caller=False)
            out = edt(self.MASKS)
            assert out.dtype == torch.float64 and torch.equal(out, self._expected())
            # A sample that fails: the note names it; the worker's traceback is the cause.
            spd = torch.stack([torch.eye(2), -torch.eye(2), torch.eye(2)])
            with pytest.raises(np.linalg.LinAlgError) as info:
                ac.batched(np.linalg.cholesky, executor=pool, in_caller=False)(spd)
        assert "autoconvert.batched(cholesky): raised by sample 1 of 3" in info.value.__notes__
        assert "Traceback" in str(info.value.__cause__)

    @pytest.mark.slow
    def test_a_dask_cluster_on_loopback(self) -> None:
        distributed = pytest.importorskip("distributed")
        with (
            warnings.catch_warnings(),
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=":0", processes=True
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            warnings.simplefilter("ignore", DeprecationWarning)  # dask's own, from its startup
            edt = ac.batched(scipy.ndimage.distance_transform_edt, executor=client.get_executor(), in_caller=False)
            out = edt(self.MASKS)
            assert torch.equal(out, self._expected())
            spd = torch.stack([torch.eye(2), torch.eye(2), -torch.eye(2)])
            with pytest.raises(np.linalg.LinAlgError) as info:
                ac.batched(np.linalg.cholesky, executor=client.get_executor(), in_caller=False)(spd)
        assert "autoconvert.batched(cholesky): raised by sample 2 of 3" in info.value.__notes__

    def test_a_thread_pool_executor_and_the_callers_dtype(self) -> None:
        """Any Executor: here threads; bfloat16 samples widen to float32 and come back bfloat16."""
        with ThreadPoolExecutor(2) as pool:
            halves = ac.batched(np.negative, executor=pool, in_caller=False)(torch.ones(3, 2, dtype=torch.bfloat16))
        assert halves.dtype == torch.bfloat16 and halves.tolist() == [[-1.0, -1.0]] * 3

    def test_executor_and_workers_are_refused_together(self) -> None:
        with ThreadPoolExecutor(1) as pool, pytest.raises(ValueError) as info:
            ac.batched(np.negative, workers=2, executor=pool, in_caller=False)
        assert str(info.value) == (
            "autoconvert.batched(): executor= runs the samples on its own workers: pass it without workers=; "
            "got workers=2"
        )

    def test_an_executor_must_be_one(self) -> None:
        with pytest.raises(ValueError) as info:
            ac.batched(np.negative, executor=4)
        assert str(info.value) == (
            "autoconvert.batched(): executor= takes None, a concurrent.futures.Executor, a multiprocessing pool, a Dask client "
            "or the ray module; got 4"
        )

    def test_progress_bar(self, capsys: pytest.CaptureFixture[str]) -> None:
        pytest.importorskip("tqdm")
        out = ac.batched(np.negative, progress=True)(torch.ones(3, 2))
        assert out.shape == (3, 2) and "batched(negative)" in capsys.readouterr().err


class _Scale:
    """A callable object."""

    def __call__(self, a: np.ndarray, k: float = 1.0) -> np.ndarray:
        return a * k


def _scaled(a: np.ndarray, k: float) -> np.ndarray:
    return a * k


def test_a_partial_and_a_callable_object_are_named_by_their_function_and_class() -> None:
    """Messages name a partial by the function it calls and a callable object by its class,
    never by a repr holding addresses and bound values."""
    assert ac.batched(functools.partial(_scaled, k=np.arange(1000.0))).__qualname__ == "batched(_scaled)"
    assert ac.batched(_Scale()).__qualname__ == "batched(_Scale)"
