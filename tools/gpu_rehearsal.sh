#!/usr/bin/env bash
# A rehearsal, HERE, of what tools/gpu_check.sh does first on a GPU machine: that machine has no
# package registry and none of the Debian packages tools/gpu_deps.sh carries, and the device tool
# copies the working tree without .git. This script makes a clean clone of HEAD, carries the
# packages into its .gpu-deps/ (tools/gpu_deps.sh), removes .git, and runs gpu_check.sh's
# configure, build and cpu-tests steps (ALLOW_NO_GPU=1) in a private mount namespace where the
# packages' folders here are hidden under empty tmpfs mounts, so every header, CMake package and
# the Fashion-MNIST files must come from .gpu-deps/. It cannot stand in for the GPU machine's
# CUDA toolkit, cuDNN from PyTorch's wheels, or the GPU itself.
#   tools/gpu_rehearsal.sh [STEP...]      default: configure build cpu-tests
# Needs root (unshare -m, mount) and about 15 minutes on 2 cores; works in /tmp/gpu-rehearsal.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${GPU_REHEARSAL_DIR:-/tmp/gpu-rehearsal}"
STEPS=("$@")
if [ ${#STEPS[@]} -eq 0 ]; then STEPS=(configure build cpu-tests); fi
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD)"

rm -rf "$WORK"
git clone --quiet "$ROOT" "$WORK"
"$WORK/tools/gpu_deps.sh" | tail -1
rm -rf "$WORK/.git"

# The folders of the carried packages (tools/gpu_deps.sh's BUNDLE) that CMake or the compiler
# would otherwise find here. Single files (zlib.h, libz.so) stay: .gpu-deps/ comes first on the
# search paths tools/gpu_env.sh sets, as it would on the GPU machine.
HIDDEN=(/usr/include/catch2 /usr/include/eigen3 /usr/include/nlohmann /usr/include/stb
  /usr/lib/cmake/Catch2 /usr/share/Catch2 /usr/share/eigen3 /usr/share/cmake/nlohmann_json
  /usr/share/datasets)
# shellcheck disable=SC2016  # the inner script expands its own arguments
unshare --mount --propagation private bash -c '
  set -euo pipefail
  work="$1"; commit="$2"; shift 2
  hidden=(); steps=()
  while [ "$1" != "--" ]; do hidden+=("$1"); shift; done; shift
  steps=("$@")
  for dir in "${hidden[@]}"; do [ -d "$dir" ] && mount -t tmpfs none "$dir"; done
  echo "hidden here: ${hidden[*]}"
  cd "$work"
  ALLOW_NO_GPU=1 GPU_CHECK_COMMIT="$commit" BUILD_DIR="$work/build-gpu" tools/gpu_check.sh "${steps[@]}"
' rehearsal "$WORK" "$COMMIT" "${HIDDEN[@]}" -- "${STEPS[@]}"
echo "log: $WORK/build-gpu/gpu-check/gpu-check-without-gpu-$COMMIT.md"
