// `dml --version`. See version.h.
#include "tools/dml/version.h"

#include <dml_build_info.h>  // generated: DML_COMMIT, DML_CUDA_ARCHITECTURES

#include <string>

#include "engine/device.h"
#include "kernels/conv2d/conv2d.h"

// 1 in dml_emulated's copy of this file (CMakeLists.txt): its CUDA kernels run on the emulator.
#ifndef DML_CUDA_EMULATED
#define DML_CUDA_EMULATED 0
#endif

namespace dml {

const char* build_commit() { return DML_COMMIT; }

std::string version_text() {
  const std::string architectures = DML_CUDA_ARCHITECTURES;
  std::string text = std::string("dml ") + DML_COMMIT + "\n";
  std::string kernels = "compiled for " + architectures;
  if (architectures.empty()) kernels = "not compiled (CPU only)";
  if (DML_CUDA_EMULATED) kernels = "run by the CPU emulator (dml_emulated, for tests; not a GPU)";
  text += "CUDA kernels: " + kernels + "\n";
  text += std::string("cuDNN alternative convolution: ") +
          (engine::kernels::cudnn_available() ? "yes, cuDNN " + engine::kernels::cudnn_version()
                                              : std::string("no")) +
          "\n";
  text += "GPUs visible: " + std::to_string(engine::cuda_device_count()) + "\n";
  return text;
}

}  // namespace dml
