#!/usr/bin/env bash
# Run HERE (the build machine): copies the Debian packages the build needs into .gpu-deps/
# (git-ignored), so that a GPU machine without a package registry can build the project.
# Pass the folder to the device tool's `carry` and run tools/gpu_check.sh there.
#   tools/gpu_deps.sh [--with-data]    (--with-data adds Fashion-MNIST, ~30 MB)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/.gpu-deps"
source "$ROOT/scripts/setup.sh"  # installs the project's packages here if missing
BUNDLE=(catch2 libeigen3-dev nlohmann-json3-dev libstb-dev libstb0 zlib1g-dev)
if [ "${1:-}" = "--with-data" ]; then BUNDLE+=(dataset-fashion-mnist); fi
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
