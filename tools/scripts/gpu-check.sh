#!/bin/sh
# gpu-check.sh [OUTDIR] - everything a GPU machine should run on a commit, in one go, with the
# logs in OUTDIR (default: $OUT, else ./gpu-check): the GPU test suite (pytest -m gpu), then how
# many small copies a second this GPU runs under MPS from 1 and 4 processes, each mode of
# build/simfabric-copy-rate (docs/gpu-path.md, "Why LL is slow at 4 ranks"; COPY_S=0 skips it),
# then the GPU bench (tools/bench/bench_nccl.py: GPU path, host path and Socket side by side,
# the model at 100/200/400 Gb/s, the targets). The build must exist (make all, with CUDA and
# NCCL).
# Prints the suite's summary and the bench's targets last; exits non-zero if either failed.
#   SUITE_S=300 BENCH_S=240 ROUNDS=2 tools/scripts/gpu-check.sh /tmp/gc
# The whole suite takes longer than one device call (10 min; test_10's 18 shipped jobs alone
# about 7): FILES="test_10_jobs.py" runs only those files, in that order, and BENCH_S=0 skips
# the bench, so that two calls cover it.
set -u
cd "$(dirname "$0")/../.."
DIR=${1:-${OUT:-gpu-check}}
mkdir -p "$DIR"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 SIMFABRIC_RESULTS="$DIR"
# The GPU path's own tests first, then NCCL's and PyTorch's, then the rest: a suite cut at
# SUITE_S still says the most. One pytest per file, so that a file's failures are printed (with
# why) when it ends, not only at the end of a suite the deadline may cut; --durations: each
# test's time, which the recipes' table in scenarios/README.md quotes.
first="test_20_gpu_path.py test_07_nccl_gpu.py test_14_nccl_faults.py"
end=$(($(date +%s) + ${SUITE_S:-300}))
suite=0
(cd pytests && rest=$(ls test_*.py | grep -v -x -F "$(echo $first | tr ' ' '\n')") &&
	for f in ${FILES:-$first $rest}; do
		left=$((end - $(date +%s)))
		if [ "$left" -le 0 ]; then echo "CUT: $f not run (SUITE_S)"; continue; fi
		timeout "$left" $PY -m pytest -m gpu -v -p no:cacheprovider -rfE --tb=short --durations=0 --durations-min=1 "$f"
		rc=$?
		[ $rc = 0 ] || [ $rc = 5 ] || echo "EXIT: $f: pytest exited $rc"
	done >"$DIR/gpu-suite.log" 2>&1)
grep -q -E "^(EXIT|CUT): " "$DIR/gpu-suite.log" && suite=1
copies=0
if [ "${COPY_S:-120}" -gt 0 ]; then
	# under an MPS daemon of its own, as the ranks run; its pipe and log in OUTDIR
	(
		export CUDA_MPS_PIPE_DIRECTORY="$DIR/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$DIR/mps-log"
		mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
		mps=0
		nvidia-cuda-mps-control -d && mps=1
		echo "MPS: $([ $mps = 1 ] && echo started || echo 'not started: the copies run without it')"
		end=$(($(date +%s) + ${COPY_S:-120}))
		rc=0
		for m in h2d d2d sep gather pageable; do
			for n in 1 4; do
				left=$((end - $(date +%s)))
				if [ "$left" -le 0 ]; then echo "CUT: $m x $n not run (COPY_S)"; rc=1; continue; fi
				echo "-- $m, $n process(es)"
				timeout "$left" build/simfabric-copy-rate --procs "$n" --mode "$m" --count 2000 || rc=1
			done
		done
		[ $mps = 1 ] && echo quit | nvidia-cuda-mps-control
		exit $rc
	) >"$DIR/copy-rate.log" 2>&1
	copies=$?
fi
bench=0
if [ "${BENCH_S:-240}" -gt 0 ]; then
	timeout "${BENCH_S:-240}" $PY tools/bench/bench_nccl.py --rounds "${ROUNDS:-2}" \
		--json "$DIR/bench-nccl.json" >"$DIR/bench-nccl.log" 2>&1
	bench=$?
	# the transport's ceiling across two local hosts on this machine: what the 25 Gb/s
	# target across hosts (bench_nccl's last line) can reach here
	timeout 300 $PY tools/bench/bench_xhost.py --no-loss --json "$DIR/bench-xhost.json" \
		>"$DIR/bench-xhost.log" 2>&1
fi
echo "== GPU suite (exit $suite; 1: a file failed, or was cut at ${SUITE_S:-300} s)"
grep -E "^(FAILED|ERROR|EXIT|CUT)|passed|failed" "$DIR/gpu-suite.log" | tail -40
if [ "${COPY_S:-120}" -gt 0 ]; then
	echo "== small copies a second under MPS (exit $copies; simfabric-copy-rate)"
	grep -E "^(--|pid|CUT|MPS)|copy_rate" "$DIR/copy-rate.log"
fi
echo "== bench (exit $bench)"
[ "${BENCH_S:-240}" -gt 0 ] && sed -n '/^Targets/,$p' "$DIR/bench-nccl.log" &&
	sed -n "/transport's ceiling/,\$p" "$DIR/bench-xhost.log"
[ "$suite" = 0 ] && [ "$copies" = 0 ] && [ "$bench" = 0 ]
