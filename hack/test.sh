#!/usr/bin/env bash
# `make test`: builds what is missing, then the unit and integration tests (`pytest tests`) run
# beside the e2e tests (`pytest e2e`, printed as it goes), which share one local cluster (a running
# `make cluster-up` one, else one this script starts and stops). The e2e tests that disturb the
# chart's operator (marked `exclusive`: they stop, scale, replace, upgrade or pause it; or measure
# what others beside them would disturb) run first,
# one at a time; then the others, which only share it, in two processes (pytest-xdist, a file per
# process at a time). Every stream spends much of its time waiting on servers, so the suite takes
# about as long as the e2e tests' two phases. Then the suite's last check,
# e2e/test_permissions_used.py, reads the API servers' audit logs all runs wrote to one directory.
# Exits non-zero when any of them (or a build) failed; `pytest tests e2e` still runs the same suite
# serially.
#
# The binaries only a few tests use (cert-manager, Prometheus) build at the lowest CPU priority
# beside everything else, from the start: on a cold machine they take the CPU the other builds and
# then the tests leave idle, instead of delaying the first test. A test that needs one waits for
# its build (tests/support/controlplane.py build_binaries).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PY:-.venv/bin/python}
PERMISSIONS=e2e/test_permissions_used.py::test_every_declared_permission_was_used

work=$(mktemp -d -t mysqlop-test-XXXXXX)
export MYSQLOP_SUITE_AUDIT_DIR="$work/audit"
mkdir -p "$MYSQLOP_SUITE_AUDIT_DIR"
# each failed e2e test leaves its evidence there (e2e/evidence.py), outside the clone and $work
export MYSQLOP_E2E_EVIDENCE="${MYSQLOP_E2E_EVIDENCE:-/var/tmp/mysqlop-e2e-evidence/$(basename "$work")}"
pytest() { "$PY" -m pytest -p no:cacheprovider "$@"; }
# An e2e session runs in the background while this script waits for it: a SIGINT or SIGTERM to the
# script reaches it as SIGTERM (bash runs a trap only once its foreground command has ended), and it
# deletes its namespaces before it stops (e2e/conftest.py); then the EXIT trap stops the cluster.
e2e_pid=
e2e() {
    pytest e2e "$@" &
    e2e_pid=$!
    wait "$e2e_pid"
    local rc=$?
    e2e_pid=
    return "$rc"
}
stop_e2e() {
    echo "== make test: interrupted; the e2e session cleans up its namespaces"
    if [ -n "$e2e_pid" ]; then
        kill -TERM "$e2e_pid" 2>/dev/null
        wait "$e2e_pid"
    fi
    exit 130
}

start=$(date +%s)
late_builds=(cert-manager prometheus)
late_pids=()
for target in "${late_builds[@]}"; do
    nice -n 19 hack/build-binaries.sh "$target" >"$work/build-$target.log" 2>&1 &
    late_pids+=($!)
done
if ! "${MAKE:-make}" --no-print-directory -j4 images lint cluster-binaries node-binaries; then
    kill "${late_pids[@]}" 2>/dev/null
    echo "== make test: a build or the lint failed (above)"
    exit 1
fi
echo "== built in $(($(date +%s) - start)) s; the test-only binaries (${late_builds[*]}) go on building beside the tests"
{
    pytest tests --basetemp="$work/tests" >"$work/tests.log" 2>&1
    rc=$?
    date +%s >"$work/tests.done"
    exit "$rc"
} &
tests_pid=$!
echo "== pytest tests: running beside the e2e tests; its output follows theirs (pid $tests_pid)"

export MYSQLOP_SUITE_RUN="$work"  # the e2e sessions of this run share the chart's release (e2e/conftest.py)
trap stop_e2e INT TERM
cluster() { "$PY" -m tests.support.cluster "$@"; }
own_cluster=0
cluster_rc=0
if ! "$PY" -c 'import sys; from tests.support.cluster import running_state; sys.exit(running_state() is None)'; then
    own_cluster=1
    trap 'cluster down' EXIT
    cluster up >/dev/null
    cluster_rc=$?
fi
alone_rc=1
shared_rc=1
if [ "$cluster_rc" = 0 ]; then
    echo "== pytest e2e, the tests that disturb the chart's operator, one at a time"
    e2e -m exclusive --basetemp="$work/e2e-alone" --deselect "$PERMISSIONS"
    alone_rc=$?
    alone_done=$(date +%s)
    echo "== pytest e2e, the others, in ${E2E_PROCESSES:=2} processes"
    e2e -m "not exclusive" -n "$E2E_PROCESSES" --dist loadfile --basetemp="$work/e2e" \
        --deselect "$PERMISSIONS"
    shared_rc=$?
else
    echo "== make test: the local cluster did not start (above; its log: /var/tmp/mysqlop-cluster.log)"
fi
e2e_done=$(date +%s)
alone_done=${alone_done:-$e2e_done}
e2e_rc=$((alone_rc || shared_rc))
wait "$tests_pid"
tests_rc=$?
tests_done=$(cat "$work/tests.done" 2>/dev/null || date +%s)
echo
echo "== pytest tests (ran beside the e2e tests)"
cat "$work/tests.log"
if [ "$own_cluster" = 1 ]; then
    cluster down
    trap - EXIT
fi
trap - INT TERM
if [ -d "$MYSQLOP_E2E_EVIDENCE" ] && [ -n "$(ls -A "$MYSQLOP_E2E_EVIDENCE")" ]; then
    echo
    echo "== the evidence of the failed e2e tests (each folder's INDEX.txt says what is in it):"
    ls -1d "$MYSQLOP_E2E_EVIDENCE"/*
fi
echo
echo "== the permissions the operator used over all runs"
MYSQLOP_SUITE_RAN="tests=$tests_rc e2e=$e2e_rc" pytest "$PERMISSIONS" --basetemp="$work/permissions"
permissions_rc=$?

late_rc=0
for i in "${!late_builds[@]}"; do
    if ! wait "${late_pids[$i]}"; then
        late_rc=1
        echo "== hack/build-binaries.sh ${late_builds[$i]} failed:"
        tail -n 30 "$work/build-${late_builds[$i]}.log"
    fi
done

echo
echo "== make test: pytest tests exit $tests_rc at $((tests_done - start)) s," \
    "pytest e2e (exclusive) exit $alone_rc at $((alone_done - start)) s," \
    "pytest e2e (the others) exit $shared_rc at $((e2e_done - start)) s, permissions exit $permissions_rc," \
    "$(($(date +%s) - start)) s in all"
if [ "$tests_rc" = 0 ] && [ "$e2e_rc" = 0 ] && [ "$permissions_rc" = 0 ] && [ "$late_rc" = 0 ]; then
    rm -rf "$work"
else
    echo "== kept for a look: $work (the runs' temporary files and audit logs)"
    exit 1
fi
