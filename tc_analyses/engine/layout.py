"""Ids of dfcompass's generated analyses and the attribute paths their state systems hold.

One source for both ends: the view-models (``export/tracecompass/model.py``) hand these names to
the templates that write the XML, and the summary (``analyses/summary.py``) reads the built state
systems with them, so renaming a path here renames it everywhere (a path renamed on one side only
would silently give 0% busy). Users read them as ``layout.NAME`` when they run, not with
``from ... import NAME``, so a single assignment reaches all of them.
"""

from __future__ import annotations

ID_PREFIX = "org.dfcompass"

# Analysis ids: state providers, and the latency patterns (segments are keyed by pattern id).
DATAFLOW_ID = f"{ID_PREFIX}.dataflow"
GPU_ID = f"{ID_PREFIX}.gpu"
API_ID = f"{ID_PREFIX}.api"
MEMORY_ID = f"{ID_PREFIX}.memory"
EXPERIMENT_ID = f"{ID_PREFIX}.experiment"
RANKS_ID = f"{ID_PREFIX}.ranks"
LATENCY_ID = f"{ID_PREFIX}.latency"
NODE_LATENCY_ID = f"{LATENCY_ID}.node"
KERNEL_LATENCY_ID = f"{LATENCY_ID}.kernel"
LAUNCH_LATENCY_ID = f"{LATENCY_ID}.launch"
TRANSFER_LATENCY_ID = f"{LATENCY_ID}.transfer"

# Attribute path segments. Every analysis keeps the trace's string table at Strings/<sid>.
STRINGS = "Strings"
NAME = "name"  # <group>/<id>/name: the label of a device or thread group
# dataflow: Devices/<device>/Threads/<tid>/Node holds the stack depth, Node/<level> the op;
# Threads/<tid> the thread names; Steps/<tid> the step a thread is in.
DEVICES = "Devices"
THREADS = "Threads"
NODE = "Node"
STEPS = "Steps"
# gpu: GPU/<device>/Queues/<queue> the activity running (or IDLE), GPU/<device>/busy 1 or 0,
# GPU/<device>/active how many run; Pending/<correlation id> and Launches/pending the queue depth.
# Work that overlaps on one queue (programmatic dependent launch) runs in sub-lanes
# GPU/<device>/Queues/<queue>/lane <n> (n = 1..EXTRA_LANES), GPU/<device>/Lanes/<queue>/<correlation id>
# holding the lane each running activity took (0 is the queue itself).
GPU = "GPU"
QUEUES = "Queues"
LANES = "Lanes"
LANE = "lane"  # a prefix: "lane 1"
EXTRA_LANES = 3  # a count, not a name: names() leaves it out
BUSY = "busy"
ACTIVE = "active"
PENDING = "Pending"
LAUNCHES = "Launches"
LAUNCHES_PENDING = "pending"
# memory: Memory/<device>/bytes_in_use.
MEMORY = "Memory"
BYTES_IN_USE = "bytes_in_use"
# api and experiment: Names/<tid> the thread names, Threads/<tid>/API the call stack,
# Threads/<tid>/node the op running and Threads/<tid>/cpu the CPU it runs on.
NAMES = "Names"
API = "API"
RUNNING_NODE = "node"
CPU = "cpu"

# ranks: Ranks/<rank> the seq of the collective the rank last arrived at (one row per rank).
RANKS = "Ranks"

# State values read back: a GPU queue with nothing running.
IDLE = "idle"


def names() -> dict[str, str]:
    """Every name above by its constant's name (DEVICES -> "Devices"), as they are now."""
    return {key: value for key, value in globals().items() if key.isupper() and isinstance(value, str)}
