"""A training loop of tf.function steps recorded in windows (one per step), in one window, or killed.

python tests/tf_programs/windows.py TRACE each|one|kill

``each`` cuts a window at every step end, ``one`` writes the whole profile at the stop; both print
the recorder's counts as JSON. ``kill`` cuts at every step and SIGKILLs itself in the fifth step:
the steps before it must be in the trace. ``DFCOMPASS_HANDOFF=1`` converts every cut window in a fork
child, ``0`` here (tracer/window_handoff.py).
"""

from __future__ import annotations

import json
import os
import signal
import sys

import tensorflow as tf

from tracer.tf_source import TFRecorder

STEPS = 6
w = tf.Variable(tf.random.normal((32, 32), seed=1))
x = tf.random.normal((16, 32), seed=2)


@tf.function
def train_step(x: tf.Tensor) -> tf.Tensor:
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.nn.relu(tf.matmul(x, w)) ** 2)
    w.assign_sub(0.001 * tape.gradient(loss, w))
    return loss


train_step(x)  # traced and instantiated before recording, as after a warm-up
mode = sys.argv[2]
windows = {"min_window_s": 0.0, "restart_share": 1e9} if mode != "one" else {"min_window_s": 1e9}
with TFRecorder(sys.argv[1], **windows) as recorder:
    for step in range(STEPS):
        recorder.begin_step()
        if mode == "kill" and step == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        train_step(x).numpy()
        recorder.end_step()
print(json.dumps({"windows": recorder.result.windows, "nodes": recorder.result.nodes,
                  "edges": recorder.result.edges, "unmatched_runs": recorder.result.unmatched_runs,
                  "handed_off": recorder.windows_handed_off, "lost": recorder.result.windows_lost}))
