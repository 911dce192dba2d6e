// dml hardness: the mean and variance of the triplet hardness H(A, P, N) = d(a, p) - d(a, n)
// (Zhou & Patel CVPR'22, eq. 2; shared/seeds/003) of each triplet miner, as that paper's Table 1
// ("Mean & variance of hardness w/ various triplet samplers. Calculated as the average statistics
// over 1000 mini-batches").
//
//   dml hardness --checkpoint FILE [--split train] [--batches 1000] [--out FILE.json] ...
//   dml hardness --embeddings E.npy --labels L.npy --pairs-per-batch P [--out FILE.json] ...
//
// Per mini-batch of P triplets (an SPC-2 batch of 2P embeddings) and per miner: the batch's mean
// of H and its sample variance (n - 1 = P - 1, torch.var's default, the paper's code being
// PyTorch); E[H] and Var[H] are those two averaged over the batches. H comes from the miners' own
// mining distances (losses/miners.h): under metric N the embeddings are L2-normalized, so H lies in
// [-2, 2] as the paper says. docs/defenses.md, "Hardness of the miners".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "data/sampler.h"
#include "engine/io/file_io.h"
#include "engine/io/npy.h"
#include "engine/ops.h"
#include "engine/precision.h"
#include "engine/random.h"
#include "engine/text.h"
#include "kernels/common/check.h"
#include "losses/miners.h"
#include "metrics/labels.h"
#include "tools/dml/commands.h"
#include "tools/dml/load_model.h"
#include "tools/dml/output_files.h"
#include "tools/dml/split_stream.h"

namespace dml {

namespace {

const char kUsage[] =
    "usage: dml hardness (--checkpoint FILE | --embeddings E.npy --labels L.npy) [options]\n"
    "\n"
    "E[H] and Var[H] of each triplet miner, H = d(a,p) - d(a,n) (Zhou & Patel CVPR'22, eq. 2 and\n"
    "Table 1): per mini-batch the mean and the sample variance (n - 1) of H over its P triplets,\n"
    "averaged over the mini-batches. docs/defenses.md, \"Hardness of the miners\".\n"
    "\n"
    "  --checkpoint FILE    a `dml train` model.safetensors or checkpoint.safetensors: embeds the\n"
    "                       first --max-images images of --split (eval mode) and draws SPC-2\n"
    "                       batches of them as training does (data/sampler.h, seeded with --seed,\n"
    "                       full batches only)\n"
    "  --data NAME --split SPLIT --root DIR\n"
    "                       the images (default: the training data set, split train)\n"
    "  --max-images M       only the first M images of the split (default 0 = all)\n"
    "  --batches N          mini-batches (default 1000, as the paper)\n"
    "  --embeddings FILE    instead of a model: float .npy [N, D] already in SPC-2 order\n"
    "                       [a0, p0, a1, p1, ...]; consecutive batches of 2P rows\n"
    "  --labels FILE        their integer .npy labels [N] (labels[2i] == labels[2i+1])\n"
    "  --pairs-per-batch P  triplets per batch (default robrank's: 128 for 28x28 images, 56 = the\n"
    "                       paper's 112 images for 224x224; required with --embeddings, whose\n"
    "                       N must be a multiple of 2P)\n"
    "  --miners LIST        comma-separated (default random,semihard,softhard,distance,hardest)\n"
    "  --metric N|E|C       distance (default: the training loss's metric; N for --embeddings)\n"
    "  --margin M           semihard's band width (default 0.2 for N and C, 1.0 for E)\n"
    "  --seed S             seed of the batches and of the miners' draws (default 0)\n"
    "  --batch-size B       images per forward pass (default 256)\n"
    "  --device DEV         cpu, cuda or cuda:N (default: cuda when a GPU is present)\n"
    "  --out FILE           also write the JSON (an existing file only with --overwrite)\n"
    "  --overwrite          replace an existing --out file\n";

// A source of SPC-2 batches: the embeddings and labels of batch k.
struct Batches {
  std::string source;  // for the output: the checkpoint or the embeddings file
  // A checkpoint's: the precision it was trained in and the one it was embedded in here ("" for
  // an embeddings file, made elsewhere).
  std::string trained_precision, precision;
  int64_t count = 0;
  int64_t pairs = 0;
  std::function<std::pair<engine::Tensor, engine::Tensor>(int64_t)> batch;
};

// Running sums per miner over the batches.
struct MinerStats {
  losses::Miner miner;
  std::vector<double> batch_means, batch_variances;
};

std::vector<losses::Miner> parse_miners(const std::string& text) {
  std::vector<losses::Miner> miners;
  std::stringstream stream(text);
  std::string name;
  while (std::getline(stream, name, ',')) {
    const std::optional<losses::Miner> miner = losses::find_miner(name);
    if (!miner) {
      throw UsageError("--miners: unknown miner '" + name +
                       "' (known: " + engine::join(losses::miner_names()) + ")");
    }
    miners.push_back(*miner);
  }
  if (miners.empty()) throw UsageError("--miners: no miner named");
  return miners;
}

double mean_of(const std::vector<double>& v) {
  double sum = 0.0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// Sample variance, n - 1 in the denominator (v has at least two values).
double sample_variance(const std::vector<double>& v) {
  const double mean = mean_of(v);
  double squares = 0.0;
  for (double x : v) squares += (x - mean) * (x - mean);
  return squares / static_cast<double>(v.size() - 1);
}

Batches embedding_batches(const std::string& embeddings_path, const std::string& labels_path,
                          int64_t pairs) {
  auto embeddings = std::make_shared<engine::Tensor>(engine::load_npy(embeddings_path));
  ENGINE_CHECK(embeddings->dim() == 2 && engine::is_floating(embeddings->dtype()), embeddings_path,
               ": expected float embeddings [N, D], got ", embeddings->str());
  const int64_t n = embeddings->size(0);
  auto labels = std::make_shared<std::vector<int64_t>>(
      metrics::labels_from_tensor(engine::load_npy(labels_path), n, labels_path));
  ENGINE_CHECK(n > 0 && n % (2 * pairs) == 0, embeddings_path, ": ", n,
               " rows are not whole batches of 2 x --pairs-per-batch = ", 2 * pairs);
  for (int64_t i = 0; i < n; i += 2) {
    ENGINE_CHECK((*labels)[static_cast<size_t>(i)] == (*labels)[static_cast<size_t>(i + 1)],
                 labels_path, ": rows ", i, " and ", i + 1,
                 " are an anchor and its positive (SPC-2 order) but have labels ",
                 (*labels)[static_cast<size_t>(i)], " and ", (*labels)[static_cast<size_t>(i + 1)]);
  }
  Batches b;
  b.source = embeddings_path;
  b.count = n / (2 * pairs);
  b.pairs = pairs;
  b.batch = [embeddings, labels, pairs](int64_t k) {
    const int64_t rows = 2 * pairs, first = k * rows;
    std::vector<int64_t> index(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) index[static_cast<size_t>(i)] = first + i;
    const std::vector<int64_t> batch_labels(labels->begin() + first,
                                            labels->begin() + first + rows);
    return std::make_pair(
        engine::index_select(*embeddings, engine::Tensor::from_indices(index, {rows}, {})),
        engine::Tensor::from_indices(batch_labels, {rows}, {}));
  };
  return b;
}

// Prints the table and returns the JSON.
nlohmann::ordered_json report(const std::vector<MinerStats>& stats, const Batches& batches,
                              losses::Metric metric, double margin, int64_t seed) {
  nlohmann::ordered_json out;
  out["source"] = batches.source;
  if (!batches.precision.empty()) {
    out["precision"] = batches.precision;
    out["trained_precision"] = batches.trained_precision;
  }
  out["metric"] = losses::metric_name(metric);
  out["margin"] = margin;
  out["batches"] = batches.count;
  out["pairs_per_batch"] = batches.pairs;
  out["seed"] = seed;
  out["hardness"] = "H = d(a,p) - d(a,n) under the metric (N: L2-normalized embeddings)";
  out["statistics"] =
      "mean: average over batches of the batch's mean H; var: average over batches of the "
      "batch's sample variance (n - 1) of H; var_of_batch_means: sample variance of the batch "
      "means";
  nlohmann::ordered_json miners;
  std::printf("hardness H = d(a,p) - d(a,n), metric %s, %lld batches of %lld triplets, seed %lld\n",
              losses::metric_name(metric), static_cast<long long>(batches.count),
              static_cast<long long>(batches.pairs), static_cast<long long>(seed));
  std::printf("%-10s %10s %10s %18s\n", "miner", "E[H]", "Var[H]", "Var[batch means]");
  for (const MinerStats& s : stats) {
    const double mean = mean_of(s.batch_means), var = mean_of(s.batch_variances);
    nlohmann::ordered_json m;
    m["mean"] = mean;
    m["var"] = var;
    m["var_of_batch_means"] = s.batch_means.size() > 1
                                  ? nlohmann::ordered_json(sample_variance(s.batch_means))
                                  : nlohmann::ordered_json(nullptr);
    miners[losses::miner_name(s.miner)] = m;
    std::printf("%-10s %10.4f %10.5f %18s\n", losses::miner_name(s.miner), mean, var,
                m["var_of_batch_means"].is_null()
                    ? "-"
                    : std::to_string(m["var_of_batch_means"].get<double>()).c_str());
  }
  out["miners"] = miners;
  return out;
}

// The command line, read and checked before any work.
struct HardnessOptions {
  std::optional<std::string> checkpoint, embeddings, labels, device;
  SplitOptions split;
  std::string out_path;
  int64_t max_images = 0, batches = 0, pairs = 0, seed = 0, batch_size = 0;
  std::vector<losses::Miner> miners;
  std::optional<losses::Metric> metric;
  std::optional<double> margin;
  ExistingResult existing;
};

HardnessOptions take_hardness_options(Args& args) {
  HardnessOptions o;
  o.checkpoint = args.take_optional("--checkpoint");
  o.embeddings = args.take_optional("--embeddings");
  o.labels = args.take_optional("--labels");
  o.split = take_split_options(args, "train");
  o.max_images = args.take_int("--max-images", 0);
  o.batches = args.take_int("--batches", 1000);
  o.pairs = args.take_int("--pairs-per-batch", 0);
  o.miners =
      parse_miners(args.take_string("--miners", "random,semihard,softhard,distance,hardest"));
  o.metric = take_metric_option(args);
  const std::optional<std::string> margin_text = args.take_optional("--margin");
  o.seed = args.take_int("--seed", 0);
  o.batch_size = args.take_int("--batch-size", 256);
  o.device = args.take_optional("--device");
  o.out_path = args.take_string("--out", "");
  o.existing = take_existing_result_flags(args, /*can_resume=*/false);
  args.finish();

  if (o.checkpoint.has_value() == o.embeddings.has_value()) {
    throw UsageError("give either --checkpoint FILE or --embeddings FILE --labels FILE");
  }
  if (o.embeddings.has_value() != o.labels.has_value()) {
    throw UsageError("--embeddings and --labels go together");
  }
  if (o.embeddings && (o.split.data || o.split.root || o.max_images != 0)) {
    throw UsageError("--data, --root and --max-images are for --checkpoint");
  }
  if (o.embeddings && o.pairs == 0) throw UsageError("--embeddings needs --pairs-per-batch P");
  if (o.pairs < 0 || o.pairs == 1) {
    throw UsageError("--pairs-per-batch must be >= 2 (a variance needs two triplets)");
  }
  if (o.batches < 1) throw UsageError("--batches must be >= 1");
  if (o.max_images < 0) throw UsageError("--max-images must be >= 0");
  if (o.seed < 0) throw UsageError("--seed must be >= 0");
  if (o.batch_size <= 0) throw UsageError("--batch-size must be positive");
  if (margin_text) {
    char* end = nullptr;
    o.margin = std::strtod(margin_text->c_str(), &end);
    if (margin_text->empty() || *end != '\0' || !std::isfinite(*o.margin)) {
      throw UsageError("--margin: not a finite number: '" + *margin_text + "'");
    }
  }
  return o;
}

// SPC-2 batches of a checkpoint's embeddings of --split, drawn as training draws them; `metric`
// becomes the training loss's unless --metric chose one.
Batches checkpoint_batches(const HardnessOptions& o, losses::Metric& metric) {
  refuse_output_over_input(o.out_path, "--out", *o.checkpoint, "--checkpoint");
  const engine::Device device = parse_device_option(o.device);
  const TrainedModel trained = load_trained_model(*o.checkpoint, device);
  metric = o.metric.value_or(trained.metric);
  const std::string dataset_name = o.split.dataset_name(trained);
  const std::unique_ptr<data::Dataset> dataset = open_split(o.split, trained);
  const int64_t m = o.max_images > 0 ? std::min(o.max_images, dataset->size()) : dataset->size();
  // robrank's training batches (its SPC-2 sampler; docs/references.md): 128 pairs for 28 x 28
  // images, 56 pairs (the paper's 112 images) for 224 x 224.
  const int64_t pairs = o.pairs > 0 ? o.pairs : (dataset->image_shape().back() <= 28 ? 128 : 56);
  if (2 * pairs > m) {
    throw UsageError("a batch of " + std::to_string(pairs) + " pairs needs " +
                     std::to_string(pairs) + " images; " + dataset_name + " " + o.split.split +
                     " gives " + std::to_string(m));
  }
  auto labels = std::make_shared<std::vector<int64_t>>(split_labels(*dataset, m));
  auto embeddings =
      std::make_shared<engine::Tensor>(embed_split(*trained.model, *dataset, m, o.batch_size));
  auto sampler = std::make_shared<data::Spc2Sampler>(*labels, pairs, static_cast<uint64_t>(o.seed),
                                                     /*drop_last=*/true);
  Batches batches;
  batches.source = *o.checkpoint;
  batches.trained_precision = engine::precision_name(trained.precision);
  batches.precision = engine::precision_name(engine::precision());
  batches.count = o.batches;
  batches.pairs = pairs;
  batches.batch = [embeddings, labels, sampler](int64_t) {
    const std::vector<int64_t> index = sampler->next();
    std::vector<int64_t> batch_labels;
    for (int64_t i : index) batch_labels.push_back((*labels)[static_cast<size_t>(i)]);
    const int64_t rows = static_cast<int64_t>(index.size());
    return std::make_pair(
        engine::index_select(*embeddings, engine::Tensor::from_indices(index, {rows}, {})),
        engine::Tensor::from_indices(batch_labels, {rows}, {}));
  };
  return batches;
}

// Every miner on every batch: one stream for all the miners' draws, batch after batch, miner
// after miner (each takes 2P).
std::vector<MinerStats> measure_miners(const Batches& batches,
                                       const std::vector<losses::Miner>& miners,
                                       losses::Metric metric, double margin, int64_t seed) {
  engine::Generator gen(static_cast<uint64_t>(seed));
  std::vector<MinerStats> stats;
  for (losses::Miner miner : miners) stats.push_back({miner, {}, {}});
  for (int64_t k = 0; k < batches.count; ++k) {
    const auto [embeddings, labels] = batches.batch(k);
    for (MinerStats& s : stats) {
      const losses::Triplets t =
          losses::mine_triplets(embeddings, labels, s.miner, metric, gen, margin);
      const std::vector<double> h = t.hardness.to(engine::DType::F64).to_vector();
      s.batch_means.push_back(mean_of(h));
      s.batch_variances.push_back(sample_variance(h));
    }
  }
  return stats;
}

}  // namespace

int run_hardness(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const HardnessOptions o = take_hardness_options(args);
  check_result_file(o.out_path, "--out", o.existing);

  Batches batches;
  losses::Metric metric = o.metric.value_or(losses::Metric::N);
  if (o.embeddings) {
    require_input_file(*o.embeddings, "--embeddings");
    require_input_file(*o.labels, "--labels");
    batches = embedding_batches(*o.embeddings, *o.labels, o.pairs);
    batches.count = std::min(batches.count, o.batches);
  } else {
    batches = checkpoint_batches(o, metric);
  }
  const double margin = o.margin.value_or(losses::default_margin(metric));
  const std::vector<MinerStats> stats = measure_miners(batches, o.miners, metric, margin, o.seed);
  const nlohmann::ordered_json out = report(stats, batches, metric, margin, o.seed);
  if (!o.out_path.empty()) {
    engine::detail::write_file_atomically(o.out_path, out.dump(2) + "\n");
    std::printf("wrote %s\n", o.out_path.c_str());
  }
  return 0;
}

}  // namespace dml
