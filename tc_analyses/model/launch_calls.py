"""The runtime calls that launch GPU work, by vendor: what `launches` and `queues` pair with the
GPU operations they started (by correlation id).

HTA 0.6.1 knows the CUDA runtime's names only, so on a ROCm trace its launch statistics have no
rows; these lists also hold HIP's, the driver API's (Triton and torch.compile launch through
``cuLaunchKernel``) and MTIA's."""

from __future__ import annotations

KERNEL_LAUNCHES = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel", "cuLaunchKernelEx",
    "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel",
    "hipLaunchCooperativeKernel",
    "runFunction - job_prep_and_submit_for_execution",  # MTIA
})
MEMORY_LAUNCHES = frozenset({"cudaMemcpyAsync", "cudaMemsetAsync", "hipMemcpyAsync", "hipMemsetAsync",
                             "hipMemcpyWithStream"})
