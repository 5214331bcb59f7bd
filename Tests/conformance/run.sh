#!/usr/bin/env bash
# `make conformance`: runs the Autobahn|Testsuite (0.8.2, Python 2.7) against Parley.
#   server side: the fuzzing client against `parley serve --ws-echo-path /echo`
#   client side: the fuzzing server against `autobahn-client` (Parley's client codec)
# Prints counts per behavior and the non-OK cases; exits non-zero on any FAILED.
#
# Environment: PY27 (a Python 2.7 interpreter; default ~/.pyenv/versions/2.7.18/bin/python,
# else python2.7 on PATH), AUTOBAHN_CASES (JSON list, default ["*"]), SWIFT (default swift),
# SKIP_BUILD=1 to reuse the release binaries, SIDES ("server client" by default).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR="$ROOT/Tests/conformance"
VENV="$ROOT/.venv-autobahn"
WORK="$DIR/reports"
SWIFT=${SWIFT:-swift}
CASES=${AUTOBAHN_CASES:-'["*"]'}
SIDES=${SIDES:-"server client"}
ECHO_PATH=/echo
MAX_MESSAGE=$((32 << 20))   # 9.* sends messages up to 16 MiB

PIDS=()
cleanup() {
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT INT TERM

# --- Python 2.7 and the suite ---------------------------------------------------------
PY27=${PY27:-}
if [ -z "$PY27" ]; then
  if [ -x "$HOME/.pyenv/versions/2.7.18/bin/python" ]; then PY27="$HOME/.pyenv/versions/2.7.18/bin/python"
  elif command -v python2.7 >/dev/null 2>&1; then PY27=$(command -v python2.7)
  fi
fi
if [ -z "$PY27" ] || ! "$PY27" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (2, 7) else 1)' 2>/dev/null; then
  echo "conformance: no Python 2.7 found (AutobahnTestsuite 0.8.2 is Python 2 only)." >&2
  echo "conformance: install one (e.g. pyenv install 2.7.18) or set PY27=/path/to/python2.7." >&2
  exit 1
fi

if [ ! -f "$VENV/.ready" ] || [ "$DIR/requirements-py27.txt" -nt "$VENV/.ready" ]; then
  echo "conformance: creating $VENV from $PY27"
  rm -rf "$VENV" "$VENV-tools"
  "$PY27" -m pip install -q --disable-pip-version-check --target "$VENV-tools" 'virtualenv==20.15.1'
  PYTHONPATH="$VENV-tools" "$PY27" -m virtualenv -q -p "$PY27" "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$DIR/requirements-py27.txt"
  touch "$VENV/.ready"
fi
WSTEST="$VENV/bin/wstest"

# --- Parley ---------------------------------------------------------------------------
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  "$SWIFT" build -c release --product parley
  "$SWIFT" build -c release --product autobahn-client
fi
BIN="$ROOT/.build/release"

free_port() {
  "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_for_port() {  # port, pid
  for _ in $(seq 1 100); do
    if "$VENV/bin/python" -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1', $1)))" 2>/dev/null; then
      return 0
    fi
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

fill() {  # template, output, port, outdir
  sed -e "s|@PORT@|$3|g" -e "s|@PATH@|$ECHO_PATH|g" -e "s|@OUTDIR@|$4|g" -e "s|@CASES@|$CASES|g" "$1" > "$2"
}

mkdir -p "$WORK"
SUMMARY_ARGS=()

if [[ " $SIDES " == *" server "* ]]; then
  rm -rf "$WORK/servers"
  DATA=$(mktemp -d)
  "$BIN/parley" serve --host 127.0.0.1 --http-port 0 --line-port 0 --loops 1 --data "$DATA" \
    --ws-echo-path "$ECHO_PATH" --max-message-size "$MAX_MESSAGE" --write-queue-limit $((256 << 20)) \
    > "$WORK/parley.log" 2>&1 &
  PARLEY_PID=$!
  PIDS+=("$PARLEY_PID")
  PORT=""
  for _ in $(seq 1 100); do
    PORT=$(sed -n 's/^http listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$WORK/parley.log" | head -1)
    [ -n "$PORT" ] && break
    kill -0 "$PARLEY_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$PORT" ]; then echo "conformance: parley did not start:" >&2; cat "$WORK/parley.log" >&2; exit 1; fi
  echo "conformance: parley (pid $PARLEY_PID) echoing on ws://127.0.0.1:$PORT$ECHO_PATH"
  fill "$DIR/fuzzingclient.template.json" "$DIR/fuzzingclient.json" "$PORT" "$WORK/servers"
  # In the background and waited for, so a signal to this script reaches the trap at once.
  (cd "$WORK" && exec "$WSTEST" -m fuzzingclient -s "$DIR/fuzzingclient.json") > "$WORK/fuzzingclient.log" 2>&1 &
  FUZZ_PID=$!
  PIDS+=("$FUZZ_PID")
  echo "conformance: fuzzing client (pid $FUZZ_PID) running; progress in $WORK/fuzzingclient.log"
  wait "$FUZZ_PID" || {
    echo "conformance: the fuzzing client failed:" >&2; tail -20 "$WORK/fuzzingclient.log" >&2; exit 1; }
  kill "$PARLEY_PID" 2>/dev/null || true
  wait "$PARLEY_PID" 2>/dev/null || true
  rm -rf "$DATA"
  SUMMARY_ARGS+=(server "$WORK/servers/index.json")
fi

if [[ " $SIDES " == *" client "* ]]; then
  rm -rf "$WORK/clients"
  SPORT=$(free_port)
  fill "$DIR/fuzzingserver.template.json" "$DIR/fuzzingserver.json" "$SPORT" "$WORK/clients"
  (cd "$WORK" && exec "$WSTEST" -m fuzzingserver -s "$DIR/fuzzingserver.json") > "$WORK/fuzzingserver.log" 2>&1 &
  WSTEST_PID=$!
  PIDS+=("$WSTEST_PID")
  if ! wait_for_port "$SPORT" "$WSTEST_PID"; then
    echo "conformance: the fuzzing server did not start:" >&2; tail -20 "$WORK/fuzzingserver.log" >&2; exit 1
  fi
  echo "conformance: fuzzing server (pid $WSTEST_PID) on ws://127.0.0.1:$SPORT"
  "$BIN/autobahn-client" --host 127.0.0.1 --port "$SPORT" --agent parley &
  CLIENT_PID=$!
  PIDS+=("$CLIENT_PID")
  wait "$CLIENT_PID" || { echo "conformance: autobahn-client failed" >&2; exit 1; }
  kill "$WSTEST_PID" 2>/dev/null || true
  wait "$WSTEST_PID" 2>/dev/null || true
  SUMMARY_ARGS+=(client "$WORK/clients/index.json")
fi

echo
echo "Autobahn|Testsuite 0.8.2 results ($(date -u +%Y-%m-%d)); reports in $WORK"
"$VENV/bin/python" "$DIR/summarize.py" "${SUMMARY_ARGS[@]}"
