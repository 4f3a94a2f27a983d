"""The MySQLCluster / MySQLBackup contract's names and values: the API group, version and kinds,
the limits and reserved names the CRD states too, SpecError, and the typed, immutable values that
parse_spec (spec.py) builds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping


GROUP = "mysql.operator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CLUSTER_KIND, CLUSTER_PLURAL = "MySQLCluster", "mysqlclusters"
BACKUP_KIND, BACKUP_PLURAL = "MySQLBackup", "mysqlbackups"

FLAVORS = ("mysql", "mariadb")
# the API's spellings (UpperCamelCase) of the choices the code names in lowercase; the lowercase
# ones, the spellings of earlier versions, are read too (api/fields.read_spelled)
FLAVOR_SPELLINGS = {"MySQL": "mysql", "MariaDB": "mariadb"}
MODE_SPELLINGS = {"SemiSync": "semisync", "Async": "async"}
METHOD_SPELLINGS = {"Logical": "logical", "Physical": "physical"}
# spec.operatorUpgrades, and the operator's default for it (--operator-upgrades)
UPGRADE_POLICIES = ("Auto", "Manual")
DEFAULT_VERSION = {"mysql": "8.4", "mariadb": "10.11"}
IMAGE_REPOSITORY = {"mysql": "mysql", "mariadb": "mariadb"}
# the series each flavor's version must belong to, and the supported releases among them
VERSION_RE = {
    "mysql": re.compile(r"^[89]\."),
    "mariadb": re.compile(r"^1[01]\."),
}
SUPPORTED_VERSION_RE = {
    "mysql": re.compile(r"^(8\.4|9\.[0-9]+)(\.[0-9]+)?$"),  # 8.4 LTS, 9.x (9.7 LTS and later)
    "mariadb": re.compile(r"^(10\.11|11\.[48])(\.[0-9]+)?$"),  # the LTS series
}
_IMAGE_VERSION_RE = re.compile(r":([0-9]+\.[0-9]+(\.[0-9]+)?)\Z")  # \Z: as CEL's $


def image_version(image: str) -> str | None:
    """The version an image's tag names (`mysql:9.7`, `registry:5000/mariadb:11.4.5`), else None
    (a digest, `latest`, a suffixed tag: nothing to check)."""
    m = _IMAGE_VERSION_RE.search(image)
    return m.group(1) if m else None


def series(version: str) -> tuple[int, int]:
    """(major, minor) of a version: what upgrades and downgrades are decided on."""
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME = 40
SIZE_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
MAX_AGE_RE = re.compile(r"^([1-9][0-9]*)(h|d|w)$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def valid_label_key(key: str) -> bool:
    """A Kubernetes qualified name: [prefix/]name (prefix a DNS subdomain, name up to 63)."""
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return False
    return bool(_LABEL_NAME_RE.fullmatch(name))


RESERVED_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
)
RESERVED_PREFIX = f"{GROUP}/"
# spec.database.name: the server's own schemas. spec.database.user: the server's and the operator's
# accounts (manifests/common.py *_USER; mysql.sys, mysql.session, mysql.infoschema). Both compared
# lowercased (MariaDB schema names are case-insensitive on some file systems); the CRD's CEL rules
# list the same names.
SYSTEM_SCHEMAS = ("mysql", "sys", "information_schema", "performance_schema")
RESERVED_USERS = (
    "root",
    "mysql-operator",
    "mysql-operator-backup",
    "mysql-operator-restore",
    "mysql-operator-load",
    "mysql-operator-sql",
    "mysql-operator-monitor",
    "mysql-operator-binlog",
    "replication",
    "mariadb.sys",
    "public",
)
RESERVED_USER_PREFIX = "mysql."


def reserved_user(user: str) -> bool:
    """True for an account name spec.database.user must not take (any letter case)."""
    return user.lower() in RESERVED_USERS or user.lower().startswith(RESERVED_USER_PREFIX)


class SpecError(ValueError):
    """A spec the operator refuses. `field` is the path (e.g. spec.primary); str() says the fix."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class Failover:
    enabled: bool = True
    delay_seconds: int = 3


@dataclass(frozen=True)
class Replication:
    mode: str = "semisync"
    semi_sync_acks: int | None = None
    allow_async_fallback: bool = False
    failover: Failover = Failover()
    # a replica lagging more is taken out of the -ro Service until it caught up; 0: never
    max_read_lag_seconds: int = 60
    # Reseed | Hold, None: the default (Reseed only where no acknowledged commit can be errant)
    errant_policy: str | None = None
    # spec.replication.binlogRetention: binary logs older go (0: no time limit) unless another
    # instance still needs them; more than max size (None: half of spec.storage.size) go anyway
    binlog_retention_seconds: int = 168 * 3600
    binlog_max_size: str | None = None

    @property
    def reseed_errant(self) -> bool:
        """Whether a replica's errant transactions may be discarded by re-seeding it. Without an
        explicit policy only with semi-sync that never falls back: then a commit only one server
        has was never acknowledged to a client (AFTER_SYNC)."""
        if self.errant_policy is not None:
            return self.errant_policy == "Reseed"
        return self.mode == "semisync" and not self.allow_async_fallback


@dataclass(frozen=True)
class Credentials:
    secret_name: str


@dataclass(frozen=True)
class Database:
    name: str
    user: str | None = None


CERT_MANAGER_GROUP = "cert-manager.io"
ISSUER_KINDS = ("Issuer", "ClusterIssuer")
# cert-manager refuses (in its webhook) a Certificate shorter than this
CERT_MANAGER_MIN_VALIDITY_SECONDS = 3600


@dataclass(frozen=True)
class IssuerRef:
    """A cert-manager issuer that signs the servers' certificate instead of the cluster's own CA."""

    name: str
    kind: str = "Issuer"  # Issuer (in the cluster's namespace) or ClusterIssuer
    group: str = CERT_MANAGER_GROUP


@dataclass(frozen=True)
class TLS:
    """Every server has a certificate from the cluster's CA (or from `issuer_ref`, a cert-manager
    issuer) and replicas always replicate over verified TLS; `required` also makes the servers
    refuse plaintext clients."""

    required: bool = False
    certificate_validity_seconds: int = 90 * 86400
    issuer_ref: IssuerRef | None = None


@dataclass(frozen=True)
class Storage:
    size: str = "10Gi"
    storage_class_name: str | None = None


@dataclass(frozen=True)
class ServiceSpec:
    type: str = "ClusterIP"
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SecretKeys:
    name: str
    access_key_id_key: str = "AWS_ACCESS_KEY_ID"
    secret_access_key_key: str = "AWS_SECRET_ACCESS_KEY"


@dataclass(frozen=True)
class Encryption:
    """Client-side encryption of backups with the key in a Secret of the cluster's namespace."""

    secret: str
    key: str = "encryption-key"

    def describe(self, field_path: str) -> str:
        return f"Secret {self.secret!r} key {self.key!r} ({field_path}.keySecret)"


SSE_S3, SSE_KMS, SSE_C = "SSE-S3", "SSE-KMS", "SSE-C"
SSE_C_KEY = "sse-c-key"  # the default key of serverSideEncryption.keySecret


@dataclass(frozen=True)
class ServerSideEncryption:
    """s3.serverSideEncryption: what the bucket is asked to encrypt every object written with -
    its own keys (SSE-S3), a KMS key (SSE-KMS; the bucket's default key without kms_key_id), or
    the 256-bit key in customer_key's Secret (SSE-C), which every write and read then carries."""

    type: str
    kms_key_id: str | None = None
    customer_key: Encryption | None = None  # SSE-C only


@dataclass(frozen=True)
class S3:
    bucket: str
    credentials_secret: SecretKeys
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None
    force_path_style: bool = False
    path: str | None = None  # only in spec.restore.s3
    sse: ServerSideEncryption | None = None


@dataclass(frozen=True)
class Retention:
    keep_last: int | None = None
    max_age: str | None = None

    @property
    def max_age_seconds(self) -> int | None:
        if self.max_age is None:
            return None
        m = MAX_AGE_RE.match(self.max_age)
        assert m, self.max_age  # checked by parse
        return int(m.group(1)) * {"h": 3600, "d": 86400, "w": 7 * 86400}[m.group(2)]


@dataclass(frozen=True)
class Binlogs:
    """spec.backup.binlogs: continuous archiving of the primary's binary logs to the backup
    storage (the base of point-in-time recovery), by the cluster's archiver Deployment."""

    enabled: bool = False
    max_delay_seconds: int = 10


@dataclass(frozen=True)
class Drill:
    """spec.backup.drill: restore drills (backup/drill.py) - the newest backup restored into a
    throwaway cluster on a schedule (or when asked), checked, measured and deleted."""

    schedule: str | None = None
    timeout_seconds: int = 3600
    resources: dict[str, dict[str, str]] | None = None  # the throwaway server's, when given
    checks_config_map: str | None = None  # the user's checks of the restored data (as spec.restore's)


BACKUP_METHODS = ("logical", "physical")


@dataclass(frozen=True)
class Backup:
    s3: S3 | None = None
    schedule: str | None = None
    retention: Retention = Retention()
    encryption: Encryption | None = None
    binlogs: Binlogs = Binlogs()
    # logical: the dump tool; physical: a copy of a replica's data files (MySQL's CLONE, sent as
    # tar; MariaDB's mariadb-backup stream)
    method: str = "logical"
    drill: Drill | None = None


@dataclass(frozen=True)
class Restore:
    from_backup: str | None = None
    s3: S3 | None = None
    encryption: Encryption | None = None
    # point-in-time recovery after the backup: a UTC time (stamp form) or LATEST, or a GTID set
    point_in_time: str | None = None
    gtid: str | None = None
    # the backup's tables compared with what it recorded, once restored (backup/table_check.py)
    check_tables: bool = False
    # the ConfigMap of the user's checks of the restored data (backup/user_checks.py), mounted
    # by the restore Job (the operator never reads it)
    checks_config_map: str | None = None


@dataclass(frozen=True)
class ClusterSpec:
    instances: int
    flavor: str = "mysql"
    version: str | None = None
    image: str | None = None
    image_pull_policy: str = "IfNotPresent"
    # Secrets (in the cluster's namespace) for pulling the server image and the operator image
    # its backup and restore Jobs run
    image_pull_secrets: tuple[str, ...] = ()
    # deprecated: a one-time switchover request (switchover.py; status.primaryRequest)
    primary: int | None = None
    replication: Replication = Replication()
    credentials: Credentials | None = None
    database: Database | None = None
    my_cnf: str = ""
    storage: Storage = Storage()
    resources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    affinity: Mapping[str, Any] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    priority_class_name: str | None = None
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    service: ServiceSpec = ServiceSpec()
    monitoring: bool = True  # spec.monitoring.enabled: the mysqld_exporter sidecar
    # spec.monitoring.image: the sidecar's image; None: the operator's (chart value exporterImage)
    monitoring_image: str | None = None
    tools_image: str | None = None  # the client-tools container's (spec.toolsImage)
    tls: TLS = TLS()
    backup: Backup | None = None
    restore: Restore | None = None
    deletion_policy: str = "Retain"
    # Pod restarts a new operator version needs: Auto (one cluster at a time) or Manual (approved);
    # "": not set, the operator's default (--operator-upgrades, chart value operatorUpgrades)
    operator_upgrades: str = ""

    @property
    def server_version(self) -> str:
        return self.version or DEFAULT_VERSION[self.flavor]

    @property
    def image_ref(self) -> str:
        """The server image: spec.image if set, else `<flavor repository>:<version>`."""
        return self.image or f"{IMAGE_REPOSITORY[self.flavor]}:{self.server_version}"

    @property
    def server_series(self) -> str:
        """The servers' series ("9.7", "10.11"): of spec.version, else of the image's tag, else of
        the flavor's default version."""
        version = self.version or (image_version(self.image) if self.image else None)
        return "%d.%d" % series(version or DEFAULT_VERSION[self.flavor])

    @property
    def desired_primary(self) -> int:
        return 0 if self.primary is None else self.primary


@dataclass(frozen=True)
class MySQLCluster:
    name: str
    namespace: str
    spec: ClusterSpec
    uid: str | None = None
    generation: int | None = None
    # fields of the object this operator version does not know (a newer CRD: after a rollback,
    # or while an upgrade is under way), ignored; the reconciler says so in a Warning Event
    ignored: tuple[str, ...] = ()
    # (older field, newer field): both set, the newer one read; the reconciler says so in a Warning
    superseded: tuple[tuple[str, str], ...] = ()

    @property
    def ref(self) -> dict[str, Any]:
        """The object it was parsed from, as writes to it name it (KubeOps.patch_status)."""
        return {"metadata": {"namespace": self.namespace, "name": self.name, "uid": self.uid}}


@dataclass(frozen=True)
class MySQLBackup:
    name: str
    namespace: str
    cluster_name: str
    s3: S3 | None = None
    uid: str | None = None
    method: str | None = None  # None: the cluster's spec.backup.method
