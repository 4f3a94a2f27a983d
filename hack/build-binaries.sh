#!/usr/bin/env bash
# Build the local cluster's binaries from their Go modules into a per-user cache outside the
# checkout, keyed by version. A binary already in the cache is never rebuilt.
#
#   hack/build-binaries.sh control-plane   # etcd, kube-apiserver, kube-controller-manager,
#                                          # kube-scheduler, kubeadm, kubectl, helm
#   hack/build-binaries.sh node            # kubelet, kube-proxy, coredns, local-path-provisioner
#   hack/build-binaries.sh network-policy  # kube-router (NetworkPolicy enforcement only; not
#                                          # needed by `make demo`)
#   hack/build-binaries.sh all
#   hack/build-binaries.sh s3              # MinIO (test-only)
#   hack/build-binaries.sh cert-manager    # cert-manager controller + its CRDs (test-only)
#   hack/build-binaries.sh exporter        # mysqld_exporter (copied into the server images)
#   hack/build-binaries.sh prometheus      # prometheus + promtool (test-only)
#   hack/build-binaries.sh registry        # the distribution registry (test-only)
#   hack/build-binaries.sh actionlint      # the workflow linter (`make lint`)
#   hack/build-binaries.sh shfmt           # a shell parser (the Pod scripts' programs, tests)
#
# Runs side by side are safe (each binary is built under its own lock): `make cluster-up` builds
# the targets and the images in parallel.
# Prints nothing but progress on stderr; `hack/build-binaries.sh --print-dir` prints the bin dir.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

CACHE_ROOT="${MYSQL_OPERATOR_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysql-operator-dev}"
BIN_DIR="$CACHE_ROOT/bin"
K8S_DIR="$BIN_DIR/kubernetes-$KUBERNETES_VERSION"
ETCD_DIR="$BIN_DIR/etcd-$ETCD_VERSION"
HELM_DIR="$BIN_DIR/helm-$HELM_VERSION"
COREDNS_DIR="$BIN_DIR/coredns-$COREDNS_VERSION"
LPP_DIR="$BIN_DIR/local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION"
CERT_MANAGER_DIR="$BIN_DIR/cert-manager-$CERT_MANAGER_VERSION"
KUBE_ROUTER_DIR="$BIN_DIR/kube-router-$KUBE_ROUTER_VERSION"
EXPORTER_DIR="$BIN_DIR/mysqld-exporter-$MYSQLD_EXPORTER_VERSION"
PROMETHEUS_DIR="$BIN_DIR/prometheus-$PROMETHEUS_VERSION"
REGISTRY_DIR="$BIN_DIR/registry-$REGISTRY_VERSION"
ACTIONLINT_DIR="$BIN_DIR/actionlint-$ACTIONLINT_VERSION"
SHFMT_DIR="$BIN_DIR/shfmt-$SHFMT_VERSION"

# -dwarf=false: no debug information compiled (-ldflags -w dropped it at link anyway): ~12 % less
# compile CPU, measured on mysqld_exporter (user 38.1 s -> 33.4 s, 2 runs each)
export CGO_ENABLED=0 GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false" GOTOOLCHAIN=local
# the compiler collects garbage less often: measured on the Kubernetes binaries with etcd and helm
# (cold build cache, modules downloaded): 338 s instead of 402 s, CPU 475 s user instead of 618 s,
# for ~330 MB more peak memory; on the registry 0.82 of the CPU (2 runs each)
export GOGC="${GOGC:-400}"
log() { echo "[build-binaries] $*" >&2; }

build_kubernetes() {  # $@: cmd names under k8s.io/kubernetes/cmd
  local missing=() c
  for c in "$@"; do [[ -x "$K8S_DIR/$c" ]] || missing+=("$c"); done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "building ${missing[*]} $KUBERNETES_VERSION (cold: tens of minutes on 2 cores)"
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  local staging_version="v0.${KUBERNETES_VERSION#v1.}"
  local work="$CACHE_ROOT/src/kubernetes-$KUBERNETES_VERSION"
  mkdir -p "$work" "$K8S_DIR"
  # k8s.io/kubernetes replaces its staging modules with local paths, so it cannot be built
  # directly: a wrapper module pins each staging module to its published version instead.
  local staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
    cloud-provider cluster-bootstrap code-generator component-base component-helpers
    controller-manager cri-api cri-client csi-translation-lib dynamic-resource-allocation
    endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy
    kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver
    sample-cli-plugin sample-controller)
  {
    echo "module local/kubernetes-build"
    echo
    echo "go 1.24.0"
    echo
    echo "godebug default=go1.24"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    local m
    for m in "${staging[@]}"; do echo "replace k8s.io/$m => k8s.io/$m $staging_version"; done
  } >"$work/go.mod"
  local pkgs=()
  for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$work" && go get "${pkgs[@]/%/@$KUBERNETES_VERSION}" >&2)
  local ldflags="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldflags+=" -X $p.gitCommit=0000000000000000000000000000000000000000"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  local out="$work/out"; rm -rf "$out"; mkdir -p "$out"
  (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$out/" "${pkgs[@]}")
  for c in "${missing[@]}"; do mv "$out/$c" "$K8S_DIR/$c"; done
}

build_etcd() {
  [[ -x "$ETCD_DIR/etcd" ]] && return 0
  log "building etcd $ETCD_VERSION"
  local work="$CACHE_ROOT/src/etcd-$ETCD_VERSION"
  mkdir -p "$work" "$ETCD_DIR"
  # go.etcd.io/etcd/server/v3 has relative replace lines: wrap its etcdmain in our own main.
  cat >"$work/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  printf 'module local/etcd-build\n\ngo 1.24\n' >"$work/go.mod"
  (cd "$work" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2 && go mod tidy >&2 &&
    go build -trimpath -ldflags "-s -w" -o "$ETCD_DIR/etcd.tmp" . && mv "$ETCD_DIR/etcd.tmp" "$ETCD_DIR/etcd")
}

build_helm() {
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  go_install "$HELM_DIR" helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
    -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
}

build_node_addons() {
  go_install "$COREDNS_DIR" coredns "github.com/coredns/coredns@$COREDNS_VERSION" -ldflags "-s -w"
  go_install "$LPP_DIR" local-path-provisioner \
    "github.com/rancher/local-path-provisioner@$LOCAL_PATH_PROVISIONER_VERSION" -ldflags "-s -w"
}

build_kube_router() {  # NetworkPolicy enforcement (the CNI bridge plugin enforces none): only its
  # firewall runs (tests/support/cluster.py). `go install …@v` is refused (the proxy does not
  # serve the module's version list, which go install reads for deprecations) and the netlink
  # pseudo-version kube-router requires is not served: a wrapper module pins the nearest tag.
  [[ -x "$KUBE_ROUTER_DIR/kube-router" ]] && return 0
  log "building kube-router $KUBE_ROUTER_VERSION"
  local work="$CACHE_ROOT/src/kube-router-$KUBE_ROUTER_VERSION"
  local pkg=github.com/cloudnativelabs/kube-router/v2
  mkdir -p "$work" "$KUBE_ROUTER_DIR"
  {
    echo "module local/kube-router-build"
    echo
    echo "go 1.26.0"
    echo
    echo "replace github.com/vishvananda/netlink => github.com/vishvananda/netlink v1.3.1"
  } >"$work/go.mod"
  (cd "$work" && go get "$pkg/cmd/kube-router@$KUBE_ROUTER_VERSION" >&2 &&
    go build -trimpath -ldflags "-s -w -X $pkg/pkg/version.Version=$KUBE_ROUTER_VERSION \
      -X $pkg/pkg/version.BuildDate=1970-01-01T00:00:00Z" \
      -o "$KUBE_ROUTER_DIR/kube-router.tmp" "$pkg/cmd/kube-router" &&
    mv "$KUBE_ROUTER_DIR/kube-router.tmp" "$KUBE_ROUTER_DIR/kube-router")
}

build_s3() {  # MinIO: a real S3 server for the backup tests only (AGPL-3.0: never shipped)
  go_install "$BIN_DIR/minio-$MINIO_VERSION" minio "github.com/minio/minio@$MINIO_VERSION" -ldflags "-s -w"
}

build_cert_manager() {  # test-only: tests/support/certmanager.py runs it on loopback
  # The controller's main is the nested module cmd/controller (module path
  # .../controller-binary), which the Go module proxy does not serve; its controllers are in the
  # served module github.com/cert-manager/cert-manager. hack/cert-manager-controller/main.go starts
  # them; the wrapper module is named under github.com/cert-manager/cert-manager/ so that it may
  # import the module's internal/ configuration packages. The CRDs (deploy/crds/*.yaml, Helm
  # templates in comments and label values) are copied from the same module version;
  # tests/support/certmanager.py drops the templated metadata when it installs them.
  [[ -x "$CERT_MANAGER_DIR/cert-manager-controller" && -d "$CERT_MANAGER_DIR/crds" ]] && return 0
  log "building cert-manager controller $CERT_MANAGER_VERSION (cold: a few minutes on 2 cores)"
  local work="$CACHE_ROOT/src/cert-manager-$CERT_MANAGER_VERSION"
  local mod=github.com/cert-manager/cert-manager
  mkdir -p "$work" "$CERT_MANAGER_DIR"
  cp "$HERE/cert-manager-controller/main.go" "$work/main.go"
  printf 'module %s/controller-binary\n\ngo 1.24.0\n' "$mod" >"$work/go.mod"
  (cd "$work" && GOFLAGS=-mod=mod go get "$mod@$CERT_MANAGER_VERSION" >&2 &&
    GOFLAGS=-mod=mod go mod tidy >&2 &&
    go build -trimpath -ldflags "-s -w -X $mod/pkg/util.AppVersion=$CERT_MANAGER_VERSION" \
      -o "$CERT_MANAGER_DIR/cert-manager-controller.tmp" . &&
    mv "$CERT_MANAGER_DIR/cert-manager-controller.tmp" "$CERT_MANAGER_DIR/cert-manager-controller")
  local src; src="$(cd "$work" && go list -m -f '{{.Dir}}' "$mod")"
  rm -rf "$CERT_MANAGER_DIR/crds.tmp"; mkdir -p "$CERT_MANAGER_DIR/crds.tmp"
  cp "$src"/deploy/crds/crd-*.yaml "$CERT_MANAGER_DIR/crds.tmp/"
  chmod u+w "$CERT_MANAGER_DIR"/crds.tmp/*.yaml
  rm -rf "$CERT_MANAGER_DIR/crds"; mv "$CERT_MANAGER_DIR/crds.tmp" "$CERT_MANAGER_DIR/crds"
}

go_build_module() {  # $1: target dir, $2: module@version, rest: packages of that module to build
  # A wrapper module requiring the module (`go install pkg@version` also asks the proxy for the
  # module's version list, which it refuses for some modules it serves). GO_BUILD_TAGS: build tags,
  # GO_LDFLAGS: more linker flags.
  local dir="$1" module="$2" name; shift 2
  local work="$CACHE_ROOT/src/${dir##*/}"
  mkdir -p "$work" "$dir"
  printf 'module local/%s\n\ngo 1.24\n' "${dir##*/}" >"$work/go.mod"
  (cd "$work" && go get "${@/%/@${module#*@}}" >&2 &&
    go build -trimpath -tags "${GO_BUILD_TAGS:-}" -ldflags "-s -w ${GO_LDFLAGS:-}" -o "$work/out/" "$@")
  for name in "$@"; do mv "$work/out/${name##*/}" "$dir/${name##*/}"; done
}

build_exporter() {
  # it says its version (`--version`, the mysqld_exporter_build_info metric) as upstream's
  # release build does (promu sets prometheus/common/version); a build without it is redone
  local version="${MYSQLD_EXPORTER_VERSION#v}"
  [[ -x "$EXPORTER_DIR/mysqld_exporter" ]] &&
    "$EXPORTER_DIR/mysqld_exporter" --version 2>&1 | grep -q "version $version " && return 0
  log "building mysqld_exporter $MYSQLD_EXPORTER_VERSION"
  GO_LDFLAGS="-X github.com/prometheus/common/version.Version=$version" \
    go_build_module "$EXPORTER_DIR" "github.com/prometheus/mysqld_exporter@$MYSQLD_EXPORTER_VERSION" \
    github.com/prometheus/mysqld_exporter
}

build_prometheus() {  # test-only: tests/support/prometheus.py runs it on loopback
  [[ -x "$PROMETHEUS_DIR/prometheus" && -x "$PROMETHEUS_DIR/promtool" ]] && return 0
  log "building prometheus and promtool $PROMETHEUS_VERSION (cold: several minutes on 2 cores)"
  # only the Kubernetes service discovery the tests use: the cloud ones' SDKs are most of a cold build
  GO_BUILD_TAGS=remove_all_sd,enable_kubernetes_sd \
    go_build_module "$PROMETHEUS_DIR" "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" \
    github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
}

build_registry() {  # test-only: tests/support/registry.py runs it beside the local cluster
  [[ -x "$REGISTRY_DIR/registry" ]] && return 0
  log "building the distribution registry $REGISTRY_VERSION"
  go_build_module "$REGISTRY_DIR" "github.com/distribution/distribution/v3@$REGISTRY_VERSION" \
    github.com/distribution/distribution/v3/cmd/registry
}

build_shfmt() {  # tests/unit/test_pod_scripts.py reads the Pod scripts' syntax trees with it
  go_install "$SHFMT_DIR" shfmt "mvdan.cc/sh/v3/cmd/shfmt@$SHFMT_VERSION" -ldflags "-s -w"
}

build_actionlint() {  # `make lint` checks .github/workflows with it
  go_install "$ACTIONLINT_DIR" actionlint "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION" \
    -ldflags "-s -w -X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION"
}

go_install() {  # $1: target dir, $2: binary name, $3: module/cmd@version, rest: extra go flags
  local dir="$1" name="$2" pkg="$3"; shift 3
  [[ -x "$dir/$name" ]] && return 0
  log "building $pkg"
  mkdir -p "$dir"
  GOBIN="$dir" go install -trimpath "$@" "$pkg"
}

locked() {  # $1: a lock name, rest: a command run holding it. Runs of this script side by side
  # (`make -j`, hack/build-images.sh building the exporter) build each binary once: a second run
  # waits for the first, then finds the binary built. The lock goes with the subshell.
  local name="$1"; shift
  mkdir -p "$CACHE_ROOT/locks"
  ( flock 9; "$@" ) 9>"$CACHE_ROOT/locks/$name.lock"
}

# every Kubernetes binary in one `go build`: they share most packages (kubelet and kube-proxy
# cost ~30 s more here), and `node` then finds them built
K8S_ALL=(kube-apiserver kube-controller-manager kube-scheduler kubeadm kubectl kubelet kube-proxy)

case "${1:-control-plane}" in
  --print-dir) echo "$BIN_DIR" ;;
  control-plane)
    locked etcd build_etcd
    locked kubernetes build_kubernetes "${K8S_ALL[@]}"
    locked helm build_helm ;;
  node)  # the add-ons first: side by side with control-plane, they need not wait for Kubernetes
    locked node-addons build_node_addons
    locked kubernetes build_kubernetes kubelet kube-proxy ;;
  all)
    locked etcd build_etcd
    locked kubernetes build_kubernetes "${K8S_ALL[@]}"
    locked helm build_helm
    locked node-addons build_node_addons
    locked kube-router build_kube_router ;;
  network-policy) locked kube-router build_kube_router ;;
  s3) locked s3 build_s3 ;;
  cert-manager) locked cert-manager build_cert_manager ;;
  exporter) locked exporter build_exporter ;;
  prometheus) locked prometheus build_prometheus ;;
  registry) locked registry build_registry ;;
  actionlint) locked actionlint build_actionlint ;;
  shfmt) locked shfmt build_shfmt ;;
  *) echo "usage: $0 [control-plane|node|network-policy|all|s3|cert-manager|exporter|prometheus|registry|actionlint|shfmt|--print-dir]" >&2; exit 2 ;;
esac
