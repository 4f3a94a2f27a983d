"""Stored objects of root and of the application user, for the restore tests of their definers."""

from __future__ import annotations

from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.db.accounts import restore_grants, restore_revokes
from mysql_operator.db.flavor import Flavor
from tests.support.backups import checksums, creds, sql

APP, APP_PASSWORD = "shopapp", "shopapp-Pw-4c1d"
RESTORER, RESTORER_PASSWORD = "restorer", "restorer-Pw-77ae"


def objects_by(definer: str, tag: str) -> list[str]:
    """A procedure, a function, a trigger, a DISABLEd event and a view of `definer`."""
    d = f"DEFINER={definer}"
    return [
        f"CREATE TABLE shop.log_{tag} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
        f"INSERT INTO shop.log_{tag} (v) VALUES (1), (2), (3)",
        f"CREATE {d} PROCEDURE shop.p_{tag}(IN n INT) SQL SECURITY DEFINER "
        f"INSERT INTO shop.log_{tag} (v) VALUES (n)",
        f"CREATE {d} FUNCTION shop.f_{tag}(n INT) RETURNS INT DETERMINISTIC READS SQL DATA "
        f"RETURN (SELECT COUNT(*) + n FROM shop.log_{tag})",
        f"CREATE {d} TRIGGER shop.t_{tag} BEFORE INSERT ON shop.log_{tag} FOR EACH ROW SET NEW.v = NEW.v * 10",
        f"CREATE {d} EVENT shop.e_{tag} ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM shop.log_{tag}",
        f"CREATE {d} SQL SECURITY DEFINER VIEW shop.v_{tag} AS SELECT v FROM shop.log_{tag} WHERE v > 1",
    ]


def load_source(server, root: str) -> None:
    """The application database with objects of `root` (an account holding every privilege) and
    of the application account, each created by its own definer's grant."""
    sql(
        server,
        "SET GLOBAL log_bin_trust_function_creators = 1",  # the app account creates a function
        "CREATE DATABASE shop",
        f"CREATE USER {APP}@'%' IDENTIFIED BY '{APP_PASSWORD}'",
        f"GRANT ALL ON shop.* TO {APP}@'%'",
        *objects_by(root, "root"),
    )
    conn = server.connect(user=APP, password=APP_PASSWORD)
    try:
        with conn.cursor() as cur:
            for s in objects_by("CURRENT_USER", "app"):
                cur.execute(s)
    finally:
        conn.close()


def prepare_target(server, flavor: Flavor) -> None:
    """As the init step leaves a new cluster's instance: the application account and its empty
    database, the restore account; fenced."""
    sql(
        server,
        "SET SESSION sql_log_bin = 0",
        "CREATE DATABASE shop",
        f"CREATE USER {APP}@'%' IDENTIFIED BY '{APP_PASSWORD}'",
        f"GRANT ALL ON shop.* TO {APP}@'%'",
        f"CREATE USER {RESTORER}@'%' IDENTIFIED BY '{RESTORER_PASSWORD}'",
        *(g.grant_sql().replace("%s@%s", f"{RESTORER}@'%'") for g in restore_grants(flavor)),
        *(g.revoke_sql().replace("%s@%s", f"{RESTORER}@'%'") for g in restore_revokes(flavor)),
        "SET GLOBAL super_read_only = ON" if flavor is Flavor.MYSQL else "SET GLOBAL read_only = ON",
    )


def restore(s3server, s3, folder: str, host: str, port: int, **target) -> dict:
    """restore_all into one server as the restore account, naming the application account."""
    return restore_all(
        {"t": Target(host, port, RESTORER, RESTORER_PASSWORD, definer=APP, **target)},
        Source(s3, folder),
        creds(s3server),
        "shop",
        drop_account=True,
    )


def definitions(server) -> dict[str, tuple]:
    """Each stored object of shop: its definition (without the definer), and its definer."""
    out: dict[str, tuple] = {}
    for kind, query in (
        (
            "routine",
            "SELECT ROUTINE_NAME, CONCAT_WS('|', ROUTINE_TYPE, ROUTINE_DEFINITION, SECURITY_TYPE, "
            "IS_DETERMINISTIC, SQL_DATA_ACCESS), DEFINER FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA='shop'",
        ),
        (
            "trigger",
            "SELECT TRIGGER_NAME, CONCAT_WS('|', EVENT_MANIPULATION, ACTION_TIMING, EVENT_OBJECT_TABLE, "
            "ACTION_STATEMENT), DEFINER FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA='shop'",
        ),
        (
            "event",
            "SELECT EVENT_NAME, CONCAT_WS('|', EVENT_DEFINITION, INTERVAL_VALUE, INTERVAL_FIELD, STATUS), "
            "DEFINER FROM information_schema.EVENTS WHERE EVENT_SCHEMA='shop'",
        ),
        (
            "view",
            "SELECT TABLE_NAME, CONCAT_WS('|', VIEW_DEFINITION, SECURITY_TYPE), DEFINER "
            "FROM information_schema.VIEWS WHERE TABLE_SCHEMA='shop'",
        ),
    ):
        for name, definition, definer in sql(server, query):
            out[f"{kind} {name}"] = (definition, definer)
    return out


def check_restored(source, target, flavor: Flavor, root: str) -> None:
    before, after = definitions(source), definitions(target)
    assert len(before) == 10 and set(after) == set(before)
    assert {d for _, d in before.values()} == {root.replace("`", "").replace("'", ""), f"{APP}@%"}
    assert {name: d for name, (d, _) in after.items()} == {name: d for name, (d, _) in before.items()}
    assert {d for _, d in after.values()} == {f"{APP}@%"}  # as decided
    assert checksums(target) == checksums(source)
    # the objects work for the application account, with its privileges
    if flavor is Flavor.MYSQL:
        sql(target, "SET GLOBAL super_read_only = OFF")
    sql(target, "SET GLOBAL read_only = OFF")  # as the operator makes a primary
    conn = target.connect(user=APP, password=APP_PASSWORD)
    try:
        with conn.cursor() as cur:
            for tag in ("root", "app"):
                cur.execute(f"CALL shop.p_{tag}(7)")
                cur.execute(f"SELECT shop.f_{tag}(0), (SELECT MAX(v) FROM shop.v_{tag})")
                assert cur.fetchall() == ((4, 70),)
        conn.commit()
    finally:
        conn.close()
    # nothing the restore account did is left: it is not a definer of anything
    assert RESTORER not in str(after)
