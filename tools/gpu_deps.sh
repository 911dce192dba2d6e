#!/usr/bin/env bash
# Run HERE (the build machine): copies the Debian packages the build needs into .gpu-deps/
# (git-ignored), so that a GPU machine without a package registry can build the project.
# Pass the folder to the device tool's `carry` and run tools/gpu_check.sh there.
#   tools/gpu_deps.sh [--without-data]
# Fashion-MNIST (~30 MB) comes along unless --without-data: tools/gpu_check.sh trains on it and
# the data tests read it (tools/gpu_env.sh links it where the Debian package would put it). With
# it the device tool's working tree is about 55 MB of its 64 MiB.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/.gpu-deps"
source "$ROOT/scripts/setup.sh"  # installs the project's packages here if missing
# Protobuf (TensorBoard files) stays out: it would add 12 MB and push the upload with the data past
# the device tool's 64 MiB; dml builds without it there (CMakeLists.txt, dml_tensorboard).
BUNDLE=(catch2 libeigen3-dev nlohmann-json3-dev libstb-dev libstb0 zlib1g-dev)
case "${1:-}" in
  "") BUNDLE+=(dataset-fashion-mnist) ;;
  --without-data) ;;
  *) echo "usage: tools/gpu_deps.sh [--without-data]" >&2; exit 2 ;;
esac
rm -rf "$DEST"
mkdir -p "$DEST"
for pkg in "${BUNDLE[@]}"; do
  dpkg -L "$pkg" | while read -r path; do
    [ -f "$path" ] || continue                   # files (and symlinks to files) only
    case "$path" in /usr/share/doc/*|/usr/share/man/*|/usr/share/lintian/*|/usr/share/locale/*) continue ;; esac
    mkdir -p "$DEST$(dirname "$path")"
    cp -L "$path" "$DEST$path"                   # dereference: absolute symlinks would break
  done
done
du -sh "$DEST"
echo "now: run tools/gpu_check.sh on the GPU machine with carry=[\".gpu-deps\"]"
