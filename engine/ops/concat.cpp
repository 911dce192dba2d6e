// concat: joins tensors along one dimension (kernels/concat). The backward hands each input the
// slice of the gradient that its values went to.
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops/op_utils.h"
#include "engine/tensor.h"
#include "kernels/concat/concat.h"

namespace engine {
namespace {

// The data pointers of `tensors` as a host array (device pointers for CUDA tensors).
template <typename T>
std::vector<const T*> data_pointers(const std::vector<Tensor>& tensors) {
  std::vector<const T*> pointers;
  for (const Tensor& t : tensors) pointers.push_back(t.data<T>());
  return pointers;
}

}  // namespace

Tensor concat(const std::vector<Tensor>& tensors, int64_t dim) {
  ENGINE_CHECK(!tensors.empty(), "concat: needs at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string name = "tensors[" + std::to_string(i) + "]";
    detail::check_defined(tensors[i], "concat", name.c_str());
  }
  const Tensor& first = tensors[0];
  ENGINE_CHECK(first.dim() > 0, "concat: cannot concatenate 0-dimensional tensors");
  int64_t d = detail::normalize_dim(dim, first.dim(), "concat");
  Shape out_shape = first.shape();
  out_shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    std::string name = "tensors[" + std::to_string(i) + "]";
    detail::check_same_kind(first, t, "concat", name.c_str());
    bool same_shape_elsewhere = t.dim() == first.dim();
    for (int64_t k = 0; same_shape_elsewhere && k < first.dim(); ++k) {
      if (k != d && t.size(k) != first.size(k)) same_shape_elsewhere = false;
    }
    ENGINE_CHECK(same_shape_elsewhere, "concat: tensors[0] is ", shape_str(first.shape()), " and ",
                 name, " is ", shape_str(t.shape()), ": shapes must match except along dim ", d);
    out_shape[d] += t.size(d);
  }

  // Each input is `outer` blocks of width size_i(d) * inner (layout in kernels/concat/concat.h).
  int64_t outer = 1;
  for (int64_t k = 0; k < d; ++k) outer *= first.size(k);
  int64_t inner = 1;
  for (int64_t k = d + 1; k < first.dim(); ++k) inner *= first.size(k);
  std::vector<Tensor> dense;  // detached: concat records its own node on the originals
  std::vector<int64_t> widths;
  for (const Tensor& t : tensors) {
    dense.push_back(t.detach().contiguous());
    widths.push_back(t.size(d) * inner);
  }
  Tensor out = Tensor::empty(out_shape, first.dtype(), first.device());
  const int64_t count = static_cast<int64_t>(dense.size());
  auto run = [&](auto zero) {
    using T = decltype(zero);
    std::vector<const T*> inputs = data_pointers<T>(dense);
    kernels::concat_cpu<T>(count, inputs.data(), widths.data(), outer, out.data<T>());
  };
  if (first.device().is_cuda() && first.dtype() == DType::I64) {
    kernels::concat_cuda(count, data_pointers<int64_t>(dense).data(), widths.data(), outer,
                         out.data<int64_t>());
  } else if (first.device().is_cuda()) {
    kernels::concat_cuda(count, data_pointers<float>(dense).data(), widths.data(), outer,
                         out.data<float>());
  } else if (first.dtype() == DType::I64) {
    run(int64_t{});  // labels and indices concatenate too (never differentiated)
  } else {
    detail::dispatch_floating(first.dtype(), "concat", run);
  }

  if (!needs_tape(tensors)) return out;
  std::vector<int64_t> sizes;
  for (const Tensor& t : tensors) sizes.push_back(t.size(d));
  return record("concat", tensors, out,
                [d, sizes](const Tensor& grad, const std::vector<bool>& needs) {
                  std::vector<Tensor> grads(sizes.size());
                  int64_t start = 0;
                  for (size_t i = 0; i < sizes.size(); ++i) {
                    if (needs[i]) grads[i] = grad.slice(d, start, start + sizes[i]).contiguous();
                    start += sizes[i];
                  }
                  return grads;
                });
}

}  // namespace engine
