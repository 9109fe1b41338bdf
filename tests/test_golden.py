"""The generated code of eleven representative plans, pinned in ``tests/golden/``.

Each file is what ``autoconvert.explain`` says of one plan (its options, parameters, call
path) and the source generated for it with the free names it reads, so any change to generated code shows up in review
as a diff of these files, as attrs' tests of its generated methods do. After a deliberate
change, rewrite them with ``AUTOCONVERT_UPDATE_GOLDEN=1 pytest tests/test_golden.py`` and
read the diff.
"""

from __future__ import annotations

import linecache
import os
import pathlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import autoconvert as ac
from autoconvert._interpreter._trace import _UNFIT_DYNAMO
from autoconvert._spec import _spec
from autoconvert._spec._code_reads import global_names

GOLDEN = pathlib.Path(__file__).parent / "golden"
pytestmark = pytest.mark.skipif(not _spec.enabled, reason="flat calls are off (--generic-calls)")


def _f(a: np.ndarray) -> np.ndarray:
    return a


def _keywords(a: np.ndarray, *, sigma: float = 1.0, mode: str = "reflect") -> np.ndarray:
    return a


def _stack(batch: dict[str, np.ndarray]) -> np.ndarray:
    return np.stack(list(batch.values()))


class Scaler:
    """An object whose method a torchified proxy calls."""

    def scale(self, a: np.ndarray, k: float = 2.0) -> np.ndarray:
        return a * k

    @staticmethod
    def negate(a: np.ndarray) -> np.ndarray:
        """A torchified class's static method: its guard retries refusals on entry, so the flat
        call calls the function itself and sends such a refusal to the generic call."""
        return -a


def _source(function: Any) -> str:
    """A generated function's source, as linecache holds it for tracebacks."""
    code = getattr(function, "__func__", function).__code__
    return "".join(linecache.getlines(code.co_filename))


def _free_names(function: Any) -> str:
    """The names a generated function reads from its namespace, as ``explain`` lists them."""
    namespace = function.__globals__
    found = sorted(name for name in global_names(function.__code__) if name in namespace)
    return "# its free names:\n" + "".join(f"#   {name}\n" for name in found)


def _method_form(wrapper: Any) -> str:
    method = wrapper._self_method
    return (
        f"{ac.explain(wrapper, verbose=True)}\n\n# the method form, for calls through an instance\n"
        f"{_source(method)}{_free_names(getattr(method, '__func__', method))}"
    )


def _torchified_method() -> str:
    return str(ac.explain(ac.torchify(Scaler()).scale, verbose=True))


PLANS: dict[str, Callable[[], str]] = {
    "one_tensor": lambda: str(ac.explain(ac.returns_tensor(ac.accepts_numpy(_f)), verbose=True)),
    "keywords": lambda: str(ac.explain(ac.returns_tensor(ac.accepts_numpy(_keywords)), verbose=True)),
    "method": lambda: _method_form(ac.accepts_numpy(copy=True)(_f)),
    "dict_of_tensors": lambda: str(ac.explain(ac.returns_tensor(ac.accepts_numpy(_stack)), verbose=True)),
    "writeback": lambda: str(ac.explain(ac.accepts_numpy(writeback=True)(_f), verbose=True)),
    "check_writes": lambda: str(ac.explain(ac.accepts_numpy(check_writes=True)(_f), verbose=True)),
    "returns_tensor_alone": lambda: str(ac.explain(ac.returns_tensor(_f), verbose=True)),
    "reverse_pair": lambda: str(ac.explain(ac.returns_numpy(ac.accepts_tensor(_f)), verbose=True)),
    "torchified_method": _torchified_method,
    "torchified_static": lambda: str(ac.explain(ac.torchify(Scaler).negate, verbose=True)),
    # The source alone: whether a ufunc has a signature to list depends on NumPy's version.
    "ufunc_leading_form": lambda: ac.explain(ac.torchify(np).add).source.split("\n", 1)[1],  # type: ignore[union-attr]
}


_TRACED = (
    "its calls are traced into the graph, its NumPy code as torch operations (a call with an integer or boolean "
    "tensor, or inside a config or stats block, takes the escape)"
)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_generated_code_matches_its_golden_file(name: str) -> None:
    text = re.sub(r"<autoconvert ([a-z ]+) \d+>", r"<autoconvert \1>", PLANS[name]()).rstrip("\n") + "\n"
    # The free names are pinned; what each holds (a qualified name, a value) varies with torch's version.
    text = re.sub(r"^(#   \w+): .*$", r"\1", text, flags=re.M)
    if _UNFIT_DYNAMO is not None:  # a torch whose dynamo cannot hold the trace route: pinned as where it can
        off = f"each call is one graph break, the body run eagerly: {_UNFIT_DYNAMO}"
        text = text.replace(off, _TRACED)
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("AUTOCONVERT_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"generated code changed: AUTOCONVERT_UPDATE_GOLDEN=1 rewrites {path}"


def test_every_golden_file_has_its_plan() -> None:
    """No file outlives the plan it pinned."""
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(PLANS)


def test_every_generated_function_lists_its_free_names() -> None:
    """Each function a golden file pins is followed by the names it reads from its namespace
    (the plan's constants, the helpers): what the source alone cannot show."""
    for path in sorted(GOLDEN.glob("*.txt")):
        text = path.read_text()
        assert len(re.findall(r"^def ", text, flags=re.M)) == text.count("# its free names:\n"), path.name
