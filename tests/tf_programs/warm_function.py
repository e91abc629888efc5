"""A tf.function that already ran before recording starts (the usual case: record after warm-up).

python tests/tf_programs/warm_function.py TRACE refresh|keep
"""

from __future__ import annotations

import sys

import tensorflow as tf

from tracer.tf_source import TFRecorder


@tf.function
def layer(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(tf.matmul(x, w)) * 2.0


x = tf.random.normal((16, 16), seed=1)
w = tf.random.normal((16, 16), seed=2)
layer(x, w)  # instantiated here, before the recorder exists
with TFRecorder(sys.argv[1], refresh_graphs=sys.argv[2] == "refresh"):
    layer(x, w)
