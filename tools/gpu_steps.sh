# shellcheck shell=bash
# Sourced by tools/gpu_check.sh: runs named steps into one Markdown log, within a time budget per
# call, and remembers which steps finished so that the next call goes on from there.
#
# Why: the device tool cuts a command after 10 minutes and a GPU session has 15 minutes in
# all, while building, testing, sanitizing and benchmarking take longer than one command. So each
# call stops starting steps near its budget, kills a step that runs past it, copies the log to
# $OUT after every step (what a killed command leaves under $OUT still comes back), and a second
# call on the same (still warm) machine skips what is done.
#
# The caller sets, before steps_begin:
#   STATE      folder for the log and one marker per finished step (e.g. inside the build folder,
#              so that a fresh machine starts over with a fresh build)
#   BUDGET     seconds this call may spend (0 = no limit)
#   LOG_NAME   file name of the log, e.g. 2026-11-24-NVIDIA-H100-abc1234.md (kept from the first
#              call, so later calls append to the same file)
#   WANTED     step names or prefixes given on the command line (empty = every step)
# and calls: steps_begin "header text"; run_step NAME TITLE COMMAND...; ...; steps_end.
#
# A step killed at the budget runs again in the next call, unless it was the first step its call
# ran (it had the whole call to itself): then it cannot fit in one call, and is recorded as failed
# instead of retried forever. (Decided by order, not by clock readings, so it is deterministic.)
# Markers: $STATE/done.NAME holds the step's exit status (124: did not fit in one call).
# A finished step is not run again, failed or not, unless GPU_CHECK_RETRY_FAILED=1 (after a fix:
# the failed steps run again, the passed ones stay done). `steps_require NAME REASON` after a step
# stops every later step of the call (no marker, so they run once NAME passes) when NAME failed:
# nothing after a failed build, or a GPU the program cannot see, can pass.

STEP_MIN_SECONDS=30  # do not start a step with less time left than this

steps_begin() {
  mkdir -p "$STATE"
  if [ -f "$STATE/log-name" ]; then
    LOG_NAME="$(cat "$STATE/log-name")"
  else
    echo "$LOG_NAME" > "$STATE/log-name"
  fi
  LOG="$STATE/$LOG_NAME"
  CALL=$(( $(cat "$STATE/calls" 2>/dev/null || echo 0) + 1 ))
  echo "$CALL" > "$STATE/calls"
  if [ "$CALL" = 1 ]; then
    printf '%s\n' "$1" > "$LOG"
  else
    printf "\n# Call %s (%s UTC)\n" "$CALL" "$(date -u +%H:%M:%S)" >> "$LOG"
  fi
  STEPS_PENDING=0
  STEPS_RUN=0
  STEPS_SEEN=()
  STEPS_BLOCKED=""
  STEPS_BLOCKED_COUNT=0
  copy_log_out
}

steps_require() {  # steps_require NAME REASON: later steps do not run when NAME has failed
  local status
  status="$(cat "$STATE/done.$1" 2>/dev/null || echo 0)"
  if [ "$status" != 0 ] && [ -z "$STEPS_BLOCKED" ]; then STEPS_BLOCKED="$2 ($1: exit $status)"; fi
}

copy_log_out() {
  if [ -n "${OUT:-}" ]; then cp "$LOG" "$OUT/" 2>/dev/null || true; fi
}

step_wanted() {  # step_wanted NAME: true when WANTED is empty or names NAME or a prefix "P:" of it
  local want
  [ ${#WANTED[@]} -eq 0 ] && return 0
  for want in "${WANTED[@]}"; do
    if [ "$1" = "$want" ] || [ "${1%%:*}" = "$want" ]; then return 0; fi
  done
  return 1
}

seconds_left() {  # prints the seconds this call has left (a large number when BUDGET is 0)
  if [ "$BUDGET" -gt 0 ]; then echo $(( SECONDS < BUDGET ? BUDGET - SECONDS : 0 )); else echo 999999; fi
}

run_step() {  # run_step NAME TITLE COMMAND...
  local name="$1" title="$2"
  shift 2
  step_wanted "$name" || return 0
  STEPS_SEEN+=("$name")
  if [ -f "$STATE/done.$name" ] && [ "${GPU_CHECK_RETRY_FAILED:-0}" = 1 ] &&
    [ "$(cat "$STATE/done.$name")" != 0 ]; then
    rm -f "$STATE/done.$name"
  fi
  if [ -f "$STATE/done.$name" ]; then
    echo "$title: done in an earlier call (exit $(cat "$STATE/done.$name"))"
    return 0
  fi
  if [ -n "$STEPS_BLOCKED" ]; then
    STEPS_BLOCKED_COUNT=$((STEPS_BLOCKED_COUNT + 1))
    echo "$title: not run: $STEPS_BLOCKED"
    return 0
  fi
  local left
  left="$(seconds_left)"
  if [ "$left" -lt "$STEP_MIN_SECONDS" ]; then
    STEPS_PENDING=$((STEPS_PENDING + 1))
    echo "$title: not started (${left} s left in this call)"
    return 0
  fi
  # The first step this call runs has the whole call to itself (steps done before are skipped).
  local whole_call=0
  if [ "$STEPS_RUN" -eq 0 ]; then whole_call=1; fi
  STEPS_RUN=$((STEPS_RUN + 1))
  printf '\n## %s\n\n```\n$ %s\n' "$title" "$*" >> "$LOG"
  local start=$SECONDS status
  if [ "$BUDGET" -gt 0 ]; then
    timeout --kill-after=10 "$left" "$@" >> "$LOG" 2>&1
  else
    "$@" >> "$LOG" 2>&1
  fi
  status=$?
  local took=$((SECONDS - start))
  # Stopped by our timeout: its status, and the time was up (a command may return 124 itself).
  if [ "$BUDGET" -gt 0 ] && { [ $status -eq 124 ] || [ $status -eq 137 ]; } &&
    [ "$took" -ge $((left - 1)) ]; then
    if [ $whole_call = 1 ]; then
      echo "[stopped after $took s: does not finish within one call of $BUDGET s]" >> "$LOG"
      echo 124 > "$STATE/done.$name"
    else
      echo "[stopped after $took s at this call's time limit; the next call runs it again]" >> "$LOG"
      STEPS_PENDING=$((STEPS_PENDING + 1))
    fi
  else
    echo "[exit status $status, $took s]" >> "$LOG"
    echo "$status" > "$STATE/done.$name"
  fi
  printf '```\n' >> "$LOG"
  copy_log_out
  echo "$title: exit $status ($took s)"
  return 0
}

steps_end() {  # writes the summary; returns 0 all passed, 1 some failed, 3 some not run yet,
  #              2 when the step names given match no step
  local name failed=() status
  if [ ${#STEPS_SEEN[@]} -eq 0 ]; then
    printf '\nNo step is named %s.\n' "${WANTED[*]}" >> "$LOG"
    echo "no step is named ${WANTED[*]}" >&2
    return 2
  fi
  for name in "${STEPS_SEEN[@]}"; do
    if [ -f "$STATE/done.$name" ]; then
      status="$(cat "$STATE/done.$name")"
      if [ "$status" != 0 ]; then failed+=("$name (exit $status)"); fi
    fi
  done
  {
    printf '\n## Summary of call %s\n\n' "$CALL"
    printf '%s step(s) finished, %s failed, %s not run yet.\n' \
      "$(( ${#STEPS_SEEN[@]} - STEPS_PENDING - STEPS_BLOCKED_COUNT ))" "${#failed[@]}" \
      "$((STEPS_PENDING + STEPS_BLOCKED_COUNT))"
    if [ ${#failed[@]} -gt 0 ]; then printf 'Failed: %s\n' "${failed[*]}"; fi
    if [ "$STEPS_BLOCKED_COUNT" -gt 0 ]; then
      printf '%s step(s) not run: %s. After a fix, call again with GPU_CHECK_RETRY_FAILED=1.\n' \
        "$STEPS_BLOCKED_COUNT" "$STEPS_BLOCKED"
    elif [ "$STEPS_PENDING" -gt 0 ]; then
      printf 'Run the same command again on this machine to go on.\n'
    fi
  } >> "$LOG"
  copy_log_out
  echo "log: $LOG (${#failed[@]} failed, $((STEPS_PENDING + STEPS_BLOCKED_COUNT)) not run yet)"
  if [ "$STEPS_BLOCKED_COUNT" -gt 0 ]; then return 1; fi  # going on needs a fix first
  if [ "$STEPS_PENDING" -gt 0 ]; then return 3; fi
  if [ ${#failed[@]} -gt 0 ]; then return 1; fi
  return 0
}
