#!/usr/bin/env bash
# `make test`'s suites, side by side: `tests` (unit, and integration against its own control plane
# and servers on loopback) in the background, `e2e` (the local cluster) in the foreground. They
# share nothing but the machine: most of their time is spent waiting on servers, not computing.
# e2e/test_permissions_used.py, which reads what both made the operator do, waits for `tests` to
# end (tests/support/suites.py). The `tests` output follows the e2e output; the exit status is
# non-zero when either failed. Extra arguments go to both pytest runs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PY:-.venv/bin/python}
MYSQLOP_SUITE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mysqlop-suites.XXXXXX")
export MYSQLOP_SUITE_DIR
trap 'rm -rf "$MYSQLOP_SUITE_DIR"' EXIT

started=$SECONDS
"$PY" -m pytest tests "$@" > "$MYSQLOP_SUITE_DIR/tests.log" 2>&1 &
tests_pid=$!
trap 'kill "$tests_pid" 2>/dev/null; rm -rf "$MYSQLOP_SUITE_DIR"' EXIT
echo "== tests/ (unit, integration) runs beside e2e/; its output follows e2e's"
"$PY" -m pytest e2e "$@"
e2e_status=$?
e2e_took=$((SECONDS - started))
wait "$tests_pid"
tests_status=$?
echo "== tests/ (unit, integration), run beside e2e/:"
cat "$MYSQLOP_SUITE_DIR/tests.log"
echo "== e2e/: exit status $e2e_status after ${e2e_took}s; tests/: exit status $tests_status; both ended after $((SECONDS - started))s"
[ "$e2e_status" -eq 0 ] && [ "$tests_status" -eq 0 ]
