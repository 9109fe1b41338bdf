"""Shared fixtures: the accelerator under test, and memory-sharing probes."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _accelerators() -> list[torch.device]:
    """Devices to run GPU tests on: AUTOCONVERT_TEST_DEVICE if set (and it must work), else any found."""
    named = os.environ.get("AUTOCONVERT_TEST_DEVICE")
    if named:
        try:  # "cuda" names the current GPU: tests compare against the device tensors land on
            device = torch.ones(1, device=torch.device(named)).device
        except Exception as e:  # a named device that can't be used is a failure, never a skip
            raise pytest.UsageError(f"AUTOCONVERT_TEST_DEVICE={named!r} cannot be used: {e}") from e
        return [device]
    found = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    if not found and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        found = [torch.device("mps")]
    return found


ACCELERATORS = _accelerators()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--generic-calls",
        action="store_true",
        help="decorated functions use the generic call only, never their flat call (CI runs the suite both ways)",
    )
    parser.addoption(
        "--slow",
        action="store_true",
        help="also run the tests marked slow (spawned processes, clusters, compilers, type checkers): CI does",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_LeaveSlowOut(), "autoconvert-leave-slow-out")
    if config.getoption("--generic-calls"):
        import autoconvert._spec._spec

        autoconvert._spec._spec.enabled = False


@pytest.hookimpl(tryfirst=True)  # before -m reads the gpu marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that takes the accelerator is a GPU test (``-m gpu`` selects them all)."""
    for item in items:
        if "accelerator" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)


class _LeaveSlowOut:
    """The slow tests run with ``--slow``, a ``-m`` expression naming them, or when named by
    their node id; otherwise they are left out, after ``-k`` and ``-m`` chose, and counted."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if config.getoption("--slow") or "slow" in config.option.markexpr:
            return
        named = [arg for arg in config.args if "::" in arg]
        slow = [
            item
            for item in items
            if item.get_closest_marker("slow") and not any(_names(arg, item.nodeid) for arg in named)
        ]
        if slow:
            skipped = set(slow)
            items[:] = [item for item in items if item not in skipped]
            config.hook.pytest_deselected(items=slow)
            config.stash[_SLOW_LEFT] = len(slow)


def _names(arg: str, nodeid: str) -> bool:
    """Whether the command-line argument ``arg`` (``tests/test_x.py::TestY::test_z``) names the
    test ``nodeid``, or a class or parametrized function holding it."""
    path, _, rest = arg.partition("::")
    file, _, inner = nodeid.partition("::")
    same_file = os.path.basename(file) == os.path.basename(path)
    return same_file and (inner == rest or inner.startswith((f"{rest}::", f"{rest}[")))


_SLOW_LEFT = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Say how to run the slow tests a run left out."""
    left = config.stash.get(_SLOW_LEFT, 0)
    if left:
        terminalreporter.write_line(
            f"{left} slow test{'s' if left > 1 else ''} not run (spawned processes, clusters, compilers, type "
            "checkers): pytest --slow runs them"
        )


# torch warns once per process when the first complex32 tensor is made. The strategies
# make them, so spend that warning here; tests/test_warnings.py checks in a fresh
# process that autoconvert's own complex32 results never let it out.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    torch.zeros(1, dtype=torch.complex32)


@pytest.fixture(params=ACCELERATORS or [None], ids=lambda d: str(d))
def accelerator(request: pytest.FixtureRequest) -> torch.device:
    """A non-CPU torch device; the test skips where there is none."""
    if request.param is None:
        pytest.skip("no GPU or other accelerator here (set AUTOCONVERT_TEST_DEVICE to require one)")
    return request.param


def byte_range(x: np.ndarray | torch.Tensor) -> tuple[int, int]:
    """[start, end) of the memory an array or a tensor's storage spans."""
    if isinstance(x, torch.Tensor):
        start = x.untyped_storage().data_ptr()
        return start, start + x.untyped_storage().nbytes()
    low, high = np.lib.array_utils.byte_bounds(x) if hasattr(np.lib, "array_utils") else np.byte_bounds(x)
    return low, high


def shares(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> bool:
    """Whether the memory behind ``a`` and ``b`` overlaps (empty ones share nothing)."""
    if (a.size if isinstance(a, np.ndarray) else a.numel()) == 0:
        return False
    if (b.size if isinstance(b, np.ndarray) else b.numel()) == 0:
        return False
    (a0, a1), (b0, b1) = byte_range(a), byte_range(b)
    return a0 < b1 and b0 < a1


def raised(error: type[BaseException], call: Callable[..., Any], *args: Any) -> str:
    """The message of the ``error`` that ``call(*args)`` raises (the test fails if it raises none)."""
    with pytest.raises(error) as info:
        call(*args)
    return str(info.value)


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    """A Dask client on a LocalCluster of two single-threaded worker processes on loopback,
    kept for one test module (its idle heartbeats would slow the rest of the suite)."""
    distributed = pytest.importorskip("distributed")
    with (
        warnings.catch_warnings(),
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        warnings.simplefilter("ignore", DeprecationWarning)  # dask's own, from its startup
        yield client


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """The ``ray`` module, connected to a local Ray of two CPUs started for one test module
    (its workers would take the cores from the rest of the suite)."""
    from tests.promise_sites import local_ray

    with local_ray() as ray:
        yield ray
