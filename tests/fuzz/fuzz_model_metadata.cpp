// libFuzzer target: the model metadata a `.safetensors` file carries (dml_checkpoint's training
// config or dml_model), which every command that loads a model reads before it builds one
// (tools/dml/load_model.h). fuzz_safetensors covers the container; this target the JSON inside.
// Any text must be read or fail with engine::Error, never another exception or a crash, and what
// is read must hold what read_model_metadata promises: a known model, counts from 1 to the file's
// largest extent (docs/testing.md, Fuzzing).
//
// Input: the first byte picks the key by its parity ('0' dml_model, '1' dml_checkpoint, as the
// seeds write it); the rest is the metadata's text. The file is taken to hold a tensor of extent
// kLargestExtent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "kernels/common/check.h"
#include "models/registry.h"
#include "tools/dml/load_model.h"

namespace {

constexpr int64_t kLargestExtent = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string key = data[0] % 2 == 0 ? "dml_model" : "dml_checkpoint";
  const std::map<std::string, std::string> metadata = {
      {key, std::string(reinterpret_cast<const char*>(data) + 1, size - 1)}};
  try {
    const dml::TrainedModel trained =
        dml::read_model_metadata(metadata, kLargestExtent, "fuzz.safetensors");
    const models::ModelConfig& c = trained.config;
    if (!models::is_model_name(c.name) || c.embedding_dim < 1 || c.embedding_dim > kLargestExtent ||
        c.bn_branches < 1 || c.bn_branches > kLargestExtent || trained.model) {
      std::abort();
    }
  } catch (const engine::Error&) {
  }
  return 0;
}
