// `dml --version`. See version.h.
#include "tools/dml/version.h"

#include <dml_build_info.h>  // generated: DML_COMMIT, DML_CUDA_ARCHITECTURES

#include <string>

#include "engine/device.h"
#include "kernels/conv2d/conv2d.h"

namespace dml {

const char* build_commit() { return DML_COMMIT; }

std::string version_text() {
  const std::string architectures = DML_CUDA_ARCHITECTURES;
  std::string text = std::string("dml ") + DML_COMMIT + "\n";
  text += "CUDA kernels: " +
          (architectures.empty() ? std::string("not compiled (CPU only)")
                                 : "compiled for " + architectures) +
          "\n";
  text += std::string("cuDNN alternative convolution: ") +
          (engine::kernels::cudnn_available() ? "yes" : "no") + "\n";
  text += "GPUs visible: " + std::to_string(engine::cuda_device_count()) + "\n";
  return text;
}

}  // namespace dml
