#!/bin/sh
# mmdebstrap customize hook (build.sh): installs the operator into the root filesystem ROOTFS with the
# root filesystem's own python3, from the wheels in INPUT (wheels/, project/, tools/pip-*.whl and
# requirements.lock), with no index and every dependency's hash checked.
#
#   /opt/kopf-scheduler    a virtual environment (--without-pip: Debian's python3 has no ensurepip, and
#                          the image gets no installer); pip runs from its wheel file and is not installed
#
# Bytecode is compiled once here, at the end (nothing before writes any: PYTHONDONTWRITEBYTECODE, since
# the import system's own cache files carry the sources' mtimes), unchecked-hash (the image is immutable:
# Python never stats the sources nor writes __pycache__ on a read-only root filesystem), in one process
# and a fixed order, so that two builds write the same bytes.
#
# Usage: install.sh ROOTFS INPUT
set -eu
rootfs=$1
input=$2
rm -rf "$rootfs/tmp/in"
cp -r "$input" "$rootfs/tmp/in"
in_chroot() {
  chroot "$rootfs" /usr/bin/env -i PATH=/usr/bin LC_ALL=C.UTF-8 PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 \
    SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 "$@"
}
pip_wheel=$(cd "$rootfs/tmp/in/tools" && ls pip-*.whl)
pip="/tmp/in/tools/$pip_wheel/pip"
venv=/opt/kopf-scheduler
in_chroot /usr/bin/python3 -m venv --without-pip "$venv"
in_chroot "$venv/bin/python" "$pip" install -q --no-index --find-links /tmp/in/wheels --require-hashes \
  --no-compile -r /tmp/in/requirements.lock
in_chroot "$venv/bin/python" "$pip" install -q --no-index --find-links /tmp/in/project --no-deps \
  --no-compile kopf-scheduler
in_chroot "$venv/bin/python" "$pip" check
in_chroot "$venv/bin/python" -m compileall -q -f --invalidation-mode unchecked-hash "$venv/lib"
in_chroot "$venv/bin/kopf-scheduler" --help >/dev/null
rm -rf "$rootfs/tmp/in"
