"""The repository's example clusters made runnable on the local cluster: its images, versions and sizes."""

from __future__ import annotations

from e2e.helpers import IMAGES, PULL

LOCAL_VERSION = {"mysql": "9.7", "mariadb": "10.11"}


def runnable_here(doc: dict) -> dict:
    spec = doc["spec"]
    flavor = str(spec.get("flavor", "mysql")).lower()  # MySQL or mysql (its earlier spelling)
    spec.update(
        image=IMAGES[flavor],
        **PULL,
        version=LOCAL_VERSION[flavor],
        storage={"size": "1Gi", "storageClassName": "standard"},
    )
    spec.pop("backup", None)
    if "resources" in spec:
        spec["resources"] = {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}}
    my_cnf = spec.get("config", {}).get("myCnf", "")
    spec.setdefault("config", {})["myCnf"] = my_cnf.replace(
        "innodb_buffer_pool_size = 1G", "innodb_buffer_pool_size = 128M"
    )
    return doc
