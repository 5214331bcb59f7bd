#!/usr/bin/env python3
"""`make bench-attack`: honest clients on every door, quiet and under attack (docs/security.md,
"A standing check").

Quiet and attacked runs in one sitting, alternating (BENCH_PAIRS pairs, default 3; the targets
are checked on the medians), each on a fresh release `parley serve` with its default settings:

- quiet: `parley bench fanout` processes chat on every door (native, Socket.IO, line), each at
  a modest open-loop rate: the line bench, then a native and a Socket.IO bench at once;
- attacked: the same, while hostile clients run every attack of
  Tests/interop/test_under_attack.py, plus an image decompression bomb and a flood of fresh
  channels, first each in turn, then all together, over and over until the honest runs end.

Reported per door: p50/p99 and lost/duplicated deliveries; for the server: peak RSS (VmHWM),
whether it stayed up; /proc/loadavg before each run. Exits 1 when a target is missed: the
server exited, peak RSS over 1 GiB, an honest door lost a message or saw errors, or an honest
median p99 over twice the quiet runs' median.

The attacker connects from 127.0.0.2, the honest benches from 127.0.0.1: the server's
per-address budgets (connections, history and published bytes, REST) are meant to stop one
address without touching another, and with one address for both the attacker spent the honest
clients' budgets (every 127.0.0.0/8 address is this machine's loopback).

The attacker's own Python runs at nice 10 (every attack thread lowers its own priority): on the
internet an attacker's CPU is not the server's, while here the attacker, the honest benches and
the server share two cores, and an attacker at the same priority measures the scheduler rather
than the server. What the server spends on the attacks is not lowered by this, and is reported
(server CPU per run).

Every process started here is stopped by its pid; every wait has a timeout. BENCH_SCALE=0.3
shortens the runs.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "Tests", "interop"))
os.environ.setdefault("PARLEY_BIN", os.path.join(ROOT, ".build/release/parley"))

from parley_process import ParleyProcess  # noqa: E402
import test_under_attack as attacks  # noqa: E402

PARLEY = os.environ["PARLEY_BIN"]
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
DURATION = max(5, int(20 * SCALE))
PEAK_RSS_LIMIT = 1 << 30
P99_FACTOR = 2.0
# Honest load per door: members in one room, publishes per second in total.
DOORS = [("native", 100, 50), ("socketio", 50, 20), ("line", 50, 20)]
# Doors measured at the same time. Socket.IO's SocketChat app and the line door meet in the
# one lobby (as they should), where each bench would see the other's messages as strangers:
# they take turns: the line bench first (a line member joining gets the lobby's recent
# messages, which after the Socket.IO bench would be that bench's), then native and Socket.IO.
PHASES = [("line",), ("native", "socketio")]


# Seconds between two attacks in turn: the attacker shares this machine's two cores with the
# server and the honest benches, and an unpaced Python attacker takes a core of its own, which
# measures the machine rather than the server. The server's CPU per run is reported too.
PAUSE = float(os.environ.get("BENCH_ATTACK_PAUSE", "0.05"))
PAIRS = max(1, int(os.environ.get("BENCH_PAIRS", "3")))
ATTACKER_NICE = 10


ATTACKER_ADDRESS = "127.0.0.2"
_attacker = threading.local()
_plain_connect = socket.socket.connect


def _connect_from_the_attackers_address(sock, address):
    """In an attack thread, an IPv4 socket is bound to ATTACKER_ADDRESS before it connects."""
    if getattr(_attacker, "active", False) and sock.family == socket.AF_INET and sock.getsockname()[1] == 0:
        sock.bind((ATTACKER_ADDRESS, 0))
    return _plain_connect(sock, address)


socket.socket.connect = _connect_from_the_attackers_address


def become_attacker():
    """This thread connects from ATTACKER_ADDRESS, and (Linux nice values are per thread)
    yields to the server and the benches."""
    _attacker.active = True
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), ATTACKER_NICE)
    except OSError:
        pass


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def png_bomb(width, height):
    import struct
    import zlib

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    idat = zlib.compress(b"\x00" * 64)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def image_bomb(base, n):
    """A tiny PNG declaring 16384 × 3000 RGBA, in a fresh channel each time."""
    r = requests.post("%s/bomb%d/files?name=b.png" % (base, n), data=png_bomb(16384, 3000),
                      headers={"Content-Type": "image/png"}, timeout=30)
    return r.status_code


def fresh_channels(base, n):
    """Publishes into ever new channels (open mode makes them on first use)."""
    codes = []
    for i in range(20):
        r = requests.post("%s/flood%d-%d/room/publish" % (base, n, i), data=json.dumps("x" * 1000), timeout=30)
        codes.append(r.status_code)
    return codes


def attack_list(http, base):
    """Every attack, or those named in BENCH_ATTACKS (comma-separated)."""
    only = set(filter(None, os.environ.get("BENCH_ATTACKS", "").split(",")))
    return [a for a in all_attacks(http, base) if not only or a[0] in only]


def all_attacks(http, base):
    return [
        ("placeholders", lambda n: attacks.placeholder_bomb(base)),
        ("client_data", lambda n: attacks.huge_client_data(http)),
        ("control_name", lambda n: attacks.control_character_name(http)),
        ("history", lambda n: attacks.history_flood(http)),
        ("multi_room", lambda n: attacks.multi_room_amplification(base)),
        ("origin", lambda n: attacks.foreign_origin(base)),
        ("image_bomb", lambda n: image_bomb(base, n)),
        ("fresh_channels", lambda n: fresh_channels(base, n)),
    ]


class Attacker:
    """Runs the attacks in turn, then all together, until stopped; counts what each got."""

    def __init__(self, http, base):
        self.attacks = attack_list(http, base)
        self.stopping = threading.Event()
        self.counts = {name: 0 for name, _ in self.attacks}
        self.failures = []
        self.rounds = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _one(self, name, run, n):
        become_attacker()
        try:
            run(n)
            self.counts[name] += 1
        except Exception as error:  # a refused connection or a timeout is not a crash; count it
            self.failures.append("%s: %r" % (name, error))

    def _run(self):
        become_attacker()
        n = 0
        while not self.stopping.is_set():
            for name, run in self.attacks:  # in turn
                if self.stopping.is_set():
                    return
                n += 1
                self._one(name, run, n)
                self.stopping.wait(PAUSE)
            threads = []
            for name, run in self.attacks:  # together
                n += 1
                t = threading.Thread(target=self._one, args=(name, run, n), daemon=True)
                t.start()
                threads.append(t)
            for t in threads:
                t.join(timeout=60)
            self.rounds += 1
            self.stopping.wait(PAUSE)

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=120)


def peak_rss(pid):
    try:
        return attacks.peak_rss(pid)
    except OSError:
        return None


def run(attacked):
    log = tempfile.NamedTemporaryFile(prefix="parley-bench-attack-", suffix=".log", delete=False).name
    server = ParleyProcess(log_path=log, cwd=tempfile.gettempdir())
    http, line, pid = server.ports["http"], server.ports["line"], server.pid
    base = "http://127.0.0.1:%d" % http
    urls = {"native": "ws://127.0.0.1:%d/v3/websocket" % http, "socketio": base + "/socket.io/",
            "line": "tcp://127.0.0.1:%d" % line}
    load = loadavg()
    benches = []
    attacker = Attacker(http, base) if attacked else None
    cpu_start, attacker_start = cpu_seconds(pid), time.process_time()
    try:
        if attacker:
            attacker.start()
        results = {}
        for phase in PHASES:
            benches = []
            for door, members, rate in DOORS:
                if door not in phase:
                    continue
                args = [PARLEY, "bench", "fanout", "--url", urls[door], "--door", door, "--rooms", "1",
                        "--members", str(members), "--publishers", "1", "--rate", str(rate),
                        "--duration", str(DURATION), "--warmup", "2", "--json"]
                benches.append((door, subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
            for door, proc in benches:
                try:
                    out, err = proc.communicate(timeout=DURATION + 120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                lines = [l for l in out.splitlines() if l.startswith("{")]
                results[door] = json.loads(lines[-1]) if lines else {"ok": False, "error_samples": [err[-300:]]}
        alive = server.proc.poll() is None
        rss = peak_rss(pid)
        server_cpu = cpu_seconds(pid) - cpu_start if alive else None
        return {"load": load, "server_cpu": server_cpu, "attacker_cpu": time.process_time() - attacker_start, "results": results, "alive": alive, "rss": rss,
                "attacks": dict(attacker.counts) if attacker else {}, "attack_rounds": attacker.rounds if attacker else 0,
                "attack_failures": attacker.failures[:5] if attacker else []}
    finally:
        if attacker:
            attacker.stop()
        for _, proc in benches:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        server.kill()


def median(values):
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def main():
    runs = {"quiet": [], "attacked": []}
    for _ in range(PAIRS):
        runs["quiet"].append(run(attacked=False))
        runs["attacked"].append(run(attacked=True))
    missed = []
    print("honest clients, quiet vs attacked (default settings, %d s per door, %d alternating pairs, one sitting)" % (DURATION, PAIRS))
    print("%-9s %-9s %9s %9s %6s %6s %7s  %s" % ("door", "run", "p50 ms", "p99 ms", "lost", "dup", "errors", "loadavg"))
    p99 = {}
    for door, _, _ in DOORS:
        for name in ("quiet", "attacked"):
            for r in runs[name]:
                x = r["results"][door]
                lat = x.get("latency_ms", {})
                print("%-9s %-9s %9.2f %9.2f %6s %6s %7s  %s" % (door, name, lat.get("p50", float("nan")), lat.get("p99", float("nan")),
                                                            x.get("lost"), x.get("duplicated"), x.get("errors"), r["load"]))
                if not x.get("ok"):
                    missed.append("%s %s: not clean (%s)" % (door, name, x.get("error_samples")))
            p99[door, name] = median(r["results"][door].get("latency_ms", {}).get("p99") for r in runs[name])
        q99, a99 = p99[door, "quiet"], p99[door, "attacked"]
        print("%-9s median p99: quiet %s ms, attacked %s ms (%s)" % (
            door, "%.2f" % q99 if q99 else "?", "%.2f" % a99 if a99 else "?", "%.2f×" % (a99 / q99) if q99 and a99 else "?"))
        if q99 and a99 and a99 > P99_FACTOR * q99:
            missed.append("%s: attacked median p99 %.2f ms is over %.0f× the quiet %.2f ms" % (door, a99, P99_FACTOR, q99))
    for name in ("quiet", "attacked"):
        for r in runs[name]:
            rss = r["rss"]
            print("server %-8s peak RSS %s, %s, server CPU %s s, attacker CPU %.1f s" % (
                name, "%.0f MiB" % (rss / 2**20) if rss else "?", "up" if r["alive"] else "EXITED",
                "%.1f" % r["server_cpu"] if r["server_cpu"] is not None else "?", r["attacker_cpu"] if name == "attacked" else 0))
            if not r["alive"]:
                missed.append("the server exited in a %s run" % name)
            if rss and rss > PEAK_RSS_LIMIT:
                missed.append("%s peak RSS %.0f MiB is over %d MiB" % (name, rss / 2**20, PEAK_RSS_LIMIT >> 20))
    for r in runs["attacked"]:
        print("attacks run: %s (%d rounds of in turn + together)" % (r["attacks"], r["attack_rounds"]))
        if r["attack_failures"]:
            print("attack errors (the attacker's side): %s" % r["attack_failures"])
    for m in missed:
        print("MISSED: " + m)
    print("all targets met" if not missed else "%d target(s) missed" % len(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
