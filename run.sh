#!/usr/bin/env bash
# Quick start, step 1: install what is missing, build, and run the default job:
# `dml train --config configs/quick.json` (C2F2 on Fashion-MNIST, a few minutes on 2 CPU cores;
# prints the retrieval metrics table). Extra arguments go to `dml train`, e.g. --device cpu.
set -euo pipefail
source "$(dirname "$0")/scripts/setup.sh"
configure_and_build dml
echo "==> running the default job: dml train --config configs/quick.json"
cd "$ROOT"
"$BUILD_DIR/dml" train --config "$ROOT/configs/quick.json" --overwrite "$@"
