// libFuzzer target: the TensorBoard event files that a resumed `dml train` trims back to its
// checkpoint's step (tools/dml/tensorboard/event_file.h, records_through_step; tools/dml/
// run_log.cpp calls it on each file of the run's tensorboard/ folder). A file killed mid-write, or
// damaged, must lose its torn tail and nothing else, never crash; what is kept must be kept again,
// whole, by the same call, and be what trimming the file's intact records keeps (docs/testing.md,
// Fuzzing).
//
// Input: byte 0 picks how the rest becomes a file, by its parity: '0' the bytes as they are (the
// CRCs then stop most inputs at the first record); '1' records framed here with valid CRCs, so
// that the Events inside are reached: each a length byte L and L bytes of serialized Event, and a
// last one cut short appended unframed (a torn tail). Byte 1 is the checkpoint's step.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "tools/dml/tensorboard/event_file.h"

namespace {

std::string framed_file(const uint8_t* data, size_t size) {
  std::string file;
  size_t at = 0;
  while (at < size) {
    const size_t length = data[at];
    ++at;
    const size_t available = size - at;
    const std::string payload(reinterpret_cast<const char*>(data) + at,
                              length < available ? length : available);
    file += length <= available ? dml::tensorboard::tfrecord(payload) : payload;
    at += payload.size();
  }
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int64_t step = data[1];
  const std::string file = data[0] % 2 == 0
                               ? std::string(reinterpret_cast<const char*>(data) + 2, size - 2)
                               : framed_file(data + 2, size - 2);
  const dml::tensorboard::KeptRecords kept = dml::tensorboard::records_through_step(file, step);
  if (kept.bytes.size() > file.size() || kept.dropped < 0) std::abort();
  const dml::tensorboard::KeptRecords again =
      dml::tensorboard::records_through_step(kept.bytes, step);
  if (again.bytes != kept.bytes || again.dropped != 0) std::abort();
  // With no step limit only a torn or damaged tail goes, and trimming that by the step keeps the
  // same records as trimming the file.
  const dml::tensorboard::KeptRecords whole =
      dml::tensorboard::records_through_step(file, std::numeric_limits<int64_t>::max());
  if (whole.dropped > 1) std::abort();
  if (dml::tensorboard::records_through_step(whole.bytes, step).bytes != kept.bytes) std::abort();
  return 0;
}
