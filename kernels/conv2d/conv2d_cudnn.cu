// conv2d through cuDNN: the library alternative to our implicit-GEMM kernels
// (engine::ConvBackend::Cudnn), for validation in tests and as the peer in `dml bench`.
//
// Math and layout: conv2d.h (NCHW x, KCRS w, cross-correlation, f32); same contracts as
// conv2d_*_cuda, so the engine swaps one for the other without touching anything else.
//   fprop: cudnnConvolutionForward, then cudnnAddTensor for the bias;
//   dgrad: cudnnConvolutionBackwardData;
//   wgrad: cudnnConvolutionBackwardFilter and cudnnConvolutionBackwardBias for db.
// Numerics: per the call's precision (kernels/common/library_math.h). fp32: the convolution
//   descriptor is set to CUDNN_FMA_MATH and only algorithms reported with a non-tensor-core math
//   type are taken, so this is strict FP32 like our kernels (cuDNN's default would use TF32
//   tensor cores on Ampere and later). tf32: CUDNN_DEFAULT_MATH, as PyTorch sets it when
//   cudnn.allow_tf32 is on (its default), and any algorithm except those reported with
//   CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (which may convert FP32 operands to FP16) is taken; as
//   PyTorch does, each pass then runs with the math type its algorithm was reported with. bf16:
//   the legacy API's PSEUDO_BFLOAT16_CONFIG (cuDNN's supported configurations of
//   cudnnConvolutionForward, BackwardData and BackwardFilter: x, w and y CUDNN_DATA_BFLOAT16, the
//   convolution's compute type CUDNN_DATA_FLOAT, compute capability 8.0 and later), with
//   CUDNN_TENSOR_OP_MATH as PyTorch sets for BF16 data, algorithms chosen as under tf32. That
//   configuration has no FP32 output, so each pass rounds its two inputs to BF16 (ties to even,
//   kernels/bf16_round, the rounding of our BF16 kernels) into a stream-ordered workspace, runs
//   on them with FP32 accumulation, and widens its BF16 output back to FP32: one more rounding
//   than our BF16 kernels (which write their FP32 sums), of at most 2^-8 (half a BF16 unit in the
//   last place) of |y|, so cuDNN's BF16 error against the f64 reference (`dml bench`, relative
//   to sum |x w| >= |y|) includes up to 2^-8 on top of the operands' rounding (less where the
//   sum cancels, as for the bench's zero-mean inputs). The bias and db stay FP32 (added and reduced
//   on FP32 descriptors), as in our kernels. The time includes the three conversion passes (6 bytes
//   per element each), as autocast's casts would be. Among the usable algorithms, deterministic
//   ones are preferred (cuDNN's own heuristic order otherwise). A plan is kept per shape and
//   precision.
// Algorithms: chosen once per shape and thread, then cached with the descriptors
//   (CudnnAlgorithmChoice in conv2d.h). Heuristic (default): cuDNN's ranking
//   (cudnnGetConvolution*Algorithm_v7, which runs and times nothing, so no host
//   synchronization), deterministic first. Fastest (`dml bench`): cudnnFind*AlgorithmEx times
//   every algorithm once on the call's own buffers (the output is overwritten by the real call
//   right after) with a 1 GiB workspace, and the fastest strict-FP32 one is kept, as PyTorch's
//   cudnn.benchmark does. Workspaces above 1 GiB are not considered. If no listed algorithm
//   qualifies, ALGO_0 of that pass (implicit GEMM, FMA) is used.
// Workspace: one device buffer per thread, grown (never shrunk) with cudaMalloc when a shape
//   needs more; a steady-state loop therefore allocates nothing. Growing frees the old buffer
//   (cudaFree waits for the device, so in-flight work that used it is finished first). Like the
//   engine, this assumes each thread issues its work on one stream at a time: two streams of
//   one thread running cuDNN convolutions concurrently would share the buffer.
// Handles: one cudnnHandle_t per host thread, created on first use, stream set to
//   current_stream() before every call. Handles, descriptors and the workspace live until the
//   thread ends and are then left to the driver (destroying them during process exit can race
//   with the CUDA runtime's own teardown).
// Errors: every cuDNN call is checked; the message has the op, the shape and cuDNN's status
//   string.
// Cost: 2 N K P Q C R S FLOPs per pass; bytes as in conv2d_cuda.cu (plus the algorithm's
//   workspace traffic, which cuDNN does not report).
#include <cudnn.h>

#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "kernels/bf16_round/bf16_round.h"
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/cuda_workspace.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/library_math.h"
#include "kernels/conv2d/conv2d.h"

// CUDNN_CHECK(call, what...): a failed cuDNN call becomes engine::Error naming the op.
#define CUDNN_CHECK(call, ...)                                                                 \
  do {                                                                                         \
    cudnnStatus_t status_ = (call);                                                            \
    if (status_ != CUDNN_STATUS_SUCCESS) {                                                     \
      ::engine::fail("cuDNN error in ", __VA_ARGS__, ": ", cudnnGetErrorString(status_), " (", \
                     #call, ")");                                                              \
    }                                                                                          \
  } while (0)

namespace engine::kernels {

static_assert(CUDNN_DEFAULT_MATH == kCudnnDefaultMath && CUDNN_FMA_MATH == kCudnnFmaMath &&
              CUDNN_TENSOR_OP_MATH == kCudnnTensorOpMath);

namespace {

constexpr size_t kMaxWorkspaceBytes = size_t(1) << 30;

std::atomic<int> algorithm_choice{static_cast<int>(CudnnAlgorithmChoice::Heuristic)};

bool choose_fastest() {
  return algorithm_choice.load(std::memory_order_relaxed) ==
         static_cast<int>(CudnnAlgorithmChoice::Fastest);
}

// Descriptors and chosen algorithms for one convolution geometry. x, y and w have the
// precision's data type (BF16 under bf16, else FP32); y_float is y in FP32, for the bias.
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, y_float = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  bool have_fwd = false, have_bwd_data = false, have_bwd_filter = false;
  cudnnConvolutionFwdAlgo_t fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  size_t fwd_bytes = 0, bwd_data_bytes = 0, bwd_filter_bytes = 0;
  // The precision's math type (the descriptor's), and the one each pass's algorithm runs with.
  cudnnMathType_t math = CUDNN_FMA_MATH;
  cudnnMathType_t fwd_math = CUDNN_FMA_MATH, bwd_data_math = CUDNN_FMA_MATH,
                  bwd_filter_math = CUDNN_FMA_MATH;
};

using ShapeKey = std::array<int64_t, 15>;  // the shape, the algorithm choice, the precision

struct ThreadState {
  cudnnHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<ShapeKey, std::unique_ptr<Plan>> plans;
};

// Created on first use and intentionally never destroyed (see the header comment).
ThreadState& thread_state() {
  thread_local ThreadState* state = new ThreadState();
  if (state->handle == nullptr) CUDNN_CHECK(cudnnCreate(&state->handle), "conv2d: cudnnCreate");
  CUDNN_CHECK(cudnnSetStream(state->handle, current_stream()), "conv2d: cudnnSetStream");
  return *state;
}

void* workspace(ThreadState& state, size_t bytes) {
  if (bytes > state.workspace_bytes) {
    if (state.workspace != nullptr) cuda_free(state.workspace);
    state.workspace = nullptr;
    state.workspace_bytes = 0;
    state.workspace = cuda_malloc(bytes);
    state.workspace_bytes = bytes;
  }
  return state.workspace;
}

int to_int(int64_t v) { return static_cast<int>(v); }

Plan& plan_for(ThreadState& state, const Conv2dShape& s, Precision precision, const char* op) {
  // The algorithm choice and the precision are part of the key: a plan chosen by heuristic is
  // not reused once Fastest is asked for (nor the reverse), nor a strict-FP32 one under tf32.
  const auto math = static_cast<cudnnMathType_t>(cudnn_math_type(precision));
  const cudnnDataType_t data =
      precision == Precision::Bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  const int64_t choice = choose_fastest() ? 1 : 0;
  const ShapeKey key = {
      s.N,     s.C,          s.H,          s.W,        s.K,
      s.R,     s.S,          s.stride_h,   s.stride_w, s.pad_h,
      s.pad_w, s.dilation_h, s.dilation_w, choice,     static_cast<int64_t>(precision)};
  std::unique_ptr<Plan>& slot = state.plans[key];
  if (slot) return *slot;

  const int64_t P = s.out_h(), Q = s.out_w();
  ENGINE_CHECK(s.N * s.C * s.H * s.W < INT_MAX && s.N * s.K * P * Q < INT_MAX &&
                   s.K * s.C * s.R * s.S < INT_MAX,
               op, ": cuDNN needs every tensor below 2^31 elements (N=", s.N, " C=", s.C,
               " H=", s.H, " W=", s.W, " K=", s.K, ")");
  auto plan = std::make_unique<Plan>();
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->x), op, ": x descriptor");
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->y), op, ": y descriptor");
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->y_float), op, ": y descriptor");
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->bias), op, ": bias descriptor");
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w), op, ": w descriptor");
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan->conv), op, ": conv descriptor");
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->x, CUDNN_TENSOR_NCHW, data, to_int(s.N), to_int(s.C),
                                         to_int(s.H), to_int(s.W)),
              op, ": x [", s.N, ", ", s.C, ", ", s.H, ", ", s.W, "]");
  for (cudnnTensorDescriptor_t y : {plan->y, plan->y_float}) {
    CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, y == plan->y ? data : CUDNN_DATA_FLOAT,
                                   to_int(s.N), to_int(s.K), to_int(P), to_int(Q)),
        op, ": y [", s.N, ", ", s.K, ", ", P, ", ", Q, "]");
  }
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                         to_int(s.K), 1, 1),
              op, ": bias [", s.K, "]");
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w, data, CUDNN_TENSOR_NCHW, to_int(s.K), to_int(s.C),
                                         to_int(s.R), to_int(s.S)),
              op, ": w [", s.K, ", ", s.C, ", ", s.R, ", ", s.S, "]");
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan->conv, to_int(s.pad_h), to_int(s.pad_w),
                                              to_int(s.stride_h), to_int(s.stride_w),
                                              to_int(s.dilation_h), to_int(s.dilation_w),
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              op, ": stride ", s.stride_h, "x", s.stride_w, " padding ", s.pad_h, "x", s.pad_w,
              " dilation ", s.dilation_h, "x", s.dilation_w);
  plan->math = plan->fwd_math = plan->bwd_data_math = plan->bwd_filter_math = math;
  CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, math), op, ": math type");
  int n = 0, k = 0, p = 0, q = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &n, &k, &p, &q),
              op, ": output size");
  ENGINE_CHECK(n == s.N && k == s.K && p == P && q == Q, op, ": cuDNN computes output [", n, ", ",
               k, ", ", p, ", ", q, "] but conv2d expects [", s.N, ", ", s.K, ", ", P, ", ", Q,
               "]");
  slot = std::move(plan);
  return *slot;
}

// cuDNN's names for its algorithms (the enum constants without their common prefix, in enum
// order, which cudnn_ops.h numbers 0 to COUNT - 1), so the benchmark's notes and a test's failure
// say "wgrad FFT" rather than "wgrad 2".
constexpr const char* kFwdNames[] = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
    "WINOGRAD",      "WINOGRAD_NONFUSED"};
constexpr const char* kBwdDataNames[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                         "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
constexpr const char* kBwdFilterNames[] = {
    "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
static_assert(std::size(kFwdNames) == CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
static_assert(std::size(kBwdDataNames) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
static_assert(std::size(kBwdFilterNames) == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
// The order too, where the tests read the name (FFT and Winograd widen their tolerance):
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_FFT == 4 &&
              CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED == 7);
static_assert(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING == 3 &&
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED == 5);
static_assert(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT == 2 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING == 6);

template <typename Algo, size_t N>
const char* name_of(Algo algo, const char* const (&names)[N]) {
  const int i = static_cast<int>(algo);
  return i >= 0 && size_t(i) < N ? names[i] : "unknown";
}
const char* algorithm_name(cudnnConvolutionFwdAlgo_t algo) { return name_of(algo, kFwdNames); }
const char* algorithm_name(cudnnConvolutionBwdDataAlgo_t algo) {
  return name_of(algo, kBwdDataNames);
}
const char* algorithm_name(cudnnConvolutionBwdFilterAlgo_t algo) {
  return name_of(algo, kBwdFilterNames);
}

bool is_tensor_core(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// Whether an algorithm cuDNN reports with `reported` math may run under the plan's math: strict
// FP32 (FMA) takes no tensor-core algorithm; TF32 (DEFAULT) any but those allowed to convert
// FP32 operands to FP16.
bool usable_math(cudnnMathType_t plan_math, cudnnMathType_t reported) {
  if (plan_math == CUDNN_FMA_MATH) return !is_tensor_core(reported);
  return reported != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The math type a pass runs with: strict FP32 always FMA (whatever Find reported, so no TF32 can
// slip in); TF32 the one its algorithm was reported (and timed) with, as PyTorch does.
cudnnMathType_t run_math(cudnnMathType_t plan_math, cudnnMathType_t reported) {
  return plan_math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : reported;
}

// Index of the algorithm to use among cuDNN's ranked results (by heuristic, or by measured time
// for Fastest), or -1 when none is usable (failed, a math type the plan's precision excludes, or
// a workspace above kMaxWorkspaceBytes). Among the usable ones, the best ranked with the highest
// score:
//   +2 deterministic (Heuristic only: reproducible `--conv cudnn` runs);
//   +1 strict FP32 only: reported with CUDNN_FMA_MATH. Execution is strict FP32 either way (the
//      descriptor says FMA math), but cuDNN's documentation lets CUDNN_DEFAULT_MATH use TF32 on
//      Ampere and later, so a time Find measured under it may not be the time of the FP32 run.
template <typename Perf>
int choose(const Perf* results, int count, cudnnMathType_t plan_math) {
  int best = -1, best_score = -1;
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    if (r.status != CUDNN_STATUS_SUCCESS || !usable_math(plan_math, r.mathType) ||
        r.memory > kMaxWorkspaceBytes) {
      continue;
    }
    const int score = (!choose_fastest() && r.determinism == CUDNN_DETERMINISTIC ? 2 : 0) +
                      (plan_math == CUDNN_FMA_MATH && r.mathType == CUDNN_FMA_MATH ? 1 : 0);
    if (score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

// Names the call and its shape in an error message. Streamed only when a call fails, so a
// successful call does not format the shape (a few microseconds of host time per convolution).
struct Where {
  const char* op;
  const Conv2dShape& s;
};

std::ostream& operator<<(std::ostream& out, const Where& w) {
  const Conv2dShape& s = w.s;
  return out << w.op << " N=" << s.N << " C=" << s.C << " H=" << s.H << " W=" << s.W << " K=" << s.K
             << " R=" << s.R << " S=" << s.S << " stride=" << s.stride_h << "x" << s.stride_w
             << " pad=" << s.pad_h << "x" << s.pad_w << " dilation=" << s.dilation_h << "x"
             << s.dilation_w;
}

// Puts the math type a pass runs with on the plan's (shared) convolution descriptor: the passes
// of one plan may have been chosen with different ones under tf32. A host-side setting, no sync.
void set_math(Plan& plan, cudnnMathType_t math, const Where& where) {
  CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, math), where, ": math type");
}

// The buffers a pass hands cuDNN: its FP32 buffers themselves, or under bf16 (the header's
// Numerics) BF16 copies in a stream-ordered workspace: the two inputs rounded on construction,
// the output widened into the FP32 buffer by finish().
class PassOperands {
 public:
  PassOperands(Precision precision, const float* a, int64_t a_n, const float* b, int64_t b_n,
               float* out, int64_t out_n, const Where& where)
      : bf16_(precision == Precision::Bf16),
        a_(a),
        b_(b),
        out_(out),
        out_n_(out_n),
        a_bytes_(bf16_ ? workspace_aligned(size_t(a_n) * sizeof(uint16_t)) : 0),
        b_bytes_(bf16_ ? workspace_aligned(size_t(b_n) * sizeof(uint16_t)) : 0),
        memory_(bf16_ ? a_bytes_ + b_bytes_ + size_t(out_n) * sizeof(uint16_t) : 0,
                current_stream(), where, ": BF16 operands") {
    if (!bf16_) return;
    round_to_bf16_cuda(a_n, a, a16());
    round_to_bf16_cuda(b_n, b, b16());
  }
  const void* a() const { return bf16_ ? static_cast<const void*>(a16()) : a_; }
  const void* b() const { return bf16_ ? static_cast<const void*>(b16()) : b_; }
  void* out() const { return bf16_ ? static_cast<void*>(out16()) : out_; }
  // After the pass: the output in FP32 (exact widening), the workspace given back.
  void finish(const Where& where) {
    if (!bf16_) return;
    bf16_to_float_cuda(out_n_, out16(), out_);
    memory_.release(where, ": BF16 operands");
  }

 private:
  uint16_t* a16() const { return reinterpret_cast<uint16_t*>(memory_.bytes()); }
  uint16_t* b16() const { return reinterpret_cast<uint16_t*>(memory_.bytes() + a_bytes_); }
  uint16_t* out16() const {
    return reinterpret_cast<uint16_t*>(memory_.bytes() + a_bytes_ + b_bytes_);
  }

  bool bf16_;
  const float* a_;
  const float* b_;
  float* out_;
  int64_t out_n_;
  size_t a_bytes_, b_bytes_;
  StreamWorkspace memory_;
};

int64_t x_elements(const Conv2dShape& s) { return s.N * s.C * s.H * s.W; }
int64_t w_elements(const Conv2dShape& s) { return s.K * s.C * s.R * s.S; }
int64_t y_elements(const Conv2dShape& s) { return s.N * s.K * s.out_h() * s.out_w(); }

}  // namespace

bool cudnn_available() { return true; }

std::string cudnn_version() {
  // cudnnGetVersion(): major * 10000 + minor * 100 + patch since cuDNN 9.
  const size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

void conv2d_fprop_cudnn(const Conv2dShape& shape, const float* x, const float* w, const float* bias,
                        float* y, Precision precision) {
  if (shape.N == 0) return;
  ThreadState& state = thread_state();
  Plan& plan = plan_for(state, shape, precision, "conv2d_fprop_cudnn");
  const Where where{"conv2d_fprop_cudnn", shape};
  PassOperands io(precision, x, x_elements(shape), w, w_elements(shape), y, y_elements(shape),
                  where);
  if (!plan.have_fwd) {
    // Ranked under the precision's math type, not the one another pass left on the descriptor.
    set_math(plan, plan.math, where);
    cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    if (choose_fastest()) {
      void* search = workspace(state, kMaxWorkspaceBytes);
      CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(state.handle, plan.x, io.a(), plan.w,
                                                         io.b(), plan.conv, plan.y, io.out(),
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                                         results, search, kMaxWorkspaceBytes),
                  where, ": timing the algorithms");
    } else {
      CUDNN_CHECK(
          cudnnGetConvolutionForwardAlgorithm_v7(state.handle, plan.x, plan.w, plan.conv, plan.y,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, results),
          where, ": algorithm heuristics");
    }
    const int best = choose(results, count, plan.math);
    plan.fwd = best >= 0 ? results[best].algo : CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    plan.fwd_math = best >= 0 ? run_math(plan.math, results[best].mathType) : plan.math;
    set_math(plan, plan.fwd_math, where);
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(state.handle, plan.x, plan.w, plan.conv,
                                                        plan.y, plan.fwd, &plan.fwd_bytes),
                where, ": workspace size of algorithm ", algorithm_name(plan.fwd));
    plan.have_fwd = true;
  }
  void* ws = workspace(state, plan.fwd_bytes);
  set_math(plan, plan.fwd_math, where);
  const float one = 1.0f, zero = 0.0f;
  describe_next_launch({"cudnn_fprop", conv2d_flops(shape), conv2d_bytes(shape)});
  CUDNN_CHECK(cudnnConvolutionForward(state.handle, &one, plan.x, io.a(), plan.w, io.b(), plan.conv,
                                      plan.fwd, ws, plan.fwd_bytes, &zero, plan.y, io.out()),
              where, " (algorithm ", algorithm_name(plan.fwd), ")");
  count_library_call("cudnnConvolutionForward");
  io.finish(where);
  if (bias != nullptr) {
    CUDNN_CHECK(cudnnAddTensor(state.handle, &one, plan.bias, bias, &one, plan.y_float, y), where,
                ": bias add");
  }
}

void conv2d_dgrad_cudnn(const Conv2dShape& shape, const float* dy, const float* w, float* dx,
                        Precision precision) {
  if (shape.N == 0) return;
  ThreadState& state = thread_state();
  Plan& plan = plan_for(state, shape, precision, "conv2d_dgrad_cudnn");
  const Where where{"conv2d_dgrad_cudnn", shape};
  PassOperands io(precision, dy, y_elements(shape), w, w_elements(shape), dx, x_elements(shape),
                  where);
  if (!plan.have_bwd_data) {
    set_math(plan, plan.math, where);
    cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;
    if (choose_fastest()) {
      void* search = workspace(state, kMaxWorkspaceBytes);
      CUDNN_CHECK(
          cudnnFindConvolutionBackwardDataAlgorithmEx(
              state.handle, plan.w, io.b(), plan.y, io.a(), plan.conv, plan.x, io.out(),
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, results, search, kMaxWorkspaceBytes),
          where, ": timing the algorithms");
    } else {
      CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                      state.handle, plan.w, plan.y, plan.conv, plan.x,
                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, results),
                  where, ": algorithm heuristics");
    }
    const int best = choose(results, count, plan.math);
    plan.bwd_data = best >= 0 ? results[best].algo : CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    plan.bwd_data_math = best >= 0 ? run_math(plan.math, results[best].mathType) : plan.math;
    set_math(plan, plan.bwd_data_math, where);
    CUDNN_CHECK(
        cudnnGetConvolutionBackwardDataWorkspaceSize(state.handle, plan.w, plan.y, plan.conv,
                                                     plan.x, plan.bwd_data, &plan.bwd_data_bytes),
        where, ": workspace size of algorithm ", algorithm_name(plan.bwd_data));
    plan.have_bwd_data = true;
  }
  void* ws = workspace(state, plan.bwd_data_bytes);
  set_math(plan, plan.bwd_data_math, where);
  const float one = 1.0f, zero = 0.0f;
  describe_next_launch({"cudnn_dgrad", conv2d_flops(shape), conv2d_bytes(shape)});
  CUDNN_CHECK(
      cudnnConvolutionBackwardData(state.handle, &one, plan.w, io.b(), plan.y, io.a(), plan.conv,
                                   plan.bwd_data, ws, plan.bwd_data_bytes, &zero, plan.x, io.out()),
      where, " (algorithm ", algorithm_name(plan.bwd_data), ")");
  count_library_call("cudnnConvolutionBackwardData");
  io.finish(where);
}

void conv2d_wgrad_cudnn(const Conv2dShape& shape, const float* dy, const float* x, float* dw,
                        float* db, Precision precision) {
  if (shape.N == 0) {  // an empty reduction: the gradients are zero
    if (dw != nullptr) {
      cuda_memset_zero(dw, shape.K * shape.C * shape.R * shape.S * sizeof(float));
    }
    if (db != nullptr) cuda_memset_zero(db, shape.K * sizeof(float));
    return;
  }
  ThreadState& state = thread_state();
  Plan& plan = plan_for(state, shape, precision, "conv2d_wgrad_cudnn");
  const Where where{"conv2d_wgrad_cudnn", shape};
  const float one = 1.0f, zero = 0.0f;
  if (dw != nullptr) {
    PassOperands io(precision, dy, y_elements(shape), x, x_elements(shape), dw, w_elements(shape),
                    where);
    if (!plan.have_bwd_filter) {
      set_math(plan, plan.math, where);
      cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int count = 0;
      if (choose_fastest()) {
        void* search = workspace(state, kMaxWorkspaceBytes);
        CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                        state.handle, plan.x, io.b(), plan.y, io.a(), plan.conv, plan.w, io.out(),
                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, results, search,
                        kMaxWorkspaceBytes),
                    where, ": timing the algorithms");
      } else {
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                        state.handle, plan.x, plan.y, plan.conv, plan.w,
                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, results),
                    where, ": algorithm heuristics");
      }
      const int best = choose(results, count, plan.math);
      plan.bwd_filter = best >= 0 ? results[best].algo : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
      plan.bwd_filter_math = best >= 0 ? run_math(plan.math, results[best].mathType) : plan.math;
      set_math(plan, plan.bwd_filter_math, where);
      CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(state.handle, plan.x, plan.y,
                                                                 plan.conv, plan.w, plan.bwd_filter,
                                                                 &plan.bwd_filter_bytes),
                  where, ": workspace size of algorithm ", algorithm_name(plan.bwd_filter));
      plan.have_bwd_filter = true;
    }
    void* ws = workspace(state, plan.bwd_filter_bytes);
    set_math(plan, plan.bwd_filter_math, where);
    describe_next_launch({"cudnn_wgrad", conv2d_flops(shape), conv2d_bytes(shape)});
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(state.handle, &one, plan.x, io.b(), plan.y, io.a(),
                                               plan.conv, plan.bwd_filter, ws,
                                               plan.bwd_filter_bytes, &zero, plan.w, io.out()),
                where, " (algorithm ", algorithm_name(plan.bwd_filter), ")");
    count_library_call("cudnnConvolutionBackwardFilter");
    io.finish(where);
  }
  if (db != nullptr) {
    CUDNN_CHECK(
        cudnnConvolutionBackwardBias(state.handle, &one, plan.y_float, dy, &zero, plan.bias, db),
        where, ": bias gradient");
  }
}

void set_cudnn_algorithm_choice(CudnnAlgorithmChoice choice) {
  algorithm_choice.store(static_cast<int>(choice), std::memory_order_relaxed);
}

std::string conv2d_cudnn_algorithms(const Conv2dShape& s, Precision precision) {
  ThreadState& state = thread_state();
  const Plan& plan = plan_for(state, s, precision, "conv2d_cudnn_algorithms");
  auto named = [](bool have, const char* name) { return std::string(have ? name : "-"); };
  return "fprop " + named(plan.have_fwd, algorithm_name(plan.fwd)) + ", dgrad " +
         named(plan.have_bwd_data, algorithm_name(plan.bwd_data)) + ", wgrad " +
         named(plan.have_bwd_filter, algorithm_name(plan.bwd_filter));
}

}  // namespace engine::kernels
