"""mypy --strict accepts the typed API and rejects its misuse, with the expected errors."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent / "typing"

pytestmark = pytest.mark.slow


def _mypy(path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--hide-error-context",
            "--show-error-codes",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def test_correct_use_type_checks() -> None:
    done = _mypy(HERE / "check_api.py")
    assert done.returncode == 0, done.stdout


def test_misuse_is_rejected_where_expected() -> None:
    path = HERE / "check_errors.py"
    expected = {
        number: re.search(r"# E: (\[[\w-]+\])", line).group(1)  # type: ignore[union-attr]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "# E:" in line
    }
    found = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"check_errors\.py:(\d+): error: .*?(\[[\w-]+\])$", _mypy(path).stdout, flags=re.M)
    }
    assert found == expected
