#!/usr/bin/env bash
# Builds crane (github.com/google/go-containerregistry/cmd/crane, CRANE_VERSION in versions.env) from the
# Go module proxy into the cache, for the e2e check that `crane push` takes the image archive
# (tests/e2e/test_image_archive.py: `crane registry serve` is the registry it pushes to). Debian has no
# crane; `go install module@version` verifies every module against the checksum database. Prints the
# binary's path; a no-op when it is built.
#
# Usage: build-crane.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(sed -n 's/^CRANE_VERSION=//p' "$HERE/versions.env")"
cache="${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/image"
command -v go >/dev/null || { echo "build-crane.sh: Go is needed (as for make controlplane)" >&2; exit 1; }
dest="$cache/crane-$version-$(go env GOVERSION)"
if [[ ! -x $dest/crane ]]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.crane.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # the configured proxies without `direct` (nothing but the module proxy is reachable), as for helm
  proxy="$(go env GOPROXY | tr ',|' '\n\n' | grep -vx -e direct -e '' | paste -sd, -)"
  GOBIN="$tmp" GOTOOLCHAIN=local CGO_ENABLED=0 GOPROXY="${proxy:-https://proxy.golang.org}" \
    go install -trimpath -ldflags='-s -w' "github.com/google/go-containerregistry/cmd/crane@$version" >&2
  rm -rf "$dest"
  mv "$tmp" "$dest"
  chmod 755 "$dest"
fi
echo "$dest/crane"
