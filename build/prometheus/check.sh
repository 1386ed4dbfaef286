#!/usr/bin/env bash
# promtool over what ships in deploy/prometheus: the rules parse
# (`check rules`), the alerts fire and stay quiet as rules_test.yaml says
# (`test rules`), and a fresh orderagg's /metrics passes Prometheus's linter
# (`check metrics`) after it served one page.
#
# Usage: build/prometheus/check.sh   (needs promtool: Debian's prometheus
# package, `make deps`; and the binary, `make build`, or ORDERAGG_BIN)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rules="$root/deploy/prometheus"
bin="${ORDERAGG_BIN:-$root/build/out/orderagg}"

if ! command -v promtool >/dev/null 2>&1; then
	echo "build/prometheus/check.sh: promtool is missing; run make deps (Debian's prometheus package)" >&2
	exit 1
fi

promtool check rules "$rules/rules.yaml" "$rules/alerts.yaml"
promtool test rules "$rules/rules_test.yaml"

# The embedded demo (no URLs set) on a free loopback port; the "ready" log
# line names the address it got.
log="$(mktemp)"
"$bin" serve --addr 127.0.0.1:0 --admin-addr '' >"$log" 2>&1 &
pid=$!
cleanup() {
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -f "$log"
}
trap cleanup EXIT
addr=""
for _ in $(seq 1 100); do
	addr="$(grep -o '"msg":"ready","addr":"[^"]*"' "$log" | sed 's/.*"addr":"//; s/"$//' || true)"
	[ -n "$addr" ] && break
	sleep 0.1
done
if [ -z "$addr" ]; then
	echo "build/prometheus/check.sh: orderagg never logged ready; its log:" >&2
	cat "$log" >&2
	exit 1
fi
curl -fsS -o /dev/null --max-time 5 "http://$addr/v1/orders/o-1001"
metrics="$(curl -fsS --max-time 5 "http://$addr/metrics")"
echo "Checking /metrics of a fresh orderagg ($(grep -c '^[a-z]' <<<"$metrics") samples)"
promtool check metrics <<<"$metrics"
echo "  SUCCESS"
