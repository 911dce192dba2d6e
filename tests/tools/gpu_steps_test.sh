#!/usr/bin/env bash
# tools/gpu_steps.sh, the step runner of tools/gpu_check.sh, on stand-in steps (true, false,
# sleep): a failing step is recorded, a step killed at a call's time limit runs again in the next
# call, one that had the whole call and still did not finish is recorded as failed (not retried),
# finished steps are skipped, step names select by prefix, a step's own exit status 124 is not
# taken for the time limit, the log reaches $OUT, a failed build stops the steps after it, and
# GPU_CHECK_RETRY_FAILED=1 runs failed steps again.
#   gpu_steps_test.sh REPO_ROOT WORK_DIR            (prints "gpu steps ok" on success)
set -u
ROOT="$1"
WORK="$2"
rm -rf "$WORK"
mkdir -p "$WORK/out"
fail() { echo "FAIL: $*"; exit 1; }

# call BUDGET STEP... : one gpu_check-like call in a fresh shell, as the device tool would make.
# Each STEP is NAME=COMMAND, or "require NAME" (steps_require NAME "NAME failed"); prints the
# call's exit status last.
call() {
  local budget="$1"
  shift
  bash -c '
    ROOT="$1"; WORK="$2"; BUDGET="$3"; shift 3
    source "$ROOT/tools/gpu_steps.sh"
    STEP_MIN_SECONDS=1
    STATE="$WORK/state"; OUT="$WORK/out"; LOG_NAME="check.md"; WANTED=(${WANTED_TEST:-})
    SECONDS=0
    steps_begin "# test log"
    for step in "$@"; do
      case "$step" in
        "require "*) steps_require "${step#require }" "${step#require } failed" ;;
        *) run_step "${step%%=*}" "title of ${step%%=*}" bash -c "${step#*=}" ;;
      esac
    done
    steps_end
    echo "status=$?"' call "$ROOT" "$WORK" "$budget" "$@"
}

# 1. No limit: one passing and one failing step; status 1, markers hold the exit statuses.
out="$(call 0 "ok=true" "bad=exit 7")"
echo "$out" | grep -q "status=1" || fail "call 1 status: $out"
[ "$(cat "$WORK/state/done.ok")" = 0 ] || fail "done.ok"
[ "$(cat "$WORK/state/done.bad")" = 7 ] || fail "done.bad"
grep -q "Failed: bad (exit 7)" "$WORK/state/check.md" || fail "summary names the failed step"
cmp -s "$WORK/state/check.md" "$WORK/out/check.md" || fail "log not copied to OUT"

# 2. An 8 s call: 'early' runs first (3 s), so 'late' starts second, with about 5 s left, and is
#    stopped at the limit: not done, status 3. The finished steps are skipped.
out="$(call 8 "ok=true" "bad=exit 7" "early=sleep 3" "late=sleep 60")"
echo "$out" | grep -q "status=3" || fail "call 2 status: $out"
echo "$out" | grep -q "title of ok: done in an earlier call" || fail "ok not skipped: $out"
[ -f "$WORK/state/done.early" ] || fail "early not recorded"
[ ! -f "$WORK/state/done.late" ] || fail "late recorded although stopped at the call's limit"
grep -q "the next call runs it again" "$WORK/state/check.md" || fail "late's stop not logged"

# 3. The next call runs 'late' again, first, with the whole call: this time it finishes.
out="$(call 8 "ok=true" "bad=exit 7" "early=sleep 3" "late=true")"
echo "$out" | grep -q "status=1" || fail "call 3 status (bad still failed): $out"
[ "$(cat "$WORK/state/done.late")" = 0 ] || fail "late not done in call 3"
grep -q "^# Call 3 " "$WORK/state/check.md" || fail "calls not numbered in the log"

# 4. A step that is the first its call runs and still does not finish is recorded (124) and not
#    retried.
out="$(call 3 "ok=true" "bad=exit 7" "early=sleep 3" "late=true" "huge=sleep 60")"
[ "$(cat "$WORK/state/done.huge" 2>/dev/null)" = 124 ] || fail "huge not recorded as 124: $out"
grep -q "does not finish within one call of 3 s" "$WORK/state/check.md" || fail "huge's stop"
out="$(call 3 "huge=sleep 60")"
echo "$out" | grep -q "title of huge: done in an earlier call (exit 124)" || fail "huge retried"

# 5. Names select steps, a prefix before ':' selects a group.
rm -rf "$WORK/state"
out="$(WANTED_TEST="memcheck bench" call 0 "build=true" "bench=true" "memcheck:a=true" \
  "memcheck:b=true" "racecheck:a=true")"
echo "$out" | grep -q "status=0" || fail "call 5 status: $out"
for name in bench memcheck:a memcheck:b; do [ -f "$WORK/state/done.$name" ] || fail "$name"; done
for name in build racecheck:a; do [ ! -f "$WORK/state/done.$name" ] || fail "$name ran"; done

# 6. A command that returns 124 by itself, well inside the limit, is an ordinary failure.
rm -rf "$WORK/state"
out="$(call 20 "own=exit 124")"
echo "$out" | grep -q "status=1" || fail "call 6 status: $out"
# (Any duration: on a loaded machine even `exit 124` can take a second, and the check is about the
# status, which a time-limit kill would log otherwise.)
grep -Eq "exit status 124, [0-9]+ s" "$WORK/state/check.md" || fail "own 124 not logged as its status"
grep -q "time limit" "$WORK/state/check.md" && fail "own 124 taken for the time limit"

# 7. A step name that matches nothing is a usage error, not an empty success.
out="$(WANTED_TEST="nosuch" call 0 "build=true" 2>&1)"
echo "$out" | grep -q "status=2" || fail "call 7 status: $out"

# 8. After a failed build nothing runs (no markers, so the steps run once the build passes), and
#    the call says how to go on; with GPU_CHECK_RETRY_FAILED=1 the failed step runs again, the
#    passed ones stay done.
rm -rf "$WORK/state"
out="$(call 0 "configure=true" "build=exit 2" "require build" "tests=true")"
echo "$out" | grep -q "status=1" || fail "call 8 status: $out"
echo "$out" | grep -q "title of tests: not run: build failed (build: exit 2)" || fail "8: $out"
[ ! -f "$WORK/state/done.tests" ] || fail "tests marked although not run"
grep -q "GPU_CHECK_RETRY_FAILED=1" "$WORK/state/check.md" || fail "no hint to retry"
out="$(call 0 "configure=true" "build=exit 2" "require build" "tests=true")"
echo "$out" | grep -q "title of build: done in an earlier call (exit 2)" || fail "8: build rerun"
out="$(GPU_CHECK_RETRY_FAILED=1 call 0 "configure=exit 9" "build=true" "require build" \
  "tests=true")"
echo "$out" | grep -q "status=0" || fail "retry status: $out"
echo "$out" | grep -q "title of configure: done in an earlier call (exit 0)" || fail "8: $out"
[ "$(cat "$WORK/state/done.build")" = 0 ] || fail "build not retried"
[ "$(cat "$WORK/state/done.tests")" = 0 ] || fail "tests not run after the fixed build"

echo "gpu steps ok"
