#!/usr/bin/env bash
# Run a command beside a throwaway redis-server: the tests that need a real
# Redis (internal/cache's TestAgainstRealRedis) find it in
# ORDERAGG_TEST_REDIS_URL. The server listens on loopback at a free port,
# keeps nothing on disk (--save '' --appendonly no) and is stopped when the
# command ends, however it ends.
#
# Usage: build/with-redis.sh COMMAND [ARG...]
#
# Without redis-server the command runs alone (the test skips), except in CI
# ($CI true as Go's strconv.ParseBool reads it: 1, t, true, ...), where that
# is an error: `make deps` installs redis-server there,
# and a missing one must not pass as a skipped test.
set -euo pipefail

if [ "$#" -eq 0 ]; then
	echo "usage: $0 COMMAND [ARG...]" >&2
	exit 2
fi

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	case "${CI:-}" in 1 | t | T | true | TRUE | True) in_ci=yes ;; *) in_ci="" ;; esac
	if [ -n "$in_ci" ]; then
		echo "with-redis: redis-server or redis-cli missing in CI (make deps installs redis-server and redis-tools)" >&2
		exit 1
	fi
	echo "with-redis: redis-server or redis-cli not installed; running without (TestAgainstRealRedis skips)" >&2
	exec "$@"
fi

dir="$(mktemp -d "${TMPDIR:-/tmp}/orderagg-redis.XXXXXX")"
pid=""
stop() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A port is free if our server binds it. Another process may take a port
# between any check and the bind, so the proof is the server itself: it
# either exits (port taken: try another) or answers PING with its own pid.
port=""
for _ in $(seq 1 20); do
	try=$((20000 + RANDOM % 40000))
	redis-server --bind 127.0.0.1 --port "$try" --save '' --appendonly no \
		--dir "$dir" --logfile "$dir/redis.log" --daemonize no &
	pid=$!
	for _ in $(seq 1 100); do # 10 s at most for a server to come up
		if ! kill -0 "$pid" 2>/dev/null; then
			break # exited: most likely the port was taken
		fi
		if [ "$(redis-cli -p "$try" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p')" = "$pid" ]; then
			port="$try"
			break 2
		fi
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then # up but never answered: give up on it
		kill "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	pid=""
done
if [ -z "$port" ]; then
	echo "with-redis: could not start redis-server on a free port; its last log:" >&2
	cat "$dir/redis.log" >&2 || true
	exit 1
fi

export ORDERAGG_TEST_REDIS_URL="redis://127.0.0.1:${port}/0"
echo "with-redis: redis-server pid ${pid} on 127.0.0.1:${port} (ORDERAGG_TEST_REDIS_URL)" >&2
rc=0
"$@" || rc=$?
exit "$rc"
