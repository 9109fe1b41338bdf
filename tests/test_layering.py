"""The package's shape: imports point down the module list, and importing it imports nothing optional."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).parent.parent / "autoconvert"
# Bottom first: a module may import only modules listed before it (docs/design.md).
ORDER = [
    "_errors",
    "_pickling",
    "_chunks",
    "_dtypes",
    "_wants",
    "_devices",
    "_copies",
    "_describe",
    "_grad",
    "_memory",
    "_to_torch",
    "_sparse",
    "_to_numpy",
    "_writeback",
    "_containers",
    "_tree",
    "_options",
    "_config",
    "_observe",
    "_escape",
    "_signature",
    "_outparams",
    "_exact",
    "_callbacks",
    "_inputs",
    "_outputs",
    "_emit",
    "_spec",
    "_generate",
    "_specialise",
    "_failures",
    "_call",
    "_plan",
    "_wrapper",
    "_decorators",
    "_plain",
    "_executors",
    "_batched",
    "_overwrites",
    "_proxies",
    "_torchify",
    "_schema",
    "_annotations",
    "_adapt",
    "_opspec",
    "_autograd",
    "_library",
    "_ops",
    "_wording",
    "_explain",
    "__init__",
    "__main__",
]


def _imports(module: str, *, module_scope: bool = False) -> tuple[set[str], set[str]]:
    """(package modules imported relatively, top-level packages imported absolutely), at any
    depth, or at module scope only."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    relative, absolute = set(), set()
    for node in tree.body if module_scope else ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.module:
                relative.add(node.module)
            else:
                relative.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            absolute.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.Import):
            absolute.update(alias.name.split(".")[0] for alias in node.names)
    return relative, absolute


def test_every_module_is_in_the_layer_list() -> None:
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(ORDER)


def test_imports_point_down_the_list_only() -> None:
    for position, module in enumerate(ORDER):
        relative, _ = _imports(module)
        for target in relative:
            assert ORDER.index(target) < position, f"{module} imports {target}, which sits above it"


def test_the_tree_module_imports_neither_torch_nor_numpy() -> None:
    assert not _imports("_tree")[1] & {"torch", "numpy"}


def test_the_package_never_imports_scipy_at_module_scope() -> None:
    """SciPy is optional: imported only when a sparse object is met (and by the demo)."""
    for module in ORDER:
        assert "scipy" not in _imports(module, module_scope=True)[1], module


def test_importing_autoconvert_imports_nothing_optional() -> None:
    code = "import sys, autoconvert; bad = {'scipy', 'torch._dynamo'} & set(sys.modules); assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], check=True)
