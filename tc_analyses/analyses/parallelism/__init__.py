"""Inter-operator parallelism: Nimble-style stream assignment and its predicted speedup.

Nimble (Kwon et al., NeurIPS 2020) runs the independent ops of one step concurrently on several
GPU streams. Its stream assignment, reproduced here on the computation graph of a trace:

1. the DAG of the ops of one device: for a GPU trace, the ops that launched GPU work, each
   weighted by the mean GPU time of the kernels, copies and memsets it launched; for a CPU trace,
   the ops of that device weighted by their own mean durations (the lanes are then inter-op
   threads). Ops left out are contracted: their predecessors feed their successors directly;
2. its transitive reduction (the minimum equivalent graph);
3. the bipartite graph ``u_out -> v_in`` of the reduced edges and a maximum matching of it
   (Hopcroft-Karp); a matched edge ``u -> v`` puts ``v`` right after ``u`` on ``u``'s lane, so
   the matching cuts the DAG into ``n - |matching|`` chains, each a path of the reduced DAG;
4. one lane per chain; with more chains than ``max_streams``, chains are merged greedily
   (heaviest first onto the least loaded lane) and each lane runs its ops in the recorded order;
5. each reduced edge between two lanes is a synchronisation (``cudaEventRecord`` after the
   producer, ``cudaStreamWaitEvent`` before the consumer); after a merge, syncs implied by lane
   order and other syncs are dropped (vector clocks).

The prediction is **modelled**: the placement simulator runs the plan with one "device" per lane,
every op costing its measured mean on every lane and each sync ``sync_ns``. Lanes are independent
processors there, so contention for SMs, memory bandwidth or cores is not modelled and the
speedup is an upper bound. The baseline is one lane in the recorded order (the sum of the work).
"""

from __future__ import annotations

from tc_analyses.analyses.parallelism.gpu import gpu_work
from tc_analyses.analyses.parallelism.plan import plan_placement, plan_streams, plan_trace
from tc_analyses.analyses.parallelism.result import (DEFAULT_GPU_STREAMS, DEFAULT_SYNC_NS, STREAM, THREAD,
                                                     LaneSummary, PlannedOp, PlannedOps, StreamPlan, SyncEdge)
from tc_analyses.analyses import data_loading, machine_load
from tc_analyses.analyses.result import Finding, Inputs, Options, Result


__all__ = ["DEFAULT_GPU_STREAMS", "DEFAULT_SYNC_NS", "STREAM", "THREAD", "LaneSummary",
           "PlannedOp", "PlannedOps", "StreamPlan", "SyncEdge", "gpu_work", "plan_placement", "plan_streams", "plan_trace", "run"]


def run(inputs: Inputs, options: Options) -> Result:
    """The stream (GPU) or thread (CPU) plan of the trace's ops: ``options["device"]``,
    ``["max_streams"]`` and ``["sync_ns"]`` as :func:`plan_trace` takes them (None = default)."""
    # A GPU plan needs the networkx graph (the other sections share it); a CPU plan reads the columns.
    graph = inputs.graph if inputs.activity.gpu else inputs.graph_table
    plan = plan_trace(inputs.trace, device=options["device"], max_streams=options["max_streams"],
                      sync_ns=options["sync_ns"], graph=graph, activity=inputs.activity)
    findings = plan.findings
    if (busy := machine_load.busy_notice(inputs.trace.metadata.env)) is not None:
        findings = findings + (Finding("busy_machine", 0, busy),)
    loading = data_loading.of_job(inputs.path, inputs.activity)
    if loading is not None:  # a plan that ignores a loader-bound step is a wrong plan: say it beside
        findings = findings + (Finding("data_loading", loading.wait_ns, loading.text()),)
    return Result("parallelism", plan.source, plan, findings)
