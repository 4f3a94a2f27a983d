"""The load account: what a tenant's dump and archived binary logs run as in a restore
(db/accounts.py `load_grants`). The restore Job makes it on one instance, as its own account,
before a load; grants it ALL on each database the load creates, when the load reaches that
database's CREATE (`grant`, called by the stream filters); and drops it after the load.

    with LoadAccount(connect) as account:
        ... a client logs in as account.user / account.password; account.grant(name) ...
    account.problems  # what was refused or changed: the restore fails with them

While it exists, log_bin_trust_function_creators is ON (without SUPER, a dump's functions and
triggers are refused while the binary log is on, even outside it on MariaDB); the previous value
is set again after. The binary log's global settings (which MariaDB's load account may change:
BINLOG ADMIN) are read before and after: a change is set back and is a problem (the restore
fails), never left in place silently.
"""

from __future__ import annotations

import secrets
from typing import Callable

from mysql_operator.backup.commands import quote_account, user_databases
from mysql_operator.db.accounts import BINLOG_GLOBALS, database_grant_sql, load_grants
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError
from mysql_operator.manifests.common import LOAD_USER

_SETTINGS = "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({})".format(
    ", ".join(f"'{name}'" for name in BINLOG_GLOBALS)
)


class LoadAccount:
    """Effect: see the module. `connect()` opens a session as the restore account."""

    user = LOAD_USER

    def __init__(self, connect: Callable[[], Instance]):
        self.connect = connect
        self.password = secrets.token_urlsafe(24)
        self.problems: list[str] = []
        self.granted: set[str] = set()
        self.inst: Instance | None = None
        self.trusted: object = 0
        self.settings: dict[str, str] = {}

    def __enter__(self) -> LoadAccount:
        inst = self.inst = self.connect()
        try:
            version = inst.dialect.version
            inst.execute("SET SESSION sql_log_bin = 0")  # each instance makes its own
            inst.execute("DROP USER IF EXISTS %s@'%%'", (LOAD_USER,))
            inst.execute(
                "CREATE USER %s@'%%' IDENTIFIED BY %s", (LOAD_USER, self.password), secrets=(self.password,)
            )
            for g in load_grants(version):
                inst.execute(g.grant_sql(), (LOAD_USER, "%"))
            for name in user_databases([r[0] for r in inst.execute("SHOW DATABASES")]):
                self.grant(name)  # restored already: a binary log replayed after a dump or a copy
            self.trusted = inst.scalar("SELECT @@GLOBAL.log_bin_trust_function_creators")
            inst.execute("SET GLOBAL log_bin_trust_function_creators = ON")
            self.settings = dict(inst.execute(_SETTINGS))
        except BaseException:
            inst.close()
            raise
        return self

    def grant(self, database: str) -> None:
        """ALL on `database` (a database the load creates, or one restored already); refused for
        a system database or a name a grant cannot hold (kept in `problems`: the statement that
        needs it then fails, and the restore with it)."""
        if database in self.granted:
            return
        try:
            sql = database_grant_sql(database, quote_account(LOAD_USER))
        except ValueError as e:
            self.problems.append(f"the load creates {e}")
            return
        assert self.inst is not None
        try:
            self.inst.execute(sql)
        except InstanceError as e:
            self.problems.append(f"granting the load account database {database}: {e}")
            return
        self.granted.add(database)

    def __exit__(self, *exc: object) -> None:
        inst = self.inst
        assert inst is not None
        try:
            inst.execute("DROP USER IF EXISTS %s@'%%'", (LOAD_USER,))
            inst.execute("SET GLOBAL log_bin_trust_function_creators = %s", (self.trusted,))
            after = dict(inst.execute(_SETTINGS))
            for name, value in sorted(self.settings.items()):
                if after.get(name) != value:
                    inst.execute(f"SET GLOBAL {name} = %s", (value,))  # back as it was
                    self.problems.append(
                        f"the load changed the global setting {name} from {value} to {after.get(name)}: "
                        "a dump or a binary log never does"
                    )
        except InstanceError as e:
            self.problems.append(f"dropping the load account: {e}")
        finally:
            inst.close()
