// IDX: the file format of MNIST and Fashion-MNIST (research/ecosystem.md §6.3).
//
// Layout (all integers big-endian):
//   byte 0, 1    0x00 0x00
//   byte 2       element type: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64
//   byte 3       number of dimensions d (we accept 1..16)
//   4*d bytes    the sizes, u32 each
//   the data     prod(sizes) elements, row-major, big-endian
//
// Files may be gzip-compressed (magic 1f 8b, as the datasets are shipped); compression is
// detected from the first two bytes, not the file name. Validation: every problem is an
// engine::Error naming the file — bad magic, unknown type code, truncated header, truncated data,
// data longer than the sizes say, corrupt or truncated gzip stream. A plain file's length is
// checked against the header before anything is allocated; a gzip file is decompressed in chunks,
// so a corrupt size field can never trigger a huge allocation up front.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace data {

struct IdxHeader {
  uint8_t type_code = 0x08;
  std::vector<int64_t> dims;
  int64_t element_size() const;  // bytes per element of type_code
  int64_t numel() const;         // product of dims
};

struct IdxArray {
  IdxHeader header;
  std::vector<uint8_t> data;  // raw element bytes as in the file (big-endian), row-major
};

// The header alone (reads 4 + 4*d bytes; cheap even for a gzip file).
IdxHeader read_idx_header(const std::string& path);
// The whole file, validated as described above.
IdxArray read_idx(const std::string& path);

// The bytes of an IDX file holding `data` (used by tests and tools to write fixtures).
std::vector<uint8_t> idx_bytes(const IdxHeader& header, const std::vector<uint8_t>& data);

}  // namespace data
