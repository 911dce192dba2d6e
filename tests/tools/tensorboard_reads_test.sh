#!/bin/sh
# TensorBoard itself reads the event files of `dml train` (tools/dml/tensorboard/): its
# EventAccumulator finds train/mean_loss and eval/recall@1 at the steps and values of log.jsonl.
# Exit 77 (CTest: skipped) when no python3 here imports tensorboard (a pip package, not Debian's:
# `python3 -m venv V && V/bin/pip install tensorboard`, then run with PATH=V/bin:$PATH).
#   tensorboard_reads_test.sh DML WORKDIR CONFIG
set -u
dml=$1 dir=$2 config=$3
python3 -c "import tensorboard" 2>/dev/null ||
  { echo "skipped: no python3 with tensorboard"; exit 77; }
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$dml" train --config "$config" --set device=cpu --set sampler.max_batches_per_epoch=6 \
  --set log_every_batches=2 --set epochs=2 --set eval.max_images=100 \
  --set output_dir="$dir/run" > "$dir/train.log" 2>&1 || { cat "$dir/train.log"; exit 1; }
python3 - "$dir/run" <<'PY'
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
run = sys.argv[1]
records = [json.loads(line) for line in open(run + "/log.jsonl")]
acc = EventAccumulator(run + "/tensorboard", size_guidance={"scalars": 0})
acc.Reload()
for kind, key in (("train", "mean_loss"), ("eval", "recall@1")):
    want = [(r["step"], r[key]) for r in records if r["type"] == kind]
    got = [(e.step, e.value) for e in acc.Scalars(kind + "/" + key)]
    assert len(want) == len(got) > 0, (kind, key, want, got)
    for (ws, wv), (gs, gv) in zip(want, got):
        assert ws == gs and abs(wv - gv) <= 1e-6 * max(1.0, abs(wv)), (key, ws, wv, gs, gv)
print("tensorboard reads the event files")
PY
