#!/usr/bin/env bash
# One reproduction, resumable in pieces: `dml train` a config, then `dml ers` on its weights, both
# picking up where an interrupted call stopped (train --resume, ers --resume). Made for GPU
# sessions whose commands are cut after a few minutes: call it again until it prints "done".
#
#   tools/repro.sh CONFIG [--device DEV] [--profile rob28|rob224] [--dml PATH] [--out DIR]
#                         [--set KEY=VALUE]... [--ers-images N] [--no-ers]
#                         [--adversarial-set SPEC]... [--out-name NAME]
#
# --set goes to `dml train` (e.g. epochs for a quick check); --ers-images attacks only the first N
# test images (default all, as the papers do); --no-ers skips the ERS. --adversarial-set SPEC
# (an attack spec of `dml attack`, e.g. STAX:eps=0.01:alpha=0.0005:pgditer=20) scores the test
# split with every image replaced by its adversarial version, as MDProp evaluates a model under
# attack (`dml eval --images`, docs/defenses.md): into DIR/<name>/metrics.json and attack.json,
# <name> the spec's kind in lower case with -t<T> for a T= key (stax, mtax-t5); the adversarial
# array is removed once scored (31 MB for Fashion-MNIST's test split). The sets' NMI is clustered
# as the clean split's was: the k-means seed and restarts that run/metrics.json records
# (`--set eval.kmeans_restarts=R` sets them for both; docs/metrics.md). The ERS and the sets run
# in the precision the model was trained in (--set precision=P, else the config's "precision"
# key, else dml's default fp32): an evaluation runs in its own process's setting, so it is given
# --precision P (docs/gpu.md).
# Writes DIR (default runs/repro/<config name>): run/ (the training output), train.log, ers.json,
# ers.log, the adversarial sets' folders; the ERS uses --robrank-compat so it compares with the
# published tables. When $OUT is set (the device tool's output folder, which brings back at most
# 8 files of 16 MiB) the logs and JSON files, and the trained weights where that stays under
# 16 MiB, are packed into one file there whenever the script exits: $OUT/NAME.tar.gz, NAME the
# config's name or --out-name (letters, digits, '.', '_', '-'; tools/seeds.sh gives
# <row>-seed-<S>), the paths inside relative to DIR.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -lt 1 ]; then
  echo "usage: tools/repro.sh CONFIG [--device DEV] [--profile NAME] [--dml PATH] [--out DIR]" \
    "[--set KEY=VALUE]... [--ers-images N]" >&2
  exit 2
fi
CONFIG="$1"
shift
NAME="$(basename "$CONFIG" .json)"
DEVICE=auto
PROFILE=rob28
DML="$ROOT/build/dml"
DIR="$ROOT/runs/repro/$NAME"
SETS=()
ERS_IMAGES=0
ERS=1
ADVERSARIAL_SETS=()
PRECISION=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE="$2"; shift 2 ;;
    --profile) PROFILE="$2"; shift 2 ;;
    --dml) DML="$2"; shift 2 ;;
    --out) DIR="$2"; shift 2 ;;
    --set)
      SETS+=(--set "$2")
      case "$2" in precision=*) PRECISION="${2#precision=}" ;; esac
      shift 2 ;;
    --ers-images) ERS_IMAGES="$2"; shift 2 ;;
    --no-ers) ERS=0; shift ;;
    --adversarial-set) ADVERSARIAL_SETS+=("$2"); shift 2 ;;
    --out-name) NAME="$2"; shift 2 ;;
    *) echo "tools/repro.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -f "$CONFIG" ] || { echo "tools/repro.sh: no config $CONFIG" >&2; exit 2; }
[[ "$NAME" =~ ^[A-Za-z0-9._-]+$ ]] ||
  { echo "tools/repro.sh: --out-name '$NAME': use letters, digits, '.', '_' and '-' only" >&2; exit 2; }
if [ -z "$PRECISION" ]; then
  PRECISION="$(sed -n 's/.*"precision"[[:space:]]*:[[:space:]]*"\([a-z0-9]*\)".*/\1/p' "$CONFIG" | head -n 1)"
fi
ERS_PRECISION=()
if [ -n "$PRECISION" ]; then ERS_PRECISION=(--precision "$PRECISION"); fi
source "$ROOT/tools/gpu_env.sh"  # on a GPU machine: carried libraries and Fashion-MNIST
source "$ROOT/tools/adversarial_set.sh"
[ -x "$DML" ] || { echo "tools/repro.sh: no dml program at $DML (build it first)" >&2; exit 2; }
mkdir -p "$DIR"

copy_out() {
  if [ -z "${OUT:-}" ]; then return; fi
  local files=() f
  for f in train.log ers.log ers.json run/metrics.json run/log.jsonl; do
    if [ -f "$DIR/$f" ]; then files+=("$f"); fi
  done
  for f in "$DIR"/*/attack.log "$DIR"/*/attack.json "$DIR"/*/metrics.json; do  # the sets'
    if [ -f "$f" ] && [ "$f" != "$DIR/run/metrics.json" ]; then files+=("${f#"$DIR"/}"); fi
  done
  [ ${#files[@]} -gt 0 ] || return 0
  mkdir -p "$OUT"
  local archive="$OUT/$NAME.tar.gz"
  # The weights too (C2F2: 13-15 MB), unless the archive would pass the 16 MiB a file may have.
  if [ -f "$DIR/run/model.safetensors" ]; then
    tar -czf "$archive.part" -C "$DIR" "${files[@]}" run/model.safetensors &&
      [ "$(stat -c %s "$archive.part")" -le $((16 << 20)) ] && mv "$archive.part" "$archive" && return
  fi
  tar -czf "$archive.part" -C "$DIR" "${files[@]}" && mv "$archive.part" "$archive"
}
trap copy_out EXIT
# Which binary does the work, for the results doc ("dml 813900d"; empty from binaries older than
# `dml --version`).
VERSION="$("$DML" --version 2>/dev/null | sed -n 1p || true)"
echo "==> ${VERSION:-dml (no --version)} at $DML"

# 1. Training (skipped once model.safetensors exists).
if [ ! -f "$DIR/run/model.safetensors" ]; then
  RESUME=()
  if [ -f "$DIR/run/checkpoint.safetensors" ]; then RESUME=(--resume); fi
  echo "==> dml train $CONFIG ${RESUME[*]:-} (log: $DIR/train.log)"
  start=$SECONDS
  "$DML" train --config "$CONFIG" "${SETS[@]}" --set output_dir="$DIR/run" \
    --set device="$DEVICE" "${RESUME[@]}" 2>&1 | tee -a "$DIR/train.log"
  echo "[train: $((SECONDS - start)) s in this call]" | tee -a "$DIR/train.log"
fi

# 2. ERS (skipped once ers.json says complete).
if [ "$ERS" = 1 ] && ! grep -q '"complete": true' "$DIR/ers.json" 2>/dev/null; then
  echo "==> dml ers --profile $PROFILE ${ERS_PRECISION[*]:-} (log: $DIR/ers.log)"
  start=$SECONDS
  "$DML" ers --checkpoint "$DIR/run/model.safetensors" --profile "$PROFILE" --device "$DEVICE" \
    --max-images "$ERS_IMAGES" --robrank-compat "${ERS_PRECISION[@]}" --out "$DIR/ers.json" \
    --resume 2>&1 |
    tee -a "$DIR/ers.log"
  echo "[ers: $((SECONDS - start)) s in this call]" | tee -a "$DIR/ers.log"
fi

# 3. Adversarial sets (each skipped once its metrics.json exists), clustered for NMI as the clean
# split was. A metrics.json without the keys (a dml before they were recorded) keeps what this
# script did then: one k-means run seeded 0.
recorded() {  # recorded KEY: KEY's integer in run/metrics.json, or nothing
  sed -n "s/^ *\"$1\": *\([0-9][0-9]*\),*$/\1/p" "$DIR/run/metrics.json" 2>/dev/null |
    head -n 1 || true
}
KMEANS_SEED="$(recorded kmeans_seed)"
KMEANS_RESTARTS="$(recorded kmeans_restarts)"
for spec in "${ADVERSARIAL_SETS[@]}"; do
  name="$(adversarial_set_name "$spec")"
  [ -f "$DIR/$name/metrics.json" ] && continue
  echo "==> adversarial set $spec (log: $DIR/$name/attack.log)"
  mkdir -p "$DIR/$name"
  start=$SECONDS
  "$DML" attack --checkpoint "$DIR/run/model.safetensors" --attack "$spec" --device "$DEVICE" \
    "${ERS_PRECISION[@]}" --save-adversarial "$DIR/$name/adversarial.npy" --overwrite --json \
    > "$DIR/$name/attack.json" 2> "$DIR/$name/attack.log" ||
    { tail -n 5 "$DIR/$name/attack.log" >&2; exit 1; }
  "$DML" eval --checkpoint "$DIR/run/model.safetensors" --images "$DIR/$name/adversarial.npy" \
    --device "$DEVICE" "${ERS_PRECISION[@]}" --seed "${KMEANS_SEED:-0}" \
    --kmeans-restarts "${KMEANS_RESTARTS:-1}" --json > "$DIR/$name/metrics.json.part"
  mv "$DIR/$name/metrics.json.part" "$DIR/$name/metrics.json"
  rm -f "$DIR/$name/adversarial.npy"
  echo "[$name: $((SECONDS - start)) s]" | tee -a "$DIR/$name/attack.log"
done
if [ "$ERS" = 1 ]; then echo "done: $DIR/run/metrics.json and $DIR/ers.json"; else echo "done: $DIR/run/metrics.json"; fi
