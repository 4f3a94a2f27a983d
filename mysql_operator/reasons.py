"""Every reason the operator sets on a condition or an Event, each named once, and the objects and
conditions that carry it (`CARRIERS`): docs/troubleshooting.md has one entry per reason, and
tests/unit/test_troubleshooting.py holds the two to each other. Pure: names only."""

from __future__ import annotations

from mysql_operator import topology as t

# -- MySQLCluster conditions ------------------------------------------------------------------
ALL_INSTANCES_READY = "AllInstancesReady"
APPLY_FAILED = "ApplyFailed"
INSTANCES_NOT_READY = "InstancesNotReady"
UPDATING = "Updating"
PRIMARY_NOT_IN_SERVICE = "PrimaryNotInService"
PRIMARY_SERVING = "PrimaryServing"
NO_PRIMARY = "NoPrimary"
PRIMARY_NOT_SERVING = "PrimaryNotServing"
CREDENTIALS_SECRET = "CredentialsSecret"
WAITING = "Waiting"
ROLLING_UPDATE = "RollingUpdate"  # also the Event of a Pod restarted by the rolling update
WAITING_FOR_INSTANCES = "WaitingForInstances"
WAITING_FOR_SERVICE = "WaitingForService"
STABLE = "Stable"
ACTION_FAILED = "ActionFailed"
PRIMARY_UNREACHABLE = "PrimaryUnreachable"
RESEEDING = "Reseeding"
INSTANCES_HELD_OUT = "InstancesHeldOut"
INSTANCES_UNREACHABLE = "InstancesUnreachable"
SEMISYNC_ACKS_MISSING = "SemiSyncAcksMissing"
REPLICAS_LAGGING = "ReplicasLagging"
AS_EXPECTED = "AsExpected"
VALID = "Valid"
INVALID_SPEC = "InvalidSpec"  # also a refused spec's Warning Event, and a SQL object's
ARCHIVER_NOT_READY = "ArchiverNotReady"
ARCHIVER_FAILING = "ArchiverFailing"  # its Pod cannot run or keeps failing; also the Warning Event
ARCHIVING = "Archiving"
PASS_OVERDUE = "PassOverdue"  # the condition and its Warning Event
RESTORING = "Restoring"
RESTORE_FAILED = "RestoreFailed"  # the conditions while a restore failed, and its Event
# Ready's reason when none of the above applies: the phase (status.phase)
PHASES_AS_READY_REASON = (
    "Failed",
    "Bootstrapping",
    "Pending",
    "FailingOver",
    "SwitchingOver",
    "Unavailable",
    "Degraded",
)

# certificates (certificates.TLSProblem): Progressing while the cluster has none yet, Degraded
# (and its Warning Event) when the user must act
CERT_MANAGER_NOT_INSTALLED = "CertManagerNotInstalled"
ISSUER_NOT_FOUND = "IssuerNotFound"
WAITING_FOR_ISSUER = "WaitingForIssuer"
ISSUER_NOT_READY = "IssuerNotReady"
WAITING_FOR_CERTIFICATE = "WaitingForCertificate"
ISSUER_GIVES_NO_CA = "IssuerGivesNoCA"
CERTIFICATE_UNREADABLE = "CertificateUnreadable"
CERT_MANAGER_API_ERROR = "CertManagerAPIError"
TLS_SECRETS_API_ERROR = "TLSSecretsAPIError"
# the user must act (TLSProblem.warning): Degraded and its Warning Event
TLS_WARNINGS = (
    CERT_MANAGER_NOT_INSTALLED,
    ISSUER_NOT_FOUND,
    ISSUER_NOT_READY,
    ISSUER_GIVES_NO_CA,
    CERTIFICATE_UNREADABLE,
    CERT_MANAGER_API_ERROR,
    TLS_SECRETS_API_ERROR,
)
TLS_PROBLEMS = (*TLS_WARNINGS, WAITING_FOR_ISSUER, WAITING_FOR_CERTIFICATE)  # all: Progressing

# RestartPending (rolling.StageTemplate): a Pod template a new operator version wants, staged
WAITING_FOR_APPROVAL = "WaitingForApproval"
WAITING_FOR_OTHER_CLUSTER = "WaitingForOtherCluster"

# -- MySQLCluster Events (besides the Degraded reasons, each posted when Degraded turns to it) --
BINLOG_ARCHIVING_STOPPED = "BinlogArchivingStopped"
INSTANCE_WAITING = "InstanceWaiting"
SWITCHOVER_DONE = "SwitchoverDone"
SWITCHOVER_REFUSED = "SwitchoverRefused"
RESTART_PENDING = "RestartPending"  # the Event; the condition of the same type has the reasons above
OPERATOR_RESTART = "OperatorRestart"
REPLACED_STUCK_POD = "ReplacedStuckPod"
UNKNOWN_FIELDS = "UnknownFields"
SUPERSEDED_FIELDS = "SupersededFields"
PASSWORD_NOT_ROTATED = "PasswordNotRotated"
FAILOVER_FORCED = "FailoverForced"
FORCE_FAILOVER_UNUSED = "ForceFailoverUnused"
RESTORE_COPYING = "RestoreCopying"
RESTORE_WAITING = "RestoreWaiting"
RESTORE_STARTED = "RestoreStarted"
RESTORE_SUCCEEDED = "RestoreSucceeded"
CERTIFICATE_RENEWED = "CertificateRenewed"
BACKUP_FAILED = "BackupFailed"  # on the MySQLBackup, and on its cluster
# restore drills (backup/drill_controller.py), on the drilled cluster; also condition Restorable
RESTORE_DRILL_STARTED = "RestoreDrillStarted"
RESTORE_DRILL_SUCCEEDED = "RestoreDrillSucceeded"
RESTORE_DRILL_FAILED = "RestoreDrillFailed"
RESTORE_DRILL_RUNNING = "RestoreDrillRunning"  # condition Restorable while one runs

# the Events of the engine's steps (status.events_from_steps: a step's action in CamelCase,
# "Failed" appended when it did not go through); tests/unit/test_troubleshooting.py checks this
# list against the Step(...) calls of the replication engine (replication.py and its chain)
STEP_EVENTS = (
    "Apply",
    "Decommission",
    "Demote",
    "Events",
    "EventsFailed",
    "Fence",
    "FenceFailed",
    "HeldOutFailed",
    "NeedsSeedFailed",
    "Promote",
    "PurgeBinlogs",
    "PurgeBinlogsFailed",
    "Release",
    "Replicate",
    "ReplicateFailed",
    "Reseed",
    "ReseedFailed",
    "RestartStuck",
    "RestartStuckFailed",
    "Rotate",
    "RotateFailed",
    "Route",
    "SemiSync",
    "User",
    "UserFailed",
)
# decisions the engine acts on: when acting raises, the step is the decision's kind + "Failed"
ACTED_ON = tuple(
    d.__name__
    for d, tr in t.TRANSITIONS.items()
    if tr not in (t.Transition.WAITING, t.Transition.HELD, t.Transition.LOST) and d is not t.Healthy
)
# decisions announced by an Event before their steps (status.decision_event)
ANNOUNCED = ("Bootstrap", "Failover", "Promote", "Switchover")

# -- MySQLBackup Events ------------------------------------------------------------------------
BACKUP_STARTED = "BackupStarted"
BACKUP_SUCCEEDED = "BackupSucceeded"  # also conditions Complete and Failed, as BACKUP_FAILED
BACKUP_PENDING = "BackupPending"  # conditions Complete and Failed while it waits
BACKUP_RUNNING = "BackupRunning"  # conditions Complete and Failed while its Job runs
BACKUP_DELETE_FAILED = "BackupDeleteFailed"

# -- MySQLDatabase / MySQLUser / MySQLGrant: condition Ready, and a Warning Event of the same
# reason when it turns False -----------------------------------------------------------------
APPLIED = "Applied"  # also the Normal Event naming the statements run
DELETED = "Deleted"  # Normal Event: the object's cleanup ran
CLUSTER_MISSING = "ClusterMissing"
API_ERROR = "APIError"
INTERNAL_ERROR = "InternalError"
CONFLICT = "Conflict"
CLUSTER_UNAVAILABLE = "ClusterUnavailable"
SQL_FAILED = "SQLFailed"
USER_MISSING = "UserMissing"
SECRET_MISSING = "SecretMissing"
PASSWORD_INVALID = "PasswordInvalid"
CLEANUP_FAILED = "CleanupFailed"

# -- the operator's own Pod: Warning Events at start -------------------------------------------
CRD_NOT_INSTALLED = "CRDNotInstalled"
CRD_NOT_UPDATED = "CRDNotUpdated"

UNRECOVERABLE, FAILOVER_HELD = t.Unrecoverable.__name__, t.FailoverHeld.__name__  # decisions' kinds
_DEGRADED = (
    CREDENTIALS_SECRET,
    UNRECOVERABLE,
    FAILOVER_HELD,
    APPLY_FAILED,
    ACTION_FAILED,
    PRIMARY_UNREACHABLE,
    RESEEDING,
    INSTANCES_HELD_OUT,
    INSTANCES_UNREACHABLE,
    SEMISYNC_ACKS_MISSING,
    REPLICAS_LAGGING,
    *TLS_WARNINGS,
)
_SQL_READY = (
    APPLIED,
    CLUSTER_MISSING,
    API_ERROR,
    INTERNAL_ERROR,
    INVALID_SPEC,
    CONFLICT,
    CLUSTER_UNAVAILABLE,
    SQL_FAILED,
    USER_MISSING,
    SECRET_MISSING,
    PASSWORD_INVALID,
    CLEANUP_FAILED,
)
_ACTING = tuple(
    d.__name__
    for d, tr in t.TRANSITIONS.items()
    if tr
    in (
        t.Transition.REPAIRING,
        t.Transition.BOOTSTRAPPING,
        t.Transition.FAILING_OVER,
        t.Transition.SWITCHING_OVER,
        t.Transition.PROMOTING,
    )
)

# where each reason appears: "<kind> condition <type>" or "<kind> Event"
CARRIERS: dict[str, tuple[str, ...]] = {
    "MySQLCluster condition Ready": (
        ALL_INSTANCES_READY,
        APPLY_FAILED,
        INSTANCES_NOT_READY,
        UPDATING,
        SEMISYNC_ACKS_MISSING,
        PRIMARY_NOT_IN_SERVICE,
        *PHASES_AS_READY_REASON,
        INVALID_SPEC,
        RESTORING,
        RESTORE_FAILED,
    ),
    "MySQLCluster condition Available": (
        PRIMARY_SERVING,
        NO_PRIMARY,
        PRIMARY_NOT_SERVING,
        INVALID_SPEC,
        RESTORING,
        RESTORE_FAILED,
    ),
    "MySQLCluster condition Progressing": (
        CREDENTIALS_SECRET,
        *TLS_PROBLEMS,
        *_ACTING,
        WAITING,
        FAILOVER_HELD,
        APPLY_FAILED,
        ROLLING_UPDATE,
        WAITING_FOR_INSTANCES,
        WAITING_FOR_SERVICE,
        STABLE,
        INVALID_SPEC,
        RESTORING,
        RESTORE_FAILED,
    ),
    "MySQLCluster condition Degraded": (
        *_DEGRADED,
        AS_EXPECTED,
        "Bootstrapping",
        INVALID_SPEC,
        RESTORE_FAILED,
        RESTORING,
    ),
    "MySQLCluster condition SpecValid": (VALID, INVALID_SPEC),
    "MySQLCluster condition RestartPending": (WAITING_FOR_APPROVAL, WAITING_FOR_OTHER_CLUSTER),
    "MySQLCluster condition BinlogArchiving": (ARCHIVER_NOT_READY, ARCHIVER_FAILING, ARCHIVING),
    "MySQLCluster condition PassOverdue": (PASS_OVERDUE,),
    "MySQLCluster Event": (
        *_DEGRADED,
        *ANNOUNCED,
        *STEP_EVENTS,
        *(kind + "Failed" for kind in ACTED_ON),
        INVALID_SPEC,
        BINLOG_ARCHIVING_STOPPED,
        ARCHIVER_FAILING,
        INSTANCE_WAITING,
        SWITCHOVER_DONE,
        SWITCHOVER_REFUSED,
        RESTART_PENDING,
        OPERATOR_RESTART,
        ROLLING_UPDATE,
        REPLACED_STUCK_POD,
        UNKNOWN_FIELDS,
        SUPERSEDED_FIELDS,
        PASSWORD_NOT_ROTATED,
        FAILOVER_FORCED,
        FORCE_FAILOVER_UNUSED,
        PASS_OVERDUE,
        RESTORE_COPYING,
        RESTORE_WAITING,
        RESTORE_STARTED,
        RESTORE_SUCCEEDED,
        RESTORE_FAILED,
        CERTIFICATE_RENEWED,
        BACKUP_FAILED,
    ),
    "MySQLBackup condition Complete": (BACKUP_PENDING, BACKUP_RUNNING, BACKUP_SUCCEEDED, BACKUP_FAILED),
    "MySQLBackup condition Failed": (BACKUP_PENDING, BACKUP_RUNNING, BACKUP_SUCCEEDED, BACKUP_FAILED),
    "MySQLBackup Event": (BACKUP_STARTED, BACKUP_SUCCEEDED, BACKUP_FAILED, BACKUP_DELETE_FAILED),
    "MySQLDatabase, MySQLUser, MySQLGrant condition Ready": _SQL_READY,
    "MySQLDatabase, MySQLUser, MySQLGrant Event": (*_SQL_READY, DELETED),
    "operator Pod Event": (CRD_NOT_INSTALLED, CRD_NOT_UPDATED),
}


def every_reason() -> frozenset[str]:
    """Every reason the operator can set, on any object."""
    return frozenset(r for reasons in CARRIERS.values() for r in reasons)


def carriers_of(reason: str) -> list[str]:
    """Where `reason` appears (the keys of CARRIERS that list it)."""
    return [where for where, reasons in CARRIERS.items() if reason in reasons]
