#!/bin/sh
# SPDX-License-Identifier: MIT
# What simfabricd says about scenario files, as one diffable text: for each FILE, the exit
# status, stdout and stderr of --check and of --dump-fabric. A refactor that claims "behaviour
# unchanged" runs it before and after over scenarios/*.yaml and broken variants of them
# (tools/scripts/scn-variants.py) and diffs the two. Log lines lose their time stamp and pid,
# which change from run to run.
#   tools/scripts/scn-outputs.sh build/simfabricd FILE... > outputs.txt
set -u
daemon=$1
shift
for f in "$@"; do
	for mode in --check --dump-fabric; do
		"$daemon" $mode --scenario "$f" >/tmp/scn-outputs.$$.out 2>/tmp/scn-outputs.$$.err
		echo "== $f $mode rc=$?"
		cat /tmp/scn-outputs.$$.out
		echo "-- stderr"
		sed 's/^\[[^]]*\] simfabricd\[[0-9]*\]/[T] simfabricd[P]/' /tmp/scn-outputs.$$.err
	done
done
rm -f /tmp/scn-outputs.$$.out /tmp/scn-outputs.$$.err
