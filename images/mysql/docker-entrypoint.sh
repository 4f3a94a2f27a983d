#!/bin/bash
# Entrypoint compatible with the official mysql image's environment:
#   MYSQL_ROOT_PASSWORD | MYSQL_ALLOW_EMPTY_PASSWORD | MYSQL_RANDOM_ROOT_PASSWORD (one is required
#   on an empty datadir), MYSQL_ROOT_HOST (default %), MYSQL_DATABASE, MYSQL_USER + MYSQL_PASSWORD;
#   each also as *_FILE (read from a file).
# On an empty datadir it initialises the server, creates those accounts, runs
# /docker-entrypoint-initdb.d/*.{sh,sql,sql.gz,sql.zst} in order, then starts the server.
# Passwords never appear on a command line or in the output.
# (The operator does not use this entrypoint: its Pods run their own init.sh/start.sh.)
set -eo pipefail
shopt -s nullglob

note() { printf '%s [Note] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$*"; }
error() { printf '%s [ERROR] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$*" >&2; exit 1; }

# file_env VAR [DEFAULT]: VAR from VAR, VAR_FILE, or DEFAULT.
file_env() {
  local var="$1" def="${2:-}" file_var="${1}_FILE" val="${2:-}"
  if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then
    error "both $var and $file_var are set (but are exclusive)"
  fi
  if [ -n "${!var:-}" ]; then val="${!var}"
  elif [ -n "${!file_var:-}" ]; then val="$(< "${!file_var}")"
  else val="$def"
  fi
  export "$var"="$val"
  unset "$file_var"
}

# The value of server option $1 after the config files and the command line ("$@" after $1).
server_option() {
  local opt="$1"; shift
  "$@" --verbose --help 2>/dev/null \
    | awk -v opt="$opt" '$1 == opt && /^[^ \t]/ { sub(/^[^ \t]+[ \t]+/, ""); print; exit }'
}

sql_escape() {  # for a '...' literal
  local s="${1//\\/\\\\}"
  printf '%s' "${s//\'/\\\'}"
}

option_escape() {  # for a "..." value in an option file
  local s="${1//\\/\\\\}"
  printf '%s' "${s//\"/\\\"}"
}

# SQL on stdin to the temporary server, as root, over the socket; the password through a pipe.
process_sql() {
  mysql --defaults-extra-file=<(printf '[client]\npassword="%s"\n' "$(option_escape "${ROOT_PASSWORD_NOW:-}")") \
    --protocol=socket -uroot -hlocalhost --socket="$SOCKET" --comments "$@"
}

docker_process_sql() {  # the official image's name, for initdb scripts
  if [ -n "$MYSQL_DATABASE" ]; then set -- --database="$MYSQL_DATABASE" "$@"; fi
  process_sql "$@"
}

run_initdb_file() {
  local f="$1" db_arg=()
  [ -n "$MYSQL_DATABASE" ] && db_arg=(--database="$MYSQL_DATABASE")
  case "$f" in
    *.sh)  # shellcheck disable=SC1090 # (initdb scripts are the user's)
      if [ -x "$f" ]; then note "running $f"; "$f"; else note "sourcing $f"; . "$f"; fi ;;
    *.sql) note "running $f"; process_sql "${db_arg[@]}" < "$f" ;;
    *.sql.gz) note "running $f"; gunzip -c "$f" | process_sql "${db_arg[@]}" ;;
    *.sql.zst) note "running $f"; zstd -dc "$f" | process_sql "${db_arg[@]}" ;;
    *) note "ignoring $f" ;;
  esac
}

init_datadir() {  # "$@": the server command line
  file_env MYSQL_ROOT_PASSWORD
  file_env MYSQL_ALLOW_EMPTY_PASSWORD
  file_env MYSQL_RANDOM_ROOT_PASSWORD
  file_env MYSQL_ROOT_HOST '%'
  file_env MYSQL_DATABASE
  file_env MYSQL_USER
  file_env MYSQL_PASSWORD
  if [ -z "$MYSQL_ROOT_PASSWORD" ] && [ -z "$MYSQL_ALLOW_EMPTY_PASSWORD" ] && [ -z "$MYSQL_RANDOM_ROOT_PASSWORD" ]; then
    error "the database is uninitialized and no root password option is set: set MYSQL_ROOT_PASSWORD (or MYSQL_ROOT_PASSWORD_FILE), MYSQL_ALLOW_EMPTY_PASSWORD=1 or MYSQL_RANDOM_ROOT_PASSWORD=1"
  fi
  if [ "$MYSQL_USER" = root ]; then
    error "MYSQL_USER=root is not allowed: root is created from MYSQL_ROOT_PASSWORD"
  fi
  if [ -n "$MYSQL_PASSWORD" ] && [ -z "$MYSQL_USER" ]; then
    error "MYSQL_PASSWORD is set but MYSQL_USER is not: set both"
  fi
  if [ -n "$MYSQL_RANDOM_ROOT_PASSWORD" ]; then
    MYSQL_ROOT_PASSWORD="$(head -c 24 /dev/urandom | base64)"
    note "GENERATED ROOT PASSWORD written to $DATADIR/.root-password (mode 0600)"
  fi

  note "Initializing database files in $DATADIR"
  "$@" --initialize-insecure --default-time-zone=SYSTEM --skip-log-bin
  "$@" --skip-networking --default-time-zone=SYSTEM --socket="$SOCKET" --skip-log-bin \
    --skip-replica-start &
  local pid=$! _
  note "Waiting for the temporary server (pid $pid)"
  for _ in $(seq 60); do
    kill -0 "$pid" 2>/dev/null || error "the temporary server exited during initialisation"
    if process_sql --database=mysql <<<'SELECT 1' >/dev/null 2>&1; then break; fi
    sleep 1
  done
  process_sql --database=mysql <<<'SELECT 1' >/dev/null || error "the temporary server did not accept connections within 60s"

  local root_pw create_root="" create_db="" create_user=""
  root_pw="$(sql_escape "$MYSQL_ROOT_PASSWORD")"
  if [ -n "$MYSQL_ROOT_HOST" ] && [ "$MYSQL_ROOT_HOST" != localhost ]; then
    create_root="CREATE USER 'root'@'$(sql_escape "$MYSQL_ROOT_HOST")' IDENTIFIED BY '${root_pw}';
GRANT ALL ON *.* TO 'root'@'$(sql_escape "$MYSQL_ROOT_HOST")' WITH GRANT OPTION;"
  fi
  if [ -n "$MYSQL_DATABASE" ]; then
    note "Creating database ${MYSQL_DATABASE}"
    create_db="CREATE DATABASE IF NOT EXISTS \`${MYSQL_DATABASE//\`/\`\`}\`;"
  fi
  if [ -n "$MYSQL_USER" ]; then
    note "Creating user ${MYSQL_USER}"
    create_user="CREATE USER '$(sql_escape "$MYSQL_USER")'@'%' IDENTIFIED BY '$(sql_escape "$MYSQL_PASSWORD")';"
    if [ -n "$MYSQL_DATABASE" ]; then
      create_user+="
GRANT ALL ON \`${MYSQL_DATABASE//\`/\`\`}\`.* TO '$(sql_escape "$MYSQL_USER")'@'%';"
    fi
  fi
  process_sql --database=mysql <<EOSQL
SET @@SESSION.SQL_LOG_BIN=0;
ALTER USER 'root'@'localhost' IDENTIFIED BY '${root_pw}';
${create_root}
${create_db}
${create_user}
EOSQL
  ROOT_PASSWORD_NOW="$MYSQL_ROOT_PASSWORD"
  if [ -n "$MYSQL_RANDOM_ROOT_PASSWORD" ]; then
    (umask 077; printf '%s\n' "$MYSQL_ROOT_PASSWORD" > "$DATADIR/.root-password")
  fi

  local f
  for f in /docker-entrypoint-initdb.d/*; do run_initdb_file "$f"; done

  kill "$pid"
  wait "$pid" || error "the temporary server did not shut down cleanly"
  unset ROOT_PASSWORD_NOW
  note "MySQL init process done. Ready for start up."
}

if [ "${1:0:1}" = '-' ]; then set -- mysqld "$@"; fi

if [ "$1" = mysqld ]; then
  note "Entrypoint script for MySQL Server $(mysqld --version | awk '{print $3}') started."
  DATADIR="$(server_option datadir "$@")"
  DATADIR="${DATADIR%/}"
  SOCKET="$(server_option socket "$@")"
  : "${DATADIR:=/var/lib/mysql}" "${SOCKET:=/var/run/mysqld/mysqld.sock}"

  if [ "$(id -u)" = 0 ]; then
    # As root: fix ownership of the datadir (e.g. a fresh volume) and drop to mysql (999).
    mkdir -p "$DATADIR" "$(dirname "$SOCKET")"
    find "$DATADIR" "$(dirname "$SOCKET")" \! -user mysql -exec chown mysql:mysql '{}' +
    note "Switching to dedicated user 'mysql'"
    exec gosu mysql "${BASH_SOURCE[0]}" "$@"
  fi

  if [ ! -d "$DATADIR/mysql" ]; then
    init_datadir "$@"
  fi
  unset MYSQL_ROOT_PASSWORD MYSQL_PASSWORD
fi

exec "$@"
