// Fused SGD and Adam/AdamW over many parameter tensors ("multi-tensor apply"), CUDA.
// Math:      optim.h (PyTorch's torch.optim.SGD / Adam / AdamW), per element in f32, the same
//            operations in the same order as optim_cpu.cpp; the per-tensor Adam bias corrections
//            lr / (1 - beta1^t) and sqrt(1 - beta2^t) are computed on the host in double.
//            nvcc contracts a * b + c into one fused multiply-add (one rounding instead of two),
//            so a GPU step agrees with the CPU's to f32 rounding, not bit for bit (the tests
//            compare with a tolerance; the CUDA emulator is built with -ffp-contract=off and the
//            CPU reference with GCC's default contraction, so neither is nvcc's rounding).
// Layout:    each tensor contiguous f32 (param, grad and its state buffers, n elements).
// Parallel:  one launch updates up to kSgdTensorsPerLaunch / kAdamTensorsPerLaunch tensors. The
//            table of the launch — per tensor its pointers, size, scalars and its first block —
//            travels by value in the kernel's arguments (< 4 KiB, the classic parameter limit),
//            so nothing is uploaded or cached: no device allocation, no copy, no host sync, and
//            no stale table when parameters move. Each tensor is cut into chunks of kChunk
//            elements, one 256-thread block per chunk (16 elements per thread, coalesced); a
//            block finds its tensor by binary search over the blocks' prefix table. ResNet-18's
//            62 parameter tensors take one launch, ResNet-50's 161 three.
// Cost:      SGD with momentum reads p, g, b and writes p, b: 20 bytes and ~6 FLOPs per
//            element (12 bytes without momentum); Adam reads p, g, m, v and writes p, m, v: 28
//            bytes and ~14 FLOPs + a sqrt and a division per element. Memory bound: the floor is
//            bytes / HBM bandwidth (Adam over ResNet-18's 11.7 M parameters: 327 MB).
#include <cmath>
#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/optim/optim.h"

namespace engine::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 4096;  // elements per block
constexpr int kSgdTensorsPerLaunch = 80;
constexpr int kAdamTensorsPerLaunch = 64;
constexpr int64_t kMaxBlocksPerLaunch = (int64_t(1) << 31) - 1;  // grid.x limit

// Index of the tensor owning `block`: the last t with block_start[t] <= block.
__device__ int find_tensor(const int64_t* block_start, int count, int64_t block) {
  int low = 0, high = count - 1;
  while (low < high) {
    const int mid = (low + high + 1) / 2;
    if (block_start[mid] <= block) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  return low;
}

// ---- SGD ----------------------------------------------------------------------------------

struct SgdTable {
  int count = 0;
  int64_t block_start[kSgdTensorsPerLaunch + 1];
  float* param[kSgdTensorsPerLaunch];
  const float* grad[kSgdTensorsPerLaunch];
  float* momentum_buffer[kSgdTensorsPerLaunch];
  int64_t n[kSgdTensorsPerLaunch];
  bool first_step[kSgdTensorsPerLaunch];
};

struct SgdScalars {
  float lr, momentum, keep, weight_decay;  // keep = 1 - dampening
  bool use_momentum, nesterov;
};

static_assert(sizeof(SgdTable) + sizeof(SgdScalars) <= 4000, "SGD launch table must fit 4 KiB");

__global__ void sgd_multi_kernel(SgdTable table, SgdScalars s) {
  const int t = find_tensor(table.block_start, table.count, blockIdx.x);
  const int64_t begin = (blockIdx.x - table.block_start[t]) * kChunk;
  const int64_t end = begin + kChunk < table.n[t] ? begin + kChunk : table.n[t];
  float* param = table.param[t];
  const float* grad = table.grad[t];
  float* buffer = table.momentum_buffer[t];
  const bool first_step = table.first_step[t];
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float d = grad[i] + s.weight_decay * param[i];
    if (s.use_momentum) {
      const float b = first_step ? d : s.momentum * buffer[i] + s.keep * d;
      buffer[i] = b;
      d = s.nesterov ? d + s.momentum * b : b;
    }
    param[i] -= s.lr * d;
  }
}

// ---- Adam ---------------------------------------------------------------------------------

struct AdamTable {
  int count = 0;
  int64_t block_start[kAdamTensorsPerLaunch + 1];
  float* param[kAdamTensorsPerLaunch];
  const float* grad[kAdamTensorsPerLaunch];
  float* exp_avg[kAdamTensorsPerLaunch];
  float* exp_avg_sq[kAdamTensorsPerLaunch];
  int64_t n[kAdamTensorsPerLaunch];
  float step_size[kAdamTensorsPerLaunch];              // lr / (1 - beta1^t)
  float bias_correction2_sqrt[kAdamTensorsPerLaunch];  // sqrt(1 - beta2^t)
};

struct AdamScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, decay_factor;
  bool decoupled;
};

static_assert(sizeof(AdamTable) + sizeof(AdamScalars) <= 4000, "Adam launch table must fit 4 KiB");

__global__ void adam_multi_kernel(AdamTable table, AdamScalars s) {
  const int t = find_tensor(table.block_start, table.count, blockIdx.x);
  const int64_t begin = (blockIdx.x - table.block_start[t]) * kChunk;
  const int64_t end = begin + kChunk < table.n[t] ? begin + kChunk : table.n[t];
  float* param = table.param[t];
  const float* grad = table.grad[t];
  float* exp_avg = table.exp_avg[t];
  float* exp_avg_sq = table.exp_avg_sq[t];
  const float step_size = table.step_size[t];
  const float bias_correction2_sqrt = table.bias_correction2_sqrt[t];
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float g = grad[i];
    float p = param[i];
    if (s.decoupled) {
      p *= s.decay_factor;
    } else {
      g += s.weight_decay * p;
    }
    const float m = s.beta1 * exp_avg[i] + s.one_minus_beta1 * g;
    const float v = s.beta2 * exp_avg_sq[i] + s.one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p - step_size * m / (sqrtf(v) / bias_correction2_sqrt + s.eps);
  }
}

// Fills launch tables tensor by tensor and launches each when full. `Table` is SgdTable or
// AdamTable; `add(table, slot, tensor)` writes one tensor's entries, `launch(table, blocks)`
// launches.
template <typename Table, int kCapacity, typename Ref, typename Add, typename Launch>
void for_each_launch(const Ref* tensors, int64_t count, Add add, Launch launch) {
  Table table;
  int64_t blocks = 0;
  auto flush = [&]() {
    if (table.count == 0) return;
    table.block_start[table.count] = blocks;
    launch(table, blocks);
    table.count = 0;
    blocks = 0;
  };
  for (int64_t i = 0; i < count; ++i) {
    if (tensors[i].n == 0) continue;
    const int64_t tensor_blocks = ceil_div(tensors[i].n, kChunk);
    ENGINE_CHECK(tensor_blocks <= kMaxBlocksPerLaunch, "multi-tensor optimizer: tensor ", i,
                 " has ", tensors[i].n, " elements, more than one launch can cover");
    if (table.count == kCapacity || blocks + tensor_blocks > kMaxBlocksPerLaunch) flush();
    table.block_start[table.count] = blocks;
    add(table, table.count, tensors[i]);
    ++table.count;
    blocks += tensor_blocks;
  }
  flush();
}

}  // namespace

void sgd_update_multi_cuda(const SgdTensorRef* tensors, int64_t count, const SgdHyper& hyper) {
  SgdScalars s;
  s.lr = static_cast<float>(hyper.lr);
  s.momentum = static_cast<float>(hyper.momentum);
  s.keep = static_cast<float>(1.0 - hyper.dampening);
  s.weight_decay = static_cast<float>(hyper.weight_decay);
  s.use_momentum = hyper.momentum != 0.0;
  s.nesterov = hyper.nesterov;
  for (int64_t i = 0; i < count; ++i) {
    ENGINE_CHECK(!s.use_momentum || tensors[i].n == 0 || tensors[i].momentum_buffer != nullptr,
                 "sgd_update_multi_cuda: tensor ", i, ": momentum ", hyper.momentum,
                 " needs a momentum buffer");
  }
  for_each_launch<SgdTable, kSgdTensorsPerLaunch>(
      tensors, count,
      [](SgdTable& table, int slot, const SgdTensorRef& ref) {
        table.param[slot] = ref.param;
        table.grad[slot] = ref.grad;
        table.momentum_buffer[slot] = ref.momentum_buffer;
        table.n[slot] = ref.n;
        table.first_step[slot] = ref.first_step;
      },
      [&](const SgdTable& table, int64_t blocks) {
        sgd_multi_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, current_stream()>>>(table,
                                                                                           s);
        CUDA_CHECK_LAUNCH("sgd_update_multi_cuda tensors=", table.count, " blocks=", blocks,
                          " (of ", count, " tensors)");
      });
}

void adam_update_multi_cuda(const AdamTensorRef* tensors, int64_t count, const AdamHyper& hyper) {
  AdamScalars s;
  // 1 - beta is formed in double, as on the CPU: in float, 1 - 0.999f is off by 5e-5 relative.
  s.beta1 = static_cast<float>(hyper.beta1);
  s.beta2 = static_cast<float>(hyper.beta2);
  s.one_minus_beta1 = static_cast<float>(1.0 - hyper.beta1);
  s.one_minus_beta2 = static_cast<float>(1.0 - hyper.beta2);
  s.eps = static_cast<float>(hyper.eps);
  s.weight_decay = static_cast<float>(hyper.weight_decay);
  s.decay_factor = static_cast<float>(1.0 - hyper.lr * hyper.weight_decay);
  s.decoupled = hyper.decoupled_weight_decay;
  for (int64_t i = 0; i < count; ++i) {
    ENGINE_CHECK(tensors[i].step >= 1, "adam_update_multi_cuda: tensor ", i,
                 ": step must count from 1, got ", tensors[i].step);
  }
  for_each_launch<AdamTable, kAdamTensorsPerLaunch>(
      tensors, count,
      [&](AdamTable& table, int slot, const AdamTensorRef& ref) {
        const double t = static_cast<double>(ref.step);
        table.param[slot] = ref.param;
        table.grad[slot] = ref.grad;
        table.exp_avg[slot] = ref.exp_avg;
        table.exp_avg_sq[slot] = ref.exp_avg_sq;
        table.n[slot] = ref.n;
        table.step_size[slot] = static_cast<float>(hyper.lr / (1.0 - std::pow(hyper.beta1, t)));
        table.bias_correction2_sqrt[slot] =
            static_cast<float>(std::sqrt(1.0 - std::pow(hyper.beta2, t)));
      },
      [&](const AdamTable& table, int64_t blocks) {
        adam_multi_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, current_stream()>>>(table,
                                                                                            s);
        CUDA_CHECK_LAUNCH("adam_update_multi_cuda tensors=", table.count, " blocks=", blocks,
                          " (of ", count, " tensors)");
      });
}

}  // namespace engine::kernels
