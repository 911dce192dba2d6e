// When the fast CPU paths open an OpenMP region. Below these sizes a parallel region costs more
// than it saves (and on a busy machine every barrier can wait a whole time slice for a
// descheduled thread), so small problems, like most in the tests, stay on one thread. The
// decision depends only on the problem's size, never on the number of threads.
#pragma once

#include <cstdint>

namespace engine::kernels {

// Memory-bound loops that touch each element once (max-pool, optimizer updates): elements.
constexpr int64_t kMinParallelElements = int64_t(1) << 16;

// Compute-bound loops (convolution FLOPs, pair x dimension terms of a distance matrix).
constexpr int64_t kMinParallelWork = int64_t(1) << 20;

}  // namespace engine::kernels
