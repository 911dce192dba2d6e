// Stands in for event_proto.cpp in a build without protobuf (Debian's libprotobuf-dev and
// protobuf-compiler; CMakeLists.txt picks this file when find_package(Protobuf) fails, e.g. on a
// GPU machine whose carried packages leave protobuf out). `dml train` then writes log.jsonl and
// log.csv but no TensorBoard files, and says so once (tools/dml/run_log.cpp).
#include "tools/dml/tensorboard/event_file.h"

#include "kernels/common/check.h"

namespace dml::tensorboard {

namespace {

[[noreturn]] void no_protobuf() {
  engine::fail(
      "TensorBoard event files need protobuf: this dml was built without it "
      "(install libprotobuf-dev and protobuf-compiler, then rebuild)");
}

}  // namespace

bool event_files_supported() { return false; }

std::string file_version_event(double) { no_protobuf(); }

std::string scalars_event(double, int64_t, const std::vector<Scalar>&) { no_protobuf(); }

std::optional<int64_t> step_of_event(const std::string&) { no_protobuf(); }

}  // namespace dml::tensorboard
