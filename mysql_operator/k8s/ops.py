"""KubeOps: what one cluster's pass writes to Kubernetes - the objects it owns, its status, its
Events, the role labels and annotations of its Pods, a Pod restarted, a Job started, a carried-out request's annotation removed - behind one small
interface. `k8s/cache.py: Reads` is the real one (every write also updates its store, so the pass
reads what it wrote); tests/unit/test_pass_effects.py records the calls to check their order."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol


class KubeOps(Protocol):
    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply of one object (k8s/objects.py: ApplyError when refused); as stored."""

    def patch_status(self, cluster: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        """JSON merge patch of the .status of the MySQLCluster `cluster` (a body of it): of that
        object only (its uid), never of one created since under its name; False if it is gone."""

    def post_events(self, involved: Mapping[str, Any], events: Iterable[tuple[str, str, str]]) -> None:
        """Events (type, reason, message) on `involved` (a MySQLCluster's body)."""

    def set_pod_label(self, namespace: str, pod: str, key: str, value: str | None) -> bool:
        """Set (None: remove) one label of a Pod; False when there is no such Pod."""

    def annotate_pod(self, namespace: str, pod: str, key: str, value: str) -> bool:
        """Set one annotation of a Pod; False when there is no such Pod."""

    def delete_pod(
        self, namespace: str, pod: str, uid: str | None = None, grace_seconds: int | None = None
    ) -> bool:
        """A server's Pod deleted (its StatefulSet starts it again on the same volume); False
        when there was no such Pod (with `uid`: no Pod of that name with that uid). `grace_seconds`
        shortens the Pod's own grace period (a server fenced by its restart is killed at once)."""

    def delete_pod_and_wait(self, namespace: str, pod: str, grace_seconds: int, timeout: float) -> bool:
        """The Pod deleted as delete_pod does, then waited for until it (its uid) is gone, i.e.
        its containers have stopped (the kubelet removes the object only then); True when gone
        within `timeout` seconds (or there was none)."""

    def create_job(self, job: Mapping[str, Any]) -> None:
        """A Job created; one that exists already (an earlier pass made it) is fine."""

    def remove_cluster_annotation(self, cluster: Mapping[str, Any], key: str) -> bool:
        """One annotation of the MySQLCluster `cluster` removed (a request carried out), as
        patch_status writes: that object only."""
