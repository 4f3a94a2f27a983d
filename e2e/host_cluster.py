"""The MySQLCluster the e2e tests of the operator run on the host create: its plural and name."""

from __future__ import annotations

PLURAL = "mysqlclusters"
NAME = "shop"
