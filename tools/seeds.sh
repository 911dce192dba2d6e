#!/usr/bin/env bash
# One config over several seeds, resumable: tools/repro.sh (train, then the rob28/rob224 ERS) once
# per seed into DIR/seed-S with --set seed=S, then `dml aggregate` of the finished seeds into
# DIR/aggregate.{md,json,svg} (mean ± sample std, docs/report.md "Runs over seeds").
#
#   tools/seeds.sh CONFIG --seeds 0,1,2 [--out DIR] [any tools/repro.sh option: --device DEV
#                  --profile rob28|rob224 --dml PATH --set KEY=VALUE --ers-images N --no-ers
#                  --adversarial-set SPEC]
#
# With --adversarial-set SPEC (repro.sh: MDProp's evaluation under attack) each set also gets its
# aggregate over the seeds, DIR/aggregate-<name>.{md,json,svg} from DIR/seed-S/<name>/metrics.json.
#
# Interrupted (a GPU session cut after a few minutes), call it again with the same arguments:
# finished seeds are skipped (repro.sh skips a trained model and a complete ers.json), the seed
# that was running resumes from its checkpoint (train --resume) or its partial ers.json (ers
# --resume). DIR defaults to runs/seeds/<config name>; the aggregates name their row after DIR's
# last folder (so one config run with different --set keys and --out folders gives rows that say
# which). The training seed varies; the attacks' seed stays dml ers's default, so the seeds differ
# only in training.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
usage() {
  echo "usage: tools/seeds.sh CONFIG --seeds S,S,... [--out DIR] [tools/repro.sh options]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
CONFIG="$1"
shift
SEEDS=""
DIR="$ROOT/runs/seeds/$(basename "$CONFIG" .json)"
DML="$ROOT/build/dml"
PASS=()
ERS=1
SETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) SEEDS="$2"; shift 2 ;;
    --out) DIR="$2"; shift 2 ;;
    --dml) DML="$2"; PASS+=(--dml "$2"); shift 2 ;;
    --device|--profile|--set|--ers-images) PASS+=("$1" "$2"); shift 2 ;;
    --no-ers) ERS=0; PASS+=("$1"); shift ;;
    --adversarial-set) SETS+=("$2"); PASS+=("$1" "$2"); shift 2 ;;
    *) echo "tools/seeds.sh: unknown option $1" >&2; usage ;;
  esac
done
[ -n "$SEEDS" ] || { echo "tools/seeds.sh: give --seeds, e.g. --seeds 0,1,2" >&2; exit 2; }
[ -f "$CONFIG" ] || { echo "tools/seeds.sh: no config $CONFIG" >&2; exit 2; }
source "$ROOT/tools/adversarial_set.sh"
IFS=',' read -r -a SEED_LIST <<< "$SEEDS"
for s in "${SEED_LIST[@]}"; do
  [[ "$s" =~ ^[0-9]+$ ]] || { echo "tools/seeds.sh: --seeds: '$s' is not a seed" >&2; exit 2; }
done
mkdir -p "$DIR"
ROW="$(basename "$DIR")"
RUNS=""
# A seed is done when its model, its ERS (unless --no-ers) and every adversarial set are.
seed_done() {
  [ -f "$1/run/model.safetensors" ] || return 1
  if [ "$ERS" = 1 ]; then grep -q '"complete": true' "$1/ers.json" 2>/dev/null || return 1; fi
  for spec in "${SETS[@]}"; do [ -f "$1/$(adversarial_set_name "$spec")/metrics.json" ] || return 1; done
}
for s in "${SEED_LIST[@]}"; do
  out="$DIR/seed-$s"
  if seed_done "$out"; then
    echo "==> seed $s: done, skipped ($out)"
  else
    echo "==> seed $s ($out)"
    "$ROOT/tools/repro.sh" "$CONFIG" --out "$out" "${PASS[@]}" --set "seed=$s"
  fi
  RUNS="${RUNS:+$RUNS,}$out"
done
"$DML" aggregate --runs "$RUNS" --names "$ROW" --out "$DIR/aggregate"
for spec in "${SETS[@]}"; do
  name="$(adversarial_set_name "$spec")"
  "$DML" aggregate --runs "$(printf '%s' "$RUNS" | sed "s|,|/$name,|g")/$name" \
    --names "$ROW $name" --out "$DIR/aggregate-$name"
done
echo "done: ${#SEED_LIST[@]} seeds in $DIR"
