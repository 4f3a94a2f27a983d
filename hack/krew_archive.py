"""Builds the archive plugins/krew/mysql.yaml installs (the kubectl-mysql shim, a zip without
compression or timestamps: the same bytes on every machine) and prints its sha256, which the
manifest must carry. No release publishes it: install with

    python hack/krew_archive.py dist/kubectl-mysql.zip
    kubectl krew install --manifest=plugins/krew/mysql.yaml --archive=dist/kubectl-mysql.zip
"""

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
from pathlib import Path

SHIM = Path(__file__).resolve().parent.parent / "plugins" / "krew" / "kubectl-mysql"


def archive() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        entry = zipfile.ZipInfo("kubectl-mysql", date_time=(1980, 1, 1, 0, 0, 0))
        entry.create_system = 3  # Unix: the mode below is kept on extraction
        entry.external_attr = (0o100755 & 0xFFFF) << 16
        z.writestr(entry, SHIM.read_bytes())
    return out.getvalue()


if __name__ == "__main__":
    data = archive()
    if len(sys.argv) > 1:
        Path(sys.argv[1]).parent.mkdir(parents=True, exist_ok=True)
        Path(sys.argv[1]).write_bytes(data)
    print(hashlib.sha256(data).hexdigest())
