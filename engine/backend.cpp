// Backend selection (contract in backend.h). Each choice is one process-wide atomic holding
// -1 until it is first read or set, so neither the environment nor anything else is touched
// during static initialization.
#include "engine/backend.h"

#include <atomic>
#include <cstdlib>

#include "kernels/common/check.h"

namespace engine {

namespace {

constexpr int kUnset = -1;
std::atomic<int> conv_choice{kUnset};
std::atomic<int> gemm_choice{kUnset};
std::atomic<int> fused_choice{kUnset};
std::atomic<int> tile_choice{kUnset};
std::atomic<int> attack_loop_choice{kUnset};
std::atomic<int> tensor_core_gemm_choice{kUnset};
std::atomic<int> tensor_core_conv_choice{kUnset};

// The value of an environment variable, or "" when unset.
std::string env_value(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// Stores `value` unless a choice was made meanwhile (a concurrent set_*_backend() wins over
// the environment).
void store_if_unset(std::atomic<int>& choice, int value) {
  int expected = kUnset;
  choice.compare_exchange_strong(expected, value, std::memory_order_acq_rel);
}

}  // namespace

void set_conv_backend(ConvBackend backend) {
  conv_choice.store(static_cast<int>(backend), std::memory_order_release);
}

ConvBackend conv_backend() {
  if (conv_choice.load(std::memory_order_acquire) == kUnset) {
    const std::string text = env_value("ENGINE_CONV");
    const ConvBackend chosen =
        text.empty() ? ConvBackend::Ours : parse_conv_backend(text, "ENGINE_CONV");
    store_if_unset(conv_choice, static_cast<int>(chosen));
  }
  return static_cast<ConvBackend>(conv_choice.load(std::memory_order_acquire));
}

void set_gemm_backend(GemmBackend backend) {
  gemm_choice.store(static_cast<int>(backend), std::memory_order_release);
}

void set_fused_kernels(bool on) { fused_choice.store(on ? 1 : 0, std::memory_order_release); }

bool fused_kernels() {
  if (fused_choice.load(std::memory_order_acquire) == kUnset) {
    const std::string text = env_value("ENGINE_FUSED");
    ENGINE_CHECK(text.empty() || text == "0" || text == "1", "ENGINE_FUSED must be 0 or 1, got '",
                 text, "'");
    store_if_unset(fused_choice, text == "1" ? 1 : 0);
  }
  return fused_choice.load(std::memory_order_acquire) == 1;
}

GemmBackend gemm_backend() {
  if (gemm_choice.load(std::memory_order_acquire) == kUnset) {
    const std::string text = env_value("ENGINE_GEMM");
    const GemmBackend chosen =
        text.empty() ? GemmBackend::Ours : parse_gemm_backend(text, "ENGINE_GEMM");
    store_if_unset(gemm_choice, static_cast<int>(chosen));
  }
  return static_cast<GemmBackend>(gemm_choice.load(std::memory_order_acquire));
}

void set_attack_loop(AttackLoop loop) {
  attack_loop_choice.store(static_cast<int>(loop), std::memory_order_release);
}

AttackLoop attack_loop() {
  if (attack_loop_choice.load(std::memory_order_acquire) == kUnset) {
    const std::string text = env_value("ENGINE_ATTACK_LOOP");
    const AttackLoop chosen =
        text.empty() ? AttackLoop::Eager : parse_attack_loop(text, "ENGINE_ATTACK_LOOP");
    store_if_unset(attack_loop_choice, static_cast<int>(chosen));
  }
  return static_cast<AttackLoop>(attack_loop_choice.load(std::memory_order_acquire));
}

const char* attack_loop_name(AttackLoop loop) {
  return loop == AttackLoop::Captured ? "captured" : "eager";
}

AttackLoop parse_attack_loop(const std::string& text, const std::string& what) {
  if (text == "eager") return AttackLoop::Eager;
  if (text == "captured") return AttackLoop::Captured;
  fail(what, ": unknown attack loop '", text, "' (expected 'eager' or 'captured')");
}

const char* backend_name(ConvBackend backend) {
  return backend == ConvBackend::Cudnn ? "cudnn" : "ours";
}

const char* backend_name(GemmBackend backend) {
  return backend == GemmBackend::Cublas ? "cublas" : "ours";
}

ConvBackend parse_conv_backend(const std::string& text, const std::string& what) {
  if (text == "ours") return ConvBackend::Ours;
  if (text == "cudnn") return ConvBackend::Cudnn;
  fail(what, ": unknown convolution backend '", text, "' (expected 'ours' or 'cudnn')");
}

GemmBackend parse_gemm_backend(const std::string& text, const std::string& what) {
  if (text == "ours") return GemmBackend::Ours;
  if (text == "cublas") return GemmBackend::Cublas;
  fail(what, ": unknown GEMM backend '", text, "' (expected 'ours' or 'cublas')");
}

void set_conv_tile(kernels::ConvTile tile) {
  tile_choice.store(static_cast<int>(tile), std::memory_order_release);
}

kernels::ConvTile conv_tile() {
  if (tile_choice.load(std::memory_order_acquire) == kUnset) {
    const std::string text = env_value("ENGINE_CONV_TILE");
    const kernels::ConvTile chosen =
        text.empty() ? kernels::ConvTile::Auto : parse_conv_tile(text, "ENGINE_CONV_TILE");
    store_if_unset(tile_choice, static_cast<int>(chosen));
  }
  return static_cast<kernels::ConvTile>(tile_choice.load(std::memory_order_acquire));
}

const char* conv_tile_name(kernels::ConvTile tile) {
  switch (tile) {
    case kernels::ConvTile::Cols128:
      return "128";
    case kernels::ConvTile::Cols64:
      return "64";
    case kernels::ConvTile::Cols32:
      return "32";
    case kernels::ConvTile::Auto:
      break;
  }
  return "auto";
}

kernels::ConvTile parse_conv_tile(const std::string& text, const std::string& what) {
  for (kernels::ConvTile tile : {kernels::ConvTile::Auto, kernels::ConvTile::Cols128,
                                 kernels::ConvTile::Cols64, kernels::ConvTile::Cols32}) {
    if (text == conv_tile_name(tile)) return tile;
  }
  fail(what, ": unknown convolution tile '", text, "' (expected 'auto', '128', '64' or '32')");
}

void set_tensor_core_gemm(TensorCoreGemm gemm) {
  tensor_core_gemm_choice.store(static_cast<int>(gemm), std::memory_order_release);
}

TensorCoreGemm tensor_core_gemm() {
  if (tensor_core_gemm_choice.load(std::memory_order_acquire) == kUnset) {
    const std::string text = env_value("ENGINE_TC_GEMM");
    const TensorCoreGemm chosen =
        text.empty() ? TensorCoreGemm::Wmma : parse_tensor_core_gemm(text, "ENGINE_TC_GEMM");
    store_if_unset(tensor_core_gemm_choice, static_cast<int>(chosen));
  }
  return static_cast<TensorCoreGemm>(tensor_core_gemm_choice.load(std::memory_order_acquire));
}

const char* tensor_core_gemm_name(TensorCoreGemm gemm) {
  if (gemm == TensorCoreGemm::Wgmma) return "wgmma";
  if (gemm == TensorCoreGemm::WgmmaOverlap) return "wgmma-overlap";
  return gemm == TensorCoreGemm::Mma ? "mma" : "wmma";
}

TensorCoreGemm parse_tensor_core_gemm(const std::string& text, const std::string& what) {
  if (text == "wmma") return TensorCoreGemm::Wmma;
  if (text == "mma") return TensorCoreGemm::Mma;
  if (text == "wgmma") return TensorCoreGemm::Wgmma;
  if (text == "wgmma-overlap") return TensorCoreGemm::WgmmaOverlap;
  fail(what, ": unknown tensor-core GEMM '", text,
       "' (expected 'wmma', 'mma', 'wgmma' or 'wgmma-overlap')");
}

void set_tensor_core_conv(TensorCoreConv conv) {
  tensor_core_conv_choice.store(static_cast<int>(conv), std::memory_order_release);
}

TensorCoreConv tensor_core_conv() {
  if (tensor_core_conv_choice.load(std::memory_order_acquire) == kUnset) {
    const std::string text = env_value("ENGINE_TC_CONV");
    const TensorCoreConv chosen =
        text.empty() ? TensorCoreConv::Wmma : parse_tensor_core_conv(text, "ENGINE_TC_CONV");
    store_if_unset(tensor_core_conv_choice, static_cast<int>(chosen));
  }
  return static_cast<TensorCoreConv>(tensor_core_conv_choice.load(std::memory_order_acquire));
}

const char* tensor_core_conv_name(TensorCoreConv conv) {
  return conv == TensorCoreConv::Mma ? "mma" : "wmma";
}

TensorCoreConv parse_tensor_core_conv(const std::string& text, const std::string& what) {
  if (text == "wmma") return TensorCoreConv::Wmma;
  if (text == "mma") return TensorCoreConv::Mma;
  fail(what, ": unknown tensor-core convolution '", text, "' (expected 'wmma' or 'mma')");
}

}  // namespace engine
