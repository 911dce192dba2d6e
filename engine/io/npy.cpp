// .npy reader and writer (format: npy.h). The header is a Python dict literal; we parse the
// subset NumPy writes (strings, True/False, tuples of integers) with a small recursive-descent
// parser instead of evaluating anything, and check every length against the file size before
// allocating.
#include "engine/io/npy.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "engine/io/file_io.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              ".npy data is read as little-endian; a big-endian host would need byte swaps");

namespace engine {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLength = 6;
constexpr std::size_t kArrayAlign = 64;    // NumPy's ARRAY_ALIGN: data starts at a multiple of it
constexpr std::size_t kGrowthDigits = 21;  // NumPy's GROWTH_AXIS_MAX_DIGITS header spare space

struct NpyHeader {
  NpyDType dtype = NpyDType::F32;
  Shape shape;
};

NpyDType parse_descr(const std::string& descr, const std::string& file) {
  if (descr == "<f4") return NpyDType::F32;
  if (descr == "<f8") return NpyDType::F64;
  if (descr == "<i8") return NpyDType::I64;
  if (descr == "<i4") return NpyDType::I32;
  if (descr == "|u1" || descr == "<u1") return NpyDType::U8;
  ENGINE_CHECK(descr.empty() || descr[0] != '>', file, ": big-endian dtype '", descr,
               "' is not supported (save with a little-endian dtype, e.g. '<f4')");
  fail(file, ": unsupported dtype '", descr, "' (supported: <f4 <f8 <i8 <i4 |u1)");
}

// Recursive descent over the header dict: {'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), } with any whitespace, either quote style and an optional trailing comma.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& file) : text_(text), file_(file) {}

  NpyHeader parse() {
    NpyHeader header;
    std::set<std::string> seen;
    expect('{');
    while (!consume('}')) {
      const std::string key = parse_string();
      ENGINE_CHECK(seen.insert(key).second, file_, ": duplicate key '", key, "' in the header");
      expect(':');
      if (key == "descr") {
        skip_space();
        ENGINE_CHECK(peek() == '\'' || peek() == '"', file_,
                     ": structured (record) dtypes are not supported; 'descr' must be a string");
        header.dtype = parse_descr(parse_string(), file_);
      } else if (key == "fortran_order") {
        const bool fortran_order = parse_bool();
        ENGINE_CHECK(!fortran_order, file_,
                     ": fortran_order True is not supported (save a C-contiguous array)");
      } else if (key == "shape") {
        header.shape = parse_shape();
      } else {
        fail(file_, ": unexpected key '", key, "' in the header");
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    ENGINE_CHECK(pos_ == text_.size(), file_, ": unexpected text after the header dict at byte ",
                 pos_);
    for (const char* key : {"descr", "fortran_order", "shape"}) {
      ENGINE_CHECK(seen.count(key), file_, ": header lacks the key '", key, "'");
    }
    return header;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool consume(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  void expect(char c) {
    ENGINE_CHECK(consume(c), file_, ": malformed header: expected '", c, "' at byte ", pos_,
                 ", found \"", text_.substr(pos_, 16), "\"");
  }

  std::string parse_string() {
    skip_space();
    const char quote = peek();
    ENGINE_CHECK(quote == '\'' || quote == '"', file_,
                 ": malformed header: expected a quoted string at byte ", pos_);
    const std::size_t end = text_.find(quote, pos_ + 1);
    ENGINE_CHECK(end != std::string::npos, file_, ": malformed header: unterminated string");
    std::string value = text_.substr(pos_ + 1, end - pos_ - 1);
    ENGINE_CHECK(value.find('\\') == std::string::npos, file_,
                 ": malformed header: escapes in strings are not supported");
    pos_ = end + 1;
    return value;
  }

  bool parse_bool() {
    skip_space();
    if (text_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (text_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail(file_, ": malformed header: expected True or False at byte ", pos_);
  }

  int64_t parse_dimension() {
    skip_space();
    ENGINE_CHECK(peek() != '-', file_, ": negative dimension in the shape");
    ENGINE_CHECK(peek() >= '0' && peek() <= '9', file_,
                 ": malformed header: expected an integer in the shape at byte ", pos_);
    int64_t value = 0;
    const int64_t limit = std::numeric_limits<int64_t>::max();
    while (peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      ENGINE_CHECK(value <= (limit - digit) / 10, file_, ": dimension too large in the shape");
      value = value * 10 + digit;
      ++pos_;
    }
    if (peek() == 'L') ++pos_;  // Python 2 long literal, as old NumPy wrote "(3L, 4L)"
    return value;
  }

  Shape parse_shape() {
    Shape shape;
    expect('(');
    while (!consume(')')) {
      shape.push_back(parse_dimension());
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  const std::string& text_;
  const std::string& file_;
  std::size_t pos_ = 0;
};

uint64_t checked_nbytes(const Shape& shape, std::size_t element_size, const std::string& file) {
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t numel = 1;
  for (int64_t dim : shape) {
    ENGINE_CHECK(dim >= 0, file, ": negative dimension in shape ", shape_str(shape));
    const uint64_t d = static_cast<uint64_t>(dim);
    ENGINE_CHECK(d == 0 || numel <= limit / d, file, ": shape ", shape_str(shape),
                 " has more elements than fit in 64 bits");
    numel *= d;
  }
  ENGINE_CHECK(numel <= limit / element_size, file, ": shape ", shape_str(shape),
               " is too large in bytes");
  return numel * element_size;
}

// Validates the fixed prefix; returns {header text offset, header length}.
std::pair<uint64_t, uint64_t> parse_prefix(const uint8_t* prefix, std::size_t available,
                                           uint64_t file_size, const std::string& file) {
  ENGINE_CHECK(available >= kMagicLength && std::memcmp(prefix, kMagic, kMagicLength) == 0, file,
               ": not a .npy file (bad magic; expected \"\\x93NUMPY\")");
  ENGINE_CHECK(available >= 8, file, ": truncated .npy file: no version bytes");
  const int major = prefix[6];
  const int minor = prefix[7];
  ENGINE_CHECK((major == 1 || major == 2 || major == 3) && minor == 0, file,
               ": unsupported .npy version ", major, ".", minor, " (supported: 1.0, 2.0, 3.0)");
  const uint64_t length_bytes = major == 1 ? 2 : 4;
  ENGINE_CHECK(available >= 8 + length_bytes, file, ": truncated .npy file: no header length");
  uint64_t header_length = 0;
  for (uint64_t i = length_bytes; i-- > 0;) header_length = (header_length << 8) | prefix[8 + i];
  const uint64_t header_start = 8 + length_bytes;
  ENGINE_CHECK(header_length <= file_size - header_start, file, ": header length ", header_length,
               " goes beyond the end of the file (", file_size, " bytes)");
  return {header_start, header_length};
}

void check_data_size(uint64_t available, uint64_t nbytes, const NpyHeader& header,
                     const std::string& file) {
  ENGINE_CHECK(available >= nbytes, file, ": truncated data: ", npy_descr(header.dtype), " ",
               shape_str(header.shape), " needs ", nbytes, " bytes, the file has ", available);
  ENGINE_CHECK(available == nbytes, file, ": ", available - nbytes,
               " unexpected trailing bytes after the data");
}

std::string header_text(const NpyArray& array) {
  std::string shape = "(";
  for (std::size_t i = 0; i < array.shape.size(); ++i) {
    if (i > 0) shape += ", ";
    shape += std::to_string(array.shape[i]);
  }
  if (array.shape.size() == 1) shape += ",";
  shape += ")";
  std::string text = std::string("{'descr': '") + npy_descr(array.dtype) +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  // NumPy leaves room for the first dimension to grow in place (GROWTH_AXIS_MAX_DIGITS).
  if (!array.shape.empty()) {
    text.append(kGrowthDigits - std::to_string(array.shape[0]).size(), ' ');
  }
  return text;
}

}  // namespace

const char* npy_descr(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::F32:
      return "<f4";
    case NpyDType::F64:
      return "<f8";
    case NpyDType::I64:
      return "<i8";
    case NpyDType::I32:
      return "<i4";
    case NpyDType::U8:
      return "|u1";
  }
  return "?";
}

std::size_t npy_dtype_size(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::F32:
      return 4;
    case NpyDType::F64:
      return 8;
    case NpyDType::I64:
      return 8;
    case NpyDType::I32:
      return 4;
    case NpyDType::U8:
      return 1;
  }
  return 1;
}

NpyArray parse_npy(const uint8_t* data, std::size_t size, const std::string& name_for_errors) {
  const std::string& file = name_for_errors;
  const auto [header_start, header_length] = parse_prefix(data, size, size, file);
  const std::string text(reinterpret_cast<const char*>(data + header_start), header_length);
  const NpyHeader header = HeaderParser(text, file).parse();
  const uint64_t data_start = header_start + header_length;
  const uint64_t nbytes = checked_nbytes(header.shape, npy_dtype_size(header.dtype), file);
  check_data_size(size - data_start, nbytes, header, file);

  NpyArray array;
  array.dtype = header.dtype;
  array.shape = header.shape;
  array.bytes.assign(data + data_start, data + data_start + nbytes);
  return array;
}

NpyArray read_npy(const std::string& path) {
  detail::InputFile input(path);
  uint8_t prefix[12] = {};
  const std::size_t available = static_cast<std::size_t>(std::min<uint64_t>(input.size(), 12));
  input.read_at(0, prefix, available);
  const auto [header_start, header_length] = parse_prefix(prefix, available, input.size(), path);
  std::string text(header_length, '\0');
  input.read_at(header_start, text.data(), header_length);
  const NpyHeader header = HeaderParser(text, path).parse();
  const uint64_t data_start = header_start + header_length;
  const uint64_t nbytes = checked_nbytes(header.shape, npy_dtype_size(header.dtype), path);
  check_data_size(input.size() - data_start, nbytes, header, path);

  NpyArray array;
  array.dtype = header.dtype;
  array.shape = header.shape;
  array.bytes.resize(nbytes);
  input.read_at(data_start, array.bytes.data(), nbytes);
  return array;
}

namespace {

// The magic, version, header length and padded header: everything before the data.
std::vector<uint8_t> npy_prefix(const NpyArray& array) {
  const std::string text = header_text(array);
  // Version 1.0 stores the header length in 16 bits; larger headers need 2.0 (32 bits).
  std::size_t length_bytes = 2;
  std::size_t padding = kArrayAlign - (8 + length_bytes + text.size() + 1) % kArrayAlign;
  if (text.size() + 1 + padding > 0xFFFF) {
    length_bytes = 4;
    padding = kArrayAlign - (8 + length_bytes + text.size() + 1) % kArrayAlign;
  }
  const uint64_t header_length = text.size() + padding + 1;

  std::vector<uint8_t> out(kMagic, kMagic + kMagicLength);
  out.push_back(length_bytes == 2 ? 1 : 2);  // major
  out.push_back(0);                          // minor
  for (std::size_t i = 0; i < length_bytes; ++i) {
    out.push_back(static_cast<uint8_t>(header_length >> (8 * i)));
  }
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), padding, ' ');
  out.push_back('\n');
  return out;
}

NpyDType npy_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return NpyDType::F32;
    case DType::F64:
      return NpyDType::F64;
    case DType::I64:
      return NpyDType::I64;
  }
  fail("npy: unhandled dtype");
}

}  // namespace

std::vector<uint8_t> serialize_npy(const NpyArray& array) {
  const uint64_t nbytes = checked_nbytes(array.shape, npy_dtype_size(array.dtype), "npy");
  ENGINE_CHECK(array.bytes.size() == nbytes, "npy: ", npy_descr(array.dtype), " ",
               shape_str(array.shape), " needs ", nbytes, " bytes, got ", array.bytes.size());
  std::vector<uint8_t> out = npy_prefix(array);
  out.insert(out.end(), array.bytes.begin(), array.bytes.end());
  return out;
}

NpyRowWriter::NpyRowWriter(const std::string& path, DType dtype, Shape shape)
    : path_(path), dtype_(dtype), shape_(std::move(shape)) {
  ENGINE_CHECK(!shape_.empty(), path_, ": a row-by-row .npy needs at least one dimension");
  NpyArray header_only;
  header_only.dtype = npy_dtype_of(dtype_);
  header_only.shape = shape_;
  checked_nbytes(shape_, npy_dtype_size(header_only.dtype), path_);
  const std::vector<uint8_t> prefix = npy_prefix(header_only);
  writer_ = std::make_unique<detail::AtomicFileWriter>(path_);
  writer_->write(prefix.data(), prefix.size());
}

NpyRowWriter::~NpyRowWriter() = default;

void NpyRowWriter::append(const Tensor& rows) {
  ENGINE_CHECK(writer_ != nullptr, path_, ": append after finish()");
  ENGINE_CHECK(rows.defined() && rows.dtype() == dtype_, path_, ": rows must be ",
               dtype_name(dtype_), ", got ", rows.defined() ? dtype_name(rows.dtype()) : "none");
  Shape row_shape = rows.shape();
  ENGINE_CHECK(!row_shape.empty(), path_, ": rows must have the array's rank ", shape_.size());
  const int64_t count = row_shape[0];
  row_shape[0] = shape_[0];
  ENGINE_CHECK(row_shape == shape_, path_, ": rows of shape ", shape_str(rows.shape()),
               " do not fit an array of shape ", shape_str(shape_));
  ENGINE_CHECK(rows_written_ + count <= shape_[0], path_, ": ", rows_written_ + count,
               " rows would exceed the array's ", shape_[0]);
  const Tensor host = rows.detach().to(Device::cpu()).contiguous();
  if (host.numel() > 0) {
    writer_->write(host.raw_data(), static_cast<std::size_t>(host.numel()) * dtype_size(dtype_));
  }
  rows_written_ += count;
}

void NpyRowWriter::finish() {
  ENGINE_CHECK(writer_ != nullptr, path_, ": finish() called twice");
  ENGINE_CHECK(rows_written_ == shape_[0], path_, ": ", rows_written_, " rows written of ",
               shape_[0], "; the file was not created");
  writer_->commit();
  writer_.reset();
}

void write_npy(const std::string& path, const NpyArray& array) {
  std::vector<uint8_t> bytes;
  try {
    bytes = serialize_npy(array);
  } catch (const Error& error) {
    fail(path, ": ", error.what());
  }
  detail::AtomicFileWriter writer(path);
  writer.write(bytes.data(), bytes.size());
  writer.commit();
}

Tensor load_npy(const std::string& path) {
  const NpyArray array = read_npy(path);
  const int64_t numel = shape_numel(array.shape);
  const uint8_t* src = array.bytes.data();
  switch (array.dtype) {
    case NpyDType::F32:
    case NpyDType::F64:
    case NpyDType::I64: {
      const DType dtype = array.dtype == NpyDType::F32   ? DType::F32
                          : array.dtype == NpyDType::F64 ? DType::F64
                                                         : DType::I64;
      Tensor out = Tensor::empty(array.shape, dtype);
      if (!array.bytes.empty()) std::memcpy(out.raw_data(), src, array.bytes.size());
      return out;
    }
    case NpyDType::I32: {
      Tensor out = Tensor::empty(array.shape, DType::I64);
      int64_t* dst = out.data<int64_t>();
      for (int64_t i = 0; i < numel; ++i) {
        int32_t value;
        std::memcpy(&value, src + 4 * i, sizeof value);
        dst[i] = value;
      }
      return out;
    }
    case NpyDType::U8: {
      Tensor out = Tensor::empty(array.shape, DType::I64);
      int64_t* dst = out.data<int64_t>();
      for (int64_t i = 0; i < numel; ++i) dst[i] = src[i];
      return out;
    }
  }
  fail(path, ": unhandled .npy dtype");
}

void save_npy(const std::string& path, const Tensor& tensor) {
  ENGINE_CHECK(tensor.defined(), path, ": cannot save an undefined tensor");
  // detach(): saving is not part of any graph; to()/contiguous() then copy without a tape.
  const Tensor host = tensor.detach().to(Device::cpu()).contiguous();
  NpyArray array;
  array.dtype = npy_dtype_of(host.dtype());
  array.shape = host.shape();
  array.bytes.resize(static_cast<std::size_t>(host.numel()) * dtype_size(host.dtype()));
  if (!array.bytes.empty()) std::memcpy(array.bytes.data(), host.raw_data(), array.bytes.size());
  write_npy(path, array);
}

}  // namespace engine
