// What a `dml` binary is: the source revision it was built from and what was compiled in.
#pragma once

#include <string>

namespace dml {

// "813900d", "813900d-dirty" (tracked files differed from the commit at build time) or
// "unknown" (not built from a git checkout). Written at every build by scripts/build_info.cmake.
const char* build_commit();

// The text of `dml --version`: the revision, the CUDA architectures compiled in, whether the
// cuDNN alternative is there, and the GPUs this process can see.
std::string version_text();

}  // namespace dml
