"""Pure builders from the typed spec (mysql_operator.api) to Kubernetes objects.

objs = build_all(cluster, password_for)       # list of dicts in apply order
objs = [owned(o, cr_body) for o in objs]      # controller owner references
# then server-side apply each (create the generated Secret only if it does not exist)
"""

import secrets as _secrets

from .common import *  # noqa: F401,F403
from .common import owned  # noqa: F401
from .archiver import binlog_archiver, binlog_archiver_name  # noqa: F401
from .config import my_cnf, server_settings  # noqa: F401
from .objects import (  # noqa: F401
    PasswordFor,
    build_all,
    applied_credentials_secret,
    credentials_secret,
    errant_evidence,
    headless_service,
    pod_disruption_budget,
    primary_service,
    replica_service,
    reseed_request,
    reseed_requests,
)
from .servers import config_hash, config_map, statefulset  # noqa: F401

_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"


def random_password(length: int = 32) -> str:
    """A new random password (an effect: call it at the edge, pass it in through password_for)."""
    return "".join(_secrets.choice(_ALPHABET) for _ in range(length))
