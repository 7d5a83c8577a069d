#!/usr/bin/env bash
# Where a cube server's CPU goes under `cube bench`: perf samples the server process (pinned
# to its CPU, the load generator on another) for SECONDS, and each sample is classified by its
# call stack. Needs perf (Debian: linux-perf) and the peers of `make deps`.
#
#   cube/scripts/profile-server.sh [SECONDS] [extra cube bench flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-5}
shift || true
command -v perf >/dev/null || { echo "perf not found (Debian: apt-get install linux-perf)" >&2; exit 1; }
mkdir -p bin
go build -o bin/cube ./cube/cmd/cube
out=$(mktemp -d)
bench=""
cleanup() { [ -n "$bench" ] && kill "$bench" 2>/dev/null; wait 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT
# One run per system; cube runs first, once every peer is loaded.
bin/cube bench --against redis --keys 1000000 --runs 1 --duration "$((secs + 3))s" "$@" >"$out/bench.txt" 2>&1 &
bench=$!
until grep -q '^redis:' "$out/bench.txt"; do
	kill -0 "$bench" 2>/dev/null || { cat "$out/bench.txt"; exit 1; }
	sleep 0.2
done
pid=$(sed -n 's/^cube server: pid \([0-9]*\),.*/\1/p' "$out/bench.txt")
sleep 2 # the warm-up and the in-process round
perf record -q -F 2000 -g -o "$out/perf.data" -p "$pid" -- sleep "$secs" 2>/dev/null
wait "$bench"
bench=""
grep -E 'machine:|keys/s  |server CPU s/Mkey|in-process|cube RPC|CPU-second' "$out/bench.txt"
echo
echo "where the cube server's CPU went ($secs s of perf samples, classified by call stack):"
perf script -i "$out/perf.data" 2>/dev/null | awk '
function flush(   c) {
	if (stack == "") return
	if (stack ~ /AppendDictValue|lookup\.func2/) c = "encode: a DictValue per key"
	else if (stack ~ /cube\/dict\./) c = "dictionary lookups: LookupBatch (prefetch, probe, record)"
	else if (stack ~ /FD\)\.Write/ && stack ~ /handle_softirqs/) c = "write(2): loopback delivery into the client socket, and its wakeup"
	else if (stack ~ /FD\)\.Write/) c = "write(2): the server own send path"
	else if (stack ~ /FD\)\.Read|awaitFrame|ReadFrameFunc/) c = "read(2) of requests, EAGAIN included"
	else if (stack ~ /DecodeDictRequest/) c = "decode: the keys of a DictRequest"
	else c = "other: Go scheduler, netpoll, timers, metrics, GC"
	n[c]++; total++; stack = ""
}
/^[ \t]/ { stack = stack "\n" $0; next }
{ flush() }
END { flush(); for (c in n) printf "%5.1f%%  %s\n", 100 * n[c] / total, c | "sort -rn"; close("sort -rn"); printf "(%d samples)\n", total }'
