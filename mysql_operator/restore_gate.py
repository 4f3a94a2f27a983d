"""The restore gate of a new cluster with spec.restore, in three parts: `observe_restore` reads
what it needs (the restore Job and its result, where spec.restore points), `plan_restore` (pure)
decides - start the restore Job, follow it, ask every MariaDB instance for the Job's physical
copy, record the outcome - and gives the ordered writes, the Events and the status of a held
cluster, `carry_out` makes the writes. Replication stays held off until every instance is
loaded. The record's lifecycle is restoring.py; the Job's manifest manifests/restore_jobs.py."""

from __future__ import annotations


import logging
import datetime as dt
from typing import Any, Callable, Iterable, Mapping, Sequence

from kubernetes.client.rest import ApiException

from mysql_operator import cert_manager, certificates, clock, executor, tls
from mysql_operator import manifests as m
from mysql_operator import restoring
from mysql_operator.api import MySQLCluster, SpecError, parse
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.api import BACKUP_PLURAL, GROUP, VERSION, parse_backup
from mysql_operator.backup.backup_status import key_problem
from mysql_operator.backup.restore_types import Source
from mysql_operator.k8s import jobs
from mysql_operator.manifests.restore_jobs import restore_dns_names, restore_job_name, restore_tls_secret_name
from mysql_operator.manifests.tenant_jobs import DEFAULT_DEADLINE_SECONDS
from mysql_operator.manifests.common import LOAD_USER, RESTORE_USER
from mysql_operator.restore_plan import DROP_RESTORE_ACCOUNT, RESTORE_CERTIFICATE, RestoreSeen
from mysql_operator.writes import Write


log = logging.getLogger(__name__)


def restore_source(reads: Reads, c: MySQLCluster) -> Source:
    """Effect (reads Kubernetes objects only): where spec.restore points. ValueError naming the
    field and the fix when it cannot be used. The bucket itself is only read by the restore Job."""
    r = c.spec.restore
    assert r is not None
    if r.from_backup is not None:
        backup = reads.custom_object(GROUP, VERSION, BACKUP_PLURAL, r.from_backup, c.namespace)
        location = restoring.backup_location(backup, r.from_backup)
        try:
            cluster_name = parse_backup(backup).cluster_name
        except SpecError as e:
            raise ValueError(f"spec.restore.fromBackup.name: MySQLBackup {r.from_backup}: {e}") from None
        s3 = parse_backup(backup).s3
        if s3 is None:
            owner = reads.cluster(c.namespace, cluster_name)
            spec = parse(owner).spec if owner is not None else None
            s3 = spec.backup.s3 if spec is not None and spec.backup else None
        if s3 is None:
            raise ValueError(
                f"spec.restore.fromBackup.name: MySQLBackup {r.from_backup} names no storage "
                f"and its cluster {cluster_name} is gone: use spec.restore.s3 instead"
            )
        source = Source(s3, location)
    else:
        assert r.s3 is not None
        s3 = r.s3
        source = Source(s3, s3.path or "")
    secret = reads.secret_data(c.namespace, s3.credentials_secret.name) or {}
    keys = (s3.credentials_secret.access_key_id_key, s3.credentials_secret.secret_access_key_key)
    missing = [key for key in keys if not secret.get(key)]
    if missing:
        raise ValueError(
            f"S3 credentials: Secret {s3.credentials_secret.name} lacks {', '.join(missing)} "
            "(or does not exist): create it with the access key id and secret access key"
        )
    sse_key_problem = key_problem(
        reads.secret_data, c.namespace, s3.sse and s3.sse.customer_key, "s3.serverSideEncryption"
    )
    if sse_key_problem:
        raise ValueError(sse_key_problem)
    return source


def observe_restore(
    reads: Reads, c: MySQLCluster, previous: Mapping[str, Any], not_ready: Sequence[str]
) -> RestoreSeen:
    """Effect (reads only): the restore Job while one runs; where spec.restore points and its key
    once a restore could start (no record yet, no primary, every instance Ready)."""
    assert c.spec.restore is not None
    record = previous.get("restore")
    phase = (record or {}).get("phase")
    if phase == restoring.RUNNING:
        found, job_pods = reads.job(c.namespace, restore_job_name(c))
        if found is None:
            return RestoreSeen(record, None)
        job = jobs.job_result(found, job_pods, f"the restore Job {restore_job_name(c)}")
        return RestoreSeen(record, job or restoring.JOB_RUNNING, serving(job_pods))
    if phase is not None or previous.get("currentPrimary") is not None or not_ready:
        return RestoreSeen(record, None)
    key = key_problem(reads.secret_data, c.namespace, c.spec.restore.encryption, "spec.restore.encryption")
    try:
        return RestoreSeen(record, None, source=restore_source(reads, c), key_problem=key)
    except ValueError as e:
        return RestoreSeen(record, None, source_error=str(e), key_problem=key)


def serving(job_pods: list[dict]) -> bool:
    """Pure: the restore Job serves a physical copy (MariaDB): its container is ready (its port
    answers: manifests.restore_jobs.restore_job)."""
    return any(
        st.get("name") == "restore" and st.get("ready")
        for p in job_pods
        for st in (p.get("status") or {}).get("containerStatuses") or []
    )


# -- act -------------------------------------------------------------------------------------------
def carry_out(
    reads: Reads,
    kube: KubeOps,
    c: MySQLCluster,
    owner: Mapping[str, Any],
    writes: Sequence[Write],
    drop_account: Callable[[], None] = lambda: None,
    execute: Callable[..., Any] = executor.carry_out,
) -> None:
    """Effect: the writes, in order, through the executor (`execute`; an API error raises and
    stops the rest); `drop_account` carries out DROP_RESTORE_ACCOUNT (drop_restore_account on the
    cluster's servers)."""
    execute(
        kube,
        c.ref,
        writes,
        calls={
            RESTORE_CERTIFICATE.name: lambda: ensure_restore_certificate(reads, kube, c, owner, clock.now()),
            DROP_RESTORE_ACCOUNT.name: drop_account,
        },
    )


def start(
    reads: Reads,
    kube: KubeOps,
    c: MySQLCluster,
    owner: Mapping[str, Any],
    writes: Sequence[Write],
    execute: Callable[..., Any] = executor.carry_out,
) -> str | None:
    """Effect: the restore Job's creation carried out; why it was refused, or None."""
    try:
        carry_out(reads, kube, c, owner, writes, execute=execute)
    except k.ApplyError as e:
        return f"creating the restore Job: {e.message}"
    except ApiException as e:
        return f"creating the restore Job: {e.reason}"
    return None


def ensure_restore_certificate(
    reads: Reads, kube: KubeOps, c: MySQLCluster, owner: Mapping[str, Any], now: dt.datetime
) -> None:
    """Effect: the restore Job's certificate (Secret restore_tls_secret_name, for the restore
    Service's names) exists, issued by the cluster's CA: by the operator with `<name>-ca`, else
    through a cert-manager Certificate of spec.tls.issuerRef (the Job's Pod waits for its Secret).
    Only the Job's sidecar mounts it, to serve a physical copy the instances verify."""
    name, names = restore_tls_secret_name(c), restore_dns_names(c)
    if c.spec.tls.issuer_ref is not None:
        kube.apply(m.owned(cert_manager.certificate(c, name, names), owner))
        return
    stored = reads.secret_data(c.namespace, m.ca_secret_name(c)) or {}
    ca = tls.KeyPair(stored.get(certificates.CA_CERT, ""), stored.get(certificates.CA_KEY, ""))
    if not tls.ca_usable(ca, now):
        raise ValueError(f"the cluster's CA (Secret {m.ca_secret_name(c)}) is missing or expired")
    current = reads.secret_data(c.namespace, name)
    if current is not None and tls.renewal_reason(current.get(certificates.TLS_CERT), ca, names, now) is None:
        return
    # the Job runs at most its deadline: a certificate left behind is soon of no use
    validity = dt.timedelta(seconds=DEFAULT_DEADLINE_SECONDS + 3600)
    pair = tls.server_certificate(ca, names, now, validity)
    data = {
        certificates.TLS_CERT: pair.cert_pem,
        certificates.TLS_KEY: pair.key_pem,
        certificates.CA_CERT: ca.cert_pem,
    }
    body = m.owned(certificates.secret(c, name, "tls", data, "kubernetes.io/tls"), owner)
    if current is None:
        kube.create_secret(body)
    else:
        kube.add_secret_keys(c.namespace, name, body["data"])


def drop_restore_account(servers: Iterable[tuple[str, Callable[[], Instance]]]) -> None:
    """Effect: the restore account and the load account its Job makes (backup/load_account.py)
    dropped from each (name, connect as the operator's account), outside the binary log (each
    instance had them made by its own init step or Job). Where both are gone already (the Job
    dropped them), only a read; where one is there, the server is writable for the DROP (MySQL's
    super_read_only refuses it to everyone) and read-only again in the same session.
    RuntimeError naming every server where it failed (the pass is retried)."""
    failed = []
    for name, connect in servers:
        inst = connect()
        try:
            if not inst.scalar(
                "SELECT COUNT(*) FROM mysql.user WHERE user IN (%s, %s)", (RESTORE_USER, LOAD_USER)
            ):
                continue
            fenced = bool(int(inst.scalar("SELECT @@GLOBAL.read_only") or 0))
            inst.execute("SET SESSION sql_log_bin = 0")
            if fenced:
                for sql in inst.dialect.set_read_only(False):
                    inst.execute(sql)
            for user in (LOAD_USER, RESTORE_USER):
                inst.execute("DROP USER IF EXISTS %s@'%%'", (user,))
            if fenced:
                for sql in inst.dialect.set_read_only(True):
                    inst.execute(sql)
            log.info("%s: the restore account is dropped (the restore has ended)", name)
        except InstanceError as e:
            failed.append(f"{name}: {e}")
        finally:
            inst.close()
    if failed:
        raise RuntimeError(f"dropping the restore account {RESTORE_USER}: {'; '.join(failed)}")
