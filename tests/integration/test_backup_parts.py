"""The multipart upload against a real S3 server (MinIO): a stream larger than the part limit
allows at the fixed part size fails with a message naming the size and leaves nothing behind;
with the part size chosen from the expected size (upload.part_size_for) the same stream uploads
and reads back byte for byte.

MinIO, like S3, refuses parts under 5 MiB (except the last) and that minimum cannot be lowered,
so the test scales the limit down instead of the parts: 12 parts rather than S3's 10,000, a 70 MiB
stream, 5 MiB parts as the fixed size (14 parts needed) - the same arithmetic as a 16 MiB part
against a volume of more than ~156 GiB."""

from __future__ import annotations

import hashlib
import io
import random

import pytest

from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import storage
from mysql_operator.backup import upload

MIB = upload.MIB
LIMIT = 12  # parts: S3's 10,000, scaled down
SIZE = 70 * MIB  # more than LIMIT parts of MIN_PART_SIZE (60 MiB)


@pytest.fixture(scope="module")
def data() -> bytes:
    return random.Random(53).randbytes(SIZE)  # incompressible and reproducible


@pytest.fixture
def target(s3server, request):
    bucket = s3server.create_bucket("parts-" + request.node.name.lower().replace("_", "-")[5:40].strip("-"))
    s3 = S3(
        bucket=bucket,
        credentials_secret=SecretKeys("unused"),
        endpoint=s3server.endpoint,
        force_path_style=True,
    )
    return s3, storage.make_client(s3, storage.Credentials(s3server.access_key, s3server.secret_key))


def test_a_stream_past_the_part_limit_fails_naming_the_size_and_leaves_nothing(target, data):
    s3, client = target
    with pytest.raises(storage.StorageError) as failed:
        upload.upload_stream(
            client, s3, "b/data", io.BytesIO(data).readinto, part_size=upload.MIN_PART_SIZE, max_parts=LIMIT
        )
    assert str(failed.value) == (
        f"s3://{s3.bucket}/b/data at {s3.endpoint}: the stream is larger than 12 parts of 5 MiB (60 MiB), "
        "the most parts one S3 upload may have; nothing was kept. The part size is chosen from the "
        "expected size (a backup's: spec.storage.size): the data is larger than that, raise "
        "spec.storage.size"
    )
    assert storage.list_keys(client, s3, "b/") == []
    assert client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == [], "aborted"


def test_the_part_size_chosen_from_the_expected_size_uploads_it_whole(target, data):
    s3, client = target
    part = upload.part_size_for(SIZE, max_parts=LIMIT, smallest=upload.MIN_PART_SIZE)
    assert part == 7 * MIB
    up = upload.upload_stream(
        client, s3, "b/data", io.BytesIO(data).readinto, part_size=part, max_parts=LIMIT
    )
    assert (up.size, up.parts, up.sha256) == (SIZE, 10, hashlib.sha256(data).hexdigest())
    assert b"".join(storage.iter_object(client, s3, "b/data")) == data
