#!/bin/bash
# The Meta-World throughput benchmarks on a 16-core machine: the sampler against envpool's C++ port.
# Run from the repository root with maml_rl, Meta-World, MuJoCo 4, gymnasium and envpool importable;
# the logs go to $OUT (default /tmp/out16).
set -u
S=$(date +%s)
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OUT=${OUT:-/tmp/out16}; mkdir -p $OUT
W=${W:-16}; R=${R:-3}
{ nproc; lscpu | grep -E "Model name|Thread|Core|Socket|MHz|L3"; git log --oneline -1 2>/dev/null;
  python3 -c "import sys, torch, numpy, mujoco, gymnasium, envpool, metaworld; print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__, 'mujoco', mujoco.__version__, 'gymnasium', gymnasium.__version__, 'envpool', envpool.__version__)"; } 2>&1 | tee $OUT/machine.txt
B=benchmarks/metaworld_throughput.py
run() { name=$1; lim=$2; shift 2; echo "== $name $(( $(date +%s) - S ))s: $*"; timeout $lim python3 $B "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; grep -A12 "^contender" $OUT/$name.log; }
run ml10 170 --scenarios ml10 --tasks 10 --batch-size 10 --workers $W --rounds $R --contenders sampler sampler-0 per-env envpool physics
run ml1 100 --scenarios push reach --tasks 10 --batch-size 2 --workers $W --rounds $R --contenders sampler sampler-0 envpool
run ml1x16 100 --scenarios push --tasks 10 --batch-size 16 --workers $W --rounds $R --contenders sampler sampler-0 envpool
run ml45 150 --scenarios ml45 --tasks 45 --batch-size 3 --workers $W --rounds 2 --contenders sampler per-env envpool
echo "done in $(( $(date +%s) - S ))s"
