#!/usr/bin/env bash
# System packages the tests need. Idempotent; quick when everything is present.
set -euo pipefail
need=()
command -v go >/dev/null || { echo "Go >= 1.24 is required to build the local cluster" >&2; exit 1; }
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
# real MariaDB servers for the replication integration tests (tests/support/mariadb.py)
if ! command -v mariadbd >/dev/null || ! command -v mariadb-install-db >/dev/null; then
  need+=(mariadb-server mariadb-client mariadb-backup)
fi
# the backup tests and benchmark compress with zstd (tests/integration/test_backup.py)
command -v zstd >/dev/null || need+=(zstd)
if [[ ${#need[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then echo "please install: ${need[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# --- images + containerd (hack/build-images.sh, tests/support/containerd.py) -------------------
# Only with `hack/install-deps.sh images` (or `node`), so the plain run stays quick.
install_image_tools() {
  # iptables + ipset: kube-router's NetworkPolicy firewall (tests/support/cluster.py)
  local pkgs=(debootstrap buildah containerd runc catatonit busybox-static
    containernetworking-plugins iptables ipset) missing=() p
  for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then echo "please install: ${missing[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
case "${1:-}" in images | node) install_image_tools ;; esac
