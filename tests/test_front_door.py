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
from autoconvert._plan import DEFAULTS


def test_a_decorated_function_s_repr_names_the_function_and_the_options() -> None:
    """Not wrapt's ``<Wrapper at 0x… for function at 0x…>``: the sides, their explicit
    options, and the wrapped object's own repr."""

    def smooth(a: np.ndarray) -> np.ndarray:
        return a

    assert repr(ac.accepts_numpy(smooth)) == f"<autoconvert accepts_numpy() of {smooth!r}>"
    pair = ac.returns_tensor(device="cpu")(ac.accepts_numpy(copy=True)(np.negative))
    assert repr(pair) == "<autoconvert accepts_numpy(copy=True), returns_tensor(device='cpu') of <ufunc 'negative'>>"
    assert repr(ac.torchify(scipy.special).expit) == (
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


def test_signatures_show_every_option_with_its_default() -> None:
    """``help()``, ``inspect.signature`` and editors show the options, not ``**options``."""

    def options(fn: object) -> dict[str, object]:
        return {
            p.name: p.default
            for p in inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }

    for decorator in (ac.accepts_numpy, ac.returns_tensor, ac.accepts_tensor, ac.returns_numpy, ac.adapt):
        assert options(decorator) == DEFAULTS[decorator.__name__], decorator.__name__
        assert str(inspect.signature(decorator)).startswith("(func=None, /, *, ")
    assert options(ac.to_numpy) == DEFAULTS["to_numpy"]
    assert str(inspect.signature(ac.to_tensor)) == (
        "(obj, *, device=None, dtype=None, copy=None, nested=True, sparse_layout=None)"
    )
    pair = {**DEFAULTS["accepts_numpy"], **DEFAULTS["returns_tensor"]}
    pair = {k: v for k, v in pair.items() if k not in ("only", "exclude")}
    assert set(options(ac.torchify)) == set(pair)
    pair.pop("out_params")  # an op's outputs are torch.library's to declare
    assert set(options(ac.numpy_op)) == {"backward", "fake", "vmap", "jvp", *pair}
