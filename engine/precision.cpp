// The precision policy (contract in precision.h): one process-wide atomic, -1 until set.
#include "engine/precision.h"

#include <atomic>

#include "kernels/common/check.h"

namespace engine {

namespace {

constexpr int kUnset = -1;
std::atomic<int> precision_choice{kUnset};

}  // namespace

void set_precision(Precision precision) {
  precision_choice.store(static_cast<int>(precision), std::memory_order_release);
}

Precision precision() {
  const int choice = precision_choice.load(std::memory_order_acquire);
  return choice == kUnset ? Precision::Fp32 : static_cast<Precision>(choice);
}

bool precision_is_set() { return precision_choice.load(std::memory_order_acquire) != kUnset; }

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::Tf32:
      return "tf32";
    case Precision::Bf16:
      return "bf16";
    case Precision::Fp32:
      break;
  }
  return "fp32";
}

Precision parse_precision(const std::string& text, const std::string& what) {
  if (text == "fp32") return Precision::Fp32;
  if (text == "tf32") return Precision::Tf32;
  if (text == "bf16") return Precision::Bf16;
  fail(what, ": unknown precision '", text, "' (expected fp32, tf32 or bf16)");
}

void check_precision_implemented(Precision precision, const std::string& what) {
  // fp32, tf32 and bf16 all have GEMM kernels; convolutions run strict FP32 under tf32 and bf16
  // until their tensor-core kernels land (precision.h), which needs no refusal.
  ENGINE_CHECK(
      precision == Precision::Fp32 || precision == Precision::Tf32 || precision == Precision::Bf16,
      what, ": unknown precision value ", static_cast<int>(precision));
}

}  // namespace engine
