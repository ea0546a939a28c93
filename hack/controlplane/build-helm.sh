#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3/cmd/helm) from the Go module proxy into a cache outside the repository,
# for the chart checks of the e2e tests (helm lint, helm template | kubectl apply --dry-run=server):
#
#   ${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/helm/<key>/bin/helm
#
# `go install module@version` builds from helm's own go.mod and go.sum (every checksum verified against
# the checksum database, as the go command does by default); nothing is committed for it. <key> names the
# helm, Kubernetes and Go versions, so an unchanged key costs nothing. The build goes to a temporary directory renamed into place when complete; on success the
# bin path is written to helm/current, which the e2e tests read. build.sh runs this script, so
# `make controlplane` (and `make test`) build it.
#
# Usage: build-helm.sh [--force]
#   --force  rebuild even when the cached binary exists
set -euo pipefail
source "$(dirname "$0")/common.sh"

parse_force_option "$@"

: "${HELM_VERSION:?not set in versions.env}"
cache_root="${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/helm"
go_version="$(go env GOVERSION)"
key="helm-${HELM_VERSION}_k8s-1.${KUBERNETES_MINOR}_${go_version}"
dest="$cache_root/$key"

mkdir -p "$cache_root"
exec 7>"$cache_root/.lock"
flock 7
rm -rf "$cache_root"/.build-*

if [[ $force -eq 0 && -x $dest/bin/helm ]]; then
  point_current_at "$dest/bin"
  log "up to date: $dest/bin/helm"
  echo "$dest/bin"
  exit 0
fi

started=$SECONDS
tmp="$(mktemp -d "$cache_root/.build-$key.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
log "building helm $HELM_VERSION ($go_version) into $tmp"
# Stamped as helm's Makefile stamps it: its version (else `helm version` says v3.N only) and the
# Kubernetes version charts are checked against when no cluster is asked (else v1.20, and a chart with
# kubeVersion >=1.31 is refused by `helm template`): the Kubernetes minor of versions.env, which helm
# v3.19's client libraries are.
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$KUBERNETES_MINOR"
done
(cd "$tmp" && GOBIN="$tmp/bin" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
"$tmp/bin/helm" version --short >&2

rm -rf "$dest"
mv -T "$tmp" "$dest"
trap - EXIT
point_current_at "$dest/bin"
log "built in $((SECONDS - started)) s; $(du -sh "$dest" | cut -f1) in $dest"
echo "$dest/bin"
