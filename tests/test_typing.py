"""mypy --strict accepts the typed API and rejects its misuse, with the expected errors."""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent / "typing"

pytestmark = pytest.mark.slow


def _mypy(path: pathlib.Path, where: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """mypy --strict on a copy of ``path`` in ``where``, outside the repository, as a user's
    file: autoconvert must be found as installed (pip install -e . included)."""
    shutil.copy(path, where / path.name)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--hide-error-context",
            "--show-error-codes",
            path.name,
        ],
        cwd=where,
        capture_output=True,
        text=True,
        check=False,
    )


def test_correct_use_type_checks(tmp_path: pathlib.Path) -> None:
    done = _mypy(HERE / "check_api.py", tmp_path)
    assert done.returncode == 0, done.stdout


def test_misuse_is_rejected_where_expected(tmp_path: pathlib.Path) -> None:
    path = HERE / "check_errors.py"
    expected = {
        number: re.search(r"# E: (\[[\w-]+\])", line).group(1)  # type: ignore[union-attr]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "# E:" in line
    }
    found = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(
            r"check_errors\.py:(\d+): error: .*?(\[[\w-]+\])$", _mypy(path, tmp_path).stdout, flags=re.M
        )
    }
    assert found == expected


def test_correct_use_type_checks_under_pyright_strict(tmp_path: pathlib.Path) -> None:
    """The same user's file, under pyright's strict mode (its first line asks for it)."""
    shutil.copy(HERE / "check_api.py", tmp_path / "check_api.py")
    done = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "check_api.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(done.stdout)
    assert report["generalDiagnostics"] == [], done.stdout
    assert report["summary"]["filesAnalyzed"] == 1
