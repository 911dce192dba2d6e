# shellcheck shell=sh
# Sourced by every tests/dist script once it has set $dir (its work folder; $dml too where it
# trains or runs dml), as the scripts' common start:
#   - $mpirun: two ranks on this machine (oversubscribed: the CI machine has 2 cores; as root,
#     which Open MPI refuses without the flag; shared memory without the kernel's cross-memory
#     attach, which containers often forbid), or exit with "skipped:" when Open MPI is not
#     installed;
#   - $dir emptied and created;
#   - fail MESSAGE: prints FAIL and $dir/log, exits 1;
#   - train_tiny_model TRAIN_ARGS...: trains the test's tiny model into $dir/run;
#   - without_seconds FILE: FILE's JSON without its "seconds" fields (wall times).
# $mpirun is for the scripts that source this file, which set $dir and $dml:
# shellcheck disable=SC2034,SC2154
if ! command -v mpirun > /dev/null; then
  echo "skipped: mpirun not found (scripts/setup.sh installs Debian's openmpi-bin)"
  exit 0
fi
mpirun="mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -n 2"
rm -rf "$dir" && mkdir -p "$dir" || exit 1
fail() { echo "FAIL: $*"; cat "$dir/log"; exit 1; }
train_tiny_model() {
  "$dml" train "$@" --set output_dir="$dir/run" > "$dir/log" 2>&1 || fail "dml train"
}
without_seconds() { sed 's/"seconds":[-+.0-9eE]*//g' "$1"; }
