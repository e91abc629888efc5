"""Windows converted in fork children (tracer/fork_chain.py) give the trace the program's thread gives.

A training loop with steps (edges cross windows: the optimizer writes the weights one window reads
in the next) is recorded twice, converting on the program's thread (DFCOMPASS_HANDOFF=0) and in
a chain of fork children; the two traces hold the same nodes, edges, memory events and strings.
(DFCOMPASS_HANDOFF=1 forks for every window; by default a window whose conversion costs less
than a fork converts here.) A program killed with SIGKILL right after its steps still gets every
finished window written, by the converters that outlive it. The shared id blocks never give one id twice across processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.reader.fast import read_trace
from tracer.fork_chain import HandoffPolicy, wait_for_converters
from tracer.id_blocks import BLOCK, BlockCursor, SharedIdBlocks
from tests.helpers import subprocess_env

STEPS = 6

PROGRAM = textwrap.dedent("""
    import os, signal, sys, torch
    from tracer.torch_source import TorchRecorder
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.randn(8, 16)
    rec = TorchRecorder(sys.argv[1]).start()
    for _ in range({steps}):
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
        rec.step()
    print("chain", rec._handoff is not None, flush=True)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    rec.stop()
""")


def _record(tmp_path: Path, name: str, handoff: str, ending: str = "stop") -> tuple[Path, str]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(steps=STEPS))
    trace = tmp_path / name
    # The chain converts torch.profiler's windows (the op observer's convert on a thread instead).
    env = {**subprocess_env(), "DFCOMPASS_HANDOFF": handoff, "DFCOMPASS_TORCH_ENGINE": "profiler"}
    done = subprocess.run([sys.executable, str(script), str(trace), ending], env=env, capture_output=True,
                          text=True, timeout=300)
    if ending == "stop":
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == -signal.SIGKILL, done.stderr
    return trace, done.stdout


def _content(trace: Path) -> dict[str, Any]:
    """What must not depend on where windows convert: ops, edges by their ends' ops, memory, steps."""
    read = read_trace(trace)
    nodes = read.table("node_begin")
    names = nodes.text("op")
    assert None not in set(names.tolist()), "an op name whose string is not defined"
    ops = dict(zip(nodes["node_id"].tolist(), names.tolist()))
    edges = read.table("tensor_edge")
    edge_ops = Counter((ops.get(p), ops.get(c), n) for p, c, n in zip(edges["producer"].tolist(),
                                                                        edges["consumer"].tolist(),
                                                                        edges["bytes"].tolist()))
    return {"ops": Counter(ops.values()), "edges": edge_ops, "discarded": read.discarded,
            "allocs": len(read.table("mem_alloc")), "frees": len(read.table("mem_free")),
            "steps": sorted(read.table("step_begin")["step"].tolist())}


@pytest.mark.torch
def test_forked_conversion_gives_the_same_trace_as_converting_here(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    here, said_here = _record(tmp_path, "here", "0")
    forked, said_forked = _record(tmp_path, "forked", "1")
    assert "chain False" in said_here and "chain True" in said_forked
    a, b = _content(here), _content(forked)
    assert a["steps"] == b["steps"] and set(range(1, STEPS + 1)) <= set(a["steps"])
    assert sum(a["edges"].values()) > 0
    cross = [edge for edge in a["edges"] if edge[:2] == ("aten::addcdiv_", "aten::linear")]
    assert cross, "the optimizer's writes must feed the next step's forward (edges across windows)"
    assert a == b


@pytest.mark.torch
def test_converters_outlive_a_killed_program(tmp_path: Path) -> None:
    """SIGKILL right after the last step: the windows still converting are written by their children."""
    pytest.importorskip("torch")
    trace, said = _record(tmp_path, "killed", "1", ending="kill")
    assert "chain True" in said
    assert wait_for_converters(trace, timeout_s=120)
    content = _content(trace)
    assert set(range(1, STEPS + 1)) <= set(content["steps"])  # every step that the program finished


def test_shared_blocks_never_repeat_an_id_across_processes() -> None:
    shared = SharedIdBlocks({"string": 5, "node": 0})
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: numbers from its own blocks and reports them
        os.close(read_end)
        cursor = BlockCursor(shared, "string")
        ids = [next(cursor) for _ in range(3 * BLOCK["string"])]
        os.write(write_end, repr(ids).encode())
        os._exit(0)
    os.close(write_end)
    mine = shared.ids("string")
    parent_ids = [next(mine) for _ in range(2 * BLOCK["string"] + 7)]
    chunks = []
    while chunk := os.read(read_end, 1 << 20):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    child_ids = eval(b"".join(chunks).decode())  # noqa: S307 - our own child's repr of a list of ints
    assert len(set(parent_ids) | set(child_ids)) == len(parent_ids) + len(child_ids)
    assert min(parent_ids + child_ids) == 5  # the count goes on from where the session was
    # Dense: 3 + 3 blocks taken, the parent's last one part used.
    assert max(parent_ids + child_ids) < 5 + 6 * BLOCK["string"]


def test_a_cursor_goes_on_where_it_was_handed_over() -> None:
    shared = SharedIdBlocks({"node": 100})
    first = BlockCursor(shared, "node")
    taken = [next(first) for _ in range(10)]
    second = BlockCursor(shared, "node", *first.position())
    assert next(second) == taken[-1] + 1 == 110


def test_the_policy_forks_only_where_converting_here_costs_more() -> None:
    policy = HandoffPolicy("auto")
    assert not policy.fork(1.0), "the first window converts here: what that costs is not known yet"
    policy.converted_here(0.5, 1.0)  # conversion here: half a second per second of window
    policy.forked(0.010)  # a fork: 10 ms
    assert not policy.fork(0.002), "a 2 ms window converts here (1 ms) for less than a fork"
    assert policy.fork(0.2), "a 200 ms window would cost 100 ms here, ten forks"
    policy.converted_here(0.0001, 0.002)  # cheap windows lower the learnt rate
    assert policy.convert_s_per_window_s is not None and policy.convert_s_per_window_s < 0.5
    always = HandoffPolicy("always")
    assert always.fork(0.0)
