"""Two recordings of a warm function, with untraced calls before and between them.

python tests/tf_programs/repeated_recordings.py FOLDER refresh|keep

Once a function has run without TF's profiler, TF's executor stops tracing its cheap ops
(ReadVariableOp, Mul, AddV2...): each recording clears the kernel cache at its start so they are
traced again (``keep`` passes ``refresh_graphs=False`` to show what is lost). Writes
FOLDER/first and FOLDER/second.
"""

from __future__ import annotations

import sys
from pathlib import Path

import tensorflow as tf

from tracer.tf_source import TFRecorder

weights = tf.Variable(tf.random.normal((16, 16), seed=2))


@tf.function
def layer(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(tf.matmul(x, weights)) * 2.0 + 1.0


folder, refresh = Path(sys.argv[1]), sys.argv[2] == "refresh"
x = tf.random.normal((16, 16), seed=1)
for name in ("first", "second"):
    for _ in range(50):  # untraced calls: the executor learns which ops are cheap
        layer(x)
    with TFRecorder(folder / name, refresh_graphs=refresh):
        for _ in range(3):
            layer(x)
