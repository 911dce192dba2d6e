#!/usr/bin/env bash
# Shared set-up for ./run.sh and ./test.sh: install missing Debian packages (once), find nvcc,
# configure and build. Sourced, not executed. Honors:
#   BUILD_DIR      build directory (default: build)
#   ENGINE_CUDA    AUTO | ON | OFF (default AUTO: CUDA kernels are compiled when nvcc is found)
#   BUILD_TYPE     CMake build type (default Release)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
ENGINE_CUDA="${ENGINE_CUDA:-AUTO}"
BUILD_TYPE="${BUILD_TYPE:-Release}"

# Debian packages the build, the tests and the default dataset need.
PACKAGES=(cmake make g++ clang-format catch2 libeigen3-dev nlohmann-json3-dev zlib1g-dev libstb-dev
          dataset-fashion-mnist)

install_missing_packages() {
  local missing=()
  for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return
  fi
  echo "==> installing missing Debian packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      echo "error: missing packages (${missing[*]}) and not root; install them and re-run" >&2
      exit 1
    fi
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

find_nvcc() {
  # The CUDA toolkit is not a Debian package here; it lives in /usr/local/cuda when present.
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
}

configure_and_build() {  # [targets...]: all by default
  local jobs
  jobs="$(nproc 2>/dev/null || echo 2)"
  echo "==> configuring $BUILD_DIR (ENGINE_CUDA=$ENGINE_CUDA, $BUILD_TYPE)"
  cmake -S "$ROOT" -B "$BUILD_DIR" -DENGINE_CUDA="$ENGINE_CUDA" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    > "$BUILD_DIR.configure.log" 2>&1 || { cat "$BUILD_DIR.configure.log"; exit 1; }
  grep -E "ENGINE_CUDA=" "$BUILD_DIR.configure.log" || true
  echo "==> building ${*:-everything} with $jobs jobs"
  if [ $# -gt 0 ]; then
    cmake --build "$BUILD_DIR" -j "$jobs" --target "$@"
  else
    cmake --build "$BUILD_DIR" -j "$jobs"
  fi
}

# For tools/cuda_emulator_{asan,racecheck}.sh: configures $BUILD_DIR without nvcc, with the
# given CMake arguments, builds every test program that runs [cuda] cases on the emulator (plus
# `dml`, which tools.emulated.* compare with), and enters $BUILD_DIR. $1 says how, for the log.
build_emulated_test_programs() {  # DESCRIPTION CMAKE_ARGS...
  local description=$1 jobs targets
  shift
  jobs="$(nproc 2>/dev/null || echo 2)"
  cmake -S "$ROOT" -B "$BUILD_DIR" -DENGINE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" \
    > "$BUILD_DIR.configure.log" 2>&1 || { cat "$BUILD_DIR.configure.log"; exit 1; }
  targets=$(cmake --build "$BUILD_DIR" --target help |
    sed -n 's/^\.\.\. \(.*_test_emulated\)$/\1/p; s/^\(.*_test_emulated\): .*/\1/p')
  targets="emulator_test $targets dml dml_emulated"
  echo "==> building $(echo $targets | wc -w) test programs, $description"
  # shellcheck disable=SC2086
  cmake --build "$BUILD_DIR" -j "$jobs" --target $targets
  cd "$BUILD_DIR"
}

mkdir -p "$(dirname "$BUILD_DIR")"
install_missing_packages
find_nvcc
