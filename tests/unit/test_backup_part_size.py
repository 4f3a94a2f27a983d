"""The upload part size of a backup grows with the data it may hold (issue 53): S3 allows 10,000
parts of at most 5 GiB, so a fixed 16 MiB part capped a backup at ~156 GiB. upload.part_size_for
(pure) spreads the expected size over 9,000 parts; the backup Job takes it from spec.storage.size
and its memory limit grows with the part buffers."""

from __future__ import annotations

import pytest
from kubernetes.utils.quantity import parse_quantity

from mysql_operator.api import parse, parse_backup
from mysql_operator.backup import upload
from mysql_operator.backup.upload import MAX_PART_SIZE, MAX_PARTS, MIB, MIN_PART_SIZE, part_size_for
from mysql_operator.manifests.backup_jobs import backup_job

GIB, TIB = 1024 * MIB, 1024 * 1024 * MIB
# the largest spec.storage.size the CRD's pattern and maxLength (32) admit
LARGEST_SIZE = "9" * 30 + "Ei"
S3 = {"bucket": "backups", "credentialsSecret": {"name": "s3-creds"}}


@pytest.mark.parametrize(
    "expected, part",
    [
        (0, 16 * MIB),
        (10 * GIB, 16 * MIB),  # the default volume: the 16 MiB parts as before
        (9_000 * 16 * MIB, 16 * MIB),  # ~140.6 GiB: the largest that 9,000 of them hold
        (9_000 * 16 * MIB + 1, 17 * MIB),
        (1 * TIB, 117 * MIB),  # 1 TiB / 9,000 = 116.5 MiB, rounded up to whole MiB
        (10 * TIB, 1166 * MIB),
        (9_000 * MAX_PART_SIZE, MAX_PART_SIZE),  # ~43.9 TiB: the largest within the budget
        (MAX_PARTS * MAX_PART_SIZE + 1, MAX_PART_SIZE),  # more than one S3 object holds: the maximum
        (int(parse_quantity(LARGEST_SIZE)), MAX_PART_SIZE),
    ],
)
def test_the_part_size_grows_with_the_expected_size_within_the_s3_limits(expected, part):
    assert part_size_for(expected) == part


def test_an_expected_size_s3_can_hold_takes_at_most_9000_parts():
    sizes = [
        n * MIB + extra
        for n in (1, 140_000, 143_999, 144_001, 10**6, 10**7, 46_080_000)
        for extra in (0, 1, MIB - 1)
    ]
    for expected in sizes:
        part = part_size_for(expected)
        assert part % MIB == 0 and MIN_PART_SIZE <= part <= MAX_PART_SIZE
        if expected <= 9_000 * MAX_PART_SIZE:
            assert -(-expected // part) <= 9_000, expected
    # the old fixed part size needed more parts than S3 allows for the largest of them
    assert -(-46_080_000 * MIB // upload.DEFAULT_PART_SIZE) > MAX_PARTS


def test_a_smaller_part_limit_and_floor_as_the_multipart_test_uses():
    assert part_size_for(70 * MIB, max_parts=12, smallest=MIN_PART_SIZE) == 7 * MIB  # 10 parts
    assert part_size_for(40 * MIB, max_parts=12, smallest=MIN_PART_SIZE) == MIN_PART_SIZE


def _backup_job(size: str):
    c = parse(
        {
            "apiVersion": "mysql.operator.dev/v1alpha1",
            "kind": "MySQLCluster",
            "metadata": {"name": "shop", "namespace": "prod", "uid": "u1"},
            "spec": {
                "flavor": "mariadb",
                "instances": 1,
                "storage": {"size": size},
                "backup": {"storage": {"s3": S3}},
            },
        }
    )
    b = parse_backup(
        {
            "apiVersion": "mysql.operator.dev/v1alpha1",
            "kind": "MySQLBackup",
            "metadata": {"name": "nightly", "namespace": "prod", "uid": "u2"},
            "spec": {"clusterRef": {"name": "shop"}},
        }
    )
    assert c.spec.backup is not None and c.spec.backup.s3 is not None
    job = backup_job(c, b, c.spec.backup.s3, "localhost/mysql-operator:0.1.0")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    return int(args[args.index("--part-size-mib") + 1]), container["resources"]["limits"]["memory"]


@pytest.mark.parametrize(
    "size, part_mib, memory",
    [
        ("10Gi", 16, "512Mi"),  # as before
        ("1Ti", 117, "815Mi"),  # 3 part buffers of 117 MiB instead of 16
        (LARGEST_SIZE, 5120, "15824Mi"),
    ],
)
def test_the_backup_job_takes_its_part_size_from_the_volume_size(size, part_mib, memory):
    assert _backup_job(size) == (part_mib, memory)
