"""Summarizes Autobahn|Testsuite reports (index.json) for `make conformance`.

usage: summarize.py LABEL INDEX_JSON [LABEL INDEX_JSON ...]
Prints counts per behavior and every case that is not OK (behavior or close behavior);
exits 1 if any case FAILED (or is missing), 0 otherwise. Python 2.7 and 3 compatible.
"""
from __future__ import print_function
import json
import sys

BEHAVIORS = ["OK", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED", "FAILED"]


def case_key(case_id):
    return [int(part) for part in case_id.split(".")]


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__)
        return 2
    failed = False
    rows = []
    details = []
    for label, path in zip(argv[0::2], argv[1::2]):
        try:
            with open(path) as f:
                index = json.load(f)
        except (IOError, ValueError) as error:
            print("%s: no report (%s)" % (label, error))
            failed = True
            continue
        for agent, cases in sorted(index.items()):
            counts = dict((b, 0) for b in BEHAVIORS)
            for case_id in sorted(cases, key=case_key):
                result = cases[case_id]
                behavior = result.get("behavior", "?")
                close = result.get("behaviorClose", "?")
                counts[behavior] = counts.get(behavior, 0) + 1
                if behavior == "FAILED" or close == "FAILED":
                    failed = True
                if behavior != "OK" or close not in ("OK", "INFORMATIONAL"):
                    details.append("  %-7s %-8s %-14s close=%-13s %s" % (
                        label, case_id, behavior, close, result.get("reportfile", "")))
            rows.append((label, agent, len(cases), counts))
    header = "%-7s %-8s %6s" % ("side", "agent", "cases") + "".join(" %13s" % b for b in BEHAVIORS)
    print(header)
    for label, agent, total, counts in rows:
        print("%-7s %-8s %6d" % (label, agent, total) + "".join(" %13d" % counts.get(b, 0) for b in BEHAVIORS))
    if details:
        print("\nnot OK:")
        print("\n".join(details))
    else:
        print("\nevery case OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
