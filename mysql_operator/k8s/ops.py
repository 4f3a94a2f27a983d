"""KubeOps: every write one cluster's pass makes to Kubernetes - the objects it owns, its
Secrets (created, keys added, owners set), its status, its Events, the role labels and annotations
of its Pods, a Pod restarted, a Job started, a carried-out request's annotation removed, a volume
grown, the archiver's Deployment deleted - behind one small interface. `k8s/cache.py: Reads` is the
real one (every write also updates what it keeps, so the pass reads what it wrote);
tests/support/fakes.py: RecordingKube records the calls to check their order."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple, Protocol


class SecretRead(NamedTuple):
    """A Secret as read (k8s/objects.py: read_secret)."""

    data: dict[str, str]  # decoded (as read_secret_data)
    owners: tuple[str, ...]  # uids of its owner references
    version: str  # metadata.resourceVersion
    annotations: Mapping[str, str] = {}


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

    def dry_run_apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The object as a server-side apply of `obj` would store it; nothing written."""

    def create_secret(self, secret: Mapping[str, Any]) -> SecretRead | None:
        """The Secret created (never overwritten): as created; None when one of that name exists."""

    def write_secret(self, secret: Mapping[str, Any]) -> SecretRead | None:
        """The Secret created, or the one of that name given `secret`'s data keys and annotations
        (keys it does not name stay): as created; None when patched."""

    def set_secret_owner(self, namespace: str, name: str, owned_copy: Mapping[str, Any] | None) -> None:
        """The Secret's owner references made those of `owned_copy` (manifests.owned), or none."""

    def add_secret_keys(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        """Keys (base64 values) added to, or replaced in, an existing Secret; the others stay."""

    def delete_deployment(self, namespace: str, name: str) -> bool:
        """The Deployment deleted; False when there was none."""

    def patch_custom_object(
        self, body: Mapping[str, Any], plural: str, patch: Mapping[str, Any], status: bool = False
    ) -> dict[str, Any] | None:
        """A merge patch of the namespaced custom object `body` (of resource `plural`), of its
        .status with `status`: as stored; None when it is gone or changed meanwhile (a
        resourceVersion in `patch` makes it a compare-and-swap)."""

    def grow_claim(self, namespace: str, name: str, size: str) -> tuple[bool, str | None]:
        """The PersistentVolumeClaim asks for at least `size`: whether it does now, and the API
        server's refusal in its words; (False, None) when there is no such claim (yet)."""
