// Views: the Tensor methods reshape, view, flatten, slice, select, transpose, expand, unsqueeze
// and squeeze (declared in engine/tensor.h).
//
// A view is a new (shape, strides, offset) over its base's storage, made with make_view: no data
// moves, and writing through a view (copy_, fill_) changes the base. Only reshape may copy, when
// no strides can describe the requested shape over the existing memory. Every view is
// differentiable; its backward maps the gradient back to the base's shape:
//   reshape, view, flatten, unsqueeze, squeeze -> reshape to the input shape
//   transpose                                  -> the same transpose
//   expand                                     -> sum over the broadcast dims (sum_to_shape)
//   slice, select                              -> zeros with the gradient copied into the slice
#include <algorithm>
#include <optional>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "engine/tensor.h"

namespace engine {
namespace {

// `requested` with its one allowed -1 replaced by the size that keeps `numel` elements.
Shape infer_shape(const Shape& requested, const Shape& input_shape, const char* op) {
  int64_t numel = shape_numel(input_shape);
  Shape shape = requested;
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      ENGINE_CHECK(inferred < 0, op, ": only one dimension can be -1, got ", shape_str(requested));
      inferred = static_cast<int64_t>(d);
    } else {
      ENGINE_CHECK(shape[d] >= 0, op, ": invalid size ", shape[d], " in ", shape_str(requested));
      known *= shape[d];
    }
  }
  if (inferred >= 0) {
    ENGINE_CHECK(known != 0 && numel % known == 0, op, ": cannot reshape ", shape_str(input_shape),
                 " (", numel, " elements) into ", shape_str(requested));
    shape[inferred] = numel / known;
  }
  ENGINE_CHECK(shape_numel(shape) == numel, op, ": cannot reshape ", shape_str(input_shape), " (",
               numel, " elements) into ", shape_str(requested), " (", shape_numel(shape),
               " elements)");
  return shape;
}

// Strides that make `new_shape` a view of memory laid out as (old_shape, old_strides), or
// nullopt when none exist and a copy is needed.
//
// The old dims split into chunks: maximal runs in which each dim steps over exactly the next
// one (stride[d] == stride[d + 1] * size[d + 1]), so a chunk addresses its elements like one
// contiguous array with the innermost stride. A view exists iff the new dims, taken in order,
// group into runs whose sizes multiply to the chunks' sizes; inside a run the new strides are
// row-major strides scaled by the chunk's innermost stride. Size-1 dims never break a chunk and
// fit anywhere (their stride is never used). Example: a transposed [3, 2] (strides [1, 3]) is
// two chunks of sizes 3 and 2, so it cannot be viewed as [6].
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& new_shape) {
  if (old_shape.empty() || shape_numel(old_shape) == 0) return contiguous_strides(new_shape);
  Shape new_strides(new_shape.size(), 0);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_stride = old_strides.back();  // stride of the current chunk's innermost dim
  int64_t chunk_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    chunk_numel *= old_shape[d];
    bool chunk_ends =
        d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != chunk_numel * chunk_stride);
    if (!chunk_ends) continue;
    // Give the chunk's elements to new dims, innermost first; size-1 new dims ride along.
    while (view_d >= 0 && (view_numel < chunk_numel || new_shape[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != chunk_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = old_strides[d - 1];
      chunk_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// Records `out`, a view of `input` holding the same elements in the same order, with the
// backward of every such view: the gradient reshaped back to the input's shape.
Tensor record_same_elements(const char* op, const Tensor& input, Tensor out) {
  if (!needs_tape({input})) return out;
  Shape input_shape = input.shape();
  return record(op, {input}, std::move(out),
                [input_shape](const Tensor& grad, const std::vector<bool>& needs) {
                  std::vector<Tensor> grads(1);
                  if (needs[0]) grads[0] = grad.reshape(input_shape);
                  return grads;
                });
}

}  // namespace

Tensor Tensor::reshape(const Shape& requested) const {
  Shape target = infer_shape(requested, shape(), "reshape");
  if (std::optional<Shape> view_layout = view_strides(shape(), strides(), target)) {
    return record_same_elements("reshape", *this, make_view(*this, target, *view_layout, offset()));
  }
  Tensor dense = contiguous();  // differentiable: the gradient flows back through the copy
  return record_same_elements("reshape", dense,
                              make_view(dense, target, contiguous_strides(target), dense.offset()));
}

Tensor Tensor::view(const Shape& requested) const {
  Shape target = infer_shape(requested, shape(), "view");
  std::optional<Shape> view_layout = view_strides(shape(), strides(), target);
  ENGINE_CHECK(view_layout.has_value(), "view: cannot view a tensor of shape ", shape_str(shape()),
               " and strides ", shape_str(strides()), " as ", shape_str(requested),
               " without copying its data (use reshape, or contiguous() first)");
  return record_same_elements("view", *this, make_view(*this, target, *view_layout, offset()));
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t start = detail::normalize_dim(start_dim, dim(), "flatten");
  int64_t end = detail::normalize_dim(end_dim, dim(), "flatten");
  ENGINE_CHECK(start <= end, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim,
               " for shape ", shape_str(shape()));
  Shape target(shape().begin(), shape().begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= shape()[d];
  target.push_back(merged);
  target.insert(target.end(), shape().begin() + end + 1, shape().end());
  return reshape(target);
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t end, int64_t step) const {
  int64_t d = detail::normalize_dim(axis, dim(), "slice");
  ENGINE_CHECK(step >= 1, "slice: step must be at least 1, got ", step, " (shape ",
               shape_str(shape()), ", dim ", axis, ")");
  // Python's rules: negative bounds count from the end, then both are clamped to [0, size].
  int64_t size = shape()[d];
  auto clamp_bound = [size](int64_t bound) {
    if (bound < 0) bound += size;
    return std::clamp<int64_t>(bound, 0, size);
  };
  int64_t first = clamp_bound(start);
  int64_t last = std::max(first, clamp_bound(end));
  int64_t count = (last - first + step - 1) / step;

  Shape out_shape = shape();
  Shape out_strides = strides();
  out_shape[d] = count;
  out_strides[d] *= step;
  Tensor out = make_view(*this, out_shape, out_strides, offset() + first * strides()[d]);
  if (!needs_tape({*this})) return out;
  Shape input_shape = shape();
  DType input_dtype = dtype();
  Device input_device = device();
  return record("slice", {*this}, std::move(out),
                [input_shape, input_dtype, input_device, d, first, last, step](
                    const Tensor& grad, const std::vector<bool>& needs) {
                  std::vector<Tensor> grads(1);
                  if (needs[0]) {
                    Tensor g = Tensor::zeros(input_shape, input_dtype, input_device);
                    g.slice(d, first, last, step).copy_(grad);
                    grads[0] = g;
                  }
                  return grads;
                });
}

Tensor Tensor::select(int64_t axis, int64_t index) const {
  int64_t d = detail::normalize_dim(axis, dim(), "select");
  int64_t size = shape()[d];
  int64_t i = index < 0 ? index + size : index;
  ENGINE_CHECK(i >= 0 && i < size, "select: index ", index, " is out of range for dim ", d,
               " of size ", size, " (shape ", shape_str(shape()), ")");
  Shape out_shape = shape();
  Shape out_strides = strides();
  out_shape.erase(out_shape.begin() + d);
  out_strides.erase(out_strides.begin() + d);
  Tensor out = make_view(*this, out_shape, out_strides, offset() + i * strides()[d]);
  if (!needs_tape({*this})) return out;
  Shape input_shape = shape();
  DType input_dtype = dtype();
  Device input_device = device();
  return record("select", {*this}, std::move(out),
                [input_shape, input_dtype, input_device, d, i](const Tensor& grad,
                                                               const std::vector<bool>& needs) {
                  std::vector<Tensor> grads(1);
                  if (needs[0]) {
                    Tensor g = Tensor::zeros(input_shape, input_dtype, input_device);
                    g.select(d, i).copy_(grad);
                    grads[0] = g;
                  }
                  return grads;
                });
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  int64_t a = detail::normalize_dim(dim0, dim(), "transpose");
  int64_t b = detail::normalize_dim(dim1, dim(), "transpose");
  Shape out_shape = shape();
  Shape out_strides = strides();
  std::swap(out_shape[a], out_shape[b]);
  std::swap(out_strides[a], out_strides[b]);
  Tensor out = make_view(*this, out_shape, out_strides, offset());
  if (!needs_tape({*this})) return out;
  return record("transpose", {*this}, std::move(out),
                [a, b](const Tensor& grad, const std::vector<bool>& needs) {
                  std::vector<Tensor> grads(1);
                  if (needs[0]) grads[0] = grad.transpose(a, b);
                  return grads;
                });
}

Tensor Tensor::expand(const Shape& target) const {
  int64_t ndim = static_cast<int64_t>(target.size());
  ENGINE_CHECK(ndim >= dim(), "expand: cannot expand ", shape_str(shape()), " to ",
               shape_str(target), ", which has fewer dimensions");
  // New dims are added in front (NumPy alignment from the right); -1 keeps an existing size.
  int64_t leading = ndim - dim();
  Shape out_shape(ndim);
  Shape out_strides(ndim);
  for (int64_t d = 0; d < ndim; ++d) {
    if (d < leading) {
      ENGINE_CHECK(target[d] >= 0, "expand: new leading dimension ", d, " of ", shape_str(target),
                   " needs an explicit size (-1 only keeps an existing one)");
      out_shape[d] = target[d];
      out_strides[d] = 0;
      continue;
    }
    int64_t old_size = shape()[d - leading];
    int64_t wanted = target[d] == -1 ? old_size : target[d];
    if (wanted == old_size) {
      out_shape[d] = old_size;
      out_strides[d] = strides()[d - leading];
    } else {
      ENGINE_CHECK(old_size == 1 && wanted >= 0, "expand: cannot expand ", shape_str(shape()),
                   " to ", shape_str(target), ": dimension ", d, " has size ", old_size,
                   " and only size-1 dimensions can grow");
      out_shape[d] = wanted;
      out_strides[d] = 0;  // every index along d reads the one stored element
    }
  }
  Tensor out = make_view(*this, out_shape, out_strides, offset());
  if (!needs_tape({*this})) return out;
  Shape input_shape = shape();
  return record("expand", {*this}, std::move(out),
                [input_shape](const Tensor& grad, const std::vector<bool>& needs) {
                  std::vector<Tensor> grads(1);
                  if (needs[0]) grads[0] = sum_to_shape(grad, input_shape);
                  return grads;
                });
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  int64_t d = detail::normalize_dim(axis, dim() + 1, "unsqueeze");
  Shape out_shape = shape();
  Shape out_strides = strides();
  // Any stride works for a size-1 dim; this one keeps a contiguous tensor contiguous.
  int64_t stride = d < dim() ? strides()[d] * shape()[d] : 1;
  out_shape.insert(out_shape.begin() + d, 1);
  out_strides.insert(out_strides.begin() + d, stride);
  return record_same_elements("unsqueeze", *this,
                              make_view(*this, out_shape, out_strides, offset()));
}

Tensor Tensor::squeeze(int64_t axis) const {
  if (dim() == 0) {
    detail::normalize_dim(axis, 1, "squeeze");  // a scalar accepts dim 0 or -1, like PyTorch
    return *this;
  }
  int64_t d = detail::normalize_dim(axis, dim(), "squeeze");
  if (shape()[d] != 1) return *this;  // PyTorch: squeezing a dim of size != 1 changes nothing
  Shape out_shape = shape();
  Shape out_strides = strides();
  out_shape.erase(out_shape.begin() + d);
  out_strides.erase(out_strides.begin() + d);
  return record_same_elements("squeeze", *this, make_view(*this, out_shape, out_strides, offset()));
}

}  // namespace engine
