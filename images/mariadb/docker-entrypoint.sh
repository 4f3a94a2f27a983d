#!/bin/bash
# Entrypoint compatible with the official mariadb image's environment:
#   MARIADB_ROOT_PASSWORD | MARIADB_ALLOW_EMPTY_ROOT_PASSWORD (one is required on an empty datadir)
#   MARIADB_ROOT_HOST (default %), MARIADB_DATABASE, MARIADB_USER + MARIADB_PASSWORD,
#   MARIADB_INITDB_SKIP_TZINFO; each also as MYSQL_* and as *_FILE (read from a file).
# On an empty datadir it initialises the server, creates those accounts, runs
# /docker-entrypoint-initdb.d/*.{sh,sql,sql.gz,sql.xz,sql.zst} in order, then starts the server.
# Passwords never appear on a command line or in the output.
set -eo pipefail
shopt -s nullglob

note() { printf '%s [Note] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$*"; }
error() { printf '%s [ERROR] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$*" >&2; exit 1; }

# file_env VAR [DEFAULT]: VAR from VAR, VAR_FILE, MYSQL_* equivalent, or DEFAULT.
file_env() {
  local var="$1" def="${2:-}" mysql_var="MYSQL_${1#MARIADB_}"
  local file_var="${var}_FILE" mysql_file_var="${mysql_var}_FILE" val="$def"
  if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then
    error "both $var and $file_var are set (but are exclusive)"
  fi
  if [ -n "${!var:-}" ]; then val="${!var}"
  elif [ -n "${!file_var:-}" ]; then val="$(< "${!file_var}")"
  elif [ -n "${!mysql_var:-}" ]; then val="${!mysql_var}"
  elif [ -n "${!mysql_file_var:-}" ]; then val="$(< "${!mysql_file_var}")"
  fi
  export "$var"="$val"
  unset "$file_var" "$mysql_var" "$mysql_file_var"
}

# The value of server option $1 after the config files and the command line ("$@" after $1).
server_option() {
  local opt="$1"; shift
  "$@" --verbose --help --log-bin-index="$(mktemp -u)" 2>/dev/null \
    | awk -v opt="$opt" '$1 == opt && /^[^ \t]/ { sub(/^[^ \t]+[ \t]+/, ""); print; exit }'
}

sql_escape() {  # for a '...' literal (the session clears NO_BACKSLASH_ESCAPES)
  local s="${1//\\/\\\\}"
  printf '%s' "${s//\'/\\\'}"
}

option_escape() {  # for a "..." value in an option file
  local s="${1//\\/\\\\}"
  printf '%s' "${s//\"/\\\"}"
}

# SQL on stdin to the temporary server, as root, over the socket. --defaults-extra-file must come
# first; the password travels through a pipe, never argv.
process_sql() {
  mariadb --defaults-extra-file=<(printf '[client]\npassword="%s"\n' "$(option_escape "${ROOT_PASSWORD_NOW:-}")") \
    --protocol=socket -uroot -hlocalhost --socket="$SOCKET" --comments "$@"
}

# The official image's name for process_sql, for initdb scripts: uses MARIADB_DATABASE if set.
docker_process_sql() {
  if [ -n "$MARIADB_DATABASE" ]; then set -- --database="$MARIADB_DATABASE" "$@"; fi
  process_sql "$@"
}

temp_server_start() {
  "$@" --skip-networking --default-time-zone=SYSTEM --socket="$SOCKET" --wsrep_on=OFF \
    --expire-logs-days=0 --skip-slave-start --loose-innodb_buffer_pool_load_at_startup=0 &
  TEMP_PID=$!
  note "Waiting for the temporary server (pid $TEMP_PID)"
  for _ in $(seq 60); do
    if ! kill -0 "$TEMP_PID" 2>/dev/null; then error "the temporary server exited during initialisation"; fi
    if process_sql --database=mysql <<<'SELECT 1' >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  error "the temporary server did not accept connections within 60s"
}

temp_server_stop() {
  kill "$TEMP_PID"
  wait "$TEMP_PID" || error "the temporary server did not shut down cleanly"
}

run_initdb_file() {
  local f="$1" db_arg=()
  [ -n "$MARIADB_DATABASE" ] && db_arg=(--database="$MARIADB_DATABASE")
  case "$f" in
    *.sh)  # shellcheck disable=SC1090 # (initdb scripts are the user's)
      if [ -x "$f" ]; then note "running $f"; "$f"; else note "sourcing $f"; . "$f"; fi ;;
    *.sql) note "running $f"; process_sql "${db_arg[@]}" < "$f" ;;
    *.sql.gz) note "running $f"; gunzip -c "$f" | process_sql "${db_arg[@]}" ;;
    *.sql.xz) note "running $f"; xzcat "$f" | process_sql "${db_arg[@]}" ;;
    *.sql.zst) note "running $f"; zstd -dc "$f" | process_sql "${db_arg[@]}" ;;
    *) note "ignoring $f" ;;
  esac
}

init_datadir() {  # "$@": the server command line
  file_env MARIADB_ROOT_PASSWORD
  file_env MARIADB_ALLOW_EMPTY_ROOT_PASSWORD
  file_env MARIADB_ROOT_HOST '%'
  file_env MARIADB_DATABASE
  file_env MARIADB_USER
  file_env MARIADB_PASSWORD
  file_env MARIADB_INITDB_SKIP_TZINFO
  if [ -z "$MARIADB_ROOT_PASSWORD" ] && [ -z "$MARIADB_ALLOW_EMPTY_ROOT_PASSWORD" ]; then
    error "the database is uninitialized and no root password option is set: set MARIADB_ROOT_PASSWORD (or MARIADB_ROOT_PASSWORD_FILE), or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1"
  fi
  if [ -n "$MARIADB_USER" ] && [ "$MARIADB_USER" = root ]; then
    error "MARIADB_USER=root is not allowed: root is created from MARIADB_ROOT_PASSWORD"
  fi
  if [ -n "$MARIADB_PASSWORD" ] && [ -z "$MARIADB_USER" ]; then
    error "MARIADB_PASSWORD is set but MARIADB_USER is not: set both"
  fi

  note "Initializing database files in $DATADIR"
  mariadb-install-db --datadir="$DATADIR" --rpm --auth-root-authentication-method=normal \
    "${@:2}" --skip-test-db --old-mode='UTF8_IS_UTF8MB3' --default-time-zone=SYSTEM \
    --enforce-storage-engine= --skip-log-bin --expire-logs-days=0 \
    --loose-innodb_buffer_pool_load_at_startup=0 --loose-innodb_buffer_pool_dump_at_shutdown=0 >/dev/null
  temp_server_start "$@"

  if [ -z "$MARIADB_INITDB_SKIP_TZINFO" ]; then
    note "Loading time zones"
    { echo "SET @@SESSION.SQL_LOG_BIN=0;"; mariadb-tzinfo-to-sql --skip-write-binlog /usr/share/zoneinfo 2>/dev/null; } \
      | process_sql --database=mysql
  fi

  local root_pw root_host create_root="" create_db="" create_user=""
  root_pw="$(sql_escape "$MARIADB_ROOT_PASSWORD")"
  root_host="$(sql_escape "$MARIADB_ROOT_HOST")"
  if [ -n "$MARIADB_ROOT_HOST" ] && [ "$MARIADB_ROOT_HOST" != localhost ]; then
    create_root="CREATE USER 'root'@'${root_host}' IDENTIFIED BY '${root_pw}';
GRANT ALL ON *.* TO 'root'@'${root_host}' WITH GRANT OPTION;
GRANT PROXY ON ''@'%' TO 'root'@'${root_host}' WITH GRANT OPTION;"
  fi
  if [ -n "$MARIADB_DATABASE" ]; then
    note "Creating database ${MARIADB_DATABASE}"
    create_db="CREATE DATABASE IF NOT EXISTS \`${MARIADB_DATABASE//\`/\`\`}\`;"
  fi
  if [ -n "$MARIADB_USER" ]; then
    note "Creating user ${MARIADB_USER}"
    create_user="CREATE USER '$(sql_escape "$MARIADB_USER")'@'%' IDENTIFIED BY '$(sql_escape "$MARIADB_PASSWORD")';"
    if [ -n "$MARIADB_DATABASE" ]; then
      create_user+="
GRANT ALL ON \`${MARIADB_DATABASE//\`/\`\`}\`.* TO '$(sql_escape "$MARIADB_USER")'@'%';"
    fi
  fi
  note "Securing system users"
  process_sql --database=mysql <<EOSQL
SET @@SESSION.SQL_LOG_BIN=0;
SET @@SESSION.SQL_MODE=REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');
DROP USER IF EXISTS root@'127.0.0.1', root@'::1', ''@'localhost';
EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\'', @@hostname, '\', \'\'@\'', @@hostname, '\'');
SET PASSWORD FOR 'root'@'localhost' = PASSWORD('${root_pw}');
${create_root}
${create_db}
${create_user}
EOSQL
  ROOT_PASSWORD_NOW="$MARIADB_ROOT_PASSWORD"

  local f
  for f in /docker-entrypoint-initdb.d/*; do run_initdb_file "$f"; done

  temp_server_stop
  unset ROOT_PASSWORD_NOW
  note "MariaDB init process done. Ready for start up."
}

if [ "${1:0:1}" = '-' ]; then set -- mariadbd "$@"; fi

if [ "$1" = mariadbd ] || [ "$1" = mysqld ]; then
  note "Entrypoint script for MariaDB Server $(mariadbd --version | awk '{print $3}') started."
  DATADIR="$(server_option datadir "$@")"
  DATADIR="${DATADIR%/}"
  SOCKET="$(server_option socket "$@")"
  : "${DATADIR:=/var/lib/mysql}" "${SOCKET:=/run/mysqld/mysqld.sock}"

  if [ "$(id -u)" = 0 ]; then
    # As root: fix ownership of the datadir (e.g. a fresh volume) and drop to mysql (999).
    mkdir -p "$DATADIR" "$(dirname "$SOCKET")"
    find "$DATADIR" "$(dirname "$SOCKET")" \! -user mysql -exec chown mysql:mysql '{}' +
    note "Switching to dedicated user 'mysql'"
    exec setpriv --reuid=mysql --regid=mysql --init-groups "${BASH_SOURCE[0]}" "$@"
  fi

  if [ ! -d "$DATADIR/mysql" ]; then
    init_datadir "$@"
  fi
  unset MARIADB_ROOT_PASSWORD MARIADB_PASSWORD MYSQL_ROOT_PASSWORD MYSQL_PASSWORD
fi

exec "$@"
