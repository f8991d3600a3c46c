#!/bin/sh
# gpu-check.sh [OUTDIR] - everything a GPU machine should run on a commit, in one go, with the
# logs in OUTDIR (default: $OUT, else ./gpu-check): the GPU test suite (pytest -m gpu), then the
# GPU bench (tools/bench/bench_nccl.py: GPU path, host path and Socket side by side, the model
# at 100/200/400 Gb/s, the targets). The build must exist (make all, with CUDA and NCCL).
# Prints the suite's summary and the bench's targets last; exits non-zero if either failed.
#   SUITE_S=300 BENCH_S=240 ROUNDS=2 tools/scripts/gpu-check.sh /tmp/gc
set -u
cd "$(dirname "$0")/../.."
DIR=${1:-${OUT:-gpu-check}}
mkdir -p "$DIR"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 SIMFABRIC_RESULTS="$DIR"
# The GPU path's own tests first, then NCCL's and PyTorch's, then the rest: a suite cut at
# SUITE_S still says the most.
first="test_20_gpu_path.py test_07_nccl_gpu.py test_14_nccl_faults.py"
(cd pytests && rest=$(ls test_*.py | grep -v -x -F "$(echo $first | tr ' ' '\n')") &&
	timeout "${SUITE_S:-300}" $PY -m pytest -m gpu -v -p no:cacheprovider -rfE \
	--junitxml="$DIR/gpu-suite.xml" $first $rest >"$DIR/gpu-suite.log" 2>&1)
suite=$?
timeout "${BENCH_S:-240}" $PY tools/bench/bench_nccl.py --rounds "${ROUNDS:-2}" \
	--json "$DIR/bench-nccl.json" >"$DIR/bench-nccl.log" 2>&1
bench=$?
echo "== GPU suite (exit $suite; 124: cut at ${SUITE_S:-300} s)"
grep -E "^(FAILED|ERROR)|passed|failed" "$DIR/gpu-suite.log" | tail -15
echo "== bench (exit $bench)"
sed -n '/^Targets/,$p' "$DIR/bench-nccl.log"
[ "$suite" = 0 ] && [ "$bench" = 0 ]
