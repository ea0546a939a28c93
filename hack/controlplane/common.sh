# Shared by build.sh and regen.sh (sourced, not executed): pinned versions and the Go environment.
# shellcheck shell=bash

CONTROLPLANE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$CONTROLPLANE_DIR/versions.env"

# Never let a `go`/`toolchain` line download another Go: build with the installed one.
export GOTOOLCHAIN=local
export CGO_ENABLED=0

# A module missing from the proxy must fail at once instead of falling back to cloning from a VCS host
# (`direct`), which cannot work here and would only hang. Keep the configured proxies minus `direct`.
_goproxy="$(go env GOPROXY)"
_goproxy="$(tr ',|' '\n\n' <<<"$_goproxy" | grep -vx -e direct -e '' | paste -sd, -)"
export GOPROXY="${_goproxy:-https://proxy.golang.org}"
unset _goproxy

# k8s.io/kubernetes v1.37.2 -> "37.2" (the staging modules are tagged v0.37.2).
KUBERNETES_MINOR_PATCH="${KUBERNETES_VERSION#v1.}"
KUBERNETES_MINOR="${KUBERNETES_MINOR_PATCH%%.*}"

log() { printf '[controlplane] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Writes the one-line pointer file $cache_root/current (the caller's cache root) naming the complete bin
# directory $1, atomically: readers never see it half-written.
point_current_at() {
  printf '%s\n' "$1" >"$cache_root/current.tmp.$$"
  mv -f "$cache_root/current.tmp.$$" "$cache_root/current"
}

# The options of a build script that has no other: --force (sets force=1) and --help (its header).
parse_force_option() {
  force=0
  local arg
  for arg in "$@"; do
    case "$arg" in
      --force) force=1 ;;
      -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
      *) die "unknown argument: $arg (see --help)" ;;
    esac
  done
}
