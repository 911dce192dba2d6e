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
#include "engine/io/npy.h"
#include "engine/random.h"
#include "kernels/common/check.h"
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
  AttackSummary summary;
  summary.spec = attacks::attack_spec_string(spec);
  summary.label = attacks::attack_label(spec);
  summary.perturbation.min_pixel = std::numeric_limits<double>::infinity();
  summary.perturbation.max_pixel = -std::numeric_limits<double>::infinity();
  attacks::AttackOptions options;
  options.robrank_compat = settings.robrank_compat;
  options.restart = settings.restart;
  engine::Generator gen(attacks::attack_stream_seed(settings.seed, spec));
  const int64_t batches = (n + settings.batch_size - 1) / settings.batch_size;
  const bool tty = isatty(fileno(stderr)) != 0;
  // Opened before the first batch, so a path that cannot be written fails before any work.
  std::unique_ptr<engine::NpyRowWriter> adversarial_file;
  if (!settings.save_adversarial.empty()) {
    engine::Shape shape = {n};
    for (int64_t d : split.dataset->image_shape()) shape.push_back(d);
    adversarial_file = std::make_unique<engine::NpyRowWriter>(settings.save_adversarial,
                                                              engine::DType::F32, shape);
  }
  std::vector<double> sum_clean, sum_adversarial;
  const auto attack_one_batch = [&](int64_t begin, const engine::Tensor& images) {
    const int64_t batch = begin / settings.batch_size;
    const int64_t end = begin + images.size(0);
    std::vector<int64_t> labels(split.labels.begin() + begin, split.labels.begin() + end);
    std::vector<int64_t> self_index(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) self_index[static_cast<size_t>(i - begin)] = i;
    const attacks::BatchResult r =
        settings.source_model != nullptr
            ? attacks::transfer_attack_batch(*settings.source_model, *settings.source_gallery,
                                             model, gallery, images, labels, self_index, spec, gen,
                                             options)
            : attacks::attack_batch(model, images, labels, self_index, gallery, spec, gen, options);
    summary.queries_per_image = r.queries_per_image;
    if (batch == 0) {
      summary.objective_first_batch = r.objective;
      for (const auto& [name, values] : r.clean) summary.names.push_back(name);
      sum_clean.assign(summary.names.size(), 0.0);
      sum_adversarial.assign(summary.names.size(), 0.0);
      if (!settings.dump_dir.empty()) {
        dump_pairs(settings.dump_dir, summary.label, images, r.adversarial_images, begin,
                   settings.dump_count);
      }
    }
    if (adversarial_file) adversarial_file->append(r.adversarial_images);
    if (settings.on_batch) settings.on_batch(begin, r);
    for (size_t m = 0; m < summary.names.size(); ++m) {
      for (double v : r.clean[m].second) sum_clean[m] += v;
      for (double v : r.adversarial[m].second) sum_adversarial[m] += v;
    }
    attacks::PerturbationReport& worst = summary.perturbation;
    worst.max_delta = std::max(worst.max_delta, r.perturbation.max_delta);
    worst.nan_count += r.perturbation.nan_count;
    worst.min_pixel = std::min(worst.min_pixel, r.perturbation.min_pixel);
    worst.max_pixel = std::max(worst.max_pixel, r.perturbation.max_pixel);
    summary.images = end;
    if (settings.progress) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double eta = seconds / static_cast<double>(end) * static_cast<double>(n - end);
      std::fprintf(
          stderr, "%s%-6s batch %lld/%lld  %lld/%lld images  %s %.2f -> %.2f  %.0fs (eta %.0fs)%s",
          tty ? "\r" : "", summary.label.c_str(), static_cast<long long>(batch + 1),
          static_cast<long long>(batches), static_cast<long long>(end), static_cast<long long>(n),
          summary.names[0].c_str(), sum_clean[0] / static_cast<double>(end),
          sum_adversarial[0] / static_cast<double>(end), seconds, eta,
          tty && batch + 1 < batches ? "\x1b[K" : "\n");
      std::fflush(stderr);
    }
  };
  for_each_split_batch(*split.dataset, n, settings.batch_size, attack_one_batch);
  if (adversarial_file) adversarial_file->finish();
  for (size_t m = 0; m < summary.names.size(); ++m) {
    summary.clean.push_back(sum_clean[m] / static_cast<double>(n));
    summary.adversarial.push_back(sum_adversarial[m] / static_cast<double>(n));
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

AttackSummary attack_summary_from_json(const nlohmann::json& json, const std::string& source) {
  try {
    AttackSummary s;
    s.spec = json.at("attack").get<std::string>();
    s.label = attacks::attack_label(attacks::parse_attack_spec(s.spec));
    s.images = json.at("images").get<int64_t>();
    s.seconds = json.at("seconds").get<double>();
    for (const auto& item : json.at("measures").items()) {
      s.names.push_back(item.key());
      s.clean.push_back(item.value().at("clean").get<double>());
      s.adversarial.push_back(item.value().at("adversarial").get<double>());
    }
    s.perturbation.max_delta = json.at("max_delta").get<double>();
    s.perturbation.nan_count = json.at("nan_count").get<int64_t>();
    s.perturbation.min_pixel = json.at("pixel_min").get<double>();
    s.perturbation.max_pixel = json.at("pixel_max").get<double>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    engine::fail(source, ": not an attack result of dml ers/attack: ", e.what());
  }
}

double adversarial_value(const AttackSummary& summary, const std::string& measure) {
  for (size_t m = 0; m < summary.names.size(); ++m) {
    if (summary.names[m] == measure) return summary.adversarial[m];
  }
  engine::fail("attack ", summary.spec, " reports no measure '", measure, "'");
}

}  // namespace dml
