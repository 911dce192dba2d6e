// All benign metrics of one embedding set (evaluate.h).
#include "metrics/evaluate.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "metrics/labels.h"

namespace metrics {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

nlohmann::ordered_json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

}  // namespace

Evaluation evaluate_embeddings(const Points& points, const std::vector<int64_t>& labels,
                               const EvaluationOptions& options) {
  Evaluation e;
  e.metric = points.metric;
  e.n = points.n;
  e.classes = static_cast<int64_t>(group_by_label(labels).classes.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();

  auto start = std::chrono::steady_clock::now();
  e.retrieval = evaluate_retrieval(points, labels, options.retrieval);
  e.seconds_retrieval = seconds_since(start);

  e.nmi = nan;
  if (options.clustering && points.n > 0) {
    start = std::chrono::steady_clock::now();
    KMeansOptions k;
    k.k = e.classes;
    k.seed = options.kmeans_seed;
    k.max_iterations = options.kmeans_iterations;
    k.restarts = options.kmeans_restarts;
    const KMeansResult clusters = kmeans(points, k);
    e.nmi = normalized_mutual_info(labels, clusters.assignment);
    e.kmeans_seed = k.seed;
    e.kmeans_restarts = k.restarts;
    e.kmeans_iterations = clusters.iterations;
    e.kmeans_converged = clusters.converged;
    e.seconds_clustering = seconds_since(start);
  }

  e.spread.intra = e.spread.inter = e.spread.ratio = nan;
  if (options.spread) {
    start = std::chrono::steady_clock::now();
    // pi_ratio is measured on L2-normalized embeddings whatever the ranking metric (issue 5):
    // metric E's raw rows are normalized for it, which makes its distance N's.
    e.spread =
        points.metric == Metric::E
            ? embedding_spread(make_points(points.x.data(), points.n, points.d, Metric::N), labels)
            : embedding_spread(points, labels);
    e.seconds_spread = seconds_since(start);
  }
  return e;
}

nlohmann::ordered_json metrics_json(const Evaluation& e) {
  const RetrievalResult& r = e.retrieval;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (size_t i = 0; i < e.retrieval.ks.size(); ++i) {
    j["recall@" + std::to_string(e.retrieval.ks[i])] = number_or_null(e.retrieval.recall[i]);
  }
  j["map"] = number_or_null(e.retrieval.map);
  j["map_at_r10"] = number_or_null(e.retrieval.map_at_r10);
  j["map_at_r"] = number_or_null(e.retrieval.map_at_r);
  j["nmi"] = number_or_null(e.nmi);
  j["pi_ratio"] = number_or_null(e.spread.ratio);
  j["r_precision"] = number_or_null(r.r_precision);
  j["mrr"] = number_or_null(r.mrr);
  // The same numbers under the names of PML's AccuracyCalculator (docs/metrics.md); r_precision
  // is spelled alike. Flat keys, so that every consumer of the log reads plain numbers.
  j["precision_at_1"] = number_or_null(r.precision_at_1);
  j["mean_average_precision"] = number_or_null(r.map);
  j["mean_average_precision_at_r"] = number_or_null(r.map_at_r);
  j["mean_reciprocal_rank"] = number_or_null(r.mrr);
  j["NMI"] = number_or_null(e.nmi);
  // PML's avg_of_avgs=True returns these under the plain names; here they carry a suffix.
  const ClassAverages& c = r.per_class;
  j["precision_at_1_avg_of_avgs"] = number_or_null(c.precision_at_1);
  j["r_precision_avg_of_avgs"] = number_or_null(c.r_precision);
  j["mean_average_precision_avg_of_avgs"] = number_or_null(c.map);
  j["mean_average_precision_at_r_avg_of_avgs"] = number_or_null(c.map_at_r);
  j["mean_reciprocal_rank_avg_of_avgs"] = number_or_null(c.mrr);
  // NMI depends on the clustering (docs/metrics.md): one k-means++ run, or the least-inertia of
  // kmeans_restarts runs seeded kmeans_seed, kmeans_seed + 1, ...
  const bool clustered = e.kmeans_restarts > 0;
  j["kmeans_seed"] = clustered ? nlohmann::ordered_json(e.kmeans_seed) : nullptr;
  j["kmeans_restarts"] = clustered ? nlohmann::ordered_json(e.kmeans_restarts) : nullptr;
  return j;
}

}  // namespace metrics
