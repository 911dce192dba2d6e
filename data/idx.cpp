// IDX reader (plain or gzip). See idx.h for the format and the validation rules.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "engine/io/file_io.h"
#include "kernels/common/check.h"

namespace data {

using engine::fail;

namespace {

// A file too large for any MNIST-like data set is a corrupt header, not a request to allocate.
constexpr int64_t kMaxDataBytes = int64_t(1) << 40;
constexpr int kMaxDims = 16;

std::string dims_str(const std::vector<int64_t>& dims) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < dims.size(); ++i) out << (i ? ", " : "") << dims[i];
  out << "]";
  return out.str();
}

std::string hex_byte(uint8_t b) {
  std::ostringstream out;
  out << std::hex << std::setw(2) << std::setfill('0') << int(b);
  return out.str();
}

// Bytes per element of an IDX type code; 0 for an unknown code.
int64_t element_size_of(uint8_t type_code) {
  switch (type_code) {
    case 0x08:
      return 1;  // u8
    case 0x09:
      return 1;  // i8
    case 0x0B:
      return 2;  // i16
    case 0x0C:
      return 4;  // i32
    case 0x0D:
      return 4;  // f32
    case 0x0E:
      return 8;  // f64
    default:
      return 0;
  }
}

// The bytes of a file, decompressed on the fly when it starts with the gzip magic 1f 8b.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path), plain_(path) {
    uint8_t magic[2] = {0, 0};
    if (plain_.size() >= 2) plain_.read_at(0, magic, 2);
    if (magic[0] == 0x1f && magic[1] == 0x8b) {
      gz_ = gzopen(path.c_str(), "rb");
      if (gz_ == nullptr) fail(path, ": cannot open gzip file");
      gzbuffer(gz_, 1 << 18);
    }
  }
  ~ByteSource() {
    if (gz_ != nullptr) gzclose(gz_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool compressed() const { return gz_ != nullptr; }
  uint64_t file_size() const { return plain_.size(); }

  // Reads up to `count` bytes; fewer only at the end of the (decompressed) data. A damaged gzip
  // stream (bad data, or cut off before its end) is an error, never a silent short read.
  std::size_t read(void* out, std::size_t count) {
    if (gz_ == nullptr) {
      const uint64_t available = plain_.size() - std::min<uint64_t>(position_, plain_.size());
      const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(count, available));
      if (n > 0) plain_.read_at(position_, out, n);
      position_ += n;
      return n;
    }
    std::size_t done = 0;
    while (done < count) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(count - done, 1u << 30));
      const int got = gzread(gz_, static_cast<char*>(out) + done, chunk);
      if (got > 0) done += static_cast<std::size_t>(got);
      if (got < static_cast<int>(chunk)) {
        int errnum = Z_OK;
        const char* message = gzerror(gz_, &errnum);
        if (errnum != Z_OK && errnum != Z_STREAM_END) {
          fail(path_, ": corrupt or truncated gzip stream (zlib: ", message, ")");
        }
        break;  // clean end of the stream
      }
    }
    return done;
  }

 private:
  std::string path_;
  engine::detail::InputFile plain_;
  gzFile gz_ = nullptr;
  uint64_t position_ = 0;
};

IdxHeader read_header(ByteSource& source, const std::string& path) {
  const char* kind = source.compressed() ? " (after gunzip)" : "";
  uint8_t magic[4];
  const std::size_t got = source.read(magic, 4);
  if (got < 4) {
    fail(path, ": truncated IDX header: ", got, " bytes", kind, ", need at least 4");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    fail(path, ": not an IDX file: magic bytes ", hex_byte(magic[0]), " ", hex_byte(magic[1]), kind,
         ", expected 00 00");
  }
  IdxHeader header;
  header.type_code = magic[2];
  if (element_size_of(header.type_code) == 0) {
    fail(path, ": unknown IDX element type code 0x", hex_byte(header.type_code),
         " (expected 08, 09, 0B, 0C, 0D or 0E)");
  }
  const int ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims) {
    fail(path, ": IDX header gives ", ndims, " dimensions; expected 1..", kMaxDims);
  }
  std::vector<uint8_t> sizes(static_cast<std::size_t>(4 * ndims));
  const std::size_t got_sizes = source.read(sizes.data(), sizes.size());
  if (got_sizes < sizes.size()) {
    fail(path, ": truncated IDX header: ", ndims, " dimensions need ", 4 + sizes.size(),
         " header bytes, the file", kind, " has ", 4 + got_sizes);
  }
  int64_t bytes = header.element_size();
  for (int d = 0; d < ndims; ++d) {
    const uint8_t* b = &sizes[static_cast<std::size_t>(4 * d)];
    const int64_t size =
        (int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | int64_t(b[3]);
    header.dims.push_back(size);
    // Saturate just above the limit instead of overflowing.
    bytes = (size != 0 && bytes > kMaxDataBytes / size) ? kMaxDataBytes + 1 : bytes * size;
  }
  if (bytes > kMaxDataBytes) {
    fail(path, ": IDX dims ", dims_str(header.dims), " describe more than 2^40 bytes of data");
  }
  return header;
}

int64_t header_bytes(const IdxHeader& header) {
  return 4 + 4 * static_cast<int64_t>(header.dims.size());
}

}  // namespace

int64_t IdxHeader::element_size() const {
  const int64_t size = element_size_of(type_code);
  if (size == 0) fail("IDX: unknown element type code 0x", hex_byte(type_code));
  return size;
}

int64_t IdxHeader::numel() const {
  // A zero anywhere makes the array empty; checking first matters because the other dims may be
  // up to 2^32 each and their product alone would overflow (found by tests/fuzz/fuzz_idx).
  // Without a zero, read_header has already bounded the product by 2^40 bytes.
  for (int64_t d : dims) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

IdxHeader read_idx_header(const std::string& path) {
  ByteSource source(path);
  return read_header(source, path);
}

IdxArray read_idx(const std::string& path) {
  ByteSource source(path);
  IdxArray array;
  array.header = read_header(source, path);
  const int64_t need = array.header.numel() * array.header.element_size();
  const std::string dims = dims_str(array.header.dims);

  if (!source.compressed()) {
    // Plain file: its length must be exactly header + data, checked before allocating.
    const int64_t have = static_cast<int64_t>(source.file_size()) - header_bytes(array.header);
    if (have < need) {
      fail(path, ": truncated IDX data: dims ", dims, " need ", need, " data bytes, the file has ",
           have);
    }
    if (have > need) {
      fail(path, ": IDX dims ", dims, " do not match the file size: ", need,
           " data bytes expected, ", have, " present (", have - need, " extra)");
    }
    array.data.resize(static_cast<std::size_t>(need));
    if (need > 0) source.read(array.data.data(), array.data.size());
    return array;
  }

  // gzip: the decompressed length is unknown up front; grow the buffer as data arrives.
  constexpr int64_t kChunk = int64_t(16) << 20;
  int64_t done = 0;
  while (done < need) {
    const int64_t chunk = std::min(kChunk, need - done);
    array.data.resize(static_cast<std::size_t>(done + chunk));
    const std::size_t got = source.read(array.data.data() + done, static_cast<std::size_t>(chunk));
    done += static_cast<int64_t>(got);
    if (static_cast<int64_t>(got) < chunk) {
      fail(path, ": truncated IDX data: dims ", dims, " need ", need,
           " data bytes, the gzip stream holds ", done);
    }
  }
  uint8_t extra[256];
  const std::size_t more = source.read(extra, sizeof extra);
  if (more > 0) {
    fail(path, ": IDX dims ", dims, " do not match the file size: ", need,
         " data bytes expected, the gzip stream holds more");
  }
  return array;
}

std::vector<uint8_t> idx_bytes(const IdxHeader& header, const std::vector<uint8_t>& data) {
  ENGINE_CHECK(!header.dims.empty() && header.dims.size() <= kMaxDims,
               "idx_bytes: 1..16 dimensions expected, got ", header.dims.size());
  ENGINE_CHECK(static_cast<int64_t>(data.size()) == header.numel() * header.element_size(),
               "idx_bytes: dims ", dims_str(header.dims), " need ",
               header.numel() * header.element_size(), " bytes, got ", data.size());
  std::vector<uint8_t> out = {0, 0, header.type_code, static_cast<uint8_t>(header.dims.size())};
  for (int64_t d : header.dims) {
    ENGINE_CHECK(d >= 0 && d <= int64_t(0xFFFFFFFF), "idx_bytes: dimension ", d,
                 " does not fit in u32");
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace data
