// The launch-resource check of the CUDA emulator (contract: launch_resources.h).
#include "tests/support/cuda_emulator/launch_resources.h"

#include <iterator>

namespace emu {

namespace {

// cuda_resources.inc: one {kernel, sm, launch bound, registers, shared, stack, spill stores,
// spill loads} line per kernel and architecture, written by ptxas_report at build time.
const KernelResources kGenerated[] = {
#include "cuda_resources.inc"
    {"", 0, 0, 0, 0, 0, 0, 0}};  // ends the table (and keeps it non-empty in a build without nvcc)

// "index_select_forward_kernel<T>" or "ns::kernel" -> "index_select_forward_kernel", "kernel".
std::string unqualified(const char* launch_name) {
  std::string name(launch_name);
  const size_t bracket = name.find('<');
  if (bracket != std::string::npos) name.erase(bracket);
  const size_t scope = name.rfind("::");
  if (scope != std::string::npos) name.erase(0, scope + 2);
  return name;
}

}  // namespace

const std::vector<KernelResources>& kernel_resources() {
  static const std::vector<KernelResources> table(std::begin(kGenerated), std::end(kGenerated) - 1);
  return table;
}

int64_t registers_per_block(int registers, int64_t threads) {
  const int64_t warps = (threads + 31) / 32;
  const int64_t per_warp = (int64_t(registers) * 32 + kRegisterAllocationUnit - 1) /
                           kRegisterAllocationUnit * kRegisterAllocationUnit;
  return warps * per_warp;
}

int64_t max_opt_in_shared_bytes(int sm) {
  if (sm == 80) return 166912;
  if (sm == 86 || sm == 89) return 101376;
  if (sm == 90) return 232448;
  return kSharedBytesPerBlock;
}

std::string launch_resource_problem(const char* kernel_name, int64_t threads,
                                    std::size_t dynamic_shared_bytes, bool opted_in) {
  const std::string name = unqualified(kernel_name);
  for (const KernelResources& r : kernel_resources()) {
    if (r.kernel != name) continue;
    const std::string on = " on sm_" + std::to_string(r.sm);
    if (r.max_threads > 0 && threads > r.max_threads)
      return "too many resources requested for launch" + on + ": " + std::to_string(threads) +
             " threads, more than the kernel's __launch_bounds__ of " +
             std::to_string(r.max_threads);
    const int64_t needed = registers_per_block(r.registers, threads);
    if (needed > kRegistersPerBlock)
      return "too many resources requested for launch" + on + ": " + std::to_string(threads) +
             " threads of " + std::to_string(r.registers) + " registers need " +
             std::to_string(needed) + " registers, more than a block's " +
             std::to_string(kRegistersPerBlock);
    const int64_t shared = int64_t(r.shared_bytes) + int64_t(dynamic_shared_bytes);
    const int64_t limit = opted_in ? max_opt_in_shared_bytes(r.sm) : kSharedBytesPerBlock;
    if (shared > limit)
      return "too many resources requested for launch" + on + ": " +
             std::to_string(r.shared_bytes) + " bytes of static and " +
             std::to_string(dynamic_shared_bytes) + " of dynamic shared memory, more than " +
             std::to_string(limit);
  }
  return "";
}

}  // namespace emu
