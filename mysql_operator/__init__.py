"""Kubernetes operator for MySQL (8.4, 9.x) and MariaDB (10.11, 11.4, 11.8)."""

__version__ = "0.2.0"
