"""Kubernetes API access, the one place a client is made: in-cluster when running in a Pod, else
the kubeconfig (KUBECONFIG, or kubectl's default file) and its context."""

from __future__ import annotations

import os

from kubernetes import client, config


def api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    if kubeconfig is None and context is None and in_cluster():
        config.load_incluster_config()
        return client.ApiClient()
    return config.new_client_from_config(
        config_file=kubeconfig or os.environ.get("KUBECONFIG"), context=context
    )


def default_namespace(context: str | None = None) -> str:
    """The namespace of the kubeconfig's (current or named) context; 'default' without one."""
    if in_cluster():
        return "default"
    try:
        contexts, current = config.list_kube_config_contexts(config_file=os.environ.get("KUBECONFIG"))
    except config.ConfigException:
        return "default"
    chosen = next((c for c in contexts if c["name"] == context), current) if context else current
    return (chosen or {}).get("context", {}).get("namespace") or "default"


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG")
