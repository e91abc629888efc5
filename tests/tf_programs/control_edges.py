"""A tf.function with a control dependency, run with Grappler off so the graph that runs is the
concrete function's own; dumps that GraphDef (from get_concrete_function, not from the recorder).

python tests/tf_programs/control_edges.py TRACE GRAPH.json
"""

from __future__ import annotations

import json
import sys

import tensorflow as tf

from tracer.tf_source import TFRecorder

tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


@tf.function
def block(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    z = tf.matmul(x, y)
    with tf.control_dependencies([z]):
        s = tf.square(y)  # its only input comes from outside the block: it gets ^MatMul
    return tf.nn.relu(z) + s


a = tf.random.normal((32, 32), seed=1)
b = tf.random.normal((32, 32), seed=2)
graph = block.get_concrete_function(a, b).graph.as_graph_def()
with TFRecorder(sys.argv[1]) as recorder:
    for _ in range(3):
        recorder.step()
        block(a, b)
json.dump({node.name: {"op": node.op, "inputs": list(node.input)} for node in graph.node}, open(sys.argv[2], "w"))
