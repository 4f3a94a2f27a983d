"""Kubernetes operator for MySQL 8.x and MariaDB."""

__version__ = "0.1.0"
