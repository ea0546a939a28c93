#!/usr/bin/env bash
# Builds scheduler-plugins' kube-scheduler (sigs.k8s.io/scheduler-plugins/cmd/scheduler: the upstream
# scheduler with Coscheduling and the other out-of-tree plugins registered) from the Go module proxy into a
# cache outside the repository, for the e2e tests that run gangs through it beside kopf-scheduler:
#
#   ${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/scheduler-plugins/<key>/
#     bin/kube-scheduler        the binary (named as upstream's image names it)
#     go.mod, go.sum            the wrapper module it was built from, for the record
#
# Nothing is committed for it: the wrapper module is written into the build directory from versions.env
# (SCHEDULER_PLUGINS_VERSION; SCHEDULER_PLUGINS_KUBERNETES_VERSION's tags replace every k8s.io staging
# module and k8s.io/kubernetes, with the list of staging modules taken from that release's own go.mod as
# the proxy serves it) and tidied there, every checksum verified against the checksum database as the
# go command does by default. <key> names the versions and the Go version and hashes the wrapper's
# requirements, replacements and link flags, so changing a pin builds a new directory and an unchanged key
# costs nothing (nothing is downloaded or compiled then). The build goes to a temporary directory renamed
# into place when complete; on success the bin path is written to scheduler-plugins/current, which the
# e2e tests read. build.sh runs this script after the control plane, so `make controlplane` (and
# `make test`) build it.
#
# Usage: build-scheduler-plugins.sh [--force]
#   --force  rebuild even when the cached binary exists
set -euo pipefail
source "$(dirname "$0")/common.sh"

parse_force_option "$@"

: "${SCHEDULER_PLUGINS_VERSION:?not set in versions.env}"
: "${SCHEDULER_PLUGINS_SAMPLE_APISERVER_VERSION:?not set in versions.env}"
: "${SCHEDULER_PLUGINS_KUBERNETES_VERSION:?not set in versions.env}"
# The Kubernetes release scheduler-plugins builds against (its own minor), not the control plane's.
K8S_VERSION="$SCHEDULER_PLUGINS_KUBERNETES_VERSION"
K8S_MINOR_PATCH="${K8S_VERSION#v1.}"
K8S_MINOR="${K8S_MINOR_PATCH%%.*}"
plugins_minor="${SCHEDULER_PLUGINS_VERSION#v0.}"
plugins_minor="${plugins_minor%%.*}"
[[ $plugins_minor == "$K8S_MINOR" ]] ||
  die "scheduler-plugins $SCHEDULER_PLUGINS_VERSION is for Kubernetes 1.$plugins_minor, not $K8S_VERSION"

BINARY=kube-scheduler
MODULE=sigs.k8s.io/scheduler-plugins
cache_root="${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/scheduler-plugins"
go_version="$(go env GOVERSION)"
# Stamped as build.sh stamps kube-scheduler: the Kubernetes release it is built from. Not as upstream's
# Makefile does (`-X k8s.io/component-base/version.gitVersion=$(VERSION)`, v0.34.7): Kubernetes 1.34
# derives the binary's version for its compatibility checks from gitVersion, and with 0.34 the scheduler
# refuses to start ("emulation version 0.34 is not between [1.31, 0.34.0]").
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1"
  ldflags+=" -X $pkg.gitMinor=$K8S_MINOR -X $pkg.gitTreeState=clean"
done

staging_modules() {  # the k8s.io staging modules of K8S_VERSION, from the go.mod the proxy serves
  local json mod
  json="$(cd "$(mktemp -d)" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION")" ||
    die "go mod download k8s.io/kubernetes@$K8S_VERSION failed: $json"
  mod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
  sed -n 's/^[[:space:]]*\(k8s\.io\/[A-Za-z0-9._-]*\) => \.\/staging\/.*$/\1/p' "$mod" | sort
}

wrapper_requirements() {  # the wrapper's go.mod after its `go` line, before tidying (keys the cache)
  local staging m version
  mapfile -t staging < <(staging_modules)
  [[ ${#staging[@]} -gt 0 ]] || die "no staging replace directives in k8s.io/kubernetes@$K8S_VERSION's go.mod"
  echo "require $MODULE $SCHEDULER_PLUGINS_VERSION"
  echo
  echo "replace ("
  printf '\tk8s.io/kubernetes => k8s.io/kubernetes %s\n' "$K8S_VERSION"
  for m in "${staging[@]}"; do
    version="v0.$K8S_MINOR_PATCH"
    [[ $m != k8s.io/sample-apiserver ]] || version="$SCHEDULER_PLUGINS_SAMPLE_APISERVER_VERSION"
    printf '\t%s => %s %s\n' "$m" "$m" "$version"
  done
  echo ")"
  echo
  echo "tool $MODULE/cmd/scheduler"
}

requirements="$(wrapper_requirements)"
wrapper_hash="$(printf '%s\n%s\n' "$requirements" "$ldflags" | sha256sum | cut -c1-12)"
key="sp-${SCHEDULER_PLUGINS_VERSION}_k8s-${K8S_VERSION}_${go_version}_${wrapper_hash}"
dest="$cache_root/$key"

mkdir -p "$cache_root"
exec 8>"$cache_root/.lock"
flock 8
rm -rf "$cache_root"/.build-*

if [[ $force -eq 0 && -x $dest/bin/$BINARY ]]; then
  point_current_at "$dest/bin"
  log "up to date: $dest/bin/$BINARY"
  echo "$dest/bin"
  exit 0
fi

started=$SECONDS
tmp="$(mktemp -d "$cache_root/.build-$key.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir "$tmp/bin" "$tmp/src"
log "building $MODULE $SCHEDULER_PLUGINS_VERSION against $K8S_VERSION ($go_version) into $tmp"
# The wrapper's `go` line is scheduler-plugins' own (from the go.mod the proxy serves, downloaded and
# verified).
json="$(cd "$tmp/src" && go mod download -json "$MODULE@$SCHEDULER_PLUGINS_VERSION")" ||
  die "go mod download $MODULE@$SCHEDULER_PLUGINS_VERSION failed: $json"
upstream_mod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
go_line="$(sed -n '/^go /{s/^go //p;q}' "$upstream_mod" 2>/dev/null)" || true
[[ -n $go_line ]] || die "no go line in the go.mod of $MODULE@$SCHEDULER_PLUGINS_VERSION: $json"
{
  echo "// Wrapper module that builds $MODULE/cmd/scheduler $SCHEDULER_PLUGINS_VERSION against Kubernetes"
  echo "// $K8S_VERSION. Generated by hack/controlplane/build-scheduler-plugins.sh from versions.env."
  echo "module kopf-scheduler.invalid/controlplane/scheduler-plugins"
  echo
  echo "go $go_line"
  echo
  printf '%s\n' "$requirements"
} >"$tmp/src/go.mod"
(
  cd "$tmp/src"
  t0=$SECONDS
  go mod tidy
  log "go mod tidy in $((SECONDS - t0)) s"
  t0=$SECONDS
  go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/$BINARY" "$MODULE/cmd/scheduler"
  log "built $BINARY in $((SECONDS - t0)) s"
)
mv "$tmp/src/go.mod" "$tmp/src/go.sum" "$tmp/"
rmdir "$tmp/src"
"$tmp/bin/$BINARY" --version >&2

rm -rf "$dest"
mv -T "$tmp" "$dest"
trap - EXIT
point_current_at "$dest/bin"
log "built in $((SECONDS - started)) s; $(du -sh "$dest" | cut -f1) in $dest"
echo "$dest/bin"
