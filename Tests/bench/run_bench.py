#!/usr/bin/env python3
"""`make bench`: the standard scenarios of Benchmarks.md against a release `parley serve`
(and the python-socketio SocketChat server for the comparison row), printed as one table.

Every process started here is stopped by its pid; every wait has a timeout. Set
BENCH_SCALE=0.2 for a quicker, shorter run (durations scale; sizes never do).
"""
import json
import os
import socket
import subprocess
import tempfile
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARLEY = os.environ.get("PARLEY_BIN", os.path.join(ROOT, ".build/release/parley"))
VENV_PY = os.path.join(ROOT, ".venv-bench/bin/python")
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
ONLY = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


class Proc:
    """A child process stopped by its pid (SIGTERM, then SIGKILL after a timeout)."""

    def __init__(self, args, log):
        self.log = open(log, "w")
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT)
        self.pid = self.p.pid

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=10)
        self.log.close()


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def bench(args, timeout):
    cmd = [PARLEY, "bench"] + args + ["--json"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"ok": False, "errors": 1, "error_samples": ["bench timed out"]}
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "errors": 1, "error_samples": [out.stderr.strip()[-300:]]}


def secs(s):
    return str(max(1.0, s * SCALE))


def main():
    rows = []
    http, line = free_port(), free_port()
    # A fresh data directory; per-connection publish limits lifted; a large write queue and
    # per-IP allowance for the Socket.IO join storm (every connectUser sends the whole user
    # list to every socket) and the 1,000 connections from one address.
    server = Proc([PARLEY, "serve", "--http-port", str(http), "--line-port", str(line),
                   "--data", tempfile.mkdtemp(prefix="parley-bench-"),
                   "--publish-rate", "1000000", "--line-rate", "1000000",
                   "--write-queue-limit", "268435456", "--max-connections-per-ip", "100000",
                   "--max-connections", "100000"],
                  "/tmp/parley-bench-server.log")
    sio = None
    try:
        if not (wait_port(http) and wait_port(line)):
            sys.exit("parley serve did not start (see /tmp/parley-bench-server.log)")
        ws = f"ws://127.0.0.1:{http}/v3/websocket"
        fan = ["--rooms", "1", "--members", "1000", "--publishers", "1", "--size", "100"]

        def run(key, name, target, args, timeout=300):
            if ONLY and key not in ONLY:
                return None
            before = load()
            r = bench(args, timeout)
            r["_name"], r["_target"], r["_load"] = name, target, before
            rows.append(r)
            return r

        run("fanout-max", "fan-out native 1x1000, max", ">=500k/s, p99<=50ms",
            ["fanout", "--url", ws] + fan + ["--rate", "max", "--window", "64", "--duration", secs(10), "--warmup", "2"])
        # The same target open loop: 500 msg/s x 1,000 members = 500,000 deliveries/s offered.
        run("fanout-500k", "fan-out native 1x1000, 500 msg/s", ">=500k/s, p99<=50ms",
            ["fanout", "--url", ws] + fan + ["--rate", "500", "--duration", secs(10), "--warmup", "2"])
        run("fanout-100k", "fan-out native 1x1000, 100 msg/s", "p99<=5ms @100k/s",
            ["fanout", "--url", ws] + fan + ["--rate", "100", "--duration", secs(10), "--warmup", "2"])
        # 10,000 rooms x 5 = 50,000 sockets does not fit under the 20,000-fd cap of each
        # process: the largest that fits (3,800 x 5 = 19,000) at the full 20,000 publishes/s.
        run("chat", "chat-like native 3800x5, 20k pub/s", "p99<=10ms, 0 lost",
            ["fanout", "--url", ws, "--rooms", "3800", "--members", "5", "--publishers", "3800",
             "--rate", "20000", "--size", "100", "--duration", secs(10), "--warmup", "2"], timeout=600)
        run("line", "fan-out line 1x1000, max", ">= native",
            ["fanout", "--url", f"tcp://127.0.0.1:{line}", "--door", "line"] + fan +
            ["--rate", "max", "--window", "64", "--duration", secs(10), "--warmup", "2"])
        if not ONLY or "idle" in ONLY:
            # A fresh server, so memory freed by the runs above does not hide the idle cost.
            port = free_port()
            fresh = Proc([PARLEY, "serve", "--http-port", str(port), "--line-port", str(free_port()),
                          "--data", tempfile.mkdtemp(prefix="parley-bench-idle-"),
                          "--max-connections", "100000", "--max-connections-per-ip", "100000"],
                         "/tmp/parley-bench-idle-server.log")
            try:
                if wait_port(port):
                    before = load()
                    r = bench(["idle", "--url", f"ws://127.0.0.1:{port}/v3/websocket", "--connections", "19000",
                               "--report-at", "5000,10000,19000", "--server-pid", str(fresh.pid)], 600)
                    r["_name"], r["_target"], r["_load"] = "idle native 19,000", "<=8 KiB/conn", before
                    rows.append(r)
            finally:
                fresh.stop()
        if (not ONLY or "socketio" in ONLY) and os.path.exists(VENV_PY):
            port = free_port()
            sio = Proc([VENV_PY, "Tests/bench/socketchat_server.py", "--port", str(port)], "/tmp/parley-bench-sio.log")
            if wait_port(port):
                run("socketio", "fan-out python-socketio 1x1000, max", "(reference)",
                    ["fanout", "--url", f"http://127.0.0.1:{port}/socket.io/", "--door", "socketio",
                     "--sio-identify", "publishers"] + fan +
                    ["--rate", "max", "--window", "64", "--duration", secs(10), "--warmup", "2", "--drain", "30"], timeout=600)
        run("socketio-parley", "fan-out Parley Socket.IO 1x1000, max", ">=10x python",
            ["fanout", "--url", f"http://127.0.0.1:{http}/socket.io/", "--door", "socketio"] + fan +
            ["--rate", "max", "--window", "64", "--duration", secs(10), "--warmup", "5"], timeout=600)
    finally:
        if sio:
            sio.stop()
        server.stop()

    print(f"{'scenario':40} {'target':22} {'deliv/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'p99.9':>8} {'max':>8} {'lost':>6} {'dup':>4} {'err':>4} {'load':>5}  verdict")
    for r in rows:
        if "_note" in r:
            print(f"{r['_name']:40} {r['_target']:22} {r['_note']}")
            continue
        if "checkpoints" in r:
            per = ", ".join(f"{c['connections']}: {c.get('server_bytes_per_connection', 0) / 1024:.2f} KiB"
                            for c in r.get("checkpoints", []))
            verdict = "OK" if r.get("ok") else "FAILED " + "; ".join(r.get("error_samples", [])[:1])
            print(f"{r['_name']:40} {r['_target']:22} held {r.get('connected', 0)}: {per}  load {r['_load']}  {verdict}")
            continue
        lat = r.get("latency_ms", {})
        verdict = "OK" if r.get("ok") else "FAILED " + "; ".join(r.get("error_samples", [])[:1])
        print(f"{r['_name']:40} {r['_target']:22} {r.get('delivered_per_s', 0):>9.0f} {lat.get('p50', 0):>8.2f} "
              f"{lat.get('p99', 0):>8.2f} {lat.get('p999', 0):>8.2f} {lat.get('max', 0):>8.1f} {r.get('lost', 0):>6} "
              f"{r.get('duplicated', 0):>4} {r.get('errors', 0):>4} {r['_load']:>5}  {verdict}")
    with open("/tmp/parley-bench-results.json", "w") as f:
        json.dump(rows, f, indent=1)
    print("(raw JSON: /tmp/parley-bench-results.json; load = 1-min load average before the row; nproc = %d)" % os.cpu_count())


if __name__ == "__main__":
    main()
