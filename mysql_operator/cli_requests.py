"""The commands that ask the operator for something: `switchover` and `drill` (an annotation on
the cluster, followed with --wait) and `rotate-passwords` (new passwords in the credentials
Secret)."""

from __future__ import annotations

import sys

from mysql_operator.cli_common import (
    TIMED_OUT,
    CommandError,
    connect,
    emit,
    not_found,
)


def _caller(kubeconfig: str | None, context: str | None = None) -> str:
    """Who asks: the kubeconfig context's user, else the local login name ("" when neither)."""
    import getpass

    from kubernetes import config

    try:
        contexts, ctx = config.list_kube_config_contexts(config_file=kubeconfig)
        if context:
            ctx = next((c for c in contexts if c["name"] == context), ctx)
        user = (ctx.get("context") or {}).get("user")
        if user:
            return str(user)
    except config.ConfigException:
        pass
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def switchover_command(args) -> int:
    """Annotate the cluster with a switchover request (switchover.py); with --wait, follow
    status.switchover until the operator says it is done or refused."""
    import time

    from kubernetes import client

    from mysql_operator import switchover as sw
    from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION

    api = client.CustomObjectsApi(connect(args))
    where = f"{args.namespace}/{args.cluster}"
    value = sw.annotation_value(args.to, _caller(args.kubeconfig, args.context), args.reason or "")
    to, by, _ = sw.parse_value(value, args.cluster)
    patch = {"metadata": {"annotations": {sw.ANNOTATION: value}}}

    def record() -> dict | None:
        body = api.get_namespaced_custom_object(GROUP, VERSION, args.namespace, CLUSTER_PLURAL, args.cluster)
        return (body.get("status") or {}).get(sw.STATUS_KEY)

    before = record()
    if args.dry_run:
        emit(patch, args.output)
        return 0
    patched = api.patch_namespaced_custom_object(
        GROUP, VERSION, args.namespace, CLUSTER_PLURAL, args.cluster, patch
    )
    if args.output != "table":
        emit(patched, args.output)
    else:
        print(f"{where}: switchover to {to} requested ({sw.ANNOTATION}: {value})")
    if not args.wait:
        if args.output == "table":
            print(
                f"the operator records the outcome in status.switchover (kubectl mysql status {args.cluster})"
            )
        return 0
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        time.sleep(2)
        now = record()
        if sw.finished(now, before, to, by):
            assert now is not None
            print(
                f"{now['result']}: {now.get('message', '')}",
                file=sys.stderr if args.output != "table" else sys.stdout,
            )
            return 0 if now["result"] == sw.DONE else 1
    print(
        f"error: switchover: no outcome within {args.timeout:.0f} s; the request stays: "
        f"watch status.switchover (kubectl mysql status {args.cluster})",
        file=sys.stderr,
    )
    return TIMED_OUT


def drill_command(args) -> int:
    """Ask for a restore drill now (the drill-request annotation, a new value each time); with
    --wait, follow status.drill until the drill it asked for ended: 0 when it passed."""
    import time

    from kubernetes import client

    from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION
    from mysql_operator.backup import drill

    api = client.CustomObjectsApi(connect(args))
    where = f"{args.namespace}/{args.cluster}"
    token = (
        f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{_caller(args.kubeconfig, args.context) or 'cli'}"
    )
    patch = {"metadata": {"annotations": {drill.REQUEST_ANNOTATION: token}}}
    if args.dry_run:
        emit(patch, args.output)
        return 0
    try:
        api.patch_namespaced_custom_object(
            GROUP, VERSION, args.namespace, CLUSTER_PLURAL, args.cluster, patch
        )
    except client.ApiException as e:
        if e.status == 404:
            raise not_found(args.namespace, args.cluster) from None
        raise
    out = sys.stdout if args.output == "table" else sys.stderr
    print(f"{where}: restore drill requested ({drill.REQUEST_ANNOTATION}: {token})", file=out)
    if not args.wait:
        print(
            f"the operator records the outcome in status.drill (kubectl mysql status {args.cluster})",
            file=out,
        )
        return 0
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        time.sleep(5)
        body = api.get_namespaced_custom_object(GROUP, VERSION, args.namespace, CLUSTER_PLURAL, args.cluster)
        record = (body.get("status") or {}).get("drill") or {}
        if record.get("request") == token and record.get("phase") in (drill.SUCCEEDED, drill.FAILED):
            if args.output != "table":
                emit(record, args.output)
            print(f"{record['phase']}: {record.get('message', '')}", file=out)
            return 0 if record["phase"] == drill.SUCCEEDED else 1
    print(
        f"error: drill: no outcome within {args.timeout:.0f} s; it may still run: watch status.drill "
        f"(kubectl mysql status {args.cluster})",
        file=sys.stderr,
    )
    return TIMED_OUT


ROTATABLE_KEYS = (
    "root-password",
    "operator-password",
    "replication-password",
    "app-password",
    "backup-password",
    "sql-password",
    "monitor-password",
    "binlog-password",
)


def rotate_passwords_command(args) -> int:
    """New random passwords in the generated credentials Secret (the operator applies them)."""
    import base64

    from kubernetes import client

    from mysql_operator import manifests as m
    from mysql_operator.api import SpecError, parse
    from mysql_operator.k8s.objects import read_cluster

    api = connect(args)
    body = read_cluster(api, args.namespace, args.cluster)
    if body is None:
        raise not_found(args.namespace, args.cluster)
    try:
        c = parse(body)
    except SpecError as e:
        raise CommandError(
            f"rotate-passwords: the cluster's spec is invalid: {e}", "fix the field named"
        ) from e
    if c.spec.credentials is not None:
        raise CommandError(
            f"rotate-passwords: spec.credentials.secretName: Secret {c.spec.credentials.secret_name} is yours",
            "change its passwords there (the operator applies them)",
        )
    secret = m.generated_secret_name(c)
    present = client.CoreV1Api(api).read_namespaced_secret(secret, args.namespace).data or {}
    keys = [k for k in (args.key or ROTATABLE_KEYS) if k in present]
    if args.dry_run:  # the new values are made when sent: never printed
        meta = {"name": secret, "namespace": args.namespace}
        placeholder = "(a new random password, base64)"
        emit(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta,
                "data": dict.fromkeys(keys, placeholder),
            },
            args.output,
        )
        return 0
    data = {k: base64.b64encode(m.random_password().encode()).decode() for k in keys}
    client.CoreV1Api(api).patch_namespaced_secret(secret, args.namespace, {"data": data})
    if args.output != "table":  # which keys changed, never their values
        emit({"secret": f"{args.namespace}/{secret}", "rotated": keys}, args.output)
        return 0
    print(
        f"{args.namespace}/{secret}: new {', '.join(keys)}; the operator applies them "
        f"(watch status.appliedCredentialsVersion: kubectl mysql status {args.cluster} -o yaml)"
    )
    return 0
