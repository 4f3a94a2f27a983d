"""Pure builder: the binary log archiver Deployment (`mysql-operator backup archive-binlogs ...`),
which follows the primary's binary logs into the backup bucket."""

from __future__ import annotations

from typing import Any


from ..api import MySQLCluster
from . import common as k
from .tenant_jobs import (
    CLIENT_TOOLS_DIR,
    ENV_DB_PASSWORD,
    ca_bundle_volume,
    client_tools_sidecar,
    client_tools_volume,
    encryption_parts,
    s3_parts,
    secret_env,
    tenant_pod,
)


COMPONENT_BINLOGS = "binlog-archiver"
BINLOG_SPOOL = "/var/spool/mysql-operator/binlogs"  # the streamed files, shared with the sidecar
BINLOG_HEALTH_PORT = 8080  # GET /healthz: 200 while archiving (the Pod's readiness); GET /metrics


def binlog_archiver_name(c: MySQLCluster) -> str:
    return f"{c.name}-binlog-archiver"


def binlog_archiver(
    c: MySQLCluster,
    image: str,
    *,
    image_pull_policy: str = "IfNotPresent",
    tools_repository: str = k.TOOLS_REPOSITORY,
) -> dict[str, Any] | None:
    """The Deployment that archives the primary's binary logs (spec.backup.binlogs), or None
    when off: `mysql-operator backup archive-binlogs` in the operator image, the servers' tool
    image beside it running `mysqlbinlog`/`mariadb-binlog --read-from-remote-server
    --stop-never` into a disk spool both mount. A Pod of its own, so an operator upgrade never
    restarts a server; tenant bytes, so no token (see tenant_job). One Pod at most, also during
    an update (Recreate): two streams would upload the same files. The caller adds the owner
    reference to the MySQLCluster."""
    b = c.spec.backup
    if b is None or b.s3 is None or not b.binlogs.enabled:
        return None
    s3a, s3env = s3_parts(b.s3)
    enc_args, enc_env = encryption_parts(b.encryption, "spec.backup.encryption")
    args = [
        "backup",
        "archive-binlogs",
        "--cluster",
        c.name,
        *(["--cluster-uid", c.uid] if c.uid else []),
        *s3a,
        "--user",
        k.BINLOG_USER,
        "--max-delay",
        str(b.binlogs.max_delay_seconds),
        "--spool",
        BINLOG_SPOOL,
        "--health-port",
        str(BINLOG_HEALTH_PORT),
        "--tls-ca",
        k.CA_BUNDLE,
        "--client-tools-dir",
        CLIENT_TOOLS_DIR,
        *enc_args,
    ]
    for i in range(c.spec.instances):
        args += ["--source", f"{k.pod_name(c, i)}={k.pod_host(c, i)}:{k.PORT}"]
    spool = ({"name": "spool", "emptyDir": {}}, {"name": "spool", "mountPath": BINLOG_SPOOL})
    tools = client_tools_sidecar(c, tools_repository, spool[1])
    args += ["--tools-image", tools["image"]]
    labels, template = tenant_pod(
        c,
        COMPONENT_BINLOGS,
        "archiver",
        image,
        args,
        [
            secret_env(ENV_DB_PASSWORD, k.credentials_secret_name(c), k.BINLOG_PASSWORD_KEY),
            *s3env,
            *enc_env,
        ],
        image_pull_policy=image_pull_policy,
        volumes=[ca_bundle_volume(c), client_tools_volume(), spool],
        sidecars=[tools],
        restart_policy="Always",
    )
    (main,) = template["spec"]["containers"]
    # named metrics: the chart's PodMonitor scrapes this port of the archiver as of the servers
    main["ports"] = [{"name": "metrics", "containerPort": BINLOG_HEALTH_PORT}]
    # not Ready while it does not archive (no primary, a failing upload): kubectl get deploy shows it
    main["readinessProbe"] = {
        "httpGet": {"path": "/healthz", "port": "metrics"},
        "periodSeconds": 5,
        "failureThreshold": 2,
    }
    selector = {key: labels[key] for key in ("app.kubernetes.io/instance", "app.kubernetes.io/component")}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": binlog_archiver_name(c), "namespace": c.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": template,
        },
    }
