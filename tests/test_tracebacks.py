"""Tracebacks of autoconvert's own errors end at the user's code: the library's frames (its
modules, its generated code, wrapt's) are left out where the error leaves it, on every entry
(the flat call, the generic call, bound methods, the plain functions, batched, numpy_op,
torchify). Any other exception keeps every frame; AUTOCONVERT_TRACEBACK_FILTERING=off keeps
them all."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import autoconvert as ac

HERE = os.path.basename(__file__)


def _frames(tb: types.TracebackType | None) -> list[tuple[str, str]]:
    """(file name, function name) of each frame, outermost first."""
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append((os.path.basename(code.co_filename), code.co_name))
        tb = tb.tb_next
    return frames


def _raised(call: Callable[[], Any]) -> BaseException:
    """What ``call`` raises, its traceback starting at ``call``'s own frame."""
    try:
        call()
    except BaseException as e:  # any error: its traceback is the subject
        return e
    raise AssertionError("nothing was raised")


@ac.accepts_numpy
def _halve(a: np.ndarray) -> None:
    a /= 2


@ac.accepts_numpy
def _halve_each(*arrays: np.ndarray) -> None:
    arrays[0][...] = 0


class _Filters:
    @ac.accepts_numpy
    def halve(self, a: np.ndarray) -> None:
        a /= 2

    @ac.accepts_numpy
    @classmethod
    def halved(cls, a: np.ndarray) -> None:
        a /= 2


def _in_config_block() -> None:
    with ac.config(copy=False):
        _halve(torch.ones(2))


def _owner(a: np.ndarray) -> None:
    """A user's function that calls a decorated one wrongly: its own frame stays."""
    _halve(torch.tensor(a))


@ac.returns_tensor
def _strings() -> np.ndarray:
    return np.array(["a"])


#: Each entry: the call, the error, and the functions of this file its traceback passes
#: through after ``_raised`` (a lambda is one).
ENTRIES: dict[str, tuple[Callable[[], Any], type[ac.ConversionError], list[str]]] = {
    "the flat call": (lambda: _halve(torch.ones(2)), ac.ReadOnlyError, ["<lambda>"]),
    "the *args flat call": (lambda: _halve_each(torch.ones(2)), ac.ReadOnlyError, ["<lambda>"]),
    "the generic call, in a config block": (_in_config_block, ac.ReadOnlyError, ["_in_config_block"]),
    "a method": (lambda: _Filters().halve(torch.ones(2)), ac.ReadOnlyError, ["<lambda>"]),
    "a classmethod, through wrapt": (lambda: _Filters.halved(torch.ones(2)), ac.ReadOnlyError, ["<lambda>"]),
    "the result": (_strings, ac.ConversionError, []),
    "gradients refused": (
        lambda: ac.accepts_numpy(grad="error")(np.negative)(torch.ones(2, requires_grad=True)),
        ac.GradientError,
        ["<lambda>"],
    ),
    "to_numpy": (lambda: ac.to_numpy(torch.ones(2, dtype=torch.bfloat16), copy=False), ac.CopyError, ["<lambda>"]),
    "to_tensor": (lambda: ac.to_tensor(np.array(["a"])), ac.ConversionError, ["<lambda>"]),
    "batched": (lambda: ac.batched(lambda a: np.array(["a"]))(torch.ones(2, 3)), ac.ConversionError, ["<lambda>"]),
    "numpy_op": (lambda: ac.numpy_op(lambda a: np.array(["a"]))(torch.ones(2)), ac.ConversionError, ["<lambda>"]),
    "a torchified object": (lambda: ac.torchify(_Plain()).halve(torch.ones(2)), ac.ReadOnlyError, ["<lambda>"]),
    "a user's function between two calls": (
        lambda: ac.accepts_numpy(_owner)(torch.ones(2)),
        ac.ReadOnlyError,
        ["<lambda>", "_owner"],
    ),
}


class _Plain:
    def halve(self, a: np.ndarray) -> None:
        a /= 2


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_an_autoconvert_error_s_traceback_holds_the_user_s_frames_only(entry: str) -> None:
    """Caught right where it was called, the error's traceback is the caller's frame and the
    user's frames below it, none of autoconvert's."""
    call, kind, names = ENTRIES[entry]
    error = _raised(call)
    assert type(error) is kind
    assert _frames(error.__traceback__) == [(HERE, "_raised"), *((HERE, name) for name in names)]


def test_the_user_s_own_exception_keeps_every_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception the function raises is the user's: its traceback is the one it has with
    filtering off, autoconvert's frames between the caller and the function included."""

    def lookup(a: np.ndarray) -> None:
        raise KeyError("missing")

    checked = ac.accepts_numpy(lookup)
    filtered = _frames(_raised(lambda: checked(torch.ones(2))).__traceback__)
    monkeypatch.setenv("AUTOCONVERT_TRACEBACK_FILTERING", "off")
    assert filtered == _frames(_raised(lambda: checked(torch.ones(2))).__traceback__)
    assert filtered[:2] == [(HERE, "_raised"), (HERE, "<lambda>")] and filtered[-1] == (HERE, "lookup")
    assert len(filtered) > 3  # autoconvert's call of the function is there


def test_the_cause_of_a_read_only_error_is_the_user_s_exception_as_raised() -> None:
    """NumPy's refusal, the ReadOnlyError's cause, keeps its traceback: the function's line that wrote."""
    error = _raised(lambda: _halve(torch.ones(2)))
    assert type(error.__cause__) is ValueError
    assert _frames(error.__cause__.__traceback__)[-1] == (HERE, "_halve")


def test_the_switch_keeps_every_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """AUTOCONVERT_TRACEBACK_FILTERING=off, set in a running program, keeps autoconvert's frames."""
    monkeypatch.setenv("AUTOCONVERT_TRACEBACK_FILTERING", "off")
    error = _raised(lambda: _in_config_block())
    files = [file for file, _ in _frames(error.__traceback__)]
    assert files[:3] == [HERE, HERE, HERE] and "_call.py" in files and len(files) > 3


def test_a_printed_traceback_ends_at_the_user_s_line(tmp_path: Any) -> None:
    """The traceback Python prints for an uncaught error: the script's lines, then the message."""
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """\
            import torch
            import autoconvert as ac


            @ac.accepts_numpy
            def normalise_in_place(a):
                a /= a.sum()


            def step():
                normalise_in_place(torch.ones(4))


            step()
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=False)
    printed = done.stderr.split("The above exception was the direct cause of the following exception:\n\n", 1)[1]
    # Python 3.13 marks the failing expression with a line of carets (~~~^^): not a frame.
    printed = "\n".join(line for line in printed.splitlines() if line.strip(" ~^"))
    assert printed.splitlines()[:5] == [
        "Traceback (most recent call last):",
        f'  File "{script}", line 14, in <module>',
        "    step()",
        f'  File "{script}", line 11, in step',
        "    normalise_in_place(torch.ones(4))",
    ]
    assert printed.splitlines()[5].startswith("autoconvert.ReadOnlyError: normalise_in_place(): argument a was written")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**env, "AUTOCONVERT_TRACEBACK_FILTERING": "off"},
        check=False,
    )
    assert "_interpreter" in done.stderr.split("direct cause", 1)[1]
