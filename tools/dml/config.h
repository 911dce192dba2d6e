// Training configuration for `dml train` (every key documented in docs/config.md).
//
// A config is a JSON object. Loading it is three steps, each failing with dml::UsageError (exit
// code 2) whose message names the file and the key:
//   1. read and parse the file (load_config_file);
//   2. apply `--set key.sub=value` overrides (apply_override): the value is parsed as JSON when it
//      is valid JSON (numbers, true/false, null, quoted strings, arrays), else taken as a string;
//   3. resolve (resolve_config): every key must exist in the schema (default_config_json(), which
//      also supplies the defaults of omitted keys) with the schema's type; then the values are
//      checked (names, ranges) and turned into a TrainConfig, every name into its enum: the
//      training step never looks at a string.
// The resolved JSON (defaults filled in) is what checkpoints store and what a resume compares.
//
// Parameter groups (optimizer.groups): an ordered list of {"match", "lr", "weight_decay"}; a
// model parameter goes to the first group whose `match` is a prefix of its name (the names of
// model.safetensors, e.g. "fc2.weight"), unmatched parameters to the default group, which uses
// optimizer.lr and optimizer.weight_decay. A loss's own parameters (margin's beta, ArcFace's class
// centers) are not model parameters: their learning rate is a loss key (loss.margin_loss.beta_lr,
// loss.arcface.centers_lr) and the trainer gives them an optimizer of their own (trainer.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attacks/defenses/defense.h"
#include "engine/precision.h"
#include "losses/arcface.h"
#include "losses/distance.h"
#include "losses/margin.h"
#include "losses/miners.h"
#include "losses/multi_similarity.h"
#include "models/registry.h"

namespace dml {

// One entry of optimizer.groups, with the optimizer's lr and weight decay filled in where the
// group leaves them null.
struct ParamGroupConfig {
  std::string match;  // a name prefix, e.g. "fc2." (plain string prefix: "fc" also matches "fc1.")
  double lr = 0.0;
  double weight_decay = 0.0;
};

struct OptimizerConfig {
  std::string name = "adam";  // adam | adamw | sgd
  double lr = 1e-3;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  double momentum = 0.0, dampening = 0.0;         // sgd
  bool nesterov = false;                          // sgd
  std::vector<ParamGroupConfig> groups;           // empty: every parameter in the default group
};

// The losses `dml train` optimizes (loss.name), in docs/config.md order.
enum class Loss { Triplet, Contrastive, Margin, MultiSimilarity, ArcFace, Lifted, Npair };

// loss.name values, in docs/config.md order (= Loss order).
const std::vector<std::string>& loss_names();
// A name of loss_names(); anything else throws engine::Error naming it.
Loss parse_loss(const std::string& name);
const char* loss_name(Loss loss);

struct TrainConfig {
  std::string data_name = "fashion-mnist";
  std::string data_root;  // "" = the dataset's default location
  // data.transform: the CUB/CARS/SOP image recipe, "robrank" or "revisiting" (data/transforms.h).
  std::string data_transform = "robrank";
  int64_t num_workers = 2;
  models::ModelConfig model;
  // model.pretrained: a safetensors file or a torch.save checkpoint (models/weights.h) loaded
  // into the freshly built model before training (not on --resume: the checkpoint holds the
  // weights), e.g. torchvision's ImageNet ResNet .pth as downloaded; "" = none. State entries under
  // model.pretrained_skip keep their fresh initialization (default {"fc."}: the new embedding
  // layer).
  std::string pretrained;
  std::vector<std::string> pretrained_skip = {"fc."};
  // model.aux_bn_noise: standard deviation of the Gaussian noise added to the weight and bias of
  // BN branches k >= 1 after they start as copies of branch 0 (after model.pretrained); 0 = exact
  // copies. Not applied on --resume (the checkpoint holds the weights).
  double aux_bn_noise = 0.0;
  std::string sampler_name = "spc2";  // spc2 | m_per_class
  int64_t pairs_per_batch = 128;      // spc2
  int64_t classes_per_batch = 32;     // m_per_class
  int64_t images_per_class = 2;       // m_per_class: M
  bool with_replacement = false;      // m_per_class: classes and images drawn with replacement
  int64_t max_batches_per_epoch = 0;  // 0 = the whole epoch
  bool drop_last = false;
  Loss loss = Loss::Triplet;
  losses::Metric metric = losses::Metric::N;
  losses::Miner miner = losses::Miner::Random;  // triplet, contrastive, margin; Random otherwise
  // loss.margin, or the loss's default when null: triplet and lifted default_margin(metric),
  // contrastive 1.0, margin 0.2, arcface 0.5 (radians); unused by multi_similarity and npair.
  double margin = 0.2;
  losses::MarginLossOptions margin_loss;            // .margin = `margin` for the margin loss
  losses::MultiSimilarityOptions multi_similarity;  // loss.multi_similarity.*
  losses::ArcFaceOptions arcface;                   // .margin = `margin` for arcface
  double lifted_norm_weight = 5e-3;                 // loss.lifted.norm_weight
  double npair_norm_weight = 5e-3;                  // loss.npair.norm_weight
  OptimizerConfig optimizer;
  attacks::defenses::DefenseOptions defense;  // defense.*: Recipe::None = vanilla training
  // train.*: one step's global batch cut into micro_batches per rank (tools/dml/data_parallel.h);
  // mining within each micro-batch ("local"; "global" is refused) and its own batch-norm
  // statistics ("per_replica"; "synchronized" is refused).
  int64_t micro_batches = 1;
  std::string mining_scope = "local";
  std::string batch_norm = "per_replica";
  int64_t epochs = 8;
  int64_t eval_every_epochs = 1;  // 0 = only after the last epoch
  int64_t eval_max_images = 0;    // 0 = the whole test split
  int64_t eval_batch_size = 256;
  int64_t eval_kmeans_restarts = 1;  // NMI from the least-inertia of this many k-means++ runs
  int64_t log_every_batches = 10;
  int64_t checkpoint_every_batches = 0;  // 0 = only at the end of each epoch
  std::string output_dir = "runs/train";
  uint64_t seed = 0;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  // precision: the precision policy of the run (engine/precision.h), stored with its checkpoint.
  engine::Precision precision = engine::Precision::Fp32;
  nlohmann::json resolved;  // the whole config with defaults filled in
};

// The schema: every key with its default value (its JSON type is the key's type; null means
// "number or null").
nlohmann::json default_config_json();

// Reads a JSON file; UsageError naming the file on a missing file or a syntax error.
nlohmann::json load_config_file(const std::string& path);

// "optimizer.lr=0.01" sets config["optimizer"]["lr"] = 0.01. UsageError on a malformed
// assignment or a key not in the schema.
void apply_override(nlohmann::json& config, const std::string& assignment);

// Validates `config` against the schema and the value rules; `source` (the file) prefixes the
// messages: "<source>: config key 'optimizer.lrr' is unknown".
TrainConfig resolve_config(const nlohmann::json& config, const std::string& source);

// The group of each parameter: 0 = the default group, g + 1 = groups[g], the first group whose
// match is a prefix of the name. UsageError naming optimizer.groups[g] when a group gets no
// parameter (a typo in `match` would otherwise leave its parameters in the default group
// silently); the message lists the parameters' top-level names.
std::vector<size_t> assign_param_groups(const std::vector<std::string>& names,
                                        const std::vector<ParamGroupConfig>& groups);

}  // namespace dml
