"""The MySQLCluster / MySQLBackup contract as typed, immutable Python values.

`parse(body)` accepts a custom object as the apiserver returns it (defaults already applied) or as a
user wrote it (defaults missing): both give the same value. It re-checks what the CRD's CEL rules
check (an object stored before a CRD upgrade must not slip through; every check here is also in the
CRD: tests/integration/test_admission_parser_agree.py),
raising SpecError(field, message) with the field path and the fix.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from . import mycnf
from .types import (
    BACKUP_KIND,
    CLUSTER_KIND,
    METHOD_SPELLINGS,
    ClusterSpec,
    Credentials,
    FLAVOR_SPELLINGS,
    MAX_NAME,
    MySQLBackup,
    MySQLCluster,
    SUPPORTED_VERSION_RE,
    ServiceSpec,
    SpecError,
    UPGRADE_POLICIES,
    DNS_SUBDOMAIN_RE,
    NAME_RE,
    VERSION_RE,
    image_version,
    series,
)
from .fields import (
    read_metadata,
    IGNORED_FIELDS,
    SUPERSEDED_FIELDS,
    read_bool,
    read_enum,
    read_spelled,
    read_int,
    read_object,
    read_str,
    read_str_map,
)
from .pod_fields import (
    read_annotations,
    read_labels,
    read_node_selector,
    read_pull_secrets,
    read_resources,
    read_tolerations,
)
from .restore_fields import read_restore
from .s3_fields import read_s3
from .sections import read_backup, read_database, read_replication, read_storage, read_tls


# ---------------------------------------------------------------- parse


ARCHIVE_FOLDER = "binlogs"  # <prefix>/<cluster>/binlogs: the binary log archive (backup/binlog_archive.py)


SPEC_FIELDS = {
    "flavor",
    "version",
    "image",
    "toolsImage",
    "imagePullPolicy",
    "instances",
    "primary",
    "replication",
    "credentials",
    "database",
    "config",
    "storage",
    "resources",
    "affinity",
    "tolerations",
    "nodeSelector",
    "priorityClassName",
    "podLabels",
    "podAnnotations",
    "imagePullSecrets",
    "service",
    "monitoring",
    "backup",
    "restore",
    "deletionPolicy",
    "operatorUpgrades",
    "tls",
}


def parse_spec(value: Any, path: str = "spec") -> ClusterSpec:
    s = read_object(value, path, SPEC_FIELDS)
    flavor = read_spelled(s, "flavor", path, "mysql", FLAVOR_SPELLINGS)
    instances = read_int(s, "instances", path, None, 1, 9)
    if instances is None:
        raise SpecError(f"{path}.instances", "is required: the number of servers, 1 to 9")
    version = read_str(s, "version", path, max_len=16)
    if version is not None and not VERSION_RE[flavor].match(version):
        raise SpecError(
            f"{path}.version",
            "must match spec.flavor: MySQL versions are 8.4 or 9.x, MariaDB versions are 10.11, 11.4 or 11.8",
        )
    if version is not None and not SUPPORTED_VERSION_RE[flavor].fullmatch(version):
        raise SpecError(
            f"{path}.version",
            "is not a supported release: MySQL 8.4 (LTS) or 9.x (9.7 LTS "
            "and later), MariaDB 10.11, 11.4 or 11.8 (LTS); MySQL 8.0 and older and other "
            "MariaDB series are end of life or short-term: choose a supported one",
        )
    image = read_str(s, "image", path, max_len=512)
    tag = image_version(image) if image else None
    if tag is not None and not SUPPORTED_VERSION_RE[flavor].match(tag):
        raise SpecError(
            f"{path}.image",
            "has a tag that is not a supported release of spec.flavor: MySQL 8.4 "
            "or 9.x, MariaDB 10.11, 11.4 or 11.8",
        )
    if tag is not None and version is not None and series(tag) != series(version):
        raise SpecError(
            f"{path}.image",
            "has a tag that is another server version than spec.version: make "
            "them the same series (or use an image tag that is not a version)",
        )
    primary = read_int(s, "primary", path, None, 0, 8)
    if primary is not None and primary >= instances:
        raise SpecError(
            f"{path}.primary",
            "must be lower than spec.instances (0-based ordinal): lower spec.primary or raise spec.instances",
        )

    replication = read_replication(s.get("replication"), f"{path}.replication", instances, flavor)

    credentials = None
    if s.get("credentials") is not None:
        c = read_object(s["credentials"], f"{path}.credentials", {"secretName"})
        credentials = Credentials(read_str(c, "secretName", f"{path}.credentials", required=True))

    database = read_database(s["database"], f"{path}.database") if s.get("database") is not None else None

    cfg = read_object(s.get("config"), f"{path}.config", {"myCnf"})
    my_cnf = read_str(cfg, "myCnf", f"{path}.config", "", max_len=16384)
    try:
        mycnf.check(my_cnf)
    except mycnf.MyCnfError as e:
        raise SpecError(f"{path}.config.myCnf", str(e)) from None

    storage = read_storage(s.get("storage"), f"{path}.storage")

    affinity = s.get("affinity")
    if affinity is not None and not isinstance(affinity, dict):
        raise SpecError(f"{path}.affinity", "must be an object (a core/v1 Affinity)")
    tolerations = read_tolerations(s.get("tolerations") or [], f"{path}.tolerations")

    svpath = f"{path}.service"
    sv = read_object(s.get("service"), svpath, {"type", "annotations"})
    service = ServiceSpec(
        type=read_enum(sv, "type", svpath, "ClusterIP", ("ClusterIP", "NodePort", "LoadBalancer")),
        annotations=read_str_map(sv, "annotations", svpath),
    )

    mopath = f"{path}.monitoring"
    mo = read_object(s.get("monitoring"), mopath, {"enabled", "image"})
    monitoring = read_bool(mo, "enabled", mopath, True)
    monitoring_image = read_str(mo, "image", mopath, max_len=512)

    backup = read_backup(s["backup"], f"{path}.backup") if s.get("backup") is not None else None

    tls = read_tls(s.get("tls"), f"{path}.tls")

    restore = read_restore(s["restore"], f"{path}.restore") if s.get("restore") is not None else None

    return ClusterSpec(
        instances=instances,
        flavor=flavor,
        version=version,
        image=image,
        image_pull_policy=read_enum(
            s, "imagePullPolicy", path, "IfNotPresent", ("Always", "IfNotPresent", "Never")
        ),
        image_pull_secrets=read_pull_secrets(s.get("imagePullSecrets"), f"{path}.imagePullSecrets"),
        primary=primary,
        replication=replication,
        credentials=credentials,
        database=database,
        my_cnf=my_cnf,
        storage=storage,
        resources=read_resources(s.get("resources"), f"{path}.resources"),
        affinity=affinity,
        tolerations=tolerations,
        node_selector=read_node_selector(s, path),
        priority_class_name=read_str(
            s,
            "priorityClassName",
            path,
            pattern=DNS_SUBDOMAIN_RE,
            hint="a PriorityClass name has lowercase letters, digits, '-' and '.' (see `kubectl get priorityclass`)",
        ),
        pod_labels=read_labels(s, "podLabels", path),
        pod_annotations=read_annotations(s, path),
        service=service,
        monitoring=monitoring,
        monitoring_image=monitoring_image,
        tools_image=read_str(s, "toolsImage", path, max_len=512),
        tls=tls,
        backup=backup,
        restore=restore,
        deletion_policy=read_enum(s, "deletionPolicy", path, "Retain", ("Retain", "Delete")),
        operator_upgrades=(
            read_enum(s, "operatorUpgrades", path, "Auto", UPGRADE_POLICIES)
            if "operatorUpgrades" in s
            else ""
        ),
    )


def parse(body: Any) -> MySQLCluster:
    """A MySQLCluster custom object (dict) -> MySQLCluster. Raises SpecError. A field this version
    does not know is not refused but ignored and named in `ignored`: the API server prunes what its
    CRD does not declare, so one reaches the operator only from a newer CRD (an operator rolled
    back, or not yet upgraded), and refusing the whole object would stop failover for it. An
    older field set beside the newer one that supersedes it is named in `superseded`."""
    ignored: list[str] = []
    superseded: list[tuple[str, str]] = []
    token, older = IGNORED_FIELDS.set(ignored), SUPERSEDED_FIELDS.set(superseded)
    try:
        c = _parse_cluster(body)
    finally:
        IGNORED_FIELDS.reset(token)
        SUPERSEDED_FIELDS.reset(older)
    if ignored or superseded:
        return dataclasses.replace(c, ignored=tuple(ignored), superseded=tuple(superseded))
    return c


def _parse_cluster(body: Any) -> MySQLCluster:
    meta, name, namespace = read_metadata(body, CLUSTER_KIND)
    if len(name) > MAX_NAME or not NAME_RE.fullmatch(name):
        raise SpecError(
            "metadata.name",
            f"must be at most {MAX_NAME} characters, start with a lowercase "
            "letter and contain only lowercase letters, digits and '-'",
        )
    if "spec" not in body:
        raise SpecError("spec", "is required")
    return MySQLCluster(
        name=name,
        namespace=namespace,
        spec=parse_spec(body["spec"]),
        uid=meta.get("uid"),
        generation=meta.get("generation"),
    )


def parse_backup(body: Any) -> MySQLBackup:
    """A MySQLBackup custom object (dict) -> MySQLBackup. Raises SpecError."""
    meta, name, namespace = read_metadata(body, BACKUP_KIND)
    if name == ARCHIVE_FOLDER:  # its folder would be the archive's: deleting it would delete that
        raise SpecError(
            "metadata.name",
            f"{ARCHIVE_FOLDER} is the folder of the cluster's binary log archive in the bucket: choose another name",
        )
    s = read_object(body.get("spec"), "spec", {"clusterRef", "storage", "method"})
    ref = read_object(s.get("clusterRef"), "spec.clusterRef", {"name"})
    s3 = None
    if s.get("storage") is not None:
        st = read_object(s["storage"], "spec.storage", {"s3"})
        if st.get("s3") is None:
            raise SpecError("spec.storage.s3", "is required: the S3 bucket this backup goes to")
        s3 = read_s3(st["s3"], "spec.storage.s3")
    return MySQLBackup(
        name=name,
        namespace=namespace,
        cluster_name=read_str(ref, "name", "spec.clusterRef", required=True),
        s3=s3,
        uid=meta.get("uid"),
        method=read_spelled(s, "method", "spec", "logical", METHOD_SPELLINGS) if "method" in s else None,
    )


def storage_bytes(spec: ClusterSpec) -> int:
    return int(Decimal(parse_quantity(spec.storage.size)))


def binlog_max_bytes(spec: ClusterSpec) -> int:
    """spec.replication.binlogRetention.maxSize in bytes; by default half of the volume."""
    size = spec.replication.binlog_max_size
    return int(Decimal(parse_quantity(size))) if size else storage_bytes(spec) // 2
