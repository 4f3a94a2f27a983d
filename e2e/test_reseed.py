"""Self-healing of an errant replica on the local cluster, under a write load.

A transaction is written by hand on a replica (what an old primary that came back holding an
unacknowledged commit also has): the replica holds a GTID the primary lacks and can never
replicate again as it is. With errantPolicy Reseed (the default with semi-sync) the operator
records the transaction (a ConfigMap with its GTID and binary log events, a Reseed Event naming
it), replaces the replica's data by a physical copy of the healthy replica over TLS, and the
cluster is Ready again with the replica back in -ro, without the errant row and with every
acknowledged one:

- MySQL: a CLONE; the server restarts in its container on the copy with a new server_uuid.
- MariaDB: its Pod is started again and its `seed` init container receives a mariadb-backup
  stream from the donor's `seed-donor` sidecar; the server starts with the copy's GTID state.
"""

from __future__ import annotations

import time

import pytest

from e2e.helpers import (
    Cluster,
    cluster_spec,
    create_writes_table,
    lost_rows,
    query,
    record,
    replica_state,
    writer_to,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster

ERRANT_ID = -1


def _write_errant(c: Cluster, pod: str) -> str:
    """A row written on `pod` itself (by the operator's account, which may lift
    super_read_only); returns what names that server's own GTIDs: the MySQL server's server_uuid,
    the MariaDB server's "<domain>-<server_id>-" prefix."""
    ip = c.pod(pod).status.pod_ip
    pw = c.password("operator-password")
    if c.body()["spec"]["flavor"] != "mysql":
        server_id = query(ip, "mysql-operator", pw, "SELECT @@server_id")[0][0]
        query(ip, "mysql-operator", pw, f"INSERT INTO app.writes (id) VALUES ({ERRANT_ID})")
        return f"0-{server_id}-"
    uuid = query(ip, "mysql-operator", pw, "SELECT @@server_uuid")[0][0]
    query(ip, "mysql-operator", pw, "SET GLOBAL super_read_only = OFF")
    query(ip, "mysql-operator", pw, f"INSERT INTO app.writes (id) VALUES ({ERRANT_ID})")
    return uuid


def _restarts(c: Cluster, pod: str) -> int:
    return next(s.restart_count for s in c.pod(pod).status.container_statuses if s.name == "mysqld")


@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_an_errant_replica_is_recorded_and_reseeded(local_cluster, scenario_namespace, flavor):
    c = Cluster(local_cluster.api_client(), scenario_namespace, "reseed")
    c.create(cluster_spec(3, flavor))
    c.wait_ready(300, instances=3, primary="reseed-0")
    rw, pw = create_writes_table(c)
    victim = "reseed-2"
    restarts_before, uid_before = _restarts(c, victim), c.pod(victim).metadata.uid
    writer = writer_to(rw, "app", pw)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 20, 60, "20 acknowledged writes")
        own = _write_errant(c, victim)
        started = time.monotonic()
        wait_for(
            lambda: [e for e in c.events("Reseed") if victim in (e.message or "")],
            60,
            f"a Reseed Event naming {victim}",
            describe=c.describe,
        )
        c.wait_ready(300, "Ready again after the re-seed", instances=3, primary="reseed-0")
        reseeded = time.monotonic() - started
        wait_for(lambda: len(writer.acked) > 20 + 20, 60, "writes going on")
    finally:
        writer.stop()
    record(f"errant replica written -> re-seeded and Ready again ({flavor})", reseeded, scenario="15")
    event = next(e for e in c.events("Reseed") if "errant transactions" in (e.message or ""))
    assert own in event.message, event.message  # names the discarded GTIDs
    kept = c.core.list_namespaced_config_map(
        c.namespace, label_selector="app.kubernetes.io/component=evidence"
    ).items
    assert len(kept) == 1 and kept[0].metadata.name in event.message, (kept, event.message)
    assert kept[0].data["instance"] == victim and own in kept[0].data["gtids"]
    assert "app.writes" in kept[0].data["events"], kept[0].data["events"]  # the table it touched
    pod = c.pod(victim)
    ip = pod.status.pod_ip
    if flavor == "mysql":
        # the same Pod, its container restarted on the copy, with a new identity for its GTIDs
        assert _restarts(c, victim) == restarts_before + 1
        assert query(ip, "app", pw, "SELECT @@server_uuid")[0][0] != own
        assert query(ip, "app", pw, "SELECT @@super_read_only")[0][0] == 1
    else:
        # its Pod started again on the copy: the copy's GTID state, none of its own
        assert pod.metadata.uid != uid_before
        assert own not in query(ip, "app", pw, "SELECT @@gtid_binlog_state")[0][0]
        assert query(ip, "app", pw, "SELECT @@read_only")[0][0] == 1
    assert c.roles()[victim] == "replica"
    lost = lost_rows(rw, pw, writer)
    record(
        f"rows lost during the re-seed ({flavor}; {len(writer.acked)} acknowledged)", len(lost), unit="count"
    )
    assert not lost, lost[:20]
    total = query(rw, "app", pw, "SELECT COUNT(*) FROM app.writes")[0][0]
    wait_for(
        lambda: replica_state(ip, "app", pw) == (victim, 1, total), 60, f"{victim} with all {total} rows"
    )
    assert not query(ip, "app", pw, f"SELECT id FROM app.writes WHERE id = {ERRANT_ID}")
