"""Headless Chromium (Debian's `chromium`, which `make setup` installs) on a page of ours: the
HTML report's test opens it there, and scripts/report_screenshot.py makes docs/' screenshot."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

# --virtual-time-budget: the page's scripts (the interactive plots) run before the DOM or the picture is taken
CHROMIUM = ("chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=5000")


def headless(page: Path, *args: str, at: str = "") -> subprocess.CompletedProcess[str]:
    """Chromium, headless, on `page` (scrolled to the element of id `at`, if given), its console on
    stderr (where a page's JavaScript errors show)."""
    uri = page.as_uri() + (f"#{at}" if at else "")
    return subprocess.run([*CHROMIUM, "--enable-logging=stderr", "--v=0", *args, uri],
                          capture_output=True, text=True, timeout=120)


def script_errors(stderr: str) -> list[str]:
    """The page's JavaScript errors, as Chromium's console logs them on stderr."""
    return [line for line in stderr.splitlines() if "CONSOLE" in line and re.search(r"Uncaught|Error", line)]
