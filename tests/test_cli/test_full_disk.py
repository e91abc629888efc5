"""A write that fails half way (a full disk) makes an import fail in one line naming the trace,
never exit 0 with a trace of 0 events (issue 37, item 4).

The full disk is the file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) of the dfcompass process: the
kernel cuts its writes short the way a full disk does, with no root or small tmpfs needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import subprocess_env

LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
from tc_analyses.cli import main
sys.argv = ["dfcompass", *sys.argv[1:]]
main()
"""


def _kineto(path: Path, ops: int) -> Path:
    t0 = 1_700_000_000_000_000
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{k % 50}", "pid": 1, "tid": 1, "ts": t0 + 10 * k,
               "dur": 5, "args": {"External id": k}} for k in range(ops)]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_an_import_onto_a_full_disk_fails_in_one_line(tmp_path: Path) -> None:
    src, out = _kineto(tmp_path / "big.json", 3000), tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", LIMITED, "import-kineto", str(src), "-o", str(out)],
                          capture_output=True, text=True, env=subprocess_env(), timeout=300)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"dfcompass: error: {out}: the trace was not written whole ({out}/") and "short write" in line
    small = subprocess.run([sys.executable, "-c", LIMITED, "import-kineto", str(_kineto(tmp_path / "s.json", 20)),
                            "-o", str(tmp_path / "small")], capture_output=True, text=True, env=subprocess_env(),
                           timeout=300)
    assert small.returncode == 0, small.stderr  # what fits is written as before
