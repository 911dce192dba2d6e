#!/usr/bin/env bash
# Session 16: NMI under attack from the least-inertia of 20 k-means++ runs for models whose
# adversarial sets were removed once scored (tools/repro.sh before 92c27bc). Per model and set:
# the set made again (dml attack, the same spec), scored as repro.sh did then (dml eval --images,
# k-means seed 0, one run; must equal the committed metrics.json's numbers), then with the
# training seed and 20 restarts (metrics-r20.json). Clean: dml eval --seed S --kmeans-restarts 20.
set -euo pipefail
DML=/work/runs/dml-ae595a7
B=eps=0.01:alpha=0.0005:pgditer=20
echo "$($DML --version | head -1)"
for dir in "$@"; do
  seed="${dir##*seed-}"
  m="$dir/run/model.safetensors"
  if [ ! -f "$dir/run/metrics-r20.json" ]; then
    $DML eval --checkpoint "$m" --device cpu --seed "$seed" --kmeans-restarts 20 --json \
      > "$dir/run/metrics-r20.json.part" && mv "$dir/run/metrics-r20.json.part" "$dir/run/metrics-r20.json"
  fi
  for spec in "STAX:$B" "MTAX:T=5:$B"; do
    case "$spec" in STAX*) name=stax ;; *) name=mtax-t5 ;; esac
    out="$dir/$name"
    [ -f "$out/metrics-r20.json" ] && continue
    if [ ! -f "$out/adversarial.npy" ]; then
      start=$SECONDS
      $DML attack --checkpoint "$m" --attack "$spec" --device cpu --save-adversarial "$out/adversarial.npy.part.npy" \
        --overwrite --json > "$out/attack-again.json" 2> "$out/attack-again.log"
      mv "$out/adversarial.npy.part.npy" "$out/adversarial.npy"
      echo "$dir $name: attacked again in $((SECONDS - start)) s"
    fi
    $DML eval --checkpoint "$m" --images "$out/adversarial.npy" --device cpu --seed 0 --json > "$out/metrics-again.json"
    python3 - "$out/metrics.json" "$out/metrics-again.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
diff = [k for k in a if a[k] != b.get(k)]
print(sys.argv[1], "same numbers as the set made again" if not diff else "DIFFERENT: " + ", ".join(diff))
PY
    $DML eval --checkpoint "$m" --images "$out/adversarial.npy" --device cpu --seed "$seed" \
      --kmeans-restarts 20 --json > "$out/metrics-r20.json.part"
    mv "$out/metrics-r20.json.part" "$out/metrics-r20.json"
    echo "$dir $name: nmi one run $(python3 -c "import json;print(json.load(open('$out/metrics.json'))['nmi'])") r20 $(python3 -c "import json;print(json.load(open('$out/metrics-r20.json'))['nmi'])")"
  done
done
echo "rescore done"
