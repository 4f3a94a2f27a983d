# Developer entry points. `make test` is the project's test command (CI runs it via .ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: test lint unit integration e2e binaries cluster-binaries node-binaries go-binaries images deps control-plane \
        cluster-up cluster-down demo venv clean

test: deps venv ## everything: builds what is missing, lints, runs unit, integration and e2e tests
	$(MAKE) --no-print-directory -j3 go-binaries images lint
	$(PY) -m pytest tests e2e

# the Go builds one after the other (they share a work tree); the images and lint beside them
go-binaries: binaries
	$(MAKE) --no-print-directory node-binaries

SHELL_SCRIPTS := $(wildcard mysql_operator/manifests/sh/*.sh images/*/*.sh hack/*.sh) .ci/run
lint: venv ## ruff (lint and format), mypy --strict on the pure modules, shellcheck
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck --shell=bash --severity=warning $(SHELL_SCRIPTS)
	$(VENV)/bin/shellcheck --shell=bash mysql_operator/manifests/sh/*.sh

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
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

binaries: cluster-binaries ## all of the below, and what only tests use: cert-manager, Prometheus (cached in ~/.cache)
	hack/build-binaries.sh cert-manager
	hack/build-binaries.sh prometheus

cluster-binaries: ## etcd, kube-apiserver, controller-manager, scheduler, kubeadm, helm, MinIO, mysqld_exporter, the registry: what `make demo` needs
	hack/build-binaries.sh control-plane
	hack/build-binaries.sh s3
	hack/build-binaries.sh exporter
	hack/build-binaries.sh registry

node-binaries: ## kubelet, kube-proxy, CoreDNS, local-path-provisioner, kube-router (cached in ~/.cache)
	hack/build-binaries.sh node

images: ## base, pause, busybox, MariaDB and operator images (OCI archives cached in ~/.cache)
	hack/build-images.sh all

control-plane: venv binaries ## run a local control plane in the foreground; prints KUBECONFIG
	$(PY) -m tests.support.controlplane

cluster-up: deps venv cluster-binaries node-binaries images ## start the local one-node cluster in the background
	$(PY) -m tests.support.cluster up

FLAVOR ?= mysql
demo: cluster-up ## local cluster + chart + a 3-instance cluster (FLAVOR=mysql|mariadb), a row written and read, a backup
	FLAVOR=$(FLAVOR) $(PY) -m e2e.demo

cluster-down: venv ## stop it and remove everything it created
	$(PY) -m tests.support.cluster down

clean:
	rm -rf $(VENV) .pytest_cache
