# Developer entry points. `make test` is the project's test command (CI runs it via .ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: test unit integration binaries control-plane venv clean

test: venv binaries ## everything: builds what is missing, then runs unit and integration tests
	$(PY) -m pytest tests

unit: venv ## pure logic only, no processes
	$(PY) -m pytest tests/unit

integration: venv binaries
	$(PY) -m pytest tests/integration

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

binaries: ## etcd, kube-apiserver, controller-manager, scheduler, kubeadm, helm (cached in ~/.cache)
	hack/build-binaries.sh control-plane

control-plane: venv binaries ## run a local control plane in the foreground; prints KUBECONFIG
	$(PY) -m tests.support.controlplane

clean:
	rm -rf $(VENV) .pytest_cache
