// dml metrics: retrieval and clustering metrics of saved embeddings (docs/architecture.md).
//
//   dml metrics --embeddings E.npy --labels L.npy [--metric N|E|C] [--k 1,2,4] [--json]
//               [--device cpu|cuda[:N]]
//
// E.npy: [N, D] f32 or f64. L.npy: [N] integer labels (i64, i32 or u8). Query set = gallery =
// the set, each query's own row excluded by index. The numbers come from metrics/evaluate.h;
// --device picks where the ranking (recall@K and the mAPs) runs (metrics/retrieval.h).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/io/npy.h"
#include "kernels/common/check.h"
#include "metrics/evaluate.h"
#include "metrics/labels.h"
#include "tools/dml/commands.h"
#include "tools/dml/trainer.h"

namespace dml {

namespace {

const char kUsage[] =
    "usage: dml metrics --embeddings E.npy --labels L.npy [options]\n"
    "\n"
    "Retrieval and clustering metrics of an embedding set (query set = gallery = the set; each\n"
    "query's own row is excluded by index).\n"
    "\n"
    "  --embeddings FILE   [N, D] .npy, f32 or f64\n"
    "  --labels FILE       [N] .npy, i64, i32 or u8 class labels\n"
    "  --metric N|E|C      N: L2-normalize then Euclidean (default); E: Euclidean; C: 1 - cosine\n"
    "  --k LIST            recall@K for each K (default 1,2,4)\n"
    "  --json              print one JSON object: recall@K..., map, map_at_r10, map_at_r, nmi,\n"
    "                      pi_ratio, r_precision, mrr, then the same under PML's names and PML's\n"
    "                      per-class averages (fractions in [0, 1]; pi_ratio unbounded; null if\n"
    "                      undefined; docs/metrics.md)\n"
    "  --seed S            k-means++ seed for NMI (default 0)\n"
    "  --kmeans-iterations I   at most I k-means assignment steps, I - 1 center updates\n"
    "                      (default 25)\n"
    "  --kmeans-restarts R     NMI from the least-inertia of R k-means++ runs seeded S, S+1, ...\n"
    "                          (default 1: one run, as robrank and PML; docs/metrics.md)\n"
    "  --device DEV        cpu, cuda or cuda:N (default: cuda when a GPU is present): where the\n"
    "                      ranking (recall@K, map, map_at_r10, map_at_r, r_precision, mrr)\n"
    "                      runs; NMI and pi_ratio stay on the CPU\n"
    "\n"
    "map: AP over the full ranking; map_at_r10: robrank's mAP@R with R fixed to 10; map_at_r:\n"
    "PML's mAP@R with R = the query's same-class count; r_precision: the fraction of the first R\n"
    "neighbours in the query's class; mrr: the mean of 1 / the rank of the first one. 'per "
    "class':\n"
    "each class's queries averaged, then the classes (PML's avg_of_avgs). Queries with no other\n"
    "item of their class are left out of the ranking metrics; an exact distance tie ranks the\n"
    "smaller index first.\n"
    "nmi: k-means++ with k = number of classes, arithmetic normalization. pi_ratio: mean\n"
    "intra-class distance / mean distance between class means, on L2-normalized rows (E as N).\n";

void print_table(const metrics::Evaluation& e, const std::string& embeddings_path) {
  std::printf("embeddings  %s\n", embeddings_path.c_str());
  std::printf("items       %lld in %lld classes, metric %s\n", static_cast<long long>(e.n),
              static_cast<long long>(e.classes), metrics::metric_name(e.metric));
  std::printf("queries     %lld scored, %lld without a same-class item (left out)\n\n",
              static_cast<long long>(e.retrieval.queries),
              static_cast<long long>(e.retrieval.lone_queries));
  print_ranking_rows(e);
  std::printf("%-12s %8.2f   (k-means: %lld iterations, %s)\n", "nmi", 100.0 * e.nmi,
              static_cast<long long>(e.kmeans_iterations),
              e.kmeans_converged ? "converged" : "iteration limit");
  std::printf("%-12s %8.4f   (ratio, not %%: intra %.4f / inter %.4f)\n", "pi_ratio",
              e.spread.ratio, e.spread.intra, e.spread.inter);
  print_class_average_rows(e);
  std::printf("\ntime        ranking %.1f s (%s), k-means %.1f s, pi_ratio %.1f s\n",
              e.seconds_retrieval, e.retrieval.device.str().c_str(), e.seconds_clustering,
              e.seconds_spread);
}

}  // namespace

int run_metrics(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string embeddings_path = args.take_string("--embeddings");
  const std::string labels_path = args.take_string("--labels");
  const metrics::Metric metric = take_metric_option(args).value_or(metrics::Metric::N);
  const std::vector<int64_t> ks = parse_int_list(args.take_string("--k", "1,2,4"), "--k");
  const bool json = args.take_flag("--json");
  const int64_t seed = args.take_int("--seed", 0);
  const int64_t iterations = args.take_int("--kmeans-iterations", 25);
  const int64_t restarts = args.take_int("--kmeans-restarts", 1);
  const std::optional<std::string> device_text = args.take_optional("--device");
  args.finish();

  for (int64_t k : ks) {
    if (k < 1) throw UsageError("--k: every K must be >= 1, got " + std::to_string(k));
  }
  if (seed < 0) throw UsageError("--seed: must be >= 0, got " + std::to_string(seed));
  if (iterations < 1) {
    throw UsageError("--kmeans-iterations: must be >= 1, got " + std::to_string(iterations));
  }
  if (restarts < 1) {
    throw UsageError("--kmeans-restarts: must be >= 1, got " + std::to_string(restarts));
  }
  // Before reading the (possibly large) files: a missing GPU is a runtime error (exit 1).
  const engine::Device device = parse_device_option(device_text);
  require_input_file(embeddings_path, "--embeddings");
  require_input_file(labels_path, "--labels");

  metrics::Points points;
  {  // the tensor is released once the prepared copy exists (peak memory)
    const engine::Tensor embeddings = engine::load_npy(embeddings_path);
    points = metrics::make_points(embeddings, metric, embeddings_path);
  }
  ENGINE_CHECK(points.n >= 1, embeddings_path, ": no embeddings (shape [0, ", points.d, "])");
  const std::vector<int64_t> labels =
      metrics::labels_from_tensor(engine::load_npy(labels_path), points.n, labels_path);

  metrics::EvaluationOptions options;
  options.retrieval.ks = ks;
  options.retrieval.device = device;
  options.kmeans_seed = static_cast<uint64_t>(seed);
  options.kmeans_iterations = iterations;
  options.kmeans_restarts = restarts;
  const metrics::Evaluation e = metrics::evaluate_embeddings(points, labels, options);
  if (e.retrieval.queries == 0) {
    std::fprintf(stderr,
                 "dml metrics: warning: no item of %s shares its label with another item; the "
                 "ranking metrics are undefined\n",
                 labels_path.c_str());
  }
  if (json) {
    std::printf("%s\n", metrics::metrics_json(e).dump().c_str());
  } else {
    print_table(e, embeddings_path);
  }
  return 0;
}

}  // namespace dml
