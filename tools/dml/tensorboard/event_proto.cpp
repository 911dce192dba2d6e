// The serialized tensorboard.Event messages (header: tools/dml/tensorboard/event_file.h), made by
// the classes protoc generates from tensorboard_event.proto. The one file that includes protobuf;
// event_proto_absent.cpp stands in for it when the build has no protobuf (CMakeLists.txt).
#include "tools/dml/tensorboard/event_file.h"

#include "tools/dml/tensorboard/tensorboard_event.pb.h"

namespace dml::tensorboard {

namespace {

// The generated classes (package tensorboard, outside our namespace of the same name).
using Event = ::tensorboard::Event;
using Summary = ::tensorboard::Summary;

std::string serialized(const Event& event) {
  std::string bytes;
  event.SerializeToString(&bytes);
  return bytes;
}

}  // namespace

bool event_files_supported() { return true; }

std::string file_version_event(double wall_time) {
  Event event;
  event.set_wall_time(wall_time);
  event.set_step(0);
  event.set_file_version(kFileVersion);
  return serialized(event);
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  Summary* summary = event.mutable_summary();
  for (const Scalar& scalar : scalars) {
    Summary::Value* value = summary->add_value();
    value->set_tag(scalar.tag);
    value->set_simple_value(static_cast<float>(scalar.value));
  }
  return serialized(event);
}

std::optional<int64_t> step_of_event(const std::string& serialized_event) {
  Event event;
  if (!event.ParseFromString(serialized_event)) return std::nullopt;
  return event.step();
}

}  // namespace dml::tensorboard
