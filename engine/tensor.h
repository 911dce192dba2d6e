// Tensor: a handle to (storage, offset, shape, strides, dtype) plus autograd bookkeeping.
//
// Copying a Tensor copies the handle, not the data (like PyTorch): `Tensor b = a;` aliases.
// Views (reshape of a contiguous tensor, slice, transpose, expand) share storage; contiguous(),
// clone() and to() copy. Every op accepts any strides and makes its inputs contiguous first.
//
// Autograd fields live in the impl: `requires_grad`, the accumulated `.grad` of a leaf, and
// `grad_fn`, the tape node that produced a non-leaf (see autograd.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/storage.h"
#include "kernels/common/check.h"

namespace engine {

using Shape = std::vector<int64_t>;

struct Node;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype = DType::F32;

  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // leaves: accumulated by backward()
  std::shared_ptr<Node> grad_fn;     // non-leaves: the node that made this tensor
};

std::string shape_str(const Shape& shape);  // "[2, 3, 4]"
int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;  // undefined: !defined()
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (all contiguous) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Device device = Device::cpu());
  // From host values (converted to dtype); values.size() must equal the shape's element count.
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                            DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor from_indices(const std::vector<int64_t>& values, const Shape& shape,
                             Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::F32, Device device = Device::cpu());
  // 0, 1, ..., n-1 as I64.
  static Tensor arange(int64_t n, Device device = Device::cpu());

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return checked().shape; }
  const Shape& strides() const { return checked().strides; }
  int64_t offset() const { return checked().offset; }
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape()); }
  DType dtype() const { return checked().dtype; }
  Device device() const { return checked().storage->device(); }
  bool is_contiguous() const;
  std::string str() const;  // "f32[2, 3] on cpu"

  // ---- data access (pointer to the first element; device memory for CUDA tensors) ----
  template <typename T>
  T* data() const {
    ENGINE_CHECK(dtype() == dtype_of<T>(), "tensor data<", dtype_name(dtype_of<T>()),
                 ">() on a tensor of dtype ", dtype_name(dtype()));
    return static_cast<T*>(checked().storage->data()) + checked().offset;
  }
  void* raw_data() const;
  // Host copies. to_vector converts any dtype to double; to_indices requires I64.
  std::vector<double> to_vector() const;
  std::vector<int64_t> to_indices() const;
  double item() const;  // the value of a one-element tensor

  // ---- copies and moves (never autograd-transparent across devices silently) ----
  Tensor to(Device device) const;  // differentiable
  Tensor to(DType dtype) const;    // differentiable between f32 and f64
  Tensor contiguous() const;       // differentiable; returns *this if already contiguous
  Tensor clone() const;            // differentiable deep copy
  Tensor detach() const;           // same storage, no autograd history, requires_grad false
  // Copies `source` (same shape; any device/dtype) into this tensor's memory, in place. Not
  // recorded by autograd: used by optimizers and load_state_dict under NoGradGuard. These three
  // count as writes in place (Storage::version): a backward that saved this memory refuses to run.
  void copy_(const Tensor& source);
  void fill_(double value);
  void zero_() { fill_(0.0); }
  // For code that writes into this tensor's existing memory through data<T>() (optimizers).
  void mark_written_in_place() const { checked().storage->bump_version(); }
  uint64_t version() const { return checked().storage->version(); }

  // ---- views (differentiable; defined in engine/ops/view.cpp) ----
  Tensor reshape(const Shape& shape) const;  // view when possible, else copy; one -1 allowed
  Tensor view(const Shape& shape) const;     // view only; error if the strides do not allow it
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // slice of width 1 with `dim` removed
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor expand(const Shape& shape) const;  // broadcast size-1 dims (stride 0)
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;

  // ---- autograd ----
  bool requires_grad() const { return checked().requires_grad; }
  // Only leaves may be switched; a float dtype is required to switch it on.
  Tensor& set_requires_grad(bool requires_grad = true);
  bool is_leaf() const { return checked().grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return checked().grad_fn; }
  Tensor grad() const;  // undefined until backward() reaches this leaf
  void set_grad(const Tensor& grad);
  void reset_grad();  // back to undefined (what optimizers' zero_grad does)

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same_as(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  const TensorImpl& checked() const {
    ENGINE_CHECK(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

// A new tensor sharing `base`'s storage with the given geometry (no autograd history).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

}  // namespace engine
