"""`mysql-operator` command line: run | switchover | status | rotate-passwords | version (+ backup/restore)."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import sys

from mysql_operator import __version__
from mysql_operator.cli_common import (
    EXIT_CODES,
    NOT_FOUND,
    TIMED_OUT,
    USAGE,
    CommandError,
    Parser,
    as_list,
    call,
    common_flags,
    connect,
    dry_run_flag,
    emit,
    print_table,
)


def _env_list(name: str) -> list[str]:
    return [n.strip() for n in os.environ.get(name, "").split(",") if n.strip()]


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run the operator (kopf)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=None,
        help="watch this namespace (repeatable; env WATCH_NAMESPACES, comma-separated)",
    )
    scope.add_argument(
        "--all-namespaces",
        "-A",
        action="store_true",
        default=os.environ.get("WATCH_ALL_NAMESPACES", "").lower() in ("1", "true", "yes"),
        help="watch every namespace (env WATCH_ALL_NAMESPACES=true)",
    )
    p.add_argument("--log-format", choices=("text", "json"), default=os.environ.get("LOG_FORMAT", "text"))
    p.add_argument(
        "--liveness",
        default=os.environ.get("LIVENESS_ENDPOINT"),
        help="liveness endpoint, e.g. http://0.0.0.0:8080/healthz",
    )
    p.add_argument(
        "--peering",
        default=os.environ.get("PEERING_NAME"),
        help="kopf peering name (more than one replica); default: standalone",
    )
    p.add_argument("--priority", type=int, default=int(os.environ.get("PEERING_PRIORITY", "0")))
    p.add_argument(
        "--leader-elect",
        metavar="LEASE",
        default=os.environ.get("LEADER_ELECTION_LEASE"),
        help="run only while holding this coordination.k8s.io Lease (more than one replica; env "
        "LEADER_ELECTION_LEASE)",
    )
    p.add_argument(
        "--leader-elect-namespace",
        default=os.environ.get("POD_NAMESPACE"),
        help="the Lease's namespace (default: env POD_NAMESPACE, the operator's own)",
    )
    p.add_argument(
        "--loop-seconds",
        type=float,
        default=float(os.environ.get("LOOP_SECONDS", "1")),
        help="how often each cluster is observed (failover detection)",
    )
    p.add_argument(
        "--resync-seconds",
        type=float,
        default=float(os.environ.get("RESYNC_SECONDS", "300")),
        help="how often owned objects are re-applied (drift correction; a StatefulSet changed by "
        "hand is re-applied at once from its watch)",
    )
    p.add_argument(
        "--pass-deadline-seconds",
        type=float,
        default=float(os.environ.get("PASS_DEADLINE_SECONDS", "90")),
        help="a cluster's pass running longer is reported on the cluster (condition PassOverdue) "
        "and stops counting against the passes run at once, so other clusters go on",
    )
    p.add_argument(
        "--resolver",
        choices=("auto", "ip", "dns"),
        default=os.environ.get("RESOLVER", "auto"),
        help="reach instances by Pod IP (auto, ip) or stable DNS name (dns)",
    )
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: in-cluster or KUBECONFIG)")
    p.add_argument(
        "--metrics-port",
        type=int,
        default=int(os.environ["METRICS_PORT"]) if os.environ.get("METRICS_PORT") else None,
        help="serve Prometheus metrics on this port at /metrics (env METRICS_PORT)",
    )
    p.add_argument(
        "--apply-crds",
        metavar="DIR",
        default=os.environ.get("APPLY_CRDS"),
        help="server-side apply the CRDs of DIR/*.yaml at start, never removing a field (the chart "
        "mounts its crds/ there: helm upgrade delivers new CRD versions; env APPLY_CRDS)",
    )
    p.add_argument(
        "--operator-upgrades",
        default=os.environ.get("OPERATOR_UPGRADES", "Auto"),
        help="for clusters without spec.operatorUpgrades: Auto rolls the Pod restarts a new operator "
        "version needs, one cluster at a time; Manual waits for each cluster's approval "
        "(env OPERATOR_UPGRADES)",
    )
    p.add_argument("--verbose", "-v", action="store_true")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from mysql_operator.operator import OperatorConfig, run

    if args.kubeconfig:
        _use_kubeconfig(args.kubeconfig)
    namespaces = tuple(args.namespace or ([] if args.all_namespaces else _env_list("WATCH_NAMESPACES")))
    cfg = OperatorConfig(
        namespaces=namespaces,
        all_namespaces=args.all_namespaces,
        liveness=args.liveness,
        log_format=args.log_format,
        verbose=args.verbose,
        peering=args.peering,
        priority=args.priority,
        leader_lease=args.leader_elect,
        leader_namespace=args.leader_elect_namespace,
        identity=os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
        loop_seconds=args.loop_seconds,
        resync_seconds=args.resync_seconds,
        pass_deadline_seconds=args.pass_deadline_seconds,
        resolver=args.resolver,
        metrics_port=args.metrics_port,
        apply_crds=args.apply_crds,
        operator_upgrades=args.operator_upgrades,
    )
    try:
        cfg.check()
    except ValueError as e:
        print(f"mysql-operator run: {e}", file=sys.stderr)
        return 2
    return run(cfg)


def _use_kubeconfig(path: str) -> None:
    """Make --kubeconfig the default for every client in this process (the kubernetes library
    reads KUBECONFIG once, at import)."""
    from kubernetes.config import kube_config

    os.environ["KUBECONFIG"] = path
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = path


def _not_found(namespace: str, name: str) -> CommandError:
    return CommandError(
        f"MySQLCluster {namespace}/{name} not found",
        "check the name and -n/--context (kubectl mysql status lists them)",
        NOT_FOUND,
    )


def _caller(kubeconfig: str | None, context: str | None = None) -> str:
    """Who asks: the kubeconfig context's user, else the local login name ("" when neither)."""
    import getpass

    from kubernetes import config

    try:
        contexts, ctx = config.list_kube_config_contexts(config_file=kubeconfig)
        if context:
            ctx = next((c for c in contexts if c["name"] == context), ctx)
        user = (ctx.get("context") or {}).get("user")
        if user:
            return str(user)
    except config.ConfigException:
        pass
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def _switchover(args) -> int:
    """Annotate the cluster with a switchover request (switchover.py); with --wait, follow
    status.switchover until the operator says it is done or refused."""
    import time

    from kubernetes import client

    from mysql_operator import switchover as sw
    from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION

    api = client.CustomObjectsApi(connect(args))
    where = f"{args.namespace}/{args.cluster}"
    value = sw.annotation_value(args.to, _caller(args.kubeconfig, args.context), args.reason or "")
    to, by, _ = sw.parse_value(value, args.cluster)
    patch = {"metadata": {"annotations": {sw.ANNOTATION: value}}}

    def record() -> dict | None:
        body = api.get_namespaced_custom_object(GROUP, VERSION, args.namespace, CLUSTER_PLURAL, args.cluster)
        return (body.get("status") or {}).get(sw.STATUS_KEY)

    before = record()
    if args.dry_run:
        emit(patch, args.output)
        return 0
    patched = api.patch_namespaced_custom_object(
        GROUP, VERSION, args.namespace, CLUSTER_PLURAL, args.cluster, patch
    )
    if args.output != "table":
        emit(patched, args.output)
    else:
        print(f"{where}: switchover to {to} requested ({sw.ANNOTATION}: {value})")
    if not args.wait:
        if args.output == "table":
            print(
                f"the operator records the outcome in status.switchover (kubectl mysql status {args.cluster})"
            )
        return 0
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        time.sleep(2)
        now = record()
        if sw.finished(now, before, to, by):
            assert now is not None
            print(
                f"{now['result']}: {now.get('message', '')}",
                file=sys.stderr if args.output != "table" else sys.stdout,
            )
            return 0 if now["result"] == sw.DONE else 1
    print(
        f"error: switchover: no outcome within {args.timeout:.0f} s; the request stays: "
        f"watch status.switchover (kubectl mysql status {args.cluster})",
        file=sys.stderr,
    )
    return TIMED_OUT


ROTATABLE_KEYS = (
    "root-password",
    "operator-password",
    "replication-password",
    "app-password",
    "backup-password",
    "sql-password",
    "monitor-password",
    "binlog-password",
)


def _rotate_passwords(args) -> int:
    """New random passwords in the generated credentials Secret (the operator applies them)."""
    import base64

    from kubernetes import client

    from mysql_operator import manifests as m
    from mysql_operator.api import SpecError, parse
    from mysql_operator.k8s.objects import read_cluster

    api = connect(args)
    body = read_cluster(api, args.namespace, args.cluster)
    if body is None:
        raise _not_found(args.namespace, args.cluster)
    try:
        c = parse(body)
    except SpecError as e:
        raise CommandError(
            f"rotate-passwords: the cluster's spec is invalid: {e}", "fix the field named"
        ) from e
    if c.spec.credentials is not None:
        raise CommandError(
            f"rotate-passwords: spec.credentials.secretName: Secret {c.spec.credentials.secret_name} is yours",
            "change its passwords there (the operator applies them)",
        )
    secret = m.generated_secret_name(c)
    present = client.CoreV1Api(api).read_namespaced_secret(secret, args.namespace).data or {}
    keys = [k for k in (args.key or ROTATABLE_KEYS) if k in present]
    if args.dry_run:  # the new values are made when sent: never printed
        meta = {"name": secret, "namespace": args.namespace}
        placeholder = "(a new random password, base64)"
        emit(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta,
                "data": dict.fromkeys(keys, placeholder),
            },
            args.output,
        )
        return 0
    data = {k: base64.b64encode(m.random_password().encode()).decode() for k in keys}
    client.CoreV1Api(api).patch_namespaced_secret(secret, args.namespace, {"data": data})
    if args.output != "table":  # which keys changed, never their values
        emit({"secret": f"{args.namespace}/{secret}", "rotated": keys}, args.output)
        return 0
    print(
        f"{args.namespace}/{secret}: new {', '.join(keys)}; the operator applies them "
        f"(watch status.appliedCredentialsVersion: kubectl mysql status {args.cluster} -o yaml)"
    )
    return 0


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


def _status(args) -> int:
    from kubernetes import client

    from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION
    from mysql_operator.k8s.objects import read_cluster

    api = connect(args)
    if args.cluster:
        if args.all_namespaces:
            raise CommandError("give a cluster NAME or -A, not both", "drop one", USAGE)
        body = read_cluster(api, args.namespace, args.cluster)
        if body is None:
            raise _not_found(args.namespace, args.cluster)
        print(format_status(body)) if args.output == "table" else emit(body, args.output)
        return 0
    crds = client.CustomObjectsApi(api)
    if args.all_namespaces:
        items = crds.list_cluster_custom_object(GROUP, VERSION, CLUSTER_PLURAL)["items"]
    else:
        items = crds.list_namespaced_custom_object(GROUP, VERSION, args.namespace, CLUSTER_PLURAL)["items"]
    print_table(cluster_rows(items)) if args.output == "table" else emit(as_list(items), args.output)
    return 0


def _check_install(args) -> int:
    from mysql_operator.install_check import check
    from mysql_operator.k8s.client import api_client

    if args.kubeconfig:
        _use_kubeconfig(args.kubeconfig)
    crds = dict(item.split("=", 1) for item in args.crd)
    problems = check(api_client(), args.namespace, args.lease, crds)
    for line in problems:
        print(f"problem: {line}")
    return 1 if problems else 0


def _version(args) -> int:
    print(__version__) if args.output == "table" else emit({"version": __version__}, args.output)
    return 0


def build_parser(prog: str = "mysql-operator", internal: bool = True) -> argparse.ArgumentParser:
    """The commands of `mysql-operator` (internal: also run, check-install and what the Jobs run,
    the last hidden from --help) or, without `internal`, of `kubectl mysql`."""
    parser = Parser(prog=prog, epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"mysql-operator {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common, listing, dry = common_flags(), common_flags(listing=True), dry_run_flag()
    sub.add_parser("version", parents=[common], help="print the version").set_defaults(func=_version)
    if internal:
        _add_run(sub)
    st = sub.add_parser(
        "status", parents=[listing], help="one cluster's status, or a table of the namespace's (-A: all)"
    )
    st.add_argument("cluster", nargs="?", help="MySQLCluster name (default: list them)")
    st.set_defaults(func=_status)
    sw = sub.add_parser(
        "switchover",
        parents=[common, dry],
        help="ask once for another primary (annotation mysql.operator.dev/switchover-to)",
    )
    sw.add_argument("cluster", help="MySQLCluster name")
    sw.add_argument(
        "--to", required=True, metavar="INSTANCE", help="the new primary: its name (db-1) or ordinal (1)"
    )
    sw.add_argument("--reason", default="", help="why (recorded with your kubeconfig user name)")
    sw.add_argument("--wait", action="store_true", help="wait until the operator says Done or Refused")
    sw.add_argument("--timeout", type=float, default=600.0, help="seconds --wait waits (default 600)")
    sw.set_defaults(func=_switchover)
    rp = sub.add_parser(
        "rotate-passwords",
        parents=[common, dry],
        help="new random passwords in a cluster's generated credentials Secret",
    )
    rp.add_argument("cluster", help="MySQLCluster name")
    rp.add_argument("--key", action="append", choices=ROTATABLE_KEYS, help="only this key (repeatable)")
    rp.set_defaults(func=_rotate_passwords)
    if internal:
        ci = sub.add_parser(
            "check-install",
            help="the chart's `helm test`: the operator renews its Lease, the CRDs are the chart's",
        )
        ci.add_argument("--namespace", "-n", required=True, help="the operator's namespace")
        ci.add_argument("--lease", default=None, help="the operator's Lease (leader election on)")
        ci.add_argument("--crd", action="append", default=[], metavar="NAME=SHA256", help="repeatable")
        ci.add_argument("--kubeconfig", default=None)
        ci.set_defaults(func=_check_install)
    from mysql_operator import cli_backup

    # backup create|list|describe|delete, restore (internal: also the Jobs' backup commands)
    cli_backup.register(sub, common, listing, dry, internal)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.func is _run:  # the operator itself: its failures are its log's
        return args.func(args) or 0
    return call(args)


if __name__ == "__main__":
    sys.exit(main())
