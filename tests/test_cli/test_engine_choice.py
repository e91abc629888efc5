"""DFCOMPASS_ENGINE picks how the XML analyses run; every choice gives the same `states` output, and
a choice that is not an engine is a one-line error."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"


def _states(dfcompass_exe: list[str], out: Path, engine: str) -> subprocess.CompletedProcess[str]:
    """`dfcompass states` with every analysis build-analyses generates for the trace."""
    xml = out.parent / "analyses"
    if not xml.exists():
        subprocess.run([*dfcompass_exe, "build-analyses", str(TRACE), "-o", str(xml)], check=True, capture_output=True)
    files = [arg for f in sorted((xml / "xml").glob("*.xml")) for arg in ("--xml", str(f))]
    return subprocess.run([*dfcompass_exe, "--no-progress", "states", str(TRACE), *files, "--csv", str(out)],
                          capture_output=True, text=True, env={**os.environ, "DFCOMPASS_ENGINE": engine})


@pytest.mark.parametrize("engine", ["interpreter", "events"])
def test_every_engine_gives_the_same_states(dfcompass_exe: list[str], tmp_path: Path, engine: str) -> None:
    default = _states(dfcompass_exe, tmp_path / "auto.csv", "auto")
    other = _states(dfcompass_exe, tmp_path / f"{engine}.csv", engine)
    assert default.returncode == other.returncode == 0, default.stderr + other.stderr
    rows = (tmp_path / "auto.csv").read_text()
    assert rows.count("\n") > 100 and rows == (tmp_path / f"{engine}.csv").read_text()


def test_an_unknown_engine_is_a_one_line_error(dfcompass_exe: list[str], tmp_path: Path) -> None:
    done = _states(dfcompass_exe, tmp_path / "x.csv", "vectorised")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "DFCOMPASS_ENGINE='vectorised'" in done.stderr
    assert "auto, interpreter, events" in done.stderr
