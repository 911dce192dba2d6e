// The training loop of `dml train` (design: trainer.h; its checkpoint: train_checkpoint.h).
#include "tools/dml/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attacks/defenses/defense.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/io/file_io.h"
#include "engine/nn/batch_norm.h"
#include "engine/random.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"
#include "losses/losses.h"
#include "models/weights.h"
#include "tools/dml/args.h"
#include "tools/dml/split_stream.h"
#include "tools/dml/train_checkpoint.h"
#include "tools/dml/training_loss.h"
#include "tools/dml/version.h"

namespace dml {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Mixed into the seed for the mining generator, so mining and model init draw different streams.
constexpr uint64_t kMiningSeedMix = engine::kGoldenGamma;
// The same for the noise of model.aux_bn_noise.
constexpr uint64_t kAuxNoiseSeedMix = 0xC2B2AE3D27D4EB4Full;

std::unique_ptr<data::Dataset> open_split(const TrainConfig& config, const std::string& split) {
  try {
    // Only the training split is augmented; evaluation during training uses the center crop.
    return data::open_dataset(config.data_name, split, config.data_root,
                              /*augment=*/split == "train", config.data_transform);
  } catch (const engine::Error& e) {
    // A missing or unreadable dataset is a configuration mistake (exit 2), named by its key.
    throw UsageError("config key 'data' (name '" + config.data_name + "', root '" +
                     config.data_root + "'): cannot open the " + split + " split: " + e.what());
  }
}

// model.pretrained into the fresh model (config.h); BN aux branches take branch 0's values when
// the file has none (MDProp's initialization from ImageNet weights).
void load_pretrained(const TrainConfig& config, models::Model& model) {
  if (!std::filesystem::is_regular_file(config.pretrained)) {
    throw UsageError("config key 'model.pretrained': no such file '" + config.pretrained + "'");
  }
  models::WeightLoadOptions load;
  load.aux_from_main = true;
  load.keep_prefixes = config.pretrained_skip;
  models::load_weights(model, config.pretrained, load);
}

std::unique_ptr<data::BatchSampler> make_sampler(const TrainConfig& config,
                                                 const data::Dataset& train_set) {
  if (config.sampler_name == "m_per_class") {
    return std::make_unique<data::MPerClassSampler>(train_set.labels(), config.classes_per_batch,
                                                    config.images_per_class, config.seed,
                                                    config.with_replacement);
  }
  return std::make_unique<data::Spc2Sampler>(train_set.labels(), config.pairs_per_batch,
                                             config.seed, config.drop_last);
}

std::string batch_summary(const TrainConfig& config) {
  if (config.sampler_name == "m_per_class") {
    return std::to_string(config.classes_per_batch) + " classes x " +
           std::to_string(config.images_per_class) + " images" +
           (config.with_replacement ? " (with replacement)" : "");
  }
  return std::to_string(config.pairs_per_batch) + " pairs";
}

class Log {
 public:
  // `fresh`: start an empty file (a new run, including --overwrite and a run killed before its
  // first checkpoint); otherwise append (a resumed run).
  Log(const std::string& path, bool fresh)
      : out_(path, fresh ? std::ios::trunc : std::ios::app), path_(path) {
    ENGINE_CHECK(out_.good(), path, ": cannot open the log for writing");
  }
  void write(const json& record) {
    out_ << record.dump() << '\n';
    out_.flush();
    ENGINE_CHECK(out_.good(), path_, ": write failed");
  }

 private:
  std::ofstream out_;
  std::string path_;
};

// On --resume: the records of log.jsonl written after the checkpoint (steps > `step`) describe
// work the resumed run redoes and logs again, and a kill can leave a torn last line; both are
// dropped (the file rewritten atomically) so the log reads like one uninterrupted run. Returns how
// many lines were dropped.
int64_t drop_log_records_after(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return 0;  // no log yet
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    const json record = json::parse(line, nullptr, false);
    const bool valid = record.is_object();
    const bool after = valid && record.contains("step") && record["step"].is_number_integer() &&
                       record["step"].get<int64_t>() > step;
    if (!valid || after) {
      ++dropped;
      continue;
    }
    kept += line + '\n';
  }
  if (dropped > 0) engine::detail::write_file_atomically(path, kept);
  return dropped;
}

std::string format_number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

std::string defense_summary(const attacks::defenses::DefenseOptions& d) {
  if (d.recipe == attacks::defenses::Recipe::None) return "";
  std::string text = ", defense " + std::string(attacks::defenses::recipe_name(d.recipe)) +
                     " (eps " + format_number(d.pgd.eps) + ", alpha " + format_number(d.pgd.alpha) +
                     ", " + std::to_string(d.pgd.steps) + " steps";
  if (d.recipe == attacks::defenses::Recipe::Hm) {
    text += ", HM[" + std::string(losses::miner_name(d.hm.source)) + ", " +
            attacks::defenses::hm_destination_name(d.hm) + "]" + (d.hm.ics ? " & ICS" : "");
  }
  return text + ")";
}

}  // namespace

std::string format_duration(double seconds) {
  // Capped at 10^6 hours so llround stays defined; NaN and negatives read as 0.
  const double clamped = std::isfinite(seconds) ? std::min(std::max(seconds, 0.0), 3.6e9) : 0.0;
  const long long total = static_cast<long long>(std::llround(clamped));
  char text[32];
  if (total < 60) {
    std::snprintf(text, sizeof text, "%llds", total);
  } else if (total < 3600) {
    std::snprintf(text, sizeof text, "%lldm%02llds", total / 60, total % 60);
  } else {
    std::snprintf(text, sizeof text, "%lldh%02lldm", total / 3600, total % 3600 / 60);
  }
  return text;
}

std::string checkpoint_path(const std::string& output_dir) {
  return (std::filesystem::path(output_dir) / "checkpoint.safetensors").string();
}

json model_metadata(const TrainConfig& config) {
  return {{"name", config.model.name},
          {"embedding_dim", config.model.embedding_dim},
          {"bn_branches", config.model.bn_branches},
          {"data", config.data_name},
          {"transform", config.data_transform},
          {"metric", losses::metric_name(config.metric)},
          {"dml_commit", build_commit()}};
}

metrics::Evaluation evaluate_model(models::Model& model, const data::Dataset& test,
                                   const EvalSettings& settings) {
  int64_t n = test.size();
  if (settings.max_images > 0) n = std::min(n, settings.max_images);
  ENGINE_CHECK(n > 0, "evaluation: the ", test.name(), " ", test.split(), " split is empty");
  const std::vector<int64_t> labels = split_labels(test, n);
  const engine::Tensor embeddings = embed_split(model, test, n, settings.batch_size);
  const metrics::Metric metric = metrics::parse_metric(settings.metric);
  const metrics::Points points = metrics::make_points(embeddings, metric, "evaluation embeddings");
  metrics::EvaluationOptions options;
  options.kmeans_seed = settings.seed;
  return metrics::evaluate_embeddings(points, labels, options);
}

void print_metrics_table(const metrics::Evaluation& e, const std::string& title) {
  std::printf("%s: %lld images in %lld classes, metric %s, %lld queries scored\n\n", title.c_str(),
              static_cast<long long>(e.n), static_cast<long long>(e.classes),
              metrics::metric_name(e.metric), static_cast<long long>(e.retrieval.queries));
  std::printf("%-12s %8s\n", "metric", "%");
  for (size_t i = 0; i < e.retrieval.ks.size(); ++i) {
    const std::string name = "recall@" + std::to_string(e.retrieval.ks[i]);
    std::printf("%-12s %8.2f\n", name.c_str(), 100.0 * e.retrieval.recall[i]);
  }
  std::printf("%-12s %8.2f\n", "map", 100.0 * e.retrieval.map);
  std::printf("%-12s %8.2f\n", "map_at_r10", 100.0 * e.retrieval.map_at_r10);
  std::printf("%-12s %8.2f\n", "map_at_r", 100.0 * e.retrieval.map_at_r);
  std::printf("%-12s %8.2f\n", "nmi", 100.0 * e.nmi);
  std::printf("%-12s %8.4f   (ratio, not %%)\n", "pi_ratio", e.spread.ratio);
}

int train(const TrainConfig& config, const TrainOptions& options) {
  const engine::Device device = parse_device_option(config.device, "config key 'device'");
  std::unique_ptr<data::Dataset> train_set = open_split(config, "train");
  std::unique_ptr<data::Dataset> test_set = open_split(config, "test");
  std::error_code fs_error;
  std::filesystem::create_directories(config.output_dir, fs_error);
  ENGINE_CHECK(!fs_error, "output_dir '", config.output_dir, "': ", fs_error.message());
  const std::string ckpt = checkpoint_path(config.output_dir);
  // Temporary files of outputs whose writer was killed mid-write (the rename never happened, so
  // the previous file is intact): garbage now. A fresh run (--overwrite included) also removes the
  // final weights and metrics of the run it replaces, which would otherwise sit beside the new
  // checkpoint until the new run ends, and be scored by dml eval/ers as if they were its.
  for (const char* name : {"checkpoint.safetensors", "model.safetensors", "metrics.json"}) {
    const std::filesystem::path output = std::filesystem::path(config.output_dir) / name;
    engine::detail::remove_abandoned_temporaries(output.string());
    if (options.resume || name == std::string("checkpoint.safetensors")) continue;
    std::filesystem::remove(output, fs_error);
    ENGINE_CHECK(!fs_error, output.string(), ": cannot remove: ", fs_error.message());
  }

  engine::Generator init_gen(config.seed);
  std::shared_ptr<models::Model> model = models::build_model(config.model, init_gen);
  if (!config.pretrained.empty() && !options.resume) load_pretrained(config, *model);
  if (config.aux_bn_noise > 0.0 && !options.resume) {
    // Its own stream, so the noise does not move any other draw of the run.
    engine::Generator noise_gen(config.seed ^ kAuxNoiseSeedMix);
    engine::nn::perturb_batch_norm_aux_branches(*model, config.aux_bn_noise, noise_gen);
  }
  std::unique_ptr<data::BatchSampler> sampler = make_sampler(config, *train_set);
  const TrainingLoss loss = make_training_loss(config, train_set->num_classes(), init_gen);
  const std::unique_ptr<attacks::defenses::Defense> defense =
      attacks::defenses::make_defense(config.defense);
  engine::Generator mining(config.seed ^ kMiningSeedMix);
  RunState run;

  const RunParts parts{*model, loss, defense.get(), *sampler, mining, run};
  OptimizerStates optimizer_states;
  if (options.resume) optimizer_states = restore_checkpoint(ckpt, config, parts);
  model->to(device);
  if (loss.module() != nullptr) loss.module()->to(device);
  // Built after loading: the optimizers hold the parameter handles.
  std::unique_ptr<engine::optim::Optimizer> optimizer = make_optimizer(config.optimizer, *model);
  std::unique_ptr<engine::optim::Optimizer> loss_optimizer = make_loss_optimizer(config, loss);
  if (options.resume) {
    optimizer->load_state_dict(optimizer_states.model);
    if (loss_optimizer) loss_optimizer->load_state_dict(optimizer_states.loss);
  }

  const int64_t full_epoch = sampler->batches_per_epoch();
  const int64_t per_epoch = config.max_batches_per_epoch > 0
                                ? std::min(config.max_batches_per_epoch, full_epoch)
                                : full_epoch;
  const bool tty = isatty(fileno(stderr)) != 0;
  const std::string log_path = (std::filesystem::path(config.output_dir) / "log.jsonl").string();
  if (options.resume) {
    const int64_t dropped = drop_log_records_after(log_path, run.step);
    if (dropped > 0) {
      std::fprintf(stderr, "train: %s: dropped %lld record(s) after the checkpoint's step %lld\n",
                   log_path.c_str(), static_cast<long long>(dropped),
                   static_cast<long long>(run.step));
    }
  }
  Log log(log_path, /*fresh=*/!options.resume);

  std::fprintf(stderr,
               "train: %s -> %s (%lld train / %lld test images), %s D=%lld, %s %s/%s, %s lr "
               "%g, %lld epochs x %lld batches of %s, device %s%s%s\n",
               config.data_name.c_str(), config.output_dir.c_str(),
               static_cast<long long>(train_set->size()), static_cast<long long>(test_set->size()),
               config.model.name.c_str(), static_cast<long long>(config.model.embedding_dim),
               loss_name(config.loss), losses::metric_name(config.metric),
               losses::miner_name(config.miner), config.optimizer.name.c_str(), config.optimizer.lr,
               static_cast<long long>(config.epochs), static_cast<long long>(per_epoch),
               batch_summary(config).c_str(), device.str().c_str(),
               defense_summary(config.defense).c_str(), options.resume ? ", resumed" : "");

  EvalSettings eval_settings;
  eval_settings.metric = losses::metric_name(config.metric);
  eval_settings.max_images = config.eval_max_images;
  eval_settings.batch_size = config.eval_batch_size;
  eval_settings.seed = config.seed;
  double eval_seconds = 0.0;  // this process's time in evaluations, for the closing line
  auto evaluate_now = [&](int64_t epoch, bool write_record) {
    const Clock::time_point eval_start = Clock::now();
    const metrics::Evaluation e = evaluate_model(*model, *test_set, eval_settings);
    eval_seconds += std::chrono::duration<double>(Clock::now() - eval_start).count();
    json record = {{"type", "eval"}, {"epoch", epoch + 1}, {"step", run.step}, {"images", e.n}};
    const nlohmann::ordered_json values = metrics::metrics_json(e);
    for (const auto& item : values.items()) record[item.key()] = item.value();
    if (write_record) log.write(record);
    std::fprintf(stderr, "eval: epoch %lld, %lld images: recall@1 %.2f%%, map_at_r10 %.2f%%\n",
                 static_cast<long long>(epoch + 1), static_cast<long long>(e.n),
                 100.0 * e.retrieval.recall[0], 100.0 * e.retrieval.map_at_r10);
    return e;
  };
  std::optional<metrics::Evaluation> final_eval;
  attacks::defenses::TrainingContext context{
      *model,
      [&](const engine::Tensor& embeddings, const engine::Tensor& labels, engine::Generator& gen) {
        return compute_loss(config, loss, embeddings, labels, gen);
      },
      config.metric,
      config.miner,
      config.margin,
      mining};

  // The ETA on progress lines: this process's mean time per step (evaluations included) times
  // the steps left.
  const Clock::time_point run_start = Clock::now();
  const int64_t first_step = run.step;
  const int64_t total_steps = config.epochs * per_epoch;
  for (int64_t epoch = sampler->state().epoch; epoch < config.epochs; ++epoch) {
    const int64_t first = sampler->state().batch;
    if (first < per_epoch) {
      std::vector<std::vector<int64_t>> batches = sampler->rest_of_epoch();
      batches.resize(static_cast<size_t>(per_epoch - first));
      data::LoaderOptions loader_options;
      loader_options.seed = config.seed;
      loader_options.epoch = epoch;
      loader_options.first_batch = first;
      loader_options.num_workers = static_cast<int>(config.num_workers);
      data::BatchLoader loader(*train_set, std::move(batches), loader_options);
      data::Batch batch;
      Clock::time_point since = Clock::now();
      int64_t images_since = 0;
      std::vector<std::pair<std::string, engine::Tensor>> defense_logs;
      while (loader.next(batch)) {
        const Clock::time_point step_start = Clock::now();
        const int64_t passes_before = run.window_passes;
        model->train();
        const engine::Tensor images = batch.images.to(device);
        const engine::Tensor labels = batch.labels.to(device);
        engine::Tensor loss_value;
        if (defense != nullptr) {
          attacks::defenses::StepResult result = defense->step(context, images, labels);
          loss_value = result.loss;
          defense_logs = std::move(result.logs);
          run.window_passes += result.passes;
          run.passes += result.passes;
        } else {
          loss_value = compute_loss(config, loss, (*model)(images), labels, mining);
          run.window_passes += 1;
          run.passes += 1;
        }
        const double value = loss_value.item();
        ENGINE_CHECK(std::isfinite(value), "training loss is ", value, " at epoch ", epoch + 1,
                     ", batch ", batch.number + 1, "/", per_epoch, " (step ", run.step + 1,
                     "); lower optimizer.lr or check the data");
        optimizer->zero_grad();
        if (loss_optimizer) loss_optimizer->zero_grad();
        engine::backward(loss_value);
        optimizer->step();
        if (loss_optimizer) loss_optimizer->step();
        if (options.timing != nullptr) {
          if (device.is_cuda()) engine::kernels::cuda_synchronize();
          options.timing->seconds.push_back(
              std::chrono::duration<double>(Clock::now() - step_start).count());
          options.timing->images = images.size(0);
          options.timing->passes = run.window_passes - passes_before;
        }
        sampler->next();  // advance the cursor past this batch
        ++run.step;
        images_since += images.size(0);
        run.window_loss_sum += value;
        ++run.window_batches;

        const bool last = batch.number + 1 == per_epoch;
        if ((batch.number + 1) % config.log_every_batches == 0 || last) {
          const double seconds = std::chrono::duration<double>(Clock::now() - since).count();
          const double rate = seconds > 0 ? images_since / seconds : 0.0;
          json record = {{"type", "train"},
                         {"epoch", epoch + 1},
                         {"batch", batch.number + 1},
                         {"batches", per_epoch},
                         {"step", run.step},
                         {"loss", value},
                         {"mean_loss", run.window_loss_sum / run.window_batches},
                         {"lr", optimizer->lr(0)},
                         {"images_per_s", rate}};
          if (loss.margin) record["beta"] = loss.margin->beta().item();
          const double passes_per_batch =
              static_cast<double>(run.window_passes) / run.window_batches;
          if (defense != nullptr) {
            record["passes_per_batch"] = passes_per_batch;
            for (const auto& [name, tensor] : defense_logs) record[name] = tensor.item();
          }
          log.write(record);
          const std::string cost =
              defense != nullptr ? "  " + format_number(passes_per_batch) + " passes/batch" : "";
          const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
          const int64_t steps_left = total_steps - run.step;
          const std::string eta =
              steps_left > 0 ? "  eta " + format_duration(elapsed / double(run.step - first_step) *
                                                          double(steps_left))
                             : "";
          std::fprintf(stderr, "%sepoch %lld/%lld  batch %lld/%lld  loss %.4f  %.0f images/s%s%s%s",
                       tty ? "\r" : "", static_cast<long long>(epoch + 1),
                       static_cast<long long>(config.epochs),
                       static_cast<long long>(batch.number + 1), static_cast<long long>(per_epoch),
                       run.window_loss_sum / run.window_batches, rate, cost.c_str(), eta.c_str(),
                       tty && !last ? "\x1b[K" : "\n");
          std::fflush(stderr);
          since = Clock::now();
          images_since = 0;
          run.window_loss_sum = 0.0;
          run.window_batches = 0;
          run.window_passes = 0;
        }
        if (last) break;
        const bool stop = options.stop_after_batches > 0 && run.step == options.stop_after_batches;
        if (stop || (config.checkpoint_every_batches > 0 &&
                     run.step % config.checkpoint_every_batches == 0)) {
          save_checkpoint(ckpt, config, parts, *optimizer, loss_optimizer.get());
        }
        if (stop) {
          std::fprintf(stderr,
                       "train: stopped after %lld steps (--stop-after-batches); "
                       "checkpoint %s\n",
                       static_cast<long long>(run.step), ckpt.c_str());
          return 0;
        }
      }
    }
    // End of epoch: cursor to the next epoch (a truncated epoch does not roll over by itself).
    data::SamplerState next_state = sampler->state();
    next_state.epoch = epoch + 1;
    next_state.batch = 0;
    sampler->restore(next_state);
    const bool due =
        (config.eval_every_epochs > 0 && (epoch + 1) % config.eval_every_epochs == 0) ||
        epoch + 1 == config.epochs;
    if (due && run.epochs_evaluated < epoch + 1) {
      final_eval = evaluate_now(epoch, /*write_record=*/true);
      run.epochs_evaluated = epoch + 1;
    }
    save_checkpoint(ckpt, config, parts, *optimizer, loss_optimizer.get());
    if (options.stop_after_batches > 0 && run.step == options.stop_after_batches &&
        epoch + 1 < config.epochs) {
      std::fprintf(stderr,
                   "train: stopped after %lld steps (--stop-after-batches); "
                   "checkpoint %s\n",
                   static_cast<long long>(run.step), ckpt.c_str());
      return 0;
    }
  }

  const std::string weights =
      (std::filesystem::path(config.output_dir) / "model.safetensors").string();
  models::save_weights(*model, weights,
                       {{"format", "pt"}, {"dml_model", model_metadata(config).dump()}});
  if (!final_eval) {
    // Resumed after the last evaluation (killed before the weights were written): the checkpoint
    // counts that evaluation, whose record is in the log already; recompute it for metrics.json.
    final_eval = evaluate_now(config.epochs - 1, /*write_record=*/false);
  }
  nlohmann::ordered_json summary = metrics::metrics_json(*final_eval);
  summary["images"] = final_eval->n;
  summary["epochs"] = config.epochs;
  summary["steps"] = run.step;
  summary["passes"] = run.passes;  // forward/backward passes (training cost, SPEC §9)
  engine::detail::write_file_atomically(
      (std::filesystem::path(config.output_dir) / "metrics.json").string(), summary.dump(2) + "\n");
  // Wall time of this process only: a resumed run says which steps it ran.
  const double process_seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
  std::string resumed_steps;
  if (first_step > 0 && run.step > first_step) {
    resumed_steps = ", steps " + std::to_string(first_step + 1) + " to " +
                    std::to_string(run.step) + " in this process";
  } else if (first_step > 0) {
    resumed_steps = ", no steps in this process";
  }
  std::printf(
      "trained %s for %lld epochs (%lld steps, %s forward/backward passes per step) in %s, "
      "%s of it evaluating%s; weights %s\n\n",
      config.model.name.c_str(), static_cast<long long>(config.epochs),
      static_cast<long long>(run.step),
      format_number(run.step > 0 ? static_cast<double>(run.passes) / run.step : 0.0).c_str(),
      format_duration(process_seconds).c_str(), format_duration(eval_seconds).c_str(),
      resumed_steps.c_str(), weights.c_str());
  print_metrics_table(*final_eval, config.data_name + " test");
  return 0;
}

}  // namespace dml
