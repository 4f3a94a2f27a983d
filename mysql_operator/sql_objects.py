"""MySQLDatabase, MySQLUser and MySQLGrant: converged on their cluster's current primary.

The objects are known from their watch (kopf events feed `SqlObjects.seen`/`gone`: no listing);
the cluster's pass calls `sync` when one changed and every SYNC_SECONDS (a password Secret's new
value, a drifted server), with a connection to the primary as the cluster's own SQL account
(`mysql-operator-sql`, db/accounts.py sql_grants). Per object: observe what the server has, the
pure statements of db/statements.py, run them, then its status (condition Ready, observedGeneration)
and an Event for what changed or why nothing could. Creation goes databases, users, grants;
deletion (our finalizer, cleanupPolicy) grants, users, databases.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from typing import Any, Callable, Mapping

from kubernetes.client.rest import ApiException

from mysql_operator import clock
from mysql_operator import manifests as m
from mysql_operator.api import SpecError
from mysql_operator.api.sql import (
    DATABASE_KIND,
    FINALIZER,
    GRANT_KIND,
    PLURALS,
    USER_KIND,
    DatabaseSpec,
    GrantSpec,
    SqlObject,
    UserSpec,
    parse_sql_object,
)
from mysql_operator.credentials import password_problem
from mysql_operator.db import statements
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError
from mysql_operator.redaction import redact
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.k8s.reflector import newer
from mysql_operator import reasons as R
from mysql_operator.sql_claims import NOTHING_OWNED, ObjectKey, Owned, conflicts, object_key
from mysql_operator.sql_status import Result, status_changed, status_for

log = logging.getLogger(__name__)
ORDER = (DATABASE_KIND, USER_KIND, GRANT_KIND)
SYNC_SECONDS = 15.0
ACCESS_DENIED = {1044, 1045, 1142, 1227, 1410}
Key = tuple[str, str]  # (namespace, cluster)


def password_secret_name(user_object: str) -> str:
    return f"{user_object}-mysql-password"


class SqlObjects:
    def __init__(self, reads: Reads, kube: KubeOps, password_factory: Callable[[], str] = m.random_password):
        self.reads, self.kube = reads, kube
        self.password_factory = password_factory
        self._lock = threading.Lock()
        self._bodies: dict[Key, dict[ObjectKey, dict]] = {}  # by cluster
        self._where: dict[ObjectKey, Key] = {}  # each object's cluster
        self._due: dict[Key, float] = {}
        self._missing = threading.Lock()  # one without_cluster at a time: each Warning posted once

    # -- what the watch says ---------------------------------------------------------------------
    def seen(self, body: Mapping[str, Any]) -> Key | None:
        """A created or changed object; returns its cluster (to nudge), None if it names none. A
        body older than the one held (a watch event behind the status just written) is not kept:
        with it, the status written would look unwritten and its Warning be posted again."""
        cluster = ((body.get("spec") or {}).get("clusterRef") or {}).get("name")
        if not isinstance(cluster, str):
            return None
        obj = object_key(body)
        key = (obj[0], cluster)
        version = (body.get("metadata") or {}).get("resourceVersion")
        with self._lock:
            held = self._bodies.get(self._where.get(obj, key), {}).get(obj)
            if held is not None and not newer(version, held["metadata"].get("resourceVersion")):
                return self._where[obj]
            self._drop(obj)
            self._bodies.setdefault(key, {})[obj] = dict(body)
            self._where[obj] = key
            self._due[key] = 0.0
        return key

    def gone(self, body: Mapping[str, Any]) -> None:
        with self._lock:
            self._drop(object_key(body))

    def _drop(self, obj: ObjectKey) -> None:
        where = self._where.pop(obj, None)
        if where is not None:
            self._bodies.get(where, {}).pop(obj, None)

    def due(self, namespace: str, cluster: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self._lock:
            return bool(self._bodies.get((namespace, cluster))) and now >= self._due.get(
                (namespace, cluster), 0.0
            )

    def without_cluster(self, namespace: str, cluster: str, why: str) -> None:
        """The cluster does not exist or is being deleted: objects being deleted let go at once
        (their server goes with the cluster), the others say why nothing is applied."""
        with self._missing:
            self._without_cluster(namespace, cluster, why)

    def _without_cluster(self, namespace: str, cluster: str, why: str) -> None:
        with self._lock:
            bodies = list(self._bodies.get((namespace, cluster), {}).values())
        for body in bodies:
            meta = body["metadata"]
            finalizers = list(meta.get("finalizers") or [])
            try:
                if meta.get("deletionTimestamp"):
                    if FINALIZER in finalizers:
                        self._set_finalizers(body, [f for f in finalizers if f != FINALIZER])
                else:
                    self._publish(body, Result(False, R.CLUSTER_MISSING, why))
            except ApiException as e:
                log.warning("%s/%s %s: %s", namespace, meta["name"], body["kind"], e.reason)

    # -- one sync ---------------------------------------------------------------------------------
    def sync(
        self,
        namespace: str,
        cluster: str,
        connect: Callable[[], Instance] | None,
        flavor: Flavor,
        unavailable: str,
        owned: Owned = NOTHING_OWNED,
    ) -> None:
        """Converge every object of the cluster (`connect`: the primary as the SQL account, None
        with `unavailable` saying why there is none). An object in conflict (`conflicts`) is not
        applied, nor undone when deleted."""
        key = (namespace, cluster)
        with self._lock:
            bodies = list(self._bodies.get(key, {}).values())
            self._due[key] = time.monotonic() + SYNC_SECONDS
        parsed = []
        for body in bodies:
            try:
                parsed.append((body, parse_sql_object(body)))
            except SpecError:
                pass  # said on the object by _one
        refused = conflicts(parsed, owned)
        deleting = sorted(
            (b for b in bodies if (b.get("metadata") or {}).get("deletionTimestamp")),
            key=lambda b: -ORDER.index(b["kind"]),
        )
        live = sorted(
            (b for b in bodies if not (b.get("metadata") or {}).get("deletionTimestamp")),
            key=lambda b: ORDER.index(b["kind"]),
        )
        inst = None
        try:
            for body in deleting + live:
                if inst is None and connect is not None:
                    try:
                        inst = connect()
                    except InstanceError as e:  # every object says why, each pass tries again
                        connect, unavailable = None, f"cannot log in to the primary as {m.SQL_USER}: {e}"
                try:
                    self._one(body, inst, flavor, unavailable, refused.get(object_key(body)))
                except ApiException as e:
                    log.warning("%s/%s %s: %s", namespace, body["metadata"]["name"], body["kind"], e.reason)
                    why = f"the Kubernetes API answered {e.status} {e.reason} while applying it"
                    try:  # e.g. its password Secret forbidden or refused: said on the object
                        self._publish(body, Result(False, R.API_ERROR, why))
                    except ApiException:
                        pass  # the object itself cannot be written: the log line above is all
                except Exception as e:  # noqa: BLE001 - a bug: said on the object, not only logged
                    log.exception("%s/%s %s", namespace, body["metadata"]["name"], body["kind"])
                    why = f"{type(e).__name__} while applying it: the operator's log has the details"
                    self._publish(body, Result(False, R.INTERNAL_ERROR, why))
        finally:
            if inst is not None:
                inst.close()

    def _one(
        self, body: dict, inst: Instance | None, flavor: Flavor, unavailable: str, conflict: str | None = None
    ) -> None:
        meta = body["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        try:
            obj = parse_sql_object(body)
        except SpecError as e:
            if meta.get("deletionTimestamp"):  # never applied: nothing to undo
                self._set_finalizers(body, [f for f in finalizers if f != FINALIZER])
                return
            self._publish(body, Result(False, R.INVALID_SPEC, str(e)))
            return
        if meta.get("deletionTimestamp"):
            if FINALIZER in finalizers:
                if conflict is not None:  # what it names is another's: left as it is
                    self._set_finalizers(body, [f for f in finalizers if f != FINALIZER])
                else:
                    self._delete(body, obj, inst, unavailable, finalizers)
            return
        if conflict is not None:
            self._publish(body, Result(False, R.CONFLICT, conflict))
            return
        if FINALIZER not in finalizers and not self._set_finalizers(body, finalizers + [FINALIZER]):
            return  # deleted or changed meanwhile: applied from its next watch event, if any
        if inst is None:
            self._publish(body, Result(False, R.CLUSTER_UNAVAILABLE, unavailable))
            return
        secrets: list[str] = []
        try:
            result = self._converge(body, obj, inst, flavor, secrets)
        except InstanceError as e:
            result = Result(False, R.SQL_FAILED, _why(redact(str(e), secrets), e.errno))
        self._publish(body, result)

    def _converge(
        self, body: dict, obj: SqlObject, inst: Instance, flavor: Flavor, secrets: list[str]
    ) -> Result:
        spec = obj.spec
        if isinstance(spec, DatabaseSpec):
            done = inst.run_statements(statements.database(spec, inst.database_state(spec.name)))
            return Result(True, R.APPLIED, f"database {spec.name} exists as specified", done)
        if isinstance(spec, UserSpec):
            found = self._password(body, spec)
            if isinstance(found, Result):
                return found
            password, version, secret = found
            secrets.append(password)
            previous = body.get("status") or {}
            observed = inst.user_state(spec.name, spec.host)
            applied = observed is not None and previous.get("passwordVersion") == version
            plan = statements.user(spec, observed, flavor, password, applied)
            done = inst.run_statements(plan, secrets)
            extra = {"passwordSecret": secret, "passwordVersion": version}
            return Result(
                True, R.APPLIED, f"account {spec.name}@{spec.host} exists as specified", done, extra
            )
        assert isinstance(spec, GrantSpec)
        held = inst.grants_of(spec.user, spec.host)
        if held is None:
            return Result(
                False,
                R.USER_MISSING,
                f"the account {spec.user}@{spec.host} does not exist: create a MySQLUser with spec.name "
                f"{spec.user} and spec.host {spec.host} (or fix spec.user / spec.host)",
            )
        done = inst.run_statements(statements.grant(spec, held, flavor))
        return Result(
            True, R.APPLIED, f"{spec.user}@{spec.host} holds exactly these privileges on {spec.target}", done
        )

    def _password(self, body: dict, spec: UserSpec) -> tuple[str, str, str] | Result:
        """(password, its version, the Secret's name), or why there is none."""
        meta = body["metadata"]
        if spec.password is not None:
            name, key, where = spec.password.name, spec.password.key, spec.password.field
            found = self.reads.secret(meta["namespace"], name, 0)
            if found is None:
                return Result(
                    False,
                    R.SECRET_MISSING,
                    f"{where}: Secret {name} does not exist: create it or fix the reference",
                )
            if not found.data.get(key):
                return Result(
                    False,
                    R.SECRET_MISSING,
                    f"{where}: Secret {name} has no key {key}: add it or fix the reference",
                )
            value = found.data[key]
            problem = password_problem(key, value)
            if problem:
                return Result(False, R.PASSWORD_INVALID, f"{where}: {name}/{key} {problem}")
            return value, f"{name}/{key}/{found.version}", name
        name = password_secret_name(meta["name"])
        found = self.reads.secret(meta["namespace"], name, 0)
        if found is None:
            data = {"username": spec.name, "host": spec.host, "password": self.password_factory()}
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": meta["namespace"]},
                "type": "Opaque",
                "data": {key: base64.b64encode(v.encode()).decode() for key, v in data.items()},
            }
            self.kube.create_secret(m.owned(secret, k.owner_of(body)))
            found = self.reads.secret(meta["namespace"], name, 0)
            assert found is not None
        if not found.data.get("password"):
            return Result(
                False, R.SECRET_MISSING, f"the generated Secret {name} has no key password: delete it"
            )
        return found.data["password"], f"{name}/password/{found.version}", name

    def _delete(
        self, body: dict, obj: SqlObject, inst: Instance | None, unavailable: str, finalizers: list
    ) -> None:
        spec = obj.spec
        if inst is None:
            self._publish(body, Result(False, R.CLUSTER_UNAVAILABLE, f"waiting to clean up: {unavailable}"))
            return
        try:
            if isinstance(spec, DatabaseSpec):
                done = inst.run_statements(statements.drop_database(spec))
            elif isinstance(spec, UserSpec):
                done = inst.run_statements(statements.drop_user(spec))
            else:
                done = inst.run_statements(statements.revoke(spec, inst.grants_of(spec.user, spec.host)))
        except InstanceError as e:
            self._publish(body, Result(False, R.CLEANUP_FAILED, _why(str(e), e.errno)))
            return
        what = "; ".join(done) or f"kept on the server (cleanupPolicy {spec.cleanup})"
        self.kube.post_events(body, [("Normal", R.DELETED, what)])
        self._set_finalizers(body, [f for f in finalizers if f != FINALIZER])

    # -- writing back -----------------------------------------------------------------------------
    def _publish(self, body: dict, result: Result) -> None:
        meta = body["metadata"]
        previous = body.get("status") or {}
        status = status_for(result, previous, meta.get("generation"), clock.stamp())
        if result.done:
            self.kube.post_events(body, [("Normal", R.APPLIED, "; ".join(result.done))])
        if not status_changed(previous, status):
            return
        if not result.ok:
            self.kube.post_events(body, [("Warning", result.reason, result.message)])
        stored = self._patch(body, {"status": status}, status=True)
        if stored is not None:
            self.seen(stored)
        log.info(
            "%s/%s %s %s: %s", meta["namespace"], meta["name"], body["kind"], result.reason, result.message
        )

    def _set_finalizers(self, body: dict, finalizers: list[str]) -> bool:
        """Whether the list was stored (not: the object is gone or changed meanwhile)."""
        meta = body["metadata"]
        # the resourceVersion makes it a compare-and-swap: a list changed meanwhile is not overwritten
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
        stored = self._patch(body, patch)
        if stored is not None and not (stored["metadata"].get("deletionTimestamp") and not finalizers):
            self.seen(stored)
        return stored is not None

    def _patch(self, body: dict, patch: dict, status: bool = False) -> dict | None:
        # None: gone, or changed meanwhile (the watch brings the new one)
        return self.kube.patch_custom_object(body, PLURALS[body["kind"]], patch, status)


def _why(message: str, errno: int | None) -> str:
    if errno in ACCESS_DENIED:
        return (
            f"{message} - the cluster's {m.SQL_USER} account lacks a privilege: a cluster created "
            "before SQL objects existed has no such account (docs/upgrades.md, the checklist)"
        )
    return message
