"""Two TFRecorder windows on one session, with eager ops in both: ids must stay unique in the trace.

python tests/tf_programs/two_windows.py TRACE
"""

from __future__ import annotations

import sys

import tensorflow as tf

from tracer.session import Session
from tracer.tf_source import TFRecorder

x = tf.random.normal((64, 64), seed=1)
with Session(sys.argv[1]) as session:
    for _ in range(2):
        with TFRecorder(session):
            tf.nn.relu(tf.matmul(x, x) + 1.0)
