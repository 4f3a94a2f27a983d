"""Kubernetes API access, the one place a client is made: in-cluster when running in a Pod, else
the kubeconfig (KUBECONFIG, or kubectl's default file) and its context."""

from __future__ import annotations

import os
from typing import Any

from kubernetes import client, config


# (connect, read) seconds for every call that does not set its own `_request_timeout`: an API
# server that accepts and never answers fails the call instead of holding a cluster's lock forever
API_TIMEOUT = (5.0, 30.0)
# connections to the API server kept open for reuse: at least as many as the threads that call at
# once (the clusters' passes and kopf's handlers, 20 each by default). The client's default is
# 5 per core; past it every request of a busy moment opened a connection (a TLS handshake on both
# sides) and closed it again
POOL_CONNECTIONS = 64


def api_client(
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout: tuple[float, float] = API_TIMEOUT,
) -> client.ApiClient:
    cfg = type.__call__(client.Configuration)  # a new one, not a copy of the process default
    if kubeconfig is None and context is None and in_cluster():
        config.load_incluster_config(client_configuration=cfg)
    else:
        config.load_kube_config(
            config_file=kubeconfig or os.environ.get("KUBECONFIG"), context=context, client_configuration=cfg
        )
    cfg.connection_pool_maxsize = POOL_CONNECTIONS
    return bounded(client.ApiClient(cfg), timeout)


def bounded(api: client.ApiClient, timeout: tuple[float, float]) -> client.ApiClient:
    """`api` with `timeout` as the default of every request (the client's default is none)."""
    request = api.rest_client.request

    def with_timeout(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return request(*args, _request_timeout=_request_timeout or timeout, **kwargs)

    api.rest_client.request = with_timeout
    return api


def default_namespace(context: str | None = None, kubeconfig: str | None = None) -> str:
    """The namespace of the kubeconfig's (current or named) context; 'default' without one."""
    if kubeconfig is None and in_cluster():
        return "default"
    try:
        contexts, current = config.list_kube_config_contexts(
            config_file=kubeconfig or os.environ.get("KUBECONFIG")
        )
    except config.ConfigException:
        return "default"
    chosen = next((c for c in contexts if c["name"] == context), current) if context else current
    return (chosen or {}).get("context", {}).get("namespace") or "default"


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG")
