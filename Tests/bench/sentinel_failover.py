#!/usr/bin/env python3
"""Acknowledged-but-lost messages across a Redis master SIGKILL under Sentinel, with and
without --redis-replicas-ack: runs SentinelFailoverTests RUNS times (each run does both
settings) and sums the `sentinel-failover ...` lines it prints.

    make bench-failover                 # 10 runs, window 16
    FAILOVER_RUNS=20 PARLEY_FAILOVER_WINDOW=64 make bench-failover

It needs a built test bundle (`swift build --build-tests`). The machine must be otherwise
idle: with a load average above 2.5 it refuses (FAILOVER_FORCE=1 runs anyway), since a busy
machine slows replication and the failover and makes the figures meaningless.
"""
import os
import re
import subprocess
import sys

LINE = re.compile(r"sentinel-failover replicas-ack=(\d+) window=(\d+) acknowledged=(\d+) failed=(\d+) "
                  r"acknowledged-but-lost=(\d+) resumed-after=([\d.]+)s")


def main() -> int:
    runs = int(os.environ.get("FAILOVER_RUNS", "10"))
    load = os.getloadavg()[0]
    if load > 2.5 and os.environ.get("FAILOVER_FORCE") != "1":
        print(f"load average {load:.2f} > 2.5: not measuring (FAILOVER_FORCE=1 to run anyway)")
        return 2
    swift = os.environ.get("SWIFT", "swift")
    results: dict[int, list[tuple[int, int, int, float]]] = {}
    for run in range(runs):
        out = subprocess.run([swift, "test", "--skip-build", "--filter", "SentinelFailoverTests"],
                             capture_output=True, text=True, timeout=300)
        found = [LINE.search(line) for line in out.stdout.splitlines()]
        found = [m for m in found if m]
        if out.returncode != 0 or len(found) != 2:
            print(f"run {run + 1}: the test failed\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}")
            return 1
        for m in found:
            ack, window, acked, failed, lost, resumed = m.groups()
            results.setdefault(int(ack), []).append((int(acked), int(failed), int(lost), float(resumed)))
            print(f"run {run + 1}: replicas-ack={ack} window={window} acknowledged={acked} lost={lost} resumed={resumed}s")
    print()
    print("| --redis-replicas-ack | runs | acknowledged | acknowledged-but-lost (total) | runs with a loss | publishing resumed after (median / max) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for ack in sorted(results):
        rows = results[ack]
        resumed = sorted(r[3] for r in rows)
        print(f"| {ack} | {len(rows)} | {sum(r[0] for r in rows)} | {sum(r[2] for r in rows)} | "
              f"{sum(1 for r in rows if r[2])} | {resumed[len(resumed) // 2]:.2f} s / {resumed[-1]:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
