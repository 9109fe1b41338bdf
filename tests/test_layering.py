"""The package's shape: layer folders, imports pointing down the module list, and importing
it imports nothing optional."""

from __future__ import annotations

import ast
import dataclasses
import io
import pathlib
import re
import subprocess
import sys
import tokenize
import tomllib

from autoconvert._options._options import AFTER_CALL, Policy

PACKAGE = pathlib.Path(__file__).parent.parent / "autoconvert"
#: The layer folders, bottom first. What every layer shares (errors, pickling, the compile
#: escape, partials) sits in the package itself, below them; so do its front doors (``__init__``,
#: ``__main__``, the mypy plugin), above them.
LAYERS = [
    "_conversions",
    "_adapters",
    "_gradients",
    "_options",
    "_observe",
    "_spec",
    "_failures",
    "_generation",
    "_interpreter",
    "_decorators",
    "_batched",
    "_torchify",
    "_adapt",
    "_numpy_op",
    "_explain",
]
# Bottom first: a module may import only modules listed before it (docs/design.md).
ORDER = [
    "_errors",
    "_pickling",
    "_escape",
    "_partials",
    "_conversions._dtypes",
    "_conversions._devices",
    "_conversions._copies",
    "_conversions._describe",
    "_conversions._memory",
    "_conversions._grad",
    "_conversions._to_torch",
    "_conversions._sparse",
    "_conversions._to_numpy",
    "_conversions._writeback",
    "_conversions._containers",
    "_conversions._result_copies",
    "_conversions._result_methods",
    "_conversions._mutations",
    "_conversions._tree",
    "_adapters._adapter",
    "_adapters._numpy",
    "_adapters._scipy",
    "_adapters._sklearn",
    "_adapters._f2py",
    "_adapters._cython",
    "_adapters._numba",
    "_adapters._opencv",
    "_adapters._python",
    "_adapters._torch",
    "_adapters._array_api_compat",
    "_adapters._table",
    "_gradients._rule",
    "_gradients._built",
    "_gradients._boundary",
    "_gradients._ndimage_transforms",
    "_gradients._ndimage",
    "_gradients._filters",
    "_gradients._filtfilt",
    "_gradients._spectral",
    "_gradients._signal",
    "_gradients._integrate",
    "_gradients._linalg",
    "_gradients._special",
    "_gradients._lines",
    "_gradients._interpolate",
    "_gradients._catalogue",
    "_options._checks",
    "_options._options",
    "_options._config",
    "_observe._observe",
    "_spec._signature",
    "_spec._outparams",
    "_spec._holders",
    "_spec._code_reads",
    "_spec._callbacks",
    "_spec._emit",
    "_spec._collected",
    "_spec._writeback",
    "_spec._check_writes",
    "_spec._copy_back",
    "_spec._inputs",
    "_spec._outputs",
    "_spec._spec",
    "_failures._guards",
    "_failures._failures",
    "_failures._traceback",
    "_generation._exact",
    "_generation._generate",
    "_generation._specialise",
    "_interpreter._after",
    "_interpreter._call",
    "_interpreter._trace",
    "_interpreter._plan",
    "_interpreter._routes",
    "_interpreter._wrapper",
    "_decorators._decorators",
    "_decorators._plain",
    "_batched._caps",
    "_batched._seeds",
    "_batched._states",
    "_batched._reads",
    "_batched._tensor_bytes",
    "_batched._chunks",
    "_batched._gather",
    "_batched._pools",
    "_batched._executors",
    "_batched._ray",
    "_batched._on_device",
    "_batched._batched",
    "_torchify._proxies",
    "_torchify._building",
    "_torchify._leaving",
    "_torchify._native",
    "_torchify._cupy_call",
    "_torchify._cupy",
    "_torchify._torchify",
    "_adapt._wants",
    "_adapt._annotations",
    "_adapt._adapt",
    "_numpy_op._schema",
    "_numpy_op._handed",
    "_numpy_op._opspec",
    "_numpy_op._autograd",
    "_numpy_op._library",
    "_numpy_op._ops",
    "_explain._wording",
    "_explain._explain",
    "__init__",
    "__main__",
    "mypy_plugin",
]


def _path(module: str) -> pathlib.Path:
    return PACKAGE.joinpath(*module.split(".")).with_suffix(".py")


def _imports(module: str, *, module_scope: bool = False) -> tuple[set[str], set[str]]:
    """(package modules imported, as ORDER names them: relatively within a folder, absolutely
    across folders; other top-level packages imported), at any depth, or at module scope only."""
    tree = ast.parse(_path(module).read_text())
    here = module.split(".")[:-1]  # the folder the module sits in
    relative, absolute = set(), set()
    for node in tree.body if module_scope else ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - (node.level - 1)]
            if node.module:
                relative.add(".".join([*base, node.module]))
            else:  # from . import _devices
                relative.update(".".join([*base, alias.name]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autoconvert."):
            inside = node.module.removeprefix("autoconvert.")  # type: ignore[union-attr]  # startswith: a str
            if inside in LAYERS:  # from autoconvert._conversions import _devices
                relative.update(f"{inside}.{alias.name}" for alias in node.names)
            else:
                relative.add(inside)
        elif isinstance(node, ast.ImportFrom):
            absolute.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.Import):
            absolute.update(alias.name.split(".")[0] for alias in node.names)
    return relative, absolute


def test_every_module_is_in_the_layer_list() -> None:
    found = {".".join(p.relative_to(PACKAGE).with_suffix("").parts) for p in PACKAGE.rglob("*.py")}
    assert sorted(found - {f"{folder}.__init__" for folder in LAYERS}) == sorted(ORDER)


def test_the_distribution_ships_every_layer() -> None:
    """pyproject.toml lists the packages a wheel holds: the package and each layer folder."""
    listed = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert listed == ["autoconvert", *(f"autoconvert.{folder}" for folder in LAYERS)]


def test_each_layer_sits_together_in_its_folder_in_order() -> None:
    folders = [module.rpartition(".")[0] for module in ORDER]
    assert folders[:4] == ["", "", "", ""] and folders[-3:] == ["", "", ""]  # shared below, the front doors above
    layers = [LAYERS.index(folder) for folder in folders[4:-3]]
    assert layers == sorted(layers)


def test_imports_point_down_the_list_only() -> None:
    for position, module in enumerate(ORDER):
        relative, _ = _imports(module)
        for target in relative:
            assert ORDER.index(target) < position, f"{module} imports {target}, which sits above it"


def _private_names_across_folders() -> list[str]:
    """``module imports target.name`` for each private name (one leading underscore, not a
    module) a module imports from a module of another folder (the package itself is one)."""
    crossing = []
    for module in ORDER:
        here = module.split(".")[:-1]
        for node in ast.walk(ast.parse(_path(module).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autoconvert."):
                target = node.module.removeprefix("autoconvert.")  # type: ignore[union-attr]  # startswith: a str
            else:
                continue
            for alias in node.names:
                imported = f"{target}.{alias.name}".lstrip(".")
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and imported not in ORDER and target.rpartition(".")[0] != module.rpartition(".")[0]:
                    crossing.append(f"{module} imports {imported}")
    return crossing


def test_no_private_name_crosses_a_folder() -> None:
    """A name used outside its folder is public there (its folder's interface); a private one
    is its module's or its folder's business alone."""
    assert _private_names_across_folders() == []


def test_proxy_state_goes_by_one_prefix_and_stays_with_the_proxies() -> None:
    """State kept on proxies goes by wrapt's ``_self_`` prefix alone. The stand-ins' own
    (torchify's proxies: their device, their result hook) is read in their folder and by the
    accessors beside ``StandIn`` (``_conversions._tree``), never by the floors between."""
    source = {module: _path(module).read_text() for module in ORDER}
    assert [m for m, text in source.items() if re.search(r"\b_ac_\w|[\"']_autoconvert_", text)] == []
    wrapt_state = set(re.findall(r"\b_self_\w+", source["_interpreter._wrapper"]))
    stand_ins = {n for m, t in source.items() if m.startswith("_torchify.") for n in re.findall(r"\b_self_\w+", t)}
    own = stand_ins - wrapt_state
    assert "_self_device" in own
    readers = [
        m
        for m, text in source.items()
        if not m.startswith("_torchify.") and m != "_conversions._tree" and own & set(re.findall(r"\b_self_\w+", text))
    ]
    assert readers == []


def test_what_runs_on_worker_processes_imports_no_torch() -> None:
    """A batched chunk, its seeds and its thread caps run beside NumPy code alone."""
    for module in ("_batched._caps", "_batched._seeds", "_batched._states", "_batched._chunks"):
        assert "torch" not in _imports(module)[1], module


def test_the_container_modules_import_neither_torch_nor_numpy() -> None:
    for module in (
        "_conversions._containers",
        "_conversions._result_copies",
        "_conversions._result_methods",
        "_conversions._tree",
    ):
        assert not _imports(module)[1] & {"torch", "numpy"}, module


def test_the_package_never_imports_scipy_at_module_scope() -> None:
    """SciPy is optional: imported only when a sparse object is met (and by the demo)."""
    for module in ORDER:
        assert "scipy" not in _imports(module, module_scope=True)[1], module


def test_importing_autoconvert_imports_nothing_optional() -> None:
    optional = "{'scipy', 'sklearn', 'torch._dynamo', 'threadpoolctl', 'distributed', 'ray'}"  # torch itself imports tqdm (torch.hub)
    code = f"import sys, autoconvert; bad = {optional} & set(sys.modules); assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_design_page_maps_every_module_in_order() -> None:
    """docs/design.md's module map is the layout: each folder, then its modules, in ORDER."""
    page = (PACKAGE.parent / "docs" / "design.md").read_text()
    block = page.split("```")[1]
    folder, mapped = "", []
    for line in block.splitlines()[2:]:  # after "autoconvert/": folders at 2 spaces, their modules at 4
        indent, name = len(line) - len(line.lstrip()), line.strip().split(" ")[0]
        if indent == 2 and name.endswith("/"):
            folder = name.removesuffix("/") + "."
        elif name.endswith(".py"):
            mapped.append((folder if indent == 4 else "") + name.removesuffix(".py"))
    assert mapped == ORDER


def test_the_design_page_lists_every_adapter() -> None:
    """The adapters' table on docs/design.md has one row for each adapter of the table."""
    from autoconvert._adapters._table import ADAPTERS

    page = (PACKAGE.parent / "docs" / "design.md").read_text()
    rows = [line.split("|")[1].strip(" `") for line in page.splitlines() if line.startswith("  | `")]
    assert sorted(rows) == sorted(type(a).__name__ for a in ADAPTERS)


def test_the_design_page_s_where_to_look_table_names_what_each_file_defines() -> None:
    """Each row of the design page's "where to look" table names a file that exists and a name
    it defines (``Class.method``: the class, and the method in it)."""
    page = (PACKAGE.parent / "docs" / "design.md").read_text()
    table = page.split("Where to look for a behaviour")[1].split("\n\n")[1]
    rows = [line.split("|")[2:4] for line in table.splitlines()[2:]]
    assert len(rows) == 8
    for path, name in rows:
        source = PACKAGE.parent / path.strip(" `")
        tree = ast.parse(source.read_text())
        scope: list[ast.stmt] = tree.body
        for part in name.split("`")[1].split("."):
            found = [node for node in scope if part in _names(node)]
            assert found, f"{source.name} defines no {part}"
            scope = getattr(found[0], "body", [])


#: The modules of the sides: the one place a side's class is told from another's.
SIDES = {"_spec._inputs", "_spec._outputs"}


def _side_classes() -> set[str]:
    """The names of the input and output sides' classes, the interfaces and every side."""
    from autoconvert._spec._inputs import Inputs
    from autoconvert._spec._outputs import Outputs

    found, todo = set(), [Inputs, Outputs]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo += cls.__subclasses__()
    return found


def test_no_reader_tests_which_side_it_has() -> None:
    """The spec, the Runner, the generator, ``explain`` and the products call the sides'
    interface (``Inputs``, ``Outputs``): none tests a side's class (``isinstance``,
    ``issubclass``, ``type(x) is``), which would spread a side's decisions outside it."""
    sides, tests = _side_classes(), []
    assert {"NumpyInputs", "TensorInputs", "RecordingInputs", "NumpyOutputs", "TensorOutputs"} <= sides
    for module in ORDER:
        if module in SIDES:
            continue
        for node in ast.walk(ast.parse(_path(module).read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in {"isinstance", "issubclass"}:
                named = node.args[1:]
            elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
                named = node.comparators
            else:
                continue
            names = {n.id for arg in named for n in ast.walk(arg) if isinstance(n, ast.Name)}
            tests += [f"{module}:{node.lineno} tests {name}" for name in sorted(names & sides)]
    assert tests == []


#: Module-level names more than one module defines: typing's variables (each module's own);
#: the gradient catalogue's per-subpackage ``rules`` (an interface: the catalogue reads each
#: module's); ``_new``, each module's alias of ``tuple.__new__`` (a global read, no import);
#: and, still to be named apart, ``Rule`` (numpy_op's backward= type, the catalogue's rule)
#: and private helpers of two meanings in ``_gradients``, ``_batched`` and ``_torchify``.
#: Names defined at module scope in more than one module, each for a reason: ``P`` and ``R`` are
#: the type variables of a wrapped callable, local to each module by typing's convention;
#: ``rules`` is the function every gradient module defines for the catalogue to call; ``Rule``
#: is both a gradient rule (``_gradients._rule``) and the type of numpy_op's ``backward=`` and
#: ``jvp=`` (``_options._checks``), left for a rename that touches ``_numpy_op``.
SHARED_NAMES = {"P", "R", "Rule", "rules"}


def test_a_module_level_name_means_one_thing() -> None:
    """A name defined at module scope in two modules is one of the few known ones: others are
    one definition imported where used, or two names for two meanings."""
    where: dict[str, set[str]] = {}
    for module in ORDER:
        for node in ast.parse(_path(module).read_text()).body:
            for name in _names(node):
                where.setdefault(name, set()).add(module)
    assert {name for name, modules in where.items() if len(modules) > 1} == SHARED_NAMES
    assert len(SHARED_NAMES) <= 5


def _names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


#: The modules that name writeback=True in their code (not their docstrings or comments): its
#: feature (``_spec._writeback``), the copy back beneath it (``_conversions._writeback``), the
#: options surface with the table of the places that give way to it (``AFTER_CALL``), the NumPy
#: side that composes it, the public decorator's signature and the copy causes ``stats``
#: counts. Every other place asks that table by its own name (``gives_way``, ``reject_given``).
WRITEBACK_NAMED_IN = {
    "_conversions._copies",
    "_conversions._writeback",
    "_options._options",
    "_spec._writeback",
    "_spec._inputs",
    "_decorators._decorators",
}


def _names_writeback(module: str) -> bool:
    """Whether ``module``'s code names writeback: an identifier, or a string that is not a
    docstring (a string statement of its own), holding the word, as tokenize reads it."""
    tokens = tokenize.generate_tokens(io.StringIO(_path(module).read_text()).readline)
    code = [t for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL)]
    # From Python 3.12 an f-string's text is a token of its own.
    words = {tokenize.NAME, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    for i, token in enumerate(code):
        if token.type not in words or "writeback" not in token.string.lower():
            continue
        before = code[i - 1].type if i else tokenize.NEWLINE
        after = code[i + 1].type if i + 1 < len(code) else tokenize.ENDMARKER
        docstring = (
            token.type == tokenize.STRING
            and before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            and after in (tokenize.NEWLINE, tokenize.ENDMARKER)
        )
        if not docstring:
            return True
    return False


def test_writeback_is_named_in_its_own_modules_alone() -> None:
    """A feature lives in one place: writeback's decision, leaf, after step and words are its
    modules'; the products and routes ask the options whether writes reach the caller."""
    assert {module for module in ORDER if _names_writeback(module)} == WRITEBACK_NAMED_IN
    assert len(WRITEBACK_NAMED_IN) <= 6


def test_each_place_that_gives_way_is_in_the_table_and_asks_it() -> None:
    """AFTER_CALL lists every place that gives way to writeback, check_writes or out-parameters,
    each asked by its name somewhere in the package (no entry left unread, no name mistyped),
    and gives way only to options a side's policy has."""
    asked = re.compile(r"""(?:gives_way|reject_given)\(\s*"([^"]+)"|AFTER_CALL\["([^"]+)"\]""")
    places = {a or b for module in ORDER for a, b in asked.findall(_path(module).read_text())}
    assert places == set(AFTER_CALL)
    fields = {field.name for field in dataclasses.fields(Policy)}
    assert all(set(place.features) <= fields for place in AFTER_CALL.values())
