#!/usr/bin/env bash
# Compose smoke test: bring the stack of compose.yaml up with its
# `observability` profile, wait for the service to be ready, fetch one order
# through it, check that Prometheus scrapes it with the rules of
# deploy/prometheus loaded, and always tear everything down.
#
# Env: COMPOSE (docker-compose), SMOKE_PROJECT (orderagg-smoke). The host
# ports are free ones chosen by Docker (SMOKE_PORT / SMOKE_SIM_PORT /
# SMOKE_PROMETHEUS_PORT fix them), so the smoke cannot clash with anything
# already listening on this machine.
set -euo pipefail

compose_cmd="${COMPOSE:-docker-compose}"
project="${SMOKE_PROJECT:-orderagg-smoke}"
# Empty: compose.yaml publishes on a free loopback port.
export ORDERAGG_PORT="${SMOKE_PORT:-}"
export SIM_PORT="${SMOKE_SIM_PORT:-}"
export PROMETHEUS_PORT="${SMOKE_PROMETHEUS_PORT:-}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

compose() { $compose_cmd -p "$project" -f "$here/compose.yaml" --profile observability "$@"; }

cleanup() {
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "compose-smoke: FAILED, service logs follow" >&2
		compose ps >&2 || true
		compose logs --no-color --tail=50 >&2 || true
	fi
	compose down -v --remove-orphans >/dev/null 2>&1 || true
	exit "$rc"
}
trap cleanup EXIT

compose up -d
hostport="$(compose port orderagg 8080)" # 127.0.0.1:NNNNN
base="http://${hostport}"
echo "compose-smoke: service published on ${base}"

# Compose v1 has no `up --wait`: poll /readyz (60 s at most).
ready=""
for _ in $(seq 1 120); do
	if curl -fsS -o /dev/null --max-time 2 "$base/readyz"; then
		ready=yes
		break
	fi
	sleep 0.5
done
if [ -z "$ready" ]; then
	echo "compose-smoke: $base/readyz never answered 200" >&2
	exit 1
fi

resp="$(curl -sS --max-time 5 -w '\n%{http_code}' "$base/v1/orders/o-1001")"
code="${resp##*$'\n'}"
body="${resp%$'\n'*}"
echo "compose-smoke: GET /v1/orders/o-1001 -> ${code} ${body:0:200}"
if [ "$code" != 200 ]; then
	echo "compose-smoke: want status 200, got ${code}" >&2
	exit 1
fi
case "$body" in
*'"order_id":"o-1001"'* | *'"order_id": "o-1001"'*) ;;
*)
	echo "compose-smoke: answer has no order_id o-1001" >&2
	exit 1
	;;
esac

# Prometheus: orderagg is a healthy target and every rule group of
# deploy/prometheus is loaded and evaluated without error (60 s at most: a
# scrape and an evaluation every 5 s).
prom="http://$(compose port prometheus 9090)"
want_groups="$(cat "$here/deploy/prometheus/rules.yaml" "$here/deploy/prometheus/alerts.yaml" | grep -c '^  - name:')"
up="" groups="" rules=""
for _ in $(seq 1 120); do
	up="$(curl -fsS --max-time 2 "$prom/api/v1/query" --data-urlencode 'query=up{job="orderagg"}' 2>/dev/null || true)"
	rules="$(curl -fsS --max-time 2 "$prom/api/v1/rules" 2>/dev/null || true)"
	groups="$(grep -o '"name":"orderagg-[a-z-]*","file"' <<<"$rules" | wc -l || true)"
	if [[ "$up" == *'"value":['*',"1"]'* ]] && [ "$groups" -eq "$want_groups" ] &&
		[[ "$rules" == *'"health":"ok"'* ]] && [[ "$rules" != *'"health":"err"'* ]] &&
		[[ "$rules" != *'"health":"unknown"'* ]]; then
		break
	fi
	up=""
	sleep 0.5
done
if [ -z "$up" ]; then
	echo "compose-smoke: Prometheus at $prom: up{job=\"orderagg\"} not 1, or not all of the $want_groups rule groups loaded and evaluated (found $groups)" >&2
	exit 1
fi
echo "compose-smoke: Prometheus scrapes orderagg, $groups rule groups loaded and evaluated"
echo "compose-smoke: OK"
