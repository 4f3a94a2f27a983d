"""One active operator among replicas: leader election on a coordination.k8s.io/v1 Lease.

A replica runs its handlers only while it holds the Lease. The holder renews it every
`renew_every` seconds by a compare-and-swap update (the Lease's resourceVersion): of two
replicas that try at once, one gets 409 Conflict. A standby takes the Lease over when its
holder has not renewed it for `duration` seconds, measured on the standby's own clock from the
moment it first saw the holder's last record (the record's timestamps come from another
machine's clock and are not trusted). A holder that could not renew for `deadline` seconds
(< `duration`) stops the process at once, before any standby may take over: never two active
operators, unless a clock runs more than (duration - deadline) / duration slower than another.
A holder that stops cleanly (SIGTERM) releases the Lease, so a standby takes over at once.

`may_take` is the pure decision; `Elector` does the API calls and the timing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator import clock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Seen:
    """The Lease as this replica last saw it change."""

    holder: str | None
    record: tuple[Any, ...]  # (holder, renewTime, leaseTransitions): changes on every renewal
    since: float  # this replica's monotonic clock when it first saw `record`


def may_take(seen: Seen | None, me: str, duration: float, now: float) -> bool:
    """Pure: this replica may write itself into the Lease: there is none, it is ours, it was
    released, or its holder has not renewed it for `duration` seconds as we measured."""
    if seen is None or not seen.holder or seen.holder == me:
        return True
    return now - seen.since >= duration


def observe(previous: Seen | None, lease: Any, now: float) -> Seen:
    """Pure: the new view of `lease` (a V1Lease): `since` moves only when its record changed."""
    spec = lease.spec
    record = (spec.holder_identity, str(spec.renew_time), spec.lease_transitions)
    if previous is not None and previous.record == record:
        return previous
    return Seen(spec.holder_identity, record, now)


class Elector:
    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        duration: float = 15.0,
        deadline: float = 10.0,
        renew_every: float = 2.0,
        on_lost: Callable[[], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        if not 0 < renew_every < deadline < duration:
            raise ValueError("leader election needs 0 < renew period < renew deadline < lease duration")
        self.coord = client.CoordinationV1Api(api)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.duration, self.deadline, self.renew_every = duration, deadline, renew_every
        self.on_lost = on_lost or _exit_now
        self.monotonic = monotonic
        self.seen: Seen | None = None
        self.renewed_at = float("-inf")  # when our last successful write was sent
        self.stopping = threading.Event()

    # -- one attempt -------------------------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """One read and, if the Lease may be ours, one compare-and-swap write. True if we hold it."""
        sent = self.monotonic()
        try:
            lease = self.coord.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                log.warning(
                    "leader election: reading Lease %s/%s: HTTP %s", self.namespace, self.name, e.status
                )
                return False
            return self._write(None, sent)
        self.seen = observe(self.seen, lease, self.monotonic())
        if not may_take(self.seen, self.identity, self.duration, self.monotonic()):
            return False
        return self._write(lease, sent)

    def _write(self, lease: Any, sent: float) -> bool:
        now = clock.now()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.duration),
            "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        try:
            if lease is None:
                spec.update(acquireTime=spec["renewTime"], leaseTransitions=0)
                body = {"metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
                self.coord.create_namespaced_lease(self.namespace, body)
            else:
                taken = lease.spec.holder_identity != self.identity
                transitions = (lease.spec.lease_transitions or 0) + (1 if taken else 0)
                spec["leaseTransitions"] = transitions
                spec["acquireTime"] = (
                    spec["renewTime"] if taken else _stamp(lease.spec.acquire_time) or spec["renewTime"]
                )
                body = {
                    "metadata": {
                        "name": self.name,
                        "namespace": self.namespace,
                        "resourceVersion": lease.metadata.resource_version,  # compare-and-swap
                    },
                    "spec": spec,
                }
                self.coord.replace_namespaced_lease(self.name, self.namespace, body)
        except ApiException as e:
            if e.status not in (409, 404):  # 409: another replica wrote first
                log.warning(
                    "leader election: writing Lease %s/%s: HTTP %s", self.namespace, self.name, e.status
                )
            return False
        self.renewed_at = sent  # the write was sent no earlier than this
        return True

    # -- the loops ---------------------------------------------------------------------------------
    def acquire(self) -> None:
        """Block until this replica holds the Lease (or stop() was called)."""
        log.info("leader election: %s waits for Lease %s/%s", self.identity, self.namespace, self.name)
        while not self.stopping.is_set():
            if self.try_acquire_or_renew():
                log.info("leader election: %s holds Lease %s/%s", self.identity, self.namespace, self.name)
                return
            self.stopping.wait(self.renew_every)

    def keep(self) -> threading.Thread:
        """Renew in a daemon thread; `on_lost` once a renewal has failed for `deadline` seconds
        (or another replica holds the Lease)."""

        def loop() -> None:
            while not self.stopping.wait(self.renew_every):
                if self.try_acquire_or_renew():
                    continue
                if self.seen is not None and self.seen.holder not in (None, self.identity):
                    log.error("leader election: %s lost Lease to %s", self.identity, self.seen.holder)
                    self.on_lost()
                    return
                if self.monotonic() - self.renewed_at >= self.deadline:
                    log.error("leader election: %s could not renew for %.0fs", self.identity, self.deadline)
                    self.on_lost()
                    return

        t = threading.Thread(target=loop, name="lease-renewal", daemon=True)
        t.start()
        return t

    def release(self) -> None:
        """Stop renewing and, if we still hold it, empty the Lease's holder: a standby takes
        over at once instead of after `duration`."""
        self.stopping.set()
        try:
            lease = self.coord.read_namespaced_lease(self.name, self.namespace)
            if lease.spec.holder_identity != self.identity:
                return
            body = {
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "resourceVersion": lease.metadata.resource_version,
                },
                "spec": {
                    "holderIdentity": None,
                    "leaseDurationSeconds": int(self.duration),
                    "leaseTransitions": lease.spec.lease_transitions,
                },
            }
            self.coord.replace_namespaced_lease(self.name, self.namespace, body)
            log.info("leader election: %s released Lease %s/%s", self.identity, self.namespace, self.name)
        except ApiException as e:
            log.warning(
                "leader election: releasing Lease %s/%s: HTTP %s", self.namespace, self.name, e.status
            )


def _stamp(t: Any) -> str | None:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if t is not None else None


def _exit_now() -> None:
    """No handler may act once the Lease may be someone else's: end the process now (the
    kubelet restarts the container, which then waits as a standby)."""
    logging.shutdown()
    os._exit(70)
