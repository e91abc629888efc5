#!/bin/bash
# Run on a GPU machine from the repository root (one short script: the lease is 15 minutes).
# Records what tests/data/traces/cuda/h200-eager and h200-compiled hold, into $1 (default
# /tmp/dfcompass-gpu2; with $OUT set, the archive and the log are copied there):
#  * eager/NAME-cpu, eager/NAME-cuda: tests/gpu_programs/eager_programs.py on both devices (issue 33:
#    predictions for the card made from the CPU trace, checked against the CUDA run);
#  * compiled/NAME: tests/torch_programs/compiled.py on cuda through `dfcompass record`, with
#    PyTorch's execution trace observer in the same run (issue 32: Triton kernels on their streams,
#    edges checked against the observer). Needs python3 with torch (CUDA), numpy, click.
# Second argument "compiled": the compiled programs only (and reduce-overhead for 6 steps too);
# "replay": reduce-overhead only (3 and 6 steps).
out=${1:-/tmp/dfcompass-gpu2}
only=${2:-all}
rm -rf "$out"; mkdir -p "$out/eager" "$out/compiled"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, sys, os; print(sys.version.split()[0], torch.__version__, torch.version.cuda, os.cpu_count())'
  [ "$only" != all ] || for name in convnet encoder recommender; do
    for device in cpu cuda; do
      timeout 120 python3 tests/gpu_programs/eager_programs.py $name $device "$out/eager/$name-$device" \
        || echo "eager $name $device failed: $?"
    done
  done
  specs=("cnn default 3" "transformer graph-break 3" "cnn reduce-overhead 3" "cnn reduce-overhead 6")
  [ "$only" != all ] || specs+=("transformer fullgraph 3")
  [ "$only" != replay ] || specs=("cnn reduce-overhead 3" "cnn reduce-overhead 6")
  for spec in "${specs[@]}"; do
    set -- $spec
    dir="$out/compiled/$1-$2"; [ "$3" = 3 ] || dir="$dir-$3"; mkdir -p "$dir"
    SECONDS=0
    timeout 150 python3 tests/torch_programs/compiled.py $1 $2 cuda $3 > "$dir/untraced.txt" 2>&1
    echo "compiled $1 $2 $3 untraced: exit $? in $SECONDS s"
    SECONDS=0
    DFCOMPASS_BENCH_ET="$dir/et.json" PYTHONPATH=$PWD/bench/realworld_shim:$PWD timeout 200 \
      python3 -m tc_analyses.cli record -o "$dir/job" -- python3 tests/torch_programs/compiled.py $1 $2 cuda $3 \
      > "$dir/record.txt" 2>&1
    echo "compiled $1 $2 $3 recorded: exit $? in $SECONDS s"
    tail -3 "$dir/record.txt"
  done
  du -sh "$out"/eager/* "$out"/compiled/*
} 2>&1 | tee "$out/log.txt"
gzip -f "$out"/compiled/*/et.json 2>/dev/null
tar -C "$out" -czf "$out/traces.tgz" eager compiled 2>/dev/null
ls -la "$out/traces.tgz"
[ -n "$OUT" ] && cp "$out/traces.tgz" "$out/log.txt" "$OUT/"
exit 0
