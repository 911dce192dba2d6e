// What a GPU checks at launch that the emulator cannot see from the kernel's C++: the registers
// and static shared memory ptxas gave each kernel. A block needs its warps' registers from one
// SM's register file, at most 65,536 on every architecture from sm_70 up; registers go to warps
// in units of 256, so a warp of threads using r registers each takes ceil(32 r / 256) * 256. A
// launch asking for more fails with cudaErrorLaunchOutOfResources ("too many resources requested
// for launch"), a failure that only shows on a GPU, and only for that block size: a kernel at
// 128 registers runs with 256 threads and fails with 1024. Static plus dynamic shared memory
// must stay within 48 KiB (the emulator's kernels never opt in to more). And a kernel declared
// with __launch_bounds__(N) was compiled for at most N threads: a larger block fails too.
//
// The table comes from the build: every kernels/*.cu (and the emulator's sample kernels) is
// compiled once more with `nvcc --resource-usage` for each architecture of
// CMAKE_CUDA_ARCHITECTURES and once to PTX (for the launch bounds), and ptxas_report turns the
// reports into cuda_resources.inc. A build without nvcc has an empty table and checks nothing
// here. Kernels are looked up by their unqualified name, so two kernels of one name in different
// files share a row: the larger registers and shared memory and the stricter launch bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace emu {

struct KernelResources {
  std::string kernel;    // unqualified, without template arguments: "conv2d_fprop_kernel"
  int sm = 0;            // architecture, e.g. 80 or 90
  int max_threads = 0;   // __launch_bounds__ (the strictest over instantiations); 0: none declared
  int registers = 0;     // per thread; the largest over a template's instantiations
  int shared_bytes = 0;  // static shared memory
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

constexpr int64_t kRegistersPerBlock = 65536;
constexpr int64_t kRegisterAllocationUnit = 256;  // per warp
constexpr int64_t kSharedBytesPerBlock = 48 * 1024;

// The table of this build (empty without nvcc).
const std::vector<KernelResources>& kernel_resources();

// Registers a block of `threads` threads takes when each thread uses `registers`.
int64_t registers_per_block(int registers, int64_t threads);

// Why a GPU would refuse to launch `kernel_name` (as written at the launch site, e.g.
// "index_select_forward_kernel<T>") with `threads` threads per block and `dynamic_shared_bytes`,
// for any architecture in the table; empty when it fits or the kernel is not in the table. Static
// plus dynamic shared memory may reach the architecture's opt-in maximum
// (max_opt_in_shared_bytes) when `opted_in` (the kernel raised its dynamic limit), else 48 KiB.
std::string launch_resource_problem(const char* kernel_name, int64_t threads,
                                    std::size_t dynamic_shared_bytes, bool opted_in);

// A block's shared memory with the opt-in on sm_`sm`: 163 KiB on sm_80, 99 KiB on sm_86 and
// sm_89, 227 KiB on sm_90 (CUDA C++ Programming Guide, "Technical Specifications per Compute
// Capability"); 48 KiB for an architecture not listed.
int64_t max_opt_in_shared_bytes(int sm);

}  // namespace emu
