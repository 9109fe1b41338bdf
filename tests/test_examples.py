"""Every script in examples/ runs, as a user would run it, with warnings as errors; the
recipes' output is the one the Examples page shows."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
PAGE = ROOT / "docs" / "examples.md"
#: The recipes, shown with their output on the Examples page: the library each needs (that
#: of the ``recipes`` extra, or SciPy, which the test extra has).
RECIPES = {
    "opencv_blur.py": "cv2",
    "skimage_regions.py": "skimage",
    "sklearn_metrics.py": "sklearn",
    "tracking_lap_kalman.py": "lap",
    "coco_rle.py": "pycocotools",
    "numba_kernel.py": "numba",
    "librosa_features.py": "librosa",
    "gcn_adjacency.py": "scipy",
    "ray_dataloader.py": "ray",  # the ray extra, which CI's main leg installs
}
#: CI sets it where it installs the recipes extra: a missing library is then a failure.
REQUIRED = bool(os.environ.get("AUTOCONVERT_TEST_RECIPES"))


def test_the_gallery_is_there() -> None:
    assert len(EXAMPLES) >= 12
    assert set(RECIPES) <= {script.name for script in EXAMPLES}


def _shown_output(script: str) -> str | None:
    """The output the Examples page shows under ``script``'s source, if it shows one."""
    found = re.search(
        rf'--8<-- "examples/{re.escape(script)}"\n```\n\nOutput:\n\n```text\n(.*?)```', PAGE.read_text(), re.S
    )
    return found[1] if found else None


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(script: pathlib.Path) -> None:
    needs = RECIPES.get(script.name)
    if needs is not None and importlib.util.find_spec(needs) is None:
        message = f"{script.name} needs {needs}: pip install -e '.[recipes]'"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    done = subprocess.run([sys.executable, "-W", "error", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    if needs is not None:
        assert done.stdout == _shown_output(script.name)


def test_the_examples_page_lists_every_example() -> None:
    page = PAGE.read_text()
    for script in EXAMPLES:
        if script.name in RECIPES:
            assert f'--8<-- "examples/{script.name}"' in page, script.name
        else:
            assert f"- `examples/{script.name}`: " in page, script.name
