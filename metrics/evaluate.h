// Every benign metric of one embedding set in one call: what `dml metrics` prints and what an
// evaluation after training logs (docs/architecture.md). Retrieval (retrieval.h), NMI from seeded
// k-means++ (clustering.h) and pi_ratio (spread.h), all on the same prepared points.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/clustering.h"
#include "metrics/distance.h"
#include "metrics/retrieval.h"
#include "metrics/spread.h"

namespace metrics {

struct EvaluationOptions {
  RetrievalOptions retrieval;  // ks and tiling
  uint64_t kmeans_seed = 0;
  int64_t kmeans_iterations = 25;
  int64_t kmeans_restarts = 1;  // clustering.h: the least-inertia of this many k-means++ runs
  bool clustering = true;       // NMI (k-means: the slowest part after the ranking on large sets)
  bool spread = true;           // pi_ratio
};

struct Evaluation {
  Metric metric = Metric::N;
  int64_t n = 0;
  int64_t classes = 0;
  RetrievalResult retrieval;
  double nmi = 0.0;             // NaN when not computed
  uint64_t kmeans_seed = 0;     // the clustering NMI came from: first seed and number of runs
  int64_t kmeans_restarts = 0;  // (0 when NMI was not computed)
  int64_t kmeans_iterations = 0;
  bool kmeans_converged = false;
  Spread spread;
  double seconds_retrieval = 0.0, seconds_clustering = 0.0, seconds_spread = 0.0;
};

Evaluation evaluate_embeddings(const Points& points, const std::vector<int64_t>& labels,
                               const EvaluationOptions& options = {});

// {"recall@1": .., "recall@2": .., ..., "map": .., "map_at_r10": .., "map_at_r": .., "nmi": ..,
//  "pi_ratio": .., "r_precision": .., "mrr": .., then PML's names: "precision_at_1",
//  "mean_average_precision", "mean_average_precision_at_r", "mean_reciprocal_rank", "NMI", and
//  PML's avg_of_avgs as "<PML name>_avg_of_avgs" for its five ranking metrics, then how NMI was
//  clustered: "kmeans_seed" and "kmeans_restarts" (null when NMI was not computed)} in this
// order: fractions in [0, 1] (pi_ratio unbounded); NaN becomes null. The table: docs/metrics.md.
nlohmann::ordered_json metrics_json(const Evaluation& evaluation);

}  // namespace metrics
