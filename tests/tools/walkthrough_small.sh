#!/bin/sh
# usage: walkthrough_small.sh DML WORKDIR REPO_ROOT
# Runs, in order, every command of docs/walkthrough.md's small variants (the ```sh blocks whose
# first line starts with "# small"), cut further so the whole path takes seconds: training stops
# after 2 batches and evaluates 100 images, every --max-images becomes 32. A renamed option, a
# removed config key or a command that fails in the doc fails this test.
set -e
dml=$1; work=$2; root=$3
rm -rf "$work"; mkdir -p "$work"; cd "$work"
awk '/^```sh$/ { block = 1; small = 0; next }
     /^```$/ { block = 0; next }
     block && /^# small/ { small = 1; next }
     block && small && NF { print }' "$root/docs/walkthrough.md" > commands.txt
test "$(grep -c '^build/dml ' commands.txt)" -ge 10  # the doc's small path is all there
while IFS= read -r line; do
  cmd=$(printf '%s\n' "$line" | sed -e "s|^build/dml |\"\$dml\" |" -e "s|configs/|$root/configs/|g" \
                                    -e 's|--max-images [0-9]*|--max-images 32|')
  case "$line" in
    "build/dml train "*) cmd="$cmd --set sampler.max_batches_per_epoch=2 --set eval.max_images=100" ;;
  esac
  echo "\$ $line"
  eval "$cmd" > step.log 2>&1 || { cat step.log; echo "failed: $line"; exit 1; }
done < commands.txt
test -s compare-small.svg && test -s grid-small.png && test -s runs/act-fgsm-small/model.safetensors
echo "walkthrough-small-ok"
