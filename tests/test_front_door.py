"""What a newcomer meets first: reprs, ``--help``, ``dir``, signatures, class names."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys
import traceback

import numpy as np
import scipy.special
import torch

import autoconvert as ac


def test_a_decorated_function_s_repr_names_the_function_and_the_options() -> None:
    """Not wrapt's ``<Wrapper at 0x… for function at 0x…>``: the sides, their explicit
    options, and the wrapped object's own repr."""

    def smooth(a: np.ndarray) -> np.ndarray:
        return a

    assert repr(ac.accepts_numpy(smooth)) == f"<autoconvert accepts_numpy() of {smooth!r}>"
    pair = ac.returns_tensor(device="cpu")(ac.accepts_numpy(copy=True)(np.negative))
    assert repr(pair) == "<autoconvert accepts_numpy(copy=True), returns_tensor(device='cpu') of <ufunc 'negative'>>"
    assert repr(ac.torchify(scipy.special, array_module="numpy").expit) == (
        "<autoconvert accepts_numpy(widen_float16=True, out_params=('out', 'output')), returns_tensor() "
        "of <ufunc 'expit'>>"
    )


def test_help_prints_usage_and_runs_no_check() -> None:
    """``python -m autoconvert --help`` is argparse's usage; the self-check runs without it."""
    done = subprocess.run(
        [sys.executable, "-m", "autoconvert", "--help"], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.startswith("usage: python -m autoconvert [-h] [--version]")
    assert "wrapped:" not in done.stdout
    version = subprocess.run(
        [sys.executable, "-m", "autoconvert", "--version"], capture_output=True, text=True, check=True, timeout=120
    )
    assert version.stdout.strip() == f"autoconvert {ac.__version__}"
    wrong = subprocess.run(
        [sys.executable, "-m", "autoconvert", "--bogus"], check=False, capture_output=True, text=True, timeout=120
    )
    assert wrong.returncode == 2 and "unrecognized arguments: --bogus" in wrong.stderr


def test_dir_lists_the_public_names_and_exceptions_are_autoconvert_s_own() -> None:
    """``dir(autoconvert)`` is the API, not 29 private submodules; a traceback, a repr and a
    pickle name ``autoconvert.ConversionError``."""
    assert dir(ac) == sorted(ac.__all__)
    for name in ac.__all__:
        value = getattr(ac, name)
        if isinstance(value, type) and issubclass(value, (Exception, Warning)):
            assert value.__module__ == "autoconvert", name
            assert getattr(ac, value.__qualname__) is value
    try:
        ac.to_numpy(torch.empty(1, device="meta"))
    except ac.ConversionError as e:
        shown = "".join(traceback.format_exception_only(e))
    assert shown.startswith("autoconvert.ConversionError: autoconvert.to_numpy(): argument obj is a meta tensor")
    assert type(pickle.loads(pickle.dumps(ac.ReadOnlyError("x")))) is ac.ReadOnlyError


def test_signatures_show_every_option_with_its_type_and_default() -> None:
    """``help()``, ``inspect.signature``, editors and the API pages show the options, not
    ``**options``: each taker's own, in the table's order."""

    def options(fn: object) -> list[str]:
        return [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]  # type: ignore[arg-type]

    assert str(inspect.signature(ac.returns_numpy)) == (
        "(func=None, /, *, copy: bool | None = None, nested: bool = True, sparse: Literal['array', 'matrix'] = "
        "'array', transfers: Literal['allow', 'log', 'warn', 'error'] = 'allow')"
    )
    assert str(inspect.signature(ac.to_tensor)) == (
        "(obj, *, device: torch.device | str | int | None = None, dtype: Union[torch.dtype, Literal['input'], "
        "NoneType] = None, copy: bool | None = None, nested: bool = True, sparse_layout: torch.layout | None = None)"
    )
    assert inspect.signature(ac.to_numpy).parameters["grad"].default == "detach"  # to_numpy's own default
    assert options(ac.accepts_numpy) == [
        "copy", "writeback", "grad", "only", "exclude", "nested", "sparse", "widen_float16", "check_writes",
        "transfers", "callbacks", "compile", "out_params",
    ]  # fmt: skip
    assert options(ac.returns_tensor) == ["device", "dtype", "copy", "nested", "sparse_layout", "transfers"]
    assert options(ac.accepts_tensor) == [
        "device", "dtype", "copy", "only", "exclude", "nested", "sparse_layout", "transfers"
    ]  # fmt: skip
    assert options(ac.adapt) == [
        "device", "copy", "writeback", "grad", "nested", "sparse", "widen_float16", "check_writes", "transfers",
        "compile",
    ]  # fmt: skip
    assert options(ac.to_numpy) == ["copy", "grad", "nested", "sparse"]
    pair = {o for o in options(ac.accepts_numpy) + options(ac.returns_tensor) if o not in ("only", "exclude")}
    own = ["native", "array_module"]
    assert options(ac.torchify)[:2] == own and set(options(ac.torchify)) == {*own, *pair}  # its own first
    # compile= is decided when a function is decorated: numpy_op keeps its op, config has no say.
    assert set(options(ac.numpy_op)) == {"backward", "fake", "vmap", "jvp", "residuals", *pair} - {
        "out_params",
        "compile",
    }
    assert set(options(ac.config)) == pair - {"out_params", "compile"}
    for decorator in (ac.accepts_numpy, ac.returns_tensor, ac.accepts_tensor, ac.returns_numpy, ac.adapt):
        assert str(inspect.signature(decorator)).startswith("(func=None, /, *, "), decorator.__name__
