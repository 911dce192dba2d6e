// MATLAB Level-5 MAT-file reader (see mat_file.h for the format and what is supported).
#include "data/mat_file.h"

#include <zlib.h>

#include <cstring>
#include <memory>

#include "engine/io/file_io.h"
#include "engine/text.h"
#include "kernels/common/check.h"

namespace data {

using engine::fail;

namespace {

// Data element types (miINT8 ...) and array classes (mxCELL_CLASS ...) we use.
enum : uint32_t {
  kMiInt8 = 1,
  kMiUint8 = 2,
  kMiInt16 = 3,
  kMiUint16 = 4,
  kMiInt32 = 5,
  kMiUint32 = 6,
  kMiSingle = 7,
  kMiDouble = 9,
  kMiInt64 = 12,
  kMiUint64 = 13,
  kMiMatrix = 14,
  kMiCompressed = 15,
  kMiUtf8 = 16,
  kMiUtf16 = 17,
};
enum : uint32_t { kMxCell = 1, kMxStruct = 2, kMxObject = 3, kMxChar = 4, kMxSparse = 5 };

constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxInflated = uint64_t(1) << 30;
constexpr int64_t kMaxNumel = int64_t(1) << 40;

uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

struct Element {
  uint32_t type = 0;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint64_t offset = 0;  // of the tag, within the buffer being parsed (for messages)
};

int64_t mi_type_size(uint32_t type) {
  switch (type) {
    case kMiInt8:
    case kMiUint8:
    case kMiUtf8:
      return 1;
    case kMiInt16:
    case kMiUint16:
    case kMiUtf16:
      return 2;
    case kMiInt32:
    case kMiUint32:
    case kMiSingle:
      return 4;
    case kMiDouble:
    case kMiInt64:
    case kMiUint64:
      return 8;
    default:
      return 0;
  }
}

double mi_value(uint32_t type, const uint8_t* p) {
  switch (type) {
    case kMiInt8:
      return static_cast<int8_t>(p[0]);
    case kMiUint8:
      return p[0];
    case kMiInt16:
      return static_cast<int16_t>(uint16_t(p[0] | (p[1] << 8)));
    case kMiUint16:
      return uint16_t(p[0] | (p[1] << 8));
    case kMiInt32:
      return static_cast<int32_t>(le32(p));
    case kMiUint32:
      return le32(p);
    case kMiSingle: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case kMiDouble: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case kMiInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case kMiUint64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    default:
      return 0.0;
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
 public:
  explicit Parser(const std::string& file) : file_(file) {}

  // The element whose tag starts at `pos` in [base, base + size); advances `pos` past it.
  Element next(const uint8_t* base, uint64_t size, uint64_t& pos, const std::string& what) const {
    if (size < 8 || pos > size - 8) {
      fail(file_, ": truncated MAT-file: ", what, " expected at offset ", pos, " but only ",
           size - std::min(pos, size), " bytes remain");
    }
    Element e;
    e.offset = pos;
    const uint32_t word0 = le32(base + pos), word1 = le32(base + pos + 4);
    if ((word0 >> 16) != 0) {  // small element: [u16 count, u16 type][4 data bytes]
      e.type = word0 & 0xFFFF;
      e.size = word0 >> 16;
      if (e.size > 4) fail(file_, ": corrupt MAT-file: small element of ", e.size, " bytes");
      e.data = base + pos + 4;
      pos += 8;
      return e;
    }
    e.type = word0;
    e.size = word1;
    if (e.size > size - pos - 8) {
      fail(file_, ": truncated MAT-file: ", what, " at offset ", pos, " claims ", e.size,
           " bytes, only ", size - pos - 8, " remain");
    }
    e.data = base + pos + 8;
    pos += 8 + e.size;
    if (e.type != kMiCompressed) pos = std::min(size, (pos + 7) / 8 * 8);  // 8-byte padding
    return e;
  }

  MatArray matrix(const Element& e, int depth) const {
    if (e.type != kMiMatrix) {
      fail(file_, ": corrupt MAT-file: expected a matrix element (type 14) at offset ", e.offset,
           ", got type ", e.type);
    }
    if (depth > kMaxDepth) fail(file_, ": MAT-file nests arrays deeper than ", kMaxDepth);
    MatArray out;
    if (e.size == 0) {  // an empty array inside a cell or struct
      out.dims = {0, 0};
      return out;
    }
    uint64_t pos = 0;
    const Element flags = next(e.data, e.size, pos, "array flags");
    if (flags.type != kMiUint32 || flags.size != 8) {
      fail(file_, ": corrupt MAT-file: bad array flags at offset ", e.offset);
    }
    const uint32_t array_class = le32(flags.data) & 0xFF;
    const Element dims = next(e.data, e.size, pos, "array dimensions");
    if (dims.type != kMiInt32 || dims.size < 8 || dims.size % 4 != 0) {
      fail(file_, ": corrupt MAT-file: bad array dimensions at offset ", e.offset);
    }
    int64_t numel = 1;
    for (uint64_t i = 0; i < dims.size / 4; ++i) {
      const int64_t d = static_cast<int32_t>(le32(dims.data + 4 * i));
      if (d < 0) fail(file_, ": corrupt MAT-file: negative dimension ", d);
      out.dims.push_back(d);
      // Saturate above the limit instead of overflowing (d < 2^31, the limit 2^40).
      numel = (d != 0 && numel > kMaxNumel / d) ? kMaxNumel + 1 : numel * d;
    }
    if (numel > kMaxNumel) fail(file_, ": corrupt MAT-file: array too large");
    const Element name = next(e.data, e.size, pos, "array name");
    if (name.type != kMiInt8) fail(file_, ": corrupt MAT-file: bad array name element");
    out.name.assign(reinterpret_cast<const char*>(name.data), name.size);
    const std::string label = out.name.empty() ? std::string("(unnamed array)") : out.name;

    switch (array_class) {
      case kMxCell:
        read_cell(e, pos, numel, label, depth, out);
        return out;
      case kMxStruct:
        read_struct(e, pos, numel, label, depth, out);
        return out;
      case kMxChar:
        read_char(e, pos, numel, label, out);
        return out;
      case kMxObject:
      case kMxSparse:
        fail(file_, ": unsupported MATLAB array class ", array_class, " (sparse/object) in ",
             label);
      default:
        break;
    }
    if (array_class < 6 || array_class > 15) {
      fail(file_, ": unsupported MATLAB array class ", array_class, " in ", label);
    }
    read_numeric(e, pos, numel, label, out);
    return out;
  }

  // The body of each array class, read from `pos` inside matrix element `e` (whose flags,
  // dimensions and name matrix() has read) into `out`; `numel` is the product of the dimensions
  // and `label` the array's name for messages.
  void read_cell(const Element& e, uint64_t& pos, int64_t numel, const std::string& label,
                 int depth, MatArray& out) const {
    out.kind = MatArray::Kind::Cell;
    for (int64_t i = 0; i < numel; ++i) {
      out.elements.push_back(matrix(next(e.data, e.size, pos, "cell " + label), depth + 1));
    }
  }

  void read_struct(const Element& e, uint64_t& pos, int64_t numel, const std::string& label,
                   int depth, MatArray& out) const {
    out.kind = MatArray::Kind::Struct;
    const Element length = next(e.data, e.size, pos, "field name length");
    if (length.type != kMiInt32 || length.size != 4 || le32(length.data) == 0) {
      fail(file_, ": corrupt MAT-file: bad field name length in struct ", label);
    }
    const uint64_t field_length = le32(length.data);
    const Element names = next(e.data, e.size, pos, "field names");
    if (names.type != kMiInt8 || names.size % field_length != 0) {
      fail(file_, ": corrupt MAT-file: bad field names in struct ", label);
    }
    for (uint64_t f = 0; f < names.size / field_length; ++f) {
      const char* start = reinterpret_cast<const char*>(names.data + f * field_length);
      out.field_names.emplace_back(start, strnlen(start, field_length));
    }
    // A struct without fields stores nothing, however many elements it declares (up to
    // 2^40: looping over them took hours; found by fuzz_mat).
    if (out.field_names.empty()) return;
    for (int64_t i = 0; i < numel; ++i) {
      for (const std::string& field : out.field_names) {
        out.elements.push_back(matrix(next(e.data, e.size, pos, label + "." + field), depth + 1));
      }
    }
  }

  void read_char(const Element& e, uint64_t& pos, int64_t numel, const std::string& label,
                 MatArray& out) const {
    out.kind = MatArray::Kind::Char;
    const Element chars = next(e.data, e.size, pos, "characters of " + label);
    std::vector<uint32_t> units;
    if (chars.type == kMiUint16 || chars.type == kMiUtf16) {
      for (uint64_t i = 0; i + 1 < chars.size; i += 2) {
        units.push_back(uint32_t(chars.data[i]) | (uint32_t(chars.data[i + 1]) << 8));
      }
    } else if (chars.type == kMiUtf8 || chars.type == kMiUint8 || chars.type == kMiInt8) {
      // Bytes; miUTF8 multi-byte sequences are kept as they are (copied byte by byte).
      for (uint64_t i = 0; i < chars.size; ++i) units.push_back(chars.data[i]);
    } else {
      fail(file_, ": unsupported character encoding (type ", chars.type, ") in ", label);
    }
    if (chars.type != kMiUtf8 && static_cast<int64_t>(units.size()) != numel) {
      fail(file_, ": corrupt MAT-file: char array ", label, " has ", units.size(),
           " characters for ", numel, " elements");
    }
    out.text = char_text(units, out.dims, chars.type);
  }

  void read_numeric(const Element& e, uint64_t& pos, int64_t numel, const std::string& label,
                    MatArray& out) const {
    out.kind = MatArray::Kind::Numeric;
    const Element real = next(e.data, e.size, pos, "real part of " + label);
    const int64_t item = mi_type_size(real.type);
    if (item == 0 || real.type == kMiUtf8 || real.type == kMiUtf16) {
      fail(file_, ": unsupported numeric element type ", real.type, " in ", label);
    }
    if (static_cast<int64_t>(real.size) != numel * item) {
      fail(file_, ": corrupt MAT-file: numeric array ", label, " has ", real.size, " bytes for ",
           numel, " elements of ", item, " bytes");
    }
    out.numbers.reserve(static_cast<std::size_t>(numel));
    for (int64_t i = 0; i < numel; ++i)
      out.numbers.push_back(mi_value(real.type, real.data + i * item));
    // An imaginary part, if any, follows and is ignored.
  }

  // Decompresses a miCOMPRESSED element's zlib stream.
  std::vector<uint8_t> inflate_element(const Element& e) const {
    z_stream z{};
    if (inflateInit(&z) != Z_OK) fail(file_, ": zlib inflateInit failed");
    std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
    z.next_in = const_cast<Bytef*>(e.data);
    z.avail_in = static_cast<uInt>(e.size);
    std::vector<uint8_t> out(
        std::min<uint64_t>(kMaxInflated, std::max<uint64_t>(4096, e.size * 4)));
    int status = Z_OK;
    while (status != Z_STREAM_END) {
      if (z.total_out == out.size()) {
        if (out.size() >= kMaxInflated) {
          fail(file_, ": compressed element at offset ", e.offset, " inflates beyond 1 GiB");
        }
        out.resize(std::min<uint64_t>(kMaxInflated, out.size() * 2));
      }
      z.next_out = out.data() + z.total_out;
      z.avail_out = static_cast<uInt>(out.size() - z.total_out);
      status = inflate(&z, Z_NO_FLUSH);
      if (status == Z_BUF_ERROR && z.avail_in == 0) {
        fail(file_, ": truncated compressed element at offset ", e.offset);
      }
      if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
        fail(file_, ": corrupt compressed element at offset ", e.offset,
             " (zlib: ", z.msg ? z.msg : "error", ")");
      }
    }
    out.resize(z.total_out);
    return out;
  }

 private:
  static std::string char_text(const std::vector<uint32_t>& units, const std::vector<int64_t>& dims,
                               uint32_t type) {
    std::string text;
    // An empty array has no characters, whatever row count it declares: a [2^30, 0] array in a
    // few hundred bytes must not become 2^30 - 1 newlines (found by fuzz_mat).
    if (units.empty()) return text;
    const bool bytes = type == kMiUtf8;
    const int64_t rows = dims.empty() ? 1 : dims[0];
    if (bytes || rows <= 1) {
      for (uint32_t u : units) {
        if (bytes)
          text += static_cast<char>(u);
        else
          append_utf8(text, u);
      }
      return text;
    }
    const int64_t cols = static_cast<int64_t>(units.size()) / rows;  // column-major storage
    for (int64_t r = 0; r < rows; ++r) {
      if (r) text += '\n';
      for (int64_t c = 0; c < cols; ++c)
        append_utf8(text, units[static_cast<std::size_t>(c * rows + r)]);
    }
    return text;
  }

  std::string file_;
};

}  // namespace

int64_t MatArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

bool MatArray::has_field(const std::string& field) const {
  for (const std::string& f : field_names) {
    if (f == field) return true;
  }
  return false;
}

const MatArray& MatArray::field(int64_t index, std::size_t field_position) const {
  ENGINE_CHECK(kind == Kind::Struct, "MAT variable '", name, "' is not a struct");
  ENGINE_CHECK(index >= 0 && index < numel() && field_position < field_names.size(), "MAT struct '",
               name, "': element ", index, " field #", field_position, " out of range (", numel(),
               " elements, ", field_names.size(), " fields)");
  return elements[static_cast<std::size_t>(index) * field_names.size() + field_position];
}

const MatArray& MatArray::field(int64_t index, const std::string& field_name) const {
  for (std::size_t f = 0; f < field_names.size(); ++f) {
    if (field_names[f] == field_name) return field(index, f);
  }
  fail("MAT struct '", name, "' has no field '", field_name,
       "' (fields: ", engine::join(field_names), ")");
}

std::vector<MatArray> parse_mat(const uint8_t* data, std::size_t size,
                                const std::string& name_for_errors) {
  const std::string& file = name_for_errors;
  if (size < 128)
    fail(file, ": not a MAT-file: ", size, " bytes, shorter than the 128-byte header");
  if (std::memcmp(data, "MATLAB", 6) != 0) {
    fail(file, ": not a Level-5 MAT-file (the header does not start with \"MATLAB\")");
  }
  if (std::memcmp(data, "MATLAB 7.3", 10) == 0) {
    fail(file, ": MAT v7.3 (HDF5) files are not supported; re-save with save(..., '-v7')");
  }
  if (data[126] == 'M' && data[127] == 'I') fail(file, ": big-endian MAT-files are not supported");
  if (data[126] != 'I' || data[127] != 'M') {
    fail(file, ": not a Level-5 MAT-file (bad endian indicator at byte 126)");
  }
  Parser parser(file);
  std::vector<MatArray> variables;
  uint64_t pos = 128;
  while (pos < size) {
    const Element e = parser.next(data, size, pos, "a variable");
    if (e.type == kMiCompressed) {
      const std::vector<uint8_t> inflated = parser.inflate_element(e);
      uint64_t inner = 0;
      variables.push_back(parser.matrix(
          parser.next(inflated.data(), inflated.size(), inner, "a compressed variable"), 0));
    } else {
      variables.push_back(parser.matrix(e, 0));
    }
  }
  return variables;
}

std::vector<MatArray> read_mat_file(const std::string& path) {
  engine::detail::InputFile file(path);
  ENGINE_CHECK(file.size() <= (uint64_t(1) << 31), path, ": MAT-file of ", file.size(),
               " bytes is larger than the 2 GiB this reader accepts");
  std::vector<uint8_t> bytes(static_cast<std::size_t>(file.size()));
  if (!bytes.empty()) file.read_at(0, bytes.data(), bytes.size());
  return parse_mat(bytes.data(), bytes.size(), path);
}

}  // namespace data
