// Restricted pickle interpreter for torch.save's data.pkl (contract in torch_pickle.h; opcodes as
// defined by CPython's Lib/pickletools.py).
#include "engine/io/torch_pickle.h"

#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "kernels/common/check.h"

namespace engine::detail {
namespace {

constexpr std::size_t kMaxDims = 64;

const char* const kStorageNames[kTorchStorageCount] = {
    "FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage",
    "IntStorage",   "ByteStorage",   "BoolStorage", "CharStorage",     "ShortStorage"};

// Names of the opcodes we refuse, for the error message.
const char* refused_opcode_name(uint8_t op) {
  switch (op) {
    case '2':
      return "DUP";
    case 'F':
      return "FLOAT";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'P':
      return "PERSID";
    case 'S':
      return "STRING";
    case 'T':
      return "BINSTRING";
    case 'U':
      return "SHORT_BINSTRING";
    case 'V':
      return "UNICODE";
    case 'g':
      return "GET";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 'p':
      return "PUT";
    case 'B':
      return "BINBYTES";
    case 'C':
      return "SHORT_BINBYTES";
    case 0x81:
      return "NEWOBJ";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x8b:
      return "LONG4";
    case 0x8d:
      return "BINUNICODE8";
    case 0x8e:
      return "BINBYTES8";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
  }
  return nullptr;
}

// At most 80 characters, non-printable bytes as '?': names from a hostile file go into messages.
std::string printable(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 80)) out += (c >= 32 && c < 127) ? c : '?';
  return text.size() > 80 ? out + "..." : out;
}

class Unpickler {
 public:
  Unpickler(const uint8_t* data, std::size_t size, const std::string& where)
      : data_(data), size_(size), where_(where) {}

  PickleData run() {
    while (true) {
      op_at_ = at_;
      const uint8_t op = static_cast<uint8_t>(read_uint(1));
      if (op == '.') break;
      if (!value_opcode(op) && !container_opcode(op) && !call_opcode(op)) {
        const char* name = refused_opcode_name(op);
        char code[8];
        std::snprintf(code, sizeof(code), "0x%02x", op);
        if (name != nullptr) error("pickle opcode ", name, " (", code, ") is not supported");
        error("unknown pickle opcode ", code);
      }
    }
    if (stack_.empty()) error("STOP with an empty stack");
    result_.root = stack_.back();
    return std::move(result_);
  }

 private:
  template <typename... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    fail(where_, " byte ", op_at_, ": ", parts...);
  }

  uint64_t read_uint(std::size_t bytes) {
    if (size_ - at_ < bytes) error("truncated data.pkl (ends inside an opcode, before STOP)");
    uint64_t value = 0;
    for (std::size_t i = bytes; i-- > 0;) value = (value << 8) | data_[at_ + i];
    at_ += bytes;
    return value;
  }

  std::string read_text(uint64_t length) {
    if (size_ - at_ < length) error("truncated data.pkl (a string runs past its end)");
    std::string text(reinterpret_cast<const char*>(data_ + at_), static_cast<std::size_t>(length));
    at_ += static_cast<std::size_t>(length);
    return text;
  }

  std::string read_line() {
    const void* end = std::memchr(data_ + at_, '\n', size_ - at_);
    if (end == nullptr) error("truncated data.pkl (GLOBAL without a newline)");
    const std::size_t length = static_cast<const uint8_t*>(end) - (data_ + at_);
    std::string line = read_text(length);
    ++at_;
    return line;
  }

  uint32_t make(PickleObject object) {
    if (result_.objects.size() >= kMaxPickleObjects) {
      error("more than ", kMaxPickleObjects, " objects in data.pkl");
    }
    result_.objects.push_back(std::move(object));
    return static_cast<uint32_t>(result_.objects.size() - 1);
  }

  void push_new(PickleKind kind, int64_t integer = 0, std::string text = {}) {
    PickleObject object;
    object.kind = kind;
    object.integer = integer;
    object.text = std::move(text);
    stack_.push_back(make(std::move(object)));
  }

  PickleObject& object(uint32_t index) { return result_.objects[index]; }

  uint32_t pop() {
    if (stack_.size() <= stack_floor()) error("stack underflow");
    const uint32_t index = stack_.back();
    stack_.pop_back();
    return index;
  }

  uint32_t top() {
    if (stack_.size() <= stack_floor()) error("stack underflow");
    return stack_.back();
  }

  std::size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }

  std::vector<uint32_t> pop_to_mark() {
    if (marks_.empty()) error("no MARK to pop to");
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()),
                                stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  void push_sequence(PickleKind kind, std::vector<uint32_t> items) {
    PickleObject sequence;
    sequence.kind = kind;
    sequence.items = std::move(items);
    stack_.push_back(make(std::move(sequence)));
  }

  void memo_put(uint64_t key) { memo_[key] = top(); }

  void memo_get(uint64_t key) {
    const auto found = memo_.find(key);
    if (found == memo_.end()) error("memo key ", key, " was never stored");
    stack_.push_back(found->second);
  }

  // Constants, strings and the memo.
  bool value_opcode(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint64_t protocol = read_uint(1);
        if (protocol < 2 || protocol > 5) error("unsupported pickle protocol ", protocol);
        return true;
      }
      case 0x95:
        read_uint(8);
        return true;  // FRAME: a length hint only
      case 'N':
        push_new(PickleKind::None);
        return true;
      case 0x88:
        push_new(PickleKind::Bool, 1);
        return true;
      case 0x89:
        push_new(PickleKind::Bool, 0);
        return true;
      case 'K':
        push_new(PickleKind::Int, static_cast<int64_t>(read_uint(1)));
        return true;
      case 'M':
        push_new(PickleKind::Int, static_cast<int64_t>(read_uint(2)));
        return true;
      case 'J':
        push_new(PickleKind::Int, static_cast<int32_t>(static_cast<uint32_t>(read_uint(4))));
        return true;
      case 0x8a:
        read_long1();
        return true;
      case 'G':
        read_binfloat();
        return true;
      case 'X':
        push_new(PickleKind::String, 0, read_text(read_uint(4)));
        return true;
      case 0x8c:
        push_new(PickleKind::String, 0, read_text(read_uint(1)));
        return true;
      case 'q':
        memo_put(read_uint(1));
        return true;
      case 'r':
        memo_put(read_uint(4));
        return true;
      case 0x94:
        memo_put(memo_.size());
        return true;
      case 'h':
        memo_get(read_uint(1));
        return true;
      case 'j':
        memo_get(read_uint(4));
        return true;
      case '0':
        pop();
        return true;
    }
    return false;
  }

  void read_long1() {
    const uint64_t length = read_uint(1);
    if (length > 8) error("LONG1 integer of ", length, " bytes does not fit in 64 bits");
    uint64_t value = length == 0 ? 0 : read_uint(static_cast<std::size_t>(length));
    if (length > 0 && length < 8 && (value >> (8 * length - 1)) != 0) {
      value |= ~uint64_t{0} << (8 * length);  // sign-extend the two's complement
    }
    push_new(PickleKind::Int, static_cast<int64_t>(value));
  }

  void read_binfloat() {
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | read_uint(1);  // big-endian
    double value = 0;
    std::memcpy(&value, &bits, sizeof(value));
    PickleObject number;
    number.kind = PickleKind::Float;
    number.number = value;
    stack_.push_back(make(std::move(number)));
  }

  // Tuples, lists, dicts and marks.
  bool container_opcode(uint8_t op) {
    switch (op) {
      case '(':
        marks_.push_back(stack_.size());
        return true;
      case ')':
        push_sequence(PickleKind::Tuple, {});
        return true;
      case ']':
        push_sequence(PickleKind::List, {});
        return true;
      case '}':
        push_sequence(PickleKind::Dict, {});
        return true;
      case 't':
        push_sequence(PickleKind::Tuple, pop_to_mark());
        return true;
      case 'l':
        push_sequence(PickleKind::List, pop_to_mark());
        return true;
      case 'd':
        push_dict(pop_to_mark());
        return true;
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<uint32_t> items(op - 0x84);
        for (std::size_t i = items.size(); i-- > 0;) items[i] = pop();
        push_sequence(PickleKind::Tuple, std::move(items));
        return true;
      }
      case 'a': {
        const uint32_t value = pop();
        append_to(top(), PickleKind::List, {value}, "APPEND");
        return true;
      }
      case 'e': {
        std::vector<uint32_t> values = pop_to_mark();
        append_to(top(), PickleKind::List, values, "APPENDS");
        return true;
      }
      case 's': {
        const uint32_t value = pop();
        const uint32_t key = pop();
        append_to(top(), PickleKind::Dict, {key, value}, "SETITEM");
        return true;
      }
      case 'u': {
        std::vector<uint32_t> pairs = pop_to_mark();
        if (pairs.size() % 2 != 0) error("SETITEMS with an odd number of items");
        append_to(top(), PickleKind::Dict, pairs, "SETITEMS");
        return true;
      }
    }
    return false;
  }

  void push_dict(std::vector<uint32_t> pairs) {
    if (pairs.size() % 2 != 0) error("DICT with an odd number of items");
    push_sequence(PickleKind::Dict, std::move(pairs));
  }

  void append_to(uint32_t target, PickleKind kind, const std::vector<uint32_t>& items,
                 const char* opcode) {
    if (object(target).kind != kind) {
      error(opcode, " on something that is not a ", kind == PickleKind::Dict ? "dict" : "list");
    }
    std::vector<uint32_t>& into = object(target).items;
    into.insert(into.end(), items.begin(), items.end());
  }

  // Globals, persistent ids, REDUCE and BUILD.
  bool call_opcode(uint8_t op) {
    switch (op) {
      case 'c': {
        std::string module = read_line();
        std::string name = read_line();
        push_global(module, name);
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        const uint32_t name = pop();
        const uint32_t module = pop();
        if (object(name).kind != PickleKind::String || object(module).kind != PickleKind::String) {
          error("STACK_GLOBAL needs two strings");
        }
        push_global(object(module).text, object(name).text);
        return true;
      }
      case 'Q':
        persistent_id(pop());
        return true;
      case 'R':
        reduce();
        return true;
      case 'b': {
        pop();  // the state: _metadata of a state dict, or a parameter's attributes
        const PickleKind kind = object(top()).kind;
        if (kind != PickleKind::Dict && kind != PickleKind::Tensor) {
          error("BUILD on something that is neither a dict nor a tensor");
        }
        return true;
      }
    }
    return false;
  }

  void push_global(const std::string& module, const std::string& name) {
    PickleObject global;
    global.kind = PickleKind::Global;
    global.text = module + "." + name;
    if (module == "collections" && name == "OrderedDict") {
      global.tag = static_cast<uint8_t>(AllowedGlobal::OrderedDict);
    } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
      global.tag = static_cast<uint8_t>(AllowedGlobal::RebuildTensorV2);
    } else if (module == "torch._utils" && name == "_rebuild_parameter") {
      global.tag = static_cast<uint8_t>(AllowedGlobal::RebuildParameter);
    } else if (module == "torch" && storage_type(name) >= 0) {
      global.tag = static_cast<uint8_t>(AllowedGlobal::StorageType);
      global.integer = storage_type(name);
    } else if (module == "torch.storage" && name == "_load_from_bytes") {
      error(
          "global torch.storage._load_from_bytes is refused: a storage pickled inside "
          "data.pkl, not a torch.save record");
    } else {
      error("global ", printable(global.text),
            " is refused: a torch.save state dict holds only collections.OrderedDict, "
            "torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and "
            "torch.<T>Storage (other Python objects are not read)");
    }
    stack_.push_back(make(std::move(global)));
  }

  static int storage_type(const std::string& name) {
    for (int i = 0; i < kTorchStorageCount; ++i) {
      if (name == kStorageNames[i]) return i;
    }
    return -1;
  }

  bool is(uint32_t index, PickleKind kind) { return object(index).kind == kind; }

  void persistent_id(uint32_t id) {
    const std::vector<uint32_t> fields = object(id).items;
    if (!is(id, PickleKind::Tuple) || fields.size() != 5 || !is(fields[0], PickleKind::String) ||
        object(fields[0]).text != "storage") {
      error("persistent id is not ('storage', type, key, location, numel)");
    }
    const PickleObject& type = object(fields[1]);
    if (type.kind != PickleKind::Global ||
        type.tag != static_cast<uint8_t>(AllowedGlobal::StorageType)) {
      error("persistent id: the storage type is not a torch.<T>Storage");
    }
    if (!is(fields[2], PickleKind::String) || !is(fields[3], PickleKind::String) ||
        !is(fields[4], PickleKind::Int) || object(fields[4]).integer < 0) {
      error("persistent id: expected a string key, a string location and a non-negative numel");
    }
    PickleObject storage;
    storage.kind = PickleKind::Storage;
    storage.tag = static_cast<uint8_t>(type.integer);
    storage.text = object(fields[2]).text;
    storage.integer = object(fields[4]).integer;
    stack_.push_back(make(std::move(storage)));
  }

  void reduce() {
    const uint32_t args = pop();
    const uint32_t callable = pop();
    if (!is(args, PickleKind::Tuple)) error("REDUCE arguments are not a tuple");
    if (!is(callable, PickleKind::Global)) error("REDUCE of something that is not a global");
    const std::vector<uint32_t> values = object(args).items;
    switch (static_cast<AllowedGlobal>(object(callable).tag)) {
      case AllowedGlobal::OrderedDict:
        if (!values.empty()) error("collections.OrderedDict called with arguments");
        push_sequence(PickleKind::Dict, {});
        return;
      case AllowedGlobal::RebuildTensorV2:
        rebuild_tensor(values);
        return;
      case AllowedGlobal::RebuildParameter:
        if (values.size() != 3 || !is(values[0], PickleKind::Tensor)) {
          error("torch._utils._rebuild_parameter needs (tensor, requires_grad, hooks)");
        }
        stack_.push_back(values[0]);
        return;
      case AllowedGlobal::StorageType:
        break;
    }
    error("REDUCE calls ", printable(object(callable).text), ", which is not allowed");
  }

  bool is_int_tuple(uint32_t index) {
    if (!is(index, PickleKind::Tuple) || object(index).items.size() > kMaxDims) return false;
    for (uint32_t item : object(index).items) {
      if (!is(item, PickleKind::Int)) return false;
    }
    return true;
  }

  void rebuild_tensor(const std::vector<uint32_t>& args) {
    if (args.size() != 6 && args.size() != 7) {
      error("torch._utils._rebuild_tensor_v2 takes 6 or 7 arguments, got ", args.size());
    }
    if (!is(args[0], PickleKind::Storage)) error("_rebuild_tensor_v2: argument 1 is not a storage");
    if (!is(args[1], PickleKind::Int) || object(args[1]).integer < 0) {
      error("_rebuild_tensor_v2: the storage offset is not a non-negative integer");
    }
    if (!is_int_tuple(args[2]) || !is_int_tuple(args[3]) ||
        object(args[2]).items.size() != object(args[3]).items.size()) {
      error(
          "_rebuild_tensor_v2: size and stride must be tuples of integers of one length (at "
          "most ",
          kMaxDims, ")");
    }
    PickleObject tensor;
    tensor.kind = PickleKind::Tensor;
    tensor.integer = object(args[1]).integer;
    tensor.items = {args[0], args[2], args[3]};
    stack_.push_back(make(std::move(tensor)));
  }

  const uint8_t* data_;
  std::size_t size_;
  const std::string& where_;
  std::size_t at_ = 0;
  std::size_t op_at_ = 0;
  std::vector<uint32_t> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  PickleData result_;
};

}  // namespace

const char* torch_storage_name(TorchStorage type) {
  const int index = static_cast<int>(type);
  return index >= 0 && index < kTorchStorageCount ? kStorageNames[index] : "?";
}

PickleData read_torch_pickle(const uint8_t* data, std::size_t size, const std::string& where) {
  return Unpickler(data, size, where).run();
}

}  // namespace engine::detail
