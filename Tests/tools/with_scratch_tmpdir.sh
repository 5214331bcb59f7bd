#!/bin/sh
# Runs a command with TMPDIR set to a new directory of its own, removed when the command ends
# (pass or fail): what the tests write there (servers' data, browser profiles, certificates)
# does not stay behind in /tmp. Exits with the command's status.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/parley-scratch-XXXXXX") || exit 1
TMPDIR=$scratch "$@"
status=$?
rm -rf "$scratch"
exit $status
