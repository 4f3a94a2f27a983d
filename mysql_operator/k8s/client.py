"""Kubernetes API access: in-cluster when running in a Pod, else the kubeconfig (KUBECONFIG)."""

from __future__ import annotations

import os

from kubernetes import client, config


def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
        config.load_incluster_config()
        return client.ApiClient()
    return config.new_client_from_config(config_file=kubeconfig or os.environ.get("KUBECONFIG"))


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG")
