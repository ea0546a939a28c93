#!/usr/bin/env bash
# Builds the local control plane (kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, etcd,
# etcdctl) from the Go module proxy into a cache outside the repository:
#
#   ${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/controlplane/<key>/bin
#
# <key> names the Kubernetes and etcd versions, the Go version and a hash of the wrapper go.mod/go.sum
# files, so any change to them builds a new directory and an unchanged key costs nothing. The binaries are
# built into a temporary directory that is renamed into place only when all of them exist, so an
# interrupted build never looks complete. On success the bin path is written to controlplane/current,
# which the Python side (kopf_scheduler.devcluster) reads.
#
# Then it runs build-scheduler-plugins.sh (its own cache directory and key): scheduler-plugins'
# kube-scheduler with Coscheduling, which the gang e2e tests run beside kopf-scheduler; build-helm.sh:
# helm, for the chart checks; and build-previous.sh: kube-apiserver and kube-scheduler of the previous
# minor, for the e2e test of gates taken from the API server's version.
#
# Usage: build.sh [--regen] [--force]
#   --regen  rewrite kube/ and etcd/ go.mod + go.sum from versions.env first (see regen.sh)
#   --force  rebuild even when the cached bin directory (and scheduler-plugins' binary) is complete
set -euo pipefail
source "$(dirname "$0")/common.sh"

regen=0 force=0
for arg in "$@"; do
  case "$arg" in
    --regen) regen=1 ;;
    --force) force=1 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown argument: $arg (see --help)" ;;
  esac
done
[[ $regen -eq 0 ]] || "$CONTROLPLANE_DIR/regen.sh"

BINARIES=(kube-apiserver kube-scheduler kube-controller-manager kubectl etcd etcdctl)
cache_root="${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/controlplane"
go_version="$(go env GOVERSION)"
wrapper_hash="$(cat "$CONTROLPLANE_DIR"/kube/go.mod "$CONTROLPLANE_DIR"/kube/go.sum \
  "$CONTROLPLANE_DIR"/etcd/go.mod "$CONTROLPLANE_DIR"/etcd/go.sum | sha256sum | cut -c1-12)"
key="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_${go_version}_${wrapper_hash}"
dest="$cache_root/$key"

complete() {  # dir -> true when every binary is there and executable
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$1/bin/$b" ]] || return 1; done
}

build_scheduler_plugins() {  # and helm; their stdout (their bin paths) would mix with ours (this build's)
  local args=()
  [[ $force -eq 0 ]] || args+=(--force)
  "$CONTROLPLANE_DIR/build-scheduler-plugins.sh" "${args[@]}" >/dev/null
  "$CONTROLPLANE_DIR/build-helm.sh" "${args[@]}" >/dev/null
  "$CONTROLPLANE_DIR/build-previous.sh" "${args[@]}" >/dev/null
}

mkdir -p "$cache_root"
# One build at a time per cache; a second caller waits and then finds the directory complete.
exec 9>"$cache_root/.lock"
flock 9
# Leftovers of builds that were killed (the lock proves nobody is using them).
rm -rf "$cache_root"/.build-*

if [[ $force -eq 0 ]] && complete "$dest"; then
  point_current_at "$dest/bin"
  log "up to date: $dest/bin"
  build_scheduler_plugins
  echo "$dest/bin"
  exit 0
fi

started=$SECONDS
tmp="$(mktemp -d "$cache_root/.build-$key.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir "$tmp/bin"
log "building $key (Go $go_version, GOPROXY=$GOPROXY) into $tmp"

# Version stamps: without them the binaries report v0.0.0-master+$Format:%H$.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1"
  ldflags+=" -X $pkg.gitMinor=$KUBERNETES_MINOR -X $pkg.gitTreeState=clean"
done

build_one() {  # module dir, output name, package [, ldflags]
  local t0=$SECONDS
  log "go build $3 -> $2"
  (cd "$CONTROLPLANE_DIR/$1" && go build -trimpath -ldflags "${4:--s -w}" -o "$tmp/bin/$2" "$3")
  log "built $2 in $((SECONDS - t0)) s"
}

# The wrapper go.mod/go.sum are committed and complete, so the default -mod=readonly is enough: a
# missing checksum is an error (run regen.sh) rather than a silent edit.
build_one kube kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build_one kube kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"
build_one kube kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
build_one kube kubectl k8s.io/kubernetes/cmd/kubectl "$ldflags"
build_one etcd etcd go.etcd.io/etcd/server/v3
build_one etcd etcdctl go.etcd.io/etcd/etcdctl/v3

complete "$tmp" || die "build finished but binaries are missing in $tmp/bin"
"$tmp/bin/kube-apiserver" --version >&2
# sed, not head: head exits after one line, and etcd, writing its next line into the closed pipe, dies of
# SIGPIPE, which pipefail turns into a failed build (seen on a loaded machine, after a 56-minute build).
"$tmp/bin/etcd" --version | sed -n 1p >&2

rm -rf "$dest"
mv -T "$tmp" "$dest"
trap - EXIT
point_current_at "$dest/bin"
log "built in $((SECONDS - started)) s; $(du -sh "$dest" | cut -f1) in $dest"
build_scheduler_plugins
echo "$dest/bin"
