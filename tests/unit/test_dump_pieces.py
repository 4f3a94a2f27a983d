"""How a dump is cut into pieces that load at once (backup/dump_pieces.py): tables in runs, each
with its database, the rest in order; nothing lost or reordered within a destination; a header
inside a stored program's body is not one. Real dumps of both tools: tests/integration/
test_restore_pieces.py."""

from __future__ import annotations

import pytest

from mysql_operator.backup.dump_pieces import Cutter, PieceError

PREAMBLE = b"""-- MariaDB dump 10.19-11.8.3-MariaDB, for debian-linux-gnu (x86_64)
/*!40101 SET NAMES utf8mb4 */;
/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;

--
-- GTID to start replication from
--

-- SET GLOBAL gtid_slave_pos='0-1-42';

"""


def database(name: bytes) -> bytes:
    return (
        b"--\n-- Current Database: `" + name + b"`\n--\n\n"
        b"CREATE DATABASE /*!32312 IF NOT EXISTS*/ `"
        + name
        + b"` /*!40100 DEFAULT CHARACTER SET utf8mb4 */;\n\n"
        b"USE `" + name + b"`;\n\n"
    )


def table(name: bytes, rows: int = 2, trigger: bool = False) -> bytes:
    out = (
        b"--\n-- Table structure for table `" + name + b"`\n--\n\n"
        b"DROP TABLE IF EXISTS `" + name + b"`;\n"
        b"CREATE TABLE `" + name + b"` (\n  `id` int(11) NOT NULL\n) ENGINE=InnoDB;\n\n"
        b"--\n-- Dumping data for table `" + name + b"`\n--\n\n"
        b"LOCK TABLES `" + name + b"` WRITE;\n"
        b"INSERT INTO `" + name + b"` VALUES " + b",".join(b"(%d)" % i for i in range(rows)) + b";\n"
        b"UNLOCK TABLES;\n"
    )
    if trigger:
        out += (
            b"DELIMITER ;;\n/*!50003 CREATE*/ /*!50003 TRIGGER `t_"
            + name
            + b"` BEFORE INSERT ON `"
            + name
            + b"` "
            b"FOR EACH ROW BEGIN\n-- Table structure for table `fake`\nSET NEW.id = NEW.id; END */;;\nDELIMITER ;\n"
        )
    return out


ROUTINES = (
    b"--\n-- Dumping routines for database 'shop'\n--\n"
    b"DELIMITER ;;\nCREATE PROCEDURE `p`()\nBEGIN\n-- Table structure for table `not_a_table`\nSELECT 1;\nEND ;;\n"
    b"DELIMITER ;\n"
)
VIEW = b"--\n-- Final view structure for view `v`\n--\n\n/*!50001 CREATE VIEW `v` AS select 1 AS `x` */;\n"
TRAILER = b"/*!40101 SET SQL_MODE=@OLD_SQL_MODE */;\n\n-- Dump completed on 2026-12-05 20:00:00\n"


def unlocked(text: bytes) -> bytes:
    """`text` without its LOCK TABLES and UNLOCK TABLES lines, which pieces leave out."""
    return b"".join(
        line
        for line in text.splitlines(keepends=True)
        if not line.startswith((b"LOCK TABLES", b"UNLOCK TABLES"))
    )


def cut(
    dump: bytes, target: int, chunk: int = 7
) -> tuple[Cutter, bytes, list[tuple[int, int, bytes, bytes]]]:
    """(the cutter, the main text, [(piece number, tables, prefix, body)]), fed `chunk` bytes at
    a time (lines cut anywhere)."""
    c = Cutter(target=target)
    main, pieces, open_piece = b"", [], None
    afters: dict[int, int | None] = {}
    events = []
    for i in range(0, len(dump), chunk):
        events += c.feed(dump[i : i + chunk])
    events += c.finish()
    for kind, value in events:
        if kind == "main":
            main += value
        elif kind == "start":
            open_piece = [value, b""]
        elif kind == "piece":
            open_piece[1] += value
        elif kind == "end":
            p = open_piece[0]
            pieces.append((p.number, p.tables, p.prefix, open_piece[1]))
            afters[p.number] = p.after
            open_piece = None
    assert open_piece is None
    c.afters = afters  # type: ignore[attr-defined]
    return c, main, pieces


def test_tables_go_to_pieces_with_their_database_and_everything_else_stays_in_order():
    dump = (
        PREAMBLE
        + database(b"app")
        + table(b"a", trigger=True)
        + table(b"b")
        + database(b"shop")
        + table(b"c")
        + ROUTINES
        + VIEW
        + TRAILER
    )
    c, main, pieces = cut(dump, target=1)  # one table per piece
    assert c.preamble.startswith(PREAMBLE[:40]) and b"SQL_MODE='NO_AUTO_VALUE_ON_ZERO'" in c.preamble
    assert [(n, t) for n, t, _, _ in pieces] == [(1, 1), (2, 1), (3, 1)]
    app, shop = (
        b"CREATE DATABASE /*!32312 IF NOT EXISTS*/ `app` /*!40100 DEFAULT CHARACTER SET utf8mb4 */;\nUSE `app`;\n",
        b"CREATE DATABASE /*!32312 IF NOT EXISTS*/ `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 */;\nUSE `shop`;\n",
    )
    assert [prefix for _, _, prefix, _ in pieces] == [app, app, shop]
    # a table's section whole: its structure, its rows, its trigger (whose body names a "header")
    assert pieces[0][3] == unlocked(table(b"a", trigger=True))
    assert pieces[1][3] == unlocked(table(b"b"))
    # the rest, in order, and together with the pieces every byte of the dump
    assert (
        main == PREAMBLE + database(b"app") + database(b"shop") + table(b"c")[:0] + ROUTINES + VIEW + TRAILER
    )
    assert len(main) + sum(len(body) for *_, body in pieces) == len(unlocked(dump))


def test_a_piece_holds_consecutive_tables_until_it_reaches_its_size():
    dump = PREAMBLE + database(b"app") + b"".join(table(b"t%d" % i, rows=50) for i in range(6)) + TRAILER
    size = len(unlocked(table(b"t0", rows=50)))
    _, main, pieces = cut(dump, target=2 * size, chunk=1000)
    assert [t for _, t, _, _ in pieces] == [2, 2, 2]
    assert pieces[0][3] == unlocked(table(b"t0", rows=50) + table(b"t1", rows=50))
    # the last piece also carries the trailer (no section follows the last table): harmless, its
    # session ends there
    assert pieces[-1][3].endswith(TRAILER) and not main.endswith(TRAILER)


def test_the_last_tables_of_a_database_end_their_piece_before_the_next_database():
    dump = PREAMBLE + database(b"a") + table(b"x") + database(b"b") + table(b"y") + TRAILER
    _, _, pieces = cut(dump, target=10**9)
    assert [(t, prefix.split(b"`")[1]) for _, t, prefix, _ in pieces] == [(1, b"a"), (1, b"b")]


def test_a_table_before_any_database_is_refused():
    with pytest.raises(PieceError, match="before any database"):
        cut(PREAMBLE + table(b"x"), target=1)


def test_a_line_longer_than_any_dumps_is_refused(monkeypatch):
    from mysql_operator.backup import dump_pieces

    monkeypatch.setattr(dump_pieces, "MAX_LINE", 100)
    with pytest.raises(PieceError, match="longer than 100 bytes"):
        cut(PREAMBLE + b"x" * 200, target=1, chunk=50)


def big_table(name: bytes, statements: int, multiline: bool) -> bytes:
    """A table whose rows come in `statements` INSERTs (MariaDB 11: a row per line)."""
    out = (
        b"--\n-- Table structure for table `" + name + b"`\n--\n\n"
        b"CREATE TABLE `" + name + b"` (\n  `id` int(11) NOT NULL\n) ENGINE=InnoDB;\n\n"
        b"--\n-- Dumping data for table `" + name + b"`\n--\n\n"
        b"LOCK TABLES `" + name + b"` WRITE;\n/*!40000 ALTER TABLE `" + name + b"` DISABLE KEYS */;\n"
    )
    for s in range(statements):
        rows = [b"(%d)" % (1000 + s * 10 + i) for i in range(10)]
        if multiline:
            out += b"INSERT INTO `" + name + b"` VALUES\n" + b",\n".join(rows) + b";\n"
        else:
            out += b"INSERT INTO `" + name + b"` VALUES " + b",".join(rows) + b";\n"
    trigger = (
        b"DELIMITER ;;\n/*!50003 CREATE*/ /*!50003 TRIGGER `tr` BEFORE INSERT ON `" + name + b"` "
        b"FOR EACH ROW SET NEW.id = NEW.id */;;\nDELIMITER ;\n"
    )
    return out + b"/*!40000 ALTER TABLE `" + name + b"` ENABLE KEYS */;\nUNLOCK TABLES;\n" + trigger


@pytest.mark.parametrize("multiline", [False, True], ids=["mysqldump", "mariadb-dump 11"])
def test_a_table_too_large_for_a_piece_is_cut_between_statements_its_triggers_made_last(multiline):
    big = big_table(b"big", 12, multiline)
    dump = PREAMBLE + database(b"app") + table(b"a") + big + table(b"after") + TRAILER
    statement = len(big_table(b"big", 1, multiline)) - len(big_table(b"big", 0, multiline))
    c, main, pieces = cut(dump, target=4 * statement, chunk=13)
    first, *rows, last = pieces
    afters = c.afters
    # the first piece: table a, then big's structure and its first rows
    assert first[3].startswith(unlocked(table(b"a"))) and b"CREATE TABLE `big`" in first[3]
    assert rows and all(b"INSERT INTO `big`" in body and b"CREATE" not in body for *_, body in rows)
    head = first[0]
    bodies = b"".join(body for *_, body in pieces)
    # every statement whole, each in exactly one piece, in order
    for s in range(12):
        assert bodies.count(b"(%d)" % (1000 + s * 10)) == 1
    for number, _, prefix, body in rows:
        assert afters[number] == head
        assert body.startswith(b"INSERT INTO `big` VALUES") and body.rstrip().endswith(b";")
        assert prefix.endswith(b"USE `app`;\n")
    # the trigger goes with the rest (made once every row is there); the next table in a piece
    assert b"TRIGGER `tr`" in main and b"TRIGGER `tr`" not in bodies
    assert b"CREATE TABLE `after`" in last[3] or any(b"CREATE TABLE `after`" in b for *_, b in rows)
    assert len(unlocked(main)) + len(bodies) == len(unlocked(dump))
    assert b"LOCK TABLES" not in bodies
    assert head == 1
