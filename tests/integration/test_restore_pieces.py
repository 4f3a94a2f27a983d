"""Issue 49, restore speed: a dump loaded in pieces by several sessions at once
(backup/restore_pieces.py) gives the same server as one session: every table's rows (a row whose
AUTO_INCREMENT column is 0 included: the preamble's SQL mode holds in every session), foreign keys
across pieces, a trigger that does not fire during the load, a view across tables, a procedure
and an event - on a real server of each flavor, with its own dump tool and client (MySQL's in the
client-tools sidecar over verified TLS, as in the restore Job)."""

from __future__ import annotations

import subprocess

import pytest

from mysql_operator.backup import restore_pieces
from mysql_operator.backup.dump_pieces import Cutter
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.restore import restore_into
from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.backup.backup_types import BackupRequest, Candidate
from mysql_operator.backup.run import run_backup
from tests.support.backups import checksums, creds, s3cfg
from tests.support.flavor_servers import HOST, run, servers, servers_and_tools, writable
from tests.support.mariadb import ADMIN_USER


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def env(request, tmp_path_factory):
    yield from servers_and_tools(request.param, tmp_path_factory)


def objects(server) -> dict[str, list]:
    """What a restore must bring besides rows: views, routines, triggers, events."""
    return {
        "views": run(server, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.VIEWS ORDER BY 1, 2"),
        "routines": run(
            server, "SELECT ROUTINE_SCHEMA, ROUTINE_NAME FROM information_schema.ROUTINES ORDER BY 1, 2"
        ),
        "triggers": run(
            server, "SELECT TRIGGER_SCHEMA, TRIGGER_NAME FROM information_schema.TRIGGERS ORDER BY 1, 2"
        ),
        "events": run(server, "SELECT EVENT_SCHEMA, EVENT_NAME FROM information_schema.EVENTS ORDER BY 1, 2"),
    }


@pytest.fixture(scope="module")
def backup(env, s3server):
    flavor, f, shared, _ = env
    (source,) = servers(env, 1, "pc")
    customers = ", ".join(f"({i}, 'ü-{i}')" for i in range(1, 20001))
    orders = [
        ", ".join(f"({i}, {1 + i % 20000}, {i * 1.5})" for i in range(start, start + 10000))
        for start in range(1, 80001, 10000)
    ]  # several INSERTs
    run(
        source,
        *writable(flavor),
        "CREATE DATABASE app CHARACTER SET utf8mb4",
        "CREATE DATABASE shop CHARACTER SET utf8mb4",
        "CREATE TABLE app.zero (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(20))",
        "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_AUTO_VALUE_ON_ZERO')",
        "INSERT INTO app.zero VALUES (0, 'zero'), (1, 'one')",
        "CREATE TABLE shop.customers (id INT PRIMARY KEY, name VARCHAR(40))",
        f"INSERT INTO shop.customers VALUES {customers}",
        # orders refer to customers: in another piece, loaded at the same time
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, customer INT NOT NULL, total DECIMAL(10,2), "
        "FOREIGN KEY (customer) REFERENCES shop.customers (id))",
        *[f"INSERT INTO shop.orders VALUES {rows}" for rows in orders],
        "CREATE TABLE shop.audit (n INT)",
        # a trigger that would write during the load if it existed then
        "CREATE TRIGGER shop.counted AFTER INSERT ON shop.orders FOR EACH ROW INSERT INTO shop.audit VALUES (1)",
        "CREATE VIEW shop.big AS SELECT o.id, c.name FROM shop.orders o JOIN shop.customers c ON c.id = o.customer "
        "WHERE o.total > 100",
        "CREATE PROCEDURE shop.count_orders() SELECT COUNT(*) FROM shop.orders",
        "CREATE EVENT shop.nightly ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM shop.audit",
        *[f"CREATE TABLE app.small{i} (id INT PRIMARY KEY) " for i in range(6)],
        *[f"INSERT INTO app.small{i} VALUES ({i})" for i in range(6)],
    )
    s3 = s3cfg(s3server, s3server.create_bucket(f"pieces-{flavor}"))
    host = HOST if shared else "127.0.0.1"
    run_backup(
        BackupRequest(
            cluster="c1",
            namespace="ns",
            backup="b1",
            s3=s3,
            tls_ca=str(shared / "ca.crt") if shared else None,
            tools_dir=str(shared) if shared else None,
            candidates=(Candidate(source.name, Endpoint(host, source.port, ADMIN_USER)),),
        ),
        creds(s3server),
        f.admin_password,
    )
    return source, s3


def restore(env, s3server, s3, prefix: str, workers: int, spool) -> tuple[object, object]:
    flavor, f, shared, _ = env
    (target,) = servers(env, 1, prefix)
    # as a new cluster has it: the application account, the definer of every stored object
    run(target, *writable(flavor), "CREATE USER 'app'@'%' IDENTIFIED BY 'app-pw-1'")
    result = restore_into(
        Target(
            HOST if shared else "127.0.0.1",
            target.port,
            ADMIN_USER,
            f.admin_password,
            tls_ca=str(shared / "ca.crt") if shared else None,
            tools_dir=str(shared) if shared else None,
            definer="app",
            load_workers=workers,
            spool=str(spool),
        ),
        Source(s3, "c1/b1"),
        creds(s3server),
        check_tables=True,
    )
    return target, result


def test_a_dump_loaded_in_pieces_gives_the_same_server_as_one_session(
    env, backup, s3server, tmp_path, monkeypatch
):
    source, s3 = backup
    monkeypatch.setattr(restore_pieces, "PIECE_BYTES", 1)  # a piece per table: the most sessions
    one, serial = restore(env, s3server, s3, "p1", 1, tmp_path)
    many, pieces = restore(env, s3server, s3, "p4", 4, tmp_path)
    assert serial.table_check.passed and pieces.table_check.passed, (serial, pieces)
    assert checksums(many) == checksums(one) == checksums(source)
    assert objects(many) == objects(one) == objects(source)
    assert run(many, "SELECT id, note FROM app.zero ORDER BY id") == ((0, "zero"), (1, "one"))
    assert run(many, "SELECT COUNT(*) FROM shop.audit") == ((0,),)  # the trigger did not fire
    assert pieces.gtid_position == serial.gtid_position
    assert list(tmp_path.iterdir()) == []  # the pieces' files are gone


def test_this_dump_has_tables_cut_between_statements(env, backup, s3server):
    """What the test above loads, read the way the restore cuts it: shop.orders's rows come in
    several INSERT statements, so pieces of rows alone (loaded once the table exists) are in it."""
    _, s3 = backup
    client = s3server.client()
    key = next(
        o["Key"] for o in client.list_objects_v2(Bucket=s3.bucket)["Contents"] if "/backup." in o["Key"]
    )
    dump = subprocess.run(
        ["zstd", "-d", "-c"],
        input=client.get_object(Bucket=s3.bucket, Key=key)["Body"].read(),
        capture_output=True,
        check=True,
    ).stdout
    cutter = Cutter(target=1)
    events = cutter.feed(dump) + cutter.finish()
    started = [p for kind, p in events if kind == "start"]
    assert any(p.after is not None for p in started), [p.describe() for p in started]
    main = b"".join(v for kind, v in events if kind == "main")
    assert b"TRIGGER" in main and b"shop" in cutter.preamble + main
