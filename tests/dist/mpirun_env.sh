# shellcheck shell=sh
# Sourced by the tests/dist scripts: $mpirun, two ranks on this machine (oversubscribed: the CI
# machine has 2 cores; as root, which Open MPI refuses without the flag), or exit with "skipped:"
# when Open MPI is not installed. Shared memory without the kernel's cross-memory attach, which
# containers often forbid.
if ! command -v mpirun > /dev/null; then
  echo "skipped: mpirun not found (scripts/setup.sh installs Debian's openmpi-bin)"
  exit 0
fi
mpirun="mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -n 2"
