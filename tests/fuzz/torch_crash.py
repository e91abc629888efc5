"""SIGKILL a torch training loop recorded by ``dfcompass record`` and count what survived.

The program writes its own count of completed steps to a progress file (one ``os.write`` per
step, so a SIGKILL cannot leave it ahead of the program). Each step runs exactly one
``aten::mse_loss_backward``, so the trace's count of that op is its count of steps that reached
backward; the recorder must keep every completed step but the last (the one whose window was
still being closed). Used by tests/test_tracer/test_torch_crash.py (a few kills) and
scripts/crash_torch.py (``make fuzz``: 20 kills).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tc_analyses.errors import TraceError
from tc_analyses.reader.fast import read_trace

STEP_OP = "aten::mse_loss_backward"

PROGRAM = """
import os, sys
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
progress = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(progress, b"pid %d\\n" % os.getpid())
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(16, 32), torch.randn(16, 1)
step = 0
while True:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    step += 1
    os.write(progress, b"step %d\\n" % step)
"""


@dataclass(frozen=True)
class Kill:
    seed: int
    delay_s: float  # after the first completed step
    completed: int  # steps the program finished, by its own count
    surviving: int  # steps whose backward op is in the trace
    nodes: int
    babeltrace2_ok: bool | None  # None: babeltrace2 not installed
    error: str = ""
    cut: bool = False  # `record` cut a half-written packet (the trace needed that repair)

    @property
    def lost(self) -> int:
        return self.completed - self.surviving

    @property
    def ok(self) -> bool:
        # -1: the step in flight reached backward before the program counted it (nothing lost).
        return not self.error and self.babeltrace2_ok is not False and -1 <= self.lost <= 1


def _progress(path: Path) -> tuple[int | None, int]:
    pid, step = None, 0
    if path.exists():
        for line in path.read_text().splitlines():
            kind, _, value = line.partition(" ")
            if kind == "pid" and value.isdigit():
                pid = int(value)
            elif kind == "step" and value.isdigit():
                step = int(value)
    return pid, step


BURNER = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def kill_once(seed: int, workdir: Path, dfcompass: list[str], env: dict[str, str],
              babeltrace2: str | None, max_delay_s: float = 3.0, sig: int = signal.SIGKILL,
              burn: bool = False) -> Kill:
    """Run the program under `dfcompass record`, send it `sig` at a seeded time, read the trace.
    `burn`: a CPU burner (one core, bounded to 180 s) runs beside it, as on a busy machine."""
    delay = random.Random(seed).uniform(0.0, max_delay_s)
    burner = subprocess.Popen(["python3", "-c", BURNER.format(seconds=180)]) if burn else None
    workdir.mkdir(parents=True, exist_ok=True)
    script, progress, trace = workdir / "train.py", workdir / "progress", workdir / "trace"
    script.write_text(PROGRAM)
    record = subprocess.Popen([*dfcompass, "record", "-o", str(trace), "--", "python", str(script), str(progress)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        pid, step = _progress(progress)
        while (pid is None or step < 1) and time.monotonic() < deadline and record.poll() is None:
            time.sleep(0.02)
            pid, step = _progress(progress)
        if pid is None or step < 1:
            record.kill()
            return Kill(seed, delay, 0, 0, 0, None, f"the program never completed a step: {record.stderr.read()!r}"
                        if record.stderr else "the program never completed a step")
        time.sleep(delay)
        os.kill(pid, sig)
        record.wait(timeout=60)
    finally:
        if record.poll() is None:
            record.kill()
            record.wait()
        if burner is not None:
            burner.kill()
            burner.wait()
    said = record.stderr.read().decode(errors="replace") if record.stderr else ""
    cut = "left half-written" in said
    completed = _progress(progress)[1]
    try:
        data = read_trace(trace)
    except TraceError as exc:
        return Kill(seed, delay, completed, 0, 0, None, f"unreadable: {exc}")
    names = list(data.table("node_begin").text("op"))
    surviving = names.count(STEP_OP)
    ok = None
    if babeltrace2:
        ok = subprocess.run([babeltrace2, "--output-format=dummy", str(trace)], capture_output=True,
                            timeout=120).returncode == 0
    return Kill(seed, delay, completed, surviving, len(names), ok, cut=cut)
