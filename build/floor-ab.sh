#!/usr/bin/env bash
# Compares two builds of orderagg-loadtest on the floor scenario, the way
# docs/experiments.md ("floor") does: runs alternate (A B, B A, A B, …) so
# that a machine drifting over the minutes weighs on both alike.
#
#   build/floor-ab.sh OUTDIR PAIRS BIN_A BIN_B
#
# Each run's report goes to OUTDIR/<bin>.<pair>.txt; OUTDIR/summary gets one
# line per run: the CPU ratio with Redis (median round, then all rounds
# pooled), the median round's pages/s ratio and the load average. Build each binary with
#   go build -o BIN ./cmd/orderagg-loadtest
# from the commit to measure. Needs redis-server on PATH to count Redis as
# a deployment has it.
set -euo pipefail

if [ "$#" -ne 4 ]; then
	sed -n '2,13p' "$0" >&2
	exit 2
fi
out=$1 pairs=$2 a=$3 b=$4
mkdir -p "$out"
for i in $(seq 1 "$pairs"); do
	if [ $((i % 2)) = 1 ]; then order="$a $b"; else order="$b $a"; fi
	for bin in $order; do
		report="$out/$(basename "$bin").$i.txt"
		"$bin" --scenario floor >"$report" 2>&1
		cpu=$(grep -o "÷ the floor's: median round [0-9.]*×" "$report" | grep -o '[0-9.]*×$' || true)
		pooled=$(grep 'CPU per request with Redis' "$report" | grep -o 'all rounds pooled [0-9.]*×' | grep -o '[0-9.]*×$' || true)
		rate=$(grep -o 'throughput orderagg ÷ floor: median round [0-9.]*×' "$report" | grep -o '[0-9.]*×$' || true)
		load=$(grep -o 'load average.*' "$report" || true)
		echo "$(basename "$bin") run $i: CPU with Redis ÷ floor $cpu (pooled $pooled) | pages/s ÷ floor $rate | $load" | tee -a "$out/summary"
	done
done
