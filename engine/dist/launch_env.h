// What the MPI launcher and the user's environment say, read the same way with and without MPI
// (engine/dist/communicator_mpi.cpp, communicator_absent.cpp).
#pragma once

namespace engine::dist {

// The number of ranks the launcher started (Open MPI's OMPI_COMM_WORLD_SIZE, PMIx / Slurm's
// PMI_SIZE), or 0 when the process was not started by an MPI launcher.
int launcher_world_size();

// DML_DIST_TIMEOUT_S, or 600 when unset; throws engine::Error naming the variable when it is set
// to anything but a positive number.
double timeout_from_environment();

}  // namespace engine::dist
