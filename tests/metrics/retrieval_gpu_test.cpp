// The ranking kernels of the retrieval metrics (kernels/retrieval): the CPU twin on a
// hand-computed block and against metrics' own per-query functions (relevant_positions,
// average_precision, ...) on random key blocks full of ties; and [cuda] the GPU ranking against
// the twin on the same keys (exactly), the GPU key tile against metrics::key_tile, and
// evaluate_retrieval with a CUDA device against the CPU path.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/device.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/retrieval/retrieval.h"
#include "metrics/labels.h"
#include "metrics/retrieval.h"
#include "tests/metrics/metrics_test_util.h"
#include "tests/support/cuda_guard.h"

using engine::kernels::QueryRanking;
using metrics::Metric;

namespace {

// metrics::LabelGroups flattened into the kernels' ClassLayout (the vectors own the memory).
struct HostClasses {
  std::vector<int64_t> class_of, offsets, members;
  int64_t classes = 0;

  explicit HostClasses(const std::vector<int64_t>& labels) {
    const metrics::LabelGroups groups = metrics::group_by_label(labels);
    class_of = groups.class_of;
    offsets.push_back(0);
    for (const std::vector<int64_t>& m : groups.members) {
      members.insert(members.end(), m.begin(), m.end());
      offsets.push_back(static_cast<int64_t>(members.size()));
    }
    classes = static_cast<int64_t>(groups.members.size());
  }
  engine::kernels::ClassLayout layout() const {
    return {class_of.data(), offsets.data(), members.data(), classes};
  }
};

std::vector<QueryRanking> twin(const std::vector<float>& keys, int64_t n, int64_t q0, int64_t rows,
                               const HostClasses& classes) {
  std::vector<QueryRanking> out(static_cast<size_t>(rows));
  engine::kernels::rank_query_block_cpu(keys.data(), n, q0, rows, classes.layout(), out.data());
  return out;
}

// Random labels in [0, classes) except every `lone_every`-th item, which gets a label of its own
// (a query without relevant items).
std::vector<int64_t> labels_with_lone(int64_t n, int64_t classes, int64_t lone_every,
                                      uint64_t seed) {
  std::vector<int64_t> labels = test::random_labels(n, classes, seed);
  for (int64_t i = 0; i < n; i += lone_every) labels[i] = 1000 + i;
  return labels;
}

// rows x n keys drawn from {-0, +0, 1, ..., levels - 1}: exact ties everywhere, and signed zeros
// that must tie with each other.
std::vector<float> tied_keys(int64_t rows, int64_t n, int64_t levels, uint64_t seed) {
  engine::Generator gen(seed);
  const std::vector<int64_t> draws = engine::randint({rows * n}, -1, levels, gen).to_indices();
  std::vector<float> keys;
  for (int64_t v : draws) keys.push_back(v < 0 ? -0.0f : static_cast<float>(v));
  return keys;
}

std::vector<float> uniform_keys(int64_t rows, int64_t n, uint64_t seed) {
  engine::Generator gen(seed);
  const std::vector<double> v = engine::uniform({rows * n}, -1.0, 4.0, gen).to_vector();
  return std::vector<float>(v.begin(), v.end());
}

// Every row of a twin block against metrics' per-query functions on the same key row.
void check_twin_row_by_row(const std::vector<float>& keys, int64_t n, int64_t q0, int64_t rows,
                           const std::vector<int64_t>& labels) {
  const HostClasses classes(labels);
  const std::vector<QueryRanking> got = twin(keys, n, q0, rows, classes);
  int64_t lone = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t query = q0 + r;
    std::vector<int64_t> relevant;
    for (int64_t j = 0; j < n; ++j) {
      if (j != query && labels[j] == labels[query]) relevant.push_back(j);
    }
    const std::vector<int64_t> positions =
        metrics::relevant_positions(keys.data() + r * n, n, query, relevant);
    const QueryRanking& g = got[static_cast<size_t>(r)];
    INFO("query " << query << " of block [" << q0 << ", " << q0 + rows << "), R "
                  << relevant.size());
    if (relevant.empty()) {
      ++lone;
      CHECK(g.first_position == 0);
      CHECK(g.average_precision == 0.0);
      CHECK(g.ap_at_10 == 0.0);
      CHECK(g.ap_at_r == 0.0);
      CHECK(g.r_precision == 0.0);
      continue;
    }
    CHECK(g.first_position == positions.front());
    for (int64_t k : {1, 2, 4, 10})
      CHECK((g.first_position <= k) == metrics::hit_at_k(positions, k));
    // The same f64 operations in the same order on the same positions: equal to the last bit.
    CHECK(g.average_precision == metrics::average_precision(positions));
    CHECK(g.ap_at_10 == metrics::average_precision_at(positions, 10));
    CHECK(g.ap_at_r ==
          metrics::average_precision_at(positions, static_cast<int64_t>(relevant.size())));
    CHECK(g.r_precision == metrics::r_precision(positions));
  }
  UNSCOPED_INFO(lone << " lone queries in the block");
}

}  // namespace

TEST_CASE("retrieval twin: hand-computed block with ties, signed zeros and a lone query",
          "[metrics][retrieval]") {
  // Labels [A, B, A, A, B, C]; queries 2..5. The query's own key (-1) would rank first if self
  // were excluded by distance rather than by index.
  //   q2 (A; relevant 0, 3): keys 0:5 1:1 3:1 4:1 5:0.5 -> 5, 1, 3, 4, 0: positions 3, 5
  //      AP = (1/3 + 2/5) / 2 = 11/30, AP@10 = (11/15) / 10 = 11/150, AP@R (R = 2) = 0,
  //      R-precision 0 (neither of the first 2)
  //   q3 (A; relevant 0, 2): every key 1 -> index order 0, 1, 2, 4, 5: positions 1, 3
  //      AP = (1 + 2/3) / 2 = 5/6, AP@10 = (5/3) / 10 = 1/6, AP@R = (1) / 2 = 1/2,
  //      R-precision 1/2
  //   q4 (B; relevant 1): keys 0:+0 1:-0 2:2 3:3 5:3 -> 0, 1, 2, 3, 5 (-0 ties +0, so the index
  //      decides: reading -0 < +0 would put 1 first): position 2: AP = 1/2, AP@10 = 1/20,
  //      AP@R (R = 1) = 0, R-precision 0
  //   q5 (C): lone -> all 0
  const std::vector<int64_t> labels = {0, 1, 0, 0, 1, 2};
  const std::vector<float> keys = {5,    1,     -1, 1,  1,  0.5f,  // q2
                                   1,    1,     1,  -1, 1,  1,     // q3
                                   0.0f, -0.0f, 2,  3,  -1, 3,     // q4
                                   1,    2,     3,  4,  5,  -1};   // q5
  const std::vector<QueryRanking> got = twin(keys, 6, 2, 4, HostClasses(labels));
  CHECK(got[0].first_position == 3);
  CHECK(got[0].average_precision == Approx(11.0 / 30.0).epsilon(1e-15));
  CHECK(got[0].ap_at_10 == Approx(11.0 / 150.0).epsilon(1e-15));
  CHECK(got[0].ap_at_r == 0.0);
  CHECK(got[0].r_precision == 0.0);
  CHECK(got[1].first_position == 1);
  CHECK(got[1].average_precision == Approx(5.0 / 6.0).epsilon(1e-15));
  CHECK(got[1].ap_at_10 == Approx(1.0 / 6.0).epsilon(1e-15));
  CHECK(got[1].ap_at_r == 0.5);
  CHECK(got[1].r_precision == 0.5);
  CHECK(got[2].first_position == 2);
  CHECK(got[2].average_precision == 0.5);
  CHECK(got[2].ap_at_10 == Approx(0.05).epsilon(1e-15));
  CHECK(got[2].ap_at_r == 0.0);
  CHECK(got[2].r_precision == 0.0);
  CHECK(got[3].first_position == 0);
  CHECK(got[3].average_precision == 0.0);
  CHECK(got[3].r_precision == 0.0);
}

TEST_CASE("retrieval twin: equals metrics' per-query functions on random blocks with ties",
          "[metrics][retrieval]") {
  const int64_t n = 157;
  const std::vector<int64_t> labels = labels_with_lone(n, 7, 25, 31);
  // (q0, rows): the first row, a middle block, the last rows.
  for (const auto& [q0, rows] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {37, 20}, {150, 7}}) {
    check_twin_row_by_row(tied_keys(rows, n, 5, 40 + q0), n, q0, rows, labels);
    check_twin_row_by_row(uniform_keys(rows, n, 50 + q0), n, q0, rows, labels);
  }
  // Two classes: R around n / 2, so AP@R and AP@10 differ from AP in many ways.
  check_twin_row_by_row(tied_keys(9, n, 40, 60), n, 100, 9, test::random_labels(n, 2, 61));
}

TEST_CASE("retrieval twin: bad input is reported", "[metrics][retrieval]") {
  const std::vector<int64_t> labels = {0, 0, 1};
  const HostClasses classes(labels);
  const std::vector<float> keys(9, 1.0f);
  std::vector<QueryRanking> out(3);
  CHECK_THROWS_WITH(
      engine::kernels::rank_query_block_cpu(keys.data(), 3, 1, 3, classes.layout(), out.data()),
      Catch::Contains("rank_query_block_cpu") && Catch::Contains("[1, 4)"));
  // A class layout whose member list misses the query.
  HostClasses broken(labels);
  broken.members = {0, 0, 2};
  CHECK_THROWS_WITH(
      engine::kernels::rank_query_block_cpu(keys.data(), 3, 1, 1, broken.layout(), out.data()),
      Catch::Contains("item 1 is not in the members"));
}

TEST_CASE("retrieval: a CUDA device that is not there is reported", "[metrics][retrieval]") {
  const metrics::Points points = test::points_from({0, 1, 5}, 1, Metric::E);
  metrics::RetrievalOptions options;
  options.device = engine::Device::cuda(1000);
  CHECK_THROWS_WITH(metrics::evaluate_retrieval(points, {0, 0, 1}, options),
                    Catch::Contains("cuda:1000 is not available"));
}

// ---- CUDA ----

namespace {

engine::Tensor device_copy(const void* host, size_t bytes, const engine::Shape& shape,
                           engine::DType dtype) {
  engine::Tensor t = engine::Tensor::empty(shape, dtype, engine::Device::cuda());
  engine::kernels::cuda_memcpy_host_to_device(t.raw_data(), host, bytes);
  return t;
}

std::vector<QueryRanking> on_cuda(const std::vector<float>& keys, int64_t n, int64_t q0,
                                  int64_t rows, const HostClasses& classes) {
  using engine::DType;
  const engine::Tensor dkeys = device_copy(keys.data(), 4 * keys.size(), {rows, n}, DType::F32);
  const engine::Tensor class_of =
      device_copy(classes.class_of.data(), 8 * classes.class_of.size(), {n}, DType::I64);
  const engine::Tensor offsets =
      device_copy(classes.offsets.data(), 8 * classes.offsets.size(),
                  {static_cast<int64_t>(classes.offsets.size())}, DType::I64);
  const engine::Tensor members =
      device_copy(classes.members.data(), 8 * classes.members.size(), {n}, DType::I64);
  // Five 8-byte fields per QueryRanking (static_assert in metrics/retrieval.cpp); i64 because f64
  // tensors cannot live on a GPU.
  const engine::Tensor out = engine::Tensor::empty({rows, 5}, DType::I64, engine::Device::cuda());
  engine::kernels::rank_query_block_cuda(
      dkeys.data<float>(), n, q0, rows,
      {class_of.data<int64_t>(), offsets.data<int64_t>(), members.data<int64_t>(), classes.classes},
      reinterpret_cast<QueryRanking*>(out.data<int64_t>()));
  std::vector<QueryRanking> host(static_cast<size_t>(rows));
  engine::kernels::cuda_memcpy_device_to_host(host.data(), out.data<int64_t>(),
                                              sizeof(QueryRanking) * host.size());
  return host;
}

void require_same_rankings(const std::vector<QueryRanking>& got,
                           const std::vector<QueryRanking>& expected) {
  REQUIRE(got.size() == expected.size());
  int64_t bad = 0;
  for (size_t r = 0; r < got.size(); ++r) {
    // The same positions give the same f64 operations in the same order: the same bits.
    const bool same = got[r].first_position == expected[r].first_position &&
                      got[r].average_precision == expected[r].average_precision &&
                      got[r].ap_at_10 == expected[r].ap_at_10 &&
                      got[r].ap_at_r == expected[r].ap_at_r &&
                      got[r].r_precision == expected[r].r_precision;
    if (!same && bad++ == 0) {
      UNSCOPED_INFO("first difference at row " << r << ": first " << got[r].first_position << " vs "
                                               << expected[r].first_position << ", AP "
                                               << got[r].average_precision << " vs "
                                               << expected[r].average_precision);
    }
  }
  CHECK(bad == 0);
}

// n x d rows with exactly four entries of +-1 (the rest 0): every row has norm 2, so the rows
// L2-normalize exactly to +-0.5 and every dot product, squared norm and key (metrics N, C and
// E) is an exact small multiple of 1/4 in f32 -- whatever the order of the GEMM's sums.
std::vector<double> four_hot_points(int64_t n, int64_t d, uint64_t seed) {
  engine::Generator gen(seed);
  const std::vector<int64_t> draws = engine::randint({n * 8}, 0, d, gen).to_indices();
  std::vector<double> x(static_cast<size_t>(n * d), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t placed = 0;
    for (int64_t t = 0; t < 8 && placed < 4; ++t) {
      const int64_t column = draws[static_cast<size_t>(i * 8 + t)];
      double& v = x[static_cast<size_t>(i * d + column)];
      if (v != 0.0) continue;
      v = (column + t) % 2 == 0 ? 1.0 : -1.0;
      ++placed;
    }
    for (int64_t column = 0; placed < 4; ++column) {  // rare: too many repeated draws
      double& v = x[static_cast<size_t>(i * d + column)];
      if (v == 0.0) {
        v = 1.0;
        ++placed;
      }
    }
  }
  return x;
}

// The two devices' results agree (test::require_same_retrieval) and split the queries alike.
void require_same_result(const metrics::RetrievalResult& a, const metrics::RetrievalResult& b,
                         double tol) {
  test::require_same_retrieval(a, b, tol);
  CHECK(a.query_block == b.query_block);
}

metrics::RetrievalResult evaluate(const metrics::Points& points, const std::vector<int64_t>& labels,
                                  int64_t query_block, engine::Device device) {
  metrics::RetrievalOptions options;
  options.ks = {1, 2, 4, 8, 100};
  options.query_block = query_block;
  options.gallery_block = 64;
  options.device = device;
  return metrics::evaluate_retrieval(points, labels, options);
}

}  // namespace

TEST_CASE("retrieval cuda: ranking equals the twin on the same keys, ties and odd sizes",
          "[metrics][retrieval][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  struct Case {
    int64_t n, classes, lone_every, q0, rows, levels;
  };
  // levels 0: uniform random keys. n = 5001 with 2 classes has R ~ 2500 > 2048: the count
  // kernel's global-memory path, and two 4096-item chunks per row.
  const std::vector<Case> cases = {{1, 1, 1, 0, 1, 3},
                                   {2, 1, 7, 0, 2, 3},
                                   {157, 7, 25, 0, 157, 5},
                                   {157, 7, 25, 37, 20, 0},
                                   {1031, 13, 9, 500, 97, 9},
                                   {1031, 13, 9, 0, 33, 0},
                                   {5001, 2, 1000, 4990, 11, 50},
                                   {5001, 2, 1000, 7, 5, 0},
                                   {4097, 3, 101, 4000, 97, 2}};
  for (const Case& c : cases) {
    INFO("n " << c.n << ", classes " << c.classes << ", queries [" << c.q0 << ", " << c.q0 + c.rows
              << "), key levels " << c.levels);
    const HostClasses classes(labels_with_lone(c.n, c.classes, c.lone_every, 70 + c.n));
    const std::vector<float> keys = c.levels > 0 ? tied_keys(c.rows, c.n, c.levels, 80 + c.q0)
                                                 : uniform_keys(c.rows, c.n, 90 + c.q0);
    require_same_rankings(on_cuda(keys, c.n, c.q0, c.rows, classes),
                          twin(keys, c.n, c.q0, c.rows, classes));
  }
}

TEST_CASE("retrieval cuda: ranking equals the twin on the hand-computed block",
          "[metrics][retrieval][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // The block of "retrieval twin: hand-computed block ...": signed zeros, ties, a lone query.
  const HostClasses classes({0, 1, 0, 0, 1, 2});
  const std::vector<float> keys = {5,    1,     -1, 1, 1,  0.5f, 1, 1, 1, -1, 1, 1,
                                   0.0f, -0.0f, 2,  3, -1, 3,    1, 2, 3, 4,  5, -1};
  require_same_rankings(on_cuda(keys, 6, 2, 4, classes), twin(keys, 6, 2, 4, classes));
}

TEST_CASE("retrieval cuda: key tile equals metrics::key_tile on exact-key points",
          "[metrics][retrieval][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const int64_t n = 301, d = 24;
  const std::vector<double> x = four_hot_points(n, d, 5);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    const metrics::Points points = test::points_from(x, d, metric);
    const int64_t q0 = 123, rows = 45;
    std::vector<float> expected(static_cast<size_t>(rows * n));
    metrics::key_tile(points, q0, rows, points, 0, n, expected.data(), n);
    const engine::Tensor dx =
        device_copy(points.x.data(), 4 * points.x.size(), {n, d}, engine::DType::F32);
    const engine::Tensor dsq =
        device_copy(points.sq_norms.data(), 4 * points.sq_norms.size(), {n}, engine::DType::F32);
    const engine::Tensor tile =
        engine::Tensor::empty({rows, n}, engine::DType::F32, engine::Device::cuda());
    engine::kernels::retrieval_key_tile_cuda(dx.data<float>(), dsq.data<float>(), n, d,
                                             metric == Metric::C
                                                 ? engine::kernels::RankingKey::Cosine
                                                 : engine::kernels::RankingKey::SquaredEuclidean,
                                             q0, rows, tile.data<float>());
    std::vector<float> got(expected.size());
    engine::kernels::cuda_memcpy_device_to_host(got.data(), tile.data<float>(), 4 * got.size());
    INFO("metric " << metrics::metric_name(metric));
    CHECK(got == expected);
  }
}

TEST_CASE("retrieval cuda: evaluate_retrieval on CUDA equals the CPU path on exact-key sets",
          "[metrics][retrieval][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Integer points for metric E, four-hot points for N and C: every key exact, so both paths
  // rank identically, ties included; n odd, several classes, lone labels.
  const int64_t n = 1001;
  const std::vector<int64_t> labels = labels_with_lone(n, 11, 97, 100);
  const std::vector<std::pair<Metric, std::vector<double>>> sets = {
      {Metric::E, test::integer_points(n, 5, 2, 101)},
      {Metric::N, four_hot_points(n, 16, 102)},
      {Metric::C, four_hot_points(n, 16, 103)}};
  for (const auto& [metric, x] : sets) {
    const int64_t d = static_cast<int64_t>(x.size()) / n;
    const metrics::Points points = test::points_from(x, d, metric);
    for (int64_t qb : {1, 7, 0, 5000}) {  // 0: from the memory budget; 5000: one block
      INFO("metric " << metrics::metric_name(metric) << ", query_block " << qb);
      // Same per-query scores, summed in the same order: 1e-12 is only headroom for nothing.
      require_same_result(evaluate(points, labels, qb, engine::Device::cuda()),
                          evaluate(points, labels, qb, engine::Device::cpu()), 1e-12);
    }
  }
}

TEST_CASE("retrieval cuda: evaluate_retrieval on CUDA matches the CPU path on random points",
          "[metrics][retrieval][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const int64_t n = 1001, d = 33;
  const std::vector<double> x = test::normal_points(n, d, 110);
  const std::vector<int64_t> labels = labels_with_lone(n, 10, 143, 111);
  for (Metric metric : {Metric::N, Metric::E, Metric::C}) {
    INFO("metric " << metrics::metric_name(metric));
    const metrics::Points points = test::points_from(x, d, metric);
    // The keys come from two different f32 GEMMs (Eigen, cuBLAS): items whose keys differ by a
    // rounding error (~1e-6) may swap places. One swap at the top moves a recall@K by 1/994
    // (queries) and a mean AP by less than that; 3e-3 allows three such swaps and still fails on
    // any systematic error (a wrong self-exclusion or tie rule moves recall@1 by tens of %).
    require_same_result(evaluate(points, labels, 0, engine::Device::cuda()),
                        evaluate(points, labels, 0, engine::Device::cpu()), 3e-3);
  }
}
