// torch.save reader (format and accepted subset: pth.h).
#include "engine/io/pth.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <unordered_map>

#include "engine/io/file_io.h"
#include "engine/io/torch_pickle.h"
#include "engine/io/zip_archive.h"
#include "kernels/common/check.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "torch.save data is read as little-endian; a big-endian host would need byte swaps");

namespace engine {
namespace {

using detail::PickleData;
using detail::PickleKind;
using detail::PickleObject;
using detail::ZipEntry;

// What the legacy (pre-1.6) torch.save pickle starts with: PROTO 2, then LONG1 of the magic
// number 0x1950a86a20f9469cfc6c.
const uint8_t kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

struct StorageFormat {
  std::size_t element_size;
  bool supported;
  SafetensorsDType dtype;  // what we hold it as; Int's 4-byte elements widen to I64
};

StorageFormat storage_format(detail::TorchStorage type) {
  using detail::TorchStorage;
  switch (type) {
    case TorchStorage::Float:
      return {4, true, SafetensorsDType::F32};
    case TorchStorage::Double:
      return {8, true, SafetensorsDType::F64};
    case TorchStorage::Half:
      return {2, true, SafetensorsDType::F16};
    case TorchStorage::BFloat16:
      return {2, true, SafetensorsDType::BF16};
    case TorchStorage::Long:
      return {8, true, SafetensorsDType::I64};
    case TorchStorage::Int:
      return {4, true, SafetensorsDType::I64};
    case TorchStorage::Byte:
      return {1, true, SafetensorsDType::U8};
    case TorchStorage::Bool:
      return {1, false, SafetensorsDType::U8};
    case TorchStorage::Char:
      return {1, false, SafetensorsDType::U8};
    case TorchStorage::Short:
      return {2, false, SafetensorsDType::U8};
  }
  return {1, false, SafetensorsDType::U8};
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Refuses, by name, the formats that are not a zip archive.
void check_signature(const detail::ByteSource& source, const std::string& file) {
  uint8_t head[512] = {};
  const std::size_t length = static_cast<std::size_t>(std::min<uint64_t>(source.size(), 512));
  source.read_at(0, head, length);
  if (length >= 4 && head[0] == 'P' && head[1] == 'K' && (head[2] == 3 || head[2] == 5)) return;
  ENGINE_CHECK(
      length < sizeof(kLegacyMagic) || std::memcmp(head, kLegacyMagic, sizeof(kLegacyMagic)) != 0,
      file,
      ": legacy torch.save format (PyTorch before 1.6, or "
      "_use_new_zipfile_serialization=False) is not supported; re-save it with a current "
      "PyTorch: torch.save(torch.load(f), f2)");
  ENGINE_CHECK(length < 262 || std::memcmp(head + 257, "ustar", 5) != 0, file,
               ": tar-format torch.save file (PyTorch before 0.4) is not supported");
  fail(file, ": not a torch.save file (no zip signature; is it safetensors or the legacy format?)");
}

// The archive's records by name, and the folder prefix that holds data.pkl.
struct Archive {
  std::unordered_map<std::string, ZipEntry> records;
  std::string prefix;  // "archive/"
};

Archive open_archive(const detail::ByteSource& source, const std::string& file) {
  Archive archive;
  std::vector<std::string> pickles;
  bool torchscript = false;
  for (ZipEntry& entry : detail::read_zip_directory(source, file)) {
    const std::size_t slash = entry.name.find('/');
    const std::string tail = slash == std::string::npos ? entry.name : entry.name.substr(slash + 1);
    if (tail == "data.pkl") pickles.push_back(entry.name);
    if (tail == "constants.pkl") torchscript = true;
    const std::string name = entry.name;
    ENGINE_CHECK(archive.records.emplace(name, std::move(entry)).second, file, ": zip record '",
                 name, "' appears twice");
  }
  ENGINE_CHECK(!torchscript, file,
               ": a TorchScript archive (torch.jit.save), not a torch.save state dict; save "
               "model.state_dict() with torch.save instead");
  ENGINE_CHECK(!pickles.empty(), file,
               ": zip archive without a <folder>/data.pkl record (not a "
               "torch.save file)");
  ENGINE_CHECK(pickles.size() == 1, file, ": zip archive with ", pickles.size(),
               " data.pkl records ('", pickles[0], "', '", pickles[1], "')");
  archive.prefix = pickles[0].substr(0, pickles[0].size() - std::strlen("data.pkl"));
  ENGINE_CHECK(!archive.prefix.empty(), file,
               ": data.pkl is not inside a folder (not a torch.save file)");
  return archive;
}

std::vector<uint8_t> read_record(const detail::ByteSource& source, const ZipEntry& entry,
                                 const std::string& file, std::size_t limit) {
  const uint64_t at = detail::zip_entry_data_offset(source, entry, file);
  ENGINE_CHECK(entry.size <= limit, file, ": record '", entry.name, "' is ", entry.size,
               " bytes, over the limit of ", limit);
  std::vector<uint8_t> bytes(static_cast<std::size_t>(entry.size));
  source.read_at(at, bytes.data(), bytes.size());
  return bytes;
}

void check_byte_order(const detail::ByteSource& source, const Archive& archive,
                      const std::string& file) {
  const auto found = archive.records.find(archive.prefix + "byteorder");
  if (found == archive.records.end()) return;  // written since PyTorch 1.10; before: little
  const std::vector<uint8_t> bytes = read_record(source, found->second, file, 16);
  const std::string order(bytes.begin(), bytes.end());
  ENGINE_CHECK(order == "little", file, ": byteorder is '", order.substr(0, 16),
               "'; only little-endian files are supported");
}

bool is_tensor_dict(const PickleData& data, uint32_t index) {
  const PickleObject& dict = data.objects[index];
  if (dict.kind != PickleKind::Dict) return false;
  for (std::size_t i = 1; i < dict.items.size(); i += 2) {
    if (data.objects[dict.items[i]].kind != PickleKind::Tensor) return false;
  }
  return true;
}

// The dict of tensors to read (pth.h), and the top-level key it was under ("" = the root).
std::pair<uint32_t, std::string> find_state_dict(const PickleData& data, const std::string& file) {
  const PickleObject& root = data.objects[data.root];
  ENGINE_CHECK(root.kind == PickleKind::Dict, file,
               ": the pickled object is not a dict (expected a state dict, or a checkpoint dict "
               "with a 'state_dict' entry)");
  if (is_tensor_dict(data, data.root)) return {data.root, ""};
  std::string keys;
  for (const char* wanted : {"state_dict", "model_state_dict", "model", "net"}) {
    for (std::size_t i = 0; i + 1 < root.items.size(); i += 2) {
      const PickleObject& key = data.objects[root.items[i]];
      if (key.kind == PickleKind::String && key.text == wanted &&
          is_tensor_dict(data, root.items[i + 1])) {
        return {root.items[i + 1], wanted};
      }
    }
  }
  for (std::size_t i = 0; i + 1 < root.items.size() && i < 40; i += 2) {
    const PickleObject& key = data.objects[root.items[i]];
    keys += (keys.empty() ? "'" : ", '") +
            (key.kind == PickleKind::String ? key.text.substr(0, 40) : "?") + "'";
  }
  fail(file, ": holds no state dict: the top-level dict has keys ", keys.empty() ? "(none)" : keys,
       " but neither only tensors nor a 'state_dict', 'model_state_dict', 'model' or 'net' entry "
       "that is a dict of tensors");
}

// numel of `shape`, or an error when a dimension is negative or the product exceeds `limit`.
uint64_t checked_numel(const std::vector<int64_t>& shape, uint64_t limit,
                       const std::string& where) {
  uint64_t numel = 1;
  for (int64_t dim : shape) {
    ENGINE_CHECK(dim >= 0, where, ": negative size ", dim);
    if (dim == 0) return 0;
  }
  for (int64_t dim : shape) {
    const uint64_t d = static_cast<uint64_t>(dim);
    ENGINE_CHECK(numel <= limit / d, where, ": shape ", shape_str(shape),
                 " has more elements than its storage of ", limit,
                 " (an overlapping or expanded view)");
    numel *= d;
  }
  return numel;
}

std::vector<int64_t> int_tuple(const PickleData& data, uint32_t index) {
  std::vector<int64_t> values;
  for (uint32_t item : data.objects[index].items) values.push_back(data.objects[item].integer);
  return values;
}

// Copies tensor `view` of `storage` (bytes [first, ...) of its record) out in row-major order.
std::vector<uint8_t> gather(const uint8_t* storage, const std::vector<int64_t>& shape,
                            const std::vector<int64_t>& stride, uint64_t numel,
                            std::size_t element_size) {
  std::vector<uint8_t> out(numel * element_size);
  std::vector<int64_t> index(shape.size(), 0);
  uint64_t source = 0;  // element offset of `index` from the view's first element
  for (uint64_t n = 0; n < numel; ++n) {
    std::memcpy(out.data() + n * element_size, storage + source * element_size, element_size);
    for (std::size_t d = shape.size(); d-- > 0;) {  // odometer over the dimensions
      if (++index[d] < shape[d]) {
        source += static_cast<uint64_t>(stride[d]);
        break;
      }
      source -= static_cast<uint64_t>(stride[d]) * static_cast<uint64_t>(shape[d] - 1);
      index[d] = 0;
    }
  }
  return out;
}

RawTensor read_tensor(const detail::ByteSource& source, const Archive& archive,
                      const PickleData& data, uint32_t index, const std::string& where) {
  const PickleObject& tensor = data.objects[index];
  const PickleObject& storage = data.objects[tensor.items[0]];
  const auto type = static_cast<detail::TorchStorage>(storage.tag);
  const StorageFormat format = storage_format(type);
  ENGINE_CHECK(format.supported, where, ": torch.", detail::torch_storage_name(type),
               " tensors are not supported (supported: Float, Double, Half, BFloat16, Long, Int, "
               "Byte)");
  const std::string record = archive.prefix + "data/" + storage.text;
  const auto found = archive.records.find(record);
  ENGINE_CHECK(found != archive.records.end(), where, ": its storage record '", record,
               "' is missing");
  const ZipEntry& entry = found->second;
  const uint64_t storage_numel = static_cast<uint64_t>(storage.integer);
  ENGINE_CHECK(
      entry.size % format.element_size == 0 && entry.size / format.element_size == storage_numel,
      where, ": storage record '", record, "' is ", entry.size, " bytes, but its ", storage_numel,
      " elements of torch.", detail::torch_storage_name(type), " take ", format.element_size,
      " bytes each");

  const std::vector<int64_t> shape = int_tuple(data, tensor.items[1]);
  const std::vector<int64_t> stride = int_tuple(data, tensor.items[2]);
  const uint64_t numel = checked_numel(shape, storage_numel, where);
  const uint64_t first = static_cast<uint64_t>(tensor.integer);
  uint64_t last = first;  // the largest element offset the view touches
  for (std::size_t d = 0; d < shape.size() && numel > 0; ++d) {
    ENGINE_CHECK(stride[d] >= 0, where, ": negative stride ", stride[d]);
    const uint64_t reach = static_cast<uint64_t>(shape[d] - 1);
    const uint64_t step = static_cast<uint64_t>(stride[d]);
    ENGINE_CHECK(step == 0 || reach <= (storage_numel - std::min(last, storage_numel)) / step,
                 where, ": view (offset ", first, ", size ", shape_str(shape), ", stride ",
                 shape_str(stride), ") reaches outside its storage of ", storage_numel,
                 " elements");
    last += reach * step;
  }
  ENGINE_CHECK(numel == 0 || last < storage_numel, where, ": view (offset ", first, ", size ",
               shape_str(shape), ", stride ", shape_str(stride),
               ") reaches outside its storage of ", storage_numel, " elements");

  RawTensor raw;
  raw.dtype = format.dtype;
  raw.shape = shape;
  if (numel == 0) return raw;
  const uint64_t data_at = detail::zip_entry_data_offset(source, entry, where);
  std::vector<uint8_t> span((last - first + 1) * format.element_size);
  source.read_at(data_at + first * format.element_size, span.data(), span.size());
  raw.bytes = gather(span.data(), shape, stride, numel, format.element_size);
  if (type == detail::TorchStorage::Int) {  // widen int32 to int64
    std::vector<uint8_t> wide(numel * 8);
    for (uint64_t i = 0; i < numel; ++i) {
      int32_t value = 0;
      std::memcpy(&value, raw.bytes.data() + 4 * i, 4);
      const int64_t widened = value;
      std::memcpy(wide.data() + 8 * i, &widened, 8);
    }
    raw.bytes = std::move(wide);
  }
  return raw;
}

PthFile parse_source(const detail::ByteSource& source, const std::string& file) {
  check_signature(source, file);
  const Archive archive = open_archive(source, file);
  check_byte_order(source, archive, file);
  const ZipEntry& pickle_entry = archive.records.at(archive.prefix + "data.pkl");
  const std::vector<uint8_t> program = read_record(source, pickle_entry, file, kMaxPthPickleBytes);
  const PickleData data =
      detail::read_torch_pickle(program.data(), program.size(), file + ": " + pickle_entry.name);
  const auto [dict_index, dict_key] = find_state_dict(data, file);

  PthFile result;
  result.state_dict_key = dict_key;
  const std::vector<uint32_t>& items = data.objects[dict_index].items;
  std::set<std::string> names;
  bool all_module = !items.empty();
  for (std::size_t i = 0; i < items.size(); i += 2) {
    const PickleObject& key = data.objects[items[i]];
    ENGINE_CHECK(key.kind == PickleKind::String, file, ": state dict key ", i / 2,
                 " is not a string");
    ENGINE_CHECK(names.insert(key.text).second, file, ": key '", key.text, "' appears twice");
    all_module = all_module && starts_with(key.text, "module.");
  }
  for (std::size_t i = 0; i < items.size(); i += 2) {
    std::string name = data.objects[items[i]].text;
    const std::string where = file + ": tensor '" + name + "'";
    RawTensor tensor = read_tensor(source, archive, data, items[i + 1], where);
    if (all_module) name = name.substr(std::strlen("module."));
    result.tensors.emplace_back(std::move(name), std::move(tensor));
  }
  result.removed_module_prefix = all_module;
  return result;
}

}  // namespace

PthFile parse_pth(const uint8_t* data, std::size_t size, const std::string& name_for_errors) {
  const detail::MemorySource source(data, size, name_for_errors);
  return parse_source(source, name_for_errors);
}

PthFile read_pth(const std::string& path) {
  const detail::InputFile input(path);
  const detail::FileSource source(input);
  return parse_source(source, path);
}

std::map<std::string, Tensor> load_pth(const std::string& path) {
  PthFile file = read_pth(path);
  return tensors_from_raw(file.tensors, path);
}

bool is_torch_checkpoint_path(const std::string& path) {
  for (const char* extension : {".pth", ".pt", ".ckpt", ".bin"}) {
    if (ends_with(path, extension)) return true;
  }
  if (ends_with(path, ".safetensors")) return false;
  std::ifstream in(path, std::ios::binary);
  uint8_t head[sizeof(kLegacyMagic)] = {};
  in.read(reinterpret_cast<char*>(head), sizeof(head));
  if (in.gcount() >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4) {
    return true;
  }
  return in.gcount() == sizeof(head) && std::memcmp(head, kLegacyMagic, sizeof(head)) == 0;
}

}  // namespace engine
