# shellcheck shell=bash
# Sourced on a GPU machine (by tools/gpu_check.sh and tools/repro.sh): makes what
# tools/gpu_deps.sh carried in .gpu-deps/ visible, and finds cuDNN/cuBLAS in PyTorch's wheels when
# the system has none. Does nothing where .gpu-deps/ is absent and the libraries are installed.
#   ROOT must be set to the repository root. Safe under `set -euo pipefail`.

if [ -d "$ROOT/.gpu-deps/usr" ]; then
  export CMAKE_PREFIX_PATH="$ROOT/.gpu-deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$ROOT/.gpu-deps/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$ROOT/.gpu-deps/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$ROOT/.gpu-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Fashion-MNIST (carried by tools/gpu_deps.sh): the program and the tests read it from the
  # Debian package's path, so link it there. The GPU machine is disposable and we are root on it.
  CARRIED_FASHION="$ROOT/.gpu-deps/usr/share/datasets/fashion-mnist"
  if [ -d "$CARRIED_FASHION" ] && [ ! -e /usr/share/datasets/fashion-mnist ]; then
    mkdir -p /usr/share/datasets && ln -s "$CARRIED_FASHION" /usr/share/datasets/fashion-mnist ||
      echo "gpu_env.sh: could not link $CARRIED_FASHION into /usr/share/datasets" >&2
  fi
fi

# PyTorch's NVIDIA wheels (site-packages/nvidia/...; the folder layout differs between CUDA
# versions, so search it): cuDNN's header and library for the build, and both libraries' folders
# for the programs, when the system has no cuDNN of its own: a system cuDNN counts only with
# both its library and its header (a runtime-only install would leave the build without cuDNN,
# and the bench without its peer).
CMAKE_EXTRA=()
NVIDIA_WHEELS="$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null || true)"
SYSTEM_LIBRARIES="$(ldconfig -p 2>/dev/null || true)"
SYSTEM_CUDNN=0
if [[ "$SYSTEM_LIBRARIES" == *libcudnn.so* ]]; then
  for header in /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h \
    /usr/local/include/cudnn.h /usr/local/cuda/include/cudnn.h; do
    if [ -e "$header" ]; then SYSTEM_CUDNN=1; fi
  done
fi
if [ -n "$NVIDIA_WHEELS" ] && [ -d "$NVIDIA_WHEELS" ] && [ "$SYSTEM_CUDNN" = 0 ]; then
  CUDNN_HEADER="$(find "$NVIDIA_WHEELS" -name cudnn.h 2>/dev/null | head -1 || true)"
  CUDNN_LIB="$(find "$NVIDIA_WHEELS" -name 'libcudnn.so*' 2>/dev/null | sort | head -1 || true)"
  if [ -n "$CUDNN_HEADER" ] && [ -n "$CUDNN_LIB" ]; then
    CMAKE_EXTRA+=("-DCUDNN_LIBRARY=$CUDNN_LIB" "-DCUDNN_INCLUDE_DIR=$(dirname "$CUDNN_HEADER")")
    LD_LIBRARY_PATH="$(dirname "$CUDNN_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
  fi
  CUBLAS_LIB="$(find "$NVIDIA_WHEELS" -name 'libcublas.so*' 2>/dev/null | head -1 || true)"
  # Only where the toolkit has none: a second cuBLAS ahead of the toolkit's could differ in version.
  if [ -n "$CUBLAS_LIB" ] && ! ls /usr/local/cuda/lib64/libcublas.so* > /dev/null 2>&1; then
    LD_LIBRARY_PATH="$(dirname "$CUBLAS_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
  fi
fi
