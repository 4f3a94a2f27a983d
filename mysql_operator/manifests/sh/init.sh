#!/bin/bash
set -euo pipefail
DATA_ROOT="${MYSQL_OPERATOR_DATA_ROOT:-/var/lib/mysql}"
RUN_DIR="${MYSQL_OPERATOR_RUN_DIR:-/run/mysql-operator}"
FLAVOR="${MYSQL_OPERATOR_FLAVOR:?MYSQL_OPERATOR_FLAVOR must be mysql or mariadb}"
DATADIR="$DATA_ROOT/data"
STAGING="$DATA_ROOT/data.initialising"
log() { echo "init: $*" >&2; }

if [ -d "$DATADIR" ]; then
  log "$DATADIR exists: already initialised, nothing to do"
  exit 0
fi
for v in MYSQL_ROOT_PASSWORD MYSQL_OPERATOR_PASSWORD MYSQL_REPLICATION_PASSWORD MYSQL_OPERATOR_USER MYSQL_REPLICATION_USER; do
  if [ -z "${!v:-}" ]; then
    log "$v is empty: the credentials Secret is missing a key (see spec.credentials)"
    exit 1
  fi
done
for v in MYSQL_OPERATOR_GRANTS MYSQL_REPLICATION_GRANTS ${MYSQL_APP_USER:+MYSQL_APP_GRANTS}; do
  if [ -z "${!v:-}" ]; then
    log "$v is empty: this Pod's spec is older than its ConfigMap; delete the Pod"
    exit 1
  fi
done
if [ -n "${MYSQL_APP_USER:-}" ] && [ -z "${MYSQL_APP_PASSWORD:-}" ]; then
  log "MYSQL_APP_PASSWORD is empty: the credentials Secret is missing app-password"
  exit 1
fi

umask 077
mkdir -p "$RUN_DIR"
SQL="$RUN_DIR/bootstrap.sql"
CNF="$RUN_DIR/init.cnf"
trap 'rm -f "$SQL" "$CNF"' EXIT
rm -rf "$STAGING"  # an earlier attempt that did not finish: it never served
mkdir -p "$STAGING"

q() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/''/g"; }
# account NAME PASSWORD GRANTS: NAME@'%' with one GRANT per line of GRANTS, each
# "<privileges> ON <target>[ WITH GRANT OPTION]", or "REVOKE <privileges> ON <target>"
# (the operator renders them from db/accounts.py)
account() {
  echo "CREATE USER '$1'@'%' IDENTIFIED BY '$(q "$2")';"
  printf '%s\n' "$3" | while IFS= read -r g; do
    case "$g" in
      '') ;;
      "REVOKE "*) echo "$g FROM '$1'@'%';" ;;
      *" WITH GRANT OPTION") echo "GRANT ${g% WITH GRANT OPTION} TO '$1'@'%' WITH GRANT OPTION;" ;;
      *) echo "GRANT $g TO '$1'@'%';" ;;
    esac
  done
}
{
  if [ "$FLAVOR" = mariadb ]; then
    # bootstrap mode starts without privilege tables: load them; no anonymous users, root local-only
    echo "FLUSH PRIVILEGES;"
    echo "DELETE FROM mysql.global_priv WHERE User='' OR (User='root' AND Host<>'localhost');"
    echo "FLUSH PRIVILEGES;"
  fi
  echo "SET SESSION sql_log_bin = 0;"
  echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$(q "$MYSQL_ROOT_PASSWORD")';"
  account "$MYSQL_OPERATOR_USER" "$MYSQL_OPERATOR_PASSWORD" "$MYSQL_OPERATOR_GRANTS"
  account "$MYSQL_REPLICATION_USER" "$MYSQL_REPLICATION_PASSWORD" "$MYSQL_REPLICATION_GRANTS"
  if [ -n "${MYSQL_BACKUP_PASSWORD:-}" ]; then  # absent from a Secret of the user's: no backups
    account "$MYSQL_BACKUP_USER" "$MYSQL_BACKUP_PASSWORD" "$MYSQL_BACKUP_GRANTS"
  fi
  if [ -n "${MYSQL_SQL_PASSWORD:-}" ]; then  # absent from a Secret of the user's: no SQL objects
    account "$MYSQL_SQL_USER" "$MYSQL_SQL_PASSWORD" "$MYSQL_SQL_GRANTS"
  fi
  if [ -n "${MYSQL_RESTORE_PASSWORD:-}" ]; then  # spec.restore: loads the dump, then is dropped
    account "$MYSQL_RESTORE_USER" "$MYSQL_RESTORE_PASSWORD" "$MYSQL_RESTORE_GRANTS"
  fi
  if [ -n "${MYSQL_APP_DATABASE:-}" ]; then
    echo "CREATE DATABASE IF NOT EXISTS \`$MYSQL_APP_DATABASE\`;"
  fi
  if [ -n "${MYSQL_APP_USER:-}" ]; then
    account "$MYSQL_APP_USER" "$MYSQL_APP_PASSWORD" "$MYSQL_APP_GRANTS"
  fi
} > "$SQL"
printf '[mysqld]\ndatadir = %s\nsocket = %s\npid_file = %s\nskip_networking = ON\n' \
  "$STAGING" "$RUN_DIR/init.sock" "$RUN_DIR/init.pid" > "$CNF"

log "initialising an empty data directory ($FLAVOR)"
case "$FLAVOR" in
  mysql)
    mysqld --defaults-file="$CNF" --initialize-insecure --skip-log-bin --init-file="$SQL"
    ;;
  mariadb)
    mariadb-install-db --defaults-file="$CNF" --auth-root-authentication-method=normal \
      --skip-test-db --skip-name-resolve >&2
    mariadbd --defaults-file="$CNF" --bootstrap --skip-log-bin < "$SQL" >&2
    ;;
  *)
    log "unknown flavor $FLAVOR"
    exit 1
    ;;
esac
mv "$STAGING" "$DATADIR"
log "initialised $DATADIR"
