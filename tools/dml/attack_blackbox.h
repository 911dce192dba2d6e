// `dml attack` in black-box (an NES spec, nes=N) and transfer (--source-checkpoint) mode
// (docs/attacks.md "Black-box and transfer attacks"): the attack, the white-box attack with the
// same spec on the same model, images and selection beside it, and the gradient-masking flag when
// the first beats the second (attacks/whitebox_comparison.h).
#pragma once

#include <string>

#include "attacks/attack.h"
#include "tools/dml/attack_setup.h"

namespace dml {

// The model a transfer attack perturbs through: loaded from `path`, its gallery = the same split
// embedded through it with the target's metric. UsageError for a missing path; engine::Error when
// its input shape differs from the target's.
struct TransferSource {
  TrainedModel trained;
  attacks::Gallery gallery;
};
TransferSource load_transfer_source(const std::string& path, const AttackSetup& setup);

// Runs the attack (`source` null: black-box NES on the target) and the white-box reference and
// prints them (text or --json). Returns the exit code (0).
int run_blackbox_or_transfer(AttackSetup& setup, const attacks::AttackSpec& spec,
                             const std::string& checkpoint, const TransferSource* source,
                             const std::string& source_checkpoint);

}  // namespace dml
