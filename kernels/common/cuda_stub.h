// For the stubs that stand in for the CUDA sources when the project is built without CUDA
// (ENGINE_CUDA=OFF or no nvcc): each kernels/<op>/ has an <op>_cuda_stub.cpp beside its *_cuda.cu
// that defines the same *_cuda functions as a call to no_cuda, so a CUDA code path can never
// silently fall back to something else (CMakeLists.txt picks one or the other).
#pragma once

#include "kernels/common/check.h"

namespace engine::kernels {

[[noreturn]] inline void no_cuda(const char* function) {
  fail(function, ": this binary was built without CUDA (configure with -DENGINE_CUDA=ON)");
}

}  // namespace engine::kernels
