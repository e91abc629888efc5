"""A program run under `dfcompass record` that configures TF first and later starts TF's own profiler.

Both must work as they do without dfcompass: configuration comes before TF's runtime is set up,
and only one profiler can run at a time (dfcompass gives way). Exits 1 if a configuration fails.
"""

from __future__ import annotations

import sys
import tempfile

import tensorflow as tf

tf.config.threading.set_inter_op_parallelism_threads(2)
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


@tf.function
def layer(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(tf.matmul(x, w)) * 2.0


x = tf.random.normal((32, 32), seed=1)
w = tf.random.normal((32, 32), seed=2)
for _ in range(3):
    layer(x, w)
with tempfile.TemporaryDirectory() as logdir:
    tf.profiler.experimental.start(logdir)
    layer(x, w)
    tf.profiler.experimental.stop()
layer(x, w)
if tf.config.threading.get_inter_op_parallelism_threads() != 2 or len(tf.config.list_logical_devices("CPU")) != 2:
    sys.exit(1)
