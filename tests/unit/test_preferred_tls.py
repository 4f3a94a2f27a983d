"""db/connection.preferred_tls: the context pymysql builds for a connection given no TLS settings
(TLS if the server offers it, unverified), built once instead of per connection."""

from __future__ import annotations

import ssl

import pymysql

from mysql_operator.db.connection import PreferredTLSOnce, ServerConnection, preferred_tls


def settings(ctx: ssl.SSLContext) -> tuple:
    return ctx.protocol, ctx.check_hostname, ctx.verify_mode, ctx.verify_flags, ctx.options


def test_it_is_the_context_pymysql_builds_for_no_settings_and_it_is_built_once():
    theirs = pymysql.connections.Connection(defer_connect=True).ctx
    assert settings(preferred_tls()) == settings(theirs)
    assert preferred_tls() is preferred_tls()


def test_a_connection_given_no_settings_shares_it_and_one_given_settings_keeps_its_own(tmp_path):
    class Plain(PreferredTLSOnce, pymysql.connections.Connection):
        pass

    assert Plain(defer_connect=True).ctx is preferred_tls()
    assert issubclass(ServerConnection, PreferredTLSOnce)
    own = ssl.create_default_context()
    assert Plain(defer_connect=True, ssl=own).ctx is own
    assert Plain(defer_connect=True, ssl={"check_hostname": False}).ctx is not preferred_tls()
