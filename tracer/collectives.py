"""The ``kind`` of a collective from the name of the c10d op that issued it.

PyTorch dispatches every collective and point-to-point op of ``torch.distributed`` as a ``c10d::``
op (``c10d::allreduce_``, ``c10d::_allgather_base_``, ``c10d::recv_any_source_``...), in the
profiler's event tree and in Kineto files alike. A dfcompass ``dfc:collective`` names the
operation, not the op: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``,
``broadcast``, ``barrier``, ``send``, ``recv``...
"""

from __future__ import annotations

C10D = "c10d::"

# c10d op names without the prefix and the underscores around them -> the collective kind.
_KINDS = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "allgather": "all_gather",
    "allgather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
    "allgather_coalesced": "all_gather", "reduce_scatter": "reduce_scatter",
    "reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "alltoall": "all_to_all", "alltoall_base": "all_to_all", "recv_any_source": "recv",
}

# Kineto's "dtype" of record_param_comms -> bytes per element.
DTYPE_BYTES = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8, "Short": 2,
               "Byte": 1, "Char": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16}


def collective_kind(op: str) -> str | None:
    """``'c10d::allreduce_'`` -> ``'all_reduce'``; None for an op that is not a c10d collective."""
    if not op.startswith(C10D):
        return None
    name = op[len(C10D):].strip("_")
    return _KINDS.get(name, name) or None
