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
  ready) exec "$CLIENT" --defaults-extra-file="$RUN_DIR/client.cnf" --connect-timeout=5 -N -e 'SELECT 1' >/dev/null ;;
  *) echo "usage: probe.sh alive|ready" >&2; exit 2 ;;
esac
