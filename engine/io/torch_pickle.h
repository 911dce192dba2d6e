// The pickle program in a torch.save archive (`<archive>/data.pkl`, engine/io/pth.h), read by a
// small interpreter that knows only the opcodes and the few globals torch.save uses for a state
// dict. Nothing is imported or called: a GLOBAL outside the allowed list (os.system, a model
// class, torch.storage._load_from_bytes, ...) is refused by name, so a checkpoint cannot run code.
//
// Opcodes: the protocol-2 set torch.save writes (PROTO, MARK, STOP, EMPTY_DICT/LIST/TUPLE, TUPLE,
// TUPLE1-3, DICT, LIST, BININT, BININT1, BININT2, LONG1, BINFLOAT, NONE, NEWTRUE, NEWFALSE,
// BINUNICODE, GLOBAL, BINPERSID, REDUCE, BUILD, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET,
// SETITEM(S), APPEND(S), POP) and protocol 4's SHORT_BINUNICODE, STACK_GLOBAL, MEMOIZE and FRAME
// (torch.save(..., pickle_protocol=4)). Any other opcode is refused by its name.
//
// Allowed globals and what calling them (REDUCE) gives:
//   collections.OrderedDict()                  an empty dict (BUILD on it, which sets the
//                                              state dict's _metadata attribute, is ignored)
//   torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, meta])
//                                              a tensor view of a storage
//   torch._utils._rebuild_parameter(tensor, requires_grad, hooks)   the tensor itself
//   torch.<T>Storage                           only as the type in a persistent id
// A persistent id (BINPERSID) must be ('storage', torch.<T>Storage, key, location, numel).
//
// Objects live in one flat table and refer to each other by index, so no object graph is ever
// walked or destroyed recursively (a crafted file can nest a million levels deep), and the table
// is capped at kMaxPickleObjects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace engine::detail {

constexpr std::size_t kMaxPickleObjects = 1000000;

enum class PickleKind : uint8_t {
  None,
  Bool,
  Int,
  Float,
  String,
  Tuple,
  List,
  Dict,
  Global,
  Storage,
  Tensor
};

enum class AllowedGlobal : uint8_t { OrderedDict, RebuildTensorV2, RebuildParameter, StorageType };

// The torch.<T>Storage types a persistent id may name; pth.cpp decides which dtypes we hold.
enum class TorchStorage : uint8_t {
  Float,
  Double,
  Half,
  BFloat16,
  Long,
  Int,
  Byte,
  Bool,
  Char,
  Short
};
constexpr int kTorchStorageCount = 10;
const char* torch_storage_name(TorchStorage type);  // "FloatStorage", ...

struct PickleObject {
  PickleKind kind = PickleKind::None;
  int64_t integer = 0;  // Bool, Int; Storage: its numel; Tensor: its storage offset
  double number = 0;    // Float
  std::string text;     // String; Global: "module.name"; Storage: its key
  uint8_t tag = 0;      // Global: its AllowedGlobal; Storage: its TorchStorage
  // Tuple, List: the elements; Dict: key0, value0, key1, value1, ... in insertion order;
  // Global of a storage type: {}; Tensor: {storage, size tuple, stride tuple}.
  std::vector<uint32_t> items;
};

struct PickleData {
  std::vector<PickleObject> objects;
  uint32_t root = 0;  // the pickled value (STOP's top of stack)
};

// Runs the program; every problem is an engine::Error starting with `where` and naming the byte.
PickleData read_torch_pickle(const uint8_t* data, std::size_t size, const std::string& where);

}  // namespace engine::detail
