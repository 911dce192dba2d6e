// kernel_profile.cu's functions in a build without CUDA: nothing launches, so there is nothing
// to profile.
#include "kernels/common/cuda_stub.h"
#include "kernels/common/device_counters.h"

namespace engine::kernels {

void start_profile() { no_cuda("start_profile"); }
void profile_launch(const std::string&, bool) {}
void profile_after_host_wait() {}
std::vector<ProfiledLaunch> stop_profile() { no_cuda("stop_profile"); }

}  // namespace engine::kernels
