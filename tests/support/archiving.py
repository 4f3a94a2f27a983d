"""A MySQLCluster backing up to S3, for the unit tests of binary log archiving and point-in-time restore."""

from __future__ import annotations

S3 = {
    "bucket": "backups",
    "prefix": "prod",
    "endpoint": "http://minio:9000",
    "credentialsSecret": {"name": "s3"},
}


def cluster(flavor="mariadb", **backup):
    return {
        "apiVersion": "mysql.operator.dev/v1alpha1",
        "kind": "MySQLCluster",
        "metadata": {"name": "shop", "namespace": "prod", "uid": "u1"},
        "spec": {"flavor": flavor, "instances": 3, "backup": {"storage": {"s3": S3}, **backup}},
    }
