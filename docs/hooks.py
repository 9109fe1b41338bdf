"""MkDocs hooks: pages parts made at each build from their one source.

- The Performance page's figure, drawn from ``docs/data/per_call.json`` (the output of
  ``python -m benchmarks --case per_call --json``): each case's autoconvert ratio to the
  hand-written idiom (and the pure-Python floor's, where the run has one), titled with the
  machine and versions the run names.
- The API page's table of options, written from the package's own table
  (``autoconvert._options._options.OPTIONS``), where the page says ``<!-- options table -->``.
- The version the site describes, from the package's ``__version__`` (its one source): in the
  site's name, on every page's header, and where a page says ``<!-- version -->``.
- Notes for readers of a page's Markdown on a repository host (what its ``:::`` and
  ``--8<--`` lines stand for), left out of the site.
"""

from __future__ import annotations

import io
import json
import pathlib
import re
from typing import Any

FIGURE = "img/per_call.png"
DATA = pathlib.Path(__file__).parent / "data" / "per_call.json"


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, FIGURE, content=per_call_figure(json.loads(DATA.read_text()))))
    return files


OPTIONS_MARK = "<!-- options table -->"
VERSION_MARK = "<!-- version -->"


def _version() -> str:
    from autoconvert import __version__

    return __version__


def on_config(config: Any) -> Any:
    config["site_name"] = f"{config['site_name']} {_version()}"
    return config


#: A note for readers of the Markdown source on a repository host, which the site leaves out.
REPOSITORY_ONLY = re.compile(r"<!-- repository only -->\n.*?<!-- /repository only -->\n+", re.S)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if OPTIONS_MARK in markdown:
        markdown = markdown.replace(OPTIONS_MARK, options_table())
    markdown = markdown.replace(VERSION_MARK, _version())
    return REPOSITORY_ONLY.sub("", markdown)


def options_table() -> str:
    """The options as a Markdown table: name, type, default, who takes it, what it does."""
    from autoconvert._options._options import OPTIONS

    lines = ["| option | type | default | taken by | what it does |", "|---|---|---|---|---|"]
    for o in OPTIONS:
        defaults = {}
        for taker, default in o.defaults.items():
            defaults.setdefault(repr(default), []).append(taker)
        usual = max(defaults, key=lambda d: len(defaults[d]))
        default = f"`{usual}`" + "".join(
            f" (`{d}` for {', '.join(f'`{t}`' for t in takers)})" for d, takers in defaults.items() if d != usual
        )
        shown = _shown(o.accepts).replace("|", "&#124;")  # not a column: Markdown splits cells at "|"
        takers = ", ".join(f"`{t}`" for t in o.takers)
        lines.append(f"| `{o.name}` | <code>{shown}</code> | {default} | {takers} | {o.doc} |")
    return "\n".join(lines)


def _shown(annotation: Any) -> str:
    """A type as the docs write it: ``a | b | None``."""
    import inspect
    import types
    import typing

    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " | ".join(_shown(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    shown = inspect.formatannotation(annotation)
    for module, written in (("collections.abc.", ""), ("typing.", ""), ("numpy.random.bit_generator.", "np.random.")):
        shown = shown.replace(module, written)  # as the signatures in the docstrings write them
    return shown


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
