// How much more host memory the process may take, so that a tensor that cannot fit is refused
// with a message instead of being handed out by an overcommitting kernel and then killing the
// process (or, on a shared machine, another one) through the OOM killer as its pages are touched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace engine {

struct HostMemoryBudget {
  uint64_t bytes = 0;  // what may still be allocated
  std::string limit;   // which limit that is, for the message
};

// The least of: the system's MemAvailable (/proc/meminfo); the control group's memory.max minus
// memory.current (cgroup v2, where a limit is set); and ENGINE_HOST_MEMORY_LIMIT minus
// `bytes_in_use` (the host bytes the allocator has handed out), a cap the user may set, e.g.
// "16G", on a shared machine. nullopt when none of them is known.
std::optional<HostMemoryBudget> host_memory_budget(uint64_t bytes_in_use);

// "1048576", "512K", "64M", "16G", "1T" (powers of 1024) -> bytes; engine::Error naming `what`
// for anything else.
uint64_t parse_byte_size(const std::string& text, const std::string& what);

// "12.0 GiB", "512.0 MiB", "64 B": a size for messages.
std::string format_bytes(uint64_t bytes);

}  // namespace engine
