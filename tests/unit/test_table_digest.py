"""A dump's tables read as it streams (backup/table_digest.py): row counts and order-independent
digests, whatever the pieces the stream comes in, and what two dumps' tables differ in."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mysql_operator.backup.table_digest import (
    MAX_LINE,
    DumpDigest,
    differences,
    tables_from_json,
    tables_json,
)

DUMP = b"""-- MySQL dump 10.13
/*!40101 SET NAMES utf8mb4 */;
CREATE DATABASE /*!32312 IF NOT EXISTS*/ `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 */;
USE `shop`;
CREATE TABLE `orders` (
  `id` int NOT NULL,
  `note` text,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB;
LOCK TABLES `orders` WRITE;
INSERT INTO `orders` VALUES (1,'a (b), c'),(2,'it\\'s; \\"x\\" \\\\'),(3,NULL);
INSERT INTO `orders` VALUES (4,'line\\nbreak'),(5,0x00FF);
UNLOCK TABLES;
CREATE TABLE `empty` (
  `id` int
);
CREATE TABLE `odd``name` (
  `v` varchar(10)
);
INSERT INTO `odd``name` VALUES ('),(');
USE `other`;
CREATE TABLE `orders` (
  `id` int
);
INSERT INTO `orders` VALUES (1);
"""


def digest(*pieces: bytes) -> DumpDigest:
    d = DumpDigest()
    for p in pieces:
        d.feed(p)
    d.finish()
    return d


def test_rows_are_counted_per_table_of_each_database_and_empty_tables_are_listed():
    d = digest(DUMP)
    assert {t: v.rows for t, v in d.tables.items()} == {
        "shop.orders": 5,
        "shop.empty": 0,
        "shop.odd`name": 1,
        "other.orders": 1,
    }
    assert d.errors == []


@given(st.lists(st.integers(min_value=1, max_value=len(DUMP) - 1), max_size=12))
def test_the_pieces_the_stream_comes_in_change_nothing(cuts):
    bounds = [0, *sorted(set(cuts)), len(DUMP)]
    pieces = [DUMP[a:b] for a, b in zip(bounds, bounds[1:])]
    assert digest(*pieces).tables == digest(DUMP).tables


def test_the_order_of_rows_does_not_matter_but_every_value_does():
    a = digest(b"USE `d`;\nINSERT INTO `t` VALUES (1,'x'),(2,'y');\n").tables
    b = digest(b"USE `d`;\nINSERT INTO `t` VALUES (2,'y');\nINSERT INTO `t` VALUES (1,'x');\n").tables
    c = digest(b"USE `d`;\nINSERT INTO `t` VALUES (1,'x'),(2,'z');\n").tables
    assert a == b
    assert a["d.t"].rows == c["d.t"].rows and a["d.t"].digest != c["d.t"].digest


def test_the_same_rows_in_another_table_digest_otherwise():
    d = digest(b"USE `d`;\nINSERT INTO `a` VALUES (1);\nINSERT INTO `b` VALUES (1);\n").tables
    assert d["d.a"].digest != d["d.b"].digest


def test_the_last_line_without_a_newline_is_read():
    assert digest(b"USE `d`;\nINSERT INTO `t` VALUES (1),(2);").tables["d.t"].rows == 2


def test_a_line_too_long_is_an_error_not_a_partial_count():
    d = DumpDigest()
    d.feed(b"USE `d`;\nINSERT INTO `t` VALUES ")
    d.feed(b"(1)," * (MAX_LINE // 4 + 1))
    d.feed(b"(1);\nINSERT INTO `u` VALUES (7);\n")
    d.finish()
    assert "d.t" not in d.tables and d.tables["d.u"].rows == 1
    assert len(d.errors) == 1 and str(MAX_LINE) in d.errors[0]


def test_differences_name_each_table_and_what_differs():
    backup = digest(DUMP).tables
    restored = digest(
        DUMP.replace(b",(3,NULL)", b"")
        .replace(b"(5,0x00FF)", b"(5,0x00FE)")
        .replace(b"USE `other`;", b"USE `more`;")
        .replace(b"INSERT INTO `odd``name` VALUES ('),(');\n", b"INSERT INTO `odd``name` VALUES ('x');\n")
    ).tables
    assert differences(backup, restored) == [
        "more.orders: not in the backup (1 rows restored)",
        "other.orders: missing (the backup has 1 rows)",
        "shop.odd`name: 1 rows as in the backup, but other values",
        "shop.orders: 4 rows restored, the backup has 5",
    ]
    assert differences(backup, digest(DUMP).tables) == []


def test_tables_go_through_json_and_anything_else_is_refused():
    tables = digest(DUMP).tables
    assert tables_from_json(json.loads(json.dumps(tables_json(tables)))) == tables
    for bad in ([], {"d.t": {"rows": -1, "digest": "0" * 16}}, {"d.t": {"rows": 1, "digest": "xyz"}}):
        with pytest.raises(ValueError):
            tables_from_json(bad)


def test_the_module_reads_a_dump_on_stdin_and_writes_its_tables():
    r = subprocess.run(
        [sys.executable, "-m", "mysql_operator.backup.table_digest"],
        input=DUMP,
        capture_output=True,
        check=True,
    )
    out = json.loads(r.stdout)
    assert out["errors"] == [] and tables_from_json(out["tables"]) == digest(DUMP).tables


def test_rows_one_a_line_as_mariadb_11_writes_them_count_the_same():
    one_line = digest(
        b"USE `d`;\nINSERT INTO `t` VALUES (1,'a;'),(2,'b'),(3,');');\nINSERT INTO `u` VALUES (9);\n"
    )
    row_lines = digest(
        b"USE `d`;\nINSERT INTO `t` VALUES\n(1,'a;'),\n(2,'b'),\n(3,');');\nINSERT INTO `u` VALUES\n(9);\n"
    )
    assert one_line.tables == row_lines.tables and row_lines.tables["d.t"].rows == 3
    assert row_lines.tables["d.u"].rows == 1
