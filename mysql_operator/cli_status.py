"""`status`: what the operator says of each cluster, as a table (`format_status`, `cluster_rows`)
or as JSON/YAML."""

from __future__ import annotations

import datetime as dt

from mysql_operator.cli_common import (
    USAGE,
    CommandError,
    as_list,
    connect,
    emit,
    not_found,
    print_table,
)


def format_status(body: dict, now: dt.datetime | None = None) -> str:
    """Human summary of a MySQLCluster's status (pure but for the clock, which `now` replaces)."""
    st = body.get("status") or {}
    meta = body.get("metadata") or {}
    lag = st.get("replicaLagSeconds")
    lines = [
        f"{meta.get('namespace')}/{meta.get('name')}: phase {st.get('phase', '-')}, "
        f"primary {st.get('currentPrimary', '-')}, ready {st.get('readyInstances', 0)}/"
        f"{(body.get('spec') or {}).get('instances', '?')}, "
        f"largest replica lag {'-' if lag is None else f'{lag} s'}, last backup {_backup_age(st, now)}"
    ]
    for c in st.get("conditions") or []:
        lines.append(
            f"  {c.get('type'):<12} {c.get('status'):<6} {c.get('reason', '')}"
            + (f": {c['message']}" if c.get("message") else "")
        )
    sw, pr = st.get("switchover") or {}, st.get("primaryRequest") or {}
    if sw:
        lines.append(
            f"  switchover to {sw.get('to')} ({sw.get('requestedBy') or '-'}): {sw.get('result')}: {sw.get('message', '')}"
        )
    if pr:
        lines.append(f"  spec.primary {pr.get('value')}: {pr.get('result')}: {pr.get('message', '')}")
    for i in st.get("instances") or []:
        lines.append(
            f"  {i.get('name'):<20} {i.get('role', ''):<10} ready={i.get('ready')} "
            f"lag={i.get('lagSeconds', '-')} gtid={i.get('gtidExecuted', '-')}"
            + (f" error={i['error']}" if i.get("error") else "")
            + (f" waiting={i['waiting']}" if i.get("waiting") else "")
        )
    return "\n".join(lines)


def _backup_age(status: dict, now: dt.datetime | None) -> str:
    last = status.get("lastBackup") or {}
    try:
        done = dt.datetime.fromisoformat(str(last.get("completedAt")).replace("Z", "+00:00"))
    except ValueError:
        return "never"
    age = int(((now or dt.datetime.now(dt.timezone.utc)) - done).total_seconds())
    h, rest = divmod(max(age, 0), 3600)
    return f"{last.get('name', '?')} {h}h{rest // 60:02d}m ago"


def cluster_rows(items: list[dict], now: dt.datetime | None = None) -> list[list[str]]:
    """Pure but for the clock: the table of `status` without a name, one row per cluster."""
    rows = [["NAMESPACE", "NAME", "PHASE", "PRIMARY", "READY", "LAG", "LAST BACKUP"]]
    for body in sorted(items, key=lambda b: (b["metadata"].get("namespace", ""), b["metadata"]["name"])):
        st, lag = body.get("status") or {}, (body.get("status") or {}).get("replicaLagSeconds")
        rows.append(
            [
                body["metadata"].get("namespace", ""),
                body["metadata"]["name"],
                st.get("phase", "-"),
                st.get("currentPrimary", "-"),
                f"{st.get('readyInstances', 0)}/{(body.get('spec') or {}).get('instances', '?')}",
                "-" if lag is None else f"{lag}s",
                _backup_age(st, now),
            ]
        )
    return rows


def status_command(args) -> int:
    from kubernetes import client

    from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION
    from mysql_operator.k8s.objects import read_cluster

    api = connect(args)
    if args.cluster:
        if args.all_namespaces:
            raise CommandError("give a cluster NAME or -A, not both", "drop one", USAGE)
        body = read_cluster(api, args.namespace, args.cluster)
        if body is None:
            raise not_found(args.namespace, args.cluster)
        print(format_status(body)) if args.output == "table" else emit(body, args.output)
        return 0
    crds = client.CustomObjectsApi(api)
    if args.all_namespaces:
        items = crds.list_cluster_custom_object(GROUP, VERSION, CLUSTER_PLURAL)["items"]
    else:
        items = crds.list_namespaced_custom_object(GROUP, VERSION, args.namespace, CLUSTER_PLURAL)["items"]
    print_table(cluster_rows(items)) if args.output == "table" else emit(as_list(items), args.output)
    return 0
