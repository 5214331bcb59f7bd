#!/usr/bin/env python3
"""Fails when a tracked text file still holds a merge-conflict marker.

A marker is a line that starts with seven '<', seven '>' (each followed by a space or the
end of the line), or is exactly seven '='. `--self-test` checks the matcher itself.
"""
import re
import subprocess
import sys

MARKER = re.compile(r"^(<{7}|>{7})( |$)|^={7}$")


def markers(text):
    return [number for number, line in enumerate(text.splitlines(), 1) if MARKER.match(line)]


def self_test():
    found = markers("a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> other\n")
    assert found == [2, 4, 6], found
    assert markers("======= not a marker\n<<<<<<<< eight\n| ======= |\n") == []
    print("check_conflict_markers: self-test ok")


def main():
    if "--self-test" in sys.argv:
        return self_test()
    files = subprocess.run(["git", "ls-files", "-z"], check=True, capture_output=True).stdout.split(b"\0")
    bad = []
    for name in filter(None, files):
        try:
            with open(name, "rb") as handle:
                data = handle.read()
        except (FileNotFoundError, IsADirectoryError):
            continue
        if b"\0" in data[:8192]:
            continue  # binary
        for number in markers(data.decode("utf-8", "replace")):
            bad.append(f"{name.decode()}:{number}")
    if bad:
        print("merge-conflict markers left in:\n  " + "\n  ".join(bad), file=sys.stderr)
        sys.exit(1)
    print(f"check_conflict_markers: {len([f for f in files if f])} files, no markers")


main()
