"""What the engine reads off one server's observation beside the decision: whether an unreachable
server refused the connection or may still take writes, whether a commit would be acknowledged now (and why not), and which
primary a decision takes the role from or gives it to. Pure."""

from __future__ import annotations


from mysql_operator import topology as t
from mysql_operator.db.observation import (
    Observation,
)


def refused(error: str) -> bool:
    """The server's host refused the connection: nothing listens on the port (the process is
    down). A timeout, a reset, an unreachable host, a login refused or a full server say nothing
    of the kind."""
    return "Connection refused" in error


def may_still_serve(error: str) -> bool:
    """An unreachable server that may still be taking its clients' writes: it did not refuse the
    connection (a process that is down) and has an address (a Pod that runs; the engine connects
    by Pod IP, so 2005 is only that) - a hung process, a partition between the operator and it, a
    login it refuses."""
    return not refused(error) and "(2005," not in error


def acknowledged_now(o: Observation | None) -> bool:
    """A commit on this server would be acknowledged now: semi-sync is off there (or fell back to
    asynchronous), or as many replicas that acknowledge are connected as a commit waits for (not
    known: taken as yes). The operator's own writes on a primary (accounts, passwords) wait for
    this: a statement waiting for an acknowledgement that cannot come holds the server's account
    lock - no one logs in (MySQL), the next observation waits behind it (MariaDB) - and the
    primary would be taken for lost and failed over."""
    if o is None or not (o.semisync_source_enabled and o.semisync_source_active):
        return True
    if o.semisync_clients is None:
        return True
    return o.semisync_clients >= (o.semisync_ack_count or 1)


def commits_wait(primary: str, o: Observation | None) -> str:
    """Why a commit on `primary` would wait now for an acknowledgement that no connected replica
    can give yet (a replica reconnecting, none replicating); "" when it would not (see
    acknowledged_now). A cluster whose writes hang is not Ready, whatever its Pods say."""
    if o is None or acknowledged_now(o):
        return ""
    return (
        f"commits on {primary} wait for a semi-sync acknowledgement: {o.semisync_clients} of the "
        f"{o.semisync_ack_count or 1} acknowledging replica(s) a commit waits for are connected"
    )


def leaving_primary(d: t.Decision) -> str | None:
    """The primary a decision takes the role from (a failover's, a switchover's old one)."""
    if isinstance(d, (t.Failover, t.Switchover)) and d.from_ != d.to:
        return d.from_
    return None


def new_primary(d: t.Decision) -> str | None:
    """The primary a decision makes writable; None for decisions that keep the current one."""
    if isinstance(d, t.Bootstrap):
        return d.primary
    if isinstance(d, (t.Failover, t.Switchover)):
        return d.to
    if isinstance(d, t.Promote):
        return d.name
    return None
