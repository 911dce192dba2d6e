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
          dataset-fashion-mnist libprotobuf-dev protobuf-compiler
          openmpi-bin libopenmpi-dev)  # openmpi: runs over several ranks (docs/distributed.md)

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

# AddressSanitizer and UBSan (UB fatal), for tools/cpu_asan.sh and tools/cuda_emulator_asan.sh.
ASAN_UBSAN_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

# The targets of the configured $BUILD_DIR whose names end in SUFFIX (Make's or Ninja's listing).
targets_ending_in() {  # SUFFIX
  cmake --build "$BUILD_DIR" --target help |
    sed -n "s/^\.\.\. \(.*$1\)\$/\1/p; s/^\(.*$1\): .*/\1/p"
}

# For the sanitizer and race-checker scripts in tools/: configures $BUILD_DIR without nvcc, with
# the given CMake arguments, builds every test program whose name ends in SUFFIX plus the
# programs named in EXTRA, and enters $BUILD_DIR. DESCRIPTION says how, for the log.
build_test_programs_without_cuda() {  # SUFFIX EXTRA DESCRIPTION CMAKE_ARGS...
  local suffix=$1 extra=$2 description=$3 jobs targets
  shift 3
  jobs="$(nproc 2>/dev/null || echo 2)"
  cmake -S "$ROOT" -B "$BUILD_DIR" -DENGINE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" \
    > "$BUILD_DIR.configure.log" 2>&1 || { cat "$BUILD_DIR.configure.log"; exit 1; }
  targets="$(targets_ending_in "$suffix") $extra"
  echo "==> building $(echo $targets | wc -w) programs, $description"
  # shellcheck disable=SC2086
  cmake --build "$BUILD_DIR" -j "$jobs" --target $targets
  cd "$BUILD_DIR"
}

# For tools/cuda_emulator_{asan,racecheck}.sh: every test program that runs [cuda] cases on the
# emulator, plus `dml`, which tools.emulated.* compare with.
build_emulated_test_programs() {  # DESCRIPTION CMAKE_ARGS...
  build_test_programs_without_cuda _test_emulated "emulator_test dml dml_emulated" "$@"
}

mkdir -p "$(dirname "$BUILD_DIR")"
install_missing_packages
find_nvcc
