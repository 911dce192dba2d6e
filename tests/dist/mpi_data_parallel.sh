#!/bin/sh
# Data-parallel training's pieces over two ranks (tests/dist/data_parallel_selftest.cpp): gradient
# buckets whose all-reduce starts during the backward, and a synchronized batch norm equal to the
# plain one over the concatenated batch.
# Usage: mpi_data_parallel.sh DATA_PARALLEL_SELFTEST WORK_DIR
selftest=$1 dir=$2
. "$(dirname "$0")/mpi_test_start.sh"
for mode in overlap sync-bn; do
  # shellcheck disable=SC2086 # $mpirun (mpi_test_start.sh) is a command line, split on purpose
  timeout 120 $mpirun "$selftest" $mode > "$dir/log" 2>&1 || fail "$mode (exit $?)"
  grep -q "^$mode ok" "$dir/log" || fail "$mode: no ok line"
  cat "$dir/log"
done
echo "mpi data parallel ok"
