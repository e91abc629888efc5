"""The attribute contract of the computation graph: every key name, in one place.

:func:`tc_analyses.model.graph.build_graph` writes these keys and every consumer (critical path,
exporters, placement) reads them through these constants, never through string literals.
``docs/graph.md`` documents each one.
"""

from __future__ import annotations

import enum
from typing import Final


class EdgeKind(enum.Enum):
    """What an edge of the computation graph stands for."""

    DATA = "data"  # a tensor flows between two nodes on the same device
    TRANSFER = "transfer"  # a tensor flows between nodes on different devices: a copy


# Node attributes.
OP: Final = "op"  # operation type, e.g. aten::conv2d
NAME: Final = "name"  # node name, e.g. layer1.0.conv1
DEVICE: Final = "device"  # device name from dfc:device_info, e.g. cuda:0
OCCURRENCE: Final = "occurrence"  # k: this is the k-th (name, op, device) execution of its step
EXECUTIONS: Final = "executions"  # number of executions aggregated into the node
DURATIONS_NS: Final = "durations_ns"  # list[int]: one duration per measured execution, in step order
MEAN_NS: Final = "mean_ns"  # int: mean duration (rounded); the node weight of critical_path/slack
MEDIAN_NS: Final = "median_ns"  # int: median duration; the measured cost a placement uses
P10_NS: Final = "p10_ns"  # int: 10th percentile of the durations (the spread a speedup range comes from)
P90_NS: Final = "p90_ns"  # int: 90th percentile of the durations
MIN_NS: Final = "min_ns"  # int: shortest duration
MAX_NS: Final = "max_ns"  # int: longest duration
MEASURED: Final = "measured"  # dict[str, bool]: device name -> durations were measured there
INPUT_SHAPES: Final = "input_shapes"  # input shapes from dfc:node_args, "" when not recorded
INPUT_DTYPES: Final = "input_dtypes"  # input dtypes from dfc:node_args, "" when not recorded

# Edge attributes.
KIND: Final = "kind"  # EdgeKind
BYTES: Final = "bytes"  # int: max over steps of the bytes the edge carries within one step
COUNT: Final = "count"  # int: dfc:tensor_edge events aggregated into the edge
SRC_DEVICE: Final = "src_device"  # device name of the producer
DST_DEVICE: Final = "dst_device"  # device name of the consumer

# Graph attributes (g.graph[...]).
EXECUTION_NODES: Final = "execution_nodes"  # dict[int, node]: execution node_id -> graph node
CROSS_STEP_EDGES: Final = "cross_step_edges"  # list[dict]: edges between steps, kept out of the DAG
SOURCE: Final = "source"  # str: path of the trace the graph was built from
