# Developer entry points. `make test` is the project's test command (CI runs it via .ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: test lint docs reference unit integration e2e binaries cluster-binaries node-binaries images deps control-plane \
        cluster-up cluster-down demo demo-images venv clean

test: deps venv ## everything: builds what is missing, lints, runs unit, integration and e2e tests (hack/test.sh)
	MAKE="$(MAKE)" PY=$(PY) hack/test.sh

SHELL_SCRIPTS := $(wildcard mysql_operator/manifests/sh/*.sh images/*/*.sh hack/*.sh) .ci/run
# run by busybox's sh in the exporter image (no bash there)
POSIX_SCRIPTS := mysql_operator/manifests/sh/exporter.sh
lint: venv ## ruff (lint and format), mypy --strict on the pure modules, shellcheck, actionlint, the docs site (mkdocs --strict)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck --shell=bash --severity=warning $(filter-out $(POSIX_SCRIPTS),$(SHELL_SCRIPTS))
	$(VENV)/bin/shellcheck --shell=bash $(filter-out $(POSIX_SCRIPTS),$(wildcard mysql_operator/manifests/sh/*.sh))
	$(VENV)/bin/shellcheck --shell=sh $(POSIX_SCRIPTS)
	hack/build-binaries.sh actionlint
	"$$(hack/build-binaries.sh --print-dir)/actionlint-$$(sed -n 's/^ACTIONLINT_VERSION=//p' hack/versions.env)/actionlint" \
	  -shellcheck $(VENV)/bin/shellcheck .github/workflows/*.yml
	$(MAKE) --no-print-directory docs

docs: venv ## build the user documentation site (mkdocs.yml) with --strict into a temporary directory
	site=$$(mktemp -d -t mysqlop-site-XXXXXX) && \
	  NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir "$$site"; \
	  rc=$$?; rm -rf "$$site"; exit $$rc

reference: venv ## regenerate docs/reference/ (the API reference) from crds/; tests/unit/test_api_reference.py checks it
	$(PY) hack/crd_reference.py

unit: venv ## pure logic only, no processes
	$(PY) -m pytest tests/unit

integration: venv binaries ## real kube-apiserver, real MariaDB servers
	$(PY) -m pytest tests/integration

e2e: deps venv binaries node-binaries images ## on the local one-node cluster (reuses one from `make cluster-up`)
	$(PY) -m pytest e2e

deps: ## Debian packages: MariaDB for the integration tests, containerd/buildah/CNI for the node
	hack/install-deps.sh node

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,docs]'
	touch $@

binaries: cluster-binaries bin-cert-manager bin-prometheus ## all of the below, and what only tests use: cert-manager, Prometheus (cached in ~/.cache)

cluster-binaries: bin-control-plane bin-s3 bin-exporter bin-registry ## etcd, Kubernetes, helm, MinIO, mysqld_exporter, the registry: what `make demo` needs

node-binaries: bin-node bin-network-policy ## kubelet, kube-proxy, CoreDNS, local-path-provisioner, kube-router (cached in ~/.cache)

# one hack/build-binaries.sh target each, so that `make -j` builds them side by side (each binary
# under its own lock: two runs never build the same one)
BIN_TARGETS := bin-control-plane bin-node bin-network-policy bin-s3 bin-exporter bin-registry bin-cert-manager bin-prometheus
.PHONY: $(BIN_TARGETS)
$(BIN_TARGETS): bin-%:
	hack/build-binaries.sh $*

images: ## base, pause, busybox, MariaDB and operator images (OCI archives cached in ~/.cache)
	hack/build-images.sh all

control-plane: venv binaries ## run a local control plane in the foreground; prints KUBECONFIG
	$(PY) -m tests.support.controlplane

cluster-up: deps venv ## build what is missing (side by side), start the local one-node cluster in the background
	$(MAKE) --no-print-directory -j4 images cluster-binaries node-binaries
	$(PY) -m tests.support.cluster up

FLAVOR ?= mysql
# what the demo's cluster runs: one server image and its tool image (the backup Job's client tools), the
# operator's, the metrics sidecar's; no NetworkPolicy enforcer
DEMO_IMAGES := $(if $(filter mariadb,$(FLAVOR)),mariadb mariadb-tools,mysql mysql-tools) operator exporter
demo: deps venv ## local cluster + chart + a 3-instance cluster (FLAVOR=mysql|mariadb), a row written and read, a backup
	$(MAKE) --no-print-directory -j4 demo-images cluster-binaries bin-node
	MYSQLOP_CLUSTER_IMAGES="$(DEMO_IMAGES)" $(PY) -m tests.support.cluster up
	FLAVOR=$(FLAVOR) $(PY) -m e2e.demo

demo-images:
	hack/build-images.sh pause busybox $(DEMO_IMAGES)

cluster-down: venv ## stop it and remove everything it created
	$(PY) -m tests.support.cluster down

clean:
	rm -rf $(VENV) .pytest_cache
