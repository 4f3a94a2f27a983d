#!/bin/bash
set -euo pipefail
DATA_ROOT="${MYSQL_OPERATOR_DATA_ROOT:-/var/lib/mysql}"
RUN_DIR="${MYSQL_OPERATOR_RUN_DIR:-/run/mysql-operator}"
CONFIG_DIR="${MYSQL_OPERATOR_CONFIG_DIR:-/opt/mysql-operator/config}"
FLAVOR="${MYSQL_OPERATOR_FLAVOR:?MYSQL_OPERATOR_FLAVOR must be mysql or mariadb}"
PORT="${MYSQL_OPERATOR_PORT:-3306}"
POD_NAME="${POD_NAME:?POD_NAME must be set (the Pod sets it from metadata.name)}"
ORDINAL="${POD_NAME##*-}"
case "$ORDINAL" in
  ''|*[!0-9]*) echo "start: cannot read an ordinal from pod name $POD_NAME" >&2; exit 1 ;;
esac
REPORT_HOST="$POD_NAME"
if [ -n "${HEADLESS_SERVICE:-}" ] && [ -n "${POD_NAMESPACE:-}" ]; then
  REPORT_HOST="$POD_NAME.$HEADLESS_SERVICE.$POD_NAMESPACE.svc"
fi

umask 077
mkdir -p "$RUN_DIR"
{
  cat "$CONFIG_DIR/my.cnf"
  printf '\n[mysqld]\n# identity of this instance, from its ordinal %s\n' "$ORDINAL"
  printf 'server_id = %s\nreport_host = %s\nreport_port = %s\n' "$((ORDINAL + 1))" "$REPORT_HOST" "$PORT"
} > "$RUN_DIR/my.cnf"
case "${MYSQL_OPERATOR_PASSWORD:-}" in
  *$'\n'*|*$'\r'*)
    echo "start: MYSQL_OPERATOR_PASSWORD contains a line break, which client.cnf cannot hold: set a single-line operator-password in the credentials Secret" >&2
    exit 1 ;;
esac
pw=$(printf '%s' "${MYSQL_OPERATOR_PASSWORD:-}" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')
printf '[client]\nuser = "%s"\npassword = "%s"\nsocket = "%s"\n' \
  "${MYSQL_OPERATOR_USER:-mysql-operator}" "$pw" "$RUN_DIR/mysqld.sock" > "$RUN_DIR/client.cnf"
unset pw MYSQL_OPERATOR_PASSWORD

# A re-seed's copy (seed.sh accept, MariaDB) leaves the GTID state of its data for this start
# only: the server runs it once (--init-file), from the in-memory run folder.
EXTRA=()
if [ "$FLAVOR" = mariadb ] && [ -f "$DATA_ROOT/reseed-init.sql" ]; then
  echo "start: the data is a re-seed's copy: this start gives the server the copy's GTID state" >&2
  mv "$DATA_ROOT/reseed-init.sql" "$RUN_DIR/reseed-init.sql"
  EXTRA=(--init-file="$RUN_DIR/reseed-init.sql")
fi

case "$FLAVOR" in
  mysql) SERVER=mysqld CLIENT=mysql ;;
  mariadb) SERVER=mariadbd CLIENT=mariadb ;;
  *) echo "start: unknown flavor $FLAVOR" >&2; exit 1 ;;
esac

# Before the server is asked to stop, its clients' connections are ended: a commit waiting for a
# semi-sync acknowledgement that no replica can give (a primary cut off, or fenced by a failover
# that deleted its Pod) would otherwise be released by the shutdown and answered OK, an
# acknowledged write that no other server has (measured: the k8s fault campaign lost one on MySQL
# this way). A killed connection gets an error instead. Each statement gets 1 s at most: a hung
# server is stopped without it.
# shellcheck disable=SC2329  # called from the TERM trap below
fence_clients() {
  local ids id
  if [ "$FLAVOR" = mysql ]; then  # refuses new clients too, and drops those connected
    local_sql 'SET GLOBAL offline_mode = ON' > /dev/null || true
  fi
  ids=$(local_sql "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() \
AND USER NOT IN ('system user', 'event_scheduler', SUBSTRING_INDEX(CURRENT_USER(), '@', 1)) \
AND COMMAND NOT IN ('Binlog Dump', 'Binlog Dump GTID', 'Daemon')") || return 0
  for id in $ids; do
    local_sql "KILL CONNECTION $id" > /dev/null || true
  done
}
# One statement over the socket as the operator's account, 1 s at most; its rows on stdout.
# shellcheck disable=SC2329  # called by fence_clients
local_sql() {
  timeout 1 "$CLIENT" --defaults-extra-file="$RUN_DIR/client.cnf" --connect-timeout=1 -N -B -e "$1" 2> /dev/null
}
# The server runs as this script's child, not in its place: after a re-seed's CLONE has copied a
# donor's data, MySQL restarts itself by exiting with status 16 to its supervisor
# (MYSQLD_PARENT_PID), and this loop starts it again at once, in the same container. Left to the
# kubelet, that restart would wait out the container's crash back-off, which doubles with every
# restart minutes apart (10 s, 20 s, 40 s...: a Pod re-seeded a few times waited most of a minute).
# SIGTERM and SIGINT go to the server; the script ends with the server's exit status.
export MYSQLD_PARENT_PID=$$
child=
stopping=
trap 'stopping=1; if [ -n "$child" ]; then fence_clients; kill -TERM "$child" 2>/dev/null || true; fi' TERM INT
while [ -z "$stopping" ]; do
  # A re-seed's CLONE waits in the data directory for this start to put it in place. The copy has
  # the donor's GTIDs, not this server's own history: a new server_uuid (auto.cnf is made again)
  # keeps what it writes later from reusing the GTIDs of the transactions the copy discarded.
  if [ "$FLAVOR" = mysql ] && [ -f "$DATA_ROOT/data/#clone/#replace_files" ]; then
    echo "start: a CLONE is being put in place: this server gets a new server_uuid" >&2
    rm -f "$DATA_ROOT/data/auto.cnf"
  fi
  "$SERVER" --defaults-file="$RUN_DIR/my.cnf" --datadir="$DATA_ROOT/data" \
    --socket="$RUN_DIR/mysqld.sock" --pid-file="$RUN_DIR/mysqld.pid" --port="$PORT" "${EXTRA[@]}" "$@" &
  child=$!
  status=0
  wait "$child" || status=$?
  while kill -0 "$child" 2>/dev/null; do  # a signal ended the wait, not the server: wait again
    status=0
    wait "$child" || status=$?
  done
  child=
  if [ "$status" -ne 16 ]; then
    exit "$status"
  fi
  echo "start: the server asked to be restarted (a CLONE copied its data): starting it again" >&2
  EXTRA=()  # a re-seed's init file runs once
done
exit 143
