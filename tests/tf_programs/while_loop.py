"""A tf.while_loop whose iterations run in parallel (parallel_iterations=10): a node runs once per
iteration, and each consumer must take its producer from its own iteration.

python tests/tf_programs/while_loop.py TRACE
"""

from __future__ import annotations

import sys

import tensorflow as tf

from tracer.tf_source import TFRecorder


@tf.function
def loop(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    def body(i: tf.Tensor, acc: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        y = tf.matmul(x, w) * tf.cast(i, tf.float32)
        return i + 1, acc + tf.reduce_sum(tf.nn.relu(y))

    _, total = tf.while_loop(lambda i, a: i < 6, body, (tf.constant(0), tf.constant(0.0)), parallel_iterations=10)
    return total


x = tf.random.normal((200, 200), seed=1)
w = tf.random.normal((200, 200), seed=2)
with TFRecorder(sys.argv[1]):
    loop(x, w)
