#!/usr/bin/env bash
# Installs the PyTorch peer's dependencies on a Debian machine without a GPU (the GPU machine
# comes with PyTorch): Debian's python3-torch (a CPU build) and OpenBLAS. Without OpenBLAS, Debian
# points libblas.so.3 at the reference BLAS and PyTorch's linear layers run several times slower,
# which would make any comparison with it meaningless. Not part of ./run.sh or ./test.sh: the
# product does not need it, and the two tests that use it (tests/tools/pytorch_*_test.sh) skip
# themselves without it.
set -euo pipefail
PACKAGES=(python3-torch libopenblas0-openmp)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
/usr/bin/python3 -c "import torch; print('PyTorch', torch.__version__, 'for /usr/bin/python3')"
