#!/bin/sh
# Entrypoint of the loadtest image: run the load runner against app and Redis
# containers by name.
#
# The runner refuses to send load anywhere but loopback (a safety net against
# load-testing someone else's server by a typo), so each container named in
# LOADTEST_APPS ("host:port host:port …") and LOADTEST_REDIS is relayed by
# socat from a port on 127.0.0.1, and the runner is pointed at those. The
# admin token comes from FLASHSALE_ADMIN_TOKEN, which the runner reads itself;
# LOADTEST_LOCK_TTL, when set, is the apps' lease TTL (-lock-ttl), which sizes
# the pause faults. Arguments go to the runner after these, so they win
# (e.g. -quick, -variants lua,lua+fence, -scenarios clean). The relays listen
# on LOADTEST_APP_PORT_BASE+1… and LOADTEST_REDIS_PORT_BASE+1… (18000, 16000).
# LOADTEST_REDIS_USER and LOADTEST_REDIS_PASSWORD, when the password is set,
# are the Redis login of the runner's scan (the compose file gives the app's
# user: letters, digits and ._~- only, it goes into a URL).
set -eu

: "${LOADTEST_APPS:?name the app containers, e.g. LOADTEST_APPS=app-1:8080}"
LOADTEST_REDIS="${LOADTEST_REDIS:-}"
login=""
if [ -n "${LOADTEST_REDIS_PASSWORD:-}" ]; then
	login="${LOADTEST_REDIS_USER:-}:${LOADTEST_REDIS_PASSWORD}@"
fi

# relay PORT HOST:PORT listens on 127.0.0.1:PORT and forwards to HOST:PORT.
# socat's listen backlog is 5 unless told: a load run opens its connections
# in a burst, a full accept queue drops their SYNs, and a client that
# retransmits at 1, 3, 7, 15 s reaches the shop after its own timeout while
# the order it sent is made. 1024 is far above the runner's 128 in flight.
relay() {
	socat "TCP-LISTEN:$1,bind=127.0.0.1,fork,reuseaddr,backlog=1024" "TCP:$2" &
	tries=0
	until socat -u OPEN:/dev/null "TCP:127.0.0.1:$1" 2>/dev/null; do
		tries=$((tries + 1))
		if [ "$tries" -ge 50 ]; then
			echo "loadtest-entrypoint: relay 127.0.0.1:$1 -> $2 did not come up" >&2
			exit 2
		fi
		sleep 0.1
	done
}

targets=""
port="${LOADTEST_APP_PORT_BASE:-18000}"
for app in $LOADTEST_APPS; do
	port=$((port + 1))
	relay "$port" "$app"
	targets="${targets:+$targets,}http://127.0.0.1:$port"
done
redis=""
shown="" # redis without the password, for the log
port="${LOADTEST_REDIS_PORT_BASE:-16000}"
for node in $LOADTEST_REDIS; do
	port=$((port + 1))
	relay "$port" "$node"
	redis="${redis:+$redis,}redis://${login}127.0.0.1:$port"
	shown="${shown:+$shown,}redis://127.0.0.1:$port"
done
echo "loadtest-entrypoint: $LOADTEST_APPS via $targets${redis:+; Redis $LOADTEST_REDIS via $shown}" >&2

if [ -n "${LOADTEST_LOCK_TTL:-}" ]; then
	set -- -lock-ttl "$LOADTEST_LOCK_TTL" "$@"
fi
if [ -n "$redis" ]; then
	set -- -redis "$redis" "$@"
fi
exec loadtest -targets "$targets" "$@"
