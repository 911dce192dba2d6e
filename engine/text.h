// Text for messages, shared by every layer above the kernels.
#pragma once

#include <string>
#include <vector>

namespace engine {

// "a, b, c": the names an error or usage message lists (the known data sets, models, miners).
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

}  // namespace engine
