"""Cost models: analytic FLOPs and bytes per op, transfer fits, and :func:`build_problem`.

A task costs its measured median on the device where it ran (``CostSource.MEASURED``) and on any
other listed device of the same model (``CostSource.IDENTICAL``); elsewhere
``max(flops / peak, bytes / bandwidth) + launch`` (``CostSource.MODELLED``), a roofline with the
device's launch/dispatch constant (:mod:`.devices`). Views cost the launch alone. An op the table
does not know costs at least its measured time scaled by the two devices' peak FLOP ratio
(``CostSource.SCALED``), never its bytes alone; reports list such ops (:func:`unmodelled_ops`).

Transfers between two devices are ``a * bytes + b``, least-squares fitted to the trace's
``dfc:memcpy_begin/end`` pairs when a device pair shows at least two distinct sizes, else the
link spec of :func:`.devices.default_link`; ``Link.source`` says which.

Per device, ``PlacementProblem.launch_overhead_ns`` holds the mean host gap between consecutive
ops measured in the trace (:func:`host_gaps`): Python and framework time that the op durations
do not contain, which every op pays again wherever it is placed. Devices absent from the trace
get the mean of the measured gaps.
"""

from __future__ import annotations

import ast
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity, read_activity
from tc_analyses.model.intervals import union_ns
from tc_analyses.perf.devices import default_link, spec, spec_of
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, PlacementProblem, Task
from tc_analyses.perf.syncs import price_syncs
from tc_analyses.reader.fast import DfcTrace
from tracer.schema import NO_STEP

if TYPE_CHECKING:  # only for annotations: networkx loads when a graph is built
    import networkx as nx

ITEMSIZE = {"float64": 8, "double": 8, "float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
            "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "short": 2, "int8": 1, "uint8": 1,
            "bool": 1, "complex64": 8, "complex128": 16}
DEFAULT_ITEMSIZE = 4


# ---------------------------------------------------------------------------------------------
# Shapes and dtypes from dfc:node_args text.

def parse_shapes(text: str) -> list[list[int]]:
    """``"[[8, 3, 32, 32], [64], []]"`` -> ``[[8, 3, 32, 32], [64], []]``; unparsable -> ``[]``."""
    try:
        value = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError):
        return []
    if not isinstance(value, list):
        return []
    out: list[list[int]] = []
    for shape in value:
        if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            out.append(shape)
        else:
            out.append([])  # a scalar, a list of tensors or a non-tensor argument
    return out


def parse_dtypes(text: str) -> list[str]:
    return [d.strip() for d in text.split(",")] if text else []


@dataclass(frozen=True)
class Arg:
    shape: list[int]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.shape else 0

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE.get(self.dtype, DEFAULT_ITEMSIZE)

    @property
    def is_tensor(self) -> bool:
        return bool(self.shape) or bool(self.dtype)


def parse_args(shapes: str, dtypes: str) -> list[Arg]:
    s, d = parse_shapes(shapes), parse_dtypes(dtypes)
    return [Arg(shape, d[i] if i < len(d) else "") for i, shape in enumerate(s)]


# ---------------------------------------------------------------------------------------------
# FLOPs per op family. Each estimator takes the input args (and the output bytes when the graph
# knows them) and returns (flops, output elements); bytes = inputs read + output written.

Estimate = Callable[[list[Arg], int | None], tuple[float, int]]


def _out_elems(args: list[Arg], out_bytes: int | None, default: int) -> int:
    if out_bytes:
        return out_bytes // ITEMSIZE.get(args[0].dtype if args else "", DEFAULT_ITEMSIZE)
    return default


def _conv(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
    """[x (N, C, *S), w (K, C/g, *R), ...]: 2 * out elems * C/g * prod(R). Without the output size
    (strides are not recorded), stride 1 and size-preserving padding are assumed."""
    x, w = args[0].shape, args[1].shape
    if len(x) < 3 or len(w) < 3:
        return 0.0, 0
    out = _out_elems(args, out_bytes, x[0] * w[0] * math.prod(x[2:]))
    return 2.0 * out * math.prod(w[1:]), out


def _conv_backward(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
    """[grad_out, x, w, ...]: grad input + grad weight, each as costly as the forward."""
    g, x, w = args[0].shape, args[1].shape, args[2].shape
    if not g or len(w) < 3:
        return 0.0, 0
    return 2 * 2.0 * math.prod(g) * math.prod(w[1:]), math.prod(x) + math.prod(w)


def _linear(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
    """[x (..., in), w (out, in), bias]: 2 * rows * in * out (+ rows * out for the bias)."""
    x, w = args[0].shape, args[1].shape
    if not x or len(w) != 2:
        return 0.0, 0
    rows = math.prod(x[:-1])
    out = rows * w[0]
    bias = out if len(args) > 2 and args[2].shape else 0
    return 2.0 * rows * x[-1] * w[0] + bias, out


def _matmul(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
    """mm / matmul / bmm: [a (..., m, k), b (..., k, n)] -> 2 * batch * m * k * n; vectors have m or n = 1."""
    a, b = list(args[0].shape), list(args[1].shape)
    if not a or not b:
        return 0.0, 0
    if len(a) == 1:
        a = [1, a[0]]
    if len(b) == 1:
        b = [b[0], 1]
    m, k, n = a[-2], a[-1], b[-1]
    batch = max(math.prod(a[:-2]), math.prod(b[:-2]))
    return 2.0 * batch * m * k * n, batch * m * n


def _addmm(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
    """addmm / baddbmm: [bias, a, b]: the product plus one add per output element."""
    flops, out = _matmul(args[1:], out_bytes)
    return flops + out, out


def _per_element(factor: float) -> Estimate:
    """Elementwise/reduction/norm ops: `factor` FLOPs per element of the largest input."""
    def estimate(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
        n = max((a.numel for a in args), default=0)
        return factor * n, n
    return estimate


def _reduction(factor: float) -> Estimate:
    def estimate(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
        n = args[0].numel if args else 0
        return factor * n, _out_elems(args, out_bytes, 1)
    return estimate


def _pool(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
    """Each input element is read and compared/added about once (window overlap ignored)."""
    n = args[0].numel if args else 0
    x = args[0].shape if args else []
    default = math.prod(x[:2]) if len(x) > 2 else n  # adaptive pooling to 1x1 when the output is unknown
    return float(n), _out_elems(args, out_bytes, default)


def _embedding(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
    """[weight (V, D), indices]: a gather, no arithmetic; reads and writes indices * D elements."""
    w = args[0].shape
    idx = args[1].numel if len(args) > 1 else 0
    return 0.0, idx * (w[-1] if w else 1)


def _attention(args: list[Arg], out_bytes: int | None) -> tuple[float, int]:
    """Scaled dot-product attention, [q (..., L, E), k (..., S, E), v (..., S, Ev)]: the two matmuls
    (Q K^T and P V, 2 FLOPs per multiply-add) plus the softmax (5 per score)."""
    q, k, v = args[0].shape, args[1].shape, args[2].shape
    batch, length, embed, source, value = math.prod(q[:-2]), q[-2], q[-1], k[-2], v[-1]
    scores = batch * length * source
    return 2.0 * scores * embed + 2.0 * scores * value + 5.0 * scores, batch * length * value


# The ops that take q, k, v as (..., L, E); the kernels _flash_attention_forward and
# _efficient_attention_forward take (B, L, H, E) and are left without a model (they are flagged).
ATTENTION = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_cudnn_attention")

ELEMENTWISE = {  # FLOPs per element
    "add": 1, "sub": 1, "mul": 1, "div": 1, "neg": 1, "abs": 1, "relu": 1, "threshold": 1,
    "threshold_backward": 1, "clamp": 1, "hardtanh": 1, "leaky_relu": 2, "where": 1, "pow": 2,
    "sqrt": 4, "rsqrt": 4, "exp": 4, "log": 4, "sigmoid": 4, "tanh": 4, "silu": 5, "gelu": 8,
    "gelu_backward": 10, "sigmoid_backward": 3, "tanh_backward": 3, "dropout": 2, "fill": 0,
    "copy": 0, "to": 0, "clone": 0, "zero": 0, "ones_like": 0, "zeros_like": 0, "addcmul": 2,
    "addcdiv": 2, "lerp": 3,
}
REDUCTIONS = {"sum": 1, "mean": 1, "max": 1, "min": 1, "amax": 1, "norm": 2, "var": 3, "std": 4,
              "softmax": 5, "_softmax": 5, "log_softmax": 6, "_log_softmax": 6, "cross_entropy": 8,
              "nll_loss": 1, "mse_loss": 3}
NORMS = {"batch_norm": 8, "native_batch_norm": 8, "_batch_norm_impl_index": 8, "layer_norm": 8,
         "native_layer_norm": 8, "group_norm": 8, "native_group_norm": 8, "instance_norm": 8,
         "native_batch_norm_backward": 12, "native_layer_norm_backward": 12}

OPS: dict[str, Estimate] = {
    **{op: _conv for op in ("conv1d", "conv2d", "conv3d", "convolution", "_convolution",
                            "cudnn_convolution", "mkldnn_convolution", "conv_transpose2d")},
    "convolution_backward": _conv_backward,
    "linear": _linear,
    **{op: _matmul for op in ("mm", "matmul", "bmm", "dot", "mv")},
    **{op: _addmm for op in ("addmm", "baddbmm", "addmv")},
    **{op: _per_element(f) for op, f in ELEMENTWISE.items()},
    **{op: _reduction(f) for op, f in REDUCTIONS.items()},
    **{op: _per_element(f) for op, f in NORMS.items()},
    **{op: _pool for op in ("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "max_pool2d_with_indices",
                            "adaptive_max_pool2d", "max_pool1d", "avg_pool1d")},
    "embedding": _embedding,
    **{op: _attention for op in ATTENTION},
}


# Ops that make a view or only change metadata: no arithmetic and no data moved. They stay with
# their base tensor (:mod:`tc_analyses.perf.tied`).
VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "expand_as", "detach", "alias",
    "squeeze", "unsqueeze", "select", "slice", "narrow", "as_strided", "unfold", "split", "split_with_sizes",
    "chunk", "unbind", "flatten", "unflatten", "view_as", "numpy_T", "lift_fresh", "_reshape_alias",
    "diagonal", "movedim", "swapaxes", "real", "imag", "view_as_real", "view_as_complex",
})


def is_view(op: str) -> bool:
    return op_key(op) in VIEW_OPS


def is_inplace(op: str) -> bool:
    """``aten::add_`` writes into its first input (``aten::__iand__`` is not in place)."""
    base = op.rsplit("::", 1)[-1].split(".", 1)[0]
    return base.endswith("_") and not base.endswith("__")


def op_key(op: str) -> str:
    """``aten::add_.Tensor`` -> ``add``: namespace, overload and in-place suffix dropped."""
    base = op.rsplit("::", 1)[-1].split(".", 1)[0]
    return base[:-1] if base.endswith("_") and not base.endswith("__") else base


@dataclass(frozen=True)
class OpEstimate:
    flops: float
    bytes: int
    dtype: str
    known: bool  # False: the op is not in the table, bytes-only estimate


def estimate_op(op: str, shapes: str, dtypes: str, out_bytes: int | None = None) -> OpEstimate:
    """FLOPs and bytes moved by one execution of `op` with the given ``node_args`` text."""
    if is_view(op):
        return OpEstimate(0.0, 0, "float32", True)  # metadata only: the dispatch is all it costs
    args = [a for a in parse_args(shapes, dtypes) if a.is_tensor]
    tensors = [a for a in args if a.shape]
    dtype = next((a.dtype for a in tensors if a.dtype.startswith(("float", "bfloat", "half"))),
                 tensors[0].dtype if tensors else "float32")
    itemsize = ITEMSIZE.get(dtype, DEFAULT_ITEMSIZE)
    in_bytes = sum(a.nbytes for a in tensors)
    estimator = OPS.get(op_key(op))
    if estimator is None or not args:
        out = out_bytes if out_bytes is not None else max((a.nbytes for a in tensors), default=0)
        return OpEstimate(0.0, in_bytes + out, dtype, False)
    try:
        flops, out_elems = estimator(args, out_bytes)
    except IndexError:  # fewer inputs than the op family expects
        flops, out_elems = 0.0, 0
    out = out_bytes if out_bytes is not None else out_elems * itemsize
    if op_key(op) == "embedding":  # a gather reads only the rows it copies
        in_bytes = (args[1].nbytes if len(args) > 1 else 0) + out_elems * itemsize
    return OpEstimate(flops, in_bytes + out, dtype, True)


def modelled_ns(est: OpEstimate, device: Device) -> int:
    """Roofline time of `est` on `device`, plus the device's launch/dispatch constant."""
    s = spec_of(device)
    compute = est.flops / s.peak_flops(est.dtype) * 1e9
    memory = est.bytes / s.mem_bandwidth * 1e9
    return int(round(max(compute, memory))) + s.launch_ns


# ---------------------------------------------------------------------------------------------
# Transfers.

def fit_link(sizes: list[int], durations: list[int]) -> Link | None:
    """Least-squares ``duration = a * bytes + b``; None with fewer than 2 sizes or a ≤ 0."""
    if len(set(sizes)) < 2:
        return None
    x = np.asarray(sizes, dtype=float)
    y = np.asarray(durations, dtype=float)
    (a, b), *_ = np.linalg.lstsq(np.column_stack([x, np.ones_like(x)]), y, rcond=None)
    if a <= 0:
        return None
    return Link(max(float(b), 0.0), 1.0 / float(a), f"fitted from {len(sizes)} copies in the trace")


def activity_of(trace: Any) -> Activity:
    """`trace` itself when it is an :class:`~tc_analyses.model.activity.Activity`, else its activity."""
    return trace if isinstance(trace, Activity) else read_activity(trace)


def observed_copies(trace: DfcTrace | Activity) -> dict[tuple[str, str], tuple[list[int], list[int]]]:
    """(src device name, dst device name) -> (bytes, durations) of the trace's copies of known size.

    `trace` is a trace or its :class:`~tc_analyses.model.activity.Activity` (the paired copies).
    """
    out: dict[tuple[str, str], tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for op in activity_of(trace).gpu:
        if op.kind == "memcpy" and op.bytes > 0:
            sizes, durations = out[(op.src_device, op.dst_device)]
            sizes.append(op.bytes)
            durations.append(op.duration)
    return dict(out)


# ---------------------------------------------------------------------------------------------
# Step timing measured in the trace (also used by the simulator's replay).

@dataclass
class StepTiming:
    step_ns: float  # mean over steps of last node_end - first node_begin
    steps: int
    gaps_ns: dict[str, float]  # device -> mean host gap per op
    start_offset_ns: dict[int, float]  # graph node -> mean begin, relative to its step's first begin
    edge_delay_ns: dict[tuple[int, int], float]  # cross-device graph edge -> mean consumer begin - producer end
    runs_per_step: dict[int, float]  # graph node -> executions per step (< 1 for ops of some steps only)
    node_ns: dict[int, float] = field(default_factory=dict)  # graph node -> mean duration in these steps
    # The threads: graph node -> its lane "device#tid" (the thread that ran most of its executions),
    # and per lane the mean wait of an op between being ready (its lane free, its inputs made) and starting.
    node_lane: dict[int, str] = field(default_factory=dict)
    lane_gaps_ns: dict[str, float] = field(default_factory=dict)


def measure_steps(trace: DfcTrace | Activity, g: nx.DiGraph, steps: Collection[int] | None = None) -> StepTiming:
    """Step time, host gaps and actual timings of `g`'s nodes, from the trace `g` was built from.

    `trace` is that trace or its :class:`~tc_analyses.model.activity.Activity` (the paired node runs).
    The host gap of a device is the time inside the per-step span of its ops during which none of
    them runs, summed over steps and divided by the number of its op executions in those steps.
    Replaying the ops serially with that gap added to each, each op weighted by the fraction of
    steps it ran in (``runs_per_step``: the first step of a torch training loop runs ops later
    steps do not), reproduces the device's mean span exactly.

    `steps` restricts all of it to those step numbers (calibration or held-out steps).
    """
    execution_nodes = g.graph[K.EXECUTION_NODES]
    nodes = activity_of(trace).nodes
    use_no_step = {n.step for n in nodes} == {NO_STEP}
    runs: dict[int, list[tuple[int, int, int, str]]] = defaultdict(list)  # step -> (begin, end, node, device)
    lane_of_run: dict[tuple[int, int], str] = {}  # (step, node) -> lane
    lane_counts: dict[int, Counter[str]] = defaultdict(Counter)
    for n in nodes:
        if (n.step == NO_STEP and not use_no_step) or n.node_id not in execution_nodes:
            continue
        if steps is not None and n.step not in steps:
            continue
        node = execution_nodes[n.node_id]
        runs[n.step].append((n.start, n.end, node, n.device))
        lane = f"{n.device}#{n.tid}"
        lane_of_run.setdefault((n.step, node), lane)
        lane_counts[node][lane] += 1
    spans: list[int] = []
    idle_sum: dict[str, int] = defaultdict(int)
    ops_on: dict[str, int] = defaultdict(int)
    node_runs: dict[int, int] = defaultdict(int)
    busy: dict[int, int] = defaultdict(int)
    offsets: dict[int, list[int]] = defaultdict(list)
    when: dict[tuple[int, int], tuple[int, int]] = {}  # (step, node) -> (begin, end)
    for step, rows in runs.items():
        rows.sort()
        first = rows[0][0]
        spans.append(max(r[1] for r in rows) - first)
        by_device: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        for b, e, node, dev in rows:
            offsets[node].append(b - first)
            node_runs[node] += 1
            busy[node] += e - b
            when.setdefault((step, node), (b, e))
            by_device[dev][0].append(b)
            by_device[dev][1].append(e)
        for dev, (begins, ends) in by_device.items():
            # idle = the device's span (first begin to last end) less the union of its ops
            idle_sum[dev] += max(ends) - begins[0] - union_ns(begins, ends)
            ops_on[dev] += len(begins)
    lane_waits: dict[str, list[int]] = defaultdict(list)
    for step, rows in runs.items():
        lane_free: dict[str, int] = {}
        for b, e, node, _dev in rows:  # sorted by begin above
            lane = lane_of_run[(step, node)]
            ready = max([lane_free.get(lane, b)] + [when[(step, p)][1] for p in g.predecessors(node)
                                                    if (step, p) in when and when[(step, p)][1] <= b])
            lane_waits[lane].append(max(0, b - ready))
            lane_free[lane] = max(lane_free.get(lane, e), e)
    delays: dict[tuple[int, int], float] = {}
    for u, v, attrs in g.edges(data=True):
        if attrs.get(K.SRC_DEVICE) == attrs.get(K.DST_DEVICE):
            continue
        ds = [max(0, when[(s, v)][0] - when[(s, u)][1]) for s in runs if (s, u) in when and (s, v) in when]
        if ds:
            delays[(u, v)] = sum(ds) / len(ds)
    return StepTiming(
        step_ns=sum(spans) / len(spans) if spans else 0.0, steps=len(spans),
        gaps_ns={d: idle_sum[d] / ops_on[d] for d in ops_on},
        start_offset_ns={n: sum(v) / len(v) for n, v in offsets.items()},
        edge_delay_ns=delays,
        runs_per_step={n: c / len(spans) for n, c in node_runs.items()},
        node_ns={n: busy[n] / c for n, c in node_runs.items()},
        node_lane={n: counts.most_common(1)[0][0] for n, counts in lane_counts.items()},
        lane_gaps_ns={lane: sum(w) / len(w) for lane, w in lane_waits.items()})


def host_gaps(trace: DfcTrace | Activity, g: nx.DiGraph) -> dict[str, float]:
    return measure_steps(trace, g).gaps_ns


def trace_of(g: nx.DiGraph) -> DfcTrace | None:
    """The trace `g` was built from (its ``source``), read again; None when that path is gone."""
    source = g.graph.get(K.SOURCE)
    if not source or not Path(source).exists():
        return None
    from tc_analyses.reader import read_trace  # noqa: PLC0415 - only when the caller gave no trace
    return read_trace(source)


# ---------------------------------------------------------------------------------------------
# The problem.

def task_memory(g: nx.DiGraph, node: int) -> int:
    """Output bytes a task keeps resident: the sum of the distinct sizes on its out-edges (edges to
    several consumers of one tensor carry the same size; counting each size once approximates it)."""
    return sum({int(a.get(K.BYTES, 0)) for _, _, a in g.out_edges(node, data=True)})


def build_problem(graph: nx.DiGraph, devices: list[Device], links: dict[tuple[str, str], Link] | None = None,
                  trace: DfcTrace | Activity | None = None) -> PlacementProblem:
    """The placement problem of a computation graph on `devices`.

    `links` overrides transfer models per (src, dst) pair. `trace` (default: re-read from the
    graph's ``source`` when that path exists), or its activity, supplies copy timings and host gaps.
    """
    if trace is None:
        trace = trace_of(graph)
    activity = activity_of(trace) if trace is not None else None
    names = [d.name for d in devices]
    models = {d.name: d.model for d in devices}
    tasks: list[Task] = []
    costs: dict[tuple[int, str], Cost] = {}
    for node in sorted(graph.nodes):
        attrs = graph.nodes[node]
        op, ran_on = attrs.get(K.OP, ""), attrs.get(K.DEVICE)
        memory = task_memory(graph, node)
        tasks.append(Task(node, f"{attrs.get(K.NAME, '')} ({op})", op, ran_on, memory))
        est = estimate_op(op, attrs.get(K.INPUT_SHAPES, ""), attrs.get(K.INPUT_DTYPES, ""), memory or None)
        measured = attrs.get(K.MEASURED, {}).get(ran_on, False)
        ran_model = models.get(ran_on) if measured and ran_on is not None else None
        typical = int(attrs.get(K.MEDIAN_NS) or attrs.get(K.MEAN_NS, 0))  # the median: robust to a preempted run
        for device in devices:
            if device.name == ran_on and measured:
                costs[(node, device.name)] = Cost(typical, CostSource.MEASURED)
            elif ran_model is not None and device.model == ran_model:
                # Same hardware model (two CPU lanes, two GPUs of one kind): the measured
                # time carries over, which a roofline of datasheet peaks would not reproduce.
                costs[(node, device.name)] = Cost(typical, CostSource.IDENTICAL)
            elif not est.known and measured and ran_on in models:
                # No FLOP model (a fused layer, lstm): bytes alone would cost it near zero. Never
                # less than its measured time scaled by the two devices' peak ratio.
                scaled = typical * spec(models[ran_on]).peak_flops(est.dtype) / spec_of(device).peak_flops(est.dtype)
                costs[(node, device.name)] = Cost(max(modelled_ns(est, device), int(round(scaled))), CostSource.SCALED)
            else:
                costs[(node, device.name)] = Cost(modelled_ns(est, device), CostSource.MODELLED)
    edges = {(u, v): int(a.get(K.BYTES, 0)) for u, v, a in graph.edges(data=True)}

    copies = observed_copies(activity) if activity is not None else {}
    problem_links: dict[tuple[str, str], Link] = {}
    for a in devices:
        for b in devices:
            if a.name == b.name:
                continue
            key = (a.name, b.name)
            if links and key in links:
                problem_links[key] = links[key]
                continue
            fitted = fit_link(*copies[key]) if key in copies else None
            problem_links[key] = fitted or default_link(a, b)

    blocking = price_syncs(graph, devices, costs, problem_links, lambda node: task_memory(graph, node))
    carried = carried_edges(graph)
    overhead: dict[str, int] = {}
    host: dict[str, int] = {}
    if activity is not None:
        gaps = host_gaps(activity, graph)
        mean_gap = sum(gaps.values()) / len(gaps) if gaps else 0.0
        overhead = {n: int(round(gaps.get(n, mean_gap))) for n in names}
        host = host_shares(graph, devices, overhead)
    return PlacementProblem(tasks, list(devices), costs, edges, problem_links, overhead, host_ns=host,
                            tied=base_tensor_ties(graph), carried=carried, external=external_inputs(graph, carried),
                            blocking=blocking)



def external_inputs(graph: nx.DiGraph, carried: dict[tuple[int, int], int]) -> dict[int, int]:
    """Per node, the bytes of its tensor inputs (from its recorded shapes) that no node of the step
    made: what it reads less what its in-edges and carried edges bring. Views read their base, which
    stays with them; nodes without shapes read nothing known."""
    brought: dict[int, int] = defaultdict(int)
    for _, v, attrs in graph.edges(data=True):
        brought[v] += int(attrs.get(K.BYTES, 0))
    for (_, v), nbytes in carried.items():
        brought[v] += nbytes
    out: dict[int, int] = {}
    for node, attrs in graph.nodes(data=True):
        if is_view(attrs.get(K.OP, "")):
            continue
        read = sum(a.nbytes for a in parse_args(attrs.get(K.INPUT_SHAPES, ""), attrs.get(K.INPUT_DTYPES, "")))
        if read > brought[node]:
            out[node] = read - brought[node]
    return out


def carried_edges(graph: nx.DiGraph) -> dict[tuple[int, int], int]:
    """The graph's cross-step edges as (producer, consumer) -> bytes per step."""
    out: dict[tuple[int, int], int] = {}
    for edge in graph.graph.get(K.CROSS_STEP_EDGES, []):
        key = (int(edge["src"]), int(edge["dst"]))
        if key[0] != key[1] and key[0] in graph and key[1] in graph:
            out[key] = max(out.get(key, 0), int(edge.get(K.BYTES, 0)))
    return out


def base_tensor_ties(graph: nx.DiGraph) -> dict[int, int]:
    """View or in-place node -> the producer of its base tensor, the in-edge carrying the most bytes
    (a view reads one tensor; an in-place op writes into its first input, usually the largest).
    Nodes without an in-edge in the step (a view of a parameter) are free."""
    tied: dict[int, int] = {}
    for node, attrs in graph.nodes(data=True):
        op = attrs.get(K.OP, "")
        if not (is_view(op) or is_inplace(op)):
            continue
        inputs = sorted(graph.in_edges(node, data=True), key=lambda e: (-int(e[2].get(K.BYTES, 0)), e[0]))
        if inputs:
            tied[node] = inputs[0][0]
    return tied


def host_shares(graph: nx.DiGraph, devices: list[Device], overhead: dict[str, int]) -> dict[str, int]:
    """Per device, the host-thread time of one task: the measured gap between ops (Python between
    them), plus the dispatch inside an op's own span, plus the launch call on a GPU. Every op issued
    from one Python thread, or under one GIL, pays it in turn. The dispatch is the median duration of
    the trace's views (they do no work: their span is dispatch alone), else its shortest op."""
    measured = [(int(a.get(K.MEDIAN_NS) or a.get(K.MEAN_NS, 0)), is_view(a.get(K.OP, "")))
                for _, a in graph.nodes(data=True) if any(a.get(K.MEASURED, {}).values())]
    views = [ns for ns, view in measured if view and ns > 0]
    floor = int(statistics.median(views)) if views else min((ns for ns, _ in measured if ns > 0), default=0)
    return {d.name: overhead.get(d.name, 0) + floor + (spec_of(d).launch_ns if spec_of(d).kind == "gpu" else 0)
            for d in devices}


def unmodelled_ops(graph: nx.DiGraph) -> dict[str, int]:
    """op -> graph nodes of ops that are neither views nor in the FLOP table (costed SCALED elsewhere)."""
    found: dict[str, int] = defaultdict(int)
    for _, attrs in graph.nodes(data=True):
        op = attrs.get(K.OP, "")
        if op and not is_view(op) and op_key(op) not in OPS:
            found[op] += 1
    return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))
