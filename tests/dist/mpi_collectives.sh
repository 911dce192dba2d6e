#!/bin/sh
# The collectives of engine/dist/communicator.h over two ranks, and the two ways a rank can fail:
# killed, or stalled past DML_DIST_TIMEOUT_S. Either way the job ends (no hang; `timeout 60` only
# guards the test itself) with a non-zero exit code and a message that says what happened.
# Usage: mpi_collectives.sh DIST_SELFTEST WORK_DIR
selftest=$1 dir=$2
. "$(dirname "$0")/mpi_test_start.sh"

$mpirun "$selftest" collectives > "$dir/log" 2>&1 || fail "collectives (exit $?)"
grep -q "collectives ok (2 ranks)" "$dir/log" || fail "collectives: no ok line"

start=$(date +%s)
DML_DIST_TIMEOUT_S=30 timeout 60 $mpirun -x DML_DIST_TIMEOUT_S "$selftest" rank-dies \
  > "$dir/log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "rank-dies: exit $rc (124: the job hung)"
grep -q "returned (it should not)" "$dir/log" && fail "rank-dies: an all-reduce returned"
grep -qi "signal 9\|killed" "$dir/log" || fail "rank-dies: no message naming the killed rank"
echo "rank-dies: exit $rc after $(($(date +%s) - start)) s"

start=$(date +%s)
DML_DIST_TIMEOUT_S=2 timeout 60 $mpirun -x DML_DIST_TIMEOUT_S "$selftest" rank-stalls \
  > "$dir/log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "rank-stalls: exit $rc (124: the job hung)"
grep -q "rank 0 of 2 waited more than 2 s in MPI MPI_Allreduce" "$dir/log" ||
  fail "rank-stalls: no watchdog message"
echo "rank-stalls: exit $rc after $(($(date +%s) - start)) s"
echo "mpi collectives ok"
