#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/npy.h"
#include "metrics/evaluate.h"
#include "metrics/labels.h"
#include "tests/io/io_test_util.h"
#include "tests/metrics/metrics_test_util.h"

using metrics::Metric;

TEST_CASE("evaluate: json keys, order and values of the hand-computed set") {
  // The set of "recall@k: hand-computed set, metric E" (retrieval_test.cpp): recall@1 = 0,
  // recall@2 = 0.6, map = 0.45, map_at_r10 = 11/150, map_at_r = 0.1. pi_ratio is on L2-normalized
  // rows: 0 stays 0, the others become 1, so A = {0, 3, 8} -> {0, 1, 1} and B = {1, 4} -> {1, 1}:
  // pi_intra = (mean(1, 1, 0) + 0) / 2 = 1/3; means 2/3 and 1 are 1/3 apart -> pi_ratio = 1.
  // (On the raw rows it would be 25/7: spread_test.cpp has the E function itself.)
  metrics::EvaluationOptions options;
  options.retrieval.ks = {1, 2};
  const metrics::Evaluation e = metrics::evaluate_embeddings(
      test::points_from({0, 1, 3, 4, 8}, 1, Metric::E), {0, 1, 0, 1, 0}, options);
  const nlohmann::ordered_json j = metrics::metrics_json(e);
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  const std::vector<std::string> expected = {"recall@1",
                                             "recall@2",
                                             "map",
                                             "map_at_r10",
                                             "map_at_r",
                                             "nmi",
                                             "pi_ratio",
                                             "r_precision",
                                             "mrr",
                                             "precision_at_1",
                                             "mean_average_precision",
                                             "mean_average_precision_at_r",
                                             "mean_reciprocal_rank",
                                             "NMI",
                                             "precision_at_1_avg_of_avgs",
                                             "r_precision_avg_of_avgs",
                                             "mean_average_precision_avg_of_avgs",
                                             "mean_average_precision_at_r_avg_of_avgs",
                                             "mean_reciprocal_rank_avg_of_avgs",
                                             "kmeans_seed",
                                             "kmeans_restarts"};
  CHECK(keys == expected);
  // The defaults: one k-means++ run seeded 0.
  CHECK(j["kmeans_seed"].get<int64_t>() == 0);
  CHECK(j["kmeans_restarts"].get<int64_t>() == 1);
  CHECK(j["recall@1"].get<double>() == 0.0);
  CHECK(j["recall@2"].get<double>() == Approx(0.6).epsilon(1e-12));
  CHECK(j["map"].get<double>() == Approx(0.45).epsilon(1e-12));
  CHECK(j["map_at_r10"].get<double>() == Approx(11.0 / 150.0).epsilon(1e-12));
  CHECK(j["map_at_r"].get<double>() == Approx(0.1).epsilon(1e-12));
  CHECK(j["pi_ratio"].get<double>() == Approx(1.0).epsilon(1e-6));
  // The same set's R-precision and reciprocal ranks, from its relevant positions (the table in
  // retrieval_test.cpp): q0 pos 2, 4 (R 2): 1/2, 1/2; q1 pos 3 (R 1): 0, 1/3; q2 pos 3, 4: 0, 1/3;
  // q3 pos 2 (R 1): 0, 1/2; q4 pos 2, 4: 1/2, 1/2. r_precision = 1/5, mrr = (13/6) / 5 = 13/30.
  // Per class: A = {q0, q2, q4}, B = {q1, q3}:
  //   r_precision A 1/3, B 0 -> 1/6; mrr A (1/2 + 1/3 + 1/2)/3 = 4/9, B (1/3 + 1/2)/2 = 5/12
  //   -> (16/36 + 15/36)/2 = 31/72; precision_at_1 0 -> 0;
  //   map: A (1/2 + 5/12 + 1/2)/3 = 17/36, B (1/3 + 1/2)/2 = 5/12 -> (17/36 + 15/36)/2 = 4/9;
  //   map_at_r: A (1/4 + 0 + 1/4)/3 = 1/6, B 0 -> 1/12.
  CHECK(j["r_precision"].get<double>() == Approx(0.2).epsilon(1e-12));
  CHECK(j["mrr"].get<double>() == Approx(13.0 / 30.0).epsilon(1e-12));
  CHECK(j["precision_at_1"].get<double>() == 0.0);
  CHECK(j["mean_average_precision"].get<double>() == Approx(0.45).epsilon(1e-12));
  CHECK(j["mean_average_precision_at_r"].get<double>() == Approx(0.1).epsilon(1e-12));
  CHECK(j["mean_reciprocal_rank"].get<double>() == Approx(13.0 / 30.0).epsilon(1e-12));
  CHECK(j["NMI"] == j["nmi"]);
  CHECK(j["precision_at_1_avg_of_avgs"].get<double>() == 0.0);
  CHECK(j["r_precision_avg_of_avgs"].get<double>() == Approx(1.0 / 6.0).epsilon(1e-12));
  CHECK(j["mean_average_precision_avg_of_avgs"].get<double>() == Approx(4.0 / 9.0).epsilon(1e-12));
  CHECK(j["mean_average_precision_at_r_avg_of_avgs"].get<double>() ==
        Approx(1.0 / 12.0).epsilon(1e-12));
  CHECK(j["mean_reciprocal_rank_avg_of_avgs"].get<double>() == Approx(31.0 / 72.0).epsilon(1e-12));
  // k-means with k = 2 on the raw points 0, 1, 3, 4, 8 has three stable partitions, and which
  // one a seed reaches depends on the seeding: {0,1}|{3,4,8} and {0,1,3}|{4,8} both give
  // NMI 0.0205707 against the labels 0,1,0,1,0, {0,1,3,4}|{8} gives 0.2019644 (natural logs,
  // MI / ((H_U + H_V) / 2), computed by hand from the contingency tables).
  const double nmi = j["nmi"].get<double>();
  const bool one_of_the_partitions =
      std::abs(nmi - 0.02057065945069301) < 1e-9 || std::abs(nmi - 0.20196437645642726) < 1e-9;
  INFO("nmi " << nmi);
  CHECK(one_of_the_partitions);
  CHECK(e.classes == 2);
}

TEST_CASE("evaluate: undefined values become null in json") {
  // Every label distinct: no query has a relevant item and no class has a pair.
  const metrics::Evaluation e =
      metrics::evaluate_embeddings(test::points_from({0, 1, 3}, 1, Metric::E), {0, 1, 2});
  const nlohmann::ordered_json j = metrics::metrics_json(e);
  CHECK(j["map"].is_null());
  CHECK(j["recall@1"].is_null());
  CHECK(j["r_precision"].is_null());
  CHECK(j["mrr"].is_null());
  CHECK(j["precision_at_1"].is_null());
  CHECK(j["mean_reciprocal_rank_avg_of_avgs"].is_null());
  CHECK(j["pi_ratio"].is_null());
  CHECK(j["nmi"].get<double>() == Approx(1.0));  // k = 3 singletons: a perfect partition
}

TEST_CASE("evaluate: the json says how NMI was clustered, null without NMI") {
  metrics::EvaluationOptions options;
  options.kmeans_seed = 7;
  options.kmeans_restarts = 3;
  const metrics::Points points = test::points_from({0, 1, 3, 4, 8}, 1, Metric::E);
  const std::vector<int64_t> labels = {0, 1, 0, 1, 0};
  nlohmann::ordered_json j =
      metrics::metrics_json(metrics::evaluate_embeddings(points, labels, options));
  CHECK(j["kmeans_seed"].get<int64_t>() == 7);
  CHECK(j["kmeans_restarts"].get<int64_t>() == 3);
  options.clustering = false;
  j = metrics::metrics_json(metrics::evaluate_embeddings(points, labels, options));
  CHECK(j["nmi"].is_null());
  CHECK(j["kmeans_seed"].is_null());
  CHECK(j["kmeans_restarts"].is_null());
}

TEST_CASE("evaluate: labels from i64, i32 and u8 .npy files; errors name the file") {
  test::TempDir dir;
  // Labels [2, 0, 2] stored as each integer dtype dml metrics accepts.
  const std::vector<std::pair<engine::NpyDType, std::vector<uint8_t>>> files = {
      {engine::NpyDType::I64,
       {2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}},
      {engine::NpyDType::I32, {2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0}},
      {engine::NpyDType::U8, {2, 0, 2}}};
  for (const auto& [dtype, bytes] : files) {
    const std::string path = dir.file("labels_" + std::to_string(bytes.size()) + ".npy");
    engine::write_npy(path, engine::NpyArray{dtype, {3}, bytes});
    CHECK(metrics::labels_from_tensor(engine::load_npy(path), 3, path) ==
          std::vector<int64_t>{2, 0, 2});
  }
  const std::string floats = dir.file("float_labels.npy");
  engine::save_npy(floats, engine::Tensor::from_vector({1, 2, 3}, {3}));
  CHECK_THROWS_WITH(metrics::labels_from_tensor(engine::load_npy(floats), 3, floats),
                    Catch::Contains("float_labels.npy") && Catch::Contains("integers"));
  const std::string u8 = dir.file("labels_3.npy");
  CHECK_THROWS_WITH(metrics::labels_from_tensor(engine::load_npy(u8), 4, u8),
                    Catch::Contains("3 labels for 4 embeddings"));
  CHECK_THROWS_WITH(
      metrics::labels_from_tensor(engine::Tensor::from_indices({1, 2}, {1, 2}), 2, "L.npy"),
      Catch::Contains("L.npy: labels must be 1-D"));
  CHECK_THROWS_WITH(metrics::make_points(engine::Tensor::zeros({4}), Metric::N, "E.npy"),
                    Catch::Contains("E.npy: embeddings must be 2-D"));
}

TEST_CASE("evaluate: embeddings too large for f32 distances are refused, not ranked as NaN") {
  // Metric E keeps raw rows: a row of norm 1e19 has a squared norm past FLT_MAX / 4, where a key
  // |a|^2 + |b|^2 - 2 a.b could be inf - inf. Normalizing metrics (N, C) take the same row.
  const engine::Tensor huge = engine::Tensor::from_vector({1e19, 0, 0, 1, 1, 0}, {3, 2});
  CHECK_THROWS_WITH(metrics::make_points(huge, Metric::E, "E.npy"),
                    Catch::Contains("E.npy") && Catch::Contains("embedding row 0 has norm 1e+19") &&
                        Catch::Contains("too large for f32 distances"));
  CHECK(metrics::make_points(huge, Metric::N, "E.npy").n == 3);
  const engine::Tensor large = engine::Tensor::from_vector({9e18, 0, 0, 1, 1, 0}, {3, 2});
  CHECK(metrics::make_points(large, Metric::E, "E.npy").n == 3);  // just inside the limit
  const engine::Tensor inf =
      engine::Tensor::from_vector({1, 2, 3, std::numeric_limits<double>::infinity()}, {2, 2});
  CHECK_THROWS_WITH(metrics::make_points(inf, Metric::N, "E.npy"),
                    Catch::Contains("row 1 column 1 is not finite"));
}
