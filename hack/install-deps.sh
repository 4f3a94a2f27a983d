#!/usr/bin/env bash
# System packages the tests need. Idempotent; quick when everything is present.
set -euo pipefail
need=()
command -v go >/dev/null || { echo "Go >= 1.24 is required to build the local cluster" >&2; exit 1; }
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [[ ${#need[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then echo "please install: ${need[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
