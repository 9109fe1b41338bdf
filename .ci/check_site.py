"""Open the built documentation site in headless Chromium, as a reader would.

Serves the site on loopback, takes a screenshot of Home, a guide page, the API reference
and Performance, and fails on a console error, a page that did not render its content, an
image that did not load, or a public name missing from the search index.

    python .ci/check_site.py SITE_DIR SCREENSHOT_DIR
"""

from __future__ import annotations

import functools
import http.server
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import threading

import autoconvert

#: page -> text its rendered DOM must hold (the content, not only the theme's frame).
PAGES = {
    "": "The 30-second example",
    "guide/accepts-numpy/": "accepts_numpy",
    "api/": "autoconvert.accepts_numpy",
    "performance/": "Performance",
}
#: Flags for Chromium as root in a sandbox with no network but loopback.
CHROMIUM = [
    "chromium",
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
    "--window-size=1280,1600",
    "--virtual-time-budget=5000",
]


def main(site: pathlib.Path, shots: pathlib.Path) -> int:
    shots.mkdir(parents=True, exist_ok=True)
    check_search_index(site)
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    failures = []
    try:
        for page, expected in PAGES.items():
            shot = shots / f"{page.strip('/').replace('/', '-') or 'home'}.png"
            failures += check_page(site, base, page, expected, shot)
    finally:
        server.shutdown()
    for failure in failures:
        print(f"site: {failure}", file=sys.stderr)
    print(f"site: {len(PAGES)} pages opened in Chromium, screenshots in {shots}, {len(failures)} failures")
    return 1 if failures else 0


def check_search_index(site: pathlib.Path) -> None:
    """Every public name can be searched for: the API reference put it in the index."""
    index = json.loads((site / "search" / "search_index.json").read_text())
    locations = " ".join(doc["location"] for doc in index["docs"])
    missing = [name for name in autoconvert.__all__ if name != "__version__" and f"autoconvert.{name}" not in locations]
    if missing:
        raise SystemExit(f"site: the search index lacks {missing}")


def check_page(site: pathlib.Path, base: str, page: str, expected: str, shot: pathlib.Path) -> list[str]:
    url = base + page
    with tempfile.TemporaryDirectory() as profile:
        common = [*CHROMIUM, f"--user-data-dir={profile}"]
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True)
        subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True, timeout=120, check=True)
    failures = []
    console = [
        line for line in dom.stderr.splitlines() if ":CONSOLE" in line and re.search(r"error|uncaught", line, re.I)
    ]
    failures += [f"{url}: console: {line}" for line in console]
    if expected not in dom.stdout:
        failures.append(f"{url}: the rendered page lacks {expected!r}")
    for image in re.findall(r'<img[^>]*src="([^"]+)"', dom.stdout):
        if not image.startswith(("data:", "http")) and not (site / page / image).resolve().is_file():
            failures.append(f"{url}: image {image} is not in the site")
    if not shot.exists() or shot.stat().st_size < 20_000:
        failures.append(f"{url}: no screenshot, or an empty one ({shot})")
    return failures


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])))
