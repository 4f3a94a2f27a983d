"""The custom-resource contract (MySQLCluster, MySQLBackup) as typed Python: parse + defaults + checks."""

from .types import (  # noqa: F401
    API_VERSION,
    BACKUP_KIND,
    BACKUP_PLURAL,
    CLUSTER_KIND,
    CLUSTER_PLURAL,
    DEFAULT_VERSION,
    FLAVOR_SPELLINGS,
    GROUP,
    VERSION,
    Backup,
    Binlogs,
    ClusterSpec,
    Credentials,
    Database,
    Encryption,
    Failover,
    MySQLBackup,
    MySQLCluster,
    Replication,
    Restore,
    Retention,
    S3,
    SecretKeys,
    ServerSideEncryption,
    SSE_C,
    SSE_KMS,
    SSE_S3,
    ServiceSpec,
    SpecError,
    Storage,
)
from .cron import (  # noqa: F401
    check_cron,
)
from .spec import (  # noqa: F401
    parse,
    parse_backup,
    parse_spec,
    storage_bytes,
    binlog_max_bytes,
)
