"""backup/storage.new_session: every client of a process shares the service models parsed once
(botocore keeps them in its loader's private cache, which this checks is still where they are)."""

from __future__ import annotations

from mysql_operator.backup import storage


def client():
    return storage.new_session().client(
        "s3", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
    )


def test_sessions_are_new_and_their_models_are_parsed_once():
    first, second = storage.new_session(), storage.new_session()
    assert first is not second and first._session is not second._session
    client()
    parsed = len(storage._MODELS)
    assert any("s3" in str(key) for key in storage._MODELS), "the S3 model is in the shared cache"
    client()
    assert len(storage._MODELS) == parsed, "the second client parsed nothing again"
