"""Kineto import at scale: ``import-kineto`` plus ``breakdown`` against HTA on ~1M events.

The shared hta-nccl-rank0 trace (40k events) is repeated ``copies`` times one after the other
(each copy shifted by the trace's span; correlation, flow and External ids offset so they stay
unique) into one gzipped Kineto file, about 1M events for 25 copies. Each side runs once per
round in a fresh process, alternating, best kept, with its peak RSS:

* dfcompass: ``import_kineto`` into a CTF trace, then the ``breakdown`` analysis; the import alone
  (``dfcompass_import``), to see which of the two sets the peak; and the import by the checked
  per-event path (``dfcompass_checked``), against which the columnar fast path is measured;
* HTA (traceinsight 0.6.1, from ``DFCOMPASS_HTA_PYTHON``; skipped without it): ``TraceAnalysis``
  on the file, then ``get_temporal_breakdown``.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

from _common import OUT_DIR, REPO_ROOT, log, run_child

SOURCE = REPO_ROOT.parent / "shared" / "traces" / "kineto" / "hta-nccl-rank0" / "nccl_data.json.gz"
ID_ARGS = ("External id", "correlation", "Record function id", "Ev Idx")

OURS = """
import sys
from pathlib import Path
from tc_analyses.inputs import TraceInputs
from tc_analyses.registry import entry
from tracer.importers import import_kineto
import_kineto(Path(sys.argv[1]), Path(sys.argv[2]), checked=sys.argv[3] == "checked")
if sys.argv[3] == "breakdown":
    entry("breakdown").run(TraceInputs(Path(sys.argv[2])), entry("breakdown").options())
"""

HTA = """
import logging, sys
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)
"""


def scaled_file(copies: int, out: Path) -> int:
    """Write `copies` back-to-back copies of the nccl trace to `out`; the number of events."""
    doc = json.loads(gzip.decompress(SOURCE.read_bytes()), parse_float=Decimal)
    events = doc["traceEvents"]
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1000
    id_step = 1 + max((int(e.get("id", 0)) for e in events if isinstance(e.get("id"), int)), default=0)
    arg_step = 1 + max((int(v) for e in events for k, v in e.get("args", {}).items() if k in ID_ARGS
                        and isinstance(v, int)), default=0)
    result = [e for e in events if e.get("ph") == "M"]
    for copy in range(copies):
        for e in events:
            if e.get("ph") == "M":
                continue
            c = dict(e)
            if "ts" in c:
                c["ts"] = c["ts"] + copy * span
            if isinstance(c.get("id"), int):
                c["id"] = c["id"] + copy * id_step
            if "args" in c:
                c["args"] = {k: (v + copy * arg_step if k in ID_ARGS and isinstance(v, int) and v >= 0 else v)
                             for k, v in c["args"].items()}
            result.append(c)
    doc["traceEvents"] = result
    # Decimal times are written as JSON numbers (floats: their shortest repr keeps the µs digits)
    out.write_bytes(gzip.compress(json.dumps(doc, default=float).encode(), mtime=0))
    return len(result)


def run(rounds: int = 1, copies: int = 25) -> dict[str, Any]:
    if not SOURCE.is_file():
        return {"skipped": f"{SOURCE} is absent (the shared traces are not part of the project)"}
    hta_python = os.environ.get("DFCOMPASS_HTA_PYTHON", "")
    folder = OUT_DIR / f"kineto-x{copies}"
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "scaled.json.gz"
    events = scaled_file(copies, file)
    log(f"  kineto at scale: {events:,} events, {file.stat().st_size / 1e6:.0f} MB gzipped")
    best: dict[str, tuple[float, int]] = {}
    with tempfile.TemporaryDirectory(prefix="dfc-kineto-") as tmp:
        ours_script, hta_script = Path(tmp) / "ours_side.py", Path(tmp) / "hta_side.py"  # not hta.py: it would shadow the package
        ours_script.write_text(OURS)
        hta_script.write_text(HTA)
        sides = [("dfcompass", lambda i: [sys.executable, str(ours_script), str(file), f"{tmp}/trace{i}", "breakdown"]),
                 ("dfcompass_import", lambda i: [sys.executable, str(ours_script), str(file), f"{tmp}/import{i}", "-"]),
                 ("dfcompass_checked", lambda i: [sys.executable, str(ours_script), str(file), f"{tmp}/checked{i}",
                                                  "checked"])]
        if hta_python and Path(hta_python).is_file():
            sides.append(("hta", lambda i: [hta_python, str(hta_script), str(folder)]))
        for i in range(rounds):
            for name, argv in (sides if i % 2 == 0 else sides[::-1]):
                seconds, rss = run_child(argv(i))
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, rss)
                log(f"    {name}: {seconds:.1f} s, peak {rss / 1024:.0f} MiB")
    result: dict[str, Any] = {"events": events, "gzip_mb": file.stat().st_size / 1e6, "rounds": rounds,
                              **{f"{n}_s": s for n, (s, _) in best.items()},
                              **{f"{n}_rss_kib": r for n, (_, r) in best.items()}}
    result["time_ratio_import_fast_per_checked"] = best["dfcompass_import"][0] / best["dfcompass_checked"][0]
    result["rss_ratio_import_fast_per_checked"] = best["dfcompass_import"][1] / best["dfcompass_checked"][1]
    if "hta" in best:
        result["time_ratio_dfcompass_per_hta"] = best["dfcompass"][0] / best["hta"][0]
        result["rss_ratio_dfcompass_per_hta"] = best["dfcompass"][1] / best["hta"][1]
        result["time_ratio_import_per_hta"] = best["dfcompass_import"][0] / best["hta"][0]
        result["rss_ratio_import_per_hta"] = best["dfcompass_import"][1] / best["hta"][1]
    return result
