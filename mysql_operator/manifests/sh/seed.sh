#!/bin/bash
# Re-seeding a MariaDB instance: a physical copy (mariadb-backup) of a donor instance replaces its
# data. MySQL re-seeds with CLONE instead and does not use this script.
#
#   seed.sh serve    the donor side, a sidecar of every MariaDB server: listens on $SEED_PORT with
#                    TLS (the cluster's server certificate) and runs `seed.sh donate` per connection
#   seed.sh donate   one copy: the requester's first line must be the operator password (both Pods
#                    mount it from the credentials Secret: $SEED_TOKEN_FILE, renewed in place when
#                    the password is rotated) or the backup account's ($BACKUP_TOKEN_FILE: a
#                    physical backup Job asks too); answers "OK <bytes> <gtid_binlog_state>" (bytes: its
#                    data directory without binary, relay and redo logs nor the temporary
#                    tablespace: about what the copy holds), then
#                    streams `mariadb-backup --backup --stream=xbstream` of the running server;
#                    meanwhile closes the connections whose commit waits for a semi-sync
#                    acknowledgement that cannot come before the copy ends (release_commits)
#   seed.sh receive  the recipient side, an init container: when the operator asked for a copy for
#                    this Pod ($RESEED_DIR/$POD_NAME holds "<donor host> <request id> [restore]")
#                    that was not made yet, connects to the donor (socat, verifying its certificate
#                    and its name, presenting this server's), sends the password, reads the answer,
#                    replaces the data directory by the copy (prepared) and leaves the copy's GTID
#                    state in reseed-init.sql, which start.sh hands to the server once
#                    (--init-file); fails unless the copy is in place. "restore": the donor is a
#                    restore Job serving a physical backup, which ends the copy with
#                    $RESTORE_SQL (the new cluster's accounts) once it verified the whole backup:
#                    without it the copy is refused; its statements join reseed-init.sql.
#                    socat only carries bytes: it ends soon after the donor's end of the stream,
#                    so nothing that takes longer (the extraction's end, the prepare) runs under it.
#                    While the copy is received and prepared, port $PROGRESS_PORT answers every
#                    connection with one line "<receiving|preparing> <bytes received> <bytes
#                    expected>" (numbers only: what the operator shows in status.instances[].reseed)
#   seed.sh progress that line (run by the progress port per connection)
#
# The old data directory is removed only once the donor has accepted (its errant transactions, if
# any, were recorded by the operator before it asked): set aside by a rename and removed while the
# copy arrives; a copy that fails midway is made again on the next start of the init container.
# Nothing here prints a password or uses argv for one.
set -euo pipefail
DATA_ROOT="${MYSQL_OPERATOR_DATA_ROOT:-/var/lib/mysql}"
RUN_DIR="${MYSQL_OPERATOR_RUN_DIR:-/run/mysql-operator}"
TLS_DIR="${MYSQL_OPERATOR_TLS_DIR:-/etc/mysql-operator/tls}"
RESEED_DIR="${MYSQL_OPERATOR_RESEED_DIR:-/etc/mysql-operator/reseed}"
SEED_PORT="${MYSQL_OPERATOR_SEED_PORT:-3307}"
SEED_TOKEN_FILE="${MYSQL_OPERATOR_SEED_TOKEN_FILE:-/etc/mysql-operator/seed/token}"
BACKUP_TOKEN_FILE="${MYSQL_OPERATOR_SEED_BACKUP_TOKEN_FILE:-/etc/mysql-operator/seed/backup-token}"
PROGRESS_PORT="${MYSQL_OPERATOR_SEED_PROGRESS_PORT:-3308}"
SELF="${BASH_SOURCE[0]}"
SOCAT_BLOCK=131072
# files read at once by the donor's mariadb-backup: 2 copied 1 GiB idle at 1.27x the rate of 1,
# under write load at 1.1x (benchmarks/reseed_mariadb_bench.py, one run each)
COPY_THREADS="${MYSQL_OPERATOR_SEED_COPY_THREADS:-2}"
# the donor's data files read through the page cache, with the kernel's read-ahead: InnoDB's
# default (O_DIRECT) has mariadb-backup wait for the disk at every read. Streamed idle / under
# write load (benchmarks/reseed_mariadb_bench.py, MariaDB 10.11): 1 GiB in 5.3-5.4 / 11.8-13.1 s
# instead of 6.4-6.5 / 15.0-16.2 (two runs each), 5 GiB in 26.0 / 46.1 s instead of 46.0 / 58.5.
# MariaDB 11 names this its own option and ignores the old one.
# (the whole help read first: `| grep -q` under pipefail would fail when grep stops reading early)
read_cached() {
  case "$(mariadb-backup --help 2> /dev/null)" in
    *--innodb-data-file-buffering*) echo --innodb-data-file-buffering=ON ;;
    *) echo --innodb-flush-method=fsync ;;
  esac
}
DATADIR="$DATA_ROOT/data"
NEW="$DATA_ROOT/data.seeding"
DISCARDED="$DATA_ROOT/data.discarded"
DONE="$DATA_ROOT/seed-done"
RESTORE_SQL="mysql-operator-restore.sql"
log() { echo "seed: $*" >&2; }
die() { log "$*"; exit 1; }

token() {
  [ -s "$SEED_TOKEN_FILE" ] || die "$SEED_TOKEN_FILE is missing or empty: the credentials Secret lacks operator-password"
  cat "$SEED_TOKEN_FILE"
}

serve() {
  token > /dev/null
  log "serving copies of this instance on port $SEED_PORT"
  # 128 KiB a read (socat's default is 8 KiB): a third less CPU for the same stream over TLS
  exec socat -b "$SOCAT_BLOCK" -T 600 "OPENSSL-LISTEN:$SEED_PORT,reuseaddr,fork,cert=$TLS_DIR/tls.crt,key=$TLS_DIR/tls.key,verify=0" \
    EXEC:"/bin/bash $SELF donate"
}

TMP=""
cleanup() { if [ -n "$TMP" ]; then rm -rf "$TMP"; fi; }
trap cleanup EXIT

donate() {
  local offered state size
  # a refusal exits 0: socat ends the connection at once when its EXEC child fails, often before
  # the answer went out (then the requester cannot say why)
  IFS= read -r -t 30 -n 4096 offered || { echo "ERR no request"; exit 0; }
  if [ "$offered" != "$(token)" ] && ! { [ -s "$BACKUP_TOKEN_FILE" ] && [ "$offered" = "$(cat "$BACKUP_TOKEN_FILE")" ]; }; then
    echo "ERR refused"
    log "refused a copy to a requester that holds neither the operator's nor the backup account's password"
    exit 0
  fi
  # every GTID in this state is in the copy: the copy's consistent point comes later
  state=$(mariadb --defaults-extra-file="$RUN_DIR/client.cnf" -N -B -e 'SELECT @@GLOBAL.gtid_binlog_state')
  size=$(du -sb --exclude='binlog.[0-9]*' --exclude='binlog.index' --exclude='relay-bin.*' \
    --exclude='ib_logfile*' --exclude='ibtmp*' "$DATADIR" | cut -f1) || size=0
  printf 'OK %s %s\n' "${size:-0}" "$state"
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/seed.XXXXXX")
  log "copying this instance (mariadb-backup)"
  mariadb-backup --defaults-extra-file="$RUN_DIR/client.cnf" --backup --stream=xbstream \
    --parallel="$COPY_THREADS" "$(read_cached)" --datadir="$DATADIR" --target-dir="$TMP" 2> "$TMP/log" &
  local backup=$!
  (trap - EXIT; release_commits "$backup") < /dev/null > /dev/null &
  wait "$backup" || {
    tail -n 20 "$TMP/log" >&2
    die "mariadb-backup failed"
  }
  log "copy sent"
}

# Connections whose commit has waited STUCK_SECONDS for a semi-sync acknowledgement while no
# semi-sync replica is connected, when a copy (BACKUP STAGE) has waited as long for commits to end
STUCK_SECONDS=5
STUCK_COMMITS="SELECT ID FROM information_schema.PROCESSLIST
  WHERE STATE LIKE 'Waiting for semi-sync ACK%' AND TIME >= $STUCK_SECONDS
  AND EXISTS (SELECT 1 FROM information_schema.PROCESSLIST
    WHERE STATE = 'Waiting for backup lock' AND INFO LIKE 'BACKUP STAGE%' AND TIME >= $STUCK_SECONDS)
  AND (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
    WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_CLIENTS') = 0"

# While the copy runs (pid $1). A copy waits for a moment when no commit is under way. On a
# primary whose replicas are all gone (being re-seeded from it, with semi-sync that never falls
# back to asynchronous replication), a commit waits for an acknowledgement that only a re-seeded
# replica can give: neither would ever end. Such connections are closed: their clients get an
# error, never an acknowledgement (the transactions are in this server's binary log and then in
# the copy, like any unacknowledged write a failover may keep), and the copy goes on.
release_commits() {
  local ids id
  while kill -0 "$1" 2> /dev/null; do
    sleep 1
    ids=$(mariadb --defaults-extra-file="$RUN_DIR/client.cnf" -N -B -e "$STUCK_COMMITS" 2> /dev/null) || continue
    for id in $ids; do
      [[ "$id" =~ ^[0-9]+$ ]] || continue
      if mariadb --defaults-extra-file="$RUN_DIR/client.cnf" -e "KILL CONNECTION $id" 2> /dev/null; then
        log "closed connection $id: its commit waited for a semi-sync acknowledgement no replica can give before this copy ends (its client gets an error, not an acknowledgement)"
      fi
    done
  done
}

receive() {
  local request donor id kind address
  request="$RESEED_DIR/${POD_NAME:?POD_NAME is not set}"
  [ -f "$request" ] || exit 0
  read -r donor id kind < "$request" || true
  [ -n "${donor:-}" ] && [ -n "${id:-}" ] || die "$request is not '<donor host> <request id>'"
  if [ -f "$DONE" ] && [ "$(cat "$DONE")" = "$id" ]; then
    log "copy $id is in place already"
    exit 0
  fi
  address="${MYSQL_OPERATOR_SEED_ADDRESS:-$donor}"  # tests connect to a local address
  log "copy $id: from $donor"
  # the request goes through a FIFO held open here: socat never sees the end of its input, so it
  # ends after the donor's end of the stream, and `accept` reads what it carried. -t: how long
  # socat waits after that end (0.5 s by default) for the other direction, which never ends here;
  # what the donor sent is written out before. 1 MB copied: 0.03 s instead of 0.53-0.57 (3 each)
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/seed.XXXXXX")
  mkfifo -m 600 "$TMP/request"
  exec 3<> "$TMP/request"
  printf '%s\n' "$(token)" >&3
  socat -b "$SOCAT_BLOCK" -T 600 -t 0.01 - \
    "OPENSSL:$address:$SEED_PORT,cafile=$TLS_DIR/ca.crt,commonname=$donor,cert=$TLS_DIR/tls.crt,key=$TLS_DIR/tls.key" \
    < "$TMP/request" | SEED_ID="$id" SEED_KIND="${kind:-}" accept || true
  exec 3>&-
  [ -f "$DONE" ] && [ "$(cat "$DONE")" = "$id" ] || die "copy $id from $donor failed (see above); it is tried again when this container restarts"
  log "copy $id is in place"
}

# union of MariaDB GTID lists STATE and POS: the highest seq_no per (domain, server_id), POS's
# (domain, server_id)s last. The order matters: the last GTID of a domain in gtid_binlog_state
# becomes that domain's gtid_binlog_pos, and the operator repoints an instance that was no replica
# from its gtid_binlog_pos - it must be the copy's position, not another server's older GTID.
union_gtids() {
  local g d rest s n key out="" last=" "
  declare -A best=()
  for g in ${1//,/ } ${2//,/ }; do
    [[ "$g" =~ ^[0-9]+-[0-9]+-[0-9]+$ ]] || die "not a GTID from the donor: $g"
    d=${g%%-*}; rest=${g#*-}; s=${rest%%-*}; n=${rest#*-}
    if [ -z "${best[$d-$s]:-}" ] || [ "$n" -gt "${best[$d-$s]}" ]; then best[$d-$s]=$n; fi
  done
  for g in ${2//,/ }; do rest=${g#*-}; last="$last${g%%-*}-${rest%%-*} "; done
  for key in "${!best[@]}"; do
    [[ "$last" == *" $key "* ]] || out="$out${out:+,}$key-${best[$key]}"
  done
  for key in $last; do out="$out${out:+,}$key-${best[$key]}"; done
  printf '%s' "$out"
}

# one line for the operator: the stage, the bytes received so far and the bytes expected
progress() {
  local received
  received=$(du -sb "${SEED_PROGRESS_DIR:?}" 2> /dev/null | cut -f1) || received=0
  printf '%s %s %s\n' "$(cat "${SEED_PROGRESS_STAGE:?}" 2> /dev/null || echo receiving)" "${received:-0}" "${SEED_PROGRESS_TOTAL:-0}"
}

# the progress port, until this (sub)shell ends: a copy goes on without it if it cannot listen
# (said in the log once the copy is received: the operator then shows no progress)
serve_progress() {
  printf 'receiving' > "$TMP/stage"
  SEED_PROGRESS_DIR="$NEW" SEED_PROGRESS_STAGE="$TMP/stage" SEED_PROGRESS_TOTAL="$1" \
    socat -T 5 "TCP-LISTEN:$PROGRESS_PORT,reuseaddr,fork" EXEC:"/bin/bash $SELF progress" 2> "$TMP/progress.log" &
  PROGRESS_PID=$!
  trap 'kill "$PROGRESS_PID" 2> /dev/null || true' EXIT
}

progress_served() {
  kill -0 "$PROGRESS_PID" 2> /dev/null ||
    log "the progress port $PROGRESS_PORT was not served: $(tail -n 1 "$TMP/progress.log" 2> /dev/null)"
}

# seconds since $1 (an $EPOCHREALTIME), to the tenth
since() {
  local us=$(( ${EPOCHREALTIME/[.,]/} - ${1/[.,]/} ))
  printf '%d.%d' $(( us / 1000000 )) $(( us / 100000 % 10 ))
}

accept() {
  local answer state info pos total=0 first rest started prepared discarding
  IFS= read -r -t 120 answer || die "the donor did not answer (its seed-donor log says why: it refuses a requester without the current operator password)"
  case "$answer" in
    "OK "*|OK) rest=${answer#OK}; rest=${rest# } ;;
    *) die "the donor refused the copy: $answer" ;;
  esac
  # "<bytes> <state>"; a donor of an earlier version sends "<state>" only (a GTID list is never
  # digits alone)
  first=${rest%% *}
  if [[ "$first" =~ ^[0-9]+$ ]]; then
    total=$first
    state=${rest#"$first"}; state=${state# }
  else
    state=$rest
  fi
  umask 077
  started=$EPOCHREALTIME
  # the old data is set aside (a rename) and removed while the copy arrives, not before it
  rm -rf "$NEW" "$DATA_ROOT/reseed-init.sql"
  mkdir -p "$DISCARDED"  # it may still hold what a copy that failed midway had set aside
  if [ -e "$DATADIR" ]; then mv "$DATADIR" "$(mktemp -d "$DISCARDED/data.XXXXXX")"; fi
  rm -rf "$DISCARDED" &
  discarding=$!
  mkdir -p "$NEW"
  serve_progress "$total"
  mbstream -x -p 2 -C "$NEW" || die "the copy's stream broke off"
  log "copy received in $(since "$started") s"
  progress_served
  printf 'preparing' > "$TMP/stage"
  prepared=$EPOCHREALTIME
  mariadb-backup --prepare --target-dir="$NEW" 2> "$DATA_ROOT/seed-prepare.log" || {
    tail -n 20 "$DATA_ROOT/seed-prepare.log" >&2
    die "mariadb-backup --prepare failed"
  }
  info="$NEW/mariadb_backup_binlog_info"
  [ -f "$info" ] || info="$NEW/xtrabackup_binlog_info"
  [ -f "$info" ] || die "the copy has no binary log position (is the donor's binary log on?)"
  pos=$(awk '{print $3}' "$info")
  [ -n "$pos" ] || die "the copy's binary log position has no GTID"
  log "copy prepared in $(since "$prepared") s"
  state=$(union_gtids "$state" "$pos")
  if [ "${SEED_KIND:-}" = restore ] && [ ! -s "$NEW/$RESTORE_SQL" ]; then
    die "the restore Job's copy ended before it verified the backup (no $RESTORE_SQL)"
  fi
  {
    echo "SET sql_log_bin = 0;"
    echo "RESET MASTER;"
    echo "SET GLOBAL gtid_binlog_state = '$state';"
    echo "SET GLOBAL gtid_slave_pos = '$pos';"
    # last: the server stops reading its init file at an error (the restore Job then cannot log in)
    if [ "${SEED_KIND:-}" = restore ]; then cat "$NEW/$RESTORE_SQL"; fi
  } > "$NEW/reseed-init.sql.tmp"
  mv "$NEW/reseed-init.sql.tmp" "$DATA_ROOT/reseed-init.sql"
  rm -f "$NEW/$RESTORE_SQL"
  wait "$discarding" || die "could not remove the old data ($DISCARDED)"
  mv "$NEW" "$DATADIR"
  printf '%s' "$SEED_ID" > "$DONE"
  log "copy at $pos prepared (binary log state $state)"
}

case "${1:-}" in
  serve) serve ;;
  donate) donate ;;
  receive) receive ;;
  progress) progress ;;
  *) echo "usage: seed.sh serve|donate|receive|progress" >&2; exit 2 ;;
esac
