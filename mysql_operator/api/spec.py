"""The MySQLCluster / MySQLBackup contract as typed, immutable Python values.

`parse(body)` accepts a custom object as the apiserver returns it (defaults already applied) or as a
user wrote it (defaults missing): both give the same value. It re-checks what the CRD's CEL rules
check (an object stored before a CRD upgrade must not slip through; every check here is also in the
CRD: tests/integration/test_admission_parser_agree.py),
raising SpecError(field, message) with the field path and the fix.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Mapping

from kubernetes.utils.quantity import parse_quantity

from . import mycnf
from .types import (
    BACKUP_KIND,
    CLUSTER_KIND,
    SSE_C,
    SSE_KMS,
    SSE_S3,
    METHOD_SPELLINGS,
    MODE_SPELLINGS,
    Backup,
    Binlogs,
    CERT_MANAGER_GROUP,
    CERT_MANAGER_MIN_VALIDITY_SECONDS,
    ClusterSpec,
    Credentials,
    Database,
    Encryption,
    FLAVOR_SPELLINGS,
    Failover,
    ISSUER_KINDS,
    IssuerRef,
    MAX_NAME,
    MySQLBackup,
    MySQLCluster,
    RESERVED_LABELS,
    RESERVED_PREFIX,
    Replication,
    Restore,
    Retention,
    S3,
    SSE_C_KEY,
    SUPPORTED_VERSION_RE,
    SYSTEM_SCHEMAS,
    SecretKeys,
    ServerSideEncryption,
    ServiceSpec,
    SpecError,
    Storage,
    TLS,
    UPGRADE_POLICIES,
    DNS_SUBDOMAIN_RE,
    LABEL_VALUE_RE,
    MAX_AGE_RE,
    NAME_RE,
    SIZE_RE,
    VERSION_RE,
    image_version,
    reserved_user,
    series,
    valid_label_key,
)
from .fields import (
    read_metadata,
    IGNORED_FIELDS,
    SUPERSEDED_FIELDS,
    format_duration,
    read_bool,
    read_duration,
    read_enum,
    read_spelled,
    read_int,
    read_object,
    read_str,
    read_str_map,
)
from .cron import (
    check_cron,
)


# ---------------------------------------------------------------- parse


def _s3(value: Any, path: str, with_path: bool = False) -> S3:
    allowed = {
        "bucket",
        "prefix",
        "endpoint",
        "region",
        "forcePathStyle",
        "credentialsSecret",
        "serverSideEncryption",
    }
    d = read_object(value, path, allowed | ({"path"} if with_path else set()))
    cs = read_object(
        d.get("credentialsSecret"),
        f"{path}.credentialsSecret",
        {"name", "accessKeyIdKey", "secretAccessKeyKey"},
    )
    cpath = f"{path}.credentialsSecret"
    s3 = S3(
        bucket=read_str(
            d,
            "bucket",
            path,
            required=True,
            max_len=63,
            pattern=re.compile(r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$"),
            hint="S3 bucket names use lowercase letters, digits, '.' and '-'",
        ),
        prefix=read_str(d, "prefix", path, "", max_len=512),
        endpoint=read_str(
            d,
            "endpoint",
            path,
            max_len=512,
            pattern=re.compile(r"^https?://[^/ ]+(/.*)?$"),
            hint="use a URL such as http://minio.example:9000",
        ),
        region=read_str(d, "region", path, max_len=64),
        force_path_style=read_bool(d, "forcePathStyle", path, False),
        credentials_secret=SecretKeys(
            name=read_str(cs, "name", cpath, required=True),
            access_key_id_key=read_str(cs, "accessKeyIdKey", cpath, "AWS_ACCESS_KEY_ID"),
            secret_access_key_key=read_str(cs, "secretAccessKeyKey", cpath, "AWS_SECRET_ACCESS_KEY"),
        ),
        path=read_str(d, "path", path, required=True, max_len=1024) if with_path else None,
        sse=_sse(d.get("serverSideEncryption"), f"{path}.serverSideEncryption"),
    )
    if s3.sse and s3.sse.type == SSE_C and s3.endpoint and not s3.endpoint.startswith("https://"):
        raise SpecError(
            f"{path}.endpoint",
            "serverSideEncryption type SSE-C sends the key with every request: the endpoint must be https://",
        )
    return s3


def _sse(value: Any, path: str) -> ServerSideEncryption | None:
    if value is None:
        return None
    d = read_object(value, path, {"type", "kmsKeyId", "keySecret"})
    kind = read_str(d, "type", path, required=True)
    if kind not in (SSE_S3, SSE_KMS, SSE_C):
        raise SpecError(f"{path}.type", f"must be {SSE_S3}, {SSE_KMS} or {SSE_C}, not {kind!r}")
    if d.get("kmsKeyId") is not None and kind != SSE_KMS:
        raise SpecError(f"{path}.kmsKeyId", f"is only for type {SSE_KMS}: remove it")
    if (d.get("keySecret") is None) == (kind == SSE_C):
        raise SpecError(
            f"{path}.keySecret",
            "is required with type SSE-C: the Secret holding the key (32 random bytes, base64)"
            if kind == SSE_C
            else "is only for type SSE-C: remove it",
        )
    return ServerSideEncryption(
        type=kind,
        kms_key_id=read_str(d, "kmsKeyId", path, max_len=2048),
        customer_key=_key_secret(d, path, SSE_C_KEY) if kind == SSE_C else None,
    )


LATEST = "latest"
ARCHIVE_FOLDER = "binlogs"  # <prefix>/<cluster>/binlogs: the binary log archive (backup/binlog_archive.py)
# the CRD's CEL rules on spec.restore.gtid and spec.restore.pointInTime match these texts
# (tests/integration/test_admission_parser_agree.py); [ \t\n\f\r] is RE2's \s (Python's \s also
# takes Unicode spaces)
_GTID_ITEM = r"(([0-9a-fA-F-]{36}(:[0-9]+(-[0-9]+)?)+)|([0-9]+-[0-9]+-[0-9]+))"
GTID_PATTERN = rf"^[ \t\n\f\r]*{_GTID_ITEM}([ \t\n\f\r]*,[ \t\n\f\r]*{_GTID_ITEM})*[ \t\n\f\r]*$"
_GTID_RE = re.compile(GTID_PATTERN)
_GTID_HINT = (
    "a GTID set as SELECT @@gtid_executed prints it (MySQL, uuid:1-42,...) or a position as "
    "SELECT @@gtid_binlog_pos does (MariaDB, 0-1-42,...)"
)
# to the second, 1970 to 2999 (a day its month lacks: refused by fromisoformat and a CEL rule)
_RFC3339 = (
    "(19[7-9][0-9]|2[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
)
POINT_IN_TIME_PATTERN = f"^({LATEST}|{_RFC3339})$"
_RFC3339_RE = re.compile(_RFC3339)


def _point_in_time(value: str | None, path: str) -> str | None:
    """RFC 3339 to the second (binary log events carry whole seconds), as a UTC stamp; or latest."""
    if value is None or value == LATEST:
        return value
    if not _RFC3339_RE.fullmatch(value):
        raise SpecError(
            path,
            f"{value!r} is not a time to the second in RFC 3339 between 1970 and 2999 (e.g. "
            "2026-11-26T10:42:17Z or 2026-11-26T11:42:17+01:00), nor 'latest': binary log events "
            "carry whole seconds",
        )
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise SpecError(path, f"{value!r} is not a valid date and time") from None
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _encryption(value: Any, path: str) -> Encryption | None:
    if value is None:
        return None
    return _key_secret(read_object(value, path, {"keySecret"}), path, "encryption-key")


def _key_secret(d: dict, path: str, default_key: str) -> Encryption:
    """`<path>.keySecret`: the Secret and key of a 256-bit key."""
    kpath = f"{path}.keySecret"
    if d.get("keySecret") is None:
        raise SpecError(kpath, "is required: the Secret holding the key (32 random bytes, base64)")
    ks = read_object(d["keySecret"], kpath, {"name", "key"})
    return Encryption(
        secret=read_str(ks, "name", kpath, required=True, pattern=DNS_SUBDOMAIN_RE, hint="a Secret name"),
        key=read_str(
            ks,
            "key",
            kpath,
            default_key,
            max_len=253,
            pattern=re.compile(r"^[-._a-zA-Z0-9]+$"),
            hint="a Secret key uses letters, digits, '-', '_' and '.'",
        ),
    )


def _resources(value: Any, path: str) -> dict[str, dict[str, str]]:
    d = read_object(value, path, {"limits", "requests"})
    out: dict[str, dict[str, str]] = {}
    for kind in ("limits", "requests"):
        if not d.get(kind):
            continue
        if not isinstance(d[kind], dict):
            raise SpecError(f"{path}.{kind}", "must be a map of resource name to quantity")
        entries = {}
        for res, q in sorted(d[kind].items()):
            try:
                parse_quantity(q)
            except ValueError:
                raise SpecError(f"{path}.{kind}.{res}", f"{q!r} is not a quantity (e.g. 500m, 2Gi)") from None
            entries[res] = str(q)
        out[kind] = entries
    for res, q in out.get("requests", {}).items():
        limit = out.get("limits", {}).get(res)
        if limit is not None and parse_quantity(q) > parse_quantity(limit):
            raise SpecError(
                f"{path}.requests.{res}",
                f"{q} exceeds the limit {limit}: requests must not exceed limits for the same "
                "resource (the API refuses such a Pod): lower the request or raise the limit",
            )
    return out


def _pull_secrets(value: Any, path: str) -> tuple[str, ...]:
    """[{name: <Secret>}, ...] (core/v1 LocalObjectReference), as the Pod API takes it."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > 8:
        raise SpecError(path, "must be a list of at most 8 {name: <Secret>} entries")
    names = []
    for n, ref in enumerate(value):
        if not isinstance(ref, dict) or set(ref) != {"name"}:
            raise SpecError(f"{path}[{n}]", "must be {name: <Secret>}")
        name = read_str(
            ref, "name", f"{path}[{n}]", required=True, pattern=DNS_SUBDOMAIN_RE, hint="a Secret name"
        )
        names.append(name)
    return tuple(n for n in names if n)


def _tolerations(value: Any, path: str) -> tuple[Mapping[str, Any], ...]:
    """The checks the Pod API makes and the CRD repeats (so a bad toleration is refused at admission)."""
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise SpecError(path, "must be a list of core/v1 Tolerations")
    for n, t in enumerate(value):
        op, where = t.get("operator", "Equal"), f"{path}[{n}]"
        if op == "Exists" and t.get("value"):
            raise SpecError(
                where,
                "a toleration with operator Exists matches every value: remove value, or use operator Equal",
            )
        if not t.get("key") and op != "Exists":
            raise SpecError(
                where,
                "a toleration without a key must have operator Exists: add a key or set operator Exists",
            )
        if t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute":
            raise SpecError(
                where,
                "tolerationSeconds only applies to effect NoExecute: remove it or set the effect to NoExecute",
            )
    return tuple(value)


def _labels(d: dict, key: str, path: str) -> dict[str, str]:
    labels = read_str_map(d, key, path, max_len=63)
    for k, v in labels.items():
        if not valid_label_key(k):
            raise SpecError(
                f"{path}.{key}.{k}",
                "is not a valid label key: use [prefix/]name, the name "
                "up to 63 letters, digits, '-', '_' or '.'",
            )
        if k in RESERVED_LABELS or k.startswith(RESERVED_PREFIX):
            raise SpecError(
                f"{path}.{key}.{k}", "is a label the operator sets and selects on: choose another key"
            )
        if not LABEL_VALUE_RE.fullmatch(v):
            raise SpecError(f"{path}.{key}.{k}", f"{v!r} is not a valid label value")
    return labels


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

    replication = _replication(s.get("replication"), f"{path}.replication", instances, flavor)

    credentials = None
    if s.get("credentials") is not None:
        c = read_object(s["credentials"], f"{path}.credentials", {"secretName"})
        credentials = Credentials(read_str(c, "secretName", f"{path}.credentials", required=True))

    database = _database(s["database"], f"{path}.database") if s.get("database") is not None else None

    cfg = read_object(s.get("config"), f"{path}.config", {"myCnf"})
    my_cnf = read_str(cfg, "myCnf", f"{path}.config", "", max_len=16384)
    try:
        mycnf.check(my_cnf)
    except mycnf.MyCnfError as e:
        raise SpecError(f"{path}.config.myCnf", str(e)) from None

    storage = _storage(s.get("storage"), f"{path}.storage")

    affinity = s.get("affinity")
    if affinity is not None and not isinstance(affinity, dict):
        raise SpecError(f"{path}.affinity", "must be an object (a core/v1 Affinity)")
    tolerations = _tolerations(s.get("tolerations") or [], f"{path}.tolerations")

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

    backup = _backup(s["backup"], f"{path}.backup") if s.get("backup") is not None else None

    tls = _tls(s.get("tls"), f"{path}.tls")

    restore = _restore(s["restore"], f"{path}.restore") if s.get("restore") is not None else None

    return ClusterSpec(
        instances=instances,
        flavor=flavor,
        version=version,
        image=image,
        image_pull_policy=read_enum(
            s, "imagePullPolicy", path, "IfNotPresent", ("Always", "IfNotPresent", "Never")
        ),
        image_pull_secrets=_pull_secrets(s.get("imagePullSecrets"), f"{path}.imagePullSecrets"),
        primary=primary,
        replication=replication,
        credentials=credentials,
        database=database,
        my_cnf=my_cnf,
        storage=storage,
        resources=_resources(s.get("resources"), f"{path}.resources"),
        affinity=affinity,
        tolerations=tolerations,
        node_selector=_node_selector(s, path),
        priority_class_name=read_str(
            s,
            "priorityClassName",
            path,
            pattern=DNS_SUBDOMAIN_RE,
            hint="a PriorityClass name has lowercase letters, digits, '-' and '.' (see `kubectl get priorityclass`)",
        ),
        pod_labels=_labels(s, "podLabels", path),
        pod_annotations=_annotations(s, path),
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


def _replication(value: Any, rpath: str, instances: int, flavor: str) -> Replication:
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


def _database(value: Any, dpath: str) -> Database:
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


def _storage(value: Any, spath: str) -> Storage:
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


def _backup(value: Any, bpath: str) -> Backup:
    """spec.backup: where backups go, when, how long they are kept, the binary-log archive."""
    b = read_object(value, bpath, {"storage", "schedule", "retention", "encryption", "binlogs", "method"})
    bs = None
    if b.get("storage") is not None:
        bst = read_object(b["storage"], f"{bpath}.storage", {"s3"})
        if bst.get("s3") is None:
            raise SpecError(f"{bpath}.storage.s3", "is required: the S3 bucket backups go to")
        bs = _s3(bst["s3"], f"{bpath}.storage.s3")
    schedule = read_str(b, "schedule", bpath, max_len=128)
    if schedule is not None:
        try:
            check_cron(schedule)
        except ValueError as e:
            raise SpecError(f"{bpath}.schedule", str(e)) from None
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
    return Backup(
        s3=bs,
        method=method,
        schedule=schedule,
        binlogs=binlogs,
        encryption=_encryption(b.get("encryption"), f"{bpath}.encryption"),
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


def _tls(value: Any, tpath: str) -> TLS:
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
        issuer_ref=_issuer_ref(t.get("issuerRef"), f"{tpath}.issuerRef"),
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


def _restore(value: Any, rpath: str) -> Restore:
    """spec.restore: the backup a new cluster starts from, and the point in time."""
    rs = read_object(value, rpath, {"fromBackup", "s3", "encryption", "pointInTime", "gtid"})
    if (rs.get("fromBackup") is None) == (rs.get("s3") is None):
        raise SpecError(rpath, "needs exactly one of spec.restore.fromBackup or spec.restore.s3")
    from_backup = None
    if rs.get("fromBackup") is not None:
        fb = read_object(rs["fromBackup"], f"{rpath}.fromBackup", {"name"})
        from_backup = read_str(fb, "name", f"{rpath}.fromBackup", required=True)
    restore = Restore(
        from_backup=from_backup,
        s3=_s3(rs["s3"], f"{rpath}.s3", with_path=True) if rs.get("s3") is not None else None,
        encryption=_encryption(rs.get("encryption"), f"{rpath}.encryption"),
        point_in_time=_point_in_time(read_str(rs, "pointInTime", rpath, max_len=64), f"{rpath}.pointInTime"),
        gtid=read_str(rs, "gtid", rpath, max_len=4096, pattern=_GTID_RE, hint=_GTID_HINT),
    )
    if restore.point_in_time and restore.gtid:
        raise SpecError(
            f"{rpath}.gtid", "give either spec.restore.pointInTime or spec.restore.gtid, not both"
        )
    return restore


def _issuer_ref(value: Any, path: str) -> IssuerRef | None:
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


def _node_selector(s: dict, path: str) -> dict[str, str]:
    selector = read_str_map(s, "nodeSelector", path, max_len=63)
    for k, v in selector.items():
        if not valid_label_key(k) or not LABEL_VALUE_RE.fullmatch(v):
            raise SpecError(f"{path}.nodeSelector.{k}", "must be a valid node label key and value")
    return selector


def _annotations(s: dict, path: str) -> dict[str, str]:
    annotations = read_str_map(s, "podAnnotations", path)
    for k in annotations:
        if k.startswith(RESERVED_PREFIX):
            raise SpecError(
                f"{path}.podAnnotations.{k}", "is an annotation the operator owns: choose another key"
            )
    return annotations


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
        s3 = _s3(st["s3"], "spec.storage.s3")
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
