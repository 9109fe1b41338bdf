"""MkDocs hooks: the Performance page's figure, drawn from the benchmark's JSON at each build.

``docs/data/per_call.json`` is the output of ``python -m benchmarks --case per_call --json``;
the figure shows each case's autoconvert ratio to the hand-written idiom (and the pure-Python
floor's, where the run has one), titled with the machine and versions the run names.
"""

from __future__ import annotations

import io
import json
import pathlib
from typing import Any

FIGURE = "img/per_call.png"
DATA = pathlib.Path(__file__).parent / "data" / "per_call.json"


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, FIGURE, content=per_call_figure(json.loads(DATA.read_text()))))
    return files


def per_call_figure(run: dict[str, Any]) -> bytes:
    """A horizontal bar chart of the per-call ratios, as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars: dict[str, float] = {}  # one bar per autoconvert contender of each case
    floor: dict[str, float] = {}
    for row in run["rows"]:
        contender, ratio = row["contender"], row["ratio"]
        if ratio is None:
            continue
        if contender.startswith("autoconvert"):
            variant = contender.removeprefix("autoconvert").strip()
            bars[f"{row['case']}: {variant}" if variant else row["case"]] = ratio
        elif contender.startswith("pure-Python floor"):
            floor[row["case"]] = ratio
    labels = list(bars)[::-1]
    figure, axes = plt.subplots(figsize=(9, 0.36 * len(labels) + 1.4), dpi=110)
    axes.barh(labels, [bars[label] for label in labels], color="#ff7043", label="autoconvert")
    floors = [label for label in labels if label in floor]
    axes.scatter([floor[label] for label in floors], floors, color="#37474f", zorder=3, label="pure-Python floor")
    axes.set_xscale("log", base=2)
    axes.axvline(1.0, color="#37474f", linewidth=1)
    axes.set_xlabel("time per call, relative to the hand-written conversion (1 = the same; log scale)")
    machine = run["machine"]
    axes.set_title(
        f"{machine['cpu']}, {machine['cores']} cores, GPU: {machine['gpu']}; python {machine['python']}, "
        f"torch {machine['torch']}, numpy {machine['numpy']}",
        fontsize=8,
    )
    axes.legend(loc="lower right", fontsize=8)
    axes.tick_params(axis="y", labelsize=8)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png")
    plt.close(figure)
    return out.getvalue()
