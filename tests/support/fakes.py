"""Recording fakes for unit tests: a KubeOps that records every call instead of making it."""

from __future__ import annotations

from typing import Any, Iterable, Mapping


class RecordingKube:
    """KubeOps that records every call; `gone` Pods answer as deleted."""

    def __init__(self, gone: Iterable[str] = ()):
        self.calls: list[tuple[Any, ...]] = []
        self.gone = set(gone)

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
