"""The sections of a MySQLCluster's spec, each read and checked on its own: replication, the
application database, storage, backup, TLS."""

from __future__ import annotations

import re
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from .types import (
    METHOD_SPELLINGS,
    MODE_SPELLINGS,
    Backup,
    Binlogs,
    CERT_MANAGER_GROUP,
    CERT_MANAGER_MIN_VALIDITY_SECONDS,
    Database,
    Drill,
    Failover,
    ISSUER_KINDS,
    IssuerRef,
    Replication,
    Retention,
    SYSTEM_SCHEMAS,
    SpecError,
    Storage,
    TLS,
    DNS_SUBDOMAIN_RE,
    MAX_AGE_RE,
    SIZE_RE,
    reserved_user,
)
from .fields import (
    format_duration,
    read_bool,
    read_config_map_name,
    read_duration,
    read_enum,
    read_spelled,
    read_int,
    read_object,
    read_str,
)
from .cron import (
    check_cron,
)
from .s3_fields import read_encryption, read_s3
from .pod_fields import read_resources


def read_replication(value: Any, rpath: str, instances: int, flavor: str) -> Replication:
    """spec.replication (its checks need spec.instances and spec.flavor)."""
    r = read_object(
        value,
        rpath,
        {
            "mode",
            "semiSyncAcks",
            "allowAsyncFallback",
            "failover",
            "maxReadLag",
            "maxReadLagSeconds",
            "errantPolicy",
            "binlogRetention",
        },
    )
    f = read_object(r.get("failover"), f"{rpath}.failover", {"enabled", "delay", "delaySeconds"})
    bpath = f"{rpath}.binlogRetention"
    b = read_object(r.get("binlogRetention"), bpath, {"maxAge", "hours", "maxSize"})
    binlog_max_size = read_str(
        b, "maxSize", bpath, max_len=32, pattern=SIZE_RE, hint="use a Kubernetes quantity such as 5Gi"
    )
    if binlog_max_size is not None and parse_quantity(binlog_max_size) <= 0:
        raise SpecError(
            f"{bpath}.maxSize", "must be larger than zero, e.g. 5Gi (remove it for half of spec.storage.size)"
        )
    mode = read_spelled(r, "mode", rpath, "semisync", MODE_SPELLINGS)
    acks = read_int(r, "semiSyncAcks", rpath, None, 1, 8)
    if acks is not None:
        if mode != "semisync":
            raise SpecError(
                f"{rpath}.semiSyncAcks",
                "only applies to mode SemiSync: remove it or set the mode to SemiSync",
            )
        if acks >= instances:
            raise SpecError(
                f"{rpath}.semiSyncAcks", "must be lower than spec.instances: lower it or raise spec.instances"
            )
        if flavor == "mariadb" and acks != 1:
            raise SpecError(
                f"{rpath}.semiSyncAcks",
                "MariaDB (10.11, 11.4, 11.8) waits for exactly one replica acknowledgement; remove it or set 1",
            )
    return Replication(
        mode=mode,
        semi_sync_acks=acks,
        allow_async_fallback=read_bool(r, "allowAsyncFallback", rpath, False),
        failover=Failover(
            enabled=read_bool(f, "enabled", f"{rpath}.failover", True),
            delay_seconds=read_duration(f, "delay", f"{rpath}.failover", 3, 1, 600, older="delaySeconds"),
        ),
        max_read_lag_seconds=read_duration(r, "maxReadLag", rpath, 60, 0, 86400, older="maxReadLagSeconds"),
        errant_policy=(
            read_enum(r, "errantPolicy", rpath, "Reseed", ("Reseed", "Hold"))
            if r.get("errantPolicy") is not None
            else None
        ),
        binlog_retention_seconds=read_duration(
            b, "maxAge", bpath, 168 * 3600, 0, 3650 * 86400, older="hours", older_unit=3600
        ),
        binlog_max_size=binlog_max_size,
    )


def read_database(value: Any, dpath: str) -> Database:
    """spec.database: a database the cluster creates, and its user."""
    d = read_object(value, dpath, {"name", "user"})
    ident = re.compile(r"^[A-Za-z0-9_]+$")
    db_name = read_str(
        d, "name", dpath, required=True, max_len=64, pattern=ident, hint="use letters, digits and '_'"
    )
    if db_name.lower() in SYSTEM_SCHEMAS:
        raise SpecError(
            f"{dpath}.name",
            "must not be mysql, sys, information_schema or performance_schema "
            "(in any letter case): the server owns these schemas; choose another database name",
        )
    if isinstance(d.get("user"), str) and reserved_user(d["user"]):  # before the pattern: the clearer message
        raise SpecError(
            f"{dpath}.user",
            "must not be root, mysql-operator, mysql-operator-backup, "
            "mysql-operator-restore, mysql-operator-load, mysql-operator-sql, mysql-operator-monitor, mysql-operator-binlog, replication, mariadb.sys, PUBLIC or mysql.* (in any letter "
            "case): the server and the operator own these accounts; choose another user name",
        )
    return Database(
        name=db_name,
        user=read_str(d, "user", dpath, max_len=32, pattern=ident, hint="use letters, digits and '_'"),
    )


def read_storage(value: Any, spath: str) -> Storage:
    """spec.storage: each instance's volume."""
    st = read_object(value, spath, {"size", "storageClassName"})
    size = read_str(
        st,
        "size",
        spath,
        "10Gi",
        max_len=32,
        pattern=SIZE_RE,
        hint="use a Kubernetes quantity such as 10Gi or 500Mi",
    )
    if parse_quantity(size) <= 0:
        raise SpecError(f"{spath}.size", "must be larger than zero, e.g. 10Gi")
    return Storage(
        size=size,
        storage_class_name=read_str(
            st,
            "storageClassName",
            spath,
            pattern=DNS_SUBDOMAIN_RE,
            hint="a StorageClass name has lowercase letters, digits, '-' and '.' (see `kubectl get storageclass`)",
        ),
    )


def read_backup(value: Any, bpath: str) -> Backup:
    """spec.backup: where backups go, when, how long they are kept, the binary-log archive."""
    b = read_object(
        value, bpath, {"storage", "schedule", "retention", "encryption", "binlogs", "method", "drill"}
    )
    bs = None
    if b.get("storage") is not None:
        bst = read_object(b["storage"], f"{bpath}.storage", {"s3"})
        if bst.get("s3") is None:
            raise SpecError(f"{bpath}.storage.s3", "is required: the S3 bucket backups go to")
        bs = read_s3(bst["s3"], f"{bpath}.storage.s3")
    schedule = _read_schedule(b, bpath)
    if schedule is not None:
        if bs is None:
            raise SpecError(f"{bpath}.schedule", "needs spec.backup.storage: say where scheduled backups go")
    rt = read_object(b.get("retention"), f"{bpath}.retention", {"keepLast", "maxAge"})
    blpath = f"{bpath}.binlogs"
    bl = read_object(b.get("binlogs"), blpath, {"enabled", "maxDelay", "maxDelaySeconds"})
    binlogs = Binlogs(
        enabled=read_bool(bl, "enabled", blpath, False),
        max_delay_seconds=read_duration(bl, "maxDelay", blpath, 10, 1, 3600, older="maxDelaySeconds"),
    )
    if binlogs.enabled and bs is None:
        raise SpecError(f"{blpath}.enabled", "needs spec.backup.storage: say where the binary logs go")
    method = read_spelled(b, "method", bpath, "logical", METHOD_SPELLINGS)
    drill = read_drill(b.get("drill"), f"{bpath}.drill") if b.get("drill") is not None else None
    if drill is not None and bs is None:
        raise SpecError(f"{bpath}.drill", "needs spec.backup.storage: a drill restores the cluster's backups")
    return Backup(
        s3=bs,
        drill=drill,
        method=method,
        schedule=schedule,
        binlogs=binlogs,
        encryption=read_encryption(b.get("encryption"), f"{bpath}.encryption"),
        retention=Retention(
            keep_last=read_int(rt, "keepLast", f"{bpath}.retention", None, 1, 1000),
            max_age=read_str(
                rt,
                "maxAge",
                f"{bpath}.retention",
                max_len=16,
                pattern=MAX_AGE_RE,
                hint="use a number and h, d or w, e.g. 30d",
            ),
        ),
    )


def read_tls(value: Any, tpath: str) -> TLS:
    """spec.tls: whether clients must use TLS, the certificates' validity and issuer."""
    t = read_object(
        value, tpath, {"required", "certificateValidity", "certificateValiditySeconds", "issuerRef"}
    )
    tls = TLS(
        required=read_bool(t, "required", tpath, False),
        certificate_validity_seconds=read_duration(
            t,
            "certificateValidity",
            tpath,
            90 * 86400,
            120,
            3 * 365 * 86400,
            older="certificateValiditySeconds",
        ),
        issuer_ref=read_issuer_ref(t.get("issuerRef"), f"{tpath}.issuerRef"),
    )
    if tls.issuer_ref is not None and tls.certificate_validity_seconds < CERT_MANAGER_MIN_VALIDITY_SECONDS:
        key = "certificateValidity" if "certificateValidity" in t else "certificateValiditySeconds"
        least = (
            format_duration(CERT_MANAGER_MIN_VALIDITY_SECONDS)
            if key == "certificateValidity"
            else str(CERT_MANAGER_MIN_VALIDITY_SECONDS)
        )
        raise SpecError(
            f"{tpath}.{key}",
            f"must be at least {least} with spec.tls.issuerRef (cert-manager's shortest certificate)",
        )
    return tls


def read_issuer_ref(value: Any, path: str) -> IssuerRef | None:
    """spec.tls.issuerRef: {name, kind: Issuer|ClusterIssuer, group} (as the CRD checks it)."""
    if value is None:
        return None
    r = read_object(value, path, {"name", "kind", "group"})
    hint = "a Kubernetes object name (lowercase letters, digits, '-' and '.')"
    return IssuerRef(
        name=read_str(
            r,
            "name",
            path,
            required=True,
            pattern=DNS_SUBDOMAIN_RE,
            hint=f"name the cert-manager Issuer or ClusterIssuer: {hint}",
        ),
        kind=read_enum(r, "kind", path, "Issuer", ISSUER_KINDS),
        group=read_str(
            r,
            "group",
            path,
            CERT_MANAGER_GROUP,
            pattern=DNS_SUBDOMAIN_RE,
            hint="an API group, e.g. cert-manager.io",
        ),
    )


def read_drill(value: Any, dpath: str) -> Drill:
    """spec.backup.drill: when restore drills run, how long one may take, what its server asks for."""
    d = read_object(value, dpath, {"schedule", "timeout", "resources", "checksConfigMap"})
    schedule = _read_schedule(d, dpath)
    resources = read_resources(d["resources"], f"{dpath}.resources") if d.get("resources") else None
    return Drill(
        schedule=schedule,
        timeout_seconds=read_duration(d, "timeout", dpath, 3600, 300, 86400),
        resources=resources,
        checks_config_map=read_config_map_name(d, "checksConfigMap", dpath),
    )


def _read_schedule(d: dict, path: str) -> str | None:
    """A cron schedule (`path`.schedule), checked as admission checks it."""
    schedule = read_str(d, "schedule", path, max_len=128)
    if schedule is not None:
        try:
            check_cron(schedule)
        except ValueError as e:
            raise SpecError(f"{path}.schedule", str(e)) from None
    return schedule
