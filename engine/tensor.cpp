// Tensor factories, data movement and autograd bookkeeping. View ops are in engine/ops/view.cpp.
#include "engine/tensor.h"

#include <cstring>
#include <limits>
#include <sstream>

#include "engine/autograd.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/common/layout.h"
#include "kernels/copy/copy.h"
#include "kernels/fill/fill.h"

namespace engine {

// ---- shapes ----------------------------------------------------------------------------------

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

namespace {

kernels::StridedLayout layout_of(const Shape& shape, const Shape& strides) {
  ENGINE_CHECK(shape.size() <= static_cast<size_t>(kernels::kMaxDims), "tensors of rank ",
               shape.size(), " exceed the supported maximum of ", kernels::kMaxDims);
  kernels::StridedLayout layout;
  layout.ndim = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    layout.shape[d] = shape[d];
    layout.strides[d] = strides[d];
  }
  return layout;
}

// Also refuses a shape whose byte count does not fit in int64 (at 8 bytes an element, the widest
// dtype): numel * dtype_size would wrap, the allocation come out tiny, and the first fill write
// past it. Each partial product is checked before it is formed, so nothing overflows on the way.
void check_shape(const Shape& shape) {
  constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 8;
  int64_t n = 1;
  for (int64_t s : shape) {
    ENGINE_CHECK(s >= 0, "negative dimension in shape ", shape_str(shape));
    ENGINE_CHECK(s == 0 || n <= kMaxElements / s, "shape ", shape_str(shape),
                 " has more elements than memory can address");
    n *= s;
  }
}

}  // namespace

// ---- factories -------------------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check_shape(shape);
  if (device.is_cuda()) {
    // Kernels, cuBLAS and cuDNN all run on the current device, which is never changed: another
    // index would silently compute on GPU 0.
    ENGINE_CHECK(device.index == 0, "cannot allocate a tensor on ", device.str(),
                 ": the engine runs on one GPU, cuda:0 (pick it with CUDA_VISIBLE_DEVICES)");
    ENGINE_CHECK(cuda_device_count() > 0, "cannot allocate a tensor on ", device.str(),
                 ": no CUDA device is available");
    ENGINE_CHECK(dtype != DType::F64, "f64 tensors are CPU-only (the GPU path is f32)");
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype,
                           Device device) {
  check_shape(shape);
  ENGINE_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
               "from_vector: ", values.size(), " values do not fill shape ", shape_str(shape));
  Tensor host = empty(shape, dtype, Device::cpu());
  switch (dtype) {
    case DType::F32:
      kernels::convert_cpu(values.data(), host.numel(), host.data<float>());
      break;
    case DType::F64:
      std::memcpy(host.data<double>(), values.data(), values.size() * 8);
      break;
    case DType::I64:
      kernels::convert_cpu(values.data(), host.numel(), host.data<int64_t>());
      break;
  }
  return device.is_cpu() ? host : host.to(device);
}

Tensor Tensor::from_indices(const std::vector<int64_t>& values, const Shape& shape, Device device) {
  check_shape(shape);
  ENGINE_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
               "from_indices: ", values.size(), " values do not fill shape ", shape_str(shape));
  Tensor host = empty(shape, DType::I64, Device::cpu());
  if (!values.empty()) std::memcpy(host.data<int64_t>(), values.data(), values.size() * 8);
  return device.is_cpu() ? host : host.to(device);
}

Tensor Tensor::scalar(double value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}

Tensor Tensor::arange(int64_t n, Device device) {
  std::vector<int64_t> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = i;
  return from_indices(values, {n}, device);
}

// ---- metadata --------------------------------------------------------------------------------

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  ENGINE_CHECK(d >= -n && d < n, "dimension ", d, " out of range for a tensor of shape ",
               shape_str(shape()));
  return shape()[d < 0 ? d + n : d];
}

bool Tensor::is_contiguous() const {
  const Shape& sh = shape();
  const Shape& st = strides();
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(sh.size()) - 1; d >= 0; --d) {
    if (sh[d] == 1) continue;  // the stride of a size-1 dim never matters
    if (st[d] != expected) return false;
    expected *= sh[d];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined tensor";
  return std::string(dtype_name(dtype())) + shape_str(shape()) + " on " + device().str();
}

void* Tensor::raw_data() const {
  return static_cast<char*>(checked().storage->data()) + checked().offset * dtype_size(dtype());
}

std::vector<double> Tensor::to_vector() const {
  Tensor host = contiguous();
  if (host.device().is_cuda()) host = host.to(Device::cpu());
  std::vector<double> values(static_cast<size_t>(host.numel()));
  switch (host.dtype()) {
    case DType::F32:
      kernels::convert_cpu(host.data<float>(), host.numel(), values.data());
      break;
    case DType::F64:
      if (!values.empty()) std::memcpy(values.data(), host.data<double>(), values.size() * 8);
      break;
    case DType::I64:
      kernels::convert_cpu(host.data<int64_t>(), host.numel(), values.data());
      break;
  }
  return values;
}

std::vector<int64_t> Tensor::to_indices() const {
  ENGINE_CHECK(dtype() == DType::I64, "to_indices() on a ", dtype_name(dtype()),
               " tensor (needs i64)");
  Tensor host = contiguous();
  if (host.device().is_cuda()) host = host.to(Device::cpu());
  std::vector<int64_t> values(static_cast<size_t>(host.numel()));
  if (!values.empty()) std::memcpy(values.data(), host.data<int64_t>(), values.size() * 8);
  return values;
}

double Tensor::item() const {
  ENGINE_CHECK(numel() == 1, "item() needs a one-element tensor, got shape ", shape_str(shape()));
  return to_vector()[0];
}

// ---- copies ----------------------------------------------------------------------------------

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = empty(shape(), dtype(), device());
  {
    kernels::StridedLayout layout = layout_of(shape(), strides());
    if (device().is_cuda()) {
      ENGINE_CHECK(dtype() == DType::F32, "contiguous(): strided ", dtype_name(dtype()),
                   " copies on CUDA are not supported");
      kernels::copy_strided_cuda(data<float>(), layout, out.data<float>());
    } else if (dtype() == DType::F32) {
      kernels::copy_strided_cpu(data<float>(), layout, out.data<float>());
    } else if (dtype() == DType::F64) {
      kernels::copy_strided_cpu(data<double>(), layout, out.data<double>());
    } else {
      kernels::copy_strided_cpu(data<int64_t>(), layout, out.data<int64_t>());
    }
  }
  if (needs_tape({*this})) {
    return record("contiguous", {*this}, out,
                  [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; });
  }
  return out;
}

Tensor Tensor::clone() const {
  Tensor source = detach();
  Tensor out = empty(shape(), dtype(), device());
  out.copy_(source);
  if (needs_tape({*this})) {
    return record("clone", {*this}, out,
                  [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; });
  }
  return out;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = checked().storage;
  impl->offset = checked().offset;
  impl->shape = checked().shape;
  impl->strides = checked().strides;
  impl->dtype = checked().dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor source = contiguous().detach();
  Tensor out = empty(shape(), dtype(), target);
  std::size_t bytes = static_cast<std::size_t>(numel()) * dtype_size(dtype());
  if (bytes > 0) {
    if (source.device().is_cpu()) {
      kernels::cuda_memcpy_host_to_device(out.raw_data(), source.raw_data(), bytes);
    } else if (target.is_cpu()) {
      kernels::cuda_memcpy_device_to_host(out.raw_data(), source.raw_data(), bytes);
    } else {
      kernels::cuda_memcpy_device_to_device(out.raw_data(), source.raw_data(), bytes);
    }
  }
  if (needs_tape({*this})) {
    Device back = device();
    return record("to_device", {*this}, out, [back](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{g.to(back)};
    });
  }
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  ENGINE_CHECK(device().is_cpu(), "dtype conversion on ", device().str(),
               " is not supported (move to the CPU first)");
  Tensor source = contiguous();
  Tensor out = empty(shape(), target, device());
  int64_t n = numel();
  DType from = dtype();
  if (from == DType::F32 && target == DType::F64) {
    kernels::convert_cpu(source.data<float>(), n, out.data<double>());
  } else if (from == DType::F64 && target == DType::F32) {
    kernels::convert_cpu(source.data<double>(), n, out.data<float>());
  } else if (from == DType::I64 && target == DType::F32) {
    kernels::convert_cpu(source.data<int64_t>(), n, out.data<float>());
  } else if (from == DType::I64 && target == DType::F64) {
    kernels::convert_cpu(source.data<int64_t>(), n, out.data<double>());
  } else if (from == DType::F32) {
    kernels::convert_cpu(source.data<float>(), n, out.data<int64_t>());
  } else {
    kernels::convert_cpu(source.data<double>(), n, out.data<int64_t>());
  }
  if (is_floating(from) && is_floating(target) && needs_tape({*this})) {
    return record("to_dtype", {*this}, out, [from](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{g.to(from)};
    });
  }
  return out;
}

void Tensor::copy_(const Tensor& source) {
  ENGINE_CHECK(source.shape() == shape(), "copy_: source shape ", shape_str(source.shape()),
               " differs from destination shape ", shape_str(shape()));
  mark_written_in_place();
  Tensor src = source.detach();
  if (src.device() != device()) src = src.to(device());
  if (src.dtype() != dtype()) src = src.to(Device::cpu()).to(dtype()).to(device());
  // A source in this tensor's own storage (x.transpose(0, 1).copy_(x)) would be read while the
  // strided copy below overwrites it: copy it out first. On the CPU the contiguous path's memmove
  // handles overlap by itself; cudaMemcpy's areas "may not overlap" (CUDA runtime API), so on a
  // GPU any source in the same storage is copied out too.
  const bool overlaps =
      src.impl()->storage == impl_->storage && (!is_contiguous() || device().is_cuda());
  src = overlaps ? src.clone() : src.contiguous();
  if (numel() == 0) return;
  if (is_contiguous()) {
    std::size_t bytes = static_cast<std::size_t>(numel()) * dtype_size(dtype());
    if (device().is_cpu()) {
      std::memmove(raw_data(), src.raw_data(), bytes);
    } else {
      kernels::cuda_memcpy_device_to_device(raw_data(), src.raw_data(), bytes);
    }
    return;
  }
  kernels::StridedLayout layout = layout_of(shape(), strides());
  for (int d = 0; d < layout.ndim; ++d) {
    ENGINE_CHECK(layout.strides[d] != 0 || layout.shape[d] == 1,
                 "copy_ into an expanded (stride 0) tensor is not allowed");
  }
  if (device().is_cuda()) {
    ENGINE_CHECK(dtype() == DType::F32, "copy_ into a strided ", dtype_name(dtype()),
                 " CUDA tensor is not supported");
    kernels::copy_into_strided_cuda(src.data<float>(), data<float>(), layout);
  } else if (dtype() == DType::F32) {
    kernels::copy_into_strided_cpu(src.data<float>(), data<float>(), layout);
  } else if (dtype() == DType::F64) {
    kernels::copy_into_strided_cpu(src.data<double>(), data<double>(), layout);
  } else {
    kernels::copy_into_strided_cpu(src.data<int64_t>(), data<int64_t>(), layout);
  }
}

void Tensor::fill_(double value) {
  mark_written_in_place();
  if (!is_contiguous()) {
    copy_(full(shape(), value, dtype(), device()));
    return;
  }
  int64_t n = numel();
  if (device().is_cuda()) {
    ENGINE_CHECK(dtype() == DType::F32, "fill_ of a ", dtype_name(dtype()),
                 " CUDA tensor is not supported");
    kernels::fill_cuda(n, static_cast<float>(value), data<float>());
  } else if (dtype() == DType::F32) {
    kernels::fill_cpu(n, static_cast<float>(value), data<float>());
  } else if (dtype() == DType::F64) {
    kernels::fill_cpu(n, value, data<double>());
  } else {
    kernels::fill_cpu(n, static_cast<int64_t>(value), data<int64_t>());
  }
}

// ---- autograd bookkeeping ----------------------------------------------------------------------

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  ENGINE_CHECK(is_leaf(), "set_requires_grad on a non-leaf tensor (produced by '", grad_fn()->op,
               "'); call detach() first");
  ENGINE_CHECK(!requires_grad || is_floating(dtype()),
               "only f32/f64 tensors can require grad, got ", dtype_name(dtype()));
  impl_->requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const { return Tensor(checked().grad); }

void Tensor::set_grad(const Tensor& grad) {
  checked();
  if (grad.defined()) {
    ENGINE_CHECK(grad.shape() == shape(), "set_grad: gradient shape ", shape_str(grad.shape()),
                 " differs from tensor shape ", shape_str(shape()));
    ENGINE_CHECK(grad.dtype() == dtype() && grad.device() == device(), "set_grad: gradient is ",
                 dtype_name(grad.dtype()), " on ", grad.device().str(), ", the tensor ",
                 dtype_name(dtype()), " on ", device().str());
  }
  impl_->grad = grad.impl_ptr();
}

void Tensor::reset_grad() {
  checked();
  impl_->grad.reset();
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->offset = offset;
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

}  // namespace engine
