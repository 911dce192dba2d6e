// Compiled instead of conv2d_cudnn.cu when the build has no cuDNN (ENGINE_CUDNN=OFF, cuDNN not
// found, or no CUDA at all), so it includes no CUDA header. Every cuDNN entry point throws, so
// ConvBackend::Cudnn can never silently fall back to something else.
#include "kernels/common/check.h"
#include "kernels/conv2d/conv2d.h"

namespace engine::kernels {

namespace {
[[noreturn]] void no_cudnn(const char* function) {
  fail(function,
       ": this binary was built without cuDNN (install cuDNN and configure with "
       "-DENGINE_CUDA=ON -DENGINE_CUDNN=ON), so the cudnn convolution backend is "
       "unavailable; use the default backend 'ours'");
}
}  // namespace

bool cudnn_available() { return false; }
std::string cudnn_version() { return ""; }

void conv2d_fprop_cudnn(const Conv2dShape&, const float*, const float*, const float*, float*,
                        Precision) {
  no_cudnn("conv2d_fprop_cudnn");
}
void conv2d_dgrad_cudnn(const Conv2dShape&, const float*, const float*, float*, Precision) {
  no_cudnn("conv2d_dgrad_cudnn");
}
void conv2d_wgrad_cudnn(const Conv2dShape&, const float*, const float*, float*, float*, Precision) {
  no_cudnn("conv2d_wgrad_cudnn");
}
void set_cudnn_algorithm_choice(CudnnAlgorithmChoice) {}  // nothing to choose from
std::string conv2d_cudnn_algorithms(const Conv2dShape&, Precision) {
  no_cudnn("conv2d_cudnn_algorithms");
}

}  // namespace engine::kernels
