// libFuzzer target: `dml train` configs. Any file must load and resolve, or fail with
// dml::UsageError (exit code 2, a message naming the file and key): no other exception type, no
// crash (docs/testing.md, Fuzzing). A config that resolves must resolve again, unchanged, from its
// resolved JSON, which is what checkpoints store and what --resume compares.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tests/fuzz/fuzz_input_file.h"
#include "tools/dml/args.h"
#include "tools/dml/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input_file("fuzz-config", data, size);
  if (path.empty()) return 0;
  dml::TrainConfig config;
  try {
    config = dml::resolve_config(dml::load_config_file(path), path);
  } catch (const dml::UsageError&) {
    return 0;
  }
  if (dml::resolve_config(config.resolved, path).resolved != config.resolved) std::abort();
  return 0;
}
