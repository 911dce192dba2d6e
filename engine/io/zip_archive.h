// The zip container of torch.save files (engine/io/pth.h): only what a reader of such a file
// needs. Entries are listed from the central directory (the authoritative sizes: torch.save's
// writer puts zeros in the local headers and a data descriptor after the data) and located through
// their local headers, whose extra field torch pads so that every record's data starts at a
// multiple of 64 bytes. ZIP64 (records or archives over 4 GiB) is read. Only STORED records can be
// read; a compressed one is refused by name when it is read, not when it is listed. CRC-32 fields
// are not checked. Every offset and length is checked against the archive size before it is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace engine::detail {

class InputFile;  // engine/io/file_io.h

// Random access to the bytes of an archive: a file or a buffer in memory (the fuzzer's input).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Exactly `count` bytes at `offset`, or an engine::Error (callers check bounds first).
  virtual void read_at(uint64_t offset, void* destination, std::size_t count) const = 0;
};

class MemorySource : public ByteSource {
 public:
  MemorySource(const uint8_t* data, std::size_t size, std::string name);
  uint64_t size() const override { return size_; }
  void read_at(uint64_t offset, void* destination, std::size_t count) const override;

 private:
  const uint8_t* data_;
  std::size_t size_;
  std::string name_;
};

class FileSource : public ByteSource {
 public:
  explicit FileSource(const InputFile& file) : file_(file) {}
  uint64_t size() const override;
  void read_at(uint64_t offset, void* destination, std::size_t count) const override;

 private:
  const InputFile& file_;
};

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 = STORED, 8 = DEFLATE, ...
  uint16_t flags = 0;   // general purpose bit flags (bit 0: encrypted)
  uint64_t size = 0;    // uncompressed size
  uint64_t compressed_size = 0;
  uint64_t local_header_offset = 0;
};

// The central directory's entries in order. `file` names the archive in errors.
std::vector<ZipEntry> read_zip_directory(const ByteSource& source, const std::string& file);

// Where `entry`'s data starts, after checking that it is STORED, not encrypted, and lies inside
// the archive; errors name the file and the entry.
uint64_t zip_entry_data_offset(const ByteSource& source, const ZipEntry& entry,
                               const std::string& file);

}  // namespace engine::detail
