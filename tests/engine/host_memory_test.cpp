// engine/host_memory: a host tensor that cannot fit in what the process may still use is refused
// with both sizes named, instead of being handed out and killing the process later (OOM killer).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "engine/host_memory.h"
#include "engine/tensor.h"
#include "kernels/common/check.h"

namespace {

// ENGINE_HOST_MEMORY_LIMIT for the scope of one test (unset again at its end).
class HostMemoryLimit {
 public:
  explicit HostMemoryLimit(const char* value) { ::setenv("ENGINE_HOST_MEMORY_LIMIT", value, 1); }
  ~HostMemoryLimit() { ::unsetenv("ENGINE_HOST_MEMORY_LIMIT"); }
  HostMemoryLimit(const HostMemoryLimit&) = delete;
  HostMemoryLimit& operator=(const HostMemoryLimit&) = delete;
};

}  // namespace

TEST_CASE("parse_byte_size reads whole numbers with K, M, G, T", "[engine][memory]") {
  CHECK(engine::parse_byte_size("1048576", "x") == 1048576u);
  CHECK(engine::parse_byte_size("512K", "x") == 512u * 1024);
  CHECK(engine::parse_byte_size("64M", "x") == 64u * 1024 * 1024);
  CHECK(engine::parse_byte_size("16G", "x") == 16ull * 1024 * 1024 * 1024);
  CHECK(engine::parse_byte_size("2T", "x") == 2ull << 40);
  for (const char* bad : {"", "G", "12X", "1.5G", "-1G", "16GB"}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(
        engine::parse_byte_size(bad, "ENGINE_HOST_MEMORY_LIMIT"),
        Catch::Contains("ENGINE_HOST_MEMORY_LIMIT") && Catch::Contains("is not a size"));
  }
  CHECK(engine::format_bytes(100u << 20) == "100.0 MiB");
  CHECK(engine::format_bytes(12ull << 30) == "12.0 GiB");
  CHECK(engine::format_bytes(64) == "64 B");
}

TEST_CASE("a host tensor beyond what the process may use is refused, naming both sizes",
          "[engine][memory]") {
  const HostMemoryLimit limit("64M");
  // 100 MiB of f32 against a 64 MiB cap.
  REQUIRE_THROWS_AS(engine::Tensor::zeros({25 * 1024 * 1024}), engine::Error);
  REQUIRE_THROWS_WITH(engine::Tensor::zeros({25 * 1024 * 1024}),
                      Catch::Contains("host out of memory: a tensor of 100.0 MiB") &&
                          Catch::Contains("ENGINE_HOST_MEMORY_LIMIT=64M"));
  // What fits is handed out; with it in use, a second one that would pass the cap is refused.
  const engine::Tensor first = engine::Tensor::zeros({10 * 1024 * 1024});  // 40 MiB
  CHECK(first.numel() == 10 * 1024 * 1024);
  REQUIRE_THROWS_WITH(
      engine::Tensor::zeros({8 * 1024 * 1024}),  // 32 MiB more: 72 > 64
      Catch::Contains("a tensor of 32.0 MiB") && Catch::Contains("tensors in use: 40.0 MiB"));
  // A malformed cap is an error naming the variable, not a silent "no limit".
  const HostMemoryLimit bad("lots");
  REQUIRE_THROWS_WITH(engine::Tensor::zeros({8 * 1024 * 1024}),
                      Catch::Contains("ENGINE_HOST_MEMORY_LIMIT: 'lots' is not a size"));
}

TEST_CASE("the budget is the least of the limits it knows", "[engine][memory]") {
  const HostMemoryLimit limit("1M");
  const std::optional<engine::HostMemoryBudget> budget = engine::host_memory_budget(256 * 1024);
  REQUIRE(budget.has_value());
  CHECK(budget->bytes == 768u * 1024);  // 1 MiB cap less 256 KiB in use: below MemAvailable
  CHECK(budget->limit == "ENGINE_HOST_MEMORY_LIMIT=1M");
}
