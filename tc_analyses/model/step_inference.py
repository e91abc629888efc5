"""Steps inferred from the repetition of the op sequence, for traces recorded without step marks.

``dfcompass record -- python train.py`` records a program as it is, and a training or serving loop
marks no steps. Its main thread still runs the same ops in the same order every iteration. This
module finds that period:

1. the *driver* thread is the thread with the most outermost node runs;
2. its outermost ops form a sequence of tokens (op and name); the *anchor* is the token that occurs
   at least ``min_steps`` times with the fewest occurrences, ties broken by the most regular gaps:
   an op that runs once an iteration (set-up ops run once or twice, others several times a step);
3. the period is the median gap between the anchor's occurrences, accepted when at least
   ``min_match`` of the sequence equals itself one period later;
4. a step starts at each occurrence of the anchor, shifted back to the earliest position of the
   repeating block (so a step starts at the iteration's first op, not at the anchor), and ends where
   the next begins; the last ends with its period's last op. Ops before the first step (set-up)
   stay outside any step.

Node runs of every thread get the step whose time window holds their start.
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

import numpy as np

from tc_analyses.model.activity import Activity, NodeRun, StepRun
from tracer.schema import NO_STEP

MIN_STEPS = 3
MIN_MATCH = 0.9
MAX_ANCHORS = 64


@dataclass(frozen=True)
class InferredSteps:
    tid: int  # the driver thread
    period: int  # outermost ops of the driver thread per step
    match: float  # fraction of the sequence equal to itself one period later
    anchor: str  # the op that runs once a step
    windows: tuple[tuple[int, int], ...]  # (start, end) of each step, in time order

    def step_of(self, ts: int) -> int:
        """The index of the step whose window holds `ts`, or NO_STEP."""
        i = bisect_right([w[0] for w in self.windows], ts) - 1
        return i if i >= 0 and ts <= self.windows[i][1] else NO_STEP

    def describe(self) -> str:
        return (f"{len(self.windows)} steps inferred from the repetition of the op sequence ({self.period} ops "
                f"a step on thread {self.tid}, {100 * self.match:.0f}% of it repeating; each starts before {self.anchor})")


def _token(run: NodeRun) -> str:
    return f"{run.op}|{run.name}"


def infer_steps(activity: Activity, min_steps: int = MIN_STEPS, min_match: float = MIN_MATCH) -> InferredSteps | None:
    """The steps of a trace without step marks (module docstring); None when nothing repeats."""
    outer: dict[int, list[NodeRun]] = defaultdict(list)
    for run in activity.nodes:
        if run.outermost:
            outer[run.tid].append(run)
    if not outer:
        return None
    tid = max(outer, key=lambda t: (len(outer[t]), -t))
    runs = sorted(outer[tid], key=lambda r: r.start)
    tokens = [_token(r) for r in runs]
    counts = Counter(tokens)
    positions: dict[str, list[int]] = defaultdict(list)
    for i, token in enumerate(tokens):
        positions[token].append(i)

    def irregularity(token: str) -> float:
        gaps = [b - a for a, b in zip(positions[token], positions[token][1:])]
        return statistics.pstdev(gaps) / max(1.0, statistics.mean(gaps))

    codes = np.unique(np.array(tokens, dtype=object).astype(str), return_inverse=True)[1]
    # Set-up ops that repeat a few times (a parameter's init per layer) come first: try enough
    # candidates to reach the ops that run once an iteration; each try is one array comparison.
    candidates = sorted((t for t, n in counts.items() if n >= min_steps), key=lambda t: (counts[t], irregularity(t), t))
    for anchor in candidates[:MAX_ANCHORS]:
        at = positions[anchor]
        period = int(statistics.median(b - a for a, b in zip(at, at[1:])))
        if period <= 0:
            continue
        span = len(tokens) - period - at[0]
        if span <= 0:
            continue
        same = int(np.count_nonzero(codes[at[0]:at[0] + span] == codes[at[0] + period:at[0] + period + span]))
        match = same / span
        if match < min_match:
            continue
        # Shift back to the block's first op: the earliest offset before the anchor that still repeats.
        shift = 0
        while shift < period - 1 and at[0] - shift - 1 >= 0 and \
                tokens[at[0] - shift - 1] == tokens[min(len(tokens) - 1, at[0] - shift - 1 + period)]:
            shift += 1
        starts = [p - shift for p in at if p - shift >= 0]
        windows = []
        for k, first in enumerate(starts):
            last = starts[k + 1] - 1 if k + 1 < len(starts) else min(len(runs) - 1, first + period - 1)
            windows.append((runs[first].start, max(r.end for r in runs[first:last + 1])))
        if len(windows) >= min_steps:
            return InferredSteps(tid, period, match, anchor.split("|", 1)[0], tuple(windows))
    return None


def with_steps(activity: Activity, inferred: InferredSteps) -> Activity:
    """`activity` with every node run numbered by its inferred step, and the steps as step runs."""
    starts = activity.nodes.column("start").tolist()
    nodes = activity.nodes.with_columns(step=np.fromiter(map(inferred.step_of, starts), np.int64, len(starts)))
    steps = [StepRun(i, inferred.tid, start, end) for i, (start, end) in enumerate(inferred.windows)]
    return replace(activity, nodes=nodes, steps=steps)
