#!/bin/sh
# tools/repro.sh scores the model in the precision it was trained in: `dml ers` gets --precision
# from --set precision=P, else from the config's "precision" key, else nothing (dml's default).
# A stand-in dml records each call's arguments, so no training runs.
# Usage: repro_precision.sh REPO_ROOT WORK_DIR
set -e
root=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
cat > "$work/dml" <<'FAKE'
#!/bin/sh
out=""
prev=""
for a in "$@"; do
  if [ "$prev" = "--set" ]; then case "$a" in output_dir=*) out="${a#output_dir=}" ;; esac; fi
  if [ "$prev" = "--out" ]; then out="$a"; fi
  prev="$a"
done
echo "$*" >> "$(dirname "$0")/calls"
case "$1" in
  train) mkdir -p "$out" && : > "$out/model.safetensors" ;;
  ers) echo '{"complete": true}' > "$out" ;;
esac
FAKE
chmod +x "$work/dml"
printf '{\n  "model": "c2f2",\n  "precision": "bf16"\n}\n' > "$work/pinned.json"
printf '{\n  "model": "c2f2"\n}\n' > "$work/plain.json"

run() {  # config, out, extra options...
  config=$1
  out=$2
  shift 2
  : > "$work/calls"
  bash "$root/tools/repro.sh" "$config" --device cpu --dml "$work/dml" --out "$work/$out" "$@" \
    > "$work/$out.log" 2>&1
  grep '^ers ' "$work/calls"
}

run "$work/plain.json" a --set precision=tf32 | grep -q -- '--precision tf32 '
run "$work/pinned.json" b | grep -q -- '--precision bf16 '
run "$work/pinned.json" c --set precision=fp32 | grep -q -- '--precision fp32 '
if run "$work/plain.json" d | grep -q -- '--precision'; then
  echo "a config without the key got a --precision" >&2
  exit 1
fi
echo "repro precision ok"
