"""Stored objects defined by root and by the application user restore on both flavors (issue
53): a procedure, a function, a trigger, an event and a view of each, backed up by the backup
account, restored by the restore account into a new server where the application account
exists. Decided (docs/design.md): every stored object gets the application account as its
definer - the dump's DEFINER clauses are rewritten on the way to the client - and everything
else of its definition, the data and the events' statuses are as in the source. Before, MySQL 9.7
refused root's routines (ERROR 1227 ... SYSTEM_USER) after loading the tables; on MariaDB root's
SQL SECURITY DEFINER routines ran as root for the application user. A dump whose definers the
rewrite cannot reach fails the restore, naming the objects.

MariaDB here (real servers, the host's mariadb-dump and client, MinIO); MySQL 9.7 through the
image's own tools in test_backup_mysql.py, with the helpers of tests/support/definers.py."""

from __future__ import annotations

from mysql_operator.backup.run import run_backup
from mysql_operator.db.flavor import Flavor
from tests.support.backups import creds, request_for, s3cfg, sql
from tests.support.definers import RESTORER, check_restored, definitions, load_source, prepare_target, restore
from tests.support.mariadb import ADMIN_USER


def test_mariadb_objects_of_root_and_of_the_app_user_restore_with_the_app_user_as_definer(factory, s3server):
    (source,) = factory.create(1, prefix="defsrc")
    sql(source, "SET GLOBAL read_only = OFF")
    root = "root@localhost"
    load_source(source, root)
    s3 = s3cfg(s3server, s3server.create_bucket("bk-definers"))
    run_backup(request_for(source, s3, name="defs", cluster="c1"), creds(s3server), factory.admin_password)
    (target,) = factory.create(1, prefix="deftgt")
    prepare_target(target, Flavor.MARIADB)

    result = restore(s3server, s3, "c1/defs", target.host, target.port)

    assert result["ok"], result["message"]
    assert target.query("SELECT @@read_only")[0][0] == 1
    check_restored(source, target, Flavor.MARIADB, root)
    assert ADMIN_USER not in str(definitions(target))


def test_a_definer_the_rewrite_cannot_reach_fails_the_restore_naming_the_object(factory, s3server):
    """A tenant's dump written otherwise than the dump tools write (the restore account may name
    any definer on MariaDB: SET USER, part of its ALL): the objects are checked after the load."""
    from tests.support.backups import hostile_backup

    bucket = s3server.create_bucket("bk-definers-hostile")
    folder = hostile_backup(
        s3server,
        bucket,
        "definer",
        "CREATE DATABASE loot;\nCREATE  DEFINER = 'root'@'localhost' PROCEDURE loot.p() SQL SECURITY DEFINER "
        "SELECT 1;\nCREATE DEFINER=`root`@`localhost` PROCEDURE loot.q() SELECT 1;\n",
    )
    (target,) = factory.create(1, prefix="defhost")
    prepare_target(target, Flavor.MARIADB)
    result = restore(s3server, s3cfg(s3server, bucket), folder, target.host, target.port)
    assert not result["ok"]
    assert "routine loot.p (root@localhost)" in result["message"], result["message"]
    assert "loot.q" not in result["message"]  # rewritten: defined by the application account
    assert target.query("SELECT @@read_only")[0][0] == 1
    assert target.query("SELECT COUNT(*) FROM mysql.user WHERE user = %s", (RESTORER,))[0][0] == 0
