"""What every user command of `mysql-operator` and `kubectl mysql` shares: the common flags,
the API client they choose, -o output, one-line errors and the exit codes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

OK, FAILED, USAGE, NO_ACCESS, NOT_FOUND, TIMED_OUT = 0, 1, 2, 3, 4, 5

EXIT_CODES = """exit codes:
  0  done
  1  the operation failed (refused, invalid, already exists)
  2  usage: a flag or argument is wrong
  3  no cluster access: no kubeconfig, API server unreachable, or forbidden (RBAC)
  4  not found: the cluster, backup or the CRD (is the operator installed?)
  5  switchover --wait: no outcome within --timeout (the request stays)"""

OUTPUTS = ("table", "json", "yaml")


class CommandError(Exception):
    """A command's failure the user can act on: `what`, `todo` and the exit code."""

    def __init__(self, what: str, todo: str, code: int = FAILED):
        super().__init__(f"{what}; {todo}")
        self.code = code


class Parser(argparse.ArgumentParser):
    """Usage errors in one line (`error: ...; see PROG --help`), exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(USAGE, f"error: {message}; see '{self.prog} --help'\n")


def _output(text: str) -> str:
    return "table" if text == "text" else text  # `-o text`: what mysql-operator status took before


def common_flags(listing: bool = False) -> argparse.ArgumentParser:
    """The flags every user command takes (with `listing`: also -A)."""
    p = Parser(add_help=False)
    p.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("-o", "--output", type=_output, choices=OUTPUTS, default="table", help="output format")
    if listing:
        p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    return p


def hide(sub, *names: str) -> None:
    """Keep subcommands `names` out of --help (they still run): argparse.SUPPRESS as a subparser's
    help prints "==SUPPRESS==" before Python 3.13."""
    sub._choices_actions = [a for a in sub._choices_actions if a.dest not in names]


def dry_run_flag() -> argparse.ArgumentParser:
    p = Parser(add_help=False)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the object or patch this would send (-o yaml|json), send nothing",
    )
    return p


def connect(args) -> Any:
    """The API client of --kubeconfig/--context; sets args.namespace to the context's when unset."""
    from mysql_operator.k8s.client import api_client, default_namespace

    api = api_client(args.kubeconfig, args.context)
    if not args.namespace:
        args.namespace = default_namespace(args.context, args.kubeconfig)
    return api


def emit(obj: Any, output: str) -> None:
    """`obj` as -o asks (yaml for table: what a dry run prints without -o); without
    metadata.managedFields, as kubectl prints objects."""
    obj = _shown(obj)
    if output == "json":
        print(json.dumps(obj, indent=2, sort_keys=True))
    else:
        import yaml

        print(yaml.safe_dump(obj, sort_keys=False).rstrip())


def _shown(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    if obj.get("kind") == "List":
        return {**obj, "items": [_shown(o) for o in obj.get("items") or []]}
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def call(args) -> int:
    """Runs args.func; a failure the user can act on is one line on stderr and its exit code."""
    from kubernetes.client.rest import ApiException
    from kubernetes.config import ConfigException
    from urllib3.exceptions import HTTPError

    try:
        return args.func(args) or OK
    except CommandError as e:
        code, text = e.code, str(e)
    except ApiException as e:
        code, text = api_error(e.status, e.reason, e.body)
    except ConfigException as e:
        code = NO_ACCESS
        where = getattr(args, "kubeconfig", None) or os.environ.get("KUBECONFIG") or "~/.kube/config"
        text = f"no cluster access: kubeconfig {where}: {_line(str(e))}; set --kubeconfig, KUBECONFIG or --context"
    except HTTPError as e:  # MaxRetryError: refused, timed out, no route, TLS
        code = NO_ACCESS
        reason = _line(str(getattr(e, "reason", None) or e))
        text = f"cannot reach the API server: {reason}; check --context/--kubeconfig and the network"
    print(f"error: {text}", file=sys.stderr)
    return code


def api_error(status: int | None, reason: str | None, body: Any) -> tuple[int, str]:
    """Pure: (exit code, "what; what to do") of an API server's refusal."""
    message = reason or f"HTTP {status}"
    try:
        message = json.loads(body).get("message") or message
    except (TypeError, ValueError, AttributeError):
        pass
    message = _line(message)
    if status in (401, 403):
        return NO_ACCESS, f"{message}; ask for RBAC on this resource or use another --context"
    if status == 404:
        return (
            NOT_FOUND,
            f"{message}; check the name and -n/--context (and that the operator's CRDs are installed)",
        )
    if status == 409:
        return FAILED, f"{message}; choose another name or delete the existing object"
    if status == 422:
        return FAILED, f"{message}; fix the field named"
    return FAILED, f"{message}; retry, or see the API server's log"


def _line(text: str) -> str:
    return " ".join(text.split())


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def not_found(namespace: str, name: str) -> CommandError:
    """The cluster a command names does not exist."""
    return CommandError(
        f"MySQLCluster {namespace}/{name} not found",
        "check the name and -n/--context (kubectl mysql status lists them)",
        NOT_FOUND,
    )
