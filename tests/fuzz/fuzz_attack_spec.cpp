// libFuzzer target: the robrank-style attack spec strings of `dml attack` / `dml ers`
// ("CA:pm=+:W=1:eps=0.30196:alpha=0.011764:pgditer=32"). Any text must parse or fail with
// engine::Error; a spec that parses must survive a round trip through its canonical string.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "attacks/attack.h"
#include "kernels/common/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string canonical;
  try {
    canonical = attacks::attack_spec_string(attacks::parse_attack_spec(text));
  } catch (const engine::Error&) {
    return 0;
  }
  // The canonical form spells out every key that has a value, so parsing it again must give
  // the same string back.
  if (attacks::attack_spec_string(attacks::parse_attack_spec(canonical)) != canonical) {
    std::abort();
  }
  return 0;
}
