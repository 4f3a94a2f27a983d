#!/usr/bin/env bash
# Build the local cluster's container images without a registry or Docker, as OCI archives in a
# per-user cache outside the checkout, each keyed by a hash of its inputs (rebuilt only when an
# input changes).
#
#   hack/build-images.sh [all|base|base-sid|pause|busybox|exporter|mariadb-tools|mariadb-tools-11.8|
#                         mysql-tools|mariadb|mariadb-11.8|mysql|operator]...   (default: all)
#   hack/build-images.sh --print-dir                    (the archive folder)
#   hack/build-images.sh --rootfs NAME                  (builds NAME, prints a folder holding its
#                                                       unpacked root file system, for host tests)
#
# stdout: one line per requested image, "NAME REF ARCHIVE" (ARCHIVE loads with
# `ctr -n k8s.io images import ARCHIVE`); progress, timings and sizes go to stderr.
#
# Images (all named localhost/NAME:TAG, as containerd and the kubelet need for local images):
#   base      localhost/debian:bookworm-slim   debootstrap --variant=minbase bookworm, trimmed like
#             the official slim image; also tagged docker.io/library/debian:bookworm-slim in this
#             script's private buildah storage so every `FROM debian:bookworm-slim` builds on it
#   base-sid  localhost/debian:sid-slim        the same from Debian sid (MySQL 9.7, MariaDB 11.8)
#   pause     localhost/pause:catatonit        Debian's static catatonit, `catatonit -P`
#   busybox   localhost/busybox:1.35           Debian's busybox-static (sh, mkdir, rm, ...)
#   exporter  localhost/mysqld-exporter:VERSION  prometheus/mysqld_exporter's image: busybox and
#             /bin/mysqld_exporter (its pinned Go module, hack/build-binaries.sh exporter), user
#             nobody, ENTRYPOINT /bin/mysqld_exporter, like the upstream Dockerfile
#   mariadb-tools      localhost/mysql-operator-tools:mariadb-10.11  images/mariadb-tools (bookworm):
#             the client tools the backup, restore and archiver Pods run (their client-tools
#             container), as the operator names them (manifests.backup_jobs.tools_image)
#   mariadb-tools-11.8 localhost/mysql-operator-tools:mariadb-11.8   the same with SUITE=sid
#   mysql-tools        localhost/mysql-operator-tools:mysql-9.7      images/mysql-tools (sid)
#   mariadb   localhost/mariadb:10.11          images/mariadb/Dockerfile on mariadb-tools
#   mariadb-11.8 localhost/mariadb:11.8        images/mariadb/Dockerfile on mariadb-tools-11.8
#   mysql     localhost/mysql:9.7              images/mysql/Dockerfile on mysql-tools
#   operator  localhost/mysql-operator:VERSION the repository's Dockerfile (VERSION from pyproject)
#
# How buildah runs here (found on a Debian bookworm VM, root, cgroup v1, no systemd):
#   --isolation chroot  RUN steps need no OCI runtime, cgroups or user namespaces (the default
#                       `oci` isolation with runc also works here; chroot is the simpler one);
#   --network host      RUN steps use the host network. buildah's default private network would
#                       create a cni-podman0 bridge (10.88.0.0/16) and CNI firewall chains on the
#                       host: never build without it;
#   --pull=never        nothing is ever fetched from a registry;
#   storage driver overlay, in a private --root/--runroot under the cache (never the system's
#   /var/lib/containers), so builds do not collide with anything else on the machine.
# Outbound HTTPS goes through a proxy whose CA is only in the host trust store: the operator
# build bind-mounts the host bundle read-only for pip (--volume, never copied into a layer) and
# passes its in-container path as the PIP_CERT build argument.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
CACHE_ROOT="${MYSQL_OPERATOR_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysql-operator-dev}"
IMAGES_DIR="$CACHE_ROOT/images"
BUILDAH_ROOT="$IMAGES_DIR/buildah/root"
BUILDAH_RUNROOT="$IMAGES_DIR/buildah/run"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
HOST_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
KEY_LABEL=dev.mysql-operator.inputs
# the images are this machine's architecture (debootstrap, Go and Debian's binaries are native)
ARCH="$(dpkg --print-architecture)"

log() { echo "[build-images] $*" >&2; }
die() { echo "[build-images] error: $*" >&2; exit 1; }

if [[ "${1:-}" == "--print-dir" ]]; then echo "$IMAGES_DIR"; exit 0; fi

operator_version() {
  sed -n 's/^version *= *"\(.*\)"/\1/p' "$REPO/pyproject.toml" | head -n1
}

image_ref() {
  case "$1" in
    base) echo "localhost/debian:bookworm-slim" ;;
    base-sid) echo "localhost/debian:sid-slim" ;;
    pause) echo "localhost/pause:catatonit" ;;
    busybox) echo "localhost/busybox:1.35" ;;
    exporter) echo "localhost/mysqld-exporter:$MYSQLD_EXPORTER_VERSION" ;;
    mariadb-tools) echo "localhost/mysql-operator-tools:mariadb-10.11" ;;
    mariadb-tools-11.8) echo "localhost/mysql-operator-tools:mariadb-11.8" ;;
    mysql-tools) echo "localhost/mysql-operator-tools:mysql-9.7" ;;
    mariadb) echo "localhost/mariadb:10.11" ;;
    mariadb-11.8) echo "localhost/mariadb:11.8" ;;
    mysql) echo "localhost/mysql:9.7" ;;
    operator) echo "localhost/mysql-operator:$(operator_version)" ;;
    *) die "unknown image '$1': choose from all, base, base-sid, pause, busybox, exporter, mariadb-tools, mariadb-tools-11.8, mysql-tools, mariadb, mariadb-11.8, mysql, operator" ;;
  esac
}

check_tools() {
  local t missing=()
  for t in debootstrap buildah sha256sum flock; do command -v "$t" >/dev/null || missing+=("$t"); done
  [[ -x /usr/bin/catatonit ]] || missing+=(catatonit)
  [[ -x /bin/busybox ]] || missing+=(busybox-static)
  [[ ${#missing[@]} -eq 0 ]] || die "missing ${missing[*]}: run \`hack/install-deps.sh images\` (as root)"
  [[ $(id -u) -eq 0 ]] || die "debootstrap and buildah's overlay storage need root here"
}

bah() { buildah --root "$BUILDAH_ROOT" --runroot "$BUILDAH_RUNROOT" --storage-driver overlay "$@"; }

# --- input keys -------------------------------------------------------------------------------
hash_stdin() { sha256sum | cut -c1-16; }

# sha256 of "path content-hash" lines for files (relative to $1), in a stable order.
hash_files() {
  local dir="$1"; shift
  (cd "$dir" && LC_ALL=C sort -u < <(printf '%s\n' "$@") | while read -r f; do
    [[ -n "$f" ]] || continue
    printf '%s %s\n' "$f" "$(sha256sum < "$f" | cut -d' ' -f1)"
  done) | hash_stdin
}

base_key() {  # $1: suite. A base is defined by build_base (its text) and the suite it fetches.
  { declare -f build_base base_rootfs_trim debian_sources; echo "$1"; } | hash_stdin
}

image_suite() {  # $1: image name -> the Debian suite it is built from
  case "$1" in base-sid | mariadb-11.8 | mysql | mariadb-tools-11.8 | mysql-tools) echo sid ;; *) echo bookworm ;; esac
}

image_key() {
  local name="$1" base; base="$(base_key "$(image_suite "$name")")"
  case "$name" in
    base | base-sid) echo "$base" ;;
    pause) { echo pause; sha256sum < /usr/bin/catatonit; declare -f build_scratch_image; } | hash_stdin ;;
    busybox) { echo busybox; sha256sum < /bin/busybox; declare -f build_scratch_image; } | hash_stdin ;;
    # mysqld_exporter is built from its pinned Go module version
    exporter) { sha256sum < "$(exporter_binary)"; sha256sum < /bin/busybox; declare -f build_scratch_image; } | hash_stdin ;;
    mariadb-tools | mariadb-tools-11.8 | mysql-tools)
      local dir="$REPO/images/${name%-11.8}" files
      mapfile -t files < <(cd "$dir" && find . -type f | sed 's|^\./||')
      { echo "$name $base"; hash_files "$dir" "${files[@]}"; } | hash_stdin ;;
    mariadb | mariadb-11.8 | mysql)  # on their tool image: its key stands for the base
      local dir="$REPO/images/${name%-11.8}" files
      mapfile -t files < <(cd "$dir" && find . -type f | sed 's|^\./||')
      { echo "$name $(image_key "$(base_of "$name")")"; hash_files "$dir" "${files[@]}"; } | hash_stdin ;;
    operator)
      # The Dockerfile, .dockerignore and every file the .dockerignore lets into the context.
      local files; mapfile -t files < <(operator_context_files)
      { echo "operator $base"; hash_files "$REPO" Dockerfile .dockerignore "${files[@]}"; } | hash_stdin ;;
  esac
}

operator_context_files() {
  # Mirrors .dockerignore: the package sources, pyproject.toml and README/LICENSE if present.
  (cd "$REPO" && find mysql_operator -type f -not -path '*/__pycache__/*' -not -name '*.pyc';
   for f in pyproject.toml README.md LICENSE; do [[ -f "$f" ]] && echo "$f"; done) | LC_ALL=C sort
}

archive_path() { echo "$IMAGES_DIR/$1-$2.oci.tar"; }

# --- base -------------------------------------------------------------------------------------
base_rootfs_trim() {  # $1: rootfs. What the official slim image (debuerreotype) configures.
  local r="$1"
  mkdir -p "$r/etc/dpkg/dpkg.cfg.d" "$r/etc/apt/apt.conf.d"
  cat >"$r/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# Keep documentation, manuals and translations out of the image (like debian:*-slim).
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
  cat >"$r/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$r/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Acquire::GzipIndexes "true";' >"$r/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$r/etc/apt/apt.conf.d/docker-autoremove-suggests"
  printf '#!/bin/sh\n# no services are started in an image build\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
  chmod 0755 "$r/usr/sbin/policy-rc.d"
  find "$r/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  rm -rf "$r"/usr/share/{groff,info,linda,lintian/overrides,man}/* 2>/dev/null || true
  find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + 2>/dev/null || true
  rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin "$r"/var/cache/apt/archives/*.deb \
    "$r"/var/cache/debconf/*-old "$r"/var/lib/dpkg/*-old "$r"/var/log/apt/* "$r"/tmp/* "$r"/var/tmp/*
  find "$r/var/log" -type f -exec truncate -s 0 {} +
  : >"$r/etc/machine-id"
  rm -f "$r/etc/resolv.conf" "$r/etc/hostname"
}

debian_sources() {  # $1: suite. The image's apt sources, like the official image's.
  if [[ "$1" == sid ]]; then  # sid has no -updates or -security suites
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: sid' 'Components: main' \
      'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
    return
  fi
  printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' "Suites: $1 $1-updates" \
    'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' '' \
    'Types: deb' 'URIs: http://deb.debian.org/debian-security' "Suites: $1-security" \
    'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
}

# sid's Release file is re-signed daily; a mirror that keeps a snapshot of it serves an expired
# one, which apt refuses. Only for building (the option is never written into an image).
apt_update_options() {  # $1: suite
  if [[ "$1" == sid ]]; then echo "-oAcquire::Check-Valid-Until=false"; else echo "-oAcquire::Languages=none"; fi
}

base_of() {  # $1: image name -> the base image it builds on
  case "$1" in
    mysql) echo mysql-tools ;;
    mariadb) echo mariadb-tools ;;
    mariadb-11.8) echo mariadb-tools-11.8 ;;
    *) [[ "$(image_suite "$1")" == sid ]] && echo base-sid || echo base ;;
  esac
}

base_name() {  # $1: a base image -> its name in FROM (debian:SUITE-slim for base and base-sid)
  case "$1" in
    base | base-sid) echo "docker.io/library/debian:$(image_suite "$1")-slim" ;;
    *) image_ref "$1" ;;
  esac
}

build_base() {  # $1: archive to write, $2: image name (base or base-sid)
  local out="$1" name="$2" suite work rootfs
  suite="$(image_suite "$name")"
  work="$(mktemp -d "$IMAGES_DIR/work.base.XXXXXX")"
  rootfs="$work/rootfs"
  log "$name: debootstrap --variant=minbase $suite (about a minute)"
  debootstrap --variant=minbase "$suite" "$rootfs" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
  rm -f "$rootfs/etc/apt/sources.list"
  debian_sources "$suite" >"$rootfs/etc/apt/sources.list.d/debian.sources"
  base_rootfs_trim "$rootfs"
  # Security and point-release updates, like the published image. resolv.conf for apt only.
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  mount -t proc proc "$rootfs/proc"
  trap 'umount "'"$rootfs"'/proc" 2>/dev/null || true' EXIT
  if ! chroot "$rootfs" /bin/sh -c 'export DEBIAN_FRONTEND=noninteractive; apt-get $0 update -qq &&
      apt-get -y -qq -o Dpkg::Options::=--force-confold upgrade && apt-get clean' "$(apt_update_options "$suite")" \
      >"$work/upgrade.log" 2>&1; then
    umount "$rootfs/proc"; tail -n 30 "$work/upgrade.log" >&2; die "apt-get upgrade in the base failed"
  fi
  umount "$rootfs/proc"
  trap - EXIT
  base_rootfs_trim "$rootfs"
  local c mnt
  c="$(bah from --pull=never scratch)"
  mnt="$(bah mount "$c")"
  tar -C "$rootfs" --numeric-owner -cf - . | tar -C "$mnt" --numeric-owner -xpf -
  bah umount "$c" >/dev/null
  bah config --cmd '["bash"]' --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --label "$KEY_LABEL=$(base_key "$suite")" --os linux --arch "$ARCH" "$c"
  bah commit --quiet --rm "$c" "$(base_name "$name")" >/dev/null
  bah tag "$(base_name "$name")" "$(image_ref "$name")"
  export_image "$(image_ref "$name")" "$out"
  rm -rf "$work"
}

# An image's base must be in buildah's storage, with the current key, before its build.
ensure_base_in_storage() {  # $1: image name
  local base key have archive
  base="$(base_of "$1")"
  build "$base" >/dev/null  # quick when its archive is cached
  key="$(image_key "$base")"
  archive="$(archive_path "$base" "$key")"
  have="$(bah inspect --type image --format "{{index .OCIv1.Config.Labels \"$KEY_LABEL\"}}" \
    "$(base_name "$base")" 2>/dev/null || true)"
  [[ "$have" == "$key" ]] && return 0
  log "$base: loading $archive into buildah storage"
  bah pull --quiet "oci-archive:$archive" >/dev/null
  [[ "$(image_ref "$base")" == "$(base_name "$base")" ]] || bah tag "$(image_ref "$base")" "$(base_name "$base")"
}

# --- images from scratch (static binaries from the host's Debian packages) --------------------
build_scratch_image() {  # $1: name, $2: archive
  local name="$1" out="$2" c mnt ref
  ref="$(image_ref "$name")"
  c="$(bah from --pull=never scratch)"
  mnt="$(bah mount "$c")"
  case "$name" in
    pause)
      install -D -m 0755 /usr/bin/catatonit "$mnt/catatonit"
      bah config --entrypoint '["/catatonit","-P"]' --cmd '[]' "$c" ;;
    busybox | exporter)
      mkdir -p "$mnt/bin" "$mnt/tmp" "$mnt/etc" "$mnt/root"
      chmod 1777 "$mnt/tmp"
      install -m 0755 /bin/busybox "$mnt/bin/busybox"
      local applet
      for applet in $(/bin/busybox --list); do
        [[ "$applet" == busybox ]] || ln -s busybox "$mnt/bin/$applet"
      done
      printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$mnt/etc/passwd"
      printf 'root:x:0:\nnobody:x:65534:\n' >"$mnt/etc/group"
      bah config --cmd '["sh"]' --env PATH=/bin "$c" ;;
  esac
  if [[ "$name" == exporter ]]; then  # upstream: FROM prometheus/busybox, COPY, USER nobody
    install -m 0755 "$(exporter_binary)" "$mnt/bin/mysqld_exporter"
    bah config --entrypoint '["/bin/mysqld_exporter"]' --cmd '[]' --user nobody --port 9104/tcp "$c"
  fi
  bah umount "$c" >/dev/null
  bah config --label "$KEY_LABEL=$(image_key "$name")" --os linux --arch "$ARCH" "$c"
  bah commit --quiet --rm "$c" "$ref" >/dev/null
  export_image "$ref" "$out"
  bah rmi "$ref" >/dev/null 2>&1 || true  # the archive is the cache; storage keeps only the base
}

# --- Dockerfile images ------------------------------------------------------------------------
build_dockerfile_image() {  # $1: name, $2: archive
  local name="$1" out="$2" ref context dockerfile args=()
  ref="$(image_ref "$name")"
  case "$name" in
    mariadb-tools) context="$REPO/images/mariadb-tools"; dockerfile="$context/Dockerfile" ;;
    mariadb-tools-11.8) context="$REPO/images/mariadb-tools"; dockerfile="$context/Dockerfile"
      args+=(--build-arg SUITE=sid --build-arg "APT_OPTIONS=$(apt_update_options sid)") ;;
    mysql-tools) context="$REPO/images/mysql-tools"; dockerfile="$context/Dockerfile"
      args+=(--build-arg "APT_OPTIONS=$(apt_update_options sid)") ;;
    mariadb | mariadb-11.8 | mysql) context="$REPO/images/${name%-11.8}"; dockerfile="$context/Dockerfile"
      args+=(--build-arg "TOOLS_IMAGE=$(image_ref "$(base_of "$name")")")
      if [[ "$name" == mysql ]]; then args+=(--build-arg "APT_OPTIONS=$(apt_update_options sid)"); fi ;;
    operator)
      context="$REPO"; dockerfile="$REPO/Dockerfile"
      if [[ -f "$HOST_CA_BUNDLE" ]]; then
        args+=(--volume "$HOST_CA_BUNDLE:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
      fi ;;
  esac
  ensure_base_in_storage "$name"
  bah bud --quiet --isolation chroot --network host --pull=never --layers=false \
    --label "$KEY_LABEL=$(image_key "$name")" "${args[@]}" \
    -f "$dockerfile" -t "$ref" "$context" >"$IMAGES_DIR/$name.build.log" 2>&1 \
    || { tail -n 40 "$IMAGES_DIR/$name.build.log" >&2; die "$name: buildah bud failed (log: $IMAGES_DIR/$name.build.log)"; }
  export_image "$ref" "$out"
  bah rmi "$ref" >/dev/null 2>&1 || true  # the archive is the cache; storage keeps only the base
  bah rmi --prune >/dev/null 2>&1 || true  # intermediate multi-stage images
}

# The mysqld_exporter binary (a static Go build of its pinned module), built if missing. Printed.
exporter_binary() {
  "$HERE/build-binaries.sh" exporter >&2
  echo "$("$HERE/build-binaries.sh" --print-dir)/mysqld-exporter-$MYSQLD_EXPORTER_VERSION/mysqld_exporter"
}

export_image() {  # $1: ref in buildah storage, $2: archive path (written atomically)
  local ref="$1" out="$2" size
  rm -f "$out.tmp"
  bah push --quiet --format oci "$ref" "oci-archive:$out.tmp:$ref" >/dev/null
  mv "$out.tmp" "$out"
  size="$(bah images --format '{{.Size}}' "$ref" 2>/dev/null | head -n1 || true)"
  log "$ref: archive $(du -h "$out" | cut -f1), unpacked ${size:-?}"
}

# Leftovers of an interrupted build: unmount what debootstrap or we mounted there, then remove.
clean_work_dirs() {
  local m
  for m in $(awk -v p="$IMAGES_DIR/work." 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$m" || true
  done
  rm -rf --one-file-system "$IMAGES_DIR"/work.*
}

# --- main -------------------------------------------------------------------------------------
build() {  # $1: name. Builds if the keyed archive is missing; prints "NAME REF ARCHIVE".
  local name="$1" key archive start
  key="$(image_key "$name")"
  archive="$(archive_path "$name" "$key")"
  if [[ -f "$archive" ]]; then
    log "$name: up to date ($(basename "$archive"))"
  else
    start=$SECONDS
    log "$name: building $(image_ref "$name") (inputs $key)"
    case "$name" in
      base | base-sid) build_base "$archive" "$name" ;;
      pause | busybox | exporter) build_scratch_image "$name" "$archive" ;;
      mariadb-tools | mariadb-tools-11.8 | mysql-tools | mariadb | mariadb-11.8 | mysql | operator)
        build_dockerfile_image "$name" "$archive" ;;
    esac
    log "$name: built in $((SECONDS - start))s"
    # Keep the three newest archives of an image (another checkout sharing this cache may be
    # using an older one right now); older ones go.
    ls -t "$IMAGES_DIR/$name"-????????????????.oci.tar | tail -n +4 | xargs -r rm -f --
  fi
  echo "$name $(image_ref "$name") $archive"
}

main() {
  local targets=("$@") t
  [[ ${#targets[@]} -gt 0 ]] || targets=(all)
  if [[ " ${targets[*]} " == *" all "* ]]; then targets=(base pause busybox exporter mariadb-tools mariadb-tools-11.8 mysql-tools mariadb mariadb-11.8 mysql operator); fi
  for t in "${targets[@]}"; do image_ref "$t" >/dev/null; done
  check_tools
  mkdir -p "$IMAGES_DIR" "$BUILDAH_ROOT" "$BUILDAH_RUNROOT"
  exec 9>"$IMAGES_DIR/.lock"
  flock 9  # one build at a time per cache (another session or the node tooling may be building)
  clean_work_dirs
  bah rm --all >/dev/null 2>&1 || true  # working containers of an interrupted build (private storage)
  for t in "${targets[@]}"; do build "$t"; done  # a Dockerfile image builds its base first
}

# An image's root file system, unpacked into a folder keyed like its archive: host-side tests run
# the servers in it with chroot (sid's binaries need sid's libc, never the host's).
unpack_rootfs() {  # $1: image name. Prints the folder.
  local name="$1" key dir c mnt
  main "$name" >/dev/null  # builds it if needed; holds the lock (fd 9) from here on
  key="$(image_key "$name")"
  dir="$IMAGES_DIR/rootfs/$name-$key"
  if [[ ! -f "$dir/.complete" ]]; then
    log "$name: unpacking its root file system into $dir"
    rm -rf --one-file-system "$dir.tmp"
    mkdir -p "$dir.tmp"
    c="$(bah from --pull=never "oci-archive:$(archive_path "$name" "$key")")"
    mnt="$(bah mount "$c")"
    tar -C "$mnt" --numeric-owner -cf - . | tar -C "$dir.tmp" --numeric-owner -xpf -
    bah umount "$c" >/dev/null
    bah rm "$c" >/dev/null
    bah rmi --prune >/dev/null 2>&1 || true
    touch "$dir.tmp/.complete"
    mv "$dir.tmp" "$dir"
    # Keep the three newest unpacked roots of this image, like the archives: another checkout
    # sharing this cache may be running servers from an older one right now (deleting every
    # other root once broke a clean-clone run's MySQL tests while a second checkout unpacked its own)
    ls -dt "$IMAGES_DIR/rootfs/$name"-???????????????? | tail -n +4 | xargs -r rm -rf --one-file-system --
  fi
  echo "$dir"
}

if [[ "${1:-}" == "--rootfs" ]]; then
  [[ $# -eq 2 ]] || die "usage: $0 --rootfs NAME"
  image_ref "$2" >/dev/null
  unpack_rootfs "$2"
  exit 0
fi
main "$@"
