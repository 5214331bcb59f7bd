#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS seconds (default 60).
# usage: Fuzz/run.sh [SECONDS] [target ...]
#   targets: http websocket wsclient line json native socketio
# Each parser module is compiled with -sanitize=fuzzer,address as a static library and the
# entry file is linked to it with swiftc (a SwiftPM executable clashes with libFuzzer's main).
# A crash leaves its input in Fuzz/crashes/<target>/; turn it into a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=${*:-"http websocket wsclient line json native socketio"}
# redis: the RESP2/RESP3 reply decoder (ParleyRedis), part of the default set too.
[ -z "$*" ] && TARGETS="$TARGETS redis"
# multipart: the multipart/form-data parser of attachments (ParleyFiles), part of the default run.
[ $# -eq 0 ] && TARGETS="$TARGETS multipart"
# proxy: the line door's PROXY protocol header decoder (v1/v2), part of the default run.
[ $# -eq 0 ] && TARGETS="$TARGETS proxy"
OUT=.build/fuzz
mkdir -p "$OUT"
FLAGS=(-O -sanitize=fuzzer,address -parse-as-library -I "$OUT" -L "$OUT")

library() { # name, sources..., extra flags after --
  local name=$1; shift
  local sources=() extra=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do sources+=("$1"); shift; done
  [ $# -gt 0 ] && shift && extra=("$@")
  if [ ! -f "$OUT/lib$name.a" ] || [ -n "$(find "${sources[@]}" -newer "$OUT/lib$name.a" 2>/dev/null)" ]; then
    swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name "$name" -emit-module -emit-library -static \
      -emit-module-path "$OUT/$name.swiftmodule" -o "$OUT/lib$name.a" "${extra[@]}" -I "$OUT" "${sources[@]}" \
      2>"$OUT/build-$name.log" || { cat "$OUT/build-$name.log"; exit 1; }
  fi
}

library ParleyCore $(find Sources/ParleyCore -name '*.swift')
library ParleyHTTP Sources/ParleyHTTP/*.swift
library ParleyIO Sources/ParleyIO/*.swift -- -I Sources/CLibUV -I Sources/COpenSSL
# ParleyWebSocket imports ParleyIO (its client connection handler): rebuilt when ParleyIO is.
[ "$OUT/libParleyIO.a" -nt "$OUT/libParleyWebSocket.a" ] && rm -f "$OUT/libParleyWebSocket.a"
library ParleyWebSocket Sources/ParleyWebSocket/*.swift -- -I Sources/CZlib -I Sources/COpenSSL -I Sources/CLibUV

build() { # target, sources..., libs
  local target=$1; shift
  # The linker warns about sanitizer symbols it cannot export; only show output on failure.
  swiftc "${FLAGS[@]}" -I Sources/CZlib -I Sources/COpenSSL -I Sources/CLibUV -o "$OUT/fuzz-$target" "$@" \
    2>"$OUT/build-$target.log" || { cat "$OUT/build-$target.log"; exit 1; }
}
for target in $TARGETS; do
  case $target in
    http) build http Fuzz/FuzzHTTP.swift -lParleyHTTP ;;
    websocket) build websocket Fuzz/FuzzWebSocket.swift -lParleyWebSocket -lParleyIO -luv -lz -lssl -lcrypto ;;
    wsclient) build wsclient Fuzz/FuzzWebSocketClient.swift -lParleyWebSocket -lParleyIO -luv -lz -lssl -lcrypto ;;
    line) build line Fuzz/FuzzLine.swift Sources/ParleyServer/Line/LineDecoder.swift Sources/ParleyServer/Line/LineCommand.swift ;;
    json) build json Fuzz/FuzzJSON.swift -lParleyCore ;;
    native) build native Fuzz/FuzzNative.swift Sources/ParleyServer/Native/NativeCommand.swift \
      Sources/ParleyServer/Session/MessageActionRequest.swift Sources/ParleyServer/Session/PushDeviceRequest.swift -lParleyCore ;;
    socketio) build socketio Fuzz/FuzzSocketIO.swift Sources/ParleyServer/SocketIO/EngineIO/EngineIOPacket.swift \
      Sources/ParleyServer/SocketIO/EngineIO/EngineIOPayload.swift Sources/ParleyServer/SocketIO/EngineIO/EngineIOOutbox.swift \
      Sources/ParleyServer/SocketIO/Protocol/SocketIOPacket.swift Sources/ParleyServer/SocketIO/Protocol/SocketIOBinaryAssembler.swift \
      -lParleyCore ;;
    redis) build redis Fuzz/FuzzRedis.swift Sources/ParleyRedis/RESP/*.swift ;;
    multipart) build multipart Fuzz/FuzzMultipart.swift Sources/ParleyFiles/Multipart/MultipartParser.swift \
      Sources/ParleyFiles/Multipart/MultipartHeaders.swift Sources/ParleyFiles/Download/ByteRange.swift ;;
    proxy) build proxy Fuzz/FuzzProxyHeader.swift Sources/ParleyServer/Line/ProxyHeaderDecoder.swift -lParleyCore ;;
    *) echo "unknown fuzz target $target" >&2; exit 2 ;;
  esac
done

# The memory oracle: an input that makes a target allocate far more than its own size (an
# amplification) must be a crash the fuzzer reports, not a slow run. Inputs are at most 8 KiB
# (-max_len) and every target decodes under small limits (64 KiB WebSocket messages, 4 KiB
# bodies, ...), so no honest input needs a 64 MiB allocation (-malloc_limit_mb: one malloc of
# that size or more is a crash). -rss_limit_mb leaves room for ASan's shadow memory and its
# 256 MiB quarantine of freed memory; above it the run is a crash too. (libFuzzer's defaults,
# 2048 for both, let one input allocate 2 GiB unnoticed.)
memory_limits() { # target
  case $1 in
    websocket|wsclient) echo "-malloc_limit_mb=64 -rss_limit_mb=2048" ;; # + zlib's inflate/deflate state
    *) echo "-malloc_limit_mb=64 -rss_limit_mb=1536" ;;
  esac
}

status=0
for target in $TARGETS; do
  mkdir -p "Fuzz/corpus/$target" "Fuzz/crashes/$target" "$OUT/corpus-$target"
  echo "fuzz $target: ${SECONDS_PER_TARGET}s"
  # A target's dictionary (Fuzz/dict/<target>.dict), if it has one: tokens mutations insert.
  dict=(); [ -f "Fuzz/dict/$target.dict" ] && dict=(-dict="Fuzz/dict/$target.dict")
  # shellcheck disable=SC2046 # memory_limits is a list of flags
  if ! "$OUT/fuzz-$target" -max_total_time="$SECONDS_PER_TARGET" -max_len=8192 -timeout=10 $(memory_limits "$target") "${dict[@]}" \
       -artifact_prefix="Fuzz/crashes/$target/" -print_final_stats=1 \
       "$OUT/corpus-$target" "Fuzz/corpus/$target" 2>"$OUT/fuzz-$target.log"; then
    echo "fuzz $target: FAILED (see $OUT/fuzz-$target.log and Fuzz/crashes/$target/)"
    tail -30 "$OUT/fuzz-$target.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$OUT/fuzz-$target.log" | tail -2 | sed "s/^/fuzz $target: /"
  fi
done
exit $status
