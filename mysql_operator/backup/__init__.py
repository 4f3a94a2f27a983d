"""Logical backups to S3-compatible storage and restores from them.

- `run.run_backup(request, s3_credentials, db_password)`: dump -> compress -> S3 multipart stream,
  then the manifest (written last: it marks the backup complete).
- `restore.restore_into(target, source, s3_credentials)`: verify the checksum, load, set the GTID.
- `schedule` and `retention`: pure decisions (what to create, what to delete).
"""
