"""The watched stores the operator reads from: `Store` (the newest version of each object, indexed
by cluster) and `Reflector` (one list, then a watch that keeps a Store current; listing again
when the server says the version is gone, on an error, and - for custom resources - when the
watch expires); `start_reflectors`, the operator's: its MySQLClusters, Pods and StatefulSets."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Callable, Iterable, Mapping

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION


log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)


def newer(candidate: str | None, current: str | None) -> bool:
    """Whether resourceVersion `candidate` is at least as new as `current`. Opaque strings in the
    API's contract, decimal etcd revisions in practice: when either is not, the newcomer wins."""
    if not current:
        return True
    if not candidate:
        return False
    if candidate.isdigit() and current.isdigit():
        return int(candidate) >= int(current)
    return True


def resource_version(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion") or "")


def object_key(body: Mapping[str, Any]) -> Key:
    meta = body.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def labels_of(body: Mapping[str, Any]) -> Mapping[str, str]:
    return (body.get("metadata") or {}).get("labels") or {}


# the label every owned object carries: its cluster's name. A pass selects its cluster's Pods by
# it, so the store keeps them grouped and a selection costs the cluster's objects, not all of them
INDEX_LABEL = "app.kubernetes.io/instance"
Group = tuple[str, str | None]  # (namespace, INDEX_LABEL's value)


def group_of(key: Key, body: Mapping[str, Any]) -> Group:
    return key[0], labels_of(body).get(INDEX_LABEL)


class Store:
    """The latest bodies of one kind, by (namespace, name). Thread-safe. `scopes`: how many
    reflectors fill it (one for every namespace, or one per watched namespace); it is synced once
    each has listed."""

    def __init__(self, scopes: Iterable[str] = ("",)) -> None:
        self._items: dict[Key, dict] = {}
        self._groups: dict[Group, set[Key]] = {}
        # deleted objects' last bodies (what their DELETED event said), until the next LIST: their
        # resourceVersion keeps a late event from bringing one back, and a Pod's says whether the
        # kubelet saw its containers end before it went
        self._last: dict[Key, dict] = {}
        self._lock = threading.Lock()
        self._unlisted = set(scopes)
        self.synced = threading.Event()

    def offer(self, body: Mapping[str, Any], current: bool = True) -> None:
        """Keep `body` unless a newer version (or the object's deletion) is already known.
        `current`: the API server read it just now (a LIST, a write's answer), so it replaces the
        same version held; a copy that may be older (a watch event, kopf's body) does not."""
        key, version = object_key(body), resource_version(body)
        with self._lock:
            held = self._items.get(key)
            if held is not None and not newer(version, resource_version(held)):
                return
            if held is not None and not current and version == resource_version(held):
                return
            gone = self._last.get(key)
            if held is None and gone is not None and not newer(version, resource_version(gone)):
                return
            self._drop(key)
            self._items[key] = dict(body)
            self._groups.setdefault(group_of(key, body), set()).add(key)

    def _drop(self, key: Key) -> None:
        """Under the lock: `key` out of the items and its group."""
        held = self._items.pop(key, None)
        if held is not None:
            group = group_of(key, held)
            members = self._groups.get(group)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._groups[group]

    def remove(self, body: Mapping[str, Any]) -> None:
        key, version = object_key(body), resource_version(body)
        with self._lock:
            held = self._items.get(key)
            if held is None or newer(version, resource_version(held)):
                self._drop(key)
                self._last[key] = dict(body)

    def replace(self, bodies: Iterable[Mapping[str, Any]], version: str, scope: str = "") -> None:
        """A full LIST at `version` of one namespace (`scope`; "" for all): what it lacks was
        deleted, unless known to be newer."""
        listed = {object_key(b): b for b in bodies}
        with self._lock:
            for key in [key for key in self._items if key not in listed and scope in ("", key[0])]:
                if newer(version, resource_version(self._items[key])):
                    self._drop(key)
            for key in [key for key in self._last if scope in ("", key[0])]:
                del self._last[key]
        for body in listed.values():
            self.offer(body)
        with self._lock:
            self._unlisted.discard(scope)
            if not self._unlisted:
                self.synced.set()

    def get(self, namespace: str, name: str) -> dict | None:
        with self._lock:
            return self._items.get((namespace, name))

    def last_deleted(self, namespace: str, name: str) -> dict | None:
        """The last body of the object of that name deleted since the last LIST, if any (another
        of the same name may exist since)."""
        with self._lock:
            return self._last.get((namespace, name))

    def items(self) -> list[dict]:
        with self._lock:
            return list(self._items.values())

    def select(self, namespace: str, labels: Mapping[str, str]) -> list[dict]:
        """The objects of `namespace` that carry all of `labels` (only their group's, when
        `labels` name INDEX_LABEL)."""
        with self._lock:
            if INDEX_LABEL in labels:
                keys = self._groups.get((namespace, labels[INDEX_LABEL]), ())
                items = [self._items[key] for key in keys]
            else:
                items = [body for (ns, _), body in self._items.items() if ns == namespace]
        return [body for body in items if all(labels_of(body).get(k) == v for k, v in labels.items())]


class Reflector(threading.Thread):
    """Keeps a Store current: LIST, WATCH from there, LIST again when the watch cannot go on."""

    def __init__(
        self,
        api: client.ApiClient,
        store: Store,
        list_call: Callable[..., Any],
        label_selector: str = "",
        scope: str = "",
        watch_seconds: int = 300,
        name: str = "reflector",
        resumes: bool = False,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.api, self.store, self.list_call = api, store, list_call
        self.label_selector, self.scope, self.watch_seconds = label_selector, scope, watch_seconds
        # a watch that ended is taken up again from its last version, not listed again: for kinds
        # no CRD update can change the storage of (built-in kinds). A LIST of every Pod of 1,000
        # clusters every watch period was a sixth of an idle operator's CPU
        self.resumes = resumes
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def _list(self) -> str:
        # plain JSON, not the client's models: cheaper, and what the pass reads anyway
        answer = self.list_call(
            label_selector=self.label_selector, _preload_content=False, _request_timeout=(5, 60)
        )
        listed = json.loads(answer.data)
        version = listed["metadata"]["resourceVersion"]
        self.store.replace(listed.get("items") or [], version, self.scope)
        return version

    def run(self) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                w = watch.Watch()
                for event in w.stream(
                    self.list_call,
                    label_selector=self.label_selector,
                    resource_version=version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=self.watch_seconds,
                    _request_timeout=(5, self.watch_seconds + 30),
                ):
                    if self._stop.is_set():
                        w.stop()
                        break
                    kind, obj = event["type"], event["raw_object"]
                    if kind == "ERROR":  # 410 Gone: the server compacted past our version
                        version = None
                        break
                    version = resource_version(obj) or version
                    if kind == "DELETED":
                        self.store.remove(obj)
                    elif kind in ("ADDED", "MODIFIED"):
                        self.store.offer(obj, current=False)
                else:
                    # the watch ended (its timeout, or the server closed it): a custom resource
                    # is listed again, not watched on. The server closes the watches of a kind
                    # whose storage it replaced (a CRD updated): what they sent was decoded with
                    # the old schema, a field it did not know pruned, and no event follows for an
                    # object that did not change
                    version = version if self.resumes else None
            except ApiException as e:
                log.info("%s: %s %s; listing again", self.name, e.status, e.reason)
                version = None
                self._stop.wait(1.0)
            except Exception as e:  # noqa: BLE001 - connection errors: list again shortly
                log.info("%s: %s; listing again", self.name, type(e).__name__)
                version = None
                self._stop.wait(1.0)


def start_reflectors(
    api: client.ApiClient, namespaces: Iterable[str], selector: str
) -> tuple[Store, Store, Store, list[Reflector]]:
    """Stores of MySQLClusters, and of the operator's Pods and StatefulSets (label `selector`), in
    every namespace (`namespaces` empty: one watch per kind) or in each of `namespaces`."""
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    spaces = list(namespaces) or [""]

    def clusters(ns: str) -> Callable[..., Any]:
        if not ns:
            return lambda **kw: custom.list_cluster_custom_object(GROUP, VERSION, CLUSTER_PLURAL, **kw)
        return lambda **kw: custom.list_namespaced_custom_object(GROUP, VERSION, ns, CLUSTER_PLURAL, **kw)

    # lambdas, not the client's methods: the watch then yields plain JSON ("raw_object") instead
    # of also building the client's models for every event
    def pods(ns: str) -> Callable[..., Any]:
        if not ns:
            return lambda **kw: core.list_pod_for_all_namespaces(**kw)
        return lambda **kw: core.list_namespaced_pod(ns, **kw)

    def statefulsets(ns: str) -> Callable[..., Any]:
        if not ns:
            return lambda **kw: apps.list_stateful_set_for_all_namespaces(**kw)
        return lambda **kw: apps.list_namespaced_stateful_set(ns, **kw)

    stores = Store(spaces), Store(spaces), Store(spaces)
    reflectors = []
    for store, call, sel, what in zip(
        stores,
        (clusters, pods, statefulsets),
        ("", selector, selector),
        ("mysqlclusters", "pods", "statefulsets"),
    ):
        for ns in spaces:
            r = Reflector(
                api,
                store,
                call(ns),
                label_selector=sel,
                scope=ns,
                name=f"reflector-{what}-{ns or 'all'}",
                resumes=what != "mysqlclusters",
            )
            r.start()
            reflectors.append(r)
    return stores[0], stores[1], stores[2], reflectors
