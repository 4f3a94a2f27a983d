#!/bin/sh
# The metrics sidecar of a server Pod: prometheus/mysqld_exporter on port $EXPORTER_PORT, connected
# over the server's socket as the monitoring account (db/accounts.py monitor_grants). It runs in the
# exporter image (prometheus/mysqld_exporter's: busybox and /bin/mysqld_exporter), never in the
# server image, so it is POSIX sh: busybox's sh runs it.
#
# The password comes from the file $MONITOR_PASSWORD_FILE (the credentials Secret's
# monitor-password, mounted: the kubelet renews the file when the Secret changes). The exporter
# reads it from its environment (MYSQLD_EXPORTER_PASSWORD, never argv or a file it parses), so any
# character works; when the file changes (a rotation) the exporter is started again with the new one.
# Without the file (a Secret of the user's without monitor-password) it waits for it, saying so.
set -u
RUN_DIR="${MYSQL_OPERATOR_RUN_DIR:-/run/mysql-operator}"
PASSWORD_FILE="${MONITOR_PASSWORD_FILE:-/etc/mysql-operator/monitor/password}"
CNF="$RUN_DIR/exporter.cnf"
EXPORTER="${MYSQLD_EXPORTER:-mysqld_exporter}"
pid=""

log() { echo "exporter: $*" >&2; }
stop() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid"
  exit 0
}
trap stop TERM INT

if ! command -v "$EXPORTER" >/dev/null; then
  log "this image has no $EXPORTER: no metrics (spec.monitoring.image must be a mysqld_exporter image, or set spec.monitoring.enabled: false)"
  while :; do sleep 3600 & wait $!; done
fi
umask 077
printf '[client]\nuser = %s\nsocket = %s\n' "${MONITOR_USER:-mysql-operator-monitor}" "$RUN_DIR/mysqld.sock" > "$CNF"

while :; do
  if [ ! -s "$PASSWORD_FILE" ]; then
    log "no monitor-password in the credentials Secret yet: add it to serve metrics (README, Monitoring)"
    while [ ! -s "$PASSWORD_FILE" ]; do sleep 10 & wait $!; done
  fi
  sum=$(md5sum < "$PASSWORD_FILE")
  MYSQLD_EXPORTER_PASSWORD=$(cat "$PASSWORD_FILE") "$EXPORTER" \
    --config.my-cnf="$CNF" \
    --web.listen-address=":${EXPORTER_PORT:-9104}" \
    --collect.global_status --collect.global_variables --collect.slave_status \
    --collect.info_schema.innodb_metrics --collect.info_schema.processlist \
    --collect.binlog_size \
    --no-collect.info_schema.query_response_time &
  pid=$!
  # the Secret's file changes (a rotation), or the exporter ends: start it again
  while kill -0 "$pid" 2>/dev/null && [ "$(md5sum < "$PASSWORD_FILE" 2>/dev/null)" = "$sum" ]; do
    sleep 5 & wait $!
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "monitor-password changed: restarting the exporter with the new one"
    kill "$pid"
  fi
  wait "$pid"
  pid=""
  sleep 1 & wait $!
done
