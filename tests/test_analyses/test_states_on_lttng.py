"""The headless engine on a real LTTng UST trace (via bt2): context fields and the CPU aspect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import requires_bt2

pytestmark = [pytest.mark.shared, requires_bt2]

XML = """<tmfxml><stateProvider id="tracef.workers" version="1">
  <eventHandler eventName="lttng_ust_tracef:event">
    <stateChange><stateAttribute type="constant" value="Threads"/>
      <stateAttribute type="eventField" value="context._vtid"/><stateValue type="eventField" value="msg"/></stateChange>
    <stateChange><stateAttribute type="constant" value="Events"/>
      <stateAttribute type="eventField" value="cpu"/><stateValue type="long" value="1" increment="true"/></stateChange>
  </eventHandler></stateProvider></tmfxml>"""


def test_tracef_workers(cli: Any, shared_dir: Path, tmp_path: Path) -> None:
    trace = shared_dir / "traces" / "lttng" / "ust-tracef-local"
    xml = tmp_path / "tracef.xml"
    xml.write_text(XML)
    out = tmp_path / "states.csv"
    result = cli("states", str(trace), "--xml", str(xml), "--csv", str(out))
    assert result.exit_code == 0, result.stderr
    rows = [line.split(",", 4)[1:] for line in out.read_text().splitlines()[1:]]  # the analysis column first
    # per CPU event counters end at the trace's 5,602 events in all (2 CPUs)
    finals = {}
    for path, start, end, value in rows:
        if path.startswith("Events/") and value:
            finals[path] = int(value)
    assert sum(finals.values()) == 5_602
    # the two workers (vtid 3019 and 3020) start with step 0 and end with their last op of step 199
    worker = [r for r in rows if r[0] == "Threads/3019" and r[3]]
    assert worker[0][3] == "step_begin worker=0 step=0" and worker[-1][3] == "step_end worker=0 step=199"
    assert len(worker) == 2_800
