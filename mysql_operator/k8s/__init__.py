"""Thin Kubernetes helpers: client, server-side apply, status patches, Events, pod role labels,
instance address resolution and the RBAC rules the operator needs. Effects only; no decisions."""
