"""Running the operator: explicit kopf settings, scope, liveness, peering, logs; then kopf.run.

Every kopf setting that matters in production is set here on purpose:
- watch timeouts (server and client): kopf has known silent watch freezes without them;
- a liveness endpoint for the Pod's probe;
- one active replica: with `leader_lease` set, a coordination.k8s.io Lease (leader.py; the
  chart's default); or kopf peering with `peering` set (KopfPeering / ClusterKopfPeering);
  standalone otherwise;
- progress and diff-base storage in annotations under our API group (no status.kopf clutter);
- kopf's own Events only for warnings (ours carry the domain actions).
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import os
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Iterator

import kopf

from mysql_operator.api.types import GROUP, UPGRADE_POLICIES

log = logging.getLogger(__name__)
LOG_FORMATS = ("text", "json")


@dataclass(frozen=True)
class OperatorConfig:
    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False
    liveness: str | None = None  # e.g. http://0.0.0.0:8080/healthz
    metrics_port: int | None = None  # Prometheus /metrics (mysql_operator/metrics.py)
    log_format: str = "text"
    verbose: bool = False
    peering: str | None = None  # None: standalone (one replica)
    priority: int = 0
    # leader election (mysql_operator/leader.py): the Lease's name, and its namespace (the
    # operator's own); None: this process is the only operator
    leader_lease: str | None = None
    leader_namespace: str | None = None
    identity: str = ""  # this replica in the Lease (the Pod name)
    loop_seconds: float = 1.0  # replication observe/decide/act loop
    workers: int = 20  # threads for kopf's sync handlers, and as many for the clusters' passes
    # a pass running longer gives up its slot among `workers` (it runs on, on a spare thread, and
    # its cluster is told: condition PassOverdue, an Event, mysql_operator_pass_overdue): one
    # cluster's hung servers never hold the threads other clusters' failovers need
    pass_deadline_seconds: float = 90.0
    # full apply of owned objects (drift correction): at 60 s, 100 idle clusters cost 10.5 % of a
    # core (benchmarks/operator_scale.py); StatefulSet drift is re-applied at once from its watch
    resync_seconds: float = 300.0
    resolver: str = "auto"  # auto (= ip) | ip | dns (see k8s/resolve.py)
    apply_crds: str | None = None  # a folder of the operator's CRDs to apply at start (k8s/crds.py)
    # for clusters whose spec.operatorUpgrades is not set: roll the restarts a new operator
    # version needs (Auto) or wait for each cluster's approval (Manual)
    operator_upgrades: str = "Auto"
    watch_server_timeout: int = 300
    watch_client_timeout: int = 330
    watch_connect_timeout: int = 30
    request_timeout: int = 60

    def check(self) -> None:
        if self.all_namespaces == bool(self.namespaces):
            raise ValueError("choose the scope: --all-namespaces, or --namespace NS (repeatable)")
        if self.log_format not in LOG_FORMATS:
            raise ValueError(f"--log-format must be one of {', '.join(LOG_FORMATS)}")
        if self.loop_seconds <= 0 or self.resync_seconds <= 0 or self.pass_deadline_seconds <= 0:
            raise ValueError("--loop-seconds, --resync-seconds and --pass-deadline-seconds must be positive")
        if self.watch_client_timeout <= self.watch_server_timeout:
            raise ValueError("the watch client timeout must exceed the server timeout")
        if self.leader_lease and not self.leader_namespace:
            raise ValueError(
                "--leader-elect needs the Lease's namespace: --leader-elect-namespace or POD_NAMESPACE"
            )
        if self.operator_upgrades not in UPGRADE_POLICIES:
            raise ValueError(f"--operator-upgrades must be one of {', '.join(UPGRADE_POLICIES)}")
        if self.leader_lease and self.peering:
            raise ValueError("choose one of --leader-elect and --peering")


class SpecDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's own essence of a cluster (what a change is compared on: all but the metadata and the
    status, plus labels and annotations), built from the parts it keeps. kopf deep-copies the whole
    body first and then drops the status and the metadata (managedFields with it); for every watch
    event of every cluster, that copy was 19 % of the operator's CPU while 300 clusters were
    created (benchmarks/operator_scale.py --profile-creating)."""

    KEPT_METADATA = ("labels", "annotations", "ownerReferences")  # (kopf's key marking reads the owners)

    def build(self, *, body, extra_fields=None):
        if extra_fields:  # a handler asks for a field of the status or metadata: kopf's way
            return super().build(body=body, extra_fields=extra_fields)
        meta = body.get("metadata") or {}
        kept = {k: v for k, v in body.items() if k not in ("metadata", "status")}
        kept["metadata"] = {k: meta[k] for k in self.KEPT_METADATA if k in meta}
        return super().build(body=kopf.Body(kept))


class Progress(kopf.AnnotationsProgressStorage):
    """kopf's records of handlers in progress (annotations), cleared from an essence without a copy
    when it holds none. The essences kopf clears are fresh objects (built above, or the stored one
    just decoded), and it copied each again for every event: 6 % of the operator's CPU while 300
    clusters were created."""

    def clear(self, *, essence):
        annotations = (essence.get("metadata") or {}).get("annotations") or {}
        if any(key.startswith(f"{self.prefix}/") for key in annotations):
            return super().clear(essence=essence)
        self.remove_empty_stanzas(essence)
        return essence


def settings_for(cfg: OperatorConfig) -> kopf.OperatorSettings:
    s = kopf.OperatorSettings()
    s.watching.server_timeout = cfg.watch_server_timeout
    s.watching.client_timeout = cfg.watch_client_timeout
    s.watching.connect_timeout = cfg.watch_connect_timeout
    s.networking.request_timeout = cfg.request_timeout
    s.networking.connect_timeout = cfg.watch_connect_timeout
    s.persistence.progress_storage = Progress(prefix=GROUP)
    s.persistence.diffbase_storage = SpecDiffBase(prefix=GROUP, key="last-handled-configuration")
    s.posting.level = logging.WARNING
    s.posting.reporting_component = "mysql-operator"
    s.posting.reporting_instance = os.environ.get("POD_NAME") or "mysql-operator"
    s.execution.max_workers = cfg.workers
    # a deleted cluster's loop that is still in a pass when kopf stops it is looked at again this
    # often (kopf's default, 60 s, held the finalizer - and `kubectl delete` - that long)
    s.background.cancellation_polling = 1.0
    s.peering.standalone = cfg.peering is None
    if cfg.peering:
        s.peering.name = cfg.peering
        s.peering.priority = cfg.priority
        s.peering.clusterwide = cfg.all_namespaces
        s.peering.mandatory = True
    return s


def run(cfg: OperatorConfig) -> int:
    cfg.check()
    kopf.configure(
        verbose=cfg.verbose,
        log_format=kopf.LogFormat.JSON if cfg.log_format == "json" else kopf.LogFormat.FULL,
    )
    if not cfg.verbose:  # "Timer ... succeeded" every loop per cluster: only problems, ours at INFO
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    from mysql_operator.handlers import backups  # noqa: F401 - registers MySQLBackup handlers
    from mysql_operator.handlers import cluster as cluster_handlers
    from mysql_operator.handlers import sql as sql_handlers

    elector = None
    if cfg.leader_lease:  # a standby waits here, answering its liveness probe, until it leads
        from mysql_operator.k8s.client import api_client
        from mysql_operator.leader import Elector

        assert cfg.leader_namespace is not None  # cfg.check()
        elector = Elector(api_client(), cfg.leader_namespace, cfg.leader_lease, cfg.identity)
        with standby_liveness(cfg.liveness):
            elector.acquire()
        elector.keep()
    if cfg.apply_crds:  # the leader only: a standby of an older version must not apply its CRDs
        from mysql_operator.k8s import crds
        from mysql_operator.k8s.client import api_client

        api = api_client()
        crds.apply(api, cfg.apply_crds, warn=lambda reason, message: warn_on_own_pod(api, reason, message))
    cluster_handlers.register(cfg)
    sql_handlers.register()  # MySQLDatabase/User/Grant: they feed the passes cluster_handlers runs
    if cfg.metrics_port:
        from mysql_operator import metrics

        metrics.serve(cfg.metrics_port)
    try:
        kopf.run(
            clusterwide=cfg.all_namespaces,
            namespaces=list(cfg.namespaces),
            liveness_endpoint=cfg.liveness,
            standalone=cfg.peering is None,
            peering_name=cfg.peering,
            priority=cfg.priority,
            settings=settings_for(cfg),
        )
    finally:
        cluster_handlers.drain()
        if elector is not None:  # stopped cleanly (SIGTERM): a standby takes over at once
            elector.release()
    return 0


def warn_on_own_pod(api, reason: str, message: str) -> None:
    """Effect: a Warning Event on the operator's own Pod (POD_NAME, POD_NAMESPACE, POD_UID from the
    chart), so `kubectl get events -n <its namespace>` shows what it could not do at start. Best
    effort: the log line is already written; an operator without `create events` in its own
    namespace (a namespaced install watching others) has only that."""
    from kubernetes.client.rest import ApiException

    from mysql_operator.k8s import objects as k

    name, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
    if not (name and namespace):
        return
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": os.environ.get("POD_UID")},
    }
    try:
        k.post_events(api, pod, [("Warning", reason, message)])
    except ApiException as e:
        log.warning("could not post the %s Event on %s/%s: %s", reason, namespace, name, e.reason)


@contextlib.contextmanager
def standby_liveness(url: str | None) -> Iterator[None]:
    """While a replica waits for the Lease, answer its liveness probe (kopf serves it once it
    runs): a standby is alive, and the kubelet must not restart it."""
    if not url:
        yield
        return
    parsed = urllib.parse.urlsplit(url)

    class Alive(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            self.send_response(200 if self.path.split("?")[0] == (parsed.path or "/") else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((parsed.hostname or "0.0.0.0", parsed.port or 80), Alive)
    thread = threading.Thread(target=server.serve_forever, name="standby-liveness", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
