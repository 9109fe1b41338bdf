"""Libraries' own torch-backend tests, run natively and through ``torchify``, two ways.

SciPy tests its array-API support over backends (``SCIPY_ARRAY_API``, the ``xp`` fixture),
and scikit-learn its array API dispatch over namespaces and devices
(``yield_namespace_device_dtype_combinations``); their torch tests say what a torch user
expects of their functions. This script runs the installed library's torch tests (SciPy's
special, ndimage, signal, fft, stats and linalg; scikit-learn's metrics, array helpers and
estimator checks, on torch's CPU device) three times: natively; with every call the test
code makes that carries a tensor sent through ``ac.torchify(..., native=False)`` instead
(the library's internal calls untouched), which converts every call; and through
``native="auto"``, which hands the library the tensors where it has a torch path of its own
and converts elsewhere. It prints, per module, the tests passing each way (of those passing
natively), and the differences from the native run, classified by their error. ``--check``
fails on a difference no policy explains, and where the ``"auto"`` run passes fewer tests
than the converting one.

    python -m benchmarks.conformance                    # SciPy's modules (tens of minutes)
    python -m benchmarks.conformance --library sklearn  # scikit-learn's (ten minutes)
    python -m benchmarks.conformance --quick --check    # the subsets CI runs (two minutes)
    python -m benchmarks.conformance ndimage signal     # some modules

It is also the pytest plugin that routes the calls (``-p benchmarks.conformance``, active
when ``AUTOCONVERT_CONFORMANCE_ROUTE`` is set).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

MODULES = ("special", "ndimage", "signal", "fft", "stats", "linalg")
#: What ``--quick`` runs: a few test files whose functions take and write arrays.
QUICK = {
    "ndimage": ["ndimage/tests/test_filters.py", "-k", "correlate or convolve or uniform or gaussian"],
    "signal": ["signal/tests/test_signaltools.py", "-k", "sosfilt or lfilter or savgol"],
    "special": ["special/tests/test_logsumexp.py"],
}


@dataclasses.dataclass(frozen=True)
class Library:
    """A library whose own array API tests the script runs: where they are, what they call."""

    package: str
    #: ``SCIPY_ARRAY_API``'s value its tests run on torch with.
    mode: str
    #: A module's name (on the command line) -> its tests: pytest's arguments, the paths under the package.
    modules: dict[str, list[str]]
    quick: dict[str, list[str]]
    #: The modules whose callables the tests' calls carrying a tensor are routed to torchify.
    callees: tuple[str, ...]
    #: Callables of those modules that the tests use to ask which namespace and device arrays
    #: have, and to move them between: kept, as converting would answer of NumPy's arrays.
    kept: frozenset[str] = frozenset()
    #: Modules besides the test modules whose names are routed: those the checks run in.
    checks: tuple[str, ...] = ()
    #: Callables that make the objects the tests call (scikit-learn's ``clone`` makes the
    #: estimators a check fits): what they make is routed as the callables are.
    makers: frozenset[str] = frozenset()


SCIPY = Library("scipy", '["torch"]', {m: [m] for m in MODULES}, QUICK, tuple(f"scipy.{m}" for m in MODULES))
#: scikit-learn's array API tests: its metrics and pairwise functions (their tables), its
#: array helpers, and its estimators' array API checks (``check_array_api_input``), whose
#: estimators come from ``clone``, each routed through torchify's view of it: whichever
#: path that view takes for an estimator is the one these runs count.
SKLEARN = Library(
    "sklearn",
    "1",
    {
        "metrics": [
            "metrics/tests/test_common.py",
            "metrics/tests/test_pairwise.py",
            "metrics/tests/test_classification.py",
            "metrics/cluster/tests",
        ],
        "utils": ["utils/tests/test_array_api.py"],
        "estimators": ["tests/test_common.py", "-k", "array_api"],
    },
    {
        "metrics": ["metrics/tests/test_common.py", "-k", "regression or pairwise"],
        "utils": ["utils/tests/test_array_api.py", "-k", "fill_diagonal or average_raises_with_wrong_dtype"],
    },
    ("sklearn.metrics", "sklearn.utils._array_api", "sklearn.base"),
    kept=frozenset(
        (
            "get_namespace",
            "get_namespace_and_device",
            "device",
            "check_same_namespace",
            "_array_api_for_tests",
            "move_to",
            "move_estimator_to",
            "_convert_to_numpy",
            "_estimator_with_converted_arrays",
        )
    ),
    checks=("sklearn.utils.estimator_checks",),
    makers=frozenset(("clone",)),
)
LIBRARIES = {library.package: library for library in (SCIPY, SKLEARN)}
#: Differences that are documented policies: (name, words of the test's id, words of its
#: error (any of each; none: any test or error), why). Any other difference is unexplained,
#: and fails ``--check``.
POLICIES = (
    (
        "NumPy's dtype promotion",
        (),
        ("dtypes do not match",),
        "the function runs in NumPy, so NumPy promotes (float32 with int32 weights gives float64, where "
        "torch keeps float32); dtype='input' gives torch's floating dtype back",
    ),
    (
        "NumPy's dtype promotion",
        ("manhattan", "laplacian"),
        ("assert torch.float64 == torch.float32",),
        "scikit-learn's NumPy code computes manhattan distances (SciPy's cdist) in float64 for float32 inputs, "
        "where its torch code keeps float32; dtype='input' gives float32 back",
    ),
    (
        "float16 widened",
        ("float16",),
        ("DID NOT RAISE",),
        "torchify hands SciPy float16 tensors as float32 (widen_float16=True), so code that rejects float16 "
        "runs, and results come back as float16",
    ),
    (
        "callables written in torch",
        (),
        ("not numpy.ndarray", "(numpy.ndarray,", "but it is a <class 'torch.dtype'>", "'numpy.ndarray' and 'Tensor'"),
        "a callable whose torch code is reached only through another function of the caller's module receives "
        "NumPy arrays unless callbacks=True; callables that read torch (or a tensor, and no NumPy) take tensors",
    ),
    (
        "callables written in torch",
        ("test_plot",),
        ("Namespace of actual and desired arrays do not match",),
        "freqz's plot= callback of SciPy's tests compares what it is handed with torch arrays",
    ),
    (
        "SciPy's NumPy path",
        (
            "test_non_standard_params",
            "test_str_cdf",
            "test_permutation_not_implement_for_xp",
            "test_nd_input_validation",
            "test_bootstrap_iv_other",
            "test_input_validation_xp",
        ),
        (),
        "torchify runs SciPy's NumPy code, which takes what its torch path refuses (fft's workers=, "
        "permutation t-tests, string cdfs), so a test that the torch path refuses an input finds it "
        "accepted, or a message naming NumPy",
    ),
    (
        "scikit-learn's NumPy path",
        ("test_average_raises_with_wrong_dtype",),
        ("DID NOT RAISE",),
        "torchify runs scikit-learn's NumPy code on functions it converts, which takes what its torch path "
        "refuses (complex weights in _average)",
    ),
    (
        "writes into arguments",
        ("test_fill_diagonal", "test_add_to_diagonal"),
        ("was written into by the function",),
        "a converted call hands NumPy code read-only arrays of the caller's tensors, so a function that writes "
        "into its argument (scikit-learn's _fill_diagonal) raises ReadOnlyError with the fix, where the native "
        "call changes the tensor in place",
    ),
    (
        "last-bit rounding",
        ("test_bootstrap_batch",),
        ("Tensor-likes are not equal",),
        "an exact comparison of two batchings: torch.mean over NumPy-made batches rounds the last bit "
        "otherwise (1.1e-16)",
    ),
)
_ROUTE = "AUTOCONVERT_CONFORMANCE_ROUTE"
_OUT = "AUTOCONVERT_CONFORMANCE_OUT"
_OPTIONS = "AUTOCONVERT_CONFORMANCE_OPTIONS"
_LIBRARY = "AUTOCONVERT_CONFORMANCE_LIBRARY"


# --------------------------------------------------------------------------- the plugin


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """Keep the torch-backend tests only (when the script runs), and route the test modules'
    (and the checks') calls to the library through torchify (when asked)."""
    if os.environ.get(_OUT):
        others = [item for item in items if "torch" not in item.nodeid.partition("[")[2]]
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item in items if "torch" in item.nodeid.partition("[")[2]]
    if not os.environ.get(_ROUTE):
        return
    library = LIBRARIES[os.environ.get(_LIBRARY) or "scipy"]
    for item in items:  # parametrized with the library's functions themselves
        params = getattr(getattr(item, "callspec", None), "params", {})
        for name, value in params.items():
            routed = _routed(value, library)
            if routed is not None:
                params[name] = routed
    modules = {item.module for item in items if getattr(item, "module", None) is not None}
    for module in modules | {importlib.import_module(name) for name in library.checks}:
        for name, value in list(vars(module).items()):
            routed = _routed(value, library)
            if routed is not None:
                setattr(module, name, routed)


def pytest_runtest_logreport(report: Any) -> None:
    """Record each test's outcome, and the first line of its error."""
    path = os.environ.get(_OUT)
    if path is None or (report.when != "call" and report.outcome == "passed"):
        return
    error = ""
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        error = crash.message.splitlines()[0] if crash is not None and crash.message else str(report.longrepr)[:200]
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps([report.nodeid, report.outcome, error]) + "\n")


def _home(value: Any, library: Library) -> str | None:
    """The module among ``library.callees`` that ``value`` (a module or callable) belongs to."""
    name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
    if not isinstance(name, str) or "tests" in name.split(".") or getattr(value, "__name__", None) in library.kept:
        return None  # the test modules' own helpers stay as they are
    return next((home for home in library.callees if name == home or name.startswith(home + ".")), None)


def _routed(value: Any, library: Library) -> Any:
    """A stand-in for a module or callable of the library the test module imported: calls
    carrying a tensor go through torchify, the others to the library as they were."""
    if isinstance(value, functools.partial):  # partial(mean_tweedie_deviance, power=1.5)
        routed = _routed(value.func, library)
        return None if routed is None else functools.partial(routed, *value.args, **value.keywords)
    home = _home(value, library)
    if home is None:
        return None
    if isinstance(value, types.ModuleType):
        return _RoutedModule(value, library)
    if callable(value) and not isinstance(value, type):
        return _route_callable(value, home, value.__name__ in library.makers)
    return None


class _RoutedModule(types.ModuleType):
    """A SciPy module whose public functions are routed (submodules and classes as they are)."""

    def __init__(self, module: types.ModuleType, library: Library) -> None:
        super().__init__(module.__name__, module.__doc__)
        self._module = module
        self._library = library
        self._routed: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if name.startswith("_") or isinstance(value, type) or not callable(value) or name in self._library.kept:
            return value
        if name not in self._routed:
            self._routed[name] = _route_callable(value, self._module.__name__, name in self._library.makers)
        return self._routed[name]


def _route_callable(function: Any, home: str, maker: bool = False) -> Any:
    import autoconvert as ac

    holder = types.ModuleType(home)  # torchify's view of the function, as its module shows it
    holder.f = function  # type: ignore[attr-defined]
    options = json.loads(os.environ.get(_OPTIONS) or "{}")
    if maker:
        return lambda *args, **kwargs: _RoutedObject(function(*args, **kwargs), options)
    return _Routed(function, ac.torchify(holder, **options).f)


class _Routed:
    """A SciPy callable whose calls carrying a tensor go through torchify; equal to the
    original, as tests compare them (``filter_func == ndimage.convolve``)."""

    def __init__(self, function: Any, torchified: Any) -> None:
        self.__wrapped__ = function
        self.torchified = torchified
        self.__name__ = getattr(function, "__name__", "routed")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        if _carries(torch.Tensor, (args, kwargs)):
            return self.torchified(*args, **kwargs)
        return self.__wrapped__(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__wrapped__, name)

    def __eq__(self, other: object) -> bool:
        return self.__wrapped__ == getattr(other, "__wrapped__", other)

    def __hash__(self) -> int:
        return hash(self.__wrapped__)


class _RoutedObject:
    """An object of the library (an estimator) whose method calls carrying a tensor go
    through torchify's view of it, the others to it as they were; once one has, its
    attributes are read through the view too (a fit on tensors leaves tensors there). Its
    class and ``vars`` are the object's, as the checks clone and inspect it."""

    def __init__(self, wrapped: Any, options: dict[str, Any]) -> None:
        import autoconvert as ac

        object.__setattr__(self, "_wrapped", wrapped)
        object.__setattr__(self, "_view", ac.torchify(wrapped, **options))
        object.__setattr__(self, "_through", False)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # clone reads it to make another
        return type(self._wrapped)

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        return self._wrapped.__dict__  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._wrapped, name)
        if not callable(value):
            return getattr(self._view, name) if self._through else value

        def method(*args: Any, **kwargs: Any) -> Any:
            import torch

            if not _carries(torch.Tensor, (args, kwargs)):
                result = value(*args, **kwargs)
                return self if result is self._wrapped else result
            object.__setattr__(self, "_through", True)
            result = getattr(self._view, name)(*args, **kwargs)
            return self if result is self._view or result is self._wrapped else result

        return method

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._wrapped, name, value)

    def __repr__(self) -> str:
        return repr(self._wrapped)


def _carries(kind: type, value: Any, depth: int = 3) -> bool:
    if isinstance(value, kind):
        return True
    if depth and type(value) in (tuple, list):
        return any(_carries(kind, v, depth - 1) for v in value)
    if depth and type(value) is dict:
        return any(_carries(kind, v, depth - 1) for v in value.values())
    return False


# --------------------------------------------------------------------------- the script


def _run(library: Library, tests: list[str], routed: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    """Run the library's torch-backend tests (pytest's arguments, the paths under the package
    first), natively or (``routed``: torchify's options) through torchify; ``{test: (outcome, error)}``."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        out = f.name
    env = {**os.environ, "SCIPY_ARRAY_API": library.mode, _OUT: out, _LIBRARY: library.package}
    env.pop(_ROUTE, None)
    if routed is not None:
        env[_ROUTE] = "1"
        env[_OPTIONS] = json.dumps(routed)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), env.get("PYTHONPATH")]))
    root = Path(importlib.import_module(library.package).__file__ or "").parent
    paths = next((i for i, arg in enumerate(tests) if arg.startswith("-")), len(tests))
    target = [str(root / path) for path in tests[:paths]] + tests[paths:]
    command = [sys.executable, "-m", "pytest", *target, "-q", "-p", "benchmarks.conformance"]
    command += ["-p", "no:cacheprovider", "-o", "addopts=", "-W", "ignore"]
    subprocess.run(command, check=False, env=env, cwd=root.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    outcomes: dict[str, tuple[str, str]] = {}
    for line in Path(out).read_text(encoding="utf-8").splitlines():
        nodeid, outcome, error = json.loads(line)
        if nodeid not in outcomes or outcome != "passed":
            outcomes[nodeid] = (outcome, error)
    Path(out).unlink()
    return {k: v for k, v in outcomes.items() if "torch" in k}


def _kind(nodeid: str, error: str) -> str:
    """The policy a difference follows, or its error's class and words (numbers and quoted
    values left out) when it follows none."""
    for name, tests, errors, _ in POLICIES:
        if (not tests or any(t in nodeid for t in tests)) and (not errors or any(e in error for e in errors)):
            return f"policy: {name}"
    return "unexplained: " + re.sub(r"'[^']*'|\"[^\"]*\"|[-+]?\d[\d.e+-]*", "…", error)[:110]


def compare(library: Library, module: str, tests: list[str], options: dict[str, Any]) -> dict[str, Any]:
    """``module``'s tests run natively, then through torchify converting and with
    ``native="auto"``: for each of those two, the tests passing (of those passing natively)
    and the differences, classified (see ``_kind``)."""
    native = _run(library, tests, None)
    passing = {k for k, (outcome, _) in native.items() if outcome == "passed"}
    found: dict[str, Any] = {"module": f"{library.package}.{module}", "native": len(passing)}
    for way, path in (("converting", False), ("auto", "auto")):
        through = _run(library, tests, {**options, "native": path})
        kept = {k for k in passing if through.get(k, ("missing", ""))[0] == "passed"}
        found[way] = len(kept)
        found[f"{way} differences"] = collections.Counter(
            _kind(k, through.get(k, ("missing", "not run"))[1]) for k in passing - kept
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conformance", description=__doc__.partition("\n")[0])
    parser.add_argument("modules", nargs="*", help="the library's modules (default: all)")
    parser.add_argument(
        "--library", choices=sorted(LIBRARIES), help="whose tests (default: scipy; with --quick, every one installed)"
    )
    parser.add_argument("--quick", action="store_true", help="the subset CI runs")
    parser.add_argument("--check", action="store_true", help="fail on a difference no policy explains")
    parser.add_argument("--options", default="{}", help="torchify's options, as JSON: '{\"callbacks\": true}'")
    options = parser.parse_args(argv)
    given = json.loads(options.options)
    if options.library:
        libraries = [LIBRARIES[options.library]]
    elif options.quick:
        libraries = [library for library in LIBRARIES.values() if importlib.util.find_spec(library.package)]
    else:
        libraries = [SCIPY]
    import numpy
    import torch

    unknown = set(options.modules) - {module for library in libraries for module in library.modules}
    if unknown:
        choices = ", ".join(module for library in libraries for module in library.modules)
        parser.error(f"unknown module(s) {', '.join(sorted(unknown))}; choose from {choices}")
    described = ", ".join(
        f"{library.package} {importlib.import_module(library.package).__version__}" for library in libraries
    )
    print(f"{described}, NumPy {numpy.__version__}, torch {torch.__version__}; torchify {options.options}")
    print("| module | pass natively | converting: pass | share | policies | unexplained ", end="")
    print("| native='auto': pass | share | policies | unexplained |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    results = []
    for library in libraries:
        for module in options.modules or (library.quick if options.quick else library.modules):
            if module not in library.modules:
                continue
            tests = library.quick[module] if options.quick and module in library.quick else library.modules[module]
            found = compare(library, module, tests, given)
            results.append(found)
            row = f"| {found['module']} | {found['native']} "
            for way in ("converting", "auto"):
                share = found[way] / found["native"] if found["native"] else 1.0
                differences = found[f"{way} differences"]
                policies = sum(n for kind, n in differences.items() if kind.startswith("policy"))
                row += f"| {found[way]} | {share:.1%} | {policies} | {sum(differences.values()) - policies} "
            print(row + "|", flush=True)
    for found in results:
        for way in ("converting", "auto"):
            for kind, count in found[f"{way} differences"].most_common():
                print(f"{found['module']} ({way}): {count} x {kind}")
    if options.check:
        failing = [
            f["module"]
            for f in results
            if not f["native"]
            or any(k.startswith("unexplained") for way in ("converting", "auto") for k in f[f"{way} differences"])
            or f["auto"] < f["converting"]
        ]
        if failing:
            print(f"unexplained differences, native='auto' behind converting, or no test ran: {', '.join(failing)}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
