"""Shell scripts shipped in the cluster's ConfigMap and run inside the server image.

They are constant text: everything that varies comes from environment variables set by the
StatefulSet (flavor, pod identity, credentials from the Secret). They never print a password and
never use `set -x`. Paths can be overridden by environment (tests run them against a local server).
"""

# Initialise an EMPTY data directory, once, explicitly. An existing data directory is never touched.
# The new directory is built under a staging name and renamed when complete, so a crash midway
# never leaves a half-initialised directory that a server would later start on.
INIT_SH = r"""#!/bin/bash
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
"""

# Start the server with the ConfigMap's my.cnf plus this instance's identity (from the pod ordinal).
START_SH = r"""#!/bin/bash
set -euo pipefail
DATA_ROOT="${MYSQL_OPERATOR_DATA_ROOT:-/var/lib/mysql}"
RUN_DIR="${MYSQL_OPERATOR_RUN_DIR:-/run/mysql-operator}"
CONFIG_DIR="${MYSQL_OPERATOR_CONFIG_DIR:-/opt/mysql-operator/config}"
FLAVOR="${MYSQL_OPERATOR_FLAVOR:?MYSQL_OPERATOR_FLAVOR must be mysql or mariadb}"
PORT="${MYSQL_OPERATOR_PORT:-3306}"
POD_NAME="${POD_NAME:-$(hostname)}"
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

case "$FLAVOR" in
  mysql) SERVER=mysqld ;;
  mariadb) SERVER=mariadbd ;;
  *) echo "start: unknown flavor $FLAVOR" >&2; exit 1 ;;
esac
exec "$SERVER" --defaults-file="$RUN_DIR/my.cnf" --datadir="$DATA_ROOT/data" \
  --socket="$RUN_DIR/mysqld.sock" --pid-file="$RUN_DIR/mysqld.pid" --port="$PORT" "$@"
"""

# Probes. alive: the server process answers (even "access denied" means alive).
# ready: the operator's account can run a query over the local socket.
PROBE_SH = r"""#!/bin/bash
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
"""



# The backup and restore Jobs' `client-tools` sidecar (a native sidecar in the cluster's server
# image): runs the client tools the Job's main container asks for in sub-folders of the shared
# folder $1 (see backup/sidecar.py) - each run reads its input from the FIFO `stdin`, writes into
# the FIFOs `stdout` and `stderr`, and its exit status into `status` - until the Pod ends. It runs
# only mysqldump, mariadb-dump, mysql or mariadb, and never prints their arguments.
CLIENT_TOOLS_SH = r"""set -u
DIR="${1:?usage: client-tools.sh FOLDER}"
trap 'exit 0' TERM INT
tool() {
  case "${argv[0]:-}" in
    mysqldump|mariadb-dump|mysql|mariadb) ;;
    *) echo "client-tools: refusing to run ${argv[0]:-nothing}: only mysqldump, mariadb-dump, mysql, mariadb" >&2
       return 126 ;;
  esac
  if ! command -v "${argv[0]}" >/dev/null; then
    echo "client-tools: ${argv[0]} is not in this image (the cluster's server image)" >&2
    return 127
  fi
  "${argv[@]}"
}
serve() {  # $1: a run's folder. The FIFOs open in the order the requester opens them.
  local run="$1" argv
  mapfile -d '' argv < "$run/request"
  tool < "$run/stdin" > "$run/stdout" 2> "$run/stderr"
  echo $? > "$run/status.tmp"
  mv "$run/status.tmp" "$run/status"
}
while :; do
  for request in "$DIR"/run-*/request; do
    run="${request%/request}"
    [ -f "$request" ] && mkdir "$run/taken" 2>/dev/null || continue
    serve "$run" &
  done
  sleep 0.1
done
"""
