"""`mysql-operator` command line: run | switchover | status | rotate-passwords | version (+ backup/restore)."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from mysql_operator import __version__
from mysql_operator.cli_common import (
    EXIT_CODES,
    Parser,
    call,
    common_flags,
    dry_run_flag,
    emit,
)
from mysql_operator.cli_requests import (
    ROTATABLE_KEYS,
    drill_command,
    rotate_passwords_command,
    switchover_command,
)
from mysql_operator.cli_status import status_command


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
    st.set_defaults(func=status_command)
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
    sw.set_defaults(func=switchover_command)
    dr = sub.add_parser(
        "drill",
        parents=[common, dry],
        help="ask for a restore drill now (annotation mysql.operator.dev/drill-request)",
    )
    dr.add_argument("cluster", help="MySQLCluster name (its spec.backup.storage holds the backups)")
    dr.add_argument("--wait", action="store_true", help="wait for the drill's outcome: exit 0 when it passed")
    dr.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait waits (default 3600)")
    dr.set_defaults(func=drill_command)
    rp = sub.add_parser(
        "rotate-passwords",
        parents=[common, dry],
        help="new random passwords in a cluster's generated credentials Secret",
    )
    rp.add_argument("cluster", help="MySQLCluster name")
    rp.add_argument("--key", action="append", choices=ROTATABLE_KEYS, help="only this key (repeatable)")
    rp.set_defaults(func=rotate_passwords_command)
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
