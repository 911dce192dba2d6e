// One run of `dml train`, concern by concern (header: tools/dml/training_run.h; the loop that
// drives it: dml::train in trainer.cpp).
#include "tools/dml/training_run.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "engine/autograd.h"
#include "engine/dist/communicator.h"
#include "engine/io/file_io.h"
#include "engine/nn/batch_norm.h"
#include "engine/nn/batch_norm_sync.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"
#include "losses/losses.h"
#include "models/weights.h"
#include "tools/dml/args.h"
#include "tools/dml/data_parallel.h"
#include "tools/dml/distributed.h"
#include "tools/dml/run_log.h"

namespace dml {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

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

// Creates output_dir and removes what must not survive into this run: temporary files of outputs
// whose writer was killed mid-write (the rename never happened, so the previous file is intact).
// A fresh run (--overwrite included) also removes the final weights and metrics of the run it
// replaces, which would otherwise sit beside the new checkpoint until the new run ends, and be
// scored by dml eval/ers as if they were its.
void prepare_output_dir(const std::string& output_dir, bool resume) {
  std::error_code fs_error;
  std::filesystem::create_directories(output_dir, fs_error);
  ENGINE_CHECK(!fs_error, "output_dir '", output_dir, "': ", fs_error.message());
  for (const char* name : {"checkpoint.safetensors", "model.safetensors", "metrics.json"}) {
    const std::filesystem::path output = std::filesystem::path(output_dir) / name;
    engine::detail::remove_abandoned_temporaries(output.string());
    if (resume || name == std::string("checkpoint.safetensors")) continue;
    std::filesystem::remove(output, fs_error);
    ENGINE_CHECK(!fs_error, output.string(), ": cannot remove: ", fs_error.message());
  }
}

// model.pretrained into the fresh model (config.h); BN aux branches take branch 0's values when
// the file has none (MDProp's initialization from ImageNet weights).
void load_pretrained(const TrainConfig& config, models::Model& model) {
  require_input_file(config.pretrained, "config key 'model.pretrained':");
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

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

TrainingRun::TrainingRun(const TrainConfig& config, const TrainOptions& options)
    : config_(config),
      options_(options),
      device_(parse_device_option(config.device, "config key 'device'")),
      train_set_(open_split(config, "train")),
      test_set_(open_split(config, "test")),
      checkpoint_(checkpoint_path(config.output_dir)),
      mining_(config.seed ^ kMiningSeedMix) {
  check_micro_batches(config);
  // Only rank 0 (the only rank of a single process) writes the run's files.
  if (writes_results()) prepare_output_dir(config.output_dir, options.resume);
  engine::Generator init_gen(config.seed);
  build(init_gen);
  restore_or_start();
  const int64_t full_epoch = sampler_->batches_per_epoch();
  per_epoch_ = config.max_batches_per_epoch > 0 ? std::min(config.max_batches_per_epoch, full_epoch)
                                                : full_epoch;
  tty_ = isatty(fileno(stderr)) != 0;
  if (writes_results()) {
    open_log();
    print_opening_line();
  }

  eval_settings_.metric = config.metric;
  eval_settings_.max_images = config.eval_max_images;
  eval_settings_.batch_size = config.eval_batch_size;
  eval_settings_.seed = config.seed;
  eval_settings_.kmeans_restarts = config.eval_kmeans_restarts;
  eval_settings_.device = device_;
  context_ = std::make_unique<attacks::defenses::TrainingContext>(context_with(mining_));
  run_start_ = Clock::now();
  first_step_ = run_.step;
}

TrainingRun::~TrainingRun() = default;

attacks::defenses::TrainingContext TrainingRun::context_with(engine::Generator& mining) {
  return attacks::defenses::TrainingContext{
      *model_,
      [this](const engine::Tensor& embeddings, const engine::Tensor& labels,
             engine::Generator& gen) {
        return compute_loss(config_, loss_, embeddings, labels, gen);
      },
      config_.metric,
      config_.miner,
      config_.margin,
      mining};
}

RunParts TrainingRun::parts() {
  return RunParts{*model_, loss_, defense_.get(), *sampler_, mining_, run_};
}

// The model (then ArcFace's centers) draw from init_gen; the aux-BN noise has its own stream, so
// it does not move any other draw of the run.
void TrainingRun::build(engine::Generator& init_gen) {
  model_ = models::build_model(config_.model, init_gen);
  if (!config_.pretrained.empty() && !options_.resume) load_pretrained(config_, *model_);
  if (config_.aux_bn_noise > 0.0 && !options_.resume) {
    engine::Generator noise_gen(config_.seed ^ kAuxNoiseSeedMix);
    engine::nn::perturb_batch_norm_aux_branches(*model_, config_.aux_bn_noise, noise_gen);
  }
  sampler_ = make_sampler(config_, *train_set_);
  loss_ = make_training_loss(config_, train_set_->num_classes(), init_gen);
  defense_ = attacks::defenses::make_defense(config_.defense);
}

// On --resume everything of parts() comes from the checkpoint; then model and loss move to the
// device, and the optimizers are built (they hold the parameter handles) and, on --resume, given
// their checkpointed states.
void TrainingRun::restore_or_start() {
  OptimizerStates optimizer_states;
  if (options_.resume) optimizer_states = restore_checkpoint(checkpoint_, config_, parts());
  model_->to(device_);
  if (loss_.module() != nullptr) loss_.module()->to(device_);
  optimizer_ = make_optimizer(config_.optimizer, *model_);
  loss_optimizer_ = make_loss_optimizer(config_, loss_);
  if (options_.resume) {
    optimizer_->load_state_dict(optimizer_states.model);
    if (loss_optimizer_) loss_optimizer_->load_state_dict(optimizer_states.loss);
  }
}

void TrainingRun::open_log() {
  log_ = std::make_unique<RunLog>(
      config_.output_dir, options_.resume ? std::optional<int64_t>(run_.step) : std::nullopt);
}

void TrainingRun::print_opening_line() const {
  const TrainConfig& c = config_;
  std::fprintf(stderr,
               "train: %s -> %s (%lld train / %lld test images), %s D=%lld, %s %s/%s, %s lr "
               "%g, %lld epochs x %lld batches of %s, device %s%s%s\n",
               c.data_name.c_str(), c.output_dir.c_str(),
               static_cast<long long>(train_set_->size()),
               static_cast<long long>(test_set_->size()), c.model.name.c_str(),
               static_cast<long long>(c.model.embedding_dim), loss_name(c.loss),
               losses::metric_name(c.metric), losses::miner_name(c.miner), c.optimizer.name.c_str(),
               c.optimizer.lr, static_cast<long long>(c.epochs), static_cast<long long>(per_epoch_),
               batch_summary(c).c_str(), device_.str().c_str(), defense_summary(c.defense).c_str(),
               options_.resume ? ", resumed" : "");
  const int64_t micro_batches = micro_batches_per_step(c);
  if (micro_batches > 1) {
    std::fprintf(stderr,
                 "train: each batch in %lld micro-batches of %lld pairs (train.micro_batches %lld "
                 "x %d %s), gradients averaged\n",
                 static_cast<long long>(micro_batches),
                 static_cast<long long>(c.pairs_per_batch / micro_batches),
                 static_cast<long long>(c.micro_batches), engine::dist::world().size,
                 engine::dist::world().size == 1 ? "rank" : "ranks");
  }
}

std::vector<std::vector<int64_t>> TrainingRun::rest_of_epoch(int64_t first) const {
  std::vector<std::vector<int64_t>> batches = sampler_->rest_of_epoch();
  batches.resize(static_cast<size_t>(per_epoch_ - first));
  return batches;
}

data::LoaderOptions TrainingRun::loader_options(int64_t epoch, int64_t first) const {
  data::LoaderOptions loader_options;
  loader_options.seed = config_.seed;
  loader_options.epoch = epoch;
  loader_options.first_batch = first;
  loader_options.num_workers = static_cast<int>(config_.num_workers);
  // Over MPI ranks each decodes (and augments) only its micro-batches' rows; every rank still
  // draws the whole batch's indices from the one sampler, and each row its own generator.
  const engine::dist::World& world = engine::dist::world();
  if (world.size > 1) {
    const int64_t rank = world.rank, per_rank = config_.micro_batches, ranks = world.size;
    loader_options.decoded_rows = [rank, per_rank, ranks](int64_t batch_images) {
      return rank_rows(batch_images, rank, per_rank, ranks);
    };
  }
  return loader_options;
}

// The batch's loss (the defense's step when there is one: it crafts its adversarial examples and
// counts its passes), its check, backward and the optimizer step(s).
StepOutcome TrainingRun::step(const data::Batch& batch, int64_t epoch) {
  if (micro_batches_per_step(config_) > 1) {
    return config_.mining_scope == "global" ? step_with_global_mining(batch, epoch)
                                            : step_in_micro_batches(batch, epoch);
  }
  const Clock::time_point step_start = Clock::now();
  const engine::kernels::DeviceCounters counters_at_start = start_step_instruments();
  const int64_t passes_before = run_.window_passes;
  model_->train();
  const engine::Tensor images = batch.images.to(device_);
  const engine::Tensor labels = batch.labels.to(device_);
  StepOutcome outcome;
  attacks::defenses::StepResult result = batch_loss(*context_, images, labels);
  const engine::Tensor loss_value = result.loss;
  outcome.defense_logs = std::move(result.logs);
  run_.window_passes += result.passes;
  run_.passes += result.passes;
  const double value = loss_value.item();
  check_finite_loss(value, epoch, batch);
  optimizer_->zero_grad();
  if (loss_optimizer_) loss_optimizer_->zero_grad();
  engine::backward(loss_value);
  optimizer_->step();
  if (loss_optimizer_) loss_optimizer_->step();
  record_step_time(step_start, counters_at_start, images.size(0), passes_before);
  sampler_->next();  // advance the cursor past this batch
  ++run_.step;
  run_.window_loss_sum += value;
  ++run_.window_batches;
  outcome.loss = value;
  outcome.images = images.size(0);
  return outcome;
}

// The defense's step when there is one (it crafts its adversarial examples and counts its
// passes), else the configured loss on the model's embeddings (one pass).
attacks::defenses::StepResult TrainingRun::batch_loss(attacks::defenses::TrainingContext& context,
                                                      const engine::Tensor& images,
                                                      const engine::Tensor& labels) {
  if (defense_ != nullptr) return defense_->step(context, images, labels);
  attacks::defenses::StepResult result;
  result.loss = compute_loss(config_, loss_, (*model_)(images), labels, context.mining);
  result.passes = 1;
  return result;
}

void TrainingRun::check_finite_loss(double value, int64_t epoch, const data::Batch& batch) const {
  ENGINE_CHECK(std::isfinite(value), "training loss is ", value, " at epoch ", epoch + 1,
               ", batch ", batch.number + 1, "/", per_epoch_, " (step ", run_.step + 1,
               "); lower optimizer.lr or check the data");
}

TrainingRun::MicroBatchStep TrainingRun::start_micro_batch_step() {
  MicroBatchStep started;
  started.start = Clock::now();
  started.counters_at_start = start_step_instruments();
  started.passes_before = run_.window_passes;
  started.total = micro_batches_per_step(config_);
  started.local = config_.micro_batches;
  started.first = engine::dist::world().rank * started.local;
  model_->train();
  return started;
}

void TrainingRun::add_micro_batch_result(const attacks::defenses::StepResult& result, double value,
                                         int64_t g, std::vector<std::string>& log_names,
                                         std::vector<double>& sums, int64_t& passes) {
  const bool first = sums.empty();
  if (first) sums.assign(1 + result.logs.size(), 0.0);
  ENGINE_CHECK(sums.size() == 1 + result.logs.size(), "micro-batch ", g, " logged ",
               result.logs.size(), " values, the step's first micro-batch ", sums.size() - 1);
  sums[0] += value;
  for (size_t k = 0; k < result.logs.size(); ++k) {
    if (first) log_names.push_back(result.logs[k].first);
    sums[k + 1] += result.logs[k].second.item();
  }
  passes += result.passes;
}

// One step over G micro-batches (data_parallel.h): this rank's micro-batches one after the other,
// each with its own rows, mining stream and batch-norm statistics; their gradients, losses, log
// values and passes averaged over all G; then the optimizer step, the same on every rank.
StepOutcome TrainingRun::step_in_micro_batches(const data::Batch& batch, int64_t epoch) {
  const MicroBatchStep started = start_micro_batch_step();
  const int64_t total = started.total, local = started.local, first = started.first;
  GradientAverager gradients(averaged_parameters(*optimizer_, loss_optimizer_.get()));
  // train.batch_norm synchronized (one micro-batch per rank): statistics over all ranks' rows.
  std::optional<engine::nn::BatchNormSync> synchronized_batch_norm;
  if (config_.batch_norm == "synchronized") synchronized_batch_norm.emplace(sum_over_ranks);
  // Every micro-batch starts from the step's running statistics; micro-batch 0's update stays.
  const std::vector<engine::Tensor> buffers_before =
      local > 1 ? copy_buffers(*model_) : std::vector<engine::Tensor>();
  std::vector<engine::Tensor> buffers_after_first;
  std::vector<std::string> log_names;
  std::vector<double> sums;  // the loss, then the defense's log values, over this rank's
  int64_t passes = 0;
  for (int64_t m = 0; m < local; ++m) {
    if (m > 0) restore_buffers(*model_, buffers_before);
    const RowRange rows = micro_batch_rows(batch.size(), first + m, total);
    const engine::Tensor images = batch.image_rows(rows.begin, rows.end).to(device_);
    const engine::Tensor labels = batch.labels.slice(0, rows.begin, rows.end).to(device_);
    engine::Generator gen = micro_batch_generator(mining_, first + m);
    attacks::defenses::TrainingContext context = context_with(gen);
    attacks::defenses::StepResult result = batch_loss(context, images, labels);
    check_micro_batch_draws(gen, mining_, first + m);
    const double value = result.loss.item();
    check_finite_loss(value, epoch, batch);
    optimizer_->zero_grad();
    if (loss_optimizer_) loss_optimizer_->zero_grad();
    gradients.backward(result.loss, m + 1 == local);  // the last one's overlaps the all-reduce
    if (m == 0 && local > 1) buffers_after_first = copy_buffers(*model_);
    add_micro_batch_result(result, value, first + m, log_names, sums, passes);
  }
  return finish_micro_batch_step(batch, gradients, buffers_after_first, log_names, sums, passes,
                                 started);
}

StepOutcome TrainingRun::finish_micro_batch_step(
    const data::Batch& batch, GradientAverager& gradients,
    const std::vector<engine::Tensor>& buffers_after_first,
    const std::vector<std::string>& log_names, const std::vector<double>& sums, int64_t passes,
    const MicroBatchStep& started) {
  const int64_t total = started.total;
  if (!buffers_after_first.empty()) restore_buffers(*model_, buffers_after_first);
  broadcast_buffers_from_rank_0(*model_);
  mining_.offset += static_cast<uint64_t>(total) * kMicroBatchBlocks;
  gradients.finish(total);
  const std::vector<double> means = mean_over_micro_batches(sums, total);
  const int64_t step_passes = mean_count_over_micro_batches(passes, total);
  optimizer_->step();
  if (loss_optimizer_) loss_optimizer_->step();
  run_.window_passes += step_passes;
  run_.passes += step_passes;
  record_step_time(started.start, started.counters_at_start, batch.size(), started.passes_before);
  sampler_->next();
  ++run_.step;
  run_.window_loss_sum += means[0];
  ++run_.window_batches;
  StepOutcome outcome;
  outcome.loss = means[0];
  outcome.images = batch.size();
  for (size_t k = 0; k < log_names.size(); ++k) {
    outcome.defense_logs.emplace_back(log_names[k],
                                      engine::Tensor::scalar(means[k + 1], engine::DType::F64));
  }
  return outcome;
}

// `dml bench --train`: the device counters at the step's start, and the profiler on if this is
// the step to profile.
engine::kernels::DeviceCounters TrainingRun::start_step_instruments() const {
  const StepTiming* timing = options_.timing;
  if (timing != nullptr && device_.is_cuda() &&
      static_cast<int64_t>(timing->seconds.size()) == timing->profile_step) {
    engine::kernels::start_profile();
  }
  return engine::kernels::device_counters();
}

// `dml bench --train`: the step's wall time, with the device synchronized so that queued GPU
// work is counted, its device counters, and the profiled step's launches.
void TrainingRun::record_step_time(Clock::time_point step_start,
                                   const engine::kernels::DeviceCounters& counters_at_start,
                                   int64_t images, int64_t passes_before) const {
  if (options_.timing == nullptr) return;
  if (device_.is_cuda() && engine::kernels::profiling()) {
    options_.timing->profile = engine::kernels::stop_profile();  // synchronizes the device
  }
  if (device_.is_cuda()) engine::kernels::cuda_synchronize();
  options_.timing->seconds.push_back(seconds_since(step_start));
  options_.timing->counters.push_back(
      engine::kernels::counters_between(counters_at_start, engine::kernels::device_counters()));
  options_.timing->images = images;
  options_.timing->passes = run_.window_passes - passes_before;
}

bool TrainingRun::progress_due(const data::Batch& batch) const {
  return (batch.number + 1) % config_.log_every_batches == 0 || batch.number + 1 == per_epoch_;
}

void TrainingRun::log_progress(int64_t epoch, const data::Batch& batch, const StepOutcome& step,
                               ProgressWindow& window) {
  const double seconds = seconds_since(window.since);
  const double rate = seconds > 0 ? window.images / seconds : 0.0;
  json record = {{"type", "train"},
                 {"epoch", epoch + 1},
                 {"batch", batch.number + 1},
                 {"batches", per_epoch_},
                 {"step", run_.step},
                 {"loss", step.loss},
                 {"mean_loss", run_.window_loss_sum / run_.window_batches},
                 {"lr", optimizer_->lr(0)},
                 {"images_per_s", rate}};
  if (loss_.margin) record["beta"] = loss_.margin->beta().item();
  const double passes_per_batch = static_cast<double>(run_.window_passes) / run_.window_batches;
  if (defense_ != nullptr) {
    record["passes_per_batch"] = passes_per_batch;
    for (const auto& [name, tensor] : step.defense_logs) record[name] = tensor.item();
  }
  if (writes_results()) write_progress(record, epoch, batch, passes_per_batch);
  window = ProgressWindow{};
  run_.window_loss_sum = 0.0;
  run_.window_batches = 0;
  run_.window_passes = 0;
}

// The progress record and line (rank 0).
void TrainingRun::write_progress(const json& record, int64_t epoch, const data::Batch& batch,
                                 double passes_per_batch) {
  const bool last = batch.number + 1 == per_epoch_;
  const double rate = record.at("images_per_s").get<double>();
  log_->write(record);
  const std::string cost =
      defense_ != nullptr ? "  " + format_number(passes_per_batch) + " passes/batch" : "";
  const int64_t steps_left = config_.epochs * per_epoch_ - run_.step;
  const std::string eta =
      steps_left > 0
          ? "  eta " + format_duration(seconds_since(run_start_) / double(run_.step - first_step_) *
                                       double(steps_left))
          : "";
  std::fprintf(stderr, "%sepoch %lld/%lld  batch %lld/%lld  loss %.4f  %.0f images/s%s%s%s",
               tty_ ? "\r" : "", static_cast<long long>(epoch + 1),
               static_cast<long long>(config_.epochs), static_cast<long long>(batch.number + 1),
               static_cast<long long>(per_epoch_), run_.window_loss_sum / run_.window_batches, rate,
               cost.c_str(), eta.c_str(), tty_ && !last ? "\x1b[K" : "\n");
  std::fflush(stderr);
}

void TrainingRun::advance_to_next_epoch(int64_t epoch) {
  data::SamplerState next_state = sampler_->state();
  next_state.epoch = epoch + 1;
  next_state.batch = 0;
  sampler_->restore(next_state);
}

bool TrainingRun::evaluation_due(int64_t epoch) const {
  const bool due =
      (config_.eval_every_epochs > 0 && (epoch + 1) % config_.eval_every_epochs == 0) ||
      epoch + 1 == config_.epochs;
  return due && run_.epochs_evaluated < epoch + 1;
}

void TrainingRun::evaluate(int64_t epoch) {
  final_eval_ = evaluate_now(epoch, /*write_record=*/true);
  run_.epochs_evaluated = epoch + 1;
}

metrics::Evaluation TrainingRun::evaluate_now(int64_t epoch, bool write_record) {
  const Clock::time_point eval_start = Clock::now();
  const metrics::Evaluation e = evaluate_model(*model_, *test_set_, eval_settings_);
  eval_seconds_ += seconds_since(eval_start);
  json record = {{"type", "eval"}, {"epoch", epoch + 1}, {"step", run_.step}, {"images", e.n}};
  const nlohmann::ordered_json values = metrics::metrics_json(e);
  for (const auto& item : values.items()) record[item.key()] = item.value();
  if (!writes_results()) return e;  // every rank embeds its share; rank 0 writes
  if (write_record) log_->write(record);
  std::fprintf(stderr, "eval: epoch %lld, %lld images: recall@1 %.2f%%, map_at_r10 %.2f%%\n",
               static_cast<long long>(epoch + 1), static_cast<long long>(e.n),
               100.0 * e.retrieval.recall[0], 100.0 * e.retrieval.map_at_r10);
  return e;
}

bool TrainingRun::checkpoint_due() const {
  return config_.checkpoint_every_batches > 0 && run_.step % config_.checkpoint_every_batches == 0;
}

void TrainingRun::save_checkpoint() {
  if (!writes_results()) return;
  dml::save_checkpoint(checkpoint_, config_, parts(), *optimizer_, loss_optimizer_.get());
}

bool TrainingRun::stop_requested() const {
  return options_.stop_after_batches > 0 && run_.step == options_.stop_after_batches;
}

int TrainingRun::stop() const {
  if (!writes_results()) return 0;
  std::fprintf(stderr,
               "train: stopped after %lld steps (--stop-after-batches); "
               "checkpoint %s\n",
               static_cast<long long>(run_.step), checkpoint_.c_str());
  return 0;
}

int TrainingRun::finish() {
  if (!final_eval_) {
    // Resumed after the last evaluation (killed before the weights were written): the checkpoint
    // counts that evaluation, whose record is in the log already; recompute it for metrics.json.
    final_eval_ = evaluate_now(config_.epochs - 1, /*write_record=*/false);
  }
  if (!writes_results()) return 0;
  const std::string weights =
      (std::filesystem::path(config_.output_dir) / "model.safetensors").string();
  models::save_weights(*model_, weights,
                       {{"format", "pt"}, {"dml_model", model_metadata(config_).dump()}});
  nlohmann::ordered_json summary = metrics::metrics_json(*final_eval_);
  summary["images"] = final_eval_->n;
  summary["epochs"] = config_.epochs;
  summary["steps"] = run_.step;
  summary["passes"] = run_.passes;  // forward/backward passes (training cost, docs/defenses.md)
  engine::detail::write_file_atomically(
      (std::filesystem::path(config_.output_dir) / "metrics.json").string(),
      summary.dump(2) + "\n");
  // Wall time of this process only: a resumed run says which steps it ran.
  const double process_seconds = seconds_since(run_start_);
  std::string resumed_steps;
  if (first_step_ > 0 && run_.step > first_step_) {
    resumed_steps = ", steps " + std::to_string(first_step_ + 1) + " to " +
                    std::to_string(run_.step) + " in this process";
  } else if (first_step_ > 0) {
    resumed_steps = ", no steps in this process";
  }
  std::printf(
      "trained %s for %lld epochs (%lld steps, %s forward/backward passes per step) in %s, "
      "%s of it evaluating%s; weights %s\n\n",
      config_.model.name.c_str(), static_cast<long long>(config_.epochs),
      static_cast<long long>(run_.step),
      format_number(run_.step > 0 ? static_cast<double>(run_.passes) / run_.step : 0.0).c_str(),
      format_duration(process_seconds).c_str(), format_duration(eval_seconds_).c_str(),
      resumed_steps.c_str(), weights.c_str());
  print_metrics_table(*final_eval_, config_.data_name + " test");
  return 0;
}

}  // namespace dml
