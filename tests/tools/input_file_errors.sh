#!/bin/sh
# usage: input_file_errors.sh DML WORKDIR QUICK_CONFIG
# Every input file option follows one rule (README, "Exit codes"): a path that does not exist or
# is a folder exits 2 (usage), before any work; a file that exists but is malformed exits 1
# (runtime), the message naming the file.
set -e
dml=$1; work=$2; config=$3
rm -rf "$work"; mkdir -p "$work/folder"; cd "$work"
printf 'not a tensor file' > junk.safetensors
# A valid [1, 1, 28, 28] f32 .npy of zeros (an image for dml embed): the 10-byte magic and header
# length, a header padded with spaces to 118 bytes (128 in all), then 3,136 zero bytes.
header="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 28, 28), }"
{ printf '\223NUMPY\001\000v\000%s' "$header"; printf '%*s\n' $((117 - ${#header})) ''; \
  head -c 3136 /dev/zero; } > image.npy
printf 'not json' > junk.json
failures=0
expect() {  # expect CODE COMMAND...
  want=$1; shift
  status=0; "$dml" "$@" > out.txt 2>&1 || status=$?
  if [ "$status" -ne "$want" ]; then
    echo "FAIL (exit $status, want $want): dml $*"; cat out.txt; failures=$((failures + 1))
  fi
}
spec=CA:pm=+:W=1:eps=0.1:alpha=0.01:pgditer=1
for kind in missing folder junk; do
  case $kind in missing) f=missing.safetensors; j=missing.json; code=2 ;;
                folder) f=folder; j=folder; code=2 ;;
                junk) f=junk.safetensors; j=junk.json; code=1 ;; esac
  expect $code eval --checkpoint $f
  expect $code eval --checkpoint junk.safetensors --images $f  # found before the checkpoint is read
  expect $code attack --checkpoint $f --attack $spec
  expect $code ers --checkpoint $f --profile rob28
  expect $code report --grid --checkpoint $f --out g.png
  expect $code report --attack $spec --checkpoint $f --out a.png
  expect $code embed --model c2f2 --embedding-dim 8 --weights $f --input image.npy --out e-$kind.npy
  expect $code metrics --embeddings $f --labels $f
  expect $code metrics --embeddings image.npy --labels $f
  expect $code report --ers $j --out e.svg
  expect $code train --config "$config" --set output_dir=run-$kind --set model.pretrained=$f
done
expect 2 report --log missing-run
expect 2 report --log folder
expect 2 train --config missing.json
expect 2 train --config folder
expect 2 train --config junk.json  # a config's every mistake is a usage error (docs/config.md)
test "$failures" -eq 0
echo "input file exit codes ok"
