"""The README's examples and the public docstrings' examples run, and the self-check passes."""

from __future__ import annotations

import doctest
import importlib.metadata
import pathlib
import platform
import re
import subprocess
import sys
import types

import pytest

import autoconvert
from autoconvert._conversions import _containers
from autoconvert._decorators import _decorators, _plain
from autoconvert._explain import _explain
from autoconvert._options import _config

ROOT = pathlib.Path(__file__).parent.parent
README = ROOT / "README.md"
#: Every Markdown page a user reads: the README and the documentation site's sources.
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]


def _blocks() -> list[tuple[str, str]]:
    """``(id, source)`` of every python block on every page."""
    found = []
    for page in PAGES:
        blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)
        found += [(f"{page.relative_to(ROOT)} block {n}", block) for n, block in enumerate(blocks, 1)]
    return found


BLOCKS = _blocks()


@pytest.mark.parametrize(("where", "block"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_every_example_runs_on_its_own(where: str, block: str) -> None:
    """Each python block on a page runs alone, as a reader pastes it: its imports are in it,
    and it needs nothing from another block. Warnings are errors, as everywhere in the suite."""
    # A real module of its own name: torch.compile (torch 2.4) imports the module a traced
    # function comes from, and keeps it by name in a frame of its own that outlives the block,
    # where another block's module of the same name fails its check (an AssertionError in
    # dynamo's import_source).
    name = "example_" + re.sub(r"\W", "_", where)
    module = types.ModuleType(name)
    sys.modules[name] = module
    if 'if __name__ == "__main__":' in block:  # a script, as a process pool's example is
        module.__name__ = "__main__"
    try:
        exec(compile(block, where, "exec"), module.__dict__)
    finally:
        del sys.modules[name]


def test_the_pages_have_examples() -> None:
    assert len(BLOCKS) >= 25


def test_readme_quick_start_is_the_two_commands() -> None:
    """The quick start's blocks: torch's CPU build where no GPU is, then install + self-check, and the tests."""
    quick_start = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = [block.split("```", 1)[0].strip().splitlines() for block in quick_start.split("```bash\n")[1:]]
    assert blocks == [
        ["pip install torch --index-url https://download.pytorch.org/whl/cpu"],
        ['pip install -e ".[test]" && python -m autoconvert', "pytest"],
    ]


@pytest.mark.parametrize("module", [_decorators, _plain, _config, _explain, _containers], ids=lambda m: m.__name__)
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0


def test_every_public_name_has_a_docstring() -> None:
    for name in autoconvert.__all__:
        if name != "__version__":
            assert getattr(autoconvert, name).__doc__, name


def test_self_check_runs_and_passes() -> None:
    done = subprocess.run([sys.executable, "-m", "autoconvert"], capture_output=True, text=True, check=True)
    assert done.stdout.rstrip().endswith("ok")
    import numpy
    import torch

    first = done.stdout.splitlines()[0]
    assert first.startswith(f"autoconvert {autoconvert.__version__}, python {platform.python_version()}, ")
    assert f"torch {torch.__version__}, numpy {numpy.__version__}, scipy " in first
    assert first.endswith(f"wrapt {importlib.metadata.version('wrapt')}")
    assert "cpu      torch.bfloat16" in done.stdout and "fails: TypeError" in done.stdout
    # The odd cells explained: lfilter promotes to float64, and the hand-written line fails on bfloat16.
    assert (
        "\ndtype out: the function itself returned float64 for bfloat16, float64 for float32 (SciPy and NumPy "
        "promote); autoconvert keeps the function's dtype, and returns_tensor(dtype='input') gives the caller's\n"
    ) in done.stdout
    assert (
        "\nfails: TypeError: the hand-written line, x.detach().cpu().numpy(), raised TypeError: Got unsupported "
        "ScalarType BFloat16 (NumPy has no bfloat16; autoconvert widens it)\n"
    ) in done.stdout


def test_docstrings_read_as_plain_text_in_help() -> None:
    """help() shows a docstring as written: public names are ``CopyError``, which the site's
    Griffe extension (docs/griffe_links.py) links, never the site's link markup."""
    marked = [name for name in autoconvert.__all__ if "][autoconvert." in (getattr(autoconvert, name).__doc__ or "")]
    assert marked == []
    assert "``CopyError``" in (autoconvert.accepts_numpy.__doc__ or "")
