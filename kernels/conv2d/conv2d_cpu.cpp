// conv2d on the CPU: the reference loops and the im2col + GEMM fast path.
//
// Math:     see conv2d.h (fprop, dgrad, wgrad; zero padding, stride, dilation).
// Layout:   x NCHW, w KCRS, y/dy NKPQ, all contiguous row-major.
// Parallel: reference: plain loops, one thread. Fast path: OpenMP over the images of the batch
//           (each thread owns one im2col buffer), wgrad over fixed chunks of images and its bias
//           gradient over output channels; every Eigen GEMM runs on one thread. Small problems
//           (< 2^20 FLOPs) and single images run on one thread. No result depends on the number
//           of threads (kernels/common/cpu_gemm.h).
// Cost:     each of fprop, dgrad and wgrad does 2 N K P Q C R S FLOPs (db adds N K P Q). The
//           unavoidable traffic is reading x (or dy) and w once and writing y (or dx, dw):
//           (N C H W + K C R S + N K P Q) sizeof(T) bytes. im2col adds a C R S x P Q buffer per
//           image, written once and read once per GEMM (it stays in cache for small images).
//
// im2col turns the convolution of one image into one matrix product:
//   col[(c R + r) S + s][p Q + q] = x[c, p sh - ph + r dh, q sw - pw + s dw]   (0 in the padding)
//   fprop:  Y_n [K, PQ]   = W [K, CRS] col_n [CRS, PQ]            (+ b[k] on row k)
//   dgrad:  dcol [CRS, PQ] = W^T dY_n,   then dx_n = col2im(dcol)  (col2im = adjoint of im2col)
//   wgrad:  dW [K, CRS]   = sum_n dY_n col_n^T   (computed as its transpose, sum_n col_n dY_n^T)
// A 1x1 kernel with stride 1 and no padding needs no im2col: col_n is x_n itself, [C, HW].
#include "kernels/common/instantiate.h"
#include "kernels/conv2d/conv2d.h"

#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "kernels/common/cpu_gemm.h"
#include "kernels/common/cpu_parallel.h"

namespace engine::kernels {

// ---------------------------------------------------------------------------------------------
// Reference
// ---------------------------------------------------------------------------------------------

template <typename T>
void conv2d_fprop_cpu(const Conv2dShape& shape, const T* x, const T* w, const T* bias, T* y) {
  const int64_t N = shape.N, C = shape.C, H = shape.H, W = shape.W;
  const int64_t K = shape.K, R = shape.R, S = shape.S;
  const int64_t P = shape.out_h(), Q = shape.out_w();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          T acc = bias != nullptr ? bias[k] : T(0);
          for (int64_t c = 0; c < C; ++c) {
            for (int64_t r = 0; r < R; ++r) {
              for (int64_t s = 0; s < S; ++s) {
                int64_t ih = p * shape.stride_h - shape.pad_h + r * shape.dilation_h;
                int64_t iw = q * shape.stride_w - shape.pad_w + s * shape.dilation_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;  // zero padding
                acc += x[((n * C + c) * H + ih) * W + iw] * w[((k * C + c) * R + r) * S + s];
              }
            }
          }
          y[((n * K + k) * P + p) * Q + q] = acc;
        }
      }
    }
  }
}

// The same loops as fprop with the multiply-add reversed: every product that fed y[n,k,p,q]
// sends dy[n,k,p,q] w[k,c,r,s] back to the x element it read.
template <typename T>
void conv2d_dgrad_cpu(const Conv2dShape& shape, const T* dy, const T* w, T* dx) {
  const int64_t N = shape.N, C = shape.C, H = shape.H, W = shape.W;
  const int64_t K = shape.K, R = shape.R, S = shape.S;
  const int64_t P = shape.out_h(), Q = shape.out_w();
  std::fill(dx, dx + N * C * H * W, T(0));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          const T g = dy[((n * K + k) * P + p) * Q + q];
          for (int64_t c = 0; c < C; ++c) {
            for (int64_t r = 0; r < R; ++r) {
              for (int64_t s = 0; s < S; ++s) {
                int64_t ih = p * shape.stride_h - shape.pad_h + r * shape.dilation_h;
                int64_t iw = q * shape.stride_w - shape.pad_w + s * shape.dilation_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                dx[((n * C + c) * H + ih) * W + iw] += g * w[((k * C + c) * R + r) * S + s];
              }
            }
          }
        }
      }
    }
  }
}

template <typename T>
void conv2d_wgrad_cpu(const Conv2dShape& shape, const T* dy, const T* x, T* dw, T* db) {
  const int64_t N = shape.N, C = shape.C, H = shape.H, W = shape.W;
  const int64_t K = shape.K, R = shape.R, S = shape.S;
  const int64_t P = shape.out_h(), Q = shape.out_w();
  if (dw != nullptr) {
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t r = 0; r < R; ++r) {
          for (int64_t s = 0; s < S; ++s) {
            T acc = T(0);
            for (int64_t n = 0; n < N; ++n) {
              for (int64_t p = 0; p < P; ++p) {
                for (int64_t q = 0; q < Q; ++q) {
                  int64_t ih = p * shape.stride_h - shape.pad_h + r * shape.dilation_h;
                  int64_t iw = q * shape.stride_w - shape.pad_w + s * shape.dilation_w;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  acc += dy[((n * K + k) * P + p) * Q + q] * x[((n * C + c) * H + ih) * W + iw];
                }
              }
            }
            dw[((k * C + c) * R + r) * S + s] = acc;
          }
        }
      }
    }
  }
  if (db != nullptr) {
    for (int64_t k = 0; k < K; ++k) {
      T acc = T(0);
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t pq = 0; pq < P * Q; ++pq) acc += dy[(n * K + k) * P * Q + pq];
      }
      db[k] = acc;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Fast path: im2col / col2im + Eigen GEMM
// ---------------------------------------------------------------------------------------------

namespace {

template <typename T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatrixMap = Eigen::Map<RowMajorMatrix<T>>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const RowMajorMatrix<T>>;

// Parallelize over the batch: more than one image and enough work.
bool parallel_over_batch(const Conv2dShape& shape) {
  const int64_t flops =
      2 * shape.N * shape.K * shape.C * shape.R * shape.S * shape.out_h() * shape.out_w();
  return shape.N > 1 && flops >= kMinParallelWork;
}

// wgrad sums the batch in chunks of consecutive images, each into its own K x CRS partial, then
// adds the partials in chunk order. The chunks depend only on the shape (never on the number of
// threads), so neither does dW: at most 16 chunks (enough for the cores of a workstation), fewer
// when the partials would exceed 2^24 elements together (64 MiB in f32; a ResNet layer4 conv
// with K x CRS = 512 x 4608 gets 7).
constexpr int64_t kWgradMaxChunks = 16;
constexpr int64_t kWgradMaxPartialElements = int64_t(1) << 24;

int64_t wgrad_chunk_count(const Conv2dShape& shape) {
  const int64_t partial_size = shape.K * shape.C * shape.R * shape.S;
  const int64_t by_memory = std::max<int64_t>(1, kWgradMaxPartialElements / partial_size);
  return std::max<int64_t>(1, std::min({shape.N, kWgradMaxChunks, by_memory}));
}

// True when im2col is the identity: col_n = x_n viewed as [C, H W].
bool is_pointwise(const Conv2dShape& shape) {
  return shape.R == 1 && shape.S == 1 && shape.stride_h == 1 && shape.stride_w == 1 &&
         shape.pad_h == 0 && shape.pad_w == 0;
}

// Output columns q whose input column iw = q stride_w - pad_w + s dilation_w lies inside the
// image, as the half-open range [begin, end) (empty when begin >= end), and that offset
// (iw = q stride_w + offset). One per kernel column s, computed once per im2col / col2im call:
// it keeps the copy loops free of bounds tests and of the two divisions it costs.
struct ColumnRange {
  int64_t begin, end, offset;
};

std::vector<ColumnRange> valid_columns(const Conv2dShape& shape) {
  std::vector<ColumnRange> ranges(static_cast<size_t>(shape.S));
  const int64_t stride = shape.stride_w, Q = shape.out_w();
  for (int64_t s = 0; s < shape.S; ++s) {
    const int64_t offset = s * shape.dilation_w - shape.pad_w;
    // smallest q with q stride + offset >= 0, and one past the largest with it <= W - 1
    const int64_t begin = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    const int64_t last = shape.W - 1 - offset;  // q stride <= last
    const int64_t end = last < 0 ? 0 : last / stride + 1;
    ranges[static_cast<size_t>(s)] = {std::min(begin, Q), std::min(end, Q), offset};
  }
  return ranges;
}

// col [CRS, PQ] from one image x [C, H, W]. With stride 1 an in-image run of a col row is a
// contiguous run of an image row, copied as one block.
template <typename T>
void im2col(const Conv2dShape& shape, const std::vector<ColumnRange>& columns, const T* image,
            T* col) {
  const int64_t H = shape.H, W = shape.W, P = shape.out_h(), Q = shape.out_w();
  const int64_t stride = shape.stride_w;
  for (int64_t c = 0; c < shape.C; ++c) {
    for (int64_t r = 0; r < shape.R; ++r) {
      for (int64_t s = 0; s < shape.S; ++s) {
        T* row = col + ((c * shape.R + r) * shape.S + s) * P * Q;
        const ColumnRange valid = columns[static_cast<size_t>(s)];
        for (int64_t p = 0; p < P; ++p) {
          const int64_t ih = p * shape.stride_h - shape.pad_h + r * shape.dilation_h;
          T* out = row + p * Q;
          if (ih < 0 || ih >= H || valid.begin >= valid.end) {
            std::fill(out, out + Q, T(0));
            continue;
          }
          const T* in = image + (c * H + ih) * W;
          std::fill(out, out + valid.begin, T(0));
          if (stride == 1) {
            std::copy(in + valid.begin + valid.offset, in + valid.end + valid.offset,
                      out + valid.begin);
          } else {
            for (int64_t q = valid.begin; q < valid.end; ++q)
              out[q] = in[q * stride + valid.offset];
          }
          std::fill(out + valid.end, out + Q, T(0));
        }
      }
    }
  }
}

// The adjoint of im2col: image[c, ih, iw] += every col entry that was read from it. `image` must
// be zeroed by the caller.
template <typename T>
void col2im(const Conv2dShape& shape, const std::vector<ColumnRange>& columns, const T* col,
            T* image) {
  const int64_t H = shape.H, W = shape.W, P = shape.out_h(), Q = shape.out_w();
  const int64_t stride = shape.stride_w;
  for (int64_t c = 0; c < shape.C; ++c) {
    for (int64_t r = 0; r < shape.R; ++r) {
      for (int64_t s = 0; s < shape.S; ++s) {
        const T* row = col + ((c * shape.R + r) * shape.S + s) * P * Q;
        const ColumnRange valid = columns[static_cast<size_t>(s)];
        for (int64_t p = 0; p < P; ++p) {
          const int64_t ih = p * shape.stride_h - shape.pad_h + r * shape.dilation_h;
          if (ih < 0 || ih >= H) continue;
          const T* in = row + p * Q;
          T* out = image + (c * H + ih) * W;
          for (int64_t q = valid.begin; q < valid.end; ++q) out[q * stride + valid.offset] += in[q];
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void conv2d_fprop_fast_cpu(const Conv2dShape& shape, const T* x, const T* w, const T* bias, T* y) {
  const int64_t N = shape.N, K = shape.K;
  const int64_t CHW = shape.C * shape.H * shape.W;
  const int64_t CRS = shape.C * shape.R * shape.S;
  const int64_t PQ = shape.out_h() * shape.out_w();
  const bool pointwise = is_pointwise(shape);
  const std::vector<ColumnRange> columns = valid_columns(shape);
  ConstMatrixMap<T> weight(w, K, CRS);
  use_fixed_gemm_blocking();
#pragma omp parallel if (parallel_over_batch(shape))
  {
    std::vector<T> col_buffer(pointwise ? 0 : CRS * PQ);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const T* col = x + n * CHW;
      if (!pointwise) {
        im2col(shape, columns, x + n * CHW, col_buffer.data());
        col = col_buffer.data();
      }
      MatrixMap<T> out(y + n * K * PQ, K, PQ);
      out.noalias() = weight * ConstMatrixMap<T>(col, CRS, PQ);
      if (bias != nullptr) {
        for (int64_t k = 0; k < K; ++k) out.row(k).array() += bias[k];
      }
    }
  }
}

template <typename T>
void conv2d_dgrad_fast_cpu(const Conv2dShape& shape, const T* dy, const T* w, T* dx) {
  const int64_t N = shape.N, K = shape.K;
  const int64_t CHW = shape.C * shape.H * shape.W;
  const int64_t CRS = shape.C * shape.R * shape.S;
  const int64_t PQ = shape.out_h() * shape.out_w();
  const bool pointwise = is_pointwise(shape);
  const std::vector<ColumnRange> columns = valid_columns(shape);
  ConstMatrixMap<T> weight(w, K, CRS);
  use_fixed_gemm_blocking();
#pragma omp parallel if (parallel_over_batch(shape))
  {
    std::vector<T> col_buffer(pointwise ? 0 : CRS * PQ);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      ConstMatrixMap<T> grad_out(dy + n * K * PQ, K, PQ);
      if (pointwise) {
        MatrixMap<T>(dx + n * CHW, CRS, PQ).noalias() = weight.transpose() * grad_out;
      } else {
        MatrixMap<T>(col_buffer.data(), CRS, PQ).noalias() = weight.transpose() * grad_out;
        std::fill(dx + n * CHW, dx + (n + 1) * CHW, T(0));
        col2im(shape, columns, col_buffer.data(), dx + n * CHW);
      }
    }
  }
}

// Each chunk of images (wgrad_chunk_count) sums col_n dY_n^T = (dY_n col_n^T)^T over its images,
// in order, into its own CRS x K partial; the partials are then added in chunk order and
// transposed into dW. The transposed product is the faster one here: for conv2 of C2F2
// ([800 x 196] x [196 x 64] per image) Eigen runs it about 9 % faster than [64 x 196] x
// [196 x 800] (35.5 against 39 ms for 256 images on a Zen 4 host, 2 threads, interleaved runs;
// docs/benchmarks/notes-2026-11.md). Memory: chunks x K x CRS elements, small next to the
// activations.
// db splits the output channels across the threads; each channel's sum runs over the images and
// then the positions in the same order whatever the number of threads (vectorized: one partial
// sum per vector lane within a plane).
template <typename T>
void conv2d_wgrad_fast_cpu(const Conv2dShape& shape, const T* dy, const T* x, T* dw, T* db) {
  const int64_t N = shape.N, K = shape.K;
  const int64_t CHW = shape.C * shape.H * shape.W;
  const int64_t CRS = shape.C * shape.R * shape.S;
  const int64_t PQ = shape.out_h() * shape.out_w();
  const bool parallel = parallel_over_batch(shape);
  if (dw != nullptr) {
    const bool pointwise = is_pointwise(shape);
    const std::vector<ColumnRange> columns = valid_columns(shape);
    const int64_t chunks = wgrad_chunk_count(shape);
    std::vector<T> partials(static_cast<size_t>(chunks * CRS * K), T(0));
    use_fixed_gemm_blocking();
#pragma omp parallel if (parallel)
    {
      std::vector<T> col_buffer(pointwise ? 0 : CRS * PQ);
#pragma omp for schedule(static)
      for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        MatrixMap<T> partial(partials.data() + chunk * CRS * K, CRS, K);
        for (int64_t n = chunk * N / chunks; n < (chunk + 1) * N / chunks; ++n) {
          const T* col = x + n * CHW;
          if (!pointwise) {
            im2col(shape, columns, x + n * CHW, col_buffer.data());
            col = col_buffer.data();
          }
          partial.noalias() += ConstMatrixMap<T>(col, CRS, PQ) *
                               ConstMatrixMap<T>(dy + n * K * PQ, K, PQ).transpose();
        }
      }
    }
    // dW[k, e] = partial_0[e, k] + partial_1[e, k] + ..., always in chunk order.
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t e = 0; e < CRS; ++e) {
      for (int64_t k = 0; k < K; ++k) {
        T total = partials[e * K + k];
        for (int64_t chunk = 1; chunk < chunks; ++chunk)
          total += partials[(chunk * CRS + e) * K + k];
        dw[k * CRS + e] = total;
      }
    }
  }
  if (db != nullptr) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t k = 0; k < K; ++k) {
      T acc = T(0);
      for (int64_t n = 0; n < N; ++n) {
        const T* plane = dy + (n * K + k) * PQ;
        T plane_sum = T(0);
#pragma omp simd reduction(+ : plane_sum)
        for (int64_t pq = 0; pq < PQ; ++pq) plane_sum += plane[pq];
        acc += plane_sum;
      }
      db[k] = acc;
    }
  }
}

ENGINE_INSTANTIATE_FLOATING(conv2d_fprop_cpu);
ENGINE_INSTANTIATE_FLOATING(conv2d_dgrad_cpu);
ENGINE_INSTANTIATE_FLOATING(conv2d_wgrad_cpu);
ENGINE_INSTANTIATE_FLOATING(conv2d_fprop_fast_cpu);
ENGINE_INSTANTIATE_FLOATING(conv2d_dgrad_fast_cpu);
ENGINE_INSTANTIATE_FLOATING(conv2d_wgrad_fast_cpu);

}  // namespace engine::kernels
