"""What the reconcile pass reads every second, served from memory instead of the API server.

A `Store` holds the latest body of each object of one kind, fed by a `Reflector` (LIST, then
WATCH from the list's resourceVersion, LIST again whenever the watch ends: its timeout, the server
compacted past it, or closed it because the kind's schema changed) and by the operator's own
writes (`offer` with the API's answer: the pass reads what it wrote even before the watch delivers
it; the status it records before acting is never read back stale). A body is replaced only by
one with a newer resourceVersion, so a late watch event never undoes a write; at the same
resourceVersion only by a LIST's or a write's answer, which the API server decoded with the kind's
current schema (a watch's event or kopf's body may hold a copy an older schema pruned: see
Reflector.run). Until its first LIST the store is not `synced` and readers go to the
API server, as they do for what no store holds.

`Reads` is what the pass uses: the MySQLCluster, its Pods and its StatefulSet from the stores, the
Secrets it reads (the operator may `get` Secrets, never list or watch them) again once they are
older than the caller allows and at once after it wrote one, and what an apply decides on as the
API server has it now (`live_*`); and its writes (k8s/ops.py: KubeOps). Without stores (tests, tools) every read goes to the API server.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.k8s import jobs
from mysql_operator.k8s import objects as k
from mysql_operator.manifests import MANAGED_BY
from mysql_operator.k8s.reflector import Key, Store

log = logging.getLogger(__name__)


# writes to a MySQLCluster tried while others change it (Reads._write_cluster)
CLUSTER_WRITE_ATTEMPTS = 5


class Reads:
    """What a reconcile pass reads, from the stores where there are synced ones."""

    def __init__(
        self,
        api: client.ApiClient,
        clusters: Store | None = None,
        pods: Store | None = None,
        statefulsets: Store | None = None,
        cache_secrets: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.clusters, self.pods, self.statefulsets = clusters, pods, statefulsets
        self.cache_secrets = cache_secrets
        self.clock = clock
        self._secrets: dict[Key, tuple[float, k.SecretRead | None]] = {}
        self._applied: dict[Key, int | None] = {}  # StatefulSet -> the generation its last apply made
        self._applying: dict[Key, int] = {}  # StatefulSet -> applies of it in flight
        self._lock = threading.Lock()

    @staticmethod
    def _ready(store: Store | None) -> bool:
        return store is not None and store.synced.is_set()

    def cluster(self, namespace: str, name: str) -> dict | None:
        if self._ready(self.clusters):
            assert self.clusters is not None
            return self.clusters.get(namespace, name)
        return k.read_cluster(self.api, namespace, name)

    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict]:
        if self._ready(self.pods):
            assert self.pods is not None
            return sorted(self.pods.select(namespace, selector), key=lambda p: p["metadata"]["name"])
        return k.list_pods(self.api, namespace, selector)

    def deleted_pod(self, namespace: str, name: str) -> dict | None:
        """The last body of the Pod of that name deleted lately (the watched store's; None
        without one)."""
        return self.pods.last_deleted(namespace, name) if self._ready(self.pods) and self.pods else None

    def statefulset(self, namespace: str, name: str) -> dict | None:
        if self._ready(self.statefulsets):
            assert self.statefulsets is not None
            return self.statefulsets.get(namespace, name)
        return k.read_statefulset(self.api, namespace, name)

    def live_statefulset(self, namespace: str, name: str) -> dict | None:
        """The StatefulSet as the API server has it now (not the store's: an apply decides on it)."""
        return k.read_statefulset(self.api, namespace, name)

    def service_ip(self, namespace: str, name: str) -> str | None:
        """The Service's cluster IP; None when it has none, does not exist or cannot be read."""
        try:
            svc = k.read_json(self.api, "v1", "Service", namespace, name)
        except ApiException:
            return None
        return ((svc or {}).get("spec") or {}).get("clusterIP") or None

    def secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """The Secret's decoded data as the API server has it now; None if absent."""
        return k.read_secret_data(self.api, namespace, name)

    def job(self, namespace: str, name: str) -> tuple[dict | None, list[dict]]:
        """The Job as the API server has it now (None if absent) and the Pods it owns."""
        return jobs.read_job(self.api, namespace, name)

    def served_resources(self, group: str, version: str) -> set[str] | None:
        """The resources the API server serves in group/version; None: no such group version."""
        return k.served_resources(self.api, group, version)

    def custom_object(
        self, group: str, version: str, plural: str, name: str, namespace: str | None
    ) -> dict | None:
        """A custom object (cluster-scoped without `namespace`) as stored; None if absent."""
        return k.read_custom_object(self.api, group, version, plural, name, namespace)

    def owned_statefulsets(self, sync_wait: float = 10.0) -> list[dict]:
        """Every StatefulSet of this operator it can see: the store's once it has listed (waiting up
        to `sync_wait` s for that: an operator just started); without one, the API server's; [] when
        it may not list them all (a namespaced operator without its stores)."""
        return self._everywhere(
            self.statefulsets,
            sync_wait,
            lambda: (
                client.AppsV1Api(self.api)
                .list_stateful_set_for_all_namespaces(
                    label_selector=f"app.kubernetes.io/managed-by={MANAGED_BY}"
                )
                .items
            ),
        )

    def clusters_by_uid(self, sync_wait: float = 10.0) -> dict[str, str]:
        """uid -> namespace/name of every MySQLCluster it can see (as owned_statefulsets)."""
        listed = self._everywhere(
            self.clusters,
            sync_wait,
            lambda: client.CustomObjectsApi(self.api).list_cluster_custom_object(
                GROUP, VERSION, CLUSTER_PLURAL
            )["items"],
        )
        out = {}
        for body in listed:
            meta = body.get("metadata") or {}
            if meta.get("uid"):
                out[str(meta["uid"])] = f"{meta.get('namespace')}/{meta.get('name')}"
        return out

    def _everywhere(self, store: Store | None, sync_wait: float, list_all: Callable[[], list]) -> list[dict]:
        """The store's bodies once it has listed (waiting up to `sync_wait` s), else `list_all()`
        from the API server as plain dicts; [] when the operator may not list in every namespace."""
        if store is not None and store.synced.wait(sync_wait):
            return store.items()
        try:
            listed = list_all()
        except ApiException as e:
            if e.status == 403:
                return []
            raise
        return [self.api.sanitize_for_serialization(item) for item in listed]

    def secret(self, namespace: str, name: str, max_age: float) -> k.SecretRead | None:
        """The Secret as read at most `max_age` seconds ago (with cache_secrets; else now)."""
        now = self.clock()
        with self._lock:
            cached = self._secrets.get((namespace, name))
        if self.cache_secrets and cached is not None and now - cached[0] < max_age:
            return cached[1]
        found = k.read_secret(self.api, namespace, name)
        if self.cache_secrets:
            with self._lock:
                self._secrets[(namespace, name)] = (now, found)
        return found

    def seen(self, body: Mapping[str, Any]) -> None:
        """A MySQLCluster body kopf delivered (never older than what the store holds afterwards).
        Not in place of the store's copy of the same version: kopf keeps the body its watch
        delivered, and a watch the server closed because the CRD changed may have delivered it
        pruned by the old schema; kopf watches on from there, so only the store's LIST has the
        fields the new schema keeps (else a cluster created while a newer CRD was applied has its
        new fields unseen, and no Warning naming the unknown ones, until its next edit)."""
        self._seen(self.clusters, body)

    def seen_owned(self, kind: str, body: Mapping[str, Any]) -> None:
        """A Pod or StatefulSet body kopf delivered: kopf's watch and the store's are two, and a
        pass woken by kopf's event must not read the store's older copy (a cluster with nothing
        running is not looked at again until its resync)."""
        self._seen(self.pods if kind == "Pod" else self.statefulsets, body)

    def wrote_secret(self, namespace: str, name: str, created: k.SecretRead | None = None) -> None:
        """The operator changed this Secret: read it again next time; or it `created` it (the
        API server's answer): that is what a read would find."""
        with self._lock:
            if created is not None and self.cache_secrets:
                self._secrets[(namespace, name)] = (self.clock(), created)
            else:
                self._secrets.pop((namespace, name), None)

    # the writes whose effect the next pass must see (read your own writes): through here
    def patch_status(self, cluster: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        meta = cluster["metadata"]
        return self._write_cluster(
            cluster,
            lambda version: k.patch_status(self.api, meta["namespace"], meta["name"], status, version),
        )

    def remove_cluster_annotation(self, cluster: Mapping[str, Any], key: str) -> bool:
        meta = cluster["metadata"]
        return self._write_cluster(
            cluster,
            lambda version: k.remove_cluster_annotation(
                self.api, meta["namespace"], meta["name"], key, version
            ),
        )

    def _write_cluster(self, cluster: Mapping[str, Any], write: Callable[[str], dict | None]) -> bool:
        """Effect: `write(resourceVersion)` on the MySQLCluster `cluster` (a body of it), and only
        on that object: a pass still running when its cluster is deleted and created again under
        the same name must not write into the new one (a stale currentPrimary there skips the
        new cluster's adoption of its servers). The write names the resourceVersion of a body
        read with the cluster's uid; the API server refuses it with a conflict once the object
        has changed, and it is read and tried again. False when the object is gone or another
        object has its name now."""
        meta = cluster["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        current = self.cluster(namespace, name)
        for attempt in range(CLUSTER_WRITE_ATTEMPTS):
            if attempt or current is None or current["metadata"].get("uid") != uid:
                current = k.read_cluster(self.api, namespace, name)  # the store may be behind
            if current is None or current["metadata"].get("uid") != uid:
                log.info("%s/%s: not written: the cluster (uid %s) is gone", namespace, name, uid)
                return False
            try:
                written = write(current["metadata"]["resourceVersion"])
            except ApiException as e:
                if e.status != 409 or attempt == CLUSTER_WRITE_ATTEMPTS - 1:
                    raise
                continue
            self._wrote(self.clusters, written)
            return written is not None
        return False  # not reached: the last attempt returns or raises

    def set_pod_label(self, namespace: str, pod: str, key: str, value: str | None) -> bool:
        return self._set_pod_meta(namespace, pod, key, value, "labels")

    def annotate_pod(self, namespace: str, pod: str, key: str, value: str) -> bool:
        return self._set_pod_meta(namespace, pod, key, value, "annotations")

    def _set_pod_meta(self, namespace: str, pod: str, key: str, value: str | None, field: str) -> bool:
        try:
            self._wrote(self.pods, k.set_pod_meta(self.api, namespace, pod, field, key, value))
        except ApiException as e:
            if e.status != 404:
                raise
            return False
        return True

    def apply(self, obj: Mapping[str, Any]) -> dict:
        if obj.get("kind") != "StatefulSet":
            return k.server_side_apply(self.api, obj)
        key = (obj["metadata"].get("namespace"), obj["metadata"].get("name"))
        with self._lock:
            self._applying[key] = self._applying.get(key, 0) + 1
        try:
            applied = k.server_side_apply(self.api, obj)
            with self._lock:
                self._applied[key] = (applied.get("metadata") or {}).get("generation")
        finally:
            with self._lock:
                self._applying[key] -= 1
                if not self._applying[key]:
                    del self._applying[key]
        return applied

    def applied_here(self, statefulset: Mapping[str, Any]) -> bool:
        """Whether this StatefulSet body's generation is the one this process's last apply of it
        made: its watch event then says nothing to apply again (a spec changed by hand has a
        newer generation)."""
        meta = statefulset.get("metadata") or {}
        key = (meta.get("namespace"), meta.get("name"))
        with self._lock:
            if key in self._applying:  # its answer not read yet: the event is of that write (or older)
                return True
            made = self._applied.get(key)
        return made is not None and made == meta.get("generation")

    def post_events(self, involved: Mapping[str, Any], events: Iterable[tuple[str, str, str]]) -> None:
        k.post_events(self.api, involved, events)

    def delete_pod(
        self, namespace: str, pod: str, uid: str | None = None, grace_seconds: int | None = None
    ) -> bool:
        options = client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid=uid) if uid else None,
            grace_period_seconds=grace_seconds,
        )
        try:
            client.CoreV1Api(self.api).delete_namespaced_pod(pod, namespace, body=options)
        except ApiException as e:
            if e.status not in (404, 409):  # 409: the uid differs, another Pod of that name
                raise
            return False
        return True

    def delete_pod_and_wait(self, namespace: str, pod: str, grace_seconds: int, timeout: float) -> bool:
        core = client.CoreV1Api(self.api)

        def uid_now() -> str | None:  # a list by name: the operator's role lists Pods, never gets one
            items = core.list_namespaced_pod(namespace, field_selector=f"metadata.name={pod}").items
            return items[0].metadata.uid if items else None

        uid = uid_now()
        if uid is None or not self.delete_pod(namespace, pod, uid=uid, grace_seconds=grace_seconds):
            return True  # none, or another Pod of that name already
        deadline = time.monotonic() + timeout
        while uid_now() == uid:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return True

    def create_job(self, job: Mapping[str, Any]) -> None:
        jobs.create_job(self.api, job)

    def dry_run_apply(self, obj: Mapping[str, Any]) -> dict:
        return k.server_side_apply(self.api, obj, dry_run=True)

    def create_secret(self, secret: Mapping[str, Any]) -> k.SecretRead | None:
        created = k.create_secret(self.api, secret)
        self.wrote_secret(secret["metadata"]["namespace"], secret["metadata"]["name"], created)
        return created

    def write_secret(self, secret: Mapping[str, Any]) -> k.SecretRead | None:
        created = k.write_secret(self.api, secret)
        self.wrote_secret(secret["metadata"]["namespace"], secret["metadata"]["name"], created)
        return created

    def set_secret_owner(self, namespace: str, name: str, owned_copy: Mapping[str, Any] | None) -> None:
        k.set_owner(self.api, namespace, name, owned_copy)
        self.wrote_secret(namespace, name)

    def add_secret_keys(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        k.add_secret_keys(self.api, namespace, name, data)
        self.wrote_secret(namespace, name)

    def delete_deployment(self, namespace: str, name: str) -> bool:
        try:
            client.AppsV1Api(self.api).delete_namespaced_deployment(name, namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            return False
        return True

    def grow_claim(self, namespace: str, name: str, size: str) -> tuple[bool, str | None]:
        return k.grow_claim(self.api, namespace, name, size)

    def patch_custom_object(
        self, body: Mapping[str, Any], plural: str, patch: Mapping[str, Any], status: bool = False
    ) -> dict | None:
        meta = body["metadata"]
        objs = client.CustomObjectsApi(self.api)
        call = objs.patch_namespaced_custom_object_status if status else objs.patch_namespaced_custom_object
        group, _, version = body["apiVersion"].partition("/")
        try:
            return call(group, version, meta["namespace"], plural, meta["name"], dict(patch))
        except ApiException as e:
            if e.status in (404, 409):
                return None
            raise

    @staticmethod
    def _wrote(store: Store | None, body: Mapping[str, Any] | None) -> None:
        if store is not None and body:
            store.offer(body)

    @staticmethod
    def _seen(store: Store | None, body: Mapping[str, Any]) -> None:
        if store is not None and body:
            store.offer(body, current=False)

    def forget(self, namespace: str, name: str) -> None:
        """A deleted cluster: drop what is kept of its Secrets and of its StatefulSet's applies."""
        with self._lock:
            for kept in (self._secrets, self._applied):
                for key in [key for key in kept if key[0] == namespace and key[1].startswith(name)]:
                    del kept[key]
