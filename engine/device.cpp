#include "engine/device.h"

#include <mutex>

#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"

namespace engine {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

int cuda_device_count() {
  // Asked once, on first use (never during static initialization: test listing and tools that
  // never touch a GPU must not initialize the CUDA runtime).
  static std::once_flag once;
  static int count = 0;
  std::call_once(once, [] { count = kernels::cuda_device_count(); });
  return count;
}

void use_cuda_device(int ordinal) { kernels::cuda_set_device(ordinal); }

Device default_device() { return cuda_available() ? Device::cuda(0) : Device::cpu(); }

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string digits = text.substr(5);
    // At most 4 digits: a larger index names no GPU, and stoi would throw out_of_range (not an
    // engine::Error) past INT_MAX.
    ENGINE_CHECK(!digits.empty() && digits.size() <= 4 &&
                     digits.find_first_not_of("0123456789") == std::string::npos,
                 "invalid device '", text, "': expected cpu, cuda or cuda:N");
    return Device::cuda(std::stoi(digits));
  }
  fail("invalid device '", text, "': expected cpu, cuda or cuda:N");
}

}  // namespace engine
