"""Accounts and SQL objects on one server: the operator's own accounts converged to their grants,
passwords, databases, users' state, statements of the SQL-object resources, scheduled events."""

from __future__ import annotations

import re
from typing import Iterable

from mysql_operator.db import accounts

from mysql_operator.db import grant_plans
from mysql_operator.db.accounts import Grant
from mysql_operator.db.observation import (
    ACCESS_DENIED,
    ER_NONEXISTING_GRANT,
    KEPT_IF_GRANTED,
    Event,
    InstanceError,
    Login,
)
from mysql_operator.db.session import Session, its_failure
from mysql_operator.db.statements import DatabaseState, Statement, UserState, identified, quote

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$")


_DATABASE = re.compile(r"^[A-Za-z0-9_]{1,64}$")


_HOST = re.compile(r"^[A-Za-z0-9_.:%-]{1,255}$")


class ServerAccounts(Session):
    """The account and SQL-object operations of db/instance.Instance."""

    def set_password(self, user: str, host: str, password: str) -> None:
        """ALTER USER ... IDENTIFIED BY (binlogged: it replicates; on MariaDB by its hash, see
        db/statements.identified)."""
        if not _NAME.match(user) or not _HOST.match(host):
            raise InstanceError(f"account {user!r}@{host!r} is invalid")
        clause, secret = identified(self.dialect.flavor, None, password)
        self._run(f"ALTER USER %s@%s {clause}", (user, host, *secret), secrets=[password, *secret])

    def ensure_user(
        self, user: str, host: str, password: str, grants: Iterable[Grant], local: bool = False
    ) -> list[str]:
        """Create or converge an account to exactly `grants` (db/accounts.py): its password, and
        its global, database and table privileges - what it holds beyond them is revoked.
        `local=True` keeps the statements out of the binary log (only for per-server accounts).
        Returns what changed besides the password ("created", "revoked ...", "granted ...")."""
        if not _NAME.match(user):
            raise InstanceError(f"user name {user!r} is invalid: use letters, digits, _ . -")
        if not _HOST.match(host):
            raise InstanceError(f"user host {host!r} is invalid: use a host name, IP or '%'")
        grants = tuple(grants)
        if local:
            self._run("SET SESSION sql_log_bin = 0")
        changes = []
        try:
            current = self.grants_of(user, host)
            clause, secret = identified(self.dialect.flavor, None, password)
            hidden = [password, *secret]
            if current is None:
                # only then: MySQL refuses even CREATE USER IF NOT EXISTS of an account that exists
                # and is the definer of a stored object (error 4006)
                self._run(f"CREATE USER IF NOT EXISTS %s@%s {clause}", (user, host, *secret), secrets=hidden)
                changes.append("created")
            self._run(f"ALTER USER %s@%s {clause}", (user, host, *secret), secrets=hidden)
            todo = grant_plans.plan(current or {}, grants)
            try:
                for g in todo.revoke:
                    self._run(g.revoke_sql(), (user, host))
                    changes.append(f"revoked {g.clause()}")
            except InstanceError as e:
                if e.errno not in ACCESS_DENIED:
                    raise
                # it holds what this account does not (granted by root): REVOKE of one privilege
                # needs it WITH GRANT OPTION, this one needs CREATE USER only; the list follows
                self._run("REVOKE ALL PRIVILEGES, GRANT OPTION FROM %s@%s", (user, host))
                changes.append("revoked ALL PRIVILEGES, GRANT OPTION")
                todo = grant_plans.plan({}, grants)
            for g in todo.grant:
                self._run(g.grant_sql(), (user, host))
                changes.append(f"granted {g.clause()}")
        finally:
            if local:
                self._run("SET SESSION sql_log_bin = 1")
        return changes

    @its_failure
    def grants_of(self, user: str, host: str) -> grant_plans.Grants | None:
        """The account's grants as `grant_plans.parse_show_grants` reads them; None if it does not exist."""
        try:
            rows = self._run("SHOW GRANTS FOR %s@%s", (user, host))
        except InstanceError as e:
            if e.errno == ER_NONEXISTING_GRANT:
                return None
            raise
        return grant_plans.parse_show_grants((r[0] for r in rows), self.dialect.version)

    def shed_privileges(self, grants: Iterable[Grant], host: str = "%") -> list[str]:
        """Reduce this connection's account, `self.user`@`host` (an operator account from before
        privileges were listed: ALL PRIVILEGES WITH GRANT OPTION) to exactly `grants`, in one
        REVOKE of what it holds beyond them on *.*, after granting itself what `grants` adds
        elsewhere (the app database). Never revokes a listed privilege or GRANT OPTION, so it
        cannot lock itself out, nor SET USER a person granted an account without ALL
        (KEPT_IF_GRANTED); does nothing unless it holds every listed global privilege with GRANT
        OPTION (a narrower account was made by someone else: left alone). MariaDB only (checked on
        10.11 and 11.8); returns the privileges revoked. Connections already open keep what
        they had (servers check global privileges at login)."""
        grants = tuple(grants)
        if self.dialect.flavor.value != "mariadb":
            return []
        user = self.user
        listed, _ = grant_plans.expected(grants).get("*.*", (frozenset(), True))
        held, option = (self.grants_of(user, host) or {}).get("*.*", (frozenset(), False))
        kept = KEPT_IF_GRANTED  # a person's own grant, outside the list on purpose
        if "ALL PRIVILEGES" in held:
            kept = frozenset()  # an account from before the lists: it goes with the rest
            held = (
                frozenset(r[0].upper() for r in self._run("SHOW PRIVILEGES"))
                - {"USAGE", "GRANT OPTION", "PROXY"}
                | listed
            )
        if not option or not listed <= held:
            return []
        extra = sorted(held - listed - kept)
        if not extra:
            return []
        for g in grants:
            if g.target != "*.*":
                self._run(g.grant_sql(), (user, host))
        self._run(accounts.Grant(tuple(extra)).revoke_sql(), (user, host))
        return extra

    @its_failure
    def database_state(self, name: str) -> DatabaseState | None:
        rows = self._run(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA "
            "WHERE SCHEMA_NAME = %s",
            (name,),
        )
        return DatabaseState(rows[0][0], rows[0][1]) if rows else None

    @its_failure
    def user_state(self, user: str, host: str) -> UserState | None:
        rows = self._run(
            "SELECT max_user_connections, ssl_type, plugin FROM mysql.user WHERE User = %s AND Host = %s",
            (user, host),
        )
        if not rows:
            return None
        limit, ssl_type, plugin = rows[0]
        return UserState(int(limit), str(ssl_type or ""), str(plugin or ""))

    def run_statements(
        self, statements: Iterable[Statement], secrets: Iterable[str | None] = ()
    ) -> list[str]:
        """Each statement in order (they replicate: run them on the primary); what each did."""
        done = []
        secrets = list(secrets)
        for st in statements:
            self._run(st.sql, st.args, secrets + list(st.hide))
            done.append(st.what)
        return done

    @its_failure
    def events(self) -> list[Event]:
        """Every scheduled event on this server (the operator's account holds EVENT on *.*)."""
        rows = self._run("SELECT EVENT_SCHEMA, EVENT_NAME, STATUS, DEFINER FROM information_schema.EVENTS")
        return [
            Event(str(schema), str(name), str(status), str(definer)) for schema, name, status, definer in rows
        ]

    def enable_event(self, event: Event, as_user: Login | None) -> None:
        """ALTER EVENT ... ENABLE, keeping its definer (binlogged: it replicates). A plain ALTER
        EVENT makes whoever runs it the event's definer, and the event then runs with that
        account's privileges. With `as_user`, the login of the event's definer, the statement
        runs as that account on a short-lived connection (the same server, TLS context and
        timeouts): the definer stays. Without, it runs on the operator's connection naming the
        definer (ALTER DEFINER = ...), which needs SET USER (MariaDB) / SET_ANY_DEFINER (MySQL):
        the operator's account is not granted it (it would let it define a stored program that
        runs as root), so unless a person granted it the server refuses with 1227."""
        target = f"{quote(event.schema)}.{quote(event.name)}"
        if as_user is None:
            user, _, host = event.definer.rpartition("@")
            # % in a user's identifiers is no placeholder
            self._run(f"ALTER DEFINER = %s@%s EVENT {target.replace('%', '%%')} ENABLE", (user, host))
            return
        definer = type(self)(
            self.host,
            self.port,
            as_user.user,
            as_user.password,
            name=self.name,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            connect_attempts=self.connect_attempts,
            deadline=self.deadline,
            max_answer=self.max_answer,
            tls=self.tls,
            tls_name=self.tls_name,
            plaintext=self.plaintext,
        )
        try:
            definer._run(f"ALTER EVENT {target} ENABLE")  # no args: nothing taken for a placeholder
        finally:
            definer.close()

    def ensure_database(self, name: str) -> None:
        if not _DATABASE.match(name):
            raise InstanceError(f"database name {name!r} is invalid: use letters, digits and _")
        self._run(f"CREATE DATABASE IF NOT EXISTS `{name}`")
