"""What `--redis-replicas-ack 1` costs in acknowledged publishes per second (docs/cluster.md):
a Redis master with one replica on 127.0.0.1, one Parley node on it, and `parley bench
publish-durable` against the node, with and without the option, alternating (RUNS pairs,
default 3). Prints each run with /proc/loadavg, and the medians. Refuses on a busy machine
(load average above 2.5): the figures would say nothing.

Run: make bench-replicas-ack   (or PARLEY_BIN=.build/release/parley python3 Tests/bench/replicas_ack_cost.py)
"""
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PARLEY = os.path.abspath(os.environ.get("PARLEY_BIN", ".build/release/parley"))
RUNS = int(os.environ.get("RUNS", "3"))
DURATION = os.environ.get("BENCH_SECONDS", "8")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis(port, *extra):
    directory = tempfile.mkdtemp(prefix="parley-ackcost-")
    return subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", directory, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=10).stdout.strip()


def wait(what, predicate, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    sys.exit("timed out waiting for " + what)


def run(master, replicas_ack):
    data = tempfile.mkdtemp(prefix="parley-ackcost-node-")
    args = [PARLEY, "serve", "--host", "127.0.0.1", "--http-port", "0", "--line-port", "0", "--data", data,
            "--redis", "redis://127.0.0.1:%d" % master, "--redis-prefix", "ack%d-%d" % (replicas_ack, time.time_ns()),
            "--publish-rate", "1000000", "--loops", "1"]
    if replicas_ack:
        args += ["--redis-replicas-ack", str(replicas_ack)]
    node = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = None
        deadline = time.time() + 20
        while port is None and time.time() < deadline:
            line = node.stdout.readline()
            found = re.match(r"http listening on 127\.0\.0\.1:(\d+)", line)
            if found:
                port = int(found.group(1))
        assert port, "the node did not start"
        time.sleep(1)
        out = subprocess.run([PARLEY, "bench", "publish-durable", "--url", "ws://127.0.0.1:%d/v3/websocket" % port,
                              "--publishers", "50", "--window", "16", "--duration", DURATION, "--json"],
                             capture_output=True, text=True, timeout=120)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        return result
    finally:
        node.kill()
        node.wait()


def main():
    load = float(open("/proc/loadavg").read().split()[0])
    if load > 2.5:
        sys.exit("load average %.2f: too busy to measure (wait for a quiet machine)" % load)
    master, replica = free_port(), free_port()
    processes = [redis(master), redis(replica, "--replicaof", "127.0.0.1", str(master))]
    try:
        wait("the master", lambda: cli(master, "PING") == "PONG")
        wait("the replica in sync", lambda: "master_link_status:up" in cli(replica, "INFO", "replication"))
        figures = {0: [], 1: []}
        for index in range(RUNS):
            for ack in (0, 1):
                result = run(master, ack)
                loadavg = open("/proc/loadavg").read().strip()
                figures[ack].append(result["acked_per_s"])
                print("run %d  --redis-replicas-ack %d: %8.0f acked publishes/s  p50 %.2f ms  p99 %.2f ms  errors %s  loadavg %s" % (
                    index + 1, ack, result["acked_per_s"], result["latency_ms"]["p50"], result["latency_ms"]["p99"],
                    result.get("errors"), loadavg), flush=True)
        without, with_ack = statistics.median(figures[0]), statistics.median(figures[1])
        print("median: without %.0f/s, with --redis-replicas-ack 1 %.0f/s (%.2fx)" % (without, with_ack, with_ack / without))
    finally:
        for process in processes:
            process.kill()


if __name__ == "__main__":
    main()
