"""``python -m autoconvert``: a self-check and demo on every device torch can see.

It wraps a real SciPy function (a NumPy one without SciPy) the way a pipeline would,
runs it on tensors of several dtypes on each device, checks the results against a
reference, and prints what crossed: devices and dtypes in and out, copies made, bytes
copied, and the time per call next to the hand-written conversion. Public API only.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

import autoconvert as ac


def _numpy_discount(rewards: NDArray[Any], gamma: float) -> NDArray[Any]:
    out = np.empty_like(rewards)
    running = np.zeros_like(rewards[..., 0])
    for i in range(rewards.shape[-1] - 1, -1, -1):
        running = rewards[..., i] + gamma * running
        out[..., i] = running
    return out


def _filter() -> tuple[str, Callable[[NDArray[Any], float], NDArray[Any]]]:
    """Discounted returns: the reversed-lfilter idiom whose negative strides break from_numpy."""
    try:
        import scipy.signal
    except ImportError:
        return "numpy loop (SciPy not installed)", _numpy_discount

    def discount(rewards: NDArray[Any], gamma: float) -> NDArray[Any]:
        out: NDArray[Any] = scipy.signal.lfilter([1.0], [1.0, -gamma], rewards[..., ::-1])[..., ::-1]
        return out

    return "scipy.signal.lfilter(x[::-1])[::-1]", discount


def _devices() -> list[torch.device]:
    found = [torch.device("cpu")]
    found += [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append(torch.device("mps"))
    return found


def _time(call: Callable[[], Any], repeat: int = 200) -> float:
    call()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            call()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best * 1e6


def _versions() -> str:
    """What this check ran with, the line to paste into a bug report."""
    found = {"autoconvert": ac.__version__, "python": platform.python_version(), "torch": torch.__version__}
    found["numpy"] = np.__version__
    for name in ("scipy", "wrapt"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return ", ".join(f"{name} {version}" for name, version in found.items())


def _address(a: NDArray[Any]) -> int:
    return int(a.__array_interface__["data"][0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autoconvert",
        description=(
            "Self-check and demo: wraps a SciPy function (a NumPy loop without SciPy) with "
            "autoconvert, runs it on float32, float64 and bfloat16 tensors on every device torch "
            "can see, checks each result against a reference, and prints what crossed (devices, "
            "dtypes, copies, bytes) and the time per call next to the hand-written conversion."
        ),
        epilog="Exits 0 when every result matches, 1 otherwise. Documentation: README.md and docs/.",
    )
    parser.add_argument("--version", action="version", version=f"autoconvert {ac.__version__}")
    parser.parse_args(argv)
    name, discount = _filter()
    seen: dict[str, NDArray[Any]] = {}

    @ac.returns_tensor
    @ac.accepts_numpy
    def returns(rewards: NDArray[Any], gamma: float) -> NDArray[Any]:
        seen["in"] = rewards
        seen["out"] = discount(rewards, gamma)
        return seen["out"]

    def hand_written(x: torch.Tensor) -> torch.Tensor:
        out = discount(x.detach().cpu().numpy(), 0.9)
        return torch.from_numpy(np.ascontiguousarray(out)).to(x.device)

    print(_versions())
    print(f"wrapped: {name}, on 4 x 256 rewards\n")
    header = f"{'device':8} {'dtype in':16} {'dtype out':16} {'copies':>6} {'bytes copied':>12} {'us/call':>8} {'hand-written':>14}"
    print(header)
    print("-" * len(header))
    failures = 0
    promoted: dict[str, str] = {}  # dtype in -> the other dtype the function returned
    refused: dict[str, str] = {}  # why the hand-written line failed, by the exception's type
    for device in _devices():
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            x = torch.rand(4, 256, device=device).to(dtype)
            out = returns(x, 0.9)
            reference = discount(x.double().cpu().numpy(), 0.9).copy()  # .copy(): positive strides
            ok = out.device == x.device and torch.allclose(
                out.double().cpu(), torch.from_numpy(reference), rtol=2e-2, atol=1e-2
            )
            failures += not ok
            # A crossing copied iff the two sides' data pointers differ.
            copied = [
                seen["in"].nbytes if _address(seen["in"]) != x.data_ptr() else 0,
                seen["out"].nbytes if _address(seen["out"]) != out.data_ptr() else 0,
            ]
            copies, bytes_copied = sum(c > 0 for c in copied), sum(copied)
            ours = _time(functools.partial(returns, x, 0.9))
            try:
                hand = f"{_time(functools.partial(hand_written, x)):.1f} us"
            except (TypeError, ValueError, RuntimeError) as e:  # bfloat16: "unsupported ScalarType"
                hand = "fails: " + type(e).__name__
                refused.setdefault(type(e).__name__, str(e))
            if out.dtype != x.dtype:
                promoted[str(x.dtype).removeprefix("torch.")] = str(out.dtype).removeprefix("torch.")
            mark = "" if ok else "  MISMATCH"
            print(
                f"{device!s:8} {x.dtype!s:16} {out.dtype!s:16} {copies:>6} {bytes_copied:>12,} "
                f"{ours:>8.1f} {hand:>14}{mark}"
            )
    _notes(promoted, refused)
    print("\nok" if not failures else f"\n{failures} result(s) did not match the reference")
    return 1 if failures else 0


def _notes(promoted: dict[str, str], refused: dict[str, str]) -> None:
    """What the table's odd cells mean: a dtype the function changed, a hand-written line that failed."""
    if promoted:
        changes = ", ".join(f"{out} for {dtype}" for dtype, out in sorted(promoted.items()))
        print(
            f"\ndtype out: the function itself returned {changes} (SciPy and NumPy promote); autoconvert keeps "
            "the function's dtype, and returns_tensor(dtype='input') gives the caller's"
        )
    for kind, message in refused.items():
        why = " (NumPy has no bfloat16; autoconvert widens it)" if "BFloat16" in message else ""
        print(f"\nfails: {kind}: the hand-written line, x.detach().cpu().numpy(), raised {kind}: {message}{why}")


if __name__ == "__main__":
    sys.exit(main())
