"""Record the embedded Keras CNN and dump, beside the trace, the GraphDefs it ran: the test's reference.

python tests/tf_programs/record_cnn.py TRACE GRAPHS.json   (run in a subprocess: TensorFlow stays
out of the test process)
"""

from __future__ import annotations

import json
import sys

from tracer.tf_source import TFRecorder
from tracer.workloads.tf_models import run

trace, graphs_file = sys.argv[1], sys.argv[2]
with TFRecorder(trace) as recorder:
    run(recorder, steps_infer=2, steps_train=3, batch=16)
graphs = [{name: {"op": node.op, "inputs": list(node.input), "device": node.device} for name, node in graph.items()}
          for graph in recorder.graphs.graphs]
json.dump({"graphs": graphs, "result": {k: v for k, v in vars(recorder.result).items() if k != "devices"}},
          open(graphs_file, "w"))
