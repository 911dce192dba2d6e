// What `dml attack` and `dml ers` share: the common options (checkpoint, data, device, batching,
// selection seed) and turning them into a loaded model, the split's images and the gallery.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "attacks/attack.h"
#include "tools/dml/args.h"
#include "tools/dml/attack_runner.h"
#include "tools/dml/load_model.h"
#include "tools/dml/split_stream.h"

namespace dml {

// The option lines both usages print.
extern const char kAttackCommonUsage[];

struct AttackSetup {
  TrainedModel trained;
  std::string dataset;  // name
  std::string split;
  losses::Metric metric = losses::Metric::N;  // --metric, or the training loss's
  std::unique_ptr<data::Dataset> data;        // the split's images, read as the attacks go
  SplitImages images;                         // points into `data`
  attacks::Gallery gallery;
  AttackRunSettings run;
  engine::Device device;
  int64_t bn_branch = 0;  // the BN branch the model evaluates through (--bn-branch)
  bool json = false;
};

// The common options, validated (UsageError) but not acted on yet.
struct AttackCommonOptions {
  std::string checkpoint;
  SplitOptions split;  // --data, --split (default test), --root
  std::optional<std::string> device;
  std::optional<losses::Metric> metric;
  int64_t batch_size = 0;  // 0: by model input size
  int64_t bn_branch = 0;   // --bn-branch: the BN branch the model evaluates through
  AttackRunSettings run;
  bool json = false;
};
// Takes the common options from args; the caller takes its own, calls args.finish(), then
// setup_attack — so every usage error comes before any loading.
AttackCommonOptions take_attack_options(Args& args);
// Loads the model and the split and embeds the gallery (a line on stderr).
AttackSetup setup_attack(const AttackCommonOptions& options);

// Fills in dataset-dependent defaults a spec left open (SP-QA's zeta).
void complete_spec(attacks::AttackSpec& spec, const std::string& dataset);

}  // namespace dml
