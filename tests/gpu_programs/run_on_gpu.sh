#!/bin/bash
# Run on a GPU machine from the repository root: records the CUDA test traces that
# tests/data/traces/cuda/ holds (h200-mlp, h200-dataloader-job, h200-edges) into $1 (default /tmp/dfcompass-gpu; with $OUT set, the archive
# and the log are copied there). Needs python3 with torch (CUDA) and numpy.
out=${1:-/tmp/dfcompass-gpu}
rm -rf "$out"; mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
  timeout 120 python3 tests/gpu_programs/cuda_workload.py "$out/workload" || echo "cuda_workload failed: $?"
  PYTHONPATH=$PWD/tracer/_autostart:$PWD DFCOMPASS_RECORD_DIR=$out/job timeout 60 python3 tests/gpu_programs/cuda_job.py \
    || echo "cuda_job failed: $?"
  timeout 120 python3 tests/gpu_programs/cuda_edges.py "$out/edges" || echo "cuda_edges failed: $?"
  ls -R "$out" | head -40
} 2>&1 | tee "$out/log.txt"
tar -C "$out" -czf "$out/traces.tgz" workload job edges 2>/dev/null
# On the lent machine, only these two come back.
[ -n "$OUT" ] && cp "$out/traces.tgz" "$out/log.txt" "$OUT/"
exit 0
