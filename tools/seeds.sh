#!/usr/bin/env bash
# One config over several seeds, resumable: tools/repro.sh (train, then the rob28/rob224 ERS) once
# per seed into DIR/seed-S with --set seed=S, then `dml aggregate` of the finished seeds into
# DIR/aggregate.{md,json,svg} (mean ± sample std, docs/report.md "Runs over seeds").
#
#   tools/seeds.sh CONFIG --seeds 0,1,2 [--out DIR] [--jobs N] [any tools/repro.sh option:
#                  --device DEV --profile rob28|rob224 --dml PATH --set KEY=VALUE --ers-images N
#                  --no-ers --adversarial-set SPEC]
#
# --jobs N runs up to N seeds at once (default 1, one after another), each repro.sh's output in
# DIR/seed-S.log instead of on the terminal. On the CPU each job gets OMP_NUM_THREADS = cores / N
# (at least 1; a value already in the environment is kept): dml's results are the same bits on
# any number of threads (docs/build.md), so N jobs give the weights and scores one job gives,
# and N single-threaded jobs spend no time in the barriers where one job's threads wait for each
# other. On one GPU the jobs share the device (not yet measured against one after another). A
# seed that fails is named with the end of its log once the others have finished; exit status 1.
#
# Under the device tool ($OUT set) each seed's logs, JSON and small weights come back as one file,
# $OUT/<row>-seed-<S>.tar.gz (repro.sh).
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
  echo "usage: tools/seeds.sh CONFIG --seeds S,S,... [--out DIR] [--jobs N] [tools/repro.sh options]" >&2
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
JOBS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) SEEDS="$2"; shift 2 ;;
    --out) DIR="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
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
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "tools/seeds.sh: --jobs: '$JOBS' is not a count of 1 or more" >&2; exit 2; }
if [ "$JOBS" -gt 1 ] && [ -z "${OMP_NUM_THREADS:-}" ]; then
  cores="$(nproc 2>/dev/null || echo 1)"
  export OMP_NUM_THREADS=$((cores / JOBS > 0 ? cores / JOBS : 1))
fi
mkdir -p "$DIR"
ROW="$(basename "$DIR")"
RUNS=""
# A seed is done when its model, its ERS (unless --no-ers) and every adversarial set are.
seed_done() {
  [ -f "$1/run/model.safetensors" ] || return 1
  if [ "$ERS" = 1 ]; then grep -q '"complete": true' "$1/ers.json" 2>/dev/null || return 1; fi
  for spec in "${SETS[@]}"; do [ -f "$1/$(adversarial_set_name "$spec")/metrics.json" ] || return 1; done
}
# The name of each seed's archive in the device tool's $OUT (repro.sh --out-name).
OUT_NAME="$(printf '%s' "$ROW" | tr -c 'A-Za-z0-9._-' '_')"
run_seed() {  # run_seed S: repro.sh for seed S
  "$ROOT/tools/repro.sh" "$CONFIG" --out "$DIR/seed-$1" "${PASS[@]}" --set "seed=$1" \
    --out-name "$OUT_NAME-seed-$1"
}
STARTED=()
for s in "${SEED_LIST[@]}"; do
  out="$DIR/seed-$s"
  RUNS="${RUNS:+$RUNS,}$out"
  if seed_done "$out"; then
    echo "==> seed $s: done, skipped ($out)"
  elif [ "$JOBS" = 1 ]; then
    echo "==> seed $s ($out)"
    run_seed "$s"
  else
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
    echo "==> seed $s ($out; OMP_NUM_THREADS=${OMP_NUM_THREADS:-all}, log: $DIR/seed-$s.log)"
    run_seed "$s" > "$DIR/seed-$s.log" 2>&1 &
    STARTED+=("$s")
  fi
done
if [ ${#STARTED[@]} -gt 0 ]; then
  wait || true
  failed=0
  for s in "${STARTED[@]}"; do
    if seed_done "$DIR/seed-$s"; then echo "==> seed $s: finished"; continue; fi
    echo "tools/seeds.sh: seed $s did not finish; the end of $DIR/seed-$s.log:" >&2
    tail -n 5 "$DIR/seed-$s.log" >&2
    failed=1
  done
  [ "$failed" = 0 ] || exit 1
fi
"$DML" aggregate --runs "$RUNS" --names "$ROW" --out "$DIR/aggregate"
for spec in "${SETS[@]}"; do
  name="$(adversarial_set_name "$spec")"
  "$DML" aggregate --runs "$(printf '%s' "$RUNS" | sed "s|,|/$name,|g")/$name" \
    --names "$ROW $name" --out "$DIR/aggregate-$name"
done
echo "done: ${#SEED_LIST[@]} seeds in $DIR"
