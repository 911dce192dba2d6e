#!/bin/sh
# usage: data_option_errors.sh DML DIR ARGS...
# Every subcommand that opens a dataset for --data gives exit code 2 and a message starting with
# "--data NAME:" when the dataset cannot be opened (tools/dml/split_stream.h, open_data_option),
# after a tiny training run (ARGS) has made a checkpoint to point them at; and every one that takes
# --split with the checkpoint's data refuses a split other than train or test the same way
# (take_split_options).
set -e
dml=$1; d=$2; shift 2
rm -rf "$d"; mkdir -p "$d"
"$dml" train "$@" --set output_dir="$d/run" >/dev/null 2>&1
ck="$d/run/model.safetensors"
bad="--data mnist --root $d/no-such-dir"
check() {
  status=0; out=$("$dml" "$@" $bad 2>&1) || status=$?
  if [ "$status" -ne 2 ] || ! echo "$out" | grep -q "^dml $1: --data mnist: "; then
    echo "dml $1: exit $status, output:"; echo "$out"; exit 1
  fi
  echo "dml $1: exit 2, $(echo "$out" | head -1)"
}
check eval --checkpoint "$ck"
check attack --checkpoint "$ck" --attack "CA:pm=+:W=1:eps=0.3:alpha=0.1:pgditer=2"
check ers --checkpoint "$ck" --profile rob28
check report --grid --checkpoint "$ck" --out "$d/grid.png"
check report --attack "QA:pm=+:M=1:eps=0.03:alpha=0.01:pgditer=2" --checkpoint "$ck" --out "$d/attack.png"
check info
check embed --model c2f2 --embedding-dim 16 --weights "$ck" --out "$d/e.npy"
test ! -e "$d/grid.png" && test ! -e "$d/attack.png" && test ! -e "$d/e.npy"
bad="--split dev"
check_split() {
  status=0; out=$("$dml" "$@" $bad 2>&1) || status=$?
  if [ "$status" -ne 2 ] || ! echo "$out" | grep -q "^dml $1: --split must be train or test, got 'dev'"; then
    echo "dml $1 --split dev: exit $status, output:"; echo "$out"; exit 1
  fi
}
check_split eval --checkpoint "$ck"
check_split attack --checkpoint "$ck" --attack "CA:pm=+:W=1:eps=0.3:alpha=0.1:pgditer=2"
check_split ers --checkpoint "$ck" --profile rob28
check_split report --grid --checkpoint "$ck" --out "$d/grid.png"
check_split report --attack "QA:pm=+:M=1:eps=0.03:alpha=0.01:pgditer=2" --checkpoint "$ck" --out "$d/attack.png"
check_split hardness --checkpoint "$ck"
# --queries and --k that the split cannot give (exit 2, naming the option): a synthetic split of
# 20 images for the attack picture, whose own bounds (--queries 1..64, --k 1..20) come first.
too_many() {  # too_many OPTION VALUE EXPECTED report ARGS...
  option=$1; value=$2; expected=$3; shift 3
  status=0; out=$("$dml" "$@" "$option" "$value" 2>&1) || status=$?
  if [ "$status" -ne 2 ] || ! echo "$out" | grep -q "^dml report: $option $value $expected"; then
    echo "dml $* $option $value: exit $status, output:"; echo "$out"; exit 1
  fi
}
qa="QA:pm=+:M=1:eps=0.03:alpha=0.01:pgditer=2"
small="--data synthetic --root channels=1,size=28,classes=10,images=20"
# shellcheck disable=SC2086
too_many --queries 30 "is more than the 20 images of synthetic test" report --attack "$qa" \
  --checkpoint "$ck" --out "$d/attack.png" $small
# shellcheck disable=SC2086
too_many --k 20 "needs at least 21 images; synthetic test gives 20" report --attack "$qa" \
  --checkpoint "$ck" --out "$d/attack.png" $small
too_many --queries 1000000 "is more than the" report --grid --checkpoint "$ck" --out "$d/grid.png"
too_many --k 1000000 "needs at least 1000001 images" report --grid --checkpoint "$ck" --out "$d/grid.png"
test ! -e "$d/grid.png" && test ! -e "$d/attack.png"
echo "data option errors ok"
