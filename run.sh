#!/usr/bin/env bash
# Quick start, step 1: install what is missing, build, and run the default job:
# `dml train --config configs/quick.json` (C2F2 on Fashion-MNIST, a few minutes on 2 CPU cores;
# prints the retrieval metrics table), then the commands to try next. Extra arguments go to
# `dml train`, e.g. --device cpu; ./run.sh --resume continues an interrupted job.
set -euo pipefail
source "$(dirname "$0")/scripts/setup.sh"
configure_and_build dml
echo "==> running the default job: dml train --config configs/quick.json"
cd "$ROOT"
# Each call starts the job afresh, unless asked to continue an interrupted one: ./run.sh --resume.
fresh=(--overwrite)
for arg in "$@"; do
  if [ "$arg" = "--resume" ]; then fresh=(); fi
done
"$BUILD_DIR/dml" train --config "$ROOT/configs/quick.json" "${fresh[@]}" "$@"
dml="${BUILD_DIR#"$ROOT"/}/dml"
cat <<EOF

==> next, on the model you just trained (docs/walkthrough.md goes through them in order):
  $dml eval   --checkpoint runs/quick/model.safetensors
  $dml attack --checkpoint runs/quick/model.safetensors --max-images 500 \\
              --attack CA:pm=+:W=1:eps=0.30196:alpha=0.011764:pgditer=32
  $dml ers    --checkpoint runs/quick/model.safetensors --profile rob28 --max-images 500 --out ers.json
  $dml report --log runs/quick                  # training curves: runs/quick/report.svg
  $dml report --ers ers.json --out ers.svg      # the robustness score's columns
  $dml train  --config configs/fashion/est.json # a defended model (docs/defenses.md)
EOF
