#!/bin/sh
# fuzz.sh [SECONDS] - build every sim/fuzz/fuzz_*.c with libFuzzer, ASan and UBSan into
# build-fuzz/, then run each for SECONDS (default 20). Each harness #includes the .c it
# tests, so it builds on its own. A crash fails the run: its reproducer lands in
# build-fuzz/<name>.d/, the log in build-fuzz/<name>.log; the corpus grows in
# build-fuzz/<name>.corpus/ from run to run.
#   CLANG=clang-14 tools/scripts/fuzz.sh 60                        use another clang
#   build-fuzz/fuzz_ctl build-fuzz/fuzz_ctl.d/crash-...    replay a crash
set -eu
SECONDS_EACH=${1:-20}
CLANG=${CLANG:-}
if [ -z "$CLANG" ]; then
	for c in clang clang-14 clang-15 clang-16 clang-17 clang-18; do
		command -v "$c" >/dev/null 2>&1 && { CLANG=$c; break; }
	done
fi
[ -n "$CLANG" ] || { echo "fuzz: clang not found (apt-get install clang libclang-rt-dev)" >&2; exit 1; }
cd "$(dirname "$0")/../.."
OUT=build-fuzz
mkdir -p "$OUT"
FLAGS="-std=c11 -D_GNU_SOURCE -I. -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
	-fno-sanitize-recover=undefined -Wall -Wextra -Wno-unused-parameter -Wno-unused-function"

# A harness names the libraries it needs (beyond libm) on a comment line
# " * fuzz-libs: ..."; its seeds can come from seed_<name>, its dictionary
# from sim/fuzz/<name>.dict.

# A few seeds for the ctl parser: real requests and replies, and near-misses.
seed_ctl() {
	d=$1
	mkdir -p "$d"
	printf '\000\001op=ping\n\n' >"$d/ping"
	printf '\001\002op=hello\nnode=n0\npid=4242\nversion=1\nclient=plugin\n\n' >"$d/hello"
	printf '\002\003op=listen\nlistener=0x1f\nnic=0\n\nop=connect\nlistener=0x1f\nnic=0\n\n' >"$d/listen"
	printf '\003\004chan=0x1\nshm_bytes=2105344\nfd=1\nerrno=0\n\n' >"$d/reply"
	printf '\004\005error=2:1: bad\nerrno=22\n\n' >"$d/error"
	printf '\005\006op=x\r\n\n' >"$d/crlf"
	printf '\006\007\n' >"$d/empty"
}

status=0
for src in sim/fuzz/fuzz_*.c; do
	[ -e "$src" ] || continue
	name=$(basename "$src" .c)
	bin=$OUT/$name
	echo "  FUZZ-CC $src"
	libs=$(sed -n 's/^ \* fuzz-libs: //p' "$src")
	# shellcheck disable=SC2086
	$CLANG $FLAGS "$src" -o "$bin" $libs -lm
	work=$OUT/$name.d
	corpus=$OUT/$name.corpus
	mkdir -p "$work" "$corpus"
	[ "$name" = fuzz_ctl ] && seed_ctl "$corpus"
	[ "$name" = fuzz_scenario ] && cp scenarios/*.yaml "$corpus"/ &&
		{ cat scenarios/leafspine-8node-2to1.yaml
		  printf 'placement: {node0..node3: 1, node4: 0, node7: 2}\n'; } >"$corpus"/placement.yaml
	dict=
	[ -e "sim/fuzz/$name.dict" ] && dict="-dict=../../sim/fuzz/$name.dict"
	echo "  FUZZ    $name for ${SECONDS_EACH}s"
	# shellcheck disable=SC2086
	if ! (cd "$work" && "../$name" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
		-max_len=140000 $dict ../"$name.corpus" >"../$name.log" 2>&1); then
		echo "fuzz: $name failed; see $work/ and $OUT/$name.log:" >&2
		tail -n 40 "$OUT/$name.log" >&2
		status=1
		continue
	fi
	# Executions, then the edges and features covered and the corpus at the end (DONE line).
	grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$OUT/$name.log" | tr '\n' ' '
	done_line=$(sed -n 's/^#[0-9]*[[:space:]]*DONE[[:space:]]*\(cov: [0-9]* ft: [0-9]* corp: [^ ]*\).*/\1/p' \
		"$OUT/$name.log")
	echo "$done_line"
done
exit $status
