#!/usr/bin/env python3
"""Runs `swift test --skip-build --no-parallel`, streams its output, and when it fails prints a
short summary as the LAST lines: the failed tests, and for a crash the test that was running
and the first frames of the crashed thread.

CI shows only the tail of a failed run. Without this, a crash leaves the backtracer's register
dump and image list there, and neither the test's name nor the crashing frame.

Usage: run_unit_tests.py [LOG] [-- extra swift test arguments]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def summarize(lines):
    out = []
    started = {}
    failed = []
    for line in lines:
        m = re.search(r"Test Case '([^']+)' started", line)
        if m:
            started[m.group(1)] = True
            continue
        m = re.search(r"Test Case '([^']+)' (passed|failed|skipped)", line)
        if m:
            started.pop(m.group(1), None)
            if m.group(2) == "failed":
                failed.append(m.group(1))
            continue
        # Swift Testing: "◇ Test name() started.", "✔ Test name() passed after …",
        # "✘ Test name() failed after …", "✘ Test name() recorded an issue at …".
        m = re.search(r"◇ Test (.+?) started\.$", line)
        if m and not m.group(1).startswith("case ") and m.group(1) != "run":
            started["Test " + m.group(1)] = True
            continue
        m = None if "recorded an issue" in line else re.search(r"[✔✘↷] Test (.+?) (?:with \d+ test cases? )?(passed|failed|skipped)", line)
        if m:
            started.pop("Test " + m.group(1), None)
            if m.group(2) == "failed" and not m.group(1).startswith("run with "):
                failed.append(m.group(1))
    errors = [l for l in lines if re.search(r": error: |XCTAssert|Fatal error|Precondition failed|"
                                             r"Assertion failed|Unexpectedly found nil|recorded an issue|"
                                             # glibc's heap checks and Swift runtime aborts
                                             r"free\(\)|malloc|corrupted|double free|Incorrect actor|"
                                             r"Simultaneous accesses|CONTINUATION MISUSE", l)]
    out.append("==== unit test summary ====")
    if failed:
        out.append("failed: " + ", ".join(failed[:40]))
    for l in errors[:4]:
        out.append("  " + l.strip()[:200])
    crash = None
    for i, l in enumerate(lines):
        if "*** Signal" in l or "Program crashed" in l or re.search(r"Thread \d+ crashed", l):
            crash = i
            break
    if crash is not None:
        # CI keeps only about twenty lines of the tail: the crashed thread alone (it ends at
        # the next thread's header), its first frames, and the running test's name last.
        shown = 0
        for j, l in enumerate(lines[crash:]):
            if l.startswith("Registers") or l.startswith("Images"):
                break
            if j > 0 and re.match(r"\s*Thread \d+", l) and "crashed" not in l:
                break
            if l.strip() and l.strip() != "...":
                out.append("  " + l.rstrip()[:200])
                shown += 1
            if shown >= 14:
                break
        out.append("running when it crashed: " + (", ".join(started.keys()) or "(no test had started)"))
    return out


def main():
    args = sys.argv[1:]
    log = ".build/unit-tests.log"
    extra = []
    if "--" in args:
        i = args.index("--")
        extra = args[i + 1:]
        args = args[:i]
    if args:
        log = args[0]
    cmd = [os.environ.get("SWIFT", "swift"), "test", "--skip-build", "--no-parallel"] + extra
    lines = []
    # The tests' data directories, databases and certificates go to a temporary directory of
    # this run (TMPDIR), removed when the run ends, so runs leave nothing behind in /tmp.
    scratch = tempfile.mkdtemp(prefix="parley-unit-")
    env = dict(os.environ, TMPDIR=scratch)
    try:
        with open(log, "w", encoding="utf-8", errors="replace") as f:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
            for raw in proc.stdout:
                text = raw.decode("utf-8", errors="replace")
                sys.stdout.write(text)
                sys.stdout.flush()
                f.write(text)
                lines.append(text.rstrip("\n"))
            rc = proc.wait()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if rc != 0:
        print("\n".join(summarize(lines)))
        print(f"swift test exited with {rc}; the whole output is in {log}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
