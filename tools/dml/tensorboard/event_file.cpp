// TensorBoard event records (header: tools/dml/tensorboard/event_file.h): the TFRecord framing
// and its CRC. The Events themselves are protobuf messages, made in event_proto.cpp.
#include "tools/dml/tensorboard/event_file.h"

#include <array>
#include <cstring>
#include <optional>

namespace dml::tensorboard {

namespace {

// crc32c's table: entry b is the CRC register after shifting byte b through it (the reflected
// polynomial, least significant bit first).
std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) != 0 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    table[b] = crc;
  }
  return table;
}

uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

void append_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffu));
}

uint64_t read_little_endian(const std::string& bytes, size_t at, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return value;
}

// The TFRecord at byte `at` of `bytes`: its data into `data`, and its size in the file; 0 when
// the record is cut short or a CRC does not match.
size_t framed_record_at(const std::string& bytes, size_t at, std::string& data) {
  const size_t header = 12, footer = 4;  // length and its CRC; the data's CRC
  const size_t left = bytes.size() - at;
  if (left < header || masked_crc32c(bytes.substr(at, 8)) != read_little_endian(bytes, at + 8, 4)) {
    return 0;
  }
  const uint64_t length = read_little_endian(bytes, at, 8);
  if (length > left - header || left - header - length < footer) return 0;
  data = bytes.substr(at + header, length);
  if (masked_crc32c(data) != read_little_endian(bytes, at + header + length, 4)) return 0;
  return header + length + footer;
}

}  // namespace

uint32_t crc32c(const std::string& bytes) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes)
    crc = (crc >> 8) ^ table[(crc ^ static_cast<unsigned char>(c)) & 0xffu];
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const std::string& bytes) { return mask(crc32c(bytes)); }

std::string tfrecord(const std::string& data) {
  std::string length;
  append_little_endian(length, data.size(), 8);
  std::string record = length;
  append_little_endian(record, masked_crc32c(length), 4);
  record += data;
  append_little_endian(record, masked_crc32c(data), 4);
  return record;
}

KeptRecords records_through_step(const std::string& file_bytes, int64_t step) {
  KeptRecords kept;
  size_t at = 0;
  std::string data;
  while (at < file_bytes.size()) {
    const size_t size = framed_record_at(file_bytes, at, data);
    const std::optional<int64_t> event_step = size == 0 ? std::nullopt : step_of_event(data);
    if (!event_step) {  // a torn or damaged tail: nothing after it can be framed
      ++kept.dropped;
      break;
    }
    if (*event_step <= step) {
      kept.bytes += file_bytes.substr(at, size);
    } else {
      ++kept.dropped;
    }
    at += size;
  }
  return kept;
}

}  // namespace dml::tensorboard
