set -u
DIR="${1:?usage: client-tools.sh FOLDER}"
trap 'exit 0' TERM INT
tool() {
  case "${argv[0]:-}" in
    mysqldump|mariadb-dump|mysql|mariadb|mysqlbinlog|mariadb-binlog|mysqld|tar|mbstream|mariadb-backup|mariadbd) ;;
    *) echo "client-tools: refusing to run ${argv[0]:-nothing}: only mysqldump, mariadb-dump, mysql, mariadb, mysqlbinlog, mariadb-binlog, mysqld, tar, mbstream, mariadb-backup, mariadbd" >&2
       return 126 ;;
  esac
  if ! command -v "${argv[0]}" >/dev/null; then
    echo "client-tools: ${argv[0]} is not in this image (the servers' tool image: spec.toolsImage, else the operator's toolsImage)" >&2
    return 127
  fi
  TZ=UTC "${argv[@]}"  # a binlog tool's --stop-datetime is in UTC
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
    if [ ! -f "$request" ] || ! mkdir "$run/taken" 2>/dev/null; then continue; fi  # taken
    serve "$run" &
  done
  sleep 0.1
done
