#!/usr/bin/env bash
# Builds the operator's OCI image with no base image from any registry (`make image`):
#
#   dist/image/image.tar           OCI image layout (plus Docker's manifest.json), as `docker save` writes
#                                  it since Docker 25: podman load, ctr images import, kind load
#                                  image-archive, skopeo copy oci-archive:, crane push all read it
#   dist/image/image.spdx.json     SPDX 2.3 SBOM: the Debian packages and Python distributions in it
#   dist/image/image.json          name, digests, sizes, build time (what the e2e tests read)
#
# 1. mmdebstrap (Debian's package) makes a root filesystem from Debian's mirror (versions.env): the
#    essential set plus DEBIAN_PACKAGES (python3, libstdc++6, ca-certificates, netbase);
# 2. inside it (chroot), the suite's own python3 makes a virtual environment /opt/kopf-scheduler and pip,
#    run from its wheel, installs the wheels of requirements.lock (--require-hashes, no index) and the
#    package's own wheel, built here from the checkout's files at the top and in operator/ (those git
#    does not ignore); the image's tag is that wheel's version;
# 3. slim.py removes every package not needed at run time (dpkg, shells and the other essential tools
#    too), documentation and caches, and adds the user nonroot (65532);
# 4. oci.py writes the layers (Debian, the dependencies, the package), config and manifest, sbom.py the
#    SBOM read back from the image's own layers, and skopeo (Debian's) inspects the archive as a check.
#
# Reproducible: SOURCE_DATE_EPOCH (default: the commit's time) is every timestamp, so two builds of the
# same commit from the same mirror content give the same digest (see docs/operations.md, The image).
# Downloads are cached outside the repository: ${KOPF_SCHEDULER_CACHE:-~/.cache/kopf-scheduler}/image
# (Debian packages, wheels, pip's HTTP cache, the build venv). Builder tools missing from the machine are
# installed with apt-get (as root): mmdebstrap, skopeo, and podman with runc and containerd to run the
# image in the e2e tests.
#
# Nothing is rebuilt when dist/image/image.json records the same inputs: the package's files, hack/image/
# and the commit time (--force rebuilds anyway, e.g. for Debian's security updates).
#
# Usage: build.sh [--out DIR] [--force] [--tools-only]
#   --out DIR     where image.tar and its companions go (default: dist/image in the checkout)
#   --force       build even when the image of the same inputs is there
#   --tools-only  install the builder and runner tools when missing, build nothing
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
out="$ROOT/dist/image"
tools_only=0
force=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --tools-only) tools_only=1; shift ;;
    --force) force=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

log() { printf '[image] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# versions.env: KEY=value lines
while IFS='=' read -r key value; do
  [[ -z $key || $key == \#* ]] && continue
  printf -v "$key" '%s' "$value"
done <"$HERE/versions.env"

# -- tools -----------------------------------------------------------------------------------------------

# command -> Debian package. mmdebstrap makes the root filesystem; skopeo checks the archive (and is
# how docs/operations.md pushes it); podman and runc run it in the e2e tests (crun, podman's default,
# refuses cgroup v1 hosts such as CI's: hack/image/containers.conf picks runc); containerd's ctr imports
# it there as kind does.
declare -A TOOLS=([mmdebstrap]=mmdebstrap [skopeo]=skopeo [podman]=podman [runc]=runc [chroot]=coreutils
  [ldconfig]=libc-bin [git]=git [containerd]=containerd [ctr]=containerd)
missing=()
for cmd in "${!TOOLS[@]}"; do
  PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null || missing+=("${TOOLS[$cmd]}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them (a Debian or Ubuntu host is needed)"
  [[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}: install them (apt-get install ${missing[*]}) or run as root"
  log "installing ${missing[*]} with apt-get"
  # an update first only when apt has no package lists yet (a fresh CI machine)
  if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then
    apt-get update -q >&2
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
fi
[[ $tools_only -eq 1 ]] && exit 0
export PATH="$PATH:/usr/sbin:/sbin"

# -- inputs ----------------------------------------------------------------------------------------------

started=$SECONDS
cache="${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}/image"
mkdir -p "$cache/debs" "$cache/pip" "$out"
exec 8>"$cache/.lock"
flock 8  # one build at a time per cache (the package cache and the build venv are shared)

host_python="${PYTHON:-python3}"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  revision="$(git -C "$ROOT" rev-parse HEAD)"
  export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct)}"
  # the working tree's files that git does not ignore: local changes and new files are built
  dirty="$(git -C "$ROOT" status --porcelain -- ':(top,glob)*' operator | head -1)"
  [[ -n $dirty ]] && revision="$revision-dirty"
else
  revision="unknown"
  export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-0}"
fi
# The package's files (those at the top and in operator/ that git does not ignore, as they are in the
# working tree), hack/image/ and the commit time: what the image is made of, besides Debian's mirror.
source_files() {
  if [[ $revision != unknown ]]; then
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard -- ':(top,glob)*' operator |
      while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done)  # not deleted in the tree
  else
    (cd "$ROOT" && find . -maxdepth 1 -type f -printf '%P\0' && find operator -type f ! -name '*.pyc' -print0)
  fi
}
inputs="$( (cd "$ROOT" && source_files | sort -z | xargs -0 sha256sum
  find hack/image -maxdepth 1 -type f -print0 | sort -z | xargs -0 sha256sum
  echo "$SOURCE_DATE_EPOCH $revision") | sha256sum | cut -c1-16)"
if [[ $force -eq 0 && -f $out/image.tar && -f $out/image.json ]] && grep -q "\"inputs\": \"$inputs\"" "$out/image.json"; then
  log "up to date: $out/image.tar (inputs $inputs; --force rebuilds)"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || die "mmdebstrap's root mode and chroot need root (CI runs as root)"
log "building the image of revision $revision (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH, inputs $inputs)"

work="$(mktemp -d "$cache/.build.XXXXXX")"
cleanup() {
  # mmdebstrap unmounts what it mounted; a build interrupted in the chroot may leave /proc mounted
  for m in $(awk -v w="$work" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" || true; done
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"
export PIP_CACHE_DIR="$cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_FIND_LINKS=

# -- the wheels ------------------------------------------------------------------------------------------

# The package's own wheel, built with the locked setuptools and wheel (no build isolation: nothing
# unpinned is fetched) from the files git would track (no caches, no build output).
build_venv="$cache/build-venv-$(sha256sum "$HERE/tools.lock" | cut -c1-12)"
if [[ ! -x $build_venv/bin/python ]]; then
  log "making the build venv $build_venv"
  rm -rf "$build_venv.tmp"
  "$host_python" -m venv "$build_venv.tmp"
  "$build_venv.tmp/bin/python" -m pip install -q --require-hashes --no-deps -r "$HERE/tools.lock"
  mv "$build_venv.tmp" "$build_venv"
fi
mkdir -p "$work/src" "$work/in/wheels" "$work/in/project" "$work/in/tools"
(cd "$ROOT" && source_files | xargs -0 cp --parents -t "$work/src")
log "building the kopf-scheduler wheel"
(cd "$work/src" && "$build_venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$work/in/project" .) \
  >"$work/wheel.log" 2>&1 || { cat "$work/wheel.log" >&2; die "the package's wheel did not build"; }
rm -rf "$work/src"
# the version is the package's, as its wheel's metadata has it
wheel_file="$(cd "$work/in/project" && ls kopf_scheduler-*.whl)"
version="$(cut -d- -f2 <<<"$wheel_file")"
image_ref="$IMAGE_REPOSITORY:$version"
log "$wheel_file -> $image_ref"

# The locked wheels for the image's platform (cached per lock file: pip reuses what is there).
read -r -a platform < <("$host_python" "$HERE/lock.py" --platform-args)
wheels="$cache/wheels-$(sha256sum "$HERE/requirements.lock" | cut -c1-12)"
log "downloading the locked wheels into $wheels"
"$build_venv/bin/python" -m pip download -q --no-deps --require-hashes "${platform[@]}" \
  -r "$HERE/requirements.lock" -d "$wheels" >&2
"$build_venv/bin/python" -m pip download -q --no-deps --require-hashes -r <(grep -A1 '^pip==' "$HERE/tools.lock") \
  -d "$work/in/tools" >&2
cp "$wheels"/*.whl "$work/in/wheels/"
cp "$HERE/requirements.lock" "$work/in/"

# -- the root filesystem ---------------------------------------------------------------------------------

log "mmdebstrap $DEBIAN_SUITE ($DEBIAN_PACKAGES)"
rootfs="$work/rootfs"
# The packages mmdebstrap downloads are kept in $cache/debs between builds (sync-in before, sync-out
# after); /etc/resolv.conf and /etc/hostname, copied from the host, are removed by slim.py.
mmdebstrap --mode=root --variant=essential --arch="$ARCH" --include="$DEBIAN_PACKAGES" \
  --skip=essential/unlink \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
  --setup-hook="sync-in '$cache/debs' /var/cache/apt/archives/" \
  --customize-hook="'$HERE/install.sh' \"\$1\" '$work/in'" \
  --customize-hook="sync-out /var/cache/apt/archives '$cache/debs'" \
  "$DEBIAN_SUITE" "$rootfs" \
  "deb $DEBIAN_MIRROR $DEBIAN_SUITE main" \
  "deb $DEBIAN_MIRROR $DEBIAN_SUITE-updates main" \
  "deb $DEBIAN_SECURITY_MIRROR $DEBIAN_SUITE-security main" >"$work/mmdebstrap.log" 2>&1 ||
  { tail -40 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
# keep the cache to what the builds use: packages fetched within a month, the current locks' wheels and venv
find "$cache/debs" -name '*.deb' -mtime +30 -delete 2>/dev/null || true
find "$cache" -maxdepth 1 \( -name 'wheels-*' ! -name "${wheels##*/}" -o -name 'build-venv-*' ! -name "${build_venv##*/}" \) \
  -exec rm -rf {} + 2>/dev/null || true

log "mmdebstrap done after $((SECONDS - started)) s; slimming"
"$host_python" "$HERE/slim.py" "$rootfs" --keep "$DEBIAN_PACKAGES" --uid "$IMAGE_UID" >&2
# the dynamic loader's cache, for the libraries that are left (ldconfig itself is not)
ldconfig -r "$rootfs" -f /etc/ld.so.conf.d/x86_64-linux-gnu.conf -C /etc/ld.so.cache
rm -rf "$rootfs/var/cache"
# What is left must run: every shared object of the wheels loads (its libraries are there) and the
# package's modules import, in the root filesystem as it will be shipped.
env -i PYTHONDONTWRITEBYTECODE=1 "$(command -v chroot)" "$rootfs" /opt/kopf-scheduler/bin/python -c '
import ctypes, importlib, pathlib, sys
failed = []
for so in sorted(pathlib.Path(sys.prefix).rglob("*.so*")):
    try:
        ctypes.CDLL(str(so))
    except OSError as e:
        failed.append(str(e))
if failed:
    sys.exit("shared objects that do not load:\n" + "\n".join(failed))
import kopf_scheduler, pkgutil
for module in pkgutil.walk_packages(kopf_scheduler.__path__, "kopf_scheduler."):
    if not module.name.endswith("__main__"):
        importlib.import_module(module.name)
' || die "the root filesystem does not run the package"

# -- the image -------------------------------------------------------------------------------------------

log "writing the image ($((SECONDS - started)) s so far)"
"$host_python" "$HERE/oci.py" "$rootfs" "$out/image.tar" --name "$image_ref" --version "$version" \
  --revision "$revision" --uid "$IMAGE_UID" --python-version "$PYTHON_VERSION" \
  --debian-suite "$DEBIAN_SUITE" --json "$out/image.json.tmp" >&2
"$host_python" "$HERE/sbom.py" "$out/image.tar" --name "$image_ref" -o "$out/image.spdx.json" >&2
skopeo inspect --raw "oci-archive:$out/image.tar" >/dev/null || die "skopeo cannot read $out/image.tar"
seconds=$((SECONDS - started))
"$host_python" - "$out/image.json.tmp" "$seconds" "$inputs" <<'EOF'
import json, sys
path, seconds, inputs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = json.load(open(path))
data["build_seconds"] = seconds
data["inputs"] = inputs
json.dump(data, open(path, "w"), indent=2, sort_keys=True)
EOF
mv "$out/image.json.tmp" "$out/image.json"
log "built $image_ref in ${seconds} s: $out/image.tar"
log "digest $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' "$out/image.json")"
