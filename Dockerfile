# The mysql-operator image: the package from this checkout in a virtualenv on Debian bookworm,
# plus the client tools backups need (mariadb-dump from mariadb-client, zstd, gzip).
#
#   buildah bud -t localhost/mysql-operator:0.2.0 .        (or docker build; hack/build-images.sh)
#
# Behind a TLS-intercepting proxy, mount the CA bundle for pip without copying it into a layer:
#   --volume /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg PIP_CERT=/run/host-ca.crt
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
ARG PIP_CERT=
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv \
 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml /src/
COPY mysql_operator /src/mysql_operator
RUN if [ -n "$PIP_CERT" ]; then export PIP_CERT; else unset PIP_CERT; fi \
 && python3 -m venv /opt/mysql-operator \
 && /opt/mysql-operator/bin/pip install --no-cache-dir --disable-pip-version-check /src \
 && /opt/mysql-operator/bin/pip uninstall --yes --disable-pip-version-check pip setuptools \
 # The kubernetes client ships an unused asyncio copy of itself (~70 MB): drop it unless the
 # operator's sources import it (kopf talks to the API through its own aiohttp client).
 && if ! grep -rqE 'kubernetes(\.| import )aio' /src/mysql_operator; then \
      rm -rf /opt/mysql-operator/lib/python3*/site-packages/kubernetes/aio; fi \
 && /opt/mysql-operator/bin/mysql-operator --version

FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 mariadb-client zstd ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 operator-app \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin operator-app
COPY --from=build /opt/mysql-operator /opt/mysql-operator
ENV PATH=/opt/mysql-operator/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
ENTRYPOINT ["mysql-operator"]
