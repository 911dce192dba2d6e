// Zip directory reader for torch.save archives (format notes: zip_archive.h; the zip format is
// PKWARE's APPNOTE.TXT: end of central directory, ZIP64 locator and record, central directory
// headers, local headers).
#include "engine/io/zip_archive.h"

#include <algorithm>
#include <cstring>

#include "engine/io/file_io.h"
#include "kernels/common/check.h"

namespace engine::detail {
namespace {

constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kCentralHeaderSize = 46;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr std::size_t kZip64EndSize = 56;
constexpr std::size_t kMaxCommentSize = 65535;

uint64_t read_le(const uint8_t* bytes, int count) {
  uint64_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// The end-of-central-directory fields we use, from the classic record or its ZIP64 form.
struct Directory {
  uint64_t entries = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
  uint64_t end = 0;  // where the directory must end: the (ZIP64) end record's position
};

// The last end-of-central-directory signature whose comment reaches exactly the end of the file.
uint64_t find_end_record(const ByteSource& source, const std::string& file) {
  const uint64_t size = source.size();
  ENGINE_CHECK(size >= kEndSize, file, ": ", size,
               " bytes is too short for a zip archive (no end of central directory)");
  const uint64_t window = std::min<uint64_t>(size, kEndSize + kMaxCommentSize);
  std::vector<uint8_t> tail(window);
  source.read_at(size - window, tail.data(), tail.size());
  for (uint64_t at = window - kEndSize + 1; at-- > 0;) {
    const uint8_t* record = tail.data() + at;
    if (read_le(record, 4) != kEndSignature) continue;
    if (at + kEndSize + read_le(record + 20, 2) == window) return size - window + at;
  }
  fail(file, ": no zip end of central directory record (truncated or not a zip archive)");
}

Directory read_zip64_end(const ByteSource& source, uint64_t end_at, const std::string& file) {
  ENGINE_CHECK(end_at >= kZip64LocatorSize, file,
               ": ZIP64 archive without a ZIP64 end of central directory locator");
  uint8_t locator[kZip64LocatorSize];
  source.read_at(end_at - kZip64LocatorSize, locator, sizeof(locator));
  ENGINE_CHECK(read_le(locator, 4) == kZip64LocatorSignature, file,
               ": ZIP64 archive without a ZIP64 end of central directory locator");
  const uint64_t record_at = read_le(locator + 8, 8);
  ENGINE_CHECK(record_at <= end_at - kZip64LocatorSize &&
                   end_at - kZip64LocatorSize - record_at >= kZip64EndSize,
               file, ": ZIP64 end of central directory record at ", record_at,
               " lies outside the archive");
  uint8_t record[kZip64EndSize];
  source.read_at(record_at, record, sizeof(record));
  ENGINE_CHECK(read_le(record, 4) == kZip64EndSignature, file,
               ": bad ZIP64 end of central directory signature at ", record_at);
  ENGINE_CHECK(read_le(record + 16, 4) == 0 && read_le(record + 20, 4) == 0, file,
               ": multi-disk zip archives are not supported");
  Directory directory;
  directory.entries = read_le(record + 32, 8);
  directory.size = read_le(record + 40, 8);
  directory.offset = read_le(record + 48, 8);
  directory.end = record_at;
  return directory;
}

Directory read_end(const ByteSource& source, const std::string& file) {
  const uint64_t end_at = find_end_record(source, file);
  uint8_t record[kEndSize];
  source.read_at(end_at, record, sizeof(record));
  const uint64_t entries = read_le(record + 10, 2);
  const uint64_t size = read_le(record + 12, 4);
  const uint64_t offset = read_le(record + 16, 4);
  if (entries == 0xFFFF || size == 0xFFFFFFFF || offset == 0xFFFFFFFF) {
    return read_zip64_end(source, end_at, file);
  }
  ENGINE_CHECK(read_le(record + 4, 2) == 0 && read_le(record + 6, 2) == 0 &&
                   read_le(record + 8, 2) == entries,
               file, ": multi-disk zip archives are not supported");
  return {entries, size, offset, end_at};
}

// Replaces the 0xFFFFFFFF fields of `entry` by their values in the ZIP64 extra field.
void apply_zip64_extra(const uint8_t* extra, std::size_t length, bool wide_size, bool wide_packed,
                       bool wide_offset, ZipEntry& entry, const std::string& file) {
  std::size_t at = 0;
  while (at + 4 <= length) {
    const uint64_t id = read_le(extra + at, 2);
    const std::size_t field_size = read_le(extra + at + 2, 2);
    ENGINE_CHECK(field_size <= length - at - 4, file, ": entry '", entry.name,
                 "': extra field runs past its end");
    if (id == kZip64ExtraId) {
      const uint8_t* field = extra + at + 4;
      std::size_t used = 0;
      auto next = [&](uint64_t& value) {
        ENGINE_CHECK(used + 8 <= field_size, file, ": entry '", entry.name,
                     "': ZIP64 extra field too short");
        value = read_le(field + used, 8);
        used += 8;
      };
      if (wide_size) next(entry.size);
      if (wide_packed) next(entry.compressed_size);
      if (wide_offset) next(entry.local_header_offset);
      return;
    }
    at += 4 + field_size;
  }
  fail(file, ": entry '", entry.name, "': sizes need a ZIP64 extra field, which is missing");
}

}  // namespace

MemorySource::MemorySource(const uint8_t* data, std::size_t size, std::string name)
    : data_(data), size_(size), name_(std::move(name)) {}

void MemorySource::read_at(uint64_t offset, void* destination, std::size_t count) const {
  ENGINE_CHECK(offset <= size_ && count <= size_ - offset, name_, ": truncated file: wanted ",
               count, " bytes at offset ", offset, " but the file has ", size_, " bytes");
  if (count > 0) std::memcpy(destination, data_ + offset, count);
}

uint64_t FileSource::size() const { return file_.size(); }

void FileSource::read_at(uint64_t offset, void* destination, std::size_t count) const {
  file_.read_at(offset, destination, count);
}

std::vector<ZipEntry> read_zip_directory(const ByteSource& source, const std::string& file) {
  const Directory directory = read_end(source, file);
  ENGINE_CHECK(
      directory.offset <= directory.end && directory.size <= directory.end - directory.offset, file,
      ": central directory [", directory.offset, ", +", directory.size,
      ") lies outside the archive (truncated file?)");
  ENGINE_CHECK(directory.entries <= directory.size / kCentralHeaderSize, file, ": ",
               directory.entries, " entries cannot fit in a central directory of ", directory.size,
               " bytes");
  std::vector<uint8_t> bytes(directory.size);
  source.read_at(directory.offset, bytes.data(), bytes.size());

  std::vector<ZipEntry> entries;
  entries.reserve(directory.entries);
  std::size_t at = 0;
  for (uint64_t index = 0; index < directory.entries; ++index) {
    ENGINE_CHECK(bytes.size() - at >= kCentralHeaderSize, file, ": central directory entry ", index,
                 " is cut off");
    const uint8_t* header = bytes.data() + at;
    ENGINE_CHECK(read_le(header, 4) == kCentralHeaderSignature, file,
                 ": bad central directory signature for entry ", index);
    const std::size_t name_length = read_le(header + 28, 2);
    const std::size_t extra_length = read_le(header + 30, 2);
    const std::size_t comment_length = read_le(header + 32, 2);
    ENGINE_CHECK(
        bytes.size() - at - kCentralHeaderSize >= name_length + extra_length + comment_length, file,
        ": central directory entry ", index, " is cut off");
    ZipEntry entry;
    entry.name.assign(reinterpret_cast<const char*>(header + kCentralHeaderSize), name_length);
    entry.flags = static_cast<uint16_t>(read_le(header + 8, 2));
    entry.method = static_cast<uint16_t>(read_le(header + 10, 2));
    entry.compressed_size = read_le(header + 20, 4);
    entry.size = read_le(header + 24, 4);
    entry.local_header_offset = read_le(header + 42, 4);
    const bool wide_packed = entry.compressed_size == 0xFFFFFFFF;
    const bool wide_size = entry.size == 0xFFFFFFFF;
    const bool wide_offset = entry.local_header_offset == 0xFFFFFFFF;
    if (wide_packed || wide_size || wide_offset) {
      apply_zip64_extra(header + kCentralHeaderSize + name_length, extra_length, wide_size,
                        wide_packed, wide_offset, entry, file);
    }
    entries.push_back(std::move(entry));
    at += kCentralHeaderSize + name_length + extra_length + comment_length;
  }
  return entries;
}

uint64_t zip_entry_data_offset(const ByteSource& source, const ZipEntry& entry,
                               const std::string& file) {
  ENGINE_CHECK((entry.flags & 1) == 0, file, ": record '", entry.name, "' is encrypted");
  ENGINE_CHECK(entry.method == 0, file, ": record '", entry.name, "' is compressed (zip method ",
               entry.method, entry.method == 8 ? ", DEFLATE" : "",
               "); torch.save writes every record STORED (uncompressed)");
  ENGINE_CHECK(entry.compressed_size == entry.size, file, ": record '", entry.name,
               "' is STORED but its compressed size ", entry.compressed_size,
               " differs from its size ", entry.size);
  const uint64_t size = source.size();
  ENGINE_CHECK(
      entry.local_header_offset <= size && size - entry.local_header_offset >= kLocalHeaderSize,
      file, ": record '", entry.name, "': local header at ", entry.local_header_offset,
      " lies outside the archive (", size, " bytes)");
  uint8_t header[kLocalHeaderSize];
  source.read_at(entry.local_header_offset, header, sizeof(header));
  ENGINE_CHECK(read_le(header, 4) == kLocalHeaderSignature, file, ": record '", entry.name,
               "': bad local header signature at ", entry.local_header_offset);
  const uint64_t data_at = entry.local_header_offset + kLocalHeaderSize + read_le(header + 26, 2) +
                           read_le(header + 28, 2);
  ENGINE_CHECK(data_at <= size && entry.size <= size - data_at, file, ": record '", entry.name,
               "' of ", entry.size, " bytes at offset ", data_at,
               " runs past the end of the archive (", size, " bytes; truncated file?)");
  return data_at;
}

}  // namespace engine::detail
