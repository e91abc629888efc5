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
from collections import Counter
from bisect import bisect_right
from dataclasses import dataclass, replace

import numpy as np

from tc_analyses.model.activity import Activity, StepRun
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


def infer_steps(activity: Activity, min_steps: int = MIN_STEPS, min_match: float = MIN_MATCH) -> InferredSteps | None:
    """The steps of a trace without step marks (module docstring); None when nothing repeats."""
    nodes = activity.nodes
    outer = nodes.column("outermost").astype(bool)
    if not outer.any():
        return None
    tids = nodes.column("tid")[outer]
    distinct, counts_of = np.unique(tids, return_counts=True)
    tid = int(distinct[np.flatnonzero(counts_of == counts_of.max())[0]])  # the most runs, then the lowest tid
    mine = np.flatnonzero(outer)[tids == tid]
    mine = mine[np.argsort(nodes.column("start")[mine], kind="stable")]  # by start, recorded order on ties
    starts, ends = nodes.column("start")[mine], nodes.column("end")[mine]
    # a token is an (op, name) pair: its code, and its text only for the distinct ones
    op, name = nodes.column("op")[mine].astype(np.int64), nodes.column("name")[mine].astype(np.int64)
    width = int(name.max()) + 1
    pairs, pair_codes = np.unique(op * width + name, return_inverse=True)
    ops, names = nodes.labels("op"), nodes.labels("name")
    pair_texts = [f"{ops[pair // width]}|{names[pair % width]}" for pair in pairs.tolist()]
    distinct_texts, text_of_pair = np.unique(np.array(pair_texts, dtype=object).astype(str), return_inverse=True)
    texts: list[str] = distinct_texts.tolist()  # two pairs with one text ("a|b", "c" and "a", "b|c") are one token
    codes = text_of_pair.reshape(-1)[pair_codes.reshape(-1)]
    counts = np.bincount(codes, minlength=len(texts))
    order = np.argsort(codes, kind="stable")  # each token's positions, ascending
    bounds = np.concatenate([[0], np.cumsum(counts)])

    def positions(token: int) -> list[int]:
        return list(order[bounds[token]:bounds[token + 1]].tolist())

    def irregularity(token: int) -> float:
        at = positions(token)
        gaps = [b - a for a, b in zip(at, at[1:])]
        return statistics.pstdev(gaps) / max(1.0, statistics.mean(gaps))

    # Set-up ops that repeat a few times (a parameter's init per layer) come first: try enough
    # candidates to reach the ops that run once an iteration; each try is one array comparison.
    eligible = sorted((t for t in range(len(texts)) if counts[t] >= min_steps), key=lambda t: int(counts[t]))
    if len(eligible) > MAX_ANCHORS:  # only the counts up to the last one tried can be tried
        eligible = [t for t in eligible if counts[t] <= counts[eligible[MAX_ANCHORS - 1]]]
    ties = Counter(int(counts[t]) for t in eligible)  # the finer keys order tokens of one count only
    candidates = sorted(eligible, key=lambda t: (int(counts[t]), irregularity(t) if ties[int(counts[t])] > 1 else 0.0,
                                                 texts[t]))
    total = len(codes)
    for anchor in candidates[:MAX_ANCHORS]:
        at = positions(anchor)
        period = int(statistics.median(b - a for a, b in zip(at, at[1:])))
        if period <= 0:
            continue
        span = total - period - at[0]
        if span <= 0:
            continue
        same = int(np.count_nonzero(codes[at[0]:at[0] + span] == codes[at[0] + period:at[0] + period + span]))
        match = same / span
        if match < min_match:
            continue
        # Shift back to the block's first op: the earliest offset before the anchor that still repeats.
        shift = 0
        while shift < period - 1 and at[0] - shift - 1 >= 0 and \
                codes[at[0] - shift - 1] == codes[min(total - 1, at[0] - shift - 1 + period)]:
            shift += 1
        firsts = np.array([p - shift for p in at if p - shift >= 0], dtype=np.int64)
        if not len(firsts):
            continue
        lasts = np.append(firsts[1:] - 1, min(total - 1, int(firsts[-1]) + period - 1))
        latest = np.maximum.reduceat(ends, firsts)  # the step's last end
        # reduceat runs to the next first; the last window stops at its period's end
        latest[-1] = ends[firsts[-1]:lasts[-1] + 1].max()
        windows = tuple(zip(starts[firsts].tolist(), latest.tolist()))
        if len(windows) >= min_steps:
            return InferredSteps(tid, period, match, texts[anchor].split("|", 1)[0], windows)
    return None


def with_steps(activity: Activity, inferred: InferredSteps) -> Activity:
    """`activity` with every node run numbered by its inferred step, and the steps as step runs."""
    starts = activity.nodes.column("start")
    first = np.array([w[0] for w in inferred.windows], dtype=np.int64)
    last = np.array([w[1] for w in inferred.windows], dtype=np.int64)
    at = np.searchsorted(first, starts, side="right") - 1  # as step_of, for every run at once
    inside = (at >= 0) & (starts <= last[np.maximum(at, 0)])
    nodes = activity.nodes.with_columns(step=np.where(inside, at, NO_STEP).astype(np.int64))
    steps = [StepRun(i, inferred.tid, start, end) for i, (start, end) in enumerate(inferred.windows)]
    return replace(activity, nodes=nodes, steps=steps)
