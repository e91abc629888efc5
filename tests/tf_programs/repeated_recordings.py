"""Three recordings in one process: graphs are collected once per process, not once per recording.

python tests/tf_programs/repeated_recordings.py FOLDER IDLE_FUNCTIONS

A function runs before the first recording (which clears the kernel cache so it is instantiated
again), another is made and runs between the recordings, then IDLE_FUNCTIONS more are made with no
recording running; the second recording runs both. Prints, as JSON, whether each recording cleared
the kernel cache.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import tensorflow as tf

from tracer.tf_source import TFRecorder


@tf.function
def layer(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(tf.matmul(x, w)) * 2.0


@tf.function
def squash(x: tf.Tensor) -> tf.Tensor:
    return tf.tanh(x) + 1.0


folder, idle_functions = Path(sys.argv[1]), int(sys.argv[2])
x = tf.random.normal((16, 16), seed=1)
w = tf.random.normal((16, 16), seed=2)
layer(x, w)  # instantiated before any recording
with TFRecorder(folder / "first") as first:
    layer(x, w)
squash(x)  # made and instantiated between the recordings
for i in range(idle_functions):  # functions made while nothing records (each fit makes a few)
    tf.function(lambda t, scale=float(i): t * scale).get_concrete_function(x)
with TFRecorder(folder / "second") as second:
    layer(x, w)
    squash(x)
print(json.dumps({"cleared": [first.kernel_cache_cleared, second.kernel_cache_cleared]}))
