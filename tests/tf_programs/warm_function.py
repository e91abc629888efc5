"""A tf.function that already ran before recording starts (the usual case: record after warm-up).

python tests/tf_programs/warm_function.py TRACE refresh|keep|late

``late`` imports the recorder only after the function is made (it is then found by a heap scan,
not by the registry of :mod:`tracer.tf_graphs`) and refreshes its graphs.
"""

from __future__ import annotations

import sys

import tensorflow as tf

if sys.argv[2] != "late":
    from tracer.tf_source import TFRecorder


@tf.function
def layer(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(tf.matmul(x, w)) * 2.0


x = tf.random.normal((16, 16), seed=1)
w = tf.random.normal((16, 16), seed=2)
layer(x, w)  # instantiated here, before the recorder exists
if sys.argv[2] == "late":
    from tracer.tf_source import TFRecorder
with TFRecorder(sys.argv[1], refresh_graphs=sys.argv[2] != "keep") as recorder:
    layer(x, w)
assert recorder.sizes is not None
print(f"heap scans: {recorder.sizes.heap_scans}")
