#!/usr/bin/env bash
# Quick start, step 1: install what is missing, build, and run the default job.
# Until the `dml` program lands, the default job is the MLP demo (engine/nn + Adam on a
# generated two-class problem).
set -euo pipefail
source "$(dirname "$0")/scripts/setup.sh"
configure_and_build
echo "==> running the default job: $BUILD_DIR/mlp_demo"
"$BUILD_DIR/mlp_demo" "$@"
