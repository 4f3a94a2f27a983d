#!/bin/bash
set -u
RUN_DIR="${MYSQL_OPERATOR_RUN_DIR:-/run/mysql-operator}"
case "${MYSQL_OPERATOR_FLAVOR:-}" in
  mysql) ADMIN=mysqladmin CLIENT=mysql ;;
  mariadb) ADMIN=mariadb-admin CLIENT=mariadb ;;
  *) echo "probe: unknown flavor" >&2; exit 1 ;;
esac
case "${1:-}" in
  alive) exec "$ADMIN" --defaults-extra-file="$RUN_DIR/client.cnf" --connect-timeout=5 ping >/dev/null ;;
  ready)
    out=$("$CLIENT" --defaults-extra-file="$RUN_DIR/client.cnf" --connect-timeout=5 -N -e 'SELECT 1' 2>&1 >/dev/null) && exit 0
    # the server answered but refused the operator password this container started with: it was
    # rotated since (the operator applies rotations with ALTER USER); the server serves
    case "$out" in *"ERROR 1045"*) exit 0 ;; esac
    echo "$out" >&2
    exit 1 ;;
  *) echo "usage: probe.sh alive|ready" >&2; exit 2 ;;
esac
