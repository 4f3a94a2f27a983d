"""Recording fakes for unit tests: a KubeOps that records every call instead of making it, and
the reads of a pass (k8s/cache.py: Reads) answered from what a test puts in them."""

from __future__ import annotations

import base64
from typing import Any, Iterable, Mapping

from mysql_operator.k8s.ops import SecretRead


class RecordingKube:
    """KubeOps that records every call; `gone` Pods answer as deleted. The Secrets it is given
    or made are kept (`secrets`: name -> decoded data) for the reads of a `RecordingReads`."""

    def __init__(self, gone: Iterable[str] = (), secrets: Mapping[str, Mapping[str, str]] | None = None):
        self.calls: list[tuple[Any, ...]] = []
        self.gone = set(gone)
        self.secrets: dict[str, dict[str, str]] = {n: dict(d) for n, d in (secrets or {}).items()}
        self.owners: dict[str, tuple[str, ...]] = {}

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(("apply", obj["kind"], obj["metadata"]["name"]))
        return dict(obj)

    def patch_status(self, cluster: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        self.calls.append(("status", dict(status)))
        return True

    def post_events(self, involved: Mapping[str, Any], events: Iterable[tuple[str, str, str]]) -> None:
        self.calls.append(("events", [reason for _, reason, _ in events]))

    def set_pod_label(self, namespace: str, pod: str, key: str, value: str | None) -> bool:
        self.calls.append(("label", pod, value))
        return pod not in self.gone

    def annotate_pod(self, namespace: str, pod: str, key: str, value: str) -> bool:
        self.calls.append(("annotate", pod, key))
        return pod not in self.gone

    def delete_pod(
        self, namespace: str, pod: str, uid: str | None = None, grace_seconds: int | None = None
    ) -> bool:
        self.calls.append(("delete", pod))
        return pod not in self.gone

    def delete_pod_and_wait(self, namespace: str, pod: str, grace_seconds: int, timeout: float) -> bool:
        self.calls.append(("delete and wait", pod))
        return True

    def create_job(self, job: Mapping[str, Any]) -> None:
        self.calls.append(("job", job["metadata"]["name"]))

    def remove_cluster_annotation(self, cluster: Mapping[str, Any], key: str) -> bool:
        self.calls.append(("unannotate", key))
        return True

    def dry_run_apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(("read", "dry run", obj["kind"], obj["metadata"]["name"]))  # writes nothing
        return dict(obj)

    def create_secret(self, secret: Mapping[str, Any]) -> SecretRead | None:
        name = secret["metadata"]["name"]
        self.calls.append(("create secret", name))
        if name in self.secrets:
            return None
        self.secrets[name] = _decoded(secret.get("data") or {})
        refs = secret["metadata"].get("ownerReferences") or []
        self.owners[name] = tuple(r["uid"] for r in refs)
        return SecretRead(
            dict(self.secrets[name]), self.owners[name], "1", secret["metadata"].get("annotations") or {}
        )

    def write_secret(self, secret: Mapping[str, Any]) -> SecretRead | None:
        name = secret["metadata"]["name"]
        self.calls.append(("write secret", name))
        created = name not in self.secrets
        self.secrets.setdefault(name, {}).update(_decoded(secret.get("data") or {}))
        return SecretRead(dict(self.secrets[name]), (), "1") if created else None

    def set_secret_owner(self, namespace: str, name: str, owned_copy: Mapping[str, Any] | None) -> None:
        self.calls.append(("secret owner", name))
        refs = (owned_copy or {}).get("metadata", {}).get("ownerReferences") or []
        self.owners[name] = tuple(r["uid"] for r in refs)

    def add_secret_keys(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        self.calls.append(("secret keys", name, sorted(data)))
        self.secrets.setdefault(name, {}).update(_decoded(data))

    def delete_deployment(self, namespace: str, name: str) -> bool:
        self.calls.append(("delete deployment", name))
        return False

    def grow_claim(self, namespace: str, name: str, size: str) -> tuple[bool, str | None]:
        self.calls.append(("grow claim", name, size))
        return True, None

    def patch_custom_object(
        self, body: Mapping[str, Any], plural: str, patch: Mapping[str, Any], status: bool = False
    ) -> dict | None:
        self.calls.append(("patch", plural, body["metadata"]["name"], "status" if status else "object"))
        return {**body, **patch}


def _decoded(data: Mapping[str, str]) -> dict[str, str]:
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


class RecordingReads:
    """What a pass reads (k8s/cache.py: Reads), answered from the objects a test gives and the
    Secrets its RecordingKube holds; each read is recorded in that kube's `calls` too, so one
    list shows reads and writes in the order the pass made them."""

    def __init__(
        self,
        kube: RecordingKube,
        clusters: Iterable[Mapping[str, Any]] = (),
        pods: Iterable[Mapping[str, Any]] = (),
        statefulsets: Iterable[Mapping[str, Any]] = (),
    ):
        self.kube = kube
        self.clusters = {c["metadata"]["name"]: dict(c) for c in clusters}
        self.pods = [dict(p) for p in pods]
        self.statefulsets = {s["metadata"]["name"]: dict(s) for s in statefulsets}

    def _read(self, *what: Any) -> None:
        self.kube.calls.append(("read", *what))

    def cluster(self, namespace: str, name: str) -> dict | None:
        self._read("cluster", name)
        return self.clusters.get(name)

    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict]:
        self._read("pods")
        return list(self.pods)

    def deleted_pod(self, namespace: str, name: str) -> dict | None:
        return None

    def statefulset(self, namespace: str, name: str) -> dict | None:
        self._read("statefulset", name)
        return self.statefulsets.get(name)

    def live_statefulset(self, namespace: str, name: str) -> dict | None:
        self._read("live statefulset", name)
        return self.statefulsets.get(name)

    def owned_statefulsets(self, sync_wait: float = 10.0) -> list[dict]:
        self._read("statefulsets")
        return list(self.statefulsets.values())

    def clusters_by_uid(self, sync_wait: float = 10.0) -> dict[str, str]:
        self._read("clusters")
        return {c["metadata"]["uid"]: f"{c['metadata']['namespace']}/{n}" for n, c in self.clusters.items()}

    def secret(self, namespace: str, name: str, max_age: float) -> SecretRead | None:
        self._read("secret", name)
        data = self.kube.secrets.get(name)
        return None if data is None else SecretRead(dict(data), self.kube.owners.get(name, ()), "1")

    def service_ip(self, namespace: str, name: str) -> str | None:
        self._read("service", name)
        return None

    def secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        self._read("secret", name)
        data = self.kube.secrets.get(name)
        return None if data is None else dict(data)

    def served_resources(self, group: str, version: str) -> set[str] | None:
        self._read("served", group)
        return None

    def custom_object(
        self, group: str, version: str, plural: str, name: str, namespace: str | None
    ) -> dict | None:
        self._read(plural, name)
        return None
