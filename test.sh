#!/usr/bin/env bash
# Quick start, step 2: same set-up as ./run.sh, then the whole test suite through CTest.
# Tests labelled `cuda` report "Skipped" on machines without a GPU.
# Extra arguments go to ctest (e.g. ./test.sh -L cpu, ./test.sh -R conv2d).
set -euo pipefail
source "$(dirname "$0")/scripts/setup.sh"
configure_and_build
echo "==> running the test suite"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
