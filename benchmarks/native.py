"""``torchify``'s ``native=``: a library's own torch path through the view (SciPy's functions
and ``Rotation``, scikit-learn's metrics and ``PCA``), against calling it directly and against
converting; and the functions ``torch.autograd.grad`` works through. ``gpu_native``: the
``Rotation`` and ``PCA`` rows on a CUDA tensor, where converting is the round trip to the host.

SciPy reads its array API mode when it is imported, so the cases run in a process of their own
with ``SCIPY_ARRAY_API=1`` (``python -m benchmarks.native SETTINGS_JSON DEVICE`` prints the
rows as JSON); their contenders are interleaved there, as every case's are.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import warnings
from typing import Any

from .harness import Row, compare, synced

#: The modules whose functions the gradient count covers.
MODULES = ("scipy.special", "scipy.stats", "scipy.fft", "scipy.signal", "scipy.ndimage", "scipy.linalg")


def native(settings: dict[str, Any]) -> list[Row]:
    """The case on the CPU, run in a process with SciPy's array API mode on."""
    return _in_mode(settings, "cpu")


def gpu_native(settings: dict[str, Any]) -> list[Row]:
    """The objects' rows on the current CUDA device (none without one)."""
    import torch

    if not torch.cuda.is_available():
        return []
    return _in_mode(settings, f"cuda:{torch.cuda.current_device()}")


def _in_mode(settings: dict[str, Any], device: str) -> list[Row]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.native", json.dumps(settings), device],
        env={**os.environ, "SCIPY_ARRAY_API": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return [Row(**row) for row in json.loads(done.stdout)]


def _rows(settings: dict[str, Any], device: str) -> list[Row]:
    import torch

    on = torch.device(device)
    if on.type != "cpu":
        return _rotation(settings, on) + _pca(settings, on)
    return _functions(settings) + _sklearn(settings) + _rotation(settings, on) + _pca(settings, on)


def _functions(settings: dict[str, Any]) -> list[Row]:
    import scipy.special
    import torch

    import autoconvert as ac

    t = torch.rand(16, dtype=torch.float64)
    auto, converting = ac.torchify(scipy.special), ac.torchify(scipy.special, native=False)
    rows = []
    for name in ("expit", "logsumexp"):
        direct, through, converted = getattr(scipy.special, name), getattr(auto, name), getattr(converting, name)
        rows += compare(
            f"torchify(scipy.special).{name}, 16 float64, SciPy's array API mode",
            "SciPy's torch path, called directly",
            {
                "SciPy's torch path, called directly": lambda f=direct: f(t),
                "autoconvert native='auto'": lambda f=through: f(t),
                "autoconvert native=False (converting)": lambda f=converted: f(t),
            },
            settings["repeats"],
            settings["target_s"],
        )
    counts = ", ".join(f"{module} {_gradients(module, False)} -> {_gradients(module, 'auto')}" for module in MODULES)
    rows[-1] = dataclasses.replace(
        rows[-1], note=f"functions autograd.grad works through, native=False -> 'auto': {counts}"
    )
    return rows


def _sklearn(settings: dict[str, Any]) -> list[Row]:
    """scikit-learn's metrics through the view, against the hand-written idiom: the function
    called on the tensors inside ``config_context(array_api_dispatch=True)``."""
    import importlib.util

    if importlib.util.find_spec("sklearn") is None:
        return []
    import sklearn
    import sklearn.metrics
    import torch

    import autoconvert as ac

    auto, converting = ac.torchify(sklearn.metrics), ac.torchify(sklearn.metrics, native=False)
    small, medium = (torch.rand(2, n, 8, dtype=torch.float64) for n in (16, 1024))
    calls = [
        ("r2_score", (small[0, :, 0], small[1, :, 0])),
        ("r2_score", (medium[0].ravel(), medium[1].ravel())),
        ("pairwise_distances", (small[0], small[1])),
        ("pairwise_distances", (medium[0, :256], medium[1, :256])),
    ]
    rows = []
    for name, args in calls:
        direct, through, converted = getattr(sklearn.metrics, name), getattr(auto, name), getattr(converting, name)

        def by_hand(f: Any = direct, args: tuple[Any, ...] = args) -> Any:
            with sklearn.config_context(array_api_dispatch=True):
                return f(*args)

        shape = " and ".join("x".join(map(str, arg.shape)) for arg in args)
        rows += compare(
            f"torchify(sklearn.metrics).{name}, {shape} float64, array API dispatch",
            "scikit-learn's torch path, called directly",
            {
                "scikit-learn's torch path, called directly": by_hand,
                "autoconvert native='auto'": lambda f=through, args=args: f(*args),
                "autoconvert native=False (converting)": lambda f=converted, args=args: f(*args),
            },
            settings["repeats"],
            settings["target_s"],
        )
    return rows


def _rotation(settings: dict[str, Any], device: Any) -> list[Row]:
    """A pose pipeline, ``Rotation.from_euler(...).apply(points)``, on tensors: SciPy's torch
    path called directly, against the view converting and with ``native="auto"``; each view's
    row notes the route ``stats()`` counted for its calls."""
    import scipy.spatial.transform
    import torch

    import autoconvert as ac

    angles, points = (torch.rand(256, 3, dtype=torch.float64, device=device) for _ in range(2))
    views = {
        "autoconvert native='auto'": ac.torchify(scipy.spatial.transform),
        "autoconvert native=False (converting)": ac.torchify(scipy.spatial.transform, native=False),
    }
    direct = "SciPy's torch path, called directly"
    contenders = {direct: lambda: scipy.spatial.transform.Rotation.from_euler("zyx", angles).apply(points)}
    for name, view in views.items():
        contenders[name] = lambda view=view: view.Rotation.from_euler("zyx", angles).apply(points)
    routes = {name: _route(call, ("Rotation.from_euler", "Rotation.apply")) for name, call in contenders.items()}
    rows = compare(
        f"Rotation.from_euler('zyx', 256x3).apply(256x3 points), float64{_on(device)}, SciPy's array API mode",
        direct,
        {name: synced(device, call) for name, call in contenders.items()},
        settings["repeats"],
        settings["target_s"],
    )
    return [dataclasses.replace(row, note=routes[row.contender]) if row.ratio else row for row in rows]


def _pca(settings: dict[str, Any], device: Any) -> list[Row]:
    """``PCA(8).fit_transform`` of a 4096 x 64 float32 tensor: scikit-learn's torch path called
    directly (inside ``config_context(array_api_dispatch=True)``), against the view with
    ``native="auto"`` and converting; the results checked against each other first."""
    import importlib.util

    if importlib.util.find_spec("sklearn") is None:
        return []
    import sklearn
    import sklearn.decomposition
    import torch

    import autoconvert as ac

    generator = torch.Generator().manual_seed(0)  # axes of distinct variances: components well apart
    x = (torch.randn(4096, 64, generator=generator) * torch.logspace(1, -1, 64)).to(device)

    def by_hand() -> Any:
        with sklearn.config_context(array_api_dispatch=True):
            return sklearn.decomposition.PCA(8).fit_transform(x)

    contenders = {"scikit-learn's torch path, called directly": by_hand}
    for name, native in (("autoconvert native='auto'", "auto"), ("autoconvert native=False (converting)", False)):
        view = ac.torchify(sklearn.decomposition, native=native)
        contenders[name] = lambda view=view: view.PCA(8).fit_transform(x)
    expected = by_hand()
    for name, call in contenders.items():  # components are defined up to their sign
        got = call()
        assert got.device == x.device, name
        assert torch.allclose(got.abs(), expected.abs(), rtol=1e-3, atol=1e-3), name
    routes = {name: _route(call, ("PCA.fit_transform",)) for name, call in contenders.items()}
    rows = compare(
        f"PCA(8).fit_transform(4096x64), float32{_on(device)}, array API dispatch",
        "scikit-learn's torch path, called directly",
        {name: synced(device, call) for name, call in contenders.items()},
        settings["repeats"],
        settings["target_s"],
    )
    return [dataclasses.replace(row, note=routes[row.contender]) if row.ratio else row for row in rows]


def _on(device: Any) -> str:
    return "" if device.type == "cpu" else f" on {device}"


def _route(call: Any, names: tuple[str, ...]) -> str:
    """The routes ``stats()`` counts for one run of ``call``: of its torchified calls, how many
    were handed to the library's own torch path (``names``: the calls counted by name)."""
    import autoconvert as ac

    with ac.stats() as counted:
        call()
    native = sum(counted[name].native for name in names if name in counted.functions)
    return f"stats(): {native} of {counted.calls} calls native"


def _gradients(name: str, native: Any) -> int:
    """How many public functions of the module ``name`` give ``torch.autograd.grad`` a
    gradient through ``torchify(module, native=native)``, called with one to three float64
    tensors that require grad (the first signature that takes them)."""
    import importlib

    import torch

    import autoconvert as ac

    module = importlib.import_module(name)
    view = ac.torchify(module, native=native)
    found = 0
    for attribute in sorted(dir(module)):
        value = getattr(module, attribute)
        if attribute.startswith("_") or isinstance(value, type) or not callable(value):
            continue
        for arity in (1, 2, 3):
            args = [(torch.rand(6, dtype=torch.float64) + 0.5).requires_grad_() for _ in range(arity)]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # GradientWarning on the converting path; SciPy's own
                    out = getattr(view, attribute)(*args)
                    first = out[0] if isinstance(out, tuple) else out
                    torch.autograd.grad(first.real.sum(), args[0])
            except Exception:
                continue
            found += 1
            break
    return found


if __name__ == "__main__":
    print(json.dumps([dataclasses.asdict(row) for row in _rows(json.loads(sys.argv[1]), sys.argv[2])]))
