"""The test registry itself (tests/support/registry.py, CNCF distribution built from its Go module):
an image pushed from an OCI archive of hack/build-images.sh is served under its tag with the same
digest, only to the right credentials and only over TLS that verifies against the registry's CA;
pushing it again uploads nothing. (e2e/test_registry_pull.py pulls from it through containerd.)"""

from __future__ import annotations

import json
import ssl
import tarfile
import urllib.error
import urllib.request

import pytest

from tests.support import registry as reg
from tests.support.containerd import build_images


def test_a_pushed_image_is_served_only_to_its_credentials_over_verified_tls(registry):
    (image,) = build_images("busybox").values()
    ref = registry.push(image.archive, "tests/busybox", "1")
    assert ref == f"{registry.address}/tests/busybox:1"
    with tarfile.open(image.archive) as tar:
        (entry,) = json.load(tar.extractfile("index.json"))["manifests"]
    assert registry.manifest_digest("tests/busybox", "1") == entry["digest"]
    assert registry.manifest_digest("tests/busybox", "2") is None

    with pytest.raises(reg.RegistryError) as e:  # no credentials
        registry.manifest_digest("tests/busybox", "1", auth=False)
    assert "HTTP 401" in str(e.value)
    wrong = reg.Registry(registry.root, registry.host, registry.port, password="not-it")
    with pytest.raises(reg.RegistryError) as e:
        wrong.manifest_digest("tests/busybox", "1")
    assert "HTTP 401" in str(e.value)
    with pytest.raises(urllib.error.URLError) as tls:  # a client that does not trust its CA
        urllib.request.urlopen(
            f"https://{registry.address}/v2/", context=ssl.create_default_context(), timeout=5
        )
    assert isinstance(tls.value.reason, ssl.SSLCertVerificationError), tls.value

    uploads = []
    original = registry._push_blob

    def counting(repo, digest, size, data):
        status, _, _ = registry._request("HEAD", f"/v2/{repo}/blobs/{digest}")
        uploads.append(status != 200)
        return original(repo, digest, size, data)

    registry._push_blob = counting
    registry.push(image.archive, "tests/busybox", "1")
    assert uploads and not any(uploads), "every blob is there already: nothing uploaded again"
