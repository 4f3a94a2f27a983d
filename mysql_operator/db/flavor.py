"""Which server a connection reached: its flavor (MySQL, MariaDB) and version, read from
`SELECT VERSION(), @@version_comment` (`detect`). The statements that differ between them are
db/dialect.py (`Dialect`, what every flavor answers) and db/dialects.py (`dialect_for`: MySQL's,
MariaDB's).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Flavor(str, enum.Enum):
    MYSQL = "mysql"
    MARIADB = "mariadb"


class UnsupportedServer(ValueError):
    pass


@dataclass(frozen=True, order=True)
class ServerVersion:
    flavor: Flavor
    major: int
    minor: int
    patch: int

    def at_least(self, major: int, minor: int, patch: int = 0) -> bool:
        return (self.major, self.minor, self.patch) >= (major, minor, patch)

    def __str__(self) -> str:
        return f"{self.flavor.value} {self.major}.{self.minor}.{self.patch}"


_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def detect(version: str, version_comment: str = "") -> ServerVersion:
    """Flavor and version from `VERSION()` ('10.11.6-MariaDB-0+deb12u1-log', '8.4.3') and
    `@@version_comment` ('MySQL Community Server - GPL', 'mariadb.org binary distribution')."""
    m = _VERSION.match(version or "")
    if not m:
        raise UnsupportedServer(f"cannot read a version from VERSION()={version!r}")
    major, minor, patch = int(m[1]), int(m[2]), int(m[3])
    is_mariadb = "mariadb" in version.lower() or "mariadb" in (version_comment or "").lower()
    flavor = Flavor.MARIADB if is_mariadb else Flavor.MYSQL
    v = ServerVersion(flavor, major, minor, patch)
    if flavor is Flavor.MYSQL and not v.at_least(8, 0, 0):
        raise UnsupportedServer(f"{v} is not supported: MySQL 8.0 or newer is required")
    if flavor is Flavor.MARIADB and not v.at_least(10, 6, 0):
        raise UnsupportedServer(f"{v} is not supported: MariaDB 10.6 or newer is required")
    return v
