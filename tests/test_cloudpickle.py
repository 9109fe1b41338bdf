"""cloudpickle (joblib's loky, Ray, Dask) sends decorated callables decorated: by reference
where a module holds them, else rebuilt around the function it sends by value."""

from __future__ import annotations

import inspect
import os
import pathlib
import pickle
import subprocess
import sys
import types
from typing import Any

import cloudpickle
import numpy as np
import pytest
import torch

import autoconvert as ac

from . import sites

ROOT = pathlib.Path(__file__).resolve().parents[1]

# A script: every decorator kind, decorated in __main__, which a worker cannot import. Each is
# sent by cloudpickle to a fresh process, which prints what it returns there.
_SCRIPT = """
import pickle, subprocess, sys
import cloudpickle, numpy as np, torch
import autoconvert as ac

def kind(x):
    return type(x).__name__

@ac.accepts_numpy
def sees(x):
    return type(x).__name__

@ac.returns_tensor
@ac.accepts_numpy
def doubled(x):
    return np.asarray(x) * 2

@ac.accepts_tensor
def tkind(x):
    return type(x).__name__

@ac.adapt
def bumped(x: np.ndarray) -> np.ndarray:
    return np.asarray(x) + 1

def plus_one(x):
    return np.asarray(x) + 1

class Tools:
    @staticmethod
    @ac.accepts_numpy
    def inside(x):
        return type(x).__name__

    @ac.accepts_numpy
    @staticmethod
    def outside(x):
        return type(x).__name__

    @ac.accepts_numpy
    def method(self, x):
        return type(x).__name__

def sine(x):
    return np.sin(x)

kind_np = ac.accepts_numpy(kind)
sine_op = ac.numpy_op(sine)
ruled = ac.numpy_op(sine, backward=lambda g, x, output: g * np.cos(x))
CASES = {
    "accepts_numpy": (sees, torch.ones(2)),
    "under another name": (kind_np, torch.ones(2)),
    "a wrapped lambda": (ac.accepts_numpy(lambda x: type(x).__name__), torch.ones(2)),
    "returns_tensor": (ac.returns_tensor(plus_one), np.ones(2)),
    "the pair": (doubled, torch.ones(2)),
    "accepts_tensor": (tkind, np.ones(2)),
    "returns_numpy": (ac.returns_numpy(lambda x: torch.as_tensor(x)), np.ones(2)),
    "adapt": (bumped, torch.ones(2)),
    "torchify": (ac.torchify(plus_one), torch.ones(2)),
    "a staticmethod": (Tools().inside, torch.ones(2)),
    "a staticmethod, bound": (Tools().outside, torch.ones(2)),
    "a method, bound": (Tools().method, torch.ones(2)),
    "numpy_op": (sine_op, torch.ones(2)),
    "numpy_op of a lambda": (ac.numpy_op(lambda x: np.sin(x)), torch.ones(2)),
    "numpy_op with a backward": (ruled, torch.ones(2)),
    "numpy_op of a ufunc": (ac.numpy_op(np.sin), torch.ones(2)),
}
CHILD = (
    "import pickle, sys\\n"
    "for name, (fn, arg) in pickle.load(sys.stdin.buffer).items():\\n"
    "    out = fn(arg)\\n"
    "    print(name, '=', out if isinstance(out, str) else type(out).__name__)\\n"
)
if __name__ == "__main__":
    sent = cloudpickle.dumps(CASES)
    done = subprocess.run([sys.executable, "-c", CHILD], input=sent, capture_output=True, check=True)
    print(done.stdout.decode(), end="")
"""

_DECORATED = {
    "accepts_numpy": "ndarray",
    "under another name": "ndarray",
    "a wrapped lambda": "ndarray",
    "returns_tensor": "Tensor",
    "the pair": "Tensor",
    "accepts_tensor": "Tensor",
    "returns_numpy": "ndarray",
    "adapt": "Tensor",
    "torchify": "Tensor",
    "a staticmethod": "ndarray",
    "a staticmethod, bound": "ndarray",
    "a method, bound": "ndarray",
    "numpy_op": "Tensor",
    "numpy_op of a lambda": "Tensor",
    "numpy_op with a backward": "Tensor",
    "numpy_op of a ufunc": "Tensor",
}


def _run(script: pathlib.Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(line.split(" = ") for line in done.stdout.splitlines())


def test_a_scripts_decorated_functions_arrive_decorated(tmp_path: pathlib.Path) -> None:
    """Each decorator kind, in a script: the worker runs the decorated function (before, the
    undecorated one, or a TypeError naming a ContextVar for torchify and a bound method; an
    AttributeError naming the script's attribute for numpy_op)."""
    script = tmp_path / "script.py"
    script.write_text(_SCRIPT)
    assert _run(script) == _DECORATED


@pytest.mark.slow
def test_joblib_processes_run_a_scripts_decorated_function(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("joblib")  # installed with scikit-learn, not by the test extra
    script = tmp_path / "script.py"
    script.write_text(
        "import joblib, numpy as np, torch, autoconvert as ac\n"
        "@ac.accepts_numpy\n"
        "def kind(x):\n"
        "    return type(x).__name__\n"
        "class Tools:\n"
        "    @ac.accepts_numpy\n"
        "    def kind(self, x):\n"
        "        return type(x).__name__\n"
        "def sine(x):\n"
        "    return np.sin(x)\n"
        "op = ac.numpy_op(sine)\n"
        "if __name__ == '__main__':\n"
        "    calls = [kind, Tools().kind, op, ac.numpy_op(lambda x: np.cos(x))]\n"
        "    done = joblib.Parallel(n_jobs=2)(joblib.delayed(f)(torch.zeros(1)) for f in calls)\n"
        "    print('done =', [r if isinstance(r, str) else r.tolist() for r in done])\n"
    )
    assert _run(script) == {"done": "['ndarray', 'ndarray', [0.0], [1.0]]"}


def test_a_wrapped_lambda_comes_back_decorated() -> None:
    restored = cloudpickle.loads(cloudpickle.dumps(ac.returns_tensor(lambda x: np.ones(1))))
    assert type(restored(0)) is torch.Tensor
    assert repr(restored).startswith("<autoconvert returns_tensor(")


def test_a_module_function_is_sent_by_reference() -> None:
    for decorated in (sites.scaled, sites.halved_tensor):
        data = cloudpickle.dumps(decorated)
        assert b"autoconvert" not in data
        assert cloudpickle.loads(data) is decorated


def test_a_torchified_function_pickles() -> None:
    restored = cloudpickle.loads(cloudpickle.dumps(ac.torchify(sites.plain)))
    assert restored(torch.ones(1)) == ("ndarray", "NoneType")


@pytest.mark.parametrize(("decorator", "returned"), [(ac.accepts_numpy, np.ndarray), (ac.numpy_op, torch.Tensor)])
def test_a_scripts_decorated_function_keeps_its_reference_under_pickle(decorator: Any, returned: type) -> None:
    """pickle (multiprocessing's spawn imports the script as __main__ again) still sends a
    script's wrapper or op by its name; cloudpickle by value."""
    main = sys.modules["__main__"]
    negated = lambda x: np.negative(x)  # noqa: E731 - a script's function, named as one
    negated.__module__, negated.__qualname__ = "__main__", "negated"
    main.negated = decorated = decorator(negated)  # type: ignore[attr-defined]
    try:
        assert pickle.loads(pickle.dumps(decorated)) is decorated
        restored = cloudpickle.loads(cloudpickle.dumps(decorated))
        assert restored is not decorated and type(restored(torch.ones(1))) is returned
    finally:
        del main.negated  # type: ignore[attr-defined]


def test_a_wrapper_is_no_plain_function_outside_torch_compile() -> None:
    """What cloudpickle asks; dynamo, while it traces, still sees the function (see _escape)."""
    assert not isinstance(sites.scaled, types.FunctionType) and not inspect.isfunction(sites.scaled)
    assert inspect.signature(sites.scaled) == inspect.signature(inspect.unwrap(sites.scaled))
    assert not isinstance(ac.torchify(sites.plain), types.FunctionType)


@pytest.mark.slow
@pytest.mark.parametrize("serializer", ["ray.cloudpickle", "distributed.protocol.pickle"])
def test_ray_and_dask_serializers_send_it_decorated(serializer: str) -> None:
    """Ray's copy of cloudpickle, and Dask's pickling (cloudpickle where pickle cannot)."""
    module = pytest.importorskip(serializer)
    restored = module.loads(module.dumps(ac.accepts_numpy(lambda x: type(x).__name__)))
    assert restored(torch.ones(1)) == "ndarray"


def test_a_function_calling_a_decorated_one_is_judged_as_dynamo_sees_it() -> None:
    """compile="auto" judges the code a decorated function reaches as dynamo will trace it:
    a decorated function it calls is read as the function dynamo takes it for."""
    from autoconvert._spec._callbacks import reads_numpy_alone

    halved = sites.halved  # decorated, reading NumPy alone

    def calls_it(x: np.ndarray) -> np.ndarray:
        return halved(x) + 1

    def calls_a_torchified_one(x: np.ndarray) -> np.ndarray:
        return torchified(x) + 1

    torchified = ac.torchify(sites.halved.__wrapped__)
    assert reads_numpy_alone(calls_it) is None
    assert reads_numpy_alone(calls_a_torchified_one) is None


def test_a_torchified_objects_decorated_method_is_called_as_a_callable_it_holds() -> None:
    """A class's decorated method (no plain function) is called through, not re-planned (which
    failed an internal assertion)."""

    class Holder:
        @ac.accepts_numpy
        def kind(self, x: np.ndarray) -> str:
            return type(x).__name__

    assert ac.torchify(Holder)().kind(torch.ones(1)) == "ndarray"
