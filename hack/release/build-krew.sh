#!/usr/bin/env bash
# Builds krew (sigs.k8s.io/krew/cmd/krew, KREW_VERSION below) from the Go module proxy into the cache, for
# the e2e check that `kubectl krew install --manifest=... --archive=...` installs the plugin `make release`
# builds (tests/e2e/test_readme_install.py). `go install module@version` verifies every module against
# the checksum database. Prints the binary's path (named kubectl-krew, as kubectl finds it); a no-op when
# it is built.
#
# Usage: build-krew.sh
set -euo pipefail
KREW_VERSION=v0.4.3  # the newest sigs.k8s.io/krew on the module proxy
cache="${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/release"
command -v go >/dev/null || { echo "build-krew.sh: Go is needed (as for make controlplane)" >&2; exit 1; }
dest="$cache/krew-$KREW_VERSION-$(go env GOVERSION)"
if [[ ! -x $dest/kubectl-krew ]]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.krew.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # the configured proxies without `direct` (nothing but the module proxy is reachable), as for crane
  proxy="$(go env GOPROXY | tr ',|' '\n\n' | grep -vx -e direct -e '' | paste -sd, -)"
  GOBIN="$tmp" GOTOOLCHAIN=local CGO_ENABLED=0 GOPROXY="${proxy:-https://proxy.golang.org}" \
    go install -trimpath -ldflags='-s -w' "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" >&2
  mv "$tmp/krew" "$tmp/kubectl-krew"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  chmod 755 "$dest"
  trap - EXIT
fi
echo "$dest/kubectl-krew"
