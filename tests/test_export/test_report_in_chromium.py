"""The HTML report opened in headless Chromium (Debian's package, installed by `make setup`): no
JavaScript error, and the first screen is the ranked findings (issue 39)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.export.browser import headless, script_errors

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "cuda" / "h200-mlp" / "trace"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("chromium") is None,
                                                   reason="chromium is not installed (make setup installs it)")]


def test_a_page_with_a_script_error_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text('<html><body><script>throw new Error("boom")</script></body></html>')
    assert any("boom" in line for line in script_errors(headless(page, "--dump-dom").stderr))


def test_the_report_opens_on_its_ranked_findings(tmp_path: Path, cli: Any) -> None:
    from lxml import html

    page = tmp_path / "report.html"
    assert cli("report", TRACE, "-o", page).exit_code == 0
    done = headless(page, "--dump-dom")
    assert done.returncode == 0 and not script_errors(done.stderr), done.stderr[-2000:]
    doc = html.fromstring(done.stdout)  # the DOM as the browser built it
    body = [child for child in doc.find("body") if isinstance(child.tag, str)]
    assert [child.tag for child in body[:2]] == ["h1", "section"] and body[1].get("id") == "findings"
    items = body[1].findall(".//li")
    stakes = [float(li.find("span").text.split()[0].replace(",", "")) for li in items if "at stake" in li.text_content()]
    assert len(stakes) >= 5 and stakes == sorted(stakes, reverse=True)
    # the interactive figures were drawn by their scripts: Plotly's SVG layers hold their marks
    charts = {next(a for a in c.iterancestors("figure")).getprevious().get("id"): c
              for c in doc.find_class("plotly-graph-div")}
    assert set(charts) == {"t0-timeline", "t0-roofline", "t0-parallelism"}
    for name, layer in (("t0-timeline", "barlayer"), ("t0-roofline", "scatterlayer"), ("t0-parallelism", "barlayer")):
        marks = [p for found in charts[name].find_class(layer) for p in found.iter("{*}path", "path")]
        assert marks, f"{name}: nothing drawn in its {layer}"
    shot = tmp_path / "first-screen.png"
    headless(page, f"--screenshot={shot}", "--window-size=1280,900")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
