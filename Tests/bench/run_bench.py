#!/usr/bin/env python3
"""`make bench`: the standard scenarios of Benchmarks.md against a release `parley serve`
(and the python-socketio SocketChat server for the comparison row), printed as one table.

Every process started here is stopped by its pid; every wait has a timeout. Set
BENCH_SCALE=0.2 for a quicker, shorter run (durations scale; sizes never do).
"""
import json
import shutil
import os
import socket
import subprocess
import tempfile
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARLEY = os.environ.get("PARLEY_BIN", os.path.join(ROOT, ".build/release/parley"))
# The server measured; the bench is always PARLEY. `PARLEY_SERVER_BIN=old-parley make bench`
# measures an older server with today's bench (the before/after tables of Benchmarks.md).
SERVER = os.environ.get("PARLEY_SERVER_BIN", PARLEY)
VENV_PY = os.path.join(ROOT, ".venv-bench/bin/python")
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
ONLY = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))
# BENCH_SMOKE=1 shrinks the cluster rows' sizes (members, connections, publishers) to check the
# harness itself in seconds; its figures mean nothing.
SMOKE = os.environ.get("BENCH_SMOKE") == "1"


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


def whole_secs(s):
    # publish-durable takes whole seconds.
    return str(max(1, int(round(s * SCALE))))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def http_get(port, path, timeout=5):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % path).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


def metric(port, name):
    try:
        status, body = http_get(port, "/metrics")
    except OSError:
        return None
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class Redis(Proc):
    """A redis-server for the cluster rows: a fresh directory, no snapshots, the append-only
    file with `fsync` when given (`always`, `everysec`)."""

    def __init__(self, name, fsync=None):
        self.port = free_port()
        self.directory = tempfile.mkdtemp(prefix="parley-bench-redis-")
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--dir", self.directory,
                "--daemonize", "no", "--appendonly", "yes" if fsync else "no"]
        if fsync:
            args += ["--appendfsync", fsync]
        super().__init__(args, "/tmp/parley-bench-%s.log" % name)
        if not wait_port(self.port):
            self.stop()
            sys.exit("redis-server did not start (see /tmp/parley-bench-%s.log)" % name)

    def used_memory(self):
        out = subprocess.run(["redis-cli", "-p", str(self.port), "INFO", "memory"], capture_output=True, text=True, timeout=10)
        for line in out.stdout.splitlines():
            if line.startswith("used_memory:"):
                return int(line.split(":")[1])
        return 0


class Node(Proc):
    """A `parley serve` cluster node on `redis`, with the single server's bench settings."""

    def __init__(self, name, redis, extra=()):
        self.http, self.line = free_port(), free_port()
        super().__init__([PARLEY, "serve", "--http-port", str(self.http), "--line-port", str(self.line),
                          "--data", tempfile.mkdtemp(prefix="parley-bench-node-"),
                          "--redis", "redis://127.0.0.1:%d" % redis.port, "--node-id", name,
                          "--publish-rate", "1000000", "--line-rate", "1000000", "--write-queue-limit", "268435456",
                          "--max-connections-per-ip", "100000", "--max-connections", "100000", *extra],
                         "/tmp/parley-bench-node-%s.log" % name)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if http_get(self.http, "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        sys.exit("parley serve --redis did not become ready (see /tmp/parley-bench-node-%s.log)" % name)

    @property
    def ws(self):
        return f"ws://127.0.0.1:{self.http}/v3/websocket"


def stop_all(procs):
    for proc in reversed(procs):
        proc.stop()


def cluster_fanout(run, single_ws):
    """Publisher on node A, 1,000 members spread over A and B: deliveries/s closed loop, then
    latency at 100,000 deliveries/s, against the single node at the same rate (run just
    before). The Redis hop itself shows best inside the cluster run: A's members get a message
    from their own node, B's through Redis."""
    members = 20 if SMOKE else 1000
    fan = ["--rooms", "1", "--members", str(members), "--publishers", "1", "--size", "100"]
    procs = []
    try:
        redis = Redis("cluster-fanout-redis", fsync="everysec")
        procs.append(redis)
        a = Node("fanout-a", redis)
        procs.append(a)
        b = Node("fanout-b", redis)
        procs.append(b)
        # Both nodes' CPU, summed by the bench over the measured window.
        urls = ["--url", a.ws, "--url", b.ws, "--server-pid", str(a.pid), "--server-pid", str(b.pid)]
        run("cluster-fanout", "fan-out cluster A+B 1x%d, max" % members, ">=1/2 single node",
            ["fanout"] + urls + fan + ["--rate", "max", "--window", "64", "--duration", secs(10), "--warmup", "2"])
        base = run("cluster-fanout", "fan-out single node 1x%d, 100 msg/s" % members, "(baseline)",
                   ["fanout", "--url", single_ws] + fan + ["--rate", "100", "--duration", secs(10), "--warmup", "2"])
        hop = run("cluster-fanout", "fan-out cluster A+B 1x%d, 100 msg/s" % members, "Redis hop p50/p99",
                  ["fanout"] + urls + fan + ["--rate", "100", "--duration", secs(10), "--warmup", "2"])
        if base and hop and base.get("ok") and hop.get("ok"):
            bl, hl = base["latency_ms"], hop["latency_ms"]
            by = "; ".join("%s p50 %.2f p99 %.2f" % ("A" if i == 0 else "B", u["latency_ms"]["p50"], u["latency_ms"]["p99"])
                           for i, u in enumerate(hop.get("by_url", [])))
            split = hop.get("by_url", [])
            through = ""
            if len(split) == 2:
                through = "; B (through Redis) - A (local): p50 %+.2f ms, p99 %+.2f ms" % (
                    split[1]["latency_ms"]["p50"] - split[0]["latency_ms"]["p50"],
                    split[1]["latency_ms"]["p99"] - split[0]["latency_ms"]["p99"])
            rows.append({"_name": "  Redis hop at %dk deliveries/s" % (members // 10), "_target": "(added latency)",
                         "_note": "p50 %+.2f ms, p99 %+.2f ms against the single node (%s)%s" % (
                             hl["p50"] - bl["p50"], hl["p99"] - bl["p99"], by, through)})
    finally:
        stop_all(procs)


def cluster_idle():
    """3 nodes, 3 bench processes of their own, 50,000 idle subscribed connections in all
    (each bench process spreads its share over the three nodes): memory per connection (the
    nodes' RSS) and Redis's memory per member (INFO memory), read while all are held."""
    total, processes, hold = (300, 3, 5) if SMOKE else (50_000, 3, 90)
    procs, benches = [], []
    try:
        redis = Redis("cluster-idle-redis")
        procs.append(redis)
        nodes = [Node("idle-" + name, redis) for name in "abc"]
        procs.extend(nodes)
        time.sleep(1)
        rss_before = [rss_kib(n.pid) for n in nodes]
        redis_before = redis.used_memory()
        before = load()
        urls = [arg for n in nodes for arg in ("--url", n.ws)]
        for i in range(processes):
            share = total // processes + (1 if i < total % processes else 0)
            benches.append(subprocess.Popen([PARLEY, "bench", "idle", *urls, "--connections", str(share), "--connect-concurrency", "32",
                                             "--report-at", str(total), "--hold", str(hold), "--json"],
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT))
        deadline = time.time() + 600
        held = 0
        while time.time() < deadline:
            held = sum(int(metric(n.http, "parley_cluster_local_members") or 0) for n in nodes)
            if held >= total or any(b.poll() is not None for b in benches):
                break
            time.sleep(0.5)
        row = {"_name": "idle cluster 3 nodes, %d conns" % total, "_target": "memory per conn / member", "_load": before}
        if held >= total:
            time.sleep(2)   # the last joins' allocations
            rss_after = [rss_kib(n.pid) for n in nodes]
            redis_after = redis.used_memory()
            per_connection = sum(rss_after) - sum(rss_before)
            row["_note"] = "held %d: %.2f KiB/connection (node RSS %s KiB), Redis %.0f B/member (used_memory +%.1f MiB)  load %s" % (
                held, per_connection / total, "/".join(str(r) for r in rss_after), (redis_after - redis_before) * 1.0 / total,
                (redis_after - redis_before) / 1048576, before)
        else:
            row["_note"] = "FAILED: only %d of %d members held" % (held, total)
        results = []
        for bench_proc in benches:
            try:
                out, _ = bench_proc.communicate(timeout=hold + 600)
                results.append(json.loads(out.strip().splitlines()[-1]))
            except (subprocess.TimeoutExpired, ValueError, IndexError):
                results.append({"ok": False})
        if not all(r.get("ok") for r in results):
            samples = [e for r in results for e in r.get("error_samples", [])][:1]
            row["_note"] += "  FAILED bench process: %s" % samples
        row["benches"] = results
        rows.append(row)
    finally:
        for bench_proc in benches:
            if bench_proc.poll() is None:
                bench_proc.kill()
                bench_proc.wait(timeout=10)
        stop_all(procs)


def upload_row():
    """1 MiB PNGs (decoded, cleaned, re-encoded and thumbnailed by the server), 20 at a time,
    with the server's resident memory before, at its peak and after."""
    port = free_port()
    fresh = Proc([SERVER, "serve", "--http-port", str(port), "--line-port", str(free_port()),
                  "--data", tempfile.mkdtemp(prefix="parley-bench-upload-"),
                  "--upload-rate", "1000000", "--files-quota", "100000000000"],
                 "/tmp/parley-bench-upload-server.log")
    try:
        if not wait_port(port):
            return
        before = load()
        r = bench(["upload", "--url", f"http://127.0.0.1:{port}", "--size", "1048576",
                   "--uploads", "40" if SMOKE else "200", "--concurrency", "20", "--server-pid", str(fresh.pid)], 600)
        ok = r.get("failed", 1) == 0 and r.get("uploads", 0) > 0
        rows.append(dict(r, _name="upload 1 MiB PNG x200, 20 at once", _target="(throughput, memory)", _load=before,
                         _note="%.1f uploads/s, %.1f MB/s, p50 %.0f ms, p95 %.0f ms; server RSS %.0f -> peak %.0f -> %.0f MiB  load %s  %s" % (
                             r.get("uploads_per_second", 0), r.get("megabytes_per_second", 0), r.get("latency_ms_p50", 0),
                             r.get("latency_ms_p95", 0), r.get("server_rss_kib_before", 0) / 1024,
                             r.get("server_rss_kib_peak", 0) / 1024, r.get("server_rss_kib_after", 0) / 1024, before,
                             "OK" if ok else "FAILED " + str(r.get("first_error", r.get("error_samples", ""))))))
    finally:
        fresh.stop()


def cluster_durable(fsync):
    """Acknowledged publishes/s through Redis (a node on one Redis with the append-only file
    and `appendfsync fsync`), 100 publishers: the durable figure's cluster twin."""
    procs = []
    try:
        redis = Redis("cluster-durable-" + fsync, fsync=fsync)
        procs.append(redis)
        node = Node("durable-" + fsync, redis)
        procs.append(node)
        before = load()
        r = bench(["publish-durable", "--url", node.ws, "--publishers", "4" if SMOKE else "100",
                   "--duration", whole_secs(10)], 300)
        lat = r.get("latency_ms", {})
        verdict = "OK" if r.get("ok") else "FAILED " + "; ".join(r.get("error_samples", [])[:1])
        rows.append(dict(r, _name="publish-durable cluster, appendfsync " + fsync, _target="(durable twin)", _load=before,
                         _note="%.0f acked/s, p50 %.2f ms, p99 %.2f ms to the receipt  load %s  %s" % (
                             r.get("acked_per_s", 0), lat.get("p50", 0), lat.get("p99", 0), before, verdict)))
    finally:
        stop_all(procs)


rows = []


def main():
    http, line = free_port(), free_port()
    # A fresh data directory; per-connection publish limits lifted; a large write queue and
    # per-IP allowance for the Socket.IO join storm (every connectUser sends the whole user
    # list to every socket) and the 1,000 connections from one address.
    server = Proc([SERVER, "serve", "--http-port", str(http), "--line-port", str(line),
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

        def run(key, name, target, args, timeout=300, syscalls_of=None, per_publish_members=None):
            if ONLY and key not in ONLY:
                return None
            before = load()
            counter = None
            if syscalls_of and shutil.which("perf"):
                # Syscalls of the server over the measured part of the run (after the warmup).
                seconds = float(args[args.index("--duration") + 1])
                counter = subprocess.Popen(["sh", "-c", "sleep 4; exec perf stat -x, -e raw_syscalls:sys_enter -p %d -- sleep %d"
                                            % (syscalls_of, max(1, int(seconds) - 3))],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            r = bench(args, timeout)
            if counter:
                try:
                    _, err = counter.communicate(timeout=60)
                    calls = float(next(l for l in err.splitlines() if "sys_enter" in l).split(",")[0])
                    seconds = float(args[args.index("--duration") + 1])
                    r["syscalls_per_delivery"] = calls / (r.get("delivered_per_s", 0) * max(1, int(seconds) - 3) or 1)
                except (StopIteration, ValueError, subprocess.TimeoutExpired):
                    counter.kill()
            if per_publish_members and r.get("server_cpu_s") and r.get("measured_deliveries"):
                r["server_us_per_publish"] = r["server_cpu_s"] * 1e6 / (r["measured_deliveries"] / per_publish_members)
            r["_name"], r["_target"], r["_load"] = name, target, before
            rows.append(r)
            return r

        pid = ["--server-pid", str(server.pid)]
        closed = run("fanout-max", "fan-out native 1x1000, max", ">=3.0M deliv/server CPU-s",
                     ["fanout", "--url", ws] + fan + pid + ["--rate", "max", "--window", "64", "--duration", secs(10), "--warmup", "2"])
        # Back-pressure: the open loop at the closed loop's throughput (its p99 is the yardstick
        # for the closed loop's p99: within 3x, and deliveries/s within 10%).
        if closed and closed.get("delivered_per_s"):
            rate = max(1, int(closed["delivered_per_s"] / 1000))
            opened = run("fanout-max", "  same throughput open loop (%d msg/s)" % rate, "closed p99 <= 3x this",
                         ["fanout", "--url", ws] + fan + pid + ["--rate", str(rate), "--duration", secs(10), "--warmup", "2"])
            if opened and opened.get("latency_ms", {}).get("p99"):
                closed["_extra"] = "closed/open p99 %.1fx, deliveries %.0f%% of open loop" % (
                    closed["latency_ms"]["p99"] / opened["latency_ms"]["p99"],
                    100.0 * closed["delivered_per_s"] / max(1, opened["delivered_per_s"]))
        # The same target open loop: 500 msg/s x 1,000 members = 500,000 deliveries/s offered.
        run("fanout-500k", "fan-out native 1x1000, 500 msg/s", "p99<=50ms",
            ["fanout", "--url", ws] + fan + pid + ["--rate", "500", "--duration", secs(10), "--warmup", "2"])
        slow = run("fanout-100k", "fan-out native 1x1000, 100 msg/s", "p99<=10ms, <=1.1 syscall/deliv",
                   ["fanout", "--url", ws] + fan + pid + ["--rate", "100", "--duration", secs(10), "--warmup", "2"],
                   syscalls_of=server.pid)
        # Many small rooms, durable: 2,000 x 5 = 10,000 sockets, 20,000 publishes/s.
        # Targets (issue 29): p99 <= 25 ms, nothing lost, server CPU per publish <= 1.5x the
        # fan-out yardstick's in the same sitting (a C epoll server beside the repository; 33-55 us
        # per publish on this machine, Benchmarks.md).
        run("chat", "chat-like native 2000x5, 20k pub/s", "p99<=25ms, 0 lost, <=1.5x yardstick us/pub",
            ["fanout", "--url", ws, "--rooms", "2000", "--members", "5", "--publishers", "2000",
             "--rate", "20000", "--size", "100", "--duration", secs(10), "--warmup", "2"] + pid, timeout=600,
            per_publish_members=5)
        r = run("durable", "publish-durable, 100 publishers", ">=120,000 acked/s",
                ["publish-durable", "--url", ws, "--publishers", "100", "--duration", whole_secs(10)])
        if r is not None:
            lat = r.get("latency_ms", {})
            r["_note"] = "%.0f acked/s, p50 %.2f ms, p99 %.2f ms to the receipt  load %s  %s" % (
                r.get("acked_per_s", 0), lat.get("p50", 0), lat.get("p99", 0), r["_load"],
                "OK" if r.get("ok") else "FAILED " + "; ".join(r.get("error_samples", [])[:1]))
        run("line", "fan-out line 1x1000, max", ">= native",
            ["fanout", "--url", f"tcp://127.0.0.1:{line}", "--door", "line"] + fan + pid +
            ["--rate", "max", "--window", "64", "--duration", secs(10), "--warmup", "2"])
        if not ONLY or "idle" in ONLY:
            # A fresh server, so memory freed by the runs above does not hide the idle cost.
            port = free_port()
            fresh = Proc([SERVER, "serve", "--http-port", str(port), "--line-port", str(free_port()),
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
        ours = run("socketio-parley", "fan-out Parley Socket.IO 1x1000, max", ">=100x python",
                   ["fanout", "--url", f"http://127.0.0.1:{http}/socket.io/", "--door", "socketio"] + fan + pid +
                   ["--rate", "max", "--window", "64", "--duration", secs(10), "--warmup", "5"], timeout=600)
        python = next((r for r in rows if r.get("_name", "").startswith("fan-out python-socketio")), None)
        if ours and python and python.get("delivered_per_s"):
            ours["_extra"] = "%.0fx python-socketio" % (ours.get("delivered_per_s", 0) / python["delivered_per_s"])
        if not ONLY or "upload" in ONLY:
            upload_row()
        # Cluster mode (README "Cluster mode"): redis-server and nodes of their own per row.
        if not ONLY or "cluster-fanout" in ONLY:
            cluster_fanout(run, ws)
        if not ONLY or "cluster-idle" in ONLY:
            cluster_idle()
        for fsync in ("always", "everysec"):
            if not ONLY or "cluster-durable-" + fsync in ONLY:
                cluster_durable(fsync)
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
        extra = []
        if r.get("deliveries_per_server_cpu_s"):
            extra.append("%.2f M deliveries/server CPU-s (server %.2f s CPU)" % (r["deliveries_per_server_cpu_s"] / 1e6, r["server_cpu_s"]))
        if r.get("bench_us_per_frame") is not None and r.get("deliveries_per_server_cpu_s"):
            extra.append("bench %.3f us/frame vs server %.3f us/delivery" % (r["bench_us_per_frame"], 1e6 / r["deliveries_per_server_cpu_s"]))
        if r.get("syscalls_per_delivery") is not None:
            extra.append("%.3f server syscalls/delivery" % r["syscalls_per_delivery"])
        if r.get("server_us_per_publish") is not None:
            extra.append("%.1f us server CPU/publish" % r["server_us_per_publish"])
        if r.get("_extra"):
            extra.append(r["_extra"])
        if extra:
            print(" " * 41 + "; ".join(extra))
    with open("/tmp/parley-bench-results.json", "w") as f:
        json.dump(rows, f, indent=1)
    print("(raw JSON: /tmp/parley-bench-results.json; load = 1-min load average before the row; nproc = %d)" % os.cpu_count())


if __name__ == "__main__":
    main()
