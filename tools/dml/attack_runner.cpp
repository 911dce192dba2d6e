// Attacks over a split (header: tools/dml/attack_runner.h).
#include "tools/dml/attack_runner.h"

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>

#include "data/png_writer.h"
#include "engine/dist/communicator.h"
#include "engine/io/npy.h"
#include "engine/random.h"
#include "kernels/common/check.h"
#include "tools/dml/distributed.h"
#include "tools/dml/split_stream.h"

namespace dml {

SplitImages split_images(const data::Dataset& dataset) {
  const int64_t n = dataset.size();
  ENGINE_CHECK(n > 1, dataset.name(), " ", dataset.split(), ": an attack needs at least 2 images");
  SplitImages split;
  split.dataset = &dataset;
  split.labels = split_labels(dataset, n);
  return split;
}

namespace {

void dump_pairs(const std::string& dir, const std::string& label, const engine::Tensor& original,
                const engine::Tensor& adversarial, int64_t first_index, int64_t count) {
  std::filesystem::create_directories(dir);
  const engine::Tensor orig = original.to(engine::Device::cpu());
  const engine::Tensor adv = adversarial.to(engine::Device::cpu());
  std::string safe = label;
  std::replace(safe.begin(), safe.end(), '+', 'p');
  std::replace(safe.begin(), safe.end(), '-', 'm');
  for (int64_t i = 0; i < std::min(count, orig.size(0)); ++i) {
    const std::string stem = dir + "/" + safe + "_" + std::to_string(first_index + i);
    data::write_png(stem + "_orig.png", orig.select(0, i));
    data::write_png(stem + "_adv.png", adv.select(0, i));
  }
}

// The random blocks that attacking one full batch draws from the attack's stream, counted on
// batch 0 with a copy of the stream: a batch's draws (the plan's selection, the random start's
// seed) depend on the number of rows, the gallery and the spec, not on the pixels, nor on the
// PGD steps (pgd_attack draws from its own seed), so one step is attacked. Every later full
// batch of the run is checked to draw as many (run_attack).
uint64_t full_batch_blocks(models::Model& model, const SplitImages& split,
                           const attacks::Gallery& gallery, const attacks::AttackSpec& spec,
                           int64_t batch_size, const attacks::AttackOptions& options,
                           const engine::Generator& gen) {
  attacks::AttackSpec one_step = spec;
  one_step.pgd.steps = 1;
  engine::Generator copy = gen;
  const int64_t rows = std::min<int64_t>(batch_size, static_cast<int64_t>(split.labels.size()));
  for_each_split_batch_in(
      *split.dataset, rows, batch_size, 0, 1, [&](int64_t, const engine::Tensor& images) {
        std::vector<int64_t> labels(split.labels.begin(), split.labels.begin() + rows);
        std::vector<int64_t> self_index(static_cast<size_t>(rows));
        for (int64_t i = 0; i < rows; ++i) self_index[static_cast<size_t>(i)] = i;
        attacks::attack_batch(model, images, labels, self_index, gallery, one_step, copy, options);
      });
  return copy.offset - gen.offset;
}

// The batches this process attacks: all of them, or with split_over_ranks its share over the MPI
// ranks, `gen` then moved to where a single process's stream is at the share's first batch.
struct ProcessBatches {
  engine::dist::Share share;
  uint64_t blocks_per_batch = 0;  // what one full batch draws, where counted (else 0)
};
ProcessBatches batches_of_this_process(models::Model& model, const SplitImages& split,
                                       const attacks::Gallery& gallery,
                                       const attacks::AttackSpec& spec,
                                       const AttackRunSettings& settings,
                                       const attacks::AttackOptions& options, int64_t batches,
                                       engine::Generator& gen) {
  ProcessBatches process{engine::dist::Share{0, batches}, 0};
  if (!settings.split_over_ranks) return process;
  ENGINE_CHECK(spec.nes.population == 0 && settings.source_model == nullptr &&
                   settings.save_adversarial.empty(),
               "run_attack: only a white-box attack without save_adversarial is split over ranks");
  const engine::dist::World& world = engine::dist::world();
  process.share = engine::dist::share_of(batches, world.rank, world.size);
  if (process.share.begin > 0) {
    process.blocks_per_batch =
        full_batch_blocks(model, split, gallery, spec, settings.batch_size, options, gen);
    gen.offset += static_cast<uint64_t>(process.share.begin) * process.blocks_per_batch;
  }
  return process;
}

// The summary before the first batch: the attack named, the pixel range empty.
AttackSummary empty_summary(const attacks::AttackSpec& spec) {
  AttackSummary summary;
  summary.spec = attacks::attack_spec_string(spec);
  summary.label = attacks::attack_label(spec);
  summary.perturbation.min_pixel = std::numeric_limits<double>::infinity();
  summary.perturbation.max_pixel = -std::numeric_limits<double>::infinity();
  return summary;
}

// The .npy file of the adversarial images [n, image shape...] (null for an empty path).
std::unique_ptr<engine::NpyRowWriter> open_adversarial_file(const std::string& path,
                                                            const data::Dataset& dataset,
                                                            int64_t n) {
  if (path.empty()) return nullptr;
  engine::Shape shape = {n};
  for (int64_t d : dataset.image_shape()) shape.push_back(d);
  return std::make_unique<engine::NpyRowWriter>(path, engine::DType::F32, shape);
}

// The sums of each measure over this process's batches and, when the batches are split over
// ranks, the per-image values that the gather after the last batch needs.
struct MeasureTally {
  std::vector<double> sum_clean, sum_adversarial;
  std::vector<std::vector<double>> clean_values, adversarial_values;
};

// Adds one batch's measures to the tally (its values too with keep_values) and its perturbation
// report to the summary's worst case; the first batch names the measures.
void tally_batch(const attacks::BatchResult& r, bool keep_values, AttackSummary& summary,
                 MeasureTally& tally) {
  if (summary.names.empty()) {  // this process's first batch
    for (const auto& [name, values] : r.clean) summary.names.push_back(name);
    tally.sum_clean.assign(summary.names.size(), 0.0);
    tally.sum_adversarial.assign(summary.names.size(), 0.0);
    tally.clean_values.resize(summary.names.size());
    tally.adversarial_values.resize(summary.names.size());
  }
  for (size_t m = 0; m < summary.names.size(); ++m) {
    for (double v : r.clean[m].second) tally.sum_clean[m] += v;
    for (double v : r.adversarial[m].second) tally.sum_adversarial[m] += v;
    if (keep_values) {
      const std::vector<double>& c = r.clean[m].second;
      const std::vector<double>& a = r.adversarial[m].second;
      tally.clean_values[m].insert(tally.clean_values[m].end(), c.begin(), c.end());
      tally.adversarial_values[m].insert(tally.adversarial_values[m].end(), a.begin(), a.end());
    }
  }
  attacks::PerturbationReport& worst = summary.perturbation;
  worst.max_delta = std::max(worst.max_delta, r.perturbation.max_delta);
  worst.nan_count += r.perturbation.nan_count;
  worst.min_pixel = std::min(worst.min_pixel, r.perturbation.min_pixel);
  worst.max_pixel = std::max(worst.max_pixel, r.perturbation.max_pixel);
}

// Where the run stands after the batch that ended at image `end`.
struct Progress {
  int64_t batch = 0, batches = 0, end = 0, images = 0;
  double seconds = 0.0, eta_seconds = 0.0;
  bool last_of_process = false;
};

// One progress line on stderr, redrawn in place on a terminal: the batch, the images done, the
// first measure's running mean clean -> adversarial, the time and the estimate of what is left.
void print_progress(const AttackSummary& summary, const MeasureTally& tally, const Progress& p,
                    bool tty) {
  const double done = static_cast<double>(p.end);
  std::fprintf(stderr,
               "%s%-6s batch %lld/%lld  %lld/%lld images  %s %.2f -> %.2f  %.0fs (eta %.0fs)%s",
               tty ? "\r" : "", summary.label.c_str(), static_cast<long long>(p.batch + 1),
               static_cast<long long>(p.batches), static_cast<long long>(p.end),
               static_cast<long long>(p.images), summary.names[0].c_str(),
               tally.sum_clean[0] / done, tally.sum_adversarial[0] / done, p.seconds, p.eta_seconds,
               tty && !p.last_of_process ? "\x1b[K" : "\n");
  std::fflush(stderr);
}

}  // namespace

AttackSummary run_attack(models::Model& model, const SplitImages& split,
                         const attacks::Gallery& gallery, const attacks::AttackSpec& spec,
                         const AttackRunSettings& settings) {
  const auto start = std::chrono::steady_clock::now();
  ENGINE_CHECK(split.dataset != nullptr, "run_attack: no dataset");
  const int64_t total_images = static_cast<int64_t>(split.labels.size());
  const int64_t n =
      settings.max_images > 0 ? std::min(settings.max_images, total_images) : total_images;
  ENGINE_CHECK(settings.batch_size > 0, "run_attack: batch size must be positive");
  AttackSummary summary = empty_summary(spec);
  attacks::AttackOptions options;
  options.robrank_compat = settings.robrank_compat;
  options.restart = settings.restart;
  engine::Generator gen(attacks::attack_stream_seed(settings.seed, spec));
  const int64_t batches = (n + settings.batch_size - 1) / settings.batch_size;
  // This process's batches: all of them, or its share over MPI ranks.
  const ProcessBatches process =
      batches_of_this_process(model, split, gallery, spec, settings, options, batches, gen);
  const engine::dist::Share mine = process.share;
  const uint64_t blocks_per_batch = process.blocks_per_batch;
  const int64_t first_image = mine.begin * settings.batch_size;
  const int64_t last_image = std::min(n, mine.end * settings.batch_size);
  const bool tty = isatty(fileno(stderr)) != 0;
  // Opened before the first batch, so a path that cannot be written fails before any work.
  const std::unique_ptr<engine::NpyRowWriter> adversarial_file =
      open_adversarial_file(settings.save_adversarial, *split.dataset, n);
  MeasureTally tally;
  const auto attack_one_batch = [&](int64_t begin, const engine::Tensor& images) {
    const int64_t batch = begin / settings.batch_size;
    const int64_t end = begin + images.size(0);
    std::vector<int64_t> labels(split.labels.begin() + begin, split.labels.begin() + end);
    std::vector<int64_t> self_index(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) self_index[static_cast<size_t>(i - begin)] = i;
    const uint64_t offset_before = gen.offset;
    const attacks::BatchResult r =
        settings.source_model != nullptr
            ? attacks::transfer_attack_batch(*settings.source_model, *settings.source_gallery,
                                             model, gallery, images, labels, self_index, spec, gen,
                                             options)
            : attacks::attack_batch(model, images, labels, self_index, gallery, spec, gen, options);
    ENGINE_CHECK(blocks_per_batch == 0 || images.size(0) < settings.batch_size ||
                     gen.offset - offset_before == blocks_per_batch,
                 "run_attack: batch ", batch + 1, " drew ", gen.offset - offset_before,
                 " random blocks, batch 1 ", blocks_per_batch,
                 ": the draws depend on more than a batch's size, so ranks cannot skip them");
    summary.queries_per_image = r.queries_per_image;
    tally_batch(r, settings.split_over_ranks, summary, tally);
    if (batch == 0) {
      summary.objective_first_batch = r.objective;
      if (!settings.dump_dir.empty()) {
        dump_pairs(settings.dump_dir, summary.label, images, r.adversarial_images, begin,
                   settings.dump_count);
      }
    }
    if (adversarial_file) adversarial_file->append(r.adversarial_images);
    if (settings.on_values && !settings.split_over_ranks) settings.on_values(begin, r.adversarial);
    summary.images = end;
    if (settings.progress) {
      Progress p;
      p.batch = batch;
      p.batches = batches;
      p.end = end;
      p.images = n;
      p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      p.eta_seconds = p.seconds / static_cast<double>(end - first_image) *
                      static_cast<double>(last_image - end);
      p.last_of_process = batch + 1 >= mine.end;
      print_progress(summary, tally, p, tty);
    }
  };
  for_each_split_batch_in(*split.dataset, n, settings.batch_size, mine.begin, mine.end,
                          attack_one_batch);
  if (adversarial_file) adversarial_file->finish();
  if (settings.split_over_ranks) {
    const attacks::Measures all_adversarial =
        gather_split_attack(summary, tally.clean_values, tally.adversarial_values, tally.sum_clean,
                            tally.sum_adversarial);
    summary.images = n;
    if (settings.on_values) settings.on_values(0, all_adversarial);
  }
  for (size_t m = 0; m < summary.names.size(); ++m) {
    summary.clean.push_back(tally.sum_clean[m] / static_cast<double>(n));
    summary.adversarial.push_back(tally.sum_adversarial[m] / static_cast<double>(n));
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

nlohmann::ordered_json attack_summary_json(const AttackSummary& s) {
  nlohmann::ordered_json out;
  out["attack"] = s.spec;
  out["images"] = s.images;
  out["seconds"] = s.seconds;
  nlohmann::ordered_json measures = nlohmann::ordered_json::object();
  for (size_t m = 0; m < s.names.size(); ++m) {
    measures[s.names[m]] = {{"clean", s.clean[m]}, {"adversarial", s.adversarial[m]}};
  }
  out["measures"] = measures;
  out["max_delta"] = s.perturbation.max_delta;
  out["nan_count"] = s.perturbation.nan_count;
  out["pixel_min"] = s.perturbation.min_pixel;
  out["pixel_max"] = s.perturbation.max_pixel;
  if (s.queries_per_image > 0) out["queries_per_image"] = s.queries_per_image;
  return out;
}

double adversarial_value(const AttackSummary& summary, const std::string& measure) {
  for (size_t m = 0; m < summary.names.size(); ++m) {
    if (summary.names[m] == measure) return summary.adversarial[m];
  }
  engine::fail("attack ", summary.spec, " reports no measure '", measure, "'");
}

}  // namespace dml
