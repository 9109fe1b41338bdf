"""mypy --strict (with and without autoconvert.mypy_plugin) and pyright accept the typed API and
reject its misuse, with the expected errors."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest

HERE = pathlib.Path(__file__).parent / "typing"

pytestmark = pytest.mark.slow


ROOT = HERE.parent.parent
MISTAKES = HERE / "check_mistakes.py"


def _run(command: list[str], path: pathlib.Path, where: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """``command`` on a copy of ``path`` in ``where``, outside the repository, as a user's file.
    The repository comes first on the path, so the checked autoconvert is this checkout's
    wherever an installed one (pip install -e . of another checkout) points."""
    shutil.copy(path, where / path.name)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", *command, path.name], cwd=where, env=env, capture_output=True, text=True, check=False
    )


def _mypy(path: pathlib.Path, where: pathlib.Path, *, plugin: bool = False) -> subprocess.CompletedProcess[str]:
    """mypy --strict on a user's file, with autoconvert.mypy_plugin enabled as users enable it."""
    config = where / "mypy.ini"
    config.write_text("[mypy]\n" + ("plugins = autoconvert.mypy_plugin\n" if plugin else ""))
    flags = ["--strict", "--no-incremental", "--hide-error-context", "--show-error-codes"]
    return _run(["mypy", "--config-file", str(config), *flags], path, where)


def _errors(done: subprocess.CompletedProcess[str], name: str) -> dict[int, str]:
    """Each line of ``name`` mypy flagged, with the error's code."""
    found = re.finditer(rf"^{re.escape(name)}:(\d+): error: .*?(\[[\w-]+\])$", done.stdout, flags=re.M)
    return {int(m.group(1)): m.group(2) for m in found}


def _marked(path: pathlib.Path, marker: str) -> dict[int, str]:
    """Each line whose comment carries ``marker`` and an error code (``# E: [call-arg]``)."""
    return {
        number: re.search(rf"{marker}\s*(\[[\w-]+\])", line).group(1)  # type: ignore[union-attr]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(rf"{marker}\s*\[", line)
    }


def _pyright(path: pathlib.Path, where: pathlib.Path) -> dict[str, Any]:
    """pyright's report on a user's file, in its strict mode (the file's first line asks for it)."""
    report: dict[str, Any] = json.loads(_run(["pyright", "--outputjson"], path, where).stdout)
    assert report["summary"]["filesAnalyzed"] == 1
    return report


def test_correct_use_type_checks(tmp_path: pathlib.Path) -> None:
    done = _mypy(HERE / "check_api.py", tmp_path)
    assert done.returncode == 0, done.stdout


def test_misuse_is_rejected_where_expected(tmp_path: pathlib.Path) -> None:
    path = HERE / "check_errors.py"
    assert _errors(_mypy(path, tmp_path), path.name) == _marked(path, "# E:")


def test_correct_use_type_checks_under_pyright_strict(tmp_path: pathlib.Path) -> None:
    """The same user's file, under pyright's strict mode (its first line asks for it)."""
    report = _pyright(HERE / "check_api.py", tmp_path)
    assert report["generalDiagnostics"] == [], report


def test_the_plugin_catches_every_mistake_and_passes_every_correct_call(tmp_path: pathlib.Path) -> None:
    """With autoconvert.mypy_plugin, each mistake in the user's file gives its error, and the
    correct calls (tensors where arrays are annotated, tensor results declared as tensors) none."""
    done = _mypy(MISTAKES, tmp_path, plugin=True)
    assert _errors(done, MISTAKES.name) == _marked(MISTAKES, "# E:"), done.stdout
    assert len(_marked(MISTAKES, "# E:")) == 16


def test_the_plugin_keeps_the_typed_api_clean(tmp_path: pathlib.Path) -> None:
    """Every documented form of every decorator, its options included, type-checks with the plugin."""
    done = _mypy(HERE / "check_api.py", tmp_path, plugin=True)
    assert done.returncode == 0, done.stdout


def test_without_the_plugin_mypy_sees_what_the_docs_say(tmp_path: pathlib.Path) -> None:
    """Without the plugin the decorators' overloads keep one side each: the mistakes flagged are
    the ones marked bare, and a pair's Any result is returned as Any (docs/guide/typing.md)."""
    done = _mypy(MISTAKES, tmp_path)
    assert _errors(done, MISTAKES.name) == _marked(MISTAKES, "bare:"), done.stdout


def test_pyright_sees_what_the_docs_say(tmp_path: pathlib.Path) -> None:
    """pyright has no plugins: its strict mode accepts every correct call and flags the mistakes
    marked bare (docs/guide/typing.md)."""
    report = _pyright(MISTAKES, tmp_path)
    flagged = {d["range"]["start"]["line"] + 1 for d in report["generalDiagnostics"] if d["severity"] == "error"}
    assert flagged == _marked(MISTAKES, "bare:").keys() & _marked(MISTAKES, "# E:").keys(), report


def test_the_plugin_names_what_the_package_defines() -> None:
    """Each decorator and options' protocol the plugin hooks by name exists under that name: a
    rename would otherwise leave its calls typed as without the plugin, silently."""
    import importlib

    from autoconvert import mypy_plugin

    names = [*mypy_plugin.FUNCTIONS, *(name.removesuffix(".__call__") for name in mypy_plugin.METHODS)]
    names += [mypy_plugin.NUMPY_OP]
    for fullname in names:
        module, _, attribute = fullname.rpartition(".")
        assert hasattr(importlib.import_module(module), attribute), fullname
    assert len(mypy_plugin.FUNCTIONS) == 6 and len(mypy_plugin.METHODS) == 7
