// safetensors reader and writer (format: safetensors.h). The header is parsed into a list of
// entries that is validated against the buffer length before a single tensor byte is read or
// allocated, so a corrupt file costs at most the (bounded) header.
#include "engine/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/io/file_io.h"
#include "engine/io/half.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace engine {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100000000;  // the reference's HeaderTooLarge limit
constexpr const char* kMetadataKey = "__metadata__";

// Dtypes the format defines that we do not handle: "unsupported", not "unknown".
const std::set<std::string>& other_format_dtypes() {
  static const std::set<std::string> names = {
      "BOOL",    "F4",      "F6_E2M3",     "F6_E3M2",     "I8",  "U16", "I16", "F8_E5M2",
      "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I32", "U32", "C64", "U64"};
  return names;
}

const SafetensorsDType kAllDTypes[] = {SafetensorsDType::F32, SafetensorsDType::F64,
                                       SafetensorsDType::F16, SafetensorsDType::BF16,
                                       SafetensorsDType::I64, SafetensorsDType::U8};

// One tensor as described by the header, before its bytes are touched.
struct HeaderEntry {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::F32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct ParsedHeader {
  std::vector<HeaderEntry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
};

// A short description of a JSON value for error messages: scalars as written (cut to 40
// characters), containers by their type only. Never dump() a container: a crafted header can
// nest millions of levels deep, and dump() recurses.
std::string describe(const nlohmann::json& value) {
  if (value.is_array() || value.is_object()) return std::string("an ") + value.type_name();
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 40) + "...";
  return text;
}

uint64_t read_u64_le(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

void append_u64_le(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// numel * element size, or an error when it does not fit (a crafted shape must not wrap around).
uint64_t checked_nbytes(const Shape& shape, std::size_t element_size, const std::string& file,
                        const std::string& name) {
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t numel = 1;
  for (int64_t dim : shape) {
    ENGINE_CHECK(dim >= 0, file, ": tensor '", name, "': negative dimension in shape ",
                 shape_str(shape));
    const uint64_t d = static_cast<uint64_t>(dim);
    ENGINE_CHECK(d == 0 || numel <= limit / d, file, ": tensor '", name, "': shape ",
                 shape_str(shape), " has more elements than fit in 64 bits");
    numel *= d;
  }
  ENGINE_CHECK(numel <= limit / element_size, file, ": tensor '", name, "': shape ",
               shape_str(shape), " is too large in bytes");
  return numel * element_size;
}

SafetensorsDType parse_dtype(const nlohmann::json& value, const std::string& file,
                             const std::string& name) {
  ENGINE_CHECK(value.is_string(), file, ": tensor '", name, "': \"dtype\" must be a string, got ",
               describe(value));
  const std::string text = value.get<std::string>();
  for (SafetensorsDType dtype : kAllDTypes) {
    if (text == safetensors_dtype_name(dtype)) return dtype;
  }
  if (other_format_dtypes().count(text)) {
    fail(file, ": tensor '", name, "': unsupported dtype \"", text,
         "\" (supported: F32, F64, F16, BF16, I64, U8)");
  }
  fail(file, ": tensor '", name, "': unknown dtype \"", text, "\"");
}

// A JSON number that is a non-negative integer fitting in int64 (no floats, no negatives).
uint64_t parse_count(const nlohmann::json& value, const std::string& file, const std::string& name,
                     const char* field) {
  ENGINE_CHECK(value.is_number_integer(), file, ": tensor '", name, "': \"", field,
               "\" entries must be integers, got ", describe(value));
  ENGINE_CHECK(value.is_number_unsigned(), file, ": tensor '", name, "': \"", field,
               "\" entries must be non-negative, got ", describe(value));
  const uint64_t count = value.get<uint64_t>();
  ENGINE_CHECK(count <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), file,
               ": tensor '", name, "': \"", field, "\" entry ", count, " is too large");
  return count;
}

HeaderEntry parse_entry(const std::string& name, const nlohmann::json& info,
                        const std::string& file) {
  ENGINE_CHECK(info.is_object(), file, ": tensor '", name,
               "': expected an object with dtype, shape, data_offsets, got ", describe(info));
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    ENGINE_CHECK(info.contains(field), file, ": tensor '", name, "': missing \"", field, "\"");
  }
  HeaderEntry entry;
  entry.name = name;
  entry.dtype = parse_dtype(info["dtype"], file, name);

  const nlohmann::json& shape = info["shape"];
  ENGINE_CHECK(shape.is_array(), file, ": tensor '", name,
               "': \"shape\" must be a list of non-negative integers, got ", describe(shape));
  for (const nlohmann::json& dim : shape) {
    entry.shape.push_back(static_cast<int64_t>(parse_count(dim, file, name, "shape")));
  }

  const nlohmann::json& offsets = info["data_offsets"];
  ENGINE_CHECK(offsets.is_array() && offsets.size() == 2, file, ": tensor '", name,
               "': \"data_offsets\" must be [begin, end], got ", describe(offsets));
  entry.begin = parse_count(offsets[0], file, name, "data_offsets");
  entry.end = parse_count(offsets[1], file, name, "data_offsets");
  ENGINE_CHECK(entry.begin <= entry.end, file, ": tensor '", name, "': data_offsets [", entry.begin,
               ", ", entry.end, "] end before begin");

  const uint64_t nbytes =
      checked_nbytes(entry.shape, safetensors_dtype_size(entry.dtype), file, name);
  ENGINE_CHECK(entry.end - entry.begin == nbytes, file, ": tensor '", name, "': data_offsets [",
               entry.begin, ", ", entry.end, ") hold ", entry.end - entry.begin, " bytes but ",
               safetensors_dtype_name(entry.dtype), " ", shape_str(entry.shape), " needs ", nbytes);
  return entry;
}

// Parses JSON, failing on duplicate keys at any depth (nlohmann would keep the last silently).
nlohmann::json parse_json_strict(const char* text, std::size_t length, const std::string& file) {
  std::vector<std::set<std::string>> keys_per_object;  // one set per open object
  std::string duplicate;
  auto watch_keys = [&](int /*depth*/, nlohmann::json::parse_event_t event,
                        nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      keys_per_object.emplace_back();
    } else if (event == Event::object_end && !keys_per_object.empty()) {
      keys_per_object.pop_back();
    } else if (event == Event::key && !keys_per_object.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!keys_per_object.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text, text + length, watch_keys);
  } catch (const nlohmann::json::exception& error) {
    fail(file, ": header is not valid JSON: ", error.what());
  }
  ENGINE_CHECK(duplicate.empty(), file, ": duplicate key \"", duplicate, "\" in the header");
  return root;
}

ParsedHeader parse_header(const char* text, std::size_t length, uint64_t buffer_size,
                          const std::string& file) {
  ENGINE_CHECK(length > 0 && text[0] == '{', file,
               ": header does not start with '{' (not a safetensors file?)");
  const nlohmann::json root = parse_json_strict(text, length, file);
  ENGINE_CHECK(root.is_object(), file, ": header is not a JSON object");

  ParsedHeader header;
  for (auto item = root.begin(); item != root.end(); ++item) {
    if (item.key() == kMetadataKey) {
      ENGINE_CHECK(item->is_object(), file, ": \"__metadata__\" must be an object, got ",
                   describe(*item));
      for (auto meta = item->begin(); meta != item->end(); ++meta) {
        ENGINE_CHECK(meta->is_string(), file, ": \"__metadata__\" key '", meta.key(),
                     "' must map to a string, got ", describe(*meta));
        header.metadata[meta.key()] = meta->get<std::string>();
      }
    } else {
      header.entries.push_back(parse_entry(item.key(), item.value(), file));
    }
  }

  // Sorted by offset, the tensors must tile [0, buffer_size) exactly.
  std::sort(header.entries.begin(), header.entries.end(),
            [](const HeaderEntry& a, const HeaderEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t cursor = 0;
  std::string previous = "(start of buffer)";
  for (const HeaderEntry& entry : header.entries) {
    ENGINE_CHECK(entry.begin >= cursor, file, ": tensor '", entry.name, "' at [", entry.begin, ", ",
                 entry.end, ") overlaps tensor '", previous, "' which ends at ", cursor);
    ENGINE_CHECK(entry.begin == cursor, file, ": hole in the data buffer: tensor '", entry.name,
                 "' starts at ", entry.begin, " but '", previous, "' ends at ", cursor);
    cursor = entry.end;
    previous = entry.name;
  }
  ENGINE_CHECK(cursor == buffer_size, file, ": data buffer is ", buffer_size,
               " bytes but the tensors cover ", cursor,
               buffer_size < cursor ? " (truncated file)" : " (unused trailing bytes)");
  return header;
}

// Checks the 8-byte length prefix against the file size; returns the header length.
uint64_t check_header_length(const uint8_t* prefix, uint64_t file_size, const std::string& file) {
  ENGINE_CHECK(file_size >= 8, file, ": file is ", file_size,
               " bytes, shorter than the 8-byte header length (not a safetensors file?)");
  const uint64_t header_length = read_u64_le(prefix);
  ENGINE_CHECK(header_length <= kMaxHeaderBytes, file, ": header length ", header_length,
               " exceeds the limit of ", kMaxHeaderBytes, " bytes (HeaderTooLarge)");
  ENGINE_CHECK(header_length <= file_size - 8, file, ": header length ", header_length,
               " goes beyond the end of the file (", file_size, " bytes)");
  return header_length;
}

// The reference writer sorts by its Dtype enum, descending, then by name. That enum lists the
// dtypes in increasing alignment (..., U8, ..., F16, BF16, ..., F32, F64, I64, ...), so this is
// "larger alignment first" with the reference's own tie order (I64 before F64, BF16 before F16),
// which keeps our files byte-identical to safetensors' own for the same tensors.
int reference_rank(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::U8:
      return 0;
    case SafetensorsDType::F16:
      return 1;
    case SafetensorsDType::BF16:
      return 2;
    case SafetensorsDType::F32:
      return 3;
    case SafetensorsDType::F64:
      return 4;
    case SafetensorsDType::I64:
      return 5;
  }
  return 0;
}

std::vector<std::size_t> write_order(const SafetensorsFile& file) {
  std::vector<std::size_t> order(file.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& [name_a, tensor_a] = file.tensors[a];
    const auto& [name_b, tensor_b] = file.tensors[b];
    const int rank_a = reference_rank(tensor_a.dtype);
    const int rank_b = reference_rank(tensor_b.dtype);
    return rank_a != rank_b ? rank_a > rank_b : name_a < name_b;
  });
  return order;
}

// The 8-byte length prefix and the padded JSON header, after validating every tensor.
std::vector<uint8_t> make_prefix(const SafetensorsFile& file, const std::vector<std::size_t>& order,
                                 const std::string& path) {
  std::set<std::string> names;
  for (const auto& [name, tensor] : file.tensors) {
    ENGINE_CHECK(name != kMetadataKey, path, ": '", kMetadataKey, "' is not a valid tensor name");
    ENGINE_CHECK(names.insert(name).second, path, ": duplicate tensor name '", name, "'");
    const uint64_t nbytes =
        checked_nbytes(tensor.shape, safetensors_dtype_size(tensor.dtype), path, name);
    ENGINE_CHECK(tensor.bytes.size() == nbytes, path, ": tensor '", name,
                 "': ", safetensors_dtype_name(tensor.dtype), " ", shape_str(tensor.shape),
                 " needs ", nbytes, " bytes, got ", tensor.bytes.size());
  }

  // ordered_json keeps insertion order: metadata first, then tensors in write order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) {
    nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
    for (const auto& [key, value] : file.metadata) metadata[key] = value;
    header[kMetadataKey] = metadata;
  }
  uint64_t offset = 0;
  for (std::size_t index : order) {
    const auto& [name, tensor] = file.tensors[index];
    nlohmann::ordered_json info = nlohmann::ordered_json::object();
    info["dtype"] = safetensors_dtype_name(tensor.dtype);
    info["shape"] = tensor.shape;
    info["data_offsets"] = {offset, offset + tensor.bytes.size()};
    header[name] = info;
    offset += tensor.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& error) {
    fail(path,
         ": cannot write the header (names and metadata must be valid UTF-8): ", error.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::vector<uint8_t> prefix;
  prefix.reserve(8 + text.size());
  append_u64_le(prefix, text.size());
  prefix.insert(prefix.end(), text.begin(), text.end());
  return prefix;
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::F32:
      return "F32";
    case SafetensorsDType::F64:
      return "F64";
    case SafetensorsDType::F16:
      return "F16";
    case SafetensorsDType::BF16:
      return "BF16";
    case SafetensorsDType::I64:
      return "I64";
    case SafetensorsDType::U8:
      return "U8";
  }
  return "?";
}

std::size_t safetensors_dtype_size(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::F32:
      return 4;
    case SafetensorsDType::F64:
      return 8;
    case SafetensorsDType::F16:
      return 2;
    case SafetensorsDType::BF16:
      return 2;
    case SafetensorsDType::I64:
      return 8;
    case SafetensorsDType::U8:
      return 1;
  }
  return 1;
}

const RawTensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [tensor_name, tensor] : tensors) {
    if (tensor_name == name) return &tensor;
  }
  return nullptr;
}

SafetensorsFile parse_safetensors(const uint8_t* data, std::size_t size,
                                  const std::string& name_for_errors) {
  const std::string& file = name_for_errors;
  const uint64_t header_length = check_header_length(data, size, file);
  const char* header_text = reinterpret_cast<const char*>(data + 8);
  const uint8_t* buffer = data + 8 + header_length;
  const ParsedHeader header =
      parse_header(header_text, header_length, size - 8 - header_length, file);

  SafetensorsFile result;
  result.metadata = header.metadata;
  for (const HeaderEntry& entry : header.entries) {
    RawTensor tensor;
    tensor.dtype = entry.dtype;
    tensor.shape = entry.shape;
    tensor.bytes.assign(buffer + entry.begin, buffer + entry.end);
    result.tensors.emplace_back(entry.name, std::move(tensor));
  }
  return result;
}

SafetensorsFile read_safetensors(const std::string& path) {
  detail::InputFile input(path);
  uint8_t prefix[8] = {};
  if (input.size() >= 8) input.read_at(0, prefix, 8);
  const uint64_t header_length = check_header_length(prefix, input.size(), path);
  std::string header_text(header_length, '\0');
  input.read_at(8, header_text.data(), header_length);
  const uint64_t buffer_start = 8 + header_length;
  const ParsedHeader header =
      parse_header(header_text.data(), header_length, input.size() - buffer_start, path);

  SafetensorsFile result;
  result.metadata = header.metadata;
  for (const HeaderEntry& entry : header.entries) {
    RawTensor tensor;
    tensor.dtype = entry.dtype;
    tensor.shape = entry.shape;
    tensor.bytes.resize(entry.end - entry.begin);
    input.read_at(buffer_start + entry.begin, tensor.bytes.data(), tensor.bytes.size());
    result.tensors.emplace_back(entry.name, std::move(tensor));
  }
  return result;
}

std::vector<uint8_t> serialize_safetensors(const SafetensorsFile& file) {
  const std::vector<std::size_t> order = write_order(file);
  std::vector<uint8_t> out = make_prefix(file, order, "safetensors");
  for (std::size_t index : order) {
    const std::vector<uint8_t>& bytes = file.tensors[index].second.bytes;
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  const std::vector<std::size_t> order = write_order(file);
  const std::vector<uint8_t> prefix = make_prefix(file, order, path);  // validates first
  detail::AtomicFileWriter writer(path);
  writer.write(prefix.data(), prefix.size());
  for (std::size_t index : order) {
    const std::vector<uint8_t>& bytes = file.tensors[index].second.bytes;
    writer.write(bytes.data(), bytes.size());
  }
  writer.commit();
}

Tensor tensor_from_raw(const RawTensor& raw, const std::string& name_for_errors) {
  const uint64_t nbytes = checked_nbytes(raw.shape, safetensors_dtype_size(raw.dtype),
                                         name_for_errors, name_for_errors);
  ENGINE_CHECK(raw.bytes.size() == nbytes, name_for_errors, ": ", safetensors_dtype_name(raw.dtype),
               " ", shape_str(raw.shape), " needs ", nbytes, " bytes, got ", raw.bytes.size());
  const int64_t numel = shape_numel(raw.shape);
  const uint8_t* src = raw.bytes.data();
  switch (raw.dtype) {
    case SafetensorsDType::F32:
    case SafetensorsDType::F64:
    case SafetensorsDType::I64: {
      const DType dtype = raw.dtype == SafetensorsDType::F32   ? DType::F32
                          : raw.dtype == SafetensorsDType::F64 ? DType::F64
                                                               : DType::I64;
      Tensor out = Tensor::empty(raw.shape, dtype);
      if (nbytes > 0) std::memcpy(out.raw_data(), src, nbytes);
      return out;
    }
    case SafetensorsDType::F16:
    case SafetensorsDType::BF16: {
      Tensor out = Tensor::empty(raw.shape, DType::F32);
      float* dst = out.data<float>();
      const bool is_f16 = raw.dtype == SafetensorsDType::F16;
      for (int64_t i = 0; i < numel; ++i) {
        const uint16_t bits = static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
        dst[i] = is_f16 ? f16_to_f32(bits) : bf16_to_f32(bits);
      }
      return out;
    }
    case SafetensorsDType::U8: {
      Tensor out = Tensor::empty(raw.shape, DType::I64);
      int64_t* dst = out.data<int64_t>();
      for (int64_t i = 0; i < numel; ++i) dst[i] = src[i];
      return out;
    }
  }
  fail(name_for_errors, ": unhandled safetensors dtype");
}

RawTensor raw_from_tensor(const Tensor& tensor, const std::string& name_for_errors) {
  ENGINE_CHECK(tensor.defined(), name_for_errors, ": cannot save an undefined tensor");
  // detach(): saving is not part of any graph; to()/contiguous() then copy without a tape.
  const Tensor host = tensor.detach().to(Device::cpu()).contiguous();
  RawTensor raw;
  switch (host.dtype()) {
    case DType::F32:
      raw.dtype = SafetensorsDType::F32;
      break;
    case DType::F64:
      raw.dtype = SafetensorsDType::F64;
      break;
    case DType::I64:
      raw.dtype = SafetensorsDType::I64;
      break;
  }
  raw.shape = host.shape();
  raw.bytes.resize(static_cast<std::size_t>(host.numel()) * dtype_size(host.dtype()));
  if (!raw.bytes.empty()) std::memcpy(raw.bytes.data(), host.raw_data(), raw.bytes.size());
  return raw;
}

std::map<std::string, Tensor> tensors_from_raw(
    std::vector<std::pair<std::string, RawTensor>>& tensors, const std::string& path) {
  std::map<std::string, Tensor> converted;
  for (auto& [name, raw] : tensors) {
    converted[name] = tensor_from_raw(raw, path + ": tensor '" + name + "'");
    std::vector<uint8_t>().swap(raw.bytes);  // keep the peak at one copy plus one tensor
  }
  return converted;
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  SafetensorsFile file = read_safetensors(path);
  return tensors_from_raw(file.tensors, path);
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  SafetensorsFile file;
  file.metadata = metadata;
  for (const auto& [name, tensor] : tensors) {
    file.tensors.emplace_back(name, raw_from_tensor(tensor, path + ": tensor '" + name + "'"));
  }
  write_safetensors(path, file);
}

}  // namespace engine
