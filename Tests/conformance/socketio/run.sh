#!/usr/bin/env bash
# The Engine.IO v4 and Socket.IO v5 protocol test suites (vendored from the protocols'
# repositories) against Parley's diagnostic endpoints: `parley serve --eio-echo-path
# /engine.io/ --sio-test-app` with the suites' settings (ping 300/200 ms, connect timeout
# 1 s). Runs under Node with Debian's mocha and node-ws (installed when missing).
#
# Environment: SKIP_BUILD=1 reuses .build/release/parley; PARLEY_BIN picks another binary.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
DIR="$ROOT/Tests/conformance/socketio"
SWIFT=${SWIFT:-swift}

missing=""
for p in nodejs mocha node-ws; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "conformance: installing$missing"
  SUDO=$( [ "$(id -u)" = 0 ] || echo sudo )
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

if [ -z "${PARLEY_BIN:-}" ]; then
  [ "${SKIP_BUILD:-0}" = 1 ] || "$SWIFT" build -c release --product parley
  PARLEY_BIN="$ROOT/.build/release/parley"
fi

DATA=$(mktemp -d)
LOG="$DATA/parley.log"
# One loop, as the reference server is single-threaded: the suites' clients assume its
# timing (a `3probe` is written before the next polling request is answered).
"$PARLEY_BIN" serve --host 127.0.0.1 --http-port 0 --line-port 0 --loops 1 --data "$DATA" \
  --eio-echo-path /engine.io/ --sio-test-app \
  --socketio-ping-interval 300 --socketio-ping-timeout 200 --socketio-connect-timeout 1000 \
  > "$LOG" 2>&1 &
PARLEY_PID=$!
cleanup() {
  kill "$PARLEY_PID" 2>/dev/null || true
  wait "$PARLEY_PID" 2>/dev/null || true
  rm -rf "$DATA"
}
trap cleanup EXIT INT TERM

PORT=""
for _ in $(seq 1 100); do
  PORT=$(sed -n 's/^http listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$LOG" | head -1)
  [ -n "$PORT" ] && break
  kill -0 "$PARLEY_PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$PORT" ]; then echo "conformance: parley did not start:" >&2; cat "$LOG" >&2; exit 1; fi
echo "conformance: parley (pid $PARLEY_PID) on http://127.0.0.1:$PORT (Engine.IO echo at /engine.io/, test app at /socket.io/)"

# Debian's node modules live in /usr/share/nodejs; this Node may not look there by itself.
export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"
export PARLEY_URL="http://127.0.0.1:$PORT"
cd "$DIR"
status=0
for suite in engineio-test-suite.mjs socketio-test-suite.mjs; do
  echo "conformance: $suite"
  mocha "$suite" || status=1
done
exit $status
