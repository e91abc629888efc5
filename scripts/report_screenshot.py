"""The first screen of the HTML report, as a PNG for docs/ (docs/report-first-screen.png): the
report of the committed GPU trace (tests/data/traces/cuda/h200-mlp) opened in headless Chromium.

Usage: ``.venv/bin/python scripts/report_screenshot.py [OUT.png]``. Needs chromium (``make setup``).
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


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        subprocess.run([sys.executable, "-m", "tc_analyses.cli", "--no-progress", "report", str(TRACE), "-o", str(page)],
                       check=True, cwd=ROOT)
        done = headless(page, f"--screenshot={out}", "--window-size=1280,900")
        if done.returncode != 0 or not out.is_file():
            sys.exit(f"chromium made no screenshot: {done.stderr.strip().splitlines()[-1:]}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT / "docs" / "report-first-screen.png")
