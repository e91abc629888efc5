"""Screens of the HTML report, as PNGs for docs/: the report of the committed GPU trace
(tests/data/traces/cuda/h200-mlp, with a placement on cpu,cuda:0=H200) opened in headless Chromium,
at its first screen (docs/report-first-screen.png), its step timeline
(docs/report-step-timeline.png) and its placement's Gantt chart (docs/report-placement-gantt.png).

Usage: ``.venv/bin/python scripts/report_screenshot.py [FOLDER]`` (default docs/). Needs chromium
(``make setup``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "traces" / "cuda" / "h200-mlp" / "trace"
sys.path.insert(0, str(ROOT))
from tc_analyses.export.browser import headless  # noqa: E402


SCREENS = {"report-first-screen.png": "", "report-step-timeline.png": "t0-timeline",
           "report-placement-gantt.png": "t0-placement"}  # file: the element the screen starts at


def main(folder: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        subprocess.run([sys.executable, "-m", "tc_analyses.cli", "--no-progress", "report", str(TRACE), "-o", str(page),
                        "--devices", "cpu,cuda:0=H200"], check=True, cwd=ROOT)
        for name, at in SCREENS.items():
            out = folder / name
            shown = _block_alone(page, at, Path(tmp) / f"{at}.html") if at else page
            done = headless(shown, f"--screenshot={out}", "--window-size=1280,900")
            if done.returncode != 0 or not out.is_file():
                sys.exit(f"chromium made no screenshot: {done.stderr.strip().splitlines()[-1:]}")
            print(f"wrote {out}")


def _block_alone(page: Path, at: str, out: Path) -> Path:
    """The page with only the block under the heading of id `at` in its body (its head, styles and
    scripts kept): headless Chromium's screenshot does not scroll to a fragment."""
    from lxml import html

    doc = html.parse(str(page)).getroot()
    body = doc.find("body")
    heading = doc.get_element_by_id(at)
    block = [heading]
    for sibling in heading.itersiblings():
        if sibling.tag in ("h2", "h3"):
            break
        block.append(sibling)
    for child in list(body):
        if child not in block:
            body.remove(child)
    out.write_bytes(html.tostring(doc, doctype="<!DOCTYPE html>", encoding="utf-8"))
    return out


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT / "docs")
