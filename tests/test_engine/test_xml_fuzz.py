"""Seeded damage to user XML analyses: `states --xml` runs them or fails with one line naming the file."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tc_analyses.app import build
from tc_analyses.errors import DfcompassError
from tc_analyses.export.tracecompass.render import render_xml
from tc_analyses.inputs import TraceInputs
from tests.fuzz.xml_mutations import mutate_xml
from tests.helpers import REPO_ROOT

TRACE = REPO_ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"


def test_damaged_xml_runs_or_fails_with_one_line(tmp_path: Path) -> None:
    sources = sorted(render_xml(TraceInputs(TRACE).facts).items())
    outcomes: Counter[str] = Counter()
    for seed in range(300):
        name, data = sources[seed % len(sources)]
        xml = tmp_path / f"{seed}-{name}"
        xml.write_bytes(mutate_xml(data, seed))
        try:
            list(build.states(TRACE, [xml], "*", None))
            outcomes["ran"] += 1
        except DfcompassError as exc:
            message = str(exc)
            assert "\n" not in message and (str(xml) in message or str(TRACE) in message), f"seed {seed}: {message}"
            outcomes["one-line error"] += 1
        except Exception as exc:  # noqa: BLE001 - what the fuzzer hunts
            pytest.fail(f"seed {seed} ({name}): {type(exc).__name__}: {exc}")
    assert outcomes["ran"] > 30 and outcomes["one-line error"] > 30, outcomes
