#!/usr/bin/env bash
# A release: the operator, exporter and tool images for every architecture built, pushed as one
# multi-architecture image each, and the OCI chart whose defaults name them, to one registry.
# .github/workflows/release.yml runs it on a tag; tests/integration/test_release.py runs the
# same steps against the local registry (one architecture).
#
#   hack/release.sh check-tag TAG          # TAG must be v + the chart's appVersion (= pyproject's)
#   hack/release.sh notes VERSION          # the CHANGELOG.md section of VERSION
#   hack/release.sh build DIR              # hack/build-images.sh of RELEASE_IMAGES for this
#                                          # machine's architecture, archives copied into DIR
#   hack/release.sh publish REGISTRY DIR...  # one manifest list per image from the DIRs (one per
#                                          # architecture), pushed with its images; prints
#                                          # "REGISTRY/REPO:TAG@DIGEST" per image
#   hack/release.sh chart REGISTRY DIR     # the chart with its image defaults under REGISTRY,
#                                          # packaged into DIR and pushed to oci://REGISTRY/charts;
#                                          # prints "oci://REGISTRY/charts/mysql-operator:VERSION@DIGEST"
#
# Credentials for REGISTRY: RELEASE_AUTHFILE (a containers-auth.json; helm reads the same through
# DOCKER_CONFIG or its own login) and RELEASE_CERT_DIR (a folder with the CA of a private registry,
# ca.crt). Nothing here logs a credential.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
CHART="$REPO/charts/mysql-operator"
# What a user's cluster pulls: the operator, the metrics sidecar, the Jobs' client tools per series
RELEASE_IMAGES=(operator exporter mysql-tools mariadb-tools mariadb-tools-11.8)

die() { echo "[release] error: $*" >&2; exit 1; }
log() { echo "[release] $*" >&2; }

app_version() { sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$CHART/Chart.yaml"; }
chart_version() { sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$CHART/Chart.yaml"; }
package_version() { sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/pyproject.toml"; }

check_tag() {  # $1: the git tag
  local app
  app="$(app_version)"
  [[ "$app" == "$(package_version)" ]] || die "appVersion $app differs from pyproject's $(package_version)"
  [[ "$app" == "$(chart_version)" ]] || die "appVersion $app differs from the chart's version $(chart_version)"
  [[ "$1" == "v$app" ]] || die "tag $1 is not v$app (the chart's appVersion): tag the commit that sets it"
  notes "$app" >/dev/null
  echo "$app"
}

build() {  # $1: folder for the archives (NAME.oci.tar) and refs.txt ("NAME REF" lines)
  local dir="$1" name ref archive
  mkdir -p "$dir"
  : >"$dir/refs.txt"
  while read -r name ref archive; do
    ln -f "$archive" "$dir/$name.oci.tar" 2>/dev/null || cp "$archive" "$dir/$name.oci.tar"
    echo "$name $ref" >>"$dir/refs.txt"
  done < <("$HERE/build-images.sh" "${RELEASE_IMAGES[@]}")
  log "built $(wc -l <"$dir/refs.txt") images for $(dpkg --print-architecture) into $dir"
}

registry_flags() {
  local flags=()
  [[ -n "${RELEASE_AUTHFILE:-}" ]] && flags+=(--authfile "$RELEASE_AUTHFILE")
  [[ -n "${RELEASE_CERT_DIR:-}" ]] && flags+=(--cert-dir "$RELEASE_CERT_DIR")
  echo "${flags[@]}"
}

publish() {  # $1: registry, $2...: folders written by `build` (one per architecture)
  local registry="$1" name ref target work dir digest
  shift
  [[ $# -gt 0 ]] || die "publish: no archive folders"
  work="$(mktemp -d)"
  trap 'rm -rf "'"$work"'"' RETURN
  local b=(buildah --root "$work/root" --runroot "$work/run" --storage-driver vfs)
  local flags
  read -r -a flags <<<"$(registry_flags)"
  while read -r name ref; do
    target="$registry/${ref#localhost/}"
    "${b[@]}" manifest create "$name" >/dev/null
    for dir in "$@"; do
      [[ -f "$dir/$name.oci.tar" ]] || die "$dir has no $name.oci.tar (every architecture builds every image)"
      "${b[@]}" manifest add "$name" "oci-archive:$dir/$name.oci.tar" >/dev/null
    done
    "${b[@]}" manifest push --quiet --all --format oci ${flags[@]+"${flags[@]}"} \
      --digestfile "$work/digest" "$name" "docker://$target" >&2
    digest="$(cat "$work/digest")"
    echo "$target@$digest"
  done <"$1/refs.txt"
}

chart() {  # $1: registry, $2: folder for the package
  local registry="$1" dir="$2" work archive out
  work="$(mktemp -d)"
  trap 'rm -rf "'"$work"'"' RETURN
  cp -r "$CHART" "$work/mysql-operator"
  # the image defaults: localhost/NAME (what hack/build-images.sh tags) becomes REGISTRY/NAME
  sed -i "s|^\(  repository: \)localhost/|\1$registry/|" "$work/mysql-operator/values.yaml"
  if grep -q "repository: localhost/" "$work/mysql-operator/values.yaml"; then
    die "values.yaml still names a localhost image"
  fi
  mkdir -p "$dir"
  helm package "$work/mysql-operator" --destination "$dir" >&2
  archive="$dir/mysql-operator-$(chart_version).tgz"
  local flags=()
  [[ -n "${RELEASE_CERT_DIR:-}" ]] && flags+=(--ca-file "$RELEASE_CERT_DIR/ca.crt")
  [[ -n "${RELEASE_AUTHFILE:-}" ]] && flags+=(--registry-config "$RELEASE_AUTHFILE")
  out="$(helm push "$archive" "oci://$registry/charts" ${flags[@]+"${flags[@]}"} 2>&1)" || die "helm push: $out"
  echo "oci://$registry/charts/mysql-operator:$(chart_version)@$(sed -n 's/^Digest: //p' <<<"$out")"
}

notes() {  # $1: version. Its CHANGELOG section ("## VERSION ..." up to the next "## ").
  local text
  text="$(awk -v v="$1" '/^## /{p = ($2 == v)} p' "$REPO/CHANGELOG.md")"
  [[ -n "$text" ]] || die "CHANGELOG.md has no section \"## $1\""
  echo "$text"
}

case "${1:-}" in
  check-tag) [[ $# -eq 2 ]] || die "usage: check-tag TAG"; check_tag "$2" ;;
  notes) [[ $# -eq 2 ]] || die "usage: notes VERSION"; notes "$2" ;;
  build) [[ $# -eq 2 ]] || die "usage: build DIR"; build "$2" ;;
  publish) [[ $# -ge 3 ]] || die "usage: publish REGISTRY DIR..."; shift; publish "$@" ;;
  chart) [[ $# -eq 3 ]] || die "usage: chart REGISTRY DIR"; chart "$2" "$3" ;;
  *) die "usage: hack/release.sh check-tag TAG | notes VERSION | build DIR | publish REGISTRY DIR... | chart REGISTRY DIR" ;;
esac
