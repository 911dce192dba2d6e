// Running attacks over a whole dataset split for `dml attack` and `dml ers` (docs/attacks.md;
// robrank attacks/advrank.py): the gallery is the clean embedding of every image of the split;
// the split's images are attacked in order, batch by batch (the image's own clean copy stays in
// the gallery, excluded by index where the measure says so); per-image measures are averaged over
// all attacked images (the papers' "averaged over T = |X| trials").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attacks/attack.h"
#include "data/dataset.h"
#include "engine/tensor.h"
#include "models/model.h"

namespace dml {

// The split an attack goes over. Its images are decoded batch by batch as the attack reaches them
// (tools/dml/split_stream.h), never all at once: SOP's test split would be 36 GB of pixels.
struct SplitImages {
  const data::Dataset* dataset = nullptr;  // not owned; outlives the attack runs
  std::vector<int64_t> labels;             // of every image of the split
};
// Checks the split has at least 2 images and reads its labels.
SplitImages split_images(const data::Dataset& dataset);

struct AttackRunSettings {
  int64_t batch_size = 128;  // robrank's validation batch for 28x28 (112 for 224)
  int64_t max_images = 0;    // attack only the first N images (0 = all); the gallery stays whole
  uint64_t seed = 0;         // target/candidate selection
  bool robrank_compat = false;
  std::string dump_dir;          // non-empty: write PNG pairs of the first batch here
  std::string save_adversarial;  // non-empty: write every adversarial image to this .npy
  int64_t dump_count = 16;       // how many pairs
  bool progress = true;          // a progress line on stderr
  // Over several MPI ranks (`mpirun -n N dml attack`, `dml ers`): rank r attacks its share of
  // the batches (engine::dist::share_of) and the per-image values are gathered, so every rank's
  // summary is the single process's (docs/distributed.md). White-box attacks only (not NES, no
  // source_model), no save_adversarial. False: this process attacks every batch.
  bool split_over_ranks = false;
  int64_t restart = 0;  // attacks::AttackOptions::restart (worst-case runs)
  // If set, called with the adversarial per-image values of every measure for images
  // [first_image, first_image + values): in one process after each batch; with split_over_ranks
  // once, after the gather, with every attacked image's values (first_image 0), on every rank.
  std::function<void(int64_t first_image, const attacks::Measures& adversarial)> on_values;
  // Transfer (tools/dml/attack_blackbox.h): the perturbation computed through this model and its
  // gallery, the selection and the measures through the attacked one. Null: a white-box attack.
  models::Model* source_model = nullptr;
  const attacks::Gallery* source_gallery = nullptr;
};

struct AttackSummary {
  std::string spec;   // canonical spec string
  std::string label;  // "CA+", "ES", ...
  std::vector<std::string> names;
  std::vector<double> clean;                 // mean per measure over the attacked images
  std::vector<double> adversarial;           // same
  attacks::PerturbationReport perturbation;  // worst case over all batches
  int64_t images = 0;
  double seconds = 0.0;
  std::vector<double> objective_first_batch;  // the objective before each PGD step, batch 1
  int64_t queries_per_image = 0;              // NES: model queries per image; 0 otherwise
};

AttackSummary run_attack(models::Model& model, const SplitImages& split,
                         const attacks::Gallery& gallery, const attacks::AttackSpec& spec,
                         const AttackRunSettings& settings);

// {"attack", "images", "seconds", "measures": {name: {"clean", "adversarial"}}, "max_delta",
//  "nan_count", "pixel_min", "pixel_max"}; read back by attack_summary_from_json, with the other
// readers of result files in tools/dml/result_json.h.
nlohmann::ordered_json attack_summary_json(const AttackSummary& summary);

// The adversarial value of `measure` in a summary; throws if it has none.
double adversarial_value(const AttackSummary& summary, const std::string& measure);

}  // namespace dml
