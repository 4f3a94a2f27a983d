"""Pure builders: the parts of a server's Pod - its environment from the credentials Secret, the
security context, mounts, probe, default affinity, resources, the re-seed init containers and
the metrics exporter sidecar - and the server version a cluster runs."""

from __future__ import annotations

from typing import Any, Mapping

from ..api import MySQLCluster
from ..db import accounts
from ..db.flavor import Flavor, ServerVersion
from . import common as k


def secret_env(name: str, secret: str, key: str, optional: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": k.RUN_AS,
        "runAsGroup": k.RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def server_mounts() -> list[dict[str, Any]]:
    return [
        {"name": "data", "mountPath": k.DATA_ROOT},
        {"name": "config", "mountPath": k.CONFIG_DIR, "readOnly": True},
        {"name": "run", "mountPath": k.RUN_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
    ]


def probe(kind: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "exec": {"command": ["/bin/bash", f"{k.CONFIG_DIR}/probe.sh", kind]},
        "periodSeconds": period,
        "timeoutSeconds": 10,
        "failureThreshold": failures,
    }


def default_affinity(c: MySQLCluster) -> dict[str, Any]:
    """Prefer one server per node (preferred, so a one-node cluster still schedules all)."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": k.selector_labels(c)},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }


def server_version(c: MySQLCluster) -> ServerVersion:
    """The spec's flavor and version; a missing patch level is 0 (`8.4` is 8.4.0), so a
    privilege that appeared in a patch release is never assumed."""
    numbers = [int(n) for n in c.spec.server_version.split(".")] + [0, 0]
    return ServerVersion(Flavor(c.spec.flavor), *numbers[:3])


def grants_env(
    name: str, grants: tuple[accounts.Grant, ...], revokes: tuple[accounts.Grant, ...] = ()
) -> dict[str, Any]:
    return {"name": name, "value": accounts.grant_lines(grants, revokes)}


# The server's CPU request where spec.resources names no CPU. A container without one gets the
# smallest CPU weight there is (2 shares): any neighbour Pod busy with a request of its own takes
# the CPU from it. Measured on a 2-core node with three busy Pods requesting 100m beside the
# cluster (CREATE, INSERT and DROP through -rw, median / max of 20): 2,464 / 3,599 ms without a
# request, 279 / 738 ms with 10m, 8 / 136 ms with 25m, 11 / 74 ms with 50m (16 ms idle). 25m
# keeps the footprint small (three servers: 0.075 CPU).
SERVER_CPU_REQUEST = "25m"


def server_resources(c: MySQLCluster) -> dict[str, dict[str, str]]:
    """The server's (and its init container's) resources: spec.resources, plus a CPU request of
    SERVER_CPU_REQUEST where it sets neither a CPU request nor a CPU limit (a limit alone is the
    request too, as Kubernetes defaults it)."""
    out = {kind: dict(v) for kind, v in c.spec.resources.items()}
    if not any("cpu" in out.get(kind, {}) for kind in ("requests", "limits")):
        out.setdefault("requests", {})["cpu"] = SERVER_CPU_REQUEST
    return out


def sidecar_resources(c: MySQLCluster) -> dict[str, dict[str, str]]:
    """The seed donor's and the exporter's: small where spec.resources sets any, none otherwise
    (what a cluster without resources asks of the node stays the server's default alone)."""
    return {"requests": {"cpu": "10m", "memory": "32Mi"}} if c.spec.resources else {}


def seed_containers(c: MySQLCluster, resources: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """MariaDB re-seeding by a physical copy (sh/seed.sh): the init container that puts a copy in
    place when the operator asked for one (before the data directory is initialised), and the
    sidecar that makes copies of this server for others (mariadb-backup, over TLS)."""
    s = c.spec
    tls = {"name": "tls", "mountPath": k.TLS_DIR, "readOnly": True}
    token = {"name": "seed-token", "mountPath": k.SEED_TOKEN_DIR, "readOnly": True}
    common = {
        "image": s.image_ref,
        "imagePullPolicy": s.image_pull_policy,
        "securityContext": container_security(),
    }
    receive = {
        "name": "seed",
        **common,
        "command": ["/bin/bash", f"{k.CONFIG_DIR}/seed.sh", "receive"],
        "env": [field_env("POD_NAME", "metadata.name")],
        # why a copy failed (its last lines) reaches the status and a Warning Event (pods.py)
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {kind: dict(v) for kind, v in resources.items()},  # --prepare: like the server
        "volumeMounts": server_mounts()
        + [tls, token, {"name": "reseed", "mountPath": k.RESEED_DIR, "readOnly": True}],
    }
    donor = {
        "name": "seed-donor",
        **common,
        "command": ["/bin/bash", f"{k.CONFIG_DIR}/seed.sh", "serve"],
        "ports": [{"name": "seed", "containerPort": k.SEED_PORT, "protocol": "TCP"}],
        "resources": sidecar_resources(c),  # idle until a copy is asked for
        "volumeMounts": [
            {"name": "data", "mountPath": k.DATA_ROOT, "readOnly": True},
            {"name": "config", "mountPath": k.CONFIG_DIR, "readOnly": True},
            {"name": "run", "mountPath": k.RUN_DIR},  # the server's socket and client.cnf
            {"name": "tmp", "mountPath": "/tmp"},
            tls,
            token,
        ],
    }
    return receive, donor


def exporter_container(c: MySQLCluster, image: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metrics sidecar (sh/exporter.sh: mysqld_exporter as the monitoring account over the
    server's socket, on the port named "metrics") and the volume with its password. It runs in an
    exporter image (spec.monitoring.image, else `image`: the operator's), never the server's:
    official server images have no mysqld_exporter, and the sidecar needs nothing of the server's."""
    s = c.spec
    container = {
        "name": "exporter",
        "image": s.monitoring_image or image,
        "imagePullPolicy": s.image_pull_policy,
        "command": ["/bin/sh", f"{k.CONFIG_DIR}/exporter.sh"],
        "env": [
            {"name": "MONITOR_USER", "value": k.MONITOR_USER},
            {"name": "EXPORTER_PORT", "value": str(k.EXPORTER_PORT)},
        ],
        "ports": [{"name": "metrics", "containerPort": k.EXPORTER_PORT, "protocol": "TCP"}],
        "resources": sidecar_resources(c),
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": "config", "mountPath": k.CONFIG_DIR, "readOnly": True},
            {"name": "run", "mountPath": k.RUN_DIR},  # the server's socket
            {"name": "monitor", "mountPath": k.MONITOR_DIR, "readOnly": True},
        ],
    }
    volume = {
        "name": "monitor",
        "secret": {
            "secretName": k.credentials_secret_name(c),
            "items": [{"key": k.MONITOR_PASSWORD_KEY, "path": "password"}],
            "defaultMode": 0o440,
            "optional": True,  # a Secret of the user's from before monitor-password existed
        },
    }
    return container, volume
