"""``python -m benchmarks [--quick] [--json PATH] [--results [PATH]]``: ratios to the hand-written idiom.

Every case runs its contenders interleaved in this one process and reports medians as
ratios to the case's baseline. ``--quick`` (CI's smoke run) finishes in well under a
minute on 2 cores; ``--results`` rewrites benchmarks/RESULTS.md (or the file named) with
the table and the machine it ran on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import platform
import sys
import time

import numpy as np
import torch

import autoconvert as ac

from .cases import CASES
from .harness import Row, table

QUICK = {
    "quick": True,
    "repeats": 15,
    "target_s": 0.004,
    "copy_repeats": 5,
    "batch_repeats": 3,
    "copy_mib": 32,
    "gpu_mib": [1, 64],
    "edt_side": 128,
}
FULL = {
    "quick": False,
    "repeats": 61,
    "target_s": 0.02,
    "copy_repeats": 21,
    "batch_repeats": 15,
    "copy_mib": 128,
    "gpu_mib": [1, 16, 64, 256, 1024],
    "edt_side": 384,
}


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "autoconvert": ac.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller copies: a smoke run")
    parser.add_argument("--json", type=pathlib.Path, default=pathlib.Path("benchmarks/results.json"))
    parser.add_argument(
        "--results",
        nargs="?",
        type=pathlib.Path,
        const=pathlib.Path(__file__).with_name("RESULTS.md"),
        help="write the table and the machine to this Markdown file (default benchmarks/RESULTS.md)",
    )
    parser.add_argument("--case", choices=sorted(CASES), action="append", help="run only these cases")
    args = parser.parse_args(argv)

    settings = QUICK if args.quick else FULL
    started = time.perf_counter()
    rows: list[Row] = []
    for name in args.case or list(CASES):
        rows += CASES[name](settings)
        print(f"  {name}: done at {time.perf_counter() - started:.0f} s", file=sys.stderr)
    info = machine()
    text = table(rows)
    print(text)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"machine": info, "quick": args.quick, "rows": [dataclasses.asdict(r) for r in rows]}, indent=2)
    )
    if args.results:
        described = ", ".join(f"{k} {v}" for k, v in info.items())
        cases = "".join(f" --case {name}" for name in args.case or ())
        args.results.write_text(
            "# Benchmark results\n\n"
            f"Machine: {described}.\n\n"
            f"Produced by `python -m benchmarks{' --quick' if args.quick else ''}{cases} --results`: medians of "
            f"{settings['repeats']} interleaved batches per contender (copies: {settings['copy_repeats']}), "
            "ratios to each case's baseline measured in the same run.\n\n" + text + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
