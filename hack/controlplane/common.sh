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

# k8s.io/kubernetes v1.34.10 -> "34.10" (the staging modules are tagged v0.34.10).
KUBERNETES_MINOR_PATCH="${KUBERNETES_VERSION#v1.}"
KUBERNETES_MINOR="${KUBERNETES_MINOR_PATCH%%.*}"

log() { printf '[controlplane] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
