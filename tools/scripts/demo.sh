#!/bin/sh
# demo.sh BUILD - the main job on the built-in default (ideal) fabric: 4 emulated nodes,
# one process each, exchanging real traffic through the plugin; then the fabric as the daemon saw it.
set -eu
B=${1:-build}
dir=$(mktemp -d /tmp/simfabric-demo.XXXXXX)
chmod 700 "$dir"
sock=$dir/ctl.sock
export SIMFABRIC_SOCKET=$sock
cleanup() {
	[ -n "${dpid:-}" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

echo "== starting simfabricd (ideal fabric) on $sock"
"$B/simfabricd" --socket "$sock" 2>"$dir/daemon.log" &
dpid=$!
tools/simfabric status --socket "$sock" >/dev/null 2>&1 || sleep 0.3
i=0
until tools/simfabric status --socket "$sock" >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -gt 100 ] && { cat "$dir/daemon.log"; exit 1; }
	sleep 0.05
done

echo "== 4 emulated nodes: connect, transfers 0 B .. 16 MiB, ring allreduce, all-to-all"
"$B/simfabric-harness" --plugin "$B/libnccl-net-simfabric.so" --nranks 4 \
	--tests props,connect,sizes,allreduce,alltoall --max-bytes 16777216 --json "$dir/demo.json"
echo
echo "== the fabric as simfabricd saw it (connections are closed now; counters stay)"
tools/simfabric status --socket "$sock"
echo
echo "== results: $dir/demo.json is removed on exit; run the harness yourself to keep one:"
echo "   $B/simfabricd --socket $sock &"
echo "   SIMFABRIC_SOCKET=$sock $B/simfabric-harness --plugin $B/libnccl-net-simfabric.so --nranks 4 --json out.json"

echo
echo "== the same 4 nodes over a modelled fabric: scenarios/roce-4node-jitter.yaml"
echo "   (100 Gb/s RoCE links, normal jitter; messages complete no earlier than the model says)"
kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
"$B/simfabricd" --socket "$sock" --scenario scenarios/roce-4node-jitter.yaml 2>"$dir/daemon2.log" &
dpid=$!
i=0
until tools/simfabric status --socket "$sock" >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -gt 100 ] && { cat "$dir/daemon2.log"; exit 1; }
	sleep 0.05
done
"$B/simfabric-harness" --plugin "$B/libnccl-net-simfabric.so" --nranks 4 \
	--tests sizes,allreduce --max-bytes 4194304 --json "$dir/demo2.json"
echo
tools/simfabric stats --socket "$sock"
