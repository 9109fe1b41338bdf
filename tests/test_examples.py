"""Every script in examples/ runs, as a user would run it, with warnings as errors."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


def test_the_gallery_is_there() -> None:
    assert len(EXAMPLES) >= 7


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(script: pathlib.Path) -> None:
    done = subprocess.run([sys.executable, "-W", "error", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_the_examples_page_lists_every_example() -> None:
    page = (pathlib.Path(__file__).parent.parent / "docs" / "examples.md").read_text()
    for script in EXAMPLES:
        assert f"- `examples/{script.name}`: " in page, script.name
