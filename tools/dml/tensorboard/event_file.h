// TensorBoard's event file format, for the scalars `dml train` logs (tools/dml/run_log.h writes
// the files). An event file is a sequence of TFRecords, each holding one serialized
// tensorboard.Event (tensorboard_event.proto); the first Event says file_version
// "brain.Event:2", each later one holds a Summary of scalars (tag, value) at one step.
//
// Only event_proto.cpp uses protobuf: the library dml_tensorboard (CMakeLists.txt) links it, and
// this header does not include it, so the rest of the program builds without its headers. A build
// without protobuf compiles event_proto_absent.cpp instead (event_files_supported() is false).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dml::tensorboard {

// The event file's name starts with this; TensorBoard reads the files whose names contain
// "tfevents".
inline constexpr const char* kEventFilePrefix = "events.out.tfevents.";
inline constexpr const char* kFileVersion = "brain.Event:2";

// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF),
// the checksum TFRecord uses.
uint32_t crc32c(const std::string& bytes);
// TFRecord stores a CRC masked: rotated right by 15 bits, plus 0xa282ead8 (modulo 2^32), because
// a CRC computed over data that holds CRCs itself is weak.
uint32_t masked_crc32c(const std::string& bytes);

// One TFRecord: the data's length as a little-endian uint64, the masked CRC-32C of those 8 bytes
// (little-endian uint32), the data, the masked CRC-32C of the data.
std::string tfrecord(const std::string& data);

struct Scalar {
  std::string tag;
  double value = 0.0;  // stored as TensorBoard's simple_value, a float
};

// False when this dml was built without protobuf: then the three functions below throw, and
// `dml train` writes no event files.
bool event_files_supported();

// Serialized Events: the first of every file, and the scalars of one step. wall_time: seconds
// since the Unix epoch.
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars);
// The step of a serialized Event; nothing when the bytes are not one.
std::optional<int64_t> step_of_event(const std::string& serialized_event);

// An event file's records up to a resumed run's checkpoint: the records of `file_bytes` whose
// Event has a step <= `step` (the file-version event included), up to the first record that is
// cut short or fails its CRC (a kill mid-write). `dropped` counts the records left out, a torn
// tail as one.
struct KeptRecords {
  std::string bytes;
  int64_t dropped = 0;
};
KeptRecords records_through_step(const std::string& file_bytes, int64_t step);

}  // namespace dml::tensorboard
