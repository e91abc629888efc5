"""SIGKILL a recorded torch training loop N times (``make fuzz``; default 20) and count the outcomes.

Each kill comes at a seeded time after the first completed step. A kill passes when the trace
reads (our reader and babeltrace2) and holds every step the program completed but at most one.
Prints one line per kill and a JSON summary; the exit status is 1 unless all pass.
With ``--burn`` a bounded CPU burner (one core) runs beside each program, as on a busy machine.
Usage: ``.venv/bin/python scripts/crash_torch.py [N] [--burn]``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz.torch_crash import kill_once  # noqa: E402
from tests.helpers import BABELTRACE2, dfcompass_cmd, subprocess_env  # noqa: E402


def main(count: int, burn: bool = False) -> int:
    kills = []
    with tempfile.TemporaryDirectory(prefix="dfc-crash-") as tmp:
        for seed in range(count):
            kill = kill_once(seed, Path(tmp) / f"kill{seed}", dfcompass_cmd(), subprocess_env(), BABELTRACE2, burn=burn)
            kills.append(kill)
            print(f"kill {seed}: after {kill.delay_s:.2f} s, {kill.completed} steps completed, "
                  f"{kill.surviving} in the trace ({kill.nodes} ops), lost {kill.lost}, "
                  f"babeltrace2 {'ok' if kill.babeltrace2_ok else kill.babeltrace2_ok}"
                  + (", record cut a half-written packet" if kill.cut else "")
                  + (f", ERROR {kill.error}" if kill.error else ""), flush=True)
            shutil.rmtree(Path(tmp) / f"kill{seed}", ignore_errors=True)
    summary = {
        "kills": count,
        "readable": sum(1 for k in kills if not k.error and k.babeltrace2_ok is not False),
        "at_most_one_step_lost": sum(1 for k in kills if k.ok),
        "steps_lost": {str(n): sum(1 for k in kills if k.lost == n) for n in sorted({k.lost for k in kills})},
        "cut_by_record": sum(1 for k in kills if k.cut),
        "burner": burn,
        "completed_steps_range": [min(k.completed for k in kills), max(k.completed for k in kills)],
    }
    print(json.dumps(summary, indent=2))
    return 0 if summary["at_most_one_step_lost"] == count else 1


if __name__ == "__main__":
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    sys.exit(main(int(numbers[0]) if numbers else 20, burn="--burn" in sys.argv[1:]))
