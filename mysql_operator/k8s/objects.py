"""Server-side apply, Secrets created only if missing, status patches, Events, pod labels."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any, Iterable, Mapping

from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator import clock
from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.k8s.ops import SecretRead

FIELD_MANAGER = "mysql-operator"
log = logging.getLogger(__name__)

# (apiVersion, kind) -> (URL prefix, plural): the kinds the operator applies
_PATHS = {
    ("v1", "Secret"): ("/api/v1", "secrets"),
    ("v1", "ConfigMap"): ("/api/v1", "configmaps"),
    ("v1", "Service"): ("/api/v1", "services"),
    ("v1", "PersistentVolumeClaim"): ("/api/v1", "persistentvolumeclaims"),
    ("apps/v1", "StatefulSet"): ("/apis/apps/v1", "statefulsets"),
    ("apps/v1", "Deployment"): ("/apis/apps/v1", "deployments"),
    ("policy/v1", "PodDisruptionBudget"): ("/apis/policy/v1", "poddisruptionbudgets"),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("/apis/networking.k8s.io/v1", "networkpolicies"),
    ("cert-manager.io/v1", "Certificate"): ("/apis/cert-manager.io/v1", "certificates"),
    # cluster-scoped: the operator's own CRDs (k8s/crds.py)
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
    ),
}
_CLUSTER_SCOPED = {("apiextensions.k8s.io/v1", "CustomResourceDefinition")}


def object_path(obj: Mapping[str, Any]) -> str:
    key = (obj["apiVersion"], obj["kind"])
    if key not in _PATHS:
        raise ValueError(f"no API path known for {key}")
    prefix, plural = _PATHS[key]
    meta = obj["metadata"]
    if key in _CLUSTER_SCOPED:
        return f"{prefix}/{plural}/{meta['name']}"
    return f"{prefix}/namespaces/{meta['namespace']}/{plural}/{meta['name']}"


def _request(
    api: client.ApiClient,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    query: list[tuple[str, str]] | None = None,
    body: Any = None,
) -> Any:
    """One request through the client's pool, answered in JSON and read whole (any status)."""
    request = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=query,
        header_params={**(headers or {}), "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request)
    response.read()
    return response


def server_side_apply(
    api: client.ApiClient, obj: Mapping[str, Any], field_manager: str = FIELD_MANAGER, dry_run: bool = False
) -> dict:
    """PATCH application/apply-patch+yaml (JSON is YAML), forcing ownership of our fields:
    a hand edit of a field we set is overwritten; fields nobody of us sets are left alone.
    `dry_run`: the object as it would be stored, nothing written."""
    response = _request(
        api,
        "PATCH",
        object_path(obj),
        {"Content-Type": "application/apply-patch+yaml"},
        [("fieldManager", field_manager), ("force", "true")] + ([("dryRun", "All")] if dry_run else []),
        dict(obj),
    )
    if response.status >= 300:
        raise ApplyError(obj, response.status, response.data)
    return json.loads(response.data)


def read_json(api: client.ApiClient, api_version: str, kind: str, namespace: str, name: str) -> dict | None:
    """The object as stored, as plain JSON (camelCase keys, as in a manifest); None if absent.
    Not through the client's models: building them and turning them back into a dict cost more
    CPU than the request itself, on every read of every cluster's pass."""
    prefix, plural = _PATHS[(api_version, kind)]
    response = _request(api, "GET", f"{prefix}/namespaces/{namespace}/{plural}/{name}")
    if response.status == 404:
        return None
    if response.status >= 300:
        raise ApiException(http_resp=response)
    return json.loads(response.data)


class ApplyError(Exception):
    """An apply the API server answered with an error: `message` is its own sentence (from the
    Status it returned, which names the object's field at fault), at most 1000 characters."""

    def __init__(self, obj: Mapping[str, Any], status: int, data: bytes | str):
        text = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
        try:
            message = str(json.loads(text).get("message") or text)
        except (ValueError, AttributeError):
            message = text
        self.kind, self.name = obj["kind"], obj["metadata"]["name"]
        self.status, self.message = status, message[:1000]
        super().__init__(f"apply {self.kind} {self.name}: HTTP {status}: {self.message}")


def read_secret_data(api: client.ApiClient, namespace: str, name: str) -> dict[str, str] | None:
    """The Secret's decoded data, or None if it does not exist. Bytes that are not UTF-8 arrive
    as lone surrogates (never an exception that could quote them): callers that need text check."""
    found = read_secret(api, namespace, name)
    return found[0] if found is not None else None


def read_secret(api: client.ApiClient, namespace: str, name: str) -> SecretRead | None:
    """The Secret's decoded data, its owners and version; None if absent."""
    s = read_json(api, "v1", "Secret", namespace, name)
    return None if s is None else secret_read(s)


def secret_read(s: Mapping[str, Any]) -> SecretRead:
    """Pure: a Secret's body as read_secret gives it."""
    data = {k: base64.b64decode(v).decode(errors="surrogateescape") for k, v in (s.get("data") or {}).items()}
    meta = s.get("metadata") or {}
    owners = tuple(r["uid"] for r in meta.get("ownerReferences") or [])
    return SecretRead(data, owners, meta.get("resourceVersion") or "", dict(meta.get("annotations") or {}))


def write_secret(api: client.ApiClient, secret: Mapping[str, Any]) -> SecretRead | None:
    """Create the Secret, or patch the one of that name: its data keys and annotations are
    those of `secret` (keys it does not name stay). The Secret as created; None when patched."""
    meta = secret["metadata"]
    created = create_secret(api, secret)
    if created is not None:
        return created
    patch = {"metadata": {"annotations": dict(meta.get("annotations") or {})}, "data": dict(secret["data"])}
    client.CoreV1Api(api).patch_namespaced_secret(meta["name"], meta["namespace"], patch)
    return None


def set_owner(api: client.ApiClient, namespace: str, name: str, owned_copy: Mapping[str, Any] | None) -> None:
    """Make the Secret's owner references those of `owned_copy` (a manifest made by
    manifests.owned), or remove them all (None): it then outlives the cluster."""
    refs = (owned_copy or {}).get("metadata", {}).get("ownerReferences")
    client.CoreV1Api(api).patch_namespaced_secret(
        name,
        namespace,
        {"metadata": {"ownerReferences": refs}},
        _content_type="application/merge-patch+json",  # replaces the list (strategic merge adds)
    )


def create_secret(api: client.ApiClient, secret: Mapping[str, Any]) -> SecretRead | None:
    """Create; the Secret as created, None if it already exists (never overwritten)."""
    prefix, plural = _PATHS[("v1", "Secret")]
    namespace = secret["metadata"]["namespace"]
    path = f"{prefix}/namespaces/{namespace}/{plural}"
    response = _request(api, "POST", path, {"Content-Type": "application/json"}, body=dict(secret))
    if response.status == 409:
        return None
    if response.status >= 300:
        raise ApiException(http_resp=response)
    return secret_read(json.loads(response.data))


def add_secret_keys(api: client.ApiClient, namespace: str, name: str, data: Mapping[str, str]) -> None:
    """Add keys (base64 values) to an existing Secret; other keys are untouched."""
    client.CoreV1Api(api).patch_namespaced_secret(name, namespace, {"data": dict(data)})


def served_resources(api: client.ApiClient, group: str, version: str) -> set[str] | None:
    """The resources (plurals) the API server serves in group/version, None if it serves no such
    group version (e.g. cert-manager's CRDs are not installed). Discovery: no RBAC needed."""
    try:
        listed = client.CustomObjectsApi(api).get_api_resources(group, version)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return {r.name for r in listed.resources or []}


def read_custom_object(
    api: client.ApiClient, group: str, version: str, plural: str, name: str, namespace: str | None = None
) -> dict | None:
    """A custom object (cluster-scoped when `namespace` is None), or None if it does not exist."""
    objs = client.CustomObjectsApi(api)
    try:
        if namespace is None:
            return objs.get_cluster_custom_object(group, version, plural, name)
        return objs.get_namespaced_custom_object(group, version, namespace, plural, name)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def read_cluster(api: client.ApiClient, namespace: str, name: str) -> dict | None:
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, CLUSTER_PLURAL, name
        )
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def patch_status(
    api: client.ApiClient, namespace: str, name: str, status: Mapping[str, Any], version: str | None = None
) -> dict | None:
    """JSON merge patch of .status (lists such as conditions are replaced whole). The cluster as
    the API server stored it (None if it is gone). With `version`, only if the object is still at
    that resourceVersion (ApiException 409 otherwise)."""
    try:
        return client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, CLUSTER_PLURAL, name, _at(version, {"status": dict(status)})
        )
    except ApiException as e:
        if e.status != 404:  # deleted meanwhile: nothing to report on
            raise
        return None


def remove_cluster_annotation(
    api: client.ApiClient, namespace: str, name: str, key: str, version: str | None = None
) -> dict | None:
    """Remove one annotation of a MySQLCluster (a request that has been carried out); the cluster
    as stored. `version` as in patch_status."""
    try:
        return client.CustomObjectsApi(api).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            CLUSTER_PLURAL,
            name,
            _at(version, {"metadata": {"annotations": {key: None}}}),
        )
    except ApiException as e:
        if e.status != 404:
            raise
        return None


def _at(version: str | None, patch: dict[str, Any]) -> dict[str, Any]:
    """A merge patch the API server applies only to the object at resourceVersion `version` (a
    precondition it checks, as for an update; the status subresource too)."""
    if version is None:
        return patch
    return {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": version}}


def list_pods(api: client.ApiClient, namespace: str, selector: Mapping[str, str]) -> list[dict]:
    sel = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=sel)
    return [api.sanitize_for_serialization(p) for p in pods.items]


def set_pod_meta(
    api: client.ApiClient, namespace: str, pod: str, field: str, key: str, value: str | None
) -> dict:
    """Set (or with None remove) one entry of a Pod's metadata `field` ("labels" or
    "annotations"); the Pod as stored."""
    return api.sanitize_for_serialization(
        client.CoreV1Api(api).patch_namespaced_pod(pod, namespace, {"metadata": {field: {key: value}}})
    )


def read_statefulset(api: client.ApiClient, namespace: str, name: str) -> dict | None:
    """The StatefulSet as stored (camelCase keys, as in a manifest); None if absent."""
    return read_json(api, "apps/v1", "StatefulSet", namespace, name)


def statefulset_sizing(sts: Mapping[str, Any] | None) -> tuple[int | None, str | None]:
    """Its replicas and the storage its claim template asks for ((None, None) if absent)."""
    if sts is None:
        return None, None
    spec = sts.get("spec") or {}
    templates = spec.get("volumeClaimTemplates") or []
    requests = (
        ((templates[0].get("spec") or {}).get("resources") or {}).get("requests") or {} if templates else {}
    )
    return spec.get("replicas"), requests.get("storage")


def grow_claim(api: client.ApiClient, namespace: str, name: str, size: str) -> tuple[bool, str | None]:
    """Effect: the PersistentVolumeClaim asks for at least `size`. (whether it does now, the API
    server's refusal in its words or None): (False, None) when it does not exist (yet)."""
    from kubernetes.utils.quantity import parse_quantity

    core = client.CoreV1Api(api)
    try:
        pvc = read_json(api, "v1", "PersistentVolumeClaim", namespace, name)
        if pvc is None:
            return False, None
        current = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
        if current is not None and parse_quantity(current) >= parse_quantity(size):
            return True, None
        core.patch_namespaced_persistent_volume_claim(
            name, namespace, {"spec": {"resources": {"requests": {"storage": size}}}}
        )
        return True, None
    except ApiException as e:
        if e.status == 404:
            return False, None
        try:
            return False, str(json.loads(e.body).get("message") or e.reason)[:1000]
        except (ValueError, TypeError, AttributeError):
            return False, str(e.reason)


def post_events(
    api: client.ApiClient, involved: Mapping[str, Any], events: Iterable[tuple[str, str, str]]
) -> None:
    """core/v1 Events on the cluster object: (type Normal|Warning, reason, message)."""
    meta = involved["metadata"]
    core = client.CoreV1Api(api)
    now = clock.now()
    for etype, reason, message in events:
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", f"{GROUP}/{VERSION}"),
                "kind": involved.get("kind", "MySQLCluster"),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
            "type": etype,
            "reason": reason,
            "message": message[:1024],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "reportingInstance": FIELD_MANAGER,
        }
        try:
            core.create_namespaced_event(meta["namespace"], body)
        except ApiException as e:  # an Event is worth a log line, never a failed reconcile
            log.warning(
                "could not post Event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], e.reason
            )


def owner_of(body: Mapping[str, Any]) -> dict[str, Any]:
    """What an owned object's owner reference is made from: apiVersion, kind, metadata."""
    return {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"), "metadata": body["metadata"]}
