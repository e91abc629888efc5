"""The embedded default workload: a small hand-written data pipeline on numpy.

A loader thread produces batches into a queue (edges cross threads); the main thread
normalises them, runs a two-layer network whose two heads run in a thread pool, and
reduces a loss. Every stage is a traced node, so the trace holds the exact dataflow:

    load_batch -> normalize -> dense1 -> relu -+-> head_a -+-> merge -> softmax -> loss
                                               +-> head_b -+

Run traced with ``dfcompass record -o DIR -- python -m tracer.workloads.pipeline``.
"""

from __future__ import annotations

import argparse
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import tracer

BATCH, FEATURES, HIDDEN, CLASSES = 64, 256, 512, 10


@tracer.traced(op="load_batch")
def load_batch(rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((BATCH, FEATURES), dtype=np.float32)


@tracer.traced(op="normalize")
def normalize(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-5)


@tracer.traced(op="matmul", name="dense1")
def dense1(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x @ w


@tracer.traced(op="relu")
def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


@tracer.traced(op="matmul", name="head_a")
def head_a(h: np.ndarray, w: np.ndarray) -> np.ndarray:
    return h @ w


@tracer.traced(op="reduce_mean", name="head_b")
def head_b(h: np.ndarray) -> np.ndarray:
    return np.repeat(h.mean(axis=1, keepdims=True), CLASSES, axis=1)


@tracer.traced(op="add", name="merge")
def merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a + b


@tracer.traced(op="softmax")
def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@tracer.traced(op="nll_loss", name="loss")
def loss(p: np.ndarray) -> float:
    return float(-np.log(p[:, 0] + 1e-9).mean())


def _loader(steps: int, out: "queue.Queue[np.ndarray]", seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        out.put(load_batch(rng))


def run(steps: int = 20, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed + 1)
    w1 = rng.standard_normal((FEATURES, HIDDEN), dtype=np.float32) * 0.05
    w2 = rng.standard_normal((HIDDEN, CLASSES), dtype=np.float32) * 0.05
    batches: "queue.Queue[np.ndarray]" = queue.Queue(maxsize=4)
    loader = threading.Thread(target=_loader, args=(steps, batches, seed), name="loader")
    loader.start()
    losses = []
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="head") as pool:
        for i in range(steps):
            with tracer.step(i):
                h = relu(dense1(normalize(batches.get()), w1))
                a, b = pool.submit(head_a, h, w2), pool.submit(head_b, h)
                losses.append(loss(softmax(merge(a.result(), b.result()))))
    loader.join()
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    losses = run(args.steps, args.seed)
    print(f"pipeline: {args.steps} steps, final loss {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
