"""Test files rerun in a process of their own with SciPy's array API mode on, which SciPy
reads once, when imported (``SCIPY_ARRAY_API=1``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

#: Whether this process is one of those.
IN_MODE = os.environ.get("SCIPY_ARRAY_API") == "1"


def rerun_in_scipy_s_array_api_mode(path: str, needs: str | None) -> None:
    """Run the test file ``path`` with SciPy's array API mode on, with the slow tests; the
    process's own rerun skips itself, with the reason "this is that process". ``needs``: the
    reason its tests of the mode skip with, which none may give there (None: they may, all of
    them where SciPy declares nothing)."""
    # Measured where this process is (CI's PYTEST_ADDOPTS asks for --cov): into a data file
    # of its own, which this process's coverage combines at its end; no gate of its own.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider", "--slow", "--cov-fail-under=0"],
        env={
            **os.environ,
            "SCIPY_ARRAY_API": "1",
            "COVERAGE_FILE": f".coverage.{os.path.basename(path)}.{os.getpid()}",
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "this is that process" in done.stdout  # -ra lists the skips
    if needs is not None:  # every test of the mode ran there
        assert " passed" in done.stdout and needs not in done.stdout, done.stdout


def rerun_test(path: str, needs: str | None, doc: str) -> Callable[[], None]:
    """A slow test running the test file ``path`` in a process with SciPy's array API mode on
    (see ``rerun_in_scipy_s_array_api_mode``), which skips itself in that process; ``doc``:
    its docstring."""

    @pytest.mark.slow
    def test() -> None:
        if IN_MODE:
            pytest.skip("this is that process")
        rerun_in_scipy_s_array_api_mode(path, needs)

    test.__doc__ = doc
    return test
