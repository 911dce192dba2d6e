#!/usr/bin/env bash
# Issue 38's robustness report of one trained model, resumable in pieces: the worst case per
# query over rob28's attacks and R random restarts, the attack-strength curves of every ERS
# attack, the NES black-box attack and the transfer attacks from other models against the
# white-box attack of the same spec (sanity check (c)), and the figure (docs/attacks.md).
#
#   tools/robustness_report.sh CHECKPOINT --out DIR [--name NAME] [--dml PATH] [--device DEV]
#       [--images N] [--restarts R] [--curve-images N] [--check-images N]
#       [--transfer-from NAME=CHECKPOINT]... [--data NAME --root DIR]
#
# Writes into DIR (each step skipped once its file is complete, an interrupted `dml ers` resumed):
#   worst-case.json/.log   dml ers --profile rob28 --worst-case R on the first N test images
#                          (default N 1000, R 3): ERS, worst-case ERS, robust fractions, the checks
#   curve28.json/.log      dml ers --profile curve28 on the first --curve-images (default 100)
#   nes-{ca,qa}-plus.json  dml attack with nes=100 queries per image and step (3,200 an image) on
#                          the first --check-images (default 100), CA+ (w = 1) and QA+ (m = 1) at
#                          rob28's eps and alpha; its JSON says whether it beat the white-box attack
#   transfer-from-<NAME>-{ca,qa}-plus.json   the same two attacks made on NAME's model and
#                          measured on this one (dml attack --source-checkpoint)
#   robustness.svg         dml report --robustness of worst-case.json and curve28.json
# --curve-images 0 or --check-images 0 leaves that part out. Every command runs with
# --robrank-compat, as the published tables were made; a log beside each JSON keeps its output.
# The model's test split is the gallery. On Fashion-MNIST with this project's 2-core CPU, the
# vanilla model's report took about 19 minutes for the worst case (1,000 images, 3 restarts) and
# 22 for the curve (100 images), the NES attacks 5 and 7 (docs/results/fashion-c2f2-vanilla-*).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
usage() {
  echo "usage: tools/robustness_report.sh CHECKPOINT --out DIR [--name NAME] [--dml PATH]" \
    "[--device DEV] [--images N] [--restarts R] [--curve-images N] [--check-images N]" \
    "[--transfer-from NAME=CHECKPOINT]... [--data NAME --root DIR]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
CHECKPOINT="$1"
shift
DIR=""
NAME="model"
DML="$ROOT/build/dml"
DEVICE=auto
IMAGES=1000
RESTARTS=3
CURVE_IMAGES=100
CHECK_IMAGES=100
TRANSFERS=()
DATA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) DIR="$2"; shift 2 ;;
    --name) NAME="$2"; shift 2 ;;
    --dml) DML="$2"; shift 2 ;;
    --device) DEVICE="$2"; shift 2 ;;
    --images) IMAGES="$2"; shift 2 ;;
    --restarts) RESTARTS="$2"; shift 2 ;;
    --curve-images) CURVE_IMAGES="$2"; shift 2 ;;
    --check-images) CHECK_IMAGES="$2"; shift 2 ;;
    --transfer-from) TRANSFERS+=("$2"); shift 2 ;;
    --data|--root) DATA+=("$1" "$2"); shift 2 ;;
    *) echo "tools/robustness_report.sh: unknown option $1" >&2; usage ;;
  esac
done
refuse() { echo "tools/robustness_report.sh: $*" >&2; exit 2; }
[ -n "$DIR" ] || refuse "give --out DIR"
[ -f "$CHECKPOINT" ] || refuse "no checkpoint $CHECKPOINT"
[ -x "$DML" ] || refuse "no dml program at $DML (build it first)"
for n in "$IMAGES" "$RESTARTS" "$CURVE_IMAGES" "$CHECK_IMAGES"; do
  [[ "$n" =~ ^[0-9]+$ ]] || refuse "'$n' is not a count"
done
[ "$IMAGES" -gt 0 ] || refuse "--images must be 1 or more"
for t in "${TRANSFERS[@]}"; do
  [[ "$t" == ?*=?* ]] || refuse "--transfer-from wants NAME=CHECKPOINT, not '$t'"
  [ -f "${t#*=}" ] || refuse "no checkpoint ${t#*=} (--transfer-from)"
done
mkdir -p "$DIR"
echo "==> $("$DML" --version | sed -n 1p) at $DML; $CHECKPOINT -> $DIR"
COMMON=(--checkpoint "$CHECKPOINT" --device "$DEVICE" --robrank-compat "${DATA[@]}")

ers_step() {  # ers_step FILE IMAGES ARGS...: dml ers into DIR/FILE.json, resumed, unless complete
  local file=$1 images=$2
  shift 2
  if grep -q '"complete": true' "$DIR/$file.json" 2>/dev/null; then
    echo "==> $file: done, skipped"
    return
  fi
  echo "==> dml ers $* --max-images $images (log: $DIR/$file.log)"
  local start=$SECONDS
  "$DML" ers "${COMMON[@]}" "$@" --max-images "$images" --out "$DIR/$file.json" --resume \
    >> "$DIR/$file.log" 2>&1 || { tail -n 5 "$DIR/$file.log" >&2; exit 1; }
  echo "[$file: $((SECONDS - start)) s in this call]" | tee -a "$DIR/$file.log"
}

attack_step() {  # attack_step FILE SPEC [ARGS...]: dml attack --json into DIR/FILE.json, once
  local file=$1 spec=$2
  shift 2
  if [ -f "$DIR/$file.json" ]; then echo "==> $file: done, skipped"; return; fi
  echo "==> dml attack $spec${*:+ $*} (log: $DIR/$file.log)"
  local start=$SECONDS
  "$DML" attack "${COMMON[@]}" --attack "$spec" --max-images "$CHECK_IMAGES" "$@" --json \
    > "$DIR/$file.json.part" 2> "$DIR/$file.log" || { tail -n 5 "$DIR/$file.log" >&2; exit 1; }
  mv "$DIR/$file.json.part" "$DIR/$file.json"
  echo "[$file: $((SECONDS - start)) s]" | tee -a "$DIR/$file.log"
}

ers_step worst-case "$IMAGES" --profile rob28 --worst-case "$RESTARTS"
if [ "$CURVE_IMAGES" -gt 0 ]; then ers_step curve28 "$CURVE_IMAGES" --profile curve28; fi
if [ "$CHECK_IMAGES" -gt 0 ]; then
  # rob28's eps and alpha (77/255 and 3/255, as robrank writes them) and its 32 steps.
  BUDGET=eps=0.30196:alpha=0.011764
  CA="CA:pm=+:W=1:$BUDGET"
  QA="QA:pm=+:M=1:$BUDGET"
  attack_step nes-ca-plus "$CA:nes=100:queries=3200"
  attack_step nes-qa-plus "$QA:nes=100:queries=3200"
  for t in "${TRANSFERS[@]}"; do
    attack_step "transfer-from-${t%%=*}-ca-plus" "$CA:pgditer=32" --source-checkpoint "${t#*=}"
    attack_step "transfer-from-${t%%=*}-qa-plus" "$QA:pgditer=32" --source-checkpoint "${t#*=}"
  done
fi
INPUT="$NAME=$DIR/worst-case.json"
if [ "$CURVE_IMAGES" -gt 0 ]; then INPUT="$INPUT,$DIR/curve28.json"; fi
"$DML" report --robustness --input "$INPUT" --out "$DIR/robustness.svg" > "$DIR/report.log" 2>&1 ||
  { cat "$DIR/report.log" >&2; exit 1; }
echo "done: $DIR (worst-case.json, robustness.svg$([ "$CURVE_IMAGES" -gt 0 ] && echo ", curve28.json"))"
